//! The retained output window: the last N bytes of a process's combined output, addressed by
//! absolute byte offsets (cursors) from the first byte the process ever wrote.
//!
//! `total` counts every byte seen; `retained_from` = `total - retained.len()` = bytes dropped so
//! far. A read from a cursor below `retained_from` starts at `retained_from` and reports the loss.
//!
//! UTF-8 (case R36): the window never starts inside a character. When dropping the oldest bytes
//! would leave the continuation bytes of a well-formed character at the front, those go too (at
//! most 3 more bytes), so `retained_from` is always a character boundary of valid output and a
//! reader never sees a U+FFFD the program did not print. Bytes that were never valid UTF-8 are
//! kept as they are (their U+FFFD is what the program printed). A read's end is a character
//! boundary too: an incomplete character at the end is held back while it may still arrive
//! ([`OutputRing::read_from`] with `hold_back`).

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
    /// An empty ring keeping at most `capacity` bytes (at least 4: one whole character).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(4);
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

    /// Append output, dropping the oldest bytes beyond capacity, and with them the rest of a
    /// character whose first bytes were dropped (the window starts on a character boundary).
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        // Only the last `capacity` bytes can stay, plus up to 3 before them to find the lead
        // byte of a character the cut splits.
        let keep_from = bytes.len().saturating_sub(self.capacity + 3);
        if keep_from > 0 {
            self.retained.clear();
        }
        self.retained.extend(&bytes[keep_from..]);
        let over = self.retained.len().saturating_sub(self.capacity);
        if over > 0 {
            let cut = over + split_character_rest(&self.retained, over);
            self.retained.drain(..cut);
        }
    }

    /// Forget the window: the output up to `offset` (at least the total) is lost, the next
    /// byte pushed is the byte at `offset`. The caller pushes the window plus 3 bytes after
    /// this, so that the cut of [`Self::push`] puts the window's start on a character boundary.
    pub fn skip_to(&mut self, offset: u64) {
        self.retained.clear();
        self.total = self.total.max(offset);
    }

    /// Bytes from `cursor` (or from the window's start if that is later) to the end. `cursor`
    /// must be `<= total` (the caller checks). With `hold_back`, an incomplete UTF-8 character
    /// at the end is left for a later read, so a chunk never splits a character that is still
    /// arriving (or that collection cut short).
    pub fn read_from(&self, cursor: u64, hold_back: bool) -> RingRead {
        let from = self.retained_from();
        let start = cursor.max(from);
        let offset = usize::try_from(start - from).unwrap_or(usize::MAX).min(self.retained.len());
        // Two slice copies (the deque's halves), not a byte-by-byte iterator.
        let (front, back) = self.retained.as_slices();
        let mut bytes = Vec::with_capacity(self.retained.len() - offset);
        if offset < front.len() {
            bytes.extend_from_slice(&front[offset..]);
            bytes.extend_from_slice(back);
        } else {
            bytes.extend_from_slice(&back[offset - front.len()..]);
        }
        if hold_back {
            let cut = incomplete_utf8_tail(&bytes);
            bytes.truncate(bytes.len() - cut);
        }
        RingRead { next: start + bytes.len() as u64, bytes, skipped: start > cursor }
    }

    /// Length of an incomplete UTF-8 character at the end of the window (0 if none).
    pub fn incomplete_tail(&self) -> usize {
        let n = self.retained.len();
        let last: Vec<u8> = self.retained.range(n.saturating_sub(3)..).copied().collect();
        incomplete_utf8_tail(&last)
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0b1100_0000 == 0b1000_0000
}

/// Bytes a character needs in all, from its lead byte (0: not a lead byte).
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => 0,
    }
}

/// When `buf` is cut before `at`, how many bytes from `at` on are the rest of a well-formed
/// character whose lead byte lies before `at` (0 when `at` is a character boundary, or when the
/// bytes around it are not valid UTF-8 and must be kept as they are).
fn split_character_rest(buf: &VecDeque<u8>, at: usize) -> usize {
    for back in 1..=at.min(3) {
        let b = buf[at - back];
        if is_continuation(b) {
            continue; // look further back for the lead
        }
        let rest = utf8_len(b).saturating_sub(back);
        let present = (buf.len() - at).min(rest);
        return if (at..at + present).all(|i| is_continuation(buf[i])) { present } else { 0 };
    }
    0
}

/// Length of a trailing UTF-8 sequence that has begun but is not complete yet (0 if none).
pub(crate) fn incomplete_utf8_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let b = bytes[bytes.len() - back];
        if is_continuation(b) {
            continue; // look further back for its lead
        }
        // ASCII or an invalid lead (length 0): nothing to wait for.
        return if utf8_len(b) > back { back } else { 0 };
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
        assert_eq!(ring.read_from(0, false), RingRead { bytes: b"cdef".to_vec(), next: 6, skipped: true });
        assert_eq!(ring.read_from(4, false), RingRead { bytes: b"ef".to_vec(), next: 6, skipped: false });
        ring.push(b"0123456789");
        assert_eq!((ring.total(), ring.retained_from()), (16, 12));
        assert_eq!(ring.read_from(16, false).bytes, b"");
    }

    #[test]
    fn holds_back_a_character_still_arriving() {
        let mut ring = OutputRing::new(64);
        let euro = "€".as_bytes(); // 3 bytes
        ring.push(b"a");
        ring.push(&euro[..2]);
        assert_eq!(ring.read_from(0, true), RingRead { bytes: b"a".to_vec(), next: 1, skipped: false });
        assert_eq!(ring.read_from(0, false).next, 3, "not holding back: the partial character is read");
        ring.push(&euro[2..]);
        assert_eq!(ring.read_from(1, true).bytes, euro);
    }

    #[test]
    fn the_window_starts_on_a_character_boundary() {
        let euro = "€".as_bytes();
        // Every split of a 3-byte character by the window start, in one push and in many.
        for capacity in 4..=12 {
            let text = "a€€€€€".repeat(3);
            let mut whole = OutputRing::new(capacity);
            whole.push(text.as_bytes());
            let mut bytewise = OutputRing::new(capacity);
            for b in text.as_bytes() {
                bytewise.push(std::slice::from_ref(b));
            }
            for ring in [&whole, &bytewise] {
                let r = ring.read_from(0, false);
                let chunk = String::from_utf8(r.bytes.clone()).expect("valid UTF-8 from the start");
                assert!(text.ends_with(&chunk), "{capacity}: {chunk:?}");
                assert!(r.bytes.len() + 2 >= capacity && r.bytes.len() <= capacity, "{capacity}: {}", r.bytes.len());
                assert_eq!((r.next, ring.retained_from()), (text.len() as u64, text.len() as u64 - r.bytes.len() as u64));
            }
        }
        let mut ring = OutputRing::new(4);
        ring.push(euro);
        ring.push(euro);
        assert_eq!(ring.read_from(0, false), RingRead { bytes: euro.to_vec(), next: 6, skipped: true });
    }

    #[test]
    fn bytes_that_were_never_utf8_are_kept_at_the_window_start() {
        let mut ring = OutputRing::new(4);
        ring.push(b"ab\x80\x80\x80\x80");
        assert_eq!(ring.read_from(0, false).bytes, b"\x80\x80\x80\x80");
        // A lead byte followed by something that is not its continuation: nothing extra dropped.
        let mut ring = OutputRing::new(4);
        ring.push(b"\xe2\x82zzzz");
        assert_eq!(ring.read_from(0, false).bytes, b"zzzz");
        let mut ring = OutputRing::new(4);
        ring.push(b"\xe2\x82\x82\x80\x80z");
        assert_eq!(ring.read_from(0, false).bytes, b"\x80\x80z", "the split character's rest goes, the stray bytes stay");
    }

    #[test]
    fn invalid_bytes_are_not_held_back() {
        assert_eq!(incomplete_utf8_tail(b"ab\xff"), 0);
        assert_eq!(incomplete_utf8_tail(b"ab\x80\x80\x80"), 0);
        assert_eq!(incomplete_utf8_tail("é".as_bytes()), 0);
        assert_eq!(incomplete_utf8_tail(&"😀".as_bytes()[..3]), 3);
    }
}
