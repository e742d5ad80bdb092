//! `agent logs ROOT`: the logs the agent wrote on a host (SPEC §8.10) of a package's latest
//! run, or of one step or interrupt operation, without the reader knowing the log layout
//! (SPEC §1.5), as `journalctl -u` shows a unit's.
//!
//! Which run and which files come from their owners: the results records through
//! [`agent_core::state::status`], the log names through [`agent_core::state::logs`]. Nothing
//! is written.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;
use std::process::ExitCode;

use agent_core::exec::Output;
use agent_core::host::errors::Chain;
use agent_core::host::fs::HostFs;
use agent_core::host::runtime::Runtime;
use agent_core::state::logs;
use agent_core::state::results::{self, ResultsRecord};
use agent_core::state::status::{self, PackageStatus, Scope};
use serde::Serialize;

use super::state::Located;
use crate::cli::{Format, Logs, Verbosity};
use crate::output::{self, Failure};

/// The most of one log `--format json` carries: its end.
const JSON_CONTENT_BOUND: u64 = 1 << 20;

/// The answer, as `--format json` prints it.
#[derive(Debug, Serialize)]
struct Report {
    /// What is shown, in words (the `logs:` line).
    showing: String,
    /// The STATE read, how it was chosen, and its LOGS.
    #[serde(flatten)]
    state: Located,
    package: String,
    version: String,
    /// The run the logs come from (without --step or --operation).
    run: Option<ShownRun>,
    logs: Vec<Entry>,
}

/// The run whose logs are shown.
#[derive(Debug, Serialize)]
struct ShownRun {
    mode: String,
    started: String,
    finished: String,
    exit_code: u8,
    /// `running`, `succeeded`, `failed`, `stopped`; `null` in records of earlier versions.
    result: Option<results::RecordedResult>,
    /// Host path of its results record.
    record: String,
}

/// One log shown.
#[derive(Debug, Default, Serialize)]
struct Entry {
    /// The step path, or the interrupt operation's command line (`<type>` for one log of an
    /// interrupt type).
    operation: String,
    /// Host path of the log file, when there is one to read.
    log: Option<String>,
    /// Why no log is shown, when none is.
    missing: Option<String>,
    /// A recorded run's operation: the last 4 KiB of its output, from the results record
    /// (what the text form shows when there is no log to read).
    output_tail: Option<String>,
    /// JSON only: the log's text (its last [`JSON_CONTENT_BOUND`] bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    /// JSON only: bytes of the log before `content`.
    #[serde(skip_serializing_if = "Option::is_none")]
    truncated_bytes: Option<u64>,
}

pub fn run(args: &Logs, verbosity: Verbosity) -> ExitCode {
    match show(args, verbosity) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => output::fail(args.format, &["logs"], "agent logs failed", &f),
    }
}

fn show(args: &Logs, verbosity: Verbosity) -> Result<(), Failure> {
    let rt = super::state::runtime(verbosity)?;
    let fs = HostFs::new(&args.root);
    let mut report = find(&fs, &rt, args)?;
    let out = Output::process();
    if args.format == Format::Text {
        return render(&fs, &mut report, &out).map_err(Failure::failed);
    }
    for entry in &mut report.logs {
        entry.read_tail(&fs).map_err(Failure::failed)?;
    }
    out.print(&output::document(&report));
    Ok(())
}

/// Which logs to show.
fn find(fs: &HostFs, rt: &Runtime, args: &Logs) -> Result<Report, Failure> {
    let (rt, located) = super::state::locate_one(fs, rt, args.state_dir.as_deref())?;
    let status = status::collect_scoped(
        fs,
        &rt,
        Scope {
            package: args.package.as_deref(),
            own_pid: None,
        },
    );
    let state = located.state_dir.display();
    let package = match (&args.package, status.packages.as_slice()) {
        (Some(name), found) => found.iter().find(|p| &p.name == name).ok_or_else(|| {
            Failure::failed(format!("no state of package {name:?} under {state}"))
        })?,
        (None, [only]) => only,
        (None, []) => {
            return Err(Failure::failed(format!(
                "no package state under {state}: nothing has run there"
            )));
        }
        (None, several) => {
            return Err(Failure::usage(format!(
                "several packages have state under {state} ({}); choose one with --package",
                several
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    };
    let version = version_of(package, args.package_version.as_deref())?;
    let log_dir = rt.package_log_dir(&package.name, &version);
    let n = usize::try_from(args.run).unwrap_or(usize::MAX);
    let (what, detail, run, entries) = match (&args.step, &args.operation) {
        (Some(step), _) => one_log(fs, &log_dir, (step, &format!("step {step}")), n)?,
        (None, Some(kind)) => one_log(
            fs,
            &log_dir,
            (&format!("interrupts/{kind}"), &format!("interrupt {kind}")),
            n,
        )?,
        (None, None) => one_run(&rt, package, args.package_version.as_deref(), n)?,
    };
    Ok(Report {
        showing: format!("{what} of package {} {version}: {detail}", package.name),
        package: package.name.clone(),
        version,
        run,
        logs: entries,
        state: located,
    })
}

/// `--package-version`, else the version of the package's latest run, else its only version.
fn version_of(package: &PackageStatus, asked: Option<&str>) -> Result<String, Failure> {
    if let Some(v) = asked {
        return Ok(v.to_owned());
    }
    if let Some((v, _)) = package.runs_newest_first().first() {
        return Ok((*v).to_owned());
    }
    match package.versions.as_slice() {
        [only] => Ok(only.version.clone()),
        [] => Err(Failure::failed(format!(
            "package {} has no version with state: nothing has run",
            package.name
        ))),
        several => Err(Failure::usage(format!(
            "package {} has several versions and no recorded run says which to show ({}); \
             choose one with --package-version",
            package.name,
            several
                .iter()
                .map(|v| v.version.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// What is shown (`step s1.sh`, `run 1`), more about it, the run, the logs.
type Found = (String, String, Option<ShownRun>, Vec<Entry>);

/// The `n`th newest log of `rel` (a step path, or `interrupts/<type>`) under `log_dir`;
/// `what` names it (`step s1.sh`, `interrupt node_restart`).
fn one_log(
    fs: &HostFs,
    log_dir: &Path,
    (rel, what): (&str, &str),
    n: usize,
) -> Result<Found, Failure> {
    let found = logs::logs_of(fs, log_dir, rel).map_err(|e| {
        Failure::failed(format!(
            "listing the logs of {what} in {}: {}",
            log_dir.display(),
            Chain(&e)
        ))
    })?;
    let Some(log) = found.get(n - 1) else {
        return Err(Failure::failed(if found.is_empty() {
            format!("no log of {what} in {}", log_dir.display())
        } else {
            format!(
                "--run {n}: {} logs of {what} are kept in {} (the agent keeps the 5 newest)",
                found.len(),
                log_dir.display()
            )
        }));
    };
    let name = rel.strip_prefix("interrupts/").unwrap_or(rel);
    Ok((
        what.to_owned(),
        format!("log {n} of {} kept (newest first)", found.len()),
        None,
        vec![Entry::of_file(name, log)],
    ))
}

/// The logs of the `n`th most recent run of the package (of `version`, when given).
fn one_run(
    rt: &Runtime,
    package: &PackageStatus,
    version: Option<&str>,
    n: usize,
) -> Result<Found, Failure> {
    let runs: Vec<(&str, &ResultsRecord)> = package
        .runs_newest_first()
        .into_iter()
        .filter(|(v, _)| version.is_none_or(|want| want == *v))
        .collect();
    let Some((_, record)) = runs.get(n - 1) else {
        return Err(Failure::failed(if runs.is_empty() {
            format!(
                "no recorded run of package {}{}",
                package.name,
                version.map(|v| format!(" {v}")).unwrap_or_default()
            )
        } else {
            format!(
                "--run {n}: {} runs of package {} are recorded (the last of each stage, and \
                 of the interrupt)",
                runs.len(),
                package.name
            )
        }));
    };
    let mut entries: Vec<Entry> = Vec::new();
    for op in record.operations.iter().filter(|op| op.decision == "ran") {
        // An interrupt run keeps one log for all its operations: shown once.
        if op.log.is_some() && entries.iter().any(|e| e.log == op.log) {
            continue;
        }
        entries.push(Entry::of_operation(rt, op));
    }
    let ended = if record.is_running() {
        format!("{}, started {}, not finished", record.mode, record.started)
    } else {
        let result = record
            .result
            .map_or_else(String::new, |r| format!(" ({})", r.as_str()));
        format!(
            "{}, finished {}, exit {}{result}",
            record.mode, record.finished, record.exit_code
        )
    };
    Ok((
        format!("run {n}"),
        ended,
        Some(ShownRun {
            mode: record.mode.clone(),
            started: record.started.clone(),
            finished: record.finished.clone(),
            exit_code: record.exit_code,
            result: record.result,
            record: record.path(&rt.state_dir).display().to_string(),
        }),
        entries,
    ))
}

impl Entry {
    fn of_file(name: &str, log: &Path) -> Self {
        Self {
            operation: name.to_owned(),
            log: Some(log.display().to_string()),
            ..Self::default()
        }
    }

    /// An operation of a recorded run: its log when the record names one inside LOGS, else
    /// why not, with the record's tail of its output.
    fn of_operation(rt: &Runtime, op: &results::OperationResult) -> Self {
        let missing = match op.log.as_deref() {
            None => Some("no log: logs were off (SKYHOOK_AGENT_WRITE_LOGS=false)".to_owned()),
            Some(text) if text.starts_with("not written") => Some(format!("no log: {text}")),
            // The record is a file on the host: read only logs where the agent writes them.
            Some(path) if !inside(Path::new(path), &rt.log_dir) => Some(format!(
                "the record names {path}, which is not under LOGS ({}): not read",
                rt.log_dir.display()
            )),
            Some(_) => None,
        };
        Self {
            operation: op.operation.clone(),
            log: op.log.clone().filter(|_| missing.is_none()),
            output_tail: op.output_tail.clone(),
            missing,
            ..Self::default()
        }
    }

    /// Open the log (through the rooted lookup: no symbolic links, nothing outside ROOT).
    /// One that has gone since its run (retention) is noted as such; `None` then, and when
    /// there is no log to read.
    fn open(&mut self, fs: &HostFs) -> Result<Option<(String, std::fs::File)>, String> {
        let Some(path) = self.log.clone() else {
            return Ok(None);
        };
        match fs.open_file(Path::new(&path)) {
            Ok(Some(file)) => Ok(Some((path, file))),
            Ok(None) => {
                self.log = None;
                self.missing = Some(format!(
                    "{path} has been removed since (the agent keeps the 5 newest logs of each \
                     step)"
                ));
                Ok(None)
            }
            Err(e) => Err(format!("opening {path}: {}", Chain(&e))),
        }
    }

    /// JSON: the end of the log, at most [`JSON_CONTENT_BOUND`] bytes.
    fn read_tail(&mut self, fs: &HostFs) -> Result<(), String> {
        let Some((path, mut file)) = self.open(fs)? else {
            return Ok(());
        };
        let len = file.metadata().map_err(|e| format!("{path}: {e}"))?.len();
        let skip = len.saturating_sub(JSON_CONTENT_BOUND);
        file.seek(SeekFrom::Start(skip))
            .map_err(|e| format!("reading {path}: {e}"))?;
        let mut bytes = Vec::new();
        file.take(JSON_CONTENT_BOUND)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("reading {path}: {e}"))?;
        self.content = Some(String::from_utf8_lossy(&bytes).into_owned());
        self.truncated_bytes = Some(skip);
        Ok(())
    }
}

/// Whether host path `path` is below `dir` (both cleaned, so no `..` climbs out).
fn inside(path: &Path, dir: &Path) -> bool {
    match (HostFs::clean(path), HostFs::clean(dir)) {
        (Ok(p), Ok(d)) => p.starts_with(&d) && p != d,
        _ => false,
    }
}

/// The text form: what is shown, the state line, then each log as the agent wrote it,
/// streamed (a log of any size takes no more memory than a buffer).
fn render(fs: &HostFs, report: &mut Report, out: &Output) -> Result<(), String> {
    let write = |bytes: &[u8]| {
        // SPEC §10: a closed stdout (`agent logs … | head`) ends the output, not the agent.
        let _ = out.stdout.write_all(bytes);
    };
    write(format!("logs: {}\n{}\n", report.showing, report.state.line()).as_bytes());
    if let Some(run) = &report.run {
        write(format!("record: {}\n", run.record).as_bytes());
    }
    match &report.run {
        _ if !report.logs.is_empty() => {}
        Some(run) if run.result == Some(results::RecordedResult::Running) => write(
            b"\nthe run has not recorded its steps yet (it is running, or it ended without \
              recording its result): --step PATH shows a step's newest log\n",
        ),
        _ => write(b"\nno step or operation of this run ran a process: there is no log\n"),
    }
    for entry in &mut report.logs {
        if let Some((path, mut file)) = entry.open(fs)? {
            write(format!("\n==> {}: {path} <==\n", entry.operation).as_bytes());
            let mut buf = vec![0u8; 64 * 1024];
            let mut last = b'\n';
            loop {
                let n = file
                    .read(&mut buf)
                    .map_err(|e| format!("reading {path}: {e}"))?;
                if n == 0 {
                    break;
                }
                write(&buf[..n]);
                last = buf[n - 1];
            }
            if last != b'\n' {
                write(b"\n");
            }
            continue;
        }
        let why = entry.missing.as_deref().unwrap_or("no log");
        let tail = entry.output_tail.as_deref().filter(|t| !t.is_empty());
        let from = if tail.is_some() {
            "; the last 4 KiB of its output, from the results record"
        } else {
            ""
        };
        write(format!("\n==> {}: {why}{from} <==\n", entry.operation).as_bytes());
        if let Some(tail) = tail {
            write(tail.as_bytes());
            if !tail.ends_with('\n') {
                write(b"\n");
            }
        }
    }
    Ok(())
}
