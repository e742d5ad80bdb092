//! `agent completions SHELL` and `agent man`: the shell completions and the `agent.1` manual
//! page, generated from the command tree (docs/completions/ and docs/agent.1 hold them as this
//! version generates them).

use std::process::ExitCode;

use crate::cli::{self, Completions, ManPage};
use crate::output;

pub fn completions(args: &Completions) -> ExitCode {
    output::print(&cli::man::completions(args.shell));
    ExitCode::SUCCESS
}

pub fn man(_: &ManPage) -> ExitCode {
    output::print(&cli::man::page());
    ExitCode::SUCCESS
}
