//! The after-reboot completion protocol of a real run (SPEC §9.4) and its loop guard (§9.6):
//! the boot ID, the pending marker and the attempts counter, acted on as
//! [`decide::after_reboot`] decides; and how the agent's process ends once the reboot is under
//! way ([`wait_for_host_shutdown`]).

use std::time::Duration;

use tracing::{info, warn};

use crate::exec::{self, Cancellation, ExecError, Termination};
use crate::host::errors::Chain;
use crate::host::fs::state_err;
use crate::host::runtime::format_seconds;
use crate::interrupt::decide::{self, PendingState, RebootStep};
use crate::interrupt::runner::{OperationRecord, Performer};
use crate::plugin::contract::{Command, CompletionPolicy, InterruptError};
use crate::state::interrupt_markers::OperationMarkers;
use crate::state::results::OperationResult;

impl Performer {
    /// SPEC §9.4 and §9.6.
    pub(crate) async fn run_after_reboot(
        &self,
        index: usize,
        markers: &OperationMarkers,
        command: Command,
    ) -> Result<(), InterruptError> {
        let s = &self.settings;
        let fs = &s.fs;
        let decision = decide::after_reboot(fs, markers, s.reboot_max_attempts)?;
        let boot_id = decision.boot_id.as_str();
        let count = match decision.step {
            RebootStep::Promote { since } => {
                markers.promote(fs).map_err(state_err(format!(
                    "promoting {}",
                    markers.pending.display()
                )))?;
                markers.remove_attempts(fs).map_err(state_err(format!(
                    "removing {}",
                    markers.attempts.display()
                )))?;
                info!(marker = %markers.complete.display(), "skipping completed interrupt after host reboot");
                self.count(|t| t.completed += 1);
                self.push(
                    OperationRecord::PromotedAfterReboot {
                        marker: markers.complete_name(),
                    },
                    OperationResult::skipped(
                        self.name(index),
                        format!("the host rebooted since the command ran (boot ID was {since})"),
                    )
                    .with_id(self.name(index)),
                );
                return Ok(());
            }
            RebootStep::Refuse { count } => {
                if let Err(reason) = &decision.counted {
                    warn!(
                        file = %markers.attempts.display(),
                        error = %reason,
                        "unreadable reboot attempts file; counting it as the limit and refusing \
                         to reboot until a human looks"
                    );
                }
                self.count(|t| t.loop_guard_refusals += 1);
                return Err(InterruptError::RebootLoop {
                    count,
                    max: s.reboot_max_attempts,
                    attempts_file: markers.attempts.display().to_string(),
                    root: fs.root().display().to_string(),
                    resource_id: s.resource_id.clone(),
                });
            }
            RebootStep::Reboot { attempt, pending } => {
                match pending {
                    PendingState::SameBoot => {
                        info!(marker = %markers.pending.display(), boot_id, "reboot was requested under this boot ID already; requesting it again");
                    }
                    PendingState::Malformed(content) => {
                        warn!(marker = %markers.pending.display(), content = %content, "malformed pending marker; replacing it");
                    }
                    PendingState::Absent => {}
                }
                attempt - 1
            }
        };

        // Durable before the command starts: the reboot may kill us at any instant after.
        markers
            .write_pending(fs, boot_id)
            .map_err(state_err(format!("writing {}", markers.pending.display())))?;

        let reason = format!("reboot requested under boot ID {boot_id}");
        let result = self
            .execute(index, &command, CompletionPolicy::AfterReboot, &reason)
            .await;
        // SPEC §9.6: an attempt counts only once the command was started after its pending
        // marker was written. A missing `reboot`, a spawn failure or a failed pending write
        // spends nothing, so a node whose `reboot` is back is not refused forever. The pending
        // marker keeps upstream's exact format, so the count lives in its own file. (An agent
        // killed while the command runs records no attempt; the boot ID changes with a real
        // reboot, and the count restarts then anyway.)
        if was_spawned(&result) {
            self.count(|t| t.reboots_requested += 1);
            if let Err(e) = markers.write_attempts(fs, boot_id, count + 1) {
                warn!(
                    file = %markers.attempts.display(),
                    error = %Chain(&e),
                    "could not record the reboot attempt"
                );
            }
        }
        let outcome = result?;
        if outcome.cancelled {
            self.shutdown();
            return Ok(());
        }
        // Our own timeout's SIGTERM is not the host's shutdown.
        if outcome.timed_out {
            return Err(InterruptError::TimedOut {
                command: command.to_string(),
                seconds: format_seconds(s.timeout_of(&command)),
            });
        }
        match outcome.termination {
            // The shutdown we asked for killed the command first.
            Termination::Signalled(sig) if sig == libc::SIGTERM => {
                self.shutdown();
                Ok(())
            }
            Termination::Exited(0) => {
                // The reboot is enqueued; the shutdown will stop us. If it does not, fail
                // (the pending marker stays, so the next run retries or promotes).
                let cancel = s.exec.cancel.stop.clone();
                let operation = self.name(index);
                info!(
                    operation = %operation,
                    wait_s = s.reboot_wait.as_secs(),
                    "reboot requested; waiting for the shutdown to stop the agent"
                );
                let wait = async {
                    tokio::select! {
                        () = cancel.cancelled() => {
                            self.shutdown();
                            Ok(())
                        }
                        () = tokio::time::sleep(s.reboot_wait) => {
                            Err(InterruptError::RebootNotObserved)
                        }
                    }
                };
                exec::with_heartbeat(wait, s.heartbeat, |elapsed| {
                    reboot_heartbeat(Some(&operation), elapsed);
                })
                .await
            }
            termination => Err(InterruptError::CommandFailed {
                command: command.to_string(),
                termination,
            }),
        }
    }
}

/// Whether the command of an operation got as far as being started (so a reboot attempt was
/// made), judged from what [`Performer::execute`] returned.
fn was_spawned(result: &Result<exec::Outcome, InterruptError>) -> bool {
    match result {
        Ok(_) => true,
        Err(InterruptError::Exec { source, .. }) => !matches!(
            source,
            ExecError::Spawn { .. } | ExecError::ExecFormat { .. }
        ),
        Err(_) => false,
    }
}

/// SPEC §9.4: how the agent's process ends after a run whose after-reboot operation saw the
/// shutdown it asked for ([`InterruptOutcome::ShutdownInProgress`]). It never ends it with
/// success: the operator's interrupt Job completes as soon as this container exits 0, and must
/// complete only on the restart that finds a new boot ID (docs/interrupts.md, "The reboot's exit
/// code").
///
/// - If no termination signal has reached the agent yet (the command was killed by SIGTERM or
///   exited 0, but the shutdown has not reached this process), it waits up to `wait` for one;
///   none means the host is not going down: [`InterruptError::RebootNotObserved`].
/// - Once the shutdown's signal is there, `on_shutdown` runs (the caller says so on stdout) and
///   the agent waits for the host to go down and kill it. A second termination signal, or the
///   host still up after `grace`, ends the wait: [`InterruptError::Stopped`], with the pending
///   marker kept, so the next run under the same boot ID requests the reboot again.
///
/// [`InterruptOutcome::ShutdownInProgress`]: crate::interrupt::runner::InterruptOutcome::ShutdownInProgress
pub async fn wait_for_host_shutdown(
    cancel: &Cancellation,
    (wait, grace): (Duration, Duration),
    heartbeat: Duration,
    on_shutdown: impl FnOnce(),
) -> InterruptError {
    let beat = |elapsed: Duration| reboot_heartbeat(None, elapsed);
    if !cancel.is_stopping() {
        info!(
            wait_s = wait.as_secs(),
            "reboot requested; waiting for the shutdown to stop the agent"
        );
        let signalled = async {
            tokio::select! {
                () = cancel.stop.cancelled() => true,
                () = tokio::time::sleep(wait) => false,
            }
        };
        if !exec::with_heartbeat(signalled, heartbeat, beat).await {
            return InterruptError::RebootNotObserved;
        }
    }
    on_shutdown();
    info!(
        grace = %format!("{}s", format_seconds(Some(grace))),
        "waiting for the host to go down; a second termination signal stops the agent"
    );
    let down = async {
        tokio::select! {
            () = cancel.force.cancelled() => {
                warn!("stopped while waiting for the host to go down; the pending marker stays");
            }
            () = tokio::time::sleep(grace) => {
                warn!(
                    grace = %format!("{}s", format_seconds(Some(grace))),
                    "the host did not go down after the termination signal; the pending marker \
                     stays and the next run under this boot ID requests the reboot again"
                );
            }
        }
    };
    exec::with_heartbeat(down, heartbeat, beat).await;
    InterruptError::Stopped
}

/// SPEC §1.5: the heartbeat of a reboot wait, as of a silent step (`operation`: the one that
/// asked for the reboot, when known).
fn reboot_heartbeat(operation: Option<&str>, elapsed: Duration) {
    info!(
        operation,
        elapsed_s = elapsed.as_secs(),
        "waiting for the reboot"
    );
}
