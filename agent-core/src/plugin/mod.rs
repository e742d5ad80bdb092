//! The contract interrupt kinds implement, its wire codec, the registry of kinds and shared
//! validators. Bottom up: `contract` (the traits, the context kinds see, their errors) <
//! `registry` < `codec` (whose errors name the field, `field_errors`).

pub mod codec;
pub mod contract;
mod field_errors;
pub mod registry;
pub mod validate;
