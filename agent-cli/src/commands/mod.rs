//! Agent subcommands (SPEC §1.4): names that are not MODES, parsed with clap.

pub mod completions;
pub mod interrupts;
pub mod logs;
pub mod plan;
pub mod reset;
pub mod state;
pub mod status;
pub mod validate;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Names that select a subcommand instead of an operator form.
pub const NAMES: &[&str] = &[
    "interrupts",
    "validate",
    "plan",
    "status",
    "logs",
    "reset",
    #[cfg(feature = "try")]
    "try",
    "completions",
    "man",
];

#[derive(Debug, Parser)]
#[command(
    name = "agent",
    version = crate::version(),
    propagate_version = true,
    about = "Node agent for Skyhook/NodeWright packages"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Inspect and convert interrupt payloads.
    #[command(subcommand)]
    Interrupts(interrupts::Interrupts),
    /// Lint a package directory offline: every config.json rule, step files, config files.
    Validate(validate::Validate),
    /// Dry run: which steps or interrupt operations a run would run or skip, and why.
    Plan(plan::Plan),
    /// A verdict (done, running, reboot-pending, stopped, reset, failed, error, not-started),
    /// then what the agent left on a host: versions, markers, checks, interrupts, last runs,
    /// errors with the last lines of the failed output.
    Status(status::Status),
    /// The logs of a package's latest run, or of one step or interrupt operation, as the agent
    /// wrote them on the host (`--run N` for earlier ones).
    Logs(logs::Logs),
    /// Make a step, a stage, a package or an interrupt resource run again: show, then (with
    /// --yes) remove its completion markers.
    Reset(reset::Reset),
    /// Run a package's whole lifecycle in a throwaway copy-on-write sandbox of a host root, and
    /// report what it changed.
    ///
    /// The sandbox is an overlayfs view of LOWER (read-only lower layer, temporary upper layer)
    /// in new mount, PID, IPC and UTS namespaces (and a user namespace when not root), with a
    /// fresh /proc, a minimal /dev and a read-only /sys; the network is the host's unless
    /// --no-network. The package is staged as the operator stages it, then the stages run in
    /// order by the agent's own code: apply, apply-check, config, config-check, then for each
    /// --interrupt the interrupt (its commands are recorded, not run; a reboot is simulated with
    /// a new boot ID), post-interrupt and post-interrupt-check. LOWER is never written. Exit 0
    /// when every stage succeeded, 1 otherwise, 2 on malformed arguments. See docs/try.md.
    #[cfg(feature = "try")]
    Try(agent_try::Try),
    /// Shell completions for the subcommands: `agent completions bash|zsh|fish`.
    Completions(completions::Completions),
    /// The manual page `agent.1` (roff), on stdout.
    Man(completions::ManPage),
}

/// The clap definition of the subcommands, for completions and the manual page.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Parse and run a subcommand; clap prints usage errors and exits 2 on bad flags.
pub fn run(args: Vec<OsString>) -> ExitCode {
    // `--version`/`-V` in any position prints what `agent --version` prints (SPEC §1.3).
    if args
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--version" || a == "-V")
    {
        return crate::print_version();
    }
    let cli = match Cli::try_parse_from(std::iter::once(OsString::from("agent")).chain(args)) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match cli.command {
        Command::Interrupts(cmd) => interrupts::run(cmd),
        Command::Validate(args) => validate::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Status(args) => status::run(&args),
        Command::Logs(args) => logs::run(&args),
        Command::Reset(args) => reset::run(&args),
        #[cfg(feature = "try")]
        Command::Try(args) => agent_try::run(&args),
        Command::Completions(args) => completions::completions(&args),
        Command::Man(args) => completions::man(&args),
    }
}
