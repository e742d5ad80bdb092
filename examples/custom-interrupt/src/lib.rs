//! An interrupt kind written outside the agent's workspace crates: `pod_drain` drains the node
//! with `kubectl drain` before disruptive work.
//!
//! The crate depends on agent-core and serde only. Its kinds reach a binary that names them
//! (`agent_cli::main_with_kinds!(custom_interrupt::PodDrain)`, see
//! `examples/custom-agent/src/main.rs`); `agent interrupts list` shows them.

#![forbid(unsafe_code)]

pub mod pod_drain;

pub use pod_drain::PodDrain;
