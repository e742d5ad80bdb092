//! The contract interrupt kinds implement, its wire codec, the registry of kinds and shared
//! validators. Bottom up: `contract` (the traits, the context kinds see, their errors) <
//! `registry` < `codec`.

pub mod codec;
pub mod contract;
pub mod registry;
pub mod validate;
