//! Planning a whole patch in memory: current contents in, planned changes (or a refusal) out.
//!
//! Operations run in patch order against an overlay of the [`Source`], so a later operation sees
//! what an earlier one planned (`*** Add File: a` then `*** Update File: a` works, as it does
//! when Codex applies a patch operation by operation). Nothing here touches a filesystem.

use std::collections::BTreeMap;

use super::parse::{FileOp, Patch};
use super::source::Source;
use super::update::update;
use super::version::version_of;
use crate::error::{Error, Result};

/// What a planned change does to its file. Wire spelling: [`ChangeKind::as_str`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeKind {
    /// Create the file (it did not exist).
    Add,
    /// Replace the file's content.
    Update,
    /// Remove the file.
    Delete,
    /// Write `after` to `to` (which did not exist) and remove `path`.
    Move { to: String },
}

impl ChangeKind {
    /// `add | update | delete | move`, as in `apply_patch`'s `changes[].kind`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ChangeKind::Add => "add",
            ChangeKind::Update => "update",
            ChangeKind::Delete => "delete",
            ChangeKind::Move { .. } => "move",
        }
    }
}

/// One planned change. A committer writes them in order: `after` to `path` (or to the move's
/// `to`), removing `path` for a delete or move, and may use `before` to check that nothing
/// changed underneath and to roll back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The file the operation names (the source of a move).
    pub path: String,
    /// What happens to it.
    pub kind: ChangeKind,
    /// Content of `path` before the change; `None` for an add.
    pub before: Option<Vec<u8>>,
    /// Content after the change (at `to` for a move); `None` for a delete.
    pub after: Option<Vec<u8>>,
}

impl Change {
    /// `sha256:<hex>` of `before`, `None` when the file did not exist.
    pub fn before_version(&self) -> Option<String> {
        self.before.as_deref().map(|b| version_of(Some(b)))
    }

    /// `sha256:<hex>` of `after`, `None` when the file no longer exists.
    pub fn after_version(&self) -> Option<String> {
        self.after.as_deref().map(|b| version_of(Some(b)))
    }
}

/// Plans `patch` against `source`.
///
/// Errors (the whole patch is refused, nothing is planned): [`Error::AddFileExists`],
/// [`Error::MoveDestinationExists`], [`Error::FileNotFound`] (update or delete of a
/// missing file), [`Error::ContextNotFound`] / [`Error::AmbiguousContext`] /
/// [`Error::HunkOutOfOrder`] (a hunk that does not match exactly once, in order), each as the
/// source's error type, or the source's own error.
pub fn apply<S: Source + ?Sized>(patch: &Patch, source: &S) -> Result<Vec<Change>, S::Error> {
    let mut tree = Overlay { source, planned: BTreeMap::new() };
    let mut changes = Vec::with_capacity(patch.ops.len());
    for op in &patch.ops {
        let change = match op {
            FileOp::Add { path, lines } => {
                if tree.read(path)?.is_some() {
                    return Err(Error::AddFileExists { path: path.clone() }.into());
                }
                let after = lines.iter().flat_map(|l| l.bytes().chain([b'\n'])).collect();
                Change { path: path.clone(), kind: ChangeKind::Add, before: None, after: Some(after) }
            }
            FileOp::Delete { path } => {
                let before = tree.existing(path)?;
                Change { path: path.clone(), kind: ChangeKind::Delete, before: Some(before), after: None }
            }
            FileOp::Update { path, move_to, hunks } => {
                let before = tree.existing(path)?;
                let after = update(path, &before, hunks).map_err(S::Error::from)?;
                let kind = match move_to {
                    Some(to) if to != path => {
                        if tree.read(to)?.is_some() {
                            return Err(Error::MoveDestinationExists { path: path.clone(), to: to.clone() }.into());
                        }
                        ChangeKind::Move { to: to.clone() }
                    }
                    _ => ChangeKind::Update,
                };
                Change { path: path.clone(), kind, before: Some(before), after: Some(after) }
            }
        };
        tree.plan(&change);
        changes.push(change);
    }
    Ok(changes)
}

/// The source with the changes planned so far laid over it.
struct Overlay<'s, S: ?Sized> {
    source: &'s S,
    planned: BTreeMap<String, Option<Vec<u8>>>,
}

impl<S: Source + ?Sized> Overlay<'_, S> {
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, S::Error> {
        match self.planned.get(path) {
            Some(content) => Ok(content.clone()),
            None => self.source.read(path),
        }
    }

    fn existing(&self, path: &str) -> Result<Vec<u8>, S::Error> {
        self.read(path)?.ok_or_else(|| Error::FileNotFound { path: path.to_owned() }.into())
    }

    fn plan(&mut self, change: &Change) {
        match &change.kind {
            ChangeKind::Move { to } => {
                self.planned.insert(change.path.clone(), None);
                self.planned.insert(to.clone(), change.after.clone());
            }
            _ => {
                self.planned.insert(change.path.clone(), change.after.clone());
            }
        }
    }
}
