//! What the agent prints: text on stdout and stderr that never panics (SPEC §10: a closed
//! stream must not stop the agent), and a subcommand's result as one JSON document (SPEC
//! §1.5), also when it fails.

use std::process::ExitCode;

use agent_core::exec::Output;
use serde::Serialize;

use crate::cli::{self, Format};
use crate::version::{GIT_SHA, version};

/// The version of every JSON document's schema (docs/schemas/). Raised when a field is
/// removed or renamed, or changes its type or meaning; a field may be added within a version.
pub const SCHEMA_VERSION: u32 = 1;

pub fn print(text: &str) {
    Output::process().print(text);
}

pub fn eprint(text: &str) {
    Output::process().eprint(text);
}

/// `agent --version` (SPEC §1.3): the version alone on stdout, which scripts read; the commit
/// on stderr, for the person reading both.
pub fn print_version() -> ExitCode {
    print(&format!("{}\n", version()));
    eprint(&format!("commit {GIT_SHA}\n"));
    ExitCode::SUCCESS
}

/// `1 step`, `2 steps`.
pub fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// A document: its schema version, then the body's fields.
#[derive(Serialize)]
struct Document<'a, T: Serialize + ?Sized> {
    schema_version: u32,
    #[serde(flatten)]
    body: &'a T,
}

/// `body` (a struct or a map) as one JSON document, pretty-printed, with a final newline.
pub fn document<T: Serialize + ?Sized>(body: &T) -> String {
    let mut s = serde_json::to_string_pretty(&Document {
        schema_version: SCHEMA_VERSION,
        body,
    })
    .expect("documents serialize");
    s.push('\n');
    s
}

/// A result in the form asked for: `text()` as it is, or `body` as one JSON document.
pub fn print_result<T: Serialize + ?Sized>(
    format: Format,
    body: &T,
    text: impl FnOnce() -> String,
) {
    match format {
        Format::Json => print(&document(body)),
        Format::Text => print(&text()),
    }
}

/// Why a subcommand could not give its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// 2: malformed arguments; 1: the operation failed (SPEC §1.2).
    pub exit_code: u8,
    pub message: String,
}

impl Failure {
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            exit_code: 2,
            message: message.into(),
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        Self {
            exit_code: 1,
            message: message.into(),
        }
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Serialize)]
struct ErrorDetail<'a> {
    message: &'a str,
    exit_code: u8,
}

/// The error document: `{"schema_version": N, "error": {"message": …, "exit_code": …}}`.
pub fn error_document(message: &str, exit_code: u8) -> String {
    document(&ErrorBody {
        error: ErrorDetail { message, exit_code },
    })
}

/// Report the failure of the subcommand `path` (e.g. `["plan"]`): on stderr, a usage error as
/// clap words its own (the message, the usage, where the help is) and a failed operation as
/// one line, `{prefix}: {message}`; in JSON form, the error document on stdout as well.
pub fn fail(format: Format, path: &[&str], prefix: &str, failure: &Failure) -> ExitCode {
    if failure.exit_code == 2 {
        eprint(&cli::usage_error(path, &failure.message));
    } else {
        eprint(&format!("{prefix}: {}\n", failure.message));
    }
    if format == Format::Json {
        print(&error_document(&failure.message, failure.exit_code));
    }
    ExitCode::from(failure.exit_code)
}
