//! The subcommands' arguments and flags (SPEC §1.4), as clap parses them. Every value that
//! becomes a path or a path component is checked here, so a bad one is a usage error before
//! anything is read.

use std::path::{Path, PathBuf};

use agent_core::host::fs::HostFs;
use agent_core::host::identity::{NotAComponent, ResourceId, is_single_component, path_component};

/// `--format text|json` (SPEC §1.5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Text,
    /// One JSON document on stdout, also on failure (docs/schemas/).
    Json,
}

impl Format {
    /// This `--format`, or JSON when `--json` (its shorthand, where a subcommand has one) was
    /// given.
    pub fn or_json(self, json: bool) -> Format {
        if json { Format::Json } else { self }
    }
}

/// `-q`/`-v`: the level of the agent's log records on stderr, instead of SKYHOOK_AGENT_LOG.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::Args)]
pub struct Verbosity {
    /// Log errors only (instead of SKYHOOK_AGENT_LOG, default info)
    #[arg(
        short,
        long,
        global = true,
        conflicts_with = "verbose",
        display_order = 900
    )]
    pub quiet: bool,
    /// Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)
    #[arg(short, long, global = true, display_order = 901)]
    pub verbose: bool,
}

impl Verbosity {
    /// The log filter the flags ask for, if any.
    pub fn filter(self) -> Option<&'static str> {
        if self.quiet {
            Some("error")
        } else if self.verbose {
            Some("debug")
        } else {
            None
        }
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum Interrupts {
    /// Every interrupt kind this binary knows: built-in and linked third-party kinds
    List {
        /// text for people; json: one document for programs (docs/schemas/)
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// JSON payload -> base64 INTERRUPT_DATA (validated by decoding it)
    ///
    /// Refuses data of 128 KiB or more: Linux caps one command-line argument there
    /// (MAX_ARG_STRLEN).
    Encode {
        #[arg(help = r#"The payload, e.g. '{"type":"service_restart","services":["kubelet"]}'"#)]
        json: String,
        /// text for people; json: one document for programs (docs/schemas/)
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// base64 INTERRUPT_DATA -> canonical JSON
    Decode {
        /// base64 of the interrupt's JSON, as the operator passes it
        #[arg(value_name = "INTERRUPT_DATA")]
        data: String,
        /// text for people; json: one document for programs (docs/schemas/)
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
}

#[derive(Debug, clap::Args)]
pub struct Validate {
    /// The package directory (holding config.json, skyhook_dir/, configmaps/), on this machine
    #[arg(value_hint = clap::ValueHint::DirPath)]
    pub copy_dir: PathBuf,
    /// text for people; json: one document for programs (docs/schemas/)
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

#[derive(Debug, clap::Args)]
#[command(
    override_usage = "agent plan [OPTIONS] MODE ROOT COPY_DIR\n       agent plan [OPTIONS] interrupt ROOT COPY_DIR INTERRUPT_DATA",
    after_help = "\
State directory (as for status, reset and logs): --state-dir, else SKYHOOK_ROOT_DIR, else the one
directory of the operator's layout (/var/lib/skyhook/<name>, logs in /var/log/skyhook/<name>)
that holds state, else the legacy default /etc/skyhook. The `state:` line says which
(`state_dir` and `state_source` in JSON).

Exit codes:
  0  a run would get through the plan (or the MODE is unknown: a run would be a no-op)
  1  a run would fail, or the plan could not be made
  2  usage"
)]
pub struct Plan {
    /// A stage MODE (apply, apply-check, config, ...) or `interrupt`
    #[arg(value_parser = AnyMode)]
    pub mode: String,
    /// The host root mount, as the operator passes it (absolute)
    #[arg(value_parser = absolute, value_hint = clap::ValueHint::DirPath)]
    pub root: PathBuf,
    /// The package directory as a host path (absolute)
    #[arg(value_parser = absolute, value_hint = clap::ValueHint::DirPath)]
    pub copy_dir: PathBuf,
    /// INTERRUPT_DATA (base64 JSON), with `interrupt` only
    #[arg(value_name = "INTERRUPT_DATA")]
    pub data: Option<String>,
    /// STATE as a host path (e.g. /var/lib/skyhook/sk1), instead of SKYHOOK_ROOT_DIR or the
    /// one directory of the operator's layout found on the host
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub state_dir: Option<PathBuf>,
    /// text for people; json: one document for programs (docs/schemas/)
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Show a unified diff (host file, then root_dir file) for each `changed` overlay file;
    /// binary and large files are named, not diffed. In JSON: a `diff` field on those writes
    #[arg(long)]
    pub diff: bool,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "\
The first line is the verdict: `status: done | running | reboot-pending | stopped | reset |
failed | error | not-started`. Then, for each state directory, each package and interrupt
resource with its own verdict, and last `errors:`: what failed (step, exit code, log file,
results record, the last lines of its output) and state that cannot be read.

State directory (as for plan, reset and logs): --state-dir, else SKYHOOK_ROOT_DIR, else every
directory of the operator's layout (/var/lib/skyhook/<name>, logs in /var/log/skyhook/<name>)
and the legacy default /etc/skyhook that holds state. The `state:` line says which, and how it
was chosen (`state_source` in JSON).

Environment: SKYHOOK_ROOT_DIR, SKYHOOK_LOG_DIR, SKYHOOK_REBOOT_MAX_ATTEMPTS (for `attempts n of
N`).

Exit codes:
  0  done, not-started, running, reboot-pending or stopped (a run stopped by a signal)
  1  failed (the last run failed), reset (it failed, was reset and has not run since), or
     error (the loop guard will refuse a reboot, a run ended without recording its result,
     or state cannot be read)
  2  usage")]
pub struct Status {
    /// The host root mount (`/` on the node itself, `/root` in an agent pod)
    #[arg(value_hint = clap::ValueHint::DirPath)]
    pub root: PathBuf,
    /// STATE as a host path (e.g. /var/lib/skyhook/sk1), instead of SKYHOOK_ROOT_DIR or the
    /// directories found on the host
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub state_dir: Option<PathBuf>,
    /// text for people; json: one document for programs (docs/schemas/)
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Same as `--format json`
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
#[command(
    override_usage = "agent reset [OPTIONS] ROOT_MOUNT COPY_DIR [--stage MODE] [--step PATH]\n       \
                      agent reset [OPTIONS] ROOT_MOUNT --package NAME [--package-version VERSION]\n       \
                      agent reset [OPTIONS] ROOT_MOUNT --interrupt RESOURCE_ID [--operation OPERATION]",
    after_help = "\
Without --yes nothing is removed: the files that would be removed are listed, as `agent plan`
lists what a run would do. With --yes they are removed and the reset is recorded in
STATE/results/<package>/<version>/reset.json. A reset refuses while an agent holds the
package's lock (or the interrupt resource's lock); with --yes it holds that lock itself from
before it looks for the files until the reset is recorded, so an agent started meanwhile waits.

Step markers are removed under both names (the legacy and the Go agent's); interrupt markers
are the .complete, .pending and .attempts files of each operation. The history file, logs and
results records are kept.

State directory (as for status, plan and logs): --state-dir, else SKYHOOK_ROOT_DIR, else the one
directory of the operator's layout (/var/lib/skyhook/<name>) that holds state; the `state:` line
says which.

Exit codes:
  0  shown, or removed (also when there is nothing to remove)
  1  refused (lock held), no such step or stage, or a file could not be removed
  2  usage"
)]
pub struct Reset {
    /// The host root mount (`/` on the node itself, `/root` in an agent pod)
    #[arg(value_parser = clean_absolute, value_hint = clap::ValueHint::DirPath)]
    pub root: PathBuf,
    /// The package directory as a host path: reset its steps (all of them unless --stage or
    /// --step narrows it)
    #[arg(value_parser = clean_absolute, conflicts_with_all = ["package", "interrupt"], value_hint = clap::ValueHint::DirPath)]
    pub copy_dir: Option<PathBuf>,
    /// With COPY_DIR: only the steps of this stage MODE
    #[arg(long, value_name = "MODE", requires = "copy_dir")]
    pub stage: Option<String>,
    /// With COPY_DIR: only this step (its path in config.json)
    #[arg(long, value_name = "PATH", requires = "copy_dir")]
    pub step: Option<String>,
    /// Every step marker of this package, without its package directory
    #[arg(long, value_name = "NAME", conflicts_with = "interrupt", value_parser = package_name)]
    pub package: Option<String>,
    /// With --package: only this version (default: every version)
    #[arg(long, value_name = "VERSION", requires = "package", value_parser = package_version)]
    pub package_version: Option<String>,
    /// The interrupt markers of this resource ID (<prefix>_<package>_<version>)
    #[arg(long, value_name = "RESOURCE_ID", value_parser = resource_id)]
    pub interrupt: Option<ResourceId>,
    /// With --interrupt: only this operation, `<type>_<index>` (e.g. node_restart_0)
    #[arg(long, value_name = "OPERATION", requires = "interrupt", value_parser = operation)]
    pub operation: Option<Operation>,
    /// STATE as a host path, instead of SKYHOOK_ROOT_DIR or the one found on the host
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub state_dir: Option<PathBuf>,
    /// Remove the files; without it, only show them
    #[arg(long)]
    pub yes: bool,
    /// text for people; json: one document for programs (docs/schemas/)
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// An interrupt operation, `<type>_<index>`: its markers are `<type>_<index>.<state>`.
#[derive(Debug, Clone)]
pub struct Operation {
    pub name: String,
    pub kind: String,
    pub index: usize,
}

// `agent try`: its help is the doc comment of `Subcommand::Try` (cli/mod.rs).
#[cfg(feature = "try")]
#[derive(Debug, clap::Args)]
pub struct Try {
    /// The package directory (config.json, skyhook_dir/, configmaps/, root_dir/)
    #[arg(value_hint = clap::ValueHint::DirPath)]
    pub package_dir: PathBuf,
    /// The host root to use as the read-only lower layer
    #[arg(long, value_name = "LOWER", default_value = "/", value_hint = clap::ValueHint::DirPath)]
    pub root: PathBuf,
    /// Comma-separated stages to run before the interrupts
    #[arg(long, value_name = "LIST", default_value = TRY_STAGES)]
    pub stages: String,
    /// An interrupt payload as JSON (e.g. '{"type":"node_restart"}'), followed by
    /// post-interrupt and post-interrupt-check; repeatable
    #[arg(long = "interrupt", value_name = "JSON")]
    pub interrupts: Vec<String>,
    /// Install FILE as configMap key NAME (COPY_DIR/configmaps/NAME); repeatable
    #[arg(long = "configmap", value_name = "NAME=FILE")]
    pub configmaps: Vec<String>,
    /// Set an environment variable for the stages (the package's env); repeatable
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// Keep the upper layer, the stage outputs and report.json in DIR (new or empty)
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub keep: Option<PathBuf>,
    /// Give the sandbox a new, empty network namespace (default: the host's network)
    #[arg(long)]
    pub no_network: bool,
    /// text for people; json: one document for programs (docs/schemas/)
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Same as `--format json` (fields in docs/try.md)
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
}

/// The stages `agent try` runs when `--stages` is not given.
#[cfg(feature = "try")]
const TRY_STAGES: &str = "apply,apply-check,config,config-check";

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Load them with e.g. `source <(agent completions bash)`; docs/completions/ \
                        holds them as this version generates them."
)]
pub struct Completions {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Install with e.g. `agent man > /usr/local/share/man/man1/agent.1`.")]
pub struct ManPage {}

/// A MODE argument: completed from the MODEs, any word accepted (an unknown MODE is a
/// forward-compatible no-op, SPEC §1.1).
#[derive(Debug, Clone, Copy)]
struct AnyMode;

impl clap::builder::TypedValueParser for AnyMode {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            super::mode_names().map(clap::builder::PossibleValue::new),
        ))
    }
}

/// A path argument the operator form takes absolute.
fn absolute(s: &str) -> Result<PathBuf, String> {
    if s.starts_with('/') {
        Ok(PathBuf::from(s))
    } else {
        Err(format!("{s:?} is not absolute"))
    }
}

/// An absolute path, cleaned of `.` and `..` without leaving `/`.
fn clean_absolute(s: &str) -> Result<PathBuf, String> {
    absolute(s).and_then(|p| HostFs::clean(Path::new(&p)).map_err(|e| e.to_string()))
}

// SPEC §5: every option that becomes a path component passes the one rule while the command
// line is parsed, so a bad name is a usage error before anything is read or removed.
fn package_name(s: &str) -> Result<String, NotAComponent> {
    path_component("package name", s).map(|()| s.to_owned())
}

fn package_version(s: &str) -> Result<String, NotAComponent> {
    path_component("package version", s).map(|()| s.to_owned())
}

fn resource_id(s: &str) -> Result<ResourceId, String> {
    ResourceId::parse(s)
        .and_then(|r| r.check_directory_name().map(|()| r))
        .map_err(|e| e.to_string())
}

fn operation(s: &str) -> Result<Operation, String> {
    path_component("operation", s).map_err(|e| e.to_string())?;
    s.rsplit_once('_')
        .and_then(|(k, i)| Some((k, i.parse::<usize>().ok()?)))
        .filter(|(k, _)| !k.is_empty())
        .map(|(kind, index)| Operation {
            name: s.to_owned(),
            kind: kind.to_owned(),
            index,
        })
        .ok_or_else(|| format!("{s:?} is not <type>_<index> (e.g. node_restart_0)"))
}

#[derive(Debug, clap::Args)]
#[command(
    override_usage = "agent logs [OPTIONS] ROOT_MOUNT [--package NAME] [--step PATH | --operation OPERATION] [--run N]",
    after_help = "\
Without --step or --operation: the logs of every step (or the interrupt) that ran in the
package's latest run, as its results record names them; a step whose log was not written or
has been removed since shows the last 4 KiB of its output the record keeps.

--run N counts back from the newest, 1 being the newest:
  with --step or --operation  the Nth newest log of that step or interrupt operation (the
                              agent keeps the 5 newest of each)
  otherwise                   the Nth most recent run still recorded (the record of the last
                              run of each stage, and of the interrupt, of each version)

--operation takes an interrupt operation, <type>_<index> (node_restart_0) or the type alone:
an interrupt run keeps one log for all its operations, LOGS/<package>/<version>/interrupts/.

--package may be left out when the state directory holds one package; --package-version
when the package's latest run, or its only version, says which.

State directory (as for status, plan and reset): --state-dir, else SKYHOOK_ROOT_DIR, else the
one directory of the operator's layout (/var/lib/skyhook/<name>, logs in
/var/log/skyhook/<name>) that holds state; the state: line says which.

Text: a logs: line saying what is shown, the state: line, then each log after a
==> NAME: PATH <== line, as the agent wrote it. JSON (--format json): one document with
schema_version, the package, the run and logs, each with its content (the last 1 MiB of the
file; truncated_bytes says how much is left out); on failure the error document
(docs/schemas/).

Exit codes:
  0  the logs were shown
  1  no such package, run, step or log, or a log cannot be read
  2  malformed arguments: a bad option, a name that is not one path component, several
     packages or state directories to choose from"
)]
pub struct Logs {
    /// The host root mount (/ on the node itself, /root in an agent pod).
    pub root: PathBuf,
    /// The package (default: the only one with state).
    #[arg(long, value_name = "NAME", value_parser = package_name)]
    pub package: Option<String>,
    /// The package version (default: that of the package's latest run).
    #[arg(long, value_name = "VERSION", value_parser = package_version)]
    pub package_version: Option<String>,
    /// A step: its path in config.json.
    #[arg(long, value_name = "PATH", value_parser = step_path, conflicts_with = "operation")]
    pub step: Option<String>,
    /// An interrupt operation, <type>_<index> (e.g. node_restart_0), or its type.
    #[arg(long, value_name = "OPERATION", value_parser = log_operation)]
    pub operation: Option<String>,
    /// Which one, counting back from the newest: 1 is the newest (see below).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub run: u32,
    /// STATE as a host path, instead of SKYHOOK_ROOT_DIR or the one found on the host.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// A step path: relative, each component one path component (so no `..`).
fn step_path(s: &str) -> Result<String, String> {
    if s.split('/').all(is_single_component) {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "step path {s:?} must be relative, without empty, `.` or `..` components"
        ))
    }
}

/// `<type>_<index>` or `<type>`: the interrupt type, which names the logs.
fn log_operation(s: &str) -> Result<String, NotAComponent> {
    path_component("operation", s)?;
    Ok(match s.rsplit_once('_') {
        Some((kind, i)) if !kind.is_empty() && i.parse::<usize>().is_ok() => kind.to_owned(),
        _ => s.to_owned(),
    })
}
