//! State and pre-flight at the edges (SPEC §5, §6 steps 1 and 3, §8.7, §8.8, §9.6): what is
//! validated before the first write, resolv.conf on a host root without `/etc`, corrupt
//! completion markers, the order and lock of `check_results`/`<MODE>_ALL_CHECKED`, stale temp
//! files of killed writes, reboot attempts that never ran, and the OS cause in every message
//! about a file. Full and read-only disks are real tmpfs mounts (root only).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use crate::util::{
    ALL_CHECKED, BOOT_ID, CHECK_RESULTS, COPY_DIR, FLAGS, FakeHost, HISTORY, INTERRUPT_FLAGS,
    NODE_RESTART, PKG_DIR, PKG_FLAGS, Package, REBOOT_SHUTS_DOWN, STATE, Step, eventually,
    hold_flock, interrupt_data,
};

/// The STATE-wide lock under which `check_results` and `<MODE>_ALL_CHECKED` are written.
const CHECK_LOCK: &str = "var/lib/skyhook/sk1/locks/shared/check_results.lock";

fn off_host() -> Package {
    Package::off_host(&["s1.sh"], &["s1_check.sh"])
}

/// A tmpfs mounted over a directory of a fake host, unmounted (lazily) when dropped. Declare
/// it after the host so it is dropped first.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, options: &str) -> Self {
        fs::create_dir_all(dir).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(dir)
            .status()
            .expect("mount(8) is needed for the disk-fault tests");
        assert!(status.success(), "mounting a tmpfs on {}", dir.display());
        Self(dir.to_path_buf())
    }

    /// Fill the mount until writes fail with ENOSPC.
    fn fill(&self) {
        let _ = Command::new("dd")
            .args(["if=/dev/zero", "bs=4096"])
            .arg(format!("of={}", self.0.join(".filler").display()))
            .stderr(std::process::Stdio::null())
            .status();
        assert!(
            fs::write(self.0.join(".probe"), b"x").is_err(),
            "the tmpfs at {} is not full",
            self.0.display()
        );
    }

    fn remount_read_only(&self) {
        let status = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Set the modification time of a file under ROOT to an hour ago (a killed writer's leftover).
fn age(host: &FakeHost, rel: &str) {
    let file = fs::File::options()
        .write(true)
        .open(host.path(rel))
        .unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// §6 step 3: resolv.conf needs the host's /etc
// ---------------------------------------------------------------------------------------------

#[test]
fn copy_resolv_on_a_host_root_without_etc_fails_and_creates_nothing() {
    for etc in ["missing", "a regular file"] {
        let host = FakeHost::new();
        host.install(&off_host());
        fs::remove_dir_all(host.path("etc")).unwrap();
        if etc == "a regular file" {
            host.write("etc", "not a directory");
        }
        let before = host.snapshot();
        let run = host.run("apply", &[("COPY_RESOLV", "true")]);
        run.assert_code(1);
        let root = host.root_str();
        run.assert_stderr_contains(&format!(
            "cannot copy resolv.conf: {root}/etc is not a directory; is the host's root mounted at {root}?"
        ));
        before.assert_unchanged(&host.snapshot(), &format!("/etc {etc}"));
        assert!(host.ran().is_empty(), "{:?}", host.ran());
        // The plan predicts it.
        let plan = host
            .agent()
            .env("COPY_RESOLV", "true")
            .args(["plan", "apply", &root, COPY_DIR])
            .run();
        plan.assert_code(1);
        plan.assert_stdout_contains("cannot copy resolv.conf");
    }
}

// ---------------------------------------------------------------------------------------------
// §6 step 1: everything that can be validated is, before the first write
// ---------------------------------------------------------------------------------------------

#[test]
fn a_copy_dir_that_is_the_host_root_is_rejected_before_resolv_conf_is_copied() {
    // (COPY_DIR, setup, expected message)
    type Case = (&'static str, fn(&FakeHost), &'static str);
    let cases: [Case; 5] = [
        ("/", |_| {}, "the package directory cannot be the host root"),
        (
            "/var/..",
            |_| {},
            "the package directory cannot be the host root",
        ),
        (
            COPY_DIR,
            |h| {
                h.mkdir("var/lib/skyhook/sk1");
                h.symlink(PKG_DIR, "../../../..");
            },
            "the package directory cannot be the host root",
        ),
        // Absolute: the run reads the package through its path in the agent's view.
        (
            COPY_DIR,
            |h| h.symlink("var/lib", h.outside()),
            "is a symbolic link to the absolute path",
        ),
        (
            COPY_DIR,
            |h| h.symlink("var/lib", "../../work"),
            "/var/lib is a symbolic link that resolves outside the host root",
        ),
    ];
    for (copy_dir, setup, message) in cases {
        let host = FakeHost::new();
        host.write("etc/resolv.conf", "nameserver 192.0.2.1\n");
        setup(&host);
        let before = host.snapshot();
        let outside = host.snapshot_outside();
        let run = host
            .agent()
            .env("COPY_RESOLV", "true")
            .args(["apply", &host.root_str(), copy_dir])
            .run();
        run.assert_code(1);
        run.assert_stderr_contains(message);
        assert_eq!(run.out(), "", "validation comes before the banner");
        before.assert_unchanged(&host.snapshot(), copy_dir);
        outside.assert_unchanged(&host.snapshot_outside(), copy_dir);
    }
}

#[test]
fn a_state_path_through_a_link_is_rejected_before_resolv_conf_is_copied() {
    for (link, target) in [
        ("var/lib/skyhook", "skyhook-elsewhere"),
        ("var/lib/skyhook/sk1", "/var/tmp"),
    ] {
        let host = FakeHost::new();
        host.mkdir("var/lib/skyhook-elsewhere");
        host.mkdir("var/moved");
        off_host().write_into(&host.path("var/moved"), host.root());
        host.write("etc/resolv.conf", "nameserver 192.0.2.1\n");
        host.symlink(link, target);
        let before = host.snapshot();
        let run = host
            .agent()
            .env("COPY_RESOLV", "true")
            .args(["apply", &host.root_str(), "/var/moved"])
            .run();
        before.assert_unchanged(&host.snapshot(), link);
        run.assert_code(1);
        assert_eq!(run.out(), "", "validation comes before the banner");
        run.assert_stderr_line_contains(&[
            "SKYHOOK_ROOT_DIR /var/lib/skyhook/sk1",
            &format!("/{link} is a symbolic link"),
        ]);
    }
}

#[test]
fn plan_fails_exactly_as_the_run_on_a_bad_resource_id_or_copy_dir() {
    let host = FakeHost::new();
    host.install(&off_host());
    let cases: [(Option<&str>, &str, &str); 4] = [
        (
            None,
            COPY_DIR,
            "SKYHOOK_RESOURCE_ID is not set: expected <prefix>_<package>_<version>",
        ),
        (
            Some("bad"),
            COPY_DIR,
            r#"resource ID "bad" must end in _PACKAGE_VERSION"#,
        ),
        (
            Some("a_.._1"),
            COPY_DIR,
            r#"package name ".." must be a single path component"#,
        ),
        (
            Some("abc_pkg_1.0.0"),
            "/",
            "the package directory cannot be the host root",
        ),
    ];
    for (rid, copy_dir, message) in cases {
        let before = host.snapshot();
        let mut runs = Vec::new();
        for prefix in [&[][..], &["plan"][..]] {
            let mut cmd = host.agent().args(prefix.iter().copied()).args([
                "apply",
                &host.root_str(),
                copy_dir,
            ]);
            cmd = match rid {
                Some(rid) => cmd.env("SKYHOOK_RESOURCE_ID", rid),
                None => cmd.env_remove("SKYHOOK_RESOURCE_ID"),
            };
            runs.push(cmd.run());
        }
        for run in &runs {
            run.assert_code(1);
            run.assert_stderr_contains(message);
        }
        before.assert_unchanged(&host.snapshot(), message);
    }
}

// ---------------------------------------------------------------------------------------------
// §5, §8.7: a corrupt completion marker is not a completion
// ---------------------------------------------------------------------------------------------

#[test]
fn nul_filled_step_markers_are_corrupt_and_the_step_runs_again_with_a_warning() {
    let host = FakeHost::new();
    let pkg = off_host();
    host.install(&pkg);
    host.stage("apply").assert_success();
    let step = pkg.find("s1.sh");
    let markers = [
        format!("{PKG_FLAGS}/{}", step.native_marker()),
        format!("{PKG_FLAGS}/{}", step.legacy_marker()),
    ];
    for marker in &markers {
        // What XFS leaves of a file whose data never reached the disk before a crash.
        let len = host.read(marker).len();
        host.write(marker, vec![0u8; len]);
    }
    let run = host.stage("apply");
    run.assert_success();
    assert_eq!(host.ran_count("s1.sh"), 2, "{run:?}");
    run.assert_stderr_line_contains(&["corrupt completion marker", &step.native_marker()]);
    for marker in &markers {
        assert!(
            host.read_string(marker).starts_with("last_run: "),
            "{marker} rewritten"
        );
    }
}

#[test]
fn a_nul_filled_interrupt_marker_is_corrupt_and_the_operation_runs_again() {
    require_root!();
    let host = FakeHost::new();
    host.mkdir(PKG_DIR);
    let data = interrupt_data(r#"{"type":"service_restart","services":["a"]}"#);
    host.interrupt(&data).run().assert_success();
    let first = format!("{INTERRUPT_FLAGS}/service_restart_0.complete");
    host.write(&first, vec![0u8; 30]);
    let run = host.interrupt(&data).run();
    run.assert_success();
    run.assert_stderr_line_contains(&["corrupt completion marker", "service_restart_0.complete"]);
    assert_eq!(
        host.calls(),
        [
            "systemctl daemon-reload",
            "systemctl restart a",
            "systemctl daemon-reload"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// §8.8: ALL_CHECKED last, and the pair under a STATE-wide lock
// ---------------------------------------------------------------------------------------------

#[test]
fn a_failed_history_write_leaves_no_all_checked_and_names_the_os_cause() {
    require_root!();
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply").assert_success();
    let disk = Tmpfs::mount(&host.path("var/lib/skyhook/sk1/history"), "size=16k");
    disk.fill();
    let run = host.stage("apply-check");
    run.assert_code(1);
    run.assert_stderr_contains("No space left on device");
    assert!(
        !host.exists(ALL_CHECKED),
        "ALL_CHECKED beside a failed exit: {run:?}"
    );
    assert!(!host.exists(HISTORY));
    assert_eq!(host.read_string(CHECK_RESULTS), "s1_check.sh False");
    drop(disk);
}

#[test]
fn check_results_and_all_checked_are_written_under_the_state_wide_lock() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply").assert_success();
    let mut holder = hold_flock(&host.path(CHECK_LOCK));
    let agent = host.stage_cmd("apply-check").spawn();
    assert!(
        eventually(Duration::from_secs(20), || host.ran_count("s1_check.sh")
            == 1),
        "the check step did not run"
    );
    std::thread::sleep(Duration::from_millis(800));
    let written_while_held = host.exists(CHECK_RESULTS) || host.exists(ALL_CHECKED);
    let _ = holder.kill();
    let _ = holder.wait();
    let run = agent.wait();
    run.assert_success();
    assert!(
        !written_while_held,
        "check_results or ALL_CHECKED written while another holder had the lock"
    );
    run.assert_stderr_contains("waiting for another agent to release the lock");
    assert_eq!(host.read_string(CHECK_RESULTS), "s1_check.sh False");
    assert!(host.is_file(ALL_CHECKED));
}

// ---------------------------------------------------------------------------------------------
// §5: stale temp files of killed writes are cleaned wherever the agent writes state
// ---------------------------------------------------------------------------------------------

#[test]
fn stale_temp_files_are_cleaned_in_results_and_nested_marker_directories() {
    let host = FakeHost::new();
    let pkg = Package::new()
        .step("apply", Step::new("sub/s.sh").on_host(false))
        // base64("['?']_[0]") holds a '/': the legacy marker nests a directory.
        .step("apply", Step::new("q.sh").args(&["?"]).on_host(false))
        .step("apply-check", Step::new("sub/s_check.sh").on_host(false))
        .step("apply-check", Step::new("q_check.sh").on_host(false));
    host.install(&pkg);
    host.stage("apply").assert_success();
    let nested_legacy = pkg.find("q.sh").legacy_marker();
    assert!(nested_legacy.contains('/'), "{nested_legacy}");
    let legacy_dir = Path::new(&nested_legacy)
        .parent()
        .unwrap()
        .to_str()
        .unwrap();
    let stale = [
        format!("{STATE}/results/pkg/1.0.0/.apply.json.tmp.4242.00000000deadbeef"),
        format!("{PKG_FLAGS}/sub/.s.sh_W11fWzBd.tmp.4242.00000000deadbeef"),
        format!("{PKG_FLAGS}/{legacy_dir}/.J11fWzBd.tmp.4242.00000000deadbeef"),
    ];
    for file in &stale {
        host.write(file, "half");
        age(&host, file);
    }
    let young = format!("{PKG_FLAGS}/sub/.s.sh_W11fWzBd.tmp.4243.00000000feedface");
    host.write(&young, "a live writer's");
    host.stage("apply").assert_success();
    for file in &stale {
        assert!(!host.exists(file), "{file} survived the next run");
    }
    assert!(
        host.exists(&young),
        "a young temp file may belong to a live writer"
    );
}

#[test]
fn stale_temp_files_of_the_resolv_conf_copy_are_cleaned() {
    if fs::metadata("/etc/resolv.conf").is_err() {
        crate::util::cannot_run("no /etc/resolv.conf on this machine to copy");
    }
    let host = FakeHost::new();
    host.install(&off_host());
    host.write("etc/resolv.conf", "nameserver 192.0.2.1\n");
    // This agent's scheme, and the scheme of the releases that named them `.skyhook-tmp-*`.
    let stale = [
        "etc/.resolv.conf.tmp.4242.00000000deadbeef",
        "etc/.skyhook-tmp-4242-0",
    ];
    for file in stale {
        host.write(file, "half");
        age(&host, file);
    }
    host.write("etc/.passwd.tmp.4242.00000000deadbeef", "not ours to judge");
    age(&host, "etc/.passwd.tmp.4242.00000000deadbeef");
    let run = host.run("apply", &[("COPY_RESOLV", "true")]);
    run.assert_success();
    for file in stale {
        assert!(!host.exists(file), "{file} survived");
    }
    assert!(
        host.exists("etc/.passwd.tmp.4242.00000000deadbeef"),
        "another file's temp name in the host's /etc is left alone"
    );
    let names = host.list("etc");
    assert!(
        names
            .iter()
            .all(|n| !n.contains(".tmp.") || n.contains("passwd")),
        "{names:?}"
    );
}

/// The pre-flight copies of earlier releases named their temp files `.skyhook-tmp-<pid>-<n>`
/// and their partial package copies `.skyhook-partial-<pid>-<n>/`: one temp-name scheme means
/// the state cleanup knows them too, files and directories alike (SPEC §5).
#[test]
fn stale_pre_flight_temp_names_are_cleaned_in_state_directories() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply").assert_success();
    let stale_file = format!("{FLAGS}/.skyhook-tmp-4242-0");
    let stale_dir = format!("{PKG_FLAGS}/.skyhook-partial-4242-1");
    host.write(&stale_file, "half");
    age(&host, &stale_file);
    host.write(&format!("{stale_dir}/config.json"), "{}");
    age(&host, &format!("{stale_dir}/config.json"));
    fs::File::open(host.path(&stale_dir))
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    let young = format!("{FLAGS}/.skyhook-tmp-4243-0");
    host.write(&young, "a live writer's");
    host.stage("apply").assert_success();
    assert!(
        !host.exists(&stale_file),
        "{stale_file} survived the next run"
    );
    assert!(
        !host.exists(&stale_dir),
        "{stale_dir} survived the next run"
    );
    assert!(
        host.exists(&young),
        "a young temp file may belong to a live writer"
    );
}

// ---------------------------------------------------------------------------------------------
// §9.6: an attempt counts only once `reboot` was spawned
// ---------------------------------------------------------------------------------------------

/// Four runs with a `reboot` that never starts (each fails with `cause`), then a working
/// `reboot`: no attempt was spent, so the fifth run reboots as attempt 1 (SPEC §9.6).
fn assert_no_attempt_spent_before_reboot_starts(host: &FakeHost, cause: &str) {
    let data = interrupt_data(NODE_RESTART);
    for _ in 0..4 {
        let run = host.interrupt(&data).run();
        run.assert_code(1);
        run.assert_stderr_contains(cause);
        assert!(
            !run.err().contains("never restarted"),
            "the loop guard counted a reboot that never ran: {run:?}"
        );
    }
    host.set_fake_tool("reboot", REBOOT_SHUTS_DOWN);
    let run = host.interrupt(&data).run();
    run.assert_killed_by_the_shutdown();
    assert_eq!(host.calls(), ["reboot"], "{run:?}");
    assert_eq!(
        host.read_string(&format!("{INTERRUPT_FLAGS}/node_restart_0.attempts")),
        format!("boot-id:{BOOT_ID}\nattempts:1\n")
    );
}

#[test]
fn reboot_attempts_are_not_spent_while_reboot_is_missing() {
    require_root!();
    let host = FakeHost::new();
    host.mkdir(PKG_DIR);
    fs::remove_file(host.path("usr/bin/reboot")).unwrap();
    assert_no_attempt_spent_before_reboot_starts(&host, "No such file or directory");
}

#[test]
fn reboot_attempts_are_not_spent_while_reboot_cannot_be_executed() {
    require_root!();
    let host = FakeHost::new();
    host.mkdir(PKG_DIR);
    // No `#!` line: the kernel refuses it (ENOEXEC), so no reboot was ever started.
    host.write("usr/bin/reboot", "echo rebooting\n");
    fs::set_permissions(
        host.path("usr/bin/reboot"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    assert_no_attempt_spent_before_reboot_starts(&host, "exec format error");
}

#[test]
fn an_unreadable_attempts_file_refuses_the_reboot_with_a_warning_naming_it() {
    require_root!();
    let same_boot = format!("boot-id:{BOOT_ID}\nattempts:many\n");
    for content in ["garbage", "", same_boot.as_str()] {
        let host = FakeHost::new();
        host.mkdir(PKG_DIR);
        host.set_fake_tool("reboot", REBOOT_SHUTS_DOWN);
        let attempts = format!("{INTERRUPT_FLAGS}/node_restart_0.attempts");
        host.write(&attempts, content);
        let run = host.interrupt(&interrupt_data(NODE_RESTART)).run();
        run.assert_code(1);
        run.assert_stderr_contains("reboot requested 3 times but the host never restarted");
        run.assert_stderr_line_contains(&["level=warn", "node_restart_0.attempts"]);
        assert!(host.calls().is_empty(), "{content:?}: {:?}", host.calls());
        assert_eq!(host.read_string(&attempts), content, "left for a human");
    }
}

// ---------------------------------------------------------------------------------------------
// §5: every message about a file carries the OS cause
// ---------------------------------------------------------------------------------------------

/// SPEC §8.12: the results record is first written when the run starts; a run that cannot
/// write even that fails before it runs anything, naming the record and the OS cause.
#[test]
fn a_results_record_that_cannot_be_started_on_a_full_disk_fails_before_any_step() {
    require_root!();
    let host = FakeHost::new();
    host.install(&off_host());
    let disk = Tmpfs::mount(&host.path("var/lib/skyhook/sk1/results"), "size=16k");
    disk.fill();
    let run = host.stage("apply");
    run.assert_code(1);
    run.assert_stderr_line_contains(&[
        "writing the results record /var/lib/skyhook/sk1/results/pkg/1.0.0/apply.json at the \
         start of the run",
        "No space left on device",
    ]);
    assert!(host.ran().is_empty(), "{:?}", host.ran());
    assert!(host.files_under(PKG_FLAGS).is_empty());
    drop(disk);
}

/// SPEC §8.12: a disk that fills during a run keeps the start record (`running`) in place of
/// the one the run could not write at its end; `agent status` then reports the run as an error,
/// never the previous run's success.
#[test]
fn a_results_record_the_full_disk_kept_from_being_finished_is_an_error_in_status() {
    require_root!();
    let host = FakeHost::new();
    let fill = "#!/bin/sh\n\
                if [ -e \"$SKYHOOK_DIR/fill\" ]; then\n\
                dd if=/dev/zero of=\"$SKYHOOK_DIR/../results/.filler\" bs=4096 2>/dev/null\n\
                exit 1\n\
                fi\n";
    host.install(
        &Package::new()
            .step("apply", Step::new("s1.sh").on_host(false))
            .step(
                "apply-check",
                Step::new("s1_check.sh").on_host(false).script(fill),
            ),
    );
    let disk = Tmpfs::mount(&host.path("var/lib/skyhook/sk1/results"), "size=64k");
    host.stage("apply").assert_success();
    host.stage("apply-check").assert_success();
    let status = |host: &FakeHost| host.agent().args(["status", &host.root_str()]).run();
    status(&host).assert_success();

    host.write(&format!("{PKG_DIR}/fill"), "");
    let run = host.stage("apply-check");
    run.assert_code(1);
    run.assert_stderr_line_contains(&[
        "could not write the results record",
        "apply-check.json",
        "No space left on device",
    ]);
    let after = status(&host);
    after.assert_code(1);
    after.assert_stdout_contains(
        "\nerrors:\n  pkg 1.0.0 apply-check: the last apply-check ended without recording its \
         result",
    );
    drop(disk);
}

/// SPEC §1.2: an open-file limit too low to run with (`ulimit -n 8`, under which the async
/// runtime panicked creating its signal pipe) is a runtime error that names the limit, before
/// anything is written; never a panic (exit 101) or a failure half-way through a stage.
#[test]
fn too_few_file_descriptors_fail_cleanly_before_anything_is_written() {
    let host = FakeHost::new();
    host.install(&off_host());
    let before = host.snapshot();
    for limit in ["8", "20"] {
        let run = host
            .agent()
            .args([
                format!("--nofile={limit}:{limit}").as_str(),
                env!("CARGO_BIN_EXE_agent"),
                "apply",
                &host.root_str(),
                COPY_DIR,
            ])
            .run_program(Path::new("/usr/bin/prlimit"));
        run.assert_code(1);
        run.assert_stderr_contains(&format!(
            "agent execution failed: too few file descriptors: the open-file limit \
             (RLIMIT_NOFILE, `ulimit -n`) is {limit}; the agent needs at least 64"
        ));
        assert!(!run.err().contains("panicked"), "{run:?}");
        before.assert_unchanged(&host.snapshot(), &format!("ulimit -n {limit}"));
    }
    host.stage("apply").assert_success();
}

#[test]
fn a_read_only_state_disk_fails_with_the_os_cause() {
    require_root!();
    let host = FakeHost::new();
    host.install(&off_host());
    let disk = Tmpfs::mount(&host.path(FLAGS), "size=64k");
    disk.remount_read_only();
    let run = host.stage("apply");
    run.assert_code(1);
    run.assert_stderr_line_contains(&["START", "Read-only file system"]);
    assert!(host.ran().is_empty());
    drop(disk);
}

// ---------------------------------------------------------------------------------------------
// §9.2 and `agent validate`: limits and lines the operator cannot see coming
// ---------------------------------------------------------------------------------------------

#[test]
fn encode_refuses_data_that_no_argv_could_carry_and_says_why() {
    // 100 KiB of JSON passes as one argument; its base64 (136 KiB) would not.
    let services: Vec<String> = (0..6000).map(|i| format!("\"s{i:05}.service\"")).collect();
    let json = format!(
        r#"{{"type":"service_restart","services":[{}]}}"#,
        services.join(",")
    );
    assert!(json.len() < 128 * 1024 && json.len() * 4 / 3 > 128 * 1024);
    let host = FakeHost::new();
    let run = host.agent().args(["interrupts", "encode", &json]).run();
    run.assert_code(1);
    run.assert_stderr_contains("128 KiB");
    run.assert_stderr_contains("MAX_ARG_STRLEN");
    assert_eq!(run.out(), "");
    let docs = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/operations.md"
    ))
    .unwrap();
    assert!(
        docs.contains("MAX_ARG_STRLEN") && docs.contains("128 KiB"),
        "docs/operations.md explains the argv limit"
    );
}

#[test]
fn validate_warns_about_control_characters_in_step_paths() {
    let host = FakeHost::new();
    let pkg = Package::new()
        .step("apply", Step::new("a\tb.sh").name("ab").on_host(false))
        .step(
            "apply-check",
            Step::new("a\tb_check.sh").name("abc").on_host(false),
        );
    host.install(&pkg);
    let dir = host.path(COPY_DIR);
    let run = host.agent().args(["validate", dir.to_str().unwrap()]).run();
    run.assert_success();
    let out = run.out();
    assert!(
        out.lines()
            .any(|l| l.starts_with("warning: modes.apply[0].path")
                && l.contains("control character")),
        "{out}"
    );
}
