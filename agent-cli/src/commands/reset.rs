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
use agent_core::host::identity::{NotAComponent, ResourceId, path_component};
use agent_core::host::runtime::Runtime;
use agent_core::package::config::PackageConfig;
use agent_core::package::step::{Mode, Step};
use agent_core::stage::decide::join_under;
use agent_core::state::interrupt_markers;
use agent_core::state::locks::{self, Holder, TryLock};
use agent_core::state::markers::StepMarkers;
use agent_core::state::results::{self, OperationResult, RunRecord, RunState};
use agent_core::state::status::RESET_MODE;
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
package's lock (or the interrupt resource's lock); with --yes it holds that lock itself from
before it looks for the files until the reset is recorded, so an agent started meanwhile waits.

Step markers are removed under both names (the legacy and the Go agent's); interrupt markers
are the .complete, .pending and .attempts files of each operation. The history file, logs and
results records are kept.

State directory (as for status, plan and logs): --state-dir, else SKYHOOK_ROOT_DIR, else the one
directory of the operator's layout (/var/lib/skyhook/<name>) that holds state; the `state:` line
says which.

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
    #[arg(long, value_name = "NAME", conflicts_with = "interrupt", value_parser = package_name)]
    package: Option<String>,
    /// With --package: only this version (default: every version).
    #[arg(long, value_name = "VERSION", requires = "package", value_parser = package_version)]
    package_version: Option<String>,
    /// The interrupt markers of this resource ID (<prefix>_<package>_<version>).
    #[arg(long, value_name = "RESOURCE_ID", value_parser = resource_id)]
    interrupt: Option<ResourceId>,
    /// With --interrupt: only this operation, `<type>_<index>` (e.g. node_restart_0).
    #[arg(long, value_name = "OPERATION", requires = "interrupt", value_parser = operation)]
    operation: Option<Operation>,
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

// SPEC §5: every option that becomes a path component passes the one rule while the command
// line is parsed, so a bad name is a usage error before anything is read or removed.
fn package_name(s: &str) -> Result<String, NotAComponent> {
    path_component("package name", s).map(|()| s.to_owned())
}

fn package_version(s: &str) -> Result<String, NotAComponent> {
    path_component("package version", s).map(|()| s.to_owned())
}

fn resource_id(s: &str) -> Result<ResourceId, String> {
    ResourceId::parse(s)
        .and_then(|r| r.check_directory_name().map(|()| r))
        .map_err(|e| e.to_string())
}

/// An interrupt operation, `<type>_<index>`: its markers are `<type>_<index>.<state>`.
#[derive(Debug, Clone)]
struct Operation {
    name: String,
    kind: String,
    index: usize,
}

fn operation(s: &str) -> Result<Operation, String> {
    path_component("operation", s).map_err(|e| e.to_string())?;
    s.rsplit_once('_')
        .and_then(|(k, i)| Some((k, i.parse::<usize>().ok()?)))
        .filter(|(k, _)| !k.is_empty())
        .map(|(kind, index)| Operation {
            name: s.to_owned(),
            kind: kind.to_owned(),
            index,
        })
        .ok_or_else(|| format!("{s:?} is not <type>_<index> (e.g. node_restart_0)"))
}

const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;

/// What one reset touches: the files of one package version (or interrupt resource).
#[derive(Debug)]
struct Target {
    package: String,
    version: String,
    resource_id: String,
    /// Host paths of the files to remove.
    files: Vec<PathBuf>,
}

/// The answer, as `--format json` prints it.
#[derive(Debug, Serialize)]
struct Report {
    /// What was asked for, in words.
    scope: String,
    /// The STATE read, and how it was chosen.
    state_dir: PathBuf,
    state_source: &'static str,
    #[serde(skip)]
    state_line: String,
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
    let located =
        super::state::locate_one(&fs, rt, args.state_dir.as_deref()).map_err(Failure::Usage)?;
    let rt = located.runtime(rt);
    let what = if let Some(copy_dir) = &args.copy_dir {
        What::Steps(select_steps(&fs, copy_dir, args)?)
    } else if let Some(package) = &args.package {
        What::Package {
            name: package,
            version: args.package_version.as_deref(),
        }
    } else if let Some(rid) = &args.interrupt {
        What::Interrupt {
            rid,
            operation: args.operation.as_ref(),
        }
    } else {
        return Err(Failure::Usage(
            "say what to reset: COPY_DIR (with --stage or --step), --package or --interrupt".into(),
        ));
    };
    let scope = what.scope();
    let lock = what.lock(&rt.state_dir);

    // SPEC §11: refuse while an agent works on it. With --yes the lock is taken before the
    // markers are listed and held until the record is written, so an agent that starts
    // meanwhile waits for the whole reset instead of skipping a step whose marker the reset
    // then removes.
    let refuse = |holder: &Holder| {
        Failure::Failed(format!(
            "refusing to reset {scope}: an agent is running it ({}, lock {}); wait for it to \
             finish (`agent status` shows it) and try again",
            describe(holder),
            lock.display()
        ))
    };
    let held = if args.yes {
        match locks::try_acquire(&fs, &lock, read_boot_id(&fs).ok().as_deref()) {
            Ok(TryLock::Acquired(guard)) => Some(guard),
            Ok(TryLock::Busy(holder)) => return Err(refuse(&holder)),
            Err(e) => return Err(Failure::Failed(chain(&e))),
        }
    } else {
        match locks::holder(&fs, &lock).map_err(|e| Failure::Failed(chain(&e)))? {
            Some(holder) => return Err(refuse(&holder)),
            None => None,
        }
    };

    let targets = what.targets(&fs, &rt)?;
    let files = targets
        .iter()
        .flat_map(|t| t.files.iter().map(|f| f.display().to_string()))
        .collect();
    let mut records = Vec::new();
    if args.yes {
        for t in &targets {
            records.push(remove_and_record(&fs, &rt, t, &scope)?);
        }
    }
    drop(held);
    Ok(Report {
        scope,
        state_dir: located.state_dir.clone(),
        state_source: located.source,
        state_line: located.line(),
        removed: args.yes,
        files,
        records,
    })
}

/// What a reset is asked to make run again, known before STATE is read: its scope and the lock
/// that guards it.
enum What<'a> {
    Steps(Selected),
    Package {
        name: &'a str,
        version: Option<&'a str>,
    },
    Interrupt {
        rid: &'a ResourceId,
        operation: Option<&'a Operation>,
    },
}

/// Steps of the package in COPY_DIR, selected from its config.json.
struct Selected {
    package: String,
    version: String,
    steps: Vec<Step>,
    scope: String,
}

impl What<'_> {
    fn scope(&self) -> String {
        match self {
            What::Steps(s) => s.scope.clone(),
            What::Package {
                name,
                version: Some(v),
            } => format!("every step of package {name} {v}"),
            What::Package {
                name,
                version: None,
            } => format!("every step of package {name} (every version)"),
            What::Interrupt {
                rid,
                operation: Some(op),
            } => format!("interrupt operation {} of {}", op.name, rid.id),
            What::Interrupt {
                rid,
                operation: None,
            } => format!("every interrupt operation of {}", rid.id),
        }
    }

    fn lock(&self, state_dir: &Path) -> PathBuf {
        match self {
            What::Steps(s) => locks::package_lock_path(state_dir, &s.package),
            What::Package { name, .. } => locks::package_lock_path(state_dir, name),
            What::Interrupt { rid, .. } => locks::interrupt_lock_path(state_dir, &rid.id),
        }
    }

    /// The files to remove, found under STATE (called with the lock held).
    fn targets(&self, fs: &HostFs, rt: &Runtime) -> Result<Vec<Target>, Failure> {
        match self {
            What::Steps(s) => Ok(vec![step_files(fs, rt, s)?]),
            What::Package { name, version } => package_files(fs, rt, name, *version),
            What::Interrupt { rid, operation } => {
                Ok(vec![interrupt_files(fs, rt, rid, *operation)?])
            }
        }
    }
}

/// The steps of the package in COPY_DIR: one step, the steps of one stage, or all of them.
fn select_steps(fs: &HostFs, copy_dir: &Path, args: &Reset) -> Result<Selected, Failure> {
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
    let steps: Vec<Step> = config
        .modes
        .iter()
        .filter(|(m, _)| mode.is_none_or(|want| **m == want))
        .flat_map(|(_, steps)| steps.iter())
        .filter(|s| args.step.as_deref().is_none_or(|p| s.path == p))
        .cloned()
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
    let scope = match &args.step {
        Some(p) => format!("step {p} of {where_}"),
        None => format!("every step of {where_}"),
    };
    Ok(Selected {
        package: name.clone(),
        version: version.clone(),
        steps,
        scope,
    })
}

/// The markers of the selected steps that are present, under both names.
fn step_files(fs: &HostFs, rt: &Runtime, s: &Selected) -> Result<Target, Failure> {
    let flags_dir = rt.package_flags_dir(&s.package, &s.version);
    let mut files = Vec::new();
    for step in &s.steps {
        let m = StepMarkers::new(&flags_dir, step);
        for marker in m.legacy.iter().chain(std::iter::once(&m.native)) {
            if present(fs, marker)? && !files.contains(marker) {
                files.push(marker.clone());
            }
        }
    }
    Ok(Target {
        package: s.package.clone(),
        version: s.version.clone(),
        resource_id: rt.resource_id.clone(),
        files,
    })
}

/// Every completion marker of a package (every version unless one is named), found by listing
/// its marker directories: no package directory needed.
fn package_files(
    fs: &HostFs,
    rt: &Runtime,
    package: &str,
    version: Option<&str>,
) -> Result<Vec<Target>, Failure> {
    let versions = match version {
        Some(v) => vec![v.to_owned()],
        None => list(fs, &rt.flags_dir().join(package))?,
    };
    let mut targets = Vec::new();
    for v in versions {
        let mut files = Vec::new();
        walk(fs, &rt.package_flags_dir(package, &v), &mut files)?;
        targets.push(Target {
            package: package.to_owned(),
            version: v,
            resource_id: rt.resource_id.clone(),
            files,
        });
    }
    Ok(targets)
}

/// The `.complete`, `.pending` and `.attempts` markers of an interrupt resource, or of one of
/// its operations.
fn interrupt_files(
    fs: &HostFs,
    rt: &Runtime,
    rid: &ResourceId,
    operation: Option<&Operation>,
) -> Result<Target, Failure> {
    let dir = rt.state_dir.join("interrupts").join("flags").join(&rid.id);
    let mut files = Vec::new();
    if let Some(op) = operation {
        let (kind, index) = (op.kind.as_str(), op.index);
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
    }
    Ok(Target {
        package: rid.package.clone(),
        version: rid.version.clone(),
        resource_id: rid.id.clone(),
        files,
    })
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
                reason: format!("agent reset: {scope}").into(),
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
        result: Some(if error.is_some() {
            RunState::Failed
        } else {
            RunState::Succeeded
        }),
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
    let _ = writeln!(s, "{}", r.state_line);
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
