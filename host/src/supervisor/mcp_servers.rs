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

use std::path::Path;

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

/// Check that each stdio server's program, and each argument naming a file, is there for the
/// CLI to start inside the run's sandbox: an absolute path in a folder the sandbox makes its
/// own (`/tmp`, `/run`, `/dev/shm`: [`spaces_os::sandbox::PRIVATE_DIRS`], at the bubblewrap
/// level) is not, unless it lies in the Space (`space_root`, bound where it is), and nothing in
/// the state dir (`state_dir`) is at any sandboxed level. Without this the CLI started without
/// the server and the model was told "no such tool". Nothing is checked unsandboxed
/// (`level` off). Errors: `INVALID_ARGUMENT` naming `options.mcp_servers[i].command` or
/// `.args`, the path and why.
pub fn check_reachable(options: &SpaceAgentOptions, level: spaces_os::sandbox::Level, space_root: &Path, state_dir: &Path) -> Result<()> {
    use spaces_os::sandbox::Level;
    if level == Level::Off {
        return Ok(());
    }
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (space_root, state_dir) = (real(space_root), real(state_dir));
    let unseen = |text: &str| -> Option<String> {
        let path = Path::new(text);
        if !path.is_absolute() {
            return None;
        }
        let path = real(path);
        if path.starts_with(&state_dir) {
            return Some("it lies in spacesd's state dir, which no run sees".to_owned());
        }
        if level != Level::Bubblewrap || path.starts_with(&space_root) {
            return None;
        }
        let private = spaces_os::sandbox::PRIVATE_DIRS.iter().find(|d| path.starts_with(d))?;
        Some(format!(
            "{private} is the run's sandbox's own (empty) there, as are {}; put it elsewhere (e.g. /usr/local/bin, or in the Space)",
            spaces_os::sandbox::PRIVATE_DIRS.iter().filter(|d| *d != private).copied().collect::<Vec<_>>().join(" and ")
        ))
    };
    for (i, server) in options.mcp_servers.iter().enumerate() {
        let McpServer::Stdio(s) = server else { continue };
        let named = std::iter::once(("command", &s.command)).chain(s.args.iter().filter(|a| Path::new(a).exists()).map(|a| ("args", a)));
        for (field, text) in named {
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
        let (space, state) = (tmp.path().join("space"), tmp.path().join("state"));
        std::fs::create_dir_all(&space).unwrap();
        std::fs::create_dir_all(&state).unwrap();
        let (in_space, in_state, in_tmp) = (space.join("server"), state.join("server"), tmp.path().join("server"));
        for f in [&in_space, &in_state, &in_tmp] {
            std::fs::write(f, "").unwrap();
        }
        let check = |level, v: serde_json::Value| match check_reachable(&options(json!({ "mcp_servers": v })), level, &space, &state) {
            Ok(()) => None,
            Err(Error::Api(e)) => Some((e.field.unwrap_or_default(), e.message)),
            Err(other) => panic!("{other:?}"),
        };
        // A test's temp dir is under /tmp (the machine's TMPDIR may say otherwise: then only
        // the state dir's refusals are checked).
        let under_tmp = tmp.path().starts_with("/tmp");
        let bw = Level::Bubblewrap;
        assert_eq!(check(bw, json!([{"name": "a", "command": in_space.display().to_string()}])), None);
        assert!(
            check(bw, json!([{"name": "a", "command": "mcp-echo", "args": ["/tmp"]}])).is_some(),
            "an existing /tmp path as an argument"
        );
        assert_eq!(check(bw, json!([{"name": "a", "command": "npx", "args": ["-y", "@x/server", "/nonexistent/tmp"]}])), None);
        let (field, message) =
            check(Level::Landlock, json!([{"name": "a", "url": "http://h"}, {"name": "b", "command": in_state.display().to_string()}]))
                .unwrap();
        assert_eq!(field, "options.mcp_servers[1].command");
        assert!(message.contains("state dir"), "{message}");
        if under_tmp {
            let (field, message) =
                check(bw, json!([{"name": "a", "command": "/usr/bin/env", "args": [in_tmp.display().to_string()]}])).unwrap();
            assert_eq!(field, "options.mcp_servers[0].args");
            assert!(message.contains("/tmp is the run's sandbox's own"), "{message}");
            assert_eq!(
                check(Level::Landlock, json!([{"name": "a", "command": in_tmp.display().to_string()}])),
                None,
                "Landlock keeps /tmp"
            );
        }
        assert_eq!(check(Level::Off, json!([{"name": "a", "command": in_state.display().to_string()}])), None);
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
