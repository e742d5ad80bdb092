//! What an interrupt operation does next, decided from the host's state (SPEC §9.3–§9.6).
//!
//! One decision for both callers: the runner acts on it, `agent plan` describes it. The facts
//! are read (never written) through [`OperationMarkers`]; the decision itself is the pure
//! [`reboot_step`].

use crate::host::boot::read_boot_id;
use crate::host::fs::HostFs;
use crate::host::fs::state_err;
use crate::plugin::contract::{CompletionPolicy, InterruptError};
use crate::state::interrupt_markers::{OperationMarkers, Pending};

/// What an operation does, before the after-reboot protocol is consulted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Start {
    /// Its completion marker is present: skip it.
    Complete,
    /// Run the command; the marker is written when it succeeds.
    Run,
    /// The after-reboot protocol decides ([`RebootDecision`]).
    AfterReboot,
}

/// SPEC §9.3: a complete operation is skipped, whatever its policy.
pub(crate) fn start(
    fs: &HostFs,
    markers: &OperationMarkers,
    policy: CompletionPolicy,
) -> Result<Start, InterruptError> {
    Ok(match (complete(fs, markers)?, policy) {
        (true, _) => Start::Complete,
        (false, CompletionPolicy::OnSuccess) => Start::Run,
        (false, CompletionPolicy::AfterReboot) => Start::AfterReboot,
    })
}

/// Whether the operation's completion marker is present.
pub(crate) fn complete(fs: &HostFs, markers: &OperationMarkers) -> Result<bool, InterruptError> {
    let checking = format!("checking {}", markers.complete.display());
    Ok(markers.is_complete(fs).map_err(state_err(checking))?)
}

/// What an after-reboot operation does next (SPEC §9.4, §9.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RebootStep {
    /// The boot ID changed since the command ran: promote `.pending` to `.complete`.
    Promote { since: String },
    /// Run the command (again); `attempt` counts from 1 under the current boot ID.
    Reboot { attempt: u32, pending: PendingState },
    /// The loop guard: `count` reboots were already requested under this boot ID.
    Refuse { count: u32 },
}

/// The pending marker of an after-reboot operation that has not completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PendingState {
    Absent,
    /// Written under the current boot ID: the host has not restarted yet.
    SameBoot,
    /// Not `boot-id:<id>`: replaced with a warning.
    Malformed(String),
}

/// The after-reboot decision and the facts it was made from.
#[derive(Debug, Clone)]
pub(crate) struct RebootDecision {
    pub boot_id: String,
    /// The attempts counted under `boot_id`, or why the attempts file cannot be trusted.
    pub counted: Result<u32, String>,
    pub step: RebootStep,
}

/// Read the boot ID, the pending marker and the attempts file, and decide.
///
/// # Errors
/// The boot ID cannot be read ([`InterruptError::BootId`]), or the pending marker cannot.
pub(crate) fn after_reboot(
    fs: &HostFs,
    markers: &OperationMarkers,
    max_attempts: u32,
) -> Result<RebootDecision, InterruptError> {
    let boot_id = read_boot_id(fs)?;
    let pending = markers
        .read_pending(fs)
        .map_err(state_err(format!("reading {}", markers.pending.display())))?;
    let counted = markers.read_attempts(fs, &boot_id);
    let step = reboot_step(pending, &counted, &boot_id, max_attempts);
    Ok(RebootDecision {
        boot_id,
        counted,
        step,
    })
}

/// The decision table of SPEC §9.4 and §9.6.
pub(crate) fn reboot_step(
    pending: Option<Pending>,
    attempts: &Result<u32, String>,
    boot_id: &str,
    max_attempts: u32,
) -> RebootStep {
    let state = match pending {
        None => PendingState::Absent,
        Some(Pending::BootId(b)) if b != boot_id => return RebootStep::Promote { since: b },
        Some(Pending::BootId(_)) => PendingState::SameBoot,
        Some(Pending::Malformed(content)) => PendingState::Malformed(content),
    };
    // SPEC §9.6: an attempts file that cannot be trusted counts as the limit.
    let count = attempts.as_ref().map_or(max_attempts, |&count| count);
    if count >= max_attempts {
        RebootStep::Refuse { count }
    } else {
        RebootStep::Reboot {
            attempt: count + 1,
            pending: state,
        }
    }
}
