//! The environment of SPEC §2, parsed once at startup.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::host::fs::HostFs;

/// A problem with one environment variable; the message names the variable and value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment variable {name}={value:?}: {reason}")]
pub struct EnvError {
    pub name: &'static str,
    pub value: String,
    pub reason: String,
}

/// Format of the agent's own diagnostics on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Every setting the agent reads from its environment (SPEC §2).
#[derive(Debug, Clone)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "one per boolean environment variable (SPEC §2)"
)]
pub struct Runtime {
    pub copy_resolv: bool,
    pub always_run_step: bool,
    pub write_logs: bool,
    /// `SKYHOOK_AGENT_WRITE_METRICS`: write the metrics files after each run.
    pub write_metrics: bool,
    /// Printed raw in the banner; no effect (SPEC §2).
    pub buffer_limit: String,
    /// Raw `SKYHOOK_RESOURCE_ID` (empty when unset); parsed by [`crate::host::identity`].
    pub resource_id: String,
    pub data_dir: PathBuf,
    /// STATE, host-absolute and cleaned (ROOT not included).
    pub state_dir: PathBuf,
    /// LOGS, host-absolute and cleaned (ROOT not included).
    pub log_dir: PathBuf,
    pub log_format: LogFormat,
    pub log_filter: String,
    pub step_timeout: Option<Duration>,
    pub stop_grace: Duration,
    /// `SKYHOOK_AGENT_HEARTBEAT_SECONDS`: the interval of the `step running` record while a
    /// step runs (default 30 s; 0 turns it off).
    pub heartbeat: Duration,
    pub reboot_max_attempts: u32,
    /// `SKYHOOK_AGENT_METRICS_DIR`, host-absolute and cleaned: where a copy of the package's
    /// metrics file goes (node-exporter's textfile directory); `None` when unset or empty.
    pub metrics_dir: Option<PathBuf>,
    /// Warnings found while parsing (invalid values replaced by false or the default),
    /// emitted once logging is set up.
    pub warnings: Vec<String>,
}

pub(crate) const DEFAULT_DATA_DIR: &str = "/skyhook-package";
pub(crate) const DEFAULT_STATE_DIR: &str = "/etc/skyhook";
pub(crate) const DEFAULT_LOG_DIR: &str = "/var/log/skyhook";
pub(crate) const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(20);
pub(crate) const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(30);
pub(crate) const DEFAULT_REBOOT_MAX_ATTEMPTS: u32 = 3;

impl Runtime {
    /// Read the process environment.
    pub fn from_env() -> Result<Self, EnvError> {
        Self::from_lookup(|name| std::env::var_os(name))
    }

    /// Parse from any variable lookup (tests pass a map).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Result<Self, EnvError> {
        let mut env = Env {
            lookup,
            warnings: Vec::new(),
        };
        let copy_resolv = env.boolean("COPY_RESOLV", true)?;
        let always_run_step = env.boolean("OVERLAY_ALWAYS_RUN_STEP", false)?;
        let write_logs = env.boolean("SKYHOOK_AGENT_WRITE_LOGS", true)?;
        let write_metrics = env.boolean("SKYHOOK_AGENT_WRITE_METRICS", true)?;

        let data_dir = PathBuf::from(env.or("SKYHOOK_DATA_DIR", DEFAULT_DATA_DIR)?);
        if !data_dir.is_absolute() {
            return Err(EnvError {
                name: "SKYHOOK_DATA_DIR",
                value: data_dir.display().to_string(),
                reason: "must be an absolute path".into(),
            });
        }
        let state_dir = host_dir(
            "SKYHOOK_ROOT_DIR",
            &env.or("SKYHOOK_ROOT_DIR", DEFAULT_STATE_DIR)?,
        )?;
        let log_dir = host_dir(
            "SKYHOOK_LOG_DIR",
            &env.or("SKYHOOK_LOG_DIR", DEFAULT_LOG_DIR)?,
        )?;

        // The extension settings: an invalid value is warned about (naming the variable and
        // the value) and the default is used, as for an invalid SKYHOOK_AGENT_LOG filter.
        let log_format = env
            .parsed(
                "SKYHOOK_AGENT_LOG_FORMAT",
                "text or json",
                "text",
                |v| match v {
                    "text" => Some(LogFormat::Text),
                    "json" => Some(LogFormat::Json),
                    _ => None,
                },
            )?
            .unwrap_or(LogFormat::Text);
        let step_timeout = env.seconds("SKYHOOK_STEP_TIMEOUT_SECONDS", "unset")?;
        let stop_grace = env
            .seconds("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "20")?
            .unwrap_or(DEFAULT_STOP_GRACE);
        let heartbeat = env
            .seconds("SKYHOOK_AGENT_HEARTBEAT_SECONDS", "30")?
            .unwrap_or(DEFAULT_HEARTBEAT);
        let reboot_max_attempts = env
            .parsed(
                "SKYHOOK_REBOOT_MAX_ATTEMPTS",
                "a positive integer",
                &DEFAULT_REBOOT_MAX_ATTEMPTS.to_string(),
                |v| v.parse::<u32>().ok().filter(|&n| n > 0),
            )?
            .unwrap_or(DEFAULT_REBOOT_MAX_ATTEMPTS);

        // A diagnostic setting: a value that escapes ROOT is warned about and ignored.
        let metrics_dir = env.non_empty("SKYHOOK_AGENT_METRICS_DIR")?.and_then(|v| {
            host_dir("SKYHOOK_AGENT_METRICS_DIR", &v)
                .inspect_err(|e| {
                    env.warnings.push(format!(
                        "environment variable SKYHOOK_AGENT_METRICS_DIR={v:?} {}; writing no metrics copy",
                        e.reason
                    ));
                })
                .ok()
        });

        Ok(Self {
            copy_resolv,
            always_run_step,
            write_logs,
            write_metrics,
            buffer_limit: env
                .text("SKYHOOK_AGENT_BUFFER_LIMIT")?
                .unwrap_or_else(|| "8192".into()),
            resource_id: env.text("SKYHOOK_RESOURCE_ID")?.unwrap_or_default(),
            data_dir,
            state_dir,
            log_dir,
            log_format,
            log_filter: env.or("SKYHOOK_AGENT_LOG", "info")?,
            step_timeout,
            stop_grace,
            heartbeat,
            reboot_max_attempts,
            metrics_dir,
            warnings: env.warnings,
        })
    }

    /// `STATE/flags`.
    pub fn flags_dir(&self) -> PathBuf {
        self.state_dir.join("flags")
    }

    /// `STATE/flags/<pkg>/<ver>`: step markers of one package version.
    pub fn package_flags_dir(&self, package: &str, version: &str) -> PathBuf {
        self.flags_dir().join(package).join(version)
    }

    /// `LOGS/<pkg>/<ver>`.
    pub fn package_log_dir(&self, package: &str, version: &str) -> PathBuf {
        self.log_dir.join(package).join(version)
    }

    /// `STATE/history/<pkg>.json`.
    pub fn history_file(&self, package: &str) -> PathBuf {
        self.state_dir
            .join("history")
            .join(format!("{package}.json"))
    }
}

/// The environment being parsed (`lookup`), and the warnings about it so far.
struct Env<F> {
    lookup: F,
    warnings: Vec<String>,
}

impl<F: Fn(&str) -> Option<OsString>> Env<F> {
    /// The variable's value, `None` when unset; one that is not UTF-8 is an error.
    fn text(&self, name: &'static str) -> Result<Option<String>, EnvError> {
        (self.lookup)(name)
            .map(|v| {
                v.into_string().map_err(|v| EnvError {
                    name,
                    value: v.to_string_lossy().into_owned(),
                    reason: "is not valid UTF-8".into(),
                })
            })
            .transpose()
    }

    /// The variable's value, `None` when unset or empty.
    fn non_empty(&self, name: &'static str) -> Result<Option<String>, EnvError> {
        Ok(self.text(name)?.filter(|v| !v.is_empty()))
    }

    /// The variable's value, `default` when unset or empty.
    fn or(&self, name: &'static str, default: &str) -> Result<String, EnvError> {
        Ok(self.non_empty(name)?.unwrap_or_else(|| default.to_owned()))
    }

    fn boolean(&mut self, name: &'static str, default: bool) -> Result<bool, EnvError> {
        Ok(match self.text(name)? {
            None => default,
            Some(v) if v.eq_ignore_ascii_case("true") => true,
            Some(v) if v.eq_ignore_ascii_case("false") => false,
            // SPEC §2: anything else is false, with a warning.
            Some(v) => {
                self.warnings.push(format!(
                    "environment variable {name}={v:?} is not true or false; treating it as false"
                ));
                false
            }
        })
    }

    /// An extension setting: `None` when unset or empty, and when `parse` refuses the value,
    /// with a warning saying what it must be (`expected`) and the default used.
    fn parsed<T>(
        &mut self,
        name: &'static str,
        expected: &str,
        default: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Option<T>, EnvError> {
        let Some(v) = self.non_empty(name)? else {
            return Ok(None);
        };
        let parsed = parse(&v);
        if parsed.is_none() {
            self.warnings.push(format!(
                "environment variable {name}={v:?} is not {expected}; using the default ({default})"
            ));
        }
        Ok(parsed)
    }

    fn seconds(&mut self, name: &'static str, default: &str) -> Result<Option<Duration>, EnvError> {
        self.parsed(name, "a non-negative number of seconds", default, |v| {
            v.parse::<f64>()
                .ok()
                .filter(|s| (0.0..1e9).contains(s))
                .map(Duration::from_secs_f64)
        })
    }
}

/// SPEC §2: directory variables are ROOT-relative and must stay inside ROOT after cleaning.
fn host_dir(name: &'static str, value: &str) -> Result<PathBuf, EnvError> {
    HostFs::clean(Path::new(value)).map_err(|_| EnvError {
        name,
        value: value.to_owned(),
        reason: "escapes the host root".into(),
    })
}

/// A timeout as configured (`1`, `0.5`), for `timed out after Ns`.
pub(crate) fn format_seconds(timeout: Option<Duration>) -> String {
    let secs = timeout.map_or(0.0, |t| t.as_secs_f64());
    let text = format!("{secs:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(vars: &[(&str, &str)]) -> Result<Runtime, EnvError> {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        Runtime::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn defaults_match_spec() {
        let rt = parse(&[]).unwrap();
        assert!(rt.copy_resolv && rt.write_logs && !rt.always_run_step);
        assert_eq!(rt.buffer_limit, "8192");
        assert_eq!(rt.data_dir, Path::new("/skyhook-package"));
        assert_eq!(rt.state_dir, Path::new("/etc/skyhook"));
        assert_eq!(rt.log_dir, Path::new("/var/log/skyhook"));
        assert_eq!(rt.stop_grace, Duration::from_secs(20));
        assert_eq!(rt.reboot_max_attempts, 3);
        assert_eq!(rt.step_timeout, None);
        assert!(rt.warnings.is_empty());
    }

    #[test]
    fn booleans_are_case_insensitive_and_anything_else_is_false_with_a_warning() {
        let rt = parse(&[
            ("COPY_RESOLV", "FALSE"),
            ("OVERLAY_ALWAYS_RUN_STEP", "True"),
            ("SKYHOOK_AGENT_WRITE_LOGS", "yes"),
        ])
        .unwrap();
        assert!(!rt.copy_resolv && rt.always_run_step && !rt.write_logs);
        assert_eq!(rt.warnings.len(), 1);
        assert!(
            rt.warnings[0].contains("SKYHOOK_AGENT_WRITE_LOGS=\"yes\""),
            "{:?}",
            rt.warnings
        );
    }

    #[test]
    fn empty_directory_variables_take_the_default() {
        let rt = parse(&[
            ("SKYHOOK_ROOT_DIR", ""),
            ("SKYHOOK_LOG_DIR", ""),
            ("SKYHOOK_DATA_DIR", ""),
        ])
        .unwrap();
        assert_eq!(rt.state_dir, Path::new("/etc/skyhook"));
        assert_eq!(rt.log_dir, Path::new("/var/log/skyhook"));
        assert_eq!(rt.data_dir, Path::new("/skyhook-package"));
    }

    #[test]
    fn directory_variables_are_cleaned() {
        let rt = parse(&[
            ("SKYHOOK_ROOT_DIR", "/var/lib//skyhook/./sk1/"),
            ("SKYHOOK_LOG_DIR", "var/log/x/../sk1"),
        ])
        .unwrap();
        assert_eq!(rt.state_dir, Path::new("/var/lib/skyhook/sk1"));
        assert_eq!(rt.log_dir, Path::new("/var/log/sk1"));
    }

    #[test]
    fn the_metrics_directory_is_cleaned_and_one_that_escapes_is_ignored_with_a_warning() {
        assert_eq!(parse(&[]).unwrap().metrics_dir, None);
        assert!(parse(&[]).unwrap().write_metrics);
        assert!(
            !parse(&[("SKYHOOK_AGENT_WRITE_METRICS", "False")])
                .unwrap()
                .write_metrics
        );
        assert_eq!(
            parse(&[("SKYHOOK_AGENT_METRICS_DIR", "")])
                .unwrap()
                .metrics_dir,
            None
        );
        let rt = parse(&[(
            "SKYHOOK_AGENT_METRICS_DIR",
            "var/lib/node_exporter//textfile/.",
        )])
        .unwrap();
        assert_eq!(
            rt.metrics_dir.as_deref(),
            Some(Path::new("/var/lib/node_exporter/textfile"))
        );
        assert!(rt.warnings.is_empty());
        let rt = parse(&[("SKYHOOK_AGENT_METRICS_DIR", "/../etc")]).unwrap();
        assert_eq!(rt.metrics_dir, None);
        assert_eq!(rt.warnings.len(), 1);
        assert!(
            rt.warnings[0].contains("SKYHOOK_AGENT_METRICS_DIR=\"/../etc\" escapes the host root"),
            "{:?}",
            rt.warnings
        );
    }

    #[test]
    fn directory_escaping_root_is_an_error_naming_it() {
        let err = parse(&[("SKYHOOK_ROOT_DIR", "../../x")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"environment variable SKYHOOK_ROOT_DIR="../../x": escapes the host root"#
        );
    }

    #[test]
    fn relative_data_dir_is_an_error() {
        let err = parse(&[("SKYHOOK_DATA_DIR", "pkg")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"environment variable SKYHOOK_DATA_DIR="pkg": must be an absolute path"#
        );
    }

    #[test]
    fn invalid_extension_settings_warn_and_take_the_default() {
        let rt = parse(&[
            ("SKYHOOK_STEP_TIMEOUT_SECONDS", "abc"),
            ("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "-1"),
            ("SKYHOOK_REBOOT_MAX_ATTEMPTS", "0"),
            ("SKYHOOK_AGENT_LOG_FORMAT", "yaml"),
        ])
        .unwrap();
        assert_eq!(rt.step_timeout, None);
        assert_eq!(rt.stop_grace, DEFAULT_STOP_GRACE);
        assert_eq!(rt.reboot_max_attempts, DEFAULT_REBOOT_MAX_ATTEMPTS);
        assert_eq!(rt.log_format, LogFormat::Text);
        assert_eq!(
            rt.warnings,
            [
                r#"environment variable SKYHOOK_AGENT_LOG_FORMAT="yaml" is not text or json; using the default (text)"#,
                r#"environment variable SKYHOOK_STEP_TIMEOUT_SECONDS="abc" is not a non-negative number of seconds; using the default (unset)"#,
                r#"environment variable SKYHOOK_AGENT_STOP_GRACE_SECONDS="-1" is not a non-negative number of seconds; using the default (20)"#,
                r#"environment variable SKYHOOK_REBOOT_MAX_ATTEMPTS="0" is not a positive integer; using the default (3)"#,
            ]
        );
    }

    #[test]
    fn numbers_are_parsed() {
        let rt = parse(&[
            ("SKYHOOK_STEP_TIMEOUT_SECONDS", "1.5"),
            ("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "2"),
        ])
        .unwrap();
        assert_eq!(rt.step_timeout, Some(Duration::from_millis(1500)));
        assert_eq!(rt.stop_grace, Duration::from_secs(2));
    }
}
