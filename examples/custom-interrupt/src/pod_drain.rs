//! `pod_drain`: cordon the node and evict its pods with `kubectl drain`, as one operation.
//!
//! Like every interrupt command, kubectl runs chrooted into the host: it must be on the host's
//! PATH and find credentials there that may cordon the node and evict its pods (for example
//! `KUBECONFIG` in the package's environment, naming a file on the host).
//!
//! The flags are deliberately few. Without `--force` or `--delete-emptydir-data`, kubectl refuses
//! to delete pods no controller would recreate or to discard emptyDir data: it fails and names
//! the pods in its output instead. The core then reports
//! `kubectl drain gpu-node-7 --ignore-daemonsets --timeout=300s: exit code 1`, writes no
//! marker and exits 1, so the operator sees the stage fail and the next run drains again.
//! kubectl stops itself after `timeout_seconds`; the agent enforces it as well, stopping
//! kubectl [`KUBECTL_GRACE_SECONDS`] later (`...: timed out after Ns`), or sooner if
//! `SKYHOOK_STEP_TIMEOUT_SECONDS` is shorter. The node stays cordoned afterwards; uncordoning
//! belongs to whatever manages the node's lifecycle.

use std::time::Duration;

use agent_core::plugin::validate::{self, InvalidField};
use agent_core::{
    BoxError, Command, CompletionPolicy, InterruptContext, InterruptError, InterruptKind,
};
use serde::{Deserialize, Serialize};

/// Drain one node. Every field may be left out of the payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodDrain {
    /// The node to drain. Missing or null: the agent's `NODE_NAME`, else the host's hostname.
    #[serde(default)]
    pub node_name: Option<String>,
    /// How long kubectl waits for the evictions (`--timeout=<N>s`).
    #[serde(default = "default_timeout_seconds")]
    pub timeout_seconds: u64,
    /// Leave DaemonSet pods in place (`--ignore-daemonsets`): their controller would recreate
    /// them at once, and kubectl refuses to drain a node running any unless told to skip them.
    #[serde(default = "default_ignore_daemonsets")]
    pub ignore_daemonsets: bool,
}

const DEFAULT_TIMEOUT_SECONDS: u64 = 300;

/// The longest drain a payload may ask for: a day.
const MAX_TIMEOUT_SECONDS: u64 = 24 * 60 * 60;

/// How long after its own `--timeout` kubectl has to report it before the agent stops it.
pub const KUBECTL_GRACE_SECONDS: u64 = 30;

fn default_timeout_seconds() -> u64 {
    DEFAULT_TIMEOUT_SECONDS
}

fn default_ignore_daemonsets() -> bool {
    true
}

impl Default for PodDrain {
    fn default() -> Self {
        Self {
            node_name: None,
            timeout_seconds: DEFAULT_TIMEOUT_SECONDS,
            ignore_daemonsets: true,
        }
    }
}

impl PodDrain {
    /// `kubectl drain NODE [--ignore-daemonsets] --timeout=Ns`, stopped by the agent if it
    /// outlives its own timeout. `node` must have passed [`check_node_name`], so kubectl
    /// cannot take it for a flag.
    fn drain_command(&self, node: &str) -> Command {
        let mut drain = Command::new("kubectl").args(["drain", node]);
        if self.ignore_daemonsets {
            drain = drain.arg("--ignore-daemonsets");
        }
        drain
            .arg(format!("--timeout={}s", self.timeout_seconds))
            .timeout(Duration::from_secs(
                self.timeout_seconds + KUBECTL_GRACE_SECONDS,
            ))
    }

    /// The payload's node, else the one the host says it is.
    fn node(&self, cx: &InterruptContext) -> Result<String, InterruptError> {
        if let Some(name) = &self.node_name {
            return Ok(name.clone());
        }
        let name = cx.node_name().ok_or_else(|| {
            InterruptError::kind(
                "no node to drain: node_name is not set, NODE_NAME is unset or empty and the host's \
                 /etc/hostname is missing or empty",
            )
        })?;
        check_node_name(&name).map_err(|e| {
            InterruptError::kind(format!(
                "node name from NODE_NAME or the host's /etc/hostname: {e}"
            ))
        })?;
        Ok(name)
    }
}

/// The longest name Kubernetes accepts for a node (a DNS subdomain).
const NODE_NAME_MAX: usize = 253;

/// A valid Kubernetes node name (RFC 1123 subdomain: dot-separated parts of lowercase letters,
/// digits and `-`, each starting and ending with a letter or digit). Such a name never starts
/// with `-`, so kubectl cannot mistake it for a flag.
fn check_node_name(name: &str) -> Result<(), String> {
    let valid_part = |part: &str| {
        part.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && part.starts_with(|c: char| c.is_ascii_alphanumeric())
            && part.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if name.starts_with('-') {
        return Err(format!("{name:?} must not start with '-'"));
    }
    if !name.split('.').all(valid_part) {
        return Err(format!(
            "{name:?} is not a valid Kubernetes node name (lowercase letters, digits, '-' and '.', \
             each dot-separated part starting and ending with a letter or digit)"
        ));
    }
    if name.len() > NODE_NAME_MAX {
        return Err(format!(
            "is {} characters long, over the limit of {NODE_NAME_MAX}",
            name.len()
        ));
    }
    Ok(())
}

#[agent_core::interrupt(
    type = "pod_drain",
    summary = "cordon the node and evict its pods (kubectl drain); node defaults to NODE_NAME",
    example = r#"{"type":"pod_drain","node_name":"gpu-node-7","timeout_seconds":300,"ignore_daemonsets":true}"#
)]
impl InterruptKind for PodDrain {
    fn validate(&self) -> Result<(), BoxError> {
        if let Some(name) = &self.node_name {
            check_node_name(name).map_err(|e| InvalidField::new("node_name", e))?;
        }
        validate::in_range(
            "timeout_seconds",
            self.timeout_seconds,
            1..=MAX_TIMEOUT_SECONDS,
        )?;
        Ok(())
    }

    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        let node = self.node(cx)?;
        cx.operation(0, CompletionPolicy::OnSuccess, self.drain_command(&node))
            .await
    }
}

#[cfg(test)]
mod tests {
    use agent_core::Interrupt;
    use agent_core::testing::{
        Conformance, InterruptOutcome, OperationRecord, Termination, TestHost, assert_kind,
    };

    use super::*;

    #[test]
    fn conforms() {
        assert_kind::<PodDrain>();
        // Without a node_name in the payload, the node comes from the environment.
        Conformance::new()
            .env("NODE_NAME", "gpu-node-7")
            .check::<PodDrain>();
    }

    fn decode(json: &str) -> Result<Box<dyn Interrupt>, String> {
        <dyn Interrupt>::from_json_bytes(json.as_bytes())
            .map(|d| {
                assert!(d.unknown_fields.is_empty(), "{:?}", d.unknown_fields);
                d.interrupt
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn round_trips_the_canonical_payload_with_defaults_filled_in() {
        for json in [
            r#"{"type":"pod_drain"}"#,
            r#"{"type": "pod_drain", "node_name": null}"#,
        ] {
            assert_eq!(
                decode(json).unwrap().to_json(),
                r#"{"type":"pod_drain","node_name":null,"timeout_seconds":300,"ignore_daemonsets":true}"#
            );
        }
        let full = r#"{"type":"pod_drain","node_name":"gpu-node-7","timeout_seconds":60,"ignore_daemonsets":false}"#;
        assert_eq!(decode(full).unwrap().to_json(), full);
    }

    #[test]
    fn the_listed_example_is_canonical() {
        assert_eq!(
            decode(PodDrain::EXAMPLE).unwrap().to_json(),
            PodDrain::EXAMPLE
        );
    }

    #[test]
    fn builds_kubectl_drain_with_the_node_then_the_flags() {
        let drain = PodDrain::default();
        let command = drain.drain_command("gpu-node-7");
        assert_eq!(command.program, "kubectl");
        assert_eq!(
            command.args,
            [
                "drain",
                "gpu-node-7",
                "--ignore-daemonsets",
                "--timeout=300s"
            ]
        );
        // The agent enforces kubectl's timeout too, a grace period later.
        assert_eq!(command.timeout, Some(Duration::from_secs(330)));

        let keep_daemonsets = PodDrain {
            timeout_seconds: 45,
            ignore_daemonsets: false,
            ..PodDrain::default()
        };
        assert_eq!(
            keep_daemonsets.drain_command("gpu-node-7").to_string(),
            "kubectl drain gpu-node-7 --timeout=45s"
        );
    }

    #[test]
    fn rejects_node_names_that_are_flags_or_not_kubernetes_names() {
        let invalid = |name: &str| {
            format!(
                "node_name: {name:?} is not a valid Kubernetes node name (lowercase letters, digits, '-' and '.', \
                 each dot-separated part starting and ending with a letter or digit)"
            )
        };
        let too_long = "a".repeat(254);
        for (name, expected) in [
            (
                "--all",
                r#"node_name: "--all" must not start with '-'"#.to_owned(),
            ),
            (
                "-gpu-node-7",
                r#"node_name: "-gpu-node-7" must not start with '-'"#.to_owned(),
            ),
            ("GPU-Node-7", invalid("GPU-Node-7")),
            ("gpu node", invalid("gpu node")),
            ("gpu-node-", invalid("gpu-node-")),
            ("gpu..node", invalid("gpu..node")),
            ("gpu.-node", invalid("gpu.-node")),
            (
                too_long.as_str(),
                "node_name: is 254 characters long, over the limit of 253".to_owned(),
            ),
            ("", "node_name: must not be empty".to_owned()),
        ] {
            let drain = PodDrain {
                node_name: Some(name.to_owned()),
                ..PodDrain::default()
            };
            assert_eq!(
                drain.validate().unwrap_err().to_string(),
                expected,
                "{name}"
            );
        }
        for ok in [
            "gpu-node-7",
            "ip-10-0-3-17.ec2.internal",
            "0",
            &"a".repeat(253),
        ] {
            assert!(check_node_name(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_a_zero_or_overlong_timeout() {
        for (timeout_seconds, expected) in [
            (0, "timeout_seconds: must be between 1 and 86400, not 0"),
            (
                86401,
                "timeout_seconds: must be between 1 and 86400, not 86401",
            ),
        ] {
            let drain = PodDrain {
                timeout_seconds,
                ..PodDrain::default()
            };
            assert_eq!(drain.validate().unwrap_err().to_string(), expected);
        }
    }

    #[test]
    fn the_decoder_reports_validation_errors_with_the_kind() {
        assert_eq!(
            decode(r#"{"type":"pod_drain","node_name":"--all"}"#).unwrap_err(),
            r#"invalid pod_drain interrupt: node_name: "--all" must not start with '-'"#
        );
    }

    fn ran(command: &str, code: i32) -> OperationRecord {
        OperationRecord::Ran {
            command: command.into(),
            termination: Termination::Exited(code),
        }
    }

    #[tokio::test]
    async fn drains_the_node_named_by_node_name_env_and_marks_it_done() {
        let host = TestHost::temp().env("NODE_NAME", "gpu-node-7");
        let (result, records) = host.run(r#"{"type":"pod_drain"}"#).await;
        assert_eq!(result.unwrap(), InterruptOutcome::Completed);
        assert_eq!(
            records,
            [ran(
                "kubectl drain gpu-node-7 --ignore-daemonsets --timeout=300s",
                0
            )]
        );
        assert!(host.marker("pod_drain_0.complete").is_some());

        let (result, records) = host.run(r#"{"type":"pod_drain"}"#).await;
        assert_eq!(result.unwrap(), InterruptOutcome::Completed);
        assert_eq!(
            records,
            [OperationRecord::Skipped {
                marker: "pod_drain_0.complete".into()
            }]
        );
        assert_eq!(host.commands().len(), 1, "drained once");
    }

    #[tokio::test]
    async fn falls_back_to_the_host_hostname() {
        let host = TestHost::temp();
        std::fs::create_dir(host.root().join("etc")).unwrap();
        std::fs::write(host.root().join("etc/hostname"), "gpu-node-9\n").unwrap();
        let (result, _) = host.run_kind(&PodDrain::default()).await;
        result.unwrap();
        assert_eq!(
            host.commands(),
            ["kubectl drain gpu-node-9 --ignore-daemonsets --timeout=300s"]
        );
    }

    #[tokio::test]
    async fn fails_without_running_anything_when_no_node_name_can_be_found() {
        let host = TestHost::temp().env("NODE_NAME", " ");
        let (result, records) = host.run_kind(&PodDrain::default()).await;
        assert_eq!(
            result.unwrap_err().to_string(),
            "no node to drain: node_name is not set, NODE_NAME is unset or empty and the host's /etc/hostname \
             is missing or empty"
        );
        assert!(records.is_empty());
    }

    #[tokio::test]
    async fn refuses_an_invalid_node_name_from_the_host() {
        let host = TestHost::temp().env("NODE_NAME", "--all");
        let (result, records) = host.run_kind(&PodDrain::default()).await;
        assert_eq!(
            result.unwrap_err().to_string(),
            r#"node name from NODE_NAME or the host's /etc/hostname: "--all" must not start with '-'"#
        );
        assert!(records.is_empty());
    }

    #[tokio::test]
    async fn a_kubectl_failure_names_the_command_and_its_exit_code_and_leaves_no_marker() {
        let host = TestHost::temp();
        host.answer([Termination::Exited(1)]);
        let drain = PodDrain {
            node_name: Some("gpu-node-7".into()),
            ..PodDrain::default()
        };
        let (result, _) = host.run_kind(&drain).await;
        assert_eq!(
            result.unwrap_err().to_string(),
            "kubectl drain gpu-node-7 --ignore-daemonsets --timeout=300s: exit code 1"
        );
        assert!(host.marker("pod_drain_0.complete").is_none());
    }
}
