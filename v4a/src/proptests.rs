//! Property tests: a patch built from a random edit applies to exactly the edited text; a patch
//! whose context does not match is refused naming that hunk; nothing panics on arbitrary input.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use spaces_sdk::ErrorCode;

use super::{apply, parse};

/// One step of an edit script over the source lines.
#[derive(Debug, Clone)]
enum Op {
    Keep(String),
    Del(String),
    Ins(String),
}

impl Op {
    /// The source line this step consumes, if any.
    fn old(&self) -> Option<&str> {
        match self {
            Op::Keep(t) | Op::Del(t) => Some(t),
            Op::Ins(_) => None,
        }
    }
}

/// A random edit: at `at` (a fraction of the length), delete `delete` lines, insert `insert`.
#[derive(Debug, Clone)]
struct Edit {
    at: f64,
    delete: usize,
    insert: Vec<String>,
}

fn script(source: &[String], edits: &[Edit]) -> Vec<Op> {
    let mut positions: Vec<(usize, &Edit)> = edits.iter().map(|e| ((e.at * source.len() as f64) as usize, e)).collect();
    positions.sort_by_key(|(p, _)| *p);
    let mut ops = Vec::new();
    let mut next = 0;
    for (at, edit) in positions {
        let at = at.clamp(next, source.len());
        ops.extend(source[next..at].iter().cloned().map(Op::Keep));
        let end = (at + edit.delete).min(source.len());
        ops.extend(source[at..end].iter().cloned().map(Op::Del));
        ops.extend(edit.insert.iter().cloned().map(Op::Ins));
        next = end;
    }
    ops.extend(source[next..].iter().cloned().map(Op::Keep));
    ops
}

fn old_lines(ops: &[Op]) -> Vec<&str> {
    ops.iter().filter_map(Op::old).collect()
}

fn exact_matches(source: &[String], pattern: &[&str], from: usize) -> usize {
    (from..=source.len().saturating_sub(pattern.len()))
        .filter(|&at| at + pattern.len() <= source.len())
        .filter(|&at| pattern.iter().zip(&source[at..]).all(|(p, s)| p == s))
        .count()
}

/// The V4A patch for `ops`: one hunk per group of changes, its context grown until its old
/// lines occur exactly once after the previous hunk (hunks that would overlap are merged).
fn v4a(source: &[String], ops: &[Op]) -> String {
    let mut text = String::from("*** Begin Patch\n*** Update File: f\n");
    let mut done = 0; // ops already covered by a hunk
    while let Some(change) = (done..ops.len()).find(|&k| !matches!(ops[k], Op::Keep(_))) {
        let (mut lo, mut hi) = (change, change);
        while hi < ops.len() && !matches!(ops[hi], Op::Keep(_)) {
            hi += 1;
        }
        let from = old_lines(&ops[..done]).len();
        loop {
            let pattern = old_lines(&ops[lo..hi]);
            let placed = if pattern.is_empty() {
                // A hunk of only `+` lines goes to the end of the file.
                old_lines(&ops[hi..]).is_empty()
            } else {
                exact_matches(source, &pattern, from) == 1
            };
            if placed || (lo == done && hi == ops.len()) {
                break;
            }
            hi = (hi + 1).min(ops.len());
            lo = lo.saturating_sub(1).max(done);
        }
        text.push_str("@@\n");
        for op in &ops[lo..hi] {
            let (prefix, line) = match op {
                Op::Keep(t) => (' ', t),
                Op::Del(t) => ('-', t),
                Op::Ins(t) => ('+', t),
            };
            text.push(prefix);
            text.push_str(line);
            text.push('\n');
        }
        done = hi;
    }
    text.push_str("*** End Patch\n");
    text
}

/// `lines` as file bytes. `final_newline` is forced when the last line is empty (otherwise the
/// text would not split back into the same lines).
fn render(lines: &[String], crlf: bool, final_newline: bool) -> Vec<u8> {
    let eol = if crlf { "\r\n" } else { "\n" };
    let mut text = lines.join(eol);
    if final_newline && !lines.is_empty() {
        text.push_str(eol);
    }
    text.into_bytes()
}

fn line() -> impl Strategy<Value = String> {
    prop_oneof!["[ab ]{0,3}", "[a-e]{1,6}"]
}

fn edit() -> impl Strategy<Value = Edit> {
    (0.0..1.0f64, 0usize..4, prop::collection::vec(line(), 0..4)).prop_map(|(at, delete, insert)| Edit { at, delete, insert })
}

fn case() -> impl Strategy<Value = (Vec<String>, Vec<Edit>, bool, bool)> {
    (prop::collection::vec(line(), 0..30), prop::collection::vec(edit(), 1..4), any::<bool>(), any::<bool>())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn generated_patch_applies_to_exactly_the_target((source, edits, crlf, final_newline) in case()) {
        let final_newline = final_newline || source.is_empty() || source.last().is_some_and(String::is_empty);
        // Only terminated lines tell the applier the file is CRLF.
        let crlf = crlf && (source.len() > 1 || (source.len() == 1 && final_newline));
        let ops = script(&source, &edits);
        let target: Vec<String> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Keep(t) | Op::Ins(t) => Some(t.clone()),
                Op::Del(_) => None,
            })
            .collect();
        prop_assume!(ops.iter().any(|op| !matches!(op, Op::Keep(_))));
        let before = render(&source, crlf, final_newline);
        let files = BTreeMap::from([("f".to_owned(), before.clone())]);
        let text = v4a(&source, &ops);
        let changes = apply(&parse(&text).unwrap(), &files)
            .map_err(|e| TestCaseError::fail(format!("{e}\npatch:\n{text}")))?;
        prop_assert_eq!(changes.len(), 1);
        prop_assert_eq!(changes[0].before.as_deref(), Some(&before[..]));
        let expected = render(&target, crlf, final_newline);
        prop_assert_eq!(
            String::from_utf8_lossy(changes[0].after.as_deref().unwrap_or_default()),
            String::from_utf8_lossy(&expected),
            "patch:\n{}", text
        );
    }

    #[test]
    fn patch_with_foreign_context_is_refused((source, edits, crlf, final_newline) in case(), which in any::<usize>()) {
        let final_newline = final_newline || source.last().is_some_and(String::is_empty);
        let ops = script(&source, &edits);
        prop_assume!(ops.iter().any(|op| !matches!(op, Op::Keep(_))));
        let text = v4a(&source, &ops);
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let old: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].starts_with(' ') || lines[i].starts_with('-'))
            .collect();
        prop_assume!(!old.is_empty());
        let at = old[which % old.len()];
        let prefix = lines[at][..1].to_owned();
        lines[at] = format!("{prefix}zz not in the source");
        let broken = lines.join("\n");

        // The hunk holding the changed line; every hunk before it still matches.
        let hunk = lines[..at].iter().filter(|l| l.starts_with("@@")).count();

        let files = BTreeMap::from([("f".to_owned(), render(&source, crlf, final_newline))]);
        let err = apply(&parse(&broken).unwrap(), &files).unwrap_err();
        prop_assert_eq!(err.code(), ErrorCode::InvalidPatch, "{}", err);
        prop_assert!(
            matches!(&err, crate::Error::ContextNotFound { path, hunk: h, .. } if path == "f" && *h == hunk),
            "expected hunk {} of f not found, got {:?}\npatch:\n{}", hunk, err, broken
        );
    }

    #[test]
    fn arbitrary_input_never_panics(
        patch_lines in prop::collection::vec(
            prop_oneof![
                Just("*** Begin Patch".to_owned()),
                Just("*** End Patch".to_owned()),
                Just("*** Update File: f".to_owned()),
                Just("*** Add File: g".to_owned()),
                Just("*** Delete File: f".to_owned()),
                Just("*** Move to: g".to_owned()),
                Just("*** End of File".to_owned()),
                Just("@@".to_owned()),
                "@@ [ab]{0,2}",
                "[ +-]?[ab \r]{0,3}",
            ],
            0..14,
        ),
        content in prop::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b' '), Just(b'\r'), Just(b'\n'), any::<u8>()], 0..24),
    ) {
        let text = patch_lines.join("\n");
        if let Ok(patch) = parse(&text) {
            let files = BTreeMap::from([("f".to_owned(), content)]);
            let _ = apply(&patch, &files);
        }
    }
}
