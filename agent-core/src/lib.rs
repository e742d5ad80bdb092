//! agent-core: everything the node agent knows, with no interrupt-kind-specific code.
//!
//! The core orchestrates: it parses the package, decides which steps run, runs them chrooted
//! into the host, and keeps markers, history and logs on the host through `host::fs`.
//!
//! **The plugin surface** is what this crate's default build shows: interrupt kinds implement
//! [`InterruptKind`] under [`macro@interrupt`] and run in an [`InterruptContext`]; the root
//! re-exports below and [`plugin`] (the contract, its wire codec, the registry, shared
//! validators) are all a kind's crate uses, with `testing` (feature `testing`) in its tests.
//! A plugin crate depends on this crate and serde only.
//!
//! **The engine**, the agent binary's, is public only with the feature `engine` (agent-cli
//! turns it on); its layers, bottom up (docs/architecture.md):
//!
//! - `compat`: byte formats the upstream agents defined (Python repr, Go JSON, timestamps).
//! - `host`: the host root as a rooted filesystem (one atomic write, one temp-name scheme),
//!   the run's environment (variables, resource ID, boot ID, the banner), pre-flight.
//! - `exec`: running one process tree: spawn, relay, timeouts, signals.
//! - `package`: the package model: config.json, steps, validation.
//! - `state`: every file the agent keeps on the host, one owner per format.
//! - `plugin` (above) sits here: the contract builds on `exec` and `host`.
//! - `stage`: one stage run (decide, execute, record) and its plan, from the same decisions.
//! - `interrupt`: one interrupt run (operations, markers, the reboot protocol) and its dry
//!   run, from the same decisions.
//!
//! A layer imports only the layers listed before it; `stage` and `interrupt` come last (the
//! interrupt plan borrows the stage plan's vocabulary; `stage` never imports `interrupt`).

// Without `engine`, the engine's entry points (the agent binary's) have no caller in the build.
#![cfg_attr(not(feature = "engine"), allow(dead_code, unused_imports))]

pub mod plugin;

// The engine's modules: public with feature `engine` (the agent binary), crate-private
// otherwise, so that a kind's build sees the plugin surface only. Declared one by one, not by a
// macro: rustfmt (and `cargo fmt --check`) reaches only the modules it can see declared.
#[cfg(feature = "engine")]
pub mod compat;
#[cfg(not(feature = "engine"))]
mod compat;
#[cfg(feature = "engine")]
pub mod exec;
#[cfg(not(feature = "engine"))]
mod exec;
#[cfg(feature = "engine")]
pub mod host;
#[cfg(not(feature = "engine"))]
mod host;
#[cfg(feature = "engine")]
pub mod interrupt;
#[cfg(not(feature = "engine"))]
mod interrupt;
#[cfg(feature = "engine")]
pub mod package;
#[cfg(not(feature = "engine"))]
mod package;
#[cfg(feature = "engine")]
pub mod stage;
#[cfg(not(feature = "engine"))]
mod stage;
#[cfg(feature = "engine")]
pub mod state;
#[cfg(not(feature = "engine"))]
mod state;

#[cfg(any(test, feature = "testing"))]
pub use interrupt::testing;
pub use plugin::validate;

// The paths `#[interrupt]` emits (`::agent_core::...`) also resolve inside this crate.
extern crate self as agent_core;

pub use async_trait::async_trait;
pub use exec::Status;
pub use plugin::contract::{
    BoxError, Command, CompletionPolicy, Interrupt, InterruptContext, InterruptError,
    InterruptKind, Named,
};
pub use typetag;

/// Declare an interrupt kind: on its `impl InterruptKind for Kind { ... }` block,
/// `#[agent_core::interrupt(type = "my_kind", summary = "one line", example = r#"{...}"#)]`.
///
/// - `type`: the wire name (the payload's `"type"`, lowercase snake case); it also names the
///   kind's markers, `<type>_<i>.complete`.
/// - `summary`: one line for `agent interrupts list`.
/// - `example` (optional, default `{"type":"<type>"}`): a payload in the kind's canonical
///   form. At startup the registry decodes it and checks it serializes back to itself.
///
/// It adds `TYPE`, `SUMMARY` and `EXAMPLE` to the impl, implements [`Interrupt`] for the kind
/// and registers it for decoding (typetag, under `type`) and for listing. Nothing else
/// declares a kind: an `impl InterruptKind` without it does not compile.
pub use agent_macros::interrupt;

/// Used by [`macro@interrupt`]; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::plugin::registry::InterruptDescriptor;
    pub use inventory;

    /// Implemented by [`macro@crate::interrupt`] only.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not declared as an interrupt kind",
        label = "not declared with #[agent_core::interrupt]",
        note = "put `#[agent_core::interrupt(type = \"my_kind\", summary = \"...\")]` on `impl InterruptKind for {Self}` \
                (it replaces #[typetag::serde], #[async_trait], the TYPE/SUMMARY/EXAMPLE constants and `register_interrupt!`)"
    )]
    pub trait Declared {}
}
