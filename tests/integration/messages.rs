//! Errors name what was looked up and what to do (SPEC §1.2): a missing package directory
//! names `<ROOT><COPY_DIR>` and the SKYHOOK_DATA_DIR it also tried; an unset
//! SKYHOOK_RESOURCE_ID names the variable and its form; the reboot loop guard names its
//! attempts file, SKYHOOK_REBOOT_MAX_ATTEMPTS and the reset.

use crate::util::{CALLS_LOG, COPY_DIR, FakeHost, PKG_DIR, interrupt_data};

#[test]
fn a_missing_package_directory_names_both_places_looked_at() {
    let host = FakeHost::new();
    let missing = host.outside().join("no-package-here");
    let before = host.snapshot();
    for mode in ["apply", "plan"] {
        let run = if mode == "plan" {
            host.agent()
                .env("SKYHOOK_DATA_DIR", missing.to_str().unwrap())
                .args(["plan", "apply", &host.root_str(), COPY_DIR])
                .run()
        } else {
            host.run("apply", &[("SKYHOOK_DATA_DIR", missing.to_str().unwrap())])
        };
        run.assert_code(1);
        run.assert_stderr_contains(&format!(
            "package directory {}/{PKG_DIR} (ROOT_MOUNT + COPY_DIR) does not exist, and \
             SKYHOOK_DATA_DIR \"{}\" to copy it from does not exist either: check ROOT_MOUNT \
             and COPY_DIR, or set SKYHOOK_DATA_DIR to the package's directory in this container",
            host.root_str(),
            missing.display()
        ));
    }
    before.assert_unchanged(&host.snapshot(), "missing package directory");
}

#[test]
fn an_unset_resource_id_names_the_variable_and_its_form() {
    let host = FakeHost::new();
    let before = host.snapshot();
    let run = host
        .agent()
        .env_remove("SKYHOOK_RESOURCE_ID")
        .args(["apply", &host.root_str(), COPY_DIR])
        .run();
    run.assert_code(1);
    run.assert_stderr_contains(
        "SKYHOOK_RESOURCE_ID is not set: expected <prefix>_<package>_<version>, e.g. \
         sk1-uid_pkg_1.0.0 (the operator sets it on the agent's pod)",
    );
    let run = host.run("apply", &[("SKYHOOK_RESOURCE_ID", "abc")]);
    run.assert_code(1);
    run.assert_stderr_contains(
        "resource ID \"abc\" must end in _PACKAGE_VERSION (SKYHOOK_RESOURCE_ID is \
         <prefix>_<package>_<version>, e.g. sk1-uid_pkg_1.0.0)",
    );
    before.assert_unchanged(&host.snapshot(), "bad resource ID");
}

#[test]
fn the_loop_guard_names_its_file_its_variable_and_the_reset() {
    let host = FakeHost::new();
    host.install(&crate::util::Package::simple());
    host.write_reboot_requested(3);
    let run = host
        .agent()
        .args([
            "interrupt",
            &host.root_str(),
            COPY_DIR,
            &interrupt_data(r#"{"type":"node_restart"}"#),
        ])
        .run();
    run.assert_code(1);
    let file = "/var/lib/skyhook/sk1/interrupts/flags/abc_pkg_1.0.0/node_restart_0.attempts";
    run.assert_stderr_contains(&format!(
        "reboot requested 3 times but the host never restarted; refusing to reboot again \
         (loop guard: SKYHOOK_REBOOT_MAX_ATTEMPTS=3, counted in {file}). Find out why the host \
         does not restart, then allow new attempts with `agent reset {} --interrupt \
         abc_pkg_1.0.0 --yes` (or remove {file}), or raise SKYHOOK_REBOOT_MAX_ATTEMPTS",
        host.root_str()
    ));
    assert!(!host.exists(CALLS_LOG), "no reboot was requested");
}
