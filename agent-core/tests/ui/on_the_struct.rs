#[agent_core::interrupt(type = "containerd_restart", summary = "restart containerd")]
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ContainerdRestart {}

fn main() {}
