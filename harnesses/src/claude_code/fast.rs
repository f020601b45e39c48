//! The typed read of Claude Code's two most frequent line types, `assistant` lines of text and
//! thinking blocks and `stream_event` lines, beside the general read into a
//! [`serde_json::Value`] in [`super::normalize`].
//!
//! Why: under load, parsing every line into a `Value` (a map per object, a `String` per string,
//! all freed again) was about 45 % of the daemon's bulk lane (docs/benchmarks.md, session 13).
//! These shapes borrow the strings they can from the line, skip every other field without
//! building it, and fail on anything they do not describe exactly (a field of another type, a
//! duplicate key, a block of another type): the caller then reads the line the general way, so
//! the events are the same whichever read took the line (test:
//! `normalize.rs::fast_and_general_reads_give_the_same_events_and_state`).

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;

/// A string field, borrowed from the line when it has no escapes.
#[derive(Deserialize)]
pub(super) struct Text<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl Text<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The fields of an `assistant` or `stream_event` line the normalizer reads.
#[derive(Deserialize)]
pub(super) struct Line<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Text<'a>,
    /// `null` and absent both read as `None`: the agent's own line.
    #[serde(default)]
    pub parent_tool_use_id: Option<IgnoredAny>,
    #[serde(default, borrow)]
    pub error: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub message: Option<Message<'a>>,
    #[serde(default, borrow)]
    pub event: Option<StreamEvent<'a>>,
}

#[derive(Deserialize)]
pub(super) struct Message<'a> {
    #[serde(default, borrow)]
    pub model: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub content: Option<Vec<Block<'a>>>,
}

#[derive(Deserialize)]
pub(super) struct Block<'a> {
    #[serde(rename = "type", default, borrow)]
    pub kind: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub text: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub thinking: Option<Text<'a>>,
}

#[derive(Deserialize)]
pub(super) struct StreamEvent<'a> {
    #[serde(rename = "type", default, borrow)]
    pub kind: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub delta: Option<Delta<'a>>,
}

#[derive(Deserialize)]
pub(super) struct Delta<'a> {
    #[serde(rename = "type", default, borrow)]
    pub kind: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub text: Option<Text<'a>>,
}

/// Opening brackets a line may have for the typed read to take it. The general read refuses a
/// line nested deeper than `serde_json`'s limit (128); the fields skipped here are not counted
/// against it, so a line that could be that deep (brackets in strings count too) is left to the
/// general read, which decides as it always did.
const MAX_OPENINGS: usize = 100;

/// How the two types read here are spelled in a compact line. The CLI prints `type` first, so
/// the search ends at once; a line written with its keys in another order (sorted, as
/// `serde_json::Value` writes them) is found as well.
const KINDS: [&str; 2] = [r#""type":"assistant""#, r#""type":"stream_event""#];

/// `line` read typed, when it looks like an `assistant` or `stream_event` line and every field
/// read has the type described here. `None` otherwise.
pub(super) fn read(line: &str) -> Option<Line<'_>> {
    if !(line.starts_with('{') && KINDS.iter().any(|kind| line.contains(kind))) {
        return None;
    }
    if openings(line.as_bytes()) > MAX_OPENINGS {
        return None;
    }
    serde_json::from_str(line).ok()
}

/// How many `[` and `{` bytes `bytes` holds. Counted in runs of 255 into a byte, which the
/// compiler vectorizes: 0.06 µs for a 1.6 KB line, against 0.75 µs for a plain filtered count.
fn openings(bytes: &[u8]) -> usize {
    // `[` is 0x5b and `{` 0x7b: no other byte is `{` with bit 5 set.
    bytes.chunks(255).map(|run| usize::from(run.iter().fold(0u8, |n, &b| n + u8::from(b | 0x20 == b'{')))).sum()
}

/// `text` as an owned `String`, without a copy when the read already owns it.
pub(super) fn owned(text: Option<Text<'_>>) -> String {
    text.map_or_else(String::new, |t| t.0.into_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn openings_counts_both_brackets_and_nothing_else() {
        assert_eq!(super::openings(b"[{a{[]}\"x\" ;"), 4);
        let every_byte: Vec<u8> = (0..=255u8).cycle().take(256 * 3).collect();
        assert_eq!(super::openings(&every_byte), 6);
    }
}
