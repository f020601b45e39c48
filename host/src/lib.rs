//! # spaces-host: the daemon's core, without any transport
//!
//! Theory of operation: the [`supervisor`] records each agent run in the store
//! (`spaces-store`) and gives it an actor that launches the harness's CLI as a detached, tagged
//! process (`spaces-codespace`, `spaces-os`), turns its output into normalized events
//! (`spaces-harnesses`) and appends them to the durable event log, waking long-poll readers.
//! Around it: the host's settings ([`config`]), the sandbox every run and command starts in
//! ([`sandbox`]), the daemon's side of the CodeSpace tools ([`workspaces`]), persistent agents'
//! homes on a volume ([`homes`], `spaces-volumes`), the price table by model ([`prices`]), webhooks told of run events ([`webhooks`]), traces of runs over OTLP ([`traces`]), and the daemon's [`error`] type, whose typed
//! refusals carry the wire error that the operation table (`spaces-service`) hands out.
//!
//! What it never does: listen on a socket or parse a request (the transports in `spacesd` do,
//! through `spaces-service`), keep a run's state only in memory, or pass its own environment to
//! agents (only what a run names).

pub mod config;
pub mod error;
pub mod homes;
pub mod prices;
pub mod sandbox;
pub mod supervisor;
pub mod traces;
pub mod webhooks;
pub mod workspaces;
