//! SPEC §10: SIGTERM/SIGINT and the other stop requests (SIGHUP, SIGUSR1, SIGUSR2, SIGALRM: the
//! first lets the running step finish, a second stops it), a signal during pre-flight, the
//! stop grace period, timeouts, a paused agent, leftover processes and the orphaned step of a
//! killed agent.

use std::time::{Duration, Instant};

use crate::util::{
    COPY_DIR, FakeHost, PKG_FLAGS, Package, Reaper, Run, Running, STATE, STOPPED, Step, eventually,
    process_alive, signal_pid,
};

const STARTED: &str = "var/tmp/started";

/// A step that signals it started, then sleeps; `prelude` runs first (traps).
fn sleeper(prelude: &str) -> String {
    format!(
        "#!/bin/sh\n{prelude}\necho started > /var/tmp/started\nsleep 30 &\nwait $!\necho after-wait\n"
    )
}

fn package(first: Step) -> Package {
    Package::new()
        .step("apply", first)
        .step("apply", Step::new("next.sh"))
        .step("apply-check", Step::new("next_check.sh"))
}

/// A step that signals it started, then waits until `/var/tmp/release` exists, says
/// `finished` and exits `code`. A SIGTERM it receives shows as `got-term` on stdout.
fn held(code: u8) -> String {
    format!(
        "#!/bin/sh\ntrap 'echo got-term' TERM\necho \"@PATH@\" >> /var/tmp/ran.log\n\
         echo started > /var/tmp/started\n\
         while [ ! -e /var/tmp/release ]; do usleep 10000; done\necho finished\nexit {code}\n"
    )
}

const WAITING: &str = "waiting for the running operation to finish";

fn spawn_apply(host: &FakeHost, grace: &str) -> Running {
    host.tagged_agent()
        .env("SKYHOOK_AGENT_STOP_GRACE_SECONDS", grace)
        .args(["apply", &host.root_str(), COPY_DIR])
        .timeout(Duration::from_secs(40))
        .spawn()
}

/// Start `apply`, wait for the first step to start, send `sig`, and after a pause the same
/// signal again (long enough for the first to be handled: two pending signals would merge).
fn signal_twice(host: &FakeHost, sig: &str, grace: &str) -> (Run, Duration) {
    signal_twice_after(host, sig, grace, || {})
}

/// Like [`signal_twice`], running `before_signal` once the step has started.
fn signal_twice_after(
    host: &FakeHost,
    sig: &str,
    grace: &str,
    before_signal: impl FnOnce(),
) -> (Run, Duration) {
    let mut agent = spawn_apply(host, grace);
    host.wait_for(STARTED, Duration::from_secs(20));
    before_signal();
    agent.signal(sig);
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        !agent.has_exited(),
        "the first signal does not stop the step"
    );
    let sent = Instant::now();
    agent.signal(sig);
    let run = agent.wait();
    (run, sent.elapsed())
}

/// Start `apply` with a [`held`] first step, send `sig` once it started, check for a while
/// that the agent waits, then let the step end.
fn signal_once_then_release(host: &FakeHost, sig: &str) -> Run {
    let mut agent = spawn_apply(host, "1");
    host.wait_for(STARTED, Duration::from_secs(20));
    agent.signal(sig);
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        assert!(
            !agent.has_exited(),
            "the agent stopped before its running step finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    host.write("var/tmp/release", "");
    agent.wait()
}

#[test]
fn first_sigterm_lets_the_running_step_finish_and_marks_it() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    let step = Step::new("held.sh").script(&held(0));
    host.install(&package(step.clone()));
    let run = signal_once_then_release(&host, "TERM");
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    run.assert_stdout_contains("finished\n");
    assert!(
        !run.out().contains("got-term"),
        "the step was signalled: {run:?}"
    );
    // Logged at once: what it waits for, its pid, how long it has run.
    run.assert_stderr_line_contains(&[WAITING, "held.sh", "pid=", "running="]);
    assert!(host.is_file(&format!("{PKG_FLAGS}/{}", step.legacy_marker())));
    assert!(host.is_file(&format!("{PKG_FLAGS}/{}", step.native_marker())));
    assert_eq!(host.ran(), ["held.sh"], "no later step starts");
    assert!(!run.out().contains("apply next.sh"), "{run:?}");
}

#[test]
fn first_sigint_behaves_like_sigterm() {
    require_root!();
    assert_a_stop_request("INT");
}

/// SPEC §10: `sig` stops the agent as SIGTERM does: the running step finishes and is marked,
/// nothing after it starts, exit 1; the next run skips the finished step.
fn assert_a_stop_request(sig: &str) {
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    let step = Step::new("held.sh").script(&held(0));
    host.install(&package(step.clone()));
    let run = signal_once_then_release(&host, sig);
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    run.assert_stderr_line_contains(&["received a termination signal", &format!("SIG{sig}")]);
    run.assert_stdout_contains("finished\n");
    assert!(!run.out().contains("got-term"), "SIG{sig}: {run:?}");
    assert!(host.is_file(&format!("{PKG_FLAGS}/{}", step.native_marker())));
    assert_eq!(host.ran(), ["held.sh"], "SIG{sig}: no later step starts");
    host.stage("apply").assert_success();
    assert_eq!(
        (host.ran_count("held.sh"), host.ran_count("next.sh")),
        (1, 1),
        "SIG{sig}: the next run does not do the finished step again: {:?}",
        host.ran()
    );
}

#[test]
fn a_hangup_lets_the_running_step_finish_and_the_next_run_skips_it() {
    require_root!();
    assert_a_stop_request("HUP");
}

#[test]
fn usr1_usr2_and_alrm_are_stop_requests_like_sigterm() {
    require_root!();
    for sig in ["USR1", "USR2", "ALRM"] {
        assert_a_stop_request(sig);
    }
}

#[test]
fn a_second_hangup_stops_the_step_like_a_second_sigterm() {
    require_root!();
    assert_a_second_signal_stops_a_step_that_dies_of_it("HUP");
}

/// A second `sig` signals the running step's group: a step that dies of it is not marked and
/// nothing after it starts.
fn assert_a_second_signal_stops_a_step_that_dies_of_it(sig: &str) {
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.install(&package(Step::new("plain.sh").script(&sleeper(""))));
    let (run, _) = signal_twice(&host, sig, "10");
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    run.assert_stderr_line_contains(&[
        "received a second termination signal",
        &format!("SIG{sig}"),
    ]);
    assert!(host.files_under(PKG_FLAGS).is_empty());
    assert_eq!(host.ran_count("next.sh"), 0);
}

/// SPEC §10: the handlers are installed before the first write. A SIGTERM during pre-flight's
/// copy of the package data (the agent stopped at its first `mkdirat` there) lets the copy finish
/// whole, starts nothing after it, and exits 1; the next run uses the copy.
#[test]
fn a_sigterm_during_the_package_copy_is_a_clean_stop() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    let data = host.outside().join("package-data");
    package(Step::new("first.sh")).write_into(&data, host.root());
    let stopped = host
        .tagged_agent()
        .env("SKYHOOK_DATA_DIR", &data)
        .args(["apply", &host.root_str(), COPY_DIR])
        .spawn_stopped_at("mkdirat");
    assert!(
        !host.exists(COPY_DIR),
        "stopped before the copy is in place"
    );
    signal_pid(stopped.pid, "TERM");
    stopped.resume();
    let run = stopped.strace.wait();
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    for file in ["config.json", "skyhook_dir/first.sh", "skyhook_dir/next.sh"] {
        assert!(
            host.is_file(&format!("{COPY_DIR}/{file}")),
            "{file}: {run:?}"
        );
    }
    assert_eq!(
        host.list("var/lib/skyhook/sk1"),
        ["pkg-1.0.0-uid1-1"],
        "the copy and nothing else"
    );
    assert!(host.ran().is_empty(), "{:?}", host.ran());
    host.stage("apply").assert_success();
    assert_eq!(host.ran_count("first.sh"), 1, "{:?}", host.ran());
}

#[test]
fn a_step_that_fails_after_the_signal_is_judged_normally_and_not_marked() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    host.install(&package(Step::new("held.sh").script(&held(3))));
    let run = signal_once_then_release(&host, "TERM");
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    run.assert_stderr_line_contains(&["held.sh", "exit code 3"]);
    assert!(host.files_under(PKG_FLAGS).is_empty());
    assert_eq!(host.ran(), ["held.sh"]);
}

#[test]
fn a_second_sigterm_stops_the_step_and_a_cleanly_exiting_step_is_marked() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    let step = Step::new("trap.sh").script(&sleeper("trap 'echo got-term; exit 0' TERM"));
    host.install(&package(step.clone()));
    let (run, _) = signal_twice(&host, "TERM", "10");
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    run.assert_stdout_contains("got-term\n");
    assert!(host.is_file(&format!("{PKG_FLAGS}/{}", step.legacy_marker())));
    assert!(host.is_file(&format!("{PKG_FLAGS}/{}", step.native_marker())));
    assert_eq!(host.ran_count("next.sh"), 0, "no later step starts");
}

#[test]
fn a_second_sigint_stops_a_step_that_dies_of_it_and_it_is_not_marked() {
    require_root!();
    assert_a_second_signal_stops_a_step_that_dies_of_it("INT");
}

#[test]
fn step_ignoring_sigterm_is_killed_after_the_grace_period() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    let step = Step::new("stubborn.sh").script(
        "#!/bin/sh\ntrap '' TERM\necho started > /var/tmp/started\nsleep 30\necho survived\n",
    );
    host.install(&package(step));
    let (run, since_signal) = signal_twice(&host, "TERM", "1");
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    assert!(!run.out().contains("survived"), "{run:?}");
    assert!(
        since_signal >= Duration::from_millis(900),
        "SIGKILL only after the grace period ({since_signal:?})"
    );
    assert!(
        since_signal < Duration::from_secs(15),
        "the step must be killed after the 1 s grace, not waited for ({since_signal:?})"
    );
    assert!(
        host.files_under(PKG_FLAGS).is_empty(),
        "a killed step is not marked"
    );
    assert_eq!(host.ran_count("next.sh"), 0);
}

#[test]
fn background_grandchildren_do_not_survive_the_agent() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    let step = Step::new("bg.sh").script(
        "#!/bin/sh\nsleep 100 > /var/tmp/gc.out 2>&1 &\necho $! > /var/tmp/gc.pid\n\
         echo started > /var/tmp/started\nsleep 30\n",
    );
    host.install(&package(step));
    let mut pid = 0;
    let (run, _) = signal_twice_after(&host, "TERM", "1", || {
        pid = host.read_string("var/tmp/gc.pid").trim().parse().unwrap();
        assert!(process_alive(pid), "the grandchild runs before the signal");
    });
    run.assert_code(1);
    assert!(
        eventually(Duration::from_secs(2), || !process_alive(pid)),
        "grandchild {pid} survived the agent"
    );
}

#[test]
fn grandchildren_ignoring_sigterm_do_not_survive_the_agent() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    let step = Step::new("bg.sh").script(
        "#!/bin/sh\n(trap '' TERM; exec sleep 100) > /var/tmp/gc.out 2>&1 &\necho $! > /var/tmp/gc.pid\n\
         echo started > /var/tmp/started\nsleep 30\n",
    );
    host.install(&package(step));
    let mut pid = 0;
    let (run, _) = signal_twice_after(&host, "TERM", "1", || {
        pid = host.read_string("var/tmp/gc.pid").trim().parse().unwrap();
        assert!(process_alive(pid), "the grandchild runs before the signal");
    });
    run.assert_code(1);
    assert!(
        eventually(Duration::from_secs(2), || !process_alive(pid)),
        "grandchild {pid} (ignoring SIGTERM) survived the agent"
    );
}

#[test]
fn step_timeout_stops_a_long_step() {
    require_root!();
    let host = FakeHost::new();
    host.install(&package(Step::new("slow.sh").script(&sleeper(""))));
    let start = Instant::now();
    let run = host.run(
        "apply",
        &[
            ("SKYHOOK_STEP_TIMEOUT_SECONDS", "1"),
            ("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "1"),
        ],
    );
    run.assert_code(1);
    run.assert_stderr_contains("timed out after 1s");
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    assert!(host.files_under(PKG_FLAGS).is_empty());
    assert_eq!(host.ran_count("next.sh"), 0);
}

#[test]
fn step_timeout_does_not_affect_fast_steps() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::simple());
    host.run("apply", &[("SKYHOOK_STEP_TIMEOUT_SECONDS", "30")])
        .assert_success();
}

#[test]
fn a_step_that_exited_while_the_agent_was_paused_is_judged_by_its_exit_status() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    // Exits 0 half a second in; the agent is stopped before that and continued after the
    // 2 s timeout has passed (CPU throttling, a paused VM).
    let step = Step::new("quick.sh").script(
        "#!/bin/sh\necho started > /var/tmp/started\nusleep 500000\n\
         echo \"@PATH@\" >> /var/tmp/ran.log\nexit 0\n",
    );
    let pkg = Package::new()
        .step("apply", step.clone())
        .step("apply-check", Step::new("quick_check.sh"));
    host.install(&pkg);
    let agent = host
        .tagged_agent()
        .env("SKYHOOK_STEP_TIMEOUT_SECONDS", "2")
        .args(["apply", &host.root_str(), COPY_DIR])
        .spawn();
    host.wait_for(STARTED, Duration::from_secs(20));
    agent.signal("STOP");
    assert!(
        eventually(Duration::from_secs(10), || host.ran() == ["quick.sh"]),
        "the step did not finish while the agent was stopped"
    );
    std::thread::sleep(Duration::from_secs(3));
    agent.signal("CONT");
    let run = agent.wait();
    run.assert_success();
    assert!(!run.err().contains("timed out"), "{run:?}");
    assert!(host.is_file(&format!("{PKG_FLAGS}/{}", step.native_marker())));
    assert!(host.is_file(&format!("{PKG_FLAGS}/{}", step.legacy_marker())));
}

#[test]
fn the_orphaned_step_of_a_killed_agent_is_waited_for_not_started_beside_it() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    // Only files: the killed agent took the read ends of the step's output pipes with it.
    let step = Step::new("held.sh").script(
        "#!/bin/sh\necho \"@PATH@ start\" >> /var/tmp/ran.log\necho $$ > /var/tmp/held.pid\n\
         echo started > /var/tmp/started\n\
         while [ ! -e /var/tmp/release ]; do usleep 10000; done\n\
         echo \"@PATH@ done\" >> /var/tmp/ran.log\n",
    );
    let pkg = package(step.clone());
    host.install(&pkg);

    // Outside a container, SIGKILL of the agent alone leaves its step's group running.
    let first = spawn_apply(&host, "1");
    let first_pid = first.pid();
    host.wait_for(STARTED, Duration::from_secs(20));
    let orphan: u32 = host.read_string("var/tmp/held.pid").trim().parse().unwrap();
    // The agent records the group before the step starts; the kill comes after that.
    let lock = format!("{STATE}/locks/pkg.lock");
    assert!(
        eventually(Duration::from_secs(10), || host
            .read_string(&lock)
            .contains(&format!("\nrunning: pgid={orphan} "))),
        "the lock file never named the step's group: {:?}",
        host.read_string(&lock)
    );
    first.signal("KILL");
    let killed = first.wait();
    assert_eq!(killed.code(), None, "{killed:?}");
    assert!(process_alive(orphan), "the step outlived its agent");

    the_next_run_waits_for_the_orphan(&host, &step, orphan, first_pid);
}

/// The agent `first_pid` was killed while `step` (it logs `held.sh start`, waits for
/// `/var/tmp/release`, logs `held.sh done`) ran as `orphan`: the next run waits for the
/// orphan without starting the step beside it, says so, then runs the unmarked step again.
fn the_next_run_waits_for_the_orphan(host: &FakeHost, step: &Step, orphan: u32, first_pid: u32) {
    let mut second = spawn_apply(host, "1");
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        assert!(!second.has_exited(), "the second agent did not wait");
        assert_eq!(
            host.ran(),
            ["held.sh start"],
            "the step started again beside its orphan"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    host.write("var/tmp/release", "");
    let run = second.wait();
    run.assert_success();
    run.assert_stderr_line_contains(&[
        "waiting for an operation of an earlier run to finish",
        &format!("pgid={orphan}"),
        "held.sh",
        &format!("pid={first_pid}"),
    ]);
    // The orphan ran to its end first; then the step ran again (it has no marker), alone.
    assert_eq!(
        host.ran()[..4],
        [
            "held.sh start",
            "held.sh done",
            "held.sh start",
            "held.sh done"
        ]
    );
    assert_eq!(host.ran_count("next.sh"), 1);
    assert!(host.is_file(&format!("{PKG_FLAGS}/{}", step.native_marker())));
    // The lock file no longer names a running group.
    let lock = host.read_string(&format!("{STATE}/locks/pkg.lock"));
    assert!(!lock.contains("running:"), "{lock:?}");
}

#[test]
fn the_lock_file_names_the_steps_group_before_the_step_starts() {
    require_root!();
    let host = FakeHost::new();
    // The step's first action reads the lock file (STATE as the chrooted step sees it).
    let step = Step::new("first.sh").script(&format!(
        "#!/bin/sh\ncat /{STATE}/locks/pkg.lock > /var/tmp/lock-at-start\necho $$ > /var/tmp/first.pid\n"
    ));
    host.install(&package(step));
    let run = spawn_apply(&host, "1").wait();
    run.assert_success();
    let pid = host.read_string("var/tmp/first.pid").trim().to_owned();
    let lock = host.read_string("var/tmp/lock-at-start");
    assert!(
        lock.contains(&format!("\nrunning: pgid={pid} ")) && lock.contains("first.sh"),
        "the step ran before the lock file named its group: {lock:?}"
    );
}

#[test]
fn an_agent_killed_by_its_steps_first_action_leaves_an_orphan_the_next_run_waits_for() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    // The earliest moment the agent can die with its step running: the step's first action
    // kills it (SIGKILL, as outside a container). Only files: the killed agent took the
    // read ends of the step's output pipes with it.
    let step = Step::new("held.sh").script(
        "#!/bin/sh\nif [ ! -e /var/tmp/killed ]; then : > /var/tmp/killed; kill -KILL $PPID; fi\n\
         echo \"@PATH@ start\" >> /var/tmp/ran.log\necho $$ > /var/tmp/held.pid\n\
         echo started > /var/tmp/started\n\
         while [ ! -e /var/tmp/release ]; do usleep 10000; done\n\
         echo \"@PATH@ done\" >> /var/tmp/ran.log\n",
    );
    let pkg = package(step.clone());
    host.install(&pkg);

    let first = spawn_apply(&host, "1");
    let first_pid = first.pid();
    let killed = first.wait();
    assert_eq!(killed.code(), None, "{killed:?}");
    host.wait_for(STARTED, Duration::from_secs(20));
    let orphan: u32 = host.read_string("var/tmp/held.pid").trim().parse().unwrap();
    assert!(process_alive(orphan), "the step outlived its agent");
    let lock = host.read_string(&format!("{STATE}/locks/pkg.lock"));
    assert!(
        lock.contains(&format!("\nrunning: pgid={orphan} ")),
        "the killed agent left no record of its step's group: {lock:?}"
    );

    the_next_run_waits_for_the_orphan(&host, &step, orphan, first_pid);
}

#[test]
fn two_signals_delivered_together_count_as_two() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    let step = Step::new("trap.sh").script(&sleeper("trap 'echo got-term; exit 0' TERM"));
    host.install(&package(step));
    let agent = spawn_apply(&host, "10");
    host.wait_for(STARTED, Duration::from_secs(20));
    // Both arrive while the agent is stopped, so they are handled back to back on SIGCONT,
    // before anything has read the first.
    agent.signal("STOP");
    agent.signal("TERM");
    agent.signal("INT");
    let sent = Instant::now();
    agent.signal("CONT");
    let run = agent.wait();
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    run.assert_stderr_contains("received a second termination signal");
    run.assert_stdout_contains("got-term\n");
    assert!(
        sent.elapsed() < Duration::from_secs(10),
        "the second signal stopped the step at once ({:?})",
        sent.elapsed()
    );
    assert_eq!(host.ran_count("next.sh"), 0);
}
