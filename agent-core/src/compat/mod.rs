//! Byte formats the upstream agents defined: Python repr, Go JSON, timestamps, the banner.

pub mod banner;
pub mod gojson;
pub mod pyrepr;
pub mod timestamp;
