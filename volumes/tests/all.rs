//! spaces-volumes integration tests: real files, a real local-directory volume and a real
//! S3-compatible server (moto, from the test venv) on loopback. One binary; scenarios in `suite/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
