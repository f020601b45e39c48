//! `read`: a window of one regular file, with the version of the whole file.
//!
//! The file is streamed once: every byte goes into the SHA-256 (so `version` and `byte_count`
//! describe the whole file, not the window) and the bytes inside the window are kept. A window
//! never ends inside a UTF-8 character when more bytes follow: it is shortened to the last
//! character boundary and `next_offset` points there.

use std::io::Read;

use super::{confine, Root};
use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use spaces_sdk::tools::{ReadRequest, ReadResult};

/// Largest window `read` returns, in bytes (API.md `read_max_bytes`): the SDK's
/// [`ReadRequest::LIMIT_MAX`]. Also the default.
pub const READ_MAX_BYTES: u64 = ReadRequest::LIMIT_MAX;

impl Root {
    /// Reads `path` from byte `offset` (default 0), at most `limit` bytes (default and maximum
    /// [`READ_MAX_BYTES`]; a larger limit is clamped to it). An offset past the end gives an
    /// empty window.
    ///
    /// Errors: `INVALID_ARGUMENT` for `limit` 0 or a directory; `FILE_NOT_FOUND` (its version
    /// is `absent`); `PATH_ESCAPE`, `SYMLINK_REJECTED`, `SPECIAL_FILE_REJECTED`,
    /// `PATH_NOT_DIRECTORY`, `FILE_OPERATION_FAILED` (see the `confine` module).
    pub fn read(&self, path: &str, offset: Option<u64>, limit: Option<u64>) -> Result<ReadResult> {
        let limit = limit.unwrap_or(ReadRequest::LIMIT_DEFAULT).min(READ_MAX_BYTES);
        if limit == 0 {
            return Err(Error::invalid("limit must be at least 1 byte (at most 1048576)"));
        }
        let Some((mut file, _)) = confine::open_regular(self.fd(), path)? else {
            return Err(Error::FileNotFound {
                path: path.to_owned(),
                hint: "; its version is `absent` (use that in expected_versions to require it stays absent, or create it with `*** Add File:`)",
            });
        };
        let start = offset.unwrap_or(0);
        let end = start.saturating_add(limit);
        let mut hasher = Sha256::new();
        let mut window = Vec::new();
        let mut total: u64 = 0;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(source) => return Err(Error::FileOperationFailed { path: path.to_owned(), action: "reading", source }),
            };
            let chunk = &buf[..n];
            hasher.update(chunk);
            let chunk_start = total;
            total += n as u64;
            // Keep the part of the chunk inside [start, end).
            let lo = start.max(chunk_start);
            let hi = end.min(total);
            if lo < hi {
                let a = usize::try_from(lo - chunk_start).unwrap_or(n);
                let b = usize::try_from(hi - chunk_start).unwrap_or(n);
                window.extend_from_slice(&chunk[a..b]);
            }
        }
        let window_start = start.min(total);
        let mut window_end = window_start + window.len() as u64;
        if window_end < total {
            let keep = char_boundary(&window);
            window.truncate(keep);
            window_end = window_start + keep as u64;
        }
        let truncated = window_end < total;
        let (content, lossy) = match String::from_utf8(window) {
            Ok(text) => (text, None),
            Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), Some(true)),
        };
        Ok(ReadResult {
            path: spaces_v4a::normalize_path(path),
            content,
            version: spaces_v4a::version_of_digest(&hasher.finalize()),
            truncated,
            byte_count: total,
            offset,
            next_offset: truncated.then_some(window_end),
            content_lossy: lossy,
        })
    }
}

/// The length of `window` without a UTF-8 character cut at its end. Unchanged when the end is
/// on a boundary, when the tail is not UTF-8 anyway, or when cutting would leave nothing (a
/// window smaller than one character must still move the reader forward).
pub(crate) fn char_boundary(window: &[u8]) -> usize {
    let len = window.len();
    // A character is at most 4 bytes: look back at most 3 bytes for its lead byte.
    for back in 1..=len.min(4) {
        let i = len - back;
        let b = window[i];
        if b & 0xC0 == 0x80 {
            continue; // continuation byte: keep looking for the lead
        }
        let need = match b {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return len,
        };
        return if need > back && i > 0 { i } else { len };
    }
    len
}
