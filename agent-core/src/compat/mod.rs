//! Byte formats the upstream agents defined: Python repr, Go JSON, timestamps.

pub mod gojson;
pub mod pyrepr;
pub mod timestamp;
