//! What the daemon and a shim say to each other, and what a shim writes to its journal.
//!
//! - [`ShimSpec`]: the process to run, sent once as JSON on the shim's stdin (never on its
//!   command line: it holds the agent's environment, secrets included).
//! - [`Request`] / [`Reply`]: one JSON object per line on the control socket. A connection opens
//!   with [`Request::Hello`] naming the [`PROTOCOL`] version the daemon speaks; a shim refuses
//!   any other version with a reply that names both, so a daemon and a shim of different
//!   releases never misread each other.
//! - [`Record`]: one per line in the journal, a JSON object, or a whole output line in its
//!   plain form ([`Record::write_plain`]); a record's byte offset is where the daemon's ingest
//!   stands.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Version of the shim protocol (control socket and journal). Bump it on any change a shim of
/// the previous release could misread.
pub const PROTOCOL: u32 = 1;

/// The agent process a shim runs, and how it runs it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShimSpec {
    /// The protocol version of the daemon that wrote this spec ([`PROTOCOL`]).
    pub protocol: u32,
    /// Process generation within its run (1, 2, ...): journal records of an older generation
    /// are never read as the current one's.
    pub gen: u64,
    /// The turn this process starts with (recorded in [`Record::Start`]).
    pub turn: u32,
    /// Program and arguments, no shell.
    pub argv: Vec<String>,
    /// Working directory (must exist).
    pub cwd: PathBuf,
    /// The complete environment of the agent.
    pub env: BTreeMap<String, String>,
    /// Marker variables added after `env` (the run marker).
    pub markers: Vec<(String, String)>,
    /// The process tag (`SPACES_PROCESS_TAG`).
    pub tag: String,
    /// Whether the agent's stdin is a pipe the daemon writes through the shim (else `/dev/null`).
    pub stdin_pipe: bool,
    /// Longest output line kept whole, in bytes; a longer line is journaled cut (its first
    /// [`CUT_EXCERPT_BYTES`], on a character boundary) with its full length (case R37).
    pub max_line_bytes: usize,
    /// How long to wait for output EOF after the agent exited before ending what is left of
    /// its tree, in ms (a tool left in the background may hold the pipes open).
    pub drain_ms: u64,
}

/// What a shim reads on its stdin: a [`ShimSpec`] and, in the same JSON object, how to keep
/// the output (`output`; absent = [`OutputMode::Lines`], so a spec of the previous release
/// reads as before).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Launch {
    #[serde(flatten)]
    pub spec: ShimSpec,
    #[serde(default)]
    pub output: OutputMode,
    /// Secret values the shim replaces by `[redacted]` in what it writes (journal lines, output
    /// files), in every spelling given (the daemon's redactor's, JSON-escaped forms included).
    /// Handed over on stdin with the spec, never in argv or the environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redact: Vec<String>,
    /// The cgroup the shim makes and starts the process in ([`crate::process::cgroup`]);
    /// absent: none (the shim's subreaper alone holds the tree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<crate::process::cgroup::Plan>,
    /// The nice value the shim starts the process with ([`crate::process::priority`]); the shim
    /// itself runs at the daemon's priority. Absent (an older daemon): 0.
    #[serde(default)]
    pub nice: i32,
    /// The shim's directory, when it differs from the one it was started with: a spare shim
    /// ([`super::spare`]) is started before its run is known. Absent: the started one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<std::path::PathBuf>,
    /// The sandbox the process starts in (`crate::sandbox`): the shim runs it under
    /// bubblewrap with this policy. Absent: no sandbox (the operator turned it off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::Policy>,
    /// Lines mode: what the shim writes to the agent's stdin first (a turn's prompt: prompts go
    /// on stdin, never argv), before anything the daemon sends. Part of the launch, so an agent
    /// whose daemon died as it started still gets its prompt. Absent: nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin_first: Option<String>,
    /// Lines mode: close the agent's stdin after [`Self::stdin_first`] (a CLI that reads its
    /// prompt to EOF).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdin_close: bool,
}

/// How a shim keeps its process's output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum OutputMode {
    /// Stdout and stderr split into lines, each a [`Record::Line`] in the journal.
    #[default]
    Lines,
    /// Raw bytes (`exec_command`): stdout and stderr on ONE pipe (`tty: None`, with a stdin
    /// pipe) or a PTY of `tty = (rows, cols)` with echo off. The bytes go to the output files
    /// of [`super::output`], split in segments of `segment_bytes` (the three newest kept); the
    /// journal holds only [`Record::Start`], [`Record::Exit`] (written when the process is
    /// reaped), [`RawRecord::Eof`] and [`Record::Done`]. After the exit, what is left of the tree is
    /// not ended: the shim waits for it (a stop ends it).
    Raw {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tty: Option<(u16, u16)>,
        segment_bytes: u64,
    },
}

/// Bytes of a cut line kept in its record (on a character boundary).
pub const CUT_EXCERPT_BYTES: usize = 4096;

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    Out,
    Err,
}

/// One journal record. Offsets are byte offsets of the journal file; a record is one line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum Record {
    /// First record: the shim started `pid` (process group and session leader) for `turn`.
    Start { protocol: u32, gen: u64, turn: u32, pid: i32 },
    /// The daemon started turn `turn` in this (long-lived) process; what follows belongs to it.
    Turn { turn: u32 },
    /// One output line, without its `\n` (and a `\r` before it). `cut` holds the line's full
    /// length in bytes when it was longer than the limit and `l` is only its start.
    Line {
        s: Stream,
        l: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cut: Option<u64>,
    },
    /// The agent process exited (after its output was drained, or the drain timed out): its exit
    /// code, or the signal that killed it.
    Exit { code: Option<i32>, signal: Option<i32> },
    /// Every process of the tree is gone: `killed` were still alive after the exit and were
    /// ended; `dropped_lines` arrived after [`Record::Exit`] and were not journaled.
    Done { killed: Vec<i32>, dropped_lines: u64 },
    /// Something the shim itself wants recorded (a failed stdin write, say).
    Note { text: String },
    /// The shim cannot journal its agent's output: `text` says why, naming the disk when it is
    /// full (`ENOSPC`, `EDQUOT`: [`crate::disk::is_full`]). Written once, into the room the
    /// journal keeps for its last records ([`super::journal::TAIL_ROOM`]); the output lines
    /// after it are not journaled (counted in [`Record::Done`]'s `dropped_lines`). What that
    /// means for the run is the daemon's to decide. (A daemon from before this record reads it
    /// as an unreadable record, a `notice`.)
    Fault { text: String },
    /// The agent's output stream `s` reached EOF: the agent closed it (or exited). Written once
    /// per stream, before [`Record::Exit`]; none after it. A stdout at EOF while the agent runs
    /// on is an agent that can no longer report anything (case R42): what that means for the
    /// run is the daemon's to decide. (A daemon from before this record reads it as an
    /// unreadable record, a `notice`.)
    Eof { s: Stream },
}

/// First bytes of a whole stdout line in its plain journal form ([`Record::write_plain`]).
const PLAIN_OUT: &[u8] = b"o|";
/// First bytes of a whole stderr line in its plain journal form.
const PLAIN_ERR: &[u8] = b"e|";

impl Record {
    /// Appends the journal form of a whole line ([`Record::Line`] without `cut`) to `out`,
    /// without its `\n`: `o|` (stdout) or `e|` (stderr), then the text as printed. A JSON
    /// record starts with `{`, so the two never mix up. A harness line is itself JSON: as a
    /// JSON string, every quote in it was escaped by the shim and unescaped by the daemon
    /// (measured: a third of the shim's work under a fast stream). Text holding a `\n` (which
    /// a line split at `\n` never does) is written as a JSON record instead.
    ///
    /// Daemons read both forms ([`Record::parse`]); a daemon from before the plain form reads
    /// such a line as an unreadable record, so going back to such a release while runs are live
    /// is not supported.
    pub fn write_plain(out: &mut Vec<u8>, s: Stream, text: &str) {
        if memchr::memchr(b'\n', text.as_bytes()).is_some() {
            // serde_json writes to a Vec without failing.
            let _ = serde_json::to_writer(&mut *out, &Record::Line { s, l: text.to_owned(), cut: None });
            return;
        }
        out.extend_from_slice(if s == Stream::Err { PLAIN_ERR } else { PLAIN_OUT });
        out.extend_from_slice(text.as_bytes());
    }

    /// One journal line (without its `\n`) parsed: a JSON record as `serde_json::from_slice`
    /// would parse it, or a line in its plain form ([`Record::write_plain`]). A JSON `line`
    /// record is read straight into its fields: the derived parse of an internally tagged enum
    /// first copies every field, the text included, into a buffer of its own (measured: most of
    /// the daemon's cost of reading a journal). Errors: the line is not a record, or a plain
    /// line is not UTF-8.
    pub fn parse(line: &[u8]) -> serde_json::Result<Record> {
        #[derive(Deserialize)]
        #[serde(rename_all = "snake_case")]
        enum LineTag {
            Line,
        }
        #[derive(Deserialize)]
        struct LineFields {
            #[serde(rename = "k")]
            _k: LineTag,
            s: Stream,
            l: String,
            #[serde(default)]
            cut: Option<u64>,
        }
        let plain = |s: Stream, text: &[u8]| match std::str::from_utf8(text) {
            Ok(text) => Ok(Record::Line { s, l: text.to_owned(), cut: None }),
            Err(e) => Err(<serde_json::Error as serde::de::Error>::custom(format!("a plain line that is not UTF-8: {e}"))),
        };
        if let Some(text) = line.strip_prefix(PLAIN_OUT) {
            return plain(Stream::Out, text);
        }
        if let Some(text) = line.strip_prefix(PLAIN_ERR) {
            return plain(Stream::Err, text);
        }
        match serde_json::from_slice::<LineFields>(line) {
            Ok(f) => Ok(Record::Line { s: f.s, l: f.l, cut: f.cut }),
            Err(_) => serde_json::from_slice(line),
        }
    }
}

/// One journal record of a raw-mode shim ([`OutputMode::Raw`]). `Start`, `Exit` and `Done`
/// are written exactly as the [`Record`] variants of the same names; `Eof` exists only here
/// (a daemon reading a raw journal as [`Record`]s sees it as an unreadable line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum RawRecord {
    /// As [`Record::Start`].
    Start { protocol: u32, gen: u64, turn: u32, pid: i32 },
    /// As [`Record::Exit`], written the moment the process is reaped.
    Exit { code: Option<i32>, signal: Option<i32> },
    /// The output is complete at `total` bytes. `cut` is true when collection stopped at the
    /// drain deadline (a descendant still held the output open), false at EOF.
    Eof { total: u64, cut: bool },
    /// As [`Record::Done`].
    Done { killed: Vec<i32>, dropped_lines: u64 },
}

/// A request on the control socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// First request of every connection.
    Hello { protocol: u32 },
    /// Write `data` to the agent's stdin; with `turn`, first journal [`Record::Turn`].
    Stdin { data: String, turn: Option<u32> },
    /// Close the agent's stdin (after what was written before).
    CloseStdin,
    /// Send `signal` to the agent's process group.
    Signal { signal: i32 },
    /// End every process the shim holds: SIGTERM, `grace_ms`, SIGKILL; the reply lists survivors.
    Stop { grace_ms: u64 },
    /// Turn this connection into a stream of `{"end": <journal length>}` lines, one per growth;
    /// it closes when the shim exits.
    Watch,
    /// The daemon has stored everything up to journal offset `offset`: once the tree is gone
    /// and everything is acknowledged, the shim exits.
    Ack { offset: u64 },
    /// The shim's state.
    Status,
    /// Raw mode: write `data` (the exact bytes, a JSON array of numbers) to the process's stdin
    /// pipe or terminal, waiting while it is full, for at most `timeout_ms` in all. The reply
    /// comes once every byte is written or the write stopped: `written` counts the bytes that
    /// went through, `stop` says why it stopped early. To a PTY in canonical mode, a line
    /// longer than [`crate::process::pty::MAX_CANON_LINE`] (counting what earlier writes left
    /// unterminated) is refused before anything is written (`stop: line_too_long`).
    Input { data: Vec<u8>, timeout_ms: u64 },
    /// Raw mode with a PTY: set its size (the program gets SIGWINCH).
    Resize { rows: u16, cols: u16 },
}

/// Why a [`Request::Input`] stopped before its last byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputStop {
    /// `timeout_ms` passed while the pipe or terminal was full.
    Timeout,
    /// The reader is gone (`EPIPE`) or the process has no input.
    Closed,
    /// The process exited during the write.
    Exited,
    /// A line too long for a canonical-mode terminal: nothing was written ([`Reply::longest`]).
    LineTooLong,
    /// Another write error (its text is in [`Reply::error`]).
    Failed,
}

/// The answer to a [`Request`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    /// Why a request was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The protocol version the shim speaks.
    pub protocol: u32,
    /// The agent's pid (= process group = session).
    #[serde(default)]
    pub pid: i32,
    /// The journal's length in bytes.
    #[serde(default)]
    pub end: u64,
    /// The agent's exit, once known: `[code, signal]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<(Option<i32>, Option<i32>)>,
    /// The tree is gone ([`Record::Done`] written).
    #[serde(default)]
    pub done: bool,
    /// After [`Request::Stop`]: processes still alive after SIGKILL (should be empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub survivors: Vec<i32>,
    /// After [`Request::Input`]: the bytes written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<u64>,
    /// After [`Request::Input`]: why it stopped before the end (absent: every byte written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<InputStop>,
    /// With [`InputStop::LineTooLong`]: the longest line, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest: Option<usize>,
    /// Raw mode: the output's length in bytes so far.
    #[serde(default)]
    pub out: u64,
    /// After [`Request::Hello`]: the tag of what the shim holds ([`ShimSpec::tag`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Lines mode: the agent's stdout is at EOF ([`Record::Eof`] was written for it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub out_closed: bool,
}

impl Reply {
    /// A refusal saying `why`.
    pub fn refuse(why: impl Into<String>) -> Self {
        Reply { ok: false, error: Some(why.into()), protocol: PROTOCOL, ..Reply::default() }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn records_are_one_json_line_each_and_read_back() {
        let recs = [
            Record::Start { protocol: PROTOCOL, gen: 2, turn: 3, pid: 77 },
            Record::Line { s: Stream::Err, l: "a \"quoted\"\nline".into(), cut: None },
            Record::Line { s: Stream::Out, l: "é".into(), cut: Some(12) },
            Record::Exit { code: None, signal: Some(9) },
            Record::Eof { s: Stream::Out },
            Record::Fault { text: "cannot journal: No space left on device (os error 28)".into() },
        ];
        for r in recs {
            let json = serde_json::to_string(&r).unwrap();
            assert!(!json.contains('\n'));
            assert_eq!(serde_json::from_str::<Record>(&json).unwrap(), r);
            assert_eq!(Record::parse(json.as_bytes()).unwrap(), r);
        }
    }

    #[test]
    fn plain_lines_read_back_and_never_pass_for_json_records() {
        let cases = [
            (Stream::Out, r#"{"type":"assistant","q":"a \"b\" é"}"#),
            (Stream::Err, "warning: [stderr] o|e|"),
            (Stream::Out, ""),
            (Stream::Out, "{\"k\":\"exit\",\"code\":0,\"signal\":null}"),
            (Stream::Err, "a\nb"),
        ];
        for (s, text) in cases {
            let mut out = Vec::new();
            Record::write_plain(&mut out, s, text);
            assert_eq!(memchr::memchr(b'\n', &out), None, "one journal line: {text:?}");
            assert_eq!(Record::parse(&out).unwrap(), Record::Line { s, l: text.into(), cut: None }, "{text:?}");
        }
        assert!(Record::parse(b"o|\xff").is_err(), "a plain line that is not UTF-8 is an unreadable record");
    }

    #[test]
    fn the_line_fast_path_reads_what_the_derived_parse_reads() {
        let lines: [&[u8]; 7] = [
            br#"{"k":"line","s":"out","l":"x"}"#,
            br#"{"s":"err","l":"late tag","cut":null,"k":"line"}"#,
            br#"{"k":"line","s":"out","l":"a","cut":9,"extra":1}"#,
            br#"{"k":"turn","turn":4}"#,
            br#"{"k":"note","text":"hi"}"#,
            br#"{"k":"line","s":"sideways","l":"x"}"#,
            br#"{"k":"line","l":"no stream"}"#,
        ];
        for line in lines {
            let derived = serde_json::from_slice::<Record>(line).map_err(|e| e.classify());
            assert_eq!(Record::parse(line).map_err(|e| e.classify()), derived, "{}", String::from_utf8_lossy(line));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod compat_tests {
    use super::*;

    #[test]
    fn a_spec_without_an_output_mode_is_a_lines_launch_and_raw_launches_read_back() {
        let spec = ShimSpec {
            protocol: PROTOCOL,
            gen: 1,
            turn: 1,
            argv: vec!["true".into()],
            cwd: "/".into(),
            env: BTreeMap::new(),
            markers: Vec::new(),
            tag: "t".into(),
            stdin_pipe: false,
            max_line_bytes: 10,
            drain_ms: 10,
        };
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<Launch>(&json).unwrap().output, OutputMode::Lines);
        let raw = OutputMode::Raw { tty: Some((24, 80)), segment_bytes: 4096 };
        let launch = serde_json::to_string(&Launch {
            spec,
            output: raw,
            redact: Vec::new(),
            cgroup: None,
            nice: 0,
            dir: None,
            sandbox: None,
            stdin_first: None,
            stdin_close: false,
        })
        .unwrap();
        let back: Launch = serde_json::from_str(&launch).unwrap();
        assert_eq!((back.output, back.spec.tag.as_str()), (raw, "t"));
        let input = serde_json::to_string(&Request::Input { data: vec![0, 255, b'\n'], timeout_ms: 5 }).unwrap();
        assert_eq!(input, r#"{"op":"input","data":[0,255,10],"timeout_ms":5}"#);
        // A raw journal's shared records read the same either way.
        for (raw, rec) in [
            (
                RawRecord::Start { protocol: PROTOCOL, gen: 1, turn: 0, pid: 9 },
                Record::Start { protocol: PROTOCOL, gen: 1, turn: 0, pid: 9 },
            ),
            (RawRecord::Exit { code: Some(3), signal: None }, Record::Exit { code: Some(3), signal: None }),
            (RawRecord::Done { killed: vec![4], dropped_lines: 0 }, Record::Done { killed: vec![4], dropped_lines: 0 }),
        ] {
            assert_eq!(serde_json::to_string(&raw).unwrap(), serde_json::to_string(&rec).unwrap());
        }
    }
}
