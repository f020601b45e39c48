//! The CodeSpace tools (API reference, "CodeSpace execution layer"): typed operations over the
//! CodeSpace service.
