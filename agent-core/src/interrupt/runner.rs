//! Running an interrupt (SPEC §9.3–§9.6): per-operation markers, resume, the after-reboot
//! boot-ID protocol and its loop guard, echo and logs. Kinds reach all of it through
//! [`InterruptContext::operation`]; nothing here knows a kind by name.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use tracing::{debug, info, warn};

use crate::compat::timestamp;
use crate::exec::{self, ExecError, FirstSignal, ProcessSpec, Termination};
use crate::host::fs::{HostFs, HostFsError};
use crate::plugin::contract::{BoxError, Command, CompletionPolicy, DecodeError, Interrupt};
use crate::state::logs::{OperationLog, RunLogs};
use crate::state::markers;
use crate::state::results::OperationResult;

/// After a reboot command exited 0, how long the agent waits for the shutdown to stop it.
pub const REBOOT_WAIT: Duration = Duration::from_secs(10);

/// Why an interrupt failed.
#[derive(Debug, thiserror::Error)]
pub enum InterruptError {
    #[error("{command}: {termination}")]
    CommandFailed {
        command: String,
        termination: Termination,
    },
    #[error("{command}: timed out after {seconds}s")]
    TimedOut { command: String, seconds: String },
    #[error("reboot was enqueued but the host did not restart within {}s", REBOOT_WAIT.as_secs())]
    RebootNotObserved,
    /// The loop guard (SPEC §9.6); the message says where the count is and how to reset it.
    #[error(
        "reboot requested {count} times but the host never restarted; refusing to reboot again \
         (loop guard: SKYHOOK_REBOOT_MAX_ATTEMPTS={max}, counted in {attempts_file}). Find out \
         why the host does not restart, then allow new attempts with `agent reset {root} \
         --interrupt {resource_id} --yes` (or remove {attempts_file}), or raise \
         SKYHOOK_REBOOT_MAX_ATTEMPTS"
    )]
    RebootLoop {
        count: u32,
        max: u32,
        /// Host path of the attempts file.
        attempts_file: String,
        root: String,
        resource_id: String,
    },
    #[error("reading the host boot ID from {path}: {reason}")]
    BootId { path: String, reason: String },
    #[error("agent stopped after receiving a termination signal")]
    Stopped,
    #[error("{command}")]
    Exec {
        command: String,
        #[source]
        source: ExecError,
    },
    #[error("{context}")]
    State {
        context: String,
        #[source]
        source: HostFsError,
    },
    /// The payload failed the kind's [`InterruptKind::validate`](crate::InterruptKind::validate).
    /// The kind's error is part of the message and kept as it is in `error`.
    #[error("invalid {type_name} interrupt: {error}")]
    Invalid {
        type_name: &'static str,
        error: BoxError,
    },
    /// The payload could not be decoded (the operator path decodes before it runs).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A kind's own failure (e.g. a precondition it checks itself), with its source.
    #[error(transparent)]
    Kind(BoxError),
}

impl InterruptError {
    /// A kind's own failure: `InterruptError::kind("no node to drain")`, or any error.
    pub fn kind(error: impl Into<BoxError>) -> Self {
        Self::Kind(error.into())
    }
}

fn state_err(context: impl Into<String>) -> impl FnOnce(HostFsError) -> InterruptError {
    let context = context.into();
    move |source| InterruptError::State { context, source }
}

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
}

/// What one interrupt run did, counted for the node's metrics (`agent_core::state::metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InterruptTally {
    /// Completion markers written: operations that succeeded, after-reboot operations
    /// promoted once the boot ID changed, and kinds without commands marked done.
    pub completed: u32,
    /// After-reboot commands started (each one an attempt the loop guard counts).
    pub reboots_requested: u32,
    /// Runs the reboot loop guard refused (SPEC §9.6).
    pub loop_guard_refusals: u32,
}

/// The core's side of an interrupt run, handed to [`InterruptKind::run`](crate::InterruptKind::run).
#[derive(Debug)]
pub struct InterruptContext {
    settings: InterruptSettings,
    type_name: &'static str,
    /// The invocation's one log, once an operation opened it.
    log: Mutex<Option<OperationLog>>,
    logs: Mutex<RunLogs>,
    records: Mutex<Vec<OperationRecord>>,
    results: Mutex<Vec<OperationResult>>,
    tally: Mutex<InterruptTally>,
    shutdown_in_progress: Mutex<bool>,
    /// `Some` for a dry run ([`plan_interrupt`]): operations are recorded here instead of run.
    dry_run: Option<Mutex<DryRun>>,
}

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

/// What a real run would do with one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlannedAction {
    /// The command would run.
    Run,
    /// Nothing would run: the operation is complete (or completes from its pending marker).
    Skip,
    /// No command; only the completion marker would be written.
    Record,
    /// The run would fail here without running the command.
    Fail,
    /// An earlier operation ends the run first.
    NotReached,
}

impl PlannedAction {
    /// `run`, `skip`, `record`, `fail`, `not-reached`.
    pub const fn as_str(self) -> &'static str {
        match self {
            PlannedAction::Run => "run",
            PlannedAction::Skip => "skip",
            PlannedAction::Record => "record",
            PlannedAction::Fail => "fail",
            PlannedAction::NotReached => "not-reached",
        }
    }
}

#[derive(Debug, Default)]
struct DryRun {
    planned: Vec<PlannedOperation>,
    /// Why later operations would not start (a reboot, a failure).
    stopped: Option<String>,
}

impl InterruptContext {
    pub fn new(settings: InterruptSettings, type_name: &'static str) -> Self {
        let logs = interrupt_logs(&settings, type_name);
        Self {
            settings,
            type_name,
            log: Mutex::new(None),
            logs: Mutex::new(logs),
            records: Mutex::new(Vec::new()),
            results: Mutex::new(Vec::new()),
            tally: Mutex::new(InterruptTally::default()),
            shutdown_in_progress: Mutex::new(false),
            dry_run: None,
        }
    }

    /// A context that runs nothing and writes nothing: every operation the kind hands it is
    /// judged against the markers as a real run would judge it, recorded, and reported as
    /// successful to the kind. See [`plan_interrupt`].
    pub fn dry_run(settings: InterruptSettings, type_name: &'static str) -> Self {
        Self {
            dry_run: Some(Mutex::new(DryRun::default())),
            ..Self::new(settings, type_name)
        }
    }

    /// What a dry run recorded, in order (empty for a real run).
    pub fn planned(&self) -> Vec<PlannedOperation> {
        self.dry_run
            .as_ref()
            .map(|d| d.lock().expect("lock").planned.clone())
            .unwrap_or_default()
    }

    /// The node's name as the kubelet knows it, for kinds that talk to the API server:
    /// `NODE_NAME` from the agent's environment, else the host's hostname.
    pub fn node_name(&self) -> Option<String> {
        if let Some((_, v)) = self
            .settings
            .base_env
            .iter()
            .find(|(k, _)| k == "NODE_NAME")
        {
            let v = v.to_string_lossy().trim().to_owned();
            if !v.is_empty() {
                return Some(v);
            }
        }
        let host = self.settings.fs.resolve(Path::new("/etc/hostname")).ok()?;
        let name = std::fs::read_to_string(host).ok()?.trim().to_owned();
        (!name.is_empty()).then_some(name)
    }

    /// Mark a kind that runs no command as done (`<TYPE>.complete`, no index: the name the
    /// upstream agents use for `no_op`).
    pub fn mark_done(&self) -> Result<(), InterruptError> {
        let marker = self
            .settings
            .markers_dir
            .join(format!("{}.complete", self.type_name));
        if let Some(dry) = &self.dry_run {
            let mut dry = dry.lock().expect("lock");
            let (action, reason) = match &dry.stopped {
                Some(why) => (PlannedAction::NotReached, why.clone()),
                None => (
                    PlannedAction::Record,
                    format!("no command; {} would be written", marker.display()),
                ),
            };
            dry.planned.push(PlannedOperation {
                operation: self.type_name.to_owned(),
                command: None,
                policy: None,
                action,
                reason,
            });
            return Ok(());
        }
        self.settings
            .fs
            .write_atomic(&marker, now_stamp().as_bytes())
            .map_err(state_err(format!("writing {}", marker.display())))?;
        self.count(|t| t.completed += 1);
        Ok(())
    }

    /// Operation `index` of this interrupt: skipped if already complete, else `command` runs
    /// chrooted into the host under `policy`, and its marker is written once it counts as
    /// complete.
    ///
    /// # Errors
    /// The command failed, the agent was stopped, or host state could not be read or written.
    pub async fn operation(
        &self,
        index: usize,
        policy: CompletionPolicy,
        command: Command,
    ) -> Result<(), InterruptError> {
        if let Some(dry) = &self.dry_run {
            return self.plan_operation(dry, index, policy, &command);
        }
        let s = &self.settings;
        let complete_name = markers::interrupt_complete_name(self.type_name, index);
        let complete = s.markers_dir.join(&complete_name);
        let done = markers::is_done(&s.fs, &complete)
            .map_err(state_err(format!("checking {}", complete.display())))?;
        debug!(
            operation = %format!("{}_{index}", self.type_name),
            decision = if done { "skip" } else { "run" },
            reason = if done { "completion marker present" } else { "no completion marker" },
            marker = %complete.display(),
            "operation decision"
        );
        if done {
            s.exec.output.print(&format!(
                "Skipping interrupt {}_{index} because it was already run for {}\n",
                self.type_name, s.resource_id
            ));
            self.result(
                OperationResult::skipped(
                    format!("{}_{index}", self.type_name),
                    "completion marker present",
                )
                .with_id(format!("{}_{index}", self.type_name)),
            );
            self.record(OperationRecord::Skipped {
                marker: complete_name,
            });
            return Ok(());
        }
        if s.exec.cancel.is_cancelled() || self.shutdown_in_progress() {
            return Err(InterruptError::Stopped);
        }
        match policy {
            CompletionPolicy::OnSuccess => self.run_on_success(index, &complete, command).await,
            CompletionPolicy::AfterReboot => self.run_after_reboot(index, &complete, command).await,
        }
    }

    /// Whether operation `index` is already complete (so a kind can skip preconditions of a
    /// command that will not run again).
    ///
    /// # Errors
    /// Something other than a regular file is at the marker path.
    pub fn is_complete(&self, index: usize) -> Result<bool, InterruptError> {
        let marker = self
            .settings
            .markers_dir
            .join(markers::interrupt_complete_name(self.type_name, index));
        markers::is_done(&self.settings.fs, &marker)
            .map_err(state_err(format!("checking {}", marker.display())))
    }

    /// True once an after-reboot operation saw the shutdown it asked for.
    pub fn shutdown_in_progress(&self) -> bool {
        *self.shutdown_in_progress.lock().expect("lock")
    }

    /// What each operation did, in order.
    pub fn records(&self) -> Vec<OperationRecord> {
        self.records.lock().expect("lock").clone()
    }

    fn record(&self, r: OperationRecord) {
        self.records.lock().expect("lock").push(r);
    }

    fn result(&self, r: OperationResult) {
        self.results.lock().expect("lock").push(r);
    }

    /// What each operation did, for the results record (SPEC §8.12).
    pub fn results(&self) -> Vec<OperationResult> {
        self.results.lock().expect("lock").clone()
    }

    /// What the run counted so far, for metrics.
    pub fn tally(&self) -> InterruptTally {
        *self.tally.lock().expect("lock")
    }

    fn count(&self, f: impl FnOnce(&mut InterruptTally)) {
        f(&mut self.tally.lock().expect("lock"));
    }

    async fn run_on_success(
        &self,
        index: usize,
        complete: &Path,
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
                seconds: format_seconds(self.timeout_of(&command)),
            });
        }
        let succeeded = outcome.termination == Termination::Exited(0);
        if succeeded {
            self.settings
                .fs
                .write_atomic(complete, now_stamp().as_bytes())
                .map_err(state_err(format!("writing {}", complete.display())))?;
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

    /// SPEC §9.4 and §9.6.
    async fn run_after_reboot(
        &self,
        index: usize,
        complete: &Path,
        command: Command,
    ) -> Result<(), InterruptError> {
        let s = &self.settings;
        let fs = &s.fs;
        let boot_id = self.boot_id()?;
        let pending = s
            .markers_dir
            .join(markers::interrupt_pending_name(self.type_name, index));
        let attempts = s
            .markers_dir
            .join(markers::interrupt_attempts_name(self.type_name, index));

        let previous = fs
            .read(&pending)
            .map_err(state_err(format!("reading {}", pending.display())))?;
        let counted = read_attempts(fs, &attempts, &boot_id);
        let count = match after_reboot_step(
            previous.as_deref(),
            &counted,
            &boot_id,
            s.reboot_max_attempts,
        ) {
            RebootStep::Promote { since } => {
                fs.rename(&pending, complete)
                    .map_err(state_err(format!("promoting {}", pending.display())))?;
                fs.remove_file(&attempts)
                    .map_err(state_err(format!("removing {}", attempts.display())))?;
                info!(marker = %complete.display(), "skipping completed interrupt after host reboot");
                self.count(|t| t.completed += 1);
                self.result(
                    OperationResult::skipped(
                        format!("{}_{index}", self.type_name),
                        format!("the host rebooted since the command ran (boot ID was {since})"),
                    )
                    .with_id(format!("{}_{index}", self.type_name)),
                );
                self.record(OperationRecord::PromotedAfterReboot {
                    marker: complete
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                });
                return Ok(());
            }
            RebootStep::Refuse { count } => {
                if let Err(reason) = &counted {
                    warn!(
                        file = %attempts.display(),
                        error = %reason,
                        "unreadable reboot attempts file; counting it as the limit and refusing \
                         to reboot until a human looks"
                    );
                }
                self.count(|t| t.loop_guard_refusals += 1);
                return Err(InterruptError::RebootLoop {
                    count,
                    max: s.reboot_max_attempts,
                    attempts_file: attempts.display().to_string(),
                    root: fs.root().display().to_string(),
                    resource_id: s.resource_id.clone(),
                });
            }
            RebootStep::Reboot {
                attempt,
                pending: state,
            } => {
                match state {
                    PendingState::SameBoot => {
                        info!(marker = %pending.display(), boot_id, "reboot was requested under this boot ID already; requesting it again");
                    }
                    PendingState::Malformed(content) => {
                        warn!(marker = %pending.display(), content = %content, "malformed pending marker; replacing it");
                    }
                    PendingState::Absent => {}
                }
                attempt - 1
            }
        };

        // Durable before the command starts: the reboot may kill us at any instant after.
        fs.write_atomic(&pending, format!("boot-id:{boot_id}\n").as_bytes())
            .map_err(state_err(format!("writing {}", pending.display())))?;

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
            let record = format!("boot-id:{boot_id}\nattempts:{}\n", count + 1);
            if let Err(e) = fs.write_atomic(&attempts, record.as_bytes()) {
                warn!(
                    file = %attempts.display(),
                    error = %crate::host::errors::Chain(&e),
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
                seconds: format_seconds(self.timeout_of(&command)),
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
                let cancel = s.exec.cancel.clone();
                tokio::select! {
                    () = cancel.cancelled() => {
                        self.shutdown();
                        Ok(())
                    }
                    () = tokio::time::sleep(s.reboot_wait) => Err(InterruptError::RebootNotObserved),
                }
            }
            termination => Err(InterruptError::CommandFailed {
                command: command.to_string(),
                termination,
            }),
        }
    }

    fn shutdown(&self) {
        *self.shutdown_in_progress.lock().expect("lock") = true;
    }

    /// The timeout that applies to `command`: the shorter of its own and the agent's.
    fn timeout_of(&self, command: &Command) -> Option<Duration> {
        match (command.timeout, self.settings.exec.timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn boot_id(&self) -> Result<String, InterruptError> {
        read_boot_id(&self.settings.fs)
    }

    /// Echo, open the invocation's log lazily, run chrooted into ROOT with cwd COPY_DIR.
    async fn execute(
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
            timeout: self.timeout_of(command),
            ..s.exec.clone()
        };
        let result = exec
            .run(&spec, log.file())
            .await
            .map_err(|source| InterruptError::Exec {
                command: text.clone(),
                source,
            });
        let log_field = result.as_ref().ok().and_then(|outcome| {
            self.logs.lock().expect("lock").close(
                &self.log_name(),
                &log,
                outcome.log_error.as_deref(),
            )
        });
        *self.log.lock().expect("lock") = Some(log);
        let outcome = result?;
        let succeeded = match policy {
            CompletionPolicy::OnSuccess => {
                outcome.termination == Termination::Exited(0) && !outcome.timed_out
            }
            // Exit 0 (enqueued) or killed by the shutdown: the command did its part; the boot
            // ID confirms the rest on the next run.
            CompletionPolicy::AfterReboot => {
                outcome.cancelled
                    || matches!(
                        outcome.termination,
                        Termination::Exited(0) | Termination::Signalled(libc::SIGTERM)
                    )
            }
        };
        // One result line per operation, with the same fields as a step's `step finished`.
        let usage = &outcome.usage;
        info!(
            command = %text,
            result = %outcome.termination,
            duration_ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            cpu_user_ms = usage.user_cpu_us / 1000,
            cpu_system_ms = usage.system_cpu_us / 1000,
            max_rss_kib = usage.max_rss_bytes / 1024,
            stdout_bytes = usage.stdout_bytes,
            stderr_bytes = usage.stderr_bytes,
            decision = if succeeded { "succeeded" } else { "failed" },
            "operation finished"
        );
        self.result(
            OperationResult::ran(&text, reason, &outcome, succeeded, log_field)
                .with_id(format!("{}_{index}", self.type_name)),
        );
        self.record(OperationRecord::Ran {
            command: text,
            termination: outcome.termination,
        });
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
        if let Some(log) = self.log.lock().expect("lock").take() {
            return Ok(log);
        }
        self.logs
            .lock()
            .expect("lock")
            .open(&self.settings.fs, &self.log_name(), SystemTime::now())
            .map_err(state_err("creating the interrupt log"))
    }

    /// Close the invocation's log and apply retention.
    fn finish_log(&self) -> Result<(), InterruptError> {
        if let Some(OperationLog::Open(log)) = self.log.lock().expect("lock").take() {
            let _ = log.file.sync_all();
        }
        self.logs
            .lock()
            .expect("lock")
            .prune(&self.settings.fs, &self.log_name())
            .map_err(state_err("cleaning old interrupt logs"))
    }
}

/// The logs of one interrupt run: its one log under `LOGS/<pkg>/<ver>/interrupts/`.
fn interrupt_logs(settings: &InterruptSettings, type_name: &str) -> RunLogs {
    let rel = format!("interrupts/{type_name}");
    match &settings.log_dir {
        Some(dir) => RunLogs::new(true, dir, [rel.as_str()]),
        None => RunLogs::new(false, Path::new("/"), []),
    }
}

/// Where the host's boot ID is, relative to ROOT.
pub const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// The host's boot ID (SPEC §9.4): trimmed; empty or unreadable is an error, never a
/// "changed" boot.
pub fn read_boot_id(fs: &HostFs) -> Result<String, InterruptError> {
    let err = |reason: String| InterruptError::BootId {
        path: BOOT_ID_PATH.to_owned(),
        reason,
    };
    let real = fs
        .resolve(Path::new(BOOT_ID_PATH))
        .map_err(|e| err(e.to_string()))?;
    let text = std::fs::read_to_string(&real).map_err(|e| err(e.to_string()))?;
    let id = text.trim();
    if id.is_empty() {
        return Err(err("empty".into()));
    }
    Ok(id.to_owned())
}

/// A timeout as configured (`1`, `0.5`), for `timed out after Ns`.
pub fn format_seconds(timeout: Option<Duration>) -> String {
    let secs = timeout.map_or(0.0, |t| t.as_secs_f64());
    let text = format!("{secs:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn now_stamp() -> String {
    timestamp::rfc3339_nano(SystemTime::now())
}

/// The attempt count recorded under `boot_id` in an attempts file (`boot-id:<id>` and
/// `attempts:<n>` lines): 0 if it was recorded under another boot, `None` if the text is not
/// such a record (SPEC §9.6: the caller counts that as the limit, never as 0).
pub fn parse_attempts(text: &str, boot_id: &str) -> Option<u32> {
    let mut id = None;
    let mut count = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(v) = line.strip_prefix("boot-id:") {
            if id.replace(v.trim()).is_some() {
                return None;
            }
        } else if let Some(v) = line.strip_prefix("attempts:") {
            if count.replace(v.trim().parse::<u32>().ok()?).is_some() {
                return None;
            }
        } else {
            return None;
        }
    }
    match (id.filter(|i| !i.is_empty())?, count?) {
        (id, _) if id != boot_id => Some(0),
        (_, count) => Some(count),
    }
}

/// The attempts counted under `boot_id` (0 when there is no file), or why the file cannot be
/// trusted: unreadable, or not a record [`parse_attempts`] accepts.
fn read_attempts(fs: &HostFs, file: &Path, boot_id: &str) -> Result<u32, String> {
    match fs.read(file) {
        Ok(None) => Ok(0),
        Ok(Some(bytes)) => {
            let text = String::from_utf8_lossy(&bytes);
            parse_attempts(&text, boot_id).ok_or_else(|| {
                let shown: String = text.trim().chars().take(100).collect();
                format!("not a boot-id/attempts record: {shown:?}")
            })
        }
        Err(e) => Err(crate::host::errors::Chain(&e).to_string()),
    }
}

/// Whether the command of an operation got as far as being started (so a reboot attempt was
/// made), judged from what [`InterruptContext::execute`] returned.
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

/// What an after-reboot operation does next (SPEC §9.4, §9.6), decided from its pending
/// marker, its attempt counter and the current boot ID. Shared by real runs and dry runs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RebootStep {
    /// The boot ID changed since the command ran: promote `.pending` to `.complete`.
    Promote { since: String },
    /// Run the command (again); `attempt` counts from 1 under the current boot ID.
    Reboot { attempt: u32, pending: PendingState },
    /// The loop guard: `count` reboots were already requested under this boot ID.
    Refuse { count: u32 },
}

/// The pending marker of an after-reboot operation that has not completed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PendingState {
    Absent,
    /// Written under the current boot ID: the host has not restarted yet.
    SameBoot,
    /// Not `boot-id:<id>`: replaced with a warning.
    Malformed(String),
}

fn after_reboot_step(
    pending: Option<&[u8]>,
    attempts: &Result<u32, String>,
    boot_id: &str,
    max_attempts: u32,
) -> RebootStep {
    let state = match pending {
        None => PendingState::Absent,
        Some(content) => {
            let text = String::from_utf8_lossy(content);
            match text.trim().strip_prefix("boot-id:").map(str::trim) {
                Some(b) if !b.is_empty() && b != boot_id => {
                    return RebootStep::Promote {
                        since: b.to_owned(),
                    };
                }
                Some(b) if b == boot_id => PendingState::SameBoot,
                _ => PendingState::Malformed(text.trim().to_owned()),
            }
        }
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

impl InterruptContext {
    /// A dry run of [`InterruptContext::operation`]: judge it as a real run would, read-only.
    fn plan_operation(
        &self,
        dry: &Mutex<DryRun>,
        index: usize,
        policy: CompletionPolicy,
        command: &Command,
    ) -> Result<(), InterruptError> {
        let s = &self.settings;
        let name = format!("{}_{index}", self.type_name);
        let complete_name = markers::interrupt_complete_name(self.type_name, index);
        let complete = s.markers_dir.join(&complete_name);
        let done = markers::is_done(&s.fs, &complete)
            .map_err(state_err(format!("checking {}", complete.display())))?;
        let stopped = dry.lock().expect("lock").stopped.clone();
        let (action, reason) = if done {
            (
                PlannedAction::Skip,
                format!("completion marker present ({complete_name})"),
            )
        } else if let Some(why) = stopped {
            (PlannedAction::NotReached, why)
        } else {
            match policy {
                CompletionPolicy::OnSuccess => {
                    (PlannedAction::Run, "no completion marker".to_owned())
                }
                CompletionPolicy::AfterReboot => self.plan_after_reboot(index)?,
            }
        };
        let mut dry = dry.lock().expect("lock");
        if dry.stopped.is_none() {
            dry.stopped = match (action, policy) {
                (PlannedAction::Run, CompletionPolicy::AfterReboot) => Some(format!(
                    "{name} reboots the host first; the next run after the reboot continues here"
                )),
                (PlannedAction::Fail, _) => Some(format!("the run fails at {name} first")),
                _ => None,
            };
        }
        dry.planned.push(PlannedOperation {
            operation: name,
            command: Some(command.to_string()),
            policy: Some(policy),
            action,
            reason,
        });
        Ok(())
    }

    /// SPEC §9.4, §9.6, read-only: the same decision as [`Self::run_after_reboot`].
    fn plan_after_reboot(&self, index: usize) -> Result<(PlannedAction, String), InterruptError> {
        let s = &self.settings;
        let boot_id = match self.boot_id() {
            Ok(id) => id,
            Err(e) => return Ok((PlannedAction::Fail, e.to_string())),
        };
        let pending = s
            .markers_dir
            .join(markers::interrupt_pending_name(self.type_name, index));
        let attempts = s
            .markers_dir
            .join(markers::interrupt_attempts_name(self.type_name, index));
        let previous =
            s.fs.read(&pending)
                .map_err(state_err(format!("reading {}", pending.display())))?;
        let counted = read_attempts(&s.fs, &attempts, &boot_id);
        let max = s.reboot_max_attempts;
        Ok(
            match after_reboot_step(previous.as_deref(), &counted, &boot_id, max) {
                RebootStep::Refuse { .. } if counted.is_err() => (
                    PlannedAction::Fail,
                    format!(
                        "loop guard would refuse: {} cannot be read ({}), which counts as \
                         SKYHOOK_REBOOT_MAX_ATTEMPTS={max}",
                        attempts.display(),
                        counted.as_ref().err().map_or("", String::as_str)
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
                RebootStep::Reboot {
                    attempt,
                    pending: PendingState::SameBoot,
                } => (
                    PlannedAction::Run,
                    format!(
                        "reboot again (attempt {attempt} of {max}): pending with boot ID \
                         {boot_id}, the current boot ID, so the host has not restarted"
                    ),
                ),
                RebootStep::Reboot {
                    attempt,
                    pending: PendingState::Malformed(content),
                } => (
                    PlannedAction::Run,
                    format!(
                        "reboot (attempt {attempt} of {max}): the pending marker is malformed \
                         ({content:?}) and would be replaced; boot ID {boot_id}"
                    ),
                ),
                RebootStep::Reboot {
                    attempt,
                    pending: PendingState::Absent,
                } => (
                    PlannedAction::Run,
                    format!(
                        "no completion marker; reboot (attempt {attempt} of {max}) under boot \
                         ID {boot_id}"
                    ),
                ),
            },
        )
    }
}

/// Dry-run `interrupt`: the kind builds its operations as in a real run, and each is judged
/// against the markers, the pending marker and the boot ID without running or writing
/// anything. Returns the operations in order, and the kind's own error if it gave up.
pub async fn plan_interrupt(
    settings: InterruptSettings,
    interrupt: &dyn Interrupt,
) -> (Vec<PlannedOperation>, Result<(), InterruptError>) {
    if let Err(e) = validate(interrupt) {
        return (Vec::new(), Err(e));
    }
    let cx = InterruptContext::dry_run(settings, interrupt.type_name());
    let result = interrupt.run_operations(&cx).await;
    (cx.planned(), result)
}

/// The kind's own check of its fields, as `invalid <type> interrupt: ...`.
fn validate(interrupt: &dyn Interrupt) -> Result<(), InterruptError> {
    interrupt
        .validate_payload()
        .map_err(|error| InterruptError::Invalid {
            type_name: interrupt.type_name(),
            error,
        })
}

/// How an interrupt run ended, when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterruptOutcome {
    Completed,
    /// An after-reboot operation saw the shutdown it asked for.
    ShutdownInProgress,
}

/// Run `interrupt` with the marker protocol. Returns the outcome and what each operation did.
///
/// # Errors
/// The first failed operation, or a host state error.
pub async fn run_interrupt(
    settings: InterruptSettings,
    interrupt: &dyn Interrupt,
) -> (
    Result<InterruptOutcome, InterruptError>,
    Vec<OperationRecord>,
) {
    let (result, records, _) = run_interrupt_with_results(settings, interrupt).await;
    (result, records)
}

/// [`run_interrupt_with_results`], also returning what the run counted (for metrics).
pub async fn run_interrupt_tallied(
    settings: InterruptSettings,
    interrupt: &dyn Interrupt,
) -> (
    Result<InterruptOutcome, InterruptError>,
    Vec<OperationResult>,
    InterruptTally,
) {
    let mut tally = InterruptTally::default();
    let (result, _, results) = run_interrupt_inner(settings, interrupt, &mut tally).await;
    (result, results, tally)
}

/// [`run_interrupt`], also returning the detailed results of each operation.
pub async fn run_interrupt_with_results(
    settings: InterruptSettings,
    interrupt: &dyn Interrupt,
) -> (
    Result<InterruptOutcome, InterruptError>,
    Vec<OperationRecord>,
    Vec<OperationResult>,
) {
    run_interrupt_inner(settings, interrupt, &mut InterruptTally::default()).await
}

async fn run_interrupt_inner(
    settings: InterruptSettings,
    interrupt: &dyn Interrupt,
    tally: &mut InterruptTally,
) -> (
    Result<InterruptOutcome, InterruptError>,
    Vec<OperationRecord>,
    Vec<OperationResult>,
) {
    // Before anything is touched; kinds rely on it instead of checking again in `run`.
    if let Err(e) = validate(interrupt) {
        return (Err(e), Vec::new(), Vec::new());
    }
    // SPEC §5: temp files a killed run left behind, once no live writer can own them.
    settings.fs.clean_stale_temps(&settings.markers_dir);
    let cx = InterruptContext::new(settings, interrupt.type_name());
    let result = interrupt.run_operations(&cx).await;
    let shutdown = cx.shutdown_in_progress();
    let finished = cx.finish_log();
    let records = cx.records();
    let results = cx.results();
    *tally = cx.tally();
    let result = match (result, shutdown) {
        (_, true) => Ok(InterruptOutcome::ShutdownInProgress),
        (Ok(()), false) => finished.map(|()| InterruptOutcome::Completed),
        (Err(e), false) => Err(e),
    };
    (result, records, results)
}

#[cfg(test)]
mod tests;
