//! SPEC §1.4 (ext): the read-only subcommands `validate`, `plan` and `status` (the `interrupts`
//! subcommands belong to the interrupt suite). Output wording is not normative: these tests pin
//! exit codes, the facts the output must carry, and that nothing is written or run.

use serde_json::{Value, json};

use crate::util::{BOOT_ID, COPY_DIR, FakeHost, HISTORY, Package, Run, Step, b64, python_history};

fn off_host() -> Package {
    Package::new()
        .step("apply", Step::new("s1.sh").on_host(false))
        .step("apply", Step::new("s2.sh").on_host(false).always_run())
        .step("apply-check", Step::new("s1_check.sh").on_host(false))
}

fn validate(host: &FakeHost) -> Run {
    let dir = host.path(COPY_DIR);
    host.agent().args(["validate", dir.to_str().unwrap()]).run()
}

fn combined(run: &Run) -> String {
    format!("{}{}", run.out(), run.err())
}

#[test]
fn validate_accepts_a_valid_package_and_writes_nothing() {
    let host = FakeHost::new();
    host.install(&off_host());
    let before = host.snapshot();
    validate(&host).assert_success();
    before.assert_unchanged(&host.snapshot(), "validate");
}

#[test]
fn validate_reports_errors_with_json_paths() {
    let host = FakeHost::new();
    let mut cfg = off_host().config_json();
    cfg["modes"]["apply"][1]["returncodes"] = json!([]);
    host.install(&off_host().with_config(&cfg));
    let before = host.snapshot();
    let run = validate(&host);
    run.assert_code(1);
    assert!(
        combined(&run).contains("modes.apply[1].returncodes"),
        "{run:?}"
    );
    before.assert_unchanged(&host.snapshot(), "validate");
}

#[test]
fn validate_rejects_unknown_step_fields() {
    let host = FakeHost::new();
    let mut cfg = off_host().config_json();
    cfg["modes"]["apply"][0]["surprise_field"] = json!(true);
    host.install(&off_host().with_config(&cfg));
    let run = validate(&host);
    run.assert_code(1);
    assert!(combined(&run).contains("surprise_field"), "{run:?}");
}

#[test]
fn validate_rejects_missing_step_files() {
    let host = FakeHost::new();
    host.install(&off_host().without_script("s2.sh"));
    let run = validate(&host);
    run.assert_code(1);
    assert!(combined(&run).contains("s2.sh"), "{run:?}");
}

#[test]
fn validate_rejects_missing_expected_config_files() {
    let host = FakeHost::new();
    host.install(&off_host().expect_config_file("a.conf"));
    let run = validate(&host);
    run.assert_code(1);
    assert!(combined(&run).contains("a.conf"), "{run:?}");
}

fn plan(host: &FakeHost, mode: &str) -> Run {
    host.agent()
        .args(["plan", mode, &host.root_str(), COPY_DIR])
        .run()
}

/// The plan line of step `path` (the first stdout line naming it).
#[track_caller]
fn plan_line(run: &Run, path: &str) -> String {
    run.out()
        .lines()
        .find(|l| l.contains(path))
        .unwrap_or_else(|| panic!("the plan does not mention {path}\n{run:?}"))
        .to_owned()
}

#[test]
fn plan_runs_nothing_and_writes_nothing() {
    let host = FakeHost::new();
    host.install(&off_host());
    let before = host.snapshot();
    let run = plan(&host, "apply");
    run.assert_success();
    assert!(plan_line(&run, "s1.sh").contains("run"), "{run:?}");
    assert!(host.ran().is_empty());
    before.assert_unchanged(&host.snapshot(), "plan");
}

#[test]
fn plan_shows_completed_steps_as_skipped() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply").assert_success();
    let before = host.snapshot();
    let run = plan(&host, "apply");
    run.assert_success();
    assert!(plan_line(&run, "s1.sh").contains("skip"), "{run:?}");
    assert!(!plan_line(&run, "s2.sh").contains("skip"), "{run:?}");
    before.assert_unchanged(&host.snapshot(), "plan");
    assert_eq!(host.ran_count("s1.sh"), 1);
}

#[test]
fn every_reader_finds_the_same_state_without_skyhook_root_dir() {
    // The operator's layout: markers under /var/lib/skyhook/sk1, nothing in /etc/skyhook.
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply").assert_success();
    assert!(
        !host.exists("etc/skyhook/flags"),
        "the run used the operator's layout"
    );
    let before = host.snapshot();
    let root = host.root_str();
    let found = "state: /var/lib/skyhook/sk1 (logs: /var/log/skyhook/sk1; found on the host)";
    let without_env = |args: &[&str]| {
        host.agent()
            .env_remove("SKYHOOK_ROOT_DIR")
            .env_remove("SKYHOOK_LOG_DIR")
            .args(args)
            .run()
    };

    let planned = without_env(&["plan", "apply", &root, COPY_DIR]);
    planned.assert_success();
    assert_eq!(planned.out().lines().nth(1), Some(found), "{planned:?}");
    assert!(plan_line(&planned, "s1.sh").contains("skip"), "{planned:?}");
    planned.assert_stdout_contains("step markers: /var/lib/skyhook/sk1/flags/pkg/1.0.0");
    planned.assert_stdout_contains("summary: 1 step to run, 1 to skip");

    let status = without_env(&["status", &root]);
    status.assert_success();
    assert_eq!(status.out().lines().nth(1), Some(found), "{status:?}");

    let reset = without_env(&["reset", &root, COPY_DIR, "--step", "s1.sh"]);
    reset.assert_success();
    assert_eq!(reset.out().lines().nth(1), Some(found), "{reset:?}");

    let v: Value = serde_json::from_slice(
        &without_env(&["plan", "apply", &root, COPY_DIR, "--format", "json"]).stdout,
    )
    .unwrap();
    assert_eq!(v["state_dir"], "/var/lib/skyhook/sk1", "{v:#}");
    assert_eq!(v["state_source"], "found", "{v:#}");

    // --state-dir on plan: an empty directory has no markers, so every step runs.
    let elsewhere = without_env(&[
        "plan",
        "apply",
        &root,
        COPY_DIR,
        "--state-dir",
        "/elsewhere",
    ]);
    elsewhere.assert_success();
    elsewhere
        .assert_stdout_contains("state: /elsewhere (logs: /var/log/skyhook; from --state-dir)");
    assert!(
        plan_line(&elsewhere, "s1.sh").contains("run"),
        "{elsewhere:?}"
    );
    before.assert_unchanged(&host.snapshot(), "readers");
}

#[test]
fn plan_refuses_to_choose_between_several_state_directories() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply").assert_success();
    host.mkdir("var/lib/skyhook/sk2/flags");
    let run = host
        .agent()
        .env_remove("SKYHOOK_ROOT_DIR")
        .args(["plan", "apply", &host.root_str(), COPY_DIR])
        .run();
    run.assert_code(2);
    run.assert_stderr_contains(
        "several state directories hold agent state (/var/lib/skyhook/sk1, /var/lib/skyhook/sk2); \
         choose one with --state-dir",
    );
    assert!(run.stdout.is_empty(), "{run:?}");
}

#[test]
fn status_reports_versions_without_writing() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply").assert_success();
    host.stage("apply-check").assert_success();
    let before = host.snapshot();
    let run = host.agent().args(["status", &host.root_str()]).run();
    run.assert_success();
    let out = run.out();
    assert!(out.contains("pkg") && out.contains("1.0.0"), "{run:?}");
    before.assert_unchanged(&host.snapshot(), "status");
}

#[test]
fn status_json_is_json() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply-check").assert_success();
    let run = host
        .agent()
        .args(["status", &host.root_str(), "--json"])
        .run();
    run.assert_success();
    let v: Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("status --json: {e}\n{run:?}"));
    assert!(v.to_string().contains("1.0.0"), "{v:#}");
}

#[test]
fn subcommands_have_help_and_reject_bad_flags() {
    let host = FakeHost::new();
    for sub in ["validate", "plan", "status"] {
        host.agent().args([sub, "--help"]).run().assert_success();
        host.agent()
            .args([sub, "--no-such-flag"])
            .run()
            .assert_code(2);
    }
}

// ---------------------------------------------------------------------------------------------
// validate
// ---------------------------------------------------------------------------------------------

#[test]
fn validate_json_lists_findings_with_paths_and_severities() {
    let host = FakeHost::new();
    let mut cfg = off_host().config_json();
    cfg["modes"]["apply"][1]["returncodes"] = json!([]);
    host.install(&off_host().with_config(&cfg));
    let dir = host.path(COPY_DIR);
    let run = host
        .agent()
        .args(["validate", dir.to_str().unwrap(), "--format", "json"])
        .run();
    run.assert_code(1);
    let v: Value = serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{run:?}"));
    assert_eq!(v["valid"], json!(false), "{v:#}");
    assert_eq!(v["errors"], json!(1), "{v:#}");
    let findings = v["findings"].as_array().unwrap();
    assert!(
        findings.iter().any(|f| f["severity"] == "error"
            && f["path"] == "modes.apply[1].returncodes"
            && f["message"] == "must contain at least one code"),
        "{v:#}"
    );
    // s2.sh has no s2_check.sh: a warning, not an error.
    assert!(
        findings
            .iter()
            .any(|f| f["severity"] == "warning" && f["path"] == "modes.apply[1].path"),
        "{v:#}"
    );
}

#[test]
fn validate_pairing_warnings_alone_exit_zero() {
    let host = FakeHost::new();
    host.install(&off_host());
    let run = validate(&host);
    run.assert_success();
    let out = run.out();
    assert!(
        out.contains(r#"warning: modes.apply[1].path: no check step "s2_check.sh" for "s2.sh" in modes.apply-check"#),
        "{run:?}"
    );
    assert!(
        out.contains("valid: package pkg 1.0.0, 1 warning"),
        "{run:?}"
    );
}

#[test]
fn validate_rejects_a_step_path_that_is_a_directory() {
    let host = FakeHost::new();
    host.install(&off_host().without_script("s2.sh"));
    host.mkdir(&format!("{COPY_DIR}/skyhook_dir/s2.sh"));
    let run = validate(&host);
    run.assert_code(1);
    assert!(combined(&run).contains("modes.apply[1].path"), "{run:?}");
}

#[test]
fn validate_reports_a_missing_config_json() {
    let host = FakeHost::new();
    host.mkdir(COPY_DIR);
    let run = validate(&host);
    run.assert_code(1);
    assert!(run.out().contains("config.json"), "{run:?}");
}

#[test]
fn validate_accepts_the_bundled_example_package() {
    let host = FakeHost::new();
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/packages/gpu-node-tuning"
    );
    let run = host.agent().args(["validate", dir]).run();
    run.assert_success();
    assert!(
        run.out().contains("valid: package gpu-node-tuning"),
        "{run:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// plan (stages)
// ---------------------------------------------------------------------------------------------

/// The plan entry of a step or operation: its line (`  <action>  <path>`) and the indented
/// lines that follow it (reason, header, ...), trimmed.
#[track_caller]
fn plan_details(run: &Run, path: &str) -> String {
    let out = run.out();
    let is_entry = |l: &str| {
        l.starts_with("  ")
            && !l.starts_with("   ")
            && l.split_whitespace().nth(1).map(|p| p.trim_end_matches(':')) == Some(path)
    };
    let mut lines = out.lines().skip_while(|l| !is_entry(l));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("no plan entry for {path}\n{run:?}"));
    let mut text = vec![first.to_owned()];
    text.extend(
        lines
            .take_while(|l| l.starts_with("               "))
            .map(|l| l.trim().to_owned()),
    );
    text.join("\n")
}

#[test]
fn plan_of_a_fresh_host_runs_every_step_and_shows_the_resolved_arguments() {
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step(
                "apply",
                Step::new("s1.sh").on_host(false).args(&["a", "env:FOO"]),
            )
            .step("apply-check", Step::new("s1_check.sh").on_host(false)),
    );
    let before = host.snapshot();
    let run = host
        .agent()
        .env("FOO", "resolved-foo")
        .args(["plan", "apply", &host.root_str(), COPY_DIR])
        .run();
    run.assert_success();
    let s1 = plan_details(&run, "s1.sh");
    assert!(s1.starts_with("  run "), "{s1}");
    assert!(s1.contains("no completion marker"), "{s1}");
    assert!(
        s1.contains("header: apply s1.sh ['a', 'env:FOO'] [0] Idempotence.Auto False"),
        "{s1}"
    );
    assert!(s1.contains("arguments: ['a', 'resolved-foo']"), "{s1}");
    assert!(
        s1.contains("note: the step file's mode 644 would get the execute bits"),
        "the step file is 0644: {s1}"
    );
    before.assert_unchanged(&host.snapshot(), "plan");
    assert!(host.ran().is_empty());
}

#[test]
fn plan_explains_each_rule_of_the_decision_table() {
    let host = FakeHost::new();
    let pkg = Package::new()
        .step("apply", Step::new("s1.sh").on_host(false))
        .step("apply", Step::new("s2.sh").on_host(false).always_run())
        .step("apply-check", Step::new("s1_check.sh").on_host(false))
        .step("config", Step::new("c.sh").on_host(false))
        .step("config-check", Step::new("c_check.sh").on_host(false));
    host.install(&pkg);
    host.stage("apply").assert_success();
    host.stage("config").assert_success();
    let before = host.snapshot();

    let apply = plan(&host, "apply");
    assert!(plan_details(&apply, "s1.sh").contains("completion marker present"));
    assert!(plan_details(&apply, "s1.sh").contains(&pkg.find("s1.sh").native_marker()));
    assert!(plan_details(&apply, "s2.sh").contains("idempotence is disabled for this step"));

    let always = host
        .agent()
        .env("OVERLAY_ALWAYS_RUN_STEP", "true")
        .args(["plan", "apply", &host.root_str(), COPY_DIR])
        .run();
    always.assert_success();
    let s1 = plan_details(&always, "s1.sh");
    assert!(
        s1.starts_with("  run ") && s1.contains("always-run policy is enabled"),
        "{s1}"
    );

    let config = plan(&host, "config");
    let c = plan_details(&config, "c.sh");
    assert!(
        c.starts_with("  run ") && c.contains("this stage always runs its steps"),
        "{c}"
    );

    let check = plan(&host, "apply-check");
    let c = plan_details(&check, "s1_check.sh");
    assert!(
        c.starts_with("  run ") && c.contains("check stages run every step"),
        "{c}"
    );

    before.assert_unchanged(&host.snapshot(), "plan");
}

#[test]
fn plan_of_an_upgrade_shows_the_versions_from_history_without_touching_it() {
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step("upgrade", Step::new("up.sh").on_host(false).upgrade_step())
            .step("upgrade-check", Step::new("up_check.sh").on_host(false)),
    );
    host.write(HISTORY, python_history("0.9.0", &["0.9.0"]));
    let before = host.snapshot();
    let run = plan(&host, "upgrade");
    run.assert_success();
    assert!(
        run.out()
            .contains("versions: previous 0.9.0, current 1.0.0"),
        "{run:?}"
    );
    let up = plan_details(&run, "up.sh");
    assert!(up.contains("arguments: ['0.9.0', '1.0.0']"), "{up}");
    assert!(up.contains("env: PREVIOUS_VERSION=0.9.0"), "{up}");
    assert!(up.contains("env: CURRENT_VERSION=1.0.0"), "{up}");
    before.assert_unchanged(&host.snapshot(), "plan");
}

#[test]
fn plan_reports_a_corrupt_history_and_leaves_it_in_place() {
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step("upgrade", Step::new("up.sh").on_host(false).upgrade_step())
            .step("upgrade-check", Step::new("up_check.sh").on_host(false)),
    );
    host.write(HISTORY, "{not json");
    let before = host.snapshot();
    let run = plan(&host, "upgrade");
    run.assert_success();
    assert!(
        run.out()
            .contains("versions: previous unknown, current 1.0.0"),
        "{run:?}"
    );
    assert!(run.out().contains("corrupt"), "{run:?}");
    before.assert_unchanged(&host.snapshot(), "plan");
    // status reads the same file and leaves it in place too; a history it cannot use is an
    // error.
    host.agent()
        .args(["status", &host.root_str()])
        .run()
        .assert_code(1)
        .assert_stdout_contains("the history file is corrupt");
    before.assert_unchanged(&host.snapshot(), "status");
}

#[test]
fn plan_predicts_a_missing_environment_variable_and_exits_1() {
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step(
                "apply",
                Step::new("s1.sh").on_host(false).args(&["env:NOPE"]),
            )
            .step("apply", Step::new("s2.sh").on_host(false))
            .step("apply-check", Step::new("s1_check.sh").on_host(false)),
    );
    let before = host.snapshot();
    let run = plan(&host, "apply");
    run.assert_code(1);
    let s1 = plan_details(&run, "s1.sh");
    assert!(s1.starts_with("  fail "), "{s1}");
    assert!(
        s1.contains("expected environment variables do not exist: NOPE"),
        "{s1}"
    );
    assert!(
        plan_details(&run, "s2.sh").starts_with("  not-reached "),
        "{run:?}"
    );
    assert!(run.out().contains("the run would fail: "), "{run:?}");
    before.assert_unchanged(&host.snapshot(), "plan");
}

#[test]
fn plan_predicts_a_missing_expected_config_file() {
    let host = FakeHost::new();
    host.install(&off_host().expect_config_file("a.conf"));
    let before = host.snapshot();
    let run = plan(&host, "apply");
    run.assert_code(1);
    assert!(
        run.out()
            .contains(r#"expected config file "a.conf" was not found"#),
        "{run:?}"
    );
    before.assert_unchanged(&host.snapshot(), "plan");
}

#[test]
fn plan_json_is_json() {
    let host = FakeHost::new();
    host.install(&off_host());
    let run = host
        .agent()
        .args([
            "plan",
            "apply",
            &host.root_str(),
            COPY_DIR,
            "--format",
            "json",
        ])
        .run();
    run.assert_success();
    let v: Value = serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{run:?}"));
    assert_eq!(v["mode"], "apply");
    assert_eq!(v["steps"][0]["path"], "s1.sh");
    assert_eq!(v["steps"][0]["action"], "run");
    assert_eq!(v["steps"][0]["reason"], "no completion marker");
    assert_eq!(v["steps"][0]["arguments"], json!([]));
}

#[test]
fn plan_of_an_invalid_package_fails_like_the_run() {
    let host = FakeHost::new();
    let mut cfg = off_host().config_json();
    cfg["modes"]["apply"][1]["returncodes"] = json!([]);
    host.install(&off_host().with_config(&cfg));
    let before = host.snapshot();
    plan(&host, "apply")
        .assert_code(1)
        .assert_stderr_contains("modes.apply[1].returncodes: must contain at least one code");
    before.assert_unchanged(&host.snapshot(), "plan");
}

#[test]
fn plan_usage_errors_exit_2_and_unknown_modes_are_no_ops() {
    let host = FakeHost::new();
    let root = host.root_str();
    host.agent()
        .args(["plan", "interrupt", &root, COPY_DIR])
        .run()
        .assert_code(2)
        .assert_stderr_contains("interrupt data must not be empty");
    host.agent()
        .args(["plan", "apply", &root, COPY_DIR, "x"])
        .run()
        .assert_code(2)
        .assert_stderr_contains(r#"stage "apply" does not accept interrupt data"#);
    host.agent()
        .args(["plan", "apply", "relative", COPY_DIR])
        .run()
        .assert_code(2);
    host.agent().args(["plan", "apply"]).run().assert_code(2);
    let before = host.snapshot();
    host.agent()
        .args(["plan", "future-mode", &root, COPY_DIR])
        .run()
        .assert_success()
        .assert_stdout_contains("does not support the stage");
    before.assert_unchanged(&host.snapshot(), "plan");
}

// ---------------------------------------------------------------------------------------------
// plan (interrupts)
// ---------------------------------------------------------------------------------------------

/// Interrupt markers of the base environment's resource `abc_pkg_1.0.0`.
const RID_FLAGS: &str = "var/lib/skyhook/sk1/interrupts/flags/abc_pkg_1.0.0";

fn plan_interrupt(host: &FakeHost, json: &str) -> Run {
    host.agent()
        .args([
            "plan",
            "interrupt",
            &host.root_str(),
            COPY_DIR,
            &b64(json.as_bytes()),
        ])
        .run()
}

#[test]
fn plan_interrupt_lists_each_operation_and_writes_nothing() {
    let host = FakeHost::new();
    host.write(
        &format!("{RID_FLAGS}/service_restart_0.complete"),
        "2026-11-30T10:00:00Z",
    );
    let before = host.snapshot();
    let run = plan_interrupt(
        &host,
        r#"{"type":"service_restart","services":["containerd","kubelet"]}"#,
    );
    run.assert_success();
    let op0 = plan_details(&run, "service_restart_0");
    assert!(
        op0.starts_with("  skip ") && op0.contains("systemctl daemon-reload"),
        "{op0}"
    );
    assert!(op0.contains("completion marker present"), "{op0}");
    let op1 = plan_details(&run, "service_restart_1");
    assert!(
        op1.starts_with("  run ") && op1.contains("systemctl restart containerd"),
        "{op1}"
    );
    let op2 = plan_details(&run, "service_restart_2");
    assert!(
        op2.starts_with("  run ") && op2.contains("systemctl restart kubelet"),
        "{op2}"
    );
    before.assert_unchanged(&host.snapshot(), "plan interrupt");
    assert!(!host.exists("var/tmp/calls.log"), "nothing ran");
}

#[test]
fn plan_interrupt_follows_the_reboot_protocol() {
    let host = FakeHost::new();
    let node_restart = r#"{"type":"node_restart"}"#;

    // Fresh: the reboot would run.
    let run = plan_interrupt(&host, node_restart);
    run.assert_success();
    let op = plan_details(&run, "node_restart_0");
    assert!(op.starts_with("  run ") && op.contains(": reboot"), "{op}");
    assert!(op.contains("attempt 1 of 3"), "{op}");

    // Pending under the current boot: the host has not restarted, reboot again.
    host.write(
        &format!("{RID_FLAGS}/node_restart_0.pending"),
        format!("boot-id:{BOOT_ID}\n"),
    );
    host.write(
        &format!("{RID_FLAGS}/node_restart_0.attempts"),
        format!("boot-id:{BOOT_ID}\nattempts:1\n"),
    );
    let before = host.snapshot();
    let op = plan_details(&plan_interrupt(&host, node_restart), "node_restart_0");
    assert!(
        op.starts_with("  run ") && op.contains("reboot again (attempt 2 of 3)"),
        "{op}"
    );
    assert!(op.contains(BOOT_ID), "{op}");
    before.assert_unchanged(&host.snapshot(), "plan interrupt");

    // The loop guard.
    host.write(
        &format!("{RID_FLAGS}/node_restart_0.attempts"),
        format!("boot-id:{BOOT_ID}\nattempts:3\n"),
    );
    let before_guard = host.snapshot();
    let run = plan_interrupt(&host, node_restart);
    run.assert_code(1);
    let op = plan_details(&run, "node_restart_0");
    assert!(
        op.starts_with("  fail ") && op.contains("loop guard would refuse"),
        "{op}"
    );
    before_guard.assert_unchanged(&host.snapshot(), "plan interrupt");

    // A new boot ID: complete after reboot, nothing runs.
    host.write(
        &format!("{RID_FLAGS}/node_restart_0.attempts"),
        format!("boot-id:{BOOT_ID}\nattempts:1\n"),
    );
    host.write("proc/sys/kernel/random/boot_id", "22222222-new-boot\n");
    let before = host.snapshot();
    let run = plan_interrupt(&host, node_restart);
    run.assert_success();
    let op = plan_details(&run, "node_restart_0");
    assert!(op.starts_with("  skip "), "{op}");
    assert!(
        op.contains(&format!("complete after reboot: pending with boot ID {BOOT_ID}, current boot ID 22222222-new-boot")),
        "{op}"
    );
    before.assert_unchanged(&host.snapshot(), "plan interrupt");
    assert!(!host.exists("var/tmp/calls.log"), "nothing ran");
}

#[test]
fn plan_interrupt_rejects_bad_payloads_like_the_run() {
    let host = FakeHost::new();
    plan_interrupt(&host, r#"{"type":"warp_drive"}"#)
        .assert_code(1)
        .assert_stderr_contains(r#"unknown interrupt "warp_drive" must be one of: "#);
    let run = host
        .agent()
        .env_remove("SKYHOOK_RESOURCE_ID")
        .args([
            "plan",
            "interrupt",
            &host.root_str(),
            COPY_DIR,
            &b64(br#"{"type":"no_op"}"#),
        ])
        .run();
    run.assert_code(1);
}

#[test]
fn plan_interrupt_of_kinds_without_commands() {
    let host = FakeHost::new();
    let before = host.snapshot();
    let run = plan_interrupt(&host, r#"{"type":"no_op"}"#);
    run.assert_success();
    assert!(
        plan_details(&run, "no_op").starts_with("  record "),
        "{run:?}"
    );
    plan_interrupt(&host, r#"{"type":"script_interrupt"}"#)
        .assert_success()
        .assert_stdout_contains("no operations");
    before.assert_unchanged(&host.snapshot(), "plan interrupt");
}

// ---------------------------------------------------------------------------------------------
// status
// ---------------------------------------------------------------------------------------------

#[test]
fn status_shows_markers_checks_history_and_the_last_run() {
    let host = FakeHost::new();
    let pkg = off_host();
    host.install(&pkg);
    host.stage("apply").assert_success();
    host.stage("apply-check").assert_success();
    let before = host.snapshot();
    let run = host.agent().args(["status", &host.root_str()]).run();
    run.assert_success();
    let out = run.out();
    assert!(
        out.contains("package pkg: done\n  current version: 1.0.0"),
        "{run:?}"
    );
    assert!(
        out.contains("  version 1.0.0\n    completion markers: 4"),
        "{run:?}"
    );
    for step in ["s1.sh", "s2.sh"] {
        let s = pkg.find(step);
        assert!(out.contains(&s.legacy_marker()), "{run:?}");
        assert!(out.contains(&s.native_marker()), "{run:?}");
    }
    assert!(out.contains("    last apply: exit 0 at "), "{run:?}");
    assert!(
        out.contains("  last run: 1.0.0 apply-check: exit 0 at "),
        "{run:?}"
    );
    assert!(out.contains("  s1_check.sh passed"), "{run:?}");
    assert!(
        out.contains("check stages whose checks all passed: apply-check"),
        "{run:?}"
    );
    assert!(out.contains(&format!("boot ID: {BOOT_ID}")), "{run:?}");
    before.assert_unchanged(&host.snapshot(), "status");
}

#[test]
fn status_shows_failed_checks_and_the_error_of_the_last_run() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.run("apply-check", &[("FAIL_STEPS", "s1_check.sh")])
        .assert_code(1);
    let run = host.agent().args(["status", &host.root_str()]).run();
    run.assert_code(1);
    assert!(run.out().contains("  s1_check.sh FAILED"), "{run:?}");
    assert!(
        run.out()
            .contains("    error: apply-check failed: 1 of 1 checks did not pass"),
        "{run:?}"
    );
}

#[test]
fn status_shows_interrupt_progress_per_resource_id() {
    let host = FakeHost::new();
    host.write(
        &format!("{RID_FLAGS}/service_restart_0.complete"),
        "2026-11-30T10:00:00Z",
    );
    host.write(
        &format!("{RID_FLAGS}/node_restart_0.pending"),
        "boot-id:old-boot\n",
    );
    host.write(
        "var/lib/skyhook/sk1/interrupts/flags/sk2-uid_other_2.0.0/node_restart_0.pending",
        format!("boot-id:{BOOT_ID}\n"),
    );
    host.write(
        "var/lib/skyhook/sk1/interrupts/flags/sk2-uid_other_2.0.0/node_restart_0.attempts",
        format!("boot-id:{BOOT_ID}\nattempts:2\n"),
    );
    let before = host.snapshot();
    let run = host
        .agent()
        .args(["status", &host.root_str(), "--json"])
        .run();
    run.assert_success();
    let v: Value = serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{run:?}"));
    let pkg = v["states"][0]["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "pkg")
        .unwrap();
    let ops = &pkg["interrupts"][0]["operations"];
    assert_eq!(pkg["interrupts"][0]["resource_id"], "abc_pkg_1.0.0");
    assert_eq!(ops[0]["operation"], "node_restart_0");
    assert_eq!(ops[0]["state"], "pending");
    assert_eq!(ops[0]["pending_boot_id"], "old-boot");
    assert_eq!(ops[1]["operation"], "service_restart_0");
    assert_eq!(ops[1]["state"], "complete");
    let other = v["states"][0]["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "other")
        .unwrap();
    assert_eq!(other["interrupts"][0]["operations"][0]["attempts"], 2);
    assert_eq!(v["states"][0]["boot_id"], BOOT_ID);

    let text = host.agent().args(["status", &host.root_str()]).run();
    text.assert_success();
    assert!(
        text.out().contains(
            "node_restart_0 pending: reboot requested in boot old-boot; the host has booted since"
        ),
        "{text:?}"
    );
    assert!(
        text.out().contains(
            "reboot requested in boot 11111111…, waiting for a new boot (attempts 2 of 3)"
        ),
        "{text:?}"
    );
    before.assert_unchanged(&host.snapshot(), "status");
}

#[test]
fn status_honors_skyhook_root_dir() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply").assert_success();
    let run = host
        .agent()
        .env("SKYHOOK_ROOT_DIR", "/elsewhere")
        .args(["status", &host.root_str()])
        .run();
    run.assert_success();
    assert!(
        run.out()
            .contains("no package state found under /elsewhere"),
        "{run:?}"
    );
}

#[test]
fn status_of_an_empty_host_writes_nothing() {
    let host = FakeHost::new();
    let before = host.snapshot();
    host.agent()
        .args(["status", &host.root_str()])
        .run()
        .assert_success()
        .assert_stdout_contains("no package state found");
    before.assert_unchanged(&host.snapshot(), "status");
}
