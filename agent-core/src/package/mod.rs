//! The package model: config.json (with its validation) and steps.

pub mod config;
pub mod step;
