//! The Agent Client Protocol (ACP v1): one conversation core for every CLI that speaks it
//! (`opencode acp`, `gemini --acp`).
//!
//! ACP is JSON-RPC 2.0 over the agent's stdio, one message a line (spec:
//! <https://agentclientprotocol.com>, schema `agent-client-protocol` v1). Spaces is the client:
//! it writes `initialize`, `session/new` (or `session/load`/`session/resume`), `session/prompt`
//! and `session/cancel`, and answers the agent's `session/request_permission`; the agent streams
//! `session/update` notifications and answers each prompt with its `stopReason`.
//!
//! - [`rpc`]: the lines (builders and a classifier), `serde_json` only;
//! - [`normalize`]: [`AcpNormalizer`], the conversation state and the events (what goes out
//!   when is in its module docs);
//! - [`updates`]: `session/update` to events, and how streamed answers appear (pieces hidden,
//!   the whole answer once).
//!
//! Process model of an ACP harness: [`crate::plan::ProcessModel::LongLived`], `StdinMode::Pipe`, the
//! launch plan's `initial_stdin` is the `initialize` line; everything after it comes from the
//! normalizer's hooks (`take_outgoing`, `turn_input`, `interrupt_input`), so the harness's
//! stateless `user_message` is empty and its interrupt recipe writes nothing. That model is written
//! once, as the [`Harness`] impl of every [`AcpCli`]; a harness module gives only what differs.

pub mod normalize;
pub mod rpc;
#[cfg(test)]
mod tests;
pub mod updates;

pub use normalize::{AcpNormalizer, Flavor, PermissionPolicy};

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::harness::{Harness, HomeLayout, Normalizer};
use crate::plan::{InstallSpec, InterruptRecipe, LaunchContext, LaunchPlan, ProcessModel, StdinMode};

/// The interrupt recipe of an ACP harness: nothing to write. The cancel names the session, so
/// it comes from [`crate::harness::Normalizer::interrupt_input`]; when that is `None` no prompt is out
/// and `interrupt_requested` already ended the turn.
pub fn no_stdin_interrupt() -> crate::plan::InterruptRecipe {
    crate::plan::InterruptRecipe::Stdin(Vec::new())
}

/// A line with its `\n`, as stdin bytes.
pub fn line_bytes(line: &str) -> Vec<u8> {
    let mut out = line.as_bytes().to_vec();
    out.push(b'\n');
    out
}

/// The process of one ACP agent as its CLI wants it: the part of a [`LaunchPlan`] that differs
/// between ACP harnesses ([`AcpCli::command`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcpCommand {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// The CLI's own environment; the caller's `ctx.env` is laid over it (the caller wins).
    pub env: BTreeMap<String, String>,
    /// Files to write before launch (config, settings), with their contents.
    pub files: Vec<(PathBuf, String)>,
}

/// What differs between the CLIs spoken to over ACP. Every `AcpCli` is a [`Harness`] (the impl
/// below) with the ACP process model of the module docs, written once here:
/// [`ProcessModel::LongLived`], follow-ups `acp`, a stdin pipe whose first line is `initialize`
/// ([`rpc::initialize`]), an empty `user_message`, [`no_stdin_interrupt`], and an
/// [`AcpNormalizer`] of [`AcpCli::FLAVOR`] that allows what the agent asks
/// ([`PermissionPolicy::Allow`]).
pub trait AcpCli: Send + Sync {
    /// Harness id ([`Harness::id`]).
    const ID: &'static str;
    /// Human name ([`Harness::name`]).
    const NAME: &'static str;
    /// The pinned npm package, with its exact version.
    const PACKAGE: &'static str;
    /// The version the installed CLI reports.
    const VERSION: &'static str;
    /// The executable to launch, relative to the tools directory.
    const BINARY: &'static str;
    /// Wire protocols accepted by `base_url` ([`Harness::endpoint_wires`]).
    const ENDPOINT_WIRES: &'static [&'static str];
    /// Provider key variables the CLI reads ([`Harness::keys`]).
    const KEYS: &'static [&'static str];
    /// How the CLI's conversation behaves.
    const FLAVOR: Flavor;
    /// Whether the CLI, as launched, asks `session/request_permission` before tool calls.
    const ASKS_PERMISSION: bool;

    /// The process serving the run of `ctx` ([`Harness::launch`] adds the caller's environment
    /// and the ACP stdin).
    fn command(&self, ctx: &LaunchContext<'_>) -> AcpCommand;

    /// What a persistent agent's home is for this CLI ([`Harness::persistent_home`]).
    fn home_layout(&self) -> HomeLayout;
}

impl<T: AcpCli> Harness for T {
    fn id(&self) -> &'static str {
        T::ID
    }

    fn name(&self) -> &'static str {
        T::NAME
    }

    fn install_spec(&self) -> InstallSpec {
        InstallSpec { packages: vec![T::PACKAGE.to_owned()], version: T::VERSION, binary: T::BINARY }
    }

    fn process_model(&self) -> ProcessModel {
        ProcessModel::LongLived
    }

    fn followups(&self) -> &'static str {
        "acp"
    }

    fn wire(&self) -> &'static str {
        "acp"
    }

    /// Resume as [`AcpCli::FLAVOR`] says; usage and streamed pieces from every ACP CLI here;
    /// permission requests as [`AcpCli::ASKS_PERMISSION`].
    fn supports(&self) -> spaces_sdk::HarnessSupports {
        spaces_sdk::HarnessSupports {
            resume: T::FLAVOR.load_in_new_process,
            usage: true,
            permission_requests: T::ASKS_PERMISSION,
            message_deltas: true,
            ..Default::default()
        }
    }

    fn endpoint_wires(&self) -> &'static [&'static str] {
        T::ENDPOINT_WIRES
    }

    fn keys(&self) -> &'static [&'static str] {
        T::KEYS
    }

    /// [`AcpCli::command`] with the caller's `ctx.env` laid over the CLI's environment; stdin a
    /// pipe whose first line is `initialize`.
    fn launch(&self, ctx: &LaunchContext<'_>) -> LaunchPlan {
        let AcpCommand { argv, mut env, files } = self.command(ctx);
        for (k, v) in ctx.env {
            env.insert(k.clone(), v.clone());
        }
        LaunchPlan { argv, env, files, stdin: StdinMode::Pipe, initial_stdin: Some(line_bytes(&rpc::initialize())) }
    }

    /// Empty: a turn's `session/prompt` names the session, so it comes from the normalizer.
    fn user_message(&self, _text: &str) -> Vec<u8> {
        Vec::new()
    }

    fn interrupt(&self) -> InterruptRecipe {
        no_stdin_interrupt()
    }

    fn normalizer(&self) -> Box<dyn Normalizer> {
        Box::new(AcpNormalizer::new(T::FLAVOR, PermissionPolicy::Allow))
    }

    fn persistent_home(&self) -> HomeLayout {
        self.home_layout()
    }
}
