//! The lifecycle inside the sandbox, run by its init after the pivot: the package staged as the
//! operator stages it, each stage by the agent's operator form in namespaces of its own (the
//! stage runner, [`super::confine`]), interrupts recorded and completed as after a reboot, then
//! the report, with what the stage runners measured.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agent_core::exec::{self, ExecError, Outcome, ProcessSpec, Termination};
use agent_core::host::boot::read_boot_id;
use agent_core::host::errors::Chain;
use agent_core::host::fs::HostFs;
use agent_core::host::identity::ResourceId;
use agent_core::host::preflight;
use agent_core::host::runtime::Runtime;
use agent_core::interrupt::plan;
use agent_core::interrupt::runner::{self, InterruptOutcome};
use agent_core::state::results::ResultsRecord;
use agent_core::{CompletionPolicy, Interrupt};

use super::confine::Verdict;
use super::layout::{BOOT_ID, CONFIGMAPS, LOWER, MERGED, OUT, PACKAGE, UPPER};
use super::mounts;
use super::report::{self, InterruptOperation, InterruptReport, Isolation, Report, StageReport};
use super::{Item, LOG_DIR, STATE_DIR, Spec, exit_code};

/// Run the lifecycle and write the report, `OUT/report.txt` and `OUT/report.json` (made a JSON
/// document by `document`). Returns the sandbox's exit code.
pub(crate) fn run(spec: &Spec, created: &[String], document: fn(&Report) -> String) -> i32 {
    let mut report = Report {
        package: spec.package.clone(),
        version: spec.version.clone(),
        lower: spec.lower.display().to_string(),
        copy_dir: spec.copy_dir.clone(),
        resource_id: spec.resource_id.clone(),
        network: if spec.network { "host" } else { "none" }.to_owned(),
        kept: spec.keep.then(|| spec.out.display().to_string()),
        ..Report::default()
    };
    // Why the stages that are not verified are not, stage by stage.
    let mut unverified = Vec::new();
    let env = environment(spec);
    if let Err(e) = stage_package(spec) {
        report.error = Some(format!("staging the package: {e}"));
    }
    let mut index = 0;
    let mut failed = report.error.is_some();
    for item in &spec.plan {
        if failed {
            let name = match item {
                Item::Stage { mode } => mode,
                Item::Interrupt { .. } => "interrupt",
            };
            report.stages.push(StageReport::not_run(name));
            continue;
        }
        index += 1;
        let stage = match item {
            Item::Stage { mode } => {
                let (stage, verdict) = run_stage(spec, &env, index, mode);
                unverified.extend(why_unverified(mode, &verdict));
                stage
            }
            Item::Interrupt { payload } => {
                let (stage, interrupt) = run_interrupt(spec, &env, index, payload);
                report.interrupts.push(interrupt);
                stage
            }
        };
        failed = stage.result != "succeeded";
        append_progress(&stage);
        report.stages.push(stage);
    }
    report.isolation = Isolation {
        verified: unverified.is_empty(),
        detail: if unverified.is_empty() {
            "every mount of a filesystem of this machine that the steps could reach was \
             read-only and locked, checked before and after each stage"
                .to_owned()
        } else {
            unverified.join("; ")
        },
    };
    match report::changes(Path::new(LOWER), Path::new(UPPER), created, &spec.copy_dir) {
        Ok((changes, state)) => {
            report.changes = changes;
            report.agent_state = state;
        }
        Err(e) => {
            failed = true;
            report.error = Some(format!("reading the upper layer: {e}"));
        }
    }
    report.result = if failed { "failed" } else { "succeeded" }.into();
    if spec.keep {
        if let Err(e) = report::copy_upper(Path::new(UPPER), &Path::new(OUT).join("upper")) {
            report
                .error
                .get_or_insert(format!("--keep: copying the upper layer: {e}"));
        }
    }
    // Both forms, rendered here: `agent try` only prints one of them.
    let json = document(&report);
    let written = fs::write(Path::new(OUT).join("report.txt"), report::render(&report))
        .and_then(|()| fs::write(Path::new(OUT).join("report.json"), json));
    if let Err(e) = written {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!("agent try: writing the report: {e}\n").as_bytes(),
        );
        return 1;
    }
    i32::from(report.result != "succeeded")
}

/// Why what the stage runner of `mode` measured does not verify the stage: `None` when it
/// does, or when the stage was refused before anything ran.
fn why_unverified(mode: &str, v: &Verdict) -> Option<String> {
    match (&v.before, &v.after) {
        (Some(Ok(_)), Some(Err(problem))) => Some(format!("{mode}: after the stage, {problem}")),
        (Some(Ok(_)), None) => Some(format!(
            "{mode}: the stage runner ended before its check after the stage"
        )),
        _ => None,
    }
}

/// Give the sandbox a new boot ID (a simulated reboot) and return it: bind a file holding it
/// over the overlay's `/proc/sys/kernel/random/boot_id`, here for the interrupts, and in each
/// later stage's own procfs (the stage runner binds the same file).
fn new_boot_id() -> Result<String, String> {
    let id = fs::read_to_string("/proc/sys/kernel/random/uuid")
        .map_err(|e| format!("reading /proc/sys/kernel/random/uuid: {e}"))?;
    let id = id.trim();
    fs::write(BOOT_ID, format!("{id}\n")).map_err(|e| format!("writing {BOOT_ID}: {e}"))?;
    mounts::bind_boot_id(Path::new(BOOT_ID), &Path::new(MERGED).join("proc"))?;
    Ok(id.to_owned())
}

/// What the operator gives a package pod (SPEC §13), then the author's `--env`. Not `agent
/// try`'s own environment: a run depends on nothing but its arguments.
fn environment(spec: &Spec) -> Vec<(OsString, OsString)> {
    let pod = [
        (
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ),
        ("HOME", "/root"),
        ("SKYHOOK_RESOURCE_ID", spec.resource_id.as_str()),
        ("SKYHOOK_ROOT_DIR", STATE_DIR),
        ("SKYHOOK_LOG_DIR", LOG_DIR),
        ("COPY_RESOLV", "false"),
        ("SKYHOOK_NODE_ORDER", "0"),
    ];
    let author = spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    for (k, v) in pod.into_iter().chain(author) {
        env.retain(|(name, _)| name != k);
        env.push((k.into(), v.into()));
    }
    env
}

/// The operator's init container: the package's files into COPY_DIR, the configMap keys into
/// COPY_DIR/configmaps.
fn stage_package(spec: &Spec) -> Result<(), String> {
    let root = Path::new(MERGED);
    let copy_dir = Path::new(&spec.copy_dir);
    preflight::ensure_package_data(
        root,
        copy_dir,
        Path::new(PACKAGE),
        Path::new("/.try/no-node-files"),
    )
    .map_err(|e| Chain(&e).to_string())?;
    let dest = root
        .join(spec.copy_dir.trim_start_matches('/'))
        .join("configmaps");
    for name in &spec.configmaps {
        fs::create_dir_all(&dest).map_err(|e| format!("creating {}: {e}", dest.display()))?;
        let target = dest.join(name);
        let _ = fs::remove_file(&target);
        fs::copy(Path::new(CONFIGMAPS).join(name), &target)
            .map_err(|e| format!("installing configMap key {name}: {e}"))?;
    }
    Ok(())
}

/// The file a stage's (or interrupt's) output goes to, and its name in [`OUT`].
fn output_file(index: usize, name: &str) -> (PathBuf, String) {
    let file = format!("{index:02}-{name}.log");
    (Path::new(OUT).join(&file), file)
}

/// One stage, by the agent's operator form, `agent MODE /root COPY_DIR`, confined by the stage
/// runner (`agent try --stage MODE`, [`super::confine`]).
fn run_stage(
    spec: &Spec,
    env: &[(OsString, OsString)],
    index: usize,
    mode: &str,
) -> (StageReport, Verdict) {
    let (path, name) = output_file(index, mode);
    let started = Instant::now();
    let record = agent_core::state::results::path(
        &Path::new(MERGED).join(STATE_DIR.trim_start_matches('/')),
        &spec.package,
        &spec.version,
        mode,
    );
    // The record is replaced by rename: a new inode means this run wrote it.
    let identity = |p: &Path| {
        fs::metadata(p)
            .ok()
            .map(|m| (m.ino(), m.mtime(), m.mtime_nsec()))
    };
    let previous = identity(&record);
    let ran = run_confined(env, mode, &spec.copy_dir, &path);
    let duration = started.elapsed();
    let mut stage = StageReport::new(mode, duration, name);
    let verdict = match ran {
        Ok((code, verdict)) => {
            const NOT_CONFINED: &str = "the stage could not be confined; nothing was run";
            match &verdict.before {
                Some(Ok(_)) => {
                    stage.exit_code = Some(code);
                    stage.result = if code == 0 { "succeeded" } else { "failed" }.into();
                }
                Some(Err(problem)) => stage.error = Some(format!("{NOT_CONFINED}: {problem}")),
                None => stage.error = Some(NOT_CONFINED.into()),
            }
            verdict
        }
        Err(e) => {
            stage.error = Some(format!("starting the stage runner: {e}"));
            Verdict::default()
        }
    };
    // The agent's own results record (SPEC §8.12) says what each step did; only this run's
    // (an earlier run of the same stage, a second interrupt's post-interrupt, left one too).
    let current = identity(&record);
    let fresh = current.is_some() && current != previous;
    if let Some(record) = fresh
        .then(|| fs::read(&record).ok())
        .flatten()
        .and_then(|b| serde_json::from_slice::<ResultsRecord>(&b).ok())
    {
        stage.set_steps(&record.operations);
        if stage.error.is_none() {
            stage.error = record.error;
        }
    }
    if stage.result != "succeeded" {
        stage.output_tail = Some(tail(&path, 20));
    }
    (stage, verdict)
}

/// Run the stage runner, its output (and every step's) copied to `log` through a pipe: the
/// steps hold no descriptor of a file outside. The pipe ends when the stage does, as the
/// stage's PID namespace ends with its agent. Returns the runner's exit code and verdict.
fn run_confined(
    env: &[(OsString, OsString)],
    mode: &str,
    copy_dir: &str,
    log: &Path,
) -> std::io::Result<(i32, Verdict)> {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::process::CommandExt as _;
    let mut log = File::create(log)?;
    let (output_r, output_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let (verdict_r, verdict_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let fd = verdict_w.as_raw_fd();
    let mut cmd = Command::new("/proc/self/exe");
    cmd.args([crate::TRY, crate::STAGE, mode, crate::COPY_DIR, copy_dir])
        .args([crate::VERDICT_FD, &fd.to_string()])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::from(output_w.try_clone()?))
        .stderr(Stdio::from(output_w));
    // SAFETY: fcntl and prctl are async-signal-safe system calls; nothing else runs between
    // fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // The runner's one inherited descriptor besides stdin, stdout and stderr.
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    // Only the runner (and what it starts) holds the write ends now.
    drop((cmd, verdict_w));
    let copied = std::io::copy(&mut File::from(output_r), &mut log);
    let mut text = String::new();
    let _ = std::io::Read::read_to_string(&mut File::from(verdict_r), &mut text);
    let status = child.wait()?;
    copied?;
    Ok((exit_code(status), Verdict::parse(&text)))
}

/// The last `lines` lines of a file.
fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// One interrupt: planned as `agent plan interrupt` plans it, then run by the real marker and
/// reboot protocol with a runner that runs nothing: each command is recorded ("would run"),
/// an after-reboot operation ends as a reboot does (its command terminated by SIGTERM), the
/// boot ID changes, and the protocol runs again to complete it as after the reboot.
fn run_interrupt(
    spec: &Spec,
    env: &[(OsString, OsString)],
    index: usize,
    payload: &str,
) -> (StageReport, InterruptReport) {
    let started = Instant::now();
    let (path, name) = output_file(index, "interrupt");
    let mut interrupt = InterruptReport {
        payload: payload.to_owned(),
        ..InterruptReport::default()
    };
    let result = simulate(spec, env, payload, &mut interrupt);
    let mut stage = StageReport::new("interrupt", started.elapsed(), name);
    stage.interrupt = Some(interrupt.r#type.clone());
    stage.steps_ran = interrupt
        .operations
        .iter()
        .filter(|o| o.action == "run")
        .count();
    stage.steps_skipped = interrupt.operations.len() - stage.steps_ran;
    let mut log = String::new();
    for op in &interrupt.operations {
        let _ = writeln!(log, "{}: {} ({})", op.operation, op.what(), op.reason);
    }
    stage.exit_code = Some(i32::from(result.is_err()));
    match result {
        Ok(()) => stage.result = "succeeded".into(),
        Err(e) => {
            let _ = writeln!(log, "error: {e}");
            interrupt.error = Some(e.clone());
            stage.error = Some(e);
        }
    }
    interrupt.result.clone_from(&stage.result);
    let _ = fs::write(&path, log);
    (stage, interrupt)
}

fn simulate(
    spec: &Spec,
    env: &[(OsString, OsString)],
    payload: &str,
    report: &mut InterruptReport,
) -> Result<(), String> {
    let decoded =
        <dyn Interrupt>::from_json_bytes(payload.as_bytes()).map_err(|e| e.to_string())?;
    let interrupt = decoded.interrupt;
    interrupt.type_name().clone_into(&mut report.r#type);
    let lookup = |name: &str| {
        env.iter()
            .find(|(k, _)| k.to_str() == Some(name))
            .map(|(_, v)| v.clone())
    };
    let rt = Runtime::from_lookup(lookup).map_err(|e| e.to_string())?;
    let rid = ResourceId::parse(&spec.resource_id).map_err(|e| e.to_string())?;
    let fs = HostFs::new(Path::new(MERGED));
    let copy_dir = Path::new(&spec.copy_dir);
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the async runtime: {e}"))?;
    tokio.block_on(async {
        let planned =
            plan::plan_interrupt(&fs, &rt, &rid, copy_dir, interrupt.as_ref(), env.to_vec())
                .await
                .map_err(|e| Chain(&e).to_string())?;
        if let Some(f) = &planned.failure {
            return Err(f.clone());
        }
        let mut queue = VecDeque::new();
        for op in &planned.operations {
            let action = op.action.as_str().to_owned();
            if action == "run" {
                queue.push_back(op.policy == Some(CompletionPolicy::AfterReboot));
            }
            report.operations.push(InterruptOperation {
                operation: op.operation.clone(),
                command: op.command.clone(),
                policy: op.policy.map(|p| match p {
                    CompletionPolicy::OnSuccess => "on-success".to_owned(),
                    CompletionPolicy::AfterReboot => "after-reboot".to_owned(),
                }),
                action,
                reason: op.reason.clone(),
            });
        }
        let runner = Arc::new(Simulated(Mutex::new(queue)));
        // A dry run (nothing printed, no timeouts), with a runner that answers.
        let run = async |runner: Arc<Simulated>| {
            let mut settings = plan::dry_settings(&fs, &rt, &rid, copy_dir, env.to_vec());
            settings.exec.runner = runner;
            let run = runner::run(settings, interrupt.as_ref()).await;
            run.result.map_err(|e| Chain(&e).to_string())
        };
        if run(runner.clone()).await? == InterruptOutcome::Completed {
            return Ok(());
        }
        // The reboot "happened": a new boot ID, then the protocol completes the pending
        // operation as the next run after a real reboot does.
        report.simulated_reboot = Some(report::SimulatedReboot {
            boot_id_before: read_boot_id(&fs).map_err(|e| e.to_string())?,
            boot_id_after: new_boot_id()?,
        });
        match run(runner).await? {
            InterruptOutcome::Completed => Ok(()),
            InterruptOutcome::ShutdownInProgress => {
                Err("the operation asked for a reboot again after the simulated reboot".to_owned())
            }
        }
    })
}

/// Runs nothing: for each command the plan said would run, in order, it answers as the
/// command would end: an after-reboot operation as a reboot ends it (SIGTERM), any other with
/// exit code 0.
#[derive(Debug)]
struct Simulated(Mutex<VecDeque<bool>>);

#[async_trait::async_trait]
impl exec::Runner for Simulated {
    async fn run(
        &self,
        _cfg: &exec::Config,
        _spec: &ProcessSpec,
        _log: Option<&mut File>,
    ) -> Result<Outcome, ExecError> {
        let after_reboot = self
            .0
            .lock()
            .expect("not poisoned")
            .pop_front()
            .unwrap_or(false);
        Ok(Outcome::new(if after_reboot {
            Termination::Signalled(libc::SIGTERM)
        } else {
            Termination::Exited(0)
        }))
    }
}

/// One line per finished stage in `OUT/stages.jsonl` and `OUT/stages.txt`, for a sandbox that
/// ends early.
fn append_progress(stage: &StageReport) {
    let mut json = serde_json::to_vec(stage).expect("serializes");
    json.push(b'\n');
    let text = format!("{}\n", report::stage_line(stage));
    for (file, line) in [
        ("stages.jsonl", json.as_slice()),
        ("stages.txt", text.as_bytes()),
    ] {
        if let Ok(mut f) = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(Path::new(OUT).join(file))
        {
            let _ = std::io::Write::write_all(&mut f, line);
        }
    }
}
