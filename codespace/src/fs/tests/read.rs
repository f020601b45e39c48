//! `read`: versions of the whole file, windows, UTF-8 boundaries, lossy content, refusals.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use spaces_sdk::ErrorCode;

use super::{put, workspace};
use crate::fs::read::{char_boundary, READ_MAX_BYTES};
use crate::fs::ReadResult;

#[test]
fn whole_small_file() {
    let (dir, root) = workspace();
    put(dir.path(), "src/a.txt", b"hello\r\nworld");
    let got = root.read("src/a.txt", None, None).unwrap();
    assert_eq!(
        got,
        ReadResult {
            path: "src/a.txt".into(),
            content: "hello\r\nworld".into(),
            version: spaces_v4a::version(b"hello\r\nworld"),
            truncated: false,
            byte_count: 12,
            offset: None,
            next_offset: None,
            content_lossy: None,
        }
    );
    let json = serde_json::to_value(&got).unwrap();
    assert!(json.get("next_offset").is_none() && json.get("content_lossy").is_none());
}

#[test]
fn window_reports_the_whole_file_and_where_to_continue() {
    let (dir, root) = workspace();
    put(dir.path(), "f", b"hello world");
    let got = root.read("f", Some(6), Some(3)).unwrap();
    assert_eq!((got.content.as_str(), got.truncated, got.next_offset), ("wor", true, Some(9)));
    assert_eq!((got.offset, got.byte_count), (Some(6), 11));
    assert_eq!(got.version, spaces_v4a::version(b"hello world"));
    let rest = root.read("f", got.next_offset, None).unwrap();
    assert_eq!((rest.content.as_str(), rest.truncated, rest.next_offset), ("ld", false, None));
    let past = root.read("f", Some(100), None).unwrap();
    assert_eq!((past.content.as_str(), past.truncated), ("", false));
}

#[test]
fn window_never_cuts_a_utf8_character() {
    let (dir, root) = workspace();
    let text = "aé€b"; // 1 + 2 + 3 + 1 bytes
    put(dir.path(), "u", text.as_bytes());
    let got = root.read("u", None, Some(2)).unwrap();
    assert_eq!((got.content.as_str(), got.next_offset), ("a", Some(1)));
    let got = root.read("u", Some(1), Some(4)).unwrap();
    assert_eq!((got.content.as_str(), got.next_offset), ("é", Some(3)));
    // Reading window by window gives the text back whole, never lossy.
    let (mut at, mut all) = (Some(0), String::new());
    while let Some(offset) = at {
        let got = root.read("u", Some(offset), Some(3)).unwrap();
        assert_eq!(got.content_lossy, None);
        all.push_str(&got.content);
        at = got.next_offset;
    }
    assert_eq!(all, text);
    // A window smaller than one character still moves forward.
    let got = root.read("u", Some(3), Some(1)).unwrap();
    assert_eq!((got.next_offset, got.content_lossy), (Some(4), Some(true)));
    assert_eq!(char_boundary("ab".as_bytes()), 2);
    assert_eq!(char_boundary(&"a€".as_bytes()[..3]), 1);
}

#[test]
fn non_utf8_is_lossy_and_versioned_by_raw_bytes() {
    let (dir, root) = workspace();
    put(dir.path(), "bin", &[0xff, b'a', 0xfe]);
    let got = root.read("bin", None, None).unwrap();
    assert_eq!(got.content, "\u{fffd}a\u{fffd}");
    assert_eq!(got.content_lossy, Some(true));
    assert_eq!(got.version, spaces_v4a::version(&[0xff, b'a', 0xfe]));
}

#[test]
fn limit_is_clamped_to_one_mebibyte() {
    let (dir, root) = workspace();
    let big = vec![b'x'; 2 * 1024 * 1024 + 5];
    put(dir.path(), "big", &big);
    let got = root.read("big", None, Some(10 * READ_MAX_BYTES)).unwrap();
    assert_eq!(got.content.len() as u64, READ_MAX_BYTES);
    assert_eq!((got.truncated, got.next_offset), (true, Some(READ_MAX_BYTES)));
    assert_eq!((got.byte_count, got.version), (big.len() as u64, spaces_v4a::version(&big)));
    assert_eq!(root.read("big", None, Some(0)).unwrap_err().code(), ErrorCode::InvalidArgument);
}

#[test]
fn refusals_say_what_is_wrong() {
    let (dir, root) = workspace();
    put(dir.path(), "d/f.txt", b"");
    let missing = root.read("d/none.txt", None, None).unwrap_err();
    assert_eq!(missing.code(), ErrorCode::FileNotFound);
    assert!(missing.to_string().contains("`absent`"), "{}", missing);
    assert_eq!(root.read("d", None, None).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(root.read("d/f.txt/x", None, None).unwrap_err().code(), ErrorCode::PathNotDirectory);
    assert_eq!(root.read("/etc/passwd", None, None).unwrap_err().code(), ErrorCode::PathEscape);
}
