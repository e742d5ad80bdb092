//! One kind per mistake.

use std::time::Duration;

use agent_core::{
    BoxError, Command, CompletionPolicy, InterruptContext, InterruptError, InterruptKind,
};
use serde::{Deserialize, Serialize};

fn gpu_tool(args: &[&str]) -> Command {
    Command::new("gpu-tool").args(args.iter().copied())
}

/// Reports a failed reset on stderr and carries on, then returns `Ok`.
#[derive(Debug, Serialize, Deserialize)]
pub struct SwallowsFailure {
    pub gpus: Vec<String>,
}

#[agent_core::interrupt(
    type = "swallows_failure",
    summary = "resets each GPU, ignoring failures",
    example = r#"{"type":"swallows_failure","gpus":["0","3"]}"#
)]
impl InterruptKind for SwallowsFailure {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        for (i, gpu) in self.gpus.iter().enumerate() {
            let reset = gpu_tool(&["--reset", gpu]);
            if let Err(e) = cx.operation(i, CompletionPolicy::OnSuccess, reset).await {
                eprintln!("gpu {gpu}: {e}");
            }
        }
        Ok(())
    }
}

/// Hands two commands to operation 0.
#[derive(Debug, Serialize, Deserialize)]
pub struct RunsIndexTwice {}

#[agent_core::interrupt(type = "runs_index_twice", summary = "two commands under index 0")]
impl InterruptKind for RunsIndexTwice {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        cx.operation(0, CompletionPolicy::OnSuccess, gpu_tool(&["first"]))
            .await?;
        cx.operation(0, CompletionPolicy::OnSuccess, gpu_tool(&["second"]))
            .await
    }
}

/// Panics after its first operation.
#[derive(Debug, Serialize, Deserialize)]
pub struct Panics {}

#[agent_core::interrupt(type = "panics", summary = "panics after its first operation")]
impl InterruptKind for Panics {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        cx.operation(0, CompletionPolicy::OnSuccess, gpu_tool(&["first"]))
            .await?;
        let gpus: Vec<&str> = Vec::new();
        let first = gpus.first().expect("the GPU list is empty");
        cx.operation(1, CompletionPolicy::OnSuccess, gpu_tool(&[first]))
            .await
    }
}

/// Waits in its own code between two operations, asynchronously.
#[derive(Debug, Serialize, Deserialize)]
pub struct SleepsBetween {}

#[agent_core::interrupt(
    type = "sleeps_between",
    summary = "waits 10 minutes between operations"
)]
impl InterruptKind for SleepsBetween {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        cx.operation(0, CompletionPolicy::OnSuccess, gpu_tool(&["first"]))
            .await?;
        tokio::time::sleep(Duration::from_secs(600)).await;
        cx.operation(1, CompletionPolicy::OnSuccess, gpu_tool(&["second"]))
            .await
    }
}

/// Blocks its thread between two operations.
#[derive(Debug, Serialize, Deserialize)]
pub struct BlocksBetween {}

#[agent_core::interrupt(
    type = "blocks_between",
    summary = "blocks its thread for 10 minutes between operations"
)]
impl InterruptKind for BlocksBetween {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        cx.operation(0, CompletionPolicy::OnSuccess, gpu_tool(&["first"]))
            .await?;
        std::thread::sleep(Duration::from_secs(600));
        cx.operation(1, CompletionPolicy::OnSuccess, gpu_tool(&["second"]))
            .await
    }
}
/// Its example fails its own validation.
#[derive(Debug, Serialize, Deserialize)]
pub struct BrokenExample {
    pub gpus: Vec<String>,
}

#[agent_core::interrupt(
    type = "broken_example",
    summary = "an example its own validate refuses",
    example = r#"{"type":"broken_example","gpus":[]}"#
)]
impl InterruptKind for BrokenExample {
    fn validate(&self) -> Result<(), BoxError> {
        if self.gpus.is_empty() {
            return Err("gpus: must name at least one GPU".into());
        }
        Ok(())
    }

    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        cx.operation(
            0,
            CompletionPolicy::OnSuccess,
            gpu_tool(&self.gpus.iter().map(String::as_str).collect::<Vec<_>>()),
        )
        .await
    }
}
