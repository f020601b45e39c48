//! [`Source`]: where the engine reads the current contents of files (read by version checks
//! and by planning alike).

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// Where the current contents of files come from.
///
/// `read` returns `Ok(None)` for a missing file. A real source (the workspace's confined root in
/// `spaces-codespace`) opens files confined to the workspace root and reports what it refuses
/// (`PATH_ESCAPE`, `SYMLINK_REJECTED`, ...) as its own [`Source::Error`], which refuses the
/// whole patch; the engine's refusals ([`Error`]) convert into that type, so every function
/// that reads a source returns `Result<_, S::Error>`.
pub trait Source {
    /// The source's error; the engine's own refusals become one through `From`.
    type Error: From<Error>;

    /// The whole current content of `path` (relative to the root, as written in the patch).
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, Self::Error>;
}

/// An in-memory tree: path -> content. Handy for previews and tests; never fails.
impl Source for BTreeMap<String, Vec<u8>> {
    type Error = Error;

    fn read(&self, path: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.get(path).cloned())
    }
}
