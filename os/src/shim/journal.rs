//! The journal of one agent process: `journal` in the shim's directory, one [`Record`] per
//! line (JSON, or an output line in its plain form: [`Record::write_plain`]), append-only,
//! written by the shim alone and read by the daemon by byte offset.
//!
//! **fsync policy.** Every record is written with one `write(2)` as it happens, so a crash or
//! `kill -9` of the daemon loses nothing: the page cache holds it and the shim lives on. The file
//! is `fdatasync`ed at most every [`SYNC_EVERY`] while it grows, on the shim's sync thread
//! ([`super::syncer`]: a slow disk never stops the shim reading its agent), and at once, on the
//! shim's loop, after [`Record::Exit`] and [`Record::Done`]: a power loss or kernel crash can
//! cost at most the output of the last [`SYNC_EVERY`] plus the time the last sync took, and
//! never an exit that was already reported.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::protocol::Record;

/// Longest time journaled output may wait for its `fdatasync`.
pub const SYNC_EVERY: Duration = Duration::from_millis(200);

/// `<dir>/journal`.
pub fn journal_path(dir: &Path) -> PathBuf {
    dir.join("journal")
}

/// Bytes past the journal's end kept allocated ([`crate::disk::allocate`]) for the records
/// that must reach it whatever happens: a [`Record::Fault`], the exit, [`Record::Done`]. An
/// output line is refused ([`crate::disk::is_full`]) rather than eat into it.
pub const TAIL_ROOM: u64 = 64 * 1024;
/// Bytes allocated ahead at a time while the output grows (one `fallocate` per this much).
const ALLOCATE_STEP: u64 = 256 * 1024;
/// A reader's buffer kept between reads once every record in it was taken; a larger one is
/// given back.
const IDLE_PENDING_BYTES: usize = 1024;

/// What a record is to the room kept at the journal's end ([`TAIL_ROOM`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An output line: written only while the room past it can still be allocated.
    Output,
    /// A record of the shim's own (start, turn, EOF, fault, exit, done): written into the
    /// room kept for it.
    Own,
}

/// The shim's side: appends records.
///
/// **A full disk.** Every record is written whole or not at all: a write that fails is cut off
/// again (`ftruncate` to the last whole record, which needs no space), so a reader never sees
/// half a record. On file systems that allocate ahead (ext4, xfs, tmpfs), [`TAIL_ROOM`] past
/// the end stays allocated: an output line that would need more than can be allocated is
/// refused with `ENOSPC` before anything is written, and the shim's own records still fit.
pub struct JournalWriter {
    file: File,
    end: u64,
    /// Bytes in the file: `end` less what is held.
    written: u64,
    /// The file's blocks are allocated up to this offset; `None`: the file system does not
    /// allocate ahead, and writes go without room kept.
    allocated: Option<u64>,
    /// Records appended while held ([`Self::hold`]), not yet written.
    held: Option<Vec<u8>>,
    /// What was written since the last sync, and where the periodic syncs run.
    syncer: super::syncer::Syncer,
}

impl JournalWriter {
    /// Create `<dir>/journal` (0600) with [`TAIL_ROOM`] allocated. Errors if it exists (a
    /// journal is never written twice), or if there is no room for it ([`crate::disk::is_full`]).
    pub fn create(dir: &Path) -> std::io::Result<Self> {
        let path = journal_path(dir);
        let file = OpenOptions::new().create_new(true).append(true).mode(0o600).open(&path)?;
        let allocated = match crate::disk::allocate(&file, 0, TAIL_ROOM + ALLOCATE_STEP) {
            Ok(true) => Some(TAIL_ROOM + ALLOCATE_STEP),
            Ok(false) => None,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        Ok(Self { file, end: 0, written: 0, allocated, held: None, syncer: Default::default() })
    }

    /// Append `record` (a [`Record`], or a [`super::protocol::RawRecord`] in raw mode) of
    /// `kind`; returns the journal's new length.
    /// While held ([`Self::hold`]) the record is kept in memory until [`Self::release`].
    /// Errors: the write failed (nothing of the record is in the file), or an output line found
    /// no room ([`crate::disk::is_full`]).
    pub fn append(&mut self, record: &impl serde::Serialize, kind: Kind) -> std::io::Result<u64> {
        self.push(kind, |buf| serde_json::to_writer(buf, record).map_err(std::io::Error::other))
    }

    /// Append the whole line `text` of stream `s` in its plain form ([`Record::write_plain`]);
    /// as [`Self::append`] of an output line otherwise.
    pub fn append_line(&mut self, s: super::protocol::Stream, text: &str) -> std::io::Result<u64> {
        self.push(Kind::Output, |buf| {
            Record::write_plain(buf, s, text);
            Ok(())
        })
    }

    /// One record, written by `write` (without its `\n`), held or written at once.
    fn push(&mut self, kind: Kind, write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> std::io::Result<u64> {
        if let Some(held) = self.held.as_mut() {
            let before = held.len();
            if let Err(e) = write(held) {
                held.truncate(before);
                return Err(e);
            }
            held.push(b'\n');
            let len = (held.len() - before) as u64;
            if kind == Kind::Output {
                if let Err(e) = self.room_for(len) {
                    if let Some(held) = self.held.as_mut() {
                        held.truncate(before);
                    }
                    return Err(e);
                }
            }
            self.end += len;
            return Ok(self.end);
        }
        let mut line = Vec::new();
        write(&mut line)?;
        line.push(b'\n');
        if kind == Kind::Output {
            self.room_for(line.len() as u64)?;
        }
        self.write_whole(&line)?;
        self.end += line.len() as u64;
        Ok(self.end)
    }

    /// Make sure `len` more bytes past the end still leave [`TAIL_ROOM`] allocated, allocating
    /// the next [`ALLOCATE_STEP`] if not. Errors: no room for it.
    fn room_for(&mut self, len: u64) -> std::io::Result<()> {
        let Some(allocated) = self.allocated else { return Ok(()) };
        let needed = self.end + len + TAIL_ROOM;
        if needed <= allocated {
            return Ok(());
        }
        let upto = needed + ALLOCATE_STEP;
        match crate::disk::allocate(&self.file, allocated, upto - allocated) {
            Ok(true) => self.allocated = Some(upto),
            Ok(false) => self.allocated = None,
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Write `bytes` at the file's end, all of them or none: a failed write is cut off again.
    fn write_whole(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if let Err(e) = self.file.write_all(bytes) {
            // Cutting a file shorter needs no space; should even that fail, a reader takes
            // the torn bytes and the next record as one unreadable record (a notice).
            let _ = self.file.set_len(self.written);
            return Err(e);
        }
        self.written += bytes.len() as u64;
        self.syncer.wrote();
        Ok(())
    }

    /// Keep the records appended from now on in memory until [`Self::release`] writes them
    /// with one `write(2)`: a burst of lines costs one system call and one wake-up of the
    /// daemon, not one per line.
    pub fn hold(&mut self) {
        self.held.get_or_insert_with(Vec::new);
    }

    /// Write what was held since [`Self::hold`] and stop holding; returns the journal's length.
    /// Errors: the write failed; what was held is then lost (the journal ends at its last whole
    /// record, which [`Self::end`] tells).
    pub fn release(&mut self) -> std::io::Result<u64> {
        if let Some(held) = self.held.take() {
            if !held.is_empty() {
                if let Err(e) = self.write_whole(&held) {
                    self.end = self.written;
                    return Err(e);
                }
            }
        }
        Ok(self.end)
    }

    /// Whether appends are held ([`Self::hold`]).
    pub fn holding(&self) -> bool {
        self.held.is_some()
    }

    /// `fdatasync` if anything was written since the last one (held records are written
    /// first). Blocks until the data is on disk: for what must be there before it is reported.
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.write_held()?;
        self.syncer.now(&self.file)
    }

    /// [`Self::sync`] on the shim's sync thread ([`super::syncer`]): returns at once, and the
    /// records written up to now reach the disk when that sync completes.
    pub fn sync_soon(&mut self) -> std::io::Result<()> {
        self.write_held()?;
        self.syncer.soon(&self.file)
    }

    /// Write what is held so far (holding goes on). Errors: as [`Self::release`].
    fn write_held(&mut self) -> std::io::Result<()> {
        let Some(held) = self.held.take() else { return Ok(()) };
        let written = if held.is_empty() { Ok(()) } else { self.write_whole(&held) };
        self.held = Some(Vec::new());
        if written.is_err() {
            self.end = self.written;
        }
        written
    }

    /// The journal's length in bytes.
    pub fn end(&self) -> u64 {
        self.end
    }
}

/// The daemon's side: reads records after an offset as the journal grows.
pub struct JournalReader {
    file: File,
    offset: u64,
    pending: Vec<u8>,
    /// Most bytes one read takes from the file ([`Self::with_read_limit`]); `None`: all.
    limit: Option<u64>,
}

impl JournalReader {
    /// Open `<dir>/journal` to read from byte `offset` (a record boundary: 0 or an offset the
    /// reader reported).
    pub fn open(dir: &Path, offset: u64) -> std::io::Result<Self> {
        let mut file = File::open(journal_path(dir))?;
        file.seek(SeekFrom::Start(offset))?;
        Ok(Self { file, offset, pending: Vec::new(), limit: None })
    }

    /// Each read takes at most about `bytes` from the file (more only to finish a record), so
    /// a reader far behind a fast writer holds a bounded part of the journal in memory at a
    /// time: call again until a read returns nothing to catch up.
    pub fn with_read_limit(mut self, bytes: u64) -> Self {
        self.limit = Some(bytes.max(1));
        self
    }

    /// Every complete record written since the last call, each with the offset just past it. A
    /// line that does not parse (a journal from another release, a damaged file) comes back as a
    /// [`Record::Note`] saying so, never as a silent gap.
    pub fn read_new(&mut self) -> std::io::Result<Vec<(Record, u64)>> {
        self.read_records(Record::parse, |offset, e| {
            Some(Record::Note { text: format!("journal record at offset {offset} unreadable ({e}); skipped") })
        })
    }

    /// As [`Self::read_new`] for a raw-mode journal ([`super::protocol::RawRecord`]s); a line
    /// that does not parse is skipped.
    pub fn read_new_raw(&mut self) -> std::io::Result<Vec<(super::protocol::RawRecord, u64)>> {
        self.read_records(|line| serde_json::from_slice(line), |_, _| None)
    }

    /// The complete lines since the last call parsed as `T` by `parse`; a line that does not
    /// parse becomes `unreadable(its offset, the error)`, or is skipped when that is `None`.
    fn read_records<T>(
        &mut self,
        parse: impl Fn(&[u8]) -> serde_json::Result<T>,
        unreadable: impl Fn(u64, serde_json::Error) -> Option<T>,
    ) -> std::io::Result<Vec<(T, u64)>> {
        let mut out = Vec::new();
        loop {
            let read = match self.limit {
                Some(limit) => (&mut self.file).take(limit).read_to_end(&mut self.pending)?,
                None => self.file.read_to_end(&mut self.pending)?,
            };
            let mut start = 0;
            while let Some(nl) = memchr::memchr(b'\n', &self.pending[start..]) {
                let at = self.offset;
                self.offset += nl as u64 + 1;
                let parsed = parse(&self.pending[start..start + nl]).or_else(|e| unreadable(at, e).ok_or(()));
                if let Ok(record) = parsed {
                    out.push((record, self.offset));
                }
                start += nl + 1;
            }
            self.pending.drain(..start);
            if self.pending.is_empty() && self.pending.capacity() > IDLE_PENDING_BYTES {
                // An idle run's reader keeps no read buffer (issue 30: 8 KiB or more a run).
                self.pending = Vec::new();
            }
            // With a limit, a record longer than it takes several reads: go on until one is
            // complete or the file has nothing more.
            if self.limit.is_none() || read == 0 || !out.is_empty() {
                return Ok(out);
            }
        }
    }

    /// The offset just past the last complete record read.
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::shim::protocol::Stream;

    #[test]
    fn a_reader_resumes_at_the_offset_it_reported_and_never_sees_half_a_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = JournalWriter::create(dir.path()).unwrap();
        assert!(JournalWriter::create(dir.path()).is_err(), "a journal is never written twice");
        let line = |l: &str| Record::Line { s: Stream::Out, l: l.into(), cut: None };
        w.append(&line("one"), Kind::Output).unwrap();
        let mut r = JournalReader::open(dir.path(), 0).unwrap();
        let first = r.read_new().unwrap();
        assert_eq!(first, vec![(line("one"), w.end())]);
        // Half a record on disk is not a record yet.
        let mut raw = OpenOptions::new().append(true).open(journal_path(dir.path())).unwrap();
        raw.write_all(br#"{"k":"line","s":"out","#).unwrap();
        assert!(r.read_new().unwrap().is_empty());
        raw.write_all(b"\"l\":\"two\"}\n").unwrap();
        let second = r.read_new().unwrap();
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].0, line("two"));
        // A new reader from the first record's end sees only the second.
        let mut again = JournalReader::open(dir.path(), first[0].1).unwrap();
        assert_eq!(again.read_new().unwrap(), second);
    }

    #[test]
    fn a_read_limit_takes_the_journal_in_parts_and_every_record_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = JournalWriter::create(dir.path()).unwrap();
        let line = |l: String| Record::Line { s: Stream::Out, l, cut: None };
        let written: Vec<Record> = (0..50).map(|i| line(format!("line {i} {}", "y".repeat(if i == 7 { 500 } else { 20 })))).collect();
        for r in &written {
            w.append(r, Kind::Own).unwrap();
        }
        let mut r = JournalReader::open(dir.path(), 0).unwrap().with_read_limit(100);
        let mut got = Vec::new();
        let mut reads = 0;
        loop {
            let part = r.read_new().unwrap();
            if part.is_empty() {
                break;
            }
            reads += 1;
            assert!(part.len() < written.len(), "a limited read takes part of the journal");
            got.extend(part);
        }
        assert!(reads > 5);
        assert_eq!(
            got.iter().map(|(rec, _)| rec.clone()).collect::<Vec<_>>(),
            written,
            "every record once, whole, in order (one longer than the limit too)"
        );
        assert_eq!(got.last().map(|(_, end)| *end), Some(w.end()));
    }

    #[test]
    fn held_records_reach_the_file_in_one_write_at_release_or_at_a_sync() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = JournalWriter::create(dir.path()).unwrap();
        let line = |l: &str| Record::Line { s: Stream::Out, l: l.into(), cut: None };
        let mut r = JournalReader::open(dir.path(), 0).unwrap();
        w.hold();
        assert!(w.holding());
        w.append(&line("a"), Kind::Output).unwrap();
        let end = w.append(&line("b"), Kind::Output).unwrap();
        assert_eq!(end, w.end(), "the length counts held records");
        assert!(r.read_new().unwrap().is_empty(), "nothing is on disk while held");
        assert_eq!(w.release().unwrap(), end);
        assert!(!w.holding());
        let got = r.read_new().unwrap();
        assert_eq!(got.iter().map(|(rec, _)| rec.clone()).collect::<Vec<_>>(), vec![line("a"), line("b")]);
        assert_eq!(got[1].1, end);
        // A sync while held (an exit is synced at once) writes what is held first.
        w.hold();
        w.append(&line("c"), Kind::Output).unwrap();
        w.sync().unwrap();
        assert_eq!(r.read_new().unwrap().len(), 1);
        assert_eq!(w.release().unwrap(), w.end());
        assert_eq!(std::fs::metadata(journal_path(dir.path())).unwrap().len(), w.end(), "nothing written twice");
    }

    /// A writer whose file is `/dev/full` (every write fails with `ENOSPC`), as a full disk.
    fn on_a_full_disk() -> JournalWriter {
        let file = OpenOptions::new().append(true).open("/dev/full").unwrap();
        JournalWriter { file, end: 0, written: 0, allocated: None, held: None, syncer: Default::default() }
    }

    /// On a full disk a record is refused whole with an error that names the disk
    /// (`crate::disk::is_full`), and the journal's length stays that of its last whole record:
    /// nothing is counted that is not in the file, held or written at once.
    #[test]
    fn a_write_to_a_full_disk_is_a_typed_error_and_counts_nothing() {
        let mut w = on_a_full_disk();
        let e = w.append_line(Stream::Out, "one").unwrap_err();
        assert!(crate::disk::is_full(&e), "{e}");
        assert_eq!(w.end(), 0);
        w.hold();
        assert_eq!(w.append_line(Stream::Out, "two").unwrap(), 6, "held: counted until written");
        let e = w.release().unwrap_err();
        assert!(crate::disk::is_full(&e), "{e}");
        assert_eq!(w.end(), 0, "what could not be written is not counted");
        let e = w.append(&Record::Exit { code: Some(0), signal: None }, Kind::Own).unwrap_err();
        assert!(crate::disk::is_full(&e), "{e}");
        assert_eq!(w.end(), 0);
    }
}
