use agent_core::{InterruptContext, InterruptError, InterruptKind, typetag};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ContainerdRestart {}

#[agent_core::interrupt(type = "containerd_restart", summary = "restart containerd")]
#[typetag::serde(name = "containerd_restart")]
impl InterruptKind for ContainerdRestart {
    async fn run(&self, _cx: &InterruptContext) -> Result<(), InterruptError> {
        Ok(())
    }
}

fn main() {}
