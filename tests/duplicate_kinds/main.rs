//! SPEC §9.5: two interrupt kinds registered under one wire name are detected at startup, with
//! an error naming both modules, and the binary refuses to run; decoding that name says the
//! same instead of a serde error.
//!
//! A test target of its own: the clashing declaration below would break every other test
//! linked into the same binary.

#![forbid(unsafe_code)]

use std::process::ExitCode;

// The built-in kinds, among them `interrupts::no_op`.
#[allow(unused_imports)]
use interrupts as _;

/// A third-party crate that claims the built-in `no_op` wire name.
mod clashing {
    use agent_core::{InterruptContext, InterruptError, InterruptKind};

    #[derive(Debug, serde::Serialize, serde::Deserialize)]
    pub struct ImpostorNoOp {}

    #[agent_core::interrupt(
        type = "no_op",
        summary = "a second kind under the built-in no_op name"
    )]
    impl InterruptKind for ImpostorNoOp {
        async fn run(&self, _cx: &InterruptContext) -> Result<(), InterruptError> {
            Ok(())
        }
    }
}

const MESSAGE: &str = r#"interrupt type "no_op" is registered twice: by duplicate_kinds::clashing and by interrupts::no_op"#;

#[test]
fn check_unique_names_both_modules_of_a_duplicate_type() {
    let err = agent_core::plugin::registry::check_unique()
        .expect_err("two kinds named no_op must be reported");
    assert_eq!(err.type_name, "no_op");
    assert_eq!(err.to_string(), MESSAGE);
    assert_eq!(
        agent_core::plugin::codec::check().unwrap_err().to_string(),
        MESSAGE
    );
}

#[test]
fn decoding_a_duplicate_type_names_both_modules() {
    let err = <dyn agent_core::Interrupt>::from_json_bytes(br#"{"type":"no_op"}"#).unwrap_err();
    assert_eq!(err.to_string(), MESSAGE);
}

#[test]
fn the_binary_refuses_to_start_with_a_duplicate_type() {
    let code = agent_cli::main(vec!["interrupts".into(), "list".into()]);
    assert_eq!(format!("{code:?}"), format!("{:?}", ExitCode::from(1)));
}
