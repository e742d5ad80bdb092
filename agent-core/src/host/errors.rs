//! One-line rendering of an error with its causes, for log fields; and the one way a host
//! state error gets its context.
//!
//! Errors keep their OS cause in `#[source]` (SPEC §5: every message about a file carries it),
//! and `Display` of the outer error alone would drop it: `writing /var/…/apply.json` without
//! `No space left on device`. Warnings format errors with [`Chain`].

use std::error::Error;
use std::fmt;

use crate::host::fs::HostFsError;

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

/// A host state error with what was being done when it happened (`writing
/// /var/lib/skyhook/.../START`): the state variant of the stage, plan and interrupt errors.
#[derive(Debug, thiserror::Error)]
#[error("{context}")]
pub struct StateFailure {
    pub context: String,
    #[source]
    pub source: HostFsError,
}

/// `map_err(state_err("writing START"))?`: the host state error, with its context.
pub(crate) fn state_err(context: impl Into<String>) -> impl FnOnce(HostFsError) -> StateFailure {
    let context = context.into();
    move |source| StateFailure { context, source }
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
