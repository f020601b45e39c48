//! The run's raw output journal (`<run dir>/output.log`, redacted) and `output_tail`.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Bytes read from the end of the journal to build a tail.
const TAIL_WINDOW_BYTES: u64 = 256 * 1024;

/// Append-only journal of one run's output lines.
pub struct Journal {
    path: PathBuf,
    file: Option<std::fs::File>,
}

impl Journal {
    /// The journal at `<run_dir>/output.log` (opened lazily, created 0600).
    pub fn new(run_dir: &Path) -> Self {
        Self { path: journal_path(run_dir), file: None }
    }

    /// Append one (already redacted) line. Failures are logged, never fatal to the run.
    pub fn append(&mut self, prefix: &str, line: &str) {
        if self.file.is_none() {
            use std::os::unix::fs::OpenOptionsExt;
            self.file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&self.path)
                .map_err(|e| tracing::warn!("journal {}: {e}", self.path.display()))
                .ok();
        }
        if let Some(f) = self.file.as_mut() {
            // One write per line: the journal is on the output hot path.
            let _ = f.write_all(format!("{prefix}{line}\n").as_bytes());
        }
    }
}

/// `<run_dir>/output.log`.
pub fn journal_path(run_dir: &Path) -> PathBuf {
    run_dir.join("output.log")
}

/// The last `lines` lines of the journal of `run_dir` (None when it has no output yet).
pub fn tail(run_dir: &Path, lines: u32) -> Option<String> {
    let mut f = std::fs::File::open(journal_path(run_dir)).ok()?;
    let len = f.metadata().ok()?.len();
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
