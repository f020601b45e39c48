//! # spaces-service: the operation table and the service behind every front door
//!
//! Theory of operation: [`Service`] has one typed async function per operation of the contract
//! (`spaces_sdk::op`, the catalogue), from its request type to its result type or a wire
//! [`ApiError`](spaces_sdk::ApiError). [`table`] turns each into a [`Row`]: the catalogue's name, doc, route and
//! schemas plus a type-erased handler that decodes JSON arguments with
//! [`spaces_sdk::decode()`] (unknown keys refused, naming the key) and encodes the result. The
//! HTTP routes, the `spacesd` CLI and the typed client (through HTTP) are adapters over these
//! rows: they translate their transport to a JSON argument object and an [`ApiError`](spaces_sdk::ApiError) back, and
//! hold no copy of names, defaults or limits.
//!
//! This is the boundary where the domain's errors (the supervisor's, the CodeSpace layer's)
//! become the wire error.

mod agents;
pub mod docs;
mod homes;
mod schema;
mod service;
mod table;
mod tools;
pub mod trace_context;

pub use schema::{openapi, request_schema, result_schema, schema_generator};
pub use service::Service;
pub use table::{table, Row};
