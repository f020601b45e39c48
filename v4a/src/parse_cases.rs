//! The parser's cases: every operation, the tolerated spellings, and errors that name the
//! patch line and what was expected there.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::error::Error;
use crate::parse::*;

fn parse_err(text: &str) -> (usize, String) {
    match parse(text) {
        Err(Error::InvalidPatch { line, message }) => (line, message),
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn parses_every_operation() {
    let text = "*** Begin Patch\n\
                *** Add File: new.txt\n+one\n+two\n\
                *** Delete File: old.txt\n\
                *** Update File: src/a.rs\n*** Move to: src/b.rs\n\
                @@ fn main() {\n-    old();\n+    new();\n     keep();\n\
                @@\n x\n+y\n*** End of File\n\
                *** End Patch\n";
    let patch = parse(text).unwrap();
    assert_eq!(
        patch,
        Patch {
            ops: vec![
                FileOp::Add { path: "new.txt".into(), lines: vec!["one".into(), "two".into()] },
                FileOp::Delete { path: "old.txt".into() },
                FileOp::Update {
                    path: "src/a.rs".into(),
                    move_to: Some("src/b.rs".into()),
                    hunks: vec![
                        Hunk {
                            header: Some("fn main() {".into()),
                            lines: vec![
                                HunkLine::Remove("    old();".into()),
                                HunkLine::Add("    new();".into()),
                                HunkLine::Context("    keep();".into()),
                            ],
                            end_of_file: false,
                            patch_line: 8,
                        },
                        Hunk {
                            header: None,
                            lines: vec![HunkLine::Context("x".into()), HunkLine::Add("y".into())],
                            end_of_file: true,
                            patch_line: 12,
                        },
                    ],
                },
            ]
        }
    );
}

#[test]
fn case_x18c_begin_patch_with_trailing_spaces() {
    let text = "*** Begin Patch   \n*** Update File: a.txt  \n@@  \n-a\n+b\n*** End Patch \t\n";
    let patch = parse(text).unwrap();
    assert_eq!(patch.ops.len(), 1);
    assert_eq!(patch.ops[0].path(), "a.txt");
}

#[test]
fn crlf_patch_text_and_surrounding_blank_lines_are_accepted() {
    let patch = parse("\n\r\n*** Begin Patch\r\n*** Delete File: a\r\n*** End Patch\r\n\r\n").unwrap();
    assert_eq!(patch.ops, vec![FileOp::Delete { path: "a".into() }]);
}

#[test]
fn first_hunk_may_omit_the_at_at_line_and_empty_lines_are_context() {
    let patch = parse("*** Begin Patch\n*** Update File: a\n-x\n\n+y\n*** End Patch").unwrap();
    let FileOp::Update { hunks, .. } = &patch.ops[0] else { panic!("not an update") };
    assert_eq!(hunks[0].lines, vec![HunkLine::Remove("x".into()), HunkLine::Context(String::new()), HunkLine::Add("y".into())]);
}

#[test]
fn blank_lines_after_an_added_file_are_ignored() {
    let patch = parse("*** Begin Patch\n*** Add File: a\n+x\n\n  \n*** End Patch\n").unwrap();
    assert_eq!(patch.ops, vec![FileOp::Add { path: "a".into(), lines: vec!["x".into()] }]);
}

#[test]
fn pure_rename_needs_no_hunk_but_a_plain_update_does() {
    let patch = parse("*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch\n").unwrap();
    assert_eq!(patch.ops, vec![FileOp::Update { path: "a".into(), move_to: Some("b".into()), hunks: vec![] }]);
    let (line, message) = parse_err("*** Begin Patch\n*** Update File: a\n*** End Patch\n");
    assert_eq!(line, 2);
    assert!(message.contains("has no hunk"), "{message}");
}

#[test]
fn errors_name_the_line_and_what_was_expected() {
    let cases: &[(&str, usize, &str)] = &[
        ("", 1, "expected `*** Begin Patch`, found an empty patch"),
        ("hello\n", 1, "expected `*** Begin Patch`, found `hello`"),
        ("*** Begin Patch\n*** Add File: a\n+x\n", 4, "expected `*** End Patch` before the end"),
        ("*** Begin Patch\n*** Frobnicate: a\n*** End Patch", 2, "expected `*** Add File:`"),
        ("*** Begin Patch\n*** Add File: a\nx\n*** End Patch", 3, "expected a `+` line"),
        ("*** Begin Patch\n*** Add File: a\n+x\n\n+y\n*** End Patch", 4, "expected a `+` line"),
        ("*** Begin Patch\n*** Add File:   \n*** End Patch", 2, "expected a path after `*** Add File:`"),
        ("*** Begin Patch\n*** Update File: a\n@@\n*** End Patch", 3, "expected hunk lines"),
        ("*** Begin Patch\n*** Update File: a\n@@\n x\n?y\n*** End Patch", 5, "starting with ` `, `-` or `+`"),
        ("*** Begin Patch\n*** Update File: a\n@@x\n y\n*** End Patch", 3, "expected `@@` or `@@ <context line>`"),
        ("*** Begin Patch\n*** Update File: a\n*** End of File\n*** End Patch", 3, "must close a hunk"),
        ("*** Begin Patch\n*** Delete File: a\n*** End Patch\nmore\n", 4, "expected nothing after"),
        ("*** Begin Patch\n*** End Patch\n", 2, "no file operation"),
    ];
    for (text, line, expected) in cases {
        let (got_line, message) = parse_err(text);
        assert_eq!((got_line, message.contains(expected)), (*line, true), "{text:?}: {message}");
    }
}

#[test]
fn error_message_carries_line_number() {
    let e = parse("*** Begin Patch\n*** Add File: a\nx\n*** End Patch").unwrap_err();
    assert!(e.to_string().contains("line 3"), "{e}");
}
