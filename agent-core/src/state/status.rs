//! `agent status` (SPEC §1.4, ext): what the agent and its upstream predecessors left under
//! STATE, read without writing anything.
//!
//! Every read goes through [`HostFs`] (no symbolic links, nothing outside ROOT). Unlike a stage
//! run, a corrupt history file is reported here and left where it is: moving it aside is the
//! job of the next run that needs it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::host::boot::read_boot_id;
use crate::host::errors::Chain;
use crate::host::fs::{HostFs, is_temp_name};
use crate::host::identity::{ResourceId, is_single_component};
use crate::host::runtime::Runtime;
use crate::state::flags::{self as state_flags, CheckResult};
use crate::state::history::{self, History, HistoryEntry};
use crate::state::interrupt_markers;
use crate::state::locks::{self, Holder};
use crate::state::results::{self, RecordedResult, ResultsRecord};

/// The one-word answer of `agent status`, overall and per package or interrupt resource.
///
/// Declared from the mildest to the gravest: [`Verdict::combine`] keeps the gravest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// No state of this agent or its predecessors.
    NotStarted,
    /// The last runs succeeded and nothing waits for a reboot.
    Done,
    /// The last run was stopped by a termination signal (SPEC §10): what it completed is
    /// kept and the next run resumes; nothing failed.
    Stopped,
    /// An interrupt asked for a reboot and waits for a new boot ID.
    RebootPending,
    /// A stage or interrupt holds the lock right now.
    Running,
    /// The last run failed, and `agent reset` removed state of it since; nothing has run
    /// since, so the failure stands until a run says otherwise.
    Reset,
    /// The last run failed: a step, a check or an interrupt operation.
    Failed,
    /// State cannot be read, a run ended without recording its result, or the reboot loop
    /// guard will refuse the next reboot.
    Error,
}

impl Verdict {
    /// Every verdict, mildest first (the series of the `skyhook_agent_status` metric).
    pub const ALL: [Verdict; 8] = [
        Self::NotStarted,
        Self::Done,
        Self::Stopped,
        Self::RebootPending,
        Self::Running,
        Self::Reset,
        Self::Failed,
        Self::Error,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NotStarted => "not-started",
            Self::Done => "done",
            Self::Stopped => "stopped",
            Self::RebootPending => "reboot-pending",
            Self::Running => "running",
            Self::Reset => "reset",
            Self::Failed => "failed",
            Self::Error => "error",
        }
    }

    /// Whether `agent status` exits 1 for it: something failed and nothing has succeeded
    /// since.
    pub const fn is_failure(self) -> bool {
        matches!(self, Self::Reset | Self::Failed | Self::Error)
    }

    /// The host's verdict from its parts: the gravest wins (a script must not miss an error
    /// or a failure while another package runs), then running, a pending reboot, a stop,
    /// done.
    pub fn combine(parts: impl IntoIterator<Item = Self>) -> Self {
        parts.into_iter().max().unwrap_or(Self::NotStarted)
    }
}

/// One thing that failed, from a results record (SPEC §8.12) or from state that cannot be read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StatusError {
    /// The package (or interrupt resource ID) it belongs to; `None` for host-wide state.
    pub package: Option<String>,
    pub version: Option<String>,
    /// The stage mode or `interrupt` of the failed run.
    pub mode: Option<String>,
    /// The step path or interrupt command that failed.
    pub step: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Host path of the failed operation's log file.
    pub log: Option<String>,
    pub message: String,
    /// Host path of the results record it comes from.
    pub record: Option<String>,
    /// The last lines of the failed operation's output (at most `OUTPUT_LINES`, from the
    /// results record's 4 KiB tail), as `systemctl status` shows the journal's.
    pub last_output: Vec<String>,
    /// When `agent reset` removed state of the failed run since (UTC RFC 3339): it has not
    /// run since.
    pub reset_at: Option<String>,
}

/// How many lines of a failed operation's output `agent status` shows.
pub(crate) const OUTPUT_LINES: usize = 10;

/// The last `n` lines of an operation's output tail: the final newline ends the last line
/// rather than starting an empty one, and a carriage return before a newline is dropped.
pub(crate) fn last_lines(tail: &str, n: usize) -> Vec<String> {
    let text = tail.strip_suffix('\n').unwrap_or(tail);
    if text.is_empty() {
        return Vec::new();
    }
    let lines: Vec<&str> = text.split('\n').collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_owned())
        .collect()
}

/// Everything `agent status` shows about one STATE directory.
#[derive(Debug, Clone, Serialize)]
pub struct HostStatus {
    /// This STATE's verdict.
    pub status: Verdict,
    /// Every failure below, in the order shown.
    pub errors: Vec<StatusError>,
    /// SKYHOOK_REBOOT_MAX_ATTEMPTS: the loop guard's limit (SPEC §9.6).
    pub reboot_max_attempts: u32,
    /// STATE and LOGS as host paths (ROOT not included).
    pub state_dir: String,
    pub log_dir: String,
    /// The host's current boot ID; `None` when it cannot be read.
    pub boot_id: Option<String>,
    /// `STATE/flags/check_results`: the last check stage of any package, one entry per step.
    pub check_results: Vec<CheckResult>,
    /// Check stages whose `STATE/flags/<MODE>_ALL_CHECKED` is present.
    pub all_checked: Vec<String>,
    pub packages: Vec<PackageStatus>,
    /// Interrupt marker directories whose name is not a valid resource ID.
    pub other_interrupts: Vec<InterruptStatus>,
    /// State that could not be read (the rest is still shown).
    pub problems: Vec<String>,
}

/// One package found under STATE.
#[derive(Debug, Clone, Serialize)]
pub struct PackageStatus {
    pub name: String,
    pub status: Verdict,
    /// What a `stopped` or `reset` verdict stands for, in words.
    pub detail: Option<String>,
    /// Who holds `STATE/locks/<pkg>.lock`: a stage of this package is running.
    pub lock: Option<Holder>,
    /// `current-version` of the history file (`uninstalled` after an uninstall).
    pub current_version: Option<String>,
    /// Newest first.
    pub history: Vec<HistoryEntry>,
    /// Why the history file could not be used, if it could not.
    pub history_problem: Option<String>,
    pub versions: Vec<VersionStatus>,
    /// Interrupt resources whose ID names this package.
    pub interrupts: Vec<InterruptStatus>,
    /// The most recent results record of any version and mode.
    pub last_run: Option<ResultsRecord>,
}

impl PackageStatus {
    /// The package's stage and interrupt runs still recorded (the last of each stage, and of
    /// the interrupt, per version; `agent reset` records are not runs), newest first, each
    /// with its version.
    pub fn runs_newest_first(&self) -> Vec<(&str, &ResultsRecord)> {
        let mut runs: Vec<(&str, &ResultsRecord)> = self
            .versions
            .iter()
            .flat_map(|v| v.runs.iter().map(move |r| (v.version.as_str(), r)))
            .filter(|(_, r)| r.mode != RESET_MODE)
            .collect();
        runs.sort_by_cached_key(|(_, r)| std::cmp::Reverse(sort_time(&r.finished)));
        runs
    }
}

/// Markers and results records of one package version.
#[derive(Debug, Clone, Serialize)]
pub struct VersionStatus {
    pub version: String,
    /// Completion markers under `STATE/flags/<pkg>/<ver>/`, relative names, sorted (legacy
    /// names may contain `/`).
    pub markers: Vec<String>,
    /// The last run of each mode (`STATE/results/<pkg>/<ver>/<MODE>.json`), oldest first.
    pub runs: Vec<ResultsRecord>,
}

/// The markers of one interrupt resource (`STATE/interrupts/flags/<RID>/`).
#[derive(Debug, Clone, Serialize)]
pub struct InterruptStatus {
    pub resource_id: String,
    pub status: Verdict,
    /// Who holds `STATE/locks/interrupt-<RID>.lock`: an interrupt is running.
    pub lock: Option<Holder>,
    pub operations: Vec<InterruptOperation>,
}

/// One interrupt operation (`<TYPE>_<i>`, or `<TYPE>` for kinds that only record completion).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct InterruptOperation {
    pub operation: String,
    /// `complete`, `pending`, `unknown` (a corrupt marker: the next run does it again) or
    /// `unreadable` (a marker that cannot be read).
    pub state: String,
    /// The completion time, or the pending reboot's explanation.
    pub detail: String,
    /// For a pending reboot: the boot ID it was requested under.
    pub pending_boot_id: Option<String>,
    /// Reboots requested under the current boot ID (the loop guard's count).
    pub attempts: Option<u32>,
    /// The host has not booted since, and the loop guard's limit is reached: the next run
    /// refuses to reboot (SPEC §9.6).
    pub loop_guard_refuses: bool,
}

/// Where the operator's layout keeps STATE (`/var/lib/skyhook/<skyhook>`) and LOGS
/// (`/var/log/skyhook/<skyhook>`).
pub(crate) const OPERATOR_STATE_PARENT: &str = "/var/lib/skyhook";
pub(crate) const OPERATOR_LOG_PARENT: &str = "/var/log/skyhook";

/// Entries a STATE directory of this agent or its predecessors holds.
const STATE_ENTRIES: &[&str] = &["flags", "history", "results", "interrupts", "locks"];

/// Whether `dir` holds an entry of a STATE directory (flags, history, results, …).
pub fn holds_state(fs: &HostFs, dir: &Path) -> bool {
    fs.list_dir(dir)
        .is_ok_and(|names| names.iter().any(|n| STATE_ENTRIES.contains(&n.as_str())))
}

/// STATE and LOGS pairs to report when `SKYHOOK_ROOT_DIR` is not set: the legacy default
/// (`legacy_state`, `legacy_logs`) when it holds state, and each `/var/lib/skyhook/<name>` that
/// does (the operator sets `SKYHOOK_ROOT_DIR` to one per Skyhook), with
/// `/var/log/skyhook/<name>` as its LOGS. The legacy default alone when none holds state.
pub fn discover(fs: &HostFs, legacy_state: &Path, legacy_logs: &Path) -> Vec<(PathBuf, PathBuf)> {
    let holds_state = |dir: &Path| holds_state(fs, dir);
    let mut found = Vec::new();
    if holds_state(legacy_state) {
        found.push((legacy_state.to_path_buf(), legacy_logs.to_path_buf()));
    }
    let parent = Path::new(OPERATOR_STATE_PARENT);
    for name in fs.list_dir(parent).unwrap_or_default() {
        let dir = parent.join(&name);
        if !is_temp_name(&name) && is_dir(fs, &dir) && holds_state(&dir) && dir != legacy_state {
            found.push((dir, Path::new(OPERATOR_LOG_PARENT).join(&name)));
        }
    }
    if found.is_empty() {
        found.push((legacy_state.to_path_buf(), legacy_logs.to_path_buf()));
    }
    found
}

/// Collect the status of every package under STATE.
pub fn collect(fs: &HostFs, rt: &Runtime) -> HostStatus {
    collect_scoped(fs, rt, Scope::default())
}

/// What [`collect_scoped`] reads, and as whom.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scope<'a> {
    /// Only this package (and its interrupt resources); every package when `None`.
    pub package: Option<&'a str>,
    /// Read as it will read once process `own_pid` (a run finishing, about to release its
    /// lock) has exited: a lock it holds is not a running agent.
    pub own_pid: Option<u32>,
}

/// How the run that recorded `finished` leaves its package: the verdict `agent status` gives
/// it once the run's process has exited (a lock it holds does not count), and whether a
/// reboot one of its interrupts asked for waits for a new boot ID. For the node's metrics.
///
/// `finished` is the package's most recent run, just recorded: it is judged as it is instead
/// of reading every results record of the package again (a large package's records hold an
/// operation per step). The package's history, interrupt markers and locks are read as
/// [`collect_scoped`] reads them.
pub fn standing(fs: &HostFs, rt: &Runtime, finished: &ResultsRecord) -> Standing {
    let package = finished.package.as_str();
    let mut ignored = |_: &str, _: &dyn std::fmt::Display| {};
    let boot_id = read_boot_id(fs).ok();
    let found = Found {
        fs,
        rt,
        only: Some(package),
        own_pid: Some(std::process::id()),
        boot_id: boot_id.as_deref(),
    };
    let (mut by_package, _) = found.interrupts(&mut BTreeSet::new(), &mut ignored);
    let interrupts = by_package.remove(package).unwrap_or_default();
    let history = found.history(package, &mut ignored);
    let lock = found.package_lock(package, &mut ignored);
    let last = LastRun {
        run: finished,
        reset_since: None,
    };
    let (verdict, ..) = found.judge(
        package,
        lock.is_some(),
        Some(last),
        history.problem.as_deref(),
        &interrupts,
    );
    Standing {
        verdict,
        reboot_pending: interrupts.iter().flat_map(|i| &i.operations).any(|op| {
            op.state == "pending" && op.pending_boot_id.is_some() && op.pending_boot_id == boot_id
        }),
    }
}

/// See [`standing`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    pub verdict: Verdict,
    pub reboot_pending: bool,
}

/// [`collect`], limited to `scope`.
pub fn collect_scoped(fs: &HostFs, rt: &Runtime, scope: Scope<'_>) -> HostStatus {
    let mut problems = Vec::new();
    let state = &rt.state_dir;
    let flags = rt.flags_dir();
    let mut note = |what: &str, e: &dyn std::fmt::Display| problems.push(format!("{what}: {e}"));

    let boot_id = read_boot_id(fs)
        .map_err(|e| note("boot ID", &Chain(&e)))
        .ok();
    let check_results = state_flags::read_check_results(fs, &flags)
        .map_err(|e| note("check results", &Chain(&e)))
        .ok()
        .flatten()
        .unwrap_or_default();

    let flag_entries = list(fs, &flags, &mut note);
    let all_checked = state_flags::all_checked_modes(&flag_entries);

    let mut names = package_names(fs, rt, &flag_entries, &mut note);
    let found = Found {
        fs,
        rt,
        only: scope.package,
        own_pid: scope.own_pid,
        boot_id: boot_id.as_deref(),
    };
    let (mut by_package, other_interrupts) = found.interrupts(&mut names, &mut note);

    names.retain(|name| scope.package.is_none_or(|p| p == name));
    let mut packages = Vec::new();
    let mut errors = Vec::new();
    for name in names {
        let interrupts = by_package.remove(&name).unwrap_or_default();
        let (package, failed) = found.package(name, interrupts, &mut note);
        errors.extend(failed);
        packages.push(package);
    }

    for other in &other_interrupts {
        errors.extend(interrupt_errors(other, state));
    }
    let status = Verdict::combine(
        packages
            .iter()
            .map(|p| p.status)
            .chain(other_interrupts.iter().map(|i| i.status))
            .chain((!problems.is_empty()).then_some(Verdict::Error)),
    );
    errors.extend(problems.iter().map(|p| StatusError {
        message: format!("cannot read state: {p}"),
        ..StatusError::default()
    }));
    HostStatus {
        status,
        errors,
        reboot_max_attempts: rt.reboot_max_attempts,
        state_dir: state.display().to_string(),
        log_dir: rt.log_dir.display().to_string(),
        boot_id,
        check_results,
        all_checked,
        packages,
        other_interrupts,
        problems,
    }
}

/// The packages STATE knows: step marker directories, history files, results records (the
/// interrupt resources and held locks add theirs).
fn package_names(
    fs: &HostFs,
    rt: &Runtime,
    flag_entries: &[String],
    note: &mut Note<'_>,
) -> BTreeSet<String> {
    let (state, flags) = (&rt.state_dir, rt.flags_dir());
    let mut names: BTreeSet<String> = BTreeSet::new();
    for name in flag_entries {
        if !is_temp_name(name) && is_dir(fs, &flags.join(name)) {
            names.insert(name.clone());
        }
    }
    for name in list(fs, &state.join("history"), note) {
        if let Some(pkg) = name.strip_suffix(".json").filter(|_| !is_temp_name(&name)) {
            names.insert(pkg.to_owned());
        }
    }
    let results_dir = state.join("results");
    for name in list(fs, &results_dir, note) {
        if is_dir(fs, &results_dir.join(&name)) {
            names.insert(name);
        }
    }
    names
}

/// What the walk over STATE needs at every step.
struct Found<'a> {
    fs: &'a HostFs,
    rt: &'a Runtime,
    /// `--package`: only this package.
    only: Option<&'a str>,
    /// A lock this process holds does not count (see [`Scope::own_pid`]).
    own_pid: Option<u32>,
    boot_id: Option<&'a str>,
}

/// Where the walk reports state it cannot read (what, and why): `agent status` shows it and
/// errs; [`standing`] ignores it.
type Note<'n> = dyn FnMut(&str, &dyn std::fmt::Display) + 'n;

/// Interrupt resources by package, and those whose resource ID names no package.
type Interrupts = (BTreeMap<String, Vec<InterruptStatus>>, Vec<InterruptStatus>);

impl Found<'_> {
    /// Every interrupt resource's markers, by package, and the packages and interrupt
    /// resources whose lock is held before they wrote any state.
    fn interrupts(&self, names: &mut BTreeSet<String>, note: &mut Note<'_>) -> Interrupts {
        let Found { fs, rt, only, .. } = *self;
        let interrupts_dir = interrupt_markers::resources_dir(&rt.state_dir);
        let mut by_package: BTreeMap<String, Vec<InterruptStatus>> = BTreeMap::new();
        let mut other_interrupts = Vec::new();
        for rid in list(fs, &interrupts_dir, note) {
            let dir = interrupts_dir.join(&rid);
            let of_package = ResourceId::parse(&rid).ok().map(|r| r.package);
            if is_temp_name(&rid)
                || (only.is_some() && of_package.as_deref() != only)
                || !is_dir(fs, &dir)
            {
                continue;
            }
            let status = self.interrupt_status(&dir, &rid, note);
            match of_package {
                Some(package) => {
                    names.insert(package.clone());
                    by_package.entry(package).or_default().push(status);
                }
                None => other_interrupts.push(status),
            }
        }
        self.held_locks(names, &mut by_package, &other_interrupts, note);
        (by_package, other_interrupts)
    }

    /// A stage or interrupt that holds its lock before it wrote any state is still shown.
    fn held_locks(
        &self,
        names: &mut BTreeSet<String>,
        by_package: &mut BTreeMap<String, Vec<InterruptStatus>>,
        other_interrupts: &[InterruptStatus],
        note: &mut Note<'_>,
    ) {
        let locks_dir = self.rt.state_dir.join("locks");
        for name in list(self.fs, &locks_dir, note) {
            let Some(stem) = name.strip_suffix(".lock").filter(|_| !is_temp_name(&name)) else {
                continue;
            };
            match stem.strip_prefix("interrupt-") {
                Some(rid) => {
                    let known = by_package
                        .values()
                        .flatten()
                        .chain(other_interrupts)
                        .any(|i| i.resource_id == rid);
                    let Ok(parsed) = ResourceId::parse(rid) else {
                        continue;
                    };
                    if known {
                        continue;
                    }
                    if let Some(holder) = self.interrupt_lock(rid, note) {
                        names.insert(parsed.package.clone());
                        by_package
                            .entry(parsed.package)
                            .or_default()
                            .push(InterruptStatus {
                                resource_id: rid.to_owned(),
                                status: Verdict::Running,
                                lock: Some(holder),
                                operations: Vec::new(),
                            });
                    }
                }
                None => {
                    if !names.contains(stem) && self.package_lock(stem, note).is_some() {
                        names.insert(stem.to_owned());
                    }
                }
            }
        }
    }

    /// The package's version history; what keeps it from being read is its `problem`.
    fn history(&self, name: &str, note: &mut Note<'_>) -> History {
        history::inspect(self.fs, &self.rt.history_file(name)).unwrap_or_else(|e| {
            let reason = chain(&e);
            note(&format!("history of {name}"), &reason);
            History {
                problem: Some(format!("the history file cannot be read: {reason}")),
                ..History::default()
            }
        })
    }

    /// Who holds `STATE/locks/<pkg>.lock` (see [`lock_holder`]).
    fn package_lock(&self, name: &str, note: &mut Note<'_>) -> Option<Holder> {
        let path = locks::package_lock_path(&self.rt.state_dir, name);
        lock_holder(self.fs, &path, self.own_pid, note)
    }

    /// Who holds `STATE/locks/interrupt-<RID>.lock` (see [`lock_holder`]).
    fn interrupt_lock(&self, rid: &str, note: &mut Note<'_>) -> Option<Holder> {
        let path = locks::interrupt_lock_path(&self.rt.state_dir, rid);
        lock_holder(self.fs, &path, self.own_pid, note)
    }

    /// SPEC §8.12: whether the package's last run, whose record says `running`, is still
    /// running: its lock (the package's, or its interrupt resource's) has a holder now, after
    /// the record was read. Without one the run may have ended in between, so the record is
    /// read again; if it still says `running`, the run ended without recording its result (it
    /// was killed, or its final record could not be written), and it is judged as such.
    fn settle_running(
        &self,
        package: &str,
        versions: &mut [VersionStatus],
        note: &mut Note<'_>,
    ) -> bool {
        let Some((v, r)) = last_run(versions) else {
            return false;
        };
        let VersionStatus { version, runs, .. } = &mut versions[v];
        let run = &mut runs[r];
        if !run.is_running() {
            return false;
        }
        // The resource ID comes from a file: it names a lock only if it is one path component.
        let holder = if run.mode == INTERRUPT_MODE {
            is_single_component(&run.resource_id)
                .then(|| self.interrupt_lock(&run.resource_id, note))
                .flatten()
        } else {
            self.package_lock(package, note)
        };
        if holder.is_some() {
            return true;
        }
        if is_single_component(&run.mode) {
            let file = results::path(&self.rt.state_dir, package, version, &run.mode);
            if let Ok(Some(again)) = results::read(self.fs, &file) {
                *run = again;
            }
        }
        false
    }

    /// One package: its history, versions, markers, runs, lock and verdict, and its errors.
    fn package(
        &self,
        name: String,
        interrupts: Vec<InterruptStatus>,
        note: &mut Note<'_>,
    ) -> (PackageStatus, Vec<StatusError>) {
        let Found { fs, rt, .. } = *self;
        let state = &rt.state_dir;
        let (flags, results_dir) = (rt.flags_dir(), state.join("results"));
        let history = self.history(&name, note);
        let mut versions: BTreeSet<String> = BTreeSet::new();
        for dir in [flags.join(&name), results_dir.join(&name)] {
            for v in list(fs, &dir, note) {
                if !is_temp_name(&v) && is_dir(fs, &dir.join(&v)) {
                    versions.insert(v);
                }
            }
        }
        let mut version_status = Vec::new();
        for version in versions {
            let mut markers = Vec::new();
            let markers_dir = rt.package_flags_dir(&name, &version);
            walk_files(fs, &markers_dir, "", &mut markers, note);
            let runs_dir = results_dir.join(&name).join(&version);
            let mut runs = Vec::new();
            for file in list(fs, &runs_dir, note) {
                let Some(mode) = file.strip_suffix(".json").filter(|_| !is_temp_name(&file)) else {
                    continue;
                };
                match results::read(fs, &results::path(state, &name, &version, mode)) {
                    Ok(Some(record)) => runs.push(record),
                    Ok(None) => {}
                    Err(e) => note(&format!("results record {file}"), &Chain(&e)),
                }
            }
            runs.sort_by_cached_key(|r| sort_time(&r.finished));
            version_status.push(VersionStatus {
                version,
                markers,
                runs,
            });
        }
        let lock = self.package_lock(&name, note);
        let live = self.settle_running(&name, &mut version_status, note);
        let last_run = version_status
            .iter()
            .flat_map(|v| v.runs.iter())
            .max_by_key(|r| sort_time(&r.finished))
            .cloned();
        let (status, detail, failed) = self.judge(
            &name,
            lock.is_some(),
            LastRun::of(&version_status, live),
            history.problem.as_deref(),
            &interrupts,
        );
        let package = PackageStatus {
            status,
            detail,
            lock,
            interrupts,
            current_version: history.current_version,
            history: history.entries,
            history_problem: history.problem,
            versions: version_status,
            last_run,
            name,
        };
        (package, failed)
    }
}

/// Where the most recent stage or interrupt run of a package is (an `agent reset` record is
/// bookkeeping, not a run): the index of its version and its index among the version's runs.
fn last_run(versions: &[VersionStatus]) -> Option<(usize, usize)> {
    versions
        .iter()
        .enumerate()
        .flat_map(|(v, version)| {
            version
                .runs
                .iter()
                .enumerate()
                .map(move |(r, run)| ((v, r), run))
        })
        .filter(|(_, run)| run.mode != RESET_MODE)
        .max_by_key(|(_, run)| sort_time(&run.finished))
        .map(|(at, _)| at)
}

/// The mode of an interrupt run's results record.
const INTERRUPT_MODE: &str = "interrupt";

/// The run a package's verdict is judged by: its most recent stage or interrupt run (an
/// `agent reset` record is bookkeeping, not a run) once it is no longer running (see
/// [`Found::settle_running`]), and the `agent reset` recorded after it, if any.
#[derive(Clone, Copy)]
struct LastRun<'a> {
    run: &'a ResultsRecord,
    reset_since: Option<&'a ResultsRecord>,
}

impl<'a> LastRun<'a> {
    /// The last run of `versions`, unless it is `live`.
    fn of(versions: &'a [VersionStatus], live: bool) -> Option<Self> {
        let (v, r) = last_run(versions).filter(|_| !live)?;
        let run = &versions[v].runs[r];
        Some(LastRun {
            run,
            reset_since: reset_since(&versions[v], run),
        })
    }
}

impl Found<'_> {
    /// A package's verdict, what it stands for (a stop, a reset) and what failed: its
    /// [`LastRun`], a history that cannot be read and its interrupt resources, unless its lock
    /// is held (`locked`: it is running, and a stop or reset it stood for is not shown).
    fn judge(
        &self,
        name: &str,
        locked: bool,
        last: Option<LastRun<'_>>,
        history_problem: Option<&str>,
        interrupts: &[InterruptStatus],
    ) -> (Verdict, Option<String>, Vec<StatusError>) {
        let state = &self.rt.state_dir;
        let mut errors = Vec::new();
        let mut parts = vec![Verdict::Done];
        let mut detail = None;
        if let Some(problem) = history_problem {
            errors.push(StatusError {
                package: Some(name.to_owned()),
                message: format!("history: {problem}"),
                ..StatusError::default()
            });
            parts.push(Verdict::Error);
        }
        if let Some(LastRun { run, reset_since }) = last {
            let record = run.path(state);
            if run.is_running() {
                // SPEC §8.12: no agent holds its lock, so it ended without saying how.
                errors.extend(run_errors(name, run, &record));
                parts.push(Verdict::Error);
            } else if run.result == Some(RecordedResult::Stopped) {
                detail = Some(format!(
                    "the last {} was stopped by a termination signal at {}; what it completed is \
                     kept and the next run resumes",
                    run.mode, run.finished
                ));
                parts.push(Verdict::Stopped);
            } else if run.exit_code != 0 {
                let mut failed = run_errors(name, run, &record);
                match reset_since {
                    Some(reset) => {
                        detail = Some(format!(
                            "the last {} failed; agent reset at {} since, and it has not run since",
                            run.mode, reset.finished
                        ));
                        for e in &mut failed {
                            e.reset_at = Some(reset.finished.clone());
                        }
                        parts.push(Verdict::Reset);
                    }
                    None => parts.push(Verdict::Failed),
                }
                errors.extend(failed);
            }
        }
        for i in interrupts {
            let failed = interrupt_errors(i, state);
            if !failed.is_empty() {
                parts.push(Verdict::Error);
            }
            errors.extend(failed);
            // An interrupt's own error was counted above, from its markers.
            if i.status != Verdict::Error {
                parts.push(i.status);
            }
        }
        if locked {
            return (Verdict::Running, None, errors);
        }
        (Verdict::combine(parts), detail, errors)
    }
}

/// The `agent reset` of `version` recorded after the failed `run` (of the same interrupt
/// resource, for an interrupt run): the failure it followed has not been run again.
fn reset_since<'v>(version: &'v VersionStatus, run: &ResultsRecord) -> Option<&'v ResultsRecord> {
    version
        .runs
        .iter()
        .filter(|r| r.mode == RESET_MODE && sort_time(&r.finished) > sort_time(&run.finished))
        .filter(|r| run.mode != INTERRUPT_MODE || r.resource_id == run.resource_id)
        .max_by_key(|r| sort_time(&r.finished))
}

/// The mode under which `agent reset` records what it removed.
pub const RESET_MODE: &str = "reset";

/// The failed operations of a failed run, or the run's own error when no operation failed.
fn run_errors(package: &str, run: &ResultsRecord, record: &Path) -> Vec<StatusError> {
    let message = if run.is_running() {
        results::unrecorded(&run.mode)
    } else {
        run.error
            .clone()
            .unwrap_or_else(|| format!("exited {}", run.exit_code))
    };
    let base = StatusError {
        package: Some(package.to_owned()),
        version: Some(run.version.clone()),
        mode: Some(run.mode.clone()),
        message,
        record: Some(record.display().to_string()),
        ..StatusError::default()
    };
    let failed: Vec<StatusError> = run
        .operations
        .iter()
        .filter(|op| op.succeeded == Some(false))
        .map(|op| StatusError {
            step: Some(op.operation.clone()),
            exit_code: op.exit_code,
            signal: op.signal,
            log: op.log.clone(),
            last_output: op
                .output_tail
                .as_deref()
                .map(|tail| last_lines(tail, OUTPUT_LINES))
                .unwrap_or_default(),
            ..base.clone()
        })
        .collect();
    if failed.is_empty() {
        vec![base]
    } else {
        failed
    }
}

/// Interrupt operations that cannot be trusted or that the loop guard will refuse.
fn interrupt_errors(i: &InterruptStatus, state: &Path) -> Vec<StatusError> {
    let record = interrupt_markers::resource_dir(state, &i.resource_id);
    i.operations
        .iter()
        .filter(|op| operation_failed(op))
        .map(|op| StatusError {
            package: Some(i.resource_id.clone()),
            mode: Some(INTERRUPT_MODE.into()),
            step: Some(op.operation.clone()),
            message: op.detail.clone(),
            record: Some(record.display().to_string()),
            ..StatusError::default()
        })
        .collect()
}

fn list(fs: &HostFs, dir: &Path, note: &mut Note<'_>) -> Vec<String> {
    fs.list_dir(dir).unwrap_or_else(|e| {
        note(&format!("listing {}", dir.display()), &Chain(&e));
        Vec::new()
    })
}

/// Whether the host path is a directory (not a link to one). Only called on entries that a
/// [`HostFs::list_dir`] of the parent returned, so no component above it is a link.
fn is_dir(fs: &HostFs, host_path: &Path) -> bool {
    fs.resolve(host_path)
        .ok()
        .and_then(|p| std::fs::symlink_metadata(p).ok())
        .is_some_and(|m| m.is_dir())
}

/// Every non-directory below `dir`, as names relative to it (legacy marker names nest).
fn walk_files(fs: &HostFs, dir: &Path, prefix: &str, out: &mut Vec<String>, note: &mut Note<'_>) {
    for name in list(fs, dir, note) {
        if is_temp_name(&name) {
            continue;
        }
        let path = dir.join(&name);
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        if is_dir(fs, &path) {
            walk_files(fs, &path, &rel, out, note);
        } else {
            out.push(rel);
        }
    }
}

/// Who holds a lock, noting a lock that cannot be probed. A holder that is process
/// `own_pid` does not count (see [`Scope::own_pid`]).
fn lock_holder(
    fs: &HostFs,
    path: &Path,
    own_pid: Option<u32>,
    note: &mut Note<'_>,
) -> Option<Holder> {
    locks::holder(fs, path)
        .unwrap_or_else(|e| {
            note(&format!("lock {}", path.display()), &chain(&e));
            None
        })
        .filter(|h| own_pid.is_none() || h.pid != own_pid)
}

fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    Chain(e).to_string()
}

/// RFC 3339 times as instants: Go's `RFC3339Nano` trims trailing zeros, so the strings do not
/// sort as text.
fn sort_time(t: &str) -> i128 {
    OffsetDateTime::parse(t, &Rfc3339).map_or(i128::MIN, OffsetDateTime::unix_timestamp_nanos)
}

mod interrupts;

use interrupts::operation_failed;
#[cfg(test)]
use interrupts::{operation_order, short_id};

#[cfg(test)]
mod tests;
