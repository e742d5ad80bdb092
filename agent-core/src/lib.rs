//! agent-core: everything the node agent knows, with no interrupt-kind-specific code.
//!
//! The core orchestrates: it parses the package, decides which steps run, runs them chrooted
//! into the host, and keeps markers, history and logs on the host through [`hostfs`].
//! Interrupt kinds plug in through [`interrupt::Interrupt`]; a plugin crate depends on this
//! crate and serde only, using the re-exports below.

pub mod banner;
pub mod errors;
pub mod execution;
pub mod gojson;
pub mod history;
pub mod hostfs;
pub mod identity;
pub mod interrupt;
pub mod interrupts;
pub mod locks;
pub mod logs;
pub mod markers;
pub mod package;
pub mod plan;
pub mod preflight;
pub mod pyrepr;
pub mod registry;
pub mod results;
pub mod runtime;
pub mod stage;
pub mod status;
pub mod step;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod timestamp;
pub mod validate;

// The paths `#[interrupt]` emits (`::agent_core::...`) also resolve inside this crate.
extern crate self as agent_core;

pub use async_trait::async_trait;
pub use execution::Status;
pub use interrupt::{
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
