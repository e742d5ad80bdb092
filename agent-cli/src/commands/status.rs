//! `agent status ROOT`: what the agent left on a host, with a verdict a script can test
//! (SPEC §1.4).

use std::fmt::Write as _;
use std::process::ExitCode;

use agent_core::host::fs::HostFs;
use agent_core::state::locks::Holder;
use agent_core::state::results::ResultsRecord;
use agent_core::state::status::{self, HostStatus, InterruptStatus, StatusError, Verdict};
use serde::Serialize;

use crate::cli::{Status, Verbosity};
use crate::output::{self, Failure};

/// The whole answer, as `--format json` prints it.
#[derive(Debug, Serialize)]
struct Report {
    status: Verdict,
    errors: Vec<StatusError>,
    states: Vec<Found>,
}

/// One STATE directory's status, and how it was chosen.
#[derive(Debug, Serialize)]
struct Found {
    #[serde(flatten)]
    status: HostStatus,
    /// `--state-dir`, `SKYHOOK_ROOT_DIR`, `found` or `default`.
    #[serde(rename = "state_source")]
    source: &'static str,
    #[serde(skip)]
    line: String,
}

pub fn run(args: &Status, verbosity: Verbosity) -> ExitCode {
    let format = args.format.or_json(args.json);
    match status(args, verbosity) {
        Ok(report) => {
            output::print_result(format, &report, || render(&report));
            ExitCode::from(u8::from(report.status.is_failure()))
        }
        Err(f) => output::fail(format, &["status"], "agent status failed", &f),
    }
}

fn status(args: &Status, verbosity: Verbosity) -> Result<Report, Failure> {
    let rt = super::state::runtime(verbosity)?;
    let fs = HostFs::new(&args.root);
    let states: Vec<Found> = super::state::locate(&fs, &rt, args.state_dir.as_deref())
        .map_err(Failure::usage)?
        .into_iter()
        .map(|located| Found {
            status: status::collect(&fs, &located.runtime(&rt)),
            source: located.source,
            line: located.line(),
        })
        .collect();
    Ok(Report {
        status: Verdict::combine(states.iter().map(|s| s.status.status)),
        errors: states
            .iter()
            .flat_map(|s| s.status.errors.clone())
            .collect(),
        states,
    })
}

fn render(report: &Report) -> String {
    let mut s = String::new();
    push_line!(s, "status: {}", report.status.as_str());
    for state in &report.states {
        render_state(&mut s, state);
    }
    if !report.errors.is_empty() {
        push_line!(s, "\nerrors:");
        for e in &report.errors {
            render_error(&mut s, e);
        }
    }
    s
}

fn render_state(s: &mut String, state: &Found) {
    let r = &state.status;
    push_line!(s, "{}", state.line);
    push_line!(
        s,
        "boot ID: {}",
        r.boot_id.as_deref().unwrap_or("(unreadable)")
    );
    if r.packages.is_empty() && r.other_interrupts.is_empty() {
        push_line!(s, "\nno package state found under {}", r.state_dir);
    }
    for p in &r.packages {
        push_line!(
            s,
            "\npackage {}: {}{}{}",
            p.name,
            p.status.as_str(),
            held(p.lock.as_ref()),
            p.detail
                .as_ref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        );
        match (&p.history_problem, &p.current_version) {
            (Some(problem), _) => push_line!(s, "  current version: unknown ({problem})"),
            (None, Some(v)) => push_line!(s, "  current version: {v}"),
            (None, None) => push_line!(s, "  current version: (none recorded)"),
        }
        if !p.history.is_empty() {
            push_line!(s, "  history (newest first):");
            for h in &p.history {
                push_line!(s, "    {}  {}", h.version, h.time);
            }
        }
        for v in &p.versions {
            push_line!(s, "  version {}", v.version);
            push_line!(s, "    completion markers: {}", v.markers.len());
            for m in &v.markers {
                push_line!(s, "      {m}");
            }
            for run in &v.runs {
                push_line!(s, "    last {}", run_line(run));
            }
        }
        for i in &p.interrupts {
            render_interrupt(s, i);
        }
        if let Some(last) = &p.last_run {
            push_line!(s, "  last run: {} {}", last.version, run_line(last));
            if let Some(e) = &last.error {
                push_line!(s, "    error: {e}");
            }
            for op in &last.operations {
                let mut line = format!("    {} {}: {}", op.decision, op.operation, op.reason);
                match (op.exit_code, op.signal) {
                    (Some(c), _) => {
                        let _ = write!(line, "; exit code {c}");
                    }
                    (None, Some(sig)) => {
                        let _ = write!(line, "; signal {sig}");
                    }
                    _ => {}
                }
                if let Some(ms) = op.duration_ms {
                    let _ = write!(line, "; {ms} ms");
                }
                if let Some(u) = &op.usage {
                    let _ = write!(line, "; {}", usage_text(u));
                }
                push_line!(s, "{line}");
                if let Some(log) = &op.log {
                    push_line!(s, "      log: {log}");
                }
            }
        }
    }
    for i in &r.other_interrupts {
        s.push('\n');
        render_interrupt(s, i);
    }
    if !r.check_results.is_empty() {
        push_line!(
            s,
            "\ncheck results of the last check stage ({}/flags/check_results):",
            r.state_dir
        );
        for c in &r.check_results {
            push_line!(
                s,
                "  {} {}",
                c.path,
                if c.passed { "passed" } else { "FAILED" }
            );
        }
    }
    if !r.all_checked.is_empty() {
        push_line!(
            s,
            "check stages whose checks all passed: {}",
            r.all_checked.join(", ")
        );
    }
}

/// `cpu 12.3 ms user + 4.0 ms system, peak RSS 3.9 MiB, stdout 412 B, stderr 0 B`.
fn usage_text(u: &agent_core::exec::usage::Usage) -> String {
    #[allow(
        clippy::cast_precision_loss,
        reason = "figures for people, rounded anyway"
    )]
    let (user, system, rss) = (
        u.user_cpu_us as f64 / 1e3,
        u.system_cpu_us as f64 / 1e3,
        u.max_rss_bytes as f64 / f64::from(1 << 20),
    );
    format!(
        "cpu {user:.1} ms user + {system:.1} ms system, peak RSS {rss:.1} MiB, stdout {} B, stderr {} B",
        u.stdout_bytes, u.stderr_bytes
    )
}

/// ` (lock held by pid 4711 since …, running …)` when an agent holds the lock.
fn held(lock: Option<&Holder>) -> String {
    let Some(h) = lock else {
        return String::new();
    };
    let mut text = format!(" (lock held by {}", h.describe());
    if let Some(op) = &h.operation {
        let _ = write!(text, ", running {op}");
    }
    text.push(')');
    text
}

fn run_line(run: &ResultsRecord) -> String {
    let count = |decision: &str| {
        run.operations
            .iter()
            .filter(|o| o.decision == decision)
            .count()
    };
    let what = if run.mode == agent_core::state::status::RESET_MODE {
        format!("{} removed", count("removed"))
    } else {
        let ran = count("ran");
        format!("{ran} ran, {} skipped", run.operations.len() - ran)
    };
    if run.is_running() {
        return format!(
            "{}: result not recorded yet (started {}; agent {})",
            run.mode, run.started, run.agent_version
        );
    }
    format!(
        "{}: exit {} at {} ({what}; agent {})",
        run.mode, run.exit_code, run.finished, run.agent_version
    )
}

fn render_interrupt(s: &mut String, i: &InterruptStatus) {
    push_line!(
        s,
        "  interrupts of {}: {}{}",
        i.resource_id,
        i.status.as_str(),
        held(i.lock.as_ref())
    );
    for op in &i.operations {
        push_line!(s, "    {} {}: {}", op.operation, op.state, op.detail);
    }
}

fn render_error(s: &mut String, e: &StatusError) {
    let mut head = String::from("  ");
    for part in [&e.package, &e.version, &e.mode].into_iter().flatten() {
        head.push_str(part);
        head.push(' ');
    }
    let head = head.trim_end().to_owned();
    match &e.step {
        None => {
            let sep = if head.trim().is_empty() { "" } else { ": " };
            push_line!(s, "{head}{sep}{}", e.message);
        }
        Some(step)
            if e.mode.as_deref() == Some("interrupt")
                && e.exit_code.is_none()
                && e.signal.is_none() =>
        {
            push_line!(s, "{head}: {step}: {}", e.message);
        }
        Some(step) => {
            let outcome = match (e.exit_code, e.signal) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                (None, None) => "failed".to_owned(),
            };
            push_line!(s, "{head}: {step}: {outcome}");
            push_line!(s, "    error: {}", e.message);
        }
    }
    if let Some(log) = &e.log {
        push_line!(s, "    log: {log}");
    }
    if let Some(record) = &e.record {
        push_line!(s, "    record: {record}");
    }
    if let Some(at) = &e.reset_at {
        push_line!(s, "    reset: agent reset at {at}; not run since");
    }
    if !e.last_output.is_empty() {
        push_line!(s, "    last output:");
        for line in &e.last_output {
            push_line!(s, "      {line}");
        }
    }
}
