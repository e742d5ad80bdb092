// A type that is not declared with #[agent_core::interrupt].
#[derive(Debug)]
pub struct GpuReset {
    pub gpus: Vec<String>,
}

agent_cli::main_with_kinds!(GpuReset);
