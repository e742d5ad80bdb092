//! SPEC §8.10: per-operation log files, their names, content and retention.

use std::path::Path;

use crate::util::{FakeHost, LOGS, PKG_LOGS, Package, Step, assert_recent, parse_log_name};

/// Names of this agent's log files of step base name `base` in `dir`.
fn logs_of(host: &FakeHost, dir: &str, base: &str) -> Vec<String> {
    host.list(dir)
        .into_iter()
        .filter(|n| parse_log_name(n).is_some_and(|l| l.base == base))
        .collect()
}

fn always(path: &str) -> Step {
    Step::new(path).always_run()
}

#[test]
fn each_step_run_writes_one_combined_log() {
    require_root!();
    let host = FakeHost::new();
    let step = Step::new("s1.sh").script(
        "#!/bin/sh\necho out1\nsleep 0.2\necho err1 >&2\nsleep 0.2\necho out2\nprintf 'tail'\n",
    );
    host.install(
        &Package::new()
            .step("apply", step)
            .step("apply-check", Step::new("s1_check.sh")),
    );
    host.stage("apply").assert_success();
    let names = host.list(PKG_LOGS);
    assert_eq!(names.len(), 1, "{names:?}");
    let parsed = parse_log_name(&names[0])
        .unwrap_or_else(|| panic!("{} is not <base>-YYYY-MM-DD-HHMMSS.nnnnnnnnn.log", names[0]));
    assert_eq!(parsed.base, "s1.sh");
    assert_eq!(parsed.collision, None);
    assert_recent(parsed.time, "log name timestamp");
    assert_eq!(
        host.read_string(&format!("{PKG_LOGS}/{}", names[0])),
        "out1\nerr1\nout2\ntail",
        "stdout and stderr in arrival order, no header"
    );
}

#[test]
fn failed_steps_are_logged_too() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::simple());
    host.run("apply", &[("FAIL_STEPS", "s1.sh")]).assert_code(1);
    let names = logs_of(&host, PKG_LOGS, "s1.sh");
    assert_eq!(names.len(), 1);
    let content = host.read_string(&format!("{PKG_LOGS}/{}", names[0]));
    assert!(content.contains("[s1.sh] to stderr\n"), "{content:?}");
}

#[test]
fn check_steps_are_logged() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::simple());
    host.stage("apply-check").assert_success();
    assert_eq!(logs_of(&host, PKG_LOGS, "s1_check.sh").len(), 1);
}

#[test]
fn logs_of_steps_in_subdirectories_live_in_subdirectories() {
    require_root!();
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step("apply", Step::new("sub/deep.sh"))
            .step("apply-check", Step::new("sub/deep_check.sh")),
    );
    host.stage("apply").assert_success();
    assert_eq!(
        logs_of(&host, &format!("{PKG_LOGS}/sub"), "deep.sh").len(),
        1
    );
    assert!(
        host.list(PKG_LOGS).iter().all(|n| n == "sub"),
        "{:?}",
        host.list(PKG_LOGS)
    );
}

#[test]
fn no_legacy_err_files_are_written() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::simple());
    host.stage("apply").assert_success();
    assert!(
        host.list(PKG_LOGS).iter().all(|n| !n.ends_with(".log.err")),
        "{:?}",
        host.list(PKG_LOGS)
    );
}

#[test]
fn retention_keeps_the_five_newest_logs_of_each_step() {
    require_root!();
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step("apply", always("x"))
            .step("apply", always("x-y"))
            .step("apply-check", Step::new("x_check")),
    );
    let mut first_x = None;
    for i in 0..7 {
        host.stage("apply").assert_success();
        if i == 0 {
            first_x = logs_of(&host, PKG_LOGS, "x").pop();
        }
    }
    let x = logs_of(&host, PKG_LOGS, "x");
    let xy = logs_of(&host, PKG_LOGS, "x-y");
    assert_eq!(x.len(), 5, "x: {x:?}");
    assert_eq!(xy.len(), 5, "x-y: {xy:?}");
    assert!(
        !x.contains(&first_x.unwrap()),
        "the oldest log is the one deleted"
    );
    assert_eq!(host.list(PKG_LOGS).len(), 10, "{:?}", host.list(PKG_LOGS));
}

#[test]
fn retention_counts_legacy_logs_and_ignores_other_files() {
    require_root!();
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step("apply", always("x"))
            .step("apply-check", Step::new("x_check")),
    );
    let legacy = format!("{PKG_LOGS}/x-2020-01-01-000000.log");
    let legacy_err = format!("{PKG_LOGS}/x-2020-01-01-000000.log.err");
    let other = format!("{PKG_LOGS}/notes.txt");
    host.write(&legacy, "[out]old");
    host.write(&legacy_err, "[err]old");
    host.write(&other, "keep");
    for _ in 0..4 {
        host.stage("apply").assert_success();
    }
    assert!(
        host.exists(&legacy),
        "5 logs including the legacy one: nothing deleted yet"
    );
    host.stage("apply").assert_success();
    assert!(
        !host.exists(&legacy),
        "the legacy log is the oldest and goes first"
    );
    assert!(host.exists(&legacy_err), ".log.err files are never deleted");
    assert!(host.exists(&other));
    assert_eq!(logs_of(&host, PKG_LOGS, "x").len(), 5);
}

#[test]
fn write_logs_false_creates_no_log_directory() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::simple());
    let run = host.run("apply", &[("SKYHOOK_AGENT_WRITE_LOGS", "false")]);
    run.assert_success();
    run.assert_stdout_contains("[s1.sh] args(0): \n");
    assert!(
        !host.exists("var/log/skyhook"),
        "{:?}",
        host.list("var/log")
    );
    assert!(!host.exists(LOGS));
}

#[test]
fn logs_are_never_written_outside_root() {
    require_root!();
    let real = Path::new("/var/log/skyhook/sk1/pkg/1.0.0");
    if real.exists() {
        crate::util::cannot_run(
            "/var/log/skyhook/sk1/pkg/1.0.0 already exists on this machine, so a log written \
             outside ROOT could not be told apart",
        );
    }
    let host = FakeHost::new();
    host.install(&Package::simple());
    host.stage("apply").assert_success();
    assert!(
        !real.exists(),
        "the agent wrote a log directory on its own filesystem"
    );
}
