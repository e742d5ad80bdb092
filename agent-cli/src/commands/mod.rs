//! Agent subcommands (SPEC §1.4): names that are not MODES, parsed by clap against the command
//! tree ([`crate::cli`]).

pub mod completions;
pub mod interrupts;
pub mod logs;
pub mod plan;
pub mod reset;
pub mod state;
pub mod status;
#[cfg(feature = "try")]
pub mod try_;
pub mod validate;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::error::ErrorKind;

use crate::cli::{self, Format, Subcommand};
use crate::output;

/// Parse and run a subcommand. A malformed command line exits 2 with clap's message on
/// stderr, and, when the command line asks for JSON, the error document on stdout.
pub fn run(args: Vec<OsString>) -> ExitCode {
    // `--version`/`-V` in any position prints what `agent --version` prints (SPEC §1.3).
    if args
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--version" || a == "-V")
    {
        return output::print_version();
    }
    let format = requested_format(&args);
    let parsed = match cli::parse(args) {
        Ok(parsed) => parsed,
        Err(e) => return parse_error(&e, format),
    };
    let v = parsed.verbosity;
    // clap checks the conflict within one level of the command line, not between a flag
    // before the subcommand and one after it.
    if v.quiet && v.verbose {
        let f = output::Failure::usage("the argument '--quiet' cannot be used with '--verbose'");
        return output::fail(format, &[], "agent", &f);
    }
    match parsed.command {
        Subcommand::Interrupts(cmd) => interrupts::run(&cmd),
        Subcommand::Validate(args) => validate::run(&args),
        Subcommand::Plan(args) => plan::run(&args, v),
        Subcommand::Status(args) => status::run(&args, v),
        Subcommand::Logs(args) => logs::run(&args, v),
        Subcommand::Reset(args) => reset::run(&args, v),
        #[cfg(feature = "try")]
        Subcommand::Try(args) => try_::run(&args, v),
        Subcommand::Completions(args) => completions::completions(&args),
        Subcommand::Man(args) => completions::man(&args),
    }
}

/// The format a command line asks for, read before it is parsed: a usage error is a JSON
/// document when `--format json` (or `--json`) is on the command line, even if the rest of it
/// does not parse. Without a format that reads as one, it is text.
fn requested_format(args: &[OsString]) -> Format {
    let mut format = Format::Text;
    let mut words = args
        .iter()
        .map(|a| a.to_str())
        .take_while(|a| *a != Some("--"));
    while let Some(word) = words.next() {
        let value = match word {
            Some("--json") => Some("json"),
            Some("--format") => words.next().flatten(),
            Some(w) => w.strip_prefix("--format="),
            None => None,
        };
        match value {
            Some("json") => format = Format::Json,
            Some("text") => format = Format::Text,
            _ => {}
        }
    }
    format
}

/// clap's answer when it did not parse: help and version on stdout (exit 0), a usage error on
/// stderr (exit 2).
fn parse_error(e: &clap::Error, format: Format) -> ExitCode {
    let text = e.render().to_string();
    if !e.use_stderr() {
        output::print(&text);
        return ExitCode::SUCCESS;
    }
    output::eprint(&text);
    if format == Format::Json {
        // clap's message is its first paragraph (`error: …`, the values it names indented
        // under it); the usage and the pointer to --help follow.
        let message = if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            "a subcommand is required".to_owned()
        } else {
            let first = text.split("\n\n").next().unwrap_or_default();
            let first = first.strip_prefix("error: ").unwrap_or(first);
            first.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        output::print(&output::error_document(&message, 2));
    }
    ExitCode::from(2)
}
