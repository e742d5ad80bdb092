//! Byte formats the upstream agents defined: Python repr, Go JSON, timestamps.

pub(crate) mod gojson;
pub mod pyrepr;
pub mod timestamp;
