//! `agent try`: whatever a package does in the sandbox, the lower root is never written.
//!
//! Every test takes a snapshot of the fake lower root (path, type, mode, content hash, link
//! target of every entry) before the run and compares it after; the harness also fails a run
//! whose stdout or stderr stays open after `agent try` exits (a sandbox process left behind).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{FakeHost, Package, Run, Step};

/// A package directory outside the fake root, with `apply.sh` running `body` and an always
/// passing `apply_check.sh`.
pub(crate) fn package(host: &FakeHost, body: &str) -> PathBuf {
    let pkg = host.outside().join("pkg");
    Package::named("trypkg", "1.0.0")
        .step("apply", Step::new("apply.sh").script(body))
        .step(
            "apply-check",
            Step::new("apply_check.sh").script("#!/bin/sh\nexit 0\n"),
        )
        .write_into(&pkg, host.root());
    pkg
}

/// `agent try PKG --root ROOT --json ARGS...`: the run, and its JSON document.
fn try_json(host: &FakeHost, pkg: &Path, args: &[&str]) -> (Run, Option<Value>) {
    let run = host
        .agent()
        .arg("try")
        .arg(pkg)
        .args(["--root", &host.root_str(), "--json"])
        .args(args)
        .run();
    let report: Option<Value> = serde_json::from_slice(&run.stdout).ok();
    // Every report, of a run that succeeded or failed, and every error document, has the
    // fields docs/schemas/ gives it.
    if let Some(doc) = &report {
        let schema = if doc["error"].is_object() {
            "error"
        } else {
            "try"
        };
        crate::util::schema::assert_valid(schema, doc);
    }
    (run, report)
}

/// Two string fields of each entry of the report's array `list`, as pairs.
fn field_pairs(report: &Value, list: &str, first: &str, second: &str) -> Vec<(String, String)> {
    report[list]
        .as_array()
        .unwrap_or_else(|| panic!("{list}[] missing from {report}"))
        .iter()
        .map(|entry| {
            (
                entry[first].as_str().unwrap().to_owned(),
                entry[second].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// `(kind, path)` of each change.
fn changes(report: &Value) -> Vec<(String, String)> {
    field_pairs(report, "changes", "kind", "path")
}

/// `(stage, result)` of each stage.
fn stage_results(report: &Value) -> Vec<(String, String)> {
    field_pairs(report, "stages", "stage", "result")
}

#[test]
fn try_a_step_deleting_etc_leaves_the_lower_root_unchanged() {
    require_root!();
    let host = FakeHost::new();
    host.write("etc/hostname", "node-1\n");
    host.write("etc/app/settings.conf", "a=1\n");
    let pkg = package(
        &host,
        "#!/bin/sh\nrm -rf /etc\ntest ! -e /etc || exit 9\necho gone\n",
    );
    let before = host.snapshot();
    let (run, report) = try_json(&host, &pkg, &[]);
    run.assert_success();
    let report = report.expect("one JSON document");
    before.assert_unchanged(&host.snapshot(), "after a step deleted /etc in the sandbox");
    assert!(host.read_string("etc/hostname") == "node-1\n");
    let changes = changes(&report);
    assert!(
        changes.contains(&("deleted".into(), "/etc".into())),
        "{changes:?}"
    );
    assert_eq!(report["stages"][0]["steps"][0]["decision"], "ran");
}

#[test]
fn try_a_step_writing_through_symlinks_out_of_the_root_leaves_the_host_unchanged() {
    require_root!();
    let host = FakeHost::new();
    let victim = host.outside().join("victim.txt");
    std::fs::write(&victim, "original\n").unwrap();
    // An absolute link and a relative one that climbs far above the root.
    host.symlink("etc/abs-link", &victim);
    let climb = "../".repeat(16) + victim.to_str().unwrap().trim_start_matches('/');
    host.symlink("etc/rel-link", &climb);
    let pkg = package(
        &host,
        "#!/bin/sh\nset -e\nmkdir -p \"$(dirname \"$(readlink /etc/abs-link)\")\"\n\
         echo pwned > /etc/abs-link\necho pwned-too > /etc/rel-link\n\
         cat /etc/abs-link\n",
    );
    let before = host.snapshot();
    let outside_before = host.snapshot_outside();
    let (run, report) = try_json(&host, &pkg, &[]);
    run.assert_success();
    let report = report.expect("one JSON document");
    before.assert_unchanged(
        &host.snapshot(),
        "after writes through links out of the root",
    );
    outside_before.assert_unchanged(&host.snapshot_outside(), "outside the root");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original\n");
    // Inside the sandbox the links resolve under its root: the write is reported there.
    let changes = changes(&report);
    assert!(
        changes.contains(&("added".into(), victim.display().to_string())),
        "{changes:?}"
    );
}

#[test]
fn try_a_node_restart_interrupt_runs_nothing_and_completes_after_a_simulated_reboot() {
    require_root!();
    let host = FakeHost::new();
    let pkg = host.outside().join("pkg");
    Package::named("trypkg", "1.0.0")
        .step("apply", Step::new("apply.sh"))
        .step("apply-check", Step::new("apply_check.sh"))
        .step(
            "post-interrupt",
            Step::new("post.sh")
                .script("#!/bin/sh\ncat /proc/sys/kernel/random/boot_id > /etc/booted-as\n"),
        )
        .step("post-interrupt-check", Step::new("post_check.sh"))
        .write_into(&pkg, host.root());
    let before = host.snapshot();
    let (run, report) = try_json(
        &host,
        &pkg,
        &[
            "--stages",
            "apply,apply-check",
            "--interrupt",
            r#"{"type":"node_restart"}"#,
        ],
    );
    run.assert_success();
    let report = report.expect("one JSON document");
    before.assert_unchanged(
        &host.snapshot(),
        "after a node_restart interrupt in the sandbox",
    );
    assert_eq!(
        stage_results(&report),
        [
            ("apply".into(), "succeeded".into()),
            ("apply-check".into(), "succeeded".into()),
            ("interrupt".into(), "succeeded".into()),
            ("post-interrupt".into(), "succeeded".into()),
            ("post-interrupt-check".into(), "succeeded".into()),
        ]
    );
    let interrupt = &report["interrupts"][0];
    assert_eq!(interrupt["type"], "node_restart");
    assert_eq!(interrupt["operations"][0]["command"], "reboot");
    assert_eq!(interrupt["operations"][0]["action"], "run");
    assert_eq!(interrupt["operations"][0]["policy"], "after-reboot");
    // The post-interrupt stage ran under the new boot ID.
    let after = interrupt["simulated_reboot"]["boot_id_after"]
        .as_str()
        .expect("a simulated reboot");
    assert_ne!(
        interrupt["simulated_reboot"]["boot_id_before"].as_str(),
        Some(after)
    );
    let changes = changes(&report);
    assert!(
        changes.contains(&("added".into(), "/etc/booted-as".into())),
        "{changes:?}"
    );
    // The fake reboot (which records its calls) never ran, in or out of the sandbox.
    assert!(
        !changes.iter().any(|(_, p)| p == "/var/tmp/calls.log"),
        "{changes:?}"
    );
    assert!(!host.exists("var/tmp/calls.log"));
    let paths: Vec<&str> = report["agent_state"]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(
        paths.contains(
            &"/var/lib/skyhook/try/interrupts/flags/try-uid-1_trypkg_1.0.0/node_restart_0.complete"
        ),
        "{paths:?}"
    );
}

#[test]
fn try_a_failing_step_reports_it_and_leaves_the_lower_root_unchanged() {
    require_root!();
    let host = FakeHost::new();
    let pkg = package(
        &host,
        "#!/bin/sh\necho half > /etc/half-done\necho 'about to fail'\nexit 7\n",
    );
    let before = host.snapshot();
    let (run, report) = try_json(&host, &pkg, &[]);
    run.assert_code(1);
    let report = report.expect("one JSON document even when a stage fails");
    before.assert_unchanged(&host.snapshot(), "after a failing step");
    assert_eq!(report["result"], "failed");
    assert_eq!(
        stage_results(&report),
        [
            ("apply".into(), "failed".into()),
            ("apply-check".into(), "not-run".into()),
            ("config".into(), "not-run".into()),
            ("config-check".into(), "not-run".into()),
        ]
    );
    assert_eq!(report["stages"][0]["steps"][0]["exit_code"], 7);
    assert!(
        report["stages"][0]["output_tail"]
            .as_str()
            .unwrap()
            .contains("about to fail")
    );
    assert!(changes(&report).contains(&("added".into(), "/etc/half-done".into())));
}

/// Processes whose command line contains `token`.
pub(crate) fn processes_with(token: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(token) {
                found.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
            }
        }
    }
    found
}

#[test]
fn try_sigint_in_the_middle_of_a_step_discards_the_sandbox_and_leaves_the_root_unchanged() {
    require_root!();
    let host = FakeHost::new();
    let keep = host.outside().join("kept");
    // A sleep nobody else runs, to find it in /proc.
    let pkg = package(
        &host,
        "#!/bin/sh\necho partial > /etc/partial\necho started\nexec sleep 3113\n",
    );
    let before = host.snapshot();
    let running = host
        .agent()
        .arg("try")
        .arg(&pkg)
        .args(["--root", &host.root_str()])
        .arg("--keep")
        .arg(&keep)
        .spawn();
    let log = keep.join("01-apply.log");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&log).is_ok_and(|t| t.contains("started")) {
        assert!(Instant::now() < deadline, "the step did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    while processes_with("sleep 3113").is_empty() {
        assert!(Instant::now() < deadline, "the step's sleep did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    running.signal("INT");
    let started = Instant::now();
    let run = running.wait();
    // Not measured after the run, so not claimed (SPEC §1.6).
    run.assert_code(1)
        .assert_stderr_contains("stopped by SIGINT")
        .assert_stderr_contains(&format!(
            "not verified after the run that the lower root {} was not written (the steps of \
             each stage that started ran only after its mounts were checked read-only and \
             locked)",
            host.root().display()
        ));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "SIGINT took {:?}",
        started.elapsed()
    );
    // Killed with the sandbox's PID namespace (allow the kernel a moment to reap it).
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with("sleep 3113").is_empty() {
        assert!(
            Instant::now() < deadline,
            "left running: {:?}",
            processes_with("sleep 3113")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    before.assert_unchanged(&host.snapshot(), "after SIGINT during a step");
    assert!(!host.exists("etc/partial"));
}

#[test]
fn try_reboot_from_inside_the_sandbox_is_refused() {
    require_root!();
    let host = FakeHost::new();
    // Steps hold no capability outside their user namespace (SPEC §1.6): reboot(2) is
    // refused, and the step carries on.
    let pkg = package(
        &host,
        "#!/bin/sh
/bin/busybox reboot -f
echo \"reboot: $?\" > /etc/after-reboot
",
    );
    let keep = host.outside().join("kept");
    let before = host.snapshot();
    let run = host
        .agent()
        .arg("try")
        .arg(&pkg)
        .args(["--root", &host.root_str(), "--stages", "apply", "--keep"])
        .arg(&keep)
        .run();
    // This test process (and the machine) are still here to see the result.
    run.assert_success();
    let after = std::fs::read_to_string(keep.join("upper/etc/after-reboot")).unwrap();
    assert!(
        after.starts_with("reboot: ") && after != "reboot: 0\n",
        "{after}"
    );
    let log = std::fs::read_to_string(keep.join("01-apply.log")).unwrap();
    assert!(log.contains("Operation not permitted"), "{log}");
    before.assert_unchanged(&host.snapshot(), "after reboot -f in the sandbox");
}

#[test]
fn try_no_network_gives_the_sandbox_an_empty_network_namespace() {
    require_root!();
    let host = FakeHost::new();
    // /proc/net/dev lists the interfaces of the reader's network namespace: two header lines,
    // then one line per interface.
    let pkg = package(
        &host,
        "#!/bin/sh\ntail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort > /etc/ifaces\n",
    );
    let ifaces = |extra: &[&str], keep: &Path| {
        let mut args = vec!["--stages", "apply", "--keep", keep.to_str().unwrap()];
        args.extend_from_slice(extra);
        let (run, report) = try_json(&host, &pkg, &args);
        run.assert_success();
        let report = report.expect("JSON");
        let list = std::fs::read_to_string(keep.join("upper/etc/ifaces")).unwrap();
        (report["network"].as_str().unwrap().to_owned(), list)
    };
    assert_eq!(
        ifaces(&["--no-network"], &host.outside().join("kept-none")),
        ("none".to_owned(), "lo\n".to_owned())
    );
    // By default the sandbox has this process's network: the same interfaces.
    let mut mine: Vec<String> = std::fs::read_to_string("/proc/self/net/dev")
        .unwrap()
        .lines()
        .skip(2)
        .map(|l| l.split(':').next().unwrap().trim().to_owned())
        .collect();
    mine.sort();
    assert_eq!(
        ifaces(&[], &host.outside().join("kept-host")),
        ("host".to_owned(), mine.join("\n") + "\n")
    );
}

#[test]
fn try_reports_modified_files_with_a_diff_mode_changes_and_symlinks() {
    require_root!();
    let host = FakeHost::new();
    host.write("etc/app.conf", "a=1\nb=2\nc=3\n");
    host.write_mode("etc/tool", "#!/bin/sh\n", 0o644);
    host.write("etc/same.conf", "unchanged\n");
    let pkg = package(
        &host,
        "#!/bin/sh\nset -e\nsed -i 's/^b=2$/b=20/' /etc/app.conf\nchmod 755 /etc/tool\n\
         cat /etc/same.conf > /etc/same.conf.tmp && mv /etc/same.conf.tmp /etc/same.conf\n\
         ln -s app.conf /etc/app.link\n",
    );
    let before = host.snapshot();
    let (run, report) = try_json(&host, &pkg, &["--stages", "apply"]);
    run.assert_success();
    before.assert_unchanged(&host.snapshot(), "after modifications in the sandbox");
    let report = report.expect("JSON");
    let find = |path: &str| {
        report["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["path"] == path)
            .cloned()
    };
    let app = find("/etc/app.conf").expect("app.conf changed");
    assert_eq!(app["kind"], "modified");
    assert_eq!(app["content_changed"], true);
    let diff = app["diff"].as_str().unwrap();
    assert!(diff.contains("\n-b=2\n+b=20\n"), "{diff}");
    assert!(diff.starts_with("--- /etc/app.conf (lower)\n+++ /etc/app.conf (sandbox)\n"));
    let tool = find("/etc/tool").expect("the mode change");
    assert_eq!(tool["kind"], "modified");
    assert_eq!(tool["content_changed"], false);
    assert_eq!(
        (tool["mode_before"].as_str(), tool["mode_after"].as_str()),
        (Some("0644"), Some("0755"))
    );
    // Rewritten with the same content and mode: not a change.
    assert!(find("/etc/same.conf").is_none(), "{report}");
    let link = find("/etc/app.link").expect("the new link");
    assert_eq!(
        (
            link["kind"].as_str(),
            link["type"].as_str(),
            link["target"].as_str()
        ),
        (Some("added"), Some("symlink"), Some("app.conf"))
    );
}

#[test]
fn try_runs_post_interrupt_stages_after_each_interrupt_as_the_operator_would() {
    require_root!();
    let host = FakeHost::new();
    let pkg = host.outside().join("pkg");
    Package::named("trypkg", "1.0.0")
        .step("apply", Step::new("apply.sh"))
        .step("apply-check", Step::new("apply_check.sh"))
        .step("post-interrupt", Step::new("post.sh"))
        .step("post-interrupt-check", Step::new("post_check.sh"))
        .write_into(&pkg, host.root());
    let before = host.snapshot();
    let (run, report) = try_json(
        &host,
        &pkg,
        &[
            "--stages",
            "apply",
            "--interrupt",
            r#"{"type":"service_restart","services":["containerd"]}"#,
            "--interrupt",
            r#"{"type":"node_restart"}"#,
        ],
    );
    run.assert_success();
    before.assert_unchanged(&host.snapshot(), "after two interrupts");
    let report = report.expect("JSON");
    let stages: Vec<(String, u64, u64)> = report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["stage"].as_str().unwrap().to_owned(),
                s["steps_ran"].as_u64().unwrap(),
                s["steps_skipped"].as_u64().unwrap(),
            )
        })
        .collect();
    // The second post-interrupt finds its step's completion marker, as a node would.
    assert_eq!(
        stages,
        [
            ("apply".into(), 1, 0),
            ("interrupt".into(), 2, 0),
            ("post-interrupt".into(), 1, 0),
            ("post-interrupt-check".into(), 1, 0),
            ("interrupt".into(), 1, 0),
            ("post-interrupt".into(), 0, 1),
            ("post-interrupt-check".into(), 1, 0),
        ]
    );
    let commands: Vec<&str> = report["interrupts"][0]["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["command"].as_str().unwrap())
        .collect();
    assert_eq!(
        commands,
        ["systemctl daemon-reload", "systemctl restart containerd"]
    );
    assert!(report["interrupts"][0]["simulated_reboot"].is_null());
    assert!(report["interrupts"][1]["simulated_reboot"].is_object());
}

#[test]
fn try_without_the_namespaces_it_needs_stops_before_running_anything() {
    require_root!();
    let host = FakeHost::new();
    let pkg = package(&host, "#!/bin/sh\necho ran > /etc/ran\n");
    let before = host.snapshot();
    // No new PID namespace may be made here (user.max_pid_namespaces = 0 in a namespace of
    // the test's own): the sandbox cannot be built.
    let out = std::process::Command::new("/usr/bin/unshare")
        .args([
            "--user",
            "--map-root-user",
            "--mount",
            "--pid",
            "--fork",
            "--mount-proc",
            "/bin/sh",
            "-c",
            "echo 0 > /proc/sys/user/max_pid_namespaces && exec \"$0\" \"$@\"",
        ])
        .arg(env!("CARGO_BIN_EXE_agent"))
        .arg("try")
        .arg(&pkg)
        .arg("--root")
        .arg(host.root())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("run unshare");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "agent try: cannot create the sandbox: unshare of new mount, PID, IPC and UTS \
             namespaces: "
        ) && stderr.trim_end().ends_with("nothing was run"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no report");
    before.assert_unchanged(&host.snapshot(), "without a sandbox");
    assert!(!host.exists("etc/ran"));
}

#[test]
fn try_gives_the_stages_a_package_pods_environment_and_the_configmaps() {
    require_root!();
    let host = FakeHost::new();
    let pkg = package(
        &host,
        "#!/bin/sh\nset -e\n\
         echo \"${LEAK:-unset} ${GIVEN:-unset} $SKYHOOK_RESOURCE_ID $SKYHOOK_DIR\" > /etc/env\n\
         cat \"$SKYHOOK_DIR/configmaps/settings.conf\" > /etc/settings\n",
    );
    let settings = host.outside().join("my-settings.conf");
    std::fs::write(&settings, "from the command line\n").unwrap();
    let keep = host.outside().join("kept");
    let run = host
        .agent()
        .env("LEAK", "from agent try's environment")
        .arg("try")
        .arg(&pkg)
        .args([
            "--root",
            &host.root_str(),
            "--stages",
            "apply",
            "--env",
            "GIVEN=yes",
        ])
        .arg("--configmap")
        .arg(format!("settings.conf={}", settings.display()))
        .arg("--keep")
        .arg(&keep)
        .run();
    run.assert_success();
    assert_eq!(
        std::fs::read_to_string(keep.join("upper/etc/env")).unwrap(),
        "unset yes try-uid-1_trypkg_1.0.0 /var/lib/skyhook/try/trypkg-1.0.0-try-1\n"
    );
    assert_eq!(
        std::fs::read_to_string(keep.join("upper/etc/settings")).unwrap(),
        "from the command line\n"
    );
    // --configmap NAME must be one path component.
    host.agent()
        .arg("try")
        .arg(&pkg)
        .args(["--root", &host.root_str(), "--configmap"])
        .arg(format!("../x={}", settings.display()))
        .run()
        .assert_code(2)
        .assert_stderr_contains("NAME must be a single path component");
}

#[test]
fn try_device_nodes_made_in_the_sandbox_open_nothing() {
    require_root!();
    let host = FakeHost::new();
    // c 1 3 is /dev/null: harmless if it did open.
    let pkg = package(
        &host,
        "#!/bin/sh\nif /bin/busybox mknod /etc/made-null c 1 3 2>/dev/null; then\n\
         if echo x > /etc/made-null 2>/dev/null; then echo opened > /etc/verdict; \
         else echo refused > /etc/verdict; fi\nelse echo no-mknod > /etc/verdict; fi\n\
         echo x > /dev/null && echo dev-null-works >> /etc/verdict\n",
    );
    let keep = host.outside().join("kept");
    let run = host
        .agent()
        .arg("try")
        .arg(&pkg)
        .args(["--root", &host.root_str(), "--stages", "apply", "--keep"])
        .arg(&keep)
        .run();
    run.assert_success();
    let verdict = std::fs::read_to_string(keep.join("upper/etc/verdict")).unwrap();
    // Root of the machine may mknod (the node opens nothing); root of a user namespace may not.
    assert!(
        verdict == "refused\ndev-null-works\n" || verdict == "no-mknod\ndev-null-works\n",
        "{verdict}"
    );
}
