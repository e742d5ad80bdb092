//! SPEC §8.4 leftover processes: a process a step leaves behind (`&`, `nohup`, `setsid`) keeps
//! running for the later steps; the agent relays its output until the pipes have been idle for
//! 2 s after the step's main process exited, then closes them (a second signal closes them at
//! once); and it is ended, SIGTERM then SIGKILL after the grace, when the agent exits (SPEC §10:
//! no orphan survives the agent).
//!
//! Every test runs its steps chrooted into the fake root, so that [`Reaper`] finds whatever a
//! failed assertion leaves running.

use std::time::{Duration, Instant};

use crate::util::{
    COPY_DIR, FakeHost, Package, Reaper, Run, STOPPED, Step, eventually, process_alive,
};

const HELPER_PID: &str = "var/tmp/helper.pid";
const STARTED: &str = "var/tmp/started";

/// `apply: [start.sh, use.sh]`: `start.sh` runs `start` (which leaves a helper and writes its
/// pid to [`HELPER_PID`]); `use.sh` says it started, then waits for `/var/tmp/release`.
fn helper_package(start: &str) -> Package {
    Package::new()
        .step(
            "apply",
            Step::new("start.sh").script(&format!(
                "#!/bin/sh\n{start}\necho \"@PATH@\" >> /var/tmp/ran.log\n"
            )),
        )
        .step(
            "apply",
            Step::new("use.sh").script(
                "#!/bin/sh\necho \"@PATH@\" >> /var/tmp/ran.log\necho started > /var/tmp/in-use\n\
                 while [ ! -e /var/tmp/release ]; do usleep 10000; done\n",
            ),
        )
        .step("apply-check", Step::new("start_check.sh"))
}

fn helper_pid(host: &FakeHost) -> u32 {
    host.read_string(HELPER_PID).trim().parse().unwrap()
}

fn spawn_apply(host: &FakeHost, env: &[(&str, &str)]) -> crate::util::Running {
    env.iter()
        .fold(host.tagged_agent(), |cmd, (k, v)| cmd.env(k, *v))
        .args(["apply", &host.root_str(), COPY_DIR])
        .timeout(Duration::from_secs(60))
        .spawn()
}

/// Run `apply` to its end, `use.sh` released from the start; the run and how long it took.
fn run_released(host: &FakeHost, env: &[(&str, &str)]) -> (Run, Duration) {
    host.write("var/tmp/release", "");
    let start = Instant::now();
    let run = spawn_apply(host, env).wait();
    (run, start.elapsed())
}

/// The helper is gone soon after the agent exited: its pid.
#[track_caller]
fn assert_helper_ended(host: &FakeHost, run: &Run) -> u32 {
    let pid = helper_pid(host);
    assert!(
        eventually(Duration::from_secs(3), || !process_alive(pid)),
        "the helper {pid} survived the agent: {run:?}"
    );
    pid
}

#[test]
fn a_helper_a_step_leaves_running_is_alive_during_the_next_step() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    // In the step's process group, output elsewhere: only the step's exit could end it.
    host.install(&helper_package(
        "sleep 30 > /dev/null 2>&1 &\necho $! > /var/tmp/helper.pid",
    ));
    let agent = spawn_apply(&host, &[]);
    host.wait_for("var/tmp/in-use", Duration::from_secs(20));
    let pid = helper_pid(&host);
    assert!(
        process_alive(pid),
        "the helper {pid} of start.sh was ended before use.sh ran"
    );
    host.write("var/tmp/release", "");
    let run = agent.wait();
    run.assert_success();
    assert_eq!(host.ran(), ["start.sh", "use.sh"]);
}

#[test]
fn the_agent_stops_relaying_a_leftover_two_seconds_after_the_step_exited() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    // Outside the step's process group and holding its stdout and stderr for 30 s: it writes
    // once a second after the step exited, then nothing more.
    host.install(&helper_package(
        "setsid sh -c 'usleep 1000000; echo late output; exec sleep 30' &\n\
         echo $! > /var/tmp/helper.pid\necho main exits",
    ));
    let (run, took) = run_released(&host, &[("SKYHOOK_STEP_TIMEOUT_SECONDS", "2")]);
    run.assert_success();
    // A hang check, not a performance figure: the leftover lives 30 s.
    assert!(
        took < Duration::from_secs(10),
        "the agent waited for the leftover's pipes ({took:?}): {run:?}"
    );
    assert_eq!(host.ran(), ["start.sh", "use.sh"], "{run:?}");
    // Relayed while the pipes were not yet idle for 2 s, in order, before the next header.
    run.assert_stdout_contains("main exits\nlate output\napply use.sh [] [0]");
    let pid = helper_pid(&host);
    run.assert_stderr_line_contains(&[
        "level=warn",
        "start.sh",
        &format!("{pid} (sleep 30)"),
        "no longer relaying",
    ]);
}

#[test]
fn a_second_signal_stops_relaying_a_leftover_at_once() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    // A helper that never stops writing: its pipes are never idle.
    host.install(&helper_package(
        "setsid sh -c 'while :; do echo tick; usleep 100000; done' &\n\
         echo $! > /var/tmp/helper.pid\necho started > /var/tmp/started",
    ));
    let mut agent = spawn_apply(&host, &[("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "1")]);
    host.wait_for(STARTED, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(500));
    agent.signal("TERM");
    std::thread::sleep(Duration::from_millis(400));
    assert!(!agent.has_exited(), "the first signal lets the relay go on");
    let sent = Instant::now();
    agent.signal("TERM");
    let run = agent.wait();
    let took = sent.elapsed();
    run.assert_code(1);
    run.assert_stderr_contains(STOPPED);
    // A hang check: the helper writes forever.
    assert!(
        took < Duration::from_secs(8),
        "the second signal did not end the relay ({took:?}): {run:?}"
    );
    run.assert_stdout_contains("tick\n");
    assert_eq!(host.ran(), ["start.sh"], "no later step starts");
    assert_helper_ended(&host, &run);
}

#[test]
fn a_helper_outside_the_step_s_group_is_ended_when_the_agent_exits() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    // Its own session, output elsewhere: neither the step's process group nor its pipes.
    host.install(&helper_package(
        "setsid sleep 30 > /dev/null 2>&1 &\necho $! > /var/tmp/helper.pid",
    ));
    let (run, _) = run_released(&host, &[]);
    run.assert_success();
    let pid = assert_helper_ended(&host, &run);
    run.assert_stderr_line_contains(&["ending", &format!("{pid} (sleep 30)")]);
}

#[test]
fn a_helper_ignoring_sigterm_is_killed_after_the_grace_when_the_agent_exits() {
    require_root!();
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    // An ignored signal stays ignored across exec.
    host.install(&helper_package(
        "setsid sh -c \"trap '' TERM; exec sleep 30\" > /dev/null 2>&1 &\n\
         echo $! > /var/tmp/helper.pid",
    ));
    let (run, took) = run_released(&host, &[("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "1")]);
    run.assert_success();
    assert_helper_ended(&host, &run);
    // A hang check: SIGKILL comes after the 1 s grace, not after the helper's 30 s.
    assert!(took < Duration::from_secs(10), "{took:?}: {run:?}");
}
