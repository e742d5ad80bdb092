//! The host as the agent sees it: a rooted filesystem, the run's environment, pre-flight.

pub mod boot;
pub mod errors;
pub mod fs;
pub mod preflight;
pub mod runtime;
