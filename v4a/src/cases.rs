//! Planning whole patches against in-memory trees: the X cases and every refusal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use spaces_sdk::ErrorCode;

use super::*;
use crate::error::Error;

fn tree(files: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
    files.iter().map(|(p, c)| ((*p).to_owned(), c.to_vec())).collect()
}

fn patch_of(body: &str) -> String {
    format!("*** Begin Patch\n{body}*** End Patch\n")
}

fn planned(files: &[(&str, &[u8])], body: &str) -> Result<Vec<Change>> {
    apply(&parse(&patch_of(body))?, &tree(files))
}

/// A whole patch text planned against `files`.
fn plan_text(files: &[(&str, &[u8])], text: &str) -> Result<Vec<Change>> {
    apply(&parse(text)?, &tree(files))
}

/// The new content of the only file a one-update patch changes.
fn updated(before: &[u8], body: &str) -> Result<Vec<u8>> {
    let changes = planned(&[("f", before)], &format!("*** Update File: f\n{body}"))?;
    assert_eq!(changes.len(), 1);
    Ok(changes[0].after.clone().unwrap())
}

#[test]
fn case_x17_crlf_and_missing_final_newline_kept() {
    assert_eq!(updated(b"a\r\nb\r\nc", "@@\n a\n-b\n+B\n c\n").unwrap(), b"a\r\nB\r\nc");
    // Added lines take the CRLF style too, wherever they land.
    assert_eq!(updated(b"a\r\nb\r\nc", "@@\n b\n c\n+d\n").unwrap(), b"a\r\nb\r\nc\r\nd");
    assert_eq!(updated(b"a\r\nb\r\n", "@@\n-a\n+x\n+y\n").unwrap(), b"x\r\ny\r\nb\r\n");
    // Removing the last line: the new last line loses its ending, as the file had none.
    assert_eq!(updated(b"a\nb", "@@\n a\n-b\n").unwrap(), b"a");
}

#[test]
fn case_x18a_end_of_file_anchors_last_occurrence() {
    let before = b"marker\nend\nmiddle\nmarker\nend\n";
    let body = "@@\n-marker\n+MARKER\n end\n*** End of File\n";
    assert_eq!(updated(before, body).unwrap(), b"marker\nend\nmiddle\nMARKER\nend\n");
    // Without the anchor the same hunk is ambiguous.
    let err = updated(before, "@@\n-marker\n+MARKER\n end\n").unwrap_err();
    assert!(matches!(err, Error::AmbiguousContext { ref candidates, .. } if candidates == &[1, 4]), "{err}");
    // The anchor refuses a hunk that is not at the end.
    let err = updated(before, "@@\n-middle\n+M\n*** End of File\n").unwrap_err();
    assert!(matches!(err, Error::ContextNotFound { .. }), "{err}");
}

#[test]
fn case_x18b_trailing_space_context_tolerated_only_when_unique() {
    // The file has `keep  ` (trailing spaces), the patch `keep`: accepted, file bytes kept.
    let before = b"one\nkeep  \ntwo\n";
    assert_eq!(updated(before, "@@\n keep\n-two\n+TWO\n").unwrap(), b"one\nkeep  \nTWO\n");
    // Two lines equal to the context once trailing whitespace is ignored: refused, named.
    let before = b"keep  \nx\nkeep\t\nx\n";
    let err = updated(before, "@@\n keep \n-x\n+y\n").unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidPatch);
    assert!(
        matches!(
            &err,
            Error::AmbiguousContext { path, hunk: 1, first_line, candidates }
                if path == "f" && first_line == "keep " && candidates == &[1, 3]
        ),
        "{err:?}"
    );
    // An exact match is preferred over loose ones.
    assert_eq!(updated(before, "@@\n keep\t\n-x\n+y\n").unwrap(), b"keep  \nx\nkeep\t\ny\n");
    // Surrounding whitespace (indentation) is the last resort, still only when unique.
    assert_eq!(updated(b"fn a() {\n    body();\n}\n", "@@\n-body();\n+    done();\n").unwrap(), b"fn a() {\n    done();\n}\n");
}

#[test]
fn ambiguous_hunk_error_names_file_hunk_first_line_and_candidates() {
    let before = b"head\nx = 1\ny\nx = 1\ny\n";
    let err = updated(before, "@@\n-head\n+HEAD\n@@\n x = 1\n-y\n+z\n").unwrap_err();
    assert!(
        matches!(
            &err,
            Error::AmbiguousContext { path, hunk: 2, first_line, candidates }
                if path == "f" && first_line == "x = 1" && candidates == &[2, 4]
        ),
        "{err:?}"
    );
    let text = err.to_string();
    for part in ["hunk 2 of f", "\"x = 1\"", "lines 2, 4"] {
        assert!(text.contains(part), "{text}");
    }
}

#[test]
fn missing_context_is_refused_with_hints() {
    let err = updated(b"a\nb\nc\n", "@@\n a\n-x\n").unwrap_err();
    assert!(
        matches!(
            &err,
            Error::ContextNotFound { path, hunk: 1, first_line, near }
                if path == "f" && first_line == "a" && near == &[1]
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("line 1"), "{err}");
}

#[test]
fn hunks_apply_in_order_each_after_the_previous() {
    let before = b"x\na\nx\nb\nx\n";
    // `x` alone is ambiguous from the start but unique after `b`.
    assert_eq!(updated(before, "@@\n-b\n+B\n@@\n-x\n+X\n").unwrap(), b"x\na\nx\nB\nX\n");
}

/// X40: two hunks in the wrong order (the second's context comes before the first's in the
/// file) are refused with a message that says hunks must follow file order, not that the hunk
/// does not match. Nothing is planned.
#[test]
fn case_x40_hunks_out_of_order_are_refused_naming_the_order() {
    let before = b"x\na\nx\nb\nx\n";
    let err = updated(before, "@@\n-b\n+B\n@@\n-a\n+A\n").unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidPatch);
    assert!(matches!(err, Error::HunkOutOfOrder { hunk: 2, line: 2, after: 4, .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("must follow the file's order") && text.contains("hunk 2 of f"), "{text}");
    // With a header that names an earlier line, the same.
    let err = updated(b"fn a() {\n  x();\n}\nfn b() {\n  y();\n}\n", "@@ fn b() {\n-  y();\n+  Y();\n@@ fn a() {\n-  x();\n+  X();\n")
        .unwrap_err();
    assert!(matches!(err, Error::HunkOutOfOrder { hunk: 2, .. }), "{err:?}");
    // A hunk that matches nowhere at all is still "does not match".
    let err = updated(before, "@@\n-b\n+B\n@@\n-zzz\n+A\n").unwrap_err();
    assert!(matches!(err, Error::ContextNotFound { hunk: 2, .. }), "{err:?}");
}

#[test]
fn header_line_positions_the_hunk() {
    let before = b"fn a() {\n    x();\n}\nfn b() {\n    x();\n}\n";
    let body = "@@ fn b() {\n-    x();\n+    y();\n";
    assert_eq!(updated(before, body).unwrap(), b"fn a() {\n    x();\n}\nfn b() {\n    y();\n}\n");
    // A hunk of only added lines goes right under its header.
    assert_eq!(updated(b"a\nb\n", "@@ a\n+inserted\n").unwrap(), b"a\ninserted\nb\n");
    // Without a header, at the end of the file.
    assert_eq!(updated(b"a\nb", "@@\n+c\n").unwrap(), b"a\nb\nc");
    let err = updated(before, "@@ fn c() {\n-    x();\n").unwrap_err();
    assert!(matches!(err, Error::ContextNotFound { ref first_line, .. } if first_line == "fn c() {"), "{err}");
}

#[test]
fn trailing_empty_context_line_is_dropped_when_it_prevents_a_match() {
    assert_eq!(updated(b"a\nb\n", "@@\n-a\n+A\n b\n\n").unwrap(), b"A\nb\n");
}

#[test]
fn add_creates_a_file_with_lf_lines() {
    let changes = planned(&[], "*** Add File: dir/new.txt\n+hello\n+\n").unwrap();
    assert_eq!(
        changes,
        vec![Change { path: "dir/new.txt".into(), kind: ChangeKind::Add, before: None, after: Some(b"hello\n\n".to_vec()) }]
    );
    assert_eq!(changes[0].before_version(), None);
    assert_eq!(changes[0].after_version(), Some(version(b"hello\n\n")));
}

#[test]
fn add_onto_existing_file_is_refused() {
    let err = planned(&[("a", b"x\n")], "*** Add File: a\n+y\n").unwrap_err();
    assert!(matches!(&err, Error::AddFileExists { path } if path == "a"), "{err:?}");
    assert_eq!(err.code(), ErrorCode::AddFileExists);
}

#[test]
fn delete_plans_removal_and_refuses_missing_files() {
    let changes = planned(&[("a", b"x\n")], "*** Delete File: a\n").unwrap();
    assert_eq!(changes, vec![Change { path: "a".into(), kind: ChangeKind::Delete, before: Some(b"x\n".to_vec()), after: None }]);
    assert_eq!(changes[0].after_version(), None);
    let err = planned(&[], "*** Delete File: a\n").unwrap_err();
    assert_eq!(err.code(), ErrorCode::FileNotFound);
    assert!(matches!(&err, Error::FileNotFound { path, .. } if path == "a"), "{err:?}");
    let err = planned(&[], "*** Update File: a\n@@\n-x\n").unwrap_err();
    assert_eq!(err.code(), ErrorCode::FileNotFound);
}

#[test]
fn move_with_update() {
    let changes = planned(&[("old.rs", b"a\nb\n")], "*** Update File: old.rs\n*** Move to: new.rs\n@@\n-b\n+B\n").unwrap();
    assert_eq!(
        changes,
        vec![Change {
            path: "old.rs".into(),
            kind: ChangeKind::Move { to: "new.rs".into() },
            before: Some(b"a\nb\n".to_vec()),
            after: Some(b"a\nB\n".to_vec()),
        }]
    );
    assert_eq!(changes[0].kind.as_str(), "move");
    // A pure rename keeps the bytes.
    let changes = planned(&[("a", b"x")], "*** Update File: a\n*** Move to: b\n").unwrap();
    assert_eq!(changes[0].after.as_deref(), Some(&b"x"[..]));
}

#[test]
fn move_onto_existing_file_is_refused() {
    let err = planned(&[("a", b"x\n"), ("b", b"y\n")], "*** Update File: a\n*** Move to: b\n@@\n-x\n+z\n").unwrap_err();
    assert!(matches!(&err, Error::MoveDestinationExists { path, to } if path == "a" && to == "b"), "{err:?}");
    assert_eq!(err.code(), ErrorCode::MoveDestinationExists);
}

#[test]
fn later_operations_see_earlier_ones() {
    let body = "*** Add File: a\n+one\n*** Update File: a\n@@\n-one\n+two\n*** Update File: a\n*** Move to: b\n*** Delete File: c\n*** Add File: c\n+again\n";
    let changes = planned(&[("c", b"old\n")], body).unwrap();
    let kinds: Vec<&str> = changes.iter().map(|c| c.kind.as_str()).collect();
    assert_eq!(kinds, ["add", "update", "move", "delete", "add"]);
    assert_eq!(changes[2].after.as_deref(), Some(&b"two\n"[..]));
    // Once moved away, `a` is gone for later operations.
    let err = planned(&[], "*** Add File: a\n+x\n*** Update File: a\n*** Move to: b\n*** Delete File: a\n").unwrap_err();
    assert!(matches!(&err, Error::FileNotFound { path, .. } if path == "a"), "{err:?}");
}

#[test]
fn a_refusal_anywhere_refuses_the_whole_patch() {
    let err = planned(&[("a", b"x\n")], "*** Delete File: a\n*** Update File: b\n@@\n-q\n").unwrap_err();
    assert!(matches!(&err, Error::FileNotFound { path, .. } if path == "b"), "{err:?}");
}

#[test]
fn non_utf8_files_are_patched_byte_for_byte() {
    assert_eq!(updated(b"\xff\xfe\nkeep\n", "@@\n keep\n+new\n").unwrap(), b"\xff\xfe\nkeep\nnew\n");
}

#[test]
fn plan_parses_checks_versions_then_applies() {
    let files = tree(&[("hello.txt", b"hi\n")]);
    let text = "*** Begin Patch\n*** Update File: hello.txt\n@@\n-hi\n+hello\n*** End Patch\n";
    let expected = BTreeMap::from([("hello.txt".to_owned(), version(b"hi\n"))]);
    let plan = plan(text, &expected, &files).unwrap();
    assert_eq!(plan.files(), vec!["hello.txt".to_owned()]);
    assert_eq!(plan.changes[0].after.as_deref(), Some(&b"hello\n"[..]));
    assert_eq!(plan.changes[0].before_version(), Some(version(b"hi\n")));

    let stale = BTreeMap::from([("hello.txt".to_owned(), version(b"older\n"))]);
    assert_eq!(super::plan(text, &stale, &files).unwrap_err().code(), ErrorCode::VersionConflict);
    assert_eq!(super::plan("nope", &stale, &files).unwrap_err().code(), ErrorCode::InvalidPatch);
}

/// A source's own error type: its refusals pass through whole, and the engine's refusals
/// become values of it.
#[test]
fn source_errors_pass_through_in_the_sources_own_type() {
    #[derive(Debug, PartialEq)]
    enum Refusal {
        Symlink(String),
        Engine(Error),
    }
    impl From<Error> for Refusal {
        fn from(e: Error) -> Self {
            Refusal::Engine(e)
        }
    }
    struct Refusing(bool);
    impl Source for Refusing {
        type Error = Refusal;
        fn read(&self, path: &str) -> std::result::Result<Option<Vec<u8>>, Refusal> {
            match self.0 {
                true => Err(Refusal::Symlink(path.to_owned())),
                false => Ok(Some(b"there\n".to_vec())),
            }
        }
    }
    let patch = parse(&patch_of("*** Add File: outbox/pwned.txt\n+x\n")).unwrap();
    assert_eq!(apply(&patch, &Refusing(true)).unwrap_err(), Refusal::Symlink("outbox/pwned.txt".to_owned()));
    assert_eq!(apply(&patch, &Refusing(false)).unwrap_err(), Refusal::Engine(Error::AddFileExists { path: "outbox/pwned.txt".to_owned() }));
}

/// X38: patches as real models write them, each on a one-line file `old`: (a) an indented
/// `*** Update File:` header, (b) an indented final `*** End Patch`, (c) the whole patch in a
/// shell heredoc, (d) a blank line between `*** End of File` and `*** End Patch`. Each applies.
#[test]
fn case_x38_patches_as_models_write_them_apply() {
    let files = [("f.txt", b"old\n".as_slice())];
    let variants = [
        "*** Begin Patch\n  *** Update File: f.txt\n@@\n-old\n+new\n*** End Patch\n",
        "*** Begin Patch\n*** Update File: f.txt\n@@\n-old\n+new\n *** End Patch\n",
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: f.txt\n@@\n-old\n+new\n*** End Patch\nEOF\n",
        "<<\"PATCH\"\n*** Begin Patch\n*** Update File: f.txt\n@@\n-old\n+new\n*** End Patch\nPATCH",
        "*** Begin Patch\n*** Update File: f.txt\n@@\n-old\n+new\n*** End of File\n\n*** End Patch\n",
    ];
    for text in variants {
        let changes = plan_text(&files, text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(changes.len(), 1, "{text:?}");
        assert_eq!(changes[0].after.as_deref(), Some(b"new\n".as_slice()), "{text:?}");
    }
}

/// X38: leniency never relaxes safety. An indented `*** End Patch` followed by more hunk lines
/// is a context line (and here matches nothing); Add over an existing file, ambiguous matches
/// and a heredoc whose terminator is wrong are still refused.
#[test]
fn case_x38_leniency_keeps_every_refusal() {
    let files = [("f.txt", b"old\nold\n".as_slice())];
    let err = plan_text(&files, "*** Begin Patch\n*** Update File: f.txt\n@@\n-old\n+new\n*** End Patch\n").unwrap_err();
    assert!(matches!(err, Error::AmbiguousContext { .. }), "{err:?}");
    let err = plan_text(&files, "*** Begin Patch\n  *** Add File: f.txt\n+x\n*** End Patch\n").unwrap_err();
    assert_eq!(err.code(), ErrorCode::AddFileExists);
    let err = plan_text(&files, "<<'EOF'\n*** Begin Patch\n*** Delete File: f.txt\n*** End Patch\nEND\n").unwrap_err();
    assert!(matches!(err, Error::InvalidPatch { .. }), "{err:?}");
    // A file line that really is `*** End Patch`, in the middle of a hunk, stays context.
    let files = [("p.txt", b"a\n*** End Patch\nb\n".as_slice())];
    let changes = plan_text(&files, "*** Begin Patch\n*** Update File: p.txt\n@@\n a\n *** End Patch\n-b\n+B\n*** End Patch\n").unwrap();
    assert_eq!(changes[0].after.as_deref(), Some(b"a\n*** End Patch\nB\n".as_slice()));
}

/// X39: typographic punctuation in the file, ASCII in the patch: applies when unique after
/// normalisation, keeps the file's own characters on untouched lines, and is refused naming
/// both candidate lines when normalisation makes it ambiguous.
#[test]
fn case_x39_typographic_punctuation_matches_when_unique() {
    let file = "# settings \u{2014} keep\ntimeout = 5  # seconds \u{2013} don\u{2019}t lower\n";
    let files = [("c.py", file.as_bytes())];
    let text = "*** Begin Patch\n*** Update File: c.py\n@@\n # settings - keep\n-timeout = 5  # seconds - don't lower\n+timeout = 10  # seconds - don't lower\n*** End Patch\n";
    let changes = plan_text(&files, text).unwrap();
    let after = String::from_utf8(changes[0].after.clone().unwrap()).unwrap();
    assert_eq!(after, "# settings \u{2014} keep\ntimeout = 10  # seconds - don't lower\n");
    let twice = "x = 1  # a \u{2013} b\ny\nx = 1  # a \u{2014} b\n";
    let files = [("c.py", twice.as_bytes())];
    let err = plan_text(&files, "*** Begin Patch\n*** Update File: c.py\n@@\n-x = 1  # a - b\n+x = 2\n*** End Patch\n").unwrap_err();
    assert!(matches!(err, Error::AmbiguousContext { ref candidates, .. } if candidates == &[1, 3]), "{err:?}");
    assert!(err.to_string().contains("lines 1, 3"), "{err}");
}
