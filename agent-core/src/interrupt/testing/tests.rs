use serde::{Deserialize, Serialize};

use super::*;
use crate::{Command, InterruptContext};

/// Two operations, as a kind should.
#[derive(Debug, Serialize, Deserialize)]
struct TwoSteps {
    unit: String,
}

#[crate::interrupt(
    type = "two_steps",
    summary = "stop, then start",
    example = r#"{"type":"two_steps","unit":"kubelet"}"#
)]
impl InterruptKind for TwoSteps {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        let stop = Command::new("systemctl").args(["stop", &self.unit]);
        cx.operation(0, CompletionPolicy::OnSuccess, stop).await?;
        let start = Command::new("systemctl").args(["start", &self.unit]);
        cx.operation(1, CompletionPolicy::OnSuccess, start).await
    }
}

/// Ignores the failure of its command.
#[derive(Debug, Serialize, Deserialize)]
struct SwallowsFailure {}

#[crate::interrupt(type = "swallows_failure", summary = "ignores a failed command")]
impl InterruptKind for SwallowsFailure {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        let _ = cx
            .operation(0, CompletionPolicy::OnSuccess, Command::new("false"))
            .await;
        Ok(())
    }
}

/// A field that never reaches the wire.
#[derive(Debug, Serialize, Deserialize)]
struct Unserialized {
    #[serde(skip_serializing)]
    node: String,
}

#[crate::interrupt(
    type = "unserialized",
    summary = "loses its field on the wire",
    example = r#"{"type":"unserialized","node":"n1"}"#
)]
impl InterruptKind for Unserialized {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        let drain = Command::new("kubectl").args(["drain", &self.node]);
        cx.operation(0, CompletionPolicy::OnSuccess, drain).await
    }
}

/// Two commands under one index: the second is skipped as complete on the first run.
#[derive(Debug, Serialize, Deserialize)]
struct OneIndexTwice {}

#[crate::interrupt(type = "one_index_twice", summary = "reuses operation 0")]
impl InterruptKind for OneIndexTwice {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        cx.operation(0, CompletionPolicy::OnSuccess, Command::new("a"))
            .await?;
        cx.operation(0, CompletionPolicy::OnSuccess, Command::new("b"))
            .await
    }
}

#[test]
fn a_conforming_kind_passes() {
    assert_kind::<TwoSteps>();
}

#[test]
#[should_panic(
    expected = "assert_kind::<agent_core::interrupt::testing::tests::SwallowsFailure> (type \"swallows_failure\"): the kind returned Ok after \"false\" (swallows_failure_0) exited 1"
)]
fn a_kind_that_swallows_a_failure_fails_the_check() {
    assert_kind::<SwallowsFailure>();
}

#[test]
#[should_panic(
    expected = r#"its example {"type":"unserialized","node":"n1"} serializes back as {"type":"unserialized"}"#
)]
fn an_example_that_does_not_survive_the_wire_fails_the_check() {
    assert_kind::<Unserialized>();
}

#[test]
#[should_panic(
    expected = "the dry run of the example failed: operation 0 (one_index_twice_0) was already run in this run"
)]
fn operations_sharing_an_index_fail_the_check() {
    assert_kind::<OneIndexTwice>();
}

#[test]
fn the_registry_self_check_names_the_kind_and_its_module() {
    let d = registry::find("unserialized").unwrap();
    assert_eq!(
        codec::check_example(d).unwrap_err().to_string(),
        r#"interrupt kind "unserialized" (module agent_core::interrupt::testing::tests): its example {"type":"unserialized","node":"n1"} serializes back as {"type":"unserialized"}: make the example the kind's canonical form"#
    );
    assert!(codec::check_example(registry::find("two_steps").unwrap()).is_ok());
}

#[tokio::test]
async fn test_host_runs_what_the_operator_bytes_become() {
    let host = TestHost::temp();
    let kind = Unserialized { node: "n1".into() };
    let (result, records) = host.run_kind(&kind).await;
    assert_eq!(
        result.unwrap_err().to_string(),
        r#"interrupt kind "unserialized" (module agent_core::interrupt::testing::tests) is broken, so its payloads are refused: its example {"type":"unserialized","node":"n1"} serializes back as {"type":"unserialized"}: make the example the kind's canonical form"#
    );
    assert!(records.is_empty());
    assert!(host.commands().is_empty(), "nothing ran");
    assert!(host.markers().is_empty());

    let (result, _) = host
        .run(r#"{"type":"two_steps","unit":"kubelet","extra":1}"#)
        .await;
    result.unwrap();
    assert_eq!(
        host.commands(),
        ["systemctl stop kubelet", "systemctl start kubelet"]
    );
    assert_eq!(
        host.markers(),
        ["two_steps_0.complete", "two_steps_1.complete"]
    );
}

/// Where [`SpawnsItself`] would leave its trace, had its command run.
fn spawn_probe() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("agent-core-spawn-probe-{}", std::process::id()))
}

/// Runs a command itself, beside the context, and ignores what became of it.
#[derive(Debug, Serialize, Deserialize)]
struct SpawnsItself {}

#[crate::interrupt(
    type = "spawns_itself",
    summary = "runs touch with std::process::Command"
)]
impl InterruptKind for SpawnsItself {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        let _ = std::process::Command::new("touch")
            .arg(spawn_probe())
            .status();
        cx.operation(0, CompletionPolicy::OnSuccess, Command::new("true"))
            .await
    }
}

#[tokio::test]
async fn a_kind_that_starts_a_process_itself_fails_and_the_process_never_runs() {
    let host = TestHost::temp();
    let (result, _) = host.run(r#"{"type":"spawns_itself"}"#).await;
    let err = result.unwrap_err().to_string();
    assert!(
        err.starts_with("the kind started a process itself (clone"),
        "{err}"
    );
    assert!(!spawn_probe().exists(), "touch ran");
    let err = host.plan(r#"{"type":"spawns_itself"}"#).await.unwrap_err();
    assert!(
        err.to_string().contains("started a process itself"),
        "{err}"
    );
    assert!(!spawn_probe().exists(), "touch ran");
}

#[test]
#[should_panic(expected = "the dry run of the example failed: the kind started a process itself")]
fn a_kind_that_starts_a_process_itself_fails_the_check() {
    assert_kind::<SpawnsItself>();
}

/// Forgets to await its operation: nothing ever runs.
#[derive(Debug, Serialize, Deserialize)]
struct NeverAwaits {}

#[crate::interrupt(type = "never_awaits", summary = "builds its operation and drops it")]
impl InterruptKind for NeverAwaits {
    #[allow(clippy::let_underscore_future, reason = "the mistake under test")]
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        let _ = cx.operation(0, CompletionPolicy::OnSuccess, Command::new("true"));
        Ok(())
    }
}

#[test]
#[should_panic(expected = "the example ran no operation and marked nothing done")]
fn a_kind_that_never_runs_an_operation_fails_the_check() {
    assert_kind::<NeverAwaits>();
}

/// Carries on after its first command fails (its last one it passes on).
#[derive(Debug, Serialize, Deserialize)]
struct SwallowsTheFirst {}

#[crate::interrupt(
    type = "swallows_the_first",
    summary = "ignores a failed first command"
)]
impl InterruptKind for SwallowsTheFirst {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        let _ = cx
            .operation(0, CompletionPolicy::OnSuccess, Command::new("first"))
            .await;
        cx.operation(1, CompletionPolicy::OnSuccess, Command::new("second"))
            .await
    }
}

#[test]
#[should_panic(expected = "the kind returned Ok after \"first\" (swallows_the_first_0) exited 1")]
fn a_failure_is_checked_at_every_index_not_only_the_last() {
    assert_kind::<SwallowsTheFirst>();
}
