//! `agent plan MODE ROOT COPY_DIR` and `agent plan interrupt ROOT COPY_DIR DATA`: what a run
//! would do, with nothing run and nothing written (SPEC §1.4).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use agent_core::Interrupt;
use agent_core::compat::pyrepr;
use agent_core::host::fs::HostFs;
use agent_core::host::preflight;
use agent_core::host::runtime::Runtime;
use agent_core::interrupt::plan::{InterruptPlan, plan_interrupt};
use agent_core::package::step::Mode;
use agent_core::stage::plan::{self, OverlayDiff, PlannedAction, PlannedWrite, StagePlan};
use anyhow::Context as _;
use serde::Serialize;

use super::state::Located;
use crate::cli::{Format, Plan, Verbosity};
use crate::output::{self, Failure};

/// `plan --format json` of a MODE this agent does not know.
#[derive(Serialize)]
struct Unsupported<'a> {
    plan: &'static str,
    mode: &'a str,
    note: &'a str,
}

pub fn run(args: &Plan, verbosity: Verbosity) -> ExitCode {
    match plan(args, verbosity) {
        Ok(ok) => ExitCode::from(u8::from(!ok)),
        Err(f) => output::fail(args.format, &["plan"], "agent plan failed", &f),
    }
}

/// Print the plan; whether the run is expected to get through it.
fn plan(args: &Plan, verbosity: Verbosity) -> Result<bool, Failure> {
    let failed = |e: anyhow::Error| Failure::failed(format!("{e:#}"));
    let stage_mode = match (args.mode.as_str(), &args.data) {
        ("interrupt", Some(d)) if !d.is_empty() => None,
        ("interrupt", _) => return Err(Failure::usage("interrupt data must not be empty")),
        (mode, data) => match mode.parse::<Mode>() {
            Ok(_) if data.is_some() => {
                return Err(Failure::usage(format!(
                    "stage {mode:?} does not accept interrupt data"
                )));
            }
            Ok(m) => Some(m),
            Err(_) => {
                // SPEC §1.1: the run would be a warned no-op.
                let note = format!(
                    "this agent version does not support the stage {mode:?}: a run would warn \
                     and exit 0 without touching anything"
                );
                let body = Unsupported {
                    plan: "unsupported",
                    mode,
                    note: &note,
                };
                output::print_result(args.format, &body, || format!("plan: {note}\n"));
                return Ok(true);
            }
        },
    };
    let rt = super::state::runtime(verbosity)?;
    let fs = HostFs::new(&args.root);
    let (rt, located) = super::state::locate_one(&fs, &rt, args.state_dir.as_deref())?;
    for w in &rt.warnings {
        tracing::warn!("{w}");
    }
    // SPEC §6 step 1, with the run's own function: a plan fails where the run would, before
    // anything else.
    let checked = preflight::validate(&args.root, &args.copy_dir, &rt, stage_mode.is_none())
        .map_err(|e| failed(e.into()))?;
    let (text, ok) = match stage_mode {
        Some(mode) => stage(&fs, &rt, mode, args, &checked.copy_dir, &located),
        None => interrupt(&fs, &rt, args, &checked, &located),
    }
    .map_err(failed)?;
    output::print(&text);
    Ok(ok)
}

fn env() -> Vec<(OsString, OsString)> {
    std::env::vars_os().collect()
}

/// The rendered plan, and whether the run is expected to get through it.
fn stage(
    fs: &HostFs,
    rt: &Runtime,
    mode: Mode,
    args: &Plan,
    copy_dir: &Path,
    located: &Located,
) -> anyhow::Result<(String, bool)> {
    let p = plan::plan_stage(fs, rt, mode, copy_dir, &env())?;
    let ok = p.failure.is_none();
    let diffs: Vec<Option<OverlayDiff>> = if args.diff {
        p.writes.iter().map(|w| plan::overlay_diff(fs, w)).collect()
    } else {
        Vec::new()
    };
    let text = match args.format {
        Format::Json => json_with_diffs(&p, &diffs, located),
        Format::Text => {
            let mut s = render_stage(&p, &args.root, located);
            render_diffs(&mut s, &p.writes, &diffs);
            s
        }
    };
    Ok((text, ok))
}

/// The stage plan as JSON, with a `diff` field (text, or `{"not_shown": why}`) on each
/// changed overlay file when `--diff` was given.
fn json_with_diffs(p: &StagePlan, diffs: &[Option<OverlayDiff>], located: &Located) -> String {
    let mut v = with_state("stage", p, located);
    if let Some(writes) = v
        .get_mut("writes")
        .and_then(serde_json::Value::as_array_mut)
    {
        for (w, d) in writes.iter_mut().zip(diffs) {
            match d {
                Some(OverlayDiff::Text(t)) => w["diff"] = serde_json::json!(t),
                Some(OverlayDiff::NotShown(why)) => {
                    w["diff"] = serde_json::json!({ "not_shown": why });
                }
                None => {}
            }
        }
    }
    output::document(&v)
}

fn render_diffs(s: &mut String, writes: &[PlannedWrite], diffs: &[Option<OverlayDiff>]) {
    for (w, d) in writes.iter().zip(diffs) {
        match d {
            Some(OverlayDiff::Text(t)) => {
                s.push('\n');
                s.push_str(t);
            }
            Some(OverlayDiff::NotShown(why)) => push_line!(s, "\n{}: {why}", w.path),
            None => {}
        }
    }
}

fn interrupt(
    fs: &HostFs,
    rt: &Runtime,
    args: &Plan,
    checked: &preflight::Validated,
    located: &Located,
) -> anyhow::Result<(String, bool)> {
    let rid = &checked.resource_id;
    let decoded = <dyn Interrupt>::from_base64(args.data.as_deref().unwrap_or_default())?;
    if !decoded.unknown_fields.is_empty() {
        tracing::warn!(
            r#type = decoded.interrupt.type_name(),
            fields = %decoded.unknown_field_notes().join(", "),
            "ignoring unknown interrupt fields"
        );
    }
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let p = tokio.block_on(plan_interrupt(
        fs,
        rt,
        rid,
        &checked.copy_dir,
        decoded.interrupt.as_ref(),
        env(),
    ))?;
    if args.diff {
        tracing::warn!("--diff applies to stage plans only (interrupts write no overlay files)");
    }
    let ok = p.failure.is_none();
    let text = match args.format {
        Format::Json => output::document(&with_state("interrupt", &p, located)),
        Format::Text => render_interrupt(&p, &args.root, located),
    };
    Ok((text, ok))
}

/// The plan as a JSON object: what it plans (`stage` or `interrupt`), the plan, and the STATE
/// it read and how it was chosen.
fn with_state(kind: &str, plan: &impl Serialize, located: &Located) -> serde_json::Value {
    let mut v = serde_json::to_value(plan).expect("plans serialize");
    v["plan"] = serde_json::json!(kind);
    v["state_dir"] = serde_json::json!(located.state_dir);
    v["state_source"] = serde_json::json!(located.source);
    v
}

/// Width of the action column (`not-reached`).
const ACTION: usize = 11;
const INDENT: &str = "               ";

fn render_stage(p: &StagePlan, root: &Path, located: &Located) -> String {
    let mut s = String::new();
    push_line!(
        s,
        "plan: {} of package {} {} (ROOT {}); nothing was run or written",
        p.mode,
        p.package,
        p.version,
        root.display()
    );
    push_line!(s, "{}", located.line());
    push_line!(s, "config: {}", p.config);
    push_line!(s, "step markers: {}", p.flags_dir);
    if let Some([previous, current]) = &p.versions {
        push_line!(s, "versions: previous {previous}, current {current}");
    }
    for note in &p.notes {
        push_line!(s, "note: {note}");
    }
    for w in &p.warnings {
        push_line!(s, "warning: {w}");
    }
    s.push('\n');
    for step in &p.steps {
        push_line!(s, "  {:<ACTION$}  {}", step.action.as_str(), step.path);
        push_line!(s, "{INDENT}{}", step.reason);
        if !step.markers_present.is_empty() {
            push_line!(s, "{INDENT}markers: {}", step.markers_present.join(", "));
        }
        for note in &step.notes {
            push_line!(s, "{INDENT}note: {note}");
        }
        if let Some(header) = &step.header {
            push_line!(s, "{INDENT}header: {header}");
            push_line!(
                s,
                "{INDENT}arguments: {}",
                pyrepr::repr_str_list(&step.arguments)
            );
            for (k, v) in &step.env {
                push_line!(s, "{INDENT}env: {k}={v}");
            }
        }
    }
    if p.steps.is_empty() {
        push_line!(s, "  (no steps)");
    }
    render_writes(&mut s, &p.writes);
    let count = |a: PlannedAction| p.steps.iter().filter(|x| x.action == a).count();
    push_line!(
        s,
        "summary: {} to run, {} to skip",
        output::plural(count(PlannedAction::Run), "step"),
        count(PlannedAction::Skip)
    );
    if let Some(f) = &p.failure {
        push_line!(s, "the run would fail: {f}");
    }
    s
}

fn render_interrupt(p: &InterruptPlan, root: &Path, located: &Located) -> String {
    let mut s = String::new();
    push_line!(
        s,
        "plan: interrupt {} for {} (ROOT {}); nothing was run or written",
        p.type_name,
        p.resource_id,
        root.display()
    );
    push_line!(s, "{}", located.line());
    push_line!(s, "payload: {}", p.payload);
    push_line!(s, "interrupt markers: {}", p.markers_dir);
    push_line!(
        s,
        "boot ID: {}",
        p.boot_id.as_deref().unwrap_or("(unreadable)")
    );
    s.push('\n');
    for op in &p.operations {
        let command = op.command.as_ref().map(|c| format!(": {c}"));
        push_line!(
            s,
            "  {:<ACTION$}  {}{}",
            op.action.as_str(),
            op.operation,
            command.unwrap_or_default()
        );
        push_line!(s, "{INDENT}{}", op.reason);
    }
    if p.operations.is_empty() {
        push_line!(
            s,
            "  (no operations: this kind runs nothing and writes no marker)"
        );
    }
    render_writes(&mut s, &p.writes);
    let count = |a: PlannedAction| p.operations.iter().filter(|x| x.action == a).count();
    push_line!(
        s,
        "summary: {} to run, {} to skip",
        output::plural(count(PlannedAction::Run), "operation"),
        count(PlannedAction::Skip)
    );
    if let Some(f) = &p.failure {
        push_line!(s, "the run would fail: {f}");
    }
    s
}

/// Width of the write-kind column (`package-data`).
const KIND: usize = 12;

fn render_writes(s: &mut String, writes: &[PlannedWrite]) {
    push_line!(s, "\na run would write (host paths):");
    for w in writes {
        let _ = write!(s, "  {:<KIND$}  {}", w.kind.as_str(), w.path);
        let notes: Vec<&str> = [&w.condition, &w.note]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        if notes.is_empty() {
            s.push('\n');
        } else {
            push_line!(s, " ({})", notes.join("; "));
        }
    }
    let overlay = |k: plan::WriteKind| writes.iter().filter(|w| w.kind == k).count();
    let (new, changed, unchanged, unknown) = (
        overlay(plan::WriteKind::New),
        overlay(plan::WriteKind::Changed),
        overlay(plan::WriteKind::Unchanged),
        overlay(plan::WriteKind::Unknown),
    );
    if new + changed + unchanged + unknown > 0 {
        let _ = write!(
            s,
            "root_dir overlay: {new} new, {changed} changed, {unchanged} unchanged"
        );
        if unknown > 0 {
            let _ = write!(s, ", {unknown} not compared");
        }
        s.push('\n');
    }
}
