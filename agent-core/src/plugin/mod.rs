//! The contract interrupt kinds implement, their registry and shared validators.

pub mod contract;
pub mod registry;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod validate;
