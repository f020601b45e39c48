//! The official MCP SDK clients against a real spacesd: the Python SDK (PyPI `mcp`, in the venv
//! scripts/test creates) and the TypeScript SDK (npm `@modelcontextprotocol/sdk`, `npm ci` by
//! scripts/test), each over stdio (the SDK spawns `spacesd --state-dir DIR mcp`) and over
//! Streamable HTTP (`/mcp` on the daemon's TCP listener with the bearer token). The client
//! scripts live in `tests/mcp-clients/{python,node}/`; each lists the tools, runs the seed's loop
//! and follows an agent run (the real Claude Code CLI against a scripted model) to `turn_ended`.
//! Every test has its own daemon, Space and model endpoint; a missing venv or `node_modules` fails
//! the test with the command that installs it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use spaces_sdk::op::Audience;
use spaces_testkit::{Reply, Script, ScriptedServer};

use super::harness::CLAUDE;
use crate::support::{require_cli, TestDaemon};

/// How long one client run may take (it takes a few seconds).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(180);
/// What the scripted model answers to every request.
const ANSWER: &str = "Hello from the scripted model.";
const SPACE: &str = "demo";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn clients_dir() -> PathBuf {
    repo().join("tests/mcp-clients")
}

/// The venv's Python: `$SPACES_TEST_VENV/bin/python`, else `<repo>/.venv-test/bin/python`.
fn venv_python() -> PathBuf {
    let venv = std::env::var_os("SPACES_TEST_VENV").map(PathBuf::from).unwrap_or_else(|| repo().join(".venv-test"));
    let python = venv.join("bin/python");
    assert!(
        python.is_file(),
        "no Python venv with the MCP SDK at {}: run scripts/test, which creates it \
         (python3 -m venv {0} && {0}/bin/pip install -r tests/mcp-clients/python/requirements.txt)",
        venv.display()
    );
    python
}

/// `tests/mcp-clients/node/client.mjs`, once `npm ci` has installed its `node_modules`.
fn node_client() -> PathBuf {
    let dir = clients_dir().join("node");
    let sdk = dir.join("node_modules/@modelcontextprotocol/sdk/package.json");
    assert!(
        sdk.is_file(),
        "the MCP TypeScript SDK is not installed at {}: run scripts/test, which runs `npm ci` in {}",
        sdk.display(),
        dir.display()
    );
    dir.join("client.mjs")
}

/// The SDK line a client must print: the version pinned in the checked-in requirements file or
/// package.json (a stale venv or node_modules fails here).
fn pinned_python_sdk() -> String {
    let text = std::fs::read_to_string(clients_dir().join("python/requirements.txt")).unwrap();
    let pin = text.lines().find(|l| l.starts_with("mcp==")).expect("mcp==X.Y.Z in requirements.txt");
    format!("sdk {pin} ")
}

fn pinned_typescript_sdk() -> String {
    let text = std::fs::read_to_string(clients_dir().join("node/package.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let version = json["dependencies"]["@modelcontextprotocol/sdk"].as_str().expect("the SDK in package.json");
    format!("sdk @modelcontextprotocol/sdk@{version} ")
}

/// The tool names the operation table serves over MCP.
fn expected_tools() -> String {
    let names: Vec<&str> = spaces_sdk::op::catalogue().into_iter().filter(|o| o.audience == Audience::Tool).map(|o| o.name).collect();
    names.join(",")
}

/// A daemon with a TCP listener, a Space, and a scripted model answering [`ANSWER`] to every
/// request.
struct Setup {
    d: TestDaemon,
    root: PathBuf,
    model: ScriptedServer,
    url: String,
    token: String,
}

async fn setup() -> Setup {
    require_cli(CLAUDE.id, CLAUDE.binary);
    let model = ScriptedServer::start(CLAUDE.wire, Script::new([]).with_fallback(Reply::Text(ANSWER.into()))).await.unwrap();
    let d = TestDaemon::start_with(vec![], vec!["--tcp".into(), "127.0.0.1:0".into()]).await;
    let root = d.space(SPACE).await;
    let state = d.state_dir();
    let addr = std::fs::read_to_string(state.join("tcp.addr")).unwrap().trim().to_owned();
    let token = std::fs::read_to_string(state.join("token")).unwrap().trim().to_owned();
    Setup { url: format!("http://{addr}/mcp"), token, d, root, model }
}

#[derive(Clone, Copy, PartialEq)]
enum Transport {
    Stdio,
    Http,
}

impl Setup {
    /// The arguments every client takes, for `transport`.
    fn args(&self, transport: Transport) -> Vec<OsString> {
        let mut a: Vec<OsString> = match transport {
            Transport::Stdio => {
                vec!["--stdio".into(), crate::support::spacesd_bin().into(), "--state-dir".into(), self.d.state_dir().into()]
            }
            Transport::Http => vec!["--http".into(), self.url.clone().into(), "--token".into(), self.token.clone().into()],
        };
        a.extend([
            "--space".into(),
            SPACE.into(),
            "--root".into(),
            self.root.clone().into(),
            "--expect-tools".into(),
            expected_tools().into(),
            "--model-url".into(),
            self.model.base_url().into(),
            "--agent".into(),
            CLAUDE.id.into(),
            "--expect-text".into(),
            ANSWER.into(),
        ]);
        a
    }

    /// Runs a client to its end (at most [`CLIENT_TIMEOUT`]) in its own process group; panics
    /// with its whole output unless it exits 0 having printed `PASS`. Returns its stdout.
    async fn run_client(&self, label: &str, program: &Path, args: Vec<OsString>) -> String {
        let out_path = self.d.dir.path().join(format!("{label}.stdout"));
        let err_path = self.d.dir.path().join(format!("{label}.stderr"));
        let mut cmd = tokio::process::Command::new(program);
        // The client starts `spacesd mcp` over stdio with its own environment: the same
        // allow-list as every daemon of the tests.
        cmd.args(&args)
            .current_dir(self.d.dir.path())
            .env_clear()
            .envs(crate::support::daemon_env(std::env::vars_os()))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out_path).unwrap())
            .stderr(std::fs::File::create(&err_path).unwrap())
            .process_group(0)
            .kill_on_drop(true);
        let t0 = Instant::now();
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{label}: could not start {}: {e}", program.display()));
        let pgid = nix::unistd::Pid::from_raw(child.id().expect("pid") as i32);
        let limit = crate::support::scaled(CLIENT_TIMEOUT);
        let status = tokio::time::timeout(limit, child.wait()).await;
        // The client and whatever it spawned (`spacesd mcp` over stdio) end with the test.
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait().await;
        let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        let output = format!("--- {label} stdout:\n{stdout}--- {label} stderr:\n{stderr}--- end of {label}");
        match status {
            Err(_) => panic!("{label}: no result within {limit:?}\n{output}"),
            Ok(Err(e)) => panic!("{label}: wait failed: {e}\n{output}"),
            Ok(Ok(st)) => assert!(st.success() && stdout.contains("PASS"), "{label} failed ({st}):\n{output}"),
        }
        println!("{label}: passed in {:.1} s\n{}", t0.elapsed().as_secs_f64(), stdout.trim_end());
        stdout
    }

    /// What every client run must have left behind: the patched files, and model calls that
    /// carried the agent run's prompt.
    fn check_effects(&self, files: &[&str]) {
        for f in files {
            assert_eq!(std::fs::read_to_string(self.root.join(f)).unwrap(), "hello\n", "{f} was patched over MCP");
        }
        let calls = self.model.model_calls();
        assert!(
            calls.iter().any(|c| c.json.as_ref().is_some_and(|j| j.to_string().contains("Say hello, please."))),
            "the agent run started over MCP called the scripted model with its prompt ({} model calls)",
            calls.len()
        );
    }
}

/// The Python SDK in both protocol modes: `legacy` (the initialize handshake, 2025-11-25) and
/// its default `auto` (probes `server/discover` and adopts 2026-07-28).
async fn python_sdk(transport: Transport) {
    let python = venv_python();
    let s = setup().await;
    let client = clients_dir().join("python/client.py");
    let mut args: Vec<OsString> = vec![client.into()];
    args.extend(s.args(transport));
    let name = if transport == Transport::Stdio { "stdio" } else { "http" };
    let out = s.run_client(&format!("python-sdk-{name}"), &python, args).await;
    assert!(out.contains(&pinned_python_sdk()), "the venv holds the pinned SDK ({}):\n{out}", pinned_python_sdk());
    assert!(out.contains("mode=legacy: connected, protocol 2025-11-25"), "{out}");
    assert!(out.contains("mode=auto: connected, protocol 2026-07-28"), "{out}");
    s.check_effects(&[&format!("py-{name}-legacy.txt"), &format!("py-{name}-auto.txt")]);
}

async fn typescript_sdk(transport: Transport) {
    let client = node_client();
    let s = setup().await;
    let mut args: Vec<OsString> = vec![client.into()];
    args.extend(s.args(transport));
    let name = if transport == Transport::Stdio { "stdio" } else { "http" };
    let out = s.run_client(&format!("typescript-sdk-{name}"), Path::new("node"), args).await;
    assert!(out.contains(&pinned_typescript_sdk()), "node_modules holds the pinned SDK ({}):\n{out}", pinned_typescript_sdk());
    if transport == Transport::Http {
        assert!(out.contains("connected, protocol 2025-11-25"), "{out}");
    }
    s.check_effects(&[&format!("ts-{name}.txt")]);
}

#[tokio::test]
async fn python_sdk_client_over_stdio() {
    python_sdk(Transport::Stdio).await;
}

#[tokio::test]
async fn python_sdk_client_over_streamable_http() {
    python_sdk(Transport::Http).await;
}

#[tokio::test]
async fn typescript_sdk_client_over_stdio() {
    typescript_sdk(Transport::Stdio).await;
}

#[tokio::test]
async fn typescript_sdk_client_over_streamable_http() {
    typescript_sdk(Transport::Http).await;
}

/// Every tool schema compiles in Ajv's strict mode (draft 2020-12, standard formats, union
/// types), and the TypeScript SDK's own Ajv prints no warning while it lists the tools: no
/// `unknown format "uint64" ignored in schema` (issue 32), no unknown keyword.
#[tokio::test]
async fn every_tool_schema_compiles_in_ajv_strict_mode_and_the_sdk_prints_no_warning() {
    let dir = node_client().parent().unwrap().to_owned();
    let d = TestDaemon::start().await;
    let model = ScriptedServer::start(CLAUDE.wire, Script::new([])).await.unwrap();
    let s = Setup { url: String::new(), token: String::new(), root: d.space(SPACE).await, d, model };
    let args: Vec<OsString> =
        vec![dir.join("strict-schemas.mjs").into(), crate::support::spacesd_bin().into(), "--state-dir".into(), s.d.state_dir().into()];
    let out = s.run_client("ajv-strict", Path::new("node"), args).await;
    assert!(out.contains("0 schemas refused or warned about, 0 warnings printed by the SDK"), "{out}");
}
