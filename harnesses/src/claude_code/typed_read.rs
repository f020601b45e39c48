//! The typed read of Claude Code's two most frequent line types, `assistant` lines and
//! `stream_event` lines, beside the general read into a [`serde_json::Value`] in
//! [`super::normalize`].
//!
//! Why: under load, parsing every line into a `Value` (a map per object, a `String` per string,
//! all freed again) was about 45 % of the daemon's bulk lane (docs/benchmarks.md, sessions 13
//! and 14). These shapes borrow the strings they can from the line and check every other field
//! without building it. The read must accept exactly the lines the general read parses, and
//! read the same values from them; where it cannot tell, it refuses the line and the caller
//! reads it the general way (test:
//! `normalize.rs::fast_and_general_reads_give_the_same_events_and_state`):
//! - every object read here is read from an object only (`object!`: `serde_json` would offer a
//!   derived struct an array too, field by field);
//! - every field skipped is still parsed as the `Value` parse parses it ([`Skip`]: numbers in
//!   range, strings and keys with valid escapes, nesting within `serde_json`'s limit of 128),
//!   which [`serde::de::IgnoredAny`] does not check;
//! - a field of another type than described, or a field given twice, fails the read.
//!
//! The normalizer decides which blocks and events it takes from a read
//! (`ClaudeNormalizer::typed`): a tool call, for one, goes to the general read.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// A string field, borrowed from the line when it has no escapes.
#[derive(Deserialize)]
pub(super) struct Text<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl Text<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A value read and dropped, checked as the `Value` parse checks it (through
/// `deserialize_any`: numbers, escapes and nesting depth), without building it.
pub(super) struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(Skip)
    }
}

/// `struct $name<'a> { $field: Option<$ty>, ... }` read from a JSON object only (`serde_json`
/// would offer a derived struct an array too): `null` and absent both read as `None`, a field
/// given twice fails the read, and every other key's value is read as a [`Skip`] (a derived
/// struct skips unknown fields with [`serde::de::IgnoredAny`], which checks nothing).
macro_rules! object {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty = $key:literal),* $(,)? }) => {
        $(#[$doc])*
        pub(super) struct $name<'a> {
            $($(#[$fdoc])* pub $field: Option<$ty>,)*
            _line: PhantomData<&'a str>,
        }

        impl<'de: 'a, 'a> Deserialize<'de> for $name<'a> {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct ObjectVisitor<'a>(PhantomData<&'a str>);
                impl<'de: 'a, 'a> Visitor<'de> for ObjectVisitor<'a> {
                    type Value = $name<'a>;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str(concat!("a JSON object (", stringify!($name), ")"))
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<$name<'a>, A::Error> {
                        $(let mut $field: Option<Option<$ty>> = None;)*
                        while let Some(key) = map.next_key::<Text<'de>>()? {
                            match key.as_str() {
                                $($key => {
                                    if $field.is_some() {
                                        return Err(de::Error::duplicate_field($key));
                                    }
                                    $field = Some(map.next_value()?);
                                })*
                                _ => {
                                    map.next_value::<Skip>()?;
                                }
                            }
                        }
                        Ok($name { $($field: $field.flatten(),)* _line: PhantomData })
                    }
                }
                deserializer.deserialize_map(ObjectVisitor(PhantomData))
            }
        }
    };
}

object! {
    /// The fields of an `assistant` or `stream_event` line the normalizer reads.
    Line {
        kind: Text<'a> = "type",
        /// `None` (`null` or absent): the agent's own line; anything else: a sub-agent's.
        parent_tool_use_id: Skip = "parent_tool_use_id",
        error: Text<'a> = "error",
        message: Message<'a> = "message",
        event: StreamEvent<'a> = "event",
    }
}

object! {
    /// An `assistant` line's `message`.
    Message {
        model: Text<'a> = "model",
        content: Vec<Block<'a>> = "content",
    }
}

object! {
    /// One block of a message's `content`.
    Block {
        kind: Text<'a> = "type",
        text: Text<'a> = "text",
        thinking: Text<'a> = "thinking",
    }
}

object! {
    /// A `stream_event` line's `event` (one server-sent event of the model's stream).
    StreamEvent {
        kind: Text<'a> = "type",
        delta: Delta<'a> = "delta",
    }
}

object! {
    /// A stream event's `delta`.
    Delta {
        kind: Text<'a> = "type",
        text: Text<'a> = "text",
    }
}

/// How the two types read here are spelled in a compact line. The CLI prints `type` first, so
/// the search for an `assistant` line ends at once; a line with its keys in another order
/// (sorted, as `serde_json::Value` writes them) is found as well. Inside a JSON string a quote
/// is escaped, so these spellings only ever match a key and its value.
const KINDS: [&str; 2] = [r#""type":"assistant""#, r#""type":"stream_event""#];

/// A tool call's block type ends so (`tool_use`, `server_tool_use`, `mcp_tool_use`): the
/// normalizer reads such a line the general way, so it is not read typed first.
const TOOL_USE: &str = r#"tool_use""#;

/// `line` read typed, when it looks like an `assistant` line without a tool call or a
/// `stream_event` line, and every field parses as described here. `None` otherwise.
pub(super) fn read(line: &str) -> Option<Line<'_>> {
    if !(line.starts_with('{') && KINDS.iter().any(|kind| line.contains(kind))) || line.contains(TOOL_USE) {
        return None;
    }
    serde_json::from_str(line).ok()
}

/// `text` as an owned `String`, without a copy when the read already owns it.
pub(super) fn owned(text: Option<Text<'_>>) -> String {
    text.map_or_else(String::new, |t| t.0.into_owned())
}
