//! Upgrading across agents: state left by the Python (legacy markers, compact history) and Go
//! (native markers) agents is honoured, and the state this agent writes carries the exact names
//! the Python agent looks for (transcripts 01, 04, 11, 12).

use crate::util::{
    CHECK_RESULTS, FOO, FakeHost, HISTORY, PKG_FLAGS, Package, Step, python_history,
};

const PY_MARKER: &str = "last_run: 2026-11-30T10:27:28.149141\nstep_always_runs: False";
const GO_MARKER: &str = "last_run: 2026-11-30T10:27:28.149141Z\nstep_always_runs: false";

#[test]
fn python_markers_mark_steps_completed() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.write(
        &format!("{PKG_FLAGS}/s1.sh_WydhJywgJ2VudjpGT08nXV9bMF0="),
        PY_MARKER,
    );
    host.write(
        &format!("{PKG_FLAGS}/s2.sh_W11fWzBd"),
        "last_run: 2026-11-30T10:27:29.224926\nstep_always_runs: True",
    );
    let run = host.run("apply", &[FOO]);
    run.assert_success();
    assert_eq!(host.ran_count("s1.sh"), 0, "completed by the Python agent");
    assert_eq!(
        host.ran_count("s2.sh"),
        1,
        "idempotence disabled: runs again"
    );
    run.assert_stderr_line_contains(&["skipping completed step", "s1.sh"]);
}

#[test]
fn nested_python_markers_mark_steps_completed() {
    require_root!();
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step("apply", Step::new("q.sh").args(&["?"]))
            .step("apply-check", Step::new("q_check.sh")),
    );
    host.write(&format!("{PKG_FLAGS}/q.sh_Wyc/J11fWzBd"), PY_MARKER);
    host.stage("apply").assert_success();
    assert_eq!(host.ran_count("q.sh"), 0);
}

#[test]
fn go_native_markers_mark_steps_completed() {
    require_root!();
    let host = FakeHost::new();
    let pkg = Package::standard();
    host.install(&pkg);
    host.write(
        &format!("{PKG_FLAGS}/{}", pkg.find("s1.sh").native_marker()),
        GO_MARKER,
    );
    host.run("apply", &[FOO]).assert_success();
    assert_eq!(host.ran_count("s1.sh"), 0);
}

#[test]
fn markers_of_another_version_do_not_count() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.write(
        "var/lib/skyhook/sk1/flags/pkg/0.9.0/s1.sh_WydhJywgJ2VudjpGT08nXV9bMF0=",
        PY_MARKER,
    );
    host.run("apply", &[FOO]).assert_success();
    assert_eq!(host.ran_count("s1.sh"), 1);
}

#[test]
fn markers_with_other_arguments_do_not_count() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    // s1.sh with arguments [] instead of ['a', 'env:FOO'].
    host.write(&format!("{PKG_FLAGS}/s1.sh_W11fWzBd"), PY_MARKER);
    host.run("apply", &[FOO]).assert_success();
    assert_eq!(host.ran_count("s1.sh"), 1);
}

#[test]
fn upgrade_after_the_python_agent_reads_its_history() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.write(HISTORY, python_history("0.9.0", &["0.9.0"]));
    host.write(
        &format!("{PKG_FLAGS}/s1.sh_WydhJywgJ2VudjpGT08nXV9bMF0="),
        PY_MARKER,
    );
    let run = host.stage("upgrade");
    run.assert_success();
    run.assert_stdout_contains("upgrade up2.sh ['0.9.0', '1.0.0'] [0] Idempotence.Auto True\n");
    run.assert_stdout_contains("[up2.sh] args(2): 0.9.0 1.0.0\n");
}

#[test]
fn written_legacy_marker_names_are_the_python_agents() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.run("apply", &[FOO]).assert_success();
    host.stage("upgrade").assert_success();
    for name in [
        "s1.sh_WydhJywgJ2VudjpGT08nXV9bMF0=",
        "s2.sh_W11fWzBd",
        "up.sh_Wyd1MSddX1swXQ==",
        "up2.sh_W11fWzBd",
    ] {
        assert!(
            host.is_file(&format!("{PKG_FLAGS}/{name}")),
            "{name} missing from {:?}",
            host.files_under(PKG_FLAGS)
        );
    }
}

#[test]
fn written_check_results_match_the_python_format() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.stage("apply-check").assert_success();
    assert_eq!(
        host.read(CHECK_RESULTS),
        b"s1_check.sh False\ns2_check.sh False"
    );
}

#[test]
fn written_history_has_the_keys_the_python_agent_reads() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.stage("apply-check").assert_success();
    let v: serde_json::Value = serde_json::from_slice(&host.read(HISTORY)).unwrap();
    assert_eq!(v["current-version"], "1.0.0");
    let entry = &v["history"][0];
    assert_eq!(entry["version"], "1.0.0");
    assert!(entry["time"].is_string());
}

#[test]
fn uninstall_check_removes_python_written_markers() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.write(
        &format!("{PKG_FLAGS}/s1.sh_WydhJywgJ2VudjpGT08nXV9bMF0="),
        PY_MARKER,
    );
    host.write(&format!("{PKG_FLAGS}/un.sh_W11fWzBd"), PY_MARKER);
    host.stage("uninstall-check").assert_success();
    assert_eq!(host.files_under(PKG_FLAGS), Vec::<String>::new());
}
