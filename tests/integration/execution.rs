//! How steps and interrupt commands are executed (SPEC §8.4, §10): `execve` semantics (a file
//! the kernel cannot execute is a spawn failure, never run by `/bin/sh`), line framing of the
//! relayed output, and an agent whose output reader went away.

use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::{
    CALLS_LOG, COPY_DIR, FakeHost, INTERRUPT_FLAGS, PKG_DIR, PKG_FLAGS, PKG_LOGS, Package, STATE,
    Step, interrupt_data,
};

const EXEC_FORMAT: &str = "exec format error";

/// `apply: [bad.sh, next.sh]`, where `bad.sh` is replaced by `contents` after install.
fn package_with_bad_first_step(host: &FakeHost, contents: &[u8]) {
    let pkg = Package::new()
        .step("apply", Step::new("bad.sh"))
        .step("apply", Step::new("next.sh"))
        .step("apply-check", Step::new("bad_check.sh"));
    host.install(&pkg);
    host.write_mode(&format!("{PKG_DIR}/skyhook_dir/bad.sh"), contents, 0o755);
}

/// The step failed to spawn: exit 1, the error names the file and the cause, nothing marked,
/// nothing after it started.
#[track_caller]
fn assert_spawn_failure(host: &FakeHost, run: &crate::util::Run) {
    run.assert_code(1);
    run.assert_stderr_line_contains(&[&format!("{COPY_DIR}/skyhook_dir/bad.sh"), EXEC_FORMAT]);
    assert!(host.files_under(PKG_FLAGS).is_empty(), "{run:?}");
    assert!(
        !host.exists("var/tmp/ran-by-sh"),
        "the file was run by a shell"
    );
    assert_eq!(host.ran_count("next.sh"), 0, "no later step starts");
    assert!(!run.out().contains("apply next.sh"), "{run:?}");
    assert_failed_once(run);
}

/// The run's last line counts the operation that could not be spawned as failed.
#[track_caller]
fn assert_failed_once(run: &crate::util::Run) {
    run.assert_stderr_line_contains(&["run finished", "result=failed", "ran=1", "failed=1"]);
}

#[test]
fn a_step_without_a_shebang_is_an_exec_format_error_not_a_shell_script() {
    require_root!();
    let host = FakeHost::new();
    // glibc's execvp would run this through /bin/sh and the step would "succeed".
    package_with_bad_first_step(&host, b"echo ran > /var/tmp/ran-by-sh\nexit 0\n");
    let run = host.stage("apply");
    assert_spawn_failure(&host, &run);
}

#[test]
fn a_step_built_for_another_machine_is_an_exec_format_error() {
    require_root!();
    let host = FakeHost::new();
    // The first bytes of a 64-bit little-endian ELF executable for a machine other than
    // this one (aarch64 here on x86_64, x86_64 elsewhere): the kernel refuses it with ENOEXEC.
    let machine: u16 = if cfg!(target_arch = "x86_64") {
        0xb7
    } else {
        0x3e
    };
    let mut elf = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    elf.extend_from_slice(&2u16.to_le_bytes()); // e_type: ET_EXEC
    elf.extend_from_slice(&machine.to_le_bytes());
    elf.extend_from_slice(&1u32.to_le_bytes()); // e_version
    elf.extend_from_slice(b"\necho ran > /var/tmp/ran-by-sh\n");
    package_with_bad_first_step(&host, &elf);
    let run = host.stage("apply");
    assert_spawn_failure(&host, &run);
}

#[test]
fn an_interrupt_command_without_a_shebang_is_an_exec_format_error() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::simple());
    // Found in PATH inside the chroot, like the real `systemctl`, but not executable by the
    // kernel: a shell would record the call.
    host.write_mode(
        "usr/bin/systemctl",
        "echo \"systemctl $*\" >> /var/tmp/calls.log\nexit 0\n",
        0o755,
    );
    let run = host
        .interrupt(&interrupt_data(
            r#"{"type":"service_restart","services":["a.service"]}"#,
        ))
        .run();
    run.assert_code(1);
    run.assert_stderr_line_contains(&["systemctl", EXEC_FORMAT]);
    assert!(!host.exists(CALLS_LOG), "{:?}", host.calls());
    assert!(host.files_under(INTERRUPT_FLAGS).is_empty(), "{run:?}");
    assert!(
        !run.out().contains("systemctl restart a.service"),
        "nothing after the failed operation: {run:?}"
    );
    assert_failed_once(&run);
}

#[test]
fn a_missing_interpreter_is_named_and_the_step_counted_failed() {
    require_root!();
    let host = FakeHost::new();
    package_with_bad_first_step(
        &host,
        b"#!/bin/does-not-exist\necho ran > /var/tmp/ran-by-sh\n",
    );
    let run = host.stage("apply");
    run.assert_code(1);
    // The file exists: what is missing is the interpreter its `#!` line names.
    run.assert_stderr_line_contains(&[
        "level=error",
        &format!(
            "running step \"bad.sh\": interpreter \"/bin/does-not-exist\" of \
             {COPY_DIR}/skyhook_dir/bad.sh not found"
        ),
    ]);
    assert!(
        !run.err().contains("No such file or directory"),
        "the step file is not missing: {run:?}"
    );
    assert_failed_once(&run);
    assert!(host.files_under(PKG_FLAGS).is_empty(), "{run:?}");
    assert_eq!(host.ran_count("next.sh"), 0, "no later step starts");
    let record: serde_json::Value =
        serde_json::from_str(&host.read_string(&format!("{STATE}/results/pkg/1.0.0/apply.json")))
            .unwrap();
    assert_eq!(record["operations"][0]["operation"], "bad.sh", "{record:#}");
    assert_eq!(record["operations"][0]["succeeded"], false, "{record:#}");
}

/// A package whose first step writes `stderr` (no final newline) to its stderr.
fn package_writing_to_stderr(host: &FakeHost, stderr: &str) {
    let pkg = Package::new()
        .step(
            "apply",
            Step::new("s1.sh").script(&format!("#!/bin/sh\nprintf '{stderr}' >&2\n")),
        )
        .step("apply", Step::new("s2.sh"))
        .step("apply-check", Step::new("s1_check.sh"));
    host.install(&pkg);
}

/// SPEC §8.4: the step's bytes as they were in its log.
#[track_caller]
fn assert_logged_as_written(host: &FakeHost, path: &str, bytes: &str) {
    let logs = host.files_under(PKG_LOGS);
    let log = logs
        .iter()
        .find(|l| l.starts_with(&format!("{path}-")))
        .unwrap_or_else(|| panic!("no log of {path} in {logs:?}"));
    assert_eq!(host.read_string(&format!("{PKG_LOGS}/{log}")), bytes);
}

#[test]
fn a_log_record_after_stderr_without_a_final_newline_starts_its_own_line() {
    require_root!();
    let host = FakeHost::new();
    package_writing_to_stderr(&host, "stderr without newline");
    let run = host.stage("apply");
    run.assert_success();
    let err = run.err();
    let next = err
        .split_once("stderr without newline\n")
        .and_then(|(_, rest)| rest.lines().next())
        .unwrap_or_else(|| panic!("the step's line was not ended: {run:?}"));
    assert!(
        next.starts_with("time=20")
            && next.contains(r#" level=info msg="step finished" "#)
            && next.contains("s1.sh"),
        "the agent's next record starts a line: {run:?}"
    );
    assert!(
        !err.contains("\n\n"),
        "no blank line where a line was already ended: {run:?}"
    );
    assert_logged_as_written(&host, "s1.sh", "stderr without newline");
}

#[test]
fn a_json_log_stays_one_object_per_line_after_stderr_without_a_final_newline() {
    require_root!();
    let host = FakeHost::new();
    package_writing_to_stderr(&host, "no newline");
    let run = host.run("apply", &[("SKYHOOK_AGENT_LOG_FORMAT", "json")]);
    run.assert_success();
    let err = run.err();
    let mut step_lines = 0;
    for line in err.lines() {
        if line == "no newline" {
            step_lines += 1;
            continue;
        }
        // The other step writes whole lines of its own.
        if line.starts_with("[s2.sh]") {
            continue;
        }
        let record: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not one JSON object: {line:?} ({e}): {run:?}"));
        assert!(record["timestamp"].is_string(), "{line}");
    }
    assert_eq!(
        step_lines, 1,
        "the step's bytes on a line of their own: {run:?}"
    );
    assert_logged_as_written(&host, "s1.sh", "no newline");
}

#[test]
fn a_header_after_output_without_a_final_newline_starts_its_own_line() {
    require_root!();
    let host = FakeHost::new();
    let pkg = Package::new()
        .step(
            "apply",
            Step::new("s1.sh").script("#!/bin/sh\nprintf 'last line without newline'\n"),
        )
        .step(
            "apply",
            Step::new("s2.sh").script("#!/bin/sh\necho 'a full line'\n"),
        )
        .step("apply", Step::new("s3.sh").script("#!/bin/sh\ntrue\n"))
        .step("apply-check", Step::new("s1_check.sh"));
    host.install(&pkg);
    let run = host.stage("apply");
    run.assert_success();
    let out = run.out();
    assert!(
        out.contains(
            "apply s1.sh [] [0] Idempotence.Auto True\nlast line without newline\n\
             apply s2.sh [] [0] Idempotence.Auto True\na full line\n\
             apply s3.sh [] [0] Idempotence.Auto True\n"
        ),
        "every header starts a line, and no blank line is added: {run:?}"
    );
    assert_logged_as_written(&host, "s1.sh", "last line without newline");
}

#[test]
fn an_interrupt_echo_after_output_without_a_final_newline_starts_its_own_line() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::simple());
    host.set_fake_tool("systemctl", "printf \"out of $2\"");
    let run = host
        .interrupt(&interrupt_data(
            r#"{"type":"service_restart","services":["a.service"]}"#,
        ))
        .run();
    run.assert_success();
    assert!(
        run.out().ends_with(
            "systemctl daemon-reload\nout of \nsystemctl restart a.service\nout of a.service"
        ),
        "{run:?}"
    );
}

/// A pipe whose both ends are owned (read end first).
fn pipe() -> (OwnedFd, OwnedFd) {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe2")
}

#[test]
fn a_reader_that_exits_early_does_not_stop_the_run() {
    require_root!();
    let host = FakeHost::new();
    // `agent apply ROOT COPY_DIR 2>&1 | grep -m1 Idempotence`: the reader leaves after the
    // first header; the steps wait until it has, then print on both streams.
    let gone = "var/tmp/reader-gone";
    let script = "#!/bin/sh\nwhile [ ! -e /var/tmp/reader-gone ]; do usleep 10000; done\n\
                  echo \"@PATH@\" >> /var/tmp/ran.log\nseq 1 20000\necho to-stderr >&2\n";
    let pkg = Package::new()
        .step("apply", Step::new("s1.sh").script(script))
        .step("apply", Step::new("s2.sh").script(script))
        .step("apply-check", Step::new("s1_check.sh"));
    host.install(&pkg);

    let (r, w) = pipe();
    let w2 = w.try_clone().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent"));
    cmd.args(["apply", &host.root_str(), COPY_DIR])
        .env_clear()
        .envs(crate::util::BASE_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::from(w))
        .stderr(Stdio::from(w2));
    let mut agent = cmd.spawn().expect("spawn the agent");
    drop(cmd);
    let mut reader = std::fs::File::from(r);
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains("Idempotence") {
        assert_eq!(reader.read(&mut byte).unwrap(), 1, "output ended early");
        seen.push(byte[0]);
    }
    drop(reader);
    host.write(gone, "");

    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = agent.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the agent hung");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "no panic, no failure: {status}");
    assert_eq!(host.ran(), ["s1.sh", "s2.sh"], "the stage finished");
    for step in pkg.steps("apply") {
        assert!(
            host.is_file(&format!("{PKG_FLAGS}/{}", step.native_marker())),
            "{} marked",
            step.path
        );
        assert!(host.is_file(&format!("{PKG_FLAGS}/{}", step.legacy_marker())));
    }
    let record: serde_json::Value =
        serde_json::from_str(&host.read_string(&format!("{STATE}/results/pkg/1.0.0/apply.json")))
            .unwrap();
    assert_eq!(record["exit_code"], 0, "{record:#}");
}
