//! `agent_capabilities`: what this host offers (protocol, statuses, event kinds, forwardable
//! environment) and, per harness, whether its CLI is ready, which binary runs, and whether its
//! API key is present in the daemon's environment.

use spaces_harnesses::Harness;
use spaces_sdk::{AuthState, Capabilities, EventKind, HarnessCapabilities, Status};

use super::install::{self, Source};
use crate::config::Config;

/// Protocol name reported by `agent_capabilities`.
pub const PROTOCOL: &str = "spaces/1";

/// The capabilities of this host under `cfg`, with its volume `volume`.
pub(super) fn capabilities(cfg: &Config, volume: spaces_sdk::VolumeCapabilities) -> Capabilities {
    let harnesses = spaces_harnesses::all().into_iter().map(|h| harness_capabilities(cfg, h)).collect();
    Capabilities {
        protocol: PROTOCOL.to_owned(),
        statuses: Status::ALL.iter().map(|s| s.as_str().to_owned()).collect(),
        event_kinds: EventKind::ALL.iter().map(|k| k.as_str().to_owned()).collect(),
        harnesses,
        forwardable_env: cfg.forwardable_env.clone(),
        volume,
        process_containment: spaces_os::process::cgroup::report(),
        sandbox: sandbox_name().to_owned(),
    }
}

/// The sandbox in force as the API names it (`bubblewrap`, `landlock`, or `none` when it is
/// off).
fn sandbox_name() -> &'static str {
    match spaces_os::sandbox::level() {
        spaces_os::sandbox::Level::Bubblewrap => "bubblewrap",
        spaces_os::sandbox::Level::Landlock => "landlock",
        spaces_os::sandbox::Level::Off => "none",
    }
}

fn harness_capabilities(cfg: &Config, h: &'static dyn Harness) -> HarnessCapabilities {
    let spec = h.install_spec();
    let (source, exists) = install::locate(cfg, h);
    let mut notes = vec![format!("pinned install: {}", spec.packages.join(" "))];
    let installed_version = match &source {
        Source::Operator(p) => {
            notes.push(format!("operator binary in use: {}", p.display()));
            None
        }
        Source::Pinned(_) if exists => {
            let version = install::installed_version(cfg, h);
            match version.as_deref() {
                Some(v) if v == spec.version => {}
                Some(v) => notes.push(format!("installed version {v} is not the pinned {}", spec.version)),
                None => notes.push("installed version unknown: the package's package.json is missing or unreadable".into()),
            }
            version
        }
        Source::Pinned(_) => {
            notes.push("not installed yet: installed on first use, or now with `spacesd tools install`".into());
            None
        }
    };
    let has_key = h.keys().iter().any(|k| std::env::var_os(k).is_some());
    HarnessCapabilities {
        id: h.id().to_owned(),
        name: h.name().to_owned(),
        // A missing pinned install is installed on first use, so the harness is still usable.
        ready: exists || matches!(source, Source::Pinned(_)),
        installed_version,
        // A key in the daemon's environment can be forwarded (`env_from_host`); an operator
        // binary may carry its own credentials, which the daemon cannot see.
        auth: match (has_key, &source) {
            (true, _) => AuthState::Ok,
            (false, Source::Operator(_)) => AuthState::Unknown,
            (false, Source::Pinned(_)) => AuthState::Missing,
        },
        keys: h.keys().iter().map(|s| s.to_string()).collect(),
        endpoint_wires: h.endpoint_wires().iter().map(|s| s.to_string()).collect(),
        can_interrupt: true,
        followups: h.followups().to_owned(),
        notes,
        binary: Some(source.path().display().to_string()),
        wire: h.wire().to_owned(),
        pinned_version: spec.version.to_owned(),
        supports: h.supports(),
    }
}
