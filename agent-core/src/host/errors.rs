//! One-line rendering of an error with its causes, for log fields.
//!
//! Errors keep their OS cause in `#[source]` (SPEC §5: every message about a file carries it),
//! and `Display` of the outer error alone would drop it: `writing /var/…/apply.json` without
//! `No space left on device`. Warnings format errors with [`Chain`].

use std::error::Error;
use std::fmt;

/// `outer: cause: root cause`, like anyhow's `{:#}`.
#[derive(Debug, Clone, Copy)]
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_every_cause_on_one_line() {
        let e = crate::host::fs::HostFsError::Io {
            op: "writing",
            path: "/state/results/pkg/1.0.0/apply.json".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        };
        assert_eq!(
            Chain(&e).to_string(),
            "writing /state/results/pkg/1.0.0/apply.json: No space left on device (os error 28)"
        );
    }
}
