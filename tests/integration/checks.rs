//! SPEC §8.8–§8.9: check stages, `check_results`, `*_ALL_CHECKED`, versions and history.

use serde_json::Value;

use crate::util::{
    ALL_CHECKED, CHECK_RESULTS, FLAGS, FOO, FakeHost, HISTORY, PKG_FLAGS, Package, START, Step,
    assert_recent, parse_rfc3339_nano_utc, python_history,
};

/// Parse the history file; returns (current-version, [(version, time)]).
fn history(host: &FakeHost) -> (String, Vec<(String, String)>) {
    let v: Value = serde_json::from_slice(&host.read(HISTORY)).expect("history is JSON");
    let current = v["current-version"]
        .as_str()
        .expect("current-version")
        .to_owned();
    let entries = v["history"]
        .as_array()
        .expect("history array")
        .iter()
        .map(|e| {
            (
                e["version"].as_str().unwrap().to_owned(),
                e["time"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (current, entries)
}

/// The exact bytes of a history file this agent writes (2-space indent, trailing newline).
fn expected_history_bytes(current: &str, entries: &[(String, String)]) -> String {
    let items: Vec<String> = entries
        .iter()
        .map(|(v, t)| {
            format!("    {{\n      \"version\": \"{v}\",\n      \"time\": \"{t}\"\n    }}")
        })
        .collect();
    format!(
        "{{\n  \"current-version\": \"{current}\",\n  \"history\": [\n{}\n  ]\n}}\n",
        items.join(",\n")
    )
}

#[test]
fn apply_check_runs_every_check_even_after_a_failure() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    let run = host.run("apply-check", &[("FAIL_STEPS", "s1_check.sh")]);
    run.assert_code(1);
    assert_eq!(host.ran(), ["s1_check.sh ", "s2_check.sh "]);
    assert_eq!(
        host.read_string(CHECK_RESULTS),
        "s1_check.sh True\ns2_check.sh False"
    );
    run.assert_stdout_contains(
        "apply-check s1_check.sh [] [0] Idempotence.Auto True\n[s1_check.sh] args(0): \n",
    );
    run.assert_stdout_contains("apply-check s2_check.sh [] [0] Idempotence.Auto True\n");
}

#[test]
fn check_results_mark_failed_checks_true_without_trailing_newline() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.run("apply-check", &[("FAIL_STEPS", "s2_check.sh")])
        .assert_code(1);
    assert_eq!(
        host.read(CHECK_RESULTS),
        b"s1_check.sh False\ns2_check.sh True"
    );
    assert!(!host.exists(ALL_CHECKED));
}

#[test]
fn successful_check_stage_writes_empty_all_checked() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.stage("apply-check").assert_success();
    assert_eq!(
        host.read(CHECK_RESULTS),
        b"s1_check.sh False\ns2_check.sh False"
    );
    assert!(host.is_file(ALL_CHECKED));
    assert!(host.read(ALL_CHECKED).is_empty());
    assert!(host.is_file(START));
}

#[test]
fn stale_all_checked_is_removed_before_checks_run() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.write(ALL_CHECKED, "");
    host.run("apply-check", &[("FAIL_STEPS", "s2_check.sh")])
        .assert_code(1);
    assert!(!host.exists(ALL_CHECKED));
}

#[test]
fn all_checked_is_named_after_the_check_mode() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    for mode in ["config-check", "post-interrupt-check"] {
        host.stage(mode).assert_success();
        assert!(
            host.is_file(&format!("{FLAGS}/{mode}_ALL_CHECKED")),
            "{mode}"
        );
    }
    assert!(
        !host.exists(HISTORY),
        "config and post-interrupt checks record no history"
    );
}

#[test]
fn check_stages_never_write_step_markers() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.stage("apply-check").assert_success();
    assert!(host.files_under("var/lib/skyhook/sk1/flags/pkg").is_empty());
}

#[test]
fn check_stages_ignore_existing_markers() {
    require_root!();
    let host = FakeHost::new();
    let pkg = Package::standard();
    host.install(&pkg);
    let check = pkg.find("s1_check.sh");
    host.write(
        &format!("{PKG_FLAGS}/{}", check.legacy_marker()),
        "last_run: x\nstep_always_runs: False",
    );
    host.write(
        &format!("{PKG_FLAGS}/{}", check.native_marker()),
        "last_run: x\nstep_always_runs: false",
    );
    host.stage("apply-check").assert_success();
    assert_eq!(host.ran_count("s1_check.sh"), 1);
}

#[test]
fn successful_apply_check_records_history() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.stage("apply-check").assert_success();
    let (current, entries) = history(&host);
    assert_eq!(current, "1.0.0");
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].0, "1.0.0");
    let t = parse_rfc3339_nano_utc(&entries[0].1)
        .unwrap_or_else(|| panic!("{} is not RFC3339Nano UTC", entries[0].1));
    assert_recent(t, "history time");
    assert_eq!(
        host.read_string(HISTORY),
        expected_history_bytes(&current, &entries)
    );
}

#[test]
fn failed_apply_check_records_no_history() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.run("apply-check", &[("FAIL_STEPS", "s1_check.sh")])
        .assert_code(1);
    assert!(!host.exists(HISTORY));
    assert!(!host.exists("var/lib/skyhook/sk1/history"));
}

#[test]
fn history_is_prepended_newest_first() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.write(HISTORY, python_history("0.9.0", &["0.9.0", "0.8.0"]));
    host.stage("apply-check").assert_success();
    let (current, entries) = history(&host);
    assert_eq!(current, "1.0.0");
    let versions: Vec<&str> = entries.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(versions, ["1.0.0", "0.9.0", "0.8.0"]);
}

#[test]
fn history_keeps_at_most_100_entries() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    let old: Vec<String> = (0..100).map(|i| format!("0.{}.0", 99 - i)).collect();
    let old_refs: Vec<&str> = old.iter().map(String::as_str).collect();
    host.write(HISTORY, python_history("0.99.0", &old_refs));
    host.stage("apply-check").assert_success();
    let (_, entries) = history(&host);
    assert_eq!(entries.len(), 100);
    assert_eq!(entries[0].0, "1.0.0");
    assert_eq!(entries[1].0, "0.99.0");
    assert_eq!(entries[99].0, "0.1.0", "the oldest entry is dropped");
}

#[test]
fn upgrade_without_history_uses_unknown_previous_version() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    let run = host.stage("upgrade");
    run.assert_success();
    run.assert_stdout_contains(
        "upgrade up.sh ['u1'] [0] Idempotence.Auto True\n\
         [up.sh] args(1): u1\n",
    );
    run.assert_stdout_contains("[up.sh] CURRENT_VERSION=1.0.0 PREVIOUS_VERSION=unknown\n");
    run.assert_stdout_contains(
        "upgrade up2.sh ['unknown', '1.0.0'] [0] Idempotence.Auto True\n\
         [up2.sh] args(2): unknown 1.0.0\n",
    );
    run.assert_stdout_contains("[up2.sh] CURRENT_VERSION=1.0.0 PREVIOUS_VERSION=unknown\n");
    assert!(!host.exists(HISTORY), "reading history never creates it");
}

#[test]
fn upgrade_markers_use_configured_arguments() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.stage("upgrade").assert_success();
    assert!(host.is_file(&format!("{PKG_FLAGS}/up.sh_Wyd1MSddX1swXQ==")));
    assert!(host.is_file(&format!("{PKG_FLAGS}/up2.sh_W11fWzBd")));
}

#[test]
fn upgrade_check_passes_versions_to_upgrade_steps() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    let run = host.stage("upgrade-check");
    run.assert_success();
    run.assert_stdout_contains(
        "upgrade-check up_check.sh ['unknown', '1.0.0'] [0] Idempotence.Auto True\n\
         [up_check.sh] args(2): unknown 1.0.0\n",
    );
    run.assert_stdout_contains(
        "upgrade-check up2_check.sh [] [0] Idempotence.Auto True\n\
         [up2_check.sh] args(0): \n",
    );
    run.assert_stdout_contains("[up2_check.sh] CURRENT_VERSION=1.0.0 PREVIOUS_VERSION=unknown\n");
    let (current, entries) = history(&host);
    assert_eq!(current, "1.0.0");
    assert_eq!(entries.len(), 1);
}

#[test]
fn upgrade_reads_the_python_history_format() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.write(HISTORY, python_history("0.9.0", &["0.9.0"]));
    let run = host.stage("upgrade");
    run.assert_success();
    run.assert_stdout_contains("upgrade up2.sh ['0.9.0', '1.0.0'] [0] Idempotence.Auto True\n");
    run.assert_stdout_contains("[up.sh] CURRENT_VERSION=1.0.0 PREVIOUS_VERSION=0.9.0\n");
    host.stage("upgrade-check").assert_success();
    let (current, entries) = history(&host);
    assert_eq!(current, "1.0.0");
    let versions: Vec<&str> = entries.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(versions, ["1.0.0", "0.9.0"]);
}

#[test]
fn upgrade_reads_history_this_agent_wrote() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.write(
        HISTORY,
        "{\n  \"current-version\": \"0.8.1\",\n  \"history\": [\n    {\n      \"version\": \"0.8.1\",\n      \"time\": \"2026-01-02T03:04:05.5Z\"\n    }\n  ]\n}\n",
    );
    let run = host.stage("upgrade");
    run.assert_success();
    run.assert_stdout_contains("upgrade up2.sh ['0.8.1', '1.0.0'] [0] Idempotence.Auto True\n");
}

#[test]
fn version_environment_overrides_step_env() {
    require_root!();
    let host = FakeHost::new();
    let pkg = Package::new()
        .step(
            "upgrade",
            Step::new("up.sh")
                .env("CURRENT_VERSION", "from-step-env")
                .env("PREVIOUS_VERSION", "from-step-env"),
        )
        .step("upgrade-check", Step::new("up_check.sh"));
    host.install(&pkg);
    let run = host.run("upgrade", &[("CURRENT_VERSION", "from-agent-env")]);
    run.assert_success();
    run.assert_stdout_contains("[up.sh] CURRENT_VERSION=1.0.0 PREVIOUS_VERSION=unknown\n");
}

#[test]
fn corrupt_history_is_backed_up_and_treated_as_unknown() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.write(HISTORY, "{");
    let run = host.stage("upgrade");
    run.assert_success();
    run.assert_stdout_contains("[up.sh] CURRENT_VERSION=1.0.0 PREVIOUS_VERSION=unknown\n");
    run.assert_stdout_contains("upgrade up2.sh ['unknown', '1.0.0'] [0] Idempotence.Auto True\n");
    assert_eq!(
        host.read_string("var/lib/skyhook/sk1/history/pkg.json.backup"),
        "{"
    );
    assert!(!host.exists(HISTORY));
    assert!(!run.err().is_empty(), "a warning is logged");
    host.stage("apply-check").assert_success();
    let (current, entries) = history(&host);
    assert_eq!(current, "1.0.0");
    assert_eq!(entries.len(), 1);
}

/// SPEC §5 (an empty state file is "unknown", with a warning) and §8.9 (an unusable history
/// file is moved to `.backup`): an empty file, a ledger whose `current-version` is empty,
/// missing or null, and one that is not a ledger at all.
#[test]
fn history_without_a_usable_current_version_is_backed_up_with_a_warning() {
    require_root!();
    for unusable in [
        "",
        " \n",
        r#"{"current-version": "", "history": []}"#,
        r#"{"history": [{"version": "0.9.0", "time": "2024-08-28T14:33:20.123456+00:00"}]}"#,
        r#"{"current-version": null, "history": []}"#,
        "[]",
    ] {
        let host = FakeHost::new();
        host.install(&Package::standard());
        host.write(HISTORY, unusable);
        let run = host.stage("upgrade");
        run.assert_success();
        run.assert_stdout_contains(
            "upgrade up2.sh ['unknown', '1.0.0'] [0] Idempotence.Auto True\n",
        );
        run.assert_stdout_contains("[up.sh] CURRENT_VERSION=1.0.0 PREVIOUS_VERSION=unknown\n");
        run.assert_stderr_line_contains(&[
            "level=warn",
            "corrupt history file moved aside",
            "/var/lib/skyhook/sk1/history/pkg.json",
        ]);
        assert_eq!(
            host.read_string("var/lib/skyhook/sk1/history/pkg.json.backup"),
            unusable,
            "{unusable:?}"
        );
        assert!(!host.exists(HISTORY), "{unusable:?}");
    }
}

#[test]
fn empty_history_is_treated_as_unknown() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.write(HISTORY, "");
    let run = host.stage("upgrade");
    run.assert_success();
    run.assert_stdout_contains("upgrade up2.sh ['unknown', '1.0.0'] [0] Idempotence.Auto True\n");
}

#[test]
fn zero_step_upgrade_check_still_records_history() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::simple());
    let run = host.stage("upgrade-check");
    run.assert_success();
    run.assert_stderr_contains("stage has no configured steps; treating it as a no-op");
    let (current, entries) = history(&host);
    assert_eq!(current, "1.0.0");
    assert_eq!(entries.len(), 1);
}

#[test]
fn uninstall_check_records_uninstalled_and_removes_every_step_marker() {
    require_root!();
    let host = FakeHost::new();
    let pkg = Package::standard()
        .step("apply", Step::new("q.sh").args(&["?"]))
        .step("apply", Step::new("sub/deep.sh"));
    host.install(&pkg);
    host.run("apply", &[FOO]).assert_success();
    host.stage("apply-check").assert_success();
    host.stage("config").assert_success();
    host.stage("upgrade").assert_success();
    host.stage("post-interrupt").assert_success();
    host.stage("uninstall").assert_success();
    assert!(!host.files_under(PKG_FLAGS).is_empty());
    host.stage("uninstall-check").assert_success();
    assert_eq!(host.files_under(PKG_FLAGS), Vec::<String>::new());
    let (current, entries) = history(&host);
    assert_eq!(current, "uninstalled");
    let versions: Vec<&str> = entries.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(versions, ["uninstalled", "1.0.0"]);
    assert!(host.is_file(START));
    assert_eq!(host.read(CHECK_RESULTS), b"un_check.sh False");
    assert!(host.is_file(ALL_CHECKED));
    assert!(host.is_file(&format!("{FLAGS}/uninstall-check_ALL_CHECKED")));
}

#[test]
fn failed_uninstall_check_keeps_markers_and_history() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.run("apply", &[FOO]).assert_success();
    host.stage("apply-check").assert_success();
    let markers = host.files_under(PKG_FLAGS);
    host.run("uninstall-check", &[("FAIL_STEPS", "un_check.sh")])
        .assert_code(1);
    assert_eq!(host.files_under(PKG_FLAGS), markers);
    assert_eq!(history(&host).0, "1.0.0");
}
