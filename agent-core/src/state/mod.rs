//! Every file the agent keeps on the host: markers, history, results, logs, locks, status.

pub mod flags;
pub mod history;
pub mod interrupt_markers;
pub mod locks;
pub mod logs;
pub mod markers;
pub mod results;
pub mod status;
