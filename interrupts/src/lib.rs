//! Built-in interrupt kinds of the node agent, one file each, written against agent-core's
//! public plugin API only (exactly as a third-party kind would be).
//!
//! A binary sees these kinds only if it links this crate: `use interrupts as _;`.

#![forbid(unsafe_code)]

pub mod no_op;
pub mod node_restart;
pub mod restart_all_services;
pub mod script_interrupt;
pub mod service_restart;

pub use no_op::NoOp;
pub use node_restart::NodeRestart;
pub use restart_all_services::RestartAllServices;
pub use script_interrupt::ScriptInterrupt;
pub use service_restart::ServiceRestart;
