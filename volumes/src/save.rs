//! The synchronous heart of a save: turn one walk into manifest entries, reusing the
//! stat-cache and the previous snapshot's contents, and write what is new into one layer.

use std::collections::HashMap;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::beneath::Beneath;
use crate::error::{Result, VolumeError};
use crate::layer::LayerWriter;
use crate::manifest::{Entry, Kind, Manifest, Root};
use crate::scan::{self, hex, Row, StatCache, Walk, Walked};
use crate::secrets::Scanner;
use crate::types::{Progress, SkippedEntry};

/// Marks entries whose contents go into the layer being written (its name is known only at the end).
pub(crate) const NEW_LAYER: &str = "";

/// The digest of what "unchanged" compares: root, entries (without where contents live),
/// skipped entries and meta.
pub(crate) fn digest(root: &Root, entries: &[Entry], skipped: &[SkippedEntry], meta: &serde_json::Value) -> String {
    let mut h = Sha256::new();
    let mut put = |v: &[u8]| {
        h.update((v.len() as u64).to_le_bytes());
        h.update(v);
    };
    put(&serde_json::to_vec(root).unwrap_or_default());
    for e in entries {
        let bare = Entry { layer: None, src: None, ..e.clone() };
        put(&serde_json::to_vec(&bare).unwrap_or_default());
    }
    put(&serde_json::to_vec(skipped).unwrap_or_default());
    put(&serde_json::to_vec(meta).unwrap_or_default());
    hex(&h.finalize())
}

pub(crate) fn manifest_digest(m: &Manifest) -> String {
    digest(&m.root, &m.entries, &m.skipped, &m.meta)
}

fn entry_of(w: &Walked, sha: Option<String>, size: u64) -> Entry {
    Entry {
        path: w.path.clone(),
        kind: w.kind,
        mode: w.mode,
        size,
        mtime_ns: w.mtime_ns,
        sha256: sha,
        target: w.target.clone(),
        layer: None,
        src: None,
    }
}

/// The entries as the cache alone knows them: `None` if any file misses the cache.
pub(crate) fn cached_entries(walk: &Walk, cache: &StatCache) -> Option<Vec<Entry>> {
    walk.entries
        .iter()
        .map(|w| match w.kind {
            Kind::File => cache.lookup(&w.path, &w.key).map(|(sha, size)| entry_of(w, Some(sha.to_string()), size)),
            _ => Some(entry_of(w, None, 0)),
        })
        .collect()
}

/// What a save will commit.
pub(crate) struct Prepared {
    pub entries: Vec<Entry>,
    pub rows: Vec<Row>,
    pub layer: Option<(tempfile::NamedTempFile, String, u64)>,
    pub hashed: u64,
}

/// Builds the entries of `walk` (directory `dir`). Contents already held by a layer of `prev`
/// (by sha256) are referenced; everything else is read consistently (big files and database
/// copies spooled in `spool`) and written into one new layer in `layer_tmp` (referenced as
/// [`NEW_LAYER`]). Every path and symlink target, and every file read, is searched for the
/// values of `secrets`: one found fails the save with `Secret` naming the entry.
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare(
    dir: &Beneath,
    walk: &Walk,
    cache: Option<&StatCache>,
    prev: Option<&Manifest>,
    spool: &Path,
    layer_tmp: &Path,
    secrets: &Scanner,
    progress: &dyn Progress,
) -> Result<Prepared> {
    if !secrets.is_empty() {
        let names =
            walk.entries.iter().map(|w| (w.path.as_str(), w.target.as_deref())).chain(walk.skipped.iter().map(|s| (s.path.as_str(), None)));
        for (path, target) in names {
            let found = secrets.in_bytes(path.as_bytes()).or_else(|| target.and_then(|t| secrets.in_bytes(t.as_bytes())));
            if let Some(name) = found {
                return Err(secrets.refusal(path, name));
            }
        }
    }
    let mut known: HashMap<String, (String, String)> = HashMap::new();
    if let Some(prev) = prev {
        for e in prev.entries.iter().filter(|e| e.kind == Kind::File) {
            if let (Some(sha), Some(layer)) = (&e.sha256, &e.layer) {
                known.entry(sha.clone()).or_insert_with(|| (layer.clone(), e.src.clone().unwrap_or_else(|| e.path.clone())));
            }
        }
    }
    let total: u64 = walk.entries.iter().filter(|w| w.kind == Kind::File).map(|w| w.size).sum();
    let mut done = 0u64;
    let mut layer: Option<LayerWriter> = None;
    let mut out = Prepared { entries: Vec::with_capacity(walk.entries.len()), rows: Vec::new(), layer: None, hashed: 0 };
    for w in &walk.entries {
        if w.kind != Kind::File {
            out.entries.push(entry_of(w, None, 0));
            continue;
        }
        done += w.size;
        let cached = cache.and_then(|c| c.lookup(&w.path, &w.key)).map(|(s, n)| (s.to_string(), n));
        if let Some((sha, size)) = &cached {
            if let Some((l, src)) = known.get(sha) {
                let mut e = entry_of(w, Some(sha.clone()), *size);
                e.layer = Some(l.clone());
                e.src = (src != &w.path).then(|| src.clone());
                out.entries.push(e);
                out.rows.push(Row(w.path.clone(), w.key, sha.clone(), *size, cache_row_time(cache, &w.path)));
                continue;
            }
        }
        // Read it: consistently, and a live SQLite database through SQLite itself.
        let hashed_at = scan::now_ns();
        let Some((content, sha, key)) = scan::read_consistent(dir, &w.path, w.sqlite_wal.then_some(w.key), spool)? else { continue };
        out.hashed += 1;
        progress.update("hash", done, Some(total));
        if let Some(name) = secrets.in_content(&content).map_err(|e| VolumeError::io(dir.path().join(&w.path), e))? {
            return Err(secrets.refusal(&w.path, name));
        }
        let size = match &content {
            scan::Content::Mem(b) => b.len() as u64,
            scan::Content::Spool(t) => t.as_file().metadata().map(|m| m.len()).unwrap_or(0),
        };
        let mut key = key;
        key.aux = w.key.aux;
        out.rows.push(Row(w.path.clone(), key, sha.clone(), size, hashed_at));
        let mut e = entry_of(w, Some(sha.clone()), size);
        if !w.sqlite_wal {
            // What was read is what is stored: its own size and time.
            e.size = key.size;
            e.mtime_ns = key.mtime_ns;
        }
        if let Some((l, src)) = known.get(&sha) {
            e.layer = Some(l.clone());
            e.src = (src != &w.path).then(|| src.clone());
        } else {
            let writer = match layer.as_mut() {
                Some(l) => l,
                None => layer.insert(LayerWriter::new(layer_tmp)?),
            };
            writer.append(&w.path, &content)?;
            known.insert(sha, (NEW_LAYER.to_string(), w.path.clone()));
            e.layer = Some(NEW_LAYER.to_string());
        }
        out.entries.push(e);
    }
    if let Some(l) = layer {
        out.layer = Some(l.finish()?);
    }
    Ok(out)
}

fn cache_row_time(cache: Option<&StatCache>, path: &str) -> i64 {
    cache.and_then(|c| c.row_time(path)).unwrap_or(0)
}
