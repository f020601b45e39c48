//! The content-addressed store of one run's checkpoints: `objects/<sha256[..2]>/<sha256>`, each
//! file's contents once, verified when read back.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{IoContext, Result, VolumeError};
use crate::scan::{hex, Content};

/// The objects of the checkpoints in one directory.
pub(crate) struct Objects {
    dir: PathBuf,
}

impl Objects {
    pub fn new(checkpoints: &Path) -> Objects {
        Objects { dir: checkpoints.join("objects") }
    }

    /// Where big files are spooled while read (the same file system: persisted by rename).
    pub fn spool_dir(&self) -> PathBuf {
        self.dir.clone()
    }

    fn path(&self, sha: &str) -> PathBuf {
        self.dir.join(&sha[..2.min(sha.len())]).join(sha)
    }

    /// Store `content` (whose sha256 is `sha`) unless it is stored already; returns the bytes
    /// written (0 when it was).
    pub fn put(&self, sha: &str, content: Content) -> Result<u64> {
        let file = self.path(sha);
        let len = match &content {
            Content::Mem(bytes) => bytes.len() as u64,
            Content::Spool(tmp) => tmp.as_file().metadata().at(tmp.path())?.len(),
        };
        // Stored already (a file cut short by a crash is written again).
        if std::fs::metadata(&file).is_ok_and(|m| m.len() == len) {
            return Ok(0);
        }
        let parent = file.parent().unwrap_or(&self.dir).to_path_buf();
        std::fs::create_dir_all(&parent).at(&parent)?;
        let (tmp, len) = match content {
            Content::Mem(bytes) => {
                let mut tmp = tempfile::NamedTempFile::new_in(&parent).at(&parent)?;
                tmp.write_all(&bytes).at(tmp.path())?;
                (tmp, bytes.len() as u64)
            }
            Content::Spool(tmp) => {
                let len = tmp.as_file().metadata().at(tmp.path())?.len();
                (tmp, len)
            }
        };
        tmp.persist(&file).map_err(|e| VolumeError::io(&file, e.error))?;
        Ok(len)
    }

    /// The contents stored under `sha`, checked against it. Errors: `Corrupt` when missing or
    /// not matching.
    pub fn get(&self, sha: &str) -> Result<Vec<u8>> {
        let file = self.path(sha);
        let mut bytes = Vec::new();
        std::fs::File::open(&file)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| VolumeError::corrupt(format!("checkpoint content {sha}"), e.to_string()))?;
        if hex(&Sha256::digest(&bytes)) != sha {
            return Err(VolumeError::corrupt(format!("checkpoint content {sha}"), "does not match its sha256"));
        }
        Ok(bytes)
    }

    /// Check that the contents stored under `sha` are there and match it (read, not kept).
    /// Errors: `Corrupt`.
    pub fn verify(&self, sha: &str) -> Result<()> {
        let file = self.path(sha);
        let mut h = Sha256::new();
        let mut f = std::fs::File::open(&file).map_err(|e| VolumeError::corrupt(format!("checkpoint content {sha}"), e.to_string()))?;
        std::io::copy(&mut f, &mut h).map_err(|e| VolumeError::corrupt(format!("checkpoint content {sha}"), e.to_string()))?;
        if hex(&h.finalize()) != sha {
            return Err(VolumeError::corrupt(format!("checkpoint content {sha}"), "does not match its sha256"));
        }
        Ok(())
    }

    /// Delete every object not in `needed`.
    pub fn keep_only(&self, needed: &HashSet<String>) -> Result<()> {
        for fan in std::fs::read_dir(&self.dir).at(&self.dir)?.flatten() {
            let Ok(inner) = std::fs::read_dir(fan.path()) else { continue };
            for obj in inner.flatten() {
                let name = obj.file_name().to_string_lossy().into_owned();
                if !needed.contains(&name) {
                    let _ = std::fs::remove_file(obj.path());
                }
            }
        }
        Ok(())
    }
}

/// Bytes of the regular files under `dir` (a hard-linked file counted once).
pub(crate) fn du(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut seen = HashSet::new();
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let Ok(md) = e.path().symlink_metadata() else { continue };
            if md.is_dir() {
                stack.push(e.path());
            } else if md.is_file() && seen.insert(md.ino()) {
                total += md.len();
            }
        }
    }
    total
}
