//! `node_restart`: reboot the host, complete once its boot ID has changed (SPEC §9.1, §9.4).

use agent_core::{Command, CompletionPolicy, InterruptContext, InterruptError, InterruptKind};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRestart {}

#[agent_core::interrupt(
    type = "node_restart",
    summary = "reboot the node; complete once the host's boot ID has changed"
)]
impl InterruptKind for NodeRestart {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        // Being killed by the reboot we asked for is success; the core confirms it by boot ID.
        cx.operation(0, CompletionPolicy::AfterReboot, Command::new("reboot"))
            .await
    }
}

#[cfg(test)]
mod tests {
    use agent_core::Interrupt;
    use agent_core::testing::InterruptOutcome;
    use agent_core::testing::Termination;
    use agent_core::testing::{TestHost, assert_kind};

    use super::NodeRestart;

    #[test]
    fn conforms() {
        assert_kind::<NodeRestart>();
    }

    #[test]
    fn round_trips_the_operator_payload() {
        for json in [r#"{"type":"node_restart"}"#, r#"{"type": "node_restart"}"#] {
            let decoded = <dyn Interrupt>::from_json_bytes(json.as_bytes()).unwrap();
            assert_eq!(decoded.interrupt.to_json(), r#"{"type":"node_restart"}"#);
            assert!(decoded.unknown_fields.is_empty());
        }
    }

    #[tokio::test]
    async fn completes_once_the_boot_id_changed() {
        let host = TestHost::temp();
        host.answer([Termination::Signalled(SIGTERM)]);
        let (result, _) = host.run_kind(&NodeRestart {}).await;
        assert_eq!(result.unwrap(), InterruptOutcome::ShutdownInProgress);
        assert_eq!(
            host.markers(),
            ["node_restart_0.attempts", "node_restart_0.pending"]
        );
        host.set_boot_id("boot-2");
        let (result, _) = host.run_kind(&NodeRestart {}).await;
        assert_eq!(result.unwrap(), InterruptOutcome::Completed);
        assert_eq!(host.markers(), ["node_restart_0.complete"]);
        assert_eq!(host.commands(), ["reboot"]);
    }

    /// SIGTERM, 15 on every Linux architecture.
    const SIGTERM: i32 = 15;
}
