//! The daemon's side of the sandbox every run and command starts in (`spaces_os::sandbox`;
//! docs/operations.md, "Security model").
//!
//! At start ([`init`]): find bubblewrap and make one sandbox with it, else (`auto`, or when the
//! operator asked for it: `SPACES_SANDBOX=landlock`) enter the Landlock level once through the
//! real helper, or refuse to serve with the fix named, unless the operator turned the sandbox
//! off (`SPACES_SANDBOX=off`, or `"sandbox": false` in `config.json`). What every tree is kept from: the state dir, the token
//! file, a local volume (the paths the store protects, [`spaces_store::Store::protected`]).
//! What every tree sees read-only even inside a hidden folder: the CLI installs (the tools dir)
//! and the daemon's own program (the sandbox's helper, a run's `spaces` MCP server).
//!
//! Per tree ([`policy`]): its Space's root writable, every other Space's root hidden, its own
//! network namespace when the Space's network is `none`, plus what the caller adds (read-only
//! paths, a run's home and its API directory).

use std::path::{Path, PathBuf};

use spaces_os::sandbox::{self, Host, Level, Policy, Tree};

use spaces_sdk::{ErrorCode, SpaceNetwork};
use spaces_store::Store;

use crate::config::{Config, Sandbox};

/// Sets up the sandbox of this daemon (`cfg.sandbox`, [`Sandbox`]): returns the level in
/// force. `auto` takes bubblewrap where it can make a sandbox, else Landlock (saying why on
/// stderr). Errors: the chosen sandbox (or, for `auto`, neither) cannot be made here and the
/// operator did not turn the sandbox off (the message names what failed and the fixes).
pub fn init(cfg: &Config, store: &Store) -> anyhow::Result<Level> {
    if cfg.sandbox == Sandbox::Off {
        eprintln!(
            "spacesd: the sandbox is OFF (SPACES_SANDBOX=off): every agent and command runs as this daemon's uid with its \
             state dir, token and other Spaces in reach; each run's notes say so"
        );
        let host = Host {
            level: Level::Off,
            bwrap: PathBuf::new(),
            hidden: Vec::new(),
            readonly: Vec::new(),
            max_processes: None,
            landlock: None,
        };
        return Ok(sandbox::init(host));
    }
    let mut readonly = vec![absolute(&cfg.tools_dir)];
    if let Ok(command) = crate::config::self_command() {
        readonly.extend(command.iter().map(PathBuf::from).filter(|p| p.is_absolute() && p.exists()));
    }
    // What a binding's command needs beside the files it names (its venv, its package): an SDK
    // installed under /tmp would otherwise find its own files hidden in every sandbox.
    readonly.extend(crate::config::self_paths().into_iter().filter(|p| p.exists()));
    // The small helper shims start in each sandbox, beside the daemon's executable.
    let small = std::env::current_exe().ok().and_then(|e| e.parent().map(|dir| dir.join(spaces_os::shim::own::SANDBOX_HELPER)));
    readonly.extend(small.clone());
    let hidden = store.protected().iter().map(|p| absolute(p)).collect();
    let host = Host {
        level: Level::Bubblewrap,
        bwrap: PathBuf::new(),
        hidden,
        readonly,
        max_processes: cfg.process_limits().pids_max,
        landlock: None,
    };
    let bubblewrap = match cfg.sandbox {
        Sandbox::Landlock => None,
        _ => Some(bubblewrap()),
    };
    let mut why_not = None;
    match bubblewrap {
        Some(Ok(bwrap)) => return Ok(sandbox::init(Host { bwrap, ..host })),
        Some(Err(e)) if cfg.sandbox == Sandbox::Bubblewrap => return Err(e.into()),
        Some(Err(e)) => {
            eprintln!("spacesd: {e}; trying Landlock");
            why_not = Some(e);
        }
        None => {}
    }
    // The helper the shims will run (the small one, else the daemon's own command).
    let helper = match small.filter(|p| p.is_file()) {
        Some(path) => vec![path.display().to_string()],
        None => crate::config::self_command().map_err(|e| anyhow::anyhow!("cannot tell how to run the sandbox's helper: {e}"))?,
    };
    let reached = sandbox::probe::landlock(&helper).map_err(|e| match &why_not {
        Some(bwrap) => anyhow::anyhow!("{bwrap}; and {e}"),
        None => e.into(),
    })?;
    eprintln!(
        "spacesd: the sandbox is Landlock (ABI {}): no namespaces, so the processes of other trees are visible in /proc{}; \
         see docs/operations.md, \"Security model\"",
        reached.abi,
        if reached.scoped() { "" } else { ", and signals and abstract sockets are not scoped (ABI 6 needed)" },
    );
    Ok(sandbox::init(Host { level: Level::Landlock, max_processes: None, landlock: Some(reached), ..host }))
}

/// Bubblewrap on `PATH`, checked to make a sandbox here. Errors: missing, or no sandbox (its
/// words and the fix).
fn bubblewrap() -> Result<PathBuf, sandbox::Error> {
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let bwrap = sandbox::probe::find(&path)?;
    sandbox::probe::check(&bwrap, !nix::unistd::geteuid().is_root())?;
    Ok(bwrap)
}

/// The policy of a tree of Space `space` (`root`, `read_only`, `network`) with `extra` paths,
/// every other registered Space hidden; `None` when the sandbox is off. Errors: the Space
/// registry cannot be read; `UNAUTHORIZED` when the Space's network is `none` and the sandbox is
/// off (nothing could keep the tree off the network, so it must not start: [`network_refusal`]).
pub fn policy(store: &Store, root: &Path, read_only: bool, network: SpaceNetwork, extra: Extra) -> crate::error::Result<Option<Policy>> {
    let host = sandbox::host().filter(|h| h.level != Level::Off);
    let Some(host) = host else {
        return match network {
            SpaceNetwork::Enabled => Ok(None),
            SpaceNetwork::None => Err(crate::error::refuse(ErrorCode::Unauthorized, network_refusal(root))),
        };
    };
    let other_roots = store.space_list()?.into_iter().map(|s| PathBuf::from(s.root)).filter(|r| r != root).collect();
    Ok(host.policy(Tree {
        root,
        read_only,
        other_roots,
        readonly: extra.readonly,
        api_dir: extra.api_dir,
        home: extra.home,
        network: network.is_enabled(),
    }))
}

/// Why nothing runs in a `network: none` Space (its root `root`) while the sandbox is off.
pub fn network_refusal(root: &Path) -> String {
    format!(
        "the Space at {} has network: none, and this daemon runs without a sandbox (SPACES_SANDBOX=off), so nothing would \
         keep its agents and commands off the network; start the daemon with the sandbox on, or register the Space with \
         network: enabled (--replace)",
        root.display()
    )
}

/// What a tree has besides its Space ([`policy`]).
#[derive(Debug, Default)]
pub struct Extra {
    pub readonly: Vec<PathBuf>,
    pub api_dir: Option<PathBuf>,
    /// The run's home, mounted at `spaces_os::sandbox::HOME_DIR`.
    pub home: Option<PathBuf>,
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).or_else(|_| std::path::absolute(p)).unwrap_or_else(|_| p.to_path_buf())
}

/// At the Landlock level, the note every run gets saying what that level does not give
/// (docs/operations.md, "Security model"); `None` at any other level.
pub fn landlock_note() -> Option<String> {
    let reached = sandbox::landlock_reached()?;
    let mut note = format!(
        "landlock: this daemon's sandbox is Landlock (ABI {}), weaker than bubblewrap: no pid namespace, so this run's \
         processes see every process of the host in /proc (they cannot ptrace one outside the run{}); no mount namespace, so \
         paths are the host's (the agent's home and $TMPDIR are under the daemon's state dir, which is otherwise unreadable, \
         as are the other Spaces; the folders above those cannot be listed); no private /dev/shm (not writable); the network \
         and loopback are the host's",
        reached.abi,
        if reached.scoped() { " nor signal it or reach its abstract sockets" } else { "; signals and abstract sockets are not scoped" },
    );
    if !reached.unix_paths() {
        note.push_str("; Unix sockets can be reached by path (the operator's socket answers only the operator's token)");
    }
    note.push_str(" (docs/operations.md, \"Security model\")");
    Some(note)
}
