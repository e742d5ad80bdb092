//! SIGTERM/SIGINT → cancellation (SPEC §10).
//!
//! The first signal means "finish what is running, then stop" (the rule of the Python agent
//! and of the final Go agent): no new step or operation starts, the running one completes and
//! is judged normally, and the agent exits 1. What bounds the running step is the pod's
//! termination grace period. A second signal (an impatient person, a second Ctrl-C) stops the
//! running operation too: SIGTERM to its process group, SIGKILL after the stop grace.
//!
//! The handlers are signal-hook's safe ones. For each signal, first a flag is set, which the
//! check before each step or operation reads ([`Cancellation::is_stopping`]): a signal that
//! arrives while a finished step is being judged stops the next one from starting. Then one
//! byte is written into a socket (signal-hook's self-pipe), so two signals count as two even
//! when both arrive before anything reads them. A thread of its own reads the bytes and
//! cancels the tokens, which wakes whatever waits on them (the running operation, a lock
//! wait). A thread, not a task: the async runtime has one thread, busy with synchronous work
//! between two steps (markers, logs).

use std::io::{self, Read as _};
use std::os::fd::AsFd as _;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use agent_core::exec::Cancellation;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use signal_hook::consts::{SIGINT, SIGTERM};
use tracing::warn;

/// A cancellation that SIGTERM and SIGINT trigger.
pub fn install() -> io::Result<Cancellation> {
    let signalled = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for (signal, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
        // signal-hook runs a signal's actions in the order they were registered.
        signal_hook::flag::register(signal, Arc::clone(&signalled))?;
        let (read, write) = UnixStream::pair()?;
        signal_hook::low_level::pipe::register(signal, write)?;
        readers.push((read, name));
    }
    let cancel = Cancellation::with_flag(signalled);
    let tokens = cancel.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || forward(&readers, &tokens))?;
    Ok(cancel)
}

/// Turn the signals counted on `readers` into cancellations: the first cancels `stop`, the
/// second `force`.
fn forward(readers: &[(UnixStream, &'static str)], cancel: &Cancellation) {
    let mut seen = 0usize;
    let mut buf = [0u8; 64];
    loop {
        let ready: Vec<bool> = {
            let mut fds: Vec<PollFd<'_>> = readers
                .iter()
                .map(|(r, _)| PollFd::new(r.as_fd(), PollFlags::POLLIN))
                .collect();
            match nix::poll::poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(Errno::EINTR) => {}
                // Cannot happen with valid descriptors; stop rather than spin.
                Err(_) => return,
            }
            fds.iter().map(|f| f.any().unwrap_or(false)).collect()
        };
        for ((mut reader, name), ready) in readers.iter().map(|(r, n)| (r, *n)).zip(ready) {
            if !ready {
                continue;
            }
            // One byte per signal delivered.
            let received = match reader.read(&mut buf) {
                // The write end is never closed; stop rather than spin if it were.
                Ok(0) => return,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
                Err(_) => return,
            };
            for _ in 0..received {
                seen += 1;
                if seen == 1 {
                    warn!(
                        signal = name,
                        "received a termination signal; finishing the running operation, then \
                         stopping (a second signal stops it at once)"
                    );
                    cancel.stop.cancel();
                } else {
                    warn!(
                        signal = name,
                        "received a second termination signal; stopping the running operation"
                    );
                    cancel.force.cancel();
                    return;
                }
            }
        }
    }
}
