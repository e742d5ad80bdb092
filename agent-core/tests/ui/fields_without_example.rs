use agent_core::{Command, CompletionPolicy, InterruptContext, InterruptError, InterruptKind};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct GpuReset {
    gpus: Vec<String>,
    timeout_s: u64,
}

#[agent_core::interrupt(type = "gpu_reset", summary = "nvidia-smi --gpu-reset per GPU")]
impl InterruptKind for GpuReset {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        for (i, gpu) in self.gpus.iter().enumerate() {
            let reset = Command::new("nvidia-smi").args(["--gpu-reset", "-i", gpu]);
            cx.operation(i, CompletionPolicy::OnSuccess, reset).await?;
        }
        Ok(())
    }
}

fn main() {}
