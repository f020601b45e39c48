mod bad_input;
mod harness;
mod runs;
