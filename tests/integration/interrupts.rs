//! SPEC §9 and §10: `agent interrupt ROOT COPY_DIR DATA` against a fake host root — decoding,
//! the built-in kinds, per-operation markers and resume, the after-reboot boot-ID protocol and
//! its loop guard, logs, the results record, signals, and the `interrupts` subcommands.
//!
//! The fake `reboot`, `systemctl` and `service` in `<ROOT>/usr/bin` record their argv in
//! `<ROOT>/var/tmp/calls.log`; tests that need another behaviour replace them.

use std::time::Duration;

use serde_json::Value;

// The built-in kinds, for the decoder tests that call the library directly.
#[allow(unused_imports)]
use ::interrupts as _;

use crate::util::{
    BOOT_ID, BOOT_ID_FILE, Banner, COPY_DIR, FLAGS, FakeHost, HISTORY, INTERRUPT_FLAGS,
    INTERRUPT_LOGS, NODE_RESTART, PKG_DIR, REBOOT_SHUTS_DOWN, Run,
    SHUTDOWN_IN_PROGRESS as SHUTDOWN, START, STATE, STOPPED, assert_recent, b64, eventually,
    interrupt_data, interrupt_marker, parse_log_name, parse_rfc3339_nano_utc, signal_pid,
};

const RID: &str = "abc_pkg_1.0.0";
const TWO_SERVICES: &str = r#"{"type":"service_restart","services":["containerd","kubelet"]}"#;
const MALFORMED: &str = r#"serialized interrupt must be base64-encoded JSON with a "type" field: "#;
const KNOWN_TYPES: &str =
    "no_op, node_restart, restart_all_services, script_interrupt, service_restart";
const RESULTS: &str = "var/lib/skyhook/sk1/results/pkg/1.0.0/interrupt.json";

/// A fake `systemctl` that also prints what it was asked to do.
const SYSTEMCTL_ECHOES: &str = r#"echo "fake systemctl $*""#;
/// Like [`SYSTEMCTL_ECHOES`], but `systemctl restart kubelet` fails with exit code 1.
const SYSTEMCTL_FAILS_KUBELET: &str = r#"if [ "$*" = "restart kubelet" ]; then
  echo "fake systemctl: failing kubelet" >&2
  exit 1
fi
echo "fake systemctl $*""#;
/// A fake `reboot` that publishes its pid in `/var/tmp/reboot.pid`, then hangs.
const REBOOT_HANGS: &str =
    "echo $$ > /var/tmp/reboot.tmp\nmv /var/tmp/reboot.tmp /var/tmp/reboot.pid\nexec sleep 30";
const REBOOT_PID: &str = "var/tmp/reboot.pid";

/// A fake host with the (empty) package directory the operator would have copied.
/// `agent interrupt ROOT COPY_DIR base64(json)`.
fn interrupt(host: &FakeHost, json: &str) -> Run {
    host.interrupt(&interrupt_data(json)).run()
}

/// The banner of `agent interrupt` for `data` under the base environment.
fn banner(host: &FakeHost, data: &str) -> String {
    let mut b = Banner::new("interrupt", host);
    b.interrupt_data = Some(data.to_owned());
    b.render()
}

/// stdout after the banner of `agent interrupt ... base64(json)`, as text.
fn after_banner(host: &FakeHost, run: &Run, json: &str) -> String {
    String::from_utf8_lossy(run.after_banner(&banner(host, &interrupt_data(json)))).into_owned()
}

fn skipping(op: &str) -> String {
    format!("Skipping interrupt {op} because it was already run for {RID}\n")
}

/// Assert `<marker>` holds a UTC RFC 3339 timestamp with nanoseconds, written just now.
#[track_caller]
fn assert_timestamp_marker(host: &FakeHost, name: &str) {
    let content = host.read_string(&interrupt_marker(name));
    let t = parse_rfc3339_nano_utc(&content)
        .unwrap_or_else(|| panic!("{name}: {content:?} is not a UTC RFC3339Nano timestamp"));
    assert_recent(t, name);
}

/// A run that reboots ends with the host going down (SPEC §9.4); every other kind exits 0.
#[track_caller]
fn assert_ended_as_its_kind_ends(run: &Run, calls: &[&str]) {
    if calls == ["reboot"] {
        run.assert_killed_by_the_shutdown();
    } else {
        run.assert_success();
    }
}

/// Wait for the hanging fake reboot to publish its pid.
fn reboot_pid(host: &FakeHost) -> u32 {
    host.wait_for(REBOOT_PID, Duration::from_secs(20));
    host.read_string(REBOOT_PID)
        .trim()
        .parse()
        .expect("reboot pid")
}

// ---------------------------------------------------------------------------------------------
// §9.1: the operator's payloads
// ---------------------------------------------------------------------------------------------

#[test]
fn operator_payloads_decode_and_run() {
    require_root!();
    for (json, calls) in [
        (NODE_RESTART, &["reboot"][..]),
        (
            TWO_SERVICES,
            &[
                "systemctl daemon-reload",
                "systemctl restart containerd",
                "systemctl restart kubelet",
            ][..],
        ),
        (r#"{"type":"no_op"}"#, &[][..]),
        (
            r#"{"type":"restart_all_services"}"#,
            &["service procps force-reload"][..],
        ),
        (r#"{"type":"script_interrupt"}"#, &[][..]),
    ] {
        let host = FakeHost::with_package_dir();
        host.set_fake_tool("reboot", REBOOT_SHUTS_DOWN);
        let run = interrupt(&host, json);
        assert_ended_as_its_kind_ends(&run, calls);
        run.after_banner(&banner(&host, &interrupt_data(json)));
        assert_eq!(host.calls(), calls, "{json}\n{run:?}");
    }
}

#[test]
fn python_agent_spaced_payloads_decode_and_run() {
    require_root!();
    // The exact INTERRUPT_DATA of the Python agent's transcripts 15, 17 and 20.
    for (data, calls) in [
        (
            "eyJ0eXBlIjogInNlcnZpY2VfcmVzdGFydCIsICJzZXJ2aWNlcyI6IFsiY29udGFpbmVyZCIsICJrdWJlbGV0Il19",
            &[
                "systemctl daemon-reload",
                "systemctl restart containerd",
                "systemctl restart kubelet",
            ][..],
        ),
        ("eyJ0eXBlIjogIm5vZGVfcmVzdGFydCJ9", &["reboot"][..]),
        ("eyJ0eXBlIjogIm5vX29wIn0=", &[][..]),
        (
            "eyJ0eXBlIjogInJlc3RhcnRfYWxsX3NlcnZpY2VzIn0=",
            &["service procps force-reload"][..],
        ),
        ("eyJ0eXBlIjogInNjcmlwdF9pbnRlcnJ1cHQifQ==", &[][..]),
    ] {
        let host = FakeHost::with_package_dir();
        host.set_fake_tool("reboot", REBOOT_SHUTS_DOWN);
        let run = host.interrupt(data).run();
        assert_ended_as_its_kind_ends(&run, calls);
        run.after_banner(&banner(&host, data));
        assert_eq!(host.calls(), calls, "{data}\n{run:?}");
    }
}

#[test]
fn banner_shows_mode_interrupt_and_the_data() {
    require_root!();
    let host = FakeHost::with_package_dir();
    let data = interrupt_data(TWO_SERVICES);
    let run = host.interrupt(&data).run();
    run.assert_success();
    let out = run.out();
    assert!(out.contains("\nmode: interrupt\n"), "{run:?}");
    assert!(
        out.contains(&format!("\ninterrupt_data: {data}\n")),
        "{run:?}"
    );
    run.after_banner(&banner(&host, &data));
}

// ---------------------------------------------------------------------------------------------
// §9.3: service_restart, markers and resume
// ---------------------------------------------------------------------------------------------

#[test]
fn service_restart_echoes_each_command_before_it_runs() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool("systemctl", SYSTEMCTL_ECHOES);
    let run = interrupt(&host, TWO_SERVICES);
    run.assert_success();
    assert_eq!(
        after_banner(&host, &run, TWO_SERVICES),
        "systemctl daemon-reload\n\
         fake systemctl daemon-reload\n\
         systemctl restart containerd\n\
         fake systemctl restart containerd\n\
         systemctl restart kubelet\n\
         fake systemctl restart kubelet\n"
    );
    assert_eq!(
        host.calls(),
        [
            "systemctl daemon-reload",
            "systemctl restart containerd",
            "systemctl restart kubelet"
        ]
    );
}

#[test]
fn service_restart_marks_each_operation_with_an_rfc3339_timestamp() {
    require_root!();
    let host = FakeHost::with_package_dir();
    interrupt(&host, TWO_SERVICES).assert_success();
    assert_eq!(
        host.list(INTERRUPT_FLAGS),
        [
            "service_restart_0.complete",
            "service_restart_1.complete",
            "service_restart_2.complete"
        ]
    );
    for i in 0..3 {
        assert_timestamp_marker(&host, &format!("service_restart_{i}.complete"));
    }
}

#[test]
fn service_restart_rerun_skips_every_operation_and_runs_nothing() {
    require_root!();
    let host = FakeHost::with_package_dir();
    interrupt(&host, TWO_SERVICES).assert_success();
    let before = host.snapshot();
    let run = interrupt(&host, TWO_SERVICES);
    run.assert_success();
    assert_eq!(
        after_banner(&host, &run, TWO_SERVICES),
        format!(
            "{}{}{}",
            skipping("service_restart_0"),
            skipping("service_restart_1"),
            skipping("service_restart_2")
        )
    );
    assert_eq!(
        host.calls().len(),
        3,
        "nothing ran again: {:?}",
        host.calls()
    );
    let after = host.snapshot();
    let changed: Vec<String> = before
        .diff(&after)
        .into_iter()
        .filter(|d| d.contains("interrupts/flags"))
        .collect();
    assert!(changed.is_empty(), "markers changed: {changed:?}");
}

#[test]
fn service_restart_without_services_only_reloads_the_daemon() {
    require_root!();
    for json in [
        r#"{"type":"service_restart"}"#,
        r#"{"type":"service_restart","services":[]}"#,
        r#"{"type":"service_restart","services":null}"#,
    ] {
        let host = FakeHost::with_package_dir();
        let run = interrupt(&host, json);
        run.assert_success();
        assert_eq!(host.calls(), ["systemctl daemon-reload"], "{json}\n{run:?}");
        assert_eq!(
            host.list(INTERRUPT_FLAGS),
            ["service_restart_0.complete"],
            "{json}"
        );
    }
}

#[test]
fn failed_operation_exits_1_naming_the_command_and_keeps_earlier_markers() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool("systemctl", SYSTEMCTL_FAILS_KUBELET);
    let run = interrupt(&host, TWO_SERVICES);
    run.assert_code(1);
    run.assert_stderr_line_contains(&["systemctl restart kubelet", "exit code 1"]);
    run.assert_stderr_contains("fake systemctl: failing kubelet");
    assert_eq!(
        host.list(INTERRUPT_FLAGS),
        ["service_restart_0.complete", "service_restart_1.complete"]
    );
}

#[test]
fn rerun_after_a_failure_resumes_at_the_failed_operation() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool("systemctl", SYSTEMCTL_FAILS_KUBELET);
    interrupt(&host, TWO_SERVICES).assert_code(1);
    host.set_fake_tool("systemctl", SYSTEMCTL_ECHOES);
    let run = interrupt(&host, TWO_SERVICES);
    run.assert_success();
    assert_eq!(
        after_banner(&host, &run, TWO_SERVICES),
        format!(
            "{}{}systemctl restart kubelet\nfake systemctl restart kubelet\n",
            skipping("service_restart_0"),
            skipping("service_restart_1")
        )
    );
    assert_eq!(
        host.calls(),
        [
            "systemctl daemon-reload",
            "systemctl restart containerd",
            "systemctl restart kubelet",
            "systemctl restart kubelet"
        ]
    );
    assert_timestamp_marker(&host, "service_restart_2.complete");
}

#[test]
fn python_agent_markers_are_honored() {
    require_root!();
    let host = FakeHost::with_package_dir();
    // Transcript 15: the Python agent wrote `time.time()` without a newline.
    host.write(
        &interrupt_marker("service_restart_0.complete"),
        "1796034510.8656268",
    );
    host.write(
        &interrupt_marker("service_restart_1.complete"),
        "1796034510.9216585",
    );
    let run = interrupt(&host, TWO_SERVICES);
    run.assert_success();
    assert_eq!(host.calls(), ["systemctl restart kubelet"]);
    assert!(
        after_banner(&host, &run, TWO_SERVICES).starts_with(&format!(
            "{}{}systemctl restart kubelet\n",
            skipping("service_restart_0"),
            skipping("service_restart_1")
        )),
        "{run:?}"
    );
    assert_eq!(
        host.read_string(&interrupt_marker("service_restart_0.complete")),
        "1796034510.8656268",
        "an existing marker is left as it is"
    );
}

#[test]
fn go_agent_markers_are_honored() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.write(
        &interrupt_marker("service_restart_0.complete"),
        "2026-11-30T10:28:30.914348123Z",
    );
    host.write(
        &interrupt_marker("restart_all_services_0.complete"),
        "2026-11-30T10:28:31Z",
    );
    interrupt(
        &host,
        r#"{"type":"service_restart","services":["kubelet"]}"#,
    )
    .assert_success();
    interrupt(&host, r#"{"type":"restart_all_services"}"#).assert_success();
    assert_eq!(host.calls(), ["systemctl restart kubelet"]);
}

#[test]
fn an_empty_completion_marker_does_not_count_as_done() {
    require_root!();
    let host = FakeHost::with_package_dir();
    // SPEC §5: an empty state file means "unknown"; the safe action is to run again.
    host.write(&interrupt_marker("restart_all_services_0.complete"), "");
    let run = interrupt(&host, r#"{"type":"restart_all_services"}"#);
    run.assert_success();
    assert_eq!(host.calls(), ["service procps force-reload"]);
    assert_timestamp_marker(&host, "restart_all_services_0.complete");
}

// ---------------------------------------------------------------------------------------------
// §9.1: the other built-in kinds
// ---------------------------------------------------------------------------------------------

#[test]
fn restart_all_services_reloads_procps() {
    require_root!();
    let host = FakeHost::with_package_dir();
    let json = r#"{"type":"restart_all_services"}"#;
    let run = interrupt(&host, json);
    run.assert_success();
    assert_eq!(
        after_banner(&host, &run, json),
        "service procps force-reload\n"
    );
    assert_eq!(host.calls(), ["service procps force-reload"]);
    assert_eq!(
        host.list(INTERRUPT_FLAGS),
        ["restart_all_services_0.complete"]
    );
    assert_timestamp_marker(&host, "restart_all_services_0.complete");
}

#[test]
fn no_op_writes_its_unindexed_marker_and_runs_nothing() {
    require_root!();
    let host = FakeHost::with_package_dir();
    let json = r#"{"type":"no_op"}"#;
    let run = interrupt(&host, json);
    run.assert_success();
    assert_eq!(after_banner(&host, &run, json), "");
    assert!(host.calls().is_empty(), "{:?}", host.calls());
    assert_eq!(host.list(INTERRUPT_FLAGS), ["no_op.complete"]);
    assert_timestamp_marker(&host, "no_op.complete");
    // A second no_op just rewrites its marker (transcript 20).
    interrupt(&host, json).assert_success();
    assert_eq!(host.list(INTERRUPT_FLAGS), ["no_op.complete"]);
}

#[test]
fn script_interrupt_runs_nothing_and_writes_no_marker() {
    require_root!();
    let host = FakeHost::with_package_dir();
    let json = r#"{"type":"script_interrupt"}"#;
    let run = interrupt(&host, json);
    run.assert_success();
    assert_eq!(after_banner(&host, &run, json), "");
    assert!(host.calls().is_empty(), "{:?}", host.calls());
    assert!(host.files_under(INTERRUPT_FLAGS).is_empty());
}

#[test]
fn commands_run_chrooted_into_root_with_cwd_copy_dir() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool("service", "pwd > /var/tmp/cwd");
    interrupt(&host, r#"{"type":"restart_all_services"}"#).assert_success();
    assert_eq!(host.read_string("var/tmp/cwd"), format!("{COPY_DIR}\n"));
}

// ---------------------------------------------------------------------------------------------
// §9.4, §9.6: node_restart and the boot-ID protocol
// ---------------------------------------------------------------------------------------------

#[test]
fn a_reboot_that_takes_the_host_down_keeps_the_agent_until_it_is_killed() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool("reboot", REBOOT_SHUTS_DOWN);
    let run = interrupt(&host, NODE_RESTART);
    // Never exit 0 before the host is down: the operator's interrupt Job would complete.
    run.assert_killed_by_the_shutdown();
    assert!(
        after_banner(&host, &run, NODE_RESTART).starts_with("reboot\n"),
        "the command is echoed before it runs\n{run:?}"
    );
    assert_eq!(host.calls(), ["reboot"]);
    assert_eq!(
        host.read_string(&interrupt_marker("node_restart_0.pending")),
        format!("boot-id:{BOOT_ID}\n")
    );
    assert!(!host.exists(&interrupt_marker("node_restart_0.complete")));
}

#[test]
fn a_reboot_killed_by_sigterm_while_the_agent_is_not_signalled_fails_after_ten_seconds() {
    require_root!();
    let host = FakeHost::with_package_dir();
    // The command dies as a shutdown kills it, but no shutdown reaches the agent.
    host.set_fake_tool("reboot", "kill -TERM $$\nsleep 5");
    let run = interrupt(&host, NODE_RESTART);
    assert_host_stayed_up(&host, &run);
    assert!(!run.out().contains(SHUTDOWN), "{run:?}");
}

/// The run failed after waiting 10 s for a shutdown that never came, keeping the pending
/// marker for the next run.
#[track_caller]
fn assert_host_stayed_up(host: &FakeHost, run: &Run) {
    run.assert_code(1);
    run.assert_stderr_contains("reboot was enqueued but the host did not restart within 10s");
    assert!(
        run.elapsed >= Duration::from_secs(10),
        "waited {:?}",
        run.elapsed
    );
    assert_eq!(host.calls(), ["reboot"]);
    assert_eq!(
        host.read_string(&interrupt_marker("node_restart_0.pending")),
        format!("boot-id:{BOOT_ID}\n"),
        "the pending marker is kept for the next run"
    );
    assert!(!host.exists(&interrupt_marker("node_restart_0.complete")));
}

#[test]
fn reboot_exiting_zero_without_a_shutdown_fails_after_ten_seconds() {
    require_root!();
    let host = FakeHost::with_package_dir();
    // The default fake reboot exits 0 and nothing stops the agent.
    let run = interrupt(&host, NODE_RESTART);
    assert_host_stayed_up(&host, &run);
}

#[test]
fn failing_reboot_exits_1_naming_the_command_and_exit_code() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool("reboot", "echo \"fake reboot: failing\" >&2\nexit 1");
    let run = interrupt(&host, NODE_RESTART);
    run.assert_code(1);
    run.assert_stderr_line_contains(&["reboot", "exit code 1"]);
    assert_eq!(host.calls(), ["reboot"]);
    assert!(!host.exists(&interrupt_marker("node_restart_0.complete")));
}

#[test]
fn sigterm_to_the_agent_during_reboot_is_the_shutdown_it_asked_for() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool("reboot", REBOOT_HANGS);
    let mut agent = host
        .interrupt(&interrupt_data(NODE_RESTART))
        .env("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "30")
        .spawn();
    let pid = reboot_pid(&host);
    agent.signal("TERM");
    // The shutdown's signal: the agent stops the command, then waits for the host to go down.
    assert!(
        !agent.exited_before(std::time::Instant::now() + Duration::from_secs(2)),
        "the agent exited before the host went down"
    );
    // A second signal (a person insisting) ends the wait: exit 1, never 0.
    agent.signal("TERM");
    let run = agent.wait();
    signal_pid(pid, "KILL");
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    run.assert_stdout_contains(&format!("{SHUTDOWN}\n"));
    assert_eq!(
        host.read_string(&interrupt_marker("node_restart_0.pending")),
        format!("boot-id:{BOOT_ID}\n")
    );
    assert!(!host.exists(&interrupt_marker("node_restart_0.complete")));
}

#[test]
fn reboot_that_terminates_the_agent_is_the_shutdown() {
    require_root!();
    let host = FakeHost::with_package_dir();
    // Transcript 18's fake reboot: SIGTERM to its parent, as a shutdown would. The host then
    // stays up: after the stop grace the agent gives up waiting, with exit 1, never 0.
    host.set_fake_tool("reboot", "kill -TERM $PPID\nsleep 5");
    let run = host
        .interrupt(&interrupt_data(NODE_RESTART))
        .env("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "2")
        .run();
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    run.assert_stderr_line_contains(&["level=warn", "the host did not go down"]);
    assert!(run.elapsed >= Duration::from_secs(2), "{:?}", run.elapsed);
    run.assert_stdout_contains(&format!("{SHUTDOWN}\n"));
    assert_eq!(host.calls(), ["reboot"]);
    assert_eq!(
        host.read_string(&interrupt_marker("node_restart_0.pending")),
        format!("boot-id:{BOOT_ID}\n")
    );
    assert!(!host.exists(&interrupt_marker("node_restart_0.complete")));
}

#[test]
fn sigterm_to_the_agent_while_it_waits_for_the_shutdown_is_the_shutdown() {
    require_root!();
    let host = FakeHost::with_package_dir();
    // The default fake reboot exits 0: the agent then waits for the shutdown to stop it.
    let mut agent = host.interrupt(&interrupt_data(NODE_RESTART)).spawn();
    assert!(
        eventually(Duration::from_secs(20), || host.calls() == ["reboot"]),
        "reboot did not run"
    );
    std::thread::sleep(Duration::from_millis(300));
    agent.signal("TERM");
    // The shutdown reached it: it waits for the host to go down, past the 10 s wait too.
    assert!(
        !agent.exited_before(std::time::Instant::now() + Duration::from_secs(11)),
        "the agent exited before the host went down"
    );
    agent.signal("KILL");
    let run = agent.wait();
    run.assert_killed_by_the_shutdown();
    assert!(host.is_file(&interrupt_marker("node_restart_0.pending")));
    assert!(!host.exists(&interrupt_marker("node_restart_0.complete")));
}

#[test]
fn reboot_survives_kill_9_and_completes_once_the_boot_id_changes() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool("reboot", REBOOT_HANGS);
    let mut agent = host.interrupt(&interrupt_data(NODE_RESTART)).spawn();
    let pid = reboot_pid(&host);
    // Written and synced before the command started.
    assert_eq!(
        host.read_string(&interrupt_marker("node_restart_0.pending")),
        format!("boot-id:{BOOT_ID}\n")
    );
    agent.signal("KILL");
    assert!(eventually(Duration::from_secs(10), || agent.has_exited()));
    signal_pid(pid, "KILL");
    let killed = agent.wait();
    assert_eq!(killed.code(), None, "killed by SIGKILL\n{killed:?}");
    assert_eq!(
        host.read_string(&interrupt_marker("node_restart_0.pending")),
        format!("boot-id:{BOOT_ID}\n"),
        "the pending marker survives the agent being killed"
    );

    // Same boot: the host never restarted, so the reboot is requested again.
    host.set_fake_tool("reboot", REBOOT_SHUTS_DOWN);
    interrupt(&host, NODE_RESTART).assert_killed_by_the_shutdown();
    assert_eq!(host.calls(), ["reboot", "reboot"]);
    assert!(host.is_file(&interrupt_marker("node_restart_0.pending")));
    assert!(!host.exists(&interrupt_marker("node_restart_0.complete")));

    // New boot: complete without rebooting.
    host.set_boot_id("99999999-8888-4777-8666-555555555555");
    let run = interrupt(&host, NODE_RESTART);
    run.assert_success();
    assert_eq!(host.calls(), ["reboot", "reboot"], "no additional reboot");
    assert!(host.is_file(&interrupt_marker("node_restart_0.complete")));
    assert!(!host.exists(&interrupt_marker("node_restart_0.pending")));
    assert!(
        !after_banner(&host, &run, NODE_RESTART).contains("reboot\n"),
        "{run:?}"
    );
    run.assert_stderr_contains("skipping completed interrupt after host reboot");

    // And from then on it is simply complete.
    let again = interrupt(&host, NODE_RESTART);
    again.assert_success();
    assert_eq!(
        after_banner(&host, &again, NODE_RESTART),
        skipping("node_restart_0")
    );
    assert_eq!(host.calls(), ["reboot", "reboot"]);
}

#[test]
fn reboot_loop_guard_stops_after_max_attempts_under_one_boot_id() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool("reboot", REBOOT_SHUTS_DOWN);
    let data = interrupt_data(NODE_RESTART);
    for attempt in 1..=2 {
        let run = host
            .interrupt(&data)
            .env("SKYHOOK_REBOOT_MAX_ATTEMPTS", "2")
            .run();
        run.assert_killed_by_the_shutdown();
        assert_eq!(host.calls().len(), attempt, "{run:?}");
    }
    let run = host
        .interrupt(&data)
        .env("SKYHOOK_REBOOT_MAX_ATTEMPTS", "2")
        .run();
    run.assert_code(1);
    run.assert_stderr_contains("reboot requested 2 times but the host never restarted");
    assert_eq!(host.calls(), ["reboot", "reboot"], "the third run rebooted");
    assert_eq!(
        host.read_string(&interrupt_marker("node_restart_0.pending")),
        format!("boot-id:{BOOT_ID}\n"),
        "the pending marker keeps upstream's format"
    );
}

#[test]
fn missing_boot_id_fails_before_anything_runs() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool("reboot", REBOOT_SHUTS_DOWN);
    std::fs::remove_file(host.path(BOOT_ID_FILE)).unwrap();
    let run = interrupt(&host, NODE_RESTART);
    run.assert_code(1);
    run.assert_stderr_contains("boot ID");
    assert!(host.calls().is_empty(), "{:?}", host.calls());
    assert!(!host.exists(&interrupt_marker("node_restart_0.pending")));
    assert!(!host.exists(&interrupt_marker("node_restart_0.complete")));
}

#[test]
fn empty_boot_id_fails_before_anything_runs() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool("reboot", REBOOT_SHUTS_DOWN);
    host.write(BOOT_ID_FILE, " \n");
    let run = interrupt(&host, NODE_RESTART);
    run.assert_code(1);
    run.assert_stderr_contains("boot ID");
    assert!(host.calls().is_empty(), "{:?}", host.calls());
    assert!(!host.exists(&interrupt_marker("node_restart_0.pending")));
    assert!(!host.exists(&interrupt_marker("node_restart_0.complete")));
}

#[test]
fn malformed_pending_marker_is_replaced_and_reboot_runs() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool("reboot", REBOOT_SHUTS_DOWN);
    host.write(&interrupt_marker("node_restart_0.pending"), "garbage");
    let run = interrupt(&host, NODE_RESTART);
    run.assert_killed_by_the_shutdown();
    run.assert_stderr_contains("malformed pending marker");
    assert_eq!(host.calls(), ["reboot"]);
    assert_eq!(
        host.read_string(&interrupt_marker("node_restart_0.pending")),
        format!("boot-id:{BOOT_ID}\n")
    );
    assert!(!host.exists(&interrupt_marker("node_restart_0.complete")));
}

#[test]
fn pending_marker_of_an_earlier_boot_completes_without_rebooting() {
    require_root!();
    let host = FakeHost::with_package_dir();
    // As the Go agent leaves it when the reboot killed it.
    host.write(
        &interrupt_marker("node_restart_0.pending"),
        "boot-id:00000000-0000-4000-8000-000000000000\n",
    );
    let run = interrupt(&host, NODE_RESTART);
    run.assert_success();
    assert!(host.calls().is_empty(), "{:?}", host.calls());
    assert!(host.is_file(&interrupt_marker("node_restart_0.complete")));
    assert!(!host.exists(&interrupt_marker("node_restart_0.pending")));
}

#[test]
fn completed_node_restart_is_skipped() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.write(
        &interrupt_marker("node_restart_0.complete"),
        "1796034513.5529218",
    );
    let run = interrupt(&host, NODE_RESTART);
    run.assert_success();
    assert_eq!(
        after_banner(&host, &run, NODE_RESTART),
        skipping("node_restart_0")
    );
    assert!(host.calls().is_empty(), "{:?}", host.calls());
}

// ---------------------------------------------------------------------------------------------
// §9.2: decoding
// ---------------------------------------------------------------------------------------------

/// Run `agent interrupt` with `data`, expecting exit 1, an error line containing `needle`,
/// nothing run and nothing under ROOT changed.
#[track_caller]
fn assert_rejected(data: &str, needle: &str) -> Run {
    let host = FakeHost::with_package_dir();
    let before = host.snapshot();
    let run = host.interrupt(data).run();
    run.assert_code(1);
    run.assert_stderr_contains(needle);
    before.assert_unchanged(&host.snapshot(), data);
    assert!(host.calls().is_empty());
    run
}

#[test]
fn malformed_payloads_are_rejected_and_nothing_changes() {
    require_root!();
    for data in [
        "!!! not base64 !!!".to_owned(),
        interrupt_data("{not json"),
        interrupt_data("[1, 2]"),
        interrupt_data(r#"{"services":["kubelet"]}"#),
        interrupt_data(r#"{"type":7}"#),
        interrupt_data(r#"{"type":"service_restart","services":"kubelet"}"#),
    ] {
        let run = assert_rejected(&data, MALFORMED);
        assert!(
            run.err_text()
                .lines()
                .any(|l| l.contains(MALFORMED)
                    && l.len() > l.find(MALFORMED).unwrap() + MALFORMED.len()),
            "the message carries a detail\n{run:?}"
        );
    }
}

#[test]
fn unknown_type_names_every_registered_type() {
    require_root!();
    let run = assert_rejected(&interrupt_data(r#"{"type":"bogus"}"#), "bogus");
    let expected = format!(r#"unknown interrupt "bogus" must be one of: {KNOWN_TYPES}"#);
    assert!(
        run.err_text().lines().any(|l| l.ends_with(&expected)),
        "no stderr line ends with {expected:?}\n{run:?}"
    );
}

#[test]
fn unknown_extra_fields_are_ignored_with_a_warning() {
    require_root!();
    let host = FakeHost::with_package_dir();
    let run = interrupt(
        &host,
        r#"{"type":"service_restart","services":["kubelet"],"drain_first":true}"#,
    );
    run.assert_success();
    run.assert_stderr_line_contains(&["drain_first"]);
    assert_eq!(
        host.calls(),
        ["systemctl daemon-reload", "systemctl restart kubelet"]
    );
}

#[test]
fn option_like_service_names_are_rejected() {
    require_root!();
    let run = assert_rejected(
        &interrupt_data(r#"{"type":"service_restart","services":["kubelet","-H"]}"#),
        r#""-H""#,
    );
    run.assert_stderr_contains("must not start with '-'");
}

#[test]
fn invalid_unit_names_are_rejected() {
    require_root!();
    assert_rejected(
        &interrupt_data(r#"{"type":"service_restart","services":["x;reboot"]}"#),
        "not a valid systemd unit name",
    );
}

#[test]
fn payloads_over_one_mebibyte_are_rejected() {
    // A single argv string is limited to 128 KiB by the kernel (MAX_ARG_STRLEN), so no
    // INTERRUPT_DATA over 1 MiB can reach the binary: the limit is pinned on the decoder the
    // binary uses.
    const MIB: usize = 1 << 20;
    let padded = |len: usize| {
        let head = r#"{"type":"no_op","pad":""#;
        let tail = r#""}"#;
        format!("{head}{}{tail}", "x".repeat(len - head.len() - tail.len()))
    };
    let at_limit = padded(MIB);
    let over = padded(MIB + 1);
    let decoded = <dyn agent_core::Interrupt>::from_json_bytes(at_limit.as_bytes())
        .expect("exactly 1 MiB is accepted");
    assert_eq!(decoded.unknown_fields, ["pad"]);
    assert!(<dyn agent_core::Interrupt>::from_base64(&b64(at_limit.as_bytes())).is_ok());
    for err in [
        <dyn agent_core::Interrupt>::from_json_bytes(over.as_bytes()).unwrap_err(),
        <dyn agent_core::Interrupt>::from_base64(&b64(over.as_bytes())).unwrap_err(),
        <dyn agent_core::Interrupt>::from_base64(&"A".repeat(4 * MIB)).unwrap_err(),
    ] {
        assert!(err.to_string().contains("over the limit of 1 MiB"), "{err}");
    }
}

// ---------------------------------------------------------------------------------------------
// §9.3: logs
// ---------------------------------------------------------------------------------------------

#[test]
fn one_log_per_invocation_holds_the_echoed_commands_and_their_output() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool(
        "systemctl",
        r#"echo "fake systemctl $*"; echo "warn $*" >&2"#,
    );
    let run = interrupt(&host, TWO_SERVICES);
    run.assert_success();
    let names = host.list(INTERRUPT_LOGS);
    assert_eq!(names.len(), 1, "{names:?}");
    let parsed = parse_log_name(&names[0]).unwrap_or_else(|| {
        panic!(
            "{} is not service_restart-YYYY-MM-DD-HHMMSS.nnnnnnnnn.log",
            names[0]
        )
    });
    assert_eq!(parsed.base, "service_restart");
    assert_recent(parsed.time, "log name timestamp");
    let log = host.read_string(&format!("{INTERRUPT_LOGS}/{}", names[0]));
    for line in [
        "systemctl daemon-reload\n",
        "fake systemctl daemon-reload\n",
        "warn daemon-reload\n",
        "systemctl restart containerd\n",
        "fake systemctl restart containerd\n",
        "systemctl restart kubelet\n",
        "fake systemctl restart kubelet\n",
        "warn restart kubelet\n",
    ] {
        assert!(log.contains(line), "log lacks {line:?}:\n{log}");
    }
    let echo = log.find("systemctl restart kubelet\n").unwrap();
    let output = log.find("fake systemctl restart kubelet\n").unwrap();
    assert!(echo < output, "echo before output:\n{log}");
}

#[test]
fn logs_use_the_package_and_version_of_the_resource_id() {
    require_root!();
    let host = FakeHost::with_package_dir();
    let rid = "sk1-uid-3_gpu_driver_2.4.1";
    let run = host
        .interrupt(&interrupt_data(r#"{"type":"restart_all_services"}"#))
        .env("SKYHOOK_RESOURCE_ID", rid)
        .run();
    run.assert_success();
    let dir = "var/log/skyhook/sk1/gpu_driver/2.4.1/interrupts";
    let names = host.list(dir);
    assert_eq!(names.len(), 1, "{names:?}");
    assert_eq!(
        parse_log_name(&names[0]).unwrap().base,
        "restart_all_services"
    );
    assert!(host.is_file(&format!(
        "{STATE}/interrupts/flags/{rid}/restart_all_services_0.complete"
    )));
}

#[test]
fn no_logs_when_write_logs_is_false() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.interrupt(&interrupt_data(TWO_SERVICES))
        .env("SKYHOOK_AGENT_WRITE_LOGS", "false")
        .run()
        .assert_success();
    assert!(!host.exists("var/log"), "{:?}", host.files_under("var"));
    assert_eq!(host.list(INTERRUPT_FLAGS).len(), 3);
}

#[test]
fn a_rerun_that_runs_nothing_writes_no_log() {
    require_root!();
    let host = FakeHost::with_package_dir();
    interrupt(&host, TWO_SERVICES).assert_success();
    interrupt(&host, TWO_SERVICES).assert_success();
    assert_eq!(host.list(INTERRUPT_LOGS).len(), 1);
}

#[test]
fn interrupt_logs_keep_the_five_newest() {
    require_root!();
    let host = FakeHost::with_package_dir();
    let old = [
        "service_restart-2020-01-01-000000.000000000.log",
        "service_restart-2020-01-02-000000.000000000.log",
        "service_restart-2020-01-03-000000.000000000.log",
        "service_restart-2020-01-04-000000.000000000.log",
        "service_restart-2020-01-05-000000.000000000.log",
        // The legacy name format.
        "service_restart-2020-01-06-000000.log",
    ];
    let others = [
        "service_restart-2020-01-01-000000.000000000.log.err",
        "restart_all_services-2020-01-01-000000.000000000.log",
    ];
    for name in old.iter().chain(&others) {
        host.write(&format!("{INTERRUPT_LOGS}/{name}"), "old\n");
    }
    interrupt(&host, TWO_SERVICES).assert_success();
    let names = host.list(INTERRUPT_LOGS);
    let kept: Vec<&String> = names
        .iter()
        .filter(|n| {
            n.starts_with("service_restart-")
                && std::path::Path::new(n.as_str())
                    .extension()
                    .is_some_and(|e| e == "log")
        })
        .collect();
    assert_eq!(kept.len(), 5, "{names:?}");
    for gone in &old[..2] {
        assert!(!names.iter().any(|n| n == gone), "{gone} kept: {names:?}");
    }
    for stays in old[2..].iter().chain(&others) {
        assert!(
            names.iter().any(|n| n == stays),
            "{stays} removed: {names:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// §4, §9.3, §8.12: identity and state
// ---------------------------------------------------------------------------------------------

#[test]
fn resource_id_that_is_not_one_path_component_is_rejected_before_anything_is_written() {
    require_root!();
    let host = FakeHost::with_package_dir();
    let before = host.snapshot();
    let run = host
        .interrupt(&interrupt_data(TWO_SERVICES))
        .env("SKYHOOK_RESOURCE_ID", "a/b_pkg_1.0")
        .run();
    run.assert_code(1);
    run.assert_stderr_line_contains(&["a/b_pkg_1.0", "must be a single path component"]);
    before.assert_unchanged(&host.snapshot(), "rejected resource ID");
    assert!(host.calls().is_empty());
}

#[test]
fn interrupts_write_no_start_history_or_step_markers() {
    require_root!();
    let host = FakeHost::with_package_dir();
    interrupt(&host, TWO_SERVICES).assert_success();
    assert!(!host.exists(START));
    assert!(!host.exists(HISTORY));
    assert!(!host.exists(FLAGS), "{:?}", host.files_under(FLAGS));
    assert!(!host.exists("var/lib/skyhook/sk1/history"));
}

#[test]
fn interrupts_do_not_read_config_json() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.write(&format!("{PKG_DIR}/config.json"), "{ this is not json");
    interrupt(&host, r#"{"type":"restart_all_services"}"#).assert_success();
    assert_eq!(host.calls(), ["service procps force-reload"]);
}

#[test]
fn results_record_lists_the_commands() {
    require_root!();
    let host = FakeHost::with_package_dir();
    interrupt(&host, TWO_SERVICES).assert_success();
    let record: Value = serde_json::from_str(&host.read_string(RESULTS)).unwrap();
    assert_eq!(record["mode"], "interrupt", "{record:#}");
    assert_eq!(record["exit_code"], 0, "{record:#}");
    let text = record.to_string();
    for command in [
        "systemctl daemon-reload",
        "systemctl restart containerd",
        "systemctl restart kubelet",
    ] {
        assert!(text.contains(command), "{command} missing: {record:#}");
    }
}

#[test]
fn results_record_of_a_failed_interrupt_has_exit_code_1() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool("systemctl", SYSTEMCTL_FAILS_KUBELET);
    interrupt(&host, TWO_SERVICES).assert_code(1);
    let record: Value = serde_json::from_str(&host.read_string(RESULTS)).unwrap();
    assert_eq!(record["exit_code"], 1, "{record:#}");
    assert!(
        record.to_string().contains("systemctl restart kubelet"),
        "{record:#}"
    );
}

// ---------------------------------------------------------------------------------------------
// §10: signals
// ---------------------------------------------------------------------------------------------

/// A fake `systemctl` whose `restart containerd` signals it started, then runs `rest`.
fn systemctl_blocking_on_containerd(rest: &str) -> String {
    format!("if [ \"$*\" = \"restart containerd\" ]; then\n{rest}\nfi\necho \"fake systemctl $*\"")
}

/// Start the two-service interrupt, wait until `restart containerd` runs, send SIGTERM, and
/// after a pause (two pending signals would merge into one) a second one.
fn terminate_twice_during_containerd(host: &FakeHost) -> Run {
    let mut agent = host
        .interrupt(&interrupt_data(TWO_SERVICES))
        .env("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "5")
        .spawn();
    host.wait_for("var/tmp/started", Duration::from_secs(20));
    agent.signal("TERM");
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        !agent.has_exited(),
        "the first signal lets the operation run"
    );
    agent.signal("TERM");
    agent.wait()
}

#[test]
fn sigterm_during_an_operation_lets_it_finish_and_starts_no_later_operation() {
    require_root!();
    assert_a_stop_request_during_an_operation("TERM");
}

/// SPEC §10: SIGHUP, SIGUSR1, SIGUSR2 and SIGALRM are stop requests for interrupts too.
#[test]
fn a_hangup_or_usr1_during_an_operation_lets_it_finish_and_starts_no_later_operation() {
    require_root!();
    for sig in ["HUP", "USR1"] {
        assert_a_stop_request_during_an_operation(sig);
    }
}

/// Start the two-service interrupt, send `sig` while `restart containerd` runs: the operation
/// finishes and is marked, `restart kubelet` never starts, exit 1.
fn assert_a_stop_request_during_an_operation(sig: &str) {
    let host = FakeHost::with_package_dir();
    host.set_fake_tool(
        "systemctl",
        &systemctl_blocking_on_containerd(
            "trap 'echo got-term' TERM\necho started > /var/tmp/started\n\
             while [ ! -e /var/tmp/release ]; do usleep 10000; done",
        ),
    );
    let mut agent = host
        .interrupt(&interrupt_data(TWO_SERVICES))
        .env("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "1")
        .spawn();
    host.wait_for("var/tmp/started", Duration::from_secs(20));
    agent.signal(sig);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !agent.has_exited(),
        "SIG{sig}: the agent did not wait for the operation"
    );
    host.write("var/tmp/release", "");
    let run = agent.wait();
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    run.assert_stderr_line_contains(&[
        "waiting for the running operation to finish",
        "systemctl",
        "pid=",
    ]);
    run.assert_stdout_contains("fake systemctl restart containerd\n");
    assert!(!run.out().contains("got-term"), "{run:?}");
    assert_eq!(
        host.calls(),
        ["systemctl daemon-reload", "systemctl restart containerd"]
    );
    assert!(!run.out().contains("systemctl restart kubelet"), "{run:?}");
    assert_eq!(
        host.list(INTERRUPT_FLAGS),
        ["service_restart_0.complete", "service_restart_1.complete"],
        "the operation that finished is marked"
    );
}

#[test]
fn a_second_sigterm_stops_the_operation_and_it_is_not_marked() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool(
        "systemctl",
        &systemctl_blocking_on_containerd("echo started > /var/tmp/started\nsleep 30 &\nwait $!"),
    );
    let run = terminate_twice_during_containerd(&host);
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    assert!(run.elapsed < Duration::from_secs(20), "{:?}", run.elapsed);
    assert_eq!(
        host.calls(),
        ["systemctl daemon-reload", "systemctl restart containerd"]
    );
    assert!(!run.out().contains("systemctl restart kubelet"), "{run:?}");
    assert_eq!(
        host.list(INTERRUPT_FLAGS),
        ["service_restart_0.complete"],
        "the operation killed by SIGTERM is not marked"
    );
}

#[test]
fn operation_exiting_cleanly_on_a_second_sigterm_is_marked_but_the_run_stops() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool(
        "systemctl",
        &systemctl_blocking_on_containerd(
            "trap 'echo got-term; exit 0' TERM\necho started > /var/tmp/started\nsleep 30 &\nwait $!",
        ),
    );
    let run = terminate_twice_during_containerd(&host);
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    run.assert_stdout_contains("got-term\n");
    assert_eq!(
        host.list(INTERRUPT_FLAGS),
        ["service_restart_0.complete", "service_restart_1.complete"]
    );
    assert!(
        !host
            .calls()
            .iter()
            .any(|c| c == "systemctl restart kubelet")
    );
}

#[test]
fn operation_running_past_the_step_timeout_fails() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool(
        "systemctl",
        &systemctl_blocking_on_containerd("sleep 30 &\nwait $!"),
    );
    let run = host
        .interrupt(&interrupt_data(TWO_SERVICES))
        .env("SKYHOOK_STEP_TIMEOUT_SECONDS", "1")
        .env("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "1")
        .run();
    run.assert_code(1);
    run.assert_stderr_line_contains(&["systemctl restart containerd", "timed out after 1s"]);
    assert!(run.elapsed < Duration::from_secs(20), "{:?}", run.elapsed);
    assert_eq!(host.list(INTERRUPT_FLAGS), ["service_restart_0.complete"]);
    assert!(
        !host
            .calls()
            .iter()
            .any(|c| c == "systemctl restart kubelet")
    );
}

// ---------------------------------------------------------------------------------------------
// §1.4: agent interrupts list|encode|decode
// ---------------------------------------------------------------------------------------------

/// `(type, module, example)` of every built-in kind.
const BUILTINS: [(&str, &str, &str); 5] = [
    ("no_op", "interrupts::no_op", r#"{"type":"no_op"}"#),
    (
        "node_restart",
        "interrupts::node_restart",
        r#"{"type":"node_restart"}"#,
    ),
    (
        "restart_all_services",
        "interrupts::restart_all_services",
        r#"{"type":"restart_all_services"}"#,
    ),
    (
        "script_interrupt",
        "interrupts::script_interrupt",
        r#"{"type":"script_interrupt"}"#,
    ),
    (
        "service_restart",
        "interrupts::service_restart",
        r#"{"type":"service_restart","services":["containerd","kubelet"]}"#,
    ),
];

fn subcommand(args: &[&str]) -> Run {
    FakeHost::new().agent().args(args).run()
}

#[test]
fn interrupts_list_shows_every_builtin_with_summary_module_and_example() {
    let run = subcommand(&["interrupts", "list"]);
    run.assert_success();
    let out = run.out();
    for (ty, module, example) in BUILTINS {
        let at = out
            .lines()
            .position(|l| l.split_whitespace().next() == Some(ty))
            .unwrap_or_else(|| panic!("{ty} not listed\n{run:?}"));
        let summary = out.lines().nth(at).unwrap()[ty.len()..].trim();
        assert!(!summary.is_empty(), "{ty} has no summary\n{run:?}");
        assert!(
            out.contains(&format!("module: {module}")),
            "{ty}: module {module} not shown\n{run:?}"
        );
        assert!(
            out.contains(&format!("example: {example}")),
            "{ty}: example not shown\n{run:?}"
        );
    }
}

#[test]
fn interrupts_list_json_describes_every_builtin() {
    let run = subcommand(&["interrupts", "list", "--format", "json"]);
    run.assert_success();
    let list: Value = serde_json::from_slice(&run.stdout).expect("JSON on stdout");
    let kinds = list["kinds"].as_array().expect("an array of kinds");
    let types: Vec<&str> = kinds.iter().map(|k| k["type"].as_str().unwrap()).collect();
    assert_eq!(types, BUILTINS.map(|b| b.0), "{list:#}");
    for (kind, (ty, module, example)) in kinds.iter().zip(BUILTINS) {
        assert_eq!(kind["module"], module, "{kind:#}");
        assert_eq!(kind["example"], example, "{kind:#}");
        assert!(
            kind["summary"].as_str().is_some_and(|s| !s.is_empty()),
            "{kind:#}"
        );
        let payload: Value = serde_json::from_str(example).unwrap();
        assert_eq!(payload["type"], ty);
    }
}

#[test]
fn encode_then_decode_round_trips_to_canonical_json() {
    let encoded = subcommand(&[
        "interrupts",
        "encode",
        r#"{"type": "service_restart", "services": ["containerd", "kubelet"]}"#,
    ]);
    encoded.assert_success();
    let data = encoded.out().trim_end().to_owned();
    assert_eq!(encoded.out(), format!("{data}\n"));
    assert_eq!(
        data,
        interrupt_data(TWO_SERVICES),
        "base64 of the canonical JSON"
    );
    let decoded = subcommand(&["interrupts", "decode", &data]);
    decoded.assert_success();
    assert_eq!(decoded.out(), format!("{TWO_SERVICES}\n"));

    // The Python agent's spaced payload decodes to the same canonical JSON.
    let python = subcommand(&[
        "interrupts",
        "decode",
        "eyJ0eXBlIjogInNlcnZpY2VfcmVzdGFydCIsICJzZXJ2aWNlcyI6IFsiY29udGFpbmVyZCIsICJrdWJlbGV0Il19",
    ]);
    python.assert_success();
    assert_eq!(python.out(), format!("{TWO_SERVICES}\n"));
}

#[test]
fn encode_fills_in_the_canonical_services_array() {
    let run = subcommand(&["interrupts", "encode", r#"{"type":"service_restart"}"#]);
    run.assert_success();
    assert_eq!(
        run.out(),
        format!(
            "{}\n",
            interrupt_data(r#"{"type":"service_restart","services":[]}"#)
        )
    );
}

#[test]
fn encode_of_an_unknown_type_fails_with_the_full_list() {
    let run = subcommand(&["interrupts", "encode", r#"{"type":"bogus"}"#]);
    run.assert_code(1);
    run.assert_stderr_contains(&format!(
        r#"unknown interrupt "bogus" must be one of: {KNOWN_TYPES}"#
    ));
    assert!(run.stdout.is_empty(), "{run:?}");
}

#[test]
fn decode_of_garbage_fails() {
    let run = subcommand(&["interrupts", "decode", "%%% not base64 %%%"]);
    run.assert_code(1);
    run.assert_stderr_contains(MALFORMED);
    assert!(run.stdout.is_empty(), "{run:?}");
}
