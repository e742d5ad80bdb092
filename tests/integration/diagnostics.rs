//! The agent's own diagnostics on stderr, line by line: the start and end line of every run,
//! one ERROR line per failure with its structured fields, the decisions at debug level, and
//! the warning for an invalid log filter. Text and JSON alike.

use serde_json::Value;

use crate::util::{
    COPY_DIR, FakeHost, PKG_LOGS, Package, Reaper, Run, Step, b64, field, logfmt_value,
    parse_logfmt,
};

/// The agent's version, as `agent --version` prints it.
fn agent_version(host: &FakeHost) -> String {
    let run = host.agent().arg("--version").run();
    run.assert_success();
    run.out().trim_end().to_owned()
}

/// Text diagnostics records whose message starts with `message`, without the time, with the
/// values of `masked` keys replaced by `N`, written back as logfmt. Lines that are not logfmt
/// (a step's own stderr) are left out.
fn text_lines(run: &Run, message: &str, masked: &[&str]) -> Vec<String> {
    run.err()
        .lines()
        .filter_map(|l| parse_logfmt(l).ok())
        .filter(|pairs| field(pairs, "msg").is_some_and(|m| m.starts_with(message)))
        .map(|pairs| {
            pairs
                .iter()
                .filter(|(k, _)| k != "time")
                .map(|(k, v)| {
                    if masked.contains(&k.as_str()) {
                        format!("{k}=N")
                    } else {
                        format!("{k}={}", logfmt_value(v))
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// Every stderr line as a logfmt record: the agent's text diagnostics are nothing else.
#[track_caller]
fn records(run: &Run) -> Vec<Vec<(String, String)>> {
    run.err()
        .lines()
        .map(|l| parse_logfmt(l).unwrap_or_else(|e| panic!("{e}\n{run:?}")))
        .collect()
}

/// The JSON diagnostics lines (step output on stderr, not JSON, is left out).
fn json_lines(run: &Run) -> Vec<Value> {
    run.err()
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

fn with_message<'a>(lines: &'a [Value], message: &str) -> Vec<&'a Value> {
    lines.iter().filter(|v| v["message"] == message).collect()
}

/// `v` without the fields that vary from run to run.
fn stable(v: &Value, varying: &[&str]) -> Value {
    let mut v = v.clone();
    let map = v.as_object_mut().expect("object");
    map.remove("timestamp");
    for key in varying {
        assert!(map.remove(*key).is_some(), "{key} missing in {v}");
    }
    v
}

fn two_steps() -> Package {
    Package::off_host(&["s1.sh", "s2.sh"], &["s1_check.sh", "s2_check.sh"])
}

#[test]
fn a_run_starts_and_ends_with_one_line_each_in_text() {
    let host = FakeHost::new();
    host.install(&two_steps());
    let version = agent_version(&host);
    let first = host.stage("apply");
    first.assert_success();
    assert_eq!(
        text_lines(&first, "run started", &["git_sha", "pid"]),
        [format!(
            "level=info msg=\"run started\" agent_version={version} git_sha=N mode=apply \
             package=pkg version=1.0.0 pid=N"
        )],
        "{first:?}"
    );
    assert_eq!(
        text_lines(&first, "run finished", &["duration_ms"]),
        ["level=info msg=\"run finished\" result=succeeded ran=2 skipped=0 failed=0 duration_ms=N"],
        "{first:?}"
    );
    // The start line follows the banner: stdout holds no diagnostics.
    assert!(!first.out().contains("run started"), "{first:?}");
    let err = first.err();
    assert!(
        err.find("run started").unwrap() < err.find("step finished").unwrap()
            && err.rfind("step finished").unwrap() < err.find("run finished").unwrap(),
        "{first:?}"
    );

    let again = host.run("apply", &[("FAIL_STEPS", "s2.sh")]);
    again.assert_success();
    assert_eq!(
        text_lines(&again, "run finished", &["duration_ms"]),
        ["level=info msg=\"run finished\" result=succeeded ran=0 skipped=2 failed=0 duration_ms=N"],
        "{again:?}"
    );
}

#[test]
fn a_failed_step_has_one_error_line_with_its_fields_in_text() {
    let host = FakeHost::new();
    host.install(&two_steps());
    let run = host.run("apply", &[("FAIL_STEPS", "s2.sh")]);
    run.assert_code(1);
    let err = run.err();
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(" level=error "))
        .collect();
    assert_eq!(errors.len(), 1, "{run:?}");
    let log = host.files_under(PKG_LOGS);
    let log = log
        .iter()
        .find(|f| f.contains("s2.sh"))
        .unwrap_or_else(|| panic!("{log:?}"));
    assert_eq!(
        text_lines(&run, "agent execution failed", &["duration_ms"]),
        [format!(
            "level=error msg=\"agent execution failed: running step \\\"s2.sh\\\": exit code 3 \
             is not an accepted return code [0]\" step=s2.sh exit_code=3 log=/{PKG_LOGS}/{log} \
             duration_ms=N"
        )],
        "{run:?}"
    );
    assert_eq!(
        text_lines(&run, "run finished", &["duration_ms"]),
        ["level=info msg=\"run finished\" result=failed ran=2 skipped=0 failed=1 duration_ms=N"],
        "{run:?}"
    );
}

#[test]
fn start_end_and_error_lines_in_json() {
    let host = FakeHost::new();
    host.install(&two_steps());
    let version = agent_version(&host);
    let run = host.run(
        "apply",
        &[
            ("FAIL_STEPS", "s1.sh"),
            ("SKYHOOK_AGENT_LOG_FORMAT", "json"),
        ],
    );
    run.assert_code(1);
    let lines = json_lines(&run);
    let started = with_message(&lines, "run started");
    assert_eq!(started.len(), 1, "{run:?}");
    assert!(started[0]["pid"].is_u64() && started[0]["git_sha"].is_string());
    assert_eq!(
        stable(started[0], &["pid", "git_sha"]),
        serde_json::json!({
            "level": "INFO", "message": "run started", "agent_version": version,
            "mode": "apply", "package": "pkg", "version": "1.0.0",
        })
    );
    let errors: Vec<&Value> = lines.iter().filter(|v| v["level"] == "ERROR").collect();
    assert_eq!(errors.len(), 1, "{run:?}");
    let log = errors[0]["log"]
        .as_str()
        .unwrap_or_else(|| panic!("{run:?}"));
    assert!(
        log.starts_with(&format!("/{PKG_LOGS}/s1.sh")),
        "{log}: {run:?}"
    );
    assert!(errors[0]["duration_ms"].is_u64(), "{run:?}");
    assert_eq!(
        stable(errors[0], &["log", "duration_ms"]),
        serde_json::json!({
            "level": "ERROR",
            "message": "agent execution failed: running step \"s1.sh\": exit code 3 is not an \
                        accepted return code [0]",
            "step": "s1.sh", "exit_code": 3,
        })
    );
    let finished = with_message(&lines, "run finished");
    assert_eq!(finished.len(), 1, "{run:?}");
    assert_eq!(
        stable(finished[0], &["duration_ms"]),
        serde_json::json!({
            "level": "INFO", "message": "run finished", "result": "failed",
            "ran": 1, "skipped": 0, "failed": 1,
        })
    );
}

#[test]
fn a_failed_interrupt_operation_names_the_operation_in_json() {
    require_root!();
    let host = FakeHost::new();
    host.mkdir(COPY_DIR);
    host.set_fake_tool("systemctl", "exit 4");
    let run = host
        .interrupt(&b64(
            br#"{"type":"service_restart","services":["kubelet"]}"#,
        ))
        .env("SKYHOOK_AGENT_LOG_FORMAT", "json")
        .run();
    run.assert_code(1);
    let lines = json_lines(&run);
    assert_eq!(
        stable(with_message(&lines, "run started")[0], &["pid", "git_sha"])["mode"],
        "interrupt"
    );
    let errors: Vec<&Value> = lines.iter().filter(|v| v["level"] == "ERROR").collect();
    assert_eq!(errors.len(), 1, "{run:?}");
    assert_eq!(errors[0]["operation"], "systemctl daemon-reload", "{run:?}");
    assert!(errors[0].get("step").is_none(), "{run:?}");
    assert_eq!(errors[0]["exit_code"], 4, "{run:?}");
    assert!(errors[0]["duration_ms"].is_u64(), "{run:?}");
    let finished = with_message(&lines, "run finished");
    assert_eq!(finished.len(), 1, "{run:?}");
    assert_eq!(finished[0]["result"], "failed", "{run:?}");
    assert_eq!(finished[0]["failed"], 1, "{run:?}");
}

#[test]
fn debug_shows_why_each_step_runs_or_skips() {
    let host = FakeHost::new();
    host.install(&two_steps());
    let debug = [
        ("SKYHOOK_AGENT_LOG", "debug"),
        ("SKYHOOK_AGENT_LOG_FORMAT", "json"),
    ];
    for (round, (decision, reason)) in [
        ("run", "no completion marker"),
        ("skip", "completion marker present"),
    ]
    .into_iter()
    .enumerate()
    {
        let run = host.run("apply", &debug);
        run.assert_success();
        let lines = json_lines(&run);
        let decisions = with_message(&lines, "step decision");
        assert_eq!(decisions.len(), 2, "round {round}: {run:?}");
        for (d, path) in decisions.iter().zip(["s1.sh", "s2.sh"]) {
            assert_eq!(d["level"], "DEBUG");
            assert_eq!(d["path"], path);
            assert_eq!(d["decision"], decision, "round {round}: {d}");
            assert_eq!(d["reason"], reason, "round {round}: {d}");
            assert!(
                d["marker"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("/var/lib/skyhook/sk1/flags/pkg/1.0.0/")),
                "{d}"
            );
        }
    }
    // At the default level the decisions are not shown.
    let quiet = host.stage("apply");
    assert!(!quiet.err().contains("step decision"), "{quiet:?}");
}

#[test]
fn an_invalid_log_filter_is_warned_about_once_and_info_is_used() {
    let host = FakeHost::new();
    host.install(&two_steps());
    let run = host.run("apply", &[("SKYHOOK_AGENT_LOG", "agent=loud")]);
    run.assert_success();
    let err = run.err();
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("SKYHOOK_AGENT_LOG"))
        .collect();
    assert_eq!(warnings.len(), 1, "{run:?}");
    assert!(
        warnings[0].contains(" level=warn ")
            && warnings[0].contains(r#"SKYHOOK_AGENT_LOG=\"agent=loud\" is not a valid filter"#)
            && warnings[0].ends_with("; using info\""),
        "{run:?}"
    );
    // info: the step lines are there, debug lines are not.
    assert!(
        run.err().contains(r#"level=info msg="step finished""#),
        "{run:?}"
    );
    assert!(!run.err().contains("level=debug"), "{run:?}");
}

#[test]
fn failed_checks_have_one_error_line_naming_the_last_failed_check() {
    let host = FakeHost::new();
    host.install(&two_steps());
    host.stage("apply").assert_success();
    let run = host.run(
        "apply-check",
        &[
            ("FAIL_STEPS", "s1_check.sh s2_check.sh"),
            ("SKYHOOK_AGENT_LOG", "debug"),
        ],
    );
    run.assert_code(1);
    let err = run.err();
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(" level=error "))
        .collect();
    assert_eq!(errors.len(), 1, "{run:?}");
    assert_eq!(
        text_lines(&run, "agent execution failed", &["duration_ms", "log"]),
        [
            "level=error msg=\"agent execution failed: apply-check failed: 2 of 2 checks did \
             not pass: s1_check.sh, s2_check.sh\" step=s2_check.sh exit_code=3 log=N \
             duration_ms=N"
        ],
        "{run:?}"
    );
    assert_eq!(
        text_lines(&run, "run finished", &["duration_ms"]),
        ["level=info msg=\"run finished\" result=failed ran=2 skipped=0 failed=2 duration_ms=N"],
        "{run:?}"
    );
}

#[test]
fn invalid_extension_settings_warn_naming_the_value_and_take_the_default() {
    let rows: &[(&str, &str, &str, &str)] = &[
        (
            "SKYHOOK_STEP_TIMEOUT_SECONDS",
            "ten",
            "a non-negative number of seconds",
            "unset",
        ),
        (
            "SKYHOOK_STEP_TIMEOUT_SECONDS",
            "-1",
            "a non-negative number of seconds",
            "unset",
        ),
        (
            "SKYHOOK_STEP_TIMEOUT_SECONDS",
            "NaN",
            "a non-negative number of seconds",
            "unset",
        ),
        (
            "SKYHOOK_STEP_TIMEOUT_SECONDS",
            "inf",
            "a non-negative number of seconds",
            "unset",
        ),
        (
            "SKYHOOK_AGENT_STOP_GRACE_SECONDS",
            "20s",
            "a non-negative number of seconds",
            "20",
        ),
        (
            "SKYHOOK_REBOOT_MAX_ATTEMPTS",
            "0",
            "a positive integer",
            "3",
        ),
        (
            "SKYHOOK_REBOOT_MAX_ATTEMPTS",
            "-3",
            "a positive integer",
            "3",
        ),
        ("SKYHOOK_AGENT_LOG_FORMAT", "yaml", "text or json", "text"),
    ];
    for (name, value, expected, default) in rows {
        let host = FakeHost::new();
        host.install(&two_steps());
        let run = host.run("apply", &[(name, value)]);
        run.assert_success();
        assert_eq!(
            text_lines(&run, "environment variable", &[]),
            [format!(
                "level=warn msg={}",
                logfmt_value(&format!(
                    "environment variable {name}={value:?} is not {expected}; using the \
                     default ({default})"
                ))
            )],
            "{run:?}"
        );
        // The run went on as with the default: text diagnostics, both steps run.
        assert_eq!(host.ran(), ["s1.sh ", "s2.sh "], "{name}={value}: {run:?}");
    }
}

#[test]
fn a_run_stopped_by_sigterm_ends_with_result_stopped() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.install_held_apply("exit 0");
    let run = host.stop_held_apply(host.tagged_agent());
    run.assert_code(1);
    assert_eq!(
        text_lines(&run, "agent execution failed", &[]),
        [
            "level=error msg=\"agent execution failed: agent stopped after receiving a \
             termination signal\""
        ],
        "{run:?}"
    );
    assert_eq!(
        text_lines(&run, "run finished", &["duration_ms"]),
        ["level=info msg=\"run finished\" result=stopped ran=1 skipped=0 failed=0 duration_ms=N"],
        "{run:?}"
    );
}

#[test]
fn every_stderr_line_of_a_failed_run_is_logfmt_with_an_error_record() {
    // The steps write to stdout only, so every stderr line is the agent's.
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step(
                "apply",
                Step::new("s1.sh")
                    .on_host(false)
                    .script("#!/bin/sh\necho one\n"),
            )
            .step(
                "apply",
                Step::new("s2.sh")
                    .on_host(false)
                    .script("#!/bin/sh\necho 'two = \"2\"'\nexit 4\n"),
            )
            .step("apply", Step::new("s3.sh").on_host(false))
            .step("apply-check", Step::new("c.sh").on_host(false)),
    );
    let run = host.run("apply", &[]);
    run.assert_code(1);
    let records = records(&run);
    assert!(!records.is_empty(), "{run:?}");
    for r in &records {
        assert_eq!(r[0].0, "time", "{r:?}");
        assert_eq!(r[1].0, "level", "{r:?}");
        assert_eq!(r[2].0, "msg", "{r:?}");
    }
    // Each step that ran: `step started`, then `step finished`.
    let events: Vec<(&str, &str)> = records
        .iter()
        .filter_map(|r| Some((field(r, "msg")?, field(r, "path")?)))
        .filter(|(m, _)| m.starts_with("step "))
        .collect();
    assert_eq!(
        events,
        [
            ("step started", "s1.sh"),
            ("step finished", "s1.sh"),
            ("step started", "s2.sh"),
            ("step finished", "s2.sh"),
        ],
        "{run:?}"
    );
    let finished = records
        .iter()
        .find(|r| field(r, "msg") == Some("step finished") && field(r, "path") == Some("s2.sh"))
        .unwrap();
    assert_eq!(
        field(finished, "result"),
        Some("exit code 4"),
        "{finished:?}"
    );
    assert_eq!(field(finished, "exit_code"), Some("4"), "{finished:?}");
    assert_eq!(field(finished, "decision"), Some("failed"), "{finished:?}");
    let errors: Vec<_> = records
        .iter()
        .filter(|r| field(r, "level") == Some("error"))
        .collect();
    assert_eq!(errors.len(), 1, "{run:?}");
    let e = errors[0];
    assert_eq!(
        field(e, "msg"),
        Some(
            "agent execution failed: running step \"s2.sh\": exit code 4 is not an accepted \
             return code [0]"
        ),
        "{e:?}"
    );
    assert_eq!(field(e, "step"), Some("s2.sh"), "{e:?}");
    assert_eq!(field(e, "exit_code"), Some("4"), "{e:?}");
    let log = field(e, "log").unwrap_or_else(|| panic!("no log field: {e:?}"));
    assert!(log.starts_with(&format!("/{PKG_LOGS}/s2.sh-")), "{e:?}");
    assert!(
        field(e, "duration_ms").is_some_and(|d| d.parse::<u64>().is_ok()),
        "{e:?}"
    );
}

#[test]
fn a_silent_step_has_heartbeat_records_while_it_runs() {
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step(
                "apply",
                Step::new("slow.sh")
                    .on_host(false)
                    .script("#!/bin/sh\nsleep 2.5\n"),
            )
            .step("apply-check", Step::new("c.sh").on_host(false)),
    );
    let run = host.run("apply", &[("SKYHOOK_AGENT_HEARTBEAT_SECONDS", "1")]);
    run.assert_success();
    let records = records(&run);
    let msgs: Vec<&str> = records.iter().filter_map(|r| field(r, "msg")).collect();
    let started = msgs.iter().position(|m| *m == "step started").unwrap();
    let finished = msgs.iter().position(|m| *m == "step finished").unwrap();
    let beats: Vec<_> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| field(r, "msg") == Some("step running"))
        .collect();
    assert!(!beats.is_empty(), "no heartbeat\n{run:?}");
    for (i, r) in &beats {
        assert!(started < *i && *i < finished, "{run:?}");
        assert_eq!(field(r, "level"), Some("info"), "{r:?}");
        assert_eq!(field(r, "path"), Some("slow.sh"), "{r:?}");
        assert!(
            field(r, "elapsed_s").is_some_and(|s| s.parse::<u64>().is_ok()),
            "{r:?}"
        );
    }
    // The default (30 s) is far longer than this step: no heartbeat.
    host.install(
        &Package::new()
            .step(
                "apply",
                Step::new("slow2.sh")
                    .on_host(false)
                    .script("#!/bin/sh\nsleep 1.5\n"),
            )
            .step("apply-check", Step::new("c.sh").on_host(false)),
    );
    let quiet = host.run("apply", &[]);
    quiet.assert_success();
    assert!(!quiet.err().contains("step running"), "{quiet:?}");
}

/// The text records of `run` whose message is `message` (lines that are not logfmt, a step's
/// own stderr, are left out).
fn records_with(run: &Run, message: &str) -> Vec<Vec<(String, String)>> {
    run.err()
        .lines()
        .filter_map(|l| parse_logfmt(l).ok())
        .filter(|pairs| field(pairs, "msg") == Some(message))
        .collect()
}

/// `elapsed_s` of each heartbeat record `message`, checked to count up.
#[track_caller]
fn heartbeats(run: &Run, message: &str) -> Vec<u64> {
    let beats: Vec<u64> = records_with(run, message)
        .iter()
        .map(|r| {
            field(r, "elapsed_s")
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no elapsed_s in {r:?}"))
        })
        .collect();
    assert!(beats.windows(2).all(|w| w[0] <= w[1]), "{beats:?}");
    beats
}

/// SPEC §1.5: no silent waits. After `reboot` exited 0 the agent waits (10 s) for the
/// shutdown to stop it; that wait says so when it starts, and has the heartbeat a silent step
/// has.
#[test]
fn the_wait_for_a_requested_reboot_says_so_and_has_a_heartbeat() {
    require_root!();
    let host = FakeHost::new();
    host.mkdir(COPY_DIR);
    // The default fake `reboot` exits 0 and the host stays up.
    let run = host
        .interrupt(&b64(br#"{"type":"node_restart"}"#))
        .env("SKYHOOK_AGENT_HEARTBEAT_SECONDS", "1")
        .run();
    run.assert_code(1);
    run.assert_stderr_contains("reboot was enqueued but the host did not restart within 10s");
    run.assert_stderr_line_contains(&[
        "level=info",
        "msg=\"reboot requested; waiting for the shutdown to stop the agent\"",
        "operation=node_restart_0",
        "wait_s=10",
    ]);
    let beats = heartbeats(&run, "waiting for the reboot");
    assert!(beats.len() >= 8, "{beats:?}\n{run:?}");
    assert!(
        records_with(&run, "waiting for the reboot")
            .iter()
            .all(|r| field(r, "operation") == Some("node_restart_0")),
        "{run:?}"
    );
    let err = run.err();
    assert!(
        err.find("waiting for the shutdown").unwrap() < err.find("waiting for the reboot").unwrap()
            && err.rfind("waiting for the reboot").unwrap() < err.find("level=error").unwrap(),
        "{run:?}"
    );
}

/// The wait for the host to go down, once the shutdown's signal has reached the agent, has
/// the heartbeat too.
#[test]
fn the_wait_for_the_host_to_go_down_has_a_heartbeat() {
    require_root!();
    let host = FakeHost::new();
    host.mkdir(COPY_DIR);
    // The shutdown's SIGTERM reaches the agent, but the host stays up.
    host.set_fake_tool("reboot", "kill -TERM $PPID\nsleep 5");
    let run = host
        .interrupt(&b64(br#"{"type":"node_restart"}"#))
        .env("SKYHOOK_AGENT_HEARTBEAT_SECONDS", "1")
        .env("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "3")
        .run();
    run.assert_code(1);
    run.assert_stderr_line_contains(&["level=warn", "the host did not go down"]);
    let err = run.err();
    let going_down = err.find("waiting for the host to go down").unwrap();
    let beats = heartbeats(&run, "waiting for the reboot");
    assert!(beats.len() >= 2, "{beats:?}\n{run:?}");
    assert!(
        err.rfind("waiting for the reboot").unwrap() > going_down,
        "{run:?}"
    );
}

/// SPEC §1.5: every interrupt operation has an `operation started` record, as steps have
/// `step started`, and a heartbeat while its command is silent; the records name the
/// operation (`<TYPE>_<i>`) and its command line.
#[test]
fn each_interrupt_operation_has_a_started_record_and_a_heartbeat() {
    require_root!();
    let host = FakeHost::new();
    host.mkdir(COPY_DIR);
    host.set_fake_tool("systemctl", "sleep 2");
    let run = host
        .interrupt(&b64(
            br#"{"type":"service_restart","services":["kubelet"]}"#,
        ))
        .env("SKYHOOK_AGENT_HEARTBEAT_SECONDS", "1")
        .run();
    run.assert_success();
    let events: Vec<(String, String, String)> = run
        .err()
        .lines()
        .filter_map(|l| parse_logfmt(l).ok())
        .filter(|r| field(r, "msg").is_some_and(|m| m.starts_with("operation ")))
        .map(|r| {
            let get = |k: &str| field(&r, k).unwrap_or_default().to_owned();
            (get("msg"), get("operation"), get("command"))
        })
        .collect();
    let mut expected = Vec::new();
    for (id, command) in [
        ("service_restart_0", "systemctl daemon-reload"),
        ("service_restart_1", "systemctl restart kubelet"),
    ] {
        let event = |msg: &str| (msg.to_owned(), id.to_owned(), command.to_owned());
        expected.push(event("operation started"));
        let running = events
            .iter()
            .filter(|e| **e == event("operation running"))
            .count();
        assert!(running >= 1, "no heartbeat for {id}: {events:?}");
        expected.extend(std::iter::repeat_n(event("operation running"), running));
        expected.push(event("operation finished"));
    }
    assert_eq!(events, expected, "{run:?}");
}

/// The records after `run finished`, as logfmt lines without their time.
fn after_run_finished(run: &Run) -> Vec<String> {
    let err = run.err();
    let lines: Vec<&str> = err.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("msg=\"run finished\""))
        .unwrap_or_else(|| panic!("no run finished: {run:?}"));
    lines[at + 1..]
        .iter()
        .map(|l| {
            let pairs = parse_logfmt(l).unwrap_or_else(|e| panic!("{e}\n{run:?}"));
            pairs
                .iter()
                .filter(|(k, _)| k != "time")
                .map(|(k, v)| format!("{k}={}", logfmt_value(v)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// SPEC §1.5: the last lines of a failed run (what the operator keeps in `last-logs`) are a
/// summary: the run and its error, the failed step with its exit code, accepted codes and
/// log, and the steps it did not get to. The lines before are unchanged.
#[test]
fn a_failed_stage_ends_with_a_summary() {
    let host = FakeHost::new();
    host.install(&Package::off_host(
        &["s1.sh", "s2.sh", "s3.sh", "s4.sh"],
        &["s1_check.sh"],
    ));
    let run = host.run("apply", &[("FAIL_STEPS", "s2.sh")]);
    run.assert_code(1);
    let log = host
        .files_under(PKG_LOGS)
        .into_iter()
        .find(|f| f.starts_with("s2.sh-"))
        .unwrap_or_else(|| panic!("no log of s2.sh: {run:?}"));
    let error = "running step \\\"s2.sh\\\": exit code 3 is not an accepted return code [0]";
    assert_eq!(
        after_run_finished(&run),
        [
            format!(
                "level=info msg=\"summary: the run failed\" mode=apply package=pkg \
                 version=1.0.0 error=\"{error}\""
            ),
            format!(
                "level=info msg=\"summary: failed step\" step=s2.sh exit_code=3 \
                 accepted=[0] log=/{PKG_LOGS}/{log}"
            ),
            "level=info msg=\"summary: not run\" count=2 steps=\"s3.sh, s4.sh\"".to_owned(),
        ],
        "{run:?}"
    );
    // The ERROR line stays the one error, and the results record says what was accepted.
    assert_eq!(run.err().matches(" level=error ").count(), 1, "{run:?}");
    let record: Value =
        serde_json::from_str(&host.read_string("var/lib/skyhook/sk1/results/pkg/1.0.0/apply.json"))
            .unwrap();
    assert_eq!(record["operations"][1]["accepted"], "[0]", "{record:#}");
}

/// A check stage runs every step: every failed check is named, and nothing is left.
#[test]
fn a_failed_check_stage_names_each_failed_check_and_nothing_not_run() {
    let host = FakeHost::new();
    host.install(&Package::off_host(
        &["s1.sh"],
        &["a_check.sh", "b_check.sh"],
    ));
    let run = host.run("apply-check", &[("FAIL_STEPS", "a_check.sh b_check.sh")]);
    run.assert_code(1);
    let summary = after_run_finished(&run);
    assert_eq!(summary.len(), 4, "{summary:#?}");
    assert!(
        summary[1].starts_with(
            "level=info msg=\"summary: failed step\" step=a_check.sh exit_code=3 accepted=[0] log="
        ),
        "{summary:#?}"
    );
    assert!(
        summary[2].starts_with("level=info msg=\"summary: failed step\" step=b_check.sh "),
        "{summary:#?}"
    );
    assert_eq!(
        summary[3], "level=info msg=\"summary: not run\" count=0",
        "{summary:#?}"
    );
}

/// A run that fails before its first step (here: its config) says nothing ran.
#[test]
fn a_run_that_fails_before_its_first_step_says_nothing_ran() {
    let host = FakeHost::new();
    host.install(&Package::new().with_raw_config(b"{"));
    let run = host.stage("apply");
    run.assert_code(1);
    let summary = after_run_finished(&run);
    assert_eq!(summary.len(), 2, "{summary:#?}");
    assert!(
        summary[0].starts_with(
            "level=info msg=\"summary: the run failed\" mode=apply package=pkg version=1.0.0 \
             error=\"loading "
        ),
        "{summary:#?}"
    );
    assert_eq!(summary[1], "level=info msg=\"summary: nothing ran\"");
}

/// A stopped run says so, and names the steps the stop kept from starting.
#[test]
fn a_stopped_run_ends_with_a_summary_of_what_it_did_not_start() {
    let host = FakeHost::new();
    host.install_held_apply("exit 0");
    let run = host.stop_held_apply(host.agent());
    run.assert_code(1);
    assert_eq!(
        after_run_finished(&run),
        [
            "level=info msg=\"summary: the run was stopped\" mode=apply package=pkg \
             version=1.0.0 error=\"agent stopped after receiving a termination signal\""
                .to_owned(),
            "level=info msg=\"summary: not run\" count=1 steps=next.sh".to_owned(),
        ],
        "{run:?}"
    );
}

/// An interrupt whose operation fails: the operation, its command, exit code, accepted codes
/// and log, and the operations after it, found by asking the kind again (nothing runs).
#[test]
fn a_failed_interrupt_ends_with_a_summary_naming_the_operations_not_run() {
    require_root!();
    let host = FakeHost::new();
    host.mkdir(COPY_DIR);
    host.set_fake_tool(
        "systemctl",
        "if [ \"$1\" = restart ] && [ \"$2\" = containerd ]; then exit 4; fi",
    );
    let run = host
        .interrupt(&b64(
            br#"{"type":"service_restart","services":["containerd","kubelet"]}"#,
        ))
        .run();
    run.assert_code(1);
    let summary = after_run_finished(&run);
    assert_eq!(summary.len(), 3, "{summary:#?}\n{run:?}");
    assert_eq!(
        summary[0],
        "level=info msg=\"summary: the run failed\" mode=interrupt package=pkg version=1.0.0 \
         resource_id=abc_pkg_1.0.0 error=\"interrupt service_restart: systemctl restart \
         containerd: exit code 4\""
    );
    assert!(
        summary[1].starts_with(
            "level=info msg=\"summary: failed operation\" operation=service_restart_1 \
             command=\"systemctl restart containerd\" exit_code=4 accepted=[0] \
             log=/var/log/skyhook/sk1/pkg/1.0.0/interrupts/service_restart-"
        ),
        "{summary:#?}"
    );
    assert_eq!(
        summary[2],
        "level=info msg=\"summary: not run\" count=1 operations=\"service_restart_2 \
         (systemctl restart kubelet)\""
    );
    // Asking the kind again ran nothing more.
    assert_eq!(
        host.calls(),
        ["systemctl daemon-reload", "systemctl restart containerd"]
    );
}

/// The loop guard refuses before the operation runs: nothing failed to run, the operation is
/// what was not run.
#[test]
fn a_refused_reboot_ends_with_a_summary_naming_it_not_run() {
    require_root!();
    let host = FakeHost::new();
    host.mkdir(COPY_DIR);
    host.write_reboot_requested(3);
    let run = host.interrupt(&b64(br#"{"type":"node_restart"}"#)).run();
    run.assert_code(1);
    let summary = after_run_finished(&run);
    assert_eq!(summary.len(), 2, "{summary:#?}");
    assert!(
        summary[0].starts_with(
            "level=info msg=\"summary: the run failed\" mode=interrupt package=pkg \
             version=1.0.0 resource_id=abc_pkg_1.0.0 error=\"interrupt node_restart: reboot \
             requested 3 times but the host never restarted"
        ),
        "{summary:#?}"
    );
    assert_eq!(
        summary[1],
        "level=info msg=\"summary: not run\" count=1 operations=\"node_restart_0 (reboot)\""
    );
    assert!(host.calls().is_empty(), "{:?}", host.calls());
}
