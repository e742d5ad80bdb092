//! `agent reset`: make a step, a stage, a package or an interrupt resource run again by
//! removing its completion state, after showing what it would remove (SPEC §1.4, ext).
//!
//! Every path comes from the module that owns it: step markers from
//! [`StepMarkers`](agent_core::state::markers::StepMarkers), interrupt markers from
//! [`agent_core::state::interrupt_markers`], locks from [`agent_core::state::locks`], the record from
//! [`agent_core::state::results`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use agent_core::compat::timestamp;
use agent_core::exec::Output;
use agent_core::host::boot::read_boot_id;
use agent_core::host::fs::{HostFs, is_temp_name};
use agent_core::host::identity::ResourceId;
use agent_core::host::runtime::Runtime;
use agent_core::package::config::PackageConfig;
use agent_core::package::step::Mode;
use agent_core::stage::decide::join_under;
use agent_core::state::interrupt_markers;
use agent_core::state::locks::{self, Holder, TryLock};
use agent_core::state::markers::StepMarkers;
use agent_core::state::results::{self, OperationResult, RunRecord};
use agent_core::state::status::{self, RESET_MODE};
use serde::Serialize;

use super::interrupts::Format;

#[derive(Debug, clap::Args)]
#[command(
    override_usage = "agent reset [OPTIONS] ROOT_MOUNT COPY_DIR [--stage MODE] [--step PATH]\n       \
                      agent reset [OPTIONS] ROOT_MOUNT --package NAME [--package-version VERSION]\n       \
                      agent reset [OPTIONS] ROOT_MOUNT --interrupt RESOURCE_ID [--operation OPERATION]",
    after_help = "\
Without --yes nothing is removed: the files that would be removed are listed, as `agent plan`
lists what a run would do. With --yes they are removed and the reset is recorded in
STATE/results/<package>/<version>/reset.json. A reset refuses while an agent holds the
package's lock (or the interrupt resource's lock).

Step markers are removed under both names (the legacy and the Go agent's); interrupt markers
are the .complete, .pending and .attempts files of each operation. The history file, logs and
results records are kept.

State directory: --state-dir, else SKYHOOK_ROOT_DIR, else the one directory of the operator's
layout (/var/lib/skyhook/<name>) that holds state.

Exit codes:
  0  shown, or removed (also when there is nothing to remove)
  1  refused (lock held), no such step or stage, or a file could not be removed
  2  usage"
)]
pub struct Reset {
    /// The host root mount (`/` on the node itself, `/root` in an agent pod).
    #[arg(value_parser = absolute)]
    root: PathBuf,
    /// The package directory as a host path: reset its steps (all of them unless --stage or
    /// --step narrows it).
    #[arg(value_parser = absolute, conflicts_with_all = ["package", "interrupt"])]
    copy_dir: Option<PathBuf>,
    /// With COPY_DIR: only the steps of this stage MODE.
    #[arg(long, value_name = "MODE", requires = "copy_dir")]
    stage: Option<String>,
    /// With COPY_DIR: only this step (its path in config.json).
    #[arg(long, value_name = "PATH", requires = "copy_dir")]
    step: Option<String>,
    /// Every step marker of this package, without its package directory.
    #[arg(long, value_name = "NAME", conflicts_with = "interrupt")]
    package: Option<String>,
    /// With --package: only this version (default: every version).
    #[arg(long, value_name = "VERSION", requires = "package")]
    package_version: Option<String>,
    /// The interrupt markers of this resource ID (<prefix>_<package>_<version>).
    #[arg(long, value_name = "RESOURCE_ID")]
    interrupt: Option<String>,
    /// With --interrupt: only this operation, `<type>_<index>` (e.g. node_restart_0).
    #[arg(long, value_name = "OPERATION", requires = "interrupt")]
    operation: Option<String>,
    /// STATE as a host path, instead of SKYHOOK_ROOT_DIR or the one found on the host.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Remove the files; without it, only show them.
    #[arg(long)]
    yes: bool,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

fn absolute(s: &str) -> Result<PathBuf, String> {
    if s.starts_with('/') {
        HostFs::clean(Path::new(s)).map_err(|e| e.to_string())
    } else {
        Err(format!("{s:?} is not absolute"))
    }
}

const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;

/// What one reset touches: the files of one package version (or interrupt resource) and the
/// lock that guards them.
#[derive(Debug)]
struct Target {
    package: String,
    version: String,
    resource_id: String,
    lock: PathBuf,
    /// Host paths of the files to remove.
    files: Vec<PathBuf>,
}

/// The answer, as `--format json` prints it.
#[derive(Debug, Serialize)]
struct Report {
    /// What was asked for, in words.
    scope: String,
    /// Whether the files were removed (`--yes`).
    removed: bool,
    files: Vec<String>,
    /// Results records written.
    records: Vec<String>,
}

enum Failure {
    Usage(String),
    Failed(String),
}

pub fn run(args: &Reset) -> ExitCode {
    let rt = match Runtime::from_env() {
        Ok(rt) => rt,
        Err(e) => return fail(&Failure::Failed(e.to_string())),
    };
    crate::init_logging(&rt);
    match reset(&rt, args) {
        Ok(report) => {
            let text = match args.format {
                Format::Json => {
                    let mut s = serde_json::to_string_pretty(&report).expect("serializes");
                    s.push('\n');
                    s
                }
                Format::Text => render(&report),
            };
            Output::process().print(&text);
            ExitCode::SUCCESS
        }
        Err(f) => fail(&f),
    }
}

fn fail(f: &Failure) -> ExitCode {
    match f {
        Failure::Usage(m) => {
            eprintln!("error: {m}\n\nFor more information, try 'agent reset --help'.");
            ExitCode::from(EXIT_USAGE)
        }
        Failure::Failed(m) => {
            eprintln!("agent reset failed: {m}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn reset(rt: &Runtime, args: &Reset) -> Result<Report, Failure> {
    let fs = HostFs::new(&args.root);
    let state = state_dir(&fs, rt, args)?;
    let rt = Runtime {
        state_dir: state.clone(),
        ..rt.clone()
    };
    let (scope, targets) = if let Some(copy_dir) = &args.copy_dir {
        step_targets(&fs, &rt, copy_dir, args)?
    } else if let Some(package) = &args.package {
        package_targets(&fs, &rt, package, args.package_version.as_deref())?
    } else if let Some(rid) = &args.interrupt {
        interrupt_targets(&fs, &rt, rid, args.operation.as_deref())?
    } else {
        return Err(Failure::Usage(
            "say what to reset: COPY_DIR (with --stage or --step), --package or --interrupt".into(),
        ));
    };

    // Refuse while an agent works on it; with --yes hold the lock until the record is written.
    let boot_id = read_boot_id(&fs).ok();
    let mut held = Vec::new();
    for lock in unique(targets.iter().map(|t| t.lock.clone())) {
        let busy = if args.yes {
            match locks::try_acquire(&fs, &lock, boot_id.as_deref()) {
                Ok(TryLock::Acquired(guard)) => {
                    held.push(guard);
                    None
                }
                Ok(TryLock::Busy(holder)) => Some(holder),
                Err(e) => return Err(Failure::Failed(chain(&e))),
            }
        } else {
            locks::holder(&fs, &lock).map_err(|e| Failure::Failed(chain(&e)))?
        };
        if let Some(holder) = busy {
            return Err(Failure::Failed(format!(
                "refusing to reset {scope}: an agent is running it ({}, lock {}); wait for it \
                 to finish (`agent status` shows it) and try again",
                describe(&holder),
                lock.display()
            )));
        }
    }

    let mut files = Vec::new();
    for t in &targets {
        files.extend(t.files.iter().map(|f| f.display().to_string()));
    }
    let mut records = Vec::new();
    if args.yes {
        for t in &targets {
            records.push(remove_and_record(&fs, &rt, t, &scope)?);
        }
    }
    drop(held);
    Ok(Report {
        scope,
        removed: args.yes,
        files,
        records,
    })
}

/// `--state-dir`, else SKYHOOK_ROOT_DIR, else the one STATE of the operator's layout.
fn state_dir(fs: &HostFs, rt: &Runtime, args: &Reset) -> Result<PathBuf, Failure> {
    if let Some(dir) = &args.state_dir {
        return HostFs::clean(dir)
            .map_err(|e| Failure::Usage(format!("--state-dir {}: {e}", dir.display())));
    }
    if std::env::var_os("SKYHOOK_ROOT_DIR").is_some_and(|v| !v.is_empty()) {
        return Ok(rt.state_dir.clone());
    }
    let found = status::discover(fs, &rt.state_dir, &rt.log_dir);
    match found.as_slice() {
        [(state, _)] => Ok(state.clone()),
        many => Err(Failure::Usage(format!(
            "several state directories hold agent state ({}); choose one with --state-dir",
            many.iter()
                .map(|(s, _)| s.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The steps of the package in COPY_DIR: one step, the steps of one stage, or all of them.
fn step_targets(
    fs: &HostFs,
    rt: &Runtime,
    copy_dir: &Path,
    args: &Reset,
) -> Result<(String, Vec<Target>), Failure> {
    let package_dir = join_under(fs.root(), copy_dir);
    let config_path = package_dir.join("config.json");
    let (config, _warnings) = PackageConfig::load(&config_path, &package_dir.join("skyhook_dir"))
        .map_err(|e| {
        Failure::Failed(format!("loading {}: {}", config_path.display(), chain(&e)))
    })?;
    let mode = match &args.stage {
        None => None,
        Some(m) => Some(m.parse::<Mode>().map_err(|_| {
            Failure::Usage(format!(
                "--stage {m:?} is not a stage MODE{}",
                crate::request::suggest_mode(m)
                    .map(|s| format!("; did you mean {s}?"))
                    .unwrap_or_default()
            ))
        })?),
    };
    let (name, version) = (&config.package_name, &config.package_version);
    let steps: Vec<_> = config
        .modes
        .iter()
        .filter(|(m, _)| mode.is_none_or(|want| **m == want))
        .flat_map(|(m, steps)| steps.iter().map(move |s| (*m, s)))
        .filter(|(_, s)| args.step.as_deref().is_none_or(|p| s.path == p))
        .collect();
    let where_ = match mode {
        Some(m) => format!("stage {m} of package {name} {version}"),
        None => format!("package {name} {version}"),
    };
    if steps.is_empty() {
        let known: Vec<String> = config
            .modes
            .iter()
            .filter(|(m, _)| mode.is_none_or(|want| **m == want))
            .flat_map(|(_, s)| s.iter().map(|s| s.path.clone()))
            .collect();
        return Err(Failure::Failed(match &args.step {
            Some(p) => format!(
                "no step {p:?} in {where_}; its steps: {}",
                if known.is_empty() {
                    "(none)".to_owned()
                } else {
                    known.join(", ")
                }
            ),
            None => format!("{where_} has no steps"),
        }));
    }
    let flags_dir = rt.package_flags_dir(name, version);
    let mut files = Vec::new();
    for (_, step) in &steps {
        let m = StepMarkers::new(&flags_dir, step);
        for marker in m.legacy.iter().chain(std::iter::once(&m.native)) {
            if present(fs, marker)? && !files.contains(marker) {
                files.push(marker.clone());
            }
        }
    }
    let scope = match &args.step {
        Some(p) => format!("step {p} of {where_}"),
        None => format!("every step of {where_}"),
    };
    Ok((
        scope,
        vec![Target {
            package: name.clone(),
            version: version.clone(),
            resource_id: rt.resource_id.clone(),
            lock: locks::package_lock_path(&rt.state_dir, name),
            files,
        }],
    ))
}

/// Every completion marker of a package (every version unless one is named), found by listing
/// its marker directories: no package directory needed.
fn package_targets(
    fs: &HostFs,
    rt: &Runtime,
    package: &str,
    version: Option<&str>,
) -> Result<(String, Vec<Target>), Failure> {
    let package_flags = rt.flags_dir().join(package);
    let versions = match version {
        Some(v) => vec![v.to_owned()],
        None => list(fs, &package_flags)?,
    };
    let mut targets = Vec::new();
    for v in versions {
        let mut files = Vec::new();
        walk(fs, &rt.package_flags_dir(package, &v), &mut files)?;
        targets.push(Target {
            package: package.to_owned(),
            version: v,
            resource_id: rt.resource_id.clone(),
            lock: locks::package_lock_path(&rt.state_dir, package),
            files,
        });
    }
    let scope = match version {
        Some(v) => format!("every step of package {package} {v}"),
        None => format!("every step of package {package} (every version)"),
    };
    Ok((scope, targets))
}

/// The `.complete`, `.pending` and `.attempts` markers of an interrupt resource, or of one of
/// its operations.
fn interrupt_targets(
    fs: &HostFs,
    rt: &Runtime,
    rid: &str,
    operation: Option<&str>,
) -> Result<(String, Vec<Target>), Failure> {
    let parsed = ResourceId::parse(rid)
        .and_then(|r| r.check_directory_name().map(|()| r))
        .map_err(|e| Failure::Usage(format!("--interrupt: {e}")))?;
    let dir = rt.state_dir.join("interrupts").join("flags").join(rid);
    let mut files = Vec::new();
    let scope = if let Some(op) = operation {
        let (kind, index) = op
            .rsplit_once('_')
            .and_then(|(k, i)| Some((k, i.parse::<usize>().ok()?)))
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| {
                Failure::Usage(format!(
                    "--operation {op:?} is not <type>_<index> (e.g. node_restart_0)"
                ))
            })?;
        for name in [
            interrupt_markers::complete_name(kind, index),
            interrupt_markers::pending_name(kind, index),
            interrupt_markers::attempts_name(kind, index),
        ] {
            let path = dir.join(name);
            if present(fs, &path)? {
                files.push(path);
            }
        }
        format!("interrupt operation {op} of {rid}")
    } else {
        for name in list(fs, &dir)? {
            let path = dir.join(&name);
            let marker = [".complete", ".pending", ".attempts"]
                .iter()
                .any(|ext| name.ends_with(ext));
            if marker && present(fs, &path)? {
                files.push(path);
            }
        }
        format!("every interrupt operation of {rid}")
    };
    Ok((
        scope,
        vec![Target {
            package: parsed.package,
            version: parsed.version,
            resource_id: rid.to_owned(),
            lock: locks::interrupt_lock_path(&rt.state_dir, rid),
            files,
        }],
    ))
}

/// Remove a target's files, then record what was removed (SPEC §8.12).
fn remove_and_record(
    fs: &HostFs,
    rt: &Runtime,
    t: &Target,
    scope: &str,
) -> Result<String, Failure> {
    let started = timestamp::rfc3339_nano(SystemTime::now());
    let mut operations = Vec::new();
    let mut error = None;
    for file in &t.files {
        match fs.remove_file(file) {
            Ok(_) => operations.push(OperationResult {
                operation: file.display().to_string(),
                decision: "removed".into(),
                reason: format!("agent reset: {scope}"),
                succeeded: Some(true),
                ..OperationResult::default()
            }),
            Err(e) => {
                error = Some(format!("removing {}: {}", file.display(), chain(&e)));
                break;
            }
        }
    }
    let record = RunRecord {
        agent_version: crate::version().to_owned(),
        git_sha: crate::GIT_SHA.to_owned(),
        mode: RESET_MODE.to_owned(),
        resource_id: t.resource_id.clone(),
        package: t.package.clone(),
        version: t.version.clone(),
        started,
        finished: timestamp::rfc3339_nano(SystemTime::now()),
        exit_code: u8::from(error.is_some()),
        error: error.clone(),
        operations,
    };
    let path = results::path(&rt.state_dir, &t.package, &t.version, RESET_MODE);
    let written = results::write(fs, &path, &record);
    if let Some(e) = error {
        return Err(Failure::Failed(e));
    }
    written.map_err(|e| {
        Failure::Failed(format!(
            "the files were removed, but recording it in {} failed: {}",
            path.display(),
            chain(&e)
        ))
    })?;
    Ok(path.display().to_string())
}

/// Whether a marker file is there; anything other than a regular file at its path is an error
/// (a reset never removes through links or removes directories).
fn present(fs: &HostFs, path: &Path) -> Result<bool, Failure> {
    fs.is_file(path)
        .map_err(|e| Failure::Failed(format!("checking {}: {}", path.display(), chain(&e))))
}

fn list(fs: &HostFs, dir: &Path) -> Result<Vec<String>, Failure> {
    Ok(fs
        .list_dir(dir)
        .map_err(|e| Failure::Failed(format!("listing {}: {}", dir.display(), chain(&e))))?
        .into_iter()
        .filter(|n| !is_temp_name(n))
        .collect())
}

/// Every file below `dir` (legacy marker names nest directories).
fn walk(fs: &HostFs, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Failure> {
    for name in list(fs, dir)? {
        let path = dir.join(&name);
        if present(fs, &path).is_ok_and(|f| f) {
            out.push(path);
        } else if fs.list_dir(&path).is_ok() {
            walk(fs, &path, out)?;
        } else {
            // Neither a file nor a directory: say so rather than skip it silently.
            present(fs, &path)?;
        }
    }
    Ok(())
}

fn unique(items: impl Iterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

fn describe(h: &Holder) -> String {
    let mut text = format!(
        "pid {}",
        h.pid
            .map_or_else(|| "unknown".to_owned(), |p| p.to_string())
    );
    if let Some(s) = &h.started {
        let _ = write!(text, " since {s}");
    }
    text
}

fn render(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "reset: {}", r.scope);
    if r.files.is_empty() {
        let _ = writeln!(s, "nothing to remove: it already runs again");
        return s;
    }
    if r.removed {
        let _ = writeln!(s, "removed:");
    } else {
        let _ = writeln!(
            s,
            "would remove (nothing was removed; add --yes to remove):"
        );
    }
    for f in &r.files {
        let _ = writeln!(s, "  {f}");
    }
    for record in &r.records {
        let _ = writeln!(s, "recorded in {record}");
    }
    s
}

fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    agent_core::host::errors::Chain(e).to_string()
}
