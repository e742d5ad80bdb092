//! Integration tests of the `agent` binary against fake host roots.
//!
//! One test binary; every test builds its own [`util::FakeHost`] (a temp dir holding a minimal
//! busybox root) and runs the real binary (`CARGO_BIN_EXE_agent`) with a cleared environment.
//! Tests that chroot need root: run as root, or as root of a user namespace (scripts/test.sh
//! does that when it is not root). Without root they fail; no test passes without running.

#![forbid(unsafe_code)]
#![allow(
    clippy::missing_panics_doc,
    reason = "test helpers panic by design: a panic is a failed assertion"
)]
#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    reason = "sizes and pids in tests are small"
)]
#![allow(
    clippy::too_many_lines,
    clippy::similar_names,
    reason = "scenario tests are long, linear and name related paths alike"
)]

#[macro_use]
#[allow(
    dead_code,
    reason = "the harness offers helpers not every test file uses yet"
)]
mod util;

mod banner;
mod build_info;
mod checks;
mod cli;
mod compat;
mod completions;
mod concurrency;
mod crash;
mod demo;
mod diagnostics;
mod dockerfile;
mod docs;
mod docs_console;
mod errors;
mod execution;
mod harness;
mod help;
mod interrupts;
mod leftovers;
mod logs;
mod logs_command;
mod malformed;
mod messages;
mod metrics;
mod plan_diff;
mod plugin_contract;
mod plugins;
mod preflight;
mod replay;
mod reset;
mod results;
mod rooted;
mod schemas;
mod security;
mod signals;
mod stage_apply;
mod state_bounds;
mod state_edges;
mod status;
mod subcommands;
mod try_example;
mod try_isolation;
mod try_safety;
mod try_stops;
mod verbosity;
