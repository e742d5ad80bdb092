//! `agent-with-pod-drain`: the stock agent plus the kinds of the custom-interrupt crate.

use std::process::ExitCode;

// Registrations of a crate the binary never names are dropped at link time (SPEC §9.5).
// agent_cli links the built-in kinds itself.
use custom_interrupt as _;

fn main() -> ExitCode {
    agent_cli::main(std::env::args_os().skip(1).collect())
}
