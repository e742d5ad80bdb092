//! Concurrency and time, end to end (SPEC §10, §11). Locks: two agents on one package, or on
//! one interrupt resource, run one after the other — the second waits, says who holds the lock
//! (pid, boot ID, start time) and then skips what the first completed, so every step or
//! operation runs once; agents on different packages or resources do not wait for each other;
//! a lock whose holder died (SIGKILL) or that an earlier boot left behind is no obstacle.
//! Timeouts (`SKYHOOK_STEP_TIMEOUT_SECONDS`): SIGTERM to the process group, the grace period,
//! SIGKILL, `timed out after Ns`, no marker — in stages, check stages and interrupt commands.
//! And the signal cases `tests/integration/signals.rs` leaves out (a signal between steps, a
//! signal while waiting for a lock).

use std::time::{Duration, Instant};

use crate::util::{
    BOOT_ID, CHECK_RESULTS, COPY_DIR, FLAGS, FakeHost, HISTORY, INTERRUPT_FLAGS, PKG_DIR,
    PKG_FLAGS, Package, Reaper, Run, Running, STATE, STOPPED, Step, eventually, hold_flock,
    interrupt_data, process_alive, signal_pid,
};

const WAITING: &str = "waiting for another agent to release the lock";
const PACKAGE_LOCK: &str = "var/lib/skyhook/sk1/locks/pkg.lock";
const INTERRUPT_LOCK: &str = "var/lib/skyhook/sk1/locks/interrupt-abc_pkg_1.0.0.lock";
const SERVICES: &str = r#"{"type":"service_restart","services":["kubelet"]}"#;

/// A step that records its start, then waits until `/var/tmp/release` exists.
const HELD_STEP: &str = "#!/bin/sh\necho \"@PATH@\" >> /var/tmp/ran.log\n: > /var/tmp/started\n\
    while [ ! -e /var/tmp/release ]; do usleep 10000; done\n";

/// `apply: [held.sh, after.sh]`: the first step holds the stage until released.
fn held_package() -> Package {
    Package::new()
        .step("apply", Step::new("held.sh").script(HELD_STEP))
        .step("apply", Step::new("after.sh"))
        .step("apply-check", Step::new("held_check.sh"))
}

/// `s1.sh` records its run, signals that it started, then takes `seconds`; `s2.sh` and the
/// checks are the default scripts. Off host: no chroot, no root needed.
fn slow_package(name: &str, seconds: &str) -> Package {
    let slow = format!(
        "#!/bin/sh\necho \"@PATH@ $$\" >> \"@RAN_LOG@\"\ntouch \"@TMP@/{name}.started\"\nsleep {seconds}\n"
    );
    Package::named(name, "1.0.0")
        .step("apply", Step::new("s1.sh").on_host(false).script(&slow))
        .step("apply", Step::new("s2.sh").on_host(false))
        .step("apply-check", Step::new("s1_check.sh").on_host(false))
        .step("apply-check", Step::new("s2_check.sh").on_host(false))
}

fn spawn_stage(host: &FakeHost) -> Running {
    host.tagged_agent()
        .args(["apply", &host.root_str(), COPY_DIR])
        .spawn()
}

fn spawn_interrupt(host: &FakeHost, json: &str) -> Running {
    host.tagged_agent()
        .args([
            "interrupt",
            &host.root_str(),
            COPY_DIR,
            &interrupt_data(json),
        ])
        .spawn()
}

/// Wait until the agent has `<ROOT>/rel` open: it opens its lock file right before it tries
/// the lock, so from then on a held lock makes it wait (and say so).
fn wait_until_open(host: &FakeHost, agent: &Running, rel: &str) {
    let target = host.path(rel);
    let fds = format!("/proc/{}/fd", agent.pid());
    assert!(
        eventually(Duration::from_secs(20), || {
            std::fs::read_dir(&fds).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|e| std::fs::read_link(e.path()).is_ok_and(|t| t == target))
            })
        }),
        "the agent never opened {rel}"
    );
}

/// Hold for `d` while asserting the agent keeps running and `still` holds.
fn stays_blocked(agent: &mut Running, d: Duration, mut still: impl FnMut() -> bool) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        assert!(!agent.has_exited(), "the second agent did not wait");
        assert!(still(), "the second agent did something while waiting");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The waiting line must name the holder: its pid, the host's boot ID and a start time.
#[track_caller]
fn assert_waited_for(run: &Run, holder_pid: u32) {
    run.assert_stderr_line_contains(&[
        WAITING,
        &format!("holder=pid={holder_pid} boot_id={BOOT_ID} started=20"),
    ]);
}

#[track_caller]
fn assert_did_not_wait(run: &Run) {
    assert!(!run.err().contains(WAITING), "unexpected wait\n{run:?}");
}

// ---------------------------------------------------------------------------------------------
// Locks (SPEC §11)
// ---------------------------------------------------------------------------------------------

#[test]
fn a_second_agent_on_the_same_package_waits_and_each_step_runs_once() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.install(&held_package());
    let first = spawn_stage(&host);
    host.wait_for("var/tmp/started", Duration::from_secs(20));
    let mut second = spawn_stage(&host);
    wait_until_open(&host, &second, PACKAGE_LOCK);
    stays_blocked(&mut second, Duration::from_millis(300), || {
        host.ran() == ["held.sh"]
    });
    host.write("var/tmp/release", "");
    let first_pid = first.pid();
    let first = first.wait();
    first.assert_success();
    assert_did_not_wait(&first);
    let second = second.wait();
    second.assert_success();

    // The waiter said who holds the lock: the first agent's pid, boot ID and start time.
    assert_waited_for(&second, first_pid);
    second.assert_stderr_line_contains(&[WAITING, "locks/pkg.lock"]);
    assert_eq!(
        (host.ran_count("held.sh"), host.ran_count("after.sh")),
        (1, 1),
        "each step ran once"
    );
    assert!(!second.out().contains("apply held.sh"), "{second:?}");
    assert!(!second.out().contains("apply after.sh"), "{second:?}");
    second.assert_stderr_line_contains(&["skipping completed step", "held.sh"]);
    second.assert_stderr_line_contains(&["skipping completed step", "after.sh"]);
}

#[test]
fn a_second_interrupt_of_the_same_resource_waits_and_each_operation_runs_once() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.install(&Package::simple());
    host.set_fake_tool(
        "systemctl",
        "case \"$1\" in restart) : > /var/tmp/started; \
         while [ ! -e /var/tmp/release ]; do usleep 10000; done;; esac",
    );
    let first = spawn_interrupt(&host, SERVICES);
    host.wait_for("var/tmp/started", Duration::from_secs(20));
    let mut second = spawn_interrupt(&host, SERVICES);
    wait_until_open(&host, &second, INTERRUPT_LOCK);
    stays_blocked(&mut second, Duration::from_millis(300), || {
        host.calls().len() == 2
    });
    host.write("var/tmp/release", "");
    let first_pid = first.pid();
    let first = first.wait();
    first.assert_success();
    assert_did_not_wait(&first);
    let second = second.wait();
    second.assert_success();
    assert_waited_for(&second, first_pid);
    second.assert_stderr_line_contains(&[WAITING, "locks/interrupt-abc_pkg_1.0.0.lock"]);
    assert_eq!(
        host.calls(),
        ["systemctl daemon-reload", "systemctl restart kubelet"],
        "each operation ran once"
    );
    for op in ["service_restart_0", "service_restart_1"] {
        second.assert_stdout_contains(&format!(
            "Skipping interrupt {op} because it was already run for abc_pkg_1.0.0\n"
        ));
    }
}

#[test]
fn agents_of_different_packages_do_not_wait_for_each_other() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.install(&held_package());
    let other_dir = "/var/lib/skyhook/sk1/other-2.0.0-uid2-1";
    Package::named("other", "2.0.0")
        .step("apply", Step::new("o.sh"))
        .step("apply-check", Step::new("o_check.sh"))
        .write_into(&host.path(other_dir), host.root());
    let first = spawn_stage(&host);
    host.wait_for("var/tmp/started", Duration::from_secs(20));
    // `other` runs to its end while the first agent still holds its package's lock.
    let other = host
        .tagged_agent()
        .env("SKYHOOK_RESOURCE_ID", "abc_other_2.0.0")
        .args(["apply", &host.root_str(), other_dir])
        .run();
    other.assert_success();
    assert_did_not_wait(&other);
    assert_eq!(host.ran_count("o.sh"), 1);
    host.write("var/tmp/release", "");
    let first = first.wait();
    first.assert_success();
    assert_did_not_wait(&first);
    for lock in ["pkg.lock", "other.lock"] {
        assert!(host.is_file(&format!("{STATE}/locks/{lock}")), "{lock}");
    }
}

#[test]
fn a_lock_held_by_an_agent_killed_with_sigkill_does_not_block_the_next_one() {
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    // The first run of s1.sh hangs (it will be orphaned by the kill); the rerun finishes.
    let once_slow = "#!/bin/sh\necho \"@PATH@\" >> \"@RAN_LOG@\"\n\
         if [ ! -e \"@TMP@/first\" ]; then touch \"@TMP@/first\" \"@TMP@/pkg.started\"; sleep 60; fi\n";
    host.install(
        &Package::new()
            .step("apply", Step::new("s1.sh").on_host(false).script(once_slow))
            .step("apply", Step::new("s2.sh").on_host(false))
            .step("apply-check", Step::new("s1_check.sh").on_host(false)),
    );
    let killed = spawn_stage(&host);
    let killed_pid = killed.pid();
    host.wait_for("var/tmp/pkg.started", Duration::from_secs(20));
    assert!(
        host.read_string(PACKAGE_LOCK)
            .starts_with(&format!("pid={killed_pid} ")),
        "the lock names its holder"
    );
    // The agent records the step's process group before the step's program starts (the
    // step has written its file by now), so the kill comes after the record.
    assert!(
        eventually(Duration::from_secs(10), || host
            .read_string(PACKAGE_LOCK)
            .contains("\nrunning: pgid=")),
        "the lock file never named the running group: {:?}",
        host.read_string(PACKAGE_LOCK)
    );
    // Only the agent dies: its step, in its own process group, keeps running. The lock is
    // the agent's (close-on-exec), so the orphan does not keep it.
    signal_pid(killed_pid, "KILL");
    assert!(eventually(Duration::from_secs(10), || !process_alive(
        killed_pid
    )));
    assert!(
        !host.leftover_processes().is_empty(),
        "the orphaned step is still running"
    );

    // The lock is free at once, but the orphaned step still runs: SPEC §10, the next run
    // waits for it (it says so) rather than starting s1.sh beside it. Then the orphan ends,
    // as the end of its container would end it.
    let started = Instant::now();
    let mut next = host.stage_cmd("apply").spawn();
    let next_pid = next.pid();
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        assert!(
            !next.has_exited(),
            "the next agent did not wait for the orphan"
        );
        assert_eq!(
            host.ran_count("s1.sh"),
            1,
            "s1.sh started beside its orphan"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    host.kill_leftover_processes();
    let next = next.wait();
    next.assert_success();
    assert_did_not_wait(&next);
    next.assert_stderr_contains("waiting for an operation of an earlier run to finish");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(host.ran_count("s1.sh"), 2, "the unmarked step runs again");
    assert_eq!(host.ran_count("s2.sh"), 1, "the step after it runs once");
    assert!(
        host.read_string(PACKAGE_LOCK)
            .starts_with(&format!("pid={next_pid} boot_id={BOOT_ID} started=")),
        "{}",
        host.read_string(PACKAGE_LOCK)
    );
    drop(killed.kill_hard(&host));
}

#[test]
fn a_lock_file_from_an_earlier_boot_is_not_an_obstacle() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.install(&slow_package("pkg", "0"));
    host.write(
        PACKAGE_LOCK,
        "pid=1 boot_id=00000000-0000-4000-8000-000000000000 started=2026-11-29T10:00:00Z\n",
    );
    host.write(
        INTERRUPT_LOCK,
        "pid=1 boot_id=00000000-0000-4000-8000-000000000000 started=2026-11-29T10:00:00Z\n",
    );
    let run = host.stage("apply");
    run.assert_success();
    assert_did_not_wait(&run);
    assert_eq!(host.ran_count("s1.sh"), 1);
    let run = host
        .interrupt(&interrupt_data(r#"{"type":"service_restart"}"#))
        .run();
    run.assert_success();
    assert_did_not_wait(&run);
    // Each run left its own holder line.
    assert!(
        host.read_string(INTERRUPT_LOCK)
            .contains(&format!("boot_id={BOOT_ID}"))
    );
}

#[test]
fn sigterm_while_waiting_for_the_lock_exits_1_and_runs_nothing() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.install(&Package::simple());
    let mut holder = hold_flock(&host.path(PACKAGE_LOCK));
    let before = host.snapshot();
    let mut agent = spawn_stage(&host);
    wait_until_open(&host, &agent, PACKAGE_LOCK);
    stays_blocked(&mut agent, Duration::from_millis(200), || true);
    agent.signal("TERM");
    let run = agent.wait();
    let _ = holder.kill();
    let _ = holder.wait();
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    // The holder is not an agent (it wrote nothing): the line says so rather than guessing.
    run.assert_stderr_line_contains(&[WAITING, "holder=unknown"]);
    assert!(host.ran().is_empty(), "{run:?}");
    before.assert_unchanged(&host.snapshot(), "stopped while waiting for the lock");
}

#[test]
fn interrupts_of_different_resource_ids_do_not_wait_for_each_other() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.mkdir(PKG_DIR);
    // The first agent's `restart` finishes only once the second agent's has run.
    host.set_fake_tool(
        "systemctl",
        r#"[ "$1" = restart ] || exit 0
if [ "$ROLE" = first ]; then
  touch /var/tmp/first.started
  i=0
  while [ ! -e /var/tmp/second.ran ]; do
    i=$((i+1)); [ $i -gt 400 ] && exit 9
    sleep 0.05
  done
else
  touch /var/tmp/second.ran
fi"#,
    );
    let first = host
        .interrupt(&interrupt_data(SERVICES))
        .env("ROLE", "first")
        .env("SKYHOOK_RESOURCE_ID", "sk1-uid-1_pkg_1.0.0")
        .spawn();
    host.wait_for("var/tmp/first.started", Duration::from_secs(20));
    let second = host
        .interrupt(&interrupt_data(SERVICES))
        .env("ROLE", "second")
        .env("SKYHOOK_RESOURCE_ID", "sk1-uid-2_pkg_1.0.0")
        .run();
    let first = first.wait();
    second.assert_success();
    first.assert_success();
    assert_did_not_wait(&first);
    assert_did_not_wait(&second);
}

#[test]
fn a_stage_does_not_wait_for_an_interrupt_of_its_package() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.install(&slow_package("pkg", "0"));
    host.set_fake_tool(
        "systemctl",
        "[ \"$1\" = restart ] || exit 0\ntouch /var/tmp/systemctl.started\n\
         i=0\nwhile [ ! -e /var/tmp/pkg.started ]; do\n  i=$((i+1)); [ $i -gt 400 ] && exit 9\n  sleep 0.05\ndone",
    );
    let interrupt = host.interrupt(&interrupt_data(SERVICES)).spawn();
    host.wait_for("var/tmp/systemctl.started", Duration::from_secs(20));
    let stage = host.stage("apply");
    let interrupt = interrupt.wait();
    stage.assert_success();
    interrupt.assert_success();
    assert_did_not_wait(&stage);
}

// ---------------------------------------------------------------------------------------------
// SPEC §10: SKYHOOK_STEP_TIMEOUT_SECONDS
// ---------------------------------------------------------------------------------------------

const TIMEOUT_1S: [(&str, &str); 2] = [
    ("SKYHOOK_STEP_TIMEOUT_SECONDS", "1"),
    ("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "1"),
];

/// A step that notes SIGTERM and goes on waiting for a child that ignores it (`SIG_IGN` is
/// inherited by `sleep`).
const STUBBORN: &str = "#!/bin/sh\ntrap 'echo got-term' TERM\necho $$ > \"@TMP@/stubborn.pid\"\n\
    (trap '' TERM; exec sleep 30) &\nwait $!\nwait $!\necho survived\n";

#[test]
fn a_step_ignoring_sigterm_is_killed_after_the_grace_when_it_times_out() {
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.install(
        &Package::new()
            .step(
                "apply",
                Step::new("stubborn.sh").on_host(false).script(STUBBORN),
            )
            .step("apply", Step::new("next.sh").on_host(false))
            .step("apply-check", Step::new("next_check.sh").on_host(false)),
    );
    let run = host
        .tagged_agent()
        .env("SKYHOOK_STEP_TIMEOUT_SECONDS", "1")
        .env("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "1")
        .args(["apply", &host.root_str(), COPY_DIR])
        .run();
    run.assert_code(1);
    run.assert_stderr_line_contains(&[
        "agent execution failed",
        "running step \"stubborn.sh\": timed out after 1s",
    ]);
    // SIGTERM at 1 s (the trap ran), SIGKILL at 2 s.
    run.assert_stdout_contains("got-term");
    assert!(!run.out().contains("survived"), "{run:?}");
    // One second of timeout, one of grace, then SIGKILL: not the 30 s of the sleep.
    assert!(
        run.elapsed >= Duration::from_millis(1900),
        "SIGKILL before the grace ended: {:?}",
        run.elapsed
    );
    assert!(
        run.elapsed < Duration::from_secs(8),
        "the step was not killed after the grace: {:?}",
        run.elapsed
    );
    let pid: u32 = host
        .read_string("var/tmp/stubborn.pid")
        .trim()
        .parse()
        .unwrap();
    assert!(!process_alive(pid), "the step survived the agent");
    assert!(
        host.files_under(PKG_FLAGS).is_empty(),
        "a timed-out step is not marked"
    );
    assert_eq!(host.ran_count("next.sh"), 0, "no later step starts");
}

#[test]
fn a_step_exiting_zero_on_the_timeouts_sigterm_still_fails_unmarked() {
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    let polite = "#!/bin/sh\ntrap 'echo got-term; exit 0' TERM\nsleep 30 &\nwait $!\n";
    host.install(
        &Package::new()
            .step(
                "apply",
                Step::new("polite.sh").on_host(false).script(polite),
            )
            .step("apply-check", Step::new("polite_check.sh").on_host(false)),
    );
    let run = host.run("apply", &TIMEOUT_1S);
    run.assert_code(1);
    run.assert_stdout_contains("got-term\n");
    run.assert_stderr_line_contains(&["running step \"polite.sh\": timed out after 1s"]);
    assert!(run.elapsed < Duration::from_secs(8), "{:?}", run.elapsed);
    assert!(host.files_under(PKG_FLAGS).is_empty());
}

#[test]
fn a_timeout_in_a_check_stage_fails_that_check_and_the_others_still_run() {
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    let slow = "#!/bin/sh\necho \"@PATH@\" >> \"@RAN_LOG@\"\nsleep 30 &\nwait $!\n";
    host.install(
        &Package::new()
            .step("apply", Step::new("s1.sh").on_host(false))
            .step(
                "apply-check",
                Step::new("slow_check.sh").on_host(false).script(slow),
            )
            .step("apply-check", Step::new("fast_check.sh").on_host(false)),
    );
    let run = host.run("apply-check", &TIMEOUT_1S);
    run.assert_code(1);
    run.assert_stderr_line_contains(&["slow_check.sh", "timed out after 1s"]);
    run.assert_stderr_line_contains(&[
        "agent execution failed",
        "apply-check failed: 1 of 2 checks did not pass: slow_check.sh",
    ]);
    assert_eq!(host.ran(), ["slow_check.sh", "fast_check.sh "]);
    assert_eq!(
        host.read_string(CHECK_RESULTS),
        "slow_check.sh True\nfast_check.sh False"
    );
    assert!(!host.exists(&format!("{FLAGS}/apply-check_ALL_CHECKED")));
    assert!(
        !host.exists(HISTORY),
        "a failed check stage records no version"
    );
}

#[test]
fn the_timeout_applies_to_each_operation_not_to_the_whole_run() {
    let host = FakeHost::new();
    let step = |p: &str| {
        Step::new(p)
            .on_host(false)
            .script("#!/bin/sh\necho \"@PATH@ \" >> \"@RAN_LOG@\"\nsleep 0.6\n")
    };
    let pkg = Package::new()
        .step("apply", step("a.sh"))
        .step("apply", step("b.sh"))
        .step("apply", step("c.sh"))
        .step("apply-check", Step::new("a_check.sh").on_host(false));
    host.install(&pkg);
    let run = host.run("apply", &TIMEOUT_1S);
    run.assert_success();
    assert!(
        run.elapsed >= Duration::from_millis(1800),
        "{:?}",
        run.elapsed
    );
    for p in ["a.sh", "b.sh", "c.sh"] {
        assert!(host.is_file(&format!("{PKG_FLAGS}/{}", pkg.find(p).native_marker())));
    }
}

#[test]
fn an_interrupt_command_ignoring_sigterm_is_killed_after_the_grace_when_it_times_out() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.mkdir(PKG_DIR);
    host.set_fake_tool(
        "systemctl",
        "[ \"$2\" = a.service ] || exit 0\ntrap '' TERM\necho $$ > /var/tmp/systemctl.pid\nsleep 30",
    );
    let run = host
        .interrupt(&interrupt_data(
            r#"{"type":"service_restart","services":["a.service","b.service"]}"#,
        ))
        .env("SKYHOOK_STEP_TIMEOUT_SECONDS", "1")
        .env("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "1")
        .run();
    run.assert_code(1);
    run.assert_stderr_line_contains(&[
        "agent execution failed",
        "systemctl restart a.service: timed out after 1s",
    ]);
    assert!(
        run.elapsed >= Duration::from_millis(1900),
        "{:?}",
        run.elapsed
    );
    assert!(run.elapsed < Duration::from_secs(8), "{:?}", run.elapsed);
    let pid: u32 = host
        .read_string("var/tmp/systemctl.pid")
        .trim()
        .parse()
        .unwrap();
    assert!(!process_alive(pid));
    assert_eq!(
        host.list(INTERRUPT_FLAGS),
        ["service_restart_0.complete"],
        "only the operation that finished is marked"
    );
    assert_eq!(
        host.calls(),
        ["systemctl daemon-reload", "systemctl restart a.service"],
        "the timeout stops the interrupt"
    );
}

#[test]
fn a_reboot_command_that_times_out_fails() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.mkdir(PKG_DIR);
    host.set_fake_tool("reboot", "exec sleep 30");
    let run = host
        .interrupt(&interrupt_data(r#"{"type":"node_restart"}"#))
        .env("SKYHOOK_STEP_TIMEOUT_SECONDS", "1")
        .env("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "1")
        .run();
    run.assert_code(1);
    run.assert_stderr_line_contains(&["agent execution failed", "reboot: timed out after 1s"]);
    assert!(
        !run.out().contains("shutdown in progress"),
        "the timeout's own SIGTERM is not the host's shutdown\n{run:?}"
    );
    assert_eq!(
        host.read_string(&format!("{INTERRUPT_FLAGS}/node_restart_0.pending")),
        format!("boot-id:{BOOT_ID}\n"),
        "the pending marker stays: the next run retries under the loop guard"
    );
}

#[test]
fn a_fractional_timeout_is_reported_as_configured() {
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.install(
        &Package::new()
            .step(
                "apply",
                Step::new("slow.sh")
                    .on_host(false)
                    .script("#!/bin/sh\nsleep 30 &\nwait $!\n"),
            )
            .step("apply-check", Step::new("slow_check.sh").on_host(false)),
    );
    let run = host.run(
        "apply",
        &[
            ("SKYHOOK_STEP_TIMEOUT_SECONDS", "0.5"),
            ("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "1"),
        ],
    );
    run.assert_code(1);
    run.assert_stderr_contains("running step \"slow.sh\": timed out after 0.5s");
}

#[test]
fn a_timeout_kills_the_whole_process_group() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.install(
        &Package::new()
            .step(
                "apply",
                Step::new("bg.sh").script(
                    "#!/bin/sh\n(trap '' TERM; exec sleep 100) > /dev/null 2>&1 &\n\
                     echo $! > /var/tmp/gc.pid\nsleep 30\n",
                ),
            )
            .step("apply-check", Step::new("bg_check.sh")),
    );
    let run = host.run(
        "apply",
        &[
            ("SKYHOOK_STEP_TIMEOUT_SECONDS", "1"),
            ("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "1"),
        ],
    );
    run.assert_code(1);
    run.assert_stderr_contains("timed out after 1s");
    let pid: u32 = host.read_string("var/tmp/gc.pid").trim().parse().unwrap();
    assert!(
        eventually(Duration::from_secs(2), || !process_alive(pid)),
        "grandchild {pid} survived the timeout"
    );
}

// ---------------------------------------------------------------------------------------------
// Signals (SPEC §10): what signals.rs leaves out
// ---------------------------------------------------------------------------------------------

#[test]
fn a_signal_between_steps_starts_no_later_step() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    let pkg = Package::new()
        .step(
            "apply",
            Step::new("first.sh").script(
                "#!/bin/sh\necho \"@PATH@\" >> /var/tmp/ran.log\necho $$ > /var/tmp/first.tmp; mv /var/tmp/first.tmp /var/tmp/first.pid\n\
                 while [ ! -e /var/tmp/release ]; do usleep 5000; done\n",
            ),
        )
        .step("apply", Step::new("second.sh"))
        .step("apply-check", Step::new("first_check.sh"));
    host.install(&pkg);
    let agent = spawn_stage(&host);
    host.wait_for("var/tmp/first.pid", Duration::from_secs(20));
    let step_pid: u32 = host
        .read_string("var/tmp/first.pid")
        .trim()
        .parse()
        .unwrap();
    // Freeze the agent, let the step finish, then signal: the agent sees both the step's exit
    // and the signal before it can start the next step.
    agent.signal("STOP");
    host.write("var/tmp/release", "");
    assert!(
        eventually(Duration::from_secs(10), || !process_alive(step_pid)),
        "the first step did not finish"
    );
    agent.signal("TERM");
    agent.signal("CONT");
    let run = agent.wait();
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    assert_eq!(host.ran(), ["first.sh"], "no later step starts");
    assert!(!run.out().contains("apply second.sh"), "{run:?}");
    let first = pkg.find("first.sh");
    assert!(
        host.is_file(&format!("{PKG_FLAGS}/{}", first.native_marker())),
        "the step that finished with an accepted code is marked"
    );
    assert!(host.is_file(&format!("{STATE}/results/pkg/1.0.0/apply.json")));
}

#[test]
fn a_signal_between_interrupt_operations_starts_no_later_operation() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.install(&Package::simple());
    host.set_fake_tool(
        "systemctl",
        "case \"$1\" in daemon-reload) echo $$ > /var/tmp/op.tmp; mv /var/tmp/op.tmp /var/tmp/op.pid; \
         while [ ! -e /var/tmp/release ]; do usleep 5000; done;; esac",
    );
    let agent = spawn_interrupt(
        &host,
        r#"{"type":"service_restart","services":["a.service"]}"#,
    );
    host.wait_for("var/tmp/op.pid", Duration::from_secs(20));
    let op_pid: u32 = host.read_string("var/tmp/op.pid").trim().parse().unwrap();
    agent.signal("STOP");
    host.write("var/tmp/release", "");
    assert!(
        eventually(Duration::from_secs(10), || !process_alive(op_pid)),
        "the first operation did not finish"
    );
    agent.signal("TERM");
    agent.signal("CONT");
    let run = agent.wait();
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    assert_eq!(
        host.calls(),
        ["systemctl daemon-reload"],
        "no later operation starts"
    );
    assert_eq!(
        host.files_under(INTERRUPT_FLAGS),
        ["service_restart_0.complete"],
        "the operation that exited 0 is marked"
    );
}
