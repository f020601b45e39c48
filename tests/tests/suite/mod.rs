mod bad_input;
mod codespace;
mod contract;
mod fake_agents;
mod harness;
mod mcp;
mod runs;
mod tcp;
