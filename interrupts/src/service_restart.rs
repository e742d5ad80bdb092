//! `service_restart`: `systemctl daemon-reload`, then `systemctl restart S` per service
//! (SPEC §9.1).

use agent_core::{
    BoxError, Command, CompletionPolicy, InterruptContext, InterruptError, InterruptKind, validate,
};
use serde::{Deserialize, Deserializer, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceRestart {
    /// Missing, null or empty: daemon-reload only. Always serialized as an array.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub services: Vec<String>,
}

fn null_as_empty<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

#[agent_core::interrupt(
    type = "service_restart",
    summary = "systemctl daemon-reload, then systemctl restart each listed service",
    example = r#"{"type":"service_restart","services":["containerd","kubelet"]}"#
)]
impl InterruptKind for ServiceRestart {
    fn validate(&self) -> Result<(), BoxError> {
        for s in &self.services {
            validate::systemd_unit_name("services", s)?;
        }
        Ok(())
    }

    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        let reload = Command::new("systemctl").arg("daemon-reload");
        cx.operation(0, CompletionPolicy::OnSuccess, reload).await?;
        for (i, service) in self.services.iter().enumerate() {
            let restart = Command::new("systemctl").args(["restart", service.as_str()]);
            cx.operation(i + 1, CompletionPolicy::OnSuccess, restart)
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use agent_core::Interrupt;
    use agent_core::testing::OperationRecord;
    use agent_core::testing::{TestHost, assert_kind};

    use super::*;

    #[test]
    fn conforms() {
        assert_kind::<ServiceRestart>();
    }

    #[test]
    fn round_trips_the_operator_payload() {
        for json in [
            r#"{"type":"service_restart","services":["containerd","kubelet"]}"#,
            r#"{"type": "service_restart", "services": ["containerd", "kubelet"]}"#,
        ] {
            let decoded = <dyn Interrupt>::from_json_bytes(json.as_bytes()).unwrap();
            assert_eq!(
                decoded.interrupt.to_json(),
                r#"{"type":"service_restart","services":["containerd","kubelet"]}"#
            );
        }
    }

    #[test]
    fn missing_or_null_services_serialize_as_an_empty_array() {
        for json in [
            r#"{"type":"service_restart"}"#,
            r#"{"type":"service_restart","services":null}"#,
        ] {
            let decoded = <dyn Interrupt>::from_json_bytes(json.as_bytes()).unwrap();
            assert_eq!(
                decoded.interrupt.to_json(),
                r#"{"type":"service_restart","services":[]}"#
            );
        }
    }

    #[test]
    fn rejects_option_injection_when_decoding() {
        let err =
            <dyn Interrupt>::from_json_bytes(br#"{"type":"service_restart","services":["-H"]}"#)
                .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"invalid service_restart interrupt: services: "-H" must not start with '-'"#
        );
    }

    #[tokio::test]
    async fn the_core_validates_a_kind_built_in_code_before_running_it() {
        let host = TestHost::temp();
        let kind = ServiceRestart {
            services: vec!["kubelet".into(), "--now".into()],
        };
        let (result, records) = host.run_kind(&kind).await;
        assert_eq!(
            result.unwrap_err().to_string(),
            r#"invalid service_restart interrupt: services: "--now" must not start with '-'"#
        );
        assert!(records.is_empty());
        assert!(host.commands().is_empty());
        assert!(host.markers().is_empty());
    }

    #[tokio::test]
    async fn resumes_at_the_service_that_failed() {
        let host = TestHost::temp();
        let payload = r#"{"type":"service_restart","services":["containerd","kubelet"]}"#;
        host.answer([
            agent_core::testing::Termination::Exited(0),
            agent_core::testing::Termination::Exited(0),
            agent_core::testing::Termination::Exited(3),
        ]);
        let (result, _) = host.run(payload).await;
        assert_eq!(
            result.unwrap_err().to_string(),
            "systemctl restart kubelet: exit code 3"
        );
        let (result, records) = host.run(payload).await;
        result.unwrap();
        assert!(
            matches!(
                &records[..],
                [
                    OperationRecord::Skipped { .. },
                    OperationRecord::Skipped { .. },
                    OperationRecord::Ran { .. },
                ]
            ),
            "{records:?}"
        );
        assert_eq!(
            host.commands(),
            [
                "systemctl daemon-reload",
                "systemctl restart containerd",
                "systemctl restart kubelet",
                "systemctl restart kubelet",
            ]
        );
    }

    #[test]
    fn wrong_field_types_are_decoding_errors() {
        let err =
            <dyn Interrupt>::from_json_bytes(br#"{"type":"service_restart","services":"kubelet"}"#)
                .unwrap_err();
        assert!(
            err.to_string().starts_with(
                r#"serialized interrupt must be base64-encoded JSON with a "type" field: "#
            ),
            "{err}"
        );
    }
}
