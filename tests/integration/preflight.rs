//! SPEC §2 (directory variables) and §6: pre-flight — resolv.conf, package data, the root_dir
//! overlay, expected config files. Packages here run off host (no chroot), so no root needed.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::PathBuf;
use std::process::Command;

use crate::util::{COPY_DIR, FakeHost, PKG_DIR, Package, START, Snapshot, Step};

fn off_host() -> Package {
    Package::new()
        .step("apply", Step::new("s1.sh").on_host(false))
        .step("apply-check", Step::new("s1_check.sh").on_host(false))
        .step("uninstall", Step::new("un.sh").on_host(false))
        .step("uninstall-check", Step::new("un_check.sh").on_host(false))
}

/// Write `pkg` into a data dir outside ROOT; returns its path.
fn data_dir(host: &FakeHost, pkg: &Package) -> PathBuf {
    let dir = host.outside().join("skyhook-package");
    pkg.write_into(&dir, host.root());
    dir
}

#[test]
fn copy_resolv_defaults_to_copying_the_container_resolv_conf() {
    let Ok(expected) = fs::read("/etc/resolv.conf") else {
        crate::util::cannot_run("no /etc/resolv.conf here, and the test copies it");
    };
    let host = FakeHost::new();
    host.install(&off_host());
    let run = host
        .agent()
        .env_remove("COPY_RESOLV")
        .args(["apply", &host.root_str(), COPY_DIR])
        .run();
    run.assert_success();
    assert_eq!(host.read("etc/resolv.conf"), expected);
}

#[test]
fn copy_resolv_false_leaves_resolv_conf_alone() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.write("etc/resolv.conf", "nameserver 192.0.2.1\n");
    host.stage("apply").assert_success();
    assert_eq!(
        host.read_string("etc/resolv.conf"),
        "nameserver 192.0.2.1\n"
    );
}

#[test]
fn copy_resolv_follows_a_relative_link_inside_root() {
    let Ok(expected) = fs::read("/etc/resolv.conf") else {
        crate::util::cannot_run("no /etc/resolv.conf here, and the test copies it");
    };
    let host = FakeHost::new();
    host.install(&off_host());
    host.mkdir("run/systemd/resolve");
    host.write("run/systemd/resolve/resolv.conf", "old\n");
    host.symlink("etc/resolv.conf", "../run/systemd/resolve/resolv.conf");
    host.run("apply", &[("COPY_RESOLV", "true")])
        .assert_success();
    assert_eq!(host.read("run/systemd/resolve/resolv.conf"), expected);
    assert!(
        fs::symlink_metadata(host.path("etc/resolv.conf"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn legacy_invocation_copies_the_package_from_the_data_dir() {
    let host = FakeHost::new();
    let pkg = off_host()
        .configmap("a.conf", b"configured")
        .expect_config_file("a.conf");
    let src = data_dir(&host, &pkg);
    fs::set_permissions(
        src.join("configmaps/a.conf"),
        fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    let src_before = Snapshot::of(&src);
    let run = host.run("apply", &[("SKYHOOK_DATA_DIR", src.to_str().unwrap())]);
    run.assert_success();
    assert_eq!(
        host.read(&format!("{PKG_DIR}/config.json")),
        fs::read(src.join("config.json")).unwrap()
    );
    assert_eq!(
        host.read_string(&format!("{PKG_DIR}/configmaps/a.conf")),
        "configured"
    );
    assert_eq!(host.mode(&format!("{PKG_DIR}/configmaps/a.conf")), 0o640);
    assert_eq!(host.ran_count("s1.sh"), 1);
    src_before.assert_unchanged(&Snapshot::of(&src), "the data dir is only read");
}

#[test]
fn legacy_copy_drops_special_permission_bits() {
    let host = FakeHost::new();
    let src = data_dir(&host, &off_host());
    fs::write(src.join("configmaps/tool"), "x").unwrap();
    fs::set_permissions(
        src.join("configmaps/tool"),
        fs::Permissions::from_mode(0o4755),
    )
    .unwrap();
    host.run("apply", &[("SKYHOOK_DATA_DIR", src.to_str().unwrap())])
        .assert_success();
    assert_eq!(host.mode(&format!("{PKG_DIR}/configmaps/tool")), 0o755);
}

#[test]
fn legacy_copy_follows_symlinks() {
    let host = FakeHost::new();
    let src = data_dir(&host, &off_host());
    let target = host.outside().join("real.conf");
    fs::write(&target, "through a link").unwrap();
    symlink(&target, src.join("configmaps/linked.conf")).unwrap();
    host.run("apply", &[("SKYHOOK_DATA_DIR", src.to_str().unwrap())])
        .assert_success();
    let copied = format!("{PKG_DIR}/configmaps/linked.conf");
    assert!(
        host.is_file(&copied),
        "the link is copied as a regular file"
    );
    assert_eq!(host.read_string(&copied), "through a link");
}

#[test]
fn legacy_copy_rejects_symlink_cycles() {
    let host = FakeHost::new();
    let src = data_dir(&host, &off_host());
    symlink("..", src.join("configmaps/loop")).unwrap();
    let run = host.run("apply", &[("SKYHOOK_DATA_DIR", src.to_str().unwrap())]);
    run.assert_code(1);
    assert!(!host.exists(START));
}

#[test]
fn legacy_copy_rejects_non_regular_files() {
    let host = FakeHost::new();
    let src = data_dir(&host, &off_host());
    let fifo = src.join("configmaps/fifo");
    let status = Command::new("/bin/busybox")
        .args(["mkfifo", fifo.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    let run = host.run("apply", &[("SKYHOOK_DATA_DIR", src.to_str().unwrap())]);
    run.assert_code(1);
    run.assert_stderr_contains("fifo");
    assert!(!host.exists(START));
}

#[test]
fn existing_copy_dir_is_used_as_is() {
    let host = FakeHost::new();
    host.install(&off_host());
    let other = off_host().configmap("from-data-dir", b"x");
    let src = data_dir(&host, &other);
    let before = Snapshot::of(&host.path(COPY_DIR).join("configmaps"));
    host.run("apply", &[("SKYHOOK_DATA_DIR", src.to_str().unwrap())])
        .assert_success();
    before.assert_unchanged(
        &Snapshot::of(&host.path(COPY_DIR).join("configmaps")),
        "existing COPY_DIR",
    );
}

#[test]
fn missing_data_dir_fails() {
    let host = FakeHost::new();
    let missing = host.outside().join("nope");
    let before = host.snapshot();
    let run = host.run("apply", &[("SKYHOOK_DATA_DIR", missing.to_str().unwrap())]);
    run.assert_code(1);
    run.assert_stderr_contains(&format!(
        "package directory {}/{PKG_DIR} (ROOT_MOUNT + COPY_DIR) does not exist, and \
         SKYHOOK_DATA_DIR \"{}\" to copy it from does not exist either: check ROOT_MOUNT and \
         COPY_DIR, or set SKYHOOK_DATA_DIR to the package's directory in this container",
        host.root_str(),
        missing.display()
    ));
    before.assert_unchanged(&host.snapshot(), "missing data dir");
}

#[test]
fn copy_dir_that_is_not_a_directory_fails() {
    let host = FakeHost::new();
    host.write(PKG_DIR, "not a directory");
    let src = data_dir(&host, &off_host());
    let run = host.run("apply", &[("SKYHOOK_DATA_DIR", src.to_str().unwrap())]);
    run.assert_code(1);
    assert_eq!(host.read_string(PKG_DIR), "not a directory");
    assert!(!host.exists(START));
}

#[test]
fn relative_data_dir_fails_before_the_banner() {
    let host = FakeHost::new();
    host.install(&off_host());
    let before = host.snapshot();
    let run = host.run("apply", &[("SKYHOOK_DATA_DIR", "skyhook-package")]);
    run.assert_code(1);
    run.assert_stderr_line_contains(&["SKYHOOK_DATA_DIR"]);
    assert!(run.stdout.is_empty(), "{run:?}");
    before.assert_unchanged(&host.snapshot(), "relative data dir");
}

#[track_caller]
fn assert_escaping_dir_variable_fails(var: &str, value: &str) {
    let host = FakeHost::new();
    host.install(&off_host());
    let before = host.snapshot();
    let outside_before = Snapshot::of(host.root().parent().unwrap());
    let run = host.run("apply", &[(var, value)]);
    run.assert_code(1);
    run.assert_stderr_contains(value);
    before.assert_unchanged(&host.snapshot(), var);
    outside_before.assert_unchanged(&Snapshot::of(host.root().parent().unwrap()), var);
}

#[test]
fn state_dir_escaping_root_fails() {
    assert_escaping_dir_variable_fails("SKYHOOK_ROOT_DIR", "../../x");
}

#[test]
fn log_dir_escaping_root_fails() {
    assert_escaping_dir_variable_fails("SKYHOOK_LOG_DIR", "../escape");
}

#[test]
fn root_dir_overlay_is_copied_onto_root() {
    let host = FakeHost::new();
    host.install(
        &off_host()
            .root_file("etc/pkg/pkg.conf", b"from root_dir", 0o644)
            .root_file("usr/local/bin/tool", b"#!/bin/sh\n", 0o4755),
    );
    host.write("etc/pkg/pkg.conf", "old");
    host.stage("apply").assert_success();
    assert_eq!(host.read_string("etc/pkg/pkg.conf"), "from root_dir");
    assert_eq!(host.read_string("usr/local/bin/tool"), "#!/bin/sh\n");
    assert_eq!(
        host.mode("usr/local/bin/tool"),
        0o755,
        "special bits dropped"
    );
}

#[test]
fn root_dir_overlay_does_not_chmod_root_itself() {
    let host = FakeHost::new();
    host.install(&off_host().root_file("etc/pkg/pkg.conf", b"x", 0o644));
    fs::set_permissions(
        host.path(&format!("{PKG_DIR}/root_dir")),
        fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    let mode_before = fs::metadata(host.root()).unwrap().permissions().mode() & 0o7777;
    host.stage("apply").assert_success();
    let mode_after = fs::metadata(host.root()).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode_before, mode_after);
}

#[test]
fn root_dir_overlay_applies_to_check_and_other_stages() {
    for mode in ["apply-check", "config"] {
        let host = FakeHost::new();
        host.install(&off_host().root_file("etc/pkg/pkg.conf", b"from root_dir", 0o644));
        host.stage(mode).assert_success();
        assert_eq!(
            host.read_string("etc/pkg/pkg.conf"),
            "from root_dir",
            "{mode}"
        );
    }
}

#[test]
fn root_dir_overlay_is_skipped_for_uninstall_stages() {
    for mode in ["uninstall", "uninstall-check"] {
        let host = FakeHost::new();
        host.install(&off_host().root_file("etc/pkg/pkg.conf", b"from root_dir", 0o644));
        host.stage(mode).assert_success();
        assert!(!host.exists("etc/pkg"), "{mode} must not overlay root_dir");
    }
}

#[test]
fn root_dir_overlay_does_not_follow_destination_links_out_of_root() {
    let host = FakeHost::new();
    host.install(&off_host().root_file("etc/pkg/pkg.conf", b"from root_dir", 0o644));
    let outside = host.outside().join("target-dir");
    fs::create_dir_all(&outside).unwrap();
    host.symlink("etc/pkg", &outside);
    let _ = host.stage("apply");
    assert!(
        fs::read_dir(&outside).unwrap().next().is_none(),
        "nothing may be written outside ROOT"
    );
}

#[test]
fn missing_expected_config_file_fails() {
    let host = FakeHost::new();
    host.install(&off_host().expect_config_file("a.conf"));
    let run = host.stage("apply");
    run.assert_code(1);
    run.assert_stderr_contains(
        "expected config file \"a.conf\" was not found in the configmaps directory",
    );
    assert!(host.ran().is_empty());
    assert!(!host.exists(START));
}

#[test]
fn expected_config_file_must_be_a_regular_file() {
    let host = FakeHost::new();
    host.install(&off_host().expect_config_file("a.conf"));
    host.mkdir(&format!("{PKG_DIR}/configmaps/a.conf"));
    let run = host.stage("apply");
    run.assert_code(1);
    run.assert_stderr_contains("a.conf");
    assert!(host.ran().is_empty());
}

#[test]
fn present_expected_config_files_pass() {
    let host = FakeHost::new();
    host.install(
        &off_host()
            .configmap("a.conf", b"a")
            .configmap("sub/b.conf", b"b")
            .expect_config_file("a.conf")
            .expect_config_file("sub/b.conf"),
    );
    host.stage("apply").assert_success();
}

#[test]
fn expected_config_files_are_not_checked_for_uninstall() {
    let host = FakeHost::new();
    host.install(&off_host().expect_config_file("a.conf"));
    host.stage("uninstall").assert_success();
}

#[test]
fn missing_config_json_fails() {
    let host = FakeHost::new();
    host.install(&off_host());
    fs::remove_file(host.path(&format!("{PKG_DIR}/config.json"))).unwrap();
    let before = host.snapshot();
    let run = host.stage("apply");
    run.assert_code(1);
    run.assert_stderr_contains("config.json");
    before.assert_unchanged(&host.snapshot(), "missing config.json");
}

#[test]
fn data_dir_is_not_read_when_copy_dir_exists() {
    let host = FakeHost::new();
    host.install(&off_host());
    let missing = host.outside().join("nope");
    host.run("apply", &[("SKYHOOK_DATA_DIR", missing.to_str().unwrap())])
        .assert_success();
}
