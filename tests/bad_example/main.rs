//! The registry's self-check: a kind whose listed example does not decode back to itself is
//! named with its module; it does not stop the binary (SPEC §9.5), only its payloads are
//! refused.
//!
//! A test target of its own: the broken declaration below would show in every other test
//! binary's listing.

#![forbid(unsafe_code)]

use std::process::ExitCode;

/// A third-party kind whose example has the wrong type for a field.
mod broken {
    use agent_core::{InterruptContext, InterruptError, InterruptKind};

    #[derive(Debug, serde::Serialize, serde::Deserialize)]
    pub struct RetryRestart {
        pub attempts: u32,
    }

    #[agent_core::interrupt(
        type = "retry_restart",
        summary = "restart, retrying",
        example = r#"{"type":"retry_restart","attempts":"three"}"#
    )]
    impl InterruptKind for RetryRestart {
        async fn run(&self, _cx: &InterruptContext) -> Result<(), InterruptError> {
            Ok(())
        }
    }
}

const MESSAGE: &str = r#"interrupt kind "retry_restart" (module bad_example::broken): its example {"type":"retry_restart","attempts":"three"} does not decode: serialized interrupt must be base64-encoded JSON with a "type" field: field "attempts": expected an unsigned integer, found the string "three""#;

#[test]
fn the_self_check_names_the_kind_and_its_module() {
    let err = agent_core::plugin::codec::check().expect_err("the broken example must be reported");
    assert_eq!(err.to_string(), MESSAGE);
}

#[test]
fn the_binary_starts_and_its_listing_names_the_broken_kind() {
    let code = agent_cli::main(vec!["--version".into()]);
    assert_eq!(format!("{code:?}"), format!("{:?}", ExitCode::SUCCESS));
    let code = agent_cli::main(vec!["interrupts".into(), "list".into()]);
    assert_eq!(format!("{code:?}"), format!("{:?}", ExitCode::from(1)));
}

#[test]
fn payloads_of_the_broken_kind_are_refused_naming_it() {
    let err =
        <dyn agent_core::Interrupt>::from_json_bytes(br#"{"type":"retry_restart","attempts":3}"#)
            .unwrap_err();
    assert_eq!(
        err.to_string(),
        MESSAGE.replace(
            "(module bad_example::broken): its example",
            "(module bad_example::broken) is broken, so its payloads are refused: its example"
        )
    );
}
