// Defect: `Ok(Status::Failed)` from `run` was reported as a completed interrupt.
use agent_core::Status;
use agent_core::{InterruptContext, InterruptError, InterruptKind};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ContainerdRestart {}

#[agent_core::interrupt(type = "containerd_restart", summary = "restart containerd")]
impl InterruptKind for ContainerdRestart {
    async fn run(&self, _cx: &InterruptContext) -> Result<Status, InterruptError> {
        Ok(Status::Failed)
    }
}

fn main() {}
