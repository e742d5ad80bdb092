//! Stage modes and package steps: the data a stage runs, its execution header and environment.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::compat::pyrepr;

/// A stage mode of SPEC §1.1 (every MODE except `interrupt`, which is not a stage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    Apply,
    ApplyCheck,
    Config,
    ConfigCheck,
    Upgrade,
    UpgradeCheck,
    Uninstall,
    UninstallCheck,
    PostInterrupt,
    PostInterruptCheck,
}

impl Mode {
    /// Every stage mode, non-check modes each followed by their `-check` twin.
    pub const ALL: [Mode; 10] = [
        Mode::Apply,
        Mode::ApplyCheck,
        Mode::Config,
        Mode::ConfigCheck,
        Mode::Upgrade,
        Mode::UpgradeCheck,
        Mode::Uninstall,
        Mode::UninstallCheck,
        Mode::PostInterrupt,
        Mode::PostInterruptCheck,
    ];

    /// The wire name (`apply-check`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Mode::Apply => "apply",
            Mode::ApplyCheck => "apply-check",
            Mode::Config => "config",
            Mode::ConfigCheck => "config-check",
            Mode::Upgrade => "upgrade",
            Mode::UpgradeCheck => "upgrade-check",
            Mode::Uninstall => "uninstall",
            Mode::UninstallCheck => "uninstall-check",
            Mode::PostInterrupt => "post-interrupt",
            Mode::PostInterruptCheck => "post-interrupt-check",
        }
    }

    /// `*-check` stages run every step, never consult markers and record check results.
    pub const fn is_check(self) -> bool {
        matches!(
            self,
            Mode::ApplyCheck
                | Mode::ConfigCheck
                | Mode::UpgradeCheck
                | Mode::UninstallCheck
                | Mode::PostInterruptCheck
        )
    }

    /// The `-check` twin of a non-check mode (`None` for check modes).
    pub const fn check_twin(self) -> Option<Mode> {
        match self {
            Mode::Apply => Some(Mode::ApplyCheck),
            Mode::Config => Some(Mode::ConfigCheck),
            Mode::Upgrade => Some(Mode::UpgradeCheck),
            Mode::Uninstall => Some(Mode::UninstallCheck),
            Mode::PostInterrupt => Some(Mode::PostInterruptCheck),
            _ => None,
        }
    }

    /// `upgrade` and `upgrade-check` pass versions to their steps (SPEC §8.5, §8.9).
    pub const fn is_upgrade(self) -> bool {
        matches!(self, Mode::Upgrade | Mode::UpgradeCheck)
    }

    /// `uninstall` and `uninstall-check` skip the `root_dir` overlay (SPEC §6.7).
    pub const fn is_uninstall(self) -> bool {
        matches!(self, Mode::Uninstall | Mode::UninstallCheck)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error for a string that is not a stage mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown stage mode {0:?}")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| UnknownMode(s.to_owned()))
    }
}

/// One step of a package mode, as configured in config.json (SPEC §7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub name: String,
    /// Relative to `skyhook_dir`; validated: no `..`, not absolute, no NUL.
    pub path: String,
    /// As configured: `env:NAME` unresolved, no upgrade versions.
    pub arguments: Vec<String>,
    pub returncodes: Vec<i64>,
    pub on_host: bool,
    pub env: BTreeMap<String, String>,
    /// config.json `idempotence`: `true` means Disabled (the step always runs).
    pub idempotence_disabled: bool,
    #[allow(clippy::struct_field_names, reason = "config.json's `upgrade_step`")]
    pub upgrade_step: bool,
}

impl Step {
    /// `Idempotence.Auto` / `Idempotence.Disabled`, as the legacy header prints it.
    pub(crate) const fn idempotence_label(&self) -> &'static str {
        if self.idempotence_disabled {
            "Idempotence.Disabled"
        } else {
            "Idempotence.Auto"
        }
    }

    /// The execution header of SPEC §8.3 (without the trailing newline). `upgrade_args` are the
    /// resolved `[previous, current]` appended for upgrade steps.
    pub fn header(&self, mode: Mode, upgrade_args: Option<&[String; 2]>) -> String {
        let mut args = self.arguments.clone();
        if let Some(extra) = upgrade_args {
            args.extend(extra.iter().cloned());
        }
        format!(
            "{mode} {} {} {} {} {}",
            self.path,
            pyrepr::repr_str_list(&args),
            pyrepr::repr_int_list(&self.returncodes),
            self.idempotence_label(),
            if self.on_host { "True" } else { "False" },
        )
    }
}
