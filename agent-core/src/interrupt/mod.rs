//! One interrupt run: the context kinds run in, operation markers, the reboot protocol.

pub mod runner;
