//! SPEC §9.5: the core settles every outcome, whatever a kind does. The kinds of
//! `tests/misbehaving_kinds` make the mistakes a hurried author makes; their distributor binary
//! `agent-with-misbehaving-kinds` runs them against fake host roots, where `gpu-tool` is a
//! fake tool recording its argv in `calls.log`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{
    COPY_DIR, FakeHost, INTERRUPT_FLAGS, Reaper, Run, STATE, STOPPED, eventually, interrupt_data,
    process_alive,
};

/// The example distributor (`pod_drain`).
fn distributor() -> PathBuf {
    crate::plugins::distributor()
}

const RESULTS: &str = "var/lib/skyhook/sk1/results/pkg/1.0.0/interrupt.json";

/// The test distributor, built next to `agent`.
pub(crate) fn misbehaving() -> PathBuf {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_agent"))
        .with_file_name("agent-with-misbehaving-kinds");
    assert!(
        exe.is_file(),
        "{} is missing: build it first with `cargo build -p misbehaving-kinds` (or `cargo \
         build --workspace --bins`)",
        exe.display()
    );
    exe
}

/// A fake host whose `gpu-tool` fails for GPU 3 and succeeds otherwise.
fn gpu_host() -> FakeHost {
    let host = FakeHost::with_package_dir();
    host.set_fake_tool("gpu-tool", "[ \"$2\" = 3 ] && exit 1\nexit 0");
    host
}

fn run_kind(host: &FakeHost, json: &str) -> Run {
    host.interrupt(&interrupt_data(json))
        .run_program(&misbehaving())
}

/// The results record of the run: written, with exit code 1 and the error.
fn assert_failed_record(host: &FakeHost, error: &str) {
    let record: Value = serde_json::from_str(&host.read_string(RESULTS)).expect("a results record");
    assert_eq!(record["exit_code"], 1, "{record}");
    assert!(
        record["error"].as_str().is_some_and(|e| e.contains(error)),
        "{record}"
    );
}

#[test]
fn a_kind_that_swallows_a_failed_operation_fails_the_run() {
    require_root!();
    let host = gpu_host();
    let run = run_kind(&host, r#"{"type":"swallows_failure","gpus":["0","3"]}"#);
    run.assert_code(1);
    let error = "kind returned success after operation swallows_failure_1 failed: gpu-tool --reset 3: exit code 1";
    run.assert_stderr_line_contains(&["agent execution failed", error]);
    run.assert_stderr_line_contains(&["run finished", "result=failed", "ran=2", "failed=1"]);
    assert_eq!(host.calls(), ["gpu-tool --reset 0", "gpu-tool --reset 3"]);
    assert_eq!(host.list(INTERRUPT_FLAGS), ["swallows_failure_0.complete"]);
    assert_failed_record(&host, error);

    // The next run resumes at the GPU that failed.
    host.set_fake_tool("gpu-tool", "exit 0");
    run_kind(&host, r#"{"type":"swallows_failure","gpus":["0","3"]}"#).assert_success();
    assert_eq!(
        host.calls(),
        [
            "gpu-tool --reset 0",
            "gpu-tool --reset 3",
            "gpu-tool --reset 3"
        ]
    );
}

#[test]
fn running_one_operation_index_twice_fails_the_run() {
    require_root!();
    let host = gpu_host();
    let run = run_kind(&host, r#"{"type":"runs_index_twice"}"#);
    run.assert_code(1);
    let error = "operation 0 (runs_index_twice_0) was already run in this run";
    run.assert_stderr_line_contains(&["agent execution failed", error]);
    assert_eq!(
        host.calls(),
        ["gpu-tool first"],
        "the second command never ran"
    );
    assert_eq!(host.list(INTERRUPT_FLAGS), ["runs_index_twice_0.complete"]);
    assert_failed_record(&host, error);
}

#[test]
fn a_panicking_kind_exits_1_naming_the_panic_with_its_record_written() {
    require_root!();
    let host = gpu_host();
    let run = run_kind(&host, r#"{"type":"panics"}"#);
    run.assert_code(1);
    let error = r#"interrupt kind "panics" panicked: the GPU list is empty (at tests/misbehaving_kinds/kinds.rs:"#;
    run.assert_stderr_line_contains(&["agent execution failed", error]);
    run.assert_stderr_line_contains(&["run finished", "result=failed", "ran=1"]);
    assert!(
        !run.err().contains("thread '"),
        "the panic is reported once, by the run: {run:?}"
    );
    assert_eq!(host.calls(), ["gpu-tool first"]);
    assert_eq!(host.list(INTERRUPT_FLAGS), ["panics_0.complete"]);
    assert_failed_record(&host, error);
}

#[test]
fn the_running_operation_of_a_killed_agent_is_waited_for_not_started_beside_it() {
    require_root!();
    let host = FakeHost::with_package_dir();
    let _reaper = Reaper(&host);
    // `systemctl restart kubelet` publishes its pid, then holds until released. Only files:
    // the killed agent took the read ends of the command's output pipes with it.
    host.set_fake_tool(
        "systemctl",
        "[ \"$1\" = restart ] || exit 0\necho $$ > /var/tmp/held.tmp\n\
         mv /var/tmp/held.tmp /var/tmp/held.pid\n\
         while [ ! -e /var/tmp/release ]; do usleep 10000; done\n\
         echo \"done $*\" >> /var/tmp/calls.log",
    );
    let data = interrupt_data(r#"{"type":"service_restart","services":["kubelet"]}"#);
    let spawn = || {
        host.tagged_agent()
            .args(["interrupt", &host.root_str(), COPY_DIR, &data])
            .timeout(Duration::from_secs(40))
            .spawn()
    };
    let first = spawn();
    let first_pid = first.pid();
    host.wait_for("var/tmp/held.pid", Duration::from_secs(20));
    let orphan: u32 = host.read_string("var/tmp/held.pid").trim().parse().unwrap();
    // SPEC §9.5, §10: the operation's group is recorded in the interrupt lock as a step's is
    // in the package lock, right after it starts; the kill comes after that.
    let lock = format!("{STATE}/locks/interrupt-abc_pkg_1.0.0.lock");
    assert!(
        eventually(Duration::from_secs(10), || host
            .read_string(&lock)
            .contains(&format!("\nrunning: pgid={orphan} "))),
        "the lock file never named the operation's group: {:?}",
        host.read_string(&lock)
    );
    first.signal("KILL");
    assert_eq!(first.wait().code(), None);
    assert!(process_alive(orphan), "the operation outlived its agent");

    let mut second = spawn();
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        assert!(!second.has_exited(), "the second agent did not wait");
        assert_eq!(
            host.calls(),
            ["systemctl daemon-reload", "systemctl restart kubelet"],
            "the operation started again beside its orphan"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    host.write("var/tmp/release", "");
    let run = second.wait();
    run.assert_success();
    run.assert_stderr_line_contains(&[
        "waiting for an operation of an earlier run to finish",
        &format!("pgid={orphan}"),
        "systemctl restart kubelet",
        &format!("pid={first_pid}"),
    ]);
    // The orphan ran to its end first; then the unmarked operation ran again, alone.
    assert_eq!(
        host.calls(),
        [
            "systemctl daemon-reload",
            "systemctl restart kubelet",
            "done restart kubelet",
            "systemctl restart kubelet",
            "done restart kubelet"
        ]
    );
    assert_eq!(
        host.list(INTERRUPT_FLAGS),
        ["service_restart_0.complete", "service_restart_1.complete"]
    );
    assert!(!host.read_string(&lock).contains("running:"));
}

/// Start `json`'s kind with a stop grace of 1 s, wait until its first operation is complete
/// (the kind is then in its own code, for 10 minutes), and send SIGTERM twice. How the agent
/// ended, and how long it took from the first signal.
fn stop_twice_while_it_waits(host: &FakeHost, json: &str) -> (Run, Duration) {
    let agent = host
        .tagged_agent()
        .env("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "1")
        .args([
            "interrupt",
            &host.root_str(),
            COPY_DIR,
            &interrupt_data(json),
        ])
        .timeout(Duration::from_secs(40))
        .spawn_program(&misbehaving());
    let ty: Value = serde_json::from_str(json).unwrap();
    let marker = format!(
        "{INTERRUPT_FLAGS}/{}_0.complete",
        ty["type"].as_str().unwrap()
    );
    assert!(
        eventually(Duration::from_secs(20), || host.is_file(&marker)),
        "the first operation never completed"
    );
    let signalled = Instant::now();
    agent.signal("TERM");
    std::thread::sleep(Duration::from_millis(300));
    agent.signal("TERM");
    let run = agent.wait();
    (run, signalled.elapsed())
}

#[test]
fn the_second_signal_stops_a_kind_waiting_in_its_own_code_after_the_grace() {
    require_root!();
    let host = gpu_host();
    let (run, took) = stop_twice_while_it_waits(&host, r#"{"type":"sleeps_between"}"#);
    run.assert_code(1);
    // The kind waits 10 minutes; the agent gives it the grace of 1 s.
    assert!(took < Duration::from_secs(15), "{took:?}: {run:?}");
    run.assert_stderr_line_contains(&["agent execution failed", STOPPED]);
    run.assert_stderr_line_contains(&[
        "did not return within the stop grace after the second termination signal",
        "kind=sleeps_between",
    ]);
    run.assert_stderr_line_contains(&["run finished", "result=stopped"]);
    assert_eq!(
        host.calls(),
        ["gpu-tool first"],
        "nothing starts after the stop"
    );
    assert_failed_record(&host, STOPPED);
}

#[test]
fn a_kind_blocked_in_synchronous_code_cannot_hold_the_agent_past_the_grace() {
    require_root!();
    let host = gpu_host();
    let (run, took) = stop_twice_while_it_waits(&host, r#"{"type":"blocks_between"}"#);
    run.assert_code(1);
    assert!(took < Duration::from_secs(15), "{took:?}: {run:?}");
    let error = r#"interrupt kind "blocks_between" is blocked in synchronous code: it did not return within SKYHOOK_AGENT_STOP_GRACE_SECONDS=1s after the second termination signal, so the agent left it"#;
    run.assert_stderr_line_contains(&["agent execution failed", error]);
    run.assert_stderr_line_contains(&["run finished", "result=failed"]);
    assert_eq!(host.calls(), ["gpu-tool first"]);
    assert_failed_record(&host, error);
}

#[test]
fn the_step_timeout_bounds_a_kind_s_own_code() {
    require_root!();
    let host = gpu_host();
    let run = host
        .interrupt(&interrupt_data(r#"{"type":"sleeps_between"}"#))
        .env("SKYHOOK_STEP_TIMEOUT_SECONDS", "1")
        .env("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "1")
        .timeout(Duration::from_secs(40))
        .run_program(&misbehaving());
    run.assert_code(1);
    let error = r#"interrupt kind "sleeps_between" timed out after 1s in its own code (outside its operations; SKYHOOK_STEP_TIMEOUT_SECONDS)"#;
    run.assert_stderr_line_contains(&["agent execution failed", error]);
    assert_eq!(host.calls(), ["gpu-tool first"]);
    assert_failed_record(&host, error);
}

/// The stock agent's run of `json` on a fresh host: it must fail before touching anything.
fn refused(json: &str, program: Option<&std::path::Path>) -> Run {
    let host = FakeHost::with_package_dir();
    let before = host.snapshot();
    let cmd = host.interrupt(&interrupt_data(json));
    let run = match program {
        Some(p) => cmd.run_program(p),
        None => cmd.run(),
    };
    run.assert_code(1);
    before.assert_unchanged(&host.snapshot(), json);
    run
}

#[test]
fn a_decoding_error_names_the_field_and_the_expected_type() {
    require_root!();
    refused(r#"{"type":"service_restart","services":5}"#, None).assert_stderr_contains(
        r#"serialized interrupt must be base64-encoded JSON with a "type" field: field "services": expected an array, found the integer 5"#,
    );
    refused(
        r#"{"type":"pod_drain","timeout_seconds":"5"}"#,
        Some(&distributor()),
    )
    .assert_stderr_contains(
        r#"field "timeout_seconds": expected an unsigned integer, found the string "5""#,
    );
}

#[test]
fn a_misspelt_field_gets_did_you_mean_also_when_the_payload_is_refused() {
    require_root!();
    // Ignored (a newer operator's field), but named with the field it is near.
    let host = FakeHost::with_package_dir();
    let run = host
        .interrupt(&interrupt_data(
            r#"{"type":"service_restart","service":["kubelet"]}"#,
        ))
        .run();
    run.assert_success();
    run.assert_stderr_line_contains(&[
        "ignoring unknown interrupt fields",
        r#"fields=service (did you mean "services"?)"#,
    ]);
    assert_eq!(host.calls(), ["systemctl daemon-reload"]);

    // A required field missing because it is misspelt.
    refused(
        r#"{"type":"swallows_failure","gpu":["0"]}"#,
        Some(&misbehaving()),
    )
    .assert_stderr_contains(
        r#"field "gpus" is missing; unknown fields: gpu (did you mean "gpus"?)"#,
    );
    // The kind's own check refuses the payload.
    refused(
        r#"{"type":"pod_drain","timeout_seconds":0,"node_nme":"gpu-node-7"}"#,
        Some(&distributor()),
    )
    .assert_stderr_contains(
        r#"invalid pod_drain interrupt: timeout_seconds: must be between 1 and 86400, not 0; unknown fields: node_nme (did you mean "node_name"?)"#,
    );
}

#[test]
fn a_misspelt_type_gets_the_nearest_registered_one() {
    require_root!();
    refused(r#"{"type":"service_restrat"}"#, None).assert_stderr_contains(
        r#"unknown interrupt "service_restrat" must be one of: no_op, node_restart, restart_all_services, script_interrupt, service_restart (did you mean "service_restart"?)"#,
    );
}

#[test]
fn interrupts_encode_names_the_near_miss_of_an_unknown_field() {
    let run = FakeHost::new()
        .agent()
        .args([
            "interrupts",
            "encode",
            r#"{"type":"service_restart","service":[]}"#,
        ])
        .run();
    run.assert_success();
    run.assert_stderr_contains(
        r#"warning: ignoring unknown interrupt fields: service (did you mean "services"?)"#,
    );
}

const BROKEN: &str = r#"interrupt kind "broken_example" (module agent_with_misbehaving_kinds::kinds) is broken, so its payloads are refused: its example {"type":"broken_example","gpus":[]} does not decode: invalid broken_example interrupt: gpus: must name at least one GPU"#;

fn misbehaving_subcommand(args: &[&str]) -> Run {
    crate::plugins::subcommand_of(&misbehaving(), args)
}

#[test]
fn a_broken_kind_does_not_stop_the_agent() {
    // The binary links `broken_example`, whose example fails its own validate.
    let run = misbehaving_subcommand(&["--version"]);
    run.assert_success();
    let stock = FakeHost::new().agent().args(["--version"]).run();
    assert_eq!(run.out(), stock.out());
    misbehaving_subcommand(&["--help"]).assert_success();
    misbehaving_subcommand(&[
        "interrupts",
        "encode",
        r#"{"type":"swallows_failure","gpus":["0"]}"#,
    ])
    .assert_success();
}

#[test]
fn interrupts_list_names_the_broken_kind_and_lists_the_others() {
    let run = misbehaving_subcommand(&["interrupts", "list"]);
    run.assert_code(1);
    run.assert_stderr_contains(BROKEN);
    crate::plugins::assert_lists(
        &run,
        &[
            "broken_example",
            "panics",
            "service_restart",
            "swallows_failure",
        ],
    );
    assert!(
        run.out().contains(
            "BROKEN: its example {\"type\":\"broken_example\",\"gpus\":[]} does not decode"
        ),
        "{run:?}"
    );

    let run = misbehaving_subcommand(&["interrupts", "list", "--format", "json"]);
    run.assert_code(1);
    let list: Value = serde_json::from_slice(&run.stdout).expect("JSON on stdout");
    let kinds = list["kinds"].as_array().expect("an array of kinds");
    let broken: Vec<&str> = kinds
        .iter()
        .filter(|k| k.get("broken").is_some())
        .map(|k| k["type"].as_str().unwrap())
        .collect();
    assert_eq!(broken, ["broken_example"]);
}

#[test]
fn only_the_payloads_of_a_broken_kind_are_refused() {
    require_root!();
    refused(
        r#"{"type":"broken_example","gpus":["0"]}"#,
        Some(&misbehaving()),
    )
    .assert_stderr_contains(BROKEN);
    let host = gpu_host();
    run_kind(
        &host,
        r#"{"type":"service_restart","services":["kubelet"]}"#,
    )
    .assert_success();
    assert_eq!(
        host.calls(),
        ["systemctl daemon-reload", "systemctl restart kubelet"]
    );
}
