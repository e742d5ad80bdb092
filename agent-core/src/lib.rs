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
pub mod testing;
pub mod timestamp;

pub use async_trait::async_trait;
pub use execution::Status;
pub use interrupt::{
    Command, CompletionPolicy, Interrupt, InterruptContext, InterruptError, InterruptKind, Named,
};
pub use typetag;

/// Used by [`register_interrupt!`]; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use inventory;
}
