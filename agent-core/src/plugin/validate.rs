//! Checks that interrupt kinds share, for their [`InterruptKind::validate`](crate::InterruptKind::validate).
//! Each names the payload field it checks, so its message reads
//! `invalid <type> interrupt: <field>: <problem>`.
//!
//! ```
//! use agent_core::plugin::validate;
//! assert!(validate::systemd_unit_name("services", "containerd.service").is_ok());
//! assert_eq!(
//!     validate::systemd_unit_name("services", "-H").unwrap_err().to_string(),
//!     r#"services: "-H" must not start with '-'"#
//! );
//! assert_eq!(
//!     validate::in_range("timeout_seconds", 0, 1..=3600).unwrap_err().to_string(),
//!     "timeout_seconds: must be between 1 and 3600, not 0"
//! );
//! ```

use std::fmt;
use std::ops::RangeInclusive;

/// A payload field that failed a check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct InvalidField {
    pub field: String,
    pub problem: String,
}

impl InvalidField {
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// The longest unit name systemd accepts.
pub(crate) const UNIT_NAME_MAX: usize = 255;

/// A valid systemd unit name that cannot be mistaken for an option (SPEC §9.1): not empty,
/// not starting with `-`, `.` or `@`, at most 255 of `[A-Za-z0-9:_.\@-]`.
pub fn systemd_unit_name(field: &str, name: &str) -> Result<(), InvalidField> {
    let valid_char =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, ':' | '-' | '_' | '.' | '\\' | '@');
    let problem = if name.is_empty() {
        "a service name is empty".to_owned()
    } else if name.starts_with('-') {
        format!("{name:?} must not start with '-'")
    } else if name.starts_with('.')
        || name.starts_with('@')
        || name.len() > UNIT_NAME_MAX
        || !name.chars().all(valid_char)
    {
        format!("{name:?} is not a valid systemd unit name")
    } else {
        return Ok(());
    };
    Err(InvalidField::new(field, problem))
}

/// `value` lies within `range` (both ends included).
pub fn in_range<T: PartialOrd + fmt::Display + Copy>(
    field: &str,
    value: T,
    range: RangeInclusive<T>,
) -> Result<(), InvalidField> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err(InvalidField::new(
            field,
            format!(
                "must be between {} and {}, not {value}",
                range.start(),
                range.end()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_names_refuse_options_and_invalid_characters() {
        for (name, expected) in [
            ("-H", r#"services: "-H" must not start with '-'"#),
            ("--now", r#"services: "--now" must not start with '-'"#),
            ("a b", r#"services: "a b" is not a valid systemd unit name"#),
            (
                "x;reboot",
                r#"services: "x;reboot" is not a valid systemd unit name"#,
            ),
            (
                ".hidden",
                r#"services: ".hidden" is not a valid systemd unit name"#,
            ),
            ("", "services: a service name is empty"),
        ] {
            assert_eq!(
                systemd_unit_name("services", name).unwrap_err().to_string(),
                expected,
                "{name}"
            );
        }
        let too_long = "a".repeat(UNIT_NAME_MAX + 1);
        assert!(systemd_unit_name("services", &too_long).is_err());
        for ok in [
            "kubelet",
            "containerd.service",
            "getty@tty1.service",
            "nvidia-persistenced",
            "dev-sda1.device",
            &"a".repeat(UNIT_NAME_MAX),
        ] {
            assert!(systemd_unit_name("services", ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn ranges_include_both_ends() {
        assert!(in_range("n", 1, 1..=3).is_ok());
        assert!(in_range("n", 3, 1..=3).is_ok());
        assert_eq!(
            in_range("n", 4, 1..=3).unwrap_err().to_string(),
            "n: must be between 1 and 3, not 4"
        );
    }
}
