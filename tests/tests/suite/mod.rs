mod bad_input;
mod codespace;
mod fake_agents;
mod harness;
mod runs;
mod tcp;
