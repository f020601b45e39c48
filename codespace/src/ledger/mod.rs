//! (ledger: being built)
