//! Locating and installing agent CLIs: an operator-set binary, or the pinned npm install in the
//! host's tools dir (`<tools dir>/<harness id>/node_modules/...`, one per package: see
//! [`install_id`]), installed on first use.

use spaces_os::path_io::PathIo;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use spaces_harnesses::{Harness, InstallSpec};
use spaces_os::process::{self, SpawnSpec, StdinSpec, StdioSpec};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe;

use super::error::{Error, Result};
use crate::config::Config;

/// Where a harness's CLI comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Operator override (`SPACES_HARNESS_BIN_<ID>` or `harness_bin` in config.json).
    Operator(PathBuf),
    /// The pinned install in the tools dir.
    Pinned(PathBuf),
}

impl Source {
    /// The binary path.
    pub fn path(&self) -> &PathBuf {
        match self {
            Source::Operator(p) | Source::Pinned(p) => p,
        }
    }
}

/// The harness id whose tools dir holds `harness`'s pinned install: the first harness of
/// [`spaces_harnesses::all`] with the same packages. Two harnesses of one CLI
/// (`openai-codex` and `openai-codex-exec`, both `@openai/codex`) share one install, one
/// install lock and one operator binary setting, under the first one's id.
pub fn install_id(harness: &dyn Harness) -> &'static str {
    let packages = harness.install_spec().packages;
    spaces_harnesses::all().into_iter().find(|h| h.install_spec().packages == packages).map_or(harness.id(), |h| h.id())
}

/// The binary this host would launch for `harness`, and whether it exists now: the operator's
/// binary for its id, else the one for the harness it shares its install with
/// (`install_id`), else the pinned install.
pub fn locate(cfg: &Config, harness: &dyn Harness) -> (Source, bool) {
    if let Some(p) = cfg.harness_bin.get(harness.id()).or_else(|| cfg.harness_bin.get(install_id(harness))) {
        return (Source::Operator(p.clone()), p.is_file());
    }
    let p = cfg.harness_tools_dir(install_id(harness)).join(harness.install_spec().binary);
    let exists = p.is_file();
    (Source::Pinned(p), exists)
}

/// The version of the pinned package actually installed for `harness`, read from its
/// `package.json` in the tools dir; `None` when there is none to read (not installed, or only a
/// binary without its package). Never the pinned constant: an older or newer install reports
/// what it is.
pub fn installed_version(cfg: &Config, harness: &dyn Harness) -> Option<String> {
    installed_version_in(&cfg.harness_tools_dir(install_id(harness)), &harness.install_spec())
}

/// [`installed_version`] for the install under `prefix`: the first package of `spec`.
fn installed_version_in(prefix: &Path, spec: &InstallSpec) -> Option<String> {
    let package = spec.packages.first()?;
    // `name@version`, where a scoped name starts with its own `@`.
    let name = match package.rfind('@') {
        Some(at) if at > 0 => &package[..at],
        _ => package.as_str(),
    };
    let manifest = std::fs::read(prefix.join("node_modules").join(name).join("package.json")).ok()?;
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).ok()?;
    manifest.get("version")?.as_str().map(str::to_owned)
}

/// Variables of the daemon's environment that npm gets, by name: where programs are (`PATH`),
/// npm's user config and cache (`HOME`, `USER`), locale and temp dir, proxies and CA
/// certificates for the registry. Anything else (tokens, cloud keys) stays out (case M32).
pub const NPM_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// Whether npm gets the variable `name` from the daemon's environment: the names in [`NPM_ENV`]
/// and npm's own settings (`npm_config_*`, any case: a registry or cache set for the host).
pub fn npm_passes(name: &str) -> bool {
    NPM_ENV.contains(&name) || name.to_ascii_lowercase().starts_with("npm_config_")
}

/// npm's environment taken from `vars` (the daemon's): what [`npm_passes`]. `PATH` defaults to
/// the usual system directories.
fn npm_env(vars: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = vars.into_iter().filter(|(k, _)| npm_passes(k)).collect();
    env.entry("PATH".to_owned()).or_insert_with(|| "/usr/local/bin:/usr/bin:/bin".to_owned());
    env
}

/// Install the pinned CLI of `harness` with npm, reporting progress lines to `progress`.
/// Returns the binary path. Errors: the prefix cannot be made ([`Error::Io`]), npm cannot be
/// run or read ([`Error::NpmStart`], [`Error::NpmIo`]), or it ended without the binary
/// ([`Error::NpmFailed`], with npm's last lines).
pub async fn install(cfg: &Config, harness: &dyn Harness, mut progress: impl FnMut(String)) -> Result<PathBuf> {
    let spec = harness.install_spec();
    let prefix = cfg.harness_tools_dir(install_id(harness));
    std::fs::create_dir_all(&prefix).map_err(PathIo::at("create", &prefix))?;
    progress(format!("installing {} into {}", spec.packages.join(" "), prefix.display()));
    let started = Instant::now();
    let mut argv: Vec<String> = ["npm", "install", "--prefix"].map(String::from).into();
    argv.push(prefix.to_string_lossy().into_owned());
    // `--ignore-scripts`: every pinned CLI's binary is a file of its packages (a platform
    // package's native binary or a bundled script); no install script is needed, some fail on
    // hosts without every platform variant (opencode's postinstall), and newer npm versions
    // skip them anyway: one behaviour whatever npm the host has.
    argv.extend(["--no-audit", "--no-fund", "--no-save", "--ignore-scripts", "--loglevel", "http"].map(String::from));
    argv.extend(spec.packages.iter().map(|p| p.to_string()));
    let daemon_env = std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
    let spawn_spec = SpawnSpec {
        argv,
        cwd: prefix.clone(),
        env: npm_env(daemon_env),
        markers: Vec::new(),
        tag: format!("install/{}/{}", harness.id(), uuid::Uuid::new_v4()),
        // npm's progress is on stderr and its summary on stdout: one stream, nothing unread.
        stdio: StdioSpec::Combined { stdin: StdinSpec::Null },
        cgroups: Vec::new(),
        nice: process::priority::agent_nice(),
        sandboxed: false,
    };
    let spawned = process::spawn(&spawn_spec).map_err(Error::NpmStart)?;
    let mut child = spawned.child;
    let output = match pipe::Receiver::from_owned_fd(spawned.output) {
        Ok(output) => output,
        Err(e) => {
            let _ = child.start_kill();
            return Err(Error::NpmIo { step: "output unreadable", source: e });
        }
    };
    let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let mut output = BufReader::new(output);
    let mut buf = Vec::new();
    let mut fetched = 0u32;
    // Read to EOF whatever the bytes are (lossy), so npm never blocks on a full pipe.
    while matches!(output.read_until(b'\n', &mut buf).await, Ok(n) if n > 0) {
        let line = String::from_utf8_lossy(&buf).trim_end_matches(['\n', '\r']).to_owned();
        buf.clear();
        if line.contains("npm http") {
            fetched += 1;
            if fetched % 5 == 1 {
                progress(format!("downloading ({fetched} requests so far)"));
            }
        } else if !line.trim().is_empty() {
            progress(line.clone());
        }
        tail.push_back(line);
        if tail.len() > 20 {
            tail.pop_front();
        }
    }
    let status = child.wait().await.map_err(|source| Error::NpmIo { step: "did not finish", source })?;
    let (_, exists) = locate(cfg, harness);
    let binary = prefix.join(spec.binary);
    if status.success() && exists {
        progress(format!("installed {} in {:.1} s", spec.packages.join(" "), started.elapsed().as_secs_f64()));
        Ok(binary)
    } else {
        Err(Error::NpmFailed { packages: spec.packages.join(" "), status, binary, exists, tail: Vec::from(tail).join(" | ") })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn spec() -> InstallSpec {
        InstallSpec { packages: vec!["@acme/agent@2.0.0".to_owned()], version: "2.0.0", binary: "node_modules/@acme/agent/bin/agent" }
    }

    #[test]
    fn the_installed_version_is_read_from_the_package_not_the_pin() {
        let prefix = tempfile::tempdir().unwrap();
        let package = prefix.path().join("node_modules/@acme/agent");
        std::fs::create_dir_all(package.join("bin")).unwrap();
        std::fs::write(package.join("bin/agent"), "#!/bin/sh\n").unwrap();
        assert_eq!(installed_version_in(prefix.path(), &spec()), None, "a binary alone has no version");
        std::fs::write(package.join("package.json"), r#"{"name":"@acme/agent","version":"1.9.3"}"#).unwrap();
        assert_eq!(installed_version_in(prefix.path(), &spec()).as_deref(), Some("1.9.3"));
        std::fs::write(package.join("package.json"), r#"{"name":"@acme/agent","version":"2.0.0"}"#).unwrap();
        assert_eq!(installed_version_in(prefix.path(), &spec()).as_deref(), Some("2.0.0"));
        std::fs::write(package.join("package.json"), "not json").unwrap();
        assert_eq!(installed_version_in(prefix.path(), &spec()), None);
        let unscoped = InstallSpec { packages: vec!["agent@3.1.0".to_owned()], ..spec() };
        let plain = prefix.path().join("node_modules/agent");
        std::fs::create_dir_all(&plain).unwrap();
        std::fs::write(plain.join("package.json"), r#"{"version":"3.0.9"}"#).unwrap();
        assert_eq!(installed_version_in(prefix.path(), &unscoped).as_deref(), Some("3.0.9"));
    }

    #[test]
    fn harnesses_of_one_package_share_its_install() {
        let exec = spaces_harnesses::by_id("openai-codex-exec").unwrap();
        let app_server = spaces_harnesses::by_id("openai-codex").unwrap();
        assert_eq!((install_id(exec), install_id(app_server)), ("openai-codex", "openai-codex"));
        let claude = spaces_harnesses::by_id("claude-code").unwrap();
        assert_eq!(install_id(claude), "claude-code");
    }

    #[test]
    fn npm_gets_only_the_listed_variables_and_its_own_settings() {
        let daemon = [
            ("PATH", "/opt/node/bin:/usr/bin"),
            ("HOME", "/home/op"),
            ("https_proxy", "http://proxy:3128"),
            ("NODE_EXTRA_CA_CERTS", "/etc/ca.pem"),
            ("npm_config_registry", "http://registry.local/"),
            ("NPM_CONFIG_CACHE", "/var/cache/npm"),
            ("SPACES_TOKEN", "secret"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
            ("ANTHROPIC_API_KEY", "secret"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let env = npm_env(daemon);
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(names, ["HOME", "NODE_EXTRA_CA_CERTS", "NPM_CONFIG_CACHE", "PATH", "https_proxy", "npm_config_registry"]);
        assert_eq!(npm_env([])["PATH"], "/usr/local/bin:/usr/bin:/bin");
    }
}
