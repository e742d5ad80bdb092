//! SPEC §2–§4: the byte-exact startup banner, environment parsing and the resource ID.

use crate::util::{Banner, COPY_DIR, FakeHost, PKG_DIR, Package, Run, Step};

/// apply: one off-host step (no chroot, no root needed) that prints nothing.
fn quiet_package() -> Package {
    Package::new()
        .step(
            "apply",
            Step::new("s1.sh")
                .on_host(false)
                .script("#!/bin/sh\nexit 0\n"),
        )
        .step("apply-check", Step::new("s1_check.sh").on_host(false))
}

/// Run `config` (no steps configured: banner, then a no-op) with extra env.
fn config_run(host: &FakeHost, env: &[(&str, &str)]) -> Run {
    host.install(&quiet_package());
    host.run("config", env)
}

#[test]
fn banner_is_byte_exact() {
    let host = FakeHost::new();
    host.install(&quiet_package());
    let run = host.stage("apply");
    run.assert_success();
    let expected = format!(
        "{}apply s1.sh [] [0] Idempotence.Auto False\n",
        Banner::new("apply", &host).render()
    );
    assert_eq!(run.out(), expected, "{run:?}");
}

#[test]
fn banner_matches_the_legacy_text_literally() {
    let host = FakeHost::new();
    let run = config_run(&host, &[]);
    run.assert_success();
    let expected = format!(
        "--------------------\n\
         -CLI CONFIGURATION--\n\
         mode: config\n\
         root_mount: {}\n\
         copy_dir: /var/lib/skyhook/sk1/pkg-1.0.0-uid1-1\n\
         interrupt_data: None\n\
         always_run_step: False\n\
         -ENV CONFIGURATION--\n\
         COPY_RESOLV: False\n\
         OVERLAY_ALWAYS_RUN_STEP: False\n\
         SKYHOOK_RESOURCE_ID: abc_pkg_1.0.0\n\
         SKYHOOK_DATA_DIR: /skyhook-package\n\
         SKYHOOK_ROOT_DIR: /var/lib/skyhook/sk1\n\
         SKYHOOK_LOG_DIR: /var/log/skyhook/sk1\n\
         SKYHOOK_AGENT_BUFFER_LIMIT: 8192\n\
         SKYHOOK_AGENT_WRITE_LOGS: True\n\
         Directory CONFIGURATION\n\
         flag_dir: /var/lib/skyhook/sk1/flags/pkg/1.0.0\n\
         log_dir: /var/log/skyhook/sk1/pkg/1.0.0\n\
         history_file: /var/lib/skyhook/sk1/history/pkg.json\n\
         --------------------\n",
        host.root_str()
    );
    assert_eq!(run.out(), expected, "{run:?}");
}

#[test]
fn banner_prints_booleans_as_true_and_false() {
    let host = FakeHost::new();
    let run = config_run(
        &host,
        &[
            ("SKYHOOK_AGENT_WRITE_LOGS", "false"),
            ("OVERLAY_ALWAYS_RUN_STEP", "TRUE"),
        ],
    );
    run.assert_success();
    let mut banner = Banner::new("config", &host);
    banner.write_logs = false;
    banner.overlay_always_run_step = true;
    // The CLI section mirrors the policy (transcript 03).
    banner.always_run_step = true;
    run.after_banner(&banner.render());
}

#[test]
fn booleans_are_case_insensitive() {
    let host = FakeHost::new();
    let run = config_run(
        &host,
        &[
            ("SKYHOOK_AGENT_WRITE_LOGS", "FaLsE"),
            ("OVERLAY_ALWAYS_RUN_STEP", "tRuE"),
        ],
    );
    run.assert_success();
    let mut banner = Banner::new("config", &host);
    banner.write_logs = false;
    banner.overlay_always_run_step = true;
    banner.always_run_step = true;
    run.after_banner(&banner.render());
}

#[test]
fn unset_booleans_take_their_defaults() {
    let host = FakeHost::new();
    host.install(&quiet_package());
    let run = host
        .agent()
        .env_remove("COPY_RESOLV")
        .args(["config", &host.root_str(), COPY_DIR])
        .run();
    let mut banner = Banner::new("config", &host);
    banner.copy_resolv = true;
    run.after_banner(&banner.render());
}

#[test]
fn invalid_boolean_is_false_with_a_warning_naming_variable_and_value() {
    let host = FakeHost::new();
    let run = config_run(&host, &[("COPY_RESOLV", "yes")]);
    run.assert_success();
    run.after_banner(&Banner::new("config", &host).render());
    run.assert_stderr_line_contains(&["COPY_RESOLV", "yes"]);
    assert!(
        !host.exists("etc/resolv.conf"),
        "an invalid boolean is false: resolv.conf must not be copied"
    );
}

#[test]
fn invalid_write_logs_boolean_is_false_with_a_warning() {
    let host = FakeHost::new();
    let run = config_run(&host, &[("SKYHOOK_AGENT_WRITE_LOGS", "1")]);
    run.assert_success();
    let mut banner = Banner::new("config", &host);
    banner.write_logs = false;
    run.after_banner(&banner.render());
    run.assert_stderr_line_contains(&["SKYHOOK_AGENT_WRITE_LOGS", "1"]);
}

#[test]
fn buffer_limit_is_printed_raw() {
    let host = FakeHost::new();
    let run = config_run(&host, &[("SKYHOOK_AGENT_BUFFER_LIMIT", "12k")]);
    run.assert_success();
    let mut banner = Banner::new("config", &host);
    banner.buffer_limit = "12k".to_owned();
    run.after_banner(&banner.render());
}

#[test]
fn data_dir_is_printed() {
    let host = FakeHost::new();
    let run = config_run(&host, &[("SKYHOOK_DATA_DIR", "/opt/package")]);
    run.assert_success();
    let mut banner = Banner::new("config", &host);
    banner.data_dir = "/opt/package".to_owned();
    run.after_banner(&banner.render());
}

#[test]
fn empty_directory_variables_take_their_defaults() {
    let host = FakeHost::new();
    host.install(&quiet_package());
    let run = host
        .agent()
        .env("SKYHOOK_ROOT_DIR", "")
        .env_remove("SKYHOOK_LOG_DIR")
        .env("SKYHOOK_DATA_DIR", "")
        .args(["config", &host.root_str(), COPY_DIR])
        .run();
    run.assert_success();
    let mut banner = Banner::new("config", &host);
    banner.root_dir = "/etc/skyhook".to_owned();
    banner.log_dir = "/var/log/skyhook".to_owned();
    run.after_banner(&banner.render());
    assert!(
        host.is_file("etc/skyhook/flags/START"),
        "STATE defaults to /etc/skyhook"
    );
}

#[test]
fn banner_paths_are_cleaned() {
    let host = FakeHost::new();
    host.install(&quiet_package());
    let run = host
        .agent()
        .env("SKYHOOK_ROOT_DIR", "/var/lib/skyhook//sk1/")
        .env("SKYHOOK_LOG_DIR", "/var/log/./skyhook/sk1/")
        .args([
            "config",
            &host.root_str(),
            "/var/lib/skyhook/sk1//pkg-1.0.0-uid1-1/",
        ])
        .run();
    run.assert_success();
    run.after_banner(&Banner::new("config", &host).render());
}

#[test]
fn banner_uses_resource_id_names_not_config_names() {
    let host = FakeHost::new();
    let run = config_run(&host, &[("SKYHOOK_RESOURCE_ID", "abc_other_2.0.0")]);
    run.assert_success();
    let mut banner = Banner::new("config", &host);
    banner.resource_id = "abc_other_2.0.0".to_owned();
    banner.package = "other".to_owned();
    banner.version = "2.0.0".to_owned();
    run.after_banner(&banner.render());
}

#[test]
fn package_names_keep_their_underscores() {
    let host = FakeHost::new();
    let rid = "nodewright-uid-1_package_with_underscores_1.2.3";
    let run = config_run(&host, &[("SKYHOOK_RESOURCE_ID", rid)]);
    run.assert_success();
    let mut banner = Banner::new("config", &host);
    banner.resource_id = rid.to_owned();
    banner.package = "package_with_underscores".to_owned();
    banner.version = "1.2.3".to_owned();
    run.after_banner(&banner.render());
}

#[test]
fn step_markers_use_config_names_while_the_banner_uses_resource_id_names() {
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step("apply", Step::new("s1.sh").on_host(false))
            .step("apply-check", Step::new("s1_check.sh").on_host(false)),
    );
    let rid = "nodewright-uid-1_package_with_underscores_1.2.3";
    let run = host.run("apply", &[("SKYHOOK_RESOURCE_ID", rid)]);
    run.assert_success();
    assert!(host.is_file("var/lib/skyhook/sk1/flags/pkg/1.0.0/s1.sh_W11fWzBd"));
    assert!(!host.exists("var/lib/skyhook/sk1/flags/package_with_underscores"));
    assert!(!host.exists("var/log/skyhook/sk1/package_with_underscores"));
}

#[test]
fn missing_resource_id_fails_before_the_banner() {
    let host = FakeHost::new();
    host.install(&quiet_package());
    let before = host.snapshot();
    let run = host
        .agent()
        .env_remove("SKYHOOK_RESOURCE_ID")
        .args(["apply", &host.root_str(), COPY_DIR])
        .run();
    run.assert_code(1);
    assert!(
        run.stdout.is_empty(),
        "no banner without a package identity\n{run:?}"
    );
    let err = run.err();
    assert!(
        err.contains("resource ID") || err.contains("SKYHOOK_RESOURCE_ID"),
        "{run:?}"
    );
    before.assert_unchanged(&host.snapshot(), "missing resource ID");
}

#[track_caller]
fn assert_resource_id_rejected(rid: &str, message: &str) {
    let host = FakeHost::new();
    host.install(&quiet_package());
    let before = host.snapshot();
    let run = host.run("apply", &[("SKYHOOK_RESOURCE_ID", rid)]);
    run.assert_code(1);
    run.assert_stderr_contains(message);
    assert!(run.stdout.is_empty(), "no banner for {rid:?}\n{run:?}");
    before.assert_unchanged(&host.snapshot(), rid);
}

#[test]
fn resource_id_without_package_and_version_is_rejected() {
    for rid in ["abc", "abc_pkg", "_pkg_1.0", "a__1.0", "a_pkg_"] {
        assert_resource_id_rejected(
            rid,
            &format!("resource ID \"{rid}\" must end in _PACKAGE_VERSION"),
        );
    }
    assert_resource_id_rejected("", "SKYHOOK_RESOURCE_ID is not set: expected <prefix>_");
}

#[test]
fn resource_id_package_must_be_a_single_path_component() {
    for rid in ["a_._1.0", "a_.._1.0"] {
        let pkg = &rid[2..rid.len() - 4];
        assert_resource_id_rejected(
            rid,
            &format!("package name \"{pkg}\" must be a single path component"),
        );
    }
}

#[test]
fn resource_id_version_must_be_a_single_path_component() {
    assert_resource_id_rejected("a_pkg_..", "must be a single path component");
}

#[test]
fn resource_id_errors_do_not_touch_the_package_dir() {
    let host = FakeHost::new();
    host.install(&quiet_package());
    let run = host.run("apply", &[("SKYHOOK_RESOURCE_ID", "abc")]);
    run.assert_code(1);
    assert_eq!(host.mode(&format!("{PKG_DIR}/skyhook_dir/s1.sh")), 0o644);
}
