//! SIGTERM/SIGINT → cancellation (SPEC §10).
//!
//! The first signal means "finish what is running, then stop" (the rule of the Python agent
//! and of the final Go agent): no new step or operation starts, the running one completes and
//! is judged normally, and the agent exits 1. What bounds the running step is the pod's
//! termination grace period. A second signal (an impatient person, a second Ctrl-C) stops the
//! running operation too: SIGTERM to its process group, SIGKILL after the stop grace.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use agent_core::exec::{Cancel, CancelHandle};
use tokio::signal::unix::{SignalKind, signal};
use tracing::warn;

/// Set from the signal handler itself, so the check between two steps sees a signal at once
/// rather than when the forwarding task next runs.
static TERMINATION_REQUESTED: AtomicBool = AtomicBool::new(false);

/// Signals received, counted in the handler: two signals in quick succession may reach the
/// forwarding task as one wake-up.
static SIGNALS: AtomicUsize = AtomicUsize::new(0);

/// A cancellation that SIGTERM and SIGINT trigger. Call within the tokio runtime.
pub fn install() -> std::io::Result<Cancel> {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: the action only stores to atomics, which is async-signal-safe.
        unsafe {
            signal_hook_registry::register(sig, || {
                SIGNALS.fetch_add(1, Ordering::SeqCst);
                TERMINATION_REQUESTED.store(true, Ordering::SeqCst);
            })?;
        }
    }
    let (handle, cancel) = Cancel::with_flag(&TERMINATION_REQUESTED);
    forward_to(handle)?;
    Ok(cancel)
}

fn forward_to(handle: CancelHandle) -> std::io::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        let mut seen = 0;
        loop {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            let count = SIGNALS.load(Ordering::SeqCst).max(seen + 1);
            if seen == 0 {
                warn!(
                    signal = name,
                    "received a termination signal; finishing the running operation, then \
                     stopping (a second signal stops it at once)"
                );
                handle.cancel();
            }
            if count >= 2 {
                warn!(
                    signal = name,
                    "received a second termination signal; stopping the running operation"
                );
                handle.force();
                return;
            }
            seen = count;
        }
    });
    Ok(())
}
