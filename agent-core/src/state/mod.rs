//! Every file the agent keeps on the host: markers, history, results, logs, locks, status.

pub(crate) mod flags;
pub(crate) mod history;
pub mod interrupt_markers;
pub mod locks;
pub mod logs;
pub mod markers;
pub mod metrics;
pub mod results;
pub mod status;
