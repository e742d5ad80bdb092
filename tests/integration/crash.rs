//! Crash consistency (SPEC §5, §8.7, §8.8, §9.3, §9.4): the agent is killed with SIGKILL at
//! seeded random moments, as an OOM kill, an eviction or a power loss stops it, together with
//! everything it started (as the end of its container would), and then rerun until it
//! completes. After every kill:
//! - a step (or interrupt operation) is marked complete only if the side-effect log shows a run
//!   of it that finished successfully;
//! - every state file parses (markers, check files, history, results, locks, pending and
//!   attempts files); a temp file of an interrupted atomic write is the only other thing
//!   allowed, and no rerun takes one for state;
//! - a rerun starts exactly the work that is not marked, in order.
//!
//! and at the end the state equals a clean run's. The same holds for `service_restart` with
//! several services, and for the reboot protocol killed at each of its phases (never a
//! `.complete` without a boot ID change, the pending marker always parses, reruns converge).
//!
//! At-least-once, not exactly-once: a kill that lands after a step finished but before its
//! marker is durable makes the rerun run it again. That is the contract (steps are idempotent
//! or declare themselves so); what must never happen is a marker without a finished run.
//!
//! Trials per scenario: 30 (`AGENT_RELIABILITY_TRIALS=200` for the long mode); a failing trial
//! prints its seed, and `AGENT_RELIABILITY_SEED=<seed>` replays it alone.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{
    BOOT_ID, CHECK_RESULTS, COPY_DIR, FakeHost, HISTORY, INTERRUPT_FLAGS, NODE_RESTART, PKG_DIR,
    PKG_FLAGS, PKG_LOGS, Package, REBOOT_SHUTS_DOWN, Reaper, STATE, SeedReport, SeededRng, Step,
    hold_flock, interrupt_data, is_state_temp_name, parse_log_name, parse_rfc3339_nano_utc,
    reliability_seeds, reliability_trials,
};

/// Trials per scenario in CI.
const CI_TRIALS: usize = 30;
/// Where steps and fake commands record what they did (ROOT-relative; `/var/tmp/...` inside).
const EFFECTS: &str = "var/tmp/effects.log";
/// Steps in the apply stage of the crash package.
const STEPS: usize = 20;
/// Steps in its apply-check stage.
const CHECKS: usize = 5;

// ---------------------------------------------------------------------------------------------
// The side-effect log
// ---------------------------------------------------------------------------------------------

/// One agent invocation's part of the side-effect log: the test writes `run <label>` before
/// each invocation, so every line after it (until the next) was written during that run.
#[derive(Debug, Default, Clone)]
struct Segment {
    label: String,
    /// `start X` / `done X` / `check X` lines, as (verb, subject).
    events: Vec<(String, String)>,
}

impl Segment {
    fn started(&self) -> Vec<String> {
        self.subjects("start")
    }

    fn subjects(&self, verb: &str) -> Vec<String> {
        self.events
            .iter()
            .filter(|(v, _)| v == verb)
            .map(|(_, s)| s.clone())
            .collect()
    }
}

fn segments(host: &FakeHost) -> Vec<Segment> {
    let text = std::fs::read_to_string(host.path(EFFECTS)).unwrap_or_default();
    let mut out: Vec<Segment> = Vec::new();
    for line in text.lines() {
        if let Some(label) = line.strip_prefix("run ") {
            out.push(Segment {
                label: label.to_owned(),
                events: Vec::new(),
            });
            continue;
        }
        let (verb, subject) = line.split_once(' ').unwrap_or((line, ""));
        out.last_mut()
            .unwrap_or_else(|| panic!("side-effect line {line:?} before any run"))
            .events
            .push((verb.to_owned(), subject.to_owned()));
    }
    out
}

/// Every subject with a `done` line anywhere in the log.
fn finished(host: &FakeHost) -> BTreeSet<String> {
    segments(host)
        .iter()
        .flat_map(|s| s.subjects("done"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// State files
// ---------------------------------------------------------------------------------------------

/// Every file below STATE (ROOT-relative paths below STATE), split into state files and the
/// temp files of interrupted atomic writes.
fn state_files(host: &FakeHost) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut files = BTreeSet::new();
    let mut temps = BTreeSet::new();
    let package_dir = format!("{}/", PKG_DIR.trim_start_matches(&format!("{STATE}/")[..]));
    for rel in host.files_under(STATE) {
        if rel.starts_with(&package_dir) {
            continue;
        }
        let name = rel.rsplit('/').next().unwrap();
        if is_state_temp_name(name) {
            temps.insert(rel);
        } else {
            files.insert(rel);
        }
    }
    (files, temps)
}

#[track_caller]
fn assert_rfc3339(text: &str, what: &str) {
    assert!(
        parse_rfc3339_nano_utc(text).is_some(),
        "{what}: {text:?} is not an RFC 3339 UTC timestamp"
    );
}

/// `last_run: <ts>\nstep_always_runs: true|false` (SPEC §8.7).
#[track_caller]
fn assert_marker(text: &str, what: &str) {
    let (first, second) = text
        .split_once('\n')
        .unwrap_or_else(|| panic!("{what}: marker {text:?} is not two lines"));
    let ts = first
        .strip_prefix("last_run: ")
        .unwrap_or_else(|| panic!("{what}: marker {text:?} lacks last_run"));
    assert_rfc3339(ts, what);
    assert!(
        second == "step_always_runs: false" || second == "step_always_runs: true",
        "{what}: marker {text:?}"
    );
}

/// `boot-id:<id>\n` (SPEC §9.4), returning the id.
#[track_caller]
fn parse_pending(text: &str, what: &str) -> String {
    let id = text
        .strip_prefix("boot-id:")
        .and_then(|rest| rest.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("{what}: pending marker {text:?} is not `boot-id:<id>\\n`"));
    assert!(
        !id.is_empty() && !id.contains(char::is_whitespace),
        "{what}: pending marker {text:?}"
    );
    id.to_owned()
}

fn has_extension(name: &str, extension: &str) -> bool {
    std::path::Path::new(name)
        .extension()
        .is_some_and(|e| e == extension)
}

/// A lock file (SPEC §10, §11): empty, or the holder line, then while an operation runs the
/// line naming its process group. A kill between rewriting it and setting its length leaves
/// trailing spaces, nothing else.
#[track_caller]
fn assert_lock_text(text: &str, ctx: &str) {
    let mut lines = text.trim_end_matches(' ').lines();
    let Some(holder) = lines.next() else {
        return;
    };
    let fields: Vec<&str> = holder.split(' ').collect();
    assert_eq!(fields.len(), 3, "{ctx}: {text:?}");
    assert!(fields[0].starts_with("pid="), "{ctx}: {text:?}");
    assert!(fields[1].starts_with("boot_id="), "{ctx}: {text:?}");
    assert_rfc3339(fields[2].trim_start_matches("started="), ctx);
    if let Some(running) = lines.next() {
        let (fields, operation) = running
            .strip_prefix("running: ")
            .and_then(|r| r.split_once(" operation="))
            .unwrap_or_else(|| panic!("{ctx}: {text:?}"));
        let names: Vec<&str> = fields
            .split(' ')
            .map(|f| {
                let (name, value) = f
                    .split_once('=')
                    .unwrap_or_else(|| panic!("{ctx}: {text:?}"));
                assert!(value.parse::<u64>().is_ok(), "{ctx}: {text:?}");
                name
            })
            .collect();
        assert_eq!(names, ["pgid", "start_ticks", "pid_ns"], "{ctx}: {text:?}");
        assert!(
            operation.starts_with('"') && operation.ends_with('"'),
            "{ctx}: {text:?}"
        );
    }
    assert_eq!(lines.next(), None, "{ctx}: {text:?}");
}

/// Assert that every file below STATE is a temp file or a state file that parses.
#[track_caller]
fn assert_state_parses(host: &FakeHost, what: &str) {
    let (files, _temps) = state_files(host);
    let flags = "flags/";
    for rel in &files {
        let path = format!("{STATE}/{rel}");
        let bytes = host.read(&path);
        let text =
            String::from_utf8(bytes).unwrap_or_else(|e| panic!("{what}: {rel} is not UTF-8: {e}"));
        let ctx = format!("{what}: {rel}");
        let name = rel.rsplit('/').next().unwrap();
        if rel == "flags/START" || (rel.starts_with(flags) && name.ends_with("_ALL_CHECKED")) {
            assert!(text.is_empty(), "{ctx}: {text:?} is not empty");
        } else if rel == "flags/check_results" {
            for line in text.split('\n') {
                let (step, failed) = line
                    .rsplit_once(' ')
                    .unwrap_or_else(|| panic!("{ctx}: line {line:?}"));
                assert!(!step.is_empty(), "{ctx}: line {line:?}");
                assert!(failed == "True" || failed == "False", "{ctx}: {line:?}");
            }
        } else if rel.starts_with("flags/pkg/1.0.0/") {
            assert_marker(&text, &ctx);
        } else if rel == "history/pkg.json" {
            let v: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{ctx}: not JSON ({e}): {text:?}"));
            assert!(v["current-version"].is_string(), "{ctx}: {text}");
            let entries = v["history"].as_array().unwrap_or_else(|| panic!("{ctx}"));
            assert!(!entries.is_empty(), "{ctx}: {text}");
            for e in entries {
                assert!(e["version"].is_string(), "{ctx}: {text}");
                assert_rfc3339(e["time"].as_str().unwrap_or_default(), &ctx);
            }
        } else if rel.starts_with("results/") && has_extension(name, "json") {
            let v: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{ctx}: not JSON ({e}): {text:?}"));
            assert!(v["exit_code"].is_u64(), "{ctx}: {text}");
            assert!(v["operations"].is_array(), "{ctx}: {text}");
        } else if rel == "metrics/pkg.prom" {
            // A diagnostic written by rename: whole, and a parser takes every line.
            crate::metrics::scrape(&text);
        } else if rel == "metrics/pkg.json" {
            let v: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{ctx}: not JSON ({e}): {text:?}"));
            assert_eq!(v["package"], "pkg", "{ctx}: {text}");
        } else if rel.starts_with("locks/") && has_extension(name, "lock") {
            assert_lock_text(&text, &ctx);
        } else if rel.starts_with("interrupts/flags/abc_pkg_1.0.0/") {
            if name.ends_with(".pending") {
                parse_pending(&text, &ctx);
            } else if name.ends_with(".attempts") {
                let mut lines = text.lines();
                let id = lines.next().and_then(|l| l.strip_prefix("boot-id:"));
                let n = lines.next().and_then(|l| l.strip_prefix("attempts:"));
                assert!(
                    id.is_some_and(|id| !id.is_empty())
                        && n.is_some_and(|n| n.parse::<u32>().is_ok())
                        && text.ends_with('\n'),
                    "{ctx}: {text:?}"
                );
            } else if name.ends_with(".complete") {
                // Written by the agent (a timestamp) or promoted from a pending marker.
                if text.starts_with("boot-id:") {
                    parse_pending(&text, &ctx);
                } else {
                    assert_rfc3339(&text, &ctx);
                }
            } else {
                panic!("{ctx}: unexpected file in the interrupt marker directory");
            }
        } else {
            panic!("{ctx}: unexpected file below STATE");
        }
    }
}

/// Step logs below LOGS/pkg/1.0.0 as (directory + base name) → count; panics on a name that is
/// not a log name.
fn log_counts(host: &FakeHost) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for rel in host.files_under(PKG_LOGS) {
        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", &rel));
        let parsed = parse_log_name(name).unwrap_or_else(|| panic!("{rel} is not a log name"));
        *out.entry(format!("{dir}/{}", parsed.base)).or_insert(0) += 1;
    }
    out
}

/// One agent invocation of a scenario: a short name for the side-effect log and its arguments
/// after the program name.
struct Invocation {
    name: &'static str,
    args: Vec<String>,
}

fn stage_invocation(host: &FakeHost, mode: &'static str) -> Invocation {
    Invocation {
        name: mode,
        args: vec![mode.to_owned(), host.root_str(), COPY_DIR.to_owned()],
    }
}

fn interrupt_invocation(host: &FakeHost, json: &str) -> Invocation {
    Invocation {
        name: "interrupt",
        args: vec![
            "interrupt".to_owned(),
            host.root_str(),
            COPY_DIR.to_owned(),
            interrupt_data(json),
        ],
    }
}

/// Run `host` to the point of the next kill: start each remaining invocation in turn and
/// SIGKILL the one still running at `deadline` (and everything it started). Returns the index
/// of the killed invocation (`None`: all of them completed first). Every completed invocation
/// must exit 0.
fn run_until(
    host: &FakeHost,
    invocations: &[Invocation],
    first: usize,
    deadline: Option<Instant>,
    label: &str,
    what: &str,
) -> Option<usize> {
    for (i, inv) in invocations.iter().enumerate().skip(first) {
        host.append_line(EFFECTS, &format!("run {label} {}", inv.name));
        let mut agent = host.tagged_agent().args(&inv.args).spawn();
        let exited = deadline.is_none_or(|d| agent.exited_before(d));
        if exited {
            let run = agent.wait();
            assert_eq!(run.code(), Some(0), "{what}: {} failed\n{run:?}", inv.name);
        } else {
            let run = agent.kill_hard(host);
            // The agent may have finished between the deadline and the signal.
            if run.code() != Some(0) {
                assert_eq!(run.code(), None, "{what}: {} failed\n{run:?}", inv.name);
                return Some(i);
            }
        }
    }
    None
}

/// How long the invocations take uninterrupted on a fresh host: the median of three runs (a
/// rerun on the same host would skip the completed work), the last of which stays as the
/// reference state on `host`.
fn clean_run_time(host: &FakeHost, invocations: &[Invocation]) -> Duration {
    let mut times: Vec<Duration> = (0..2)
        .map(|_| {
            let scratch = FakeHost::new();
            scratch.install(&Package::simple());
            std::fs::remove_dir_all(scratch.path(PKG_DIR)).unwrap();
            copy_tree(&host.path(PKG_DIR), &scratch.path(PKG_DIR));
            copy_tree(&host.path("usr/bin"), &scratch.path("usr/bin"));
            let moved: Vec<Invocation> = invocations
                .iter()
                .map(|inv| Invocation {
                    name: inv.name,
                    args: inv
                        .args
                        .iter()
                        .map(|a| a.replace(&host.root_str(), &scratch.root_str()))
                        .collect(),
                })
                .collect();
            let started = Instant::now();
            assert_eq!(
                run_until(&scratch, &moved, 0, None, "clean", "clean run"),
                None
            );
            started.elapsed()
        })
        .collect();
    let started = Instant::now();
    assert_eq!(
        run_until(host, invocations, 0, None, "clean", "clean run"),
        None
    );
    times.push(started.elapsed());
    times.sort();
    times[1]
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            let _ = std::fs::remove_file(&target);
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Assert `actual` equals the clean run's `expected`, listing only the differences.
#[track_caller]
fn assert_same_files(actual: &BTreeSet<String>, expected: &BTreeSet<String>, what: &str) {
    let missing: Vec<&String> = expected.difference(actual).collect();
    let extra: Vec<&String> = actual.difference(expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{what}: state files differ from a clean run's: missing {missing:?}, extra {extra:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Stages: a 20-step package
// ---------------------------------------------------------------------------------------------

/// `part / whole` for small counts.
fn ratio(part: usize, whole: usize) -> f64 {
    f64::from(u32::try_from(part).unwrap()) / f64::from(u32::try_from(whole).unwrap())
}

fn step_path(i: usize) -> String {
    format!("s{i:02}.sh")
}

/// 20 apply steps and 5 checks; every step records `start i` and `done i` (the last thing it
/// does before exiting 0); every fourth one sleeps 20 ms in between.
fn crash_package() -> Package {
    let mut pkg = Package::new();
    for i in 1..=STEPS {
        let pause = if i % 4 == 3 { "usleep 20000\n" } else { "" };
        let body = format!(
            "#!/bin/sh\necho \"start {i}\" >> /var/tmp/effects.log\n{pause}\
             echo \"done {i}\" >> /var/tmp/effects.log\n"
        );
        pkg = pkg.step(
            "apply",
            Step::new(&step_path(i))
                .name(&format!("s{i:02}"))
                .script(&body),
        );
    }
    for i in 1..=CHECKS {
        let body = format!("#!/bin/sh\necho \"check {i}\" >> /var/tmp/effects.log\n");
        pkg = pkg.step(
            "apply-check",
            Step::new(&format!("s{i:02}_check.sh"))
                .name(&format!("c{i:02}"))
                .script(&body),
        );
    }
    pkg
}

/// Which apply steps are marked: (either marker, both markers) per step number.
fn marked_steps(host: &FakeHost, pkg: &Package) -> Vec<(bool, bool)> {
    (1..=STEPS)
        .map(|i| {
            let step = pkg.find(&step_path(i));
            let native = host.is_file(&format!("{PKG_FLAGS}/{}", step.native_marker()));
            let legacy = host.is_file(&format!("{PKG_FLAGS}/{}", step.legacy_marker()));
            (native || legacy, native && legacy)
        })
        .collect()
}

/// The invariants that must hold whenever the agent is not running.
#[track_caller]
fn assert_stage_invariants(host: &FakeHost, pkg: &Package, what: &str) {
    assert_state_parses(host, what);
    let done = finished(host);
    let marked = marked_steps(host, pkg);
    for (i, (any, _)) in marked.iter().enumerate() {
        let n = (i + 1).to_string();
        assert!(
            !any || done.contains(&n),
            "{what}: step {n} is marked complete but no run of it finished"
        );
    }
    // Steps run in order and a step only runs once the one before it is marked.
    let prefix = marked.iter().take_while(|(any, _)| *any).count();
    assert!(
        marked.iter().skip(prefix).all(|(any, _)| !any),
        "{what}: marked steps are not a prefix: {marked:?}"
    );
}

/// The rerun whose segment is `segment` started steps while `unmarked` (in order) had no
/// marker: it must start a prefix of them (all of them if it completed), and nothing else.
#[track_caller]
fn assert_rerun_started_only_unmarked(
    segment: &Segment,
    unmarked: &[String],
    completed: bool,
    what: &str,
) {
    let started = segment.started();
    assert!(
        started.len() <= unmarked.len() && started[..] == unmarked[..started.len()],
        "{what}: run {} started {started:?}, but the unmarked steps were {unmarked:?}",
        segment.label
    );
    if completed {
        assert_eq!(
            started, unmarked,
            "{what}: completed run {} did not start exactly the unmarked steps",
            segment.label
        );
    }
}

/// What the final state is compared on (besides the state files).
#[derive(Debug, PartialEq, Eq)]
struct StageSummary {
    check_results: String,
    history_versions: BTreeSet<String>,
    current_version: String,
    logged_steps: BTreeSet<String>,
    exit_codes: Vec<u64>,
}

fn stage_summary(host: &FakeHost) -> StageSummary {
    let history: Value = serde_json::from_slice(&host.read(HISTORY)).unwrap();
    let exit_codes = ["apply", "apply-check"]
        .iter()
        .map(|m| {
            let v: Value =
                serde_json::from_slice(&host.read(&format!("{STATE}/results/pkg/1.0.0/{m}.json")))
                    .unwrap();
            v["exit_code"].as_u64().unwrap()
        })
        .collect();
    StageSummary {
        check_results: host.read_string(CHECK_RESULTS),
        history_versions: history["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["version"].as_str().unwrap().to_owned())
            .collect(),
        current_version: history["current-version"].as_str().unwrap().to_owned(),
        logged_steps: log_counts(host).into_keys().collect(),
        exit_codes,
    }
}

fn unmarked_steps(host: &FakeHost, pkg: &Package) -> Vec<String> {
    marked_steps(host, pkg)
        .iter()
        .enumerate()
        .filter(|(_, (any, _))| !any)
        .map(|(i, _)| (i + 1).to_string())
        .collect()
}

/// Trials of one randomized scenario; prints a summary line on stderr.
#[derive(Debug, Default)]
struct Tally {
    trials: usize,
    kills: usize,
    temps_left: usize,
    reruns: usize,
}

impl Tally {
    fn report(&self, scenario: &str) {
        let _ = writeln!(
            std::io::stderr(),
            "{scenario}: {} trials, {} kills, {} temp files left by kills, {} finished \
             operations run again (killed between their exit and their marker)",
            self.trials,
            self.kills,
            self.temps_left,
            self.reruns
        );
    }
}

#[test]
fn stages_survive_sigkill_at_random_moments() {
    require_root!();
    let pkg = crash_package();

    // The reference: a clean run, timed to spread the kills over it.
    let clean = FakeHost::new();
    let _reaper_clean = Reaper(&clean);
    clean.install(&pkg);
    let stages = [
        stage_invocation(&clean, "apply"),
        stage_invocation(&clean, "apply-check"),
    ];
    let clean_time = clean_run_time(&clean, &stages);
    assert_stage_invariants(&clean, &pkg, "clean run");
    let expected_files = state_files(&clean).0;
    // Two markers per step, START, check_results, ALL_CHECKED, history, two results, the
    // metrics file and its state, the package lock and the check_results lock.
    assert_eq!(expected_files.len(), 2 * STEPS + 10, "{expected_files:#?}");
    let expected = stage_summary(&clean);

    let mut tally = Tally::default();
    for seed in reliability_seeds(0x5EED_0000, reliability_trials(CI_TRIALS)) {
        let _report = SeedReport {
            scenario: "stages_survive_sigkill_at_random_moments",
            seed,
        };
        tally.trials += 1;
        let mut rng = SeededRng::new(seed);
        let host = FakeHost::new();
        let _reaper = Reaper(&host);
        host.install(&pkg);
        let stages = [
            stage_invocation(&host, "apply"),
            stage_invocation(&host, "apply-check"),
        ];
        let mut next = 0;
        let kills = 1 + rng.below(3);
        for attempt in 0..=kills {
            let what = format!("seed {seed}, attempt {attempt}");
            let unmarked = unmarked_steps(&host, &pkg);
            // Spread the kill over what is left of the work, as a share of the clean run (a
            // little less, so that most attempts are killed).
            let left = if next == 0 { unmarked.len() } else { 0 } + CHECKS;
            let share = 0.9 * ratio(left, STEPS + CHECKS);
            let deadline = (attempt < kills)
                .then(|| Instant::now() + rng.duration_up_to(clean_time.mul_f64(share)));
            let before = segments(&host).len();
            let killed = run_until(&host, &stages, next, deadline, &attempt.to_string(), &what);
            assert_stage_invariants(&host, &pkg, &what);
            if let Some(apply) = segments(&host)[before..]
                .iter()
                .find(|s| s.label.ends_with(" apply"))
            {
                let completed = killed.is_none_or(|k| k > 0);
                assert_rerun_started_only_unmarked(apply, &unmarked, completed, &what);
            }
            let Some(k) = killed else { break };
            tally.kills += 1;
            tally.temps_left += state_files(&host).1.len();
            next = k;
        }

        let what = format!("seed {seed}, final state");
        assert_same_files(&state_files(&host).0, &expected_files, &what);
        assert_eq!(
            stage_summary(&host),
            expected,
            "{what}: differs from a clean run's"
        );
        let marked = marked_steps(&host, &pkg);
        assert!(marked.iter().all(|&(_, both)| both), "{what}: {marked:?}");
        assert!(
            log_counts(&host).values().all(|&n| n <= 5),
            "{what}: retention"
        );
        let done = finished(&host);
        for i in 1..=STEPS {
            assert!(
                done.contains(&i.to_string()),
                "{what}: step {i} never finished"
            );
        }
        let finished_runs: usize = segments(&host)
            .iter()
            .map(|s| s.subjects("done").len())
            .sum();
        tally.reruns += finished_runs - STEPS;
    }
    tally.report("stages");
}

// ---------------------------------------------------------------------------------------------
// service_restart with several services
// ---------------------------------------------------------------------------------------------

const SERVICE_RESTART: &str =
    r#"{"type":"service_restart","services":["a.service","b.service","c.service","d.service"]}"#;

/// Operation i of the payload above, as the fake systemctl records it.
fn service_ops() -> Vec<String> {
    let mut ops = vec!["daemon-reload".to_owned()];
    ops.extend(["a", "b", "c", "d"].map(|s| format!("restart {s}.service")));
    ops
}

/// A host whose fake systemctl records `start ARGS`, sleeps 20 ms for a restart, then records
/// `done ARGS` as the last thing before it exits 0.
fn service_host() -> FakeHost {
    let host = FakeHost::new();
    host.install(&Package::simple());
    host.set_fake_tool(
        "systemctl",
        "echo \"start $*\" >> /var/tmp/effects.log\n\
         case \"$1\" in restart) usleep 20000;; esac\n\
         echo \"done $*\" >> /var/tmp/effects.log",
    );
    host
}

fn complete_ops(host: &FakeHost) -> Vec<bool> {
    (0..service_ops().len())
        .map(|i| host.is_file(&format!("{INTERRUPT_FLAGS}/service_restart_{i}.complete")))
        .collect()
}

#[track_caller]
fn assert_service_invariants(host: &FakeHost, what: &str) {
    assert_state_parses(host, what);
    let done = finished(host);
    let complete = complete_ops(host);
    for (op, complete) in service_ops().iter().zip(&complete) {
        assert!(
            !complete || done.contains(op),
            "{what}: `systemctl {op}` is marked complete but never finished"
        );
    }
    let prefix = complete.iter().take_while(|c| **c).count();
    assert!(
        complete.iter().skip(prefix).all(|c| !c),
        "{what}: complete operations are not a prefix: {complete:?}"
    );
}

#[test]
fn service_restart_survives_sigkill_at_random_moments() {
    require_root!();
    let clean = service_host();
    let _reaper_clean = Reaper(&clean);
    let invocation = [interrupt_invocation(&clean, SERVICE_RESTART)];
    let clean_time = clean_run_time(&clean, &invocation);
    assert_service_invariants(&clean, "clean run");
    let expected_files = state_files(&clean).0;
    // Five markers, the results record, the metrics file and its state, the lock.
    assert_eq!(expected_files.len(), 9, "{expected_files:#?}");

    let mut tally = Tally::default();
    for seed in reliability_seeds(0x5EED_1000, reliability_trials(CI_TRIALS)) {
        let _report = SeedReport {
            scenario: "service_restart_survives_sigkill_at_random_moments",
            seed,
        };
        tally.trials += 1;
        let mut rng = SeededRng::new(seed);
        let host = service_host();
        let _reaper = Reaper(&host);
        let invocation = [interrupt_invocation(&host, SERVICE_RESTART)];
        let kills = 1 + rng.below(3);
        for attempt in 0..=kills {
            let what = format!("seed {seed}, attempt {attempt}");
            let incomplete: Vec<String> = service_ops()
                .into_iter()
                .zip(complete_ops(&host))
                .filter(|(_, c)| !c)
                .map(|(op, _)| op)
                .collect();
            let share = 0.9 * ratio(incomplete.len() + 1, service_ops().len() + 1);
            let deadline = (attempt < kills)
                .then(|| Instant::now() + rng.duration_up_to(clean_time.mul_f64(share)));
            let killed = run_until(&host, &invocation, 0, deadline, &attempt.to_string(), &what);
            assert_service_invariants(&host, &what);
            let segment = segments(&host).pop().unwrap();
            assert_rerun_started_only_unmarked(&segment, &incomplete, killed.is_none(), &what);
            if killed.is_none() {
                break;
            }
            tally.kills += 1;
            tally.temps_left += state_files(&host).1.len();
        }
        let what = format!("seed {seed}, final state");
        assert_same_files(&state_files(&host).0, &expected_files, &what);
        assert!(complete_ops(&host).iter().all(|c| *c), "{what}");
        let done = finished(&host);
        assert!(service_ops().iter().all(|op| done.contains(op)), "{what}");
        let logs = host.files_under(&format!("{PKG_LOGS}/interrupts"));
        assert!(
            (1..=5).contains(&logs.len()),
            "{what}: interrupt logs {logs:?}"
        );
        let finished_runs: usize = segments(&host)
            .iter()
            .map(|s| s.subjects("done").len())
            .sum();
        tally.reruns += finished_runs - service_ops().len();
    }
    tally.report("service_restart");
}

// ---------------------------------------------------------------------------------------------
// The reboot protocol
// ---------------------------------------------------------------------------------------------

const PENDING: &str = "node_restart_0.pending";
const COMPLETE: &str = "node_restart_0.complete";

/// A fake `reboot` that can be held at each phase: `/var/tmp/hold.entered` holds it before it
/// does anything, `/var/tmp/hold.requested` after it recorded `requested <boot id>` (the
/// reboot is enqueued); `/var/tmp/shutdown` makes the host go down (`host_goes_down!`: SIGTERM
/// to the agent and the command, then SIGKILL of the agent), else it exits 0 and the agent
/// waits for a shutdown that never comes.
const FAKE_REBOOT: &str = concat!(
    "\
: > /var/tmp/reboot.entered
while [ -e /var/tmp/hold.entered ]; do usleep 2000; done
echo \"requested $(cat /proc/sys/kernel/random/boot_id)\" >> /var/tmp/effects.log
: > /var/tmp/reboot.requested
while [ -e /var/tmp/hold.requested ]; do usleep 2000; done
if [ -e /var/tmp/shutdown ]; then
",
    host_goes_down!(),
    "
fi
exit 0"
);

/// Where the reboot protocol is killed.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for the resource lock another agent holds: nothing written yet.
    Lock,
    /// Pending marker written, the reboot command started but not yet effective.
    Entered,
    /// The reboot is enqueued, the command still running.
    Requested,
    /// The command exited 0; the agent waits for the shutdown.
    Waiting,
    /// A random moment of the whole run.
    Random,
}

fn reboot_host() -> FakeHost {
    let host = FakeHost::new();
    host.install(&Package::simple());
    host.set_fake_tool("reboot", FAKE_REBOOT);
    host
}

fn interrupt_marker(host: &FakeHost, name: &str) -> Option<String> {
    let rel = format!("{INTERRUPT_FLAGS}/{name}");
    host.is_file(&rel).then(|| host.read_string(&rel))
}

/// Every file of the interrupt marker directory with its content.
fn marker_files(host: &FakeHost) -> BTreeMap<String, Vec<u8>> {
    host.files_under(INTERRUPT_FLAGS)
        .into_iter()
        .map(|rel| {
            let content = host.read(&format!("{INTERRUPT_FLAGS}/{rel}"));
            (rel, content)
        })
        .collect()
}

fn current_boot_id(host: &FakeHost) -> String {
    host.read_string("proc/sys/kernel/random/boot_id")
        .trim()
        .to_owned()
}

/// Boot IDs under which the fake reboot was requested.
fn requested_under(host: &FakeHost) -> Vec<String> {
    segments(host)
        .iter()
        .flat_map(|s| s.subjects("requested"))
        .collect()
}

#[track_caller]
fn assert_reboot_invariants(host: &FakeHost, boots: &[String], what: &str) {
    assert_state_parses(host, what);
    let pending = interrupt_marker(host, PENDING);
    let complete = interrupt_marker(host, COMPLETE);
    assert!(
        pending.is_none() || complete.is_none(),
        "{what}: both {PENDING} and {COMPLETE} exist"
    );
    if let Some(p) = &pending {
        let id = parse_pending(p, what);
        assert!(
            boots.contains(&id),
            "{what}: pending names unknown boot {id:?}"
        );
    }
    if let Some(c) = &complete {
        // Only a promoted pending marker completes a reboot: never without a boot ID change,
        // and only after the reboot was requested under the boot it names.
        let id = parse_pending(c, what);
        assert_ne!(
            id,
            current_boot_id(host),
            "{what}: complete without a reboot"
        );
        assert!(
            requested_under(host).contains(&id),
            "{what}: complete for boot {id:?}, but no reboot was requested under it"
        );
    }
}

/// Wait until `<ROOT>/rel` exists or the agent exits; returns whether the file appeared.
fn reached(host: &FakeHost, agent: &mut crate::util::Running, rel: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !host.exists(rel) {
        if agent.has_exited() {
            return false;
        }
        assert!(Instant::now() < deadline, "{rel} did not appear");
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// Start the interrupt and SIGKILL it at `phase`. Returns whether it was killed (it finishes
/// by itself when the reboot already completed, or before a random deadline).
fn kill_reboot_at(
    host: &FakeHost,
    phase: Phase,
    rng: &mut SeededRng,
    label: &str,
    what: &str,
) -> bool {
    for f in [
        "reboot.entered",
        "reboot.requested",
        "hold.entered",
        "hold.requested",
    ] {
        let _ = std::fs::remove_file(host.path(&format!("var/tmp/{f}")));
    }
    match phase {
        Phase::Entered => host.write("var/tmp/hold.entered", ""),
        Phase::Requested => host.write("var/tmp/hold.requested", ""),
        Phase::Lock | Phase::Waiting | Phase::Random => {}
    }
    let holder = matches!(phase, Phase::Lock)
        .then(|| hold_flock(&host.path(&format!("{STATE}/locks/interrupt-abc_pkg_1.0.0.lock"))));
    host.append_line(EFFECTS, &format!("run {label} interrupt"));
    let started = Instant::now();
    let mut agent = host
        .tagged_agent()
        .args([
            "interrupt",
            &host.root_str(),
            COPY_DIR,
            &interrupt_data(NODE_RESTART),
        ])
        .spawn();
    let kill_now = match phase {
        Phase::Lock => {
            !agent.exited_before(started + rng.duration_up_to(Duration::from_millis(60)))
        }
        Phase::Entered => reached(host, &mut agent, "var/tmp/reboot.entered"),
        Phase::Requested => reached(host, &mut agent, "var/tmp/reboot.requested"),
        Phase::Waiting => {
            reached(host, &mut agent, "var/tmp/reboot.requested")
                && !agent.exited_before(Instant::now() + Duration::from_millis(50))
        }
        Phase::Random => {
            !agent.exited_before(started + rng.duration_up_to(Duration::from_millis(250)))
        }
    };
    let run = if kill_now {
        agent.kill_hard(host)
    } else {
        agent.wait()
    };
    if let Some(mut holder) = holder {
        let _ = holder.kill();
        let _ = holder.wait();
    }
    for f in ["hold.entered", "hold.requested"] {
        let _ = std::fs::remove_file(host.path(&format!("var/tmp/{f}")));
    }
    // Killed, or (when the kill came too late or the operation was complete) finished.
    assert!(
        run.code().is_none() || run.code() == Some(0),
        "{what}: {phase:?}\n{run:?}"
    );
    run.code().is_none()
}

/// Rerun with a shutdown that works until the reboot completes; returns the number of runs.
fn converge(host: &FakeHost, boots: &mut Vec<String>, label: &str, what: &str) -> usize {
    host.write("var/tmp/shutdown", "");
    for run_index in 1..=3 {
        host.append_line(EFFECTS, &format!("run {label}-{run_index} interrupt"));
        let requested_before = requested_under(host).len();
        let run = host
            .tagged_agent()
            .args([
                "interrupt",
                &host.root_str(),
                COPY_DIR,
                &interrupt_data(NODE_RESTART),
            ])
            .run();
        assert_reboot_invariants(host, boots, what);
        if interrupt_marker(host, COMPLETE).is_some() {
            run.assert_success();
            assert_eq!(
                requested_under(host).len(),
                requested_before,
                "{what}: the run that completed requested another reboot"
            );
            return run_index;
        }
        run.assert_killed_by_the_shutdown();
        // The reboot happened.
        let boot = format!("{BOOT_ID}-{label}-{run_index}");
        host.set_boot_id(&boot);
        boots.push(boot);
    }
    panic!("{what}: the reboot did not complete within 3 runs");
}

#[test]
fn reboot_protocol_survives_sigkill_at_every_phase() {
    require_root!();
    let clean = reboot_host();
    let _reaper_clean = Reaper(&clean);
    let mut boots = vec![BOOT_ID.to_owned()];
    assert_eq!(converge(&clean, &mut boots, "clean", "clean run"), 2);
    let expected_files = state_files(&clean).0;
    // The complete marker, the results record, the metrics file and its state, the lock.
    assert_eq!(expected_files.len(), 5, "{expected_files:#?}");

    let phases = [
        Phase::Lock,
        Phase::Entered,
        Phase::Requested,
        Phase::Waiting,
        Phase::Random,
    ];
    let mut tally = Tally::default();
    let mut killed_at: BTreeMap<String, usize> = BTreeMap::new();
    for seed in reliability_seeds(0x5EED_2000, reliability_trials(CI_TRIALS)) {
        let _report = SeedReport {
            scenario: "reboot_protocol_survives_sigkill_at_every_phase",
            seed,
        };
        tally.trials += 1;
        let mut rng = SeededRng::new(seed);
        let host = reboot_host();
        let _reaper = Reaper(&host);
        let mut boots = vec![BOOT_ID.to_owned()];
        // At most two kills under one boot ID: the loop guard (3 attempts) stays out of the way.
        let kills = 1 + rng.below(2);
        for attempt in 0..kills {
            // Every phase in turn across trials, then random ones.
            let phase = if attempt == 0 {
                phases[(seed % 5) as usize]
            } else {
                phases[rng.below(5) as usize]
            };
            let what = format!("seed {seed}, attempt {attempt}, killed at {phase:?}");
            let requested_before = requested_under(&host).len();
            let markers_before = marker_files(&host);
            let killed = kill_reboot_at(&host, phase, &mut rng, &attempt.to_string(), &what);
            tally.kills += usize::from(killed);
            *killed_at.entry(format!("{phase:?}")).or_insert(0) += usize::from(killed);
            tally.temps_left += state_files(&host).1.len();
            assert_reboot_invariants(&host, &boots, &what);
            if matches!(phase, Phase::Lock) {
                // Killed while waiting for the lock: nothing requested, no marker touched.
                assert_eq!(requested_under(&host).len(), requested_before, "{what}");
                assert_eq!(marker_files(&host), markers_before, "{what}");
            }
            if killed && matches!(phase, Phase::Entered | Phase::Requested | Phase::Waiting) {
                let pending = interrupt_marker(&host, PENDING)
                    .unwrap_or_else(|| panic!("{what}: no pending marker"));
                assert_eq!(
                    parse_pending(&pending, &what),
                    current_boot_id(&host),
                    "{what}"
                );
            }
            // A requested reboot happens, or is lost, at random.
            if requested_under(&host).len() > requested_before && rng.below(2) == 0 {
                let boot = format!("{BOOT_ID}-{seed}-{attempt}");
                host.set_boot_id(&boot);
                boots.push(boot);
            }
        }
        let what = format!("seed {seed}, convergence");
        converge(&host, &mut boots, &seed.to_string(), &what);
        assert_same_files(&state_files(&host).0, &expected_files, &what);
        tally.reruns += requested_under(&host).len() - 1;
    }
    let _ = writeln!(
        std::io::stderr(),
        "reboot protocol: {} trials, {} kills {killed_at:?}, {} temp files left by kills, {} \
         reboots requested again (same boot ID on the next run)",
        tally.trials,
        tally.kills,
        tally.temps_left,
        tally.reruns
    );
}

// ---------------------------------------------------------------------------------------------
// The states a kill leaves, planted directly
// ---------------------------------------------------------------------------------------------

#[test]
fn a_completed_step_missing_one_of_its_markers_gets_it_back() {
    require_root!();
    // A kill between the two marker writes leaves only the native one; a node last run by the
    // Python agent has only legacy ones. Either still means "completed" (SPEC §8.7), and the
    // next run writes the missing twin so that an agent reading only the other name agrees.
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    let pkg = Package::new()
        .step("apply", Step::new("a.sh"))
        .step("apply", Step::new("b.sh"))
        .step("apply-check", Step::new("a_check.sh"));
    host.install(&pkg);
    let (a, b) = (pkg.find("a.sh"), pkg.find("b.sh"));
    let go = "last_run: 2026-11-30T10:00:00.5Z\nstep_always_runs: false";
    let python = "last_run: 2026-11-30T10:27:29.224926\nstep_always_runs: False";
    host.write(&format!("{PKG_FLAGS}/{}", a.native_marker()), go);
    host.write(&format!("{PKG_FLAGS}/{}", b.legacy_marker()), python);
    host.stage("apply").assert_success();
    assert_eq!(host.ran_count("a.sh") + host.ran_count("b.sh"), 0);
    assert_eq!(
        host.read_string(&format!("{PKG_FLAGS}/{}", a.legacy_marker())),
        go
    );
    assert_eq!(
        host.read_string(&format!("{PKG_FLAGS}/{}", b.native_marker())),
        python
    );
}

#[test]
fn temp_files_of_a_killed_write_are_never_taken_for_state() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    let pkg = Package::standard();
    host.install(&pkg);
    let s1 = pkg.find("s1.sh");
    let marker = "last_run: 2026-11-30T10:00:00Z\nstep_always_runs: false";
    // What a writer killed before its rename leaves: complete content under a temp name.
    for name in [s1.native_marker(), s1.legacy_marker()] {
        host.write(&format!("{PKG_FLAGS}/.{name}.tmp.4242.00ff"), marker);
    }
    host.write(
        &format!("{STATE}/history/.pkg.json.tmp.4242.00ff"),
        r#"{"current-version": "0.9.0", "history": [{"version": "0.9.0", "time": "2026-11-30T10:00:00Z"}]}"#,
    );
    host.write(
        &format!("{INTERRUPT_FLAGS}/.service_restart_0.complete.tmp.4242.00ff"),
        "2026-11-30T10:00:00Z",
    );
    host.write(
        &format!("{INTERRUPT_FLAGS}/.node_restart_0.pending.tmp.4242.00ff"),
        "boot-id:00000000-0000-4000-8000-000000000000\n",
    );

    host.run("apply", &[("FOO", "x")]).assert_success();
    assert_eq!(host.ran_count("s1.sh"), 1, "a temp marker is not a marker");
    // History: the temp ledger is not the ledger, so the previous version is unknown.
    let run = host.stage("upgrade");
    run.assert_success();
    run.assert_stdout_contains("upgrade up2.sh ['unknown', '1.0.0']");

    let run = host
        .interrupt(&interrupt_data(
            r#"{"type":"service_restart","services":[]}"#,
        ))
        .run();
    run.assert_success();
    assert_eq!(host.calls(), ["systemctl daemon-reload"]);

    // A temp pending marker of another boot does not complete the reboot: it is requested.
    host.set_fake_tool("reboot", REBOOT_SHUTS_DOWN);
    let run = host.interrupt(&interrupt_data(NODE_RESTART)).run();
    run.assert_killed_by_the_shutdown();
    assert_eq!(host.calls(), ["systemctl daemon-reload", "reboot"]);
    assert!(interrupt_marker(&host, COMPLETE).is_none());
    assert_eq!(
        interrupt_marker(&host, PENDING).as_deref(),
        Some(format!("boot-id:{BOOT_ID}\n").as_str())
    );
    // The planted temp files are still ignored, not cleaned: they are young (SPEC §5).
    assert_eq!(state_files(&host).1.len(), 5);
}
