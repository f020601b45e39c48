//! `mcp-echo`: a one-tool stdio MCP server ([`spaces_testkit::mcp_echo`]) for the end-to-end
//! runs that give an agent CLI an MCP server. It is a binary of this package, not of the
//! testkit, because cargo builds a package's binaries for that package's own integration tests
//! (`CARGO_BIN_EXE_mcp-echo`), so `cargo test` never runs against a stale or missing one.
//!
//! `$MCP_ECHO_STARTUP_DELAY_MS` (ms) makes it wait that long before it reads anything: a server
//! slow to start, like one fetched by `npx` on first use.

fn main() -> std::io::Result<()> {
    if let Some(ms) = std::env::var("MCP_ECHO_STARTUP_DELAY_MS").ok().and_then(|v| v.parse().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    let prefix = std::env::var("MCP_ECHO_PREFIX").ok();
    spaces_testkit::mcp_echo::serve(std::io::stdin().lock(), std::io::stdout().lock(), prefix.as_deref())
}
