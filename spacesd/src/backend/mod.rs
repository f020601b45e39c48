//! Where a tool call runs: the [`Backend`] trait and its two implementations, the in-process
//! [`Service`] (for `/mcp` inside the daemon) and [`Daemon`] (the daemon of a state dir over its
//! Unix socket, started when it does not answer: [`autostart`], for `spacesd mcp` on stdio); and
//! the operation table's rows as MCP tools ([`tools`]). Below both who may call ([`crate::access`])
//! and the MCP server ([`crate::mcp`]), which use it.

pub mod autostart;
pub mod tools;

use std::future::Future;

use serde_json::Value;
use spaces_sdk::client::{Client, ClientError, Endpoint};
use spaces_sdk::{ApiError, ErrorCode};

use spaces_host::config::Config;
use spaces_service::Service;

/// Runs one operation of the table by name with a JSON argument object. Dropping the future
/// abandons the call (a cancelled MCP request); what the operation started keeps running.
pub trait Backend: Clone + Send + Sync + 'static {
    /// The operation's JSON result, or its wire error.
    fn call(&self, name: &str, args: Value) -> impl Future<Output = Result<Value, ApiError>> + Send;
}

impl Backend for Service {
    fn call(&self, name: &str, args: Value) -> impl Future<Output = Result<Value, ApiError>> + Send {
        Service::call(self, name, args)
    }
}

/// The daemon of one state dir, over its Unix socket (one HTTP request per call). When the
/// socket does not answer, the daemon is started again ([`autostart::ensure_daemon`]) and the
/// call is sent once more: a connection that was refused carried no request. Without
/// `autostart` such a call is refused `INTERNAL` instead, and the next call tries again.
///
/// The server holds the daemon while it runs ([`spaces_sdk::local::hold`]): one an SDK started
/// (`serve --exit-when-unused`) does not end under an MCP client; a daemon started again is
/// held again.
#[derive(Clone)]
pub struct Daemon {
    cfg: Config,
    client: Client,
    autostart: bool,
    hold: std::sync::Arc<std::sync::Mutex<Option<spaces_sdk::local::Hold>>>,
}

impl Daemon {
    /// The daemon of `cfg`'s state dir, started when it does not answer if `autostart`.
    pub fn new(cfg: Config, autostart: bool) -> Daemon {
        let client = Client::new(Endpoint::Unix(cfg.socket_path()));
        let hold = std::sync::Arc::new(std::sync::Mutex::new(spaces_sdk::local::hold(&cfg.state_dir, false)));
        Daemon { cfg, client, autostart, hold }
    }

    /// Holds the daemon now answering (after a start).
    fn hold_again(&self) {
        if let Ok(mut hold) = self.hold.lock() {
            *hold = spaces_sdk::local::hold(&self.cfg.state_dir, false);
        }
    }
}

impl Backend for Daemon {
    async fn call(&self, name: &str, args: Value) -> Result<Value, ApiError> {
        match self.client.call_named(name, args.clone()).await {
            Err(ClientError::Connect { .. }) if !self.autostart => Err(ApiError::new(
                ErrorCode::Internal,
                format!(
                    "{name}: spacesd is not answering on {} (this MCP server does not start it); try again once it runs",
                    self.cfg.socket_path().display()
                ),
            )),
            Err(ClientError::Connect { .. }) => {
                autostart::ensure_daemon(&self.cfg).await.map_err(|e| {
                    ApiError::new(ErrorCode::Internal, format!("{name}: spacesd is not running and could not be started: {e:#}"))
                })?;
                self.hold_again();
                self.client.call_named(name, args).await.map_err(|e| wire(name, e))
            }
            other => other.map_err(|e| wire(name, e)),
        }
    }
}

/// A client failure as the wire error: the daemon's own error as is, anything else `INTERNAL`.
fn wire(name: &str, e: ClientError) -> ApiError {
    match e {
        ClientError::Api(e) => e,
        other => ApiError::new(ErrorCode::Internal, format!("{name}: {other}")),
    }
}
