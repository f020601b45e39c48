//! Tool callers' tokens: `<state dir>/tokens.json` (0600), written by `spacesd token
//! create|revoke` and read by the daemon on the next request (no restart).
//!
//! A token is shown once, when it is created; the file keeps only its SHA-256 (hex), its id
//! (`tok-<8 hex>`, for `revoke`), its Space and its scope. A file that others may read is
//! ignored (every caller token is refused) with a warning in the daemon's log.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a caller's token may do within its Space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum CallerScope {
    /// Every tool and agent operation of the Space (not the operator's: `space_add`,
    /// `space_list`, `approval_resolve`, `/inbox`).
    Control,
    /// Only the operations that change nothing (`read`, `find`, `agent_status`,
    /// `agent_events`, `process_status`, ...).
    Watch,
}

impl CallerScope {
    /// `control | watch`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallerScope::Control => "control",
            CallerScope::Watch => "watch",
        }
    }
}

/// One token as the file keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// `tok-<8 hex>`: names the token in `list` and `revoke`; not a secret.
    pub id: String,
    /// The one Space it may act on.
    pub space: String,
    pub scope: CallerScope,
    /// Lower-case hex SHA-256 of the token.
    pub sha256: String,
    pub created_ms: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TokensFile {
    tokens: Vec<TokenRecord>,
}

/// `<state dir>/tokens.json`.
pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join("tokens.json")
}

/// Lower-case hex SHA-256 of `secret`.
pub fn digest(secret: &str) -> String {
    Sha256::digest(secret.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn read(file: &Path) -> anyhow::Result<TokensFile> {
    match std::fs::read(file) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| anyhow::anyhow!("invalid tokens file {}: {e}", file.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TokensFile::default()),
        Err(e) => Err(anyhow::anyhow!("cannot read tokens file {}: {e}", file.display())),
    }
}

fn write(file: &Path, tokens: &TokensFile) -> anyhow::Result<()> {
    let bytes = serde_json::to_vec_pretty(tokens)?;
    // Write beside it and rename: the daemon never reads half a file.
    let tmp = file.with_extension("json.tmp");
    spaces_store::fsutil::write_private(&tmp, &bytes)?;
    std::fs::rename(&tmp, file)?;
    Ok(())
}

/// Creates a token for `space` with `scope`: returns its record and the secret (shown once).
pub fn create(state_dir: &Path, space: &str, scope: CallerScope) -> anyhow::Result<(TokenRecord, String)> {
    spaces_store::fsutil::create_private_dir(state_dir)?;
    let file = path(state_dir);
    let mut tokens = read(&file)?;
    let secret = format!("spc_{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    let id = format!("tok-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let record = TokenRecord { id, space: space.to_owned(), scope, sha256: digest(&secret), created_ms: spaces_store::now_ms() };
    tokens.tokens.push(record.clone());
    write(&file, &tokens)?;
    Ok((record, secret))
}

/// Every token's record (no secrets).
pub fn list(state_dir: &Path) -> anyhow::Result<Vec<TokenRecord>> {
    Ok(read(&path(state_dir))?.tokens)
}

/// Removes the token `id`; false when there is none.
pub fn revoke(state_dir: &Path, id: &str) -> anyhow::Result<bool> {
    let file = path(state_dir);
    let mut tokens = read(&file)?;
    let before = tokens.tokens.len();
    tokens.tokens.retain(|t| t.id != id);
    if tokens.tokens.len() == before {
        return Ok(false);
    }
    write(&file, &tokens)?;
    Ok(true)
}

/// When the tokens file was last changed, and how long it is: read again when either differs.
type Stamp = Option<(SystemTime, u64)>;

/// The daemon's view of the tokens file, read again whenever it changed.
pub struct Book {
    file: PathBuf,
    cached: Mutex<(Stamp, Vec<TokenRecord>)>,
}

impl Book {
    /// The tokens of `<state dir>/tokens.json`.
    pub fn new(state_dir: &Path) -> Book {
        Book { file: path(state_dir), cached: Mutex::new((None, Vec::new())) }
    }

    /// The record whose hash is `digest` of the presented token, if any.
    pub fn find(&self, presented_digest: &str) -> Option<TokenRecord> {
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        let meta = std::fs::metadata(&self.file).ok();
        let stamp = meta.as_ref().and_then(|m| Some((m.modified().ok()?, m.len())));
        if stamp != cached.0 || stamp.is_none() {
            let tokens = match &meta {
                None => Vec::new(),
                Some(m) if m.permissions().mode() & 0o077 != 0 => {
                    tracing::warn!(file = %self.file.display(), "tokens file is readable by others: every caller token is refused until it is 0600");
                    Vec::new()
                }
                Some(_) => read(&self.file).map(|f| f.tokens).unwrap_or_else(|e| {
                    tracing::warn!("{e:#}: every caller token is refused until it is fixed");
                    Vec::new()
                }),
            };
            *cached = (stamp, tokens);
        }
        cached.1.iter().find(|t| t.sha256 == presented_digest).cloned()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_stored_hashed_private_and_found_until_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let book = Book::new(dir.path());
        let (rec, secret) = create(dir.path(), "proj", CallerScope::Watch).unwrap();
        let text = std::fs::read_to_string(path(dir.path())).unwrap();
        assert!(!text.contains(&secret), "the secret is not stored");
        assert!(text.contains(&digest(&secret)));
        assert_eq!(std::fs::metadata(path(dir.path())).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(book.find(&digest(&secret)), Some(rec.clone()));
        assert_eq!(book.find(&digest("spc_guess")), None);
        assert_eq!(list(dir.path()).unwrap(), vec![rec.clone()]);
        assert!(revoke(dir.path(), &rec.id).unwrap());
        assert!(!revoke(dir.path(), &rec.id).unwrap());
        assert_eq!(book.find(&digest(&secret)), None, "a revoked token is refused at once");
    }
}
