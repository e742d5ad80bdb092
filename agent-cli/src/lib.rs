//! The `agent` binary's library: operator argv forms, subcommands and wiring.
//!
//! Distributors who link extra interrupt kinds build their own binary, naming the kinds:
//! `agent_cli::main_with_kinds!(gpu_reset::GpuReset);` (or [`Agent`]), so a kind that is not
//! linked is a compile error.

/// `writeln!` into a `String`, a text form's next line: writing to a `String` cannot fail.
/// Defined before the modules, so that every one of them has it in scope.
macro_rules! push_line {
    ($s:expr, $($arg:tt)*) => {{
        use ::std::fmt::Write as _;
        let _ = ::std::writeln!($s, $($arg)*);
    }};
}

mod cli;
mod commands;
mod logfmt;
mod logging;
mod metrics;
mod output;
mod request;
mod signals;
mod summary;
mod version;

pub use version::{GIT_SHA, version};

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
use agent_core::host::phases::{self, Phase};
use agent_core::host::preflight;
use agent_core::host::runtime::Runtime;
use agent_core::interrupt::runner::{self as interrupts, InterruptOutcome, InterruptSettings};
use agent_core::package::config::PackageConfig;
use agent_core::package::step::Mode;
use agent_core::stage::decide::join_under;
use agent_core::stage::run::{self as stage, StageContext};
use agent_core::state::locks;
use agent_core::state::metrics::InterruptTally;
use agent_core::state::results::{self, OperationResult, RecordedResult, ResultsRecord};
use anyhow::Context as _;
use tracing::{error, info, warn};

use crate::cli::Verbosity;
use crate::output::eprint;
use crate::request::Request;

/// Exit codes of SPEC §1.2.
const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;

/// The `main` of a distributor's binary: the stock agent plus the interrupt kinds it names
/// (SPEC §9.5). Naming a kind links its crate, so a kind that is not linked is a compile
/// error, not a payload refused on a node:
///
/// ```ignore
/// agent_cli::main_with_kinds!(gpu_reset::GpuReset, pod_drain::PodDrain);
/// ```
///
/// expands to `fn main() -> ExitCode`, the same as
/// `Agent::new().kind::<gpu_reset::GpuReset>().kind::<pod_drain::PodDrain>().main()`.
#[macro_export]
macro_rules! main_with_kinds {
    ($($kind:ty),+ $(,)?) => {
        fn main() -> ::std::process::ExitCode {
            $crate::Agent::new()$(.kind::<$kind>())+.main()
        }
    };
}

/// A distributor's agent: the stock agent (with the built-in kinds) plus the kinds named with
/// [`Agent::kind`]. See [`main_with_kinds!`].
#[derive(Debug, Default)]
pub struct Agent {
    kinds: Vec<NamedKind>,
}

/// A kind a distributor named.
#[derive(Debug, Clone, Copy)]
struct NamedKind {
    rust_type: &'static str,
    type_name: &'static str,
    registered: fn() -> bool,
}

impl Agent {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add interrupt kind `K` (a type declared with `#[agent_core::interrupt]`).
    #[must_use]
    pub fn kind<K: agent_core::InterruptKind>(mut self) -> Self {
        self.kinds.push(NamedKind {
            rust_type: std::any::type_name::<K>(),
            type_name: K::TYPE,
            registered: || agent_core::plugin::registry::descriptor_of::<K>().is_some(),
        });
        self
    }

    /// Run the agent with the process's arguments.
    pub fn main(self) -> ExitCode {
        self.run(std::env::args_os().skip(1).collect())
    }

    /// Run the agent with `args` (without the program name), after checking that every kind
    /// named is registered in this binary.
    pub fn run(self, args: Vec<OsString>) -> ExitCode {
        for k in &self.kinds {
            if !(k.registered)() {
                eprint(&format!(
                    "agent: interrupt kind {} (type {:?}) is named by this binary but not \
                     registered in it: declare it with #[agent_core::interrupt]\n",
                    k.rust_type, k.type_name
                ));
                return ExitCode::from(EXIT_FAILED);
            }
        }
        main(args)
    }
}

/// Run the agent with `args` (without the program name).
pub fn main(args: Vec<OsString>) -> ExitCode {
    // SPEC §9.5: two kinds with one wire name would make decoding ambiguous. A kind whose
    // example does not decode back to itself is declared wrong, but it does not stop the
    // agent: `interrupts list` names it, and only its payloads are refused.
    if let Err(e) = agent_core::plugin::registry::check_unique() {
        eprint(&format!("agent: {e}\n"));
        return ExitCode::from(EXIT_FAILED);
    }
    #[cfg(feature = "try")]
    if let Some(code) = commands::try_::internal(&args) {
        return code;
    }
    let (verbosity, rest) = match request::leading_verbosity(&args) {
        Ok(found) => found,
        Err(e) => return usage_error(&e),
    };
    if rest
        .first()
        .and_then(|a| a.to_str())
        .is_some_and(cli::is_subcommand)
    {
        return commands::run(args);
    }
    match request::parse(rest.to_vec()) {
        Err(e) => usage_error(&e),
        Ok(Request::Version) => output::print_version(),
        Ok(Request::Help(topic)) => {
            output::print(&cli::help(topic.as_deref().as_slice()));
            ExitCode::SUCCESS
        }
        Ok(Request::Operator {
            mode,
            root,
            copy_dir,
            data,
        }) => operator(&mode, &root, &copy_dir, data.as_deref(), verbosity),
    }
}

/// SPEC §1.1: a malformed operator form: the message and the usage on stderr, exit 2.
fn usage_error(e: &request::UsageError) -> ExitCode {
    eprint(&cli::usage_error(&[], &e.to_string()));
    ExitCode::from(EXIT_USAGE)
}

/// An operator invocation: a stage MODE (known or not) or `interrupt`.
fn operator(
    mode: &str,
    root: &Path,
    copy_dir: &Path,
    data: Option<&str>,
    verbosity: Verbosity,
) -> ExitCode {
    let rt = match Runtime::from_env() {
        Ok(rt) => rt,
        Err(e) => {
            eprint(&format!("agent execution failed: {e}\n"));
            return ExitCode::from(EXIT_FAILED);
        }
    };
    logging::init(&rt, verbosity);
    for w in &rt.warnings {
        warn!("{w}");
    }
    let stage_mode = if mode == "interrupt" {
        None
    } else if let Ok(m) = mode.parse::<Mode>() {
        Some(m)
    } else {
        // SPEC §1.1: forward compatibility with newer operators.
        let close =
            cli::suggest_mode(mode).map_or_else(String::new, |m| format!(" (did you mean {m}?)"));
        warn!(
            mode,
            "this agent version does not support the requested stage; treating it as a \
             no-op{close}"
        );
        return ExitCode::SUCCESS;
    };
    let started = Instant::now();
    // docs/performance.md: where the run's time went, for the benchmark.
    let phase_times = std::env::var_os(phases::PHASE_TIMES_VAR);
    if phase_times.is_some() {
        phases::enable();
    }
    let mut out = summary::SummaryFacts::default();
    exec::leftovers::adopt();
    let result = run_operator(&rt, stage_mode, mode, root, copy_dir, data, &mut out);
    if let Err(e) = &result {
        log_failure(e, stage_mode.is_some(), &out.operations);
    }
    // SPEC §8.4: what the operations left running is ended when the agent exits.
    exec::leftovers::end(rt.stop_grace);
    log_run_finished(&result, &out.operations, started);
    if let Some(path) = phase_times {
        if let Err(e) = phases::write(Path::new(&path)) {
            warn!(
                file = %Path::new(&path).display(),
                error = %e,
                "could not write the phase times"
            );
        }
    }
    // SPEC §1.5: the last lines of a run that did not succeed say what to look at.
    if let Err(e) = &result {
        summary::log(mode, e, is_stop(e), &out);
    }
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
    let count = |f: &dyn Fn(&OperationResult) -> bool| operations.iter().filter(|op| f(op)).count();
    info!(
        result = %ended(result).as_str(),
        ran = count(&|op| op.decision == "ran"),
        skipped = count(&|op| op.decision == "skipped"),
        failed = count(&|op| op.succeeded == Some(false)),
        duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "run finished"
    );
}

/// How the run ended, as its results record (and from it, its metrics) and its last line say it.
fn ended<T>(result: &anyhow::Result<T>) -> RecordedResult {
    match result {
        Ok(_) => RecordedResult::Succeeded,
        Err(e) if is_stop(e) => RecordedResult::Stopped,
        Err(_) => RecordedResult::Failed,
    }
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
    out: &mut summary::SummaryFacts,
) -> anyhow::Result<()> {
    check_open_files()?;
    // SPEC §10: stop requests are handled from before the first write (resolv.conf, the
    // package copy), so one that arrives during pre-flight is a clean stop, not a kill.
    let cancel = signals::install().context("installing the signal handlers")?;
    // SPEC §6 step 1: nothing is written before the whole input is known good.
    let preflight::Validated {
        resource_id: rid,
        copy_dir,
    } = preflight::validate(root, copy_dir, rt, stage_mode.is_none())?;
    out.package = Some((rid.package.clone(), rid.version.clone()));
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
    // A stop request during pre-flight lets the copy under way finish (a package directory is
    // renamed into place whole); nothing after it starts.
    let go_on = || {
        if cancel.is_stopping() {
            Err(stage::StageError::Stopped)
        } else {
            Ok(())
        }
    };
    go_on()?;
    if rt.copy_resolv {
        preflight::copy_resolv(root, Path::new("/etc/resolv.conf"))
            .context("copying /etc/resolv.conf")?;
        go_on()?;
    }
    preflight::ensure_package_data(root, &copy_dir, &rt.data_dir, Path::new(NODE_FILES))
        .context("preparing the package data")?;
    go_on()?;

    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    tokio.block_on(async {
        let mut exec = exec::Config {
            output,
            cancel,
            stop_grace: rt.stop_grace,
            timeout: rt.step_timeout,
            runner: std::sync::Arc::new(exec::ProcessRunner::default()),
        };
        let Some(mode) = stage_mode else {
            return run_interrupt(rt, &rid, fs, exec, &copy_dir, data.unwrap_or_default(), out)
                .await;
        };
        let base_env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        let package_dir = join_under(root, &copy_dir);
        let config_path = package_dir.join("config.json");
        // The steps of this stage only: every rule is checked, but a large package's other
        // modes are not held while its steps run.
        let (mut config, warnings) =
            PackageConfig::load_stage(&config_path, &package_dir.join("skyhook_dir"), mode)
                .with_context(|| format!("loading {}", config_path.display()))?;
        for w in &warnings {
            warn!(file = %config_path.display(), "{w}");
        }
        out.package = Some((config.package_name.clone(), config.package_version.clone()));
        // SPEC §1.5: a run that fails names the steps it did not get to; the list is made
        // only then (a large package's step paths are not copied for a run that succeeds).
        let planned = |config: &PackageConfig| {
            Some(Ok(config
                .steps(mode)
                .iter()
                .map(|step| summary::Planned {
                    id: step.path.clone(),
                    command: None,
                })
                .collect()))
        };
        let prepared = async {
            if !mode.is_uninstall() {
                preflight::check_expected_config_files(
                    root,
                    &copy_dir,
                    &config.expected_config_files,
                )?;
            }
            // SPEC §11: one stage of a package at a time on this host. Taken once the input
            // is known good: bad input writes nothing, not even a lock file.
            let lock = locks::acquire(
                &fs,
                &locks::package_lock_path(&rt.state_dir, &config.package_name),
                read_boot_id(&fs).ok().as_deref(),
                &exec.cancel.stop,
            )
            .await?;
            let started = SystemTime::now();
            let run = save_start(
                &fs,
                rt,
                (mode.as_str(), &rid.id),
                (&config.package_name, &config.package_version),
                started,
            )?;
            if !mode.is_uninstall() {
                preflight::overlay_root_dir(root, &copy_dir)
                    .context("overlaying root_dir onto the host")?;
            }
            anyhow::Ok((lock, run, started))
        }
        .await;
        let (lock, run, started) = match prepared {
            Ok(prepared) => prepared,
            Err(e) => {
                out.planned = planned(&config);
                return Err(e);
            }
        };
        exec.runner = runner_for(&lock);
        let cx = StageContext {
            fs: &fs,
            runtime: rt,
            exec: &exec,
            copy_dir: &copy_dir,
            base_env: &base_env,
        };
        let result = stage::run_stage(&cx, &config, mode, &mut out.operations)
            .await
            .map_err(anyhow::Error::from);
        if result.is_err() {
            out.planned = planned(&config);
        }
        // The steps are done with: the memory of a large package's steps serves the results
        // and the metrics written next instead of adding to them.
        drop(std::mem::take(&mut config.modes));
        out.operations = save_results(
            &fs,
            rt,
            (run, started),
            &result,
            std::mem::take(&mut out.operations),
            None,
        );
        result
    })
}

/// SPEC §8.12: the record says `running` from the start, so a run that cannot record its end
/// (a full disk, a SIGKILL) never leaves the previous run's success in place. A run that cannot
/// write even this fails before it runs anything. Returns the record, which the run's end
/// completes ([`save_results`]).
fn save_start(
    fs: &HostFs,
    rt: &Runtime,
    (mode, resource_id): (&str, &str),
    package: (&str, &str),
    started: SystemTime,
) -> anyhow::Result<ResultsRecord> {
    let record = ResultsRecord::running(
        (version(), GIT_SHA),
        mode,
        resource_id,
        package,
        &timestamp::rfc3339_nano(started),
    );
    let file = record.path(&rt.state_dir);
    phases::time(Phase::Results, || results::write(fs, &file, &record)).with_context(|| {
        format!(
            "writing the results record {} at the start of the run",
            file.display()
        )
    })?;
    Ok(record)
}

/// SPEC §8.12: complete the run's start record with how it ended and write it over the start
/// record. The record is a diagnostic; failing to write it is logged, not fatal (the start
/// record left in place says the run did not record its result). Gives the operations back.
fn save_results<T>(
    fs: &HostFs,
    rt: &Runtime,
    (mut record, started): (ResultsRecord, SystemTime),
    result: &anyhow::Result<T>,
    operations: Vec<OperationResult>,
    interrupt: Option<(&str, InterruptTally)>,
) -> Vec<OperationResult> {
    record.finished = timestamp::rfc3339_nano(SystemTime::now());
    record.exit_code = if result.is_ok() { 0 } else { EXIT_FAILED };
    record.result = Some(ended(result));
    record.error = result.as_ref().err().map(|e| format!("{e:#}"));
    record.operations = operations;
    let file = record.path(&rt.state_dir);
    if let Err(e) = phases::time(Phase::Results, || results::write(fs, &file, &record)) {
        warn!(file = %file.display(), error = %Chain(&e), "could not write the results record");
    }
    phases::time(Phase::Metrics, || {
        metrics::save(fs, rt, &record, started, interrupt);
    });
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
    out: &mut summary::SummaryFacts,
) -> anyhow::Result<()> {
    let base_env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let decoded = <dyn Interrupt>::from_base64(data)?;
    if !decoded.unknown_fields.is_empty() {
        warn!(
            r#type = decoded.interrupt.type_name(),
            fields = %decoded.unknown_field_notes().join(", "),
            "ignoring unknown interrupt fields"
        );
    }
    let output = exec.output.clone();
    let cancel = exec.cancel.clone();
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
        markers_dir: agent_core::state::interrupt_markers::resource_dir(&rt.state_dir, &rid.id),
        log_dir: rt
            .write_logs
            .then(|| rt.package_log_dir(&rid.package, &rid.version)),
        copy_dir: copy_dir.to_path_buf(),
        base_env,
        reboot_max_attempts: rt.reboot_max_attempts,
        reboot_wait: interrupts::REBOOT_WAIT,
        heartbeat: rt.heartbeat,
    };
    let type_name = decoded.interrupt.type_name();
    let started = SystemTime::now();
    out.resource_id = Some(rid.id.clone());
    let record = save_start(
        &settings.fs,
        rt,
        ("interrupt", &rid.id),
        (&rid.package, &rid.version),
        started,
    )?;
    let state_fs = settings.fs.clone();
    let interrupt: std::sync::Arc<dyn Interrupt> = decoded.interrupt.into();
    let run = interrupts::run_owned(settings, interrupt.clone()).await;
    // SPEC §1.5: a run that did not complete names the operations it did not get to.
    match &run.result {
        Ok(InterruptOutcome::Completed) => {}
        Err(e) if e.is_kind_fault() => {
            out.planned = Some(Err(
                "the interrupt kind's own code failed, so it is not run again to list its \
                 operations"
                    .to_owned(),
            ));
        }
        Ok(InterruptOutcome::ShutdownInProgress) | Err(_) => {
            out.planned = Some(planned_operations(&state_fs, rt, rid, copy_dir, &*interrupt).await);
        }
    }
    let result = run.result.with_context(|| format!("interrupt {type_name}"));
    out.operations = save_results(
        &state_fs,
        rt,
        (record, started),
        &result,
        run.results,
        Some((type_name, run.tally)),
    );
    match result? {
        InterruptOutcome::Completed => Ok(()),
        InterruptOutcome::ShutdownInProgress => {
            // SPEC §9.4: never exit 0 before the host goes down, or the operator's interrupt Job
            // completes before the reboot; the restart that sees a new boot ID completes it.
            let stopped = interrupts::wait_for_host_shutdown(
                &cancel,
                (interrupts::REBOOT_WAIT, rt.stop_grace),
                rt.heartbeat,
                || {
                    output.print(
                        "shutdown in progress; the reboot will be confirmed by boot ID on the next \
                         run\n",
                    );
                },
            )
            .await;
            Err(stopped).with_context(|| format!("interrupt {type_name}"))
        }
    }
}

/// How long the kind's own code may take to list its operations again after a failed run.
const PLAN_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The interrupt's operations as a run now would see them (a dry run: nothing runs), less
/// those already complete.
async fn planned_operations(
    fs: &HostFs,
    rt: &Runtime,
    rid: &ResourceId,
    copy_dir: &Path,
    interrupt: &(dyn Interrupt + 'static),
) -> Result<Vec<summary::Planned>, String> {
    use agent_core::interrupt::plan as dry;
    let env = std::env::vars_os().collect();
    let settings = dry::dry_settings(fs, rt, rid, copy_dir, env);
    let (operations, result) = dry::plan_operations_within(settings, interrupt, PLAN_LIMIT).await;
    result.map_err(|e| format!("listing the interrupt's operations: {}", Chain(&e)))?;
    Ok(operations
        .into_iter()
        .filter(|op| op.action != agent_core::stage::plan::PlannedAction::Skip)
        .map(|op| summary::Planned {
            id: op.operation,
            command: op.command,
        })
        .collect())
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

/// The fewest open files a run is started with: the agent's streams, the async runtime, the
/// signal pipe, a lock, directory walks, and a step's pipes, log and `/dev/null`, with room to
/// spare (a stage needs about 24). Below it a run would fail part-way, or the async runtime
/// would panic creating its own pipes.
const MIN_OPEN_FILES: u64 = 64;

/// SPEC §1.2: too low an open-file limit (`ulimit -n`) is a runtime error named as such,
/// before anything is written, never a panic in the middle of a run.
fn check_open_files() -> anyhow::Result<()> {
    use nix::sys::resource::{Resource, getrlimit};
    let (soft, _hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .context("reading the open-file limit (RLIMIT_NOFILE)")?;
    if soft < MIN_OPEN_FILES {
        anyhow::bail!(
            "too few file descriptors: the open-file limit (RLIMIT_NOFILE, `ulimit -n`) is \
             {soft}; the agent needs at least {MIN_OPEN_FILES}"
        );
    }
    Ok(())
}

/// Legacy node-specific files merged into the package data (SPEC §6.4).
const NODE_FILES: &str = "/etc/nvidia-bootstrap/node-files";
