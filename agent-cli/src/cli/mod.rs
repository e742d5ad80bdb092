//! The command line, defined once (SPEC §1.5): the operator forms (one command per MODE), the
//! subcommands and their flags form one clap [`Command`] tree. `--help`, `agent help TOPIC`,
//! usage errors, the manual page ([`man`]) and the shell completions are all rendered from it;
//! `request` parses the operator forms against it by the exact rules of SPEC §1.1, and clap
//! parses the subcommands.

mod args;
pub mod environment;
pub mod man;
mod modes;

#[cfg(feature = "try")]
pub use args::Try;
pub use args::{
    Completions, Format, Interrupts, Logs, ManPage, Operation, Plan, Reset, Status, Validate,
    Verbosity,
};

use std::ffi::OsString;
use std::sync::LazyLock;

use agent_core::package::step::Mode;
use clap::builder::PossibleValuesParser;
use clap::error::ErrorKind;
use clap::{Arg, ColorChoice, Command, CommandFactory as _, FromArgMatches as _};

/// The root: the global flags and the subcommands clap parses.
#[derive(Debug, clap::Parser)]
#[command(
    name = "agent",
    version = crate::version::version(),
    propagate_version = true,
    about = "Node agent for Skyhook/NodeWright packages: runs a package's stages and interrupts on a host"
)]
pub struct Cli {
    #[command(flatten)]
    pub verbosity: Verbosity,
    #[command(subcommand)]
    pub command: Subcommand,
}

/// The subcommands (SPEC §1.4): names that are not MODEs, so they never collide with the
/// operator forms.
#[derive(Debug, clap::Subcommand)]
pub enum Subcommand {
    /// Inspect and convert interrupt payloads
    #[command(subcommand)]
    Interrupts(Interrupts),
    /// Lint a package directory offline
    ///
    /// Every config.json rule, the step files, the expected config files; each finding names
    /// its JSON path. Exit 1 on any error.
    Validate(Validate),
    /// Dry run: which steps a run would run or skip, and why
    ///
    /// For each step or interrupt operation: run or skip, the reason, the resolved arguments
    /// and environment; then the files the run would write. Runs nothing, writes nothing.
    Plan(Plan),
    /// A verdict, then what the agent left on a host
    ///
    /// The verdict is done, running, reboot-pending, stopped, reset, failed, error or
    /// not-started; then, per package, its versions, markers, checks, interrupts and last runs,
    /// and what failed, with the last lines of its output.
    Status(Status),
    /// The logs of a package's latest run, or of one step or interrupt operation
    ///
    /// As the agent wrote them on the host (LOGS), found through STATE's results records;
    /// `--run N` for earlier ones.
    Logs(Logs),
    /// Make work run again: show, then (with --yes) remove its completion markers
    ///
    /// The work is a step, a stage, a package or an interrupt resource.
    Reset(Reset),
    /// A package's whole lifecycle in a throwaway sandbox, and what it changed
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
    Try(Try),
    /// Shell completions of the MODEs, the subcommands and their flags
    Completions(Completions),
    /// The manual page agent.1 (roff), on stdout
    Man(ManPage),
}

/// The MODEs of SPEC §1.1: the stages, then `interrupt`.
pub fn mode_names() -> impl Iterator<Item = &'static str> + Clone {
    Mode::ALL
        .iter()
        .map(|m| m.as_str())
        .chain(std::iter::once("interrupt"))
}

/// A stage MODE or `interrupt`.
pub fn is_mode(name: &str) -> bool {
    name == "interrupt" || name.parse::<Mode>().is_ok()
}

/// Whether `name` selects a subcommand instead of an operator form.
pub fn is_subcommand(name: &str) -> bool {
    <Subcommand as clap::Subcommand>::has_subcommand(name)
}

/// The subcommands' names.
pub fn subcommand_names() -> impl Iterator<Item = &'static str> {
    COMMANDS
        .get_subcommands()
        .map(Command::get_name)
        .filter(|name| is_subcommand(name))
}

/// The mode an operator most likely meant by `mode`, for `did you mean …?`: the closest name
/// by edit distance (letter case ignored), if it is within two edits.
pub fn suggest_mode(mode: &str) -> Option<&'static str> {
    closest(mode, mode_names())
}

/// The subcommand a person most likely meant by `word`, if it is within two edits of one and
/// closer to it than to any MODE (`interupt` is a mistyped mode, not `interrupts`).
pub fn suggest_subcommand(word: &str) -> Option<&'static str> {
    let sub = closest(word, subcommand_names())?;
    let distance = |name: &str| strsim::levenshtein(&word.to_ascii_lowercase(), name);
    match suggest_mode(word) {
        Some(mode) if distance(mode) <= distance(sub) => None,
        _ => Some(sub),
    }
}

/// The name closest to `word` within two edits. Two edits in a name of four letters or fewer
/// (`logs`, `plan`) are half of it: those take one, so an operator stage such as `bogus` (two
/// edits from `logs`) stays an unknown stage, not a typo.
fn closest<'a>(word: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let word = word.to_ascii_lowercase();
    if word.is_empty() {
        return None;
    }
    names
        .map(|name| (strsim::levenshtein(&word, name), name))
        .filter(|(d, name)| *d <= 2 && *d < word.len() && (*d < 2 || name.len() > 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, name)| name)
}

/// The tree without `help`, whose topics are the names of everything in it.
static COMMANDS: LazyLock<Command> = LazyLock::new(|| {
    Cli::command()
        .color(ColorChoice::Never)
        .disable_help_subcommand(true)
        .override_usage(synopsis())
        .subcommands(modes::commands())
});

/// The whole command line.
static TREE: LazyLock<Command> = LazyLock::new(|| {
    let topics: Vec<&'static str> = COMMANDS
        .get_subcommands()
        .map(Command::get_name)
        .chain(std::iter::once("help"))
        .collect();
    let help = Command::new("help")
        .about("Print the help of a MODE or subcommand")
        .override_usage("agent help [MODE | SUBCOMMAND]")
        .arg(
            Arg::new("TOPIC")
                .help("A MODE or subcommand")
                .hide_possible_values(true)
                .value_parser(PossibleValuesParser::new(topics)),
        );
    let root = COMMANDS.clone().subcommand(help);
    let template = root_template(&root);
    root.help_template(template).after_help(exit_codes())
});

/// The command tree: every MODE and subcommand, with its arguments and flags.
pub fn tree() -> &'static Command {
    &TREE
}

/// `Usage:` of `agent --help`: the forms of SPEC §1.1, the subcommands, version and help.
fn synopsis() -> String {
    let column = modes::synopsis_note_column();
    modes::SYNOPSIS
        .iter()
        .map(|(form, note)| {
            if note.is_empty() {
                (*form).to_owned()
            } else {
                format!("{form:column$}({note})")
            }
        })
        .collect::<Vec<_>>()
        .join("\n       ")
}

/// `agent --help`: the MODEs and the subcommands (each leaf, `interrupts list` and so on) in
/// lists of their own.
fn root_template(root: &Command) -> String {
    let modes: Vec<(String, String)> = root
        .get_subcommands()
        .filter(|c| is_mode(c.get_name()))
        .map(|c| (c.get_name().to_owned(), about(c)))
        .collect();
    let mut subcommands = Vec::new();
    for c in root.get_subcommands().filter(|c| !is_mode(c.get_name())) {
        if c.has_subcommands() {
            for leaf in c.get_subcommands() {
                subcommands.push((format!("{} {}", c.get_name(), leaf.get_name()), about(leaf)));
            }
        } else {
            subcommands.push((c.get_name().to_owned(), about(c)));
        }
    }
    let width = modes
        .iter()
        .chain(&subcommands)
        .map(|(name, _)| name.len())
        .max()
        .unwrap_or(0);
    let list = |entries: &[(String, String)]| {
        entries.iter().fold(String::new(), |mut s, (name, about)| {
            push_line!(s, "  {name:width$}  {about}");
            s
        })
    };
    format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n\
         Modes (the operator's stages; `agent help MODE` documents one):\n{}\n\
         Subcommands (`agent help SUBCOMMAND` documents one):\n{}\n\
         Options:\n{{options}}{{after-help}}",
        list(&modes),
        list(&subcommands)
    )
}

fn about(c: &Command) -> String {
    c.get_about().map(ToString::to_string).unwrap_or_default()
}

/// `Exit codes:`, as every help with exit codes lists them.
fn exit_codes() -> String {
    let mut s = String::from("Exit codes:\n");
    for (code, what) in environment::EXIT_STATUS {
        push_line!(s, "  {code}  {what}");
    }
    s.truncate(s.trim_end().len());
    s
}

/// Parse a subcommand's command line (without the program name).
pub fn parse(args: Vec<OsString>) -> Result<Cli, clap::Error> {
    let matches = tree()
        .clone()
        .try_get_matches_from(std::iter::once(OsString::from("agent")).chain(args))?;
    Cli::from_arg_matches(&matches)
}

/// The help of `agent PATH...` (the root's when `path` is empty), as `agent PATH... --help`
/// prints it.
pub fn help(path: &[&str]) -> String {
    let argv = std::iter::once("agent")
        .chain(path.iter().copied())
        .chain(std::iter::once("--help"));
    match tree().clone().try_get_matches_from(argv) {
        Err(e) if e.kind() == ErrorKind::DisplayHelp => e.render().to_string(),
        other => unreachable!("`--help` of {path:?} printed no help: {other:?}"),
    }
}

/// A usage error of `agent PATH...` in clap's words: the message, the usage, where the help
/// is.
pub fn usage_error(path: &[&str], message: &str) -> String {
    let mut root = tree().clone();
    root.build();
    let mut cmd = &mut root;
    for name in path {
        cmd = cmd
            .find_subcommand_mut(name)
            .unwrap_or_else(|| unreachable!("{name:?} is not in the command tree"));
    }
    cmd.error(ErrorKind::ValueValidation, message)
        .render()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_valid() {
        tree().clone().debug_assert();
    }

    #[test]
    fn every_mode_and_subcommand_is_in_the_tree() {
        let names: Vec<&str> = tree().get_subcommands().map(Command::get_name).collect();
        for mode in mode_names() {
            assert!(names.contains(&mode), "{mode}");
        }
        for sub in subcommand_names() {
            assert!(names.contains(&sub), "{sub}");
        }
        assert!(names.contains(&"help"));
        assert!(
            !is_subcommand("help"),
            "help is routed by the operator forms' parser"
        );
    }
}
