//! `agent reset`: make a step, a stage, a package or an interrupt resource run again by
//! removing its completion state, after showing what it would remove (SPEC §1.4, ext).
//!
//! Every path comes from the module that owns it: step markers from
//! [`StepMarkers`](agent_core::state::markers::StepMarkers), interrupt markers from
//! [`agent_core::state::interrupt_markers`], locks from [`agent_core::state::locks`], the record from
//! [`agent_core::state::results`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use agent_core::compat::timestamp;
use agent_core::host::boot::read_boot_id;
use agent_core::host::fs::{HostFs, is_temp_name};
use agent_core::host::identity::ResourceId;
use agent_core::host::runtime::Runtime;
use agent_core::package::config::PackageConfig;
use agent_core::package::step::{Mode, Step};
use agent_core::stage::decide::join_under;
use agent_core::state::interrupt_markers;
use agent_core::state::locks::{self, Holder, TryLock};
use agent_core::state::markers::StepMarkers;
use agent_core::state::results::{self, OperationResult, RecordedResult, ResultsRecord};
use agent_core::state::status::RESET_MODE;
use serde::Serialize;

use crate::cli::{Operation, Reset, Verbosity};
use crate::output::{self, Failure};

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

pub fn run(args: &Reset, verbosity: Verbosity) -> ExitCode {
    match super::state::runtime(verbosity).and_then(|rt| reset(&rt, args)) {
        Ok(report) => {
            output::print_result(args.format, &report, || render(&report));
            ExitCode::SUCCESS
        }
        Err(f) => output::fail(args.format, &["reset"], "agent reset failed", &f),
    }
}

fn reset(rt: &Runtime, args: &Reset) -> Result<Report, Failure> {
    let fs = HostFs::new(&args.root);
    let (rt, located) = super::state::locate_one(&fs, rt, args.state_dir.as_deref())?;
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
        return Err(Failure::usage(
            "say what to reset: COPY_DIR (with --stage or --step), --package or --interrupt",
        ));
    };
    let scope = what.scope();
    let lock = what.lock(&rt.state_dir);

    // SPEC §11: refuse while an agent works on it. With --yes the lock is taken before the
    // markers are listed and held until the record is written, so an agent that starts
    // meanwhile waits for the whole reset instead of skipping a step whose marker the reset
    // then removes.
    let refuse = |holder: &Holder| {
        Failure::failed(format!(
            "refusing to reset {scope}: an agent is running it ({}, lock {}); wait for it to \
             finish (`agent status` shows it) and try again",
            holder.describe(),
            lock.display()
        ))
    };
    let held = if args.yes {
        match locks::try_acquire(&fs, &lock, read_boot_id(&fs).ok().as_deref()) {
            Ok(TryLock::Acquired(guard)) => Some(guard),
            Ok(TryLock::Busy(holder)) => return Err(refuse(&holder)),
            Err(e) => return Err(Failure::failed(chain(&e))),
        }
    } else {
        match locks::holder(&fs, &lock).map_err(|e| Failure::failed(chain(&e)))? {
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
            What::Package { name, version } => format!(
                "every step of package {name} {}",
                version.unwrap_or("(every version)")
            ),
            What::Interrupt { rid, operation } => match operation {
                Some(op) => format!("interrupt operation {} of {}", op.name, rid.id),
                None => format!("every interrupt operation of {}", rid.id),
            },
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
        Failure::failed(format!("loading {}: {}", config_path.display(), chain(&e)))
    })?;
    let mode = args
        .stage
        .as_deref()
        .map(|m| {
            m.parse::<Mode>().map_err(|_| {
                Failure::usage(format!(
                    "--stage {m:?} is not a stage MODE{}",
                    crate::cli::suggest_mode(m)
                        .map(|s| format!("; did you mean {s}?"))
                        .unwrap_or_default()
                ))
            })
        })
        .transpose()?;
    let (name, version) = (&config.package_name, &config.package_version);
    let of_mode: Vec<&Step> = config
        .modes
        .iter()
        .filter(|(m, _)| mode.is_none_or(|want| **m == want))
        .flat_map(|(_, steps)| steps.iter())
        .collect();
    let steps: Vec<Step> = of_mode
        .iter()
        .copied()
        .filter(|s| args.step.as_deref().is_none_or(|p| s.path == p))
        .cloned()
        .collect();
    let where_ = match mode {
        Some(m) => format!("stage {m} of package {name} {version}"),
        None => format!("package {name} {version}"),
    };
    if steps.is_empty() {
        let known: Vec<&str> = of_mode.iter().map(|s| s.path.as_str()).collect();
        return Err(Failure::failed(match &args.step {
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
    let dir = interrupt_markers::resource_dir(&rt.state_dir, &rid.id);
    let names = match operation {
        Some(op) => vec![
            interrupt_markers::complete_name(&op.kind, op.index),
            interrupt_markers::pending_name(&op.kind, op.index),
            interrupt_markers::attempts_name(&op.kind, op.index),
        ],
        None => list(fs, &dir)?
            .into_iter()
            .filter(|name| {
                [".complete", ".pending", ".attempts"]
                    .iter()
                    .any(|ext| name.ends_with(ext))
            })
            .collect(),
    };
    let mut files = Vec::new();
    for path in names.into_iter().map(|name| dir.join(name)) {
        if present(fs, &path)? {
            files.push(path);
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
    let record = ResultsRecord {
        agent_version: crate::version::version().to_owned(),
        git_sha: crate::version::GIT_SHA.to_owned(),
        mode: RESET_MODE.to_owned(),
        resource_id: t.resource_id.clone(),
        package: t.package.clone(),
        version: t.version.clone(),
        started,
        finished: timestamp::rfc3339_nano(SystemTime::now()),
        exit_code: u8::from(error.is_some()),
        result: Some(if error.is_some() {
            RecordedResult::Failed
        } else {
            RecordedResult::Succeeded
        }),
        error: error.clone(),
        operations,
    };
    let path = record.path(&rt.state_dir);
    let written = results::write(fs, &path, &record);
    if let Some(e) = error {
        return Err(Failure::failed(e));
    }
    written.map_err(|e| {
        Failure::failed(format!(
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
        .map_err(|e| Failure::failed(format!("checking {}: {}", path.display(), chain(&e))))
}

fn list(fs: &HostFs, dir: &Path) -> Result<Vec<String>, Failure> {
    Ok(fs
        .list_dir(dir)
        .map_err(|e| Failure::failed(format!("listing {}: {}", dir.display(), chain(&e))))?
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

fn render(r: &Report) -> String {
    let mut s = String::new();
    push_line!(s, "reset: {}", r.scope);
    push_line!(s, "{}", r.state_line);
    if r.files.is_empty() {
        push_line!(s, "nothing to remove: it already runs again");
        return s;
    }
    if r.removed {
        push_line!(s, "removed:");
    } else {
        push_line!(
            s,
            "would remove (nothing was removed; add --yes to remove):"
        );
    }
    for f in &r.files {
        push_line!(s, "  {f}");
    }
    for record in &r.records {
        push_line!(s, "recorded in {record}");
    }
    s
}

fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    agent_core::host::errors::Chain(e).to_string()
}
