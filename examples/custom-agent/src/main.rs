//! `agent-with-pod-drain`: the stock agent plus the `pod_drain` kind of the custom-interrupt
//! crate.
//!
//! Naming the kind links its crate (SPEC §9.5): leaving the crate out of Cargo.toml, or
//! misspelling the kind, is a compile error. agent_cli links the built-in kinds itself.

#![forbid(unsafe_code)]

agent_cli::main_with_kinds!(custom_interrupt::PodDrain);
