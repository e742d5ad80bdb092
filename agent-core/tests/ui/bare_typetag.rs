// Defect: a bare #[typetag::serde] compiled, listed fine, and every payload of the kind was
// then rejected as `unknown variant`. The trait object is implemented by the attribute only.
use agent_core::{Interrupt, InterruptContext, InterruptError, async_trait, typetag};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ContainerdRestart {}

#[typetag::serde]
#[async_trait]
impl Interrupt for ContainerdRestart {
    fn validate_payload(&self) -> Result<(), agent_core::BoxError> {
        Ok(())
    }

    async fn run_operations(&self, _cx: &InterruptContext) -> Result<(), InterruptError> {
        Ok(())
    }
}

fn main() {}
