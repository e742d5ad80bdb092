//! Which steps of a stage run, and with what (SPEC §8.2, §8.4, §8.5, §8.9): the decisions a
//! stage run acts on and `agent plan` describes, so the two cannot disagree; and what a plan
//! says a run would do with an operation ([`PlannedAction`]).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::package::step::{Mode, Step};

/// Why a step runs or is skipped (SPEC §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Check stages run every step.
    CheckStage,
    NoMarker,
    AlwaysRunPolicy,
    StageAlwaysRuns,
    IdempotenceDisabled,
    SkipCompleted,
}

impl Decision {
    pub const fn runs(self) -> bool {
        !matches!(self, Decision::SkipCompleted)
    }

    /// Short reason, for logs, plans and results.
    pub const fn reason(self) -> &'static str {
        match self {
            Decision::CheckStage => "check stages run every step",
            Decision::NoMarker => "no completion marker",
            Decision::AlwaysRunPolicy => "always-run policy is enabled",
            Decision::StageAlwaysRuns => "this stage always runs its steps",
            Decision::IdempotenceDisabled => "idempotence is disabled for this step",
            Decision::SkipCompleted => "completion marker present",
        }
    }
}

/// The decision table of SPEC §8.2; first matching rule wins.
pub fn decide(mode: Mode, step: &Step, completed: bool, always_run: bool) -> Decision {
    if mode.is_check() {
        Decision::CheckStage
    } else if !completed {
        Decision::NoMarker
    } else if always_run {
        Decision::AlwaysRunPolicy
    } else if matches!(mode, Mode::Config | Mode::Uninstall | Mode::Upgrade) {
        Decision::StageAlwaysRuns
    } else if step.idempotence_disabled {
        Decision::IdempotenceDisabled
    } else {
        Decision::SkipCompleted
    }
}

/// A step's arguments as it receives them (SPEC §8.5, §8.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arguments {
    /// `env:NAME` replaced by the value of NAME; upgrade steps get `[previous, current]`
    /// appended.
    pub values: Vec<String>,
    /// The `env:` names that are not set, all of them: the step fails before exec.
    pub missing: Vec<String>,
}

/// Resolve a step's arguments against the agent's environment `env` (last value wins).
pub fn arguments(
    step: &Step,
    env: &[(OsString, OsString)],
    versions: Option<&[String; 2]>,
) -> Arguments {
    let mut values = Vec::with_capacity(step.arguments.len() + 2);
    let mut missing = Vec::new();
    for arg in &step.arguments {
        match arg.strip_prefix("env:") {
            Some(name) => match lookup(env, name) {
                Some(value) => values.push(value.to_string_lossy().into_owned()),
                None => missing.push(name.to_owned()),
            },
            None => values.push(arg.clone()),
        }
    }
    if let Some(extra) = versions.filter(|_| step.upgrade_step) {
        values.extend(extra.iter().cloned());
    }
    Arguments { values, missing }
}

fn lookup<'e>(env: &'e [(OsString, OsString)], name: &str) -> Option<&'e OsStr> {
    env.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_os_str())
}

/// Where a step runs (SPEC §8.4): host steps see host-absolute paths inside the chroot;
/// other steps see the paths under ROOT from the agent's container.
#[derive(Debug, Clone)]
pub struct StepPaths {
    /// The executable as the process sees it.
    pub program: PathBuf,
    pub cwd: PathBuf,
    /// `STEP_ROOT`.
    pub step_root: PathBuf,
    /// `SKYHOOK_DIR`.
    pub skyhook_dir: PathBuf,
    /// chroot into ROOT (host steps, unless ROOT is `/`).
    pub chroot: Option<PathBuf>,
    /// The step file itself, under ROOT.
    pub file: PathBuf,
}

impl StepPaths {
    /// The paths of `step` of the package at `copy_dir` (host-absolute) under `root`.
    pub fn new(root: &Path, copy_dir: &Path, step: &Step) -> Self {
        let package_real = join_under(root, copy_dir);
        let file = package_real.join("skyhook_dir").join(&step.path);
        if step.on_host {
            let skyhook_dir_host = copy_dir.join("skyhook_dir");
            Self {
                program: skyhook_dir_host.join(&step.path),
                cwd: copy_dir.to_path_buf(),
                step_root: skyhook_dir_host,
                skyhook_dir: copy_dir.to_path_buf(),
                chroot: (root != Path::new("/")).then(|| root.to_path_buf()),
                file,
            }
        } else {
            Self {
                program: file.clone(),
                cwd: package_real.clone(),
                step_root: package_real.join("skyhook_dir"),
                skyhook_dir: package_real,
                chroot: None,
                file,
            }
        }
    }

    /// SPEC §8.5: what the agent sets on top of its own environment for this step, in order
    /// (last wins): the step's `env`, the upgrade versions, `STEP_ROOT` and `SKYHOOK_DIR`.
    pub fn env_overrides(
        &self,
        step: &Step,
        versions: Option<&[String; 2]>,
    ) -> Vec<(String, OsString)> {
        let mut out: Vec<(String, OsString)> = step
            .env
            .iter()
            .map(|(k, v)| (k.clone(), OsString::from(v)))
            .collect();
        if let Some([previous, current]) = versions {
            out.push(("PREVIOUS_VERSION".into(), previous.into()));
            out.push(("CURRENT_VERSION".into(), current.into()));
        }
        out.push(("STEP_ROOT".into(), self.step_root.clone().into_os_string()));
        out.push((
            "SKYHOOK_DIR".into(),
            self.skyhook_dir.clone().into_os_string(),
        ));
        out
    }
}

/// `<R>path` for a host-absolute path.
pub fn join_under(root: &Path, host_path: &Path) -> PathBuf {
    root.join(host_path.strip_prefix("/").unwrap_or(host_path))
}

/// What a real run would do with one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlannedAction {
    /// The command would run.
    Run,
    /// Nothing would run: the operation is complete (or completes from its pending marker).
    Skip,
    /// No command; only the completion marker would be written.
    Record,
    /// The run would fail here without running the command.
    Fail,
    /// An earlier operation ends the run first.
    NotReached,
}

impl PlannedAction {
    /// `run`, `skip`, `record`, `fail`, `not-reached`.
    pub const fn as_str(self) -> &'static str {
        match self {
            PlannedAction::Run => "run",
            PlannedAction::Skip => "skip",
            PlannedAction::Record => "record",
            PlannedAction::Fail => "fail",
            PlannedAction::NotReached => "not-reached",
        }
    }
}

#[cfg(test)]
mod tests;
