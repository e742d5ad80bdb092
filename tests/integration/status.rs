//! `agent status` answers (SPEC §1.4): a first-line verdict (`done`, `running`, `error`,
//! `reboot-pending`, `not-started`), exit codes a script can test (0, 1 on error or state it
//! cannot read, 2 on usage), `errors:` naming the step, exit code, log and results record,
//! the lock holder of a running stage, pending reboots in words, and the operator's layout
//! found without SKYHOOK_ROOT_DIR.

use std::time::Duration;

use serde_json::Value;

use crate::util::{BOOT_ID, FakeHost, HISTORY, INTERRUPT_FLAGS, Package, Reaper, Run, STATE, Step};

fn off_host() -> Package {
    Package::off_host(&["s1.sh", "s2.sh"], &["s1_check.sh"])
}

fn status(host: &FakeHost, extra: &[&str]) -> Run {
    host.agent()
        .arg("status")
        .arg(host.root_str())
        .args(extra)
        .run()
}

/// `agent reset ROOT ARGS --yes`, which must succeed.
fn reset(host: &FakeHost, args: &[&str]) {
    host.agent()
        .arg("reset")
        .arg(host.root_str())
        .args(args)
        .arg("--yes")
        .run()
        .assert_success();
}

fn json(run: &Run) -> Value {
    serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("not JSON: {e}\n{run:?}"))
}

fn first_line(run: &Run) -> String {
    run.out().lines().next().unwrap_or_default().to_owned()
}

#[test]
fn an_empty_host_is_not_started_and_exits_0() {
    let host = FakeHost::new();
    let before = host.snapshot();
    let run = status(&host, &[]);
    run.assert_success();
    assert_eq!(
        run.out(),
        format!(
            "status: not-started\nstate: /var/lib/skyhook/sk1 (logs: /var/log/skyhook/sk1; from SKYHOOK_ROOT_DIR)\n\
             boot ID: {BOOT_ID}\n\nno package state found under /var/lib/skyhook/sk1\n"
        )
    );
    let v = json(&status(&host, &["--format", "json"]));
    assert_eq!(v["status"], "not-started");
    assert_eq!(v["errors"], Value::Array(Vec::new()));
    before.assert_unchanged(&host.snapshot(), "status");
}

#[test]
fn a_completed_package_is_done_and_exits_0() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply").assert_success();
    host.stage("apply-check").assert_success();
    let before = host.snapshot();
    let run = status(&host, &[]);
    run.assert_success();
    assert_eq!(first_line(&run), "status: done");
    assert!(run.out().contains("\npackage pkg: done\n"), "{run:?}");
    assert!(!run.out().contains("errors:"), "{run:?}");
    let text = status(&host, &["--json"]);
    let long = status(&host, &["--format", "json"]);
    assert_eq!(text.stdout, long.stdout, "--json is --format json");
    let v = json(&long);
    assert_eq!(v["status"], "done");
    assert_eq!(v["states"][0]["packages"][0]["status"], "done");
    assert_eq!(v["states"][0]["packages"][0]["lock"], Value::Null);
    before.assert_unchanged(&host.snapshot(), "status");
}

#[test]
fn a_failed_step_is_failed_with_its_exit_code_log_record_and_output() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.run("apply", &[("FAIL_STEPS", "s2.sh")]).assert_code(1);
    let record: Value =
        serde_json::from_str(&host.read_string(&format!("{STATE}/results/pkg/1.0.0/apply.json")))
            .unwrap();
    let failed = &record["operations"][1];
    assert_eq!(failed["exit_code"], 3, "{record:#}");
    let step = failed["operation"].as_str().unwrap();
    let log = failed["log"].as_str().unwrap();
    assert!(log.starts_with("/var/log/skyhook/sk1/pkg/1.0.0/"), "{log}");
    assert!(host.is_file(log.trim_start_matches('/')), "{log}");
    let error = record["error"].as_str().unwrap();

    let run = status(&host, &[]);
    run.assert_code(1);
    assert_eq!(first_line(&run), "status: failed");
    assert!(run.out().contains("\npackage pkg: failed\n"), "{run:?}");
    let expected = format!(
        "\nerrors:\n  pkg 1.0.0 apply: {step}: exit code 3\n    error: {error}\n    log: {log}\n    \
         record: /var/lib/skyhook/sk1/results/pkg/1.0.0/apply.json\n    last output:\n"
    );
    assert!(
        run.out().contains(&expected),
        "expected the output to hold\n{expected}\n{run:?}"
    );

    let v = json(&status(&host, &["--format", "json"]));
    assert_eq!(v["status"], "failed");
    let e = &v["errors"][0];
    assert_eq!(e["package"], "pkg");
    assert_eq!(e["mode"], "apply");
    assert_eq!(e["step"], step);
    assert_eq!(e["exit_code"], 3);
    assert_eq!(e["log"], log);
    assert_eq!(v["errors"].as_array().unwrap().len(), 1, "{v:#}");

    // The step runs again and succeeds: the error is gone.
    host.stage("apply").assert_success();
    let run = status(&host, &[]);
    run.assert_success();
    assert_eq!(first_line(&run), "status: done");
}

/// SPEC §1.5: status shows the last lines of a failed step's output, from the results record,
/// as `systemctl status` shows the journal's; the JSON carries the same lines.
#[test]
fn a_failed_step_shows_the_last_ten_lines_of_its_output() {
    let host = FakeHost::new();
    let noisy = "#!/bin/sh\nfor i in $(seq 1 12); do echo \"line $i\"; done\n\
                 printf 'crlf\\r\\n'\nprintf 'no newline at the end'\nexit 5\n";
    host.install(
        &Package::new()
            .step("apply", Step::new("s1.sh").on_host(false).script(noisy))
            .step("apply-check", Step::new("s1_check.sh").on_host(false)),
    );
    host.stage("apply").assert_code(1);
    let run = status(&host, &[]);
    run.assert_code(1);
    let shown: Vec<String> = (5..=12)
        .map(|i| format!("line {i}"))
        .chain(["crlf".to_owned(), "no newline at the end".to_owned()])
        .collect();
    let mut expected = String::from("    last output:\n");
    for line in &shown {
        expected.push_str("      ");
        expected.push_str(line);
        expected.push('\n');
    }
    assert!(
        run.out().ends_with(&expected),
        "expected the output to end with\n{expected}\n{run:?}"
    );
    let v = json(&status(&host, &["--format", "json"]));
    assert_eq!(
        v["errors"][0]["last_output"],
        serde_json::json!(shown),
        "{v:#}"
    );
    assert_eq!(v["errors"][0]["exit_code"], 5, "{v:#}");
}

/// A run ended by a termination signal failed nothing: `stopped`, exit 0, not an error.
#[test]
fn a_run_stopped_by_a_signal_is_stopped_not_an_error() {
    let host = FakeHost::new();
    host.install_held_apply("exit 0");
    let stopped = host.stop_held_apply(host.agent());
    stopped.assert_code(1);
    stopped.assert_stderr_contains(crate::util::STOPPED);
    let run = status(&host, &[]);
    run.assert_success();
    assert_eq!(first_line(&run), "status: stopped", "{run:?}");
    run.assert_stdout_contains(
        "\npackage pkg: stopped (the last apply was stopped by a termination signal at 20",
    );
    run.assert_stdout_contains("; what it completed is kept and the next run resumes)\n");
    assert!(!run.out().contains("errors:"), "{run:?}");
    let v = json(&status(&host, &["--format", "json"]));
    assert_eq!(v["status"], "stopped");
    assert_eq!(v["states"][0]["packages"][0]["status"], "stopped");
    assert_eq!(v["errors"], Value::Array(Vec::new()), "{v:#}");

    // The next run resumes and finishes: done.
    host.stage("apply").assert_success();
    assert_eq!(first_line(&status(&host, &[])), "status: done");
}

/// A failure the loop guard decided (SPEC §9.6), then `agent reset` of its operation: the
/// failure still shows, but as `reset` (not run since), no longer as the loop guard refusing;
/// the next run settles it.
#[test]
fn a_failure_reset_since_reads_reset_until_the_next_run() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.write_reboot_requested(3);
    host.interrupt(&crate::util::interrupt_data(crate::util::NODE_RESTART))
        .run()
        .assert_code(1)
        .assert_stderr_contains("reboot requested 3 times but the host never restarted");
    let refused = status(&host, &[]);
    refused.assert_code(1);
    assert_eq!(first_line(&refused), "status: error", "{refused:?}");

    reset(
        &host,
        &[
            "--interrupt",
            "abc_pkg_1.0.0",
            "--operation",
            "node_restart_0",
        ],
    );
    let run = status(&host, &[]);
    run.assert_code(1);
    assert_eq!(first_line(&run), "status: reset", "{run:?}");
    run.assert_stdout_contains(
        "\npackage pkg: reset (the last interrupt failed; agent reset at 20",
    );
    run.assert_stdout_contains(" since, and it has not run since)\n");
    run.assert_stdout_contains(
        "\nerrors:\n  pkg 1.0.0 interrupt: interrupt node_restart: reboot requested 3 times but \
         the host never restarted",
    );
    run.assert_stdout_contains("\n    reset: agent reset at 20");
    assert!(
        !run.out().contains("the loop guard refuses another reboot"),
        "{run:?}"
    );
    let v = json(&status(&host, &["--format", "json"]));
    assert_eq!(v["status"], "reset");
    assert!(v["errors"][0]["reset_at"].is_string(), "{v:#}");

    // The next run asks for the reboot again: the reset is behind it.
    host.set_fake_tool("reboot", "kill -TERM $PPID\nsleep 5");
    host.interrupt(&crate::util::interrupt_data(crate::util::NODE_RESTART))
        .env("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "1")
        .run()
        .assert_code(1);
    let run = status(&host, &[]);
    run.assert_success();
    assert_eq!(first_line(&run), "status: reboot-pending", "{run:?}");
}

/// A failed stage reset since reads `reset` too; a successful run ends it.
#[test]
fn a_failed_stage_reset_since_reads_reset_and_a_success_ends_it() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.run("apply", &[("FAIL_STEPS", "s2.sh")]).assert_code(1);
    assert_eq!(first_line(&status(&host, &[])), "status: failed");
    reset(&host, &[crate::util::COPY_DIR, "--stage", "apply"]);
    let run = status(&host, &[]);
    run.assert_code(1);
    assert_eq!(first_line(&run), "status: reset", "{run:?}");
    run.assert_stdout_contains("\npackage pkg: reset (the last apply failed; agent reset at ");
    host.stage("apply").assert_success();
    assert_eq!(first_line(&status(&host, &[])), "status: done");
}

#[test]
fn a_history_that_cannot_be_read_is_an_error_not_none_recorded() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply").assert_success();
    host.write(HISTORY, "{not json");
    let before = host.snapshot();
    let run = status(&host, &[]);
    run.assert_code(1);
    assert_eq!(first_line(&run), "status: error");
    assert!(!run.out().contains("(none recorded)"), "{run:?}");
    run.assert_stdout_contains("  current version: unknown (the history file is corrupt: ");
    run.assert_stdout_contains("\nerrors:\n  pkg: history: the history file is corrupt: ");
    before.assert_unchanged(&host.snapshot(), "status");

    // Not a file at all: the read fails, and says why.
    std::fs::remove_file(host.path(HISTORY)).unwrap();
    host.mkdir(HISTORY);
    let run = status(&host, &[]);
    run.assert_code(1);
    assert!(!run.out().contains("(none recorded)"), "{run:?}");
    run.assert_stdout_contains("current version: unknown (the history file cannot be read: ");
}

#[test]
fn an_unreadable_interrupt_marker_is_an_error_not_a_promise_to_redo_it() {
    let host = FakeHost::new();
    host.mkdir(&format!("{INTERRUPT_FLAGS}/node_restart_0.complete"));
    let run = status(&host, &[]);
    run.assert_code(1);
    assert_eq!(first_line(&run), "status: error");
    assert!(
        !run.out().contains("the next run does the operation again"),
        "{run:?}"
    );
    run.assert_stdout_contains(
        "  interrupts of abc_pkg_1.0.0: error\n    node_restart_0 unreadable: the completion \
         marker cannot be read: ",
    );
    run.assert_stdout_contains("\nerrors:\n  abc_pkg_1.0.0 interrupt: node_restart_0: ");
}

#[test]
fn a_pending_reboot_reads_in_words_with_its_attempts() {
    let host = FakeHost::new();
    host.write_pending_reboot(1);
    let run = status(&host, &[]);
    run.assert_success();
    assert_eq!(first_line(&run), "status: reboot-pending");
    run.assert_stdout_contains(
        "\npackage pkg: reboot-pending\n  current version: (none recorded)\n  interrupts of \
         abc_pkg_1.0.0: reboot-pending\n    node_restart_0 pending: reboot requested in boot \
         11111111…, waiting for a new boot (attempts 1 of 3)\n",
    );
    let v = json(&status(&host, &["--format", "json"]));
    let op = &v["states"][0]["packages"][0]["interrupts"][0]["operations"][0];
    assert_eq!(op["pending_boot_id"], BOOT_ID, "the full boot ID in JSON");
    assert_eq!(op["attempts"], 1);
    assert_eq!(v["states"][0]["reboot_max_attempts"], 3);

    // The loop guard's limit reached: the next run refuses, so this is an error.
    host.write(
        &format!("{INTERRUPT_FLAGS}/node_restart_0.attempts"),
        format!("boot-id:{BOOT_ID}\nattempts:3\n"),
    );
    let run = status(&host, &[]);
    run.assert_code(1);
    assert_eq!(first_line(&run), "status: error");
    run.assert_stdout_contains(
        "    node_restart_0 pending: reboot requested in boot 11111111…, waiting for a new boot \
         (attempts 3 of 3): the loop guard refuses another reboot in this boot\n",
    );
    // A higher limit leaves room for another attempt.
    let run = host
        .agent()
        .env("SKYHOOK_REBOOT_MAX_ATTEMPTS", "5")
        .args(["status", &host.root_str()])
        .run();
    run.assert_success();
    run.assert_stdout_contains("(attempts 3 of 5)\n");

    // Booted since: the next run marks it complete.
    host.write(
        &format!("{INTERRUPT_FLAGS}/node_restart_0.pending"),
        "boot-id:3f9c2d1e-0000-4000-8000-000000000000\n",
    );
    let run = status(&host, &[]);
    run.assert_success();
    run.assert_stdout_contains(
        "    node_restart_0 pending: reboot requested in boot 3f9c2d1e…; the host has booted \
         since (now boot 11111111…): the next interrupt run marks it complete\n",
    );
}

#[test]
fn a_running_stage_shows_the_lock_holder() {
    let host = FakeHost::new();
    let slow = "#!/bin/sh\ntouch \"@TMP@/pkg.started\"\nsleep 3\n";
    host.install(
        &Package::new()
            .step("apply", Step::new("s1.sh").on_host(false).script(slow))
            .step("apply-check", Step::new("s1_check.sh").on_host(false)),
    );
    let agent = host.stage_cmd("apply").spawn();
    let pid = agent.pid();
    host.wait_for("var/tmp/pkg.started", Duration::from_secs(20));
    let run = status(&host, &[]);
    let finished = agent.wait();
    finished.assert_success();
    run.assert_success();
    assert_eq!(first_line(&run), "status: running", "{run:?}");
    run.assert_stdout_contains(&format!(
        "\npackage pkg: running (lock held by pid {pid} since 20"
    ));
    // Once the stage is over the lock is free.
    let run = status(&host, &[]);
    run.assert_success();
    assert_eq!(first_line(&run), "status: done");
}

/// SPEC §8.12: the record says `running` from the start of a run. An apply-check killed
/// outright (SIGKILL: no final record) after a successful one is an error, never `done`.
#[test]
fn a_check_stage_killed_outright_is_an_error_not_the_previous_success() {
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    let held = "#!/bin/sh\nif [ -e \"@TMP@/hold\" ]; then touch \"@TMP@/started\"; sleep 60; fi\n";
    host.install(
        &Package::new()
            .step("apply", Step::new("s1.sh").on_host(false))
            .step(
                "apply-check",
                Step::new("s1_check.sh").on_host(false).script(held),
            ),
    );
    host.stage("apply").assert_success();
    host.stage("apply-check").assert_success();
    assert_eq!(first_line(&status(&host, &[])), "status: done");

    host.write("var/tmp/hold", "");
    let agent = host
        .tagged_agent()
        .args(["apply-check", &host.root_str(), crate::util::COPY_DIR])
        .spawn();
    host.wait_for("var/tmp/started", Duration::from_secs(20));
    let running = status(&host, &[]);
    running.assert_success();
    assert_eq!(first_line(&running), "status: running", "{running:?}");
    assert!(!running.out().contains("errors:"), "{running:?}");
    let record: Value =
        serde_json::from_slice(&host.read(&format!("{STATE}/results/pkg/1.0.0/apply-check.json")))
            .unwrap();
    assert_eq!(record["result"], "running", "{record:#}");

    agent.kill_hard(&host);
    let after = status(&host, &[]);
    after.assert_code(1);
    assert_eq!(first_line(&after), "status: error", "{after:?}");
    after.assert_stdout_contains(
        "\nerrors:\n  pkg 1.0.0 apply-check: the last apply-check ended without recording its result",
    );
    let v = json(&status(&host, &["--format", "json"]));
    assert_eq!(v["states"][0]["packages"][0]["status"], "error", "{v:#}");
}

#[test]
fn without_skyhook_root_dir_it_finds_the_operators_layout() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply").assert_success();
    let run = host
        .agent()
        .env_remove("SKYHOOK_ROOT_DIR")
        .env_remove("SKYHOOK_LOG_DIR")
        .args(["status", &host.root_str()])
        .run();
    run.assert_success();
    assert_eq!(
        run.out().lines().take(2).collect::<Vec<_>>(),
        [
            "status: done",
            "state: /var/lib/skyhook/sk1 (logs: /var/log/skyhook/sk1; found on the host)"
        ],
        "{run:?}"
    );
    run.assert_stdout_contains("\npackage pkg: done\n");

    // --state-dir overrides both the environment and the search.
    let run = status(&host, &["--state-dir", "/elsewhere"]);
    run.assert_success();
    assert_eq!(first_line(&run), "status: not-started");
    run.assert_stdout_contains("no package state found under /elsewhere");
}

#[test]
fn usage_errors_exit_2() {
    let host = FakeHost::new();
    host.agent().args(["status"]).run().assert_code(2);
    status(&host, &["--format", "yaml"]).assert_code(2);
    status(&host, &["--json", "--format", "text"]).assert_code(2);
    status(&host, &["--state-dir", "/.."]).assert_code(2);
}
