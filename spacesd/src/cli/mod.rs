//! The `spacesd` command line: the daemon (`serve`), Space registration, the agent operations
//! of the API (`agent start|status|events|attach|send|interrupt|stop|list`), `ui` (a login link
//! for the web page of runs), `capabilities`, `tool`,
//! `mcp` (the MCP server on stdio), `tools install`, and the offline `demo`. Client commands
//! talk to a running daemon over its Unix socket.
// Doc comments here are `--help` texts (clap), where `<state dir>` reads as a placeholder, not
// HTML; rustdoc is told so.
#![allow(rustdoc::invalid_html_tags)]

mod agent;
mod attach;
pub mod demo;
mod env_args;
pub mod follow;
#[cfg(test)]
mod help_tests;
mod home;
mod print;
mod run;
mod ui;
mod usage;
mod webhook;

pub use follow::TurnFailed;
pub use run::run;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use spaces_sdk::client::{Client, Endpoint};
use spaces_sdk::{Approvals, Empty, SpaceAddRequest, SpaceNetwork};

use spaces_host::config::Config;

/// spacesd: run coding-agent CLIs (Claude Code, Codex, opencode, Gemini CLI) as detached runs in registered Spaces.
///
/// Start the daemon with `spacesd serve`, register a workspace with `spacesd space add NAME PATH`,
/// then `spacesd agent start claude-code "your prompt" --space NAME --follow`.
#[derive(Debug, Parser)]
#[command(name = "spacesd", version, about, long_about)]
pub struct Cli {
    /// State dir (database, socket, run dirs). Default: $SPACES_HOME, else <data dir>/spaces.
    #[arg(long, global = true, env = "SPACES_HOME")]
    pub state_dir: Option<PathBuf>,
    /// True when `--state-dir` was on the command line (not from `SPACES_HOME`).
    #[arg(skip)]
    pub state_dir_given: bool,
    /// Reach the daemon over loopback TCP instead of its Unix socket, e.g.
    /// http://127.0.0.1:7700 (with the bearer token of --token-file).
    #[arg(long, global = true, env = "SPACES_URL", value_name = "URL")]
    pub url: Option<String>,
    /// Bearer token file: the token `serve --tcp` requires (created 0600 if missing), and the
    /// one client commands send with --url. Default: <state dir>/token.
    #[arg(long, global = true, env = "SPACES_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process: the size of `agent start`'s options costs nothing worth boxing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: HTTP API on <state dir>/spacesd.sock (0600) and optionally loopback TCP.
    ///
    /// Under systemd socket activation (LISTEN_FDS, contrib/systemd/spacesd.socket) the handed-over
    /// socket is served instead of binding one; it must be <state dir>/spacesd.sock.
    ///
    /// Every agent and command starts in a sandbox, chosen by SPACES_SANDBOX (or "sandbox" in
    /// config.json): auto (default) bubblewrap, else Landlock where bubblewrap cannot make one
    /// (no user namespaces); bubblewrap or landlock for that one only; off for none. It refuses
    /// to start when the chosen sandbox is not possible here, and says which is in force.
    Serve {
        /// Also listen on this loopback address, e.g. 127.0.0.1:7700 (bearer token required).
        #[arg(long)]
        tcp: Option<std::net::SocketAddr>,
        /// Where persistent agents' homes are kept: a local directory (default
        /// <state dir>/volume) or an S3-compatible store, s3://bucket/prefix (endpoint and
        /// credentials from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
        /// AWS_REGION, AWS_ALLOW_HTTP). Hosts sharing one store share their persistent agents.
        #[arg(long, value_name = "URL")]
        volume: Option<String>,
        /// End once no client holds this daemon (for 3 s) and no turn is in flight: what the
        /// Python and Node SDKs start unless asked to keep it (keep_daemon=True / keepDaemon:
        /// true). Clients hold it by keeping a connection open on <state dir>/spacesd.hold.
        #[arg(long)]
        exit_when_unused: bool,
    },
    /// Register or list Spaces (workspaces agents run in).
    #[command(subcommand)]
    Space(SpaceCmd),
    /// Start, follow, message, interrupt and stop agent runs.
    ///
    /// Exit codes: 0 done; 1 the command failed (a refusal, the daemon unreachable); 2 a
    /// followed turn (`start --follow`, `send --follow`) ended `error`, `crashed` or
    /// `max_turns`; 141 the output pipe closed (e.g. `| head`).
    #[command(subcommand)]
    Agent(agent::AgentCmd),
    /// Watch a run live in this terminal (the same as `spacesd agent attach RUN_ID`): its
    /// transcript, then new events as they land; a typed line is a follow-up, Ctrl-C interrupts
    /// the turn, a second Ctrl-C or `/detach` leaves the run going.
    Attach {
        /// The run's id (`run-...`, as `agent start` and `agent list` print it).
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
    },
    /// Persistent agents' homes in this host's volume: list, snapshots, export, import,
    /// point-in-time restore, delete, and sending a persistent agent a message.
    #[command(subcommand)]
    Home(home::HomeCmd),
    /// Webhook endpoints told of run events (operator): add, list, rm, deliveries.
    #[command(subcommand)]
    Webhook(webhook::WebhookCmd),
    /// What every harness is and can do on this host (JSON).
    Capabilities,
    /// This build's version and the pinned agent CLI versions it installs.
    Version,
    /// Print a shell completion script: `spacesd completions bash > /etc/bash_completion.d/spacesd`
    /// (zsh: into a directory on $fpath as `_spacesd`; fish: ~/.config/fish/completions/spacesd.fish).
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `spacesd man > ~/.local/share/man/man1/spacesd.1`.
    Man,
    /// Run one operation by name (a CodeSpace tool such as read, find, apply_patch,
    /// exec_command, read_process, or any other operation such as agent_status) and print its
    /// JSON result, e.g. `spacesd tool read '{"workspace_id":"demo","path":"hello.txt"}'`.
    /// Without NAME, list every operation. Exits 1 with the error JSON on a refusal.
    Tool {
        /// Tool name, as in the API reference.
        name: Option<String>,
        /// Arguments as a JSON object (default `{}`); `-` reads them from stdin, `@FILE` from a
        /// file (for large patches).
        arguments: Option<String>,
    },
    /// Serve MCP on stdin/stdout (newline-delimited JSON-RPC) for an MCP client such as Claude
    /// Code or Codex: every tool of the API, run by the daemon of the state dir, which is started
    /// in the background (log: <state dir>/spacesd.log) if none is running. Logs go to stderr.
    /// See docs/mcp.md.
    Mcp {
        /// Scope the server to this Space: every tool acts on it only (a call naming another
        /// Space is refused UNAUTHORIZED), `workspace_id`/`space` may be left out, and
        /// `space_list`, `space_add` and `approval_resolve` are not offered.
        #[arg(long, value_name = "NAME")]
        space: Option<String>,
        /// Never start a daemon: when none answers, calls are refused until one does.
        #[arg(long)]
        no_autostart: bool,
    },
    /// Tool callers' tokens: create, list, revoke (see docs/operations.md, "Security model").
    ///
    /// A caller's token acts on one Space only: `control` uses its tools and agents, `watch` only
    /// reads. It never registers Spaces, grants approvals or reads other Spaces. Tokens are kept
    /// hashed in <state dir>/tokens.json (0600); the daemon honours changes on the next request.
    #[command(subcommand)]
    Token(TokenCmd),
    /// Print a one-time login link for the web page of runs (served on the TCP listener).
    ///
    /// The page lists the Spaces and their runs with live status; a run's page streams its
    /// transcript and sends follow-ups, interrupts and stops. It is served by a daemon started
    /// with `spacesd serve --tcp 127.0.0.1:PORT`, at http://127.0.0.1:PORT/ui/.
    ///
    /// The link (http://127.0.0.1:PORT/ui/login?ticket=...) works once, within 60 seconds. Opening
    /// it sets an HttpOnly, SameSite=Strict session cookie in that browser (a random value, never
    /// the bearer token; sessions live in the daemon's memory for 12 hours, a restart ends them)
    /// and goes to the list of runs. The page's state-changing requests carry a per-session CSRF
    /// token, and the daemon takes the cookie only from the page's own loopback origin.
    ///
    /// Only the operator gets a link: run this as the daemon's user (the Unix socket), or with
    /// --url and the operator's token file. See docs/operations.md, "The web page of runs".
    Ui {
        /// Print the daemon's answer as JSON ({"url", "expires_in_ms"}) instead of the link.
        #[arg(long)]
        json: bool,
    },
    /// Install the pinned agent CLIs now (otherwise they are installed on first use).
    #[command(subcommand)]
    Tools(ToolsCmd),
    /// Demo: start a daemon, register a Space, run a real Claude Code agent (against --base-url,
    /// else the real API with ANTHROPIC_API_KEY) and print its live events. Offline: scripts/demo.
    Demo(demo::DemoArgs),
    /// Internal: the per-run shim holding one agent process across daemon restarts, started by
    /// `serve` with its spec on stdin (docs/architecture.md, "Runs survive the daemon").
    #[command(hide = true)]
    Shim {
        /// The shim's private directory (journal, control socket, log).
        dir: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum SpaceCmd {
    /// Register NAME as the directory PATH.
    Add {
        /// The Space's name (its `workspace_id`): 1-64 letters, digits, '-', '_' or '.'.
        name: String,
        /// Its root directory (must exist).
        path: PathBuf,
        /// Mark the Space read-only (read/find only: no patches, commands or agent runs).
        #[arg(long)]
        read_only: bool,
        /// Approval policy for patches and commands: `off` runs them at once, `confirm` holds
        /// each until granted (`approval_resolve`) and resumed (`operation_resume`).
        #[arg(long, value_enum, default_value = "off")]
        approvals: ApprovalsArg,
        /// Network of its agents and commands: `enabled` (they reach the network as this host
        /// does; agents need it for their model provider), `none` (a network namespace of their
        /// own, loopback only; needs the sandbox).
        #[arg(long, value_enum, default_value = "enabled")]
        network: NetworkArg,
        /// Change an existing Space of this name (root or policy) instead of refusing.
        #[arg(long)]
        replace: bool,
    },
    /// List registered Spaces (a table; --json for the records).
    List {
        /// Print the Space records as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Unregister NAME and delete its runs' history (run rows, events, run dirs). Refused while
    /// runs live (running or idle) unless --force, which stops them first.
    Remove {
        /// The Space's name.
        name: String,
        /// Stop its live runs first instead of refusing.
        #[arg(long)]
        force: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `--network enabled|none`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum NetworkArg {
    Enabled,
    None,
}

/// `--approvals off|confirm`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ApprovalsArg {
    Off,
    Confirm,
}

#[derive(Debug, Subcommand)]
pub enum TokenCmd {
    /// Create a token for one Space and print it (shown only this once); its id goes to stderr.
    Create {
        /// The Space it may act on.
        #[arg(long, value_name = "NAME")]
        space: String,
        /// `control`: tools and agents of the Space; `watch`: only operations that change nothing.
        #[arg(long, value_enum)]
        scope: crate::access::CallerScope,
    },
    /// List the tokens (id, Space, scope; never the secret) as JSON.
    List,
    /// Revoke the token ID (refused from the next request on).
    Revoke {
        /// The token's id, as `token list` prints it.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ToolsCmd {
    /// Install the pinned CLI of each HARNESS (default: all) into the tools dir.
    Install {
        /// Only these harnesses (`claude-code`, `openai-codex`, `opencode`, `gemini-cli`); none:
        /// every one.
        harness: Vec<String>,
    },
}

/// A text argument as given: `-` reads standard input, `@FILE` reads FILE, anything else is the
/// text itself. `what` names it in errors.
pub fn text_from(given: &str, what: &str) -> anyhow::Result<String> {
    match given {
        "-" => {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)
                .map_err(|e| anyhow::anyhow!("cannot read {what} from stdin: {e}"))?;
            utf8_text(bytes, what, "stdin")
        }
        file if file.starts_with('@') => text_file(std::path::Path::new(&file[1..]), what),
        text => Ok(text.to_owned()),
    }
}

/// The text of `path` (a prompt, a message). Errors: unreadable, or not UTF-8 (prompts travel
/// as JSON strings, so they are text: the message names the byte offset and how to convert).
pub fn text_file(path: &std::path::Path, what: &str) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {what} from {}: {e}", path.display()))?;
    utf8_text(bytes, what, &path.display().to_string())
}

fn utf8_text(bytes: Vec<u8>, what: &str, from: &str) -> anyhow::Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "INVALID_ARGUMENT: {what} from {from} is not UTF-8 text (invalid byte at offset {}); convert it first, e.g. `iconv -f latin1 -t utf-8`",
            e.utf8_error().valid_up_to()
        )
    })
}

impl Command {
    /// True for commands that only talk to a daemon and print (not `serve`, `demo` or `mcp`,
    /// which serve).
    pub fn is_client(&self) -> bool {
        !matches!(self, Command::Serve { .. } | Command::Demo(_) | Command::Mcp { .. } | Command::Shim { .. })
    }
}

/// Which Space a client command addresses.
#[derive(Debug, Clone, Args)]
pub struct SpaceArg {
    /// The Space. Default: $SPACES_SPACE, else the only registered Space.
    #[arg(long, env = "SPACES_SPACE")]
    pub space: Option<String>,
}

/// Run the CLI.
pub async fn main(cli: Cli) -> anyhow::Result<()> {
    let cfg = Config::load(cli.state_dir.clone())?;
    let conn = Connect { url: cli.url.clone(), token_file: cli.token_file.clone() };
    let cli_state_dir = cli.state_dir.clone();
    let state_dir_given = cli.state_dir_given;
    // A command of the local daemon holds it while it runs: one an SDK started (`serve
    // --exit-when-unused`) does not end under an `agent attach` or a `--follow`.
    let _hold = (cli.command.is_client() && cli.url.is_none()).then(|| spaces_sdk::local::hold(&cfg.state_dir, false)).flatten();
    match cli.command {
        Command::Serve { tcp, volume, exit_when_unused } => {
            let token_file = cli.token_file.clone();
            let cfg = match volume {
                Some(volume) => Config { volume, ..cfg },
                None => cfg,
            };
            crate::serve::serve(cfg, crate::serve::ServeOptions { tcp, token_file, exit_when_unused }).await
        }
        Command::Space(SpaceCmd::Add { name, path, read_only, approvals, network, replace }) => {
            let root = std::fs::canonicalize(&path).unwrap_or(path);
            let approvals = match approvals {
                ApprovalsArg::Off => Approvals::Off,
                ApprovalsArg::Confirm => Approvals::Confirm,
            };
            let network = match network {
                NetworkArg::Enabled => SpaceNetwork::Enabled,
                NetworkArg::None => SpaceNetwork::None,
            };
            let req = SpaceAddRequest { name, root: root.display().to_string(), read_only, approvals, network, replace };
            let rec = client(&cfg, &conn)?.space_add(&req).await?;
            println!("{}", serde_json::to_string_pretty(&rec)?);
            Ok(())
        }
        Command::Space(SpaceCmd::List { json }) => {
            let spaces = client(&cfg, &conn)?.space_list(&Empty {}).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&spaces)?);
            } else if spaces.is_empty() {
                println!("no Spaces registered; add one with `spacesd space add NAME PATH`");
            } else {
                let rows: Vec<Vec<String>> = spaces
                    .iter()
                    .map(|s| {
                        let mut policy = vec![if s.read_only { "read-only" } else { "writable" }];
                        if s.approvals == Approvals::Confirm {
                            policy.push("approvals: confirm");
                        }
                        if s.network == SpaceNetwork::None {
                            policy.push("network: none");
                        }
                        vec![s.name.clone(), s.root.clone(), policy.join(", ")]
                    })
                    .collect();
                print::table(&["NAME", "ROOT", "POLICY"], &rows);
            }
            Ok(())
        }
        Command::Space(SpaceCmd::Remove { name, force, json }) => {
            let req = spaces_sdk::SpaceRemoveRequest { name, force: force.then_some(true) };
            let r = client(&cfg, &conn)?.space_remove(&req).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                let stopped = if r.stopped.is_empty() { String::new() } else { format!(", stopped {}", r.stopped.join(", ")) };
                println!("removed Space {}: {} run(s) deleted{stopped}", r.name, r.runs_removed);
            }
            Ok(())
        }
        Command::Agent(cmd) => agent::run(&client(&cfg, &conn)?, cmd).await,
        Command::Attach { run_id, space } => agent::run(&client(&cfg, &conn)?, agent::AgentCmd::Attach { run_id, space }).await,
        Command::Home(cmd) => home::run(&client(&cfg, &conn)?, cmd).await,
        Command::Webhook(cmd) => webhook::run(&client(&cfg, &conn)?, cmd).await,
        Command::Ui { json } => ui::run(&client(&cfg, &conn)?, json).await,
        Command::Tool { name: None, .. } => {
            for op in spaces_sdk::op::catalogue() {
                println!("{:<20} {}", op.name, op.doc);
            }
            Ok(())
        }
        Command::Tool { name: Some(name), arguments } => {
            let text = match arguments.as_deref() {
                None | Some("") => "{}".to_owned(),
                Some(given) => text_from(given, "arguments")?,
            };
            let args: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("ARGUMENTS must be a JSON object: {e}"))?;
            match client(&cfg, &conn)?.call_named(&name, args).await {
                Ok(v) => {
                    println!("{}", serde_json::to_string_pretty(&v)?);
                    Ok(())
                }
                Err(spaces_sdk::client::ClientError::Api(e)) => {
                    println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "error": e }))?);
                    std::process::exit(1);
                }
                Err(e) => Err(e.into()),
            }
        }
        Command::Capabilities => {
            println!("{}", serde_json::to_string_pretty(&client(&cfg, &conn)?.agent_capabilities(&Empty {}).await?)?);
            Ok(())
        }
        Command::Mcp { space, no_autostart } => {
            if space.as_deref().is_some_and(|s| s.trim().is_empty()) {
                anyhow::bail!("--space needs the name of a registered Space");
            }
            crate::mcp::stdio::run(cfg, crate::mcp::stdio::Options { space, no_autostart }).await
        }
        Command::Token(cmd) => {
            operator_check(&cfg).await?;
            token(&cfg, cmd)
        }
        Command::Tools(ToolsCmd::Install { harness }) => tools_install(&cfg, harness).await,
        Command::Version => {
            println!("spacesd {}", env!("CARGO_PKG_VERSION"));
            for h in spaces_harnesses::all() {
                println!("{}: {} (pinned: {})", h.id(), h.name(), h.install_spec().packages.join(" "));
            }
            Ok(())
        }
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "spacesd", &mut std::io::stdout());
            Ok(())
        }
        Command::Man => {
            let cmd = <Cli as clap::CommandFactory>::command();
            clap_mangen::Man::new(cmd).render(&mut std::io::stdout())?;
            Ok(())
        }
        Command::Demo(args) => {
            // Only a --state-dir given on the command line: SPACES_HOME (the operator's daemon)
            // is never borrowed by a demo.
            demo::run(cfg, args, cli_state_dir.filter(|_| state_dir_given)).await
        }
        Command::Shim { .. } => anyhow::bail!("the shim runs before any runtime starts (cli::run)"),
    }
}

/// Before managing tokens: when a daemon answers on the state dir's socket, it must take this
/// process for its operator (a process of a run or command is a caller, and `FORBIDDEN` here).
/// The token file is the operator's; this check keeps the CLI from being the way in.
async fn operator_check(cfg: &Config) -> anyhow::Result<()> {
    match Client::new(Endpoint::Unix(cfg.socket_path())).space_list(&Empty {}).await {
        Err(spaces_sdk::client::ClientError::Api(e)) if e.code == spaces_sdk::ErrorCode::Forbidden => {
            anyhow::bail!("FORBIDDEN: only the operator manages tokens ({})", e.message)
        }
        _ => Ok(()),
    }
}

fn token(cfg: &Config, cmd: TokenCmd) -> anyhow::Result<()> {
    use crate::access::tokens;
    match cmd {
        TokenCmd::Create { space, scope } => {
            if space.trim().is_empty() {
                anyhow::bail!("--space needs the name of a Space");
            }
            let (record, secret) = tokens::create(&cfg.state_dir, &space, scope)?;
            println!("{secret}");
            eprintln!(
                "spacesd: token {} for Space {space:?} with {} scope (shown once; revoke with `spacesd token revoke {}`)",
                record.id,
                scope.as_str(),
                record.id
            );
        }
        TokenCmd::List => {
            let listed: Vec<serde_json::Value> = tokens::list(&cfg.state_dir)?
                .into_iter()
                .map(|t| serde_json::json!({"id": t.id, "space": t.space, "scope": t.scope, "created_ms": t.created_ms}))
                .collect();
            println!("{}", serde_json::to_string_pretty(&listed)?);
        }
        TokenCmd::Revoke { id } => {
            if !tokens::revoke(&cfg.state_dir, &id)? {
                anyhow::bail!("no token {id:?} (see `spacesd token list`)");
            }
            eprintln!("spacesd: token {id} revoked");
        }
    }
    Ok(())
}

/// Where client commands reach the daemon: `--url` (loopback TCP with the token of
/// `--token-file`), else the Unix socket of the state dir.
struct Connect {
    url: Option<String>,
    token_file: Option<PathBuf>,
}

fn client(cfg: &Config, conn: &Connect) -> anyhow::Result<Client> {
    let Some(url) = &conn.url else {
        return Ok(Client::new(Endpoint::Unix(cfg.socket_path())));
    };
    let addr = url.trim_start_matches("http://").trim_end_matches('/').to_owned();
    if addr.contains("://") || addr.contains('/') {
        anyhow::bail!("--url {url:?}: give http://HOST:PORT of a daemon started with `spacesd serve --tcp HOST:PORT`");
    }
    let file = conn.token_file.clone().unwrap_or_else(|| cfg.state_dir.join("token"));
    let token = std::fs::read_to_string(&file)
        .map_err(|e| anyhow::anyhow!("cannot read the bearer token for --url from {}: {e} (pass --token-file)", file.display()))?;
    Ok(Client::new(Endpoint::Tcp { addr, token: token.trim().to_owned() }))
}

async fn tools_install(cfg: &Config, ids: Vec<String>) -> anyhow::Result<()> {
    let harnesses = if ids.is_empty() {
        spaces_harnesses::all()
    } else {
        ids.iter()
            .map(|id| {
                spaces_harnesses::by_id(id).ok_or_else(|| {
                    let known: Vec<&str> = spaces_harnesses::all().iter().map(|h| h.id()).collect();
                    anyhow::anyhow!("unknown harness {id:?}; this build has: {}", known.join(", "))
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?
    };
    for h in harnesses {
        let (source, exists) = spaces_host::supervisor::locate_harness(cfg, h);
        if exists {
            println!("{}: ready at {}", h.id(), source.path().display());
            continue;
        }
        let path = spaces_host::supervisor::install_harness(cfg, h, |line| eprintln!("{}: {line}", h.id()))
            .await
            .map_err(|why| anyhow::anyhow!("{}: {why}", h.id()))?;
        println!("{}: installed at {}", h.id(), path.display());
    }
    Ok(())
}
