//! Ledger tests on real SQLite files in a TempDir. A "crash" is dropping a `Ledger` mid-operation
//! and opening a new one on the same file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approvals;
mod fingerprint;
mod operations;
mod retention;

use std::path::PathBuf;

use tempfile::TempDir;

use super::Ledger;

/// A temp dir and the ledger file path inside it.
fn ledger_file() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    (dir, path)
}

/// Open a fresh ledger (the dir must outlive it).
fn open() -> (TempDir, PathBuf, Ledger) {
    let (dir, path) = ledger_file();
    let ledger = Ledger::open(&path).unwrap();
    (dir, path, ledger)
}
