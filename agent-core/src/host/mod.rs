//! The host as the agent sees it: a rooted filesystem, the run's environment (variables,
//! resource ID, boot ID, the banner that shows them), pre-flight.

pub mod banner;
pub mod boot;
pub mod errors;
pub mod fs;
pub mod identity;
pub mod phases;
pub mod preflight;
pub mod runtime;
