//! `agent_start`: validate the request against the Space and the host, create the run directory
//! (0700, the run's environment and MCP server secrets in 0600 files: [`super::secrets`]),
//! record the run, and launch its actor.
//! Nothing is created when validation fails; the caller is answered at once, never after a turn.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use spaces_harnesses::Harness;
use spaces_sdk::{
    bounded, AgentStartReport, AgentStartRequest, ApiError, ErrorCode, Phase, SpaceAgentOptions, SpaceNetwork, SpaceRecord, Status,
};
use spaces_store::now_ms;
use spaces_store::runs::RunRow;

use super::folder::{folder_present, SpaceFolder};
use super::marker::turn_tag;
use super::secrets::RunSecrets;
use super::shared::Inner;
use super::{actors, mcp_servers};
use crate::config::Config;
use crate::error::{refuse, Error, Result};

/// The note of a run in a `network: none` Space: why its agent's model calls fail.
const NETWORK_NONE_NOTE: &str = "network: none: this Space's agents and commands are kept off the network (the sandbox's \
     own loopback at most), so the agent cannot reach its model provider or any --base-url, the host's 127.0.0.1 included: \
     expect connection errors from it; its own API socket (the `spaces` tools' socket) still works. Register the Space with network: \
     enabled (--replace) to give agents the network";

/// Start a run of `req` in `space` (see [`super::Supervisor::agent_start`] for the errors).
/// With `key` (the request's `request_id`), the key is stored with the report in the run row's
/// transaction; when a concurrent start with the same key stored it first, that start's report
/// is the answer and this one creates nothing.
pub(super) async fn start(
    inner: &Arc<Inner>,
    space: SpaceRecord,
    req: &AgentStartRequest,
    key: Option<super::keys::Keyed>,
) -> Result<AgentStartReport> {
    let harness = harness(&req.agent)?;
    if space.read_only {
        return Err(refuse(
            ErrorCode::InvalidArgument,
            format!(
                "Space {:?} is read-only: agents run commands and write files, so they cannot run in it; register a writable Space",
                space.name
            ),
        ));
    }
    let unsandboxed = spaces_os::sandbox::level() == spaces_os::sandbox::Level::Off;
    if space.network == SpaceNetwork::None && unsandboxed {
        return Err(refuse(ErrorCode::Unauthorized, crate::sandbox::network_refusal(Path::new(&space.root))));
    }
    if req.prompt.trim().is_empty() {
        return Err(refuse(ErrorCode::InvalidArgument, "prompt is empty; give the first turn's text"));
    }
    check_traceparent(req.traceparent.as_deref())?;
    let mut options = req.options.clone().unwrap_or_default();
    if options.budget.is_none() {
        options.budget = inner.cfg.space_budgets.get(&space.name).cloned();
    }
    if let Some(budget) = &options.budget {
        budget.check("options.budget").map_err(|why| {
            let mut e = ApiError::new(ErrorCode::InvalidArgument, why);
            e.field = Some("options.budget".into());
            Error::Api(e)
        })?;
    }
    let mut cwd = resolve_cwd(Path::new(&space.root), options.cwd.as_deref())?;
    for name in options.env.keys().chain(options.env_from_host.iter()) {
        if !mcp_servers::valid_env_name(name) {
            return Err(refuse(ErrorCode::InvalidArgument, format!("invalid environment variable name {:?}", bounded(name))));
        }
    }
    mcp_servers::validate(&options)?;
    if let Some(host) = spaces_os::sandbox::host() {
        mcp_servers::check_reachable(&options, host, Path::new(&space.root))?;
    }
    if let Some(label) = &options.label {
        check_label(label)?;
    }
    let files = super::files::check(&options.files)?;
    if let Some(url) = &options.base_url {
        check_base_url(url)?;
    }
    if super::prepare::wanted(&options) {
        let local = options.repo.as_deref().map(|u| super::prepare::local_source(u, inner.cfg.allow_local_repos)).unwrap_or_default();
        let jail = super::prepare::Jail::for_space(inner, &space, local)?;
        cwd = super::prepare::check(&cwd, &options, inner.cfg.allow_local_repos, &jail).await?;
    }
    let mut notes = Vec::new();
    let env = run_env(&inner.cfg, &options, &mut notes);
    notes.extend(auth_note(inner, harness, &options, &env));
    notes.extend(budget_note(inner, harness, &options));
    notes.extend(crate::sandbox::landlock_note());
    if space.network == SpaceNetwork::None {
        notes.push(NETWORK_NONE_NOTE.to_owned());
    }
    if unsandboxed {
        notes.push(
            "unsandboxed: this daemon runs agents without a sandbox (SPACES_SANDBOX=off), so this run can do whatever the \
             daemon's user can, operator's socket and token included (docs/operations.md, \"Security model\")"
                .to_owned(),
        );
    }
    // The run made ready ahead for this Space and harness, if any (its agent starts warm).
    let run_id = super::ahead::take(inner, &space.name, harness.id());
    if req.show == Some(true) {
        notes.extend(show_notes(&inner.cfg, &space.name, &run_id));
    }
    if let Some(home) = &options.home {
        if let Err(e) = claim_home(inner, harness, home, &run_id, &space.name).await {
            // A directory made ahead for this id goes with the refused start.
            let _ = std::fs::remove_dir_all(inner.cfg.run_dir(&run_id));
            return Err(e);
        }
    }
    let report = AgentStartReport {
        process_tag: turn_tag(&run_id, 1),
        run_id: run_id.clone(),
        agent: harness.id().to_owned(),
        space: space.name.clone(),
        notes: notes.clone(),
    };
    let key_row = key.as_ref().map(|k| k.row(&run_id, &report)).transpose()?;
    let created = record(inner, &run_id, &space, harness, cwd, options, notes, env, &req.prompt, &files, key_row);
    let (run, secrets, prompt) = match created {
        Ok(created) => created,
        Err(e) => {
            if let Some(home) = req.options.as_ref().and_then(|o| o.home.as_deref()) {
                inner.homes.release(home, &run_id).await;
            }
            // A concurrent start with the same key won: its report is this call's answer.
            if let Some(first) = key.as_ref().map(|k| k.replay(&inner.store)).transpose()?.flatten() {
                return Ok(first);
            }
            return Err(e);
        }
    };
    if let Some(tp) = &req.traceparent {
        // Best effort: the run's spans start a trace of their own without it.
        let path = inner.cfg.run_dir(&run.run_id).join(super::actor::TRACEPARENT_FILE);
        if let Err(e) = std::fs::write(&path, tp.trim()) {
            tracing::warn!("run {}: the caller's traceparent was not kept ({e}); its spans start their own trace", run.run_id);
        }
    }
    actors::launch(inner, run, harness, secrets, prompt);
    Ok(report)
}

/// Create the run's directory (0700) with its secrets (0600), and its row. The stored options
/// keep env and MCP server names but never their values; the row keeps an excerpt of `prompt`
/// with the run's secret values redacted, and the names of `files`, written into the run
/// directory. Returns the row, the secrets and the first turn's prompt (`prompt` naming the
/// files). `key`, the start's idempotency key, is stored with the row. On error nothing is
/// left: no row, no key, no run directory.
#[allow(clippy::too_many_arguments)]
fn record(
    inner: &Inner,
    run_id: &str,
    space: &SpaceRecord,
    harness: &dyn Harness,
    cwd: PathBuf,
    options: SpaceAgentOptions,
    notes: Vec<String>,
    env: BTreeMap<String, String>,
    prompt: &str,
    files: &[super::files::Checked],
    key: Option<spaces_store::keys::KeyRow>,
) -> Result<(RunRow, RunSecrets, String)> {
    let run_dir = inner.cfg.run_dir(run_id);
    let made = (|| -> Result<(RunRow, RunSecrets, String)> {
        spaces_store::fsutil::create_private_dir(&run_dir)?;
        let repo_url = options.repo.clone().filter(|url| super::secrets::userinfo(url).is_some());
        let secrets = RunSecrets { env, mcp_servers: options.mcp_servers.clone(), repo_url };
        secrets.save(&run_dir)?;
        let paths = super::files::write(&run_dir, files)?;
        let row = row(run_id, space, harness, cwd, options, notes, &secrets, prompt);
        let prompt = super::files::with_files(prompt, &paths);
        super::secrets::save_first_prompt(&run_dir, &prompt)?;
        inner.store.run_insert_keyed(&row, key)?;
        Ok((row, secrets, prompt))
    })();
    if made.is_err() {
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    made
}

/// The new run's row. Its options keep env and MCP server names and attachment names, never
/// their values or bytes.
#[allow(clippy::too_many_arguments)]
fn row(
    run_id: &str,
    space: &SpaceRecord,
    harness: &dyn Harness,
    cwd: PathBuf,
    mut options: SpaceAgentOptions,
    notes: Vec<String>,
    secrets: &RunSecrets,
    prompt: &str,
) -> RunRow {
    let prompt_excerpt = spaces_sdk::run::excerpt(&secrets.redactor().apply(prompt), spaces_sdk::RunStatus::PROMPT_EXCERPT_MAX);
    // Stored options keep env and MCP server names but never their values.
    for v in options.env.values_mut() {
        *v = spaces_os::redact::REDACTED.to_owned();
    }
    options.mcp_servers = mcp_servers::redacted(&options.mcp_servers);
    // A repository URL keeps its credentials only among the run's secrets.
    if let Some(repo) = &mut options.repo {
        *repo = super::prepare::shown(repo);
    }
    for file in &mut options.files {
        file.content_base64.clear();
    }
    RunRow {
        run_id: run_id.to_owned(),
        space: space.name.clone(),
        agent: harness.id().to_owned(),
        created_ms: now_ms(),
        status: Status::Running,
        phase: Phase::Starting,
        reason: "the run is starting".into(),
        result_text: None,
        session_id: None,
        turns: 0,
        cwd: cwd.display().to_string(),
        options,
        notes,
        pgid: None,
        prompt_excerpt: Some(prompt_excerpt),
        resets_at_ms: None,
    }
}

/// Take the lease of persistent agent `home` for the new run `run_id` in Space `space`, after
/// checking that its saved home is one `harness` can use. Errors: `FORBIDDEN` (the home belongs
/// to another Space, or to none), `LEASE_HELD` (another run, here or on another host, holds
/// it), `INVALID_ARGUMENT` (a bad name, a home of another harness), `INTERNAL` (the volume).
async fn claim_home(inner: &Inner, harness: &dyn Harness, home: &str, run_id: &str, space: &str) -> Result<()> {
    inner.homes.claim(home, run_id, space).await?;
    let latest = match inner.homes.latest(home).await {
        Ok(latest) => latest,
        Err(e) => {
            inner.homes.release(home, run_id).await;
            return Err(e);
        }
    };
    let agent = latest.map(|s| crate::homes::meta::AgentMeta::from_value(&s.meta).agent).unwrap_or_default();
    if !agent.is_empty() && !spaces_harnesses::same_cli(&agent, harness.id()) {
        inner.homes.release(home, run_id).await;
        return Err(refuse(
            ErrorCode::InvalidArgument,
            format!(
                "the persistent agent {:?} is a {agent} agent; start it with agent {agent:?}, or pick another home name",
                bounded(home)
            ),
        ));
    }
    Ok(())
}

/// A `traceparent` must be W3C Trace Context's (`00-<32 hex>-<16 hex>-<2 hex>`);
/// `INVALID_ARGUMENT` naming it otherwise.
pub(super) fn check_traceparent(tp: Option<&str>) -> Result<()> {
    match tp {
        Some(tp) if crate::traces::parse_traceparent(tp).is_none() => {
            let mut e = ApiError::new(
                ErrorCode::InvalidArgument,
                format!("traceparent {:?} is not a W3C trace context (00-<32 hex>-<16 hex>-<2 hex>)", bounded(tp)),
            );
            e.field = Some("traceparent".into());
            Err(Error::Api(e))
        }
        _ => Ok(()),
    }
}

/// A note when `options.budget.usd` cannot be kept: the harness's CLI reports no cost and the
/// price table has no price for the run's model.
fn budget_note(inner: &Inner, harness: &dyn Harness, options: &SpaceAgentOptions) -> Option<String> {
    options.budget.as_ref()?.usd?;
    if harness.usage_tally().cost.is_some() {
        return None;
    }
    match options.model.as_deref() {
        Some(model) if inner.cfg.prices.price(model).is_some() => None,
        Some(model) => Some(format!(
            "options.budget.usd: {} reports no cost and the price table has no price for model {model:?}; add one to config.json \
             `prices` (docs/operations.md), or the dollar limit counts nothing",
            harness.name()
        )),
        None => Some(format!(
            "options.budget.usd: {} reports no cost and no options.model names what to price; give options.model, or the dollar \
             limit counts nothing",
            harness.name()
        )),
    }
}

/// `label` must be 1 to [`SpaceAgentOptions::LABEL_MAX`] characters, not only blanks, with no
/// control character (a newline would break the tables it is shown in). Errors:
/// `INVALID_ARGUMENT` naming `options.label`.
pub(super) fn check_label(label: &str) -> Result<()> {
    let len = label.chars().count();
    let why = if label.trim().is_empty() {
        "is empty".to_owned()
    } else if len > SpaceAgentOptions::LABEL_MAX {
        format!("is {len} characters long; at most {} are allowed", SpaceAgentOptions::LABEL_MAX)
    } else if label.chars().any(char::is_control) {
        "holds a control character (a newline, a tab, ...); give one line of text".to_owned()
    } else {
        return Ok(());
    };
    let mut e = ApiError::new(ErrorCode::InvalidArgument, format!("options.label {why}"));
    e.field = Some("options.label".into());
    Err(Error::Api(e))
}

/// `base_url` must be an `http://` or `https://` URL with a host. Errors: `INVALID_ARGUMENT`
/// naming `options.base_url`, before anything is created (a bad URL would otherwise fail
/// inside the CLI with a reason that blames it).
fn check_base_url(url: &str) -> Result<()> {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
    let host = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or(""));
    let ok = host.is_some_and(|h| !h.is_empty() && !h.contains(char::is_whitespace) && !h.starts_with(':'));
    if ok {
        return Ok(());
    }
    let mut e = ApiError::new(
        ErrorCode::InvalidArgument,
        format!("options.base_url {:?} is not an http:// or https:// URL with a host (e.g. http://127.0.0.1:8080)", bounded(url)),
    );
    e.field = Some("options.base_url".into());
    Err(Error::Api(e))
}

/// A note when no provider key reaches the agent: none of the harness's key variables is in
/// the run's environment, no custom endpoint is set, and the CLI is the pinned install (an
/// operator's binary, or a persistent home, may carry its own login). The CLI's own advice
/// (`/login`) cannot work for a detached run, so the note says what does.
fn auth_note(inner: &Inner, harness: &dyn Harness, options: &SpaceAgentOptions, env: &BTreeMap<String, String>) -> Option<String> {
    let keys = harness.keys();
    if options.base_url.is_some() || options.home.is_some() || keys.iter().any(|k| env.contains_key(*k)) {
        return None;
    }
    if matches!(super::install::locate(&inner.cfg, harness).0, super::install::Source::Operator(_)) {
        return None;
    }
    let key = keys.first().copied().unwrap_or("the provider key");
    Some(format!(
        "no provider key reaches this agent ({}): start `spacesd serve` with {key} in its environment and pass \
         --env-from-host {key} (options.env_from_host), or give it with --env {key}=... (options.env), or point \
         --base-url at an endpoint; the CLI's own `/login` advice cannot work for a detached run",
        keys.join(", ")
    ))
}

/// The harness `agent`. Errors: `HARNESS_UNAVAILABLE`, naming the ones this host has and the
/// one meant when `agent` is part of its id (`gemini` for `gemini-cli`).
fn harness(agent: &str) -> Result<&'static dyn Harness> {
    spaces_harnesses::by_id(agent).ok_or_else(|| refuse(ErrorCode::HarnessUnavailable, unknown_agent(agent)))
}

/// What an unknown harness id is told: the ids of this host, and "did you mean" the first one
/// that contains it.
fn unknown_agent(agent: &str) -> String {
    let known: Vec<&str> = spaces_harnesses::all().iter().map(|h| h.id()).collect();
    let wanted = agent.trim().to_ascii_lowercase();
    let meant = known.iter().find(|id| wanted.len() >= 3 && id.contains(wanted.as_str()));
    let hint = meant.map(|id| format!(" (did you mean {id:?}?)")).unwrap_or_default();
    format!("unknown agent {:?}{hint}; this host has: {}", bounded(agent), known.join(", "))
}

/// The run's own environment: the `env_from_host` names this host may forward and has set,
/// then `env`. Each name that is not forwarded gets a note saying why.
fn run_env(cfg: &Config, options: &SpaceAgentOptions, notes: &mut Vec<String>) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for name in &options.env_from_host {
        if !cfg.forwardable_env.contains(name) {
            notes.push(format!("{name} was not forwarded: it is not on this host's forwardable list ({})", cfg.forwardable_env.join(", ")));
        } else {
            match std::env::var(name) {
                Ok(v) => {
                    env.insert(name.clone(), v);
                }
                Err(_) => notes.push(format!("{name} was not forwarded: it is not set on this host")),
            }
        }
    }
    env.extend(options.env.clone());
    env
}

/// `show`: how to watch the run live: the attach command, and the run's page and event stream
/// on the TCP listener when one is on (its address is `<state dir>/tcp.addr`), else how to get
/// one.
fn show_notes(cfg: &Config, space: &str, run_id: &str) -> Vec<String> {
    let mut notes = vec![format!("watch it live: spacesd agent attach {run_id}")];
    match std::fs::read_to_string(cfg.state_dir.join("tcp.addr")).ok().map(|a| a.trim().to_owned()).filter(|a| !a.is_empty()) {
        Some(addr) => notes.extend([
            format!(
                "its page on the web: http://{addr}/ui/spaces/{space}/runs/{run_id} (log the browser in with the link `spacesd ui` prints)"
            ),
            format!(
                "its live events on the web: http://{addr}/v1/spaces/{space}/agents/{run_id}/events (Accept: text/event-stream, \
             Authorization: Bearer <the token in {}>)",
                cfg.state_dir.join("token").display()
            ),
        ]),
        None => {
            notes.push("no web URL: this daemon has no TCP listener; start it with `spacesd serve --tcp 127.0.0.1:PORT` for one".into())
        }
    }
    notes
}

/// The agent's working directory: the Space root, or `cwd` relative to it, resolved at open
/// time by the same confinement as the file tools (`codespace::fs::Root::check_dir`):
/// `PATH_ESCAPE` for `..`/absolute paths, `SYMLINK_REJECTED` for a symlink on the way,
/// `FILE_NOT_FOUND`, `PATH_NOT_DIRECTORY`.
fn resolve_cwd(root: &Path, cwd: Option<&str>) -> Result<PathBuf> {
    folder_present(&SpaceFolder { space: None, path: root })?;
    let Some(rel) = cwd.filter(|c| !c.is_empty() && *c != ".") else {
        return Ok(root.to_path_buf());
    };
    let root = spaces_codespace::fs::Root::open_bound(root).map_err(|e| Error::Api(e.into()))?;
    root.check_dir(rel).map_err(|e| {
        let mut e = ApiError::from(e);
        e.message = format!("cwd {:?}: {}", bounded(rel), e.message);
        Error::Api(e)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_unknown_agent_names_the_harness_meant_when_it_is_part_of_its_id() {
        assert!(super::unknown_agent("gemini").contains("(did you mean \"gemini-cli\"?)"));
        assert!(super::unknown_agent("codex").contains("(did you mean \"openai-codex\"?)"));
        assert!(super::unknown_agent("Claude").contains("(did you mean \"claude-code\"?)"));
        let none = super::unknown_agent("aider");
        assert!(!none.contains("did you mean") && none.contains("this host has: claude-code, openai-codex"), "{none}");
    }
}
