//! `agent` of my-agent: the stock agent plus the interrupt kinds this distributor ships.
//!
//! Naming a kind links its crate (SPEC §9.5): a kind whose crate is missing from Cargo.toml,
//! or a misspelt one, is a compile error. agent_cli links the built-in kinds itself.

#![forbid(unsafe_code)]

agent_cli::main_with_kinds!(custom_interrupt::PodDrain);
