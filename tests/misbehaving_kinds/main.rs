//! `agent-with-misbehaving-kinds`: the stock agent plus interrupt kinds that make the mistakes
//! a hurried author makes, each one wrong on purpose. The integration tests
//! (`tests/integration/plugin_contract.rs`) run them against fake host roots and check what
//! the core makes of them (SPEC §9.5). Nothing here is an example to copy.
//!
//! Their commands are `gpu-tool ...`, a fake tool the tests put on the fake host.

#![forbid(unsafe_code)]

mod kinds;

agent_cli::main_with_kinds!(
    kinds::SwallowsFailure,
    kinds::RunsIndexTwice,
    kinds::Panics,
    kinds::SleepsBetween,
    kinds::BlocksBetween,
    kinds::BrokenExample,
);
