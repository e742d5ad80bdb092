//! `agent status ROOT [--json]`: what the agent left on a host (SPEC §1.4).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use agent_core::execution::Output;
use agent_core::hostfs::HostFs;
use agent_core::results::RunRecord;
use agent_core::runtime::Runtime;
use agent_core::status::{self, HostStatus, InterruptStatus};

#[derive(Debug, clap::Args)]
pub struct Status {
    /// The host root mount (`/` on the node itself, `/root` in an agent pod).
    root: PathBuf,
    /// Print the status as one JSON document.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &Status) -> ExitCode {
    let rt = match Runtime::from_env() {
        Ok(rt) => rt,
        Err(e) => {
            crate::eprint_out(&format!("agent status failed: {e}\n"));
            return ExitCode::from(1);
        }
    };
    crate::init_logging(&rt);
    let fs = HostFs::new(&args.root);
    let report = status::collect(&fs, &rt);
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&report).expect("the status serializes");
        s.push('\n');
        s
    } else {
        render(&report)
    };
    Output::process().print(&text);
    ExitCode::SUCCESS
}

fn render(r: &HostStatus) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "state: {} (logs: {})", r.state_dir, r.log_dir);
    let _ = writeln!(
        s,
        "boot ID: {}",
        r.boot_id.as_deref().unwrap_or("(unreadable)")
    );
    if r.packages.is_empty() {
        let _ = writeln!(s, "\nno package state found under {}", r.state_dir);
    }
    for p in &r.packages {
        let _ = writeln!(s, "\npackage {}", p.name);
        let _ = writeln!(
            s,
            "  current version: {}",
            p.current_version.as_deref().unwrap_or("(none recorded)")
        );
        if let Some(problem) = &p.history_problem {
            let _ = writeln!(s, "  history: {problem}");
        }
        if !p.history.is_empty() {
            let _ = writeln!(s, "  history (newest first):");
            for h in &p.history {
                let _ = writeln!(s, "    {}  {}", h.version, h.time);
            }
        }
        for v in &p.versions {
            let _ = writeln!(s, "  version {}", v.version);
            let _ = writeln!(s, "    completion markers: {}", v.markers.len());
            for m in &v.markers {
                let _ = writeln!(s, "      {m}");
            }
            for run in &v.runs {
                let _ = writeln!(s, "    last {}", run_line(run));
            }
        }
        for i in &p.interrupts {
            render_interrupt(&mut s, i);
        }
        if let Some(last) = &p.last_run {
            let _ = writeln!(s, "  last run: {} {}", last.version, run_line(last));
            if let Some(e) = &last.error {
                let _ = writeln!(s, "    error: {e}");
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
                let _ = writeln!(s, "{line}");
                if let Some(log) = &op.log {
                    let _ = writeln!(s, "      log: {log}");
                }
            }
        }
    }
    for i in &r.other_interrupts {
        let _ = writeln!(s);
        render_interrupt(&mut s, i);
    }
    if !r.check_results.is_empty() {
        let _ = writeln!(
            s,
            "\ncheck results of the last check stage ({}/flags/check_results):",
            r.state_dir
        );
        for c in &r.check_results {
            let _ = writeln!(
                s,
                "  {} {}",
                c.path,
                if c.passed { "passed" } else { "FAILED" }
            );
        }
    }
    if !r.all_checked.is_empty() {
        let _ = writeln!(
            s,
            "check stages whose checks all passed: {}",
            r.all_checked.join(", ")
        );
    }
    for p in &r.problems {
        let _ = writeln!(s, "problem: {p}");
    }
    s
}

fn run_line(run: &RunRecord) -> String {
    let ran = run
        .operations
        .iter()
        .filter(|o| o.decision == "ran")
        .count();
    let skipped = run.operations.len() - ran;
    format!(
        "{}: exit {} at {} ({ran} ran, {skipped} skipped; agent {})",
        run.mode, run.exit_code, run.finished, run.agent_version
    )
}

fn render_interrupt(s: &mut String, i: &InterruptStatus) {
    let _ = writeln!(s, "  interrupts of {}", i.resource_id);
    for op in &i.operations {
        let _ = write!(s, "    {} {}: {}", op.operation, op.state, op.detail);
        if let Some(n) = op.attempts.filter(|n| *n > 0) {
            let _ = write!(s, " (reboots requested under this boot: {n})");
        }
        s.push('\n');
    }
}
