//! End-to-end tests: a real `spacesd`, the real agent CLIs (pinned installs in the shared tools
//! dir), and scripted model endpoints on 127.0.0.1. One binary; scenarios in `suite/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
mod support;
