//! `options.files`: attachments sent with `agent_start`, checked before anything is created,
//! written into the run directory's `files` folder (each atomically: temp file, fsync, rename)
//! and named in the first turn's prompt.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use spaces_sdk::{bounded, Attachment};

use crate::error::{Error, Result};

/// The folder of a run directory the attachments go to.
pub(super) const FOLDER: &str = "files";

/// One checked attachment: its name and decoded bytes.
pub(super) struct Checked {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Standard base64, padding optional (what `base64`, Python's `b64encode` and Node's
/// `Buffer.toString('base64')` write, and their unpadded forms).
const ENGINE: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new().with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// Check and decode `files`: plain names, each given once, base64 content of at most
/// [`Attachment::MAX_BYTES`] decoded. Errors: `INVALID_ARGUMENT` naming `options.files[i]`
/// (and the file and the limit for one too big).
pub(super) fn check(files: &[Attachment]) -> Result<Vec<Checked>> {
    let mut out: Vec<Checked> = Vec::with_capacity(files.len());
    for (i, file) in files.iter().enumerate() {
        let field = format!("options.files[{i}]");
        check_name(&file.name).map_err(|why| refused(&field, format!("{field}.name {:?} {why}", bounded(&file.name))))?;
        if out.iter().any(|c| c.name == file.name) {
            return Err(refused(
                &field,
                format!("{field}: the file name {:?} is given twice; each file needs its own name", bounded(&file.name)),
            ));
        }
        let too_big = || {
            refused(
                &field,
                format!(
                    "{field}: the file {:?} is larger than the limit of {} bytes (8 MiB) per file",
                    bounded(&file.name),
                    Attachment::MAX_BYTES
                ),
            )
        };
        // Four base64 characters carry three bytes: a longer text cannot fit, whatever it holds.
        if file.content_base64.len() > Attachment::MAX_BYTES.div_ceil(3) * 4 {
            return Err(too_big());
        }
        let bytes = ENGINE
            .decode(file.content_base64.trim_end())
            .map_err(|e| refused(&field, format!("{field}.content_base64 of {:?} is not standard base64: {e}", bounded(&file.name))))?;
        if bytes.len() > Attachment::MAX_BYTES {
            return Err(too_big());
        }
        out.push(Checked { name: file.name.clone(), bytes });
    }
    Ok(out)
}

/// Why `name` is not a plain file name, if it is not.
fn check_name(name: &str) -> std::result::Result<(), &'static str> {
    if name.is_empty() {
        Err("is empty")
    } else if name == "." || name == ".." {
        Err("names a directory, not a file")
    } else if name.contains(['/', '\\']) {
        Err("holds a path separator; give a plain file name")
    } else if name.contains('\0') {
        Err("holds a NUL character")
    } else if name.len() > 255 {
        Err("is longer than 255 bytes")
    } else {
        Ok(())
    }
}

fn refused(field: &str, message: String) -> Error {
    crate::error::invalid_field(field, message)
}

/// Write `files` into `<run_dir>/files` (0700; each file 0600, written to a temp file, fsynced
/// and renamed into place) and return their absolute paths, in order.
pub(super) fn write(run_dir: &Path, files: &[Checked]) -> std::io::Result<Vec<PathBuf>> {
    let dir = run_dir.join(FOLDER);
    spaces_store::fsutil::create_private_dir(&dir)?;
    let mut paths = Vec::with_capacity(files.len());
    for file in files {
        let path = dir.join(&file.name);
        spaces_store::fsutil::write_private(&path, &file.bytes)?;
        paths.push(path);
    }
    // The renames themselves are durable once the folder is.
    spaces_store::fsutil::blocking(|| std::fs::File::open(&dir)?.sync_all())?;
    Ok(paths)
}

/// `prompt` with a last line naming the attached files' absolute paths (unchanged without any).
pub(super) fn with_files(prompt: &str, paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return prompt.to_owned();
    }
    let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    format!("{}\n\nAttached files (read them from these paths): {}", prompt.trim_end(), list.join(", "))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use spaces_sdk::{ApiError, ErrorCode};

    fn file(name: &str, content: &[u8]) -> Attachment {
        Attachment { name: name.into(), content_base64: base64::engine::general_purpose::STANDARD.encode(content) }
    }

    fn refusal(files: &[Attachment]) -> ApiError {
        match check(files) {
            Err(Error::Api(e)) => e,
            Err(e) => panic!("not an API error: {e}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn attachments_are_checked_by_name_size_uniqueness_and_encoding() {
        let ok = check(&[file("notes.md", b"hello"), file("data.bin", &[0, 255, 10])]).unwrap();
        assert_eq!((ok[0].name.as_str(), ok[0].bytes.as_slice()), ("notes.md", &b"hello"[..]));
        assert_eq!(ok[1].bytes, vec![0, 255, 10]);
        // Unpadded base64 is taken too.
        assert_eq!(check(&[Attachment { name: "a".into(), content_base64: "aGk".into() }]).unwrap()[0].bytes, b"hi");

        for bad in ["", ".", "..", "../x", "a/b", "a\\b", "nul\0"] {
            let e = refusal(&[file("fine", b"x"), file(bad, b"x")]);
            assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidArgument, Some("options.files[1]")), "{bad:?}: {e:?}");
        }
        let e = refusal(&[file("same", b"1"), file("same", b"2")]);
        assert!(e.field.as_deref() == Some("options.files[1]") && e.message.contains("twice"), "{e:?}");
        let e = refusal(&[Attachment { name: "x".into(), content_base64: "not base64!".into() }]);
        assert!(e.message.contains("base64"), "{e:?}");

        let exactly = vec![7u8; Attachment::MAX_BYTES];
        assert_eq!(check(&[file("max", &exactly)]).unwrap()[0].bytes.len(), Attachment::MAX_BYTES);
        let e = refusal(&[file("big.iso", &vec![7u8; Attachment::MAX_BYTES + 1])]);
        assert!(e.message.contains("\"big.iso\"") && e.message.contains(&Attachment::MAX_BYTES.to_string()), "{e:?}");
    }

    #[test]
    fn files_are_written_private_and_named_in_the_prompt() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let paths = write(dir.path(), &check(&[file("a.txt", b"alpha"), file("b.txt", b"beta")]).unwrap()).unwrap();
        assert_eq!(std::fs::read(&paths[0]).unwrap(), b"alpha");
        assert_eq!(std::fs::metadata(&paths[1]).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_dir(dir.path().join(FOLDER)).unwrap().count(), 2, "no temp file is left");
        let prompt = with_files("Summarise them\n", &paths);
        assert!(prompt.starts_with("Summarise them\n\nAttached files"), "{prompt}");
        assert!(prompt.ends_with(&format!("{}, {}", paths[0].display(), paths[1].display())), "{prompt}");
        assert_eq!(with_files("plain", &[]), "plain");
    }
}
