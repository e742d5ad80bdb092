//! One operation as the run's log shows it (SPEC §1.5), for a step of a stage and for a
//! command of an interrupt alike: a record before it starts, a heartbeat while it runs, and
//! one result line with the same fields (docs/operations.md lists them).

use std::fs::File;
use std::time::Duration;

use tracing::info;

use super::{Config, ExecError, Outcome, ProcessSpec};

/// What an operation's records name it by.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Subject<'a> {
    /// A step: its stage's mode and its path.
    Step { mode: &'a str, path: &'a str },
    /// An interrupt operation: `<TYPE>_<i>` and its command line.
    Command { id: &'a str, command: &'a str },
}

impl<'a> Subject<'a> {
    /// `(noun, [mode, path, operation, command])`: `step` or `operation`, the first word of its
    /// records, then the fields that name it, `None` left out.
    fn fields(self) -> (&'static str, [Option<&'a str>; 4]) {
        match self {
            Subject::Step { mode, path } => ("step", [Some(mode), Some(path), None, None]),
            Subject::Command { id, command } => {
                ("operation", [None, None, Some(id), Some(command)])
            }
        }
    }
}

/// Run `spec` under `exec`, its output relayed to `log`: `<noun> started` before it, `<noun>
/// running` every `heartbeat` while it runs (zero: none).
pub(crate) async fn supervise(
    exec: &Config,
    spec: &ProcessSpec,
    log: Option<&mut File>,
    heartbeat: Duration,
    subject: Subject<'_>,
) -> Result<Outcome, ExecError> {
    let (noun, [mode, path, operation, command]) = subject.fields();
    info!(mode, path, operation, command, "{noun} started");
    let beat = |elapsed: Duration| {
        info!(
            mode,
            path,
            operation,
            command,
            elapsed_s = elapsed.as_secs(),
            "{noun} running"
        );
    };
    super::with_heartbeat(exec.run(spec, log), heartbeat, beat).await
}

/// The operation's result line, `<noun> finished`: how it ended (`result`, and `exit_code`
/// or `signal`), what it used, and whether it `succeeded` (judged by its caller).
pub(crate) fn finished(subject: Subject<'_>, outcome: &Outcome, succeeded: bool) {
    let (noun, [mode, path, operation, command]) = subject.fields();
    let usage = &outcome.usage;
    info!(
        mode,
        path,
        operation,
        command,
        result = %outcome.termination,
        exit_code = outcome.termination.exit_code(),
        signal = outcome.termination.signal(),
        duration_ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
        cpu_user_ms = usage.user_cpu_us / 1000,
        cpu_system_ms = usage.system_cpu_us / 1000,
        max_rss_kib = usage.max_rss_bytes / 1024,
        stdout_bytes = usage.stdout_bytes,
        stderr_bytes = usage.stderr_bytes,
        decision = if succeeded { "succeeded" } else { "failed" },
        "{noun} finished"
    );
}
