//! `agent plan` (SPEC §1.4, ext): what a stage run would do on this host, with nothing run
//! and nothing written; and the vocabulary of plans ([`PlannedAction`], [`PlannedWrite`])
//! shared with the interrupt plan (`interrupt::plan`).
//!
//! A stage plan is the run itself: the run's walk (`stage::run`), with its decisions
//! ([`decide`]), over a `Recorder` of its effects: each step as the run would take it, each
//! state change it would make. Nothing runs, nothing is written, and reading state never
//! repairs it: a corrupt history file is reported, not moved aside. What the run's caller
//! does around the stage (pre-flight: resolv.conf, the package data and the `root_dir`
//! overlay; the package lock; the results record) is listed here.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::task::{Context, Poll, Waker};

use serde::Serialize;

use crate::host::errors::Chain;
use crate::host::fs::{HostFs, HostFsError, StateFailure, state_err};
use crate::host::preflight::{self, PreflightError};
use crate::host::runtime::Runtime;
use crate::package::config::{ConfigError, Finding, PackageConfig};
use crate::package::step::{Mode, Step};
pub use crate::stage::decide::PlannedAction;
use crate::stage::decide::{self, StepPaths, join_under};
use crate::stage::run::{At, Effects, Listed, Stage, StageError, StateResult, step_err, walk};
use crate::state::results;
use crate::state::{history, locks};

/// Why no plan could be made (the run itself would fail the same way, exit 1).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("loading {path}")]
    Config {
        path: String,
        #[source]
        source: ConfigError,
    },
    #[error("preparing the package data")]
    PackageData(#[source] PreflightError),
    /// Host state could not be read.
    #[error(transparent)]
    State(#[from] StageError),
}

/// The plan of one stage run.
#[derive(Debug, Clone, Serialize)]
pub struct StagePlan {
    pub mode: String,
    /// From config.json (they name markers, history, results and logs).
    pub package: String,
    pub version: String,
    /// COPY_DIR as a host path.
    pub copy_dir: String,
    /// Where config.json was read (a real path: under ROOT, or SKYHOOK_DATA_DIR for a legacy
    /// invocation whose COPY_DIR does not exist yet).
    pub config: String,
    /// The step markers' directory, as a host path.
    pub flags_dir: String,
    /// `[previous, current]` in upgrade stages.
    pub versions: Option<[String; 2]>,
    /// Things the run would do or warn about before and around the steps.
    pub notes: Vec<String>,
    /// config.json warnings (unknown fields, `_check` pairing).
    pub warnings: Vec<Finding>,
    pub steps: Vec<PlannedStep>,
    /// Host paths the run would create, replace or remove.
    pub writes: Vec<PlannedWrite>,
    /// Why the run would fail regardless of what its steps do.
    pub failure: Option<String>,
}

/// One host path a run would create, replace or remove.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedWrite {
    pub path: String,
    pub kind: WriteKind,
    /// When the run writes it (`None`: always), or what it is.
    pub condition: Option<String>,
    /// For a `root_dir` overlay file: the file in the package it would be copied from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Why an overlay file could not be compared with the host's (kind `unknown`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What a planned write is. Overlay files are compared with what is under ROOT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteKind {
    /// An overlay file with nothing at its host path.
    New,
    /// An overlay file whose host file has other content or permission bits.
    Changed,
    /// An overlay file whose host file already has this content and these bits.
    Unchanged,
    /// An overlay file whose host path could not be read (a link, a directory, an I/O error).
    Unknown,
    /// `/etc/resolv.conf` (COPY_RESOLV).
    ResolvConf,
    /// The package directory, copied from SKYHOOK_DATA_DIR.
    PackageData,
    /// Agent state: markers, history, results, check records.
    State,
    Lock,
    Log,
}

impl WriteKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Changed => "changed",
            Self::Unchanged => "unchanged",
            Self::Unknown => "unknown",
            Self::ResolvConf => "resolv-conf",
            Self::PackageData => "package-data",
            Self::State => "state",
            Self::Lock => "lock",
            Self::Log => "log",
        }
    }
}

impl PlannedWrite {
    pub(crate) fn new(path: impl Into<String>, kind: WriteKind, condition: Option<&str>) -> Self {
        Self {
            path: path.into(),
            kind,
            condition: condition.map(str::to_owned),
            source: None,
            note: None,
        }
    }
}

/// What the run would do with one step.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedStep {
    pub name: String,
    pub path: String,
    pub action: PlannedAction,
    pub reason: String,
    /// The execution header the run would print (only for steps that run).
    pub header: Option<String>,
    /// Arguments as the step would receive them: `env:` resolved, upgrade versions appended.
    pub arguments: Vec<String>,
    /// Variables the agent sets on top of its own environment for this step.
    pub env: BTreeMap<String, String>,
    /// Completion markers of this step that exist, relative to the step markers' directory.
    pub markers_present: Vec<String>,
    /// What else the run would do to this step (e.g. add execute bits to its file).
    pub notes: Vec<String>,
    pub on_host: bool,
    pub idempotence_disabled: bool,
}

/// Plan `mode` of the package at COPY_DIR (a cleaned host-absolute path) under `fs`'s ROOT.
/// `env` is the environment the run would inherit (`env:` arguments resolve against it).
pub fn plan_stage(
    fs: &HostFs,
    rt: &Runtime,
    mode: Mode,
    copy_dir: &Path,
    env: &[(OsString, OsString)],
) -> Result<StagePlan, PlanError> {
    let root = fs.root();
    let mut notes = Vec::new();
    let mut writes = Vec::new();
    if rt.copy_resolv {
        writes.push(PlannedWrite::new(
            "/etc/resolv.conf",
            WriteKind::ResolvConf,
            Some("COPY_RESOLV"),
        ));
    }
    let mut failure = resolv_failure(root, rt);
    let source = package_source(root, rt, copy_dir, &mut notes, &mut writes)?;

    let config_path = source.join("config.json");
    let (config, warnings) = PackageConfig::load(&config_path, &source.join("skyhook_dir"))
        .map_err(|source| PlanError::Config {
            path: config_path.display().to_string(),
            source,
        })?;

    if !mode.is_uninstall() {
        // SPEC §6.7: the run checks these before any step.
        for entry in &config.expected_config_files {
            if let Err(e) = preflight::check_config_file(&source.join("configmaps"), entry) {
                failure.get_or_insert(Chain(&e).to_string());
            }
        }
        // Nothing when there is no `root_dir` directory.
        let mut files = Vec::new();
        overlay_files(&source.join("root_dir"), Path::new("/"), &mut files);
        for (host_path, file) in &files {
            writes.push(overlay_write(fs, host_path, file));
        }
    }

    let flags_dir = rt.package_flags_dir(&config.package_name, &config.package_version);
    let start = writes.len();
    let plan = StagePlan {
        mode: mode.to_string(),
        package: config.package_name.clone(),
        version: config.package_version.clone(),
        copy_dir: display(copy_dir),
        config: display(&config_path),
        flags_dir: display(&flags_dir),
        versions: None,
        notes,
        warnings,
        steps: Vec::with_capacity(config.steps(mode).len()),
        writes,
        failure,
    };
    // The stage itself: the run's walk, its effects recorded.
    let config = &config;
    let stage = Stage {
        fs,
        rt,
        env,
        config,
        mode,
    };
    let mut rec = Recorder {
        stage: &stage,
        copy_dir,
        source: &source,
        flags_dir: &flags_dir,
        plan,
        closing: Vec::new(),
        log: None,
        stopped: None,
    };
    at_once(walk(&stage, &mut rec, &mut Vec::new()))?;
    let mut plan = rec.plan;
    // The package lock is taken before the stage starts; a plan lists it after START.
    let lock = locks::package_lock_path(&rt.state_dir, &config.package_name);
    let lock = PlannedWrite::new(display(&lock), WriteKind::Lock, None);
    plan.writes.insert(start + 1, lock);
    plan.writes.extend(rec.closing);
    let (package, version) = (&config.package_name, &config.package_version);
    plan.writes
        .push(results_write(rt, package, version, mode.as_str()));
    Ok(plan)
}

/// The results record `STATE/results/<package>/<version>/<name>.json` a run writes.
pub(crate) fn results_write(rt: &Runtime, pkg: &str, ver: &str, name: &str) -> PlannedWrite {
    let path = results::path(&rt.state_dir, pkg, ver, name);
    PlannedWrite::new(display(&path), WriteKind::State, None)
}

/// Run `walk` to its end at once: nothing a [`Recorder`] is asked for waits.
fn at_once<T>(walk: impl Future<Output = T>) -> T {
    let mut walk = std::pin::pin!(walk);
    match walk.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(done) => done,
        Poll::Pending => unreachable!("a plan's walk never waits"),
    }
}

/// SPEC §6.4: an existing package directory is used as is, else SKYHOOK_DATA_DIR is copied.
/// Returns where the package is read from.
fn package_source(
    root: &Path,
    rt: &Runtime,
    copy_dir: &Path,
    notes: &mut Vec<String>,
    writes: &mut Vec<PlannedWrite>,
) -> Result<PathBuf, PlanError> {
    let package_real = join_under(root, copy_dir);
    match std::fs::metadata(&package_real) {
        Ok(meta) if meta.is_dir() => Ok(package_real),
        Ok(_) => Err(PlanError::PackageData(PreflightError::Other(format!(
            "package directory {} exists and is not a directory",
            copy_dir.display()
        )))),
        Err(_) => {
            if !rt.data_dir.is_dir() {
                return Err(PlanError::PackageData(PreflightError::MissingPackageData {
                    package: package_real.display().to_string(),
                    data_dir: rt.data_dir.display().to_string(),
                }));
            }
            notes.push(format!(
                "{} does not exist: the run would copy SKYHOOK_DATA_DIR ({}) into it",
                copy_dir.display(),
                rt.data_dir.display()
            ));
            writes.push(PlannedWrite::new(
                display(copy_dir),
                WriteKind::PackageData,
                Some("copied from SKYHOOK_DATA_DIR"),
            ));
            Ok(rt.data_dir.clone())
        }
    }
}

/// The effects of a stage's walk, recorded into a [`StagePlan`]: the steps as the run would
/// take them, the state it would write. Nothing runs, nothing is written, and reading state
/// never repairs it.
struct Recorder<'a> {
    stage: &'a Stage<'a>,
    /// COPY_DIR, host-absolute.
    copy_dir: &'a Path,
    /// Where the package is read from.
    source: &'a Path,
    flags_dir: &'a Path,
    plan: StagePlan,
    /// The writes that close a check stage, each once.
    closing: Vec<PlannedWrite>,
    /// The log of the step that runs, listed after its markers.
    log: Option<PlannedWrite>,
    /// Why the steps from here on are not reached (a non-check step failed before them).
    stopped: Option<String>,
}

impl Effects for Recorder<'_> {
    fn change<'p>(
        &mut self,
        paths: impl IntoIterator<Item = &'p Path>,
        listed: Listed,
        _perform: impl FnOnce(&HostFs) -> StateResult,
    ) -> StateResult {
        let (writes, condition, once) = match listed {
            Listed::Here(condition) => (&mut self.plan.writes, condition, false),
            Listed::Closing(condition) => (&mut self.closing, condition, true),
        };
        for path in paths.into_iter().map(display) {
            if !(once && writes.iter().any(|w| w.path == path)) {
                writes.push(PlannedWrite::new(path, WriteKind::State, condition));
            }
        }
        Ok(())
    }

    fn note(&mut self, _mode: Mode, note: &str) {
        self.plan.notes.push(note.to_owned());
    }

    // The run's log of a failed check: a plan reports it itself.
    fn check_failed(&self, _step: &Step, _error: &StageError) {}

    fn previous_version(&mut self, file: &Path) -> Result<Option<String>, StateFailure> {
        let history =
            history::inspect(self.stage.fs, file).map_err(state_err("reading the history file"))?;
        if let Some(problem) = &history.problem {
            self.plan.notes.push(format!(
                "{}: {problem}; the previous version would be {}",
                file.display(),
                history::UNKNOWN_VERSION
            ));
            if history.corrupt {
                self.plan.writes.push(PlannedWrite::new(
                    format!("{}.backup", file.display()),
                    WriteKind::State,
                    Some("corrupt history moved aside"),
                ));
            }
        }
        let previous = history.previous_version();
        let current = self.stage.config.package_version.clone();
        self.plan.versions = Some([previous.clone(), current]);
        Ok(Some(previous))
    }

    // The run's log of its decisions: a plan reports them itself, and goes on past a failure.
    fn decided(&mut self, at: &At<'_>) -> Result<bool, StateFailure> {
        let Some(why) = self.stopped.clone() else {
            return Ok(true);
        };
        self.step(at, PlannedAction::NotReached, &why)?;
        Ok(false)
    }

    fn step(&mut self, at: &At<'_>, action: PlannedAction, reason: &str) -> StateResult {
        let (s, step) = (self.stage, at.step);
        let markers_present = at
            .markers
            .present(s.fs)
            .map_err(step_err("checking the markers", step))?
            .into_iter()
            .map(|marker| display(marker.strip_prefix(self.flags_dir).unwrap_or(marker)))
            .collect();
        // SPEC §8.5: `env:NAME` arguments; upgrade steps get `[previous, current]`.
        let env = StepPaths::new(s.fs.root(), self.copy_dir, step)
            .env_overrides(step, at.versions)
            .into_iter()
            .map(|(k, v)| (k, v.to_string_lossy().into_owned()))
            .collect();
        let runs = action == PlannedAction::Run;
        let file = self.source.join("skyhook_dir").join(&step.path);
        let mut notes = Vec::new();
        if let Some(bits) = runs.then(|| missing_exec_bits(&file)).flatten() {
            notes.push(format!(
                "the step file's mode {bits:o} would get the execute bits (u+x,g+x,o+x)"
            ));
        }
        if runs && s.rt.write_logs {
            let (package, version) = (&s.config.package_name, &s.config.package_version);
            let log_dir = s.rt.package_log_dir(package, version);
            let log = format!("{}-<timestamp>.log", display(&log_dir.join(&step.path)));
            self.log = Some(PlannedWrite::new(log, WriteKind::Log, None));
        }
        self.plan.steps.push(PlannedStep {
            name: step.name.clone(),
            path: step.path.clone(),
            action,
            reason: reason.to_owned(),
            header: runs.then(|| at.header()),
            arguments: decide::arguments(step, s.env, at.versions).values,
            env,
            markers_present,
            notes,
            on_host: step.on_host,
            idempotence_disabled: step.idempotence_disabled,
        });
        Ok(())
    }

    fn settled(&mut self, _step: &Step) -> StateResult {
        self.plan.writes.extend(self.log.take());
        Ok(())
    }

    fn failed(&mut self, error: StageError) -> Result<(), StageError> {
        self.plan.failure.get_or_insert_with(|| match error {
            StageError::ChecksFailed { paths, .. } => {
                format!("checks would fail before running: {}", paths.join(", "))
            }
            error => error.to_string(),
        });
        let last = self.plan.steps.last();
        self.stopped = last.map(|step| format!("the run stops at {} first", step.path));
        Ok(())
    }
}

/// SPEC §6.3: a run with `COPY_RESOLV` stops before anything else on a root without `/etc`.
pub(crate) fn resolv_failure(root: &Path, rt: &Runtime) -> Option<String> {
    rt.copy_resolv
        .then(|| preflight::check_host_etc(root).err())
        .flatten()
        .map(|e| e.to_string())
}

pub(crate) fn display(p: &Path) -> String {
    p.display().to_string()
}

/// The permission bits of a step file lacking some execute bit (the run adds u+x,g+x,o+x).
fn missing_exec_bits(file: &Path) -> Option<u32> {
    let mode = std::fs::metadata(file).ok()?.permissions().mode() & 0o7777;
    (mode & 0o111 != 0o111).then_some(mode)
}

/// The files a `root_dir` overlay would write, sorted: (host path, file in the package).
fn overlay_files(dir: &Path, host: &Path, out: &mut Vec<(PathBuf, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let path = entry.path();
        let host_path = host.join(entry.file_name());
        if path.is_dir() {
            overlay_files(&path, &host_path, out);
        } else {
            out.push((host_path, path));
        }
    }
}

/// Compare one overlay file with what is at its host path, through the rooted reads (a link
/// anywhere below ROOT is reported, never followed).
fn overlay_write(fs: &HostFs, host_path: &Path, source: &Path) -> PlannedWrite {
    let mut write = PlannedWrite::new(
        display(host_path),
        WriteKind::Unknown,
        Some("root_dir overlay"),
    );
    write.source = Some(display(source));
    let wanted = match std::fs::read(source) {
        Ok(bytes) => bytes,
        Err(e) => {
            write.note = Some(format!("reading {}: {e}", source.display()));
            return write;
        }
    };
    // A host file longer than the overlay file differs from it; it is not read whole.
    match fs.read(host_path, wanted.len() as u64) {
        Ok(None) => write.kind = WriteKind::New,
        Err(HostFsError::TooLarge { .. }) => write.kind = WriteKind::Changed,
        Ok(Some(current)) => {
            // The run copies the permission bits without the special ones. The read above
            // refused links, so the host path's metadata is that of the file read.
            let bits = |p: &Path| {
                std::fs::symlink_metadata(p)
                    .ok()
                    .map(|m| m.permissions().mode() & 0o777)
            };
            let host_bits = fs.resolve(host_path).ok().and_then(|p| bits(&p));
            let same_bits = bits(source) == host_bits;
            write.kind = if current == wanted && same_bits {
                WriteKind::Unchanged
            } else {
                WriteKind::Changed
            };
            if current == wanted && !same_bits {
                write.note = Some("same content, other permission bits".to_owned());
            }
        }
        Err(e) => write.note = Some(Chain(&e).to_string()),
    }
    write
}

/// What `--diff` shows for one changed overlay file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverlayDiff {
    /// A unified diff, host file first.
    Text(String),
    /// Not diffed: why (binary, too large, unreadable).
    NotShown(String),
}

/// Files larger than this are not diffed.
pub(crate) const DIFF_MAX_BYTES: usize = 1024 * 1024;

/// The unified diff between the host file and the overlay file of a `changed` write.
pub fn overlay_diff(fs: &HostFs, write: &PlannedWrite) -> Option<OverlayDiff> {
    if write.kind != WriteKind::Changed {
        return None;
    }
    let source = write.source.as_deref()?;
    let new = match std::fs::read(source) {
        Ok(b) => b,
        Err(e) => return Some(OverlayDiff::NotShown(format!("reading {source}: {e}"))),
    };
    let old = match fs.read(Path::new(&write.path), DIFF_MAX_BYTES as u64) {
        Ok(b) => b.unwrap_or_default(),
        Err(HostFsError::TooLarge { .. }) => {
            return Some(OverlayDiff::NotShown(format!(
                "large file (more than {DIFF_MAX_BYTES} bytes on the host), not diffed"
            )));
        }
        Err(e) => {
            return Some(OverlayDiff::NotShown(Chain(&e).to_string()));
        }
    };
    if old.len().max(new.len()) > DIFF_MAX_BYTES {
        return Some(OverlayDiff::NotShown(format!(
            "large file ({} bytes on the host, {} in root_dir), not diffed",
            old.len(),
            new.len()
        )));
    }
    let text = |b| std::str::from_utf8(b).ok().filter(|t| !t.contains('\0'));
    let (Some(old), Some(new)) = (text(&old), text(&new)) else {
        return Some(OverlayDiff::NotShown("binary file, not diffed".to_owned()));
    };
    if old == new {
        return Some(OverlayDiff::NotShown(
            "same content, only the permission bits change".to_owned(),
        ));
    }
    let diff = similar::TextDiff::from_lines(old, new);
    Some(OverlayDiff::Text(
        diff.unified_diff()
            .context_radius(3)
            .header(
                &format!("{} (host)", write.path),
                &format!("{} (root_dir)", write.path),
            )
            .missing_newline_hint(true)
            .to_string(),
    ))
}
