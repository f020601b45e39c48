//! A run's MCP servers: the caller's `options.mcp_servers`, checked at `agent_start`, and the
//! `spaces` server that `options.space_tools` adds (spacesd's own tools, scoped to the run's
//! Space: `spacesd mcp --space`, see `spacesd`'s `access::scope`). The harness turns the list into its
//! CLI's config format; this module decides what is on the list.
//!
//! The `spaces` server is this daemon's own binary, given the daemon's state dir explicitly (so
//! it reaches this daemon whatever `SPACES_HOME` the agent has) and `--no-autostart` (a daemon
//! started from inside a run would carry the agent's environment and die with the run). The CLI
//! starts it with the agent's environment (Claude Code passes its own, Codex a short allowlist of
//! it) and the entry adds nothing: the daemon's token is never in an environment (the server
//! talks to the daemon over its 0600 Unix socket), and the daemon's provider keys reach neither
//! the agent nor the server unless the caller forwarded them with `env_from_host`.
//!
//! Secrets: stdio `env` values and HTTP `headers` values are kept 0600 in the run directory
//! ([`super::secrets`]); the stored options carry the names with `[redacted]` values
//! ([`redacted`]), like `options.env`.

use std::path::{Path, PathBuf};

use spaces_os::redact::REDACTED;
use spaces_sdk::{bounded, ApiError, ErrorCode, McpServer, McpStdioServer, SpaceAgentOptions};

use crate::error::{Error, Result};

/// The name of the server `space_tools` adds (reserved while `space_tools` is on).
pub const SPACE_TOOLS_SERVER: &str = "spaces";

/// Longest server name.
const NAME_MAX: usize = 64;

/// Check `options.mcp_servers`: names non-empty, at most 64 of `[A-Za-z0-9_-]`, unique (and not
/// `spaces` while `space_tools` is on); `url` http(s); `command` non-empty; env and header names
/// usable. Errors: `INVALID_ARGUMENT` naming the field (`options.mcp_servers[1].url`).
pub fn validate(options: &SpaceAgentOptions) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, server) in options.mcp_servers.iter().enumerate() {
        let at = |field: &str| format!("options.mcp_servers[{i}].{field}");
        let name = server.name();
        if name.is_empty() || name.len() > NAME_MAX || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(invalid(
                at("name"),
                format!(
                    "MCP server name {:?} must be 1-{NAME_MAX} letters, digits, '_' or '-' (the CLI calls its tools mcp__<name>__<tool>)",
                    bounded(name)
                ),
            ));
        }
        if !seen.insert(name) {
            return Err(invalid(at("name"), format!("MCP server name {:?} is given twice; names must be unique", bounded(name))));
        }
        if name == SPACE_TOOLS_SERVER && space_tools_wanted(options) {
            return Err(invalid(
                at("name"),
                format!("the MCP server name {SPACE_TOOLS_SERVER:?} is reserved for spacesd's own tools (space_tools); rename it, or set space_tools to false"),
            ));
        }
        match server {
            McpServer::Http(s) => {
                let scheme_ok = ["http://", "https://"].iter().any(|p| s.url.len() > p.len() && s.url[..p.len()].eq_ignore_ascii_case(p));
                if !scheme_ok || s.url.chars().any(char::is_whitespace) {
                    return Err(invalid(at("url"), format!("MCP server url {:?} must be an http:// or https:// URL", bounded(&s.url))));
                }
                for header in s.headers.keys() {
                    if header.is_empty() || !header.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
                        return Err(invalid(at("headers"), format!("invalid HTTP header name {:?}", bounded(header))));
                    }
                }
            }
            McpServer::Stdio(s) => {
                if s.command.trim().is_empty() {
                    return Err(invalid(at("command"), "MCP server command is empty; give the program to run"));
                }
                if s.command.contains('\0') || s.args.iter().any(|a| a.contains('\0')) {
                    return Err(invalid(at("command"), "MCP server command and args must not contain NUL"));
                }
                for var in s.env.keys() {
                    if !valid_env_name(var) {
                        return Err(invalid(at("env"), format!("invalid environment variable name {:?}", bounded(var))));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Check that each stdio server's program, and each argument naming a regular file, is there
/// for the CLI to start inside the run's sandbox (`host`, the sandbox's part set at the
/// daemon's start; `space_root`, bound where it is). Refused: a path the sandbox hides
/// (`host.hidden`: spacesd's state dir), and at the bubblewrap level an absolute path in `/tmp`,
/// `/run` or `/dev/shm` (the sandbox's own empty folders:
/// [`spaces_os::sandbox::PRIVATE_DIRS`]), as written or once its links are resolved, unless it
/// lies in the Space or in a read-only bind (`host.readonly`: the tools dir, the daemon's
/// program, `SPACES_SELF_PATHS`), or names the sandbox's own `/run/home` or `/run/spaces`.
/// Relative paths and names looked up in `PATH` are not checked, and nothing is read when no
/// stdio server is given. Without this the CLI started without the server and told the model
/// there was no such tool. Errors: `INVALID_ARGUMENT` naming `options.mcp_servers[i].command`
/// or `.args`, the path and why.
pub fn check_reachable(options: &SpaceAgentOptions, host: &spaces_os::sandbox::Host, space_root: &Path) -> Result<()> {
    use spaces_os::sandbox::{Level, API_DIR, HOME_DIR, PRIVATE_DIRS};
    let stdio =
        || options.mcp_servers.iter().enumerate().filter_map(|(i, s)| if let McpServer::Stdio(s) = s { Some((i, s)) } else { None });
    if host.level == Level::Off || stdio().next().is_none() {
        return Ok(());
    }
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    // Each root as given and resolved, resolved once.
    let both = |roots: &[PathBuf]| roots.iter().flat_map(|r| [r.clone(), real(r)]).collect::<Vec<_>>();
    let (space_root, hidden, readonly) = (real(space_root), both(&host.hidden), both(&host.readonly));
    let unseen = |text: &str| -> Option<String> {
        let given = Path::new(text);
        if !given.is_absolute() || given.starts_with(HOME_DIR) || given.starts_with(API_DIR) {
            return None;
        }
        let resolved = real(given);
        if readonly.iter().any(|r| resolved.starts_with(r) || given.starts_with(r)) {
            return None;
        }
        if hidden.iter().any(|r| resolved.starts_with(r)) {
            return Some("the run's sandbox hides it (it is among spacesd's own files)".to_owned());
        }
        if host.level != Level::Bubblewrap {
            return None;
        }
        let private = [given, resolved.as_path()]
            .into_iter()
            .filter(|p| !p.starts_with(&space_root))
            .find_map(|p| PRIVATE_DIRS.iter().find(|d| p.starts_with(d)))?;
        Some(format!(
            "{private} is the run's sandbox's own (empty) there, as are {}; put it elsewhere (e.g. /usr/local/bin, or in the Space)",
            PRIVATE_DIRS.iter().filter(|d| *d != private).copied().collect::<Vec<_>>().join(" and ")
        ))
    };
    for (i, s) in stdio() {
        let files = s.args.iter().filter(|a| Path::new(a).is_file()).map(|a| ("args", a));
        for (field, text) in std::iter::once(("command", &s.command)).chain(files) {
            if let Some(why) = unseen(text) {
                let at = format!("options.mcp_servers[{i}].{field}");
                return Err(invalid(at, format!("{:?} is not there for the CLI to start inside the run's sandbox: {why}", bounded(text))));
            }
        }
    }
    Ok(())
}

/// `options.space_tools` with its default (on).
pub fn space_tools_wanted(options: &SpaceAgentOptions) -> bool {
    options.space_tools.unwrap_or(true)
}

/// `servers` as the run row stores them: every env and header value replaced by `[redacted]`.
pub fn redacted(servers: &[McpServer]) -> Vec<McpServer> {
    let mut out = servers.to_vec();
    for server in &mut out {
        let values = match server {
            McpServer::Http(s) => s.headers.values_mut(),
            McpServer::Stdio(s) => s.env.values_mut(),
        };
        for v in values {
            *v = REDACTED.to_owned();
        }
    }
    out
}

/// The `spaces` server: this daemon's own command line ([`crate::config::self_command`]) as a stdio MCP
/// server that serves the daemon of `state_dir` with every tool scoped to `space` (`spacesd mcp
/// --state-dir DIR --space NAME --no-autostart`), no environment of its own.
pub fn space_tools_server(command: &[String], state_dir: &Path, space: &str) -> McpServer {
    let (program, prefix) = command.split_first().map(|(p, rest)| (p.clone(), rest.to_vec())).unwrap_or_default();
    McpServer::Stdio(McpStdioServer {
        name: SPACE_TOOLS_SERVER.to_owned(),
        command: program,
        args: prefix
            .into_iter()
            .chain([
                "mcp".to_owned(),
                "--state-dir".to_owned(),
                state_dir.display().to_string(),
                "--space".to_owned(),
                space.to_owned(),
                "--no-autostart".to_owned(),
            ])
            .collect(),
        env: Default::default(),
    })
}

/// The servers a launch gives the CLI: the caller's (with their secrets), then the `spaces`
/// server when `space_tools` is wanted. `command` (see [`crate::config::self_command`]) is asked for only then.
pub fn for_launch(
    callers: &[McpServer],
    options: &SpaceAgentOptions,
    state_dir: &Path,
    space: &str,
    command: impl FnOnce() -> std::io::Result<Vec<String>>,
) -> super::error::Result<Vec<McpServer>> {
    let mut servers = callers.to_vec();
    if space_tools_wanted(options) {
        let command = command().map_err(|source| super::error::Error::SelfCommand { purpose: "for space_tools", source })?;
        servers.push(space_tools_server(&command, state_dir, space));
    }
    Ok(servers)
}

/// Whether `name` can name an environment variable: not empty, no `=`, no NUL.
pub(super) fn valid_env_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('=') && !name.contains('\0')
}

fn invalid(field: String, message: impl Into<String>) -> Error {
    let mut e = ApiError::new(ErrorCode::InvalidArgument, format!("{field}: {}", message.into()));
    e.field = Some(field);
    Error::Api(e)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn options(v: serde_json::Value) -> SpaceAgentOptions {
        serde_json::from_value(v).unwrap()
    }

    fn refusal(v: serde_json::Value) -> ApiError {
        match validate(&options(v)) {
            Err(Error::Api(e)) => e,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_server_the_sandbox_would_not_show_is_refused_naming_the_field() {
        use spaces_os::sandbox::Level;
        let tmp = tempfile::tempdir().unwrap();
        let (space, state, tools) = (tmp.path().join("space"), tmp.path().join("state"), tmp.path().join("state/tools"));
        std::fs::create_dir_all(&space).unwrap();
        std::fs::create_dir_all(&tools).unwrap();
        let hidden_file = state.join("spaces.db");
        let (in_space, in_tools, in_tmp) = (space.join("server"), tools.join("server"), tmp.path().join("server"));
        for f in [&in_space, &in_tools, &in_tmp, &hidden_file] {
            std::fs::write(f, "").unwrap();
        }
        let link = tmp.path().join("link-to-space");
        std::os::unix::fs::symlink(&in_space, &link).unwrap();
        let (hidden, readonly) = (vec![hidden_file.clone()], vec![tools.clone()]);
        let check = |level, v: serde_json::Value| {
            let host = spaces_os::sandbox::Host {
                level,
                bwrap: PathBuf::new(),
                hidden: hidden.clone(),
                readonly: readonly.clone(),
                max_processes: None,
                landlock: None,
            };
            match check_reachable(&options(json!({ "mcp_servers": v })), &host, &space) {
                Ok(()) => None,
                Err(Error::Api(e)) => Some((e.field.unwrap_or_default(), e.message)),
                Err(other) => panic!("{other:?}"),
            }
        };
        let (bw, ll) = (Level::Bubblewrap, Level::Landlock);
        let path = |p: &Path| p.display().to_string();
        // Shown: the Space, a read-only bind, the sandbox's own home, names and relative paths,
        // a private folder itself as an argument (it exists, empty, in the sandbox).
        for ok in [
            json!([{"name": "a", "command": path(&in_space)}]),
            json!([{"name": "a", "command": path(&in_tools)}]),
            json!([{"name": "a", "command": "/run/home/.local/bin/server"}]),
            json!([{"name": "a", "command": "npx", "args": ["-y", "@x/server", "/tmp", "./rel", "/nonexistent/tmp/x"]}]),
        ] {
            assert_eq!(check(bw, ok.clone()), None, "{ok}");
        }
        // Hidden at every sandboxed level.
        let (field, message) = check(ll, json!([{"name": "a", "url": "http://h"}, {"name": "b", "command": path(&hidden_file)}])).unwrap();
        assert_eq!(field, "options.mcp_servers[1].command");
        assert!(message.contains("hides it"), "{message}");
        let (field, _) = check(bw, json!([{"name": "a", "command": "node", "args": [path(&hidden_file)]}])).unwrap();
        assert_eq!(field, "options.mcp_servers[0].args");
        assert_eq!(check(Level::Off, json!([{"name": "a", "command": path(&hidden_file)}])), None);
        // The private folders: checked only where the test's temp dir is in one (TMPDIR may
        // say otherwise), as written and resolved.
        if tmp.path().starts_with("/tmp") {
            let (field, message) = check(bw, json!([{"name": "a", "command": "/usr/bin/env", "args": [path(&in_tmp)]}])).unwrap();
            assert_eq!(field, "options.mcp_servers[0].args");
            assert!(message.contains("/tmp is the run's sandbox's own"), "{message}");
            assert!(
                check(bw, json!([{"name": "a", "command": path(&link)}])).is_some(),
                "a link in /tmp is not there, whatever its target"
            );
            assert_eq!(check(ll, json!([{"name": "a", "command": path(&in_tmp)}])), None, "Landlock keeps /tmp");
        }
    }

    #[test]
    fn good_servers_pass() {
        let o = options(json!({"mcp_servers": [
            {"name": "echo-1_x", "command": "/bin/mcp-echo", "args": ["a"], "env": {"TOKEN": "secret-value"}},
            {"name": "docs", "url": "HTTPS://mcp.example.com/mcp", "headers": {"Authorization": "Bearer abc"}}
        ]}));
        validate(&o).unwrap();
        let o = options(json!({"space_tools": false, "mcp_servers": [{"name": "spaces", "command": "x"}]}));
        validate(&o).unwrap();
    }

    #[test]
    fn bad_servers_are_refused_naming_the_field() {
        let cases = [
            (json!([{"name": "", "command": "x"}]), "options.mcp_servers[0].name"),
            (json!([{"name": "has space", "command": "x"}]), "options.mcp_servers[0].name"),
            (json!([{"name": "dot.ted", "command": "x"}]), "options.mcp_servers[0].name"),
            (json!([{"name": "a".repeat(65), "command": "x"}]), "options.mcp_servers[0].name"),
            (json!([{"name": "a", "command": "x"}, {"name": "a", "url": "http://h"}]), "options.mcp_servers[1].name"),
            (json!([{"name": "spaces", "command": "x"}]), "options.mcp_servers[0].name"),
            (json!([{"name": "a", "url": "ftp://h/mcp"}]), "options.mcp_servers[0].url"),
            (json!([{"name": "a", "url": "http://"}]), "options.mcp_servers[0].url"),
            (json!([{"name": "a", "url": "mcp.example.com"}]), "options.mcp_servers[0].url"),
            (json!([{"name": "a", "url": "http://h", "headers": {"Bad Header": "v"}}]), "options.mcp_servers[0].headers"),
            (json!([{"name": "a", "command": "  "}]), "options.mcp_servers[0].command"),
            (json!([{"name": "a", "command": "x", "env": {"A=B": "v"}}]), "options.mcp_servers[0].env"),
        ];
        for (servers, field) in cases {
            let e = refusal(json!({"mcp_servers": servers}));
            assert_eq!(e.code, ErrorCode::InvalidArgument, "{servers}");
            assert_eq!(e.field.as_deref(), Some(field), "{servers}: {}", e.message);
            assert!(e.message.starts_with(field), "{}", e.message);
        }
    }

    #[test]
    fn stored_copies_hide_env_and_header_values() {
        let o = options(json!({"mcp_servers": [
            {"name": "e", "command": "c", "env": {"TOKEN": "secret-value"}},
            {"name": "h", "url": "http://h", "headers": {"Authorization": "Bearer abcdefgh"}}
        ]}));
        let stored = serde_json::to_value(redacted(&o.mcp_servers)).unwrap();
        assert_eq!(
            stored,
            json!([
                {"name": "e", "command": "c", "env": {"TOKEN": "[redacted]"}},
                {"name": "h", "url": "http://h", "headers": {"Authorization": "[redacted]"}}
            ])
        );
    }

    #[test]
    fn space_tools_adds_the_spaces_server_scoped_to_the_space() {
        let callers: Vec<McpServer> = serde_json::from_value(json!([{"name": "echo", "command": "e"}])).unwrap();
        let exe = || Ok(vec!["/usr/bin/spacesd".to_owned()]);
        let on = SpaceAgentOptions::default();
        let servers = for_launch(&callers, &on, Path::new("/var/spaces"), "proj", exe).unwrap();
        assert_eq!(
            serde_json::to_value(&servers).unwrap(),
            json!([
                {"name": "echo", "command": "e"},
                {"name": "spaces", "command": "/usr/bin/spacesd",
                 "args": ["mcp", "--state-dir", "/var/spaces", "--space", "proj", "--no-autostart"]}
            ]),
            "no env of its own: the server runs with what the CLI gives it (the agent's environment)"
        );
        let asked = SpaceAgentOptions { space_tools: Some(true), ..Default::default() };
        assert_eq!(for_launch(&callers, &asked, Path::new("/var/spaces"), "proj", exe).unwrap(), servers);
        let off = SpaceAgentOptions { space_tools: Some(false), ..Default::default() };
        let never = || -> std::io::Result<Vec<String>> { panic!("the binary is not looked up when space_tools is off") };
        assert_eq!(for_launch(&callers, &off, Path::new("/s"), "p", never).unwrap(), callers);
        let gone = || Err(std::io::Error::other("deleted"));
        let e = for_launch(&callers, &on, Path::new("/s"), "p", gone).unwrap_err();
        assert!(matches!(e, super::super::error::Error::SelfCommand { purpose: "for space_tools", .. }), "{e:?}");
        assert!(e.to_string().contains("cannot tell how to run spacesd for space_tools: deleted"), "{e}");
    }

    #[test]
    fn a_binding_hosted_daemon_names_its_own_command() {
        let cmd = vec!["/venv/bin/python".to_owned(), "-m".to_owned(), "spaces._daemon".to_owned()];
        let McpServer::Stdio(s) = space_tools_server(&cmd, Path::new("/var/spaces"), "proj") else { panic!("a stdio server") };
        assert_eq!(s.command, "/venv/bin/python");
        assert_eq!(&s.args[..3], ["-m", "spaces._daemon", "mcp"]);
    }
}
