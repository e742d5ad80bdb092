use agent_core::{InterruptContext, InterruptError, InterruptKind};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ContainerdRestart {}

#[agent_core::interrupt(type = "containerd_restart")]
impl InterruptKind for ContainerdRestart {
    async fn run(&self, _cx: &InterruptContext) -> Result<(), InterruptError> {
        Ok(())
    }
}

fn main() {}
