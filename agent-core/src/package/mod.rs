//! The package model: config.json, steps, the resource identity.

pub mod config;
pub mod identity;
pub mod step;
