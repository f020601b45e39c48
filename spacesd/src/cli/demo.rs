//! `spacesd demo`: the main job end to end on one machine.
//!
//! Starts a daemon in this process on a fresh state dir (its Unix socket is real; everything
//! below goes through the HTTP client), registers a demo Space, and runs a real Claude Code agent
//! in it, printing live events as they arrive: a first turn, then a follow-up in the same session.
//!
//! The model is either the Anthropic Messages endpoint given with `--base-url` (or
//! `SPACES_DEMO_BASE_URL`), or the real Anthropic API when `ANTHROPIC_API_KEY` is set. The daemon
//! itself carries no scripted model: `scripts/demo` starts the test kit's `scripted-model` binary
//! on 127.0.0.1 with `scripts/demo-model.json` (the agent writes `hello.txt` with its Write tool,
//! answers, then answers the follow-up) and passes its URL and the Space dir, so the demo works
//! offline.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use spaces_host::config::Config;
use spaces_sdk::client::{Client, Endpoint};
use spaces_sdk::{SpaceAddRequest, SpaceAgentOptions};

use super::follow::follow_events as agent_follow;

/// What `spacesd demo` says when it has no model to talk to.
const NO_MODEL: &str = "the demo needs a model: ANTHROPIC_API_KEY is not set and no --base-url was given.
  - offline: run scripts/demo (from the source tree); it starts a scripted model endpoint
    (target/debug/scripted-model, crate spaces-testkit) on 127.0.0.1 and passes its URL here
  - any Anthropic Messages endpoint: spacesd demo --base-url http://127.0.0.1:PORT
  - the real Anthropic API: export ANTHROPIC_API_KEY=... and run spacesd demo again";

/// Options of `spacesd demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// The prompt of the first turn.
    #[arg(long, default_value = "Create hello.txt saying hello from Spaces, then tell me what you did.")]
    pub prompt: String,
    /// Keep the demo's state dir and Space instead of deleting them.
    #[arg(long)]
    pub keep: bool,
    /// Anthropic Messages endpoint playing the model (e.g. the scripted one `scripts/demo`
    /// starts). Wins over ANTHROPIC_API_KEY, which is then not passed to the agent.
    #[arg(long, env = "SPACES_DEMO_BASE_URL", value_name = "URL")]
    pub base_url: Option<String>,
    /// Use this directory as the demo Space (created if missing, never deleted by the demo).
    /// Default: `space/` in the demo's temporary dir.
    #[arg(long, value_name = "DIR")]
    pub space_dir: Option<PathBuf>,
}

/// The agent options naming the demo's model, and the line that says which it is: `--base-url`
/// first, else the real API when `ANTHROPIC_API_KEY` is set, else [`NO_MODEL`].
fn choose_model(base_url: Option<&str>, api_key_set: bool) -> anyhow::Result<(SpaceAgentOptions, String)> {
    let mut options = SpaceAgentOptions::default();
    let line = if let Some(url) = base_url {
        options.base_url = Some(url.to_owned());
        format!("== model endpoint: {url} (--base-url)")
    } else if api_key_set {
        options.env_from_host = vec!["ANTHROPIC_API_KEY".into()];
        "== using the real Anthropic API (ANTHROPIC_API_KEY is set)".to_owned()
    } else {
        anyhow::bail!(NO_MODEL);
    };
    Ok((options, line))
}

/// Run the demo on `state_dir` (the `--state-dir` given on the command line, kept afterwards),
/// else on a fresh temporary state dir.
pub async fn run(cfg: Config, args: DemoArgs, state_dir: Option<PathBuf>) -> anyhow::Result<()> {
    let (options, model_line) = choose_model(args.base_url.as_deref(), std::env::var_os("ANTHROPIC_API_KEY").is_some())?;

    let tmp = tempfile::Builder::new().prefix("spaces-demo-").tempdir()?;
    let base: PathBuf = tmp.path().to_path_buf();
    let cfg = match state_dir {
        Some(dir) => Config::load(Some(std::path::absolute(dir)?))?,
        None => Config { state_dir: base.join("state"), volume: base.join("state").join("volume").display().to_string(), ..cfg },
    };
    let space_dir = match &args.space_dir {
        Some(dir) => std::path::absolute(dir)?,
        None => base.join("space"),
    };
    std::fs::create_dir_all(&space_dir).with_context(|| format!("cannot create {}", space_dir.display()))?;
    let socket = cfg.socket_path();
    println!("== spacesd demo: state dir {}, Space dir {}", cfg.state_dir.display(), space_dir.display());

    let state = crate::serve::open(cfg.clone(), &[]).await?;
    let listener = tokio::net::UnixListener::bind(&socket).with_context(|| format!("cannot bind {}", socket.display()))?;
    let limits = crate::http::Limits::of(&cfg);
    // At the Landlock level the socket takes only the operator's token (as under `serve`); the
    // client below reads it from the state dir.
    let token = crate::serve::landlock_token(&cfg.state_dir.join("token"))?;
    let access = crate::serve::access(&state, token.as_deref());
    let app = crate::http::router(state.sup, state.cs);
    tokio::spawn(crate::http::serve_unix(listener, crate::http::unix_app(app, access), limits));
    let client = Client::new(Endpoint::Unix(socket));
    println!("{model_line}");

    let space = SpaceAddRequest {
        name: "demo".into(),
        root: space_dir.display().to_string(),
        read_only: false,
        approvals: Default::default(),
        network: Default::default(),
        replace: false,
    };
    client.space_add(&space).await?;
    let report = client.space("demo").agent_start("claude-code", &args.prompt, None, Some(options)).await?;
    println!("== started {} (agent_start returned at once; first use installs the CLI)", report.run_id);
    for note in &report.notes {
        println!("   note: {note}");
    }
    let cursor = agent_follow(&client, "demo", &report.run_id, 0).await?.cursor;

    println!("== follow-up turn in the same session");
    client.space("demo").agent_message(&report.run_id, "Is the file still there?", None).await?;
    agent_follow(&client, "demo", &report.run_id, cursor).await?;

    let status = client.space("demo").agent_status(&report.run_id, Some(5)).await?;
    println!("== status: {} / {} / accepts_message={}", status.status.as_str(), status.phase.as_str(), status.accepts_message);
    println!("== result_text: {}", status.result_text.unwrap_or_default());
    match std::fs::read_to_string(space_dir.join("hello.txt")) {
        Ok(text) => println!("== hello.txt in the Space: {:?}", text),
        Err(_) => println!("== hello.txt was not created (a real model may have done something else)"),
    }
    let stop = client.space("demo").agent_stop(&report.run_id).await?;
    println!("== stop: ok={} ({})", stop.ok, stop.reason);
    if args.keep {
        let kept = tmp.keep();
        println!("== kept {} (Space dir {})", kept.display(), space_dir.display());
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn base_url_wins_and_keeps_the_key_home() {
        let (o, line) = choose_model(Some("http://127.0.0.1:9"), true).unwrap();
        assert_eq!(o.base_url.as_deref(), Some("http://127.0.0.1:9"));
        assert!(o.env_from_host.is_empty());
        assert!(line.contains("http://127.0.0.1:9"));
    }

    #[test]
    fn api_key_means_the_real_api() {
        let (o, _) = choose_model(None, true).unwrap();
        assert_eq!(o.base_url, None);
        assert_eq!(o.env_from_host, vec!["ANTHROPIC_API_KEY".to_owned()]);
    }

    #[test]
    fn no_model_says_what_to_do() {
        let e = choose_model(None, false).unwrap_err().to_string();
        assert!(e.contains("scripts/demo") && e.contains("--base-url") && e.contains("ANTHROPIC_API_KEY"), "{e}");
    }
}
