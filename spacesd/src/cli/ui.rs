//! `spacesd ui`: a one-time login link for the web page of runs.

use spaces_sdk::client::{Client, Method};

/// Mints a ticket (`POST /v1/ui/tickets`, as the operator: over the Unix socket, or `--url` with
/// the operator's token) and prints the link, or the JSON answer with `json`.
pub async fn run(client: &Client, json: bool) -> anyhow::Result<()> {
    let answer: serde_json::Value = client.call(Method::POST, "/v1/ui/tickets", Some(&serde_json::json!({}))).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
        return Ok(());
    }
    let url = answer.get("url").and_then(serde_json::Value::as_str).unwrap_or_default();
    let secs = answer.get("expires_in_ms").and_then(serde_json::Value::as_u64).unwrap_or(0) / 1000;
    println!("{url}");
    eprintln!("spacesd: open this link in a browser on this host within {secs} s; it works once and logs that browser in");
    Ok(())
}
