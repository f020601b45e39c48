//! The retained output window: the last N bytes of a process's combined output, addressed by
//! absolute byte offsets (cursors) from the first byte the process ever wrote.
//!
//! `total` counts every byte seen; `retained_from` = `total - retained.len()` = bytes dropped so
//! far. A read from a cursor below `retained_from` starts at `retained_from` and reports the loss.

use std::collections::VecDeque;

/// One read from the ring (before the wire shape is built).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RingRead {
    /// The bytes from `start` (may end before `next` is the total if a UTF-8 char was held back).
    pub bytes: Vec<u8>,
    /// The absolute offset after `bytes`: the caller's next cursor.
    pub next: u64,
    /// True when `start` is later than the requested cursor (bytes were dropped before it).
    pub skipped: bool,
}

/// The retained window of output bytes.
#[derive(Debug)]
pub(crate) struct OutputRing {
    capacity: usize,
    retained: VecDeque<u8>,
    total: u64,
}

impl OutputRing {
    /// An empty ring keeping at most `capacity` bytes (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self { capacity, retained: VecDeque::with_capacity(capacity.min(64 * 1024)), total: 0 }
    }

    /// Every byte ever appended.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes dropped so far: the absolute offset of the first retained byte.
    pub fn retained_from(&self) -> u64 {
        self.total - self.retained.len() as u64
    }

    /// Append output, dropping the oldest bytes beyond capacity.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let keep =
            if bytes.len() > self.capacity { &bytes[bytes.len() - self.capacity..] } else { bytes };
        let overflow = (self.retained.len() + keep.len()).saturating_sub(self.capacity);
        self.retained.drain(..overflow);
        self.retained.extend(keep);
    }

    /// Bytes from `cursor` to the end. `cursor` must be `<= total` (the caller checks). Unless
    /// `finished`, an incomplete UTF-8 character at the end is held back for the next read so a
    /// chunk never splits a character that is still arriving.
    pub fn read_from(&self, cursor: u64, finished: bool) -> RingRead {
        let from = self.retained_from();
        let start = cursor.max(from);
        let offset = usize::try_from(start - from).unwrap_or(usize::MAX).min(self.retained.len());
        let mut bytes: Vec<u8> = self.retained.range(offset..).copied().collect();
        if !finished {
            let cut = incomplete_utf8_tail(&bytes);
            bytes.truncate(bytes.len() - cut);
        }
        RingRead { next: start + bytes.len() as u64, bytes, skipped: start > cursor }
    }
}

/// Length of a trailing UTF-8 sequence that has begun but is not complete yet (0 if none).
pub(crate) fn incomplete_utf8_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let b = bytes[bytes.len() - back];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: look further back for its lead
        }
        let needed = match b {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return 0, // ASCII or an invalid lead: nothing to wait for
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_tail_and_counts_dropped_bytes() {
        let mut ring = OutputRing::new(4);
        ring.push(b"abc");
        ring.push(b"def");
        assert_eq!((ring.total(), ring.retained_from()), (6, 2));
        assert_eq!(
            ring.read_from(0, true),
            RingRead { bytes: b"cdef".to_vec(), next: 6, skipped: true }
        );
        assert_eq!(
            ring.read_from(4, true),
            RingRead { bytes: b"ef".to_vec(), next: 6, skipped: false }
        );
        ring.push(b"0123456789");
        assert_eq!((ring.total(), ring.retained_from()), (16, 12));
        assert_eq!(ring.read_from(16, true).bytes, b"");
    }

    #[test]
    fn holds_back_a_character_still_arriving() {
        let mut ring = OutputRing::new(64);
        let euro = "€".as_bytes(); // 3 bytes
        ring.push(b"a");
        ring.push(&euro[..2]);
        assert_eq!(
            ring.read_from(0, false),
            RingRead { bytes: b"a".to_vec(), next: 1, skipped: false }
        );
        assert_eq!(ring.read_from(0, true).next, 3, "finished: nothing is held back");
        ring.push(&euro[2..]);
        assert_eq!(ring.read_from(1, false).bytes, euro);
    }

    #[test]
    fn invalid_bytes_are_not_held_back() {
        assert_eq!(incomplete_utf8_tail(b"ab\xff"), 0);
        assert_eq!(incomplete_utf8_tail(b"ab\x80\x80\x80"), 0);
        assert_eq!(incomplete_utf8_tail("é".as_bytes()), 0);
        assert_eq!(incomplete_utf8_tail(&"😀".as_bytes()[..3]), 3);
    }
}
