//! Layers and archives: writing a layer (`tar` of changed files, zstd-compressed, named by the
//! sha256 of the compressed bytes), unpacking layers into a staging directory with every check,
//! and the self-contained export/import archive.
//!
//! All of it is synchronous (tar and zstd are); callers run it in `spawn_blocking`.

use std::collections::HashMap;
use std::fs;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::beneath::Beneath;
use crate::error::{IoContext, Result, VolumeError};
use crate::manifest::{check_rel_path, Entry, Guard, Kind, Manifest};
use crate::scan::{hex, Content};
use crate::types::Progress;

/// zstd level of layers and exports (zstd's default, as `tar -I zstd` uses).
const LEVEL: i32 = 3;

/// Counts and hashes what passes through.
pub(crate) struct HashWriter<W> {
    inner: W,
    sha: Sha256,
    pub len: u64,
}

impl<W: Write> Write for HashWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Counts and hashes what is read through it.
pub(crate) struct HashReader<R> {
    inner: R,
    sha: Sha256,
    len: u64,
}

impl<R: Read> HashReader<R> {
    pub fn new(inner: R) -> Self {
        HashReader { inner, sha: Sha256::new(), len: 0 }
    }
}

impl<R: Read> Read for HashReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sha.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
}

fn threads() -> u32 {
    std::thread::available_parallelism().map(|n| n.get().min(4) as u32).unwrap_or(1)
}

type Encoder = zstd::stream::write::Encoder<'static, HashWriter<BufWriter<fs::File>>>;

fn encoder(file: fs::File) -> io::Result<Encoder> {
    let mut enc = zstd::stream::write::Encoder::new(
        HashWriter { inner: BufWriter::with_capacity(1 << 20, file), sha: Sha256::new(), len: 0 },
        LEVEL,
    )?;
    enc.include_checksum(true)?;
    let n = threads();
    if n > 1 {
        enc.multithread(n)?;
    }
    Ok(enc)
}

/// Finishes the zstd frame (a dropped encoder leaves it unterminated) and the file.
fn finish_encoder(enc: Encoder, path: &Path, sync: bool) -> Result<(String, u64)> {
    let hw = enc.finish().at(path)?;
    let HashWriter { inner, sha, len } = hw;
    let file = inner.into_inner().map_err(|e| VolumeError::io(path, e.into_error()))?;
    if sync {
        file.sync_all().at(path)?;
    }
    Ok((hex(&sha.finalize()), len))
}

fn regular_header(size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(size);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    h
}

/// A layer being written: a tar of regular files only, with deterministic headers (the
/// manifest holds the real metadata), zstd-compressed into a temp file.
pub(crate) struct LayerWriter {
    builder: tar::Builder<Encoder>,
    tmp: tempfile::NamedTempFile,
    pub files: u64,
}

impl LayerWriter {
    pub fn new(dir: &Path) -> Result<LayerWriter> {
        fs::create_dir_all(dir).at(dir)?;
        let tmp = tempfile::NamedTempFile::new_in(dir).at(dir)?;
        let file = tmp.reopen().at(tmp.path())?;
        let mut builder = tar::Builder::new(encoder(file).at(tmp.path())?);
        builder.follow_symlinks(false);
        builder.mode(tar::HeaderMode::Deterministic);
        Ok(LayerWriter { builder, tmp, files: 0 })
    }

    /// Appends `content` as the regular file `path`.
    pub fn append(&mut self, path: &str, content: &Content) -> Result<()> {
        let at = self.tmp.path().to_path_buf();
        match content {
            Content::Mem(b) => self.builder.append_data(&mut regular_header(b.len() as u64), path, &b[..]).at(&at)?,
            Content::Spool(t) => {
                let mut f = t.reopen().at(t.path())?;
                let size = f.metadata().at(t.path())?.len();
                self.builder.append_data(&mut regular_header(size), path, &mut f).at(&at)?
            }
        }
        self.files += 1;
        Ok(())
    }

    /// Ends the tar and the zstd frame; returns the temp file, the blob's sha256 and its length.
    pub fn finish(self) -> Result<(tempfile::NamedTempFile, String, u64)> {
        let enc = self.builder.into_inner().at(self.tmp.path())?;
        // A temp file: the store makes the uploaded copy durable.
        let (sha, len) = finish_encoder(enc, self.tmp.path(), false)?;
        Ok((self.tmp, sha, len))
    }
}

fn refuse_type(path: &str, t: tar::EntryType, allowed: &str) -> VolumeError {
    VolumeError::unsafe_entry(path, format!("entry type {t:?} is refused ({allowed})"))
}

fn entry_path(entry: &tar::Entry<'_, impl Read>) -> Result<String> {
    let raw = entry.path_bytes();
    String::from_utf8(raw.to_vec()).map_err(|_| VolumeError::unsafe_entry(String::from_utf8_lossy(&raw).into_owned(), "path is not UTF-8"))
}

/// Copies `r` into the new file `rel` beneath `root` (never an existing one, never through or
/// at a symlink: [`Beneath::create_file`]), hashing it. Returns (sha256, bytes).
fn write_new(root: &Beneath, rel: &str, r: &mut dyn Read) -> Result<(String, u64)> {
    let mut f = root.create_file(rel)?;
    let mut h = HashReader::new(r);
    io::copy(&mut h, &mut f).map_err(|e| VolumeError::io(root.path().join(rel), e))?;
    Ok((hex(&h.sha.finalize()), h.len))
}

/// Reads the rest of a decoder: a truncated zstd frame shows up only when read to its end.
fn drain(r: &mut impl Read, what: &str) -> Result<()> {
    io::copy(r, &mut io::sink()).map_err(|e| VolumeError::corrupt(what, e.to_string()))?;
    Ok(())
}

/// Unpacks the contents one layer holds for `manifest` into `staging` (directories and symlinks
/// already made). `wants`: entry name in the layer → indices of manifest entries to fill with
/// it. Every file is checked against its manifest size and sha256, the whole blob against the
/// layer's sha256; any other entry type, or an unsafe name, fails with `Unsafe`.
pub(crate) fn unpack_layer(
    input: impl Read,
    layer: &str,
    manifest: &Manifest,
    wants: &HashMap<String, Vec<usize>>,
    staging: &Beneath,
    meter: &mut Meter<'_>,
) -> Result<u64> {
    let what = format!("layer {layer}");
    let corrupt = |why: String| VolumeError::corrupt(what.clone(), why);
    let mut hashed = HashReader::new(input);
    let mut written: std::collections::HashSet<String> = Default::default();
    let mut files = 0u64;
    {
        let dec = zstd::stream::read::Decoder::new(&mut hashed).map_err(|e| corrupt(e.to_string()))?;
        let mut archive = tar::Archive::new(dec);
        for entry in archive.entries().map_err(|e| corrupt(e.to_string()))? {
            let mut entry = entry.map_err(|e| corrupt(e.to_string()))?;
            let name = entry_path(&entry)?;
            let t = entry.header().entry_type();
            if t != tar::EntryType::Regular && t != tar::EntryType::Continuous {
                return Err(refuse_type(&name, t, "a layer holds regular files only"));
            }
            check_rel_path(&name)?;
            let Some(targets) = wants.get(&name) else { continue };
            let first = &manifest.entries[targets[0]];
            let (sha, len) = match write_new(staging, &first.path, &mut entry) {
                Ok(v) => v,
                Err(VolumeError::Io { source, .. }) if source.raw_os_error().is_none() => return Err(corrupt(format!("{name}: {source}"))),
                Err(e) => return Err(e),
            };
            if Some(&sha) != first.sha256.as_ref() || len != first.size {
                return Err(corrupt(format!("{name}: contents do not match the manifest (sha256 {sha}, {len} bytes)")));
            }
            for &i in &targets[1..] {
                staging.copy_file(&first.path, &manifest.entries[i].path)?;
            }
            files += targets.len() as u64;
            meter.add("unpack", len);
            written.insert(name);
        }
        let mut dec = archive.into_inner();
        drain(&mut dec, &what)?;
    }
    drain(&mut hashed, &what)?;
    let sha = hex(&hashed.sha.finalize());
    if sha != layer {
        return Err(corrupt(format!("blob hash is {sha} ({} bytes): truncated or damaged", hashed.len)));
    }
    if let Some(missing) = wants.keys().find(|k| !written.contains(k.as_str())) {
        return Err(corrupt(format!("lacks {missing:?}")));
    }
    Ok(files)
}

/// Bytes done of a known total, reported to a [`Progress`].
pub(crate) struct Meter<'a> {
    pub progress: &'a dyn Progress,
    pub done: u64,
    pub total: u64,
}

impl Meter<'_> {
    pub fn add(&mut self, step: &str, n: u64) {
        self.done += n;
        self.progress.update(step, self.done, Some(self.total));
    }
}

/// Name of the manifest inside an export archive (its first entry).
pub(crate) const EXPORT_MANIFEST: &str = ".spaces-snapshot.json";

/// Writes the export archive of a restored snapshot: the manifest first, then every entry in
/// manifest order, with its real mode and mtime. Temp file + fsync + rename.
pub(crate) fn write_export(manifest: &Manifest, staging: &Beneath, file: &Path, progress: &dyn Progress) -> Result<()> {
    let parent = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = tempfile::NamedTempFile::new_in(&parent).at(&parent)?;
    let out = tmp.reopen().at(tmp.path())?;
    let mut b = tar::Builder::new(encoder(out).at(tmp.path())?);
    b.follow_symlinks(false);
    let json = serde_json::to_vec_pretty(manifest).map_err(|e| VolumeError::corrupt("manifest", e.to_string()))?;
    let at = tmp.path().to_path_buf();
    b.append_data(&mut regular_header(json.len() as u64), EXPORT_MANIFEST, &json[..]).at(&at)?;
    let total: u64 = manifest.entries.iter().map(|e| e.size).sum();
    let mut done = 0;
    for e in &manifest.entries {
        let mut h = tar::Header::new_gnu();
        h.set_mode(e.mode);
        h.set_mtime(e.mtime_ns.div_euclid(1_000_000_000).max(0) as u64);
        h.set_uid(0);
        h.set_gid(0);
        match e.kind {
            Kind::Dir => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                b.append_data(&mut h, format!("{}/", e.path), io::empty()).at(&at)?;
            }
            Kind::Symlink => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                b.append_link(&mut h, &e.path, e.target.as_deref().unwrap_or_default()).at(&at)?;
            }
            Kind::File => {
                let mut f = staging.open_file(&e.path)?;
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(e.size);
                b.append_data(&mut h, &e.path, &mut f).at(&at)?;
                done += e.size;
                progress.update("write", done, Some(total));
            }
        }
    }
    let enc = b.into_inner().at(&at)?;
    finish_encoder(enc, &at, true)?;
    tmp.persist(file).map_err(|e| VolumeError::io(file, e.error))?;
    if let Ok(d) = fs::File::open(&parent) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Unpacks an import archive into the empty directory `staging` with the same refusals as a
/// restore. A leading `./` is dropped; missing parent directories are made. When the archive
/// starts with the export manifest, every file is checked against it. Returns the entries to
/// finish (modes, times) and the archive's root directory metadata if it had one.
pub(crate) fn unpack_import(
    file: &Path,
    staging: &Beneath,
    progress: &dyn Progress,
) -> Result<(Vec<crate::fsops::Finish>, Option<crate::manifest::Root>)> {
    let what = file.display().to_string();
    let corrupt = |why: String| VolumeError::corrupt(what.clone(), why);
    let f = fs::File::open(file).at(file)?;
    let total = f.metadata().at(file)?.len();
    let mut counted = HashReader::new(io::BufReader::with_capacity(1 << 20, f));
    let mut guard = Guard::default();
    let mut finish = Vec::new();
    let mut root = None;
    let mut manifest: Option<Manifest> = None;
    let mut hashes: HashMap<String, String> = HashMap::new();
    let mut links: HashMap<String, String> = HashMap::new();
    let mut first = true;
    {
        let dec = zstd::stream::read::Decoder::new(&mut counted).map_err(|e| corrupt(e.to_string()))?;
        let mut archive = tar::Archive::new(dec);
        for entry in archive.entries().map_err(|e| corrupt(e.to_string()))? {
            let mut entry = entry.map_err(|e| corrupt(e.to_string()))?;
            let raw = entry_path(&entry)?;
            let t = entry.header().entry_type();
            let mode = entry.header().mode().unwrap_or(0o644) & crate::beneath::MODE_MASK;
            let mtime_ns = entry.header().mtime().unwrap_or(0).min(i64::MAX as u64 / 1_000_000_000) as i64 * 1_000_000_000;
            let mut path = raw.as_str();
            while let Some(rest) = path.strip_prefix("./") {
                path = rest;
            }
            let path = path.trim_end_matches('/');
            let is_first = std::mem::replace(&mut first, false);
            if path.is_empty() || path == "." {
                if t == tar::EntryType::Directory {
                    root = Some(crate::manifest::Root { mode, mtime_ns });
                    continue;
                }
                return Err(VolumeError::unsafe_entry(raw.as_str(), "the archive root must be a directory"));
            }
            if is_first && path == EXPORT_MANIFEST && t == tar::EntryType::Regular {
                let mut buf = Vec::new();
                entry.read_to_end(&mut buf).map_err(|e| corrupt(e.to_string()))?;
                manifest = Some(Manifest::parse(&buf, &format!("{what} (its manifest)"))?);
                continue;
            }
            // Refuse before touching the disk: bad names, escapes, and unknown types.
            if raw.starts_with('/') {
                return Err(VolumeError::unsafe_entry(raw.as_str(), "absolute path"));
            }
            check_rel_path(path).map_err(|_| VolumeError::unsafe_entry(raw.as_str(), "`..`, `.` or empty part in path"))?;
            let kind = match t {
                tar::EntryType::Directory => Kind::Dir,
                tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::Link => Kind::File,
                tar::EntryType::Symlink => Kind::Symlink,
                other => {
                    return Err(refuse_type(&raw, other, "only files, directories, symlinks and hard links inside the home are imported"))
                }
            };
            let link = if matches!(t, tar::EntryType::Symlink | tar::EntryType::Link) {
                let l = entry.link_name_bytes().ok_or_else(|| VolumeError::unsafe_entry(raw.as_str(), "link without a target"))?;
                Some(String::from_utf8(l.to_vec()).map_err(|_| VolumeError::unsafe_entry(raw.as_str(), "link target is not UTF-8"))?)
            } else {
                None
            };
            // Parents the archive did not list become plain directories.
            for parent in guard.missing_parents(path) {
                guard.dir(&parent)?;
                staging.mkdir(&parent)?;
                finish.push(crate::fsops::Finish { path: parent, kind: Kind::Dir, mode: 0o700, mtime_ns });
            }
            match t {
                tar::EntryType::Directory => {
                    let fresh = !guard.is_placed(path);
                    guard.dir(path)?;
                    if fresh {
                        staging.mkdir(path)?;
                    } else {
                        // Listed again (or made as a parent first): its own metadata wins.
                        finish.retain(|f| f.path != path);
                    }
                }
                tar::EntryType::Symlink => {
                    let target = link.unwrap_or_default();
                    guard.symlink(path, &target)?;
                    staging.symlink(path, &target)?;
                    links.insert(path.to_string(), target);
                }
                tar::EntryType::Link => {
                    let mut target = link.unwrap_or_default();
                    while let Some(rest) = target.strip_prefix("./") {
                        target = rest.to_string();
                    }
                    guard.hardlink(path, &target)?;
                    staging.copy_file(&target, path)?;
                    if let Some(h) = hashes.get(&target).cloned() {
                        hashes.insert(path.to_string(), h);
                    }
                }
                _ => {
                    guard.file(path)?;
                    let (sha, _) = write_new(staging, path, &mut entry).map_err(|e| match e {
                        VolumeError::Io { source, .. } if source.raw_os_error().is_none() => corrupt(format!("{path}: {source}")),
                        e => e,
                    })?;
                    hashes.insert(path.to_string(), sha);
                    progress.update("unpack", counted_len(&entry), Some(total));
                }
            }
            finish.push(crate::fsops::Finish { path: path.to_string(), kind, mode, mtime_ns });
        }
        let mut dec = archive.into_inner();
        drain(&mut dec, &what)?;
    }
    drain(&mut counted, &what)?;
    // Whatever the order the entries came in: no link resolves outside through the others.
    crate::manifest::check_tree(finish.iter().map(|f| (f.path.as_str(), f.kind, links.get(&f.path).map(String::as_str))))?;
    if let Some(m) = manifest {
        check_against(&m, &hashes, &finish).map_err(corrupt)?;
        // The manifest's nanosecond times and exact modes win over the tar header's.
        let by_path: HashMap<&str, &Entry> = m.entries.iter().map(|e| (e.path.as_str(), e)).collect();
        for f in &mut finish {
            if let Some(e) = by_path.get(f.path.as_str()) {
                f.mtime_ns = e.mtime_ns;
                f.mode = e.mode;
            }
        }
        root = Some(m.root);
    }
    Ok((finish, root))
}

fn counted_len<R: Read>(entry: &tar::Entry<'_, R>) -> u64 {
    entry.raw_file_position()
}

fn check_against(m: &Manifest, hashes: &HashMap<String, String>, finish: &[crate::fsops::Finish]) -> Result<(), String> {
    let present: HashMap<&str, Kind> = finish.iter().map(|f| (f.path.as_str(), f.kind)).collect();
    for e in &m.entries {
        match present.get(e.path.as_str()) {
            None => return Err(format!("{:?} is missing (truncated archive?)", e.path)),
            Some(k) if *k != e.kind => return Err(format!("{:?} is a {k:?}, the manifest says {:?}", e.path, e.kind)),
            _ => {}
        }
        if e.kind == Kind::File && hashes.get(&e.path) != e.sha256.as_ref() {
            return Err(format!("{:?} does not match its sha256 in the manifest", e.path));
        }
    }
    if present.len() != m.entries.len() {
        return Err("holds entries its manifest does not list".into());
    }
    Ok(())
}
