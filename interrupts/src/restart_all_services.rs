//! `restart_all_services`: `service procps force-reload` (SPEC §9.1, as upstream).

use agent_core::{Command, CompletionPolicy, InterruptContext, InterruptError, InterruptKind};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartAllServices {}

#[agent_core::interrupt(
    type = "restart_all_services",
    summary = "service procps force-reload (reapply sysctl settings)"
)]
impl InterruptKind for RestartAllServices {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        let reload = Command::new("service").args(["procps", "force-reload"]);
        cx.operation(0, CompletionPolicy::OnSuccess, reload).await
    }
}

#[cfg(test)]
mod tests {
    use agent_core::Interrupt;
    use agent_core::testing::assert_kind;

    use super::RestartAllServices;

    #[test]
    fn conforms() {
        assert_kind::<RestartAllServices>();
    }

    #[test]
    fn round_trips_the_operator_payload() {
        for json in [
            r#"{"type":"restart_all_services"}"#,
            r#"{"type": "restart_all_services"}"#,
        ] {
            let decoded = <dyn Interrupt>::from_json_bytes(json.as_bytes()).unwrap();
            assert_eq!(
                decoded.interrupt.to_json(),
                r#"{"type":"restart_all_services"}"#
            );
        }
    }
}
