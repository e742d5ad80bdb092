//! `agent plan interrupt` (SPEC §1.4, ext): what an interrupt run would do on this host, with
//! nothing run and nothing written.
//!
//! Only the kind knows its operations, so the kind runs, against a context whose operations
//! are judged instead of run: by `decide`, the decision the runner acts on, so a plan and a
//! run cannot disagree.

use std::ffi::OsString;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;

use crate::exec::{self, Cancellation, ExecError, MemorySink, Outcome, Output, ProcessSpec};
use crate::host::boot::read_boot_id;
use crate::host::errors::Chain;
use crate::host::fs::HostFs;
use crate::host::identity::ResourceId;
use crate::host::runtime::Runtime;
use crate::interrupt::decide::{self, PendingState, RebootStep, Start};
use crate::interrupt::runner::{InterruptSettings, validate};
use crate::interrupt::worker;
use crate::plugin::contract::{
    Command, CompletionPolicy, Interrupt, InterruptError, Operations, REBOOT_WAIT,
};
use crate::stage::plan::{
    PlanError, PlannedAction, PlannedWrite, WriteKind, display, resolv_failure, results_write,
};
use crate::state::interrupt_markers::{self, OperationMarkers};

/// What a dry run of one operation found (`agent plan interrupt`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PlannedOperation {
    /// `<TYPE>_<i>`, or `<TYPE>` for a kind that only records completion.
    pub operation: String,
    /// The command line as the agent would echo it; `None` when no command runs.
    pub command: Option<String>,
    pub policy: Option<CompletionPolicy>,
    pub action: PlannedAction,
    pub reason: String,
}

/// The dry run behind an [`InterruptContext`]: each operation the kind hands it is judged
/// against the markers as a real run would judge it, recorded, and reported as successful to
/// the kind. Nothing runs and nothing is written.
#[derive(Debug)]
struct DryRun {
    settings: InterruptSettings,
    type_name: &'static str,
    state: Mutex<Planned>,
}

#[derive(Debug, Default)]
struct Planned {
    operations: Vec<PlannedOperation>,
    /// Why later operations would not start (a reboot, a failure).
    stopped: Option<String>,
    /// The indices the kind handed over so far.
    used: std::collections::BTreeSet<usize>,
}

impl DryRun {
    fn state(&self) -> std::sync::MutexGuard<'_, Planned> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// SPEC §9.4, §9.6, read-only: the decision [`Performer`](super::runner) acts on, in words.
    fn describe_reboot(
        &self,
        markers: &OperationMarkers,
    ) -> Result<(PlannedAction, String), InterruptError> {
        let max = self.settings.reboot_max_attempts;
        let decision = match decide::after_reboot(&self.settings.fs, markers, max) {
            Ok(decision) => decision,
            Err(e @ InterruptError::BootId { .. }) => {
                return Ok((PlannedAction::Fail, e.to_string()));
            }
            Err(e) => return Err(e),
        };
        let boot_id = &decision.boot_id;
        Ok(match decision.step {
            RebootStep::Refuse { .. } if decision.counted.is_err() => (
                PlannedAction::Fail,
                format!(
                    "loop guard would refuse: {} cannot be read ({}), which counts as \
                         SKYHOOK_REBOOT_MAX_ATTEMPTS={max}",
                    markers.attempts.display(),
                    decision.counted.as_ref().err().map_or("", String::as_str)
                ),
            ),
            RebootStep::Promote { since } => (
                PlannedAction::Skip,
                format!(
                    "complete after reboot: pending with boot ID {since}, current boot ID \
                         {boot_id}; the pending marker would become the completion marker"
                ),
            ),
            RebootStep::Refuse { count } => (
                PlannedAction::Fail,
                format!(
                    "loop guard would refuse: reboot requested {count} times under boot ID \
                         {boot_id} (SKYHOOK_REBOOT_MAX_ATTEMPTS={max})"
                ),
            ),
            RebootStep::Reboot { attempt, pending } => (
                PlannedAction::Run,
                match pending {
                    PendingState::SameBoot => format!(
                        "reboot again (attempt {attempt} of {max}): pending with boot ID \
                         {boot_id}, the current boot ID, so the host has not restarted"
                    ),
                    PendingState::Malformed(content) => format!(
                        "reboot (attempt {attempt} of {max}): the pending marker is malformed \
                         ({content:?}) and would be replaced; boot ID {boot_id}"
                    ),
                    PendingState::Absent => format!(
                        "no completion marker; reboot (attempt {attempt} of {max}) under boot \
                         ID {boot_id}"
                    ),
                },
            ),
        })
    }
}

#[async_trait::async_trait]
impl Operations for DryRun {
    async fn operation(
        &self,
        index: usize,
        policy: CompletionPolicy,
        command: Command,
    ) -> Result<(), InterruptError> {
        let s = &self.settings;
        let name = interrupt_markers::operation_name(self.type_name, index);
        // SPEC §9.5: as a run refuses it.
        if !self.state().used.insert(index) {
            return Err(InterruptError::DuplicateOperation {
                operation: name,
                index,
            });
        }
        let markers = s.markers(self.type_name, index);
        let start = decide::start(&s.fs, &markers, policy)?;
        let stopped = self.state().stopped.clone();
        let (action, reason) = match (start, stopped) {
            (Start::Complete, _) => (
                PlannedAction::Skip,
                format!("completion marker present ({})", markers.complete_name()),
            ),
            (_, Some(why)) => (PlannedAction::NotReached, why),
            (Start::Run, None) => (PlannedAction::Run, "no completion marker".to_owned()),
            (Start::AfterReboot, None) => self.describe_reboot(&markers)?,
        };
        let mut state = self.state();
        if state.stopped.is_none() {
            state.stopped = match (action, policy) {
                (PlannedAction::Run, CompletionPolicy::AfterReboot) => Some(format!(
                    "{name} reboots the host first; the next run after the reboot continues here"
                )),
                (PlannedAction::Fail, _) => Some(format!("the run fails at {name} first")),
                _ => None,
            };
        }
        state.operations.push(PlannedOperation {
            operation: name,
            command: Some(command.to_string()),
            policy: Some(policy),
            action,
            reason,
        });
        Ok(())
    }

    fn mark_done(&self) -> Result<(), InterruptError> {
        let marker = interrupt_markers::kind_done_path(&self.settings.markers_dir, self.type_name);
        let mut state = self.state();
        let (action, reason) = match &state.stopped {
            Some(why) => (PlannedAction::NotReached, why.clone()),
            None => (
                PlannedAction::Record,
                format!("no command; {} would be written", marker.display()),
            ),
        };
        state.operations.push(PlannedOperation {
            operation: self.type_name.to_owned(),
            command: None,
            policy: None,
            action,
            reason,
        });
        Ok(())
    }

    fn is_complete(&self, index: usize) -> Result<bool, InterruptError> {
        self.settings.is_complete(self.type_name, index)
    }

    fn node_name(&self) -> Option<String> {
        self.settings.node_name()
    }

    fn shutdown_in_progress(&self) -> bool {
        false
    }
}

/// `plan_confined` that gives up on the kind once its own code has run for `limit`
/// without handing over an operation (a kind's code is run again here, after a real run: a
/// run that failed names what it did not get to, and must not hang on it).
pub async fn plan_operations_within(
    settings: InterruptSettings,
    interrupt: &(dyn Interrupt + 'static),
    limit: Duration,
) -> (Vec<PlannedOperation>, Result<(), InterruptError>) {
    let limits = worker::Limits {
        timeout: Some(limit),
        ..worker::Limits::none()
    };
    plan_limited(settings, interrupt, None, &limits).await
}

/// Dry-run `interrupt`: the kind builds its operations as in a real run, and each is judged
/// against the markers, the pending marker and the boot ID without running or writing
/// anything. Returns the operations in order, and the kind's own error if it gave up. The
/// kind's thread enters `confine` first (in tests: the spawn trap).
pub(crate) async fn plan_confined(
    settings: InterruptSettings,
    interrupt: &(dyn Interrupt + 'static),
    confine: Option<Arc<dyn worker::Confine>>,
) -> (Vec<PlannedOperation>, Result<(), InterruptError>) {
    plan_limited(settings, interrupt, confine, &worker::Limits::none()).await
}

async fn plan_limited(
    settings: InterruptSettings,
    interrupt: &(dyn Interrupt + 'static),
    confine: Option<Arc<dyn worker::Confine>>,
    limits: &worker::Limits,
) -> (Vec<PlannedOperation>, Result<(), InterruptError>) {
    if let Err(e) = validate(interrupt) {
        return (Vec::new(), Err(e));
    }
    let owned = match worker::owned_copy(interrupt) {
        Ok(owned) => owned,
        Err(e) => return (Vec::new(), Err(e)),
    };
    let type_name = interrupt.type_name();
    let dry = Arc::new(DryRun {
        settings,
        type_name,
        state: Mutex::new(Planned::default()),
    });
    // As in a run: the kind's code on its own thread, a panic caught.
    let result = worker::run_kind(owned, dry.clone(), limits, confine)
        .await
        .into_result(type_name, limits);
    let operations = std::mem::take(&mut dry.state().operations);
    (operations, result)
}

/// The plan of one interrupt run.
#[derive(Debug, Clone, Serialize)]
pub struct InterruptPlan {
    #[serde(rename = "type")]
    pub type_name: String,
    /// The payload in canonical JSON.
    pub payload: String,
    pub resource_id: String,
    /// The marker directory, as a host path.
    pub markers_dir: String,
    /// The host's current boot ID, if readable.
    pub boot_id: Option<String>,
    pub operations: Vec<PlannedOperation>,
    /// Host paths the run would create or replace.
    pub writes: Vec<PlannedWrite>,
    /// Why the run would fail (an operation that would fail, or the kind's own error).
    pub failure: Option<String>,
}

/// Plan the interrupt `interrupt` for resource `rid`, with the settings a run would use.
pub async fn plan_interrupt(
    fs: &HostFs,
    rt: &Runtime,
    rid: &ResourceId,
    copy_dir: &Path,
    interrupt: &(dyn Interrupt + 'static),
    env: Vec<(OsString, OsString)>,
) -> Result<InterruptPlan, PlanError> {
    let settings = dry_settings(fs, rt, rid, copy_dir, env);
    let markers_dir = settings.markers_dir.clone();
    let (operations, result) = plan_confined(settings, interrupt, None).await;
    let failure = resolv_failure(fs.root(), rt)
        .or_else(|| result.err().map(|e| Chain(&e).to_string()))
        .or_else(|| {
            let op = operations
                .iter()
                .find(|op| op.action == PlannedAction::Fail)?;
            Some(format!("{}: {}", op.operation, op.reason))
        });

    let mut writes = Vec::new();
    for op in &operations {
        let marker = |suffix: &str, condition: Option<&str>| {
            PlannedWrite::new(
                display(&markers_dir.join(format!("{}.{suffix}", op.operation))),
                WriteKind::State,
                condition,
            )
        };
        match (op.action, op.policy) {
            (PlannedAction::Run, Some(CompletionPolicy::AfterReboot)) => writes.extend([
                marker("attempts", Some("once the command started")),
                marker("pending", Some("before the command")),
            ]),
            (PlannedAction::Run, _) => {
                writes.push(marker("complete", Some("if the command succeeds")));
            }
            (PlannedAction::Skip, _) if op.reason.starts_with("complete after reboot") => {
                writes.push(marker("complete", Some("renamed from .pending")));
            }
            (PlannedAction::Record, _) => writes.push(marker("complete", None)),
            _ => {}
        }
    }
    let logged = operations.iter().any(|op| op.action == PlannedAction::Run);
    if logged && rt.write_logs {
        writes.push(PlannedWrite::new(
            format!(
                "{}-<timestamp>.log",
                display(
                    &rt.package_log_dir(&rid.package, &rid.version)
                        .join("interrupts")
                        .join(interrupt.type_name())
                )
            ),
            WriteKind::Log,
            None,
        ));
    }
    writes.push(PlannedWrite::new(
        display(&crate::state::locks::interrupt_lock_path(
            &rt.state_dir,
            &rid.id,
        )),
        WriteKind::Lock,
        None,
    ));
    writes.push(results_write(rt, &rid.package, &rid.version, "interrupt"));

    Ok(InterruptPlan {
        type_name: interrupt.type_name().to_owned(),
        payload: interrupt.to_json(),
        resource_id: rid.id.clone(),
        markers_dir: display(&markers_dir),
        boot_id: read_boot_id(fs).ok(),
        operations,
        writes,
        failure,
    })
}

/// The settings of a dry run of resource `rid`'s interrupt: those a run would use, with a
/// runner that runs nothing and output that goes nowhere.
pub fn dry_settings(
    fs: &HostFs,
    rt: &Runtime,
    rid: &ResourceId,
    copy_dir: &Path,
    env: Vec<(OsString, OsString)>,
) -> InterruptSettings {
    let markers_dir = crate::state::interrupt_markers::resource_dir(&rt.state_dir, &rid.id);
    InterruptSettings {
        fs: fs.clone(),
        exec: exec::Config {
            // A dry run prints nothing itself; the caller renders the plan.
            output: Output::new(
                Arc::new(MemorySink::default()),
                Arc::new(MemorySink::default()),
            ),
            cancel: Cancellation::new(),
            stop_grace: Duration::ZERO,
            timeout: None,
            runner: Arc::new(NothingRuns),
        },
        resource_id: rid.id.clone(),
        markers_dir,
        log_dir: rt
            .write_logs
            .then(|| rt.package_log_dir(&rid.package, &rid.version)),
        copy_dir: copy_dir.to_path_buf(),
        base_env: env,
        reboot_max_attempts: rt.reboot_max_attempts,
        reboot_wait: REBOOT_WAIT,
        heartbeat: Duration::ZERO,
    }
}

/// A plan never runs anything: if an operation reached the runner, refuse it.
#[derive(Debug)]
struct NothingRuns;

#[async_trait::async_trait]
impl exec::Runner for NothingRuns {
    async fn run(
        &self,
        _cfg: &exec::Config,
        spec: &ProcessSpec,
        _log: Option<&mut std::fs::File>,
    ) -> Result<Outcome, ExecError> {
        Err(ExecError::Spawn {
            program: spec.program.display().to_string(),
            source: std::io::Error::other("a plan runs nothing"),
        })
    }
}

#[cfg(test)]
mod tests;
