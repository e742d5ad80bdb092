//! SPEC §9.5: a third-party kind reaches a binary that links its crate. The example crate
//! `examples/custom-interrupt` adds `pod_drain`; its distributor binary `agent-with-pod-drain`
//! is the stock agent plus that crate. The stock `agent` does not know the kind.

use std::path::PathBuf;

use serde_json::Value;

use crate::util::{
    FakeHost, INTERRUPT_FLAGS, INTERRUPT_LOGS, Run, interrupt_data, interrupt_marker,
    parse_log_name,
};

const DRAIN: &str = "kubectl drain gpu-node-7 --ignore-daemonsets --timeout=300s";
const BUILTIN_TYPES: &str =
    "no_op, node_restart, restart_all_services, script_interrupt, service_restart";

/// The distributor's binary, built next to `agent`.
pub(crate) fn distributor() -> PathBuf {
    let exe =
        std::path::Path::new(env!("CARGO_BIN_EXE_agent")).with_file_name("agent-with-pod-drain");
    assert!(
        exe.is_file(),
        "{} is missing: build the example distributor first with \
         `cargo build -p custom-agent` (or `cargo build --workspace --bins`)",
        exe.display()
    );
    exe
}

/// `agent-with-pod-drain interrupt ROOT COPY_DIR base64(json)` with `NODE_NAME=gpu-node-7`.
fn drain(host: &FakeHost, json: &str) -> Run {
    host.interrupt(&interrupt_data(json))
        .env("NODE_NAME", "gpu-node-7")
        .run_program(&distributor())
}

fn subcommand(args: &[&str]) -> Run {
    subcommand_of(&distributor(), args)
}

/// `program ARGS` (a subcommand: no host root needed).
pub(crate) fn subcommand_of(program: &std::path::Path, args: &[&str]) -> Run {
    FakeHost::new().agent().args(args).run_program(program)
}

/// The text listing of `run` has a line for each of `types`.
pub(crate) fn assert_lists(run: &Run, types: &[&str]) {
    let out = run.out();
    for ty in types {
        assert!(
            out.lines().any(|l| l.split_whitespace().next() == Some(ty)),
            "{ty} not listed\n{run:?}"
        );
    }
}

#[test]
fn distributor_lists_pod_drain_and_every_builtin() {
    let run = subcommand(&["interrupts", "list"]);
    run.assert_success();
    assert_lists(
        &run,
        &[
            "no_op",
            "node_restart",
            "pod_drain",
            "restart_all_services",
            "script_interrupt",
            "service_restart",
        ],
    );
    assert!(
        run.out().contains("module: custom_interrupt::pod_drain"),
        "{run:?}"
    );
}

#[test]
fn distributor_list_json_names_the_plugin_module() {
    let run = subcommand(&["interrupts", "list", "--format", "json"]);
    run.assert_success();
    let list: Value = serde_json::from_slice(&run.stdout).expect("JSON on stdout");
    let kinds = list["kinds"].as_array().expect("an array of kinds");
    let types: Vec<&str> = kinds.iter().map(|k| k["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "no_op",
            "node_restart",
            "pod_drain",
            "restart_all_services",
            "script_interrupt",
            "service_restart"
        ]
    );
    let pod_drain = &kinds[2];
    assert_eq!(pod_drain["module"], "custom_interrupt::pod_drain");
    let example: Value = serde_json::from_str(pod_drain["example"].as_str().unwrap()).unwrap();
    assert_eq!(example["type"], "pod_drain");
}

#[test]
fn pod_drain_drains_the_node_named_by_node_name() {
    require_root!();
    let host = FakeHost::with_package_dir();
    let run = drain(&host, r#"{"type":"pod_drain"}"#);
    run.assert_success();
    run.assert_stdout_contains(&format!("--------------------\n{DRAIN}\n"));
    assert_eq!(host.calls(), [DRAIN]);
    assert_eq!(host.list(INTERRUPT_FLAGS), ["pod_drain_0.complete"]);
    let logs = host.list(INTERRUPT_LOGS);
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(parse_log_name(&logs[0]).unwrap().base, "pod_drain");
}

#[test]
fn pod_drain_payload_fields_shape_the_command() {
    require_root!();
    let host = FakeHost::with_package_dir();
    drain(
        &host,
        r#"{"type":"pod_drain","node_name":"gpu-node-9","timeout_seconds":60,"ignore_daemonsets":false}"#,
    )
    .assert_success();
    assert_eq!(host.calls(), ["kubectl drain gpu-node-9 --timeout=60s"]);
}

#[test]
fn completed_pod_drain_is_skipped_on_rerun() {
    require_root!();
    let host = FakeHost::with_package_dir();
    drain(&host, r#"{"type":"pod_drain"}"#).assert_success();
    let run = drain(&host, r#"{"type":"pod_drain"}"#);
    run.assert_success();
    run.assert_stdout_contains(
        "Skipping interrupt pod_drain_0 because it was already run for abc_pkg_1.0.0\n",
    );
    assert_eq!(host.calls(), [DRAIN], "drained once");
}

#[test]
fn failing_kubectl_fails_the_interrupt_without_a_marker() {
    require_root!();
    let host = FakeHost::with_package_dir();
    host.set_fake_tool(
        "kubectl",
        "echo \"error: cannot delete Pods not managed by a controller\" >&2\nexit 1",
    );
    let run = drain(&host, r#"{"type":"pod_drain"}"#);
    run.assert_code(1);
    run.assert_stderr_line_contains(&[DRAIN, "exit code 1"]);
    assert_eq!(host.calls(), [DRAIN]);
    assert!(!host.exists(&interrupt_marker("pod_drain_0.complete")));
}

#[test]
fn distributor_still_runs_the_builtin_kinds() {
    require_root!();
    let host = FakeHost::with_package_dir();
    drain(
        &host,
        r#"{"type":"service_restart","services":["kubelet"]}"#,
    )
    .assert_success();
    assert_eq!(
        host.calls(),
        ["systemctl daemon-reload", "systemctl restart kubelet"]
    );
}

#[test]
fn distributor_names_pod_drain_among_the_known_types() {
    require_root!();
    let host = FakeHost::with_package_dir();
    let before = host.snapshot();
    let run = drain(&host, r#"{"type":"bogus"}"#);
    run.assert_code(1);
    run.assert_stderr_contains(
        r#"unknown interrupt "bogus" must be one of: no_op, node_restart, pod_drain, restart_all_services, script_interrupt, service_restart"#,
    );
    before.assert_unchanged(&host.snapshot(), "unknown type");
}

#[test]
fn distributor_encodes_pod_drain_with_its_defaults() {
    let run = subcommand(&["interrupts", "encode", r#"{"type": "pod_drain"}"#]);
    run.assert_success();
    assert_eq!(
        run.out(),
        format!(
            "{}\n",
            interrupt_data(
                r#"{"type":"pod_drain","node_name":null,"timeout_seconds":300,"ignore_daemonsets":true}"#
            )
        )
    );
}

#[test]
fn stock_agent_rejects_the_pod_drain_payload() {
    require_root!();
    let host = FakeHost::with_package_dir();
    let before = host.snapshot();
    let run = host
        .interrupt(&interrupt_data(r#"{"type":"pod_drain"}"#))
        .env("NODE_NAME", "gpu-node-7")
        .run();
    run.assert_code(1);
    let expected = format!(r#"unknown interrupt "pod_drain" must be one of: {BUILTIN_TYPES}"#);
    assert!(
        run.err_text().lines().any(|l| l.ends_with(&expected)),
        "no stderr line ends with {expected:?}\n{run:?}"
    );
    assert!(host.calls().is_empty());
    before.assert_unchanged(&host.snapshot(), "unknown kind");
}

#[test]
fn stock_agent_does_not_list_pod_drain() {
    let run = FakeHost::new().agent().args(["interrupts", "list"]).run();
    run.assert_success();
    assert!(!run.out().contains("pod_drain"), "{run:?}");
}
