//! The test-quality gate (issue 16, issue 29), inside `cargo test`: no test is ignored or
//! skipped (also not silently, by returning early with a "skipped" message when the machine
//! lacks something), and docs/testing.md tells the truth. Every `path::name` it names is a
//! `fn name` in that file (no row is exempt), every field case it lists as tested has a test of
//! its name (`case_<id>...`, or `<id>_...`), every `case_<id>` test in the sources has a row,
//! and, when ../shared/cases/CASES.md sits beside the checkout, so does every case of that file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("repo root").to_path_buf()
}

/// Source files of the workspace (`ext`), leaving out build output, installs and hidden dirs.
fn sources(ext: &[&str]) -> Vec<PathBuf> {
    fn walk(dir: &Path, ext: &[&str], out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || ["target", "node_modules", "__pycache__"].contains(&name.as_str()) {
                continue;
            }
            if path.is_dir() {
                walk(&path, ext, out);
            } else if ext.iter().any(|e| name.ends_with(e)) {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo(), ext, &mut out);
    out.sort();
    out
}

fn rel(path: &Path) -> String {
    path.strip_prefix(repo()).unwrap_or(path).display().to_string()
}

/// `file:line: text` of every line of `files` that `hit` flags.
fn offending(files: &[PathBuf], hit: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for (i, line) in text.lines().enumerate() {
            if hit(line.trim()) {
                out.push(format!("{}:{}: {}", rel(f), i + 1, line.trim()));
            }
        }
    }
    out
}

#[test]
fn no_test_is_ignored_or_skipped() {
    // Spelt in two pieces so that this file does not flag itself.
    let ignore = format!("#[{}", "ignore");
    let mut found = offending(&sources(&[".rs"]), |l| l.starts_with(&ignore));
    let skips = [".skip(", ".todo(", "skip: true", "pytest.mark.skip", "pytest.skip(", "mark.xfail"];
    let tests: Vec<PathBuf> = sources(&[".py", ".js", ".mjs", ".ts"])
        .into_iter()
        .filter(|p| {
            let r = rel(p);
            r.starts_with("bindings/python/tests") || r.starts_with("bindings/node/test") || r.starts_with("tests/mcp-clients")
        })
        .collect();
    found.extend(offending(&tests, |l| skips.iter().any(|s| l.contains(s))));
    // A silent skip: a test that prints that it skipped and returns (when not root, say). CI
    // runs as root and an unprivileged daemon is started by the tests themselves; a test that
    // cannot run here fails and says what it needs.
    found.extend(offending(&sources(&[".rs"]), silent_skip));
    assert!(found.is_empty(), "tests that do not run (CI must run every test):\n{}", found.join("\n"));
}

/// A print of a "skipped" message: how a test that returns early announces it.
fn silent_skip(line: &str) -> bool {
    let Some((_, after)) = line.split_once("println!(") else { return false };
    let text = after.trim_start().trim_start_matches('"').to_lowercase();
    text.starts_with("skip") || text.starts_with("test skipped")
}

/// One table row of docs/testing.md: its first cell, the `path::name` references in it, and
/// the whole line.
struct Row {
    first: String,
    refs: Vec<(String, String)>,
    line: String,
}

fn rows() -> Vec<Row> {
    let doc = std::fs::read_to_string(repo().join("docs/testing.md")).expect("docs/testing.md");
    doc.lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
        .map(|l| {
            let first = l.split('|').nth(1).unwrap_or("").trim().to_owned();
            let refs = l
                .split('`')
                .skip(1)
                .step_by(2)
                .filter_map(|s| s.split_once("::"))
                .filter(|(path, name)| {
                    path.ends_with(".rs") && !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
                .map(|(p, n)| (p.to_owned(), n.to_owned()))
                .collect();
            Row { first, refs, line: l.to_owned() }
        })
        .collect()
}

/// A field-case id (`P4`, `E14`, `V21`): a capital letter, then digits.
fn case_id(s: &str) -> Option<String> {
    let mut chars = s.chars();
    let letter = chars.next().filter(char::is_ascii_uppercase)?;
    let digits: String = chars.collect();
    (!digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())).then(|| format!("{letter}{digits}"))
}

/// Whether test `name` is named after case `id`: `case_<id>` or `<id>_`, then the rest (a
/// sub-case letter such as `case_e14b_` counts).
fn named_after(name: &str, id: &str) -> bool {
    let id = id.to_lowercase();
    let after =
        |prefix: String| name.strip_prefix(&prefix).is_some_and(|rest| rest.starts_with(|c: char| c == '_' || c.is_ascii_lowercase()));
    after(format!("case_{id}")) || name.starts_with(&format!("{id}_"))
}

#[test]
fn every_test_named_in_docs_testing_md_exists() {
    let rows = rows();
    let mut missing = Vec::new();
    for row in &rows {
        for (path, name) in &row.refs {
            let text = std::fs::read_to_string(repo().join(path)).unwrap_or_default();
            if !text.contains(&format!("fn {name}(")) {
                missing.push(format!("{path}::{name} (row {:?}): no `fn {name}` in {path}", row.first));
            }
        }
    }

    let cases: BTreeMap<String, &Row> = rows.iter().filter_map(|r| Some((case_id(&r.first)?, r))).collect();
    for (id, row) in &cases {
        if row.refs.is_empty() {
            if !(row.line.contains("not yet tested") && row.line.contains("issue ")) {
                missing.push(format!("{id}: neither tests nor `not yet tested — issue N`"));
            }
        } else if !row.refs.iter().any(|(_, name)| named_after(name, id)) {
            missing.push(format!("{id}: none of its tests is named after it (case_{} or {}_...)", id.to_lowercase(), id.to_lowercase()));
        }
    }

    // Every case test in the sources has its row.
    let mut in_sources = BTreeSet::new();
    for f in sources(&[".rs"]) {
        for line in std::fs::read_to_string(&f).unwrap_or_default().lines() {
            let Some(rest) = line.split("fn case_").nth(1) else { continue };
            let id: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            let id: String = id.chars().take(1).chain(id.chars().skip(1).take_while(char::is_ascii_digit)).collect();
            if let Some(id) = case_id(&id.to_uppercase()) {
                in_sources.insert((id, rel(&f)));
            }
        }
    }
    for (id, file) in &in_sources {
        if !cases.contains_key(id) {
            missing.push(format!("{id}: a case_{} test in {file} but no row in docs/testing.md", id.to_lowercase()));
        }
    }

    // Every case of CASES.md, when it is beside the checkout.
    let cases_md = repo().join("../shared/cases/CASES.md");
    if let Ok(text) = std::fs::read_to_string(&cases_md) {
        for id in text.split("**").skip(1).step_by(2).filter_map(case_id) {
            if !cases.contains_key(&id) {
                missing.push(format!("{id}: in CASES.md, no row in docs/testing.md"));
            }
        }
    } else {
        eprintln!("gate: {} not found; the rows are checked against the sources only", cases_md.display());
    }
    assert!(missing.is_empty(), "docs/testing.md and the tests disagree:\n{}", missing.join("\n"));
}

#[test]
fn the_gate_reads_names_as_the_repo_spells_them() {
    assert!(named_after("case_e14b_auth_error", "E14"));
    assert!(named_after("case_p4_mid_turn", "P4"));
    assert!(named_after("v25_a_saved_session", "V25"));
    assert!(!named_after("case_p40_other", "P4"), "P40 is not P4");
    assert!(!named_after("case_p4", "P4"), "a name says what it tests");
    assert!(!named_after("p7_like_test", "P4"));
    assert_eq!((case_id("R37"), case_id("X"), case_id("case")), (Some("R37".into()), None, None));
}

#[test]
fn the_gate_sees_a_silent_skip() {
    // Spelt in pieces so that this file does not flag itself.
    let print = format!("eprintln!(\"{}: needs root\");", "skipped");
    assert!(silent_skip(&print));
    assert!(silent_skip(&format!("println!(\"{} (no cgroups)\")", "Skipping")));
    assert!(!silent_skip("eprintln!(\"gate: CASES.md not found\");"));
    assert!(!silent_skip("let skipped = 3;"));
}
