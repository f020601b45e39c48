//! `spacesd webhook ...`: the operator's webhook endpoints (the `webhook_*` operations): add,
//! list, remove, and the deliveries with their tries and last errors.

use clap::Subcommand;
use spaces_sdk::client::Client;
use spaces_sdk::{Empty, WebhookAddRequest, WebhookDeliveriesRequest, WebhookRemoveRequest};

#[derive(Debug, Subcommand)]
pub enum WebhookCmd {
    /// Register URL to be posted run events, signed with the Standard Webhooks headers
    /// (webhook-id, webhook-timestamp, webhook-signature: HMAC-SHA256 with --secret), retried
    /// with backoff, at least once and in order per run.
    Add {
        /// Where to post: an http or https URL.
        url: String,
        /// The signing secret (at least 16 bytes; `whsec_<base64>` as Standard Webhooks).
        /// `-` reads it from stdin, `@FILE` from a file.
        #[arg(long)]
        secret: String,
        /// An event type to send (repeat it): run.started, turn.ended, run.idle, run.failed,
        /// run.stopped, approval.needed, budget.reached, quota.waiting. Default: all.
        #[arg(long = "event", value_name = "TYPE")]
        events: Vec<String>,
        /// Print the JSON record instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Every endpoint, with its deliveries counted (pending, delivered, failed).
    List {
        /// Print the JSON records instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Unregister an endpoint (its deliveries go too).
    Rm {
        /// The endpoint's id (`wh-...`, as `webhook list` prints it).
        webhook_id: String,
    },
    /// Deliveries, newest first: each event sent (or to send), its tries and last error.
    Deliveries {
        /// Only this endpoint's.
        #[arg(long = "webhook", value_name = "ID")]
        webhook_id: Option<String>,
        /// Only pending, delivered or failed ones.
        #[arg(long)]
        status: Option<String>,
        /// At most this many (default 100).
        #[arg(long)]
        max: Option<u32>,
        /// Print the JSON records instead of a table.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(client: &Client, cmd: WebhookCmd) -> anyhow::Result<()> {
    match cmd {
        WebhookCmd::Add { url, secret, events, json } => {
            let secret = super::text_from(&secret, "the secret")?.trim_end().to_owned();
            let hook = client.webhook_add(&WebhookAddRequest { url, events, secret }).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&hook)?);
            } else {
                let events = if hook.events.is_empty() { "every event type".to_owned() } else { hook.events.join(", ") };
                println!("{}: posts {events} to {}", hook.webhook_id, hook.url);
            }
        }
        WebhookCmd::List { json } => {
            let hooks = client.webhook_list(&Empty {}).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&hooks)?);
            } else if hooks.is_empty() {
                println!("no webhook; add one with `spacesd webhook add URL --secret SECRET`");
            } else {
                let rows: Vec<Vec<String>> = hooks
                    .iter()
                    .map(|h| {
                        let events = if h.events.is_empty() { "all".to_owned() } else { h.events.join(",") };
                        vec![
                            h.webhook_id.clone(),
                            h.url.clone(),
                            events,
                            h.pending.to_string(),
                            h.delivered.to_string(),
                            h.failed.to_string(),
                        ]
                    })
                    .collect();
                super::print::table(&["WEBHOOK", "URL", "EVENTS", "PENDING", "DELIVERED", "FAILED"], &rows);
            }
        }
        WebhookCmd::Rm { webhook_id } => {
            let r = client.webhook_remove(&WebhookRemoveRequest { webhook_id }).await?;
            if r.removed {
                println!("{}: removed", r.webhook_id);
            } else {
                anyhow::bail!("no webhook {}; `spacesd webhook list` lists them", r.webhook_id);
            }
        }
        WebhookCmd::Deliveries { webhook_id, status, max, json } => {
            let list = client.webhook_deliveries(&WebhookDeliveriesRequest { webhook_id, status, max }).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else if list.is_empty() {
                println!("no delivery yet");
            } else {
                let rows: Vec<Vec<String>> = list
                    .iter()
                    .map(|d| {
                        vec![
                            d.delivery_id.clone(),
                            d.event.clone(),
                            d.status.clone(),
                            d.attempts.to_string(),
                            d.last_error.clone().unwrap_or_else(|| "-".into()),
                        ]
                    })
                    .collect();
                super::print::table(&["DELIVERY", "EVENT", "STATUS", "TRIES", "LAST ERROR"], &rows);
            }
        }
    }
    Ok(())
}
