//! Parsing V4A patch text into [`Patch`].
//!
//! Grammar (V4A as used by Codex's `apply_patch`), one item per line:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: <path>          then `+<line>` lines: the whole new file
//! *** Delete File: <path>
//! *** Update File: <path>
//! *** Move to: <path>           optional, right after `*** Update File:`
//! @@ [<context line>]           starts a hunk; the first hunk of a file may omit it
//!  <line> / -<line> / +<line>   context, removed, added (an empty line is empty context)
//! *** End of File               optional, closes a hunk: it must match at the file's end
//! *** End Patch
//! ```
//!
//! Patches as models really write them are accepted (cases X18c, X38), without relaxing what a
//! patch may do:
//! - marker lines tolerate surrounding whitespace (`*** Begin Patch   `, `  *** Update File: a`);
//!   inside a hunk an indented `*** End Patch` is the end only when nothing but blank lines (or
//!   a heredoc terminator) follows, so a context line that really reads `*** End Patch` still works;
//! - blank lines before `*** Begin Patch`, after `*** End Patch`, and between a hunk's end and the
//!   next marker are ignored;
//! - a patch wrapped in a shell heredoc (`apply_patch <<'EOF'` ... `EOF`) is unwrapped: the opening
//!   line must end in `<<WORD` (quoted or not, `<<-` too) and the closing line is `WORD`.
//!
//! A `\r` before each `\n` of the patch text is dropped: line endings are the file's business,
//! never the patch's.

use crate::error::{Error, Result};
use spaces_sdk::bounded;

/// A parsed patch: file operations in the order they appear (and are applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// The file operations, in patch order.
    pub ops: Vec<FileOp>,
}

/// One file operation of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    /// `*** Add File:`: create `path` holding `lines`, each ended by `\n`.
    Add { path: String, lines: Vec<String> },
    /// `*** Delete File:`: remove `path`.
    Delete { path: String },
    /// `*** Update File:`: apply `hunks` in order to `path`, then rename it to `move_to` if given.
    /// `hunks` is empty only for a pure rename.
    Update { path: String, move_to: Option<String>, hunks: Vec<Hunk> },
}

impl FileOp {
    /// The path the operation reads (the source of a move).
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } | FileOp::Update { path, .. } => path,
        }
    }
}

/// One `@@` hunk of an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// Text after `@@ `: a line that must occur (once) before the hunk's lines.
    pub header: Option<String>,
    /// Context, removed and added lines in patch order.
    pub lines: Vec<HunkLine>,
    /// `*** End of File` closed the hunk: its old lines must be the file's last lines.
    pub end_of_file: bool,
    /// 1-based line of the patch text where the hunk starts (for messages).
    pub patch_line: usize,
}

impl Hunk {
    /// The lines the hunk expects in the file: context and removed lines, in order.
    pub fn old_lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter_map(|l| match l {
            HunkLine::Context(t) | HunkLine::Remove(t) => Some(t.as_str()),
            HunkLine::Add(_) => None,
        })
    }

    /// The lines the hunk leaves in the file: context and added lines, in order.
    pub fn new_lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter_map(|l| match l {
            HunkLine::Context(t) | HunkLine::Add(t) => Some(t.as_str()),
            HunkLine::Remove(_) => None,
        })
    }
}

/// One line of a hunk, without its prefix character.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    /// ` line`: must be in the file, kept as the file has it.
    Context(String),
    /// `-line`: must be in the file, removed.
    Remove(String),
    /// `+line`: inserted, with the file's line ending.
    Add(String),
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";

/// Parses V4A patch text.
///
/// Errors: [`Error::InvalidPatch`] (`INVALID_PATCH`) naming the 1-based patch line and what was
/// expected there. A patch without any file operation is refused too.
pub fn parse(text: &str) -> Result<Patch> {
    let lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    Parser { lines, pos: 0, terminator: None }.patch()
}

struct Parser<'a> {
    lines: Vec<&'a str>,
    pos: usize,
    /// The heredoc terminator word when the patch came wrapped in one (case X38c).
    terminator: Option<String>,
}

/// Whether `line` is a `***` marker line (leading whitespace tolerated).
fn is_marker(line: &str) -> bool {
    line.trim_start().starts_with("***")
}

/// The terminator word of a line that opens a shell heredoc (`... <<'EOF'`, `<<"EOF"`,
/// `<<EOF`, `<<-EOF`), if the line ends with one.
fn heredoc_word(line: &str) -> Option<String> {
    let (_, after) = line.trim_end().rsplit_once("<<")?;
    let word = after.strip_prefix('-').unwrap_or(after).trim();
    let word = word
        .strip_prefix('\'')
        .and_then(|w| w.strip_suffix('\''))
        .or_else(|| word.strip_prefix('"').and_then(|w| w.strip_suffix('"')))
        .unwrap_or(word);
    let ok = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then(|| word.to_owned())
}

fn err(line: usize, message: impl Into<String>) -> Error {
    Error::InvalidPatch { line, message: message.into() }
}

/// Quotes a patch line for a message, shortened to keep messages one line.
fn shown(line: &str) -> String {
    const MAX: usize = 80;
    match line.char_indices().nth(MAX) {
        Some((cut, _)) => format!("`{}...`", &line[..cut]),
        None => format!("`{line}`"),
    }
}

fn path_of(rest: &str, line: usize, marker: &str) -> Result<String> {
    let path = rest.trim();
    if path.is_empty() {
        return Err(err(line, format!("expected a path after `{marker}`")));
    }
    let normal = normalize_path(path);
    if normal.is_empty() {
        return Err(err(line, format!("`{marker}` names the workspace root ({:?}), not a file", bounded(path))));
    }
    Ok(normal)
}

/// One spelling per file: `./a//b/` and `a/b` name the same file, so a patch cannot plan them as
/// two (which would let two operations on one file both commit). `.` and empty components are
/// dropped. Absolute paths, `..` and NUL are kept as written for the workspace's confinement to
/// refuse (`PATH_ESCAPE`).
pub fn normalize_path(path: &str) -> String {
    if path.starts_with('/') || path.contains('\0') {
        return path.to_owned();
    }
    path.split('/').filter(|c| !c.is_empty() && *c != ".").collect::<Vec<_>>().join("/")
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.lines.get(self.pos).copied()
    }

    /// 1-based number of the line `peek` returns.
    fn line_no(&self) -> usize {
        self.pos + 1
    }

    /// Whether the lines from here to the next `***` marker (or the end) are all blank; blank
    /// lines are skipped if so.
    fn only_blank_until_marker(&mut self) -> bool {
        let rest = &self.lines[self.pos..];
        let blank = rest.iter().take_while(|l| l.trim().is_empty()).count();
        let ends = rest.get(blank).is_none_or(|l| is_marker(l));
        if ends {
            self.pos += blank;
        }
        ends
    }

    fn skip_blank(&mut self) {
        while self.peek().is_some_and(|l| l.trim().is_empty()) {
            self.pos += 1;
        }
    }

    /// Whether everything after the current line is blank, or a heredoc terminator and blanks:
    /// an indented `*** End Patch` here is the patch's end, not a context line.
    fn only_tail_after(&self, terminator: Option<&str>) -> bool {
        let mut rest = self.lines[self.pos + 1..].iter().filter(|l| !l.trim().is_empty());
        match (rest.next(), terminator) {
            (None, _) => true,
            (Some(l), Some(word)) => l.trim() == word && rest.next().is_none(),
            (Some(_), None) => false,
        }
    }

    fn patch(mut self) -> Result<Patch> {
        self.skip_blank();
        // `apply_patch <<'EOF'` ... `EOF`: unwrap the heredoc (case X38c).
        let terminator = self.peek().and_then(heredoc_word);
        if terminator.is_some() {
            self.pos += 1;
            self.skip_blank();
        }
        self.terminator = terminator;
        match self.peek() {
            Some(l) if l.trim() == BEGIN => self.pos += 1,
            Some(l) => return Err(err(self.line_no(), format!("expected `{BEGIN}`, found {}", shown(l)))),
            None => return Err(err(1, format!("expected `{BEGIN}`, found an empty patch"))),
        }
        let mut ops = Vec::new();
        let end_line;
        loop {
            let no = self.line_no();
            let Some(line) = self.peek() else {
                return Err(err(self.lines.len(), format!("expected `{END}` before the end of the patch")));
            };
            let marker = line.trim();
            if marker == END {
                end_line = no;
                self.pos += 1;
                break;
            } else if let Some(rest) = marker.strip_prefix(ADD) {
                let path = path_of(rest, no, ADD)?;
                self.pos += 1;
                ops.push(FileOp::Add { path, lines: self.added_lines()? });
            } else if let Some(rest) = marker.strip_prefix(DELETE) {
                let path = path_of(rest, no, DELETE)?;
                self.pos += 1;
                ops.push(FileOp::Delete { path });
            } else if let Some(rest) = marker.strip_prefix(UPDATE) {
                let path = path_of(rest, no, UPDATE)?;
                self.pos += 1;
                ops.push(self.update(path, no)?);
            } else {
                return Err(err(no, format!("expected `{}`, `{}`, `{}` or `{END}`, found {}", ADD, UPDATE, DELETE, shown(line))));
            }
        }
        self.skip_blank();
        if let (Some(l), Some(word)) = (self.peek(), self.terminator.as_deref()) {
            if l.trim() == word {
                self.pos += 1;
                self.skip_blank();
            }
        }
        if let Some(l) = self.peek() {
            return Err(err(self.line_no(), format!("expected nothing after `{END}`, found {}", shown(l))));
        }
        if ops.is_empty() {
            return Err(err(end_line, "the patch has no file operation"));
        }
        Ok(Patch { ops })
    }

    /// The `+` lines of an added file, up to the next `***` marker.
    fn added_lines(&mut self) -> Result<Vec<String>> {
        let mut lines = Vec::new();
        while let Some(line) = self.peek() {
            if let Some(text) = line.strip_prefix('+') {
                lines.push(text.to_owned());
                self.pos += 1;
            } else if is_marker(line) || self.only_blank_until_marker() {
                break;
            } else {
                return Err(err(self.line_no(), format!("expected a `+` line of the added file or a `***` marker, found {}", shown(line))));
            }
        }
        Ok(lines)
    }

    /// Everything after `*** Update File: <path>` (line `header_no`).
    fn update(&mut self, path: String, header_no: usize) -> Result<FileOp> {
        let mut move_to = None;
        if let Some(rest) = self.peek().and_then(|l| l.trim().strip_prefix(MOVE)) {
            move_to = Some(path_of(rest, self.line_no(), MOVE)?);
            self.pos += 1;
        }
        let mut hunks = Vec::new();
        while let Some(line) = self.peek() {
            let no = self.line_no();
            if line.starts_with("@@") {
                let marker = line.trim_end();
                let header = if marker == "@@" {
                    None
                } else if let Some(text) = marker.strip_prefix("@@ ") {
                    Some(text.to_owned())
                } else {
                    return Err(err(no, format!("expected `@@` or `@@ <context line>`, found {}", shown(line))));
                };
                self.pos += 1;
                hunks.push(self.hunk(header, no)?);
            } else if line.trim() == END_OF_FILE {
                return Err(err(no, format!("`{END_OF_FILE}` must close a hunk that has lines")));
            } else if is_marker(line) {
                break;
            } else if !hunks.is_empty() && line.trim().is_empty() && self.only_blank_until_marker() {
                // Blank lines after a closed hunk (`*** End of File`, then a blank line, then
                // `*** End Patch`: case X38d).
                continue;
            } else if hunks.is_empty() && line.starts_with([' ', '-', '+']) {
                // Codex accepts a first hunk without `@@`.
                hunks.push(self.hunk(None, no)?);
            } else {
                return Err(err(no, format!("expected `@@`, a hunk line or a `***` marker, found {}", shown(line))));
            }
        }
        if hunks.is_empty() && move_to.is_none() {
            return Err(err(header_no, format!("`{UPDATE} {}` has no hunk", bounded(&path))));
        }
        Ok(FileOp::Update { path, move_to, hunks })
    }

    /// The lines of one hunk, up to the next `@@`, `***` marker or the end of the text.
    fn hunk(&mut self, header: Option<String>, start: usize) -> Result<Hunk> {
        let mut lines = Vec::new();
        let mut end_of_file = false;
        while let Some(line) = self.peek() {
            if line.trim() == END_OF_FILE {
                self.pos += 1;
                end_of_file = true;
                break;
            }
            if line.starts_with("***") || line.starts_with("@@") {
                break;
            }
            // An indented marker ends the hunk (case X38a/b); an indented `*** End Patch` only
            // when nothing but the patch's tail follows, else it is a context line.
            let trimmed = line.trim();
            let file_marker = [ADD, DELETE, UPDATE].iter().any(|m| trimmed.starts_with(m));
            if file_marker || (trimmed == END && self.only_tail_after(self.terminator.as_deref())) {
                break;
            }
            let mut chars = line.chars();
            let first = chars.next();
            let text = chars.as_str().to_owned();
            let parsed = match first {
                None => HunkLine::Context(text),
                Some(' ') => HunkLine::Context(text),
                Some('-') => HunkLine::Remove(text),
                Some('+') => HunkLine::Add(text),
                Some(_) => {
                    return Err(err(self.line_no(), format!("expected a hunk line starting with ` `, `-` or `+`, found {}", shown(line))))
                }
            };
            lines.push(parsed);
            self.pos += 1;
        }
        if lines.is_empty() {
            return Err(err(start, "expected hunk lines (` `, `-` or `+`) after `@@`"));
        }
        Ok(Hunk { header, lines, end_of_file, patch_line: start })
    }
}
