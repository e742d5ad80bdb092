//! SPEC §5 and §8.1–§8.7: running a non-check stage — START, step selection, headers, execution,
//! output relay, environment, exit codes and completion markers.

use std::time::Duration;

use crate::util::{
    BOOT_ID, Banner, COPY_DIR, FLAGS, FOO, FakeHost, PKG_DIR, PKG_FLAGS, Package, START, Step,
    assert_marker_content, legacy_marker_name,
};

fn two_steps() -> Package {
    Package::new()
        .step("apply", Step::new("a.sh"))
        .step("apply", Step::new("b.sh"))
        .step("apply-check", Step::new("a_check.sh"))
}

fn one_step(step: Step) -> Package {
    Package::new()
        .step("apply", step)
        .step("apply-check", Step::new("s1_check.sh"))
}

fn script_of(path: &str) -> String {
    format!("{PKG_DIR}/skyhook_dir/{path}")
}

#[test]
fn fresh_apply_prints_banner_headers_and_raw_step_output() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    let run = host.run("apply", &[FOO]);
    run.assert_success();
    let expected = format!(
        "{banner}\
         apply s1.sh ['a', 'env:FOO'] [0] Idempotence.Auto True\n\
         [s1.sh] args(2): a foo-value\n\
         [s1.sh] pwd={c} STEP_ROOT={c}/skyhook_dir SKYHOOK_DIR={c} X=from-step-env\n\
         apply s2.sh [] [0] Idempotence.Disabled True\n\
         [s2.sh] args(0): \n\
         [s2.sh] pwd={c} STEP_ROOT={c}/skyhook_dir SKYHOOK_DIR={c} X=\n",
        banner = Banner::new("apply", &host).render(),
        c = COPY_DIR
    );
    assert_eq!(run.out(), expected, "{run:?}");
    run.assert_stderr_has_line("[s1.sh] to stderr");
    run.assert_stderr_has_line("[s2.sh] to stderr");
    assert_eq!(host.ran(), ["s1.sh a foo-value", "s2.sh "]);
}

#[test]
fn start_marker_is_written_empty() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.run("apply", &[FOO]).assert_success();
    assert!(host.is_file(START));
    assert!(host.read(START).is_empty());
}

#[test]
fn start_marker_is_written_even_when_the_stage_fails() {
    require_root!();
    let host = FakeHost::new();
    host.install(&two_steps());
    host.run("apply", &[("FAIL_STEPS", "a.sh")]).assert_code(1);
    assert!(host.is_file(START));
}

#[test]
fn both_markers_are_written_with_exact_names() {
    require_root!();
    let host = FakeHost::new();
    let pkg = Package::standard();
    host.install(&pkg);
    host.run("apply", &[FOO]).assert_success();
    let s1 = pkg.find("s1.sh");
    let s2 = pkg.find("s2.sh");
    assert_eq!(s1.legacy_marker(), "s1.sh_WydhJywgJ2VudjpGT08nXV9bMF0=");
    assert_eq!(s2.legacy_marker(), "s2.sh_W11fWzBd");
    let mut expected = vec![
        s1.legacy_marker(),
        s1.native_marker(),
        s2.legacy_marker(),
        s2.native_marker(),
    ];
    expected.sort();
    assert_eq!(host.files_under(PKG_FLAGS), expected);
}

#[test]
fn native_marker_matches_the_spec_golden_fingerprint() {
    require_root!();
    let host = FakeHost::new();
    let step = Step::new("scripts/apply.sh")
        .args(&["--mode", "fast"])
        .returncodes(&[0, 2]);
    host.install(&one_step(step));
    host.stage("apply").assert_success();
    assert!(
        host.is_file(&format!(
            "{PKG_FLAGS}/apply.sh-f3f526b85e0a962f2b4b68089385cd5b4829c09a436112f6586ff5f288e4ecf4.flag"
        )),
        "{:?}",
        host.files_under(PKG_FLAGS)
    );
}

#[test]
fn native_marker_hashes_configured_env_and_on_host() {
    let host = FakeHost::new();
    let step = Step::new("s1.sh")
        .on_host(false)
        .args(&["<a&b>", "env:FOO"])
        .env("Z", "last")
        .env("A", "first\u{2028}");
    let pkg = one_step(step.clone());
    host.install(&pkg);
    host.run("apply", &[FOO]).assert_success();
    assert!(
        host.is_file(&format!("{PKG_FLAGS}/{}", step.native_marker())),
        "expected {} in {:?}",
        step.native_marker(),
        host.files_under(PKG_FLAGS)
    );
}

#[test]
fn marker_content_records_last_run_and_always_run_policy() {
    require_root!();
    let host = FakeHost::new();
    let pkg = Package::standard();
    host.install(&pkg);
    host.run("apply", &[FOO]).assert_success();
    let s1 = pkg.find("s1.sh");
    let s2 = pkg.find("s2.sh");
    for (name, always) in [
        (s1.legacy_marker(), false),
        (s1.native_marker(), false),
        (s2.legacy_marker(), true),
        (s2.native_marker(), true),
    ] {
        assert_marker_content(
            &host.read_string(&format!("{PKG_FLAGS}/{name}")),
            always,
            &name,
        );
    }
}

#[test]
fn on_host_steps_run_chrooted_into_root() {
    require_root!();
    let host = FakeHost::new();
    let step = Step::new("s1.sh").script(
        "#!/bin/sh\ncat /proc/sys/kernel/random/boot_id\n[ -e /bin/busybox ] && echo has-busybox\npwd\n",
    );
    host.install(&one_step(step));
    let run = host.stage("apply");
    run.assert_success();
    let banner = Banner::new("apply", &host).render();
    assert_eq!(
        String::from_utf8_lossy(run.after_banner(&banner)),
        format!("apply s1.sh [] [0] Idempotence.Auto True\n{BOOT_ID}\nhas-busybox\n{COPY_DIR}\n")
    );
}

#[test]
fn off_host_steps_run_without_chroot_with_root_prefixed_paths() {
    let host = FakeHost::new();
    let step = Step::new("s1.sh")
        .on_host(false)
        .script("#!/bin/sh\necho \"pwd=$(pwd) STEP_ROOT=$STEP_ROOT SKYHOOK_DIR=$SKYHOOK_DIR\"\n[ -e \"@ROOT@/bin/busybox\" ] && echo sees-host\n");
    host.install(&one_step(step));
    let run = host.stage("apply");
    run.assert_success();
    let c = format!("{}{COPY_DIR}", host.root_str());
    let banner = Banner::new("apply", &host).render();
    assert_eq!(
        String::from_utf8_lossy(run.after_banner(&banner)),
        format!(
            "apply s1.sh [] [0] Idempotence.Auto False\n\
             pwd={c} STEP_ROOT={c}/skyhook_dir SKYHOOK_DIR={c}\nsees-host\n"
        )
    );
}

#[test]
fn header_quotes_arguments_like_python_repr() {
    let host = FakeHost::new();
    let step = Step::new("apply.sh")
        .on_host(false)
        .args(&["plain", "it's", "say \"hi\"", "back\\slash", "tab\t", "é"])
        .returncodes(&[0, 2])
        .always_run()
        .script("#!/bin/sh\nexit 0\n");
    host.install(&one_step(step));
    let run = host.stage("apply");
    run.assert_success();
    let banner = Banner::new("apply", &host).render();
    assert_eq!(
        String::from_utf8_lossy(run.after_banner(&banner)),
        "apply apply.sh ['plain', \"it's\", 'say \"hi\"', 'back\\\\slash', 'tab\\t', 'é'] [0, 2] Idempotence.Disabled False\n"
    );
}

#[test]
fn execute_bits_are_added_without_clearing_others() {
    require_root!();
    let host = FakeHost::new();
    let pkg = Package::new()
        .step("apply", Step::new("a.sh").file_mode(0o644))
        .step("apply", Step::new("b.sh").file_mode(0o640))
        .step("apply", Step::new("c.sh").file_mode(0o600))
        .step("apply-check", Step::new("a_check.sh"));
    host.install(&pkg);
    host.stage("apply").assert_success();
    assert_eq!(host.mode(&script_of("a.sh")), 0o755);
    assert_eq!(host.mode(&script_of("b.sh")), 0o751);
    assert_eq!(host.mode(&script_of("c.sh")), 0o711);
    assert_eq!(
        host.mode(&script_of("a_check.sh")),
        0o644,
        "steps that did not run are untouched"
    );
}

#[test]
fn step_environment_layers_agent_env_step_env_and_step_paths() {
    require_root!();
    let host = FakeHost::new();
    let step = Step::new("envdump.sh")
        .env("X", "from-step-env")
        .env("STEP_ROOT", "step-env-cannot-override")
        .env("ONLY_STEP", "1")
        .script(
            "#!/bin/sh\nprintf 'X=%s\\nSTEP_ROOT=%s\\nSKYHOOK_DIR=%s\\nONLY_STEP=%s\\nPKG=%s\\nORDER=%s\\nML=[%s]\\nline2=[%s]\\nHOME=%s\\n' \
             \"$X\" \"$STEP_ROOT\" \"$SKYHOOK_DIR\" \"$ONLY_STEP\" \"$PKG_ENV_FROM_CR\" \"$SKYHOOK_NODE_ORDER\" \"$ML\" \"${line2:-unset}\" \"$HOME\"\n",
        );
    host.install(&one_step(step));
    let run = host.run(
        "apply",
        &[
            ("X", "from-container"),
            ("PKG_ENV_FROM_CR", "yes"),
            ("SKYHOOK_NODE_ORDER", "3"),
            ("ML", "line1\nline2=second-line"),
        ],
    );
    run.assert_success();
    let banner = Banner::new("apply", &host).render();
    assert_eq!(
        String::from_utf8_lossy(run.after_banner(&banner)),
        format!(
            "apply envdump.sh [] [0] Idempotence.Auto True\n\
             X=from-step-env\nSTEP_ROOT={COPY_DIR}/skyhook_dir\nSKYHOOK_DIR={COPY_DIR}\nONLY_STEP=1\n\
             PKG=yes\nORDER=3\nML=[line1\nline2=second-line]\nline2=[unset]\nHOME=/root\n"
        )
    );
}

#[test]
fn env_arguments_are_resolved_from_the_agent_environment() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    let run = host.run("apply", &[("FOO", "")]);
    run.assert_success();
    run.assert_stdout_contains(
        "apply s1.sh ['a', 'env:FOO'] [0] Idempotence.Auto True\n[s1.sh] args(2): a \n",
    );
}

#[test]
fn missing_env_arguments_are_collected_and_fail_before_exec() {
    require_root!();
    let host = FakeHost::new();
    let step = Step::new("s1.sh").args(&["env:FOO", "x", "env:BAR"]);
    host.install(&one_step(step));
    let run = host.stage("apply");
    run.assert_code(1);
    run.assert_stderr_contains(
        "running step \"s1.sh\": expected environment variables do not exist: FOO, BAR",
    );
    assert!(host.ran().is_empty(), "the step must not run");
    assert!(host.files_under(PKG_FLAGS).is_empty(), "no marker");
}

#[test]
fn failing_step_stops_the_stage_without_a_marker() {
    require_root!();
    let host = FakeHost::new();
    let pkg = Package::new()
        .step("apply", Step::new("ok.sh"))
        .step("apply", Step::new("a.sh"))
        .step("apply", Step::new("b.sh"))
        .step("apply-check", Step::new("a_check.sh"));
    host.install(&pkg);
    let run = host.run("apply", &[("FAIL_STEPS", "a.sh"), ("FAIL_RC", "3")]);
    run.assert_code(1);
    assert_eq!(host.ran(), ["ok.sh ", "a.sh "], "b.sh must not start");
    let ok = pkg.find("ok.sh");
    let mut expected = vec![ok.legacy_marker(), ok.native_marker()];
    expected.sort();
    assert_eq!(
        host.files_under(PKG_FLAGS),
        expected,
        "only ok.sh is marked"
    );
    run.assert_stderr_line_contains(&["a.sh", "3"]);
    assert!(!run.out().contains("apply b.sh"), "{run:?}");
}

#[test]
fn any_listed_return_code_is_success() {
    require_root!();
    let host = FakeHost::new();
    let step = Step::new("rc3.sh").returncodes(&[0, 3]);
    let pkg = one_step(step.clone());
    host.install(&pkg);
    let run = host.run("apply", &[("FAIL_STEPS", "rc3.sh"), ("FAIL_RC", "3")]);
    run.assert_success();
    run.assert_stdout_contains("apply rc3.sh [] [0, 3] Idempotence.Auto True\n");
    assert_eq!(
        step.legacy_marker(),
        legacy_marker_name("rc3.sh", &[], &[0, 3])
    );
    assert!(host.is_file(&format!("{PKG_FLAGS}/{}", step.legacy_marker())));
    assert!(host.is_file(&format!("{PKG_FLAGS}/{}", step.native_marker())));
}

#[test]
fn return_codes_are_compared_exactly_not_collapsed() {
    require_root!();
    let host = FakeHost::new();
    host.install(&one_step(Step::new("rc1.sh").returncodes(&[1])));
    host.run("apply", &[("FAIL_STEPS", "rc1.sh"), ("FAIL_RC", "7")])
        .assert_code(1);
    assert!(host.files_under(PKG_FLAGS).is_empty());
    host.run("apply", &[("FAIL_STEPS", "rc1.sh"), ("FAIL_RC", "1")])
        .assert_success();
    assert_eq!(host.files_under(PKG_FLAGS).len(), 2);
}

#[test]
fn exit_zero_fails_when_not_listed() {
    require_root!();
    let host = FakeHost::new();
    host.install(&one_step(Step::new("rc1.sh").returncodes(&[1])));
    host.stage("apply").assert_code(1);
    assert!(host.files_under(PKG_FLAGS).is_empty());
}

#[test]
fn step_killed_by_a_signal_fails() {
    require_root!();
    let host = FakeHost::new();
    let step = Step::new("killed.sh")
        .returncodes(&[0, 9, 137])
        .script("#!/bin/sh\necho about to kill myself\nkill -9 $$\n");
    host.install(&one_step(step));
    let run = host.stage("apply");
    run.assert_code(1);
    run.assert_stdout_contains("about to kill myself\n");
    assert!(
        host.files_under(PKG_FLAGS).is_empty(),
        "a signalled step is never marked"
    );
    let err = run.err();
    assert!(
        err.lines().any(|l| l.contains("killed.sh")
            && (l.contains("SIGKILL") || l.contains("signal 9") || l.contains("KILL"))),
        "the step's result line names the signal\n{run:?}"
    );
}

#[test]
fn unexecutable_step_is_a_runtime_error() {
    require_root!();
    let host = FakeHost::new();
    host.install(&two_steps().script("a.sh", "#!/nonexistent/interpreter\n"));
    let run = host.stage("apply");
    run.assert_code(1);
    assert!(host.ran().is_empty(), "b.sh must not start");
    assert!(host.files_under(PKG_FLAGS).is_empty());
}

#[test]
fn rerun_skips_completed_auto_steps_and_reruns_disabled_ones() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.run("apply", &[FOO]).assert_success();
    let run = host.run("apply", &[FOO]);
    run.assert_success();
    assert_eq!(host.ran_count("s1.sh"), 1);
    assert_eq!(host.ran_count("s2.sh"), 2);
    run.assert_stderr_line_contains(&["skipping completed step", "s1.sh"]);
    assert!(
        !run.out().contains("apply s1.sh"),
        "no header for a skipped step\n{run:?}"
    );
    run.assert_stdout_contains("apply s2.sh [] [0] Idempotence.Disabled True\n");
}

#[test]
fn overlay_always_run_step_reruns_completed_steps_with_a_warning() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.run("apply", &[FOO]).assert_success();
    let run = host.run("apply", &[FOO, ("OVERLAY_ALWAYS_RUN_STEP", "true")]);
    run.assert_success();
    assert_eq!(host.ran_count("s1.sh"), 2);
    run.assert_stderr_contains("running completed step because always-run policy is enabled");
}

#[test]
fn config_upgrade_and_uninstall_stages_rerun_completed_steps() {
    require_root!();
    for (mode, path) in [
        ("config", "cfg.sh"),
        ("upgrade", "up.sh"),
        ("uninstall", "un.sh"),
    ] {
        let host = FakeHost::new();
        host.install(&Package::standard());
        host.stage(mode).assert_success();
        host.stage(mode).assert_success();
        assert_eq!(host.ran_count(path), 2, "{mode} reruns {path}");
    }
}

#[test]
fn post_interrupt_stage_skips_completed_steps() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::standard());
    host.stage("post-interrupt").assert_success();
    host.stage("post-interrupt").assert_success();
    assert_eq!(host.ran_count("pi.sh"), 1);
}

#[test]
fn markers_of_a_failed_run_let_the_rerun_resume() {
    require_root!();
    let host = FakeHost::new();
    host.install(&two_steps());
    host.run("apply", &[("FAIL_STEPS", "b.sh")]).assert_code(1);
    host.stage("apply").assert_success();
    assert_eq!(host.ran(), ["a.sh ", "b.sh ", "b.sh "]);
}

#[test]
fn legacy_marker_with_a_slash_nests_directories() {
    require_root!();
    let host = FakeHost::new();
    let pkg = Package::new()
        .step("apply", Step::new("q.sh").args(&["?"]))
        .step(
            "apply",
            Step::new("sub/deep.sh").args(&["it's", "a b", "é"]),
        )
        .step("apply-check", Step::new("q_check.sh"));
    host.install(&pkg);
    host.stage("apply").assert_success();
    assert!(host.is_file(&format!("{PKG_FLAGS}/q.sh_Wyc/J11fWzBd")));
    assert!(host.is_file(&format!(
        "{PKG_FLAGS}/sub/deep.sh_WyJpdCdzIiwgJ2EgYicsICfDqSddX1swXQ=="
    )));
    let deep = pkg.find("sub/deep.sh");
    assert!(deep.native_marker().starts_with("deep.sh-"));
    assert!(host.is_file(&format!("{PKG_FLAGS}/{}", deep.native_marker())));
    // Both are recognised on the next run.
    host.stage("apply").assert_success();
    assert_eq!(host.ran_count("q.sh"), 1);
    assert_eq!(host.ran_count("sub/deep.sh"), 1);
}

#[test]
fn overlong_legacy_marker_is_skipped_with_a_warning_and_the_native_marker_kept() {
    require_root!();
    let host = FakeHost::new();
    let long = "z".repeat(200);
    let step = Step::new("long.sh").args(&[long.as_str()]);
    host.install(&one_step(step.clone()));
    let run = host.stage("apply");
    run.assert_success();
    assert_eq!(host.files_under(PKG_FLAGS), [step.native_marker()]);
    run.assert_stderr_line_contains(&["long.sh"]);
    host.stage("apply").assert_success();
    assert_eq!(
        host.ran_count("long.sh"),
        1,
        "the native marker records completion"
    );
}

#[test]
fn symlink_at_a_marker_path_is_an_error() {
    require_root!();
    let host = FakeHost::new();
    let pkg = two_steps();
    host.install(&pkg);
    host.write("etc/target", "keep");
    host.symlink(
        &format!("{PKG_FLAGS}/{}", pkg.find("a.sh").native_marker()),
        host.path("etc/target"),
    );
    let run = host.stage("apply");
    run.assert_code(1);
    assert_eq!(host.read_string("etc/target"), "keep");
    assert!(host.ran().is_empty(), "{run:?}");
}

#[test]
fn directory_at_a_marker_path_is_an_error() {
    require_root!();
    let host = FakeHost::new();
    let pkg = two_steps();
    host.install(&pkg);
    host.mkdir(&format!("{PKG_FLAGS}/{}", pkg.find("a.sh").legacy_marker()));
    host.stage("apply").assert_code(1);
    assert!(host.ran().is_empty());
}

#[test]
fn state_writes_refuse_symlinked_directories() {
    let host = FakeHost::new();
    host.install(&Package::simple());
    let elsewhere = host.outside().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    host.symlink(FLAGS, &elsewhere);
    let run = host.stage("apply");
    run.assert_code(1);
    run.assert_stderr_contains("is a symbolic link");
    assert!(
        std::fs::read_dir(&elsewhere).unwrap().next().is_none(),
        "nothing may be written through the link"
    );
}

#[test]
fn state_files_are_private() {
    require_root!();
    let host = FakeHost::new();
    let pkg = two_steps();
    host.install(&pkg);
    host.stage("apply").assert_success();
    assert_eq!(host.mode(START), 0o600);
    for name in host.files_under(PKG_FLAGS) {
        assert_eq!(host.mode(&format!("{PKG_FLAGS}/{name}")), 0o600, "{name}");
    }
    for dir in [FLAGS, "var/lib/skyhook/sk1/flags/pkg", PKG_FLAGS] {
        assert_eq!(host.mode(dir), 0o755, "{dir}");
    }
}

#[test]
fn stage_without_steps_is_a_no_op() {
    let host = FakeHost::new();
    host.install(&Package::simple().empty_mode("config"));
    let run = host.stage("config");
    run.assert_success();
    run.assert_stderr_contains("stage has no configured steps; treating it as a no-op");
    assert_eq!(run.out(), Banner::new("config", &host).render());
    assert!(host.is_file(START));
    assert!(host.files_under(PKG_FLAGS).is_empty());
}

#[test]
fn stage_missing_from_config_is_a_no_op() {
    let host = FakeHost::new();
    host.install(&Package::simple());
    let run = host.stage("upgrade");
    run.assert_success();
    run.assert_stderr_contains("stage has no configured steps; treating it as a no-op");
    assert!(host.ran().is_empty());
}

#[test]
fn steps_read_end_of_file_on_stdin() {
    require_root!();
    let host = FakeHost::new();
    let step = Step::new("stdin.sh").script("#!/bin/sh\ncat\necho got-eof\n");
    host.install(&one_step(step));
    let run = host
        .stage_cmd("apply")
        .hold_stdin_open()
        .timeout(Duration::from_secs(20))
        .run();
    run.assert_success();
    run.assert_stdout_contains("apply stdin.sh [] [0] Idempotence.Auto True\ngot-eof\n");
}

const NOISY: &str = r"#!/bin/sh
printf 'partial-no-newline'; sleep 0.3; printf ' ...continued\n'
printf 'two\nlines in one write\n'
printf '%9000s\n' '' | tr ' ' L
printf 'bad utf8: \377\376 end\n'
printf 'utf8: h\303\251llo \342\234\223\n'
printf 'stderr without newline' >&2
printf 'last line without newline'
";

fn noisy_bytes() -> Vec<u8> {
    let mut v = b"partial-no-newline ...continued\ntwo\nlines in one write\n".to_vec();
    v.extend(std::iter::repeat_n(b'L', 9000));
    v.push(b'\n');
    v.extend_from_slice(b"bad utf8: \xff\xfe end\n");
    v.extend_from_slice("utf8: héllo ✓\n".as_bytes());
    v.extend_from_slice(b"last line without newline");
    v
}

#[test]
fn step_output_is_relayed_byte_exact() {
    require_root!();
    let host = FakeHost::new();
    host.install(&one_step(Step::new("noisy.sh").script(NOISY)));
    let run = host.stage("apply");
    run.assert_success();
    let banner = Banner::new("apply", &host).render();
    let mut expected = b"apply noisy.sh [] [0] Idempotence.Auto True\n".to_vec();
    expected.extend(noisy_bytes());
    assert!(
        run.after_banner(&banner) == expected.as_slice(),
        "stdout after the banner differs\n{run:?}"
    );
    run.assert_stderr_contains("stderr without newline");
}

/// SPEC §8.4 line framing: the header starts its own line.
#[test]
fn next_header_after_unterminated_step_output_starts_its_own_line() {
    require_root!();
    let host = FakeHost::new();
    let pkg = Package::new()
        .step(
            "apply",
            Step::new("a.sh").script("#!/bin/sh\nprintf 'no newline'\n"),
        )
        .step("apply", Step::new("b.sh").script("#!/bin/sh\nexit 0\n"))
        .step("apply-check", Step::new("a_check.sh"));
    host.install(&pkg);
    let run = host.stage("apply");
    run.assert_success();
    let banner = Banner::new("apply", &host).render();
    assert_eq!(
        String::from_utf8_lossy(run.after_banner(&banner)),
        "apply a.sh [] [0] Idempotence.Auto True\nno newline\napply b.sh [] [0] Idempotence.Auto True\n"
    );
}

#[test]
fn large_output_is_relayed_completely() {
    const SIZE: usize = 50 * 1024 * 1024;
    require_root!();
    let host = FakeHost::new();
    let step = Step::new("big.sh").script(&format!("#!/bin/sh\nyes | head -c {SIZE}\n"));
    host.install(&one_step(step));
    let run = host.stage("apply");
    run.assert_success();
    let banner = Banner::new("apply", &host).render();
    let header = b"apply big.sh [] [0] Idempotence.Auto True\n";
    let body = run.after_banner(&banner);
    assert!(body.starts_with(header));
    let body = &body[header.len()..];
    assert_eq!(body.len(), SIZE, "every byte relayed");
    assert!(
        body.chunks(2).all(|c| c == b"y\n"),
        "bytes relayed in order"
    );
}

#[test]
fn each_step_runs_in_its_own_process_group() {
    let host = FakeHost::new();
    let step = Step::new("pg.sh")
        .on_host(false)
        .script("#!/bin/sh\nset -- $(cat /proc/$$/stat)\necho \"pid=$1 pgid=$5\"\n");
    host.install(&one_step(step));
    let run = host.stage("apply");
    run.assert_success();
    let out = run.out();
    let line = out
        .lines()
        .find(|l| l.starts_with("pid="))
        .unwrap_or_else(|| panic!("{run:?}"));
    let (pid, pgid) = line.split_once(' ').unwrap();
    assert_eq!(
        pid.trim_start_matches("pid="),
        pgid.trim_start_matches("pgid="),
        "the step leads its own process group: {line}"
    );
}
