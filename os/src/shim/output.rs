//! Raw output files of a shim in [`OutputMode::Raw`](super::protocol::OutputMode::Raw): the
//! process's output bytes, addressed by absolute byte offsets from its first byte (the
//! `exec_command` cursor).
//!
//! **Layout and retention.** The bytes go to segments `output.<k>` (0600) in the shim's
//! directory; segment `k` holds offsets `[k * segment, (k + 1) * segment)`. When segment `k`
//! is created, segment `k - KEEP_SEGMENTS` is removed, so the files of one process never hold
//! more than [`KEEP_SEGMENTS`] × `segment` bytes, however much it prints; at least
//! `(KEEP_SEGMENTS - 1) × segment` bytes before the end stay readable. The total is on disk too:
//! `k_max * segment + len(output.<k_max>)` ([`extent`]), so a reader needs no shim.
//!
//! **fsync policy.** As the journal's ([`super::journal`]): every chunk is written with one
//! `write(2)` as it is read, so a daemon crash loses nothing; the shim `fdatasync`s the newest
//! segment at most every [`super::journal::SYNC_EVERY`] (on its sync thread: [`super::syncer`])
//! and at the end of the output.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Segments kept on disk (the newest one and the ones before it).
pub const KEEP_SEGMENTS: u64 = 3;

/// `<dir>/output.<k>`.
pub fn segment_path(dir: &Path, k: u64) -> PathBuf {
    dir.join(format!("output.{k}"))
}

/// The shim's side: appends output bytes.
pub struct OutputWriter {
    dir: PathBuf,
    segment: u64,
    total: u64,
    file: File,
    /// What was written since the last sync, and where the periodic syncs run.
    syncer: super::syncer::Syncer,
}

impl OutputWriter {
    /// Create `<dir>/output.0` for segments of `segment` bytes (at least 1). Errors: it exists
    /// (output is never written twice), or cannot be created.
    pub fn create(dir: &Path, segment: u64) -> std::io::Result<Self> {
        let file = open_new(&segment_path(dir, 0))?;
        Ok(Self { dir: dir.to_owned(), segment: segment.max(1), total: 0, file, syncer: Default::default() })
    }

    /// Append `bytes`; returns the new total.
    pub fn append(&mut self, mut bytes: &[u8]) -> std::io::Result<u64> {
        while !bytes.is_empty() {
            let room = self.segment - self.total % self.segment;
            if room == self.segment && self.total > 0 {
                let k = self.total / self.segment;
                self.file = open_new(&segment_path(&self.dir, k))?;
                if k >= KEEP_SEGMENTS {
                    let _ = std::fs::remove_file(segment_path(&self.dir, k - KEEP_SEGMENTS));
                }
            }
            let n = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
            self.file.write_all(&bytes[..n])?;
            self.total += n as u64;
            self.syncer.wrote();
            bytes = &bytes[n..];
        }
        Ok(self.total)
    }

    /// [`Self::sync`] on the shim's sync thread ([`super::syncer`]): returns at once.
    pub fn sync_soon(&mut self) -> std::io::Result<()> {
        self.syncer.soon(&self.file)
    }

    /// `fdatasync` the newest segment if anything was written since the last one (or a sync
    /// asked of the syncer may not have finished). Blocks until it is on disk.
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.syncer.now(&self.file)
    }

    /// Bytes written so far.
    pub fn total(&self) -> u64 {
        self.total
    }
}

fn open_new(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create_new(true).append(true).mode(0o600).open(path)
}

/// The segments present in `dir`, oldest first.
fn segments(dir: &Path) -> std::io::Result<Vec<u64>> {
    let mut ks: Vec<u64> =
        std::fs::read_dir(dir)?.flatten().filter_map(|e| e.file_name().to_str()?.strip_prefix("output.")?.parse().ok()).collect();
    ks.sort_unstable();
    Ok(ks)
}

/// What is on disk: `(first, total)`, the offset of the first byte still kept and the number
/// of bytes written so far. `(0, 0)` when no output file exists yet.
pub fn extent(dir: &Path, segment: u64) -> std::io::Result<(u64, u64)> {
    let segment = segment.max(1);
    let ks = segments(dir)?;
    let (Some(first), Some(last)) = (ks.first(), ks.last()) else { return Ok((0, 0)) };
    let len = match std::fs::metadata(segment_path(dir, *last)) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e),
    };
    Ok((first * segment, last * segment + len))
}

/// Read the bytes `[from, to)` into `out`. Errors: `NotFound` when a segment they lie in was
/// removed (the caller looks at [`extent`] again), or another read error.
pub fn read_range(dir: &Path, segment: u64, from: u64, to: u64, out: &mut Vec<u8>) -> std::io::Result<()> {
    let segment = segment.max(1);
    let mut at = from;
    while at < to {
        let k = at / segment;
        let mut file = File::open(segment_path(dir, k))?;
        file.seek(SeekFrom::Start(at % segment))?;
        let want = (to - at).min(segment - at % segment);
        let before = out.len();
        file.take(want).read_to_end(out)?;
        let got = (out.len() - before) as u64;
        if got == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "output segment shorter than its total"));
        }
        at += got;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_absolute_and_the_files_stay_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = OutputWriter::create(dir.path(), 10).unwrap();
        assert!(OutputWriter::create(dir.path(), 10).is_err(), "output is never written twice");
        assert_eq!(extent(dir.path(), 10).unwrap(), (0, 0));
        let all: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for chunk in all.chunks(7) {
            w.append(chunk).unwrap();
            let (first, end) = extent(dir.path(), 10).unwrap();
            assert_eq!(end, w.total());
            assert!(end - first <= KEEP_SEGMENTS * 10, "{first}..{end}");
            assert!(end - first > (KEEP_SEGMENTS - 1) * 10 || first == 0, "{first}..{end}");
            let mut got = Vec::new();
            read_range(dir.path(), 10, first, end, &mut got).unwrap();
            assert_eq!(got, &all[first as usize..end as usize]);
        }
        let on_disk: u64 = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
        assert!(on_disk <= KEEP_SEGMENTS * 10, "{on_disk} bytes on disk");
        let mut gone = Vec::new();
        let err = read_range(dir.path(), 10, 0, 5, &mut gone).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }
}
