//! (exec: being built)
