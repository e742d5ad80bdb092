//! `no_op`: runs nothing; records `no_op.complete` as the upstream agents do (SPEC §9.1).

use agent_core::{InterruptContext, InterruptError, InterruptKind};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoOp {}

#[agent_core::interrupt(
    type = "no_op",
    summary = "run nothing; record that the interrupt was handled"
)]
impl InterruptKind for NoOp {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        cx.mark_done()
    }
}

#[cfg(test)]
mod tests {
    use agent_core::Interrupt;
    use agent_core::testing::{TestHost, assert_kind};

    use super::NoOp;

    #[test]
    fn conforms() {
        assert_kind::<NoOp>();
    }

    #[test]
    fn round_trips_the_operator_payload() {
        for json in [r#"{"type":"no_op"}"#, r#"{"type": "no_op"}"#] {
            let decoded = <dyn Interrupt>::from_json_bytes(json.as_bytes()).unwrap();
            assert_eq!(decoded.interrupt.to_json(), r#"{"type":"no_op"}"#);
        }
    }

    #[test]
    fn unknown_fields_are_reported_not_fatal() {
        let decoded =
            <dyn Interrupt>::from_json_bytes(br#"{"type":"no_op","extra":1,"more":[]}"#).unwrap();
        assert_eq!(decoded.unknown_fields, ["extra", "more"]);
    }

    #[tokio::test]
    async fn writes_the_unindexed_marker_and_runs_nothing() {
        let host = TestHost::temp();
        let (result, _) = host.run(r#"{"type":"no_op"}"#).await;
        result.unwrap();
        assert_eq!(host.markers(), ["no_op.complete"]);
        assert!(host.commands().is_empty());
    }
}
