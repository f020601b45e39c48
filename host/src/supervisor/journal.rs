//! The run's raw output journal (`<run dir>/output.log`, redacted) and `output_tail`.
//!
//! Retention: the journal is bounded. When a line would take `output.log` past the bound
//! ([`MAX_JOURNAL_BYTES`], 64 MiB, unless the operator set `output_log_max_bytes`, which the
//! launcher passes to [`Journal::new`]), it is renamed `output.log.1` (replacing an older one) and a new
//! `output.log` starts, so a run keeps at most the last one to two bounds of its raw output
//! whatever its agent prints. The event log keeps every event; this file is for tails and
//! inspection.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::config::MAX_JOURNAL_BYTES;

/// Bytes of lines a journal holds before it writes them out (or at [`Journal::flush`]).
const BUFFER_BYTES: usize = 64 * 1024;

/// The buffer's capacity a journal keeps between batches; a larger one is given back at
/// [`Journal::flush`] (issue 30: a 64 KiB buffer per idle run was a fifth of the daemon's
/// memory at a thousand runs).
const IDLE_BUFFER_BYTES: usize = 4 * 1024;

/// Bytes read from the end of the journal to build a tail.
const TAIL_WINDOW_BYTES: u64 = 256 * 1024;

/// Append-only journal of one run's output lines, rotated at a size limit. Lines are buffered
/// until [`Journal::flush`] (the launcher flushes after each batch of records).
pub struct Journal {
    path: PathBuf,
    file: Option<std::fs::File>,
    /// Lines not yet written out.
    pending: Vec<u8>,
    /// Bytes in the current file.
    written: u64,
    max_bytes: u64,
    /// A write found the disk full ([`spaces_os::disk::is_full`]): why, until
    /// [`Journal::take_fault`].
    fault: Option<String>,
}

impl Journal {
    /// The journal at `<run_dir>/output.log` (opened lazily, created 0600), rotated past
    /// `max_bytes` (the daemon's `output_log_max_bytes`; 0: [`MAX_JOURNAL_BYTES`]).
    pub fn new(run_dir: &Path, max_bytes: u64) -> Self {
        Self::with_limit(run_dir, if max_bytes == 0 { MAX_JOURNAL_BYTES } else { max_bytes })
    }

    /// The journal of `run_dir`, rotated past `max_bytes`.
    pub fn with_limit(run_dir: &Path, max_bytes: u64) -> Self {
        Self { path: journal_path(run_dir), file: None, pending: Vec::new(), written: 0, max_bytes, fault: None }
    }

    /// Append one (already redacted) line. Failures are logged, never fatal to the run.
    pub fn append(&mut self, prefix: &str, line: &str) {
        let len = (prefix.len() + line.len() + 1) as u64;
        if self.file.is_some() && self.written > 0 && self.written + len > self.max_bytes {
            self.flush();
            self.file = None;
            let old = self.path.with_extension("log.1");
            if let Err(e) = std::fs::rename(&self.path, &old) {
                tracing::warn!("journal {}: not rotated: {e}", self.path.display());
            }
        }
        if self.file.is_none() {
            use std::os::unix::fs::OpenOptionsExt;
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&self.path)
                .map_err(|e| tracing::warn!("journal {}: {e}", self.path.display()))
                .ok();
            self.written = file.as_ref().and_then(|f| f.metadata().ok()).map_or(0, |m| m.len());
            self.file = file;
        }
        if self.file.is_some() {
            self.pending.extend_from_slice(prefix.as_bytes());
            self.pending.extend_from_slice(line.as_bytes());
            self.pending.push(b'\n');
            self.written += len;
            if self.pending.len() >= BUFFER_BYTES {
                self.write_out();
            }
        }
    }

    /// Write out the buffered lines (one `write(2)` per batch instead of one per line), and
    /// give back a buffer grown past 4 KiB. Failures are logged; a full disk is
    /// also kept for [`Journal::take_fault`].
    pub fn flush(&mut self) {
        self.write_out();
        if self.pending.capacity() > IDLE_BUFFER_BYTES {
            self.pending = Vec::new();
        }
    }

    fn write_out(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let written = match self.file.as_mut() {
            Some(f) => f.write_all(&self.pending),
            None => Ok(()),
        };
        self.pending.clear();
        if let Err(e) = written {
            self.full(&e);
        }
    }

    /// A write failed with `e`: logged (once per fault); a full disk is kept, naming the disk,
    /// for [`Journal::take_fault`].
    fn full(&mut self, e: &std::io::Error) {
        if !spaces_os::disk::is_full(e) {
            tracing::warn!("journal {}: {e}", self.path.display());
            return;
        }
        if self.fault.is_none() {
            tracing::warn!("journal {}: {e}", self.path.display());
        }
        self.fault = Some(format!("no space left on device: the disk of the run's output log {} is full ({e})", self.path.display()));
    }

    /// Why the last write failed when it found the disk full, once (then `None` until another
    /// write finds it full).
    pub fn take_fault(&mut self) -> Option<String> {
        self.fault.take()
    }
}

impl Drop for Journal {
    /// What is still buffered is written out, as a `BufWriter` would.
    fn drop(&mut self) {
        self.write_out();
    }
}

/// `<run_dir>/output.log`.
pub fn journal_path(run_dir: &Path) -> PathBuf {
    run_dir.join("output.log")
}

/// The last `lines` lines of the journal of `run_dir` (None when it has no output yet). With
/// `lines` 0 it is `Some("")` once there is output, and nothing is read: a caller polling a
/// run's status with `tail: 0` (a wait loop, the load bench's keeper) cost a 256 KiB read and
/// UTF-8 check per call.
pub fn tail(run_dir: &Path, lines: u32) -> Option<String> {
    let mut f = std::fs::File::open(journal_path(run_dir)).ok()?;
    let len = f.metadata().ok()?.len();
    if lines == 0 {
        return (len > 0).then(String::new);
    }
    let start = len.saturating_sub(TAIL_WINDOW_BYTES);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    // When we started mid-file, the first line is partial: drop it.
    let all = if start > 0 && all.len() > 1 { &all[1..] } else { &all[..] };
    let from = all.len().saturating_sub(lines as usize);
    if all.is_empty() {
        return None;
    }
    Some(all[from..].join("\n"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// `output.log` on a full disk (a link to `/dev/full`, where every write fails with
    /// `ENOSPC`): the failure is kept once, naming the disk and the file, for the run's actor.
    #[test]
    fn a_full_disk_under_the_output_log_is_a_fault_naming_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/full", journal_path(dir.path())).unwrap();
        let mut j = Journal::new(dir.path(), 0);
        j.append("", "a line");
        j.flush();
        let Some(fault) = j.take_fault() else { panic!("the full disk is not told") };
        assert!(fault.starts_with("no space left on device") && fault.contains("output.log"), "{fault}");
        assert_eq!(j.take_fault(), None, "told once");
    }

    #[test]
    fn the_journal_rotates_at_its_limit_and_keeps_two_files_at_most() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::with_limit(dir.path(), 1000);
        for i in 0..500 {
            j.append("o ", &format!("line {i:04} {}", "x".repeat(40)));
        }
        j.flush();
        let cur = std::fs::metadata(dir.path().join("output.log")).unwrap().len();
        let old = std::fs::metadata(dir.path().join("output.log.1")).unwrap().len();
        assert!(cur <= 1000 && old <= 1000, "{cur} {old}");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(tail(dir.path(), 1).unwrap().contains("line 0499"));
    }

    /// `tail: 0` answers as a read of zero lines would: `Some("")` once there is output, `None`
    /// before (and for a journal that is still empty).
    #[test]
    fn a_tail_of_zero_lines_is_empty_once_there_is_output() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(tail(dir.path(), 0), None);
        std::fs::write(journal_path(dir.path()), "").unwrap();
        assert_eq!(tail(dir.path(), 0), None);
        assert_eq!(tail(dir.path(), 3), None);
        let mut j = Journal::with_limit(dir.path(), 1 << 20);
        for i in 0..3 {
            j.append("", &format!("line {i}"));
        }
        j.flush();
        assert_eq!(tail(dir.path(), 0).as_deref(), Some(""));
        assert_eq!(tail(dir.path(), 2).as_deref(), Some("line 1\nline 2"));
    }
}
