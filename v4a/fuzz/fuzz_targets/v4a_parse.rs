//! Fuzz target `v4a_parse`: arbitrary UTF-8 through the V4A engine must never panic.
//!
//! The input is parsed with `spaces_v4a::parse`; when it parses, it is planned with `spaces_v4a::plan`
//! against three small in-memory trees, so both matching and refusing paths get exercised:
//!
//! 1. fixed files only (`a.txt` LF, `crlf.txt`, `no_eol.txt` without a final newline, `empty.txt`);
//! 2. the fixed files plus every updated or deleted path holding what the patch expects there:
//!    each hunk's `@@` header and old (context and removed) lines, in order, so hunks match;
//! 3. the fixed files plus every updated or deleted path holding the patch text itself.
//!
//! Added files and move destinations stay absent unless a fixed file has that name. Every
//! error is a fine outcome; only a panic (or a sanitizer report) is a bug.

#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use spaces_v4a::{FileOp, Patch};

type Tree = BTreeMap<String, Vec<u8>>;

fn fixed() -> Tree {
    BTreeMap::from([
        ("a.txt".to_owned(), b"one\ntwo\nthree\n".to_vec()),
        ("crlf.txt".to_owned(), b"one\r\ntwo\r\nthree\r\n".to_vec()),
        ("no_eol.txt".to_owned(), b"one\ntwo\nthree".to_vec()),
        ("empty.txt".to_owned(), Vec::new()),
    ])
}

/// What the hunks of `op` expect to find: headers and old lines, one per line.
fn expected_content(op: &FileOp) -> Vec<u8> {
    let mut out = Vec::new();
    if let FileOp::Update { hunks, .. } = op {
        for hunk in hunks {
            for line in hunk.header.as_deref().into_iter().chain(hunk.old_lines()) {
                out.extend_from_slice(line.as_bytes());
                out.push(b'\n');
            }
        }
    }
    out
}

fn with_targets(patch: &Patch, content: impl Fn(&FileOp) -> Vec<u8>) -> Tree {
    let mut tree = fixed();
    for op in &patch.ops {
        if let FileOp::Update { path, .. } | FileOp::Delete { path } = op {
            tree.entry(path.clone()).or_insert_with(|| content(op));
        }
    }
    tree
}

fn plan_against(text: &str, tree: &Tree) {
    if let Ok(plan) = spaces_v4a::plan(text, &BTreeMap::new(), tree) {
        let _ = plan.files();
        for change in &plan.changes {
            let _ = (change.before_version(), change.after_version());
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parsed) = spaces_v4a::parse(text) else {
        return;
    };
    plan_against(text, &fixed());
    plan_against(text, &with_targets(&parsed, expected_content));
    plan_against(text, &with_targets(&parsed, |_| text.as_bytes().to_vec()));
});
