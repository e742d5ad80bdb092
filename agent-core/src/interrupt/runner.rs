//! Running an interrupt (SPEC §9.3–§9.6): per-operation markers, resume, echo and logs; the
//! after-reboot protocol is in `reboot`. Kinds reach all of it through
//! [`InterruptContext::operation`](crate::plugin::contract::InterruptContext::operation); nothing here knows a kind by name.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use tracing::{debug, warn};

use crate::exec::operation::{self, Subject};
use crate::exec::{self, FirstSignal, ProcessSpec, Termination};
use crate::host::fs::state_err;
use crate::host::fs::{HostFs, MARKER_BOUND};
use crate::host::runtime::format_seconds;
use crate::interrupt::decide::{self, Start};
pub use crate::interrupt::reboot::wait_for_host_shutdown;
use crate::interrupt::worker;
pub use crate::plugin::contract::REBOOT_WAIT;
use crate::plugin::contract::{Command, CompletionPolicy, Interrupt, InterruptError, Operations};
use crate::state::interrupt_markers::{self, OperationMarkers};
use crate::state::logs::{InvocationLogs, OperationLog};
use crate::state::metrics::InterruptTally;
use crate::state::results::OperationResult;

/// Settings of one interrupt run.
#[derive(Debug, Clone)]
pub struct InterruptSettings {
    pub fs: HostFs,
    pub exec: exec::Config,
    /// The whole SKYHOOK_RESOURCE_ID: names the marker directory.
    pub resource_id: String,
    /// `STATE/interrupts/flags/<RID>`.
    pub markers_dir: PathBuf,
    /// `LOGS/<pkg>/<ver>` (names from the resource ID); `None` when logs are off.
    pub log_dir: Option<PathBuf>,
    /// COPY_DIR, host-absolute: the commands' working directory.
    pub copy_dir: PathBuf,
    pub base_env: Vec<(OsString, OsString)>,
    pub reboot_max_attempts: u32,
    pub reboot_wait: Duration,
    /// SKYHOOK_AGENT_HEARTBEAT_SECONDS: a record every so often while an operation or a
    /// reboot wait is silent; zero: none.
    pub heartbeat: Duration,
}

impl InterruptSettings {
    /// The files of operation `index` of kind `type_name`.
    pub(crate) fn markers(&self, type_name: &str, index: usize) -> OperationMarkers {
        OperationMarkers::new(&self.markers_dir, type_name, index)
    }

    /// Whether operation `index` of kind `type_name` has its completion marker (the run and
    /// the dry run answer a kind's `is_complete` alike).
    pub(crate) fn is_complete(
        &self,
        type_name: &str,
        index: usize,
    ) -> Result<bool, InterruptError> {
        decide::complete(&self.fs, &self.markers(type_name, index))
    }

    /// `NODE_NAME` from the agent's environment, else the host's hostname.
    pub(crate) fn node_name(&self) -> Option<String> {
        if let Some((_, v)) = self.base_env.iter().find(|(k, _)| k == "NODE_NAME") {
            let v = v.to_string_lossy().trim().to_owned();
            if !v.is_empty() {
                return Some(v);
            }
        }
        // As the host sees it, through the rooted lookup, and never more than a marker.
        let bytes = self
            .fs
            .read_host_file(Path::new("/etc/hostname"), MARKER_BOUND)
            .ok()??;
        let name = String::from_utf8_lossy(&bytes).trim().to_owned();
        (!name.is_empty()).then_some(name)
    }

    /// The timeout that applies to `command`: the shorter of its own and the agent's.
    pub(crate) fn timeout_of(&self, command: &Command) -> Option<Duration> {
        match (command.timeout, self.exec.timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// What one operation did, for the caller's summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperationRecord {
    Skipped {
        marker: String,
    },
    Ran {
        command: String,
        termination: Termination,
    },
    PromotedAfterReboot {
        marker: String,
    },
    /// The command could not be started (a spawn failure).
    NotStarted {
        command: String,
    },
}

/// How an interrupt run ended, when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterruptOutcome {
    Completed,
    /// An after-reboot operation saw the shutdown it asked for.
    ShutdownInProgress,
}

/// What an interrupt run returns: how it ended, and what each operation did.
#[derive(Debug)]
pub struct InterruptEnd {
    pub result: Result<InterruptOutcome, InterruptError>,
    /// What each operation did, in order.
    pub records: Vec<OperationRecord>,
    /// The same operations as the results record shows them (SPEC §8.12).
    pub results: Vec<OperationResult>,
    /// What the run counted, for metrics.
    pub tally: InterruptTally,
}

/// What performs the operations a kind hands a real run's [`InterruptContext`] (a dry run's are judged by `plan::DryRun`).
#[derive(Debug)]
pub(crate) struct Performer {
    pub(crate) settings: InterruptSettings,
    pub(crate) type_name: &'static str,
    /// Everything that changes while the kind runs. The kind awaits one operation at a time,
    /// so one lock serves it all; it is never held across an `.await`.
    state: Mutex<Tracked>,
}

#[derive(Debug)]
struct Tracked {
    /// The invocation's one log, once an operation opened it.
    log: Option<OperationLog>,
    logs: InvocationLogs,
    /// What each operation did: one entry per operation, for the summary and the record.
    done: Vec<(OperationRecord, OperationResult)>,
    tally: InterruptTally,
    shutdown_in_progress: bool,
    /// The indices the kind handed over so far (SPEC §9.5: each at most once per run).
    used: BTreeSet<usize>,
    /// The first failure the kind was handed, as the run's error should the kind return `Ok`
    /// after it: it fails the run whatever the kind returns (SPEC §9.5).
    failure: Option<InterruptError>,
}

impl Performer {
    pub(crate) fn new(settings: InterruptSettings, type_name: &'static str) -> Self {
        // The run's one log, under `LOGS/<pkg>/<ver>/interrupts/`.
        let rel = format!("interrupts/{type_name}");
        let logs = match &settings.log_dir {
            Some(dir) => InvocationLogs::new(true, dir, [rel.as_str()]),
            None => InvocationLogs::new(false, Path::new("/"), []),
        };
        Self {
            settings,
            type_name,
            state: Mutex::new(Tracked {
                log: None,
                logs,
                done: Vec::new(),
                tally: InterruptTally::default(),
                shutdown_in_progress: false,
                used: BTreeSet::new(),
                failure: None,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Tracked> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn push(&self, record: OperationRecord, result: OperationResult) {
        self.state().done.push((record, result));
    }

    /// Count what the run did, for metrics.
    pub(crate) fn count(&self, f: impl FnOnce(&mut InterruptTally)) {
        f(&mut self.state().tally);
    }

    /// Keep the first failure the kind was handed, at `operation`.
    fn failed(&self, operation: String, error: &InterruptError) {
        let failure = match error {
            InterruptError::Stopped => InterruptError::Stopped,
            InterruptError::DuplicateOperation { operation, index } => {
                InterruptError::DuplicateOperation {
                    operation: operation.clone(),
                    index: *index,
                }
            }
            e => InterruptError::SwallowedFailure {
                operation,
                error: crate::host::errors::Chain(e).to_string(),
            },
        };
        self.state().failure.get_or_insert(failure);
    }

    /// `<type>_<index>`: operation `index`'s name.
    pub(crate) fn name(&self, index: usize) -> String {
        interrupt_markers::operation_name(self.type_name, index)
    }

    /// The after-reboot operation saw the shutdown it asked for.
    pub(crate) fn shutdown(&self) {
        self.state().shutdown_in_progress = true;
    }

    async fn run_on_success(
        &self,
        index: usize,
        markers: &OperationMarkers,
        command: Command,
    ) -> Result<(), InterruptError> {
        let text = command.to_string();
        let outcome = self
            .execute(
                index,
                &command,
                CompletionPolicy::OnSuccess,
                "no completion marker",
            )
            .await?;
        if outcome.timed_out {
            return Err(InterruptError::TimedOut {
                command: text,
                seconds: format_seconds(self.settings.timeout_of(&command)),
            });
        }
        let succeeded = outcome.termination == Termination::Exited(0);
        if succeeded {
            markers
                .write_complete(&self.settings.fs, SystemTime::now())
                .map_err(state_err(format!("writing {}", markers.complete.display())))?;
            self.count(|t| t.completed += 1);
        }
        // SPEC §10: a command stopped by the agent's own termination signal was judged above;
        // the run ends with the stop, whatever the command's result.
        if outcome.cancelled {
            if !succeeded {
                warn!(command = %text, result = %outcome.termination, "operation failed");
            }
            return Err(InterruptError::Stopped);
        }
        if !succeeded {
            return Err(InterruptError::CommandFailed {
                command: text,
                termination: outcome.termination,
            });
        }
        Ok(())
    }

    /// Echo, open the invocation's log lazily, run chrooted into ROOT with cwd COPY_DIR.
    pub(crate) async fn execute(
        &self,
        index: usize,
        command: &Command,
        policy: CompletionPolicy,
        reason: &str,
    ) -> Result<exec::Outcome, InterruptError> {
        let s = &self.settings;
        let text = command.to_string();
        s.exec.output.print(&format!("{text}\n"));
        let mut log = self.take_log()?;
        // A failed write here shows up again (and is reported) when the relay writes.
        if let Some(file) = log.file() {
            use std::io::Write as _;
            let _ = writeln!(file, "{text}");
        }
        let root = s.fs.root();
        let spec = ProcessSpec {
            program: PathBuf::from(&command.program),
            args: command.args.clone(),
            env: s.base_env.clone(),
            cwd: s.copy_dir.clone(),
            chroot: (root != Path::new("/")).then(|| root.to_path_buf()),
            // SPEC §9.4: the agent's own termination during an after-reboot command is the
            // shutdown it asked for; other operations finish first (SPEC §10).
            first_signal: match policy {
                CompletionPolicy::AfterReboot => FirstSignal::Stop,
                CompletionPolicy::OnSuccess => FirstSignal::Finish,
            },
        };
        let exec = exec::Config {
            timeout: s.timeout_of(command),
            ..s.exec.clone()
        };
        let id = self.name(index);
        let subject = Subject::Command {
            id: &id,
            command: &text,
        };
        let result = operation::supervise(&exec, &spec, log.file(), s.heartbeat, subject).await;
        let log_field = {
            let mut state = self.state();
            let field = result.as_ref().ok().and_then(|outcome| {
                state
                    .logs
                    .close(&self.log_name(), &log, outcome.log_error.as_deref())
            });
            state.log = Some(log);
            field
        };
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(source) => {
                // An operation that could not be started failed all the same (the run's
                // counts).
                let reason = format!("not started: {}", crate::host::errors::Chain(&source));
                self.push(
                    OperationRecord::NotStarted {
                        command: text.clone(),
                    },
                    OperationResult::not_started(&text, reason).with_id(id),
                );
                return Err(InterruptError::Exec {
                    command: text,
                    source,
                });
            }
        };
        let (succeeded, accepted) = match policy {
            CompletionPolicy::OnSuccess => (
                outcome.termination == Termination::Exited(0) && !outcome.timed_out,
                "[0]",
            ),
            // Exit 0 (enqueued) or killed by the shutdown: the command did its part; the boot
            // ID confirms the rest on the next run.
            CompletionPolicy::AfterReboot => (
                outcome.cancelled
                    || matches!(
                        outcome.termination,
                        Termination::Exited(0) | Termination::Signalled(libc::SIGTERM)
                    ),
                "[0] or SIGTERM",
            ),
        };
        operation::finished(subject, &outcome, succeeded);
        let result = OperationResult::ran(&text, reason.to_owned(), &outcome, succeeded, log_field)
            .with_id(id)
            .with_accepted(accepted);
        self.push(
            OperationRecord::Ran {
                command: text,
                termination: outcome.termination,
            },
            result,
        );
        Ok(outcome)
    }

    /// `interrupts/<type>`: the invocation's log, relative to the package's log directory.
    fn log_name(&self) -> String {
        format!("interrupts/{}", self.type_name)
    }

    /// The invocation's log, created on first use (an interrupt whose operations are all
    /// complete leaves no empty log behind). SPEC §8.10: one that cannot be created is log
    /// trouble, not a failure; only a refused path (a link) fails the run.
    fn take_log(&self) -> Result<OperationLog, InterruptError> {
        let mut state = self.state();
        if let Some(log) = state.log.take() {
            return Ok(log);
        }
        Ok(state
            .logs
            .open(&self.settings.fs, &self.log_name(), SystemTime::now())
            .map_err(state_err("creating the interrupt log"))?)
    }

    /// Close the invocation's log and apply retention.
    fn finish_log(&self) -> Result<(), InterruptError> {
        let mut state = self.state();
        if let Some(OperationLog::Open(log)) = state.log.take() {
            let _ = log.file.sync_all();
        }
        Ok(state
            .logs
            .prune(&self.settings.fs, &self.log_name())
            .map_err(state_err("cleaning old interrupt logs"))?)
    }
}

#[async_trait::async_trait]
impl Operations for Performer {
    async fn operation(
        &self,
        index: usize,
        policy: CompletionPolicy,
        command: Command,
    ) -> Result<(), InterruptError> {
        let name = self.name(index);
        // SPEC §9.5: a second use of an index would run another command under the first's
        // marker (or skip it as complete).
        let result = if self.state().used.insert(index) {
            self.run_operation(index, policy, command).await
        } else {
            Err(InterruptError::DuplicateOperation {
                operation: name.clone(),
                index,
            })
        };
        if let Err(e) = &result {
            self.failed(name, e);
        }
        result
    }

    fn mark_done(&self) -> Result<(), InterruptError> {
        let result = self.write_kind_done();
        if let Err(e) = &result {
            self.failed(self.type_name.to_owned(), e);
        }
        result
    }

    fn is_complete(&self, index: usize) -> Result<bool, InterruptError> {
        self.settings.is_complete(self.type_name, index)
    }

    fn node_name(&self) -> Option<String> {
        self.settings.node_name()
    }

    fn shutdown_in_progress(&self) -> bool {
        self.state().shutdown_in_progress
    }
}

impl Performer {
    /// One operation the kind handed over: skipped when complete, else run.
    async fn run_operation(
        &self,
        index: usize,
        policy: CompletionPolicy,
        command: Command,
    ) -> Result<(), InterruptError> {
        let s = &self.settings;
        let markers = s.markers(self.type_name, index);
        let start = decide::start(&s.fs, &markers, policy)?;
        let done = start == Start::Complete;
        let name = self.name(index);
        debug!(
            operation = %name,
            decision = if done { "skip" } else { "run" },
            reason = if done { "completion marker present" } else { "no completion marker" },
            marker = %markers.complete.display(),
            "operation decision"
        );
        if done {
            s.exec.output.print(&format!(
                "Skipping interrupt {name} because it was already run for {}\n",
                s.resource_id
            ));
            self.push(
                OperationRecord::Skipped {
                    marker: markers.complete_name(),
                },
                OperationResult::skipped(name.clone(), "completion marker present").with_id(name),
            );
            return Ok(());
        }
        if s.exec.cancel.is_stopping() || self.shutdown_in_progress() {
            return Err(InterruptError::Stopped);
        }
        match start {
            Start::AfterReboot => self.run_after_reboot(index, &markers, command).await,
            Start::Run | Start::Complete => self.run_on_success(index, &markers, command).await,
        }
    }

    fn write_kind_done(&self) -> Result<(), InterruptError> {
        let s = &self.settings;
        interrupt_markers::write_kind_done(
            &s.fs,
            &s.markers_dir,
            self.type_name,
            SystemTime::now(),
        )
        .map_err(state_err(format!(
            "writing {}",
            interrupt_markers::kind_done_path(&s.markers_dir, self.type_name).display()
        )))?;
        self.count(|t| t.completed += 1);
        Ok(())
    }
}

/// The kind's own check of its fields, as `invalid <type> interrupt: ...`.
pub(crate) fn validate(interrupt: &dyn Interrupt) -> Result<(), InterruptError> {
    interrupt
        .validate_payload()
        .map_err(|error| InterruptError::Invalid {
            type_name: interrupt.type_name(),
            error,
        })
}

/// [`run_owned`] for a borrowed interrupt: the kind runs on a thread of its own, so it runs a
/// copy, made as the operator's bytes make one (serialized, then decoded).
pub async fn run(
    settings: InterruptSettings,
    interrupt: &(dyn Interrupt + 'static),
) -> InterruptEnd {
    match worker::owned_copy(interrupt) {
        Ok(owned) => run_owned(settings, owned).await,
        Err(e) => InterruptEnd::failed(e),
    }
}

/// Run `interrupt` with the marker protocol: how it ended, and what each operation did (also
/// as the results record shows it).
///
/// SPEC §9.5: the core settles the outcome. The kind's code runs on a thread of its own
/// (a panic there is caught and fails the run); an operation that failed fails the run
/// whatever the kind returns afterwards, and so does an index handed over twice.
pub async fn run_owned(settings: InterruptSettings, interrupt: Arc<dyn Interrupt>) -> InterruptEnd {
    run_confined(settings, interrupt, None).await
}

/// [`run_owned`], the kind's thread entering `confine` first (in tests: the spawn trap).
pub(crate) async fn run_confined(
    settings: InterruptSettings,
    interrupt: Arc<dyn Interrupt>,
    confine: Option<Arc<dyn worker::Confine>>,
) -> InterruptEnd {
    // Before anything is touched; kinds rely on it instead of checking again in `run`.
    if let Err(e) = validate(interrupt.as_ref()) {
        return InterruptEnd::failed(e);
    }
    // SPEC §5: temp files a killed run left behind, once no live writer can own them.
    settings.fs.clean_stale_temps(&settings.markers_dir);
    let type_name = interrupt.type_name();
    let backend = Arc::new(Performer::new(settings, type_name));
    let limits = worker::Limits {
        force: backend.settings.exec.cancel.force.clone(),
        grace: backend.settings.exec.stop_grace,
        timeout: backend.settings.exec.timeout,
    };
    let end = worker::run_kind(interrupt, backend.clone(), &limits, confine).await;
    if matches!(end, worker::KindEnd::Dropped(worker::GaveUp::Stopped)) {
        warn!(
            kind = type_name,
            grace_s = limits.grace.as_secs(),
            "the interrupt kind did not return within the stop grace after the second \
             termination signal; its code was stopped"
        );
    }
    let result = end.into_result(type_name, &limits);
    let finished = backend.finish_log();
    let (done, tally, shutdown, failure) = {
        let mut state = backend.state();
        (
            std::mem::take(&mut state.done),
            state.tally,
            state.shutdown_in_progress,
            state.failure.take(),
        )
    };
    let (records, results) = done.into_iter().unzip();
    let result = match (result, shutdown, failure) {
        (_, true, _) => Ok(InterruptOutcome::ShutdownInProgress),
        (Ok(()), false, Some(failure)) => Err(failure),
        (Ok(()), false, None) => finished.map(|()| InterruptOutcome::Completed),
        (Err(e), false, _) => Err(e),
    };
    InterruptEnd {
        result,
        records,
        results,
        tally,
    }
}

impl InterruptEnd {
    /// A run that failed before any operation.
    fn failed(error: InterruptError) -> Self {
        Self {
            result: Err(error),
            records: Vec::new(),
            results: Vec::new(),
            tally: InterruptTally::default(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
