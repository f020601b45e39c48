mod bad_input;
mod fake_agents;
mod harness;
mod runs;
mod tcp;
