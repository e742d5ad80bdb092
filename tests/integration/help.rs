//! Mistakes get help (SPEC §1.1, §1.4): an unknown mode stays a warned no-op but suggests the
//! closest mode; `--help`/`-h`, `help <topic>`, `--version`/`-V` work in every position; a mode's
//! help documents its arguments, environment and exit codes; `--format text|json` on every
//! subcommand with output formats.

use serde_json::Value;

use crate::util::{COPY_DIR, FakeHost, Package, Step};

const NO_OP: &str =
    "this agent version does not support the requested stage; treating it as a no-op";

#[test]
fn a_mistyped_mode_is_a_no_op_that_suggests_the_closest_mode() {
    let host = FakeHost::new();
    host.install(&Package::simple());
    let before = host.snapshot();
    for (typo, meant) in [
        ("aply", "apply"),
        ("APPLY", "apply"),
        ("apply-chek", "apply-check"),
        ("interupt", "interrupt"),
    ] {
        let run = host.agent().args([typo, &host.root_str(), COPY_DIR]).run();
        run.assert_success();
        assert!(run.stdout.is_empty(), "no banner\n{run:?}");
        let err = run.err();
        let lines: Vec<&str> = err.lines().filter(|l| l.contains(NO_OP)).collect();
        assert_eq!(lines.len(), 1, "{run:?}");
        assert!(
            lines[0].contains(&format!("{NO_OP} (did you mean {meant}?)")),
            "{run:?}"
        );
    }
    // Nothing close: no suggestion.
    let run = host.stage_cmd("reticulate").run();
    run.assert_success();
    assert!(!run.err().contains("did you mean"), "{run:?}");
    before.assert_unchanged(&host.snapshot(), "unknown modes");
}

#[test]
fn a_modes_help_documents_it_in_every_position_and_form() {
    let host = FakeHost::new();
    let before = host.snapshot();
    let root = host.root_str();
    let reference = host.agent().args(["apply", "--help"]).run();
    reference.assert_success();
    let text = reference.out();
    assert!(
        text.starts_with("agent apply: Run the package's apply steps."),
        "{reference:?}"
    );
    for needle in [
        "usage:\n  agent apply ROOT_MOUNT COPY_DIR\n  agent apply COPY_DIR ",
        "arguments:\n  ROOT_MOUNT ",
        "\n  COPY_DIR ",
        "SKYHOOK_DATA_DIR",
        "\nenvironment:\n  SKYHOOK_RESOURCE_ID          required: <prefix>_<package>_<version>",
        "SKYHOOK_REBOOT_MAX_ATTEMPTS",
        "\nexit codes:\n  0  ",
        "\n  1  ",
        "\n  2  malformed arguments\n",
    ] {
        assert!(text.contains(needle), "missing {needle:?}\n{text}");
    }
    for args in [
        vec!["apply", "-h"],
        vec!["apply", &root, COPY_DIR, "--help"],
        vec!["apply", "--help", &root],
        vec!["--help", "apply"],
        vec!["-h", "apply"],
        vec!["help", "apply"],
    ] {
        let run = host.agent().args(&args).run();
        run.assert_success();
        assert_eq!(run.out(), text, "{args:?}");
        assert!(run.stderr.is_empty(), "{run:?}");
    }
    let interrupt = host.agent().args(["interrupt", "--help"]).run();
    interrupt.assert_success();
    assert!(
        interrupt
            .out()
            .contains("usage:\n  agent interrupt ROOT_MOUNT COPY_DIR INTERRUPT_DATA\n"),
        "{interrupt:?}"
    );
    assert!(
        interrupt.out().contains("  INTERRUPT_DATA  "),
        "{interrupt:?}"
    );
    before.assert_unchanged(&host.snapshot(), "help");
}

#[test]
fn help_and_version_in_every_form() {
    let host = FakeHost::new();
    let usage = host.agent().arg("--help").run();
    usage.assert_success();
    assert!(usage.out().starts_with("usage:\n"), "{usage:?}");
    for args in [vec!["-h"], vec!["help"]] {
        let run = host.agent().args(&args).run();
        run.assert_success();
        assert_eq!(run.out(), usage.out(), "{args:?}");
    }
    let version = host.agent().arg("--version").run();
    version.assert_success();
    let v = version.out();
    assert!(v.ends_with('\n') && v.lines().count() == 1, "{version:?}");
    for args in [
        vec!["-V"],
        vec!["status", "--version"],
        vec!["status", "-V"],
        vec!["interrupts", "list", "-V"],
        vec!["apply", "/root", COPY_DIR, "--version"],
    ] {
        let run = host.agent().args(&args).run();
        run.assert_success();
        assert_eq!(run.out(), v, "{args:?}");
    }
    // SPEC §1.1: `--version` first with more arguments stays a usage error.
    host.agent()
        .args(["--version", "x"])
        .run()
        .assert_code(2)
        .assert_stderr_contains("--version takes no arguments");

    for sub in ["status", "plan", "validate", "interrupts"] {
        let direct = host.agent().args([sub, "--help"]).run();
        direct.assert_success();
        let via_help = host.agent().args(["help", sub]).run();
        via_help.assert_success();
        assert_eq!(via_help.out(), direct.out(), "help {sub}");
        assert!(direct.out().contains("Usage: agent "), "{direct:?}");
    }
    let run = host.agent().args(["help", "aply"]).run();
    run.assert_code(2);
    run.assert_stderr_contains(r#"no help for "aply"; did you mean apply?"#);
    let run = host.agent().args(["help", "statu"]).run();
    run.assert_code(2);
    run.assert_stderr_contains("did you mean status?");
}

#[test]
fn every_subcommand_with_output_formats_takes_format_json() {
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step("apply", Step::new("s1.sh").on_host(false))
            .step("apply-check", Step::new("s1_check.sh").on_host(false)),
    );
    let root = host.root_str();
    let copy_dir = host.path(COPY_DIR);
    let copy_dir = copy_dir.to_str().unwrap();
    for args in [
        vec!["interrupts", "list", "--format", "json"],
        vec!["validate", copy_dir, "--format", "json"],
        vec!["plan", "apply", &root, COPY_DIR, "--format", "json"],
        vec!["status", &root, "--format", "json"],
    ] {
        let run = host.agent().args(&args).run();
        run.assert_success();
        let _: Value = serde_json::from_slice(&run.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not JSON: {e}\n{run:?}"));
        let mut text = args.clone();
        *text.last_mut().unwrap() = "yaml";
        host.agent().args(&text).run().assert_code(2);
    }
}
