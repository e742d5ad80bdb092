//! `agent logs ROOT` (SPEC §1.5): a package's latest run, or one step or interrupt operation,
//! printed without the reader knowing the log layout; `--run N` counting back from the
//! newest; the package found when there is one; errors that name what is missing (exit 1) and
//! usage errors for bad names (exit 2); JSON as one document.

use serde_json::Value;

use crate::util::{COPY_DIR, FakeHost, PKG_LOGS, Package, Run, Step, b64};

fn logs(host: &FakeHost, extra: &[&str]) -> Run {
    host.agent()
        .arg("logs")
        .arg(host.root_str())
        .args(extra)
        .run()
}

fn json(run: &Run) -> Value {
    serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("not JSON: {e}\n{run:?}"))
}

/// A step that says which run it is in (`RUN_TAG`) and fails when `FAIL_STEPS` names it.
fn tagged(path: &str) -> Step {
    Step::new(path).on_host(false).script(&format!(
        "#!/bin/sh\necho \"{path} run ${{RUN_TAG:-}} out\"\necho \"{path} run ${{RUN_TAG:-}} err\" >&2\n\
         case \" ${{FAIL_STEPS:-}} \" in *\" {path} \"*) exit 3;; esac\n"
    ))
}

fn package() -> Package {
    Package::new()
        .step("apply", tagged("s1.sh").always_run())
        .step("apply", tagged("s2.sh"))
        .step("apply-check", tagged("s1_check.sh"))
}

/// The log files of `step`, newest last, as host paths.
fn step_logs(host: &FakeHost, step: &str) -> Vec<String> {
    let mut names: Vec<String> = host
        .files_under(PKG_LOGS)
        .into_iter()
        .filter(|f| f.starts_with(&format!("{step}-")))
        .collect();
    names.sort();
    names.iter().map(|n| format!("/{PKG_LOGS}/{n}")).collect()
}

const STATE_LINE: &str =
    "state: /var/lib/skyhook/sk1 (logs: /var/log/skyhook/sk1; from SKYHOOK_ROOT_DIR)";

#[test]
fn without_options_it_prints_every_log_of_the_latest_run() {
    let host = FakeHost::new();
    host.install(&package());
    host.run("apply", &[("RUN_TAG", "1"), ("FAIL_STEPS", "s2.sh")])
        .assert_code(1);
    let before = host.snapshot();
    let run = logs(&host, &[]);
    run.assert_success();
    let (s1, s2) = (&step_logs(&host, "s1.sh")[0], &step_logs(&host, "s2.sh")[0]);
    let record: Value =
        serde_json::from_str(&host.read_string("var/lib/skyhook/sk1/results/pkg/1.0.0/apply.json"))
            .unwrap();
    let finished = record["finished"].as_str().unwrap();
    assert_eq!(
        run.out(),
        format!(
            "logs: run 1 of package pkg 1.0.0: apply, finished {finished}, exit 1 (failed)\n\
             {STATE_LINE}\nrecord: /var/lib/skyhook/sk1/results/pkg/1.0.0/apply.json\n\n\
             ==> s1.sh: {s1} <==\n{}\n==> s2.sh: {s2} <==\n{}",
            host.read_string(s1.trim_start_matches('/')),
            host.read_string(s2.trim_start_matches('/')),
        )
    );
    run.assert_stdout_contains("s2.sh run 1 out\n");
    run.assert_stdout_contains("s2.sh run 1 err\n");
    before.assert_unchanged(&host.snapshot(), "logs");
}

#[test]
fn a_step_prints_its_newest_log_and_run_n_an_earlier_one() {
    let host = FakeHost::new();
    host.install(&package());
    for tag in ["1", "2", "3"] {
        host.run("apply", &[("RUN_TAG", tag)]).assert_success();
    }
    let all = step_logs(&host, "s1.sh");
    assert_eq!(all.len(), 3, "{all:?}");
    let run = logs(&host, &["--step", "s1.sh"]);
    run.assert_success();
    assert_eq!(
        run.out(),
        format!(
            "logs: step s1.sh of package pkg 1.0.0: log 1 of 3 kept (newest first)\n{STATE_LINE}\n\n\
             ==> s1.sh: {} <==\ns1.sh run 3 out\ns1.sh run 3 err\n",
            all[2]
        )
    );
    let earlier = logs(&host, &["--step", "s1.sh", "--run", "3"]);
    earlier.assert_success();
    earlier.assert_stdout_contains("log 3 of 3 kept");
    earlier.assert_stdout_contains(&format!("==> s1.sh: {} <==\ns1.sh run 1 out\n", all[0]));

    let v = json(&logs(
        &host,
        &["--step", "s1.sh", "--run", "2", "--format", "json"],
    ));
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["package"], "pkg");
    assert_eq!(v["version"], "1.0.0");
    assert_eq!(v["run"], Value::Null);
    assert_eq!(v["logs"][0]["operation"], "s1.sh");
    assert_eq!(v["logs"][0]["log"], all[1]);
    assert_eq!(
        v["logs"][0]["content"],
        "s1.sh run 2 out\ns1.sh run 2 err\n"
    );
    assert_eq!(v["logs"][0]["truncated_bytes"], 0);

    // Beyond what is kept: exit 1, saying how many there are.
    let beyond = logs(&host, &["--step", "s1.sh", "--run", "4"]);
    beyond.assert_code(1);
    beyond.assert_stderr_contains(
        "agent logs failed: --run 4: 3 logs of step s1.sh are kept in \
         /var/log/skyhook/sk1/pkg/1.0.0 (the agent keeps the 5 newest)",
    );
}

#[test]
fn run_n_goes_back_through_the_recorded_runs() {
    let host = FakeHost::new();
    host.install(&package());
    host.run("apply", &[("RUN_TAG", "a")]).assert_success();
    host.run("apply-check", &[("RUN_TAG", "c")])
        .assert_success();
    let latest = logs(&host, &[]);
    latest.assert_success();
    latest.assert_stdout_contains(": apply-check, finished ");
    latest.assert_stdout_contains("s1_check.sh run c out\n");
    let before = logs(&host, &["--run", "2"]);
    before.assert_success();
    before.assert_stdout_contains("logs: run 2 of package pkg 1.0.0: apply, finished ");
    before.assert_stdout_contains("s2.sh run a out\n");
    let none = logs(&host, &["--run", "3"]);
    none.assert_code(1);
    none.assert_stderr_contains(
        "--run 3: 2 runs of package pkg are recorded (the last of each stage, and of the \
         interrupt)",
    );
}

#[test]
fn an_interrupt_operation_prints_the_interrupt_log() {
    require_root!();
    let host = FakeHost::new();
    host.mkdir(COPY_DIR);
    host.set_fake_tool("systemctl", "echo \"restarting $*\"");
    host.interrupt(&b64(
        br#"{"type":"service_restart","services":["kubelet"]}"#,
    ))
    .run()
    .assert_success();
    let run = logs(&host, &["--operation", "service_restart_1"]);
    run.assert_success();
    run.assert_stdout_contains(
        "logs: interrupt service_restart of package pkg 1.0.0: log 1 of 1 kept (newest first)\n",
    );
    run.assert_stdout_contains(
        "\n==> service_restart: /var/log/skyhook/sk1/pkg/1.0.0/interrupts/service_restart-",
    );
    run.assert_stdout_contains(
        "systemctl daemon-reload\nrestarting daemon-reload\nsystemctl restart kubelet\n\
         restarting restart kubelet\n",
    );
    // The run view shows the one log of the invocation once.
    let latest = logs(&host, &[]);
    latest.assert_success();
    assert_eq!(latest.out().matches("\n==> ").count(), 1, "{latest:?}");
    latest.assert_stdout_contains(": interrupt, finished ");
}

#[test]
fn a_step_without_a_log_shows_the_output_the_record_kept() {
    let host = FakeHost::new();
    host.install(&package());
    host.run(
        "apply",
        &[("RUN_TAG", "q"), ("SKYHOOK_AGENT_WRITE_LOGS", "false")],
    )
    .assert_success();
    let run = logs(&host, &[]);
    run.assert_success();
    run.assert_stdout_contains(
        "\n==> s1.sh: no log: logs were off (SKYHOOK_AGENT_WRITE_LOGS=false); the last 4 KiB \
         of its output, from the results record <==\n",
    );
    run.assert_stdout_contains("s1.sh run q out\n");
}

#[test]
fn the_package_is_found_when_there_is_one_and_asked_for_when_there_are_several() {
    let host = FakeHost::new();
    host.install(&package());
    host.stage("apply").assert_success();
    logs(&host, &["--package", "pkg"]).assert_success();
    let other = logs(&host, &["--package", "other"]);
    other.assert_code(1);
    other.assert_stderr_contains(
        "agent logs failed: no state of package \"other\" under /var/lib/skyhook/sk1",
    );
    host.mkdir("var/lib/skyhook/sk1/results/other/2.0.0");
    let several = logs(&host, &[]);
    several.assert_code(2);
    several.assert_stderr_contains(
        "several packages have state under /var/lib/skyhook/sk1 (other, pkg); choose one with \
         --package",
    );
    let v = json(&logs(&host, &["--format", "json"]));
    assert_eq!(v["error"]["exit_code"], 2, "{v:#}");
    assert_eq!(v["schema_version"], 1, "{v:#}");

    let empty = FakeHost::new();
    let nothing = logs(&empty, &[]);
    nothing.assert_code(1);
    nothing.assert_stderr_contains(
        "agent logs failed: no package state under /var/lib/skyhook/sk1: nothing has run there",
    );
}

#[test]
fn missing_logs_are_failures_that_name_what_is_missing() {
    let host = FakeHost::new();
    host.install(&package());
    host.stage("apply").assert_success();
    let run = logs(&host, &["--step", "nope.sh"]);
    run.assert_code(1);
    run.assert_stderr_contains(
        "agent logs failed: no log of step nope.sh in /var/log/skyhook/sk1/pkg/1.0.0",
    );
    let run = logs(&host, &["--operation", "node_restart_0"]);
    run.assert_code(1);
    run.assert_stderr_contains("no log of interrupt node_restart in ");
    let run = logs(&host, &["--package-version", "9.9.9"]);
    run.assert_code(1);
    run.assert_stderr_contains("no recorded run of package pkg 9.9.9");
}

#[test]
fn bad_names_are_usage_errors_before_anything_is_read() {
    let host = FakeHost::new();
    host.install(&package());
    host.stage("apply").assert_success();
    for args in [
        &["--package", "../pkg"][..],
        &["--package", ""],
        &["--package-version", "1.0.0/.."],
        &["--step", "../s1.sh"],
        &["--step", "a//b"],
        &["--step", "/etc/passwd"],
        &["--operation", "x/y"],
        &["--step", "s1.sh", "--operation", "node_restart_0"],
        &["--run", "0"],
        &["--format", "yaml"],
    ] {
        logs(&host, args).assert_code(2);
    }
    host.agent().arg("logs").run().assert_code(2);
}

/// A results record names the logs to print; one that names a file outside LOGS is not read.
#[test]
fn a_record_naming_a_file_outside_the_logs_is_not_read() {
    let host = FakeHost::new();
    host.install(&package());
    host.stage("apply").assert_success();
    host.write("etc/secret", "do not print\n");
    let file = "var/lib/skyhook/sk1/results/pkg/1.0.0/apply.json";
    let mut record: Value = serde_json::from_str(&host.read_string(file)).unwrap();
    record["operations"][0]["log"] = Value::from("/var/log/skyhook/sk1/../../../etc/secret");
    host.write(file, serde_json::to_vec(&record).unwrap());
    let run = logs(&host, &[]);
    run.assert_success();
    assert!(!run.out().contains("do not print"), "{run:?}");
    run.assert_stdout_contains(
        "==> s1.sh: the record names /var/log/skyhook/sk1/../../../etc/secret, which is not \
         under LOGS (/var/log/skyhook/sk1): not read; the last 4 KiB of its output",
    );
}

/// While a stage runs, its record has no steps yet; the step's log is there to read.
#[test]
fn a_running_stage_points_to_the_log_of_its_step() {
    let host = FakeHost::new();
    host.install_held_apply("exit 0");
    let agent = host
        .stage_cmd("apply")
        .timeout(std::time::Duration::from_secs(40))
        .spawn();
    host.wait_for("var/tmp/started", std::time::Duration::from_secs(20));
    let run = logs(&host, &[]);
    let step = logs(&host, &["--step", "held.sh"]);
    host.write("var/tmp/release", "");
    agent.wait().assert_success();
    run.assert_success();
    run.assert_stdout_contains(": apply, started ");
    run.assert_stdout_contains(", not finished\n");
    run.assert_stdout_contains(
        "\nthe run has not recorded its steps yet (it is running, or it ended without recording \
         its result): --step PATH shows a step's newest log\n",
    );
    step.assert_success();
    step.assert_stdout_contains("\n==> held.sh: /var/log/skyhook/sk1/pkg/1.0.0/held.sh-");
}
