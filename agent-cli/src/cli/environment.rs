//! What the command line's documentation says beyond arguments and flags: the environment
//! the agent reads (SPEC §2 and its own `SKYHOOK_AGENT_*` settings), the files it keeps on a
//! host (docs/state-layout.md) and its exit codes (SPEC §1.2). Rendered into `agent MODE
//! --help` and the manual page.

/// A variable the agent reads: name, default, meaning.
pub struct Variable {
    pub name: &'static str,
    pub default: &'static str,
    pub meaning: &'static str,
}

impl Variable {
    /// `required`, or `default X`.
    pub fn default_text(&self) -> String {
        if self.default == "required" {
            "required".to_owned()
        } else {
            format!("default {}", self.default)
        }
    }
}

const fn var(name: &'static str, default: &'static str, meaning: &'static str) -> Variable {
    Variable {
        name,
        default,
        meaning,
    }
}

/// Every variable of SPEC §2, then the agent's own settings, in the order of
/// docs/operations.md's table.
pub const ENVIRONMENT: &[Variable] = &[
    var(
        "SKYHOOK_RESOURCE_ID",
        "required",
        "<prefix>_<package>_<version>, e.g. sk1-uid_pkg_1.0.0; interrupts run once per value",
    ),
    var(
        "SKYHOOK_ROOT_DIR",
        "/etc/skyhook",
        "STATE, relative to ROOT_MOUNT: markers, history, results, locks",
    ),
    var(
        "SKYHOOK_LOG_DIR",
        "/var/log/skyhook",
        "LOGS, relative to ROOT_MOUNT: per-operation log files",
    ),
    var(
        "SKYHOOK_DATA_DIR",
        "/skyhook-package",
        "package source for a COPY_DIR that does not exist yet (legacy invocations)",
    ),
    var(
        "COPY_RESOLV",
        "true",
        "copy the container's /etc/resolv.conf to the host's",
    ),
    var(
        "OVERLAY_ALWAYS_RUN_STEP",
        "false",
        "run completed steps again, with a warning",
    ),
    var(
        "SKYHOOK_AGENT_WRITE_LOGS",
        "true",
        "keep per-operation log files; output is streamed either way",
    ),
    var(
        "SKYHOOK_AGENT_BUFFER_LIMIT",
        "8192",
        "printed in the banner for compatibility; no effect",
    ),
    var(
        "SKYHOOK_NODE_ORDER",
        "unset",
        "not read by the agent; steps see it in their environment and as an env: argument",
    ),
    var(
        "SKYHOOK_STEP_TIMEOUT_SECONDS",
        "unset",
        "stop an operation that runs longer (SIGTERM, the stop grace, SIGKILL)",
    ),
    var(
        "SKYHOOK_AGENT_HEARTBEAT_SECONDS",
        "30",
        "interval of the `step running` record while a step runs; 0: none",
    ),
    var(
        "SKYHOOK_AGENT_STOP_GRACE_SECONDS",
        "20",
        "between the SIGTERM sent to an operation's process group and SIGKILL",
    ),
    var(
        "SKYHOOK_REBOOT_MAX_ATTEMPTS",
        "3",
        "reboots requested under one boot ID before the agent refuses to reboot again",
    ),
    var(
        "SKYHOOK_AGENT_LOG_FORMAT",
        "text",
        "json: the diagnostics on stderr as JSON lines",
    ),
    var(
        "SKYHOOK_AGENT_LOG",
        "info",
        "filter of the diagnostics: a level and target=level directives, comma-separated; -q and -v override it",
    ),
    var(
        "SKYHOOK_AGENT_WRITE_METRICS",
        "true",
        "write the package's metrics file STATE/metrics/<pkg>.prom after each run",
    ),
    var(
        "SKYHOOK_AGENT_METRICS_DIR",
        "unset",
        "host directory that also gets the metrics file, as skyhook_agent_<pkg>.prom",
    ),
    var(
        "SKYHOOK_AGENT_PHASE_TIMES",
        "unset",
        "for the benchmark: a file (not under ROOT) where the agent writes, at exit, the total \
         time of each phase of its operations",
    ),
];

/// The files the agent keeps on a host (docs/state-layout.md has the formats and who reads
/// each): path, what it is.
pub const FILES: &[(&str, &str)] = &[
    (
        "STATE/flags/<pkg>/<ver>/",
        "completion markers of the steps that succeeded, under the legacy and the Go agent's names",
    ),
    (
        "STATE/flags/check_results",
        "the checks of the last check stage: <PATH> True|False, True meaning the check failed",
    ),
    (
        "STATE/flags/<stage>_ALL_CHECKED",
        "written when every check of a check stage passed",
    ),
    (
        "STATE/history/<pkg>.json",
        "the package's current version and the versions before it",
    ),
    (
        "STATE/interrupts/flags/<RID>/",
        "interrupt markers: <TYPE>_<i>.complete, .pending (a reboot under way), .attempts",
    ),
    (
        "STATE/results/<pkg>/<ver>/<stage>.json",
        "the results record of the last run of a stage (or interrupt, or reset)",
    ),
    (
        "STATE/metrics/<pkg>.prom",
        "the package's metrics, Prometheus text format",
    ),
    (
        "STATE/locks/",
        "one lock per package and per interrupt resource, held while a run works on it",
    ),
    (
        "LOGS/<pkg>/<ver>/",
        "per-step and per-interrupt log files, the 5 newest of each kept",
    ),
];

/// SPEC §1.2.
pub const EXIT_STATUS: &[(&str, &str)] = &[
    (
        "0",
        "the operation satisfied its policy (completed work skipped, an unknown MODE a no-op)",
    ),
    (
        "1",
        "an operation failed, a runtime error occurred, or a signal stopped the run",
    ),
    ("2", "malformed arguments (usage)"),
];

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use agent_core::host::runtime::Runtime;

    use super::ENVIRONMENT;

    /// The table names every variable the agent reads, and SPEC §2's one it only passes on.
    /// (A variable read outside the runtime settings is added by hand below.)
    #[test]
    fn every_variable_the_agent_reads_is_documented() {
        let read = RefCell::new(Vec::new());
        Runtime::from_lookup(|name| {
            read.borrow_mut().push(name.to_owned());
            None
        })
        .expect("the defaults are valid");
        let mut read = read.into_inner();
        assert!(read.len() >= 15, "{read:?}");
        // Read by the operator forms themselves, not through the runtime settings.
        read.push(agent_core::host::phases::PHASE_TIMES_VAR.to_owned());
        for name in read
            .iter()
            .map(String::as_str)
            .chain(["SKYHOOK_NODE_ORDER"])
        {
            assert!(
                ENVIRONMENT.iter().any(|v| v.name == name),
                "{name} is read but not documented"
            );
        }
        for v in ENVIRONMENT {
            assert!(
                v.name == "SKYHOOK_NODE_ORDER" || read.iter().any(|n| n == v.name),
                "{} is documented but not read",
                v.name
            );
        }
    }
}
