// Defect: registrations written by hand (a bare #[typetag::serde] without a name, a forgotten
// `register_interrupt!`) compiled and failed only at run time. A kind declared without the
// attribute no longer compiles.
use agent_core::{InterruptContext, InterruptError, InterruptKind};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ContainerdRestart {}

impl InterruptKind for ContainerdRestart {
    const TYPE: &'static str = "containerd_restart";
    const SUMMARY: &'static str = "restart containerd";
    const EXAMPLE: &'static str = r#"{"type":"containerd_restart"}"#;

    async fn run(&self, _cx: &InterruptContext) -> Result<(), InterruptError> {
        Ok(())
    }
}

fn main() {}
