//! `agent try PACKAGE_DIR` (docs/try.md): the command line and the output contract around the
//! agent-try crate, which runs the sandbox.

use std::ffi::OsString;
use std::process::ExitCode;

use agent_try::{Error, Options, Outcome};

use crate::cli::{Format, Try, Verbosity};
use crate::output::{self, Failure};

/// The processes `agent try` starts of itself (`agent_try::internal`); `None` for any other
/// command line.
pub fn internal(args: &[OsString]) -> Option<ExitCode> {
    agent_try::internal(args, output::document)
}

pub fn run(args: &Try, verbosity: Verbosity) -> ExitCode {
    let format = args.format.or_json(args.json);
    let fail = |f: Failure| output::fail(format, &["try"], "agent try", &f);
    let outcome = agent_try::run(&Options {
        package_dir: &args.package_dir,
        root: &args.root,
        stages: &args.stages,
        interrupts: &args.interrupts,
        configmaps: &args.configmaps,
        env: &args.env,
        keep: args.keep.as_deref(),
        network: !args.no_network,
        log_filter: verbosity.filter(),
        json: format == Format::Json,
    });
    match outcome {
        Err(Error::Usage(message)) => fail(Failure::usage(message)),
        Err(Error::Failed(message)) => fail(Failure::failed(message)),
        Ok(Outcome::Report { report, succeeded }) => {
            output::print(&report);
            ExitCode::from(u8::from(!succeeded))
        }
        Ok(Outcome::NotSetUp) => {
            if format == Format::Json {
                output::print(&output::error_document(
                    "the sandbox could not be set up (stderr says why); nothing was run",
                    1,
                ));
            }
            ExitCode::from(1)
        }
        Ok(Outcome::Unfinished { message, progress }) => {
            let code = fail(Failure::failed(message));
            output::eprint(&progress);
            code
        }
    }
}
