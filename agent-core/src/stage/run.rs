//! Running one stage of a package (SPEC §8): START, which steps run, execution, markers,
//! check results and history.
//!
//! The stage is one `walk` over its effects (`Effects`): a run performs them on the host
//! (`Host`); `agent plan` records them (`stage::plan`), so a plan is the run with its effects
//! recorded instead of performed.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use tracing::{debug, info, warn};

use crate::exec::operation::{self, Subject};
use crate::exec::{self, ExecError, FirstSignal, ProcessSpec, Termination};
use crate::host::boot::read_boot_id;
use crate::host::errors::Chain;
use crate::host::fs::{HostFs, HostFsError, Links, Missing, StateFailure, state_err};
use crate::host::phases::{self, Phase};
use crate::host::runtime::Runtime;
use crate::package::config::PackageConfig;
use crate::package::step::{Mode, Step};
use crate::stage::decide::{Decision, PlannedAction, StepPaths, arguments, decide};
use crate::state::flags::{self as state_flags, CheckResult};
use crate::state::history::{self, UNKNOWN_VERSION};
use crate::state::locks::{self, LockError};
use crate::state::logs::InvocationLogs;
use crate::state::markers::StepMarkers;
use crate::state::results::OperationResult;

/// Everything a stage run needs from its caller.
#[derive(Debug, Clone, Copy)]
pub struct StageContext<'a> {
    pub fs: &'a HostFs,
    pub runtime: &'a Runtime,
    pub exec: &'a exec::Config,
    /// COPY_DIR, host-absolute.
    pub copy_dir: &'a Path,
    /// The agent's own environment, the base of every step's environment.
    pub base_env: &'a [(OsString, OsString)],
}

/// Why a stage failed. Displayed after `agent execution failed: `.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("running step {path:?}: expected environment variables do not exist: {}", missing.join(", "))]
    MissingEnv { path: String, missing: Vec<String> },
    #[error("running step {path:?}: {termination} is not an accepted return code {accepted}")]
    StepFailed {
        path: String,
        termination: Termination,
        accepted: String,
    },
    #[error("running step {path:?}: timed out after {seconds}s")]
    TimedOut { path: String, seconds: String },
    #[error("{mode} failed: {failed} of {total} checks did not pass: {}", paths.join(", "))]
    ChecksFailed {
        mode: Mode,
        failed: usize,
        total: usize,
        paths: Vec<String>,
    },
    #[error("agent stopped after receiving a termination signal")]
    Stopped,
    #[error("running step {path:?}: step file {file} is not a regular file")]
    StepFile { path: String, file: String },
    /// The step file cannot be reached inside ROOT (a link out of it, a cycle).
    #[error("running step {path:?}: step file {file}")]
    StepFileLookup {
        path: String,
        file: String,
        #[source]
        source: HostFsError,
    },
    #[error("running step {path:?}")]
    Exec {
        path: String,
        #[source]
        source: ExecError,
    },
    #[error("running step {path:?}: {context}")]
    StepIo {
        path: String,
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// Host state could not be read or written.
    #[error(transparent)]
    State(#[from] StateFailure),
    #[error("writing check_results")]
    CheckLock(#[source] LockError),
}

/// Run `mode` of `config`. `Ok(())` means exit 0.
///
/// Every step considered is appended to `report` (for the results record, SPEC §8.12), also
/// when the stage fails.
pub async fn run_stage(
    cx: &StageContext<'_>,
    config: &PackageConfig,
    mode: Mode,
    report: &mut Vec<OperationResult>,
) -> Result<(), StageError> {
    let rt = cx.runtime;
    let steps = config.steps(mode);
    // One result per step: sized once, not doubled as it grows (a large package's record
    // would otherwise hold up to twice the room it needs, and both copies while it grows).
    report.reserve_exact(steps.len());
    // SPEC §8.10: each log directory is read once for the whole stage.
    let log_dir = rt.package_log_dir(&config.package_name, &config.package_version);
    let paths = steps.iter().map(|step| step.path.as_str());
    let logs = InvocationLogs::new(rt.write_logs, &log_dir, paths);
    release_free_memory();
    let stage = Stage {
        fs: cx.fs,
        rt,
        env: cx.base_env,
        config,
        mode,
    };
    walk(&stage, &mut Host { cx: *cx, logs }, report).await
}

/// What a stage walks over: the package, the stage, and where it runs.
pub(crate) struct Stage<'a> {
    pub fs: &'a HostFs,
    pub rt: &'a Runtime,
    /// The agent's own environment, the base of every step's environment.
    pub env: &'a [(OsString, OsString)],
    pub config: &'a PackageConfig,
    pub mode: Mode,
}

/// One step, decided.
pub(crate) struct At<'a> {
    pub mode: Mode,
    pub step: &'a Step,
    pub markers: &'a StepMarkers,
    pub decision: Decision,
    /// `[previous, current]` in upgrade stages.
    pub versions: Option<&'a [String; 2]>,
}

impl At<'_> {
    /// The step's execution header (SPEC §8.3).
    pub fn header(&self) -> String {
        let upgrade = self.versions.filter(|_| self.step.upgrade_step);
        self.step.header(self.mode, upgrade)
    }
}

/// How a plan lists a change of the host's state.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Listed {
    /// Where the walk makes it, on a condition (`None`: always).
    Here(Option<&'static str>),
    /// Once, with the writes that close a check stage, after every step's.
    Closing(Option<&'static str>),
}

/// SPEC §8.1: a stage with no steps.
const NO_STEPS: &str = "stage has no configured steps; treating it as a no-op";

/// `<MODE>_ALL_CHECKED`: removed when a check stage starts, written when it ends.
const ALL_CHECKED: Listed =
    Listed::Closing(Some("removed if stale, written if every check passes"));

/// The effects of a stage as [`walk`] asks for them: a run performs them on the host
/// ([`Host`]); a plan records them (`stage::plan`). A provided method is what the side with
/// nothing of its own to do does: the run's log and failures; the plan's steps, which never
/// run, never stop and take no lock.
pub(crate) trait Effects {
    /// SPEC §10: a stop was requested; nothing more starts.
    fn stopping(&self) -> bool {
        false
    }
    /// Change the host's state by `perform`; a plan lists `paths` as `listed` says.
    fn change<'p>(
        &mut self,
        paths: impl IntoIterator<Item = &'p Path>,
        listed: Listed,
        perform: impl FnOnce(&HostFs) -> StateResult,
    ) -> StateResult;
    /// Something the run warns about.
    fn note(&mut self, mode: Mode, note: &str) {
        warn!(mode = %mode, "{note}");
    }
    /// SPEC §8.9: the current version in the history file `file`.
    fn previous_version(&mut self, file: &Path) -> Result<Option<String>, StateFailure>;
    /// A step is decided (SPEC §8.2); whether the walk gets to it at all.
    fn decided(&mut self, at: &At<'_>) -> Result<bool, StateFailure> {
        let (path, decision) = (&at.step.path, at.decision);
        debug!(
            path = %path,
            decision = if decision.runs() { "run" } else { "skip" },
            reason = decision.reason(),
            marker = %at.markers.native.display(),
            "step decision"
        );
        match decision {
            Decision::SkipCompleted => info!(path = %path, "skipping completed step"),
            Decision::AlwaysRunPolicy => {
                warn!(path = %path, "running completed step because always-run policy is enabled");
            }
            _ => {}
        }
        Ok(true)
    }
    /// A check failed with `error`; the check stage goes on.
    fn check_failed(&self, step: &Step, error: &StageError) {
        warn!(path = %step.path, error = %Chain(error), "check failed");
    }
    /// What becomes of a step, and why.
    fn step(&mut self, at: &At<'_>, action: PlannedAction, reason: &str) -> StateResult;
    /// Execute and judge a step with its resolved `arguments` (SPEC §8.4–§8.6).
    async fn execute(
        &mut self,
        _at: &At<'_>,
        _arguments: Vec<String>,
        _report: &mut Vec<OperationResult>,
    ) -> Result<(), StageError> {
        Ok(())
    }
    /// A step that ran is settled, its markers written if it succeeded (SPEC §8.10).
    fn settled(&mut self, step: &Step) -> StateResult;
    /// The stage fails with `error`.
    fn failed(&mut self, error: StageError) -> Result<(), StageError> {
        Err(error)
    }
    /// SPEC §8.8: the STATE-wide lock of `check_results` and ALL_CHECKED.
    async fn check_lock(&mut self) -> Result<Option<locks::Lock>, StageError> {
        Ok(None)
    }
}

/// A change of host state, done or failed.
pub(crate) type StateResult = Result<(), StateFailure>;

/// `map_err` of a host state error about `what` of `step`.
pub(crate) fn step_err(what: &str, step: &Step) -> impl FnOnce(HostFsError) -> StateFailure {
    state_err(format!("{what} of step {:?}", step.path))
}

/// One stage (SPEC §8): START, which steps run, execution, markers, check results and
/// history, its effects through `e`. Every step considered is appended to `report`.
pub(crate) async fn walk(
    s: &Stage<'_>,
    e: &mut impl Effects,
    report: &mut Vec<OperationResult>,
) -> Result<(), StageError> {
    let (fs, rt, mode) = (s.fs, s.rt, s.mode);
    let versions = begin(s, e)?;
    let steps = s.config.steps(mode);
    if steps.is_empty() {
        e.note(mode, NO_STEPS);
        return finish_checks(s, e, &[]).await;
    }
    let flags_dir = rt.package_flags_dir(&s.config.package_name, &s.config.package_version);
    let mut check_results: Vec<CheckResult> = Vec::new();
    for step in steps {
        if e.stopping() {
            return Err(StageError::Stopped);
        }
        let markers = StepMarkers::new(&flags_dir, step);
        // SPEC §8.2: check stages run every step without reading markers.
        let completed = phases::time(Phase::Decide, || {
            Ok(!mode.is_check() && markers.completed(fs)?)
        })
        .map_err(step_err("checking the markers", step))?;
        let decision = decide(mode, step, completed, rt.always_run_step);
        let at = At {
            mode,
            step,
            markers: &markers,
            decision,
            versions: versions.as_ref(),
        };
        if !e.decided(&at)? {
            continue;
        }
        if !decision.runs() {
            e.step(&at, PlannedAction::Skip, decision.reason())?;
            e.change([], Listed::Here(None), |fs| {
                phases::time(Phase::Markers, || markers.complete_pair(fs))
                    .map_err(step_err("writing the markers", step))
            })?;
            report.push(OperationResult::skipped(&step.path, decision.reason()));
            continue;
        }

        // SPEC §8.5: `env:NAME` arguments come from the agent's environment; every missing
        // name is reported before failing. SPEC §8.9: upgrade steps get `[previous, current]`.
        let resolved = arguments(step, s.env, at.versions);
        let failure = if resolved.missing.is_empty() {
            e.step(&at, PlannedAction::Run, decision.reason())?;
            match e.execute(&at, resolved.values, report).await {
                Ok(()) => None,
                Err(err @ (StageError::StepFailed { .. } | StageError::TimedOut { .. })) => {
                    Some(err)
                }
                Err(err) => return Err(err),
            }
        } else {
            let missing = resolved.missing.join(", ");
            let why = format!("expected environment variables do not exist: {missing}");
            e.step(&at, PlannedAction::Fail, &why)?;
            let why = format!("missing environment variables: {missing}");
            report.push(OperationResult::not_started(&step.path, why));
            Some(StageError::MissingEnv {
                path: step.path.clone(),
                missing: resolved.missing,
            })
        };
        if mode.is_check() {
            if let Some(err) = &failure {
                e.check_failed(step, err);
            }
            check_results.push(CheckResult {
                path: step.path.clone(),
                passed: failure.is_none(),
            });
        } else if failure.is_none() {
            // SPEC §8.7: markers before log retention, so a cleanup failure never loses a
            // completion.
            let paths = markers.legacy.iter().chain([&markers.native]);
            let listed = Listed::Here(Some("if the step succeeds"));
            e.change(paths.map(PathBuf::as_path), listed, |fs| {
                phases::time(Phase::Markers, || {
                    markers.write(fs, step, SystemTime::now())
                })
                .map_err(step_err("writing the markers", step))
            })?;
        }
        e.settled(step)?;
        // SPEC §10: the interrupted step was judged above; nothing more starts.
        if e.stopping() {
            if let Some(err) = &failure {
                warn!(path = %step.path, error = %Chain(err), "step failed");
            }
            return Err(StageError::Stopped);
        }
        if let Some(err) = failure.filter(|_| !mode.is_check()) {
            e.failed(err)?;
        }
    }
    finish_checks(s, e, &check_results).await
}

/// What every stage starts with: START (SPEC §8.1), stale temp files cleaned, a stale
/// `<MODE>_ALL_CHECKED` removed, and the versions of an upgrade (SPEC §8.9).
fn begin(s: &Stage<'_>, e: &mut impl Effects) -> Result<Option<[String; 2]>, StageError> {
    let (rt, config, mode) = (s.rt, s.config, s.mode);
    let flags = rt.flags_dir();
    let start = state_flags::start_path(&flags);
    e.change([start.as_path()], Listed::Here(None), |fs| {
        state_flags::write_start(fs, &flags).map_err(state_err("writing START"))?;
        // SPEC §5: temp files of writes a killed run left behind are cleaned once they are
        // old enough that no live writer can own them (best effort), in every directory
        // this stage writes state into. Results are cleaned by their writer, interrupt
        // markers by theirs.
        let package_flags = rt.package_flags_dir(&config.package_name, &config.package_version);
        let history = rt.history_file(&config.package_name);
        let mut dirs = BTreeSet::from([
            flags.clone(),
            package_flags.clone(),
            history.parent().map(Path::to_path_buf).unwrap_or_default(),
        ]);
        if !mode.is_check() {
            // Steps in subdirectories, and the `/` of standard base64, nest legacy markers.
            for step in config.steps(mode) {
                let markers = StepMarkers::new(&package_flags, step);
                if let Some(parent) = markers.legacy.as_deref().and_then(Path::parent) {
                    dirs.insert(parent.to_path_buf());
                }
            }
        }
        for dir in &dirs {
            fs.clean_stale_temps(dir);
        }
        Ok(())
    })?;
    if mode.is_check() {
        remove_all_checked(e, &flags, mode, "removing stale")?;
    }
    if !mode.is_upgrade() {
        return Ok(None);
    }
    let previous = e
        .previous_version(&rt.history_file(&config.package_name))?
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| UNKNOWN_VERSION.to_owned());
    Ok(Some([previous, config.package_version.clone()]))
}

fn remove_all_checked(e: &mut impl Effects, flags: &Path, mode: Mode, doing: &str) -> StateResult {
    let path = state_flags::all_checked_path(flags, mode.as_str());
    e.change([path.as_path()], ALL_CHECKED, |fs| {
        state_flags::remove_all_checked(fs, flags, mode.as_str())
            .map(drop)
            .map_err(state_err(format!("{doing} {}", path.display())))
    })
}

/// Give the memory freed since start-up back to the system before the steps run: the parse
/// tree of a large package config, freed but still resident, would otherwise stay in the
/// agent's resident memory (what the pod's memory accounting sees) for the whole stage.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// SPEC §8.8–§8.9: check results, history, uninstall cleanup, then `<MODE>_ALL_CHECKED` last,
/// so it never stands beside a failed exit. `check_results` and ALL_CHECKED are written under
/// one STATE-wide lock, so the pair always comes from one package's run.
async fn finish_checks(
    s: &Stage<'_>,
    e: &mut impl Effects,
    results: &[CheckResult],
) -> Result<(), StageError> {
    let (rt, config, mode) = (s.rt, s.config, s.mode);
    if !mode.is_check() {
        return Ok(());
    }
    let flags = rt.flags_dir();
    // Zero steps: no pair to write, only the history record (SPEC §8.1).
    let _lock = if results.is_empty() {
        None
    } else {
        let lock = e.check_lock().await?;
        let path = state_flags::check_results_path(&flags);
        e.change([path.as_path()], Listed::Closing(None), |fs| {
            state_flags::write_check_results(fs, &flags, results)
                .map_err(state_err("writing check_results"))
        })?;
        let failed: Vec<String> = results
            .iter()
            .filter(|r| !r.passed)
            .map(|r| r.path.clone())
            .collect();
        if !failed.is_empty() {
            // Another package's check stage may have passed since this one started; its
            // ALL_CHECKED must not stand beside these results.
            remove_all_checked(e, &flags, mode, "removing")?;
            e.failed(StageError::ChecksFailed {
                mode,
                failed: failed.len(),
                total: results.len(),
                paths: failed,
            })?;
        }
        lock
    };
    let recorded = match mode {
        Mode::ApplyCheck | Mode::UpgradeCheck => Some(config.package_version.as_str()),
        Mode::UninstallCheck => Some("uninstalled"),
        _ => None,
    };
    if let Some(version) = recorded {
        let file = rt.history_file(&config.package_name);
        let listed = Listed::Closing(Some("if every check passes"));
        e.change([file.as_path()], listed, |fs| {
            history::record(fs, &file, version, SystemTime::now())
                .map_err(state_err("recording history"))
        })?;
    }
    if mode == Mode::UninstallCheck {
        let flags_dir = rt.package_flags_dir(&config.package_name, &config.package_version);
        let listed = Listed::Closing(Some("every step marker removed if every check passes"));
        e.change([flags_dir.as_path()], listed, |fs| {
            for step in config.modes.values().flatten() {
                let markers = StepMarkers::new(&flags_dir, step);
                markers
                    .remove(fs)
                    .map_err(step_err("removing the markers", step))?;
            }
            Ok(())
        })?;
    }
    if !results.is_empty() {
        let path = state_flags::all_checked_path(&flags, mode.as_str());
        e.change([path.as_path()], ALL_CHECKED, |fs| {
            state_flags::write_all_checked(fs, &flags, mode.as_str())
                .map_err(state_err(format!("writing {mode}_ALL_CHECKED")))
        })?;
    }
    Ok(())
}

/// The effects of a stage run, performed on the host.
struct Host<'c> {
    cx: StageContext<'c>,
    logs: InvocationLogs,
}

impl Effects for Host<'_> {
    fn stopping(&self) -> bool {
        self.cx.exec.cancel.is_stopping()
    }

    fn change<'p>(
        &mut self,
        _paths: impl IntoIterator<Item = &'p Path>,
        _listed: Listed,
        perform: impl FnOnce(&HostFs) -> StateResult,
    ) -> StateResult {
        perform(self.cx.fs)
    }

    /// A corrupt history file is moved aside.
    fn previous_version(&mut self, file: &Path) -> Result<Option<String>, StateFailure> {
        history::current_version(self.cx.fs, file).map_err(state_err("reading history"))
    }

    fn step(&mut self, at: &At<'_>, action: PlannedAction, _: &str) -> StateResult {
        if action != PlannedAction::Skip {
            self.cx.exec.output.print(&format!("{}\n", at.header()));
        }
        Ok(())
    }

    /// Resolve, execute and judge one step (SPEC §8.4–§8.6).
    async fn execute(
        &mut self,
        at: &At<'_>,
        arguments: Vec<String>,
        report: &mut Vec<OperationResult>,
    ) -> Result<(), StageError> {
        let (cx, step) = (self.cx, at.step);
        let fs = cx.fs;
        let paths = StepPaths::new(fs.root(), cx.copy_dir, step);
        let step_file = cx.copy_dir.join("skyhook_dir").join(&step.path);
        make_executable(fs, step, &step_file, &paths.file)?;

        let mut env: Vec<(OsString, OsString)> = cx.base_env.to_vec();
        for (k, v) in paths.env_overrides(step, at.versions) {
            env.retain(|(name, _)| name.as_os_str() != k.as_str());
            env.push((k.into(), v));
        }

        let spec = ProcessSpec {
            program: paths.program,
            args: arguments,
            env,
            cwd: paths.cwd,
            chroot: paths.chroot,
            first_signal: FirstSignal::Finish,
        };
        // SPEC §8.10: only a refused log path stops the stage; a log that cannot be created or
        // written leaves the step running without one.
        let mut log = phases::time(Phase::Log, || {
            self.logs.open(fs, &step.path, SystemTime::now())
        })
        .map_err(step_err("creating the log", step))?;
        let subject = Subject::Step {
            mode: at.mode.as_str(),
            path: &step.path,
        };
        let running =
            operation::supervise(cx.exec, &spec, log.file(), cx.runtime.heartbeat, subject);
        let outcome = match running.await {
            Ok(outcome) => outcome,
            Err(source) => {
                // A step that could not be started failed all the same (the run's counts).
                report.push(OperationResult::not_started(
                    &step.path,
                    format!("not started: {}", Chain(&source)),
                ));
                return Err(StageError::Exec {
                    path: step.path.clone(),
                    source,
                });
            }
        };
        // The log is diagnostic output, not state (SPEC §5): it is not fsynced, so a step pays
        // only for the journal commits its two markers need.
        let log_field = phases::time(Phase::Log, || {
            let field = self
                .logs
                .close(&step.path, &log, outcome.log_error.as_deref());
            drop(log);
            field
        });

        let accepted = matches!(outcome.termination, Termination::Exited(code) if step.returncodes.contains(&i64::from(code)));
        let succeeded = accepted && !outcome.timed_out;
        operation::finished(subject, &outcome, succeeded);
        let accepted = crate::compat::pyrepr::repr_int_list(&step.returncodes);
        report.push(
            OperationResult::ran(
                &step.path,
                at.decision.reason(),
                &outcome,
                succeeded,
                log_field,
            )
            .with_accepted(&accepted),
        );
        if outcome.timed_out {
            return Err(StageError::TimedOut {
                path: step.path.clone(),
                seconds: crate::host::runtime::format_seconds(cx.exec.timeout),
            });
        }
        if !succeeded {
            return Err(StageError::StepFailed {
                path: step.path.clone(),
                termination: outcome.termination,
                accepted,
            });
        }
        Ok(())
    }

    fn settled(&mut self, step: &Step) -> StateResult {
        let fs = self.cx.fs;
        phases::time(Phase::Log, || self.logs.prune(fs, &step.path))
            .map_err(step_err("cleaning old logs", step))
    }

    async fn check_lock(&mut self) -> Result<Option<locks::Lock>, StageError> {
        let (fs, rt) = (self.cx.fs, self.cx.runtime);
        let lock = locks::acquire(
            fs,
            &state_flags::check_results_lock_path(&rt.state_dir),
            read_boot_id(fs).ok().as_deref(),
            &self.cx.exec.cancel.stop,
        )
        .await;
        lock.map(Some).map_err(|e| match e {
            LockError::Stopped => StageError::Stopped,
            e => StageError::CheckLock(e),
        })
    }
}

/// SPEC §8.4: add u+x,g+x,o+x without clearing other bits; never add special bits.
///
/// The step file is package data and may be a link (SPEC §7), but the agent's own change to
/// it must land inside ROOT (SPEC §5), on the file the step will run: the file at `host_file`
/// is reached through the rooted lookup and changed through its descriptor, never through a
/// path resolved again. Errors name it by `real`, its path under ROOT.
fn make_executable(
    fs: &HostFs,
    step: &Step,
    host_file: &Path,
    real: &Path,
) -> Result<(), StageError> {
    // SPEC §5, §7: a step run on the host finds its file as the host does; one run in the
    // agent's view finds it through that view, where only relative links mean the same.
    let links = if step.on_host {
        Links::InRoot
    } else {
        Links::Relative
    };
    let (path, file) = (&step.path, real.display());
    let io = |source| StageError::StepIo {
        path: path.clone(),
        context: format!("making {file} executable"),
        source,
    };
    let lookup = |e| match e {
        HostFsError::NotARegularFile { .. } => StageError::StepFile {
            path: path.clone(),
            file: file.to_string(),
        },
        HostFsError::Io { source, .. } => io(source),
        // The rooted lookup refused the path (a link out of ROOT, a cycle, a file on the way).
        source => StageError::StepFileLookup {
            path: path.clone(),
            file: file.to_string(),
            source,
        },
    };
    let not_found = || io(std::io::Error::from_raw_os_error(libc::ENOENT));
    let found = fs
        .locate(host_file, links, Missing::Stop)
        .map_err(lookup)?
        .ok_or_else(not_found)?;
    let file = found.open_file().map_err(lookup)?.ok_or_else(not_found)?;
    let mode = file.metadata().map_err(io)?.permissions().mode() & 0o7777;
    if mode & 0o111 != 0o111 {
        file.set_permissions(std::fs::Permissions::from_mode(mode | 0o111))
            .map_err(io)?;
    }
    Ok(())
}
