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

/// The shim's side: appends records.
pub struct JournalWriter {
    file: File,
    end: u64,
    /// Records appended while held ([`Self::hold`]), not yet written.
    held: Option<Vec<u8>>,
    /// What was written since the last sync, and where the periodic syncs run.
    syncer: super::syncer::Syncer,
}

impl JournalWriter {
    /// Create `<dir>/journal` (0600). Errors if it exists: a journal is never written twice.
    pub fn create(dir: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().create_new(true).append(true).mode(0o600).open(journal_path(dir))?;
        Ok(Self { file, end: 0, held: None, syncer: Default::default() })
    }

    /// Append `record` (a [`Record`], or a [`super::protocol::RawRecord`] in raw mode);
    /// returns the journal's new length.
    /// While held ([`Self::hold`]) the record is kept in memory until [`Self::release`].
    pub fn append(&mut self, record: &impl serde::Serialize) -> std::io::Result<u64> {
        self.push(|buf| serde_json::to_writer(buf, record).map_err(std::io::Error::other))
    }

    /// Append the whole line `text` of stream `s` in its plain form ([`Record::write_plain`]);
    /// as [`Self::append`] otherwise.
    pub fn append_line(&mut self, s: super::protocol::Stream, text: &str) -> std::io::Result<u64> {
        self.push(|buf| {
            Record::write_plain(buf, s, text);
            Ok(())
        })
    }

    /// One record, written by `write` (without its `\n`), held or written at once.
    fn push(&mut self, write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> std::io::Result<u64> {
        if let Some(held) = self.held.as_mut() {
            let before = held.len();
            if let Err(e) = write(held) {
                held.truncate(before);
                return Err(e);
            }
            held.push(b'\n');
            self.end += (held.len() - before) as u64;
            return Ok(self.end);
        }
        let mut line = Vec::new();
        write(&mut line)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.end += line.len() as u64;
        self.syncer.wrote();
        Ok(self.end)
    }

    /// Keep the records appended from now on in memory until [`Self::release`] writes them
    /// with one `write(2)`: a burst of lines costs one system call and one wake-up of the
    /// daemon, not one per line.
    pub fn hold(&mut self) {
        self.held.get_or_insert_with(Vec::new);
    }

    /// Write what was held since [`Self::hold`] and stop holding; returns the journal's length.
    pub fn release(&mut self) -> std::io::Result<u64> {
        if let Some(held) = self.held.take() {
            if !held.is_empty() {
                self.file.write_all(&held)?;
                self.syncer.wrote();
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

    /// Write what is held so far (holding goes on).
    fn write_held(&mut self) -> std::io::Result<()> {
        if let Some(held) = self.held.as_mut().filter(|h| !h.is_empty()) {
            self.file.write_all(held)?;
            held.clear();
            self.syncer.wrote();
        }
        Ok(())
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
        w.append(&line("one")).unwrap();
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
            w.append(r).unwrap();
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
        w.append(&line("a")).unwrap();
        let end = w.append(&line("b")).unwrap();
        assert_eq!(end, w.end(), "the length counts held records");
        assert!(r.read_new().unwrap().is_empty(), "nothing is on disk while held");
        assert_eq!(w.release().unwrap(), end);
        assert!(!w.holding());
        let got = r.read_new().unwrap();
        assert_eq!(got.iter().map(|(rec, _)| rec.clone()).collect::<Vec<_>>(), vec![line("a"), line("b")]);
        assert_eq!(got[1].1, end);
        // A sync while held (an exit is synced at once) writes what is held first.
        w.hold();
        w.append(&line("c")).unwrap();
        w.sync().unwrap();
        assert_eq!(r.read_new().unwrap().len(), 1);
        assert_eq!(w.release().unwrap(), w.end());
        assert_eq!(std::fs::metadata(journal_path(dir.path())).unwrap().len(), w.end(), "nothing written twice");
    }
}
