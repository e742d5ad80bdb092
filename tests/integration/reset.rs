//! `agent reset` (SPEC §1.4, ext): a step, a stage, a package or an interrupt resource runs
//! again without hand-deleting base64-named files. It shows first, removes with `--yes` (both
//! marker names; pending and attempts files for an interrupt), refuses while the lock is held
//! and records what it removed in `STATE/results/<pkg>/<ver>/reset.json`.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{
    BOOT_ID, COPY_DIR, FakeHost, HISTORY, INTERRUPT_FLAGS, PKG_DIR, PKG_FLAGS, Package, Reaper,
    Run, STATE, Step, hold_flock, interrupt_data,
};

const FLAGS_HOST: &str = "/var/lib/skyhook/sk1/flags/pkg/1.0.0";
/// The line that says which STATE a reset read (the fake host sets SKYHOOK_ROOT_DIR).
const STATE_LINE: &str =
    "state: /var/lib/skyhook/sk1 (logs: /var/log/skyhook/sk1; from SKYHOOK_ROOT_DIR)";
const RECORD: &str = "var/lib/skyhook/sk1/results/pkg/1.0.0/reset.json";

fn package() -> Package {
    Package::new()
        .step("apply", Step::new("s1.sh").on_host(false))
        .step("apply", Step::new("s2.sh").on_host(false))
        // base64 of "['?']_[0]" holds a '/': the legacy marker name nests a directory.
        .step("apply", Step::new("q.sh").on_host(false).args(&["?"]))
        .step("apply-check", Step::new("s1_check.sh").on_host(false))
}

fn reset(host: &FakeHost, args: &[&str]) -> Run {
    host.agent()
        .arg("reset")
        .arg(host.root_str())
        .args(args)
        .run()
}

fn markers_of(pkg: &Package, step: &str) -> [String; 2] {
    let s = pkg.find(step);
    [s.legacy_marker(), s.native_marker()]
}

#[test]
fn a_step_is_shown_then_reset_under_both_names_and_runs_again() {
    let host = FakeHost::new();
    let pkg = package();
    host.install(&pkg);
    host.stage("apply").assert_success();
    let [legacy, native] = markers_of(&pkg, "s1.sh");
    assert!(host.is_file(&format!("{PKG_FLAGS}/{legacy}")));
    assert!(host.is_file(&format!("{PKG_FLAGS}/{native}")));

    let before = host.snapshot();
    let shown = reset(&host, &[COPY_DIR, "--step", "s1.sh"]);
    shown.assert_success();
    assert_eq!(
        shown.out(),
        format!(
            "reset: step s1.sh of package pkg 1.0.0\n{STATE_LINE}\n\
             would remove (nothing was removed; add --yes to remove):\n  \
             {FLAGS_HOST}/{legacy}\n  {FLAGS_HOST}/{native}\n"
        )
    );
    before.assert_unchanged(&host.snapshot(), "reset without --yes");

    let done = reset(&host, &[COPY_DIR, "--step", "s1.sh", "--yes"]);
    done.assert_success();
    assert_eq!(
        done.out(),
        format!(
            "reset: step s1.sh of package pkg 1.0.0\n{STATE_LINE}\nremoved:\n  {FLAGS_HOST}/{legacy}\n  \
             {FLAGS_HOST}/{native}\nrecorded in /{RECORD}\n"
        )
    );
    assert!(!host.exists(&format!("{PKG_FLAGS}/{legacy}")));
    assert!(!host.exists(&format!("{PKG_FLAGS}/{native}")));
    for other in markers_of(&pkg, "s2.sh") {
        assert!(
            host.is_file(&format!("{PKG_FLAGS}/{other}")),
            "{other} kept"
        );
    }
    let record: Value = serde_json::from_str(&host.read_string(RECORD)).unwrap();
    assert_eq!(record["mode"], "reset");
    assert_eq!(record["exit_code"], 0);
    assert_eq!(record["package"], "pkg");
    let ops = record["operations"].as_array().unwrap();
    assert_eq!(ops.len(), 2, "{record:#}");
    assert_eq!(ops[0]["operation"], format!("{FLAGS_HOST}/{legacy}"));
    assert_eq!(ops[0]["decision"], "removed");
    assert_eq!(
        ops[0]["reason"],
        "agent reset: step s1.sh of package pkg 1.0.0"
    );

    // The next run does the step again, and only that step.
    host.stage("apply").assert_success();
    assert_eq!(host.ran_count("s1.sh"), 2, "{:?}", host.ran());
    assert_eq!(host.ran_count("s2.sh"), 1, "{:?}", host.ran());
    assert_eq!(host.ran_count("q.sh"), 1, "{:?}", host.ran());

    // Nothing left to remove is not an error.
    let again = reset(&host, &[COPY_DIR, "--step", "s2.sh", "--yes"]);
    again.assert_success();
    let nothing = reset(&host, &[COPY_DIR, "--stage", "apply-check", "--yes"]);
    nothing.assert_success();
    assert_eq!(
        nothing.out(),
        format!(
            "reset: every step of stage apply-check of package pkg 1.0.0\n{STATE_LINE}\n\
             nothing to remove: it already runs again\n"
        )
    );
}

#[test]
fn a_stage_is_reset_with_nested_legacy_names() {
    let host = FakeHost::new();
    let pkg = package();
    host.install(&pkg);
    host.stage("apply").assert_success();
    let [q_legacy, _] = markers_of(&pkg, "q.sh");
    assert!(q_legacy.contains('/'), "{q_legacy}");
    let run = reset(&host, &[COPY_DIR, "--stage", "apply", "--yes"]);
    run.assert_success();
    for step in ["s1.sh", "s2.sh", "q.sh"] {
        for marker in markers_of(&pkg, step) {
            assert!(!host.exists(&format!("{PKG_FLAGS}/{marker}")), "{marker}");
            assert!(run.out().contains(&marker), "{run:?}");
        }
    }
    host.stage("apply").assert_success();
    for step in ["s1.sh", "s2.sh", "q.sh"] {
        assert_eq!(host.ran_count(step), 2, "{step}: {:?}", host.ran());
    }
}

#[test]
fn a_package_is_cleared_without_its_directory_and_its_history_is_kept() {
    let host = FakeHost::new();
    let pkg = package();
    host.install(&pkg);
    host.stage("apply").assert_success();
    host.stage("apply-check").assert_success();
    let history = host.read_string(HISTORY);
    std::fs::remove_dir_all(host.path(PKG_DIR)).unwrap();
    let shown = reset(&host, &["--package", "pkg"]);
    shown.assert_success();
    assert!(
        shown.out().starts_with(&format!(
            "reset: every step of package pkg (every version)\n{STATE_LINE}\nwould remove"
        )),
        "{shown:?}"
    );
    assert_eq!(shown.out().matches("\n  /").count(), 6, "{shown:?}");
    reset(
        &host,
        &["--package", "pkg", "--package-version", "1.0.0", "--yes"],
    )
    .assert_success();
    assert!(
        host.files_under(PKG_FLAGS).is_empty(),
        "{:?}",
        host.files_under(PKG_FLAGS)
    );
    assert_eq!(host.read_string(HISTORY), history, "history kept");
    let record: Value = serde_json::from_str(&host.read_string(RECORD)).unwrap();
    assert_eq!(record["operations"].as_array().unwrap().len(), 6);
}

#[test]
fn an_interrupt_resource_stuck_in_reboot_pending_is_reset() {
    let host = FakeHost::new();
    host.install(&package());
    let pending = format!("{INTERRUPT_FLAGS}/node_restart_0.pending");
    let attempts = format!("{INTERRUPT_FLAGS}/node_restart_0.attempts");
    let complete = format!("{INTERRUPT_FLAGS}/service_restart_0.complete");
    host.write(&pending, format!("boot-id:{BOOT_ID}\n"));
    host.write(&attempts, format!("boot-id:{BOOT_ID}\nattempts:3\n"));
    host.write(&complete, "2026-11-30T10:00:00Z");
    let data = interrupt_data(r#"{"type":"node_restart"}"#);
    let plan = |host: &FakeHost| {
        host.agent()
            .args(["plan", "interrupt", &host.root_str(), COPY_DIR, &data])
            .run()
    };
    assert!(
        plan(&host).out().contains("loop guard"),
        "{:?}",
        plan(&host)
    );

    // One operation: its pending and attempts files, nothing else.
    let run = reset(
        &host,
        &[
            "--interrupt",
            "abc_pkg_1.0.0",
            "--operation",
            "node_restart_0",
            "--yes",
        ],
    );
    run.assert_success();
    assert_eq!(
        run.out(),
        format!(
            "reset: interrupt operation node_restart_0 of abc_pkg_1.0.0\n{STATE_LINE}\nremoved:\n  /{pending}\n  \
             /{attempts}\nrecorded in /{RECORD}\n"
        )
    );
    assert!(!host.exists(&pending) && !host.exists(&attempts));
    assert!(host.is_file(&complete));
    let planned = plan(&host);
    planned.assert_success();
    assert!(planned.out().contains("attempt 1 of 3"), "{planned:?}");
    let status = host.agent().args(["status", &host.root_str()]).run();
    status.assert_success();

    // The whole resource.
    reset(&host, &["--interrupt", "abc_pkg_1.0.0", "--yes"]).assert_success();
    assert!(
        host.list(INTERRUPT_FLAGS).is_empty(),
        "{:?}",
        host.list(INTERRUPT_FLAGS)
    );
    let record: Value = serde_json::from_str(&host.read_string(RECORD)).unwrap();
    assert_eq!(record["resource_id"], "abc_pkg_1.0.0");
    assert_eq!(record["operations"][0]["operation"], format!("/{complete}"));
}

#[test]
fn a_reset_refuses_while_the_lock_is_held() {
    let host = FakeHost::new();
    let pkg = package();
    host.install(&pkg);
    host.stage("apply").assert_success();
    let lock = format!("{STATE}/locks/pkg.lock");
    host.write(&lock, "pid=4242 boot_id=b started=2026-01-01T00:00:00Z\n");
    let before = host.snapshot();
    let mut holder = hold_flock(&host.path(&lock));
    for extra in [&[][..], &["--yes"][..]] {
        let mut args = vec![COPY_DIR, "--step", "s1.sh"];
        args.extend_from_slice(extra);
        let run = reset(&host, &args);
        run.assert_code(1);
        run.assert_stderr_contains(
            "agent reset failed: refusing to reset step s1.sh of package pkg 1.0.0: an agent is \
             running it (pid 4242 since 2026-01-01T00:00:00Z, lock \
             /var/lib/skyhook/sk1/locks/pkg.lock); wait for it to finish",
        );
    }
    let _ = holder.kill();
    let _ = holder.wait();
    before.assert_unchanged(&host.snapshot(), "refused reset");
    reset(&host, &[COPY_DIR, "--step", "s1.sh", "--yes"]).assert_success();
}

/// SPEC §11: `reset --yes` holds the package lock from before it lists the markers until it
/// has removed them and recorded it. The reset is stopped at its first directory listing while
/// an apply starts: the apply waits for the whole reset, then runs the reset steps again.
#[test]
fn an_apply_started_during_a_reset_waits_for_the_whole_reset() {
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.install(&package());
    host.stage("apply").assert_success();
    let reset = host
        .tagged_agent()
        .args(["reset", &host.root_str(), "--package", "pkg", "--yes"])
        .spawn_stopped_at("getdents64");

    let mut apply = host
        .tagged_agent()
        .args(["apply", &host.root_str(), COPY_DIR])
        .spawn();
    assert!(
        !apply.exited_before(Instant::now() + Duration::from_secs(2)),
        "the apply ran while the reset was listing the markers it removes: {:?}",
        apply.wait()
    );
    reset.resume();
    reset.strace.wait().assert_success();
    let apply = apply.wait();
    apply.assert_success();
    apply.assert_stderr_contains("waiting for another agent to release the lock");
    for step in ["s1.sh", "s2.sh", "q.sh"] {
        assert_eq!(host.ran_count(step), 2, "{step}: {:?}", host.ran());
    }
}

#[test]
fn a_reset_does_not_hide_a_failed_run_from_status() {
    let host = FakeHost::new();
    host.install(&package());
    host.run("apply", &[("FAIL_STEPS", "s2.sh")]).assert_code(1);
    reset(&host, &[COPY_DIR, "--step", "s1.sh", "--yes"]).assert_success();
    let status = host.agent().args(["status", &host.root_str()]).run();
    status.assert_code(1);
    status.assert_stdout_contains("\nerrors:\n  pkg 1.0.0 apply: ");
}

#[test]
fn bad_requests_say_what_is_wrong() {
    let host = FakeHost::new();
    host.install(&package());
    reset(&host, &[]).assert_code(2);
    reset(&host, &[COPY_DIR, "--package", "pkg"]).assert_code(2);
    reset(&host, &["--step", "s1.sh"]).assert_code(2);
    reset(&host, &["--interrupt", "abc"]).assert_code(2);
    reset(
        &host,
        &["--interrupt", "abc_pkg_1.0.0", "--operation", "bogus"],
    )
    .assert_code(2);
    reset(&host, &[COPY_DIR, "--stage", "aply"])
        .assert_code(2)
        .assert_stderr_contains(r#"--stage "aply" is not a stage MODE; did you mean apply?"#);
    reset(&host, &[COPY_DIR, "--step", "nope.sh"])
        .assert_code(1)
        .assert_stderr_contains(
            r#"no step "nope.sh" in package pkg 1.0.0; its steps: s1.sh, s2.sh, q.sh, s1_check.sh"#,
        );
}

/// A host that has run apply and apply-check (markers, history, locks, results, logs), with a
/// canary file in the host's `/etc` and one outside ROOT.
fn host_with_state() -> FakeHost {
    let host = FakeHost::new();
    host.install(&package());
    host.stage("apply").assert_success();
    host.stage("apply-check").assert_success();
    host.write("etc/gpu-node-tuning/tuning.conf", "canary\n");
    std::fs::write(host.outside().join("canary"), "canary\n").unwrap();
    host
}

/// SPEC §5: `args` name a path component that fails the rule; the reset is a usage error that
/// names `option` and `value`, and nothing under ROOT or outside it was read into removal.
fn assert_refused_name(args: &[&str], option: &str, value: &str) {
    let host = host_with_state();
    let (root, outside) = (host.snapshot(), host.snapshot_outside());
    let mut with_yes = args.to_vec();
    with_yes.push("--yes");
    let run = reset(&host, &with_yes);
    run.assert_code(2);
    run.assert_stderr_contains(&format!("'{value}' for '{option}"));
    run.assert_stderr_contains("must be a single path component");
    root.assert_unchanged(&host.snapshot(), "refused reset (ROOT)");
    outside.assert_unchanged(&host.snapshot_outside(), "refused reset (outside ROOT)");
    assert!(host.is_file("etc/gpu-node-tuning/tuning.conf"));
    assert!(host.is_file(HISTORY));
}

#[test]
fn a_package_named_dot_dot_is_refused_before_anything_is_removed() {
    assert_refused_name(&["--package", ".."], "--package", "..");
}

#[test]
fn a_package_version_that_climbs_to_the_history_is_refused() {
    assert_refused_name(
        &["--package", "pkg", "--package-version", "../../history"],
        "--package-version",
        "../../history",
    );
}

#[test]
fn a_package_that_climbs_into_the_hosts_etc_is_refused() {
    assert_refused_name(
        &[
            "--package",
            "../../../../../etc",
            "--package-version",
            "gpu-node-tuning",
        ],
        "--package",
        "../../../../../etc",
    );
}

#[test]
fn empty_and_dot_names_and_climbing_operations_are_refused() {
    assert_refused_name(&["--package", ""], "--package", "");
    assert_refused_name(
        &["--package", "pkg", "--package-version", "."],
        "--package-version",
        ".",
    );
    assert_refused_name(
        &[
            "--interrupt",
            "abc_pkg_1.0.0",
            "--operation",
            "../abc_pkg_2.0.0/node_restart_0",
        ],
        "--operation",
        "../abc_pkg_2.0.0/node_restart_0",
    );
}
