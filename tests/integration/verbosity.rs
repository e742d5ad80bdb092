//! `-q`/`--quiet` and `-v`/`--verbose` (SPEC §1.5, §2): the level of the agent's log records on
//! stderr, errors only or debug too, instead of SKYHOOK_AGENT_LOG (which stays the default);
//! before an operator form, anywhere in a subcommand's command line.

use crate::util::{COPY_DIR, FakeHost, Package, Run};

/// The levels of the agent's log records on stderr (a step's own stderr is not one).
fn levels(run: &Run) -> Vec<String> {
    run.err()
        .lines()
        .filter(|l| l.starts_with("time="))
        .filter_map(|l| {
            l.split(" level=")
                .nth(1)?
                .split(' ')
                .next()
                .map(str::to_owned)
        })
        .collect()
}

fn has(run: &Run, level: &str) -> bool {
    levels(run).iter().any(|l| l == level)
}

#[test]
fn verbose_before_an_operator_form_runs_the_stage_with_debug_records() {
    let host = FakeHost::new();
    host.install(&Package::simple());
    let root = host.root_str();
    let plain = host.stage("apply");
    plain.assert_success();
    assert!(!has(&plain, "debug"), "{plain:?}");
    for flag in ["-v", "--verbose"] {
        let run = host.agent().args([flag, "apply", &root, COPY_DIR]).run();
        run.assert_success();
        // The stage ran (its banner), it is not an unknown MODE.
        run.assert_stdout_contains("-CLI CONFIGURATION--");
        assert!(
            !run.err().contains("does not support the requested stage"),
            "{run:?}"
        );
        assert!(has(&run, "debug") && has(&run, "info"), "{flag}: {run:?}");
    }
    // The legacy form too.
    let run = host.agent().args(["--verbose", "apply", COPY_DIR]).run();
    assert!(!run.err().contains("does not support"), "{run:?}");
}

#[test]
fn quiet_logs_errors_only() {
    let host = FakeHost::new();
    host.install(&Package::off_host(&["s1.sh", "s2.sh"], &[]));
    let root = host.root_str();
    // An invalid setting is a warning; a failed step is the one error.
    let env = [
        ("SKYHOOK_STEP_TIMEOUT_SECONDS", "ten"),
        ("FAIL_STEPS", "s2.sh"),
    ];
    let loud = host.run("apply", &env);
    loud.assert_code(1);
    assert!(has(&loud, "warn") && has(&loud, "info"), "{loud:?}");
    for flag in ["-q", "--quiet"] {
        let mut agent = host.agent().args([flag, "apply", &root, COPY_DIR]);
        for (k, v) in env {
            agent = agent.env(k, v);
        }
        let run = agent.run();
        run.assert_code(1);
        assert_eq!(levels(&run), ["error"], "{flag}: {run:?}");
        run.assert_stderr_contains("agent execution failed");
    }
}

#[test]
fn the_flags_take_the_place_of_skyhook_agent_log() {
    let host = FakeHost::new();
    host.install(&Package::simple());
    let root = host.root_str();
    let run = host.run("apply", &[("SKYHOOK_AGENT_LOG", "warn")]);
    run.assert_success();
    assert!(levels(&run).is_empty(), "{run:?}");
    let run = host
        .agent()
        .env("SKYHOOK_AGENT_LOG", "warn")
        .args(["-v", "apply", &root, COPY_DIR])
        .run();
    run.assert_success();
    assert!(has(&run, "debug"), "{run:?}");
    let run = host
        .agent()
        .env("SKYHOOK_AGENT_LOG", "debug")
        .args(["-q", "apply", &root, COPY_DIR])
        .run();
    run.assert_success();
    assert!(levels(&run).is_empty(), "{run:?}");
}

#[test]
fn subcommands_take_quiet_and_verbose_anywhere() {
    let host = FakeHost::new();
    host.install(&Package::off_host(&["s1.sh"], &["s1_check.sh"]));
    let root = host.root_str();
    let plan = |args: &[&str]| {
        host.agent()
            .env("SKYHOOK_STEP_TIMEOUT_SECONDS", "ten")
            .args(args)
            .run()
    };
    let loud = plan(&["plan", "apply", &root, COPY_DIR]);
    loud.assert_success();
    assert!(has(&loud, "warn"), "{loud:?}");
    for args in [
        vec!["-q", "plan", "apply", &root, COPY_DIR],
        vec!["plan", "--quiet", "apply", &root, COPY_DIR],
        vec!["plan", "apply", &root, COPY_DIR, "-q"],
    ] {
        let run = plan(&args);
        run.assert_success();
        assert!(levels(&run).is_empty(), "{args:?}: {run:?}");
        assert_eq!(run.out(), loud.out(), "{args:?}: the same plan");
    }
    for args in [
        vec!["-v", "status", &root],
        vec!["status", &root, "--verbose"],
        vec!["interrupts", "list", "-v"],
    ] {
        host.agent().args(&args).run().assert_success();
    }
}

#[test]
fn quiet_and_verbose_together_are_a_usage_error() {
    let host = FakeHost::new();
    host.install(&Package::simple());
    let root = host.root_str();
    let before = host.snapshot();
    for args in [
        vec!["-q", "-v", "apply", &root, COPY_DIR],
        vec!["--verbose", "--quiet", "apply", &root, COPY_DIR],
        vec!["status", &root, "-q", "-v"],
        vec!["-q", "status", &root, "--verbose"],
    ] {
        let run = host.agent().args(&args).run();
        run.assert_code(2);
        run.assert_stderr_contains("cannot be used with");
        assert!(run.stdout.is_empty(), "{args:?}: {run:?}");
    }
    before.assert_unchanged(&host.snapshot(), "-q with -v");
}

/// `agent try -v`: the stages in the sandbox log at debug level too (their output is kept).
#[test]
fn try_passes_the_level_to_its_stages() {
    require_root!();
    let host = FakeHost::new();
    let pkg = crate::try_safety::package(&host, "#!/bin/sh\nexit 0\n");
    let stage_output = |flag: Option<&str>, keep: &str| {
        let keep = host.outside().join(keep);
        let run = host
            .agent()
            .args(flag)
            .arg("try")
            .arg(&pkg)
            .args(["--root", &host.root_str(), "--stages", "apply", "--keep"])
            .arg(&keep)
            .run();
        run.assert_success();
        let log = std::fs::read_dir(&keep)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with("-apply.log"))
            .unwrap_or_else(|| panic!("no output of the apply stage in {}", keep.display()));
        std::fs::read_to_string(log).unwrap()
    };
    let plain = stage_output(None, "plain");
    assert!(plain.contains(" level=info "), "{plain}");
    assert!(!plain.contains(" level=debug "), "{plain}");
    let verbose = stage_output(Some("-v"), "verbose");
    assert!(verbose.contains(" level=debug "), "{verbose}");
    let quiet = stage_output(Some("--quiet"), "quiet");
    assert!(!quiet.contains(" level=info "), "{quiet}");
}
