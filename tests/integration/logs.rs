//! SPEC §8.10: per-operation log files, their names, content and retention.

use std::path::Path;

use serde_json::Value;

use crate::util::{
    FakeHost, INTERRUPT_LOGS, LOGS, PKG_DIR, PKG_FLAGS, PKG_LOGS, Package, Run, Step,
    assert_recent, interrupt_data, mount_namespaces_work, parse_log_name,
};

/// Fail the calling test (it cannot run its assertions) unless it can mount in a namespace of
/// its own.
macro_rules! require_mounts {
    () => {
        require_root!();
        if !mount_namespaces_work() {
            $crate::util::cannot_run("needs mount namespaces (unshare, mount, CAP_SYS_ADMIN)");
        }
    };
}

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

// ---------------------------------------------------------------------------------------------
// SPEC §8.10: log trouble is never a failure
// ---------------------------------------------------------------------------------------------

/// The results record of the last `mode` run.
fn record(host: &FakeHost, mode: &str) -> Value {
    let path = format!("var/lib/skyhook/sk1/results/pkg/1.0.0/{mode}.json");
    serde_json::from_slice(&host.read(&path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The `log` field of every operation of a results record.
fn log_fields(record: &Value) -> Vec<String> {
    record["operations"]
        .as_array()
        .unwrap_or_else(|| panic!("no operations: {record:#}"))
        .iter()
        .map(|op| op["log"].as_str().unwrap_or("<none>").to_owned())
        .collect()
}

fn two_steps() -> Package {
    Package::new()
        .step("apply", Step::new("s1.sh"))
        .step("apply", Step::new("s2.sh"))
        .step("apply-check", Step::new("s1_check.sh"))
}

/// `agent apply` of [`two_steps`] with `setup` run in the agent's mount namespace first.
fn apply_with_mounts(host: &FakeHost, setup: &str) -> Run {
    host.agent()
        .args(["apply", &host.root_str(), crate::util::COPY_DIR])
        .in_mount_namespace(setup)
        .run()
}

/// What the agent must do when no step log can be written: exit 0, both steps ran with their
/// output on the agent's own streams and their markers written, one warning naming `cause`,
/// and the results record saying `not written (<cause>)` for each step.
#[track_caller]
fn assert_ran_without_logs(host: &FakeHost, run: &Run, cause: &str) {
    assert_eq!(
        run.code(),
        Some(0),
        "the steps decide the exit code: {run:?}"
    );
    run.assert_stdout_contains("[s1.sh] args(0): \n");
    run.assert_stdout_contains("[s2.sh] args(0): \n");
    run.assert_stderr_contains("[s1.sh] to stderr\n");
    assert_eq!(host.ran(), ["s1.sh ", "s2.sh "]);
    let pkg = two_steps();
    for step in ["s1.sh", "s2.sh"] {
        assert!(
            host.is_file(&format!("{PKG_FLAGS}/{}", pkg.find(step).native_marker())),
            "{step}: no marker"
        );
    }
    let warnings = run
        .err()
        .lines()
        .filter(|l| l.contains("cannot write the log"))
        .count();
    assert_eq!(warnings, 1, "one warning per run: {run:?}");
    run.assert_stderr_line_contains(&["cannot write the log", cause]);
    let fields = log_fields(&record(host, "apply"));
    assert_eq!(fields.len(), 2, "{fields:?}");
    for field in &fields {
        assert!(
            field.starts_with("not written (") && field.ends_with(')') && field.contains(cause),
            "results record log field {field:?} should say `not written (...{cause}...)`"
        );
    }
}

#[test]
fn a_log_directory_that_is_a_file_does_not_fail_the_stage() {
    require_root!();
    let host = FakeHost::new();
    host.install(&two_steps());
    host.write(LOGS, "not a directory");
    let run = host.stage("apply");
    assert_ran_without_logs(&host, &run, "/var/log/skyhook/sk1 is not a directory");
    assert_eq!(host.read_string(LOGS), "not a directory");
}

#[test]
fn a_read_only_log_filesystem_does_not_fail_the_stage() {
    require_mounts!();
    let host = FakeHost::new();
    host.install(&two_steps());
    host.mkdir(LOGS);
    let logs = host.path(LOGS);
    let run = apply_with_mounts(
        &host,
        &format!(
            "mount --bind '{0}' '{0}'\nmount -o remount,bind,ro '{0}'",
            logs.display()
        ),
    );
    assert_ran_without_logs(&host, &run, "Read-only file system");
    assert!(host.list(LOGS).is_empty());
}

#[test]
fn a_log_filesystem_without_free_inodes_does_not_fail_the_stage() {
    require_mounts!();
    let host = FakeHost::new();
    host.install(&two_steps());
    host.mkdir(LOGS);
    let logs = host.path(LOGS);
    // Three inodes: the mount's root, pkg and 1.0.0; no log file fits.
    let run = apply_with_mounts(
        &host,
        &format!(
            "mount -t tmpfs -o size=1m,nr_inodes=3 tmpfs '{0}'\nmkdir -p '{0}/pkg/1.0.0'",
            logs.display()
        ),
    );
    assert_ran_without_logs(&host, &run, "No space left on device");
}

#[test]
fn a_full_log_filesystem_does_not_fail_the_stage_and_is_recorded() {
    require_mounts!();
    let host = FakeHost::new();
    host.install(&two_steps());
    host.mkdir(LOGS);
    let logs = host.path(LOGS);
    // Room for the log files' inodes, none for their contents.
    let run = apply_with_mounts(
        &host,
        &format!(
            "mount -t tmpfs -o size=64k tmpfs '{0}'\nmkdir -p '{0}/pkg/1.0.0'\n\
             dd if=/dev/zero of='{0}/fill' bs=4k 2>/dev/null || true",
            logs.display()
        ),
    );
    assert_ran_without_logs(&host, &run, "No space left on device");
    let fields = log_fields(&record(&host, "apply"));
    assert!(
        fields[0].starts_with("not written (writing /var/log/skyhook/sk1/pkg/1.0.0/s1.sh-"),
        "{fields:?}"
    );
}

#[test]
fn a_read_only_log_filesystem_does_not_fail_an_interrupt() {
    require_mounts!();
    let host = FakeHost::new();
    host.mkdir(PKG_DIR);
    host.mkdir(LOGS);
    let logs = host.path(LOGS);
    let json = r#"{"type":"service_restart","services":["kubelet"]}"#;
    let run = host
        .interrupt(&interrupt_data(json))
        .in_mount_namespace(&format!(
            "mount --bind '{0}' '{0}'\nmount -o remount,bind,ro '{0}'",
            logs.display()
        ))
        .run();
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert_eq!(
        host.calls(),
        ["systemctl daemon-reload", "systemctl restart kubelet"]
    );
    run.assert_stdout_contains("systemctl restart kubelet\n");
    run.assert_stderr_line_contains(&["cannot write the log", "Read-only file system"]);
    assert_eq!(
        run.err()
            .lines()
            .filter(|l| l.contains("cannot write the log"))
            .count(),
        1,
        "{run:?}"
    );
    let fields = log_fields(&record(&host, "interrupt"));
    assert_eq!(fields.len(), 2, "{fields:?}");
    assert!(
        fields
            .iter()
            .all(|f| f.starts_with("not written (") && f.contains("Read-only file system")),
        "{fields:?}"
    );
    assert!(!host.exists(INTERRUPT_LOGS));
}

#[test]
fn a_link_in_the_log_path_still_fails_the_stage() {
    require_root!();
    // Log trouble is forgiven; a link where the agent would write is not (SPEC §5).
    let host = FakeHost::new();
    host.install(&two_steps());
    let outside = host.outside().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    host.mkdir("var/log/skyhook");
    host.symlink(LOGS, &outside);
    let run = host.stage("apply");
    run.assert_code(1);
    run.assert_stderr_line_contains(&["agent execution failed", "is a symbolic link"]);
    assert!(host.ran().is_empty(), "{:?}", host.ran());
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}

// ---------------------------------------------------------------------------------------------
// SPEC §8.10 with many steps: one read of the log directory per stage loses nothing
// ---------------------------------------------------------------------------------------------

#[test]
fn three_runs_of_a_many_step_package_keep_all_three_logs_of_every_step() {
    require_root!();
    let host = FakeHost::new();
    let mut paths: Vec<String> = (0..120).map(|i| format!("s{i}.sh")).collect();
    paths.extend((0..20).map(|i| format!("sub/t{i}.sh")));
    // Names that start like each other share a directory.
    paths.extend(["x".to_owned(), "x-y".to_owned(), "sub/x".to_owned()]);
    let mut pkg = Package::new().step("apply-check", Step::new("check.sh"));
    for path in &paths {
        pkg = pkg.step(
            "apply",
            Step::new(path)
                .always_run()
                .script("#!/bin/sh\necho \"run $RUN of @PATH@\"\n"),
        );
    }
    host.install(&pkg);
    for run in ["1", "2", "3"] {
        host.run("apply", &[("RUN", run)]).assert_success();
    }
    let newest = log_fields(&record(&host, "apply"));
    assert_eq!(newest.len(), paths.len());
    for (path, newest) in paths.iter().zip(&newest) {
        let (dir, base) = match path.rsplit_once('/') {
            Some((sub, base)) => (format!("{PKG_LOGS}/{sub}"), base),
            None => (PKG_LOGS.to_owned(), path.as_str()),
        };
        let mut logs: Vec<(std::time::SystemTime, String)> = logs_of(&host, &dir, base)
            .into_iter()
            .map(|name| (parse_log_name(&name).unwrap().time, name))
            .collect();
        logs.sort();
        let contents: Vec<String> = logs
            .iter()
            .map(|(_, name)| host.read_string(&format!("{dir}/{name}")))
            .collect();
        let expected: Vec<String> = (1..=3).map(|r| format!("run {r} of {path}\n")).collect();
        assert_eq!(contents, expected, "{path}: {logs:?}");
        let last = &logs.last().unwrap().1;
        assert_eq!(
            newest,
            &format!("/{dir}/{last}"),
            "{path}: the record names the newest log"
        );
    }
    // Nothing else was written there: 3 logs per step.
    assert_eq!(
        host.files_under(PKG_LOGS).len(),
        3 * paths.len(),
        "{:?}",
        host.files_under(PKG_LOGS)
    );
}
