//! One interrupt run: the operations a kind hands its context, their markers, the reboot
//! protocol, and the dry run behind `agent plan interrupt`.
//!
//! [`runner`] runs, [`plan`] describes; both act on the one decision in `decide`, and both
//! run the kind's code on a thread of its own (`worker`).

mod decide;
pub mod plan;
mod reboot;
pub mod runner;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub(crate) mod worker;
