//! Cancellation (SPEC §10): the first termination signal stops new work, the second stops the
//! running operation too.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio_util::sync::CancellationToken;

/// Cancellation (SPEC §10) at its two levels, as two tokens. Once `stop` is cancelled no new
/// operation starts, and the running one is left to finish (or stopped at once, see
/// [`FirstSignal`](super::FirstSignal)) until `force` is cancelled too.
#[derive(Debug, Clone)]
pub struct Cancellation {
    /// The first termination signal: finish the running operation, start nothing after it.
    /// A child of `force`, so it is cancelled whenever `force` is.
    pub stop: CancellationToken,
    /// The second one: stop the running operation too (its process group gets SIGTERM, then
    /// SIGKILL after the grace).
    pub force: CancellationToken,
    /// Set by the signal handler itself, before anything cancels `stop` (see
    /// [`Cancellation::with_flag`]).
    signalled: Option<Arc<AtomicBool>>,
}

impl Cancellation {
    pub fn new() -> Self {
        let force = CancellationToken::new();
        Self {
            stop: force.child_token(),
            force,
            signalled: None,
        }
    }

    /// Also stopping once `flag` is set. A signal handler can set a flag but not cancel a
    /// token (that takes a lock), so the signal is seen by the very next check (e.g. between
    /// two steps) even before the thread that cancels `stop` has run.
    pub fn with_flag(flag: Arc<AtomicBool>) -> Self {
        Self {
            signalled: Some(flag),
            ..Self::new()
        }
    }

    /// Whether to start nothing new: the check before each step and operation.
    pub fn is_stopping(&self) -> bool {
        self.stop.is_cancelled()
            || self
                .signalled
                .as_ref()
                .is_some_and(|f| f.load(Ordering::SeqCst))
    }
}

impl Default for Cancellation {
    fn default() -> Self {
        Self::new()
    }
}
