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

use crate::history::UNKNOWN_VERSION;
use crate::hostfs::{HostFs, HostFsError, is_temp_name};
use crate::identity::ResourceId;
use crate::interrupts;
use crate::results::{self, RunRecord};
use crate::runtime::Runtime;

/// Everything `agent status` shows.
#[derive(Debug, Clone, Serialize)]
pub struct HostStatus {
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

/// One line of `check_results`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    pub path: String,
    pub passed: bool,
}

/// One package found under STATE.
#[derive(Debug, Clone, Serialize)]
pub struct PackageStatus {
    pub name: String,
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
    pub last_run: Option<RunRecord>,
}

/// One entry of the history ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct HistoryEntry {
    pub version: String,
    pub time: String,
}

/// Markers and results records of one package version.
#[derive(Debug, Clone, Serialize)]
pub struct VersionStatus {
    pub version: String,
    /// Completion markers under `STATE/flags/<pkg>/<ver>/`, relative names, sorted (legacy
    /// names may contain `/`).
    pub markers: Vec<String>,
    /// The last run of each mode (`STATE/results/<pkg>/<ver>/<MODE>.json`), oldest first.
    pub runs: Vec<RunRecord>,
}

/// The markers of one interrupt resource (`STATE/interrupts/flags/<RID>/`).
#[derive(Debug, Clone, Serialize)]
pub struct InterruptStatus {
    pub resource_id: String,
    pub operations: Vec<InterruptOperation>,
}

/// One interrupt operation (`<TYPE>_<i>`, or `<TYPE>` for kinds that only record completion).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InterruptOperation {
    pub operation: String,
    /// `complete`, `pending` or `unknown` (an empty or unreadable marker).
    pub state: String,
    /// The completion time, or the pending reboot's explanation.
    pub detail: String,
    /// For a pending reboot: the boot ID it was requested under.
    pub pending_boot_id: Option<String>,
    /// Reboots requested under the current boot ID (the loop guard's count).
    pub attempts: Option<u32>,
}

/// The history ledger as read without side effects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    pub current_version: Option<String>,
    pub entries: Vec<HistoryEntry>,
    /// Set when the file exists but cannot be used.
    pub problem: Option<String>,
    /// Not JSON of the ledger's shape: the next run that reads it moves it to `.backup`.
    pub corrupt: bool,
}

#[derive(serde::Deserialize)]
struct Ledger {
    #[serde(rename = "current-version", default)]
    current_version: Option<String>,
    #[serde(default)]
    history: Vec<HistoryEntry>,
}

/// Read `STATE/history/<pkg>.json` without moving a corrupt file aside (SPEC §8.9 formats:
/// this agent's indented JSON and the Python agent's compact one).
pub fn read_history(fs: &HostFs, file: &Path) -> Result<History, HostFsError> {
    let Some(bytes) = fs.read(file)? else {
        return Ok(History::default());
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(History {
            problem: Some("the history file is empty".into()),
            ..History::default()
        });
    }
    Ok(match serde_json::from_slice::<Ledger>(&bytes) {
        Ok(ledger) => History {
            current_version: ledger.current_version.filter(|v| !v.trim().is_empty()),
            entries: ledger.history,
            problem: None,
            corrupt: false,
        },
        Err(e) => History {
            problem: Some(format!("the history file is corrupt: {e}")),
            corrupt: true,
            ..History::default()
        },
    })
}

/// The previous version an upgrade would see (SPEC §8.9): `current-version`, else `unknown`.
pub fn previous_version(history: &History) -> String {
    history
        .current_version
        .clone()
        .unwrap_or_else(|| UNKNOWN_VERSION.to_owned())
}

/// Collect the status of every package under STATE.
pub fn collect(fs: &HostFs, rt: &Runtime) -> HostStatus {
    let mut problems = Vec::new();
    let state = &rt.state_dir;
    let flags = rt.flags_dir();
    let mut note = |what: &str, e: &dyn std::fmt::Display| problems.push(format!("{what}: {e}"));

    let boot_id = match interrupts::read_boot_id(fs) {
        Ok(id) => Some(id),
        Err(e) => {
            note("boot ID", &crate::errors::Chain(&e));
            None
        }
    };

    let check_results = match fs.read(&flags.join("check_results")) {
        Ok(Some(bytes)) => parse_check_results(&String::from_utf8_lossy(&bytes)),
        Ok(None) => Vec::new(),
        Err(e) => {
            note("check results", &crate::errors::Chain(&e));
            Vec::new()
        }
    };

    let flag_entries = list(fs, &flags, &mut note);
    let all_checked = flag_entries
        .iter()
        .filter_map(|n| n.strip_suffix("_ALL_CHECKED"))
        .map(str::to_owned)
        .collect();

    // Packages: step marker directories, history files, results records, interrupt resources.
    let mut names: BTreeSet<String> = BTreeSet::new();
    for name in &flag_entries {
        if !is_temp_name(name) && is_dir(fs, &flags.join(name)) {
            names.insert(name.clone());
        }
    }
    let history_dir = state.join("history");
    for name in list(fs, &history_dir, &mut note) {
        if let Some(pkg) = name.strip_suffix(".json").filter(|_| !is_temp_name(&name)) {
            names.insert(pkg.to_owned());
        }
    }
    let results_dir = state.join("results");
    for name in list(fs, &results_dir, &mut note) {
        if is_dir(fs, &results_dir.join(&name)) {
            names.insert(name);
        }
    }
    let interrupts_dir = state.join("interrupts").join("flags");
    let mut by_package: BTreeMap<String, Vec<InterruptStatus>> = BTreeMap::new();
    let mut other_interrupts = Vec::new();
    for rid in list(fs, &interrupts_dir, &mut note) {
        let dir = interrupts_dir.join(&rid);
        if is_temp_name(&rid) || !is_dir(fs, &dir) {
            continue;
        }
        let status = interrupt_status(fs, &dir, &rid, boot_id.as_deref(), &mut note);
        match ResourceId::parse(&rid) {
            Ok(parsed) => {
                names.insert(parsed.package.clone());
                by_package.entry(parsed.package).or_default().push(status);
            }
            Err(_) => other_interrupts.push(status),
        }
    }

    let mut packages = Vec::new();
    for name in names {
        let history = match read_history(fs, &rt.history_file(&name)) {
            Ok(h) => h,
            Err(e) => {
                note(&format!("history of {name}"), &crate::errors::Chain(&e));
                History::default()
            }
        };
        let mut versions: BTreeSet<String> = BTreeSet::new();
        for dir in [flags.join(&name), results_dir.join(&name)] {
            for v in list(fs, &dir, &mut note) {
                if !is_temp_name(&v) && is_dir(fs, &dir.join(&v)) {
                    versions.insert(v);
                }
            }
        }
        let mut version_status = Vec::new();
        for version in versions {
            let mut markers = Vec::new();
            walk_files(
                fs,
                &rt.package_flags_dir(&name, &version),
                "",
                &mut markers,
                &mut note,
            );
            let runs_dir = results_dir.join(&name).join(&version);
            let mut runs = Vec::new();
            for file in list(fs, &runs_dir, &mut note) {
                let Some(mode) = file.strip_suffix(".json") else {
                    continue;
                };
                if is_temp_name(&file) {
                    continue;
                }
                match results::read(fs, &results::path(state, &name, &version, mode)) {
                    Ok(Some(record)) => runs.push(record),
                    Ok(None) => {}
                    Err(e) => note(&format!("results record {file}"), &crate::errors::Chain(&e)),
                }
            }
            runs.sort_by_cached_key(|r| sort_time(&r.finished));
            version_status.push(VersionStatus {
                version,
                markers,
                runs,
            });
        }
        let last_run = version_status
            .iter()
            .flat_map(|v| v.runs.iter())
            .max_by_key(|r| sort_time(&r.finished))
            .cloned();
        packages.push(PackageStatus {
            interrupts: by_package.remove(&name).unwrap_or_default(),
            current_version: history.current_version,
            history: history.entries,
            history_problem: history.problem,
            versions: version_status,
            last_run,
            name,
        });
    }

    HostStatus {
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

/// `<PATH> <True|False>` lines, `True` meaning that check failed (SPEC §8.8).
fn parse_check_results(text: &str) -> Vec<CheckResult> {
    text.lines()
        .filter_map(|line| {
            let (path, failed) = line.rsplit_once(' ')?;
            Some(CheckResult {
                path: path.to_owned(),
                passed: failed != "True",
            })
        })
        .collect()
}

fn list(
    fs: &HostFs,
    dir: &Path,
    note: &mut impl FnMut(&str, &dyn std::fmt::Display),
) -> Vec<String> {
    fs.list_dir(dir).unwrap_or_else(|e| {
        note(
            &format!("listing {}", dir.display()),
            &crate::errors::Chain(&e),
        );
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
fn walk_files(
    fs: &HostFs,
    dir: &Path,
    prefix: &str,
    out: &mut Vec<String>,
    note: &mut impl FnMut(&str, &dyn std::fmt::Display),
) {
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

fn interrupt_status(
    fs: &HostFs,
    dir: &Path,
    rid: &str,
    boot_id: Option<&str>,
    note: &mut impl FnMut(&str, &dyn std::fmt::Display),
) -> InterruptStatus {
    // Keyed by (type, index, name) so `kind_2` sorts before `kind_10`.
    let mut stems: BTreeMap<(String, usize, String), BTreeSet<String>> = BTreeMap::new();
    for name in list(fs, dir, note) {
        if is_temp_name(&name) {
            continue;
        }
        let Some((stem, ext)) = name.rsplit_once('.') else {
            continue;
        };
        if !matches!(ext, "complete" | "pending" | "attempts") {
            continue;
        }
        stems
            .entry(operation_order(stem))
            .or_default()
            .insert(ext.to_owned());
    }
    let read = |name: &str, note: &mut dyn FnMut(&str, &dyn std::fmt::Display)| -> Option<String> {
        let path: PathBuf = dir.join(name);
        match fs.read(&path) {
            Ok(bytes) => bytes.map(|b| String::from_utf8_lossy(&b).trim().to_owned()),
            Err(e) => {
                note(
                    &format!("interrupt marker {}", path.display()),
                    &crate::errors::Chain(&e),
                );
                None
            }
        }
    };
    let mut operations = Vec::new();
    for ((_, _, stem), exts) in stems {
        let attempts = exts
            .contains("attempts")
            .then(|| read(&format!("{stem}.attempts"), note))
            .flatten()
            .and_then(|text| interrupts::parse_attempts(&text, boot_id?));
        let op = if exts.contains("complete") {
            let content = read(&format!("{stem}.complete"), note).unwrap_or_default();
            let corrupt = crate::markers::is_corrupt(content.as_bytes());
            InterruptOperation {
                operation: stem,
                state: if corrupt { "unknown" } else { "complete" }.into(),
                detail: if corrupt {
                    "corrupt completion marker: the next run does the operation again".into()
                } else {
                    content
                },
                pending_boot_id: None,
                attempts: None,
            }
        } else if exts.contains("pending") {
            let content = read(&format!("{stem}.pending"), note).unwrap_or_default();
            let pending = content
                .strip_prefix("boot-id:")
                .map(str::trim)
                .filter(|b| !b.is_empty())
                .map(str::to_owned);
            let detail = match (&pending, boot_id) {
                (Some(p), Some(current)) if p != current => format!(
                    "reboot requested under boot ID {p}; the host has rebooted since (boot ID \
                     {current}): the next run marks it complete"
                ),
                (Some(p), Some(_)) => format!(
                    "reboot requested under the current boot ID {p}: the host has not \
                     restarted yet"
                ),
                (Some(p), None) => format!("reboot requested under boot ID {p}"),
                (None, _) => format!(
                    "malformed pending marker {content:?}: the next run replaces it and \
                     reboots"
                ),
            };
            InterruptOperation {
                operation: stem,
                state: "pending".into(),
                detail,
                pending_boot_id: pending,
                attempts,
            }
        } else {
            InterruptOperation {
                operation: stem,
                state: "pending".into(),
                detail: "reboot attempts recorded, no pending marker".into(),
                pending_boot_id: None,
                attempts,
            }
        };
        operations.push(op);
    }
    InterruptStatus {
        resource_id: rid.to_owned(),
        operations,
    }
}

/// `(type, index, stem)` of `<TYPE>_<i>`; `(stem, 0, stem)` for an unindexed marker.
fn operation_order(stem: &str) -> (String, usize, String) {
    match stem.rsplit_once('_') {
        Some((kind, i)) if !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) => (
            kind.to_owned(),
            i.parse().unwrap_or(usize::MAX),
            stem.to_owned(),
        ),
        _ => (stem.to_owned(), 0, stem.to_owned()),
    }
}

/// RFC 3339 times as instants: Go's `RFC3339Nano` trims trailing zeros, so the strings do not
/// sort as text.
fn sort_time(t: &str) -> i128 {
    OffsetDateTime::parse(t, &Rfc3339).map_or(i128::MIN, OffsetDateTime::unix_timestamp_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_results_lines_true_means_failed() {
        assert_eq!(
            parse_check_results("a.sh False\nsub/b c.sh True"),
            [
                CheckResult {
                    path: "a.sh".into(),
                    passed: true
                },
                CheckResult {
                    path: "sub/b c.sh".into(),
                    passed: false
                },
            ]
        );
    }

    #[test]
    fn operations_sort_by_type_then_numeric_index() {
        let mut stems = ["kind_10", "kind_2", "no_op", "a_1"].map(operation_order);
        stems.sort();
        let names: Vec<&str> = stems.iter().map(|(_, _, s)| s.as_str()).collect();
        assert_eq!(names, ["a_1", "kind_2", "kind_10", "no_op"]);
    }

    #[test]
    fn history_is_read_without_moving_a_corrupt_file() {
        let root = tempfile::tempdir().unwrap();
        let fs = HostFs::new(root.path());
        let file = Path::new("/h/pkg.json");
        assert_eq!(read_history(&fs, file).unwrap(), History::default());
        std::fs::create_dir_all(root.path().join("h")).unwrap();
        std::fs::write(
            root.path().join("h/pkg.json"),
            r#"{"current-version": "1.0.0", "history": [{"version": "1.0.0", "time": "2026-11-30T10:28:09.400130+00:00"}]}"#,
        )
        .unwrap();
        let h = read_history(&fs, file).unwrap();
        assert_eq!(h.current_version.as_deref(), Some("1.0.0"));
        assert_eq!(h.entries[0].time, "2026-11-30T10:28:09.400130+00:00");
        assert_eq!(previous_version(&h), "1.0.0");
        std::fs::write(root.path().join("h/pkg.json"), "{").unwrap();
        let h = read_history(&fs, file).unwrap();
        assert!(h.corrupt && h.problem.is_some());
        assert_eq!(previous_version(&h), "unknown");
        assert!(root.path().join("h/pkg.json").exists(), "left in place");
        assert!(!root.path().join("h/pkg.json.backup").exists());
    }

    #[test]
    fn times_sort_as_instants() {
        assert!(sort_time("2026-11-30T10:00:00Z") > sort_time("2026-11-30T09:59:59.5Z"));
        assert!(sort_time("2026-11-30T10:00:00.5Z") > sort_time("2026-11-30T10:00:00Z"));
    }
}
