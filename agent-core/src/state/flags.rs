//! The STATE-wide files of `STATE/flags/` (SPEC §8.1, §8.8): `START`, `check_results` and
//! `<MODE>_ALL_CHECKED`. The last two are shared by every package under STATE (upstream
//! layout), so they are written under one STATE-wide lock ([`check_results_lock_path`]).
//!
//! This module is the only reader and writer of those files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::host::fs::{HostFs, HostFsError, RECORD_BOUND};

/// `STATE/flags/START`.
pub(crate) fn start_path(flags_dir: &Path) -> PathBuf {
    flags_dir.join("START")
}

/// SPEC §8.1: an empty `START` at the start of every stage run.
pub(crate) fn write_start(fs: &HostFs, flags_dir: &Path) -> Result<(), HostFsError> {
    fs.write_atomic(&start_path(flags_dir), b"")
}

/// `STATE/flags/check_results`.
pub(crate) fn check_results_path(flags_dir: &Path) -> PathBuf {
    flags_dir.join("check_results")
}

/// `STATE/flags/<MODE>_ALL_CHECKED`.
pub(crate) fn all_checked_path(flags_dir: &Path, mode: &str) -> PathBuf {
    flags_dir.join(format!("{mode}{ALL_CHECKED_SUFFIX}"))
}

const ALL_CHECKED_SUFFIX: &str = "_ALL_CHECKED";

/// The check stage modes whose `ALL_CHECKED` is among `names` (entries of `STATE/flags`).
pub(crate) fn all_checked_modes(names: &[String]) -> Vec<String> {
    names
        .iter()
        .filter_map(|n| n.strip_suffix(ALL_CHECKED_SUFFIX))
        .map(str::to_owned)
        .collect()
}

/// `STATE/locks/shared/check_results.lock`: held while `check_results` and
/// `<MODE>_ALL_CHECKED` are written. A package lock (`STATE/locks/<pkg>.lock`) cannot have
/// this path, since a package name is one path component.
pub(crate) fn check_results_lock_path(state_dir: &Path) -> PathBuf {
    state_dir
        .join("locks")
        .join("shared")
        .join("check_results.lock")
}

/// One line of `check_results`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    pub path: String,
    pub passed: bool,
}

/// SPEC §8.8: one line per step, `<PATH> <True|False>` (`True` = that check **failed**),
/// joined by `\n`, no trailing newline.
pub(crate) fn format_check_results(results: &[CheckResult]) -> String {
    let mut text = String::new();
    for (i, r) in results.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        let _ = write!(
            text,
            "{} {}",
            r.path,
            if r.passed { "False" } else { "True" }
        );
    }
    text
}

/// The lines of `check_results` (a line without a space is skipped).
pub(crate) fn parse_check_results(text: &str) -> Vec<CheckResult> {
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

/// Write `check_results`.
pub(crate) fn write_check_results(
    fs: &HostFs,
    flags_dir: &Path,
    results: &[CheckResult],
) -> Result<(), HostFsError> {
    fs.write_atomic(
        &check_results_path(flags_dir),
        format_check_results(results).as_bytes(),
    )
}

/// `check_results`, `None` when there is none; one larger than [`RECORD_BOUND`] is an
/// error, not read (SPEC §5).
pub(crate) fn read_check_results(
    fs: &HostFs,
    flags_dir: &Path,
) -> Result<Option<Vec<CheckResult>>, HostFsError> {
    Ok(fs
        .read(&check_results_path(flags_dir), RECORD_BOUND)?
        .map(|bytes| parse_check_results(&String::from_utf8_lossy(&bytes))))
}

/// Write an empty `<MODE>_ALL_CHECKED`.
pub(crate) fn write_all_checked(
    fs: &HostFs,
    flags_dir: &Path,
    mode: &str,
) -> Result<(), HostFsError> {
    fs.write_atomic(&all_checked_path(flags_dir, mode), b"")
}

/// Remove `<MODE>_ALL_CHECKED` if present.
pub(crate) fn remove_all_checked(
    fs: &HostFs,
    flags_dir: &Path,
    mode: &str,
) -> Result<bool, HostFsError> {
    fs.remove_file(&all_checked_path(flags_dir, mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_results_lines_true_means_failed() {
        let results = [
            CheckResult {
                path: "a.sh".into(),
                passed: true,
            },
            CheckResult {
                path: "sub/b c.sh".into(),
                passed: false,
            },
        ];
        assert_eq!(parse_check_results("a.sh False\nsub/b c.sh True"), results);
        assert_eq!(
            format_check_results(&results),
            "a.sh False\nsub/b c.sh True"
        );
    }

    #[test]
    fn all_checked_names() {
        assert_eq!(
            all_checked_path(Path::new("/s/flags"), "apply-check"),
            Path::new("/s/flags/apply-check_ALL_CHECKED")
        );
        assert_eq!(
            all_checked_modes(&["START".into(), "apply-check_ALL_CHECKED".into()]),
            ["apply-check"]
        );
    }
}
