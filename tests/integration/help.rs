//! Mistakes get help (SPEC §1.1, §1.4): an unknown mode stays a warned no-op but suggests the
//! closest mode; `--help`/`-h`, `help <topic>`, `--version`/`-V` work in every position; a mode's
//! help documents its arguments, environment and exit codes; `--format text|json` on every
//! subcommand with output formats.

use serde_json::Value;

use crate::util::{COPY_DIR, FakeHost, MODES, Package, SUBCOMMANDS, Step};

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
        text.starts_with("Run the package's apply steps."),
        "{reference:?}"
    );
    for needle in [
        "\nUsage: agent [-q | -v] apply ROOT_MOUNT COPY_DIR\n       agent [-q | -v] apply COPY_DIR ",
        "\nArguments:\n  <ROOT_MOUNT>\n",
        "\n  <COPY_DIR>\n",
        "SKYHOOK_DATA_DIR",
        "\nEnvironment:\n  SKYHOOK_RESOURCE_ID ",
        "<prefix>_<package>_<version>",
        "SKYHOOK_REBOOT_MAX_ATTEMPTS",
        "\nExit codes:\n  0  ",
        "\n  1  ",
        "\n  2  malformed arguments",
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
            .contains("\nUsage: agent [-q | -v] interrupt ROOT_MOUNT COPY_DIR INTERRUPT_DATA\n"),
        "{interrupt:?}"
    );
    assert!(
        interrupt.out().contains("\n  <INTERRUPT_DATA>\n"),
        "{interrupt:?}"
    );
    before.assert_unchanged(&host.snapshot(), "help");
}

#[test]
fn help_and_version_in_every_form() {
    let host = FakeHost::new();
    let usage = host.agent().arg("--help").run();
    usage.assert_success();
    assert!(
        usage
            .out()
            .contains("\nUsage: agent [-q | -v] MODE ROOT_MOUNT COPY_DIR\n"),
        "{usage:?}"
    );
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

/// Every command that has a help of its own: the subcommands, and those of `interrupts`.
fn topics() -> Vec<&'static str> {
    let mut topics = MODES.to_vec();
    topics.extend_from_slice(SUBCOMMANDS);
    topics.extend(["interrupts list", "interrupts encode", "interrupts decode"]);
    topics
}

/// SPEC §1.5: the top level, every MODE and every subcommand have their help from one
/// definition, in one style, and `agent help TOPIC` is `agent TOPIC --help`.
#[test]
fn every_help_is_in_one_style() {
    let host = FakeHost::new();
    let root = host.agent().arg("--help").run();
    root.assert_success();
    let listing = root.out();
    for topic in topics() {
        // The top level lists each (of `interrupts`, each of its subcommands), with what it
        // does.
        assert!(
            topic == "interrupts"
                || listing.lines().any(|l| l
                    .strip_prefix("  ")
                    .and_then(|l| l.strip_prefix(topic))
                    .is_some_and(|rest| rest.starts_with("  "))),
            "agent --help does not list {topic}\n{listing}"
        );
        let words: Vec<&str> = topic.split(' ').collect();
        let run = host.agent().args(&words).arg("--help").run();
        run.assert_success();
        let text = run.out();
        for heading in ["\nUsage: agent ", "\nOptions:\n"] {
            assert!(text.contains(heading), "{topic}: no {heading:?}\n{text}");
        }
        assert!(!text.contains("usage:"), "{topic}: another style\n{text}");
        if let [word] = words.as_slice() {
            let via_help = host.agent().args(["help", word]).run();
            via_help.assert_success();
            assert_eq!(via_help.out(), text, "agent help {topic}");
        }
    }
    for heading in [
        "\nUsage: agent ",
        "\nModes ",
        "\nSubcommands ",
        "\nOptions:\n",
    ] {
        assert!(listing.contains(heading), "no {heading:?}\n{listing}");
    }
}

#[test]
fn help_help_documents_help() {
    let host = FakeHost::new();
    for args in [["help", "help"], ["help", "--help"]] {
        let run = host.agent().args(args).run();
        run.assert_success();
        assert!(
            run.out()
                .contains("\nUsage: agent help [MODE | SUBCOMMAND]\n"),
            "{args:?}\n{run:?}"
        );
    }
}

#[test]
fn try_requires_its_package_directory() {
    let host = FakeHost::new();
    let run = host.agent().args(["try", "--help"]).run();
    run.assert_success();
    assert!(
        run.out()
            .contains("\nUsage: agent try [OPTIONS] <PACKAGE_DIR>\n"),
        "{run:?}"
    );
    assert!(run.out().contains("\n  <PACKAGE_DIR>\n"), "{run:?}");
    let run = host.agent().arg("try").run();
    run.assert_code(2);
    run.assert_stderr_contains("<PACKAGE_DIR>");
    assert!(run.stdout.is_empty(), "{run:?}");
}

/// A malformed operator form is reported in the style of every other usage error.
#[test]
fn operator_form_usage_errors_are_worded_as_clap_words_them() {
    let host = FakeHost::new();
    let run = host.agent().args(["apply", "relative", COPY_DIR]).run();
    run.assert_code(2);
    let err = run.err();
    assert!(
        err.starts_with("error: root mount \"relative\" is not absolute\n\nUsage: agent [-q | -v] MODE ROOT_MOUNT COPY_DIR\n"),
        "{run:?}"
    );
    assert!(
        err.ends_with("\n\nFor more information, try '--help'.\n"),
        "{run:?}"
    );
    let sub = host
        .agent()
        .args(["plan", "interrupt", "/", COPY_DIR])
        .run();
    sub.assert_code(2);
    assert!(
        sub.err()
            .starts_with("error: interrupt data must not be empty\n\nUsage: agent plan "),
        "{sub:?}"
    );
}
