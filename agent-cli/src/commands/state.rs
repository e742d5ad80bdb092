//! Which STATE (and LOGS) a subcommand reads: one rule for every reader (SPEC §1.5).
//!
//! `--state-dir` when given, else `SKYHOOK_ROOT_DIR` when set, else the directories of the
//! operator's layout under ROOT that hold agent state (`/var/lib/skyhook/<name>`, logs in
//! `/var/log/skyhook/<name>`) and the legacy default `/etc/skyhook` when it does.

use std::path::{Path, PathBuf};

use agent_core::host::fs::HostFs;
use agent_core::host::runtime::Runtime;
use agent_core::state::status;
use serde::Serialize;

use crate::cli::Verbosity;
use crate::output::Failure;

/// The runtime settings a subcommand starts from, with its diagnostics set up at the level
/// `-q`/`-v` (else SKYHOOK_AGENT_LOG) ask for.
pub fn runtime(verbosity: Verbosity) -> Result<Runtime, Failure> {
    let rt = Runtime::from_env().map_err(|e| Failure::failed(e.to_string()))?;
    crate::logging::init(&rt, verbosity);
    Ok(rt)
}

/// One STATE directory a subcommand reads, with its LOGS and how it was chosen (in that order
/// in `agent logs --format json`).
#[derive(Debug, Serialize)]
pub struct Located {
    pub state_dir: PathBuf,
    /// `--state-dir`, `SKYHOOK_ROOT_DIR`, `found` (the operator's layout or the legacy
    /// default holds state) or `default` (nothing found: the legacy default).
    #[serde(rename = "state_source")]
    pub source: &'static str,
    pub log_dir: PathBuf,
}

impl Located {
    /// The runtime settings with this STATE and LOGS.
    pub fn runtime(&self, rt: &Runtime) -> Runtime {
        Runtime {
            state_dir: self.state_dir.clone(),
            log_dir: self.log_dir.clone(),
            ..rt.clone()
        }
    }

    /// `state: /var/lib/skyhook/sk1 (logs: /var/log/skyhook/sk1; from SKYHOOK_ROOT_DIR)`.
    pub fn line(&self) -> String {
        format!(
            "state: {} (logs: {}; {})",
            self.state_dir.display(),
            self.log_dir.display(),
            self.how()
        )
    }

    fn how(&self) -> &'static str {
        match self.source {
            "--state-dir" => "from --state-dir",
            "SKYHOOK_ROOT_DIR" => "from SKYHOOK_ROOT_DIR",
            "found" => "found on the host",
            _ => "the default: no state found on the host",
        }
    }
}

fn env_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

/// Every STATE the rule selects; the error (a usage error) names a bad `--state-dir`.
pub fn locate(fs: &HostFs, rt: &Runtime, flag: Option<&Path>) -> Result<Vec<Located>, String> {
    if let Some(dir) = flag {
        let state_dir =
            HostFs::clean(dir).map_err(|e| format!("--state-dir {}: {e}", dir.display()))?;
        return Ok(vec![Located {
            state_dir,
            log_dir: rt.log_dir.clone(),
            source: "--state-dir",
        }]);
    }
    if env_set("SKYHOOK_ROOT_DIR") {
        return Ok(vec![Located {
            state_dir: rt.state_dir.clone(),
            log_dir: rt.log_dir.clone(),
            source: "SKYHOOK_ROOT_DIR",
        }]);
    }
    let found = status::discover(fs, &rt.state_dir, &rt.log_dir);
    let nothing = matches!(found.as_slice(), [(s, _)] if s == &rt.state_dir)
        && !status::holds_state(fs, &rt.state_dir);
    Ok(found
        .into_iter()
        .map(|(state_dir, logs)| Located {
            state_dir,
            // SKYHOOK_LOG_DIR, when set, names LOGS for every state found.
            log_dir: if env_set("SKYHOOK_LOG_DIR") {
                rt.log_dir.clone()
            } else {
                logs
            },
            source: if nothing { "default" } else { "found" },
        })
        .collect())
}

/// The one STATE a subcommand that acts on one reads, and the runtime settings with it; several
/// found is a usage error, as is a bad `--state-dir`.
pub fn locate_one(
    fs: &HostFs,
    rt: &Runtime,
    flag: Option<&Path>,
) -> Result<(Runtime, Located), Failure> {
    let mut found = locate(fs, rt, flag).map_err(Failure::usage)?;
    if found.len() == 1 {
        let located = found.remove(0);
        return Ok((located.runtime(rt), located));
    }
    Err(Failure::usage(format!(
        "several state directories hold agent state ({}); choose one with --state-dir",
        found
            .iter()
            .map(|l| l.state_dir.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}
