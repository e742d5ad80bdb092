//! config.json schema v1: validation whose findings name the JSON path (SPEC §7).
//!
//! The document is checked by hand rather than through `#[derive(Deserialize)]`: serde stops
//! at the first problem and its messages name neither the JSON path nor the rule, while
//! `agent validate` must report every finding with its path. It is never held as one tree:
//! the step objects are read, checked and turned into [`Step`]s one at a time (`stream`). One
//! validator serves [`PackageConfig::from_slice`], [`PackageConfig::load`] and [`lint`]; they
//! differ only in strictness (unknown fields) and in which files they look at.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use crate::package::step::{Mode, Step};

/// The only `schema_version` this agent knows.
pub(crate) const SCHEMA_VERSION: &str = "v1";

/// The message of the "no steps at all" rule, kept byte-for-byte from the upstream agent
/// (capitalised, unlike every other finding).
pub(crate) const NO_DEFINED_STEPS: &str = "There are no defined steps";

/// The pattern a step name must match, as the upstream schema spells it.
pub(crate) const STEP_NAME_PATTERN: &str = r"^[a-zA-Z0-9_\-.]+$";

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

/// One validation finding: a JSON path (`modes.apply[1].returncodes`, empty for the whole
/// document) and a lowercase message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub severity: Severity,
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Why a package config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The first error finding.
    #[error("{0}")]
    Invalid(Finding),
}

/// A validated package config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageConfig {
    pub schema_version: String,
    pub package_name: String,
    pub package_version: String,
    pub expected_config_files: Vec<String>,
    pub modes: BTreeMap<Mode, Vec<Step>>,
}

impl PackageConfig {
    /// The steps of a mode (empty if the mode is absent).
    pub fn steps(&self, mode: Mode) -> &[Step] {
        self.modes.get(&mode).map_or(&[], Vec::as_slice)
    }

    /// Parse and validate every rule of SPEC §7 except step-file existence. Returns the config
    /// and its warnings, or the first error.
    pub fn from_slice(bytes: &[u8]) -> Result<(Self, Vec<Finding>), ConfigError> {
        Validator::new(Strictness::Run).run(bytes, &Files::default())
    }

    /// Read `config_json` (a real path), validate it, and check that every step file exists
    /// under `skyhook_dir` (a real path) as a regular file after following links.
    pub fn load(
        config_json: &Path,
        skyhook_dir: &Path,
    ) -> Result<(Self, Vec<Finding>), ConfigError> {
        Self::load_keeping(config_json, skyhook_dir, None)
    }

    /// [`PackageConfig::load`] for a run of `mode`: every rule is checked as for `load`, but
    /// only the steps `mode` runs are kept (every mode's for `uninstall-check`, which removes
    /// the markers of all of them); [`PackageConfig::steps`] of another mode is empty. What a
    /// large package costs in memory while its steps run is then one mode's steps.
    pub fn load_stage(
        config_json: &Path,
        skyhook_dir: &Path,
        mode: Mode,
    ) -> Result<(Self, Vec<Finding>), ConfigError> {
        let keep = (mode != Mode::UninstallCheck).then_some(mode);
        Self::load_keeping(config_json, skyhook_dir, keep)
    }

    /// The file is parsed as it is read (never held whole); only when it is not a JSON
    /// document as read is it read whole again, for the finding that says why.
    fn load_keeping(
        config_json: &Path,
        skyhook_dir: &Path,
        keep: Option<Mode>,
    ) -> Result<(Self, Vec<Finding>), ConfigError> {
        let read_err = |source| ConfigError::Read {
            path: config_json.display().to_string(),
            source,
        };
        let files = Files {
            skyhook_dir: Some(skyhook_dir),
            configmaps_dir: None,
        };
        let file = open_input_file(config_json).map_err(read_err)?;
        let validator = Validator::new(Strictness::Run).keeping(keep);
        let reader = io::BufReader::new(file);
        if let Some(result) = validator.clone().run_reader(reader, &files) {
            return result;
        }
        let bytes = read_input_file(config_json).map_err(read_err)?;
        validator.run(&bytes, &files)
    }
}

/// The content of an input file such as config.json (SPEC §5). Opening a FIFO without
/// `O_NONBLOCK` would block until a writer appears, and a blocked `open(2)` is restarted after
/// SIGTERM: the agent would hang where it must fail; opening a device can act on it, and
/// reading one may never end. So a fifo, socket or device is refused from its type before it
/// is opened, naming the type, and the file is opened without blocking and checked again
/// (it may have been swapped). A directory fails the read itself, with the system's message.
///
/// # Errors
/// The file cannot be opened or read, or it is a fifo, socket or device.
pub fn read_input_file(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    open_input_file(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// [`read_input_file`]'s checks and open, for a caller that reads the file as it goes.
fn open_input_file(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
    let refuse_special = |meta: &std::fs::Metadata| {
        if meta.is_file() || meta.is_dir() {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}, not a regular file",
                crate::host::fs::kind_name(meta.mode())
            ),
        ))
    };
    refuse_special(&std::fs::metadata(path)?)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    refuse_special(&file.metadata()?)?;
    Ok(file)
}

/// Every finding for `agent validate`: all rule violations (not just the first), unknown fields
/// as errors, `_check` pairing warnings, step files under `skyhook_dir`, expected config files
/// under `configmaps_dir`.
///
/// Findings are ordered by JSON path (array indices compared as numbers), errors before
/// warnings at the same path, then by message.
pub fn lint(bytes: &[u8], skyhook_dir: &Path, configmaps_dir: &Path) -> Vec<Finding> {
    let files = Files {
        skyhook_dir: Some(skyhook_dir),
        configmaps_dir: Some(configmaps_dir),
    };
    let mut validator = Validator::new(Strictness::Lint);
    validator.check(bytes, &files);
    let mut findings = validator.findings;
    findings.sort_by_cached_key(|f| {
        (
            path_sort_key(&f.path),
            Reverse(f.severity),
            f.message.clone(),
        )
    });
    findings
}

/// `true` iff `s` matches the semver.org 2.0 pattern the upstream schema uses for
/// `package_version` (ASCII digits only, no surrounding whitespace).
pub(crate) fn is_semver(s: &str) -> bool {
    fn numeric(id: &str) -> bool {
        !id.is_empty()
            && id.bytes().all(|b| b.is_ascii_digit())
            && (id.len() == 1 || !id.starts_with('0'))
    }
    fn alphanumeric(id: &str) -> bool {
        !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    }
    // The first `+` starts the build metadata and the first `-` before it the pre-release;
    // neither can occur in the part before them.
    let (rest, build) = s.split_once('+').map_or((s, None), |(r, b)| (r, Some(b)));
    let (core, pre) = rest
        .split_once('-')
        .map_or((rest, None), |(c, p)| (c, Some(p)));
    let core_ok = {
        let parts: Vec<&str> = core.split('.').collect();
        parts.len() == 3 && parts.iter().all(|p| numeric(p))
    };
    // A numeric pre-release identifier may not have leading zeros; one with a letter or `-` may.
    let pre_ok = pre.is_none_or(|pre| {
        pre.split('.')
            .all(|id| alphanumeric(id) && (numeric(id) || id.bytes().any(|b| !b.is_ascii_digit())))
    });
    let build_ok = build.is_none_or(|build| build.split('.').all(alphanumeric));
    core_ok && pre_ok && build_ok
}

/// The step path the `_check` pairing rule looks for: `_check` inserted before the extension
/// of the file name (`dir/x.sh` → `dir/x_check.sh`), or appended when there is none.
pub(crate) fn expected_check_path(step_path: &str) -> String {
    let (dir, base) = step_path
        .rfind('/')
        .map_or(("", step_path), |i| step_path.split_at(i + 1));
    match base.rfind('.') {
        Some(i) if i + 1 < base.len() => format!("{dir}{}_check{}", &base[..i], &base[i..]),
        Some(i) => format!("{dir}{}_check", &base[..i]),
        None => format!("{dir}{base}_check"),
    }
}

mod stream;
mod validation;

use validation::{Files, Strictness, Validator, path_sort_key};

#[cfg(test)]
mod tests;
