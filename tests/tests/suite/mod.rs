mod agent_mcp;
mod bad_input;
mod codespace;
mod contract;
mod fake_agents;
mod harness;
mod runs;
mod tcp;
