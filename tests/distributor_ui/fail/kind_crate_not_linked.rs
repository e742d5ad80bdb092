// The distributor names gpu_reset's kind, but its Cargo.toml does not depend on gpu_reset.
agent_cli::main_with_kinds!(gpu_reset::GpuReset);
