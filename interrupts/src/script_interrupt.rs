//! `script_interrupt`: runs nothing and writes nothing; the package's apply script already
//! did the work (SPEC §9.1, as upstream).

use agent_core::{InterruptContext, InterruptError, InterruptKind};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptInterrupt {}

#[agent_core::interrupt(
    type = "script_interrupt",
    summary = "run nothing; the package's own scripts handle the interrupt"
)]
impl InterruptKind for ScriptInterrupt {
    async fn run(&self, _cx: &InterruptContext) -> Result<(), InterruptError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use agent_core::Interrupt;
    use agent_core::testing::Conformance;

    use super::ScriptInterrupt;

    #[test]
    fn conforms() {
        // The package's own scripts do the work: no operation, no marker, on purpose.
        Conformance::new().runs_nothing().check::<ScriptInterrupt>();
    }

    #[test]
    fn round_trips_the_operator_payload() {
        let decoded = <dyn Interrupt>::from_json_bytes(br#"{"type": "script_interrupt"}"#).unwrap();
        assert_eq!(
            decoded.interrupt.to_json(),
            r#"{"type":"script_interrupt"}"#
        );
    }
}
