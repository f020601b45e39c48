//! `--env NAME[=VALUE]` and `--env-file FILE` of `agent start`: the agent's extra environment,
//! read so that no secret value needs to be in argv and no error echoes one.

use std::collections::BTreeMap;

/// The agent's extra environment from `--env-file` `files` (in order), then `--env` `given`
/// (`NAME=VALUE`, or `NAME` read with `lookup` from this CLI's environment). Errors name the
/// flag, the variable or the file and line, never a value (it may be a secret): a variable that
/// is not set or not UTF-8, an invalid name, an unreadable file, a line that is not
/// `NAME=VALUE`.
pub(super) fn agent_env(
    given: &[String],
    files: &[std::path::PathBuf],
    lookup: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> anyhow::Result<BTreeMap<String, String>> {
    let mut env = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("--env-file {}: cannot read it: {e}", file.display()))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let line = line.strip_prefix("export ").map(str::trim_start).unwrap_or(line);
            let at = || format!("--env-file {}, line {}", file.display(), n + 1);
            let (name, value) = line.split_once('=').ok_or_else(|| anyhow::anyhow!("{}: expected NAME=VALUE", at()))?;
            let name = name.trim_end();
            if !env_name_ok(name) {
                anyhow::bail!("{}: the name is not a variable name (letters, digits and _, not starting with a digit)", at());
            }
            env.insert(name.to_owned(), unquote(value).ok_or_else(|| anyhow::anyhow!("{}: the value's quote is not closed", at()))?);
        }
    }
    for item in given {
        let (name, value) = match item.split_once('=') {
            Some((name, value)) => (name, value.to_owned()),
            None => {
                let value = lookup(item).ok_or_else(|| {
                    anyhow::anyhow!(
                        "--env {}: no such variable in this shell's environment; export it first, or give --env NAME=VALUE or --env-file FILE",
                        spaces_sdk::bounded(item)
                    )
                })?;
                let value =
                    value.into_string().map_err(|_| anyhow::anyhow!("--env {}: its value is not UTF-8", spaces_sdk::bounded(item)))?;
                (item.as_str(), value)
            }
        };
        if !env_name_ok(name) {
            anyhow::bail!(
                "--env {:?}: not a variable name (letters, digits and _, not starting with a digit); give NAME or NAME=VALUE",
                spaces_sdk::bounded(name)
            );
        }
        env.insert(name.to_owned(), value);
    }
    Ok(env)
}

fn env_name_ok(name: &str) -> bool {
    !name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// An env file's value: as written, or without the `"` or `'` around it (`None`: an opening
/// quote that is not closed at the end).
fn unquote(value: &str) -> Option<String> {
    for q in ['"', '\''] {
        if let Some(rest) = value.strip_prefix(q) {
            return rest.strip_suffix(q).map(str::to_owned);
        }
    }
    Some(value.to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<std::ffi::OsString> {
        (name == "FROM_SHELL").then(|| "shell-secret".into())
    }

    #[test]
    fn env_comes_from_flags_the_shell_and_files_without_echoing_values() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent.env");
        std::fs::write(&file, "# keys\n\nexport A=1\nB=\"two words\"\nC='x=y'\nD=from-file\n").unwrap();
        let env = agent_env(&["FROM_SHELL".into(), "D=flag".into(), "E=".into()], std::slice::from_ref(&file), lookup).unwrap();
        let want: BTreeMap<String, String> =
            [("A", "1"), ("B", "two words"), ("C", "x=y"), ("D", "flag"), ("E", ""), ("FROM_SHELL", "shell-secret")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        assert_eq!(env, want);

        let missing = agent_env(&["NOT_SET".into()], &[], lookup).unwrap_err().to_string();
        assert!(missing.contains("--env NOT_SET: no such variable"), "{missing}");
        let unreadable = agent_env(&[], &[dir.path().join("nope.env")], lookup).unwrap_err().to_string();
        assert!(unreadable.contains("nope.env: cannot read it"), "{unreadable}");
        for (text, says) in [
            ("A=1\nsk-secret-value\n", "line 2: expected NAME=VALUE"),
            ("1A=sk-secret-value\n", "line 1: the name"),
            ("A=\"sk-secret-value\n", "quote is not closed"),
        ] {
            std::fs::write(&file, text).unwrap();
            let e = agent_env(&[], std::slice::from_ref(&file), lookup).unwrap_err().to_string();
            assert!(e.contains(says) && !e.contains("sk-secret"), "{text:?}: {e}");
        }
        let bad = agent_env(&["BAD-NAME".into()], &[], |_| Some("v".into())).unwrap_err().to_string();
        assert!(bad.contains("not a variable name"), "{bad}");
    }
}
