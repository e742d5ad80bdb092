//! The `agent` binary's library: operator argv forms, subcommands and wiring.
//!
//! Distributors who link extra interrupt kinds build their own binary that calls [`main`].

mod commands;
mod metrics;
mod request;
mod signals;
#[cfg(feature = "try")]
mod try_;

// Links the built-in interrupt kinds: their registrations are dropped unless the crate is named.
#[allow(unused_imports)]
use interrupts as _;

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Instant, SystemTime};

use agent_core::Interrupt;
use agent_core::compat::timestamp;
use agent_core::exec::{self, Output};
use agent_core::host::banner::{self, Invocation};
use agent_core::host::boot::read_boot_id;
use agent_core::host::errors::Chain;
use agent_core::host::fs::HostFs;
use agent_core::host::identity::ResourceId;
use agent_core::host::preflight;
use agent_core::host::runtime::{LogFormat, Runtime};
use agent_core::interrupt::runner::{self as interrupts, InterruptOutcome, InterruptSettings};
use agent_core::package::config::PackageConfig;
use agent_core::package::step::Mode;
use agent_core::stage::decide::join_under;
use agent_core::stage::run::{self as stage, StageContext};
use agent_core::state::locks;
use agent_core::state::metrics::InterruptTally;
use agent_core::state::results::{self, OperationResult, RunRecord};
use anyhow::Context as _;
use tracing::{error, info, warn};

use crate::request::{HelpTopic, Request, USAGE};

/// The version embedded at build time (SPEC §1.3): `AGENT_VERSION` (the crate version when
/// unset); when it is set but empty, the embedded [`GIT_SHA`] (which may be `unknown`).
pub fn version() -> &'static str {
    match option_env!("AGENT_VERSION") {
        None => env!("CARGO_PKG_VERSION"),
        Some(v) if !v.is_empty() => v,
        Some(_) => GIT_SHA,
    }
}

/// The commit the binary was built from, `-dirty` when its tracked sources differed from it:
/// `GIT_SHA` at build time, else the git checkout it was built in, else `unknown`
/// (agent-cli/build/commit.rs).
pub const GIT_SHA: &str = env!("AGENT_GIT_SHA");

/// `agent --version` (SPEC §1.3): the version alone on stdout, which scripts read; the commit
/// on stderr, for the person reading both.
pub(crate) fn print_version() -> ExitCode {
    println_out(&format!("{}\n", version()));
    eprint_out(&format!("commit {GIT_SHA}\n"));
    ExitCode::SUCCESS
}

/// Exit codes of SPEC §1.2.
const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;

/// Run the agent with `args` (without the program name).
pub fn main(args: Vec<OsString>) -> ExitCode {
    // SPEC §9.5: two kinds with one wire name would make decoding ambiguous, and a kind whose
    // example does not decode back to itself is declared wrong.
    if let Err(e) = agent_core::plugin::codec::check() {
        eprint_out(&format!("agent: {e}\n"));
        return ExitCode::from(EXIT_FAILED);
    }
    if args
        .first()
        .and_then(|a| a.to_str())
        .is_some_and(|a| commands::NAMES.contains(&a))
    {
        return commands::run(args);
    }
    let request = match request::parse(args) {
        Ok(r) => r,
        Err(e) => {
            eprint_out(&format!("agent: {e}\n\n{USAGE}"));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match request {
        Request::Version => print_version(),
        Request::Help(None) => {
            println_out(USAGE);
            ExitCode::SUCCESS
        }
        Request::Help(Some(HelpTopic::Mode(mode))) => {
            println_out(&request::mode_help(&mode));
            ExitCode::SUCCESS
        }
        Request::Help(Some(HelpTopic::Subcommand(name))) => {
            commands::run(vec![name.into(), "--help".into()])
        }
        Request::Stage {
            mode,
            root,
            copy_dir,
        } => operator(&mode, &root, &copy_dir, None),
        Request::Interrupt {
            root,
            copy_dir,
            data,
        } => operator("interrupt", &root, &copy_dir, Some(&data)),
    }
}

fn println_out(text: &str) {
    Output::process().print(text);
}

/// `eprint!` that never panics: SPEC §10, a closed stderr must not stop the agent.
pub(crate) fn eprint_out(text: &str) {
    Output::process().eprint(text);
}

/// An operator invocation: a stage MODE (known or not) or `interrupt`.
fn operator(mode: &str, root: &Path, copy_dir: &Path, data: Option<&str>) -> ExitCode {
    let rt = match Runtime::from_env() {
        Ok(rt) => rt,
        Err(e) => {
            eprint_out(&format!("agent execution failed: {e}\n"));
            return ExitCode::from(EXIT_FAILED);
        }
    };
    init_logging(&rt);
    for w in &rt.warnings {
        warn!("{w}");
    }
    let stage_mode = if mode == "interrupt" {
        None
    } else if let Ok(m) = mode.parse::<Mode>() {
        Some(m)
    } else {
        // SPEC §1.1: forward compatibility with newer operators.
        if let Some(close) = request::suggest_mode(mode) {
            warn!(
                mode,
                "this agent version does not support the requested stage; treating it as a \
                 no-op (did you mean {close}?)"
            );
        } else {
            warn!(
                mode,
                "this agent version does not support the requested stage; treating it as a no-op"
            );
        }
        return ExitCode::SUCCESS;
    };
    let started = Instant::now();
    let mut operations = Vec::new();
    let result = run_operator(&rt, stage_mode, mode, root, copy_dir, data, &mut operations);
    if let Err(e) = &result {
        log_failure(e, stage_mode.is_some(), &operations);
    }
    log_run_finished(&result, &operations, started);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(EXIT_FAILED),
    }
}

/// The run's one ERROR line: the cause chain, and the failed step (or interrupt operation)
/// with its exit code or signal, log file and duration when one ran and failed.
fn log_failure(e: &anyhow::Error, stage: bool, operations: &[OperationResult]) {
    let failed = operations
        .iter()
        .rev()
        .find(|op| op.succeeded == Some(false));
    let name = failed.map(|op| op.operation.as_str());
    let (step, operation) = if stage { (name, None) } else { (None, name) };
    error!(
        step,
        operation,
        exit_code = failed.and_then(|op| op.exit_code),
        signal = failed.and_then(|op| op.signal),
        log = failed.and_then(|op| op.log.as_deref()),
        duration_ms = failed.and_then(|op| op.duration_ms),
        "agent execution failed: {e:#}"
    );
}

/// The run's last line: how it ended, what ran, and how long it took.
fn log_run_finished(result: &anyhow::Result<()>, operations: &[OperationResult], started: Instant) {
    let outcome = match result {
        Ok(()) => "succeeded",
        Err(e) if is_stop(e) => "stopped",
        Err(_) => "failed",
    };
    let count = |f: &dyn Fn(&OperationResult) -> bool| operations.iter().filter(|op| f(op)).count();
    info!(
        result = %outcome,
        ran = count(&|op| op.decision == "ran"),
        skipped = count(&|op| op.decision == "skipped"),
        failed = count(&|op| op.succeeded == Some(false)),
        duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "run finished"
    );
}

/// Whether the run ended because the agent was told to stop (SIGTERM/SIGINT, SPEC §10).
pub(crate) fn is_stop(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<stage::StageError>(),
            Some(stage::StageError::Stopped)
        ) || matches!(
            cause.downcast_ref::<agent_core::InterruptError>(),
            Some(agent_core::InterruptError::Stopped)
        )
    })
}

fn run_operator(
    rt: &Runtime,
    stage_mode: Option<Mode>,
    mode: &str,
    root: &Path,
    copy_dir: &Path,
    data: Option<&str>,
    operations: &mut Vec<OperationResult>,
) -> anyhow::Result<()> {
    // SPEC §6 step 1: nothing is written before the whole input is known good.
    let preflight::Validated {
        resource_id: rid,
        copy_dir,
    } = preflight::validate(root, copy_dir, rt, stage_mode.is_none())?;
    let output = Output::process();
    output.print(&banner::render(
        &Invocation {
            mode,
            root_mount: root,
            copy_dir: &copy_dir,
            interrupt_data: data,
        },
        rt,
        &rid,
    ));
    info!(
        agent_version = %version(),
        git_sha = %GIT_SHA,
        mode = %mode,
        package = %rid.package,
        version = %rid.version,
        pid = std::process::id(),
        "run started"
    );

    let fs = HostFs::new(root);
    if rt.copy_resolv {
        preflight::copy_resolv(root, Path::new("/etc/resolv.conf"))
            .context("copying /etc/resolv.conf")?;
    }
    preflight::ensure_package_data(root, &copy_dir, &rt.data_dir, Path::new(NODE_FILES))
        .context("preparing the package data")?;

    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    tokio.block_on(async {
        let cancel = signals::install()?;
        let mut exec = exec::Config {
            output,
            cancel,
            stop_grace: rt.stop_grace,
            timeout: rt.step_timeout,
            runner: std::sync::Arc::new(exec::ProcessRunner::default()),
        };
        let Some(mode) = stage_mode else {
            return run_interrupt(
                rt,
                &rid,
                fs,
                exec,
                &copy_dir,
                data.unwrap_or_default(),
                operations,
            )
            .await;
        };
        let base_env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        let package_dir = join_under(root, &copy_dir);
        let config_path = package_dir.join("config.json");
        let (config, warnings) =
            PackageConfig::load(&config_path, &package_dir.join("skyhook_dir"))
                .with_context(|| format!("loading {}", config_path.display()))?;
        for w in &warnings {
            warn!(file = %config_path.display(), "{w}");
        }
        if !mode.is_uninstall() {
            preflight::check_expected_config_files(root, &copy_dir, &config.expected_config_files)?;
        }
        // SPEC §11: one stage of a package at a time on this host. Taken once the input is
        // known good: bad input writes nothing, not even a lock file.
        let lock = locks::acquire(
            &fs,
            &locks::package_lock_path(&rt.state_dir, &config.package_name),
            read_boot_id(&fs).ok().as_deref(),
            &exec.cancel.stop,
        )
        .await?;
        exec.runner = runner_for(&lock);
        if !mode.is_uninstall() {
            preflight::overlay_root_dir(root, &copy_dir)
                .context("overlaying root_dir onto the host")?;
        }
        let cx = StageContext {
            fs: &fs,
            runtime: rt,
            exec: &exec,
            copy_dir: &copy_dir,
            base_env: &base_env,
        };
        let started = SystemTime::now();
        let result = stage::run_stage(&cx, &config, mode, operations)
            .await
            .map_err(anyhow::Error::from);
        let run = RunIdentity {
            mode: mode.as_str(),
            resource_id: &rid.id,
            package: &config.package_name,
            version: &config.package_version,
        };
        *operations = save_results(
            &fs,
            rt,
            &run,
            started,
            &result,
            std::mem::take(operations),
            None,
        );
        result
    })
}

/// What names a run's results record: `STATE/results/<package>/<version>/<mode>.json`.
struct RunIdentity<'a> {
    mode: &'a str,
    resource_id: &'a str,
    package: &'a str,
    version: &'a str,
}

/// SPEC §8.12: build the run's results record from how it ended and write it. The record is a
/// diagnostic; failing to write it is logged, not fatal. Gives the operations back.
fn save_results<T>(
    fs: &HostFs,
    rt: &Runtime,
    run: &RunIdentity<'_>,
    started: SystemTime,
    result: &anyhow::Result<T>,
    operations: Vec<OperationResult>,
    interrupt: Option<(&str, InterruptTally)>,
) -> Vec<OperationResult> {
    let record = RunRecord {
        agent_version: version().to_owned(),
        git_sha: GIT_SHA.to_owned(),
        mode: run.mode.to_owned(),
        resource_id: run.resource_id.to_owned(),
        package: run.package.to_owned(),
        version: run.version.to_owned(),
        started: timestamp::rfc3339_nano(started),
        finished: timestamp::rfc3339_nano(SystemTime::now()),
        exit_code: if result.is_ok() { 0 } else { EXIT_FAILED },
        error: result.as_ref().err().map(|e| format!("{e:#}")),
        operations,
    };
    let file = results::path(
        &rt.state_dir,
        &record.package,
        &record.version,
        &record.mode,
    );
    if let Err(e) = results::write(fs, &file, &record) {
        warn!(file = %file.display(), error = %Chain(&e), "could not write the results record");
    }
    metrics::save(fs, rt, &record, result.as_ref().err(), started, interrupt);
    record.operations
}

/// SPEC §9: decode INTERRUPT_DATA into a registered kind and run it under the marker protocol.
async fn run_interrupt(
    rt: &Runtime,
    rid: &ResourceId,
    fs: HostFs,
    exec: exec::Config,
    copy_dir: &Path,
    data: &str,
    operations_out: &mut Vec<OperationResult>,
) -> anyhow::Result<()> {
    let base_env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let decoded = <dyn Interrupt>::from_base64(data)?;
    if !decoded.unknown_fields.is_empty() {
        warn!(
            r#type = decoded.interrupt.type_name(),
            fields = %decoded.unknown_fields.join(", "),
            "ignoring unknown interrupt fields"
        );
    }
    let output = exec.output.clone();
    // SPEC §11: one run of an interrupt resource at a time on this host.
    let lock = locks::acquire(
        &fs,
        &locks::interrupt_lock_path(&rt.state_dir, &rid.id),
        read_boot_id(&fs).ok().as_deref(),
        &exec.cancel.stop,
    )
    .await?;
    let exec = exec::Config {
        runner: runner_for(&lock),
        ..exec
    };
    let settings = InterruptSettings {
        fs,
        exec,
        resource_id: rid.id.clone(),
        markers_dir: rt.state_dir.join("interrupts").join("flags").join(&rid.id),
        log_dir: rt
            .write_logs
            .then(|| rt.package_log_dir(&rid.package, &rid.version)),
        copy_dir: copy_dir.to_path_buf(),
        base_env,
        reboot_max_attempts: rt.reboot_max_attempts,
        reboot_wait: interrupts::REBOOT_WAIT,
    };
    let type_name = decoded.interrupt.type_name();
    let started = SystemTime::now();
    let state_fs = settings.fs.clone();
    let run = interrupts::run(settings, decoded.interrupt.as_ref()).await;
    let result = run.result.with_context(|| format!("interrupt {type_name}"));
    let identity = RunIdentity {
        mode: "interrupt",
        resource_id: &rid.id,
        package: &rid.package,
        version: &rid.version,
    };
    *operations_out = save_results(
        &state_fs,
        rt,
        &identity,
        started,
        &result,
        run.results,
        Some((type_name, run.tally)),
    );
    match result? {
        InterruptOutcome::Completed => Ok(()),
        InterruptOutcome::ShutdownInProgress => {
            // SPEC §9.4: the shutdown we asked for is not a failure of the operator's stage.
            output.print(
                "shutdown in progress; the reboot will be confirmed by boot ID on the next run\n",
            );
            Ok(())
        }
    }
}

/// The process runner for a run holding `lock`: it records each operation's process group
/// in the lock file, so that the next run can wait for one a killed agent left running
/// (SPEC §10).
fn runner_for(lock: &locks::Lock) -> std::sync::Arc<dyn exec::Runner> {
    std::sync::Arc::new(match lock.group_recorder() {
        Some(recorder) => exec::ProcessRunner::recording(recorder),
        None => exec::ProcessRunner::default(),
    })
}

/// Legacy node-specific files merged into the package data (SPEC §6.4).
const NODE_FILES: &str = "/etc/nvidia-bootstrap/node-files";

fn init_logging(rt: &Runtime) {
    // An invalid filter is an invalid setting like any other: warned about, then the default.
    let (filter, bad_filter) = match tracing_subscriber::EnvFilter::try_new(&rt.log_filter) {
        Ok(filter) => (filter, None),
        Err(e) => (tracing_subscriber::EnvFilter::new("info"), Some(e)),
    };
    // SPEC §10: a closed stderr must neither panic nor stop the run; the writer drops what
    // it cannot write, and the subscriber must not report that on the same stderr.
    let stderr = Output::process().stderr;
    let builder = tracing_subscriber::fmt()
        .with_writer(move || exec::LossyWriter(stderr.clone()))
        .log_internal_errors(false)
        .with_ansi(false)
        .with_target(false)
        .with_env_filter(filter);
    let _ = match rt.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    if let Some(e) = bad_filter {
        warn!(
            "environment variable SKYHOOK_AGENT_LOG={:?} is not a valid filter ({e}); using info",
            rt.log_filter
        );
    }
}
