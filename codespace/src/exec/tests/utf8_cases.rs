//! Output as text: the retained window and every chunk are whole UTF-8 characters, so a reader
//! never sees a U+FFFD the program did not print (CASES.md R36).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tempfile::TempDir;

use super::support::{limits, read_all, spec, tagged_n, tty_spec, PATIENCE};
use crate::exec::{ExecLimits, ExecSpec, Processes};

/// 400,000 `€` (3 bytes each), no newline.
const EUROS: &str = "yes € | head -n 400000 | tr -d '\\n'";
const EURO_COUNT: u64 = 400_000;

/// R36 in one mode: follow the output as it arrives, then read from cursor 0 after the exit.
async fn r36(make: fn(&TempDir, &[&str]) -> ExecSpec) {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    let id = p.exec(make(&dir, &["sh", "-c", EUROS])).unwrap().process_id;
    let followed = read_all(&p, &id).await;
    assert!(followed.chars().all(|c| c == '€'), "a page split a character: {:?}", followed.char_indices().find(|(_, c)| *c != '€'));
    p.wait_exit(&id).await.unwrap();

    let r = tokio::time::timeout(PATIENCE, p.read(&id, Some(0), None)).await.unwrap().unwrap();
    let total = EURO_COUNT * 3;
    let euro_len = 3;
    // The window keeps the last `retained_bytes`, less the rest of the one character the cut
    // went through.
    let cut = total - ExecLimits::default().retained_bytes as u64;
    let window_start = cut.div_ceil(euro_len) * euro_len;
    assert_eq!(
        (r.cursor, r.eof, r.output_lost, r.retained_from),
        (total, true, true, window_start),
        "chunk starts with {:?}",
        r.chunk.chars().take(3).collect::<String>()
    );
    assert_eq!(r.chunk, "€".repeat(((total - window_start) / euro_len) as usize));
    let status = p.status(&id).unwrap();
    assert_eq!((status.output_total, status.output_retained_from, status.eof), (total, window_start, true));
}

#[tokio::test]
async fn case_r36_400k_euro_signs_over_a_pipe_keep_a_window_of_whole_characters() {
    r36(spec).await;
}

#[tokio::test]
async fn case_r36_400k_euro_signs_over_a_pty_keep_a_window_of_whole_characters() {
    r36(tty_spec).await;
}

/// The end of the output: a program that ends with half a character printed exactly that (its
/// U+FFFD is real); when collection stops at the drain deadline because a descendant still holds
/// the output, the half character is ours to cut and is never shown.
#[tokio::test]
async fn an_incomplete_last_character_is_shown_only_when_the_program_ended_with_it() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    let id = p.exec(spec(&dir, &["sh", "-c", "printf 'x\\342\\202'"])).unwrap().process_id;
    assert_eq!(read_all(&p, &id).await, "x\u{FFFD}");

    let s = spec(&dir, &["sh", "-c", "printf 'x\\342\\202'; sleep 30 &"]);
    let tag = s.tag.clone();
    let id = p.exec(s).unwrap().process_id;
    p.wait_exit(&id).await.unwrap();
    assert_eq!(tagged_n(&tag, 1).await.len(), 1, "the sleep holds the output open");
    assert_eq!(read_all(&p, &id).await, "x");
    let r = p.read(&id, Some(0), None).await.unwrap();
    assert_eq!((r.chunk.as_str(), r.cursor, r.eof), ("x", 1, true));
    assert_eq!(p.status(&id).unwrap().output_total, 3, "the cut bytes were collected, not shown");
    p.terminate(&id).await.unwrap();
}
