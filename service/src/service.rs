//! [`Service`]: the handle every operation of the table is a method of (their bodies are in
//! `agents.rs`, `homes.rs` and `tools.rs`, by the part of the contract they serve).

use spaces_codespace::service::CodeSpace;
use spaces_host::supervisor::Supervisor;

/// Every operation of this host, typed. Cheap to clone.
#[derive(Clone)]
pub struct Service {
    pub(crate) sup: Supervisor,
    pub(crate) cs: CodeSpace,
}

impl Service {
    /// The service over the run supervisor `sup` and the CodeSpace tools `cs`.
    pub fn new(sup: Supervisor, cs: CodeSpace) -> Service {
        Service { sup, cs }
    }
}
