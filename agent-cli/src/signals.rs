//! Stop requests → cancellation (SPEC §10).
//!
//! Every signal whose default action ends the process and that a person or a supervisor sends
//! to stop one is a stop request, handled alike: SIGTERM and SIGINT, and SIGHUP (a terminal
//! hang-up during a manual run), SIGUSR1, SIGUSR2 and SIGALRM. Left at their default, those
//! four would kill the agent between a step's end and its marker, and the next run would do
//! the finished step again. SIGQUIT keeps its default (a core dump is asked for on purpose);
//! SIGPIPE is ignored by the Rust runtime.
//!
//! The first signal means "finish what is running, then stop" (the rule of the Python agent
//! and of the final Go agent): no new step or operation starts, the running one completes and
//! is judged normally, and the agent exits 1. What bounds the running step is the pod's
//! termination grace period. A second signal (an impatient person, a second Ctrl-C) stops the
//! running operation too: SIGTERM to its process group, SIGKILL after the stop grace.
//!
//! The handlers are signal-hook's safe ones. For each signal, first a flag is set, which the
//! check before each step or operation reads ([`Cancellation::is_stopping`]): a signal that
//! arrives while a finished step is being judged stops the next one from starting. Then the
//! signal's number is noted (for the log line) and one byte is written into a socket
//! (signal-hook's self-pipe, one write end per signal, one read end for all), so two signals
//! count as two even when both arrive before anything reads them. A thread of its own reads
//! the bytes and cancels the tokens, which wakes whatever waits on them (the running
//! operation, a lock wait). A thread, not a task: the async runtime has one thread, busy with
//! synchronous work between two steps (markers, logs), and the handlers are installed before
//! the runtime exists (before the first write of a run, SPEC §10).

use std::io::{self, Read as _};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use agent_core::exec::Cancellation;
use signal_hook::consts::{SIGALRM, SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use tracing::warn;

/// The stop requests of SPEC §10, with the names the log gives them.
const STOP_SIGNALS: [(i32, &str); 6] = [
    (SIGTERM, "SIGTERM"),
    (SIGINT, "SIGINT"),
    (SIGHUP, "SIGHUP"),
    (SIGUSR1, "SIGUSR1"),
    (SIGUSR2, "SIGUSR2"),
    (SIGALRM, "SIGALRM"),
];

/// A cancellation that every stop request triggers.
pub fn install() -> io::Result<Cancellation> {
    let signalled = Arc::new(AtomicBool::new(false));
    let last = Arc::new(AtomicUsize::new(0));
    let (read, write) = UnixStream::pair()?;
    for (signal, _) in STOP_SIGNALS {
        // signal-hook runs a signal's actions in the order they were registered.
        signal_hook::flag::register(signal, Arc::clone(&signalled))?;
        signal_hook::flag::register_usize(signal, Arc::clone(&last), number(signal))?;
        signal_hook::low_level::pipe::register(signal, write.try_clone()?)?;
    }
    // Each registration owns a write end of its own, kept for the life of the process.
    drop(write);
    let cancel = Cancellation::with_flag(signalled);
    let tokens = cancel.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || forward(read, &last, &tokens))?;
    Ok(cancel)
}

fn number(signal: i32) -> usize {
    usize::try_from(signal).expect("signal numbers are positive")
}

/// The name of the last stop request noted in `last`.
fn name(last: &AtomicUsize) -> &'static str {
    let seen = last.load(Ordering::SeqCst);
    STOP_SIGNALS
        .iter()
        .find(|(signal, _)| number(*signal) == seen)
        .map_or("a stop signal", |(_, name)| name)
}

/// Turn the signals counted on `reader` into cancellations: the first cancels `stop`, the
/// second `force`.
fn forward(mut reader: UnixStream, last: &AtomicUsize, cancel: &Cancellation) {
    let mut seen = 0usize;
    let mut buf = [0u8; 64];
    loop {
        // One byte per signal delivered.
        let received = match reader.read(&mut buf) {
            // The write ends are never closed; stop rather than spin if they were.
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
            Err(_) => return,
        };
        for _ in 0..received {
            seen += 1;
            let signal = name(last);
            if seen == 1 {
                warn!(
                    signal,
                    "received a termination signal; finishing the running operation, then \
                     stopping (a second signal stops it at once)"
                );
                cancel.stop.cancel();
            } else {
                warn!(
                    signal,
                    "received a second termination signal; stopping the running operation"
                );
                cancel.force.cancel();
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stop_request_is_named() {
        let last = AtomicUsize::new(0);
        assert_eq!(name(&last), "a stop signal");
        for (signal, expected) in STOP_SIGNALS {
            last.store(number(signal), Ordering::SeqCst);
            assert_eq!(name(&last), expected);
        }
    }
}
