//! Host configuration: where state lives, where CLIs are installed, which binaries to run.
//!
//! Sources, later ones winning: built-in defaults, the optional config file
//! `<state dir>/config.json`, then environment variables:
//! - `SPACES_HOME`: the state dir (same as `--state-dir`); default `<user data dir>/spaces`.
//! - `SPACES_TOOLS_DIR`: where pinned CLIs are installed (`<tools dir>/<harness id>/node_modules`);
//!   default `<state dir>/tools`. Several state dirs may share one tools dir.
//! - `SPACES_HARNESS_BIN_<ID>` (id upper-cased, `-` as `_`, e.g. `SPACES_HARNESS_BIN_CLAUDE_CODE`):
//!   run this already installed binary instead of the pinned install (shown in `capabilities`).
//! - `SPACES_FORWARDABLE_ENV`: comma-separated names runs may copy with `env_from_host`.
//! - `SPACES_STALL_MS`: a turn silent this long gets a `notice`; twice as long ends it `error`.
//! - `SPACES_EXEC_TIMEOUT_MS`: time limit of one `exec_command` (default 30 min; 0: none).
//!   Extra environment for commands is set in `config.json` (`exec_env`), never by clients.
//! - `SPACES_HTTP_MAX_CONNECTIONS`, `SPACES_HTTP_HEADER_TIMEOUT_MS`, `SPACES_HTTP_BODY_TIMEOUT_MS`:
//!   the listeners' limits (`spacesd`'s `http::listen`).
//! - `SPACES_VOLUME` (or `spacesd serve --volume URL`, or `volume` in `config.json`): where
//!   persistent agents' homes are kept: a local directory (default `<state dir>/volume`) or an
//!   S3-compatible store `s3://bucket/prefix`, reached with the usual `AWS_ENDPOINT_URL`,
//!   `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION` and `AWS_ALLOW_HTTP` variables.
//! - `SPACES_RUN_RETENTION_DAYS` (or `run_retention_days`): runs that are not live and older
//!   than this many days are deleted at start and hourly (rows, events, run dirs); unset keeps
//!   them, and `spacesd agent prune --older-than 7d` deletes on demand.
//! - `SPACES_AGENT_NICE` (or `agent_nice`): the nice value agents and commands are lowered to
//!   once they keep a CPU busy, 0 to 19 (default 10), so the daemon and its shims answer first on
//!   a busy host ([`spaces_os::process::priority`], [`spaces_os::process::demote`]);
//!   0 runs them at the daemon's priority.
//! - `SPACES_SANDBOX` (or `sandbox`): which sandbox agents and commands start in ([`Sandbox`],
//!   `sandbox`): `auto` (default; also `on`, `true`, `1`) bubblewrap, else Landlock
//!   where bubblewrap cannot make a sandbox; `bubblewrap` or `landlock` only that one (the
//!   daemon refuses to start without it); `off` (also `false`, `0`, `no`) none.
//! - `SPACES_HOST_ID` (or `host_id`): this host's name in leases and snapshots; default the
//!   machine's hostname plus a random suffix kept in `<state dir>/host-id`.
//! - `SPACES_LEASE_TTL_MS` (or `lease_ttl_ms`): how long a persistent agent's lease lasts
//!   unless renewed, at least 1000 ms (default 60 s); renewals and their retries are timed
//!   from it (`homes::renew::Schedule`).
//! - `SPACES_ALLOW_LOCAL_REPOS=1` (or `allow_local_repos`): a run's `options.repo` may be a path
//!   on this host or a `file://` URL; by default only `https`, `ssh`, `git` and `user@host:path`
//!   are cloned (the supervisor's `prepare`).
//! - `prices` (`config.json` only): dollars per million tokens by model prefix, on top of the
//!   built-in list prices ([`crate::prices`]), for turns whose CLI reports no cost.
//! - `SPACES_MAX_RUNNING_TURNS` (or `max_running_turns`): most turns running at once on this
//!   host; a start or a message over it waits with status `queued`, in order (default: no
//!   cap). `space_max_running_turns` (`config.json` only): Space name -> its own cap.
//!   `SPACES_ADMISSION_QUEUE_MAX` (or `admission_queue_max`, default 1000): most runs waiting
//!   before a start or message is refused `RESOURCE_QUEUE_FULL`.
//! - `SPACES_QUOTA_BACKOFF_MS` (or `quota_backoff_ms`): how long a run whose turn the provider
//!   refused for a rate or usage limit waits before continuing, when the CLI named no reset
//!   time (default 60000).
//! - `SPACES_OTLP_ENDPOINT` (or `otlp_endpoint`): an OpenTelemetry collector's OTLP/HTTP URL
//!   (`http://127.0.0.1:4318`); each run's spans (run, turns, tool calls) are exported there as
//!   OTLP/JSON ([`crate::traces`]). Unset: no traces.
//! - `SPACES_CHECKPOINTS` (or `checkpoints`, default on): a checkpoint of each run's working
//!   folder at every turn boundary, a `turn_diff` event per turn and `agent_diff`
//!   ([`spaces_volumes::checkpoint`]); `0` turns them off. `checkpoint_exclude` (`config.json`
//!   only): the globs they leave out, replacing the default (`.git`, `node_modules`, `target`,
//!   `.venv`, `__pycache__`); `SPACES_CHECKPOINT_KEEP_TURNS` (or `checkpoint_keep_turns`,
//!   default 100): how many of a run's newest checkpoints are kept. `SPACES_CHECKPOINT_WATCH`
//!   (or `checkpoint_watch`, default on): inotify watches on a run's folder between turns, so a
//!   turn that changed nothing is checkpointed without walking the folder; `0` walks every time
//!   (watches miss writes through `mmap` and through hard links from outside the folder).
//! - `space_budgets` (`config.json` only): Space name -> the budget (`{usd?, tokens?, turns?}`)
//!   of its runs started without `options.budget`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Names runs may copy from the host with `env_from_host` when nothing else is configured.
pub const DEFAULT_FORWARDABLE_ENV: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "CODEX_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
];

/// Default time limit of one `exec_command`, in ms (30 minutes).
pub const DEFAULT_EXEC_TIMEOUT_MS: u64 = 30 * 60 * 1000;

/// Default wait after a provider's rate or usage limit when the CLI names no reset time, ms.
pub const DEFAULT_QUOTA_BACKOFF_MS: u64 = 60_000;

/// Default stall limit of a turn, in ms (no output at all for this long).
pub const DEFAULT_STALL_MS: u64 = 300_000;

/// Default time a connection may take to send a request head, and stay idle between requests.
pub const DEFAULT_HTTP_HEADER_TIMEOUT_MS: u64 = 10_000;

/// Default time a request body may stall (no data).
pub const DEFAULT_HTTP_BODY_TIMEOUT_MS: u64 = 30_000;

/// Default most tasks (processes and threads) one run or command may have at once, where the
/// host gives each a cgroup.
pub const DEFAULT_PIDS_MAX: u64 = 4096;

/// Size at which a run's `output.log` is rotated to `output.log.1`, in bytes (the default;
/// `output_log_max_bytes` sets another).
pub const MAX_JOURNAL_BYTES: u64 = 64 * 1024 * 1024;

/// How long a lease lasts unless renewed, by default (`SPACES_LEASE_TTL_MS` sets another);
/// renewed every third of it while its run lives (`homes::renew::Schedule`).
pub const LEASE_TTL: Duration = Duration::from_secs(60);

/// The shortest lease TTL accepted, ms: renewal retries are spread over fractions of it.
pub const MIN_LEASE_TTL_MS: u64 = 1000;

/// Names the command line that runs this daemon's own CLI again, as a JSON array of strings:
/// set by a language binding that hosts the daemon (`["/venv/bin/python", "-m",
/// "spaces._daemon"]`, `["/usr/bin/node", ".../daemon.js"]`), where the process's executable is
/// the interpreter, not `spacesd`.
pub const SELF_COMMAND_ENV: &str = "SPACES_SELF_COMMAND";

/// The command line that runs this daemon's CLI: `SPACES_SELF_COMMAND` when a binding set it,
/// else this process's executable. Errors: the variable is not a non-empty JSON array of
/// strings, or the executable cannot be found.
pub fn self_command() -> std::io::Result<Vec<String>> {
    match std::env::var(SELF_COMMAND_ENV) {
        Ok(json) => match serde_json::from_str::<Vec<String>>(&json) {
            Ok(cmd) if !cmd.is_empty() => Ok(cmd),
            _ => Err(std::io::Error::other(format!("{SELF_COMMAND_ENV} must be a non-empty JSON array of strings, not {json:?}"))),
        },
        Err(_) => Ok(vec![std::env::current_exe()?.display().to_string()]),
    }
}

/// Set by a language binding beside [`SELF_COMMAND_ENV`]: a JSON array of the folders its command
/// needs besides the files it names (the Python venv and the package's site-packages, the Node
/// package's folder), so a sandbox that hides where they live (`/tmp`, `/run`) shows them to
/// the helper read-only.
pub const SELF_PATHS_ENV: &str = "SPACES_SELF_PATHS";

/// The folders of [`SELF_PATHS_ENV`]: absolute ones only; none when unset or not a JSON array
/// of strings.
pub fn self_paths() -> Vec<PathBuf> {
    std::env::var(SELF_PATHS_ENV)
        .ok()
        .and_then(|json| serde_json::from_str::<Vec<String>>(&json).ok())
        .unwrap_or_default()
        .into_iter()
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .collect()
}

/// The optional `config.json` in the state dir. Every field may be omitted.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConfigFile {
    pub tools_dir: Option<PathBuf>,
    /// Harness id -> binary to run instead of the pinned install.
    pub harness_bin: BTreeMap<String, PathBuf>,
    pub forwardable_env: Option<Vec<String>>,
    pub stall_ms: Option<u64>,
    /// Variables every `exec_command` gets on top of the clean default environment.
    pub exec_env: BTreeMap<String, String>,
    /// Time limit of one `exec_command` in ms; 0: none.
    pub exec_timeout_ms: Option<u64>,
    /// Open connections per listener (default: a quarter of `RLIMIT_NOFILE`, 16..=1024).
    pub http_max_connections: Option<usize>,
    /// Request-head and keep-alive idle limit, ms.
    pub http_header_timeout_ms: Option<u64>,
    /// Request-body stall limit, ms.
    pub http_body_timeout_ms: Option<u64>,
    /// Where persistent agents' homes are kept (a path or `s3://bucket/prefix`).
    pub volume: Option<String>,
    /// Runs that are not live and older than this many days are deleted (hourly); none: kept.
    pub run_retention_days: Option<u64>,
    /// This host's id in leases and snapshots.
    pub host_id: Option<String>,
    /// How long a persistent agent's lease lasts unless renewed, ms (default 60000, at least
    /// 1000).
    pub lease_ttl_ms: Option<u64>,
    /// A cgroup per run and command where the host allows it (default true).
    pub cgroups: Option<bool>,
    /// Which sandbox every agent and command starts in: `true`/`false` or a [`Sandbox`] name
    /// (default `auto`; see docs/operations.md "Security model").
    pub sandbox: Option<serde_json::Value>,
    /// Keep one shim started ahead of need (default true).
    pub spare_shims: Option<bool>,
    /// Make the next run of a Space and harness ready ahead only while the CPU pressure (PSI
    /// `some avg10`, percent) is at most this (default 40; 100: always).
    pub ahead_psi_max: Option<f64>,
    /// Most tasks per run or command (cgroup `pids.max`); 0: no limit.
    pub pids_max: Option<u64>,
    /// Most memory per run or command in bytes (cgroup memory limit); 0: no limit.
    pub memory_max_bytes: Option<u64>,
    /// Size at which a run's `output.log` is rotated to `output.log.1`, bytes.
    pub output_log_max_bytes: Option<u64>,
    /// Nice value of agents and commands, 0..=19.
    pub agent_nice: Option<u64>,
    /// A run's `options.repo` may be a host path or `file://` URL (default false).
    pub allow_local_repos: Option<bool>,
    /// Prices by model prefix, US dollars per million tokens, on top of the built-in ones
    /// ([`crate::prices`]): what a turn cost when the CLI does not say.
    pub prices: BTreeMap<String, crate::prices::Price>,
    /// Space name -> the budget of its runs started without `options.budget`.
    pub space_budgets: BTreeMap<String, spaces_sdk::Budget>,
    /// Most turns running at once on this host; more wait `queued` (default: no cap).
    pub max_running_turns: Option<usize>,
    /// Space name -> most turns running at once in it.
    pub space_max_running_turns: BTreeMap<String, usize>,
    /// Most runs waiting for a slot before starts and messages are refused (default 1000).
    pub admission_queue_max: Option<usize>,
    /// How long a run waits after a provider's limit when the CLI gave no reset time, ms
    /// (default 60000).
    pub quota_backoff_ms: Option<u64>,
    /// Where run spans go: an OTLP/HTTP collector (`http://host:4318`); none: no traces.
    pub otlp_endpoint: Option<String>,
    /// A checkpoint of each run's folder at every turn boundary (default true).
    pub checkpoints: Option<bool>,
    /// Globs checkpoints leave out, replacing the default list.
    pub checkpoint_exclude: Option<Vec<String>>,
    /// How many of a run's newest checkpoints are kept (default 100).
    pub checkpoint_keep_turns: Option<usize>,
    /// Watch runs' folders between turns so an unchanged one is not walked (default true).
    pub checkpoint_watch: Option<bool>,
}

/// The resolved configuration of one daemon.
#[derive(Debug, Clone)]
pub struct Config {
    pub state_dir: PathBuf,
    pub tools_dir: PathBuf,
    pub harness_bin: BTreeMap<String, PathBuf>,
    pub forwardable_env: Vec<String>,
    pub stall_ms: u64,
    pub exec_env: BTreeMap<String, String>,
    pub exec_timeout_ms: u64,
    /// `None`: derived from `RLIMIT_NOFILE` when serving.
    pub http_max_connections: Option<usize>,
    pub http_header_timeout_ms: u64,
    pub http_body_timeout_ms: u64,
    /// Where persistent agents' homes are kept: `s3://bucket/prefix`, or a local directory.
    pub volume: String,
    /// Set from the config file or `SPACES_HOST_ID`; else [`Config::host_id`] makes one.
    pub host_id: Option<String>,
    /// How long a persistent agent's lease lasts unless renewed, ms (`SPACES_LEASE_TTL_MS`,
    /// `lease_ttl_ms`; default [`LEASE_TTL`], at least [`MIN_LEASE_TTL_MS`]).
    pub lease_ttl_ms: u64,
    /// Runs that are not live and older than this many days are deleted, hourly; `None` keeps
    /// them (`agent prune` deletes them on demand).
    pub run_retention_days: Option<u64>,
    /// Try a cgroup per run and command (`SPACES_CGROUPS=0` turns it off).
    pub cgroups: bool,
    /// Which sandbox every agent run and command starts in (`spaces_os::sandbox`);
    /// `SPACES_SANDBOX=off` (or `"sandbox": false`) runs them unsandboxed, which the daemon says
    /// at start and in every run's notes.
    pub sandbox: Sandbox,
    /// Keep one shim, and its program's child in a cgroup, started ahead of need, so a start
    /// waits for neither (`SPACES_SPARE_SHIMS=0` turns it off; docs/architecture.md).
    pub spare_shims: bool,
    /// The next run of a Space and harness is made ready ahead, with a warm sandbox, only while
    /// the host's CPU pressure (PSI `some avg10`, percent; without PSI the load average against
    /// the CPU count) is at most this: 0 to 100, default 40, 100 always (`SPACES_AHEAD_PSI_MAX`;
    /// docs/operations.md "Security model").
    pub ahead_psi_max: f64,
    /// Most tasks per run or command; 0: no limit.
    pub pids_max: u64,
    /// Most memory per run or command, bytes; 0: no limit.
    pub memory_max_bytes: u64,
    /// Size at which a run's `output.log` is rotated (a run keeps at most twice this).
    pub output_log_max_bytes: u64,
    /// Nice value agents and commands are lowered to once CPU-hungry, 0..=19 (default 10).
    pub agent_nice: i32,
    /// A run's `options.repo` may name a repository on this host (a path, `file://`): off by
    /// default, since the daemon would read any of its uid's directories for a caller
    /// (`SPACES_ALLOW_LOCAL_REPOS=1` or `"allow_local_repos": true` turns it on).
    pub allow_local_repos: bool,
    /// Prices by model ([`crate::prices::PriceTable`]): built-in plus `config.json` `prices`.
    pub prices: crate::prices::PriceTable,
    /// Space name -> default budget of its runs (`config.json` `space_budgets`).
    pub space_budgets: BTreeMap<String, spaces_sdk::Budget>,
    /// The admission caps (`max_running_turns`, `space_max_running_turns`,
    /// `admission_queue_max`; `supervisor::admission`).
    pub admission: crate::supervisor::admission::Caps,
    /// How long a run waits after a provider's limit with no reset time given, ms.
    pub quota_backoff_ms: u64,
    /// The OTLP/HTTP collector run spans are exported to ([`crate::traces`]); `None`: off.
    pub otlp_endpoint: Option<String>,
    /// Checkpoints of runs' working folders (issue 34; `SPACES_CHECKPOINTS`, `checkpoints`,
    /// `checkpoint_exclude`, `checkpoint_keep_turns`); `None`: off.
    pub checkpoints: Option<CheckpointSettings>,
}

/// How runs' working folders are checkpointed at turn boundaries ([`spaces_volumes::checkpoint`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointSettings {
    /// Globs (relative to the working folder) left out of checkpoints and never touched by a
    /// rewind.
    pub exclude: Vec<String>,
    /// How many of a run's newest checkpoints are kept (at least 2).
    pub keep_turns: usize,
    /// Watch each run's folder between turns (inotify): a turn that changed nothing is
    /// checkpointed without a walk ([`spaces_volumes::checkpoint::Checkpoints::watch`]).
    pub watch: bool,
}

/// Default of [`CheckpointSettings::keep_turns`].
pub const DEFAULT_CHECKPOINT_KEEP_TURNS: usize = 100;

/// A yes/no setting from the environment: `0`, `false`, `off` or `no` is no, anything else yes;
/// `None` when unset.
/// Which sandbox the operator asked for (`SPACES_SANDBOX`, `config.json` `sandbox`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sandbox {
    /// Bubblewrap where it makes a sandbox, else Landlock; neither: the daemon refuses to start.
    Auto,
    /// Bubblewrap only (the daemon refuses to start where it cannot make a sandbox).
    Bubblewrap,
    /// Landlock only, even where bubblewrap works (for tests, and hosts where bubblewrap is
    /// unwanted); the daemon refuses to start where the kernel has no Landlock.
    Landlock,
    /// No sandbox at all.
    Off,
}

impl Sandbox {
    /// The names [`Sandbox::parse`] takes, for messages.
    pub const NAMES: &'static str = "auto, bubblewrap, landlock or off";

    /// `value` as a setting: a name, or a boolean spelling (`on`/`true`/`1`/`yes` is `auto`,
    /// `off`/`false`/`0`/`no` is `off`), any case. Errors: anything else (the message lists
    /// the names).
    pub fn parse(value: &str) -> Result<Sandbox, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "auto" | "on" | "true" | "1" | "yes" => Ok(Sandbox::Auto),
            "bubblewrap" | "bwrap" => Ok(Sandbox::Bubblewrap),
            "landlock" => Ok(Sandbox::Landlock),
            "off" | "false" | "0" | "no" => Ok(Sandbox::Off),
            other => Err(format!("{other:?} is not a sandbox: give {}", Self::NAMES)),
        }
    }
}

/// [`Config::ahead_psi_max`] unless set.
pub const DEFAULT_AHEAD_PSI_MAX: f64 = 40.0;

fn env_flag(key: &str) -> Option<bool> {
    std::env::var(key).ok().map(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "false" | "off" | "no"))
}

/// The environment variable `name` parsed, if set and valid.
fn env_num<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

impl Config {
    /// Resolve from `state_dir` (or `SPACES_HOME`, or the default), the config file and the
    /// environment. Errors: an unreadable or invalid config file (the message names it).
    pub fn load(state_dir: Option<PathBuf>) -> anyhow::Result<Config> {
        let state_dir = state_dir.unwrap_or_else(default_state_dir);
        let file = read_config_file(&state_dir.join("config.json"))?;
        let mut harness_bin = file.harness_bin;
        for (key, value) in std::env::vars() {
            if let Some(id) = key.strip_prefix("SPACES_HARNESS_BIN_") {
                if !value.is_empty() {
                    harness_bin.insert(id.to_ascii_lowercase().replace('_', "-"), value.into());
                }
            }
        }
        let tools_dir =
            std::env::var_os("SPACES_TOOLS_DIR").map(PathBuf::from).or(file.tools_dir).unwrap_or_else(|| state_dir.join("tools"));
        let forwardable_env = std::env::var("SPACES_FORWARDABLE_ENV")
            .ok()
            .map(|s| s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect())
            .or(file.forwardable_env)
            .unwrap_or_else(|| DEFAULT_FORWARDABLE_ENV.iter().map(|s| s.to_string()).collect());
        let stall_ms = std::env::var("SPACES_STALL_MS").ok().and_then(|s| s.parse().ok()).or(file.stall_ms).unwrap_or(DEFAULT_STALL_MS);
        let exec_timeout_ms = std::env::var("SPACES_EXEC_TIMEOUT_MS")
            .ok()
            .and_then(|s| s.parse().ok())
            .or(file.exec_timeout_ms)
            .unwrap_or(DEFAULT_EXEC_TIMEOUT_MS);
        let lease_ttl_ms = env_num("SPACES_LEASE_TTL_MS").or(file.lease_ttl_ms).unwrap_or(LEASE_TTL.as_millis() as u64);
        if lease_ttl_ms < MIN_LEASE_TTL_MS {
            anyhow::bail!(
                "the lease TTL (SPACES_LEASE_TTL_MS or lease_ttl_ms) is {lease_ttl_ms} ms; it must be at least {MIN_LEASE_TTL_MS} ms"
            );
        }
        crate::prices::PriceTable::check(&file.prices).map_err(|e| anyhow::anyhow!("config.json {e}"))?;
        for (space, budget) in &file.space_budgets {
            budget.check(&format!("space_budgets.{space}")).map_err(|e| anyhow::anyhow!("config.json {e}"))?;
        }
        let checkpoints = env_flag("SPACES_CHECKPOINTS").or(file.checkpoints).unwrap_or(true).then(|| CheckpointSettings {
            exclude: file
                .checkpoint_exclude
                .clone()
                .unwrap_or_else(|| spaces_volumes::checkpoint::DEFAULT_EXCLUDE.iter().map(|s| (*s).to_owned()).collect()),
            keep_turns: env_num("SPACES_CHECKPOINT_KEEP_TURNS")
                .or(file.checkpoint_keep_turns)
                .unwrap_or(DEFAULT_CHECKPOINT_KEEP_TURNS)
                .max(2),
            watch: env_flag("SPACES_CHECKPOINT_WATCH").or(file.checkpoint_watch).unwrap_or(true),
        });
        if let Some(c) = &checkpoints {
            spaces_volumes::checkpoint::check_exclude(&c.exclude).map_err(|e| anyhow::anyhow!("config.json checkpoint_exclude: {e}"))?;
        }
        Ok(Config {
            checkpoints,
            prices: crate::prices::PriceTable::with(&file.prices),
            space_budgets: file.space_budgets,
            otlp_endpoint: std::env::var("SPACES_OTLP_ENDPOINT").ok().filter(|v| !v.is_empty()).or(file.otlp_endpoint),
            quota_backoff_ms: env_num("SPACES_QUOTA_BACKOFF_MS").or(file.quota_backoff_ms).unwrap_or(DEFAULT_QUOTA_BACKOFF_MS),
            admission: crate::supervisor::admission::Caps {
                host: env_num("SPACES_MAX_RUNNING_TURNS").or(file.max_running_turns).filter(|n| *n > 0),
                spaces: file.space_max_running_turns.into_iter().filter(|(_, n)| *n > 0).collect(),
                queue_max: env_num("SPACES_ADMISSION_QUEUE_MAX")
                    .or(file.admission_queue_max)
                    .unwrap_or(crate::supervisor::admission::DEFAULT_QUEUE_MAX),
            },
            lease_ttl_ms,
            tools_dir,
            harness_bin,
            forwardable_env,
            stall_ms,
            exec_env: file.exec_env,
            exec_timeout_ms,
            http_max_connections: env_num("SPACES_HTTP_MAX_CONNECTIONS").or(file.http_max_connections),
            http_header_timeout_ms: env_num("SPACES_HTTP_HEADER_TIMEOUT_MS")
                .or(file.http_header_timeout_ms)
                .unwrap_or(DEFAULT_HTTP_HEADER_TIMEOUT_MS),
            http_body_timeout_ms: env_num("SPACES_HTTP_BODY_TIMEOUT_MS")
                .or(file.http_body_timeout_ms)
                .unwrap_or(DEFAULT_HTTP_BODY_TIMEOUT_MS),
            volume: std::env::var("SPACES_VOLUME")
                .ok()
                .filter(|v| !v.is_empty())
                .or(file.volume)
                .unwrap_or_else(|| state_dir.join("volume").display().to_string()),
            host_id: std::env::var("SPACES_HOST_ID").ok().filter(|v| !v.is_empty()).or(file.host_id),
            run_retention_days: env_num("SPACES_RUN_RETENTION_DAYS").or(file.run_retention_days).filter(|d| *d > 0),
            cgroups: env_flag("SPACES_CGROUPS").or(file.cgroups).unwrap_or(true),
            sandbox: match std::env::var("SPACES_SANDBOX") {
                Ok(v) => Sandbox::parse(&v).map_err(|e| anyhow::anyhow!("SPACES_SANDBOX: {e}"))?,
                Err(_) => match &file.sandbox {
                    None => Sandbox::Auto,
                    Some(serde_json::Value::Bool(on)) => {
                        if *on {
                            Sandbox::Auto
                        } else {
                            Sandbox::Off
                        }
                    }
                    Some(serde_json::Value::String(v)) => Sandbox::parse(v).map_err(|e| anyhow::anyhow!("config.json sandbox: {e}"))?,
                    Some(other) => anyhow::bail!("config.json sandbox: {other} is neither true/false nor a name ({})", Sandbox::NAMES),
                },
            },
            spare_shims: env_flag("SPACES_SPARE_SHIMS").or(file.spare_shims).unwrap_or(true),
            ahead_psi_max: env_num("SPACES_AHEAD_PSI_MAX").or(file.ahead_psi_max).unwrap_or(DEFAULT_AHEAD_PSI_MAX).clamp(0.0, 100.0),
            pids_max: env_num("SPACES_PIDS_MAX").or(file.pids_max).unwrap_or(DEFAULT_PIDS_MAX),
            memory_max_bytes: env_num("SPACES_MEMORY_MAX_BYTES").or(file.memory_max_bytes).unwrap_or(0),
            agent_nice: env_num("SPACES_AGENT_NICE")
                .or(file.agent_nice)
                .map_or(spaces_os::process::priority::DEFAULT_AGENT_NICE, |n| n.min(19) as i32),
            output_log_max_bytes: env_num("SPACES_OUTPUT_LOG_MAX_BYTES")
                .or(file.output_log_max_bytes)
                .filter(|n| *n > 0)
                .unwrap_or(MAX_JOURNAL_BYTES),
            allow_local_repos: env_flag("SPACES_ALLOW_LOCAL_REPOS").or(file.allow_local_repos).unwrap_or(false),
            state_dir,
        })
    }

    /// This host's id in leases and snapshots: the configured one, else the one kept in
    /// `<state dir>/host-id`, else a new one (hostname plus 6 random hex digits) written there.
    /// Errors: the file cannot be written.
    pub fn host_id(&self) -> std::io::Result<String> {
        if let Some(id) = &self.host_id {
            return Ok(id.clone());
        }
        let path = self.state_dir.join("host-id");
        if let Ok(id) = std::fs::read_to_string(&path) {
            if !id.trim().is_empty() {
                return Ok(id.trim().to_owned());
            }
        }
        let host = nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok()).unwrap_or_else(|| "host".into());
        let host: String = host.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(40).collect();
        let id = format!("{host}-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
        spaces_store::fsutil::write_private(&path, id.as_bytes())?;
        Ok(id)
    }

    /// The ceilings of one run's or command's cgroup (0 = no limit = `None`).
    pub fn process_limits(&self) -> spaces_os::process::cgroup::Limits {
        spaces_os::process::cgroup::Limits {
            pids_max: (self.pids_max > 0).then_some(self.pids_max),
            memory_max_bytes: (self.memory_max_bytes > 0).then_some(self.memory_max_bytes),
        }
    }

    /// `<state dir>/volume-cache`: this host's stat-cache of saved homes.
    pub fn volume_cache_dir(&self) -> PathBuf {
        self.state_dir.join("volume-cache")
    }

    /// `<state dir>/spacesd.sock`.
    pub fn socket_path(&self) -> PathBuf {
        spaces_sdk::local::socket_path(&self.state_dir)
    }

    /// `<state dir>/spaces.db`.
    pub fn db_path(&self) -> PathBuf {
        self.state_dir.join("spaces.db")
    }

    /// `<state dir>/runs/<run_id>`.
    pub fn run_dir(&self, run_id: &str) -> PathBuf {
        self.state_dir.join("runs").join(run_id)
    }

    /// `<tools dir>/<harness id>`: the npm prefix of one harness's pinned install.
    pub fn harness_tools_dir(&self, harness_id: &str) -> PathBuf {
        self.tools_dir.join(harness_id)
    }
}

/// `SPACES_HOME`, else `<user data dir>/spaces`, else `./.spaces` (one definition for every
/// front door: [`spaces_sdk::local::default_state_dir`]).
pub fn default_state_dir() -> PathBuf {
    spaces_sdk::local::default_state_dir()
}

fn read_config_file(path: &Path) -> anyhow::Result<ConfigFile> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| anyhow::anyhow!("invalid config file {}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConfigFile::default()),
        Err(e) => Err(anyhow::anyhow!("cannot read config file {}: {e}", path.display())),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::{Config, Sandbox};

    #[test]
    fn sandbox_settings_keep_the_old_spellings_and_refuse_unknown_ones() {
        for (value, want) in [
            ("", Sandbox::Auto),
            ("on", Sandbox::Auto),
            ("1", Sandbox::Auto),
            ("AUTO", Sandbox::Auto),
            ("bwrap", Sandbox::Bubblewrap),
            ("bubblewrap", Sandbox::Bubblewrap),
            (" landlock ", Sandbox::Landlock),
            ("off", Sandbox::Off),
            ("false", Sandbox::Off),
            ("0", Sandbox::Off),
        ] {
            assert_eq!(Sandbox::parse(value).unwrap(), want, "{value:?}");
        }
        let err = Sandbox::parse("firejail").unwrap_err();
        assert!(err.contains("auto, bubblewrap, landlock or off"), "{err}");
    }

    /// The lease TTL: 60 s by default, `lease_ttl_ms` in config.json sets another, and one
    /// shorter than 1 s is refused naming the setting (renewal retries are fractions of it).
    #[test]
    fn the_lease_ttl_defaults_to_a_minute_and_refuses_less_than_a_second() {
        if std::env::var_os("SPACES_LEASE_TTL_MS").is_some() {
            panic!("unset SPACES_LEASE_TTL_MS to run this test: it reads config.json");
        }
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Config::load(Some(dir.path().to_path_buf())).unwrap().lease_ttl_ms, 60_000);
        std::fs::write(dir.path().join("config.json"), r#"{"lease_ttl_ms": 12000}"#).unwrap();
        assert_eq!(Config::load(Some(dir.path().to_path_buf())).unwrap().lease_ttl_ms, 12_000);
        std::fs::write(dir.path().join("config.json"), r#"{"lease_ttl_ms": 999}"#).unwrap();
        let err = Config::load(Some(dir.path().to_path_buf())).unwrap_err().to_string();
        assert!(err.contains("lease_ttl_ms") && err.contains("at least 1000 ms"), "{err}");
    }
}
