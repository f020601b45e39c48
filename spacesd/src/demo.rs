//! `spacesd demo`: the main job end to end on one machine, offline.
//!
//! Starts a daemon in this process on a fresh state dir (its Unix socket is real; everything
//! below goes through the HTTP client), registers a demo Space, and runs a real Claude Code agent
//! in it. With `ANTHROPIC_API_KEY` unset, a scripted Anthropic Messages endpoint on 127.0.0.1
//! plays the model: the agent writes `hello.txt` with its Write tool, answers, then answers a
//! follow-up in the same session. Live events are printed as they arrive.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use spaces_sdk::client::{Client, Endpoint};
use spaces_sdk::{SpaceAddRequest, SpaceAgentOptions};
use spaces_testkit::{Reply, Script, ScriptedServer, Wire};

use crate::cli::agent_follow;
use crate::config::Config;

/// Options of `spacesd demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// The prompt of the first turn.
    #[arg(long, default_value = "Create hello.txt saying hello from Spaces, then tell me what you did.")]
    pub prompt: String,
    /// Keep the demo's state dir and Space instead of deleting them.
    #[arg(long)]
    pub keep: bool,
}

/// Run the demo. Uses `--state-dir` if given, else a fresh temporary one.
pub async fn run(cfg: Config, args: DemoArgs) -> anyhow::Result<()> {
    let tmp = tempfile::Builder::new().prefix("spaces-demo-").tempdir()?;
    let base: PathBuf = tmp.path().to_path_buf();
    let cfg = Config { state_dir: base.join("state"), ..cfg };
    let space_dir = base.join("space");
    std::fs::create_dir_all(&space_dir)?;
    let socket = cfg.socket_path();
    println!("== spacesd demo: state dir {}, Space dir {}", cfg.state_dir.display(), space_dir.display());

    let state = crate::serve::open(cfg.clone()).await?;
    let listener = tokio::net::UnixListener::bind(&socket).with_context(|| format!("cannot bind {}", socket.display()))?;
    let app = crate::http::router(state.sup, state.cs);
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = Client::new(Endpoint::Unix(socket));

    let mut server: Option<ScriptedServer> = None;
    let mut options = SpaceAgentOptions::default();
    if std::env::var_os("ANTHROPIC_API_KEY").is_some() {
        println!("== using the real Anthropic API (ANTHROPIC_API_KEY is set)");
        options.env_from_host = vec!["ANTHROPIC_API_KEY".into()];
    } else {
        let file = space_dir.join("hello.txt");
        let script = Script::new([
            Reply::ToolCall {
                name: "Write".into(),
                input: serde_json::json!({"file_path": file.display().to_string(), "content": "hello from Spaces\n"}),
            },
            Reply::Text("I created hello.txt containing \"hello from Spaces\".".into()),
            Reply::Text("Yes: hello.txt is still there, in the same session.".into()),
        ]);
        let s = ScriptedServer::start(Wire::AnthropicMessages, script).await?;
        println!("== no ANTHROPIC_API_KEY: using a scripted model endpoint at {}", s.base_url());
        options.base_url = Some(s.base_url());
        server = Some(s);
    }

    let space = SpaceAddRequest { name: "demo".into(), root: space_dir.display().to_string(), read_only: false, approvals: Default::default(), replace: false };
    client.space_add(&space).await?;
    let report = client.space("demo").agent_start("claude-code", &args.prompt, None, Some(options)).await?;
    println!("== started {} (agent_start returned at once; first use installs the CLI)", report.run_id);
    for note in &report.notes {
        println!("   note: {note}");
    }
    let cursor = agent_follow(&client, "demo", &report.run_id, 0).await?;

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
    if let Some(s) = server {
        println!("== the model endpoint received {} model calls", s.model_calls().len());
    }
    if args.keep {
        let kept = tmp.keep();
        println!("== kept {}", kept.display());
    }
    Ok(())
}
