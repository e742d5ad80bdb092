//! Node metrics in the Prometheus text format, for node-exporter's textfile
//! collector: `STATE/metrics/<pkg>.prom`, and a copy as `skyhook_agent_<pkg>.prom` in
//! `SKYHOOK_AGENT_METRICS_DIR` when that names a directory on the host.
//!
//! One file per package holds every stage of the package, so a later stage never erases an
//! earlier one's series. The file is rendered from a small JSON sidecar this module owns,
//! `STATE/metrics/<pkg>.json`: each run reads it, folds its own results in and writes both
//! back. Both are diagnostics (SPEC §8.12): atomic rename, no fsync. A sidecar that is
//! missing or unreadable starts the figures afresh (the counters then restart at 0, which
//! Prometheus treats as a counter reset).
//!
//! Labels are bounded: `package`, `version`, `stage` (a stage mode or `interrupt`), `step`
//! (a configured step path), `interrupt` (a kind's type), `operation` (`<TYPE>_<i>`),
//! `resource_id` (the last run's only), and a few fixed sets (`result`, `mode`, `stream`).
//! No timestamps, messages or command lines go into labels. Every family is listed in
//! docs/metrics.md.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::host::fs::{HostFs, HostFsError, RECORD_BOUND};
use crate::state::results::{OperationResult, RecordedResult, ResultsRecord};
use crate::state::status::{Standing, Verdict};

/// What one interrupt run did, counted for the node's metrics (counted by the interrupt runner).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InterruptTally {
    /// Completion markers written: operations that succeeded, after-reboot operations
    /// promoted once the boot ID changed, and kinds without commands marked done.
    pub completed: u32,
    /// After-reboot commands started (each one an attempt the loop guard counts).
    pub reboots_requested: u32,
    /// Runs the reboot loop guard refused (SPEC §9.6).
    pub loop_guard_refusals: u32,
}

/// Mode of the `.prom` files: node-exporter runs as another user.
pub(crate) const PROM_MODE: u32 = 0o644;

/// How a run ended, as the `result` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultLabel {
    Succeeded,
    Failed,
    /// Stopped by SIGTERM/SIGINT (SPEC §10).
    Stopped,
}

impl ResultLabel {
    pub const ALL: [ResultLabel; 3] = [
        ResultLabel::Succeeded,
        ResultLabel::Failed,
        ResultLabel::Stopped,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ResultLabel::Succeeded => "succeeded",
            ResultLabel::Failed => "failed",
            ResultLabel::Stopped => "stopped",
        }
    }

    /// The label of a finished run's recorded result. A record without one, or still
    /// `running`, did not succeed: it counts as failed.
    pub const fn of(result: Option<RecordedResult>) -> Self {
        match result {
            Some(RecordedResult::Succeeded) => ResultLabel::Succeeded,
            Some(RecordedResult::Stopped) => ResultLabel::Stopped,
            Some(RecordedResult::Failed | RecordedResult::Running) | None => ResultLabel::Failed,
        }
    }
}

/// One finished run, as the metrics see it.
#[derive(Debug, Clone, Copy)]
pub struct FinishedRun<'a> {
    pub record: &'a ResultsRecord,
    pub result: ResultLabel,
    pub started: SystemTime,
    pub finished: SystemTime,
    /// For an interrupt run: its type and what it counted.
    pub interrupt: Option<(&'a str, InterruptTally)>,
    /// How the run leaves its package ([`standing`](crate::state::status::standing)); `None` leaves the figures of
    /// the previous run.
    pub standing: Option<Standing>,
}

/// The sidecar: everything the `.prom` file is rendered from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct PackageMetrics {
    pub package: String,
    /// The last run of each stage (mode, or `interrupt`).
    #[serde(default)]
    pub stages: BTreeMap<String, StageFigures>,
    /// Runs of each stage by result, since the sidecar was created.
    #[serde(default)]
    pub runs: BTreeMap<String, [u64; 3]>,
    /// The last run of each step, by stage then step path.
    #[serde(default)]
    pub steps: BTreeMap<String, BTreeMap<String, OperationFigures>>,
    /// Per interrupt type.
    #[serde(default)]
    pub interrupts: BTreeMap<String, InterruptFigures>,
    /// The package's `agent status` verdict after the last run (`done`, `failed`, ...);
    /// `None` in sidecars written before it was kept.
    #[serde(default)]
    pub verdict: Option<String>,
    /// After the last run, a reboot an interrupt of the package asked for waited for a new
    /// boot ID.
    #[serde(default)]
    pub reboot_pending: Option<bool>,
}

/// The last run of one stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StageFigures {
    pub version: String,
    pub resource_id: String,
    /// Unix time, microseconds (integers: the state is read back exactly).
    pub started_us: u64,
    pub finished_us: u64,
    pub exit_code: u8,
    /// [`ResultLabel`] as its index in [`ResultLabel::ALL`].
    pub result: u8,
}

/// The last run of one step or interrupt operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct OperationFigures {
    pub version: String,
    /// End of the run it ran in, Unix time, microseconds.
    pub finished_us: u64,
    pub duration_us: u64,
    pub user_cpu_us: u64,
    pub system_cpu_us: u64,
    pub max_rss_bytes: u64,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// The exit code; 128 + N when killed by signal N; -1 when it did not start.
    pub exit_code: i64,
    pub succeeded: bool,
}

/// Counters and last operations of one interrupt type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct InterruptFigures {
    pub resource_id: String,
    pub operations_completed: u64,
    pub reboots_requested: u64,
    pub loop_guard_refusals: u64,
    /// The last run of each operation, by `<TYPE>_<i>`.
    #[serde(default)]
    pub operations: BTreeMap<String, OperationFigures>,
}

/// `STATE/metrics`.
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("metrics")
}

/// `STATE/metrics/<pkg>.prom`.
pub(crate) fn prom_path(state_dir: &Path, package: &str) -> PathBuf {
    dir(state_dir).join(format!("{package}.prom"))
}

/// `STATE/metrics/<pkg>.json`, the sidecar.
pub fn sidecar_path(state_dir: &Path, package: &str) -> PathBuf {
    dir(state_dir).join(format!("{package}.json"))
}

/// The copy's name in `SKYHOOK_AGENT_METRICS_DIR`.
pub(crate) fn textfile_name(package: &str) -> String {
    format!("skyhook_agent_{package}.prom")
}

/// What [`record`] wrote, and what it could not.
#[derive(Debug, Default)]
pub struct Written {
    /// Host paths of the `.prom` files written.
    pub files: Vec<PathBuf>,
    /// One per file that could not be written: its host path and the cause.
    pub failures: Vec<(PathBuf, HostFsError)>,
    /// The sidecar could not be read as ours (the figures restarted).
    pub sidecar_problem: Option<String>,
}

/// Fold `run` into the package's metrics and write them: the sidecar and `<pkg>.prom` under
/// STATE, and the copy in `textfile_dir` (host path) when given, which must exist (it is
/// never created: a missing directory is reported, like any write failure). Nothing here
/// fails the run; the caller logs what [`Written`] reports.
pub fn record(
    fs: &HostFs,
    state_dir: &Path,
    textfile_dir: Option<&Path>,
    run: &FinishedRun<'_>,
    build: (&str, &str),
) -> Written {
    let package = run.record.package.as_str();
    let mut written = Written::default();
    let sidecar = sidecar_path(state_dir, package);
    let mut metrics = read_sidecar(fs, &sidecar, package).unwrap_or_else(|problem| {
        written.sidecar_problem = Some(problem);
        PackageMetrics::default()
    });
    package.clone_into(&mut metrics.package);
    metrics.fold(run);
    // Each file is written as it is produced, one at a time: with a line per series of every
    // step, holding them whole would make the agent's peak memory grow with the package.
    fs.clean_stale_temps(&dir(state_dir));
    if let Err(e) = super::write_json_diagnostic(fs, &sidecar, &metrics, 0o600) {
        written.failures.push((sidecar, e));
    }
    let render = |file: &mut std::fs::File| {
        let mut out = io::BufWriter::new(file);
        metrics.render_into(build, &mut out)?;
        out.flush()
    };
    let mut write_prom = |file: PathBuf, create_dirs: bool| {
        let result = fs.write_diagnostic_with(&file, PROM_MODE, create_dirs, render);
        match result {
            Ok(()) => written.files.push(file),
            Err(e) => written.failures.push((file, e)),
        }
    };
    write_prom(prom_path(state_dir, package), true);
    if let Some(dir) = textfile_dir {
        fs.clean_stale_temps(dir);
        write_prom(dir.join(textfile_name(package)), false);
    }
    written
}

/// The sidecar of `package` at `file`, empty when there is none, or why it cannot be read as
/// ours. Parsed as it is read: a large package's sidecar (about 300 bytes per step) is never
/// held whole beside what it is parsed into.
fn read_sidecar(fs: &HostFs, file: &Path, package: &str) -> Result<PackageMetrics, String> {
    let opened = fs.open_bounded(file, RECORD_BOUND);
    let Some(file) = opened.map_err(|e| crate::host::errors::Chain(&e).to_string())? else {
        return Ok(PackageMetrics::default());
    };
    let metrics: PackageMetrics =
        serde_json::from_reader(io::BufReader::new(file)).map_err(|e| e.to_string())?;
    if metrics.package != package {
        return Err("it belongs to another package".into());
    }
    Ok(metrics)
}

fn unix_micros(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

fn figures(op: &OperationResult, version: &str, finished_us: u64) -> OperationFigures {
    let usage = op.usage.unwrap_or_default();
    let exit_code = match (op.exit_code, op.signal) {
        (Some(c), _) => i64::from(c),
        (None, Some(sig)) => 128 + i64::from(sig),
        (None, None) => -1,
    };
    OperationFigures {
        version: version.to_owned(),
        finished_us,
        duration_us: op.duration_ms.unwrap_or(0).saturating_mul(1000),
        user_cpu_us: usage.user_cpu_us,
        system_cpu_us: usage.system_cpu_us,
        max_rss_bytes: usage.max_rss_bytes,
        stdout_bytes: usage.stdout_bytes,
        stderr_bytes: usage.stderr_bytes,
        exit_code,
        succeeded: op.succeeded == Some(true),
    }
}

impl PackageMetrics {
    /// Fold one run in.
    pub fn fold(&mut self, run: &FinishedRun<'_>) {
        let r = run.record;
        let finished = unix_micros(run.finished);
        if let Some(standing) = run.standing {
            self.verdict = Some(standing.verdict.as_str().to_owned());
            self.reboot_pending = Some(standing.reboot_pending);
        }
        self.stages.insert(
            r.mode.clone(),
            StageFigures {
                version: r.version.clone(),
                resource_id: r.resource_id.clone(),
                started_us: unix_micros(run.started),
                finished_us: finished,
                exit_code: r.exit_code,
                result: run.result as u8,
            },
        );
        self.runs.entry(r.mode.clone()).or_default()[run.result as usize] += 1;
        let ran = |op: &&OperationResult| op.decision == "ran";
        if let Some((kind, tally)) = run.interrupt {
            let entry = self.interrupts.entry(kind.to_owned()).or_default();
            entry.resource_id.clone_from(&r.resource_id);
            entry.operations_completed += u64::from(tally.completed);
            entry.reboots_requested += u64::from(tally.reboots_requested);
            entry.loop_guard_refusals += u64::from(tally.loop_guard_refusals);
            for op in r.operations.iter().filter(ran) {
                if let Some(id) = &op.id {
                    entry
                        .operations
                        .insert(id.clone(), figures(op, &r.version, finished));
                }
            }
            return;
        }
        let steps = self.steps.entry(r.mode.clone()).or_default();
        for op in r.operations.iter().filter(ran) {
            steps.insert(op.operation.clone(), figures(op, &r.version, finished));
        }
        // A run that considered every step (it succeeded) tells which steps the stage has:
        // steps no longer configured lose their series.
        if run.result == ResultLabel::Succeeded {
            let configured: std::collections::BTreeSet<&str> = r
                .operations
                .iter()
                .map(|op| op.operation.as_str())
                .collect();
            steps.retain(|path, _| configured.contains(path.as_str()));
        }
        if steps.is_empty() {
            self.steps.remove(&r.mode);
        }
    }

    /// The text format, families in a fixed order, series sorted.
    #[cfg(test)]
    pub(crate) fn render(&self, build: (&str, &str)) -> String {
        let mut text = Vec::new();
        self.render_into(build, &mut text)
            .expect("writing to memory");
        String::from_utf8(text).expect("the text format is UTF-8")
    }

    /// [`render`](Self::render) into `out`, as it goes: a file written through it never has
    /// the whole text in memory (about 1 KiB per step). The first I/O error ends the writing.
    pub(crate) fn render_into(
        &self,
        (agent_version, git_sha): (&str, &str),
        out: &mut dyn io::Write,
    ) -> io::Result<()> {
        let mut out = Text { out, error: None };
        let name = "skyhook_agent_build_info";
        out.family(
            name,
            "gauge",
            "Version and git commit of the agent that wrote this file; always 1.",
        );
        let labels = [("version", agent_version), ("git_sha", git_sha)];
        out.sample(name, &labels, "1");
        self.render_status(&mut out);
        self.render_stages(&mut out);
        self.render_operations(&mut out);
        self.render_interrupt_counters(&mut out);
        out.error.map_or(Ok(()), Err)
    }

    /// The package's verdict and pending reboot after its last run.
    fn render_status(&self, out: &mut Text<'_>) {
        let pkg = self.package.as_str();
        if let Some(verdict) = &self.verdict {
            let name = "skyhook_agent_status";
            out.family(
                name,
                "gauge",
                "The package's agent status verdict after its last run: 1 for the verdict \
                 (done, failed, stopped, reboot-pending, ...), 0 for the others.",
            );
            for v in Verdict::ALL {
                let labels = [("package", pkg), ("verdict", v.as_str())];
                out.sample(name, &labels, one_hot(v.as_str() == verdict));
            }
        }
        if let Some(pending) = self.reboot_pending {
            let name = "skyhook_agent_reboot_pending";
            out.family(
                name,
                "gauge",
                "1 when, after the package's last run, a reboot one of its interrupts asked for \
                 waited for a new boot ID, else 0.",
            );
            out.sample(name, &[("package", pkg)], one_hot(pending));
        }
    }

    /// Each stage's last run and the runs counted by result.
    fn render_stages<'a>(&'a self, out: &mut Text<'_>) {
        let pkg = self.package.as_str();
        let stage_labels = |stage: &'a str, s: &'a StageFigures| -> Labels<'a> {
            [
                ("package", pkg),
                ("version", &s.version),
                ("stage", stage),
                ("resource_id", &s.resource_id),
            ]
        };
        let stage_families: [(&str, &str, StageValue); 4] = [
            (
                "skyhook_agent_stage_last_run_start_timestamp_seconds",
                "Start of the last run of the stage, Unix time.",
                |s| secs(s.started_us),
            ),
            (
                "skyhook_agent_stage_last_run_end_timestamp_seconds",
                "End of the last run of the stage, Unix time.",
                |s| secs(s.finished_us),
            ),
            (
                "skyhook_agent_stage_last_run_duration_seconds",
                "Wall time of the last run of the stage.",
                |s| secs(s.finished_us.saturating_sub(s.started_us)),
            ),
            (
                "skyhook_agent_stage_last_run_exit_code",
                "Exit code of the agent in the last run of the stage (0 succeeded, 1 failed or stopped).",
                |s| s.exit_code.to_string(),
            ),
        ];
        for (name, help, value) in stage_families {
            out.family(name, "gauge", help);
            for (stage, s) in &self.stages {
                out.sample(name, &stage_labels(stage, s), &value(s));
            }
        }
        let name = "skyhook_agent_stage_last_run_result";
        out.family(
            name,
            "gauge",
            "How the last run of the stage ended: 1 for its result (succeeded, failed, stopped), 0 for the others.",
        );
        for (stage, s) in &self.stages {
            for result in ResultLabel::ALL {
                let labels = with_label(&stage_labels(stage, s), ("result", result.as_str()));
                out.sample(name, &labels, one_hot(s.result == result as u8));
            }
        }
        let name = "skyhook_agent_stage_runs_total";
        out.family(
            name,
            "counter",
            "Runs of the stage on this node by result, since the metrics state was created.",
        );
        for (stage, by_result) in &self.runs {
            for result in ResultLabel::ALL {
                let labels = [
                    ("package", pkg),
                    ("stage", stage),
                    ("result", result.as_str()),
                ];
                out.sample(name, &labels, &by_result[result as usize].to_string());
            }
        }
    }

    /// The last run of each step and of each interrupt operation.
    fn render_operations(&self, out: &mut Text<'_>) {
        let pkg = self.package.as_str();
        let steps = ("skyhook_agent_step", "step", ["stage", "step"]);
        operation_families(out, pkg, steps, &self.steps.iter());
        let ops = self
            .interrupts
            .iter()
            .map(|(kind, i)| (kind, &i.operations));
        let interrupts = (
            "skyhook_agent_interrupt_operation",
            "interrupt operation",
            ["interrupt", "operation"],
        );
        operation_families(out, pkg, interrupts, &ops);
    }

    /// What each interrupt kind did, counted since the metrics state was created.
    fn render_interrupt_counters(&self, out: &mut Text<'_>) {
        let pkg = self.package.as_str();
        let counters: [(&str, &str, Counter); 3] = [
            (
                "skyhook_agent_interrupt_operations_completed_total",
                "Interrupt operations this agent marked complete (succeeded, or confirmed after a reboot).",
                |i| i.operations_completed,
            ),
            (
                "skyhook_agent_interrupt_reboots_requested_total",
                "Reboot commands started by after-reboot interrupt operations.",
                |i| i.reboots_requested,
            ),
            (
                "skyhook_agent_interrupt_loop_guard_refusals_total",
                "Interrupt runs the reboot loop guard refused (SKYHOOK_REBOOT_MAX_ATTEMPTS reached).",
                |i| i.loop_guard_refusals,
            ),
        ];
        for (name, help, value) in counters {
            out.family(name, "counter", help);
            for (kind, i) in &self.interrupts {
                // No resource_id: a new generation of the Skyhook resource must not restart
                // the counter under new labels.
                let labels = [("package", pkg), ("interrupt", kind)];
                out.sample(name, &labels, &value(i).to_string());
            }
        }
    }
}

type StageValue = fn(&StageFigures) -> String;
type Counter = fn(&InterruptFigures) -> u64;
type OperationValue = fn(&OperationFigures) -> String;

/// The labels of one stage, step or interrupt operation series.
type Labels<'a> = [(&'static str, &'a str); 4];

/// The last-run families of steps (`prefix` `skyhook_agent_step`) or interrupt operations: a
/// series for each operation of each group (a stage's steps, an interrupt type's operations),
/// its labels the package, the version it ran in, then the group and the operation under
/// `names`.
fn operation_families<'m>(
    out: &mut Text<'_>,
    pkg: &str,
    (prefix, what, names): (&str, &str, [&'static str; 2]),
    groups: &(impl Iterator<Item = (&'m String, &'m BTreeMap<String, OperationFigures>)> + Clone),
) {
    // The series are visited once per family, their labels borrowed from the figures:
    // nothing per step is built to render them (the file has a line per series).
    let series = |visit: &mut dyn FnMut(&Labels<'_>, &OperationFigures)| {
        for (group, operations) in groups.clone() {
            for (operation, f) in operations {
                let labels = [
                    ("package", pkg),
                    ("version", f.version.as_str()),
                    (names[0], group.as_str()),
                    (names[1], operation.as_str()),
                ];
                visit(&labels, f);
            }
        }
    };
    let simple: [(&str, String, OperationValue); 5] = [
        (
            "last_run_duration_seconds",
            format!("Wall time of the last run of the {what}."),
            |f| secs(f.duration_us),
        ),
        (
            "last_run_max_rss_bytes",
            format!(
                "Peak resident memory of the last run of the {what}: its process, or the largest \
                 descendant it waited for."
            ),
            |f| f.max_rss_bytes.to_string(),
        ),
        (
            "last_run_exit_code",
            format!(
                "Exit code of the last run of the {what} (128+N for signal N, -1 if it did not start)."
            ),
            |f| f.exit_code.to_string(),
        ),
        (
            "last_run_success",
            format!("1 if the last run of the {what} succeeded, else 0."),
            |f| u8::from(f.succeeded).to_string(),
        ),
        (
            "last_run_timestamp_seconds",
            format!("End of the agent run in which the {what} last ran, Unix time."),
            |f| secs(f.finished_us),
        ),
    ];
    for (suffix, help, value) in &simple {
        let name = format!("{prefix}_{suffix}");
        out.family(&name, "gauge", help);
        series(&mut |labels, f| out.sample(&name, labels, &value(f)));
    }
    let name = format!("{prefix}_last_run_cpu_seconds");
    out.family(
        &name,
        "gauge",
        &format!(
            "CPU time of the last run of the {what} and the descendants it waited for, by mode (user, system)."
        ),
    );
    series(&mut |labels, f| {
        for (mode, v) in [("user", f.user_cpu_us), ("system", f.system_cpu_us)] {
            out.sample(&name, &with_label(labels, ("mode", mode)), &secs(v));
        }
    });
    let name = format!("{prefix}_last_run_output_bytes");
    out.family(
        &name,
        "gauge",
        &format!("Bytes the last run of the {what} wrote, by stream (stdout, stderr)."),
    );
    series(&mut |labels, f| {
        for (stream, v) in [("stdout", f.stdout_bytes), ("stderr", f.stderr_bytes)] {
            out.sample(
                &name,
                &with_label(labels, ("stream", stream)),
                &v.to_string(),
            );
        }
    });
}

/// `labels` and one more.
fn with_label<'a>(labels: &Labels<'a>, extra: (&'static str, &'a str)) -> [(&'a str, &'a str); 5] {
    let [a, b, c, d] = *labels;
    [a, b, c, d, extra]
}

/// `1` for the series that holds, `0` for the others.
fn one_hot(holds: bool) -> &'static str {
    if holds { "1" } else { "0" }
}

/// Microseconds as seconds in the text format (`1.5`, `0.000042`, `3`), from integers only.
fn secs(us: u64) -> String {
    let (whole, frac) = (us / 1_000_000, us % 1_000_000);
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:06}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// The text format written into `out` as it goes, keeping the first I/O error (nothing is
/// written after it).
struct Text<'w> {
    out: &'w mut dyn io::Write,
    error: Option<io::Error>,
}

impl fmt::Write for Text<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.error.is_some() {
            return Err(fmt::Error);
        }
        self.out.write_all(s.as_bytes()).map_err(|e| {
            self.error = Some(e);
            fmt::Error
        })
    }
}

impl Text<'_> {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: &str) {
        let _ = self.write_str(name);
        for (i, (k, v)) in labels.iter().enumerate() {
            let _ = write!(self, "{}{k}=\"", if i == 0 { '{' } else { ',' });
            write_escaped_label(self, v);
            let _ = self.write_char('"');
        }
        let close = if labels.is_empty() { "" } else { "}" };
        let _ = writeln!(self, "{close} {value}");
    }
}

/// Label values: `\`, `"` and newlines escaped, written as they go.
fn write_escaped_label(out: &mut dyn fmt::Write, v: &str) {
    let mut rest = v;
    while let Some(i) = rest.find(['\\', '"', '\n']) {
        let _ = out.write_str(&rest[..i]);
        let _ = out.write_str(match rest.as_bytes()[i] {
            b'\\' => r"\\",
            b'"' => "\\\"",
            _ => r"\n",
        });
        rest = &rest[i + 1..];
    }
    let _ = out.write_str(rest);
}

/// HELP text: `\` and newlines escaped.
fn escape_help(v: &str) -> String {
    v.replace('\\', r"\\").replace('\n', r"\n")
}

#[cfg(test)]
mod tests;
