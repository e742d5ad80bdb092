//! SPEC §1: operator argument forms, usage errors, `--version`, `--help`, unknown modes.

use crate::util::{COPY_DIR, FakeHost, Package, Run};

/// Run `agent ARGS` against a host with the standard package and assert a usage error: exit 2,
/// nothing on stdout (validation precedes the banner), `message` then usage text on stderr,
/// nothing touched under ROOT or in the cwd.
#[track_caller]
fn assert_usage_error(args: &[&str], message: &str) -> Run {
    let host = FakeHost::new();
    host.install(&Package::standard());
    let before = host.snapshot();
    let before_cwd = host.snapshot_outside();
    let run = host
        .agent()
        .args(args.iter().map(|a| a.replace("{ROOT}", &host.root_str())))
        .run();
    run.assert_code(2);
    assert!(
        run.stdout.is_empty(),
        "a usage error prints nothing on stdout\n{run:?}"
    );
    let err = run.err();
    let at = err
        .find(message)
        .unwrap_or_else(|| panic!("stderr lacks {message:?}\n{run:?}"));
    assert!(
        err[at..].contains("COPY_DIR"),
        "usage text (listing the forms) must follow the message on stderr\n{run:?}"
    );
    before.assert_unchanged(&host.snapshot(), "usage error");
    before_cwd.assert_unchanged(&host.snapshot_outside(), "usage error (cwd)");
    run
}

#[test]
fn version_prints_the_embedded_version_only() {
    let host = FakeHost::new();
    let before = host.snapshot();
    let run = host.agent().arg("--version").run();
    run.assert_success();
    let expected = option_env!("AGENT_VERSION")
        .filter(|v| !v.is_empty())
        .unwrap_or(env!("CARGO_PKG_VERSION"));
    assert_eq!(run.out(), format!("{expected}\n"), "{run:?}");
    before.assert_unchanged(&host.snapshot(), "--version");
}

#[test]
fn version_prints_no_banner_even_without_resource_id() {
    let host = FakeHost::new();
    let run = host
        .agent()
        .env_remove("SKYHOOK_RESOURCE_ID")
        .arg("--version")
        .run();
    run.assert_success();
    assert!(!run.out().contains("CONFIGURATION"), "{run:?}");
    assert_eq!(run.out().lines().count(), 1, "{run:?}");
}

#[test]
fn version_with_an_extra_argument_is_a_usage_error() {
    let host = FakeHost::new();
    let run = host.agent().args(["--version", "extra"]).run();
    run.assert_code(2);
    assert!(run.stdout.is_empty(), "{run:?}");
}

#[test]
fn help_lists_the_operator_forms_and_subcommands() {
    for flag in ["--help", "-h"] {
        let host = FakeHost::new();
        let before = host.snapshot();
        let run = host.agent().arg(flag).run();
        run.assert_success();
        let out = run.out();
        for needle in [
            "MODE",
            "ROOT_MOUNT",
            "COPY_DIR",
            "INTERRUPT_DATA",
            "interrupt",
            "--version",
            "interrupts list",
            "interrupts encode",
            "interrupts decode",
        ] {
            assert!(
                out.contains(needle),
                "{flag}: help lacks {needle:?}\n{run:?}"
            );
        }
        assert!(
            !out.contains("-CLI CONFIGURATION--"),
            "{flag}: no banner\n{run:?}"
        );
        before.assert_unchanged(&host.snapshot(), flag);
    }
}

#[test]
fn no_arguments_is_a_usage_error() {
    assert_usage_error(&[], "expected 2, 3, or 4 arguments; received 0");
}

#[test]
fn one_argument_is_a_usage_error() {
    assert_usage_error(&["apply"], "expected 2, 3, or 4 arguments; received 1");
}

#[test]
fn five_arguments_is_a_usage_error() {
    assert_usage_error(
        &["apply", "{ROOT}", COPY_DIR, "x", "y"],
        "expected 2, 3, or 4 arguments; received 5",
    );
}

#[test]
fn relative_root_mount_is_a_usage_error() {
    assert_usage_error(
        &["apply", "x", COPY_DIR],
        "root mount \"x\" is not absolute",
    );
}

#[test]
fn relative_copy_dir_is_a_usage_error() {
    assert_usage_error(
        &["apply", "{ROOT}", "x"],
        "copy directory \"x\" is not absolute",
    );
}

#[test]
fn legacy_two_argument_form_validates_the_copy_dir() {
    assert_usage_error(&["apply", "x"], "copy directory \"x\" is not absolute");
}

#[test]
fn interrupt_with_empty_data_is_a_usage_error() {
    assert_usage_error(
        &["interrupt", "{ROOT}", COPY_DIR, ""],
        "interrupt data must not be empty",
    );
}

#[test]
fn legacy_interrupt_form_with_empty_data_is_a_usage_error() {
    assert_usage_error(
        &["interrupt", COPY_DIR, ""],
        "interrupt data must not be empty",
    );
}

#[test]
fn stage_with_interrupt_data_is_a_usage_error() {
    assert_usage_error(
        &["apply", "{ROOT}", COPY_DIR, "eyJ0eXBlIjoibm9fb3AifQ=="],
        "stage \"apply\" does not accept interrupt data",
    );
}

#[test]
fn check_stage_with_interrupt_data_is_a_usage_error() {
    assert_usage_error(
        &[
            "apply-check",
            "{ROOT}",
            COPY_DIR,
            "eyJ0eXBlIjoibm9fb3AifQ==",
        ],
        "stage \"apply-check\" does not accept interrupt data",
    );
}

#[track_caller]
fn assert_unknown_mode_is_a_no_op(mode: &str) {
    let host = FakeHost::new();
    host.install(&Package::standard());
    let before = host.snapshot();
    let before_cwd = host.snapshot_outside();
    let run = host.stage(mode);
    run.assert_success();
    run.assert_stderr_contains(
        "this agent version does not support the requested stage; treating it as a no-op",
    );
    assert!(run.stdout.is_empty(), "unknown mode: no banner\n{run:?}");
    before.assert_unchanged(&host.snapshot(), mode);
    before_cwd.assert_unchanged(&host.snapshot_outside(), mode);
}

#[test]
fn unknown_mode_is_a_no_op_with_a_warning() {
    assert_unknown_mode_is_a_no_op("bogus");
}

#[test]
fn unknown_mode_with_interrupt_data_is_a_no_op_with_a_warning() {
    // SPEC §1.1: a future operator stage may carry data, as `interrupt` does.
    let host = FakeHost::new();
    host.install(&Package::standard());
    let before = host.snapshot();
    let run = host
        .agent()
        .args([
            "bogus",
            &host.root_str(),
            COPY_DIR,
            "eyJ0eXBlIjoibm9fb3AifQ==",
        ])
        .run();
    run.assert_success();
    run.assert_stderr_contains(
        "this agent version does not support the requested stage; treating it as a no-op",
    );
    assert!(run.stdout.is_empty(), "unknown mode: no banner\n{run:?}");
    before.assert_unchanged(&host.snapshot(), "bogus with data");
}

#[test]
fn a_word_within_two_edits_of_a_subcommand_is_a_typo() {
    let host = FakeHost::new();
    host.install(&Package::standard());
    let before = host.snapshot();
    let root = host.root_str();
    for (args, meant) in [
        (vec!["staus", root.as_str(), COPY_DIR], "status"),
        (vec!["staus", root.as_str()], "status"),
        (vec!["validat", COPY_DIR], "validate"),
        (vec!["pla", root.as_str(), COPY_DIR, "eA=="], "plan"),
    ] {
        let run = host.agent().args(&args).run();
        run.assert_code(2);
        run.assert_stderr_contains(&format!(
            "unknown command {:?}; did you mean {meant:?}?",
            args[0]
        ));
        assert!(run.stdout.is_empty(), "no banner\n{run:?}");
        assert!(
            !run.err().contains("does not support the requested stage"),
            "a typo is not an operator stage\n{run:?}"
        );
    }
    before.assert_unchanged(&host.snapshot(), "subcommand typos");
}

#[test]
fn modes_are_case_sensitive() {
    assert_unknown_mode_is_a_no_op("APPLY");
}

#[test]
fn unknown_mode_warning_is_a_single_line() {
    let host = FakeHost::new();
    host.install(&Package::standard());
    let run = host.stage("bogus");
    run.assert_success();
    let hits = run
        .err()
        .lines()
        .filter(|l| l.contains("does not support the requested stage"))
        .count();
    assert_eq!(hits, 1, "{run:?}");
}
