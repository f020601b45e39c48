//! File versions: `sha256:<hex>` of a whole file, `absent` for a missing one.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use super::source::Source;
use crate::error::{Error, Result};

/// The version of a missing file. In `expected_versions` it means "must not exist".
pub const ABSENT: &str = "absent";

/// `sha256:<64 lowercase hex digits>` of `bytes` (the whole file), as `read` reports it.
pub fn version(bytes: &[u8]) -> String {
    version_of_digest(&Sha256::digest(bytes))
}

/// The version spelling of a finished SHA-256 `digest` (for callers that hash while streaming).
pub fn version_of_digest(digest: &[u8]) -> String {
    format!("sha256:{}", hex(digest))
}

/// Lowercase hex of `bytes` (64 chars for a SHA-256 digest).
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// [`version`] of `content`, or [`ABSENT`] for `None`.
pub fn version_of(content: Option<&[u8]>) -> String {
    content.map_or_else(|| ABSENT.to_owned(), version)
}

/// Checks every `path -> version` in `expected` against `source`, in path order.
///
/// Errors: [`Error::VersionConflict`] for the first path whose current version differs
/// (carrying the current one: read the file again and rebuild the patch), as the source's
/// error type, or the error the source gave when reading.
pub fn check_expected_versions<S: Source + ?Sized>(expected: &BTreeMap<String, String>, source: &S) -> Result<(), S::Error> {
    for (path, want) in expected {
        let current = version_of(source.read(path)?.as_deref());
        if &current != want {
            return Err(Error::VersionConflict { path: path.clone(), expected: want.clone(), current }.into());
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn version_is_sha256_of_the_whole_file() {
        assert_eq!(version(b""), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(version(b"abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(version_of(None), "absent");
    }

    #[test]
    fn case_x19_changed_file_is_a_version_conflict_with_the_current_version() {
        let mut files = BTreeMap::from([("n.md".to_owned(), b"v1\n".to_vec())]);
        let v1 = version(b"v1\n");
        let expected = BTreeMap::from([("n.md".to_owned(), v1.clone()), ("new.md".to_owned(), ABSENT.to_owned())]);
        check_expected_versions(&expected, &files).unwrap();

        files.insert("n.md".to_owned(), b"v1\nappended\n".to_vec());
        let err = check_expected_versions(&expected, &files).unwrap_err();
        assert_eq!(err.code(), spaces_sdk::ErrorCode::VersionConflict);
        match err {
            Error::VersionConflict { path, expected, current } => {
                assert_eq!((path.as_str(), expected), ("n.md", v1));
                assert_eq!(current, version(b"v1\nappended\n"));
            }
            other => panic!("unexpected {other:?}"),
        }

        files.insert("new.md".to_owned(), Vec::new());
        files.insert("n.md".to_owned(), b"v1\n".to_vec());
        let err = check_expected_versions(&expected, &files).unwrap_err();
        assert!(matches!(err, Error::VersionConflict { ref path, .. } if path == "new.md"), "{err:?}");
    }
}
