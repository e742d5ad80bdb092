//! Running one stage of a package (SPEC §8): START, which steps run, execution, markers,
//! check results and history.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::SystemTime;

use tracing::{debug, info, warn};

use crate::exec::operation::{self, Subject};
use crate::exec::{self, ExecError, FirstSignal, ProcessSpec, Status, Termination};
use crate::host::boot::read_boot_id;
use crate::host::errors::Chain;
use crate::host::fs::{HostFs, HostFsError, Links, Missing, StateFailure, state_err};
use crate::host::phases::{self, Phase};
use crate::host::runtime::Runtime;
use crate::package::config::PackageConfig;
use crate::package::step::{Mode, Step};
use crate::stage::decide::{Decision, StepPaths, arguments, decide_step};
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
    let fs = cx.fs;
    let flags = rt.flags_dir();
    // SPEC §8.1: START at the beginning of every stage run.
    state_flags::write_start(fs, &flags).map_err(state_err("writing START"))?;
    // SPEC §5: temp files of writes a killed run left behind are cleaned once they are old
    // enough that no live writer can own them (best effort), in every directory this stage
    // writes state into. Results are cleaned by their writer, interrupt markers by theirs.
    let package_flags = rt.package_flags_dir(&config.package_name, &config.package_version);
    let mut dirs = BTreeSet::from([
        flags.clone(),
        package_flags.clone(),
        rt.history_file(&config.package_name)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
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

    if mode.is_check() {
        state_flags::remove_all_checked(fs, &flags, mode.as_str()).map_err(state_err(format!(
            "removing stale {}",
            state_flags::all_checked_path(&flags, mode.as_str()).display()
        )))?;
    }

    let steps = config.steps(mode);
    let versions = if mode.is_upgrade() {
        let previous = history::current_version(fs, &rt.history_file(&config.package_name))
            .map_err(state_err("reading history"))?
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| UNKNOWN_VERSION.to_owned());
        Some([previous, config.package_version.clone()])
    } else {
        None
    };

    if steps.is_empty() {
        warn!(mode = %mode, "stage has no configured steps; treating it as a no-op");
        return finish_checks(cx, config, mode, &[]).await;
    }

    let flags_dir = rt.package_flags_dir(&config.package_name, &config.package_version);
    // SPEC §8.10: each log directory is read once for the whole stage.
    let mut logs = InvocationLogs::new(
        rt.write_logs,
        &rt.package_log_dir(&config.package_name, &config.package_version),
        steps.iter().map(|step| step.path.as_str()),
    );
    let mut check_results: Vec<CheckResult> = Vec::new();
    // One result per step: sized once, not doubled as it grows (a large package's record
    // would otherwise hold up to twice the room it needs, and both copies while it grows).
    report.reserve_exact(steps.len());
    release_free_memory();

    for step in steps {
        if cx.exec.cancel.is_stopping() {
            return Err(StageError::Stopped);
        }
        let step_markers = StepMarkers::new(&flags_dir, step);
        let decision = phases::time(Phase::Decide, || {
            decide_step(fs, mode, step, &step_markers, rt.always_run_step)
        })
        .map_err(state_err(format!(
            "checking the markers of step {:?}",
            step.path
        )))?;
        debug!(
            path = %step.path,
            decision = if decision.runs() { "run" } else { "skip" },
            reason = decision.reason(),
            marker = %step_markers.native.display(),
            "step decision"
        );
        match decision {
            Decision::SkipCompleted => {
                info!(path = %step.path, "skipping completed step");
                phases::time(Phase::Markers, || step_markers.complete_pair(fs)).map_err(
                    state_err(format!("writing the markers of step {:?}", step.path)),
                )?;
                report.push(OperationResult::skipped(&step.path, decision.reason()));
                continue;
            }
            Decision::AlwaysRunPolicy => {
                warn!(path = %step.path, "running completed step because always-run policy is enabled");
            }
            _ => {}
        }

        let upgrade_args = if step.upgrade_step {
            versions.as_ref()
        } else {
            None
        };
        cx.exec
            .output
            .print(&format!("{}\n", step.header(mode, upgrade_args)));

        let failure = match run_step(
            cx,
            mode,
            step,
            versions.as_ref(),
            &mut logs,
            decision,
            report,
        )
        .await
        {
            Ok(()) => None,
            Err(
                e @ (StageError::StepFailed { .. }
                | StageError::TimedOut { .. }
                | StageError::MissingEnv { .. }),
            ) => Some(e),
            Err(e) => return Err(e),
        };
        if mode.is_check() {
            if let Some(e) = &failure {
                warn!(path = %step.path, error = %Chain(e), "check failed");
            }
            check_results.push(CheckResult {
                path: step.path.clone(),
                passed: failure.is_none(),
            });
        } else if failure.is_none() {
            // SPEC §8.7: markers before log retention, so a cleanup failure never loses a
            // completion.
            phases::time(Phase::Markers, || {
                step_markers.write(fs, step, SystemTime::now())
            })
            .map_err(state_err(format!(
                "writing the markers of step {:?}",
                step.path
            )))?;
        }
        phases::time(Phase::Log, || logs.prune(fs, &step.path)).map_err(state_err(format!(
            "cleaning old logs of step {:?}",
            step.path
        )))?;
        // SPEC §10: the interrupted step was judged above; nothing more starts.
        if cx.exec.cancel.is_stopping() {
            if let Some(e) = &failure {
                warn!(path = %step.path, error = %Chain(e), "step failed");
            }
            return Err(StageError::Stopped);
        }
        if let Some(e) = failure {
            if !mode.is_check() {
                return Err(e);
            }
        }
    }
    finish_checks(cx, config, mode, &check_results).await
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
    cx: &StageContext<'_>,
    config: &PackageConfig,
    mode: Mode,
    results: &[CheckResult],
) -> Result<(), StageError> {
    if !mode.is_check() {
        return Ok(());
    }
    let fs = cx.fs;
    let rt = cx.runtime;
    let flags = rt.flags_dir();
    // Zero steps: no pair to write, only the history record (SPEC §8.1).
    let _lock = if results.is_empty() {
        None
    } else {
        let lock = locks::acquire(
            fs,
            &state_flags::check_results_lock_path(&rt.state_dir),
            read_boot_id(fs).ok().as_deref(),
            &cx.exec.cancel.stop,
        )
        .await
        .map_err(|e| match e {
            LockError::Stopped => StageError::Stopped,
            e => StageError::CheckLock(e),
        })?;
        state_flags::write_check_results(fs, &flags, results)
            .map_err(state_err("writing check_results"))?;
        let failed: Vec<String> = results
            .iter()
            .filter(|r| !r.passed)
            .map(|r| r.path.clone())
            .collect();
        if !failed.is_empty() {
            // Another package's check stage may have passed since this one started; its
            // ALL_CHECKED must not stand beside these results.
            state_flags::remove_all_checked(fs, &flags, mode.as_str()).map_err(state_err(
                format!(
                    "removing {}",
                    state_flags::all_checked_path(&flags, mode.as_str()).display()
                ),
            ))?;
            return Err(StageError::ChecksFailed {
                mode,
                failed: failed.len(),
                total: results.len(),
                paths: failed,
            });
        }
        Some(lock)
    };
    let recorded = match mode {
        Mode::ApplyCheck | Mode::UpgradeCheck => Some(config.package_version.as_str()),
        Mode::UninstallCheck => Some("uninstalled"),
        _ => None,
    };
    if let Some(version) = recorded {
        history::record(
            fs,
            &rt.history_file(&config.package_name),
            version,
            SystemTime::now(),
        )
        .map_err(state_err("recording history"))?;
    }
    if mode == Mode::UninstallCheck {
        let flags_dir = rt.package_flags_dir(&config.package_name, &config.package_version);
        for step in config.modes.values().flatten() {
            StepMarkers::new(&flags_dir, step)
                .remove(fs)
                .map_err(state_err(format!(
                    "removing the markers of step {:?}",
                    step.path
                )))?;
        }
    }
    if !results.is_empty() {
        state_flags::write_all_checked(fs, &flags, mode.as_str())
            .map_err(state_err(format!("writing {mode}_ALL_CHECKED")))?;
    }
    Ok(())
}

/// Resolve, execute and judge one step (SPEC §8.4–§8.6).
async fn run_step(
    cx: &StageContext<'_>,
    mode: Mode,
    step: &Step,
    versions: Option<&[String; 2]>,
    logs: &mut InvocationLogs,
    decision: Decision,
    report: &mut Vec<OperationResult>,
) -> Result<(), StageError> {
    let fs = cx.fs;
    let root = fs.root();

    // SPEC §8.5: `env:NAME` arguments come from the agent's environment; every missing
    // name is reported before failing. SPEC §8.9: upgrade steps get `[previous, current]`.
    let resolved = arguments(step, cx.base_env, versions);
    if !resolved.missing.is_empty() {
        report.push(OperationResult::not_started(
            &step.path,
            format!(
                "missing environment variables: {}",
                resolved.missing.join(", ")
            ),
        ));
        return Err(StageError::MissingEnv {
            path: step.path.clone(),
            missing: resolved.missing,
        });
    }
    let paths = StepPaths::new(root, cx.copy_dir, step);
    let step_file_real = &paths.file;

    // SPEC §5, §7: a step run on the host finds its file as the host does; one run in the
    // agent's view finds it through that view, where only relative links mean the same.
    let links = if step.on_host {
        Links::InRoot
    } else {
        Links::Relative
    };
    let step_file = cx.copy_dir.join("skyhook_dir").join(&step.path);
    make_executable(fs, &step_file, links).map_err(|e| match e {
        ExecBits::NotRegular => StageError::StepFile {
            path: step.path.clone(),
            file: step_file_real.display().to_string(),
        },
        ExecBits::Lookup(source) => StageError::StepFileLookup {
            path: step.path.clone(),
            file: step_file_real.display().to_string(),
            source,
        },
        ExecBits::Io(source) => StageError::StepIo {
            path: step.path.clone(),
            context: format!("making {} executable", step_file_real.display()),
            source,
        },
    })?;

    let mut env: Vec<(OsString, OsString)> = cx.base_env.to_vec();
    for (k, v) in paths.env_overrides(step, versions) {
        env.retain(|(name, _)| name.as_os_str() != k.as_str());
        env.push((k.into(), v));
    }

    let spec = ProcessSpec {
        program: paths.program,
        args: resolved.values,
        env,
        cwd: paths.cwd,
        chroot: paths.chroot,
        first_signal: FirstSignal::Finish,
    };
    // SPEC §8.10: only a refused log path stops the stage; a log that cannot be created or
    // written leaves the step running without one.
    let mut log =
        phases::time(Phase::Log, || logs.open(fs, &step.path, SystemTime::now())).map_err(
            state_err(format!("creating the log of step {:?}", step.path)),
        )?;
    let subject = Subject::Step {
        mode: mode.as_str(),
        path: &step.path,
    };
    let running = operation::supervise(cx.exec, &spec, log.file(), cx.runtime.heartbeat, subject);
    let outcome = match running.await {
        Ok(outcome) => outcome,
        Err(source) => {
            // A step that could not be started failed all the same (the run's counts).
            report.push(OperationResult::not_started(
                &step.path,
                format!("not started: {}", crate::host::errors::Chain(&source)),
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
        let field = logs.close(&step.path, &log, outcome.log_error.as_deref());
        drop(log);
        field
    });

    let accepted = matches!(outcome.termination, Termination::Exited(code) if step.returncodes.contains(&i64::from(code)));
    let status = if accepted && !outcome.timed_out {
        Status::Success
    } else {
        Status::Failed
    };
    operation::finished(subject, &outcome, status == Status::Success);
    let accepted = crate::compat::pyrepr::repr_int_list(&step.returncodes);
    report.push(
        OperationResult::ran(
            &step.path,
            decision.reason(),
            &outcome,
            status == Status::Success,
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
    if status == Status::Failed {
        return Err(StageError::StepFailed {
            path: step.path.clone(),
            termination: outcome.termination,
            accepted,
        });
    }
    Ok(())
}

enum ExecBits {
    NotRegular,
    /// The rooted lookup refused the path (a link out of ROOT, a cycle, a file on the way).
    Lookup(HostFsError),
    Io(std::io::Error),
}

/// SPEC §8.4: add u+x,g+x,o+x without clearing other bits; never add special bits.
///
/// The step file is package data and may be a link (SPEC §7), but the agent's own change to
/// it must land inside ROOT (SPEC §5), on the file the step will run: the file is reached
/// through the rooted lookup (`links`: as the host or as the agent's view follows links) and
/// changed through its descriptor, never through a path resolved again.
fn make_executable(fs: &HostFs, host_file: &Path, links: Links) -> Result<(), ExecBits> {
    let not_found = || ExecBits::Io(std::io::Error::from_raw_os_error(libc::ENOENT));
    let lookup = |e: HostFsError| match e {
        HostFsError::NotARegularFile { .. } => ExecBits::NotRegular,
        HostFsError::Io { source, .. } => ExecBits::Io(source),
        other => ExecBits::Lookup(other),
    };
    let found = fs
        .locate(host_file, links, Missing::Stop)
        .map_err(lookup)?
        .ok_or_else(not_found)?;
    let file = found.open_file().map_err(lookup)?.ok_or_else(not_found)?;
    let mode = file.metadata().map_err(ExecBits::Io)?.permissions().mode() & 0o7777;
    if mode & 0o111 != 0o111 {
        file.set_permissions(std::fs::Permissions::from_mode(mode | 0o111))
            .map_err(ExecBits::Io)?;
    }
    Ok(())
}
