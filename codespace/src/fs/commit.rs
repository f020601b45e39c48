//! The atomic writer of a planned patch (`apply_patch` after planning).
//!
//! Theory of operation, for a [`Plan`] whose changes the engine planned in patch order:
//! 1. **Re-check.** Every path the plan touches must still hold what the plan started from
//!    (`before` for a source, absent for an add or a move destination), read at open time
//!    through the confined root. Otherwise: `rejected` with `VERSION_CONFLICT` (carrying the
//!    current version) or the confinement refusal; nothing is written.
//! 2. **Stage.** Every file that ends with content gets a temp file in its directory (missing
//!    parents created confined and remembered), with the existing file's permission bits (a
//!    move keeps the source's), `fsync`ed.
//! 3. **Swap.** Temps are renamed over their targets, then removed files (deletes, move
//!    sources) are unlinked: writes before removals, so an interruption never loses content. The
//!    directories are `fsync`ed.
//! 4. **Roll back** on any failure in 2 or 3: every swapped path is restored in reverse order
//!    from the in-memory `before` bytes (atomically again, same permission bits), temps and
//!    created directories are removed -> `failed_rolled_back`; if that fails -> `failed_partial`.
//! 5. **Verify.** Every touched path is read back: its version must be the planned after-version
//!    (absent for a removed file) -> `applied`, else `failed_partial`.
//!
//! Bytes are written as planned: line endings and a missing final newline are the engine's.

use std::collections::BTreeMap;

use super::report::{CommitReport, CommitStatus};
use super::swap::{self, Dirs};
use super::Root;
use crate::error::{Error, Result};
use spaces_v4a::{version_of, ChangeKind, Plan};

/// A point of a commit where a test can inject a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step<'a> {
    /// Before staging the new content of a path.
    Stage(&'a str),
    /// Before swapping a path (rename in or unlink).
    Swap(&'a str),
    /// Before restoring a path during rollback.
    Restore(&'a str),
}

/// A hook called before each [`Step`]; an `Err` there fails the step.
pub(crate) type Fault<'f> = &'f mut dyn FnMut(Step<'_>) -> Result<()>;

/// What the plan starts from and ends with, per touched path, in first-touch order.
struct Ends {
    order: Vec<String>,
    initial: BTreeMap<String, Option<Vec<u8>>>,
    last: BTreeMap<String, Option<Vec<u8>>>,
    /// A move destination -> its source (whose permission bits it takes).
    moved_from: BTreeMap<String, String>,
}

impl Ends {
    fn of(plan: &Plan) -> Ends {
        let mut ends = Ends { order: Vec::new(), initial: BTreeMap::new(), last: BTreeMap::new(), moved_from: BTreeMap::new() };
        for c in &plan.changes {
            match &c.kind {
                ChangeKind::Move { to } => {
                    ends.touch(&c.path, c.before.clone(), None);
                    ends.touch(to, None, c.after.clone());
                    ends.moved_from.insert(to.clone(), c.path.clone());
                }
                _ => ends.touch(&c.path, c.before.clone(), c.after.clone()),
            }
        }
        ends
    }

    fn touch(&mut self, path: &str, before: Option<Vec<u8>>, after: Option<Vec<u8>>) {
        if !self.initial.contains_key(path) {
            self.initial.insert(path.to_owned(), before);
            self.order.push(path.to_owned());
        }
        self.last.insert(path.to_owned(), after);
    }
}

impl Root {
    /// Writes `plan` atomically (see the module docs). Never panics; every outcome is a
    /// [`CommitReport`].
    pub fn commit(&self, plan: &Plan) -> CommitReport {
        self.commit_with(plan, &mut |_| Ok(()))
    }

    /// [`Root::commit`] with a `fault` hook called before every step (tests inject failures).
    pub(crate) fn commit_with(&self, plan: &Plan, fault: Fault<'_>) -> CommitReport {
        let changes = plan.changes.iter().map(crate::fs::change_record).collect();
        let (status, error) = match self.run(&Ends::of(plan), fault) {
            Ok(()) => (CommitStatus::Applied, None),
            Err((status, e)) => (status, Some(e)),
        };
        CommitReport { status, changes, error }
    }

    fn run(&self, ends: &Ends, fault: Fault<'_>) -> std::result::Result<(), (CommitStatus, Error)> {
        let modes = self.recheck(ends).map_err(|e| (CommitStatus::Rejected, e))?;
        let mut dirs = Dirs::new(self);
        let mut job = Job { root: self, ends, modes: &modes, dirs: &mut dirs, temps: BTreeMap::new(), done: Vec::new() };
        if let Err(e) = job.stage_and_swap(fault) {
            return Err(match job.roll_back(fault) {
                Ok(()) => (CommitStatus::FailedRolledBack, e),
                Err(r) => (CommitStatus::FailedPartial, Error::RollbackFailed { cause: Box::new(e), rollback: Box::new(r) }),
            });
        }
        self.verify(ends, &ends.last).map_err(|e| (CommitStatus::FailedPartial, e))
    }

    /// Step 1: every path holds its initial content; returns the permission bits of those that
    /// exist.
    fn recheck(&self, ends: &Ends) -> Result<BTreeMap<String, u32>> {
        let mut modes = BTreeMap::new();
        for path in &ends.order {
            let current = self.load(path)?;
            let initial = ends.initial.get(path).and_then(|c| c.as_deref());
            if initial != current.as_ref().map(|(b, _)| b.as_slice()) {
                return Err(Error::Patch(spaces_v4a::Error::VersionConflict {
                    path: path.clone(),
                    expected: version_of(initial),
                    current: version_of(current.as_ref().map(|(b, _)| b.as_slice())),
                }));
            }
            if let Some((_, mode)) = current {
                modes.insert(path.clone(), mode);
            }
        }
        Ok(modes)
    }

    /// Every path in `ends.order` has the version of `want` on disk.
    fn verify(&self, ends: &Ends, want: &BTreeMap<String, Option<Vec<u8>>>) -> Result<()> {
        for path in &ends.order {
            let wanted = want.get(path).and_then(|c| c.as_deref());
            let found = self.load(path)?.map(|(bytes, _)| bytes);
            if wanted != found.as_deref() {
                return Err(Error::VerifyMismatch {
                    path: path.clone(),
                    expected: version_of(wanted),
                    actual: version_of(found.as_deref()),
                });
            }
        }
        Ok(())
    }
}

/// The state of one commit between staging and the end.
struct Job<'a, 'r> {
    root: &'a Root,
    ends: &'a Ends,
    modes: &'a BTreeMap<String, u32>,
    dirs: &'a mut Dirs<'r>,
    /// Path -> its staged temp file not yet swapped in.
    temps: BTreeMap<String, String>,
    /// Paths swapped so far, in order.
    done: Vec<String>,
}

impl Job<'_, '_> {
    fn mode(&self, path: &str) -> Option<u32> {
        self.modes.get(path).or_else(|| self.ends.moved_from.get(path).and_then(|src| self.modes.get(src))).copied()
    }

    /// Steps 2 and 3.
    fn stage_and_swap(&mut self, fault: Fault<'_>) -> Result<()> {
        let ends = self.ends;
        let writes: Vec<(&String, &Vec<u8>)> =
            ends.order.iter().filter_map(|p| ends.last.get(p).and_then(|c| c.as_ref()).map(|c| (p, c))).collect();
        let removals: Vec<&String> = ends
            .order
            .iter()
            .filter(|p| matches!(ends.last.get(*p), Some(None)))
            .filter(|p| matches!(ends.initial.get(*p), Some(Some(_))))
            .collect();
        for (path, bytes) in &writes {
            fault(Step::Stage(path))?;
            let temp = self.dirs.write_temp(path, bytes, self.mode(path))?;
            self.temps.insert((*path).clone(), temp);
        }
        for path in &removals {
            self.dirs.get(&swap::split(path)?.0)?;
        }
        for (path, _) in &writes {
            fault(Step::Swap(path))?;
            let temp = self.temps.get(*path).cloned().unwrap_or_default();
            self.dirs.rename_in(path, &temp)?;
            self.temps.remove(*path);
            self.done.push((*path).clone());
        }
        for path in &removals {
            fault(Step::Swap(path))?;
            self.dirs.unlink(path)?;
            self.done.push((*path).clone());
        }
        self.dirs.sync_all()
    }

    /// Step 4: undo every swapped path, remove temps and created directories, and check that
    /// every touched path is back to its initial content.
    fn roll_back(&mut self, fault: Fault<'_>) -> Result<()> {
        let mut first_error: Option<Error> = None;
        let mut note = |r: Result<()>| {
            if let Err(e) = r {
                first_error.get_or_insert(e);
            }
        };
        while let Some(path) = self.done.pop() {
            note(self.restore(&path, fault));
        }
        for (path, temp) in std::mem::take(&mut self.temps) {
            note(self.dirs.remove_temp(&path, &temp));
        }
        note(self.dirs.remove_created());
        note(self.dirs.sync_all());
        note(self.root.verify(self.ends, &self.ends.initial));
        first_error.map_or(Ok(()), Err)
    }

    fn restore(&mut self, path: &str, fault: Fault<'_>) -> Result<()> {
        fault(Step::Restore(path))?;
        match self.ends.initial.get(path).and_then(|c| c.as_ref()) {
            Some(bytes) => {
                let temp = self.dirs.write_temp(path, bytes, self.modes.get(path).copied())?;
                self.dirs.rename_in(path, &temp).inspect_err(|_| {
                    let _ = self.dirs.remove_temp(path, &temp);
                })
            }
            None => self.dirs.unlink(path),
        }
    }
}
