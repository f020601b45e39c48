//! Spaces volumes: persistent agent homes saved as snapshots on an object store, and the leases
//! that keep one writer per home across hosts.
//!
//! # What it owns
//! A [`Volume`] is a local directory (the default) or an S3-compatible bucket prefix, reached
//! through `object_store`. It holds, per home:
//! ```text
//! homes/<home>/snapshots/<seq, 20 digits>.json     manifest = the commit (Create-only)
//! homes/<home>/layers/<sha256 of blob>.tar.zst     immutable layer (plain put, multipart if big)
//! homes/<home>/lease/<epoch, 20 digits>.json       lease record (Create-only)
//! ```
//! Big immutable blobs are written plainly, then one small object is written conditionally:
//! put-if-absent is the only conditional primitive needed, so the same code runs on a local
//! directory (which has no compare-and-swap update) and on S3 (`If-None-Match: *`).
//!
//! # Snapshots
//! A manifest lists every entry of the home (path, kind, mode, size, mtime in ns, sha256 of a
//! file's contents, symlink target) and which layer holds each file's contents. A save walks the
//! home once, takes hashes of unchanged files from a stat-cache kept in the host's cache
//! directory, and writes only contents that no layer of the latest snapshot holds into one new
//! layer (a tar of regular files with deterministic headers, zstd-compressed and `finish()`ed).
//! Deletions are the absence of a path from the newer manifest. An unchanged home costs one walk
//! and uploads nothing. [`Volume::compact`] rewrites the latest snapshot as one layer and drops
//! what no kept snapshot needs.
//!
//! # Restores
//! A restore never writes into the target: it builds the snapshot in a fresh staging directory
//! beside it, refusing any entry that would escape (`..`, absolute paths, links leaving the home,
//! entries under a symlink, devices and other entry types), verifies every file's sha256 and every
//! layer's hash, applies modes after contents (read-only trees restore), and swaps the result in
//! with renames. Any failure leaves the target as it was. Imports obey the same refusals.
//!
//! "Leaving the home" is decided twice (case V41). Over the whole set of entries, whatever their
//! order: every symlink is resolved through the other symlinks as the kernel would (`notes ->
//! loop/loop/../../x` with `loop -> .` leaves, though it reads as inside), and every parent of
//! an entry must be a directory entry. And physically: everything is created from a descriptor
//! of the staging directory, one component at a time with `O_NOFOLLOW`, so no write, mode or
//! time ever goes through a symlink (`beneath`). A save lists symlinks that resolve outside as
//! skipped (`symlink_outside`), so what it stores always restores.
//!
//! # Leases
//! See [`Lease`]: epoch records written Create-only, a TTL, renewal, release by a new record,
//! takeover only after expiry, and fencing of every commit.
//!
//! # What it never does
//! It never follows a symlink while saving or restoring, never stores credentials in URLs,
//! errors or records, never deletes a layer a kept snapshot needs, and never runs tar, zstd or
//! file walks on the async threads (they run in `spawn_blocking`).

mod beneath;
mod bridge;
pub mod checkpoint;
mod error;
mod fsops;
mod layer;
mod lease;
mod manifest;
mod save;
mod scan;
mod secrets;
mod store;
mod types;
mod volume;

pub use error::{Result, VolumeError};
pub use lease::Lease;
pub use types::{
    DeleteReport, HomeSummary, LeaseInfo, ListedSnapshot, NoProgress, Progress, RestoreReport, SaveOptions, SaveReport, SecretValue,
    SkippedEntry, SnapshotInfo, VolumeKind,
};
pub use volume::Volume;

/// Removes a local home directory and everything in it, read-only directories included (they
/// are made writable first; symlinks are removed, never followed). A missing path is fine.
/// Errors: `Io`. Blocking: call it from `spawn_blocking` on a large tree.
pub fn remove_tree(path: &std::path::Path) -> Result<()> {
    fsops::force_remove(path)
}
