//! spaces-volumes integration tests: real files, a real local-directory volume and a real
//! S3-compatible server (moto) on loopback.
mod suite;
