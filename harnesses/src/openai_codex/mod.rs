//! PLACEHOLDER being written by a helper: replaced by the real adapter.

use crate::*;

/// The adapter.
pub struct OpenAiCodex;

impl Harness for OpenAiCodex {
    fn id(&self) -> &'static str { unimplemented!() }
    fn name(&self) -> &'static str { unimplemented!() }
    fn install_spec(&self) -> InstallSpec { unimplemented!() }
    fn process_model(&self) -> ProcessModel { unimplemented!() }
    fn followups(&self) -> &'static str { unimplemented!() }
    fn endpoint_wires(&self) -> &'static [&'static str] { unimplemented!() }
    fn keys(&self) -> &'static [&'static str] { unimplemented!() }
    fn launch(&self, _ctx: &LaunchContext<'_>) -> LaunchPlan { unimplemented!() }
    fn user_message(&self, _text: &str) -> Vec<u8> { unimplemented!() }
    fn interrupt(&self) -> InterruptRecipe { unimplemented!() }
    fn normalizer(&self) -> Box<dyn Normalizer> { unimplemented!() }
}
