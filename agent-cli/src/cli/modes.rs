//! The operator forms (SPEC §1.1) in the command tree: one command per MODE, with the forms
//! it is invoked in, its arguments, the environment and the exit codes. `request` parses them
//! by the exact rules of SPEC §1.1; these commands document and complete them.

use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command, ValueHint};

use super::environment::ENVIRONMENT;

/// The first lines of `agent --help` and the manual's SYNOPSIS: each form, and a note.
pub const SYNOPSIS: &[(&str, &str)] = &[
    ("agent [-q | -v] MODE ROOT_MOUNT COPY_DIR", ""),
    (
        "agent [-q | -v] interrupt ROOT_MOUNT COPY_DIR INTERRUPT_DATA",
        "",
    ),
    (
        "agent [-q | -v] MODE COPY_DIR",
        "legacy: ROOT_MOUNT is /root",
    ),
    (
        "agent [-q | -v] interrupt COPY_DIR INTERRUPT_DATA",
        "legacy: ROOT_MOUNT is /root",
    ),
    ("agent [-q | -v] SUBCOMMAND [ARGS]", ""),
    ("agent --version | -V", ""),
    ("agent --help | -h | help [MODE | SUBCOMMAND]", ""),
];

/// Where the notes of [`SYNOPSIS`] start: after its longest form that has one.
pub fn synopsis_note_column() -> usize {
    SYNOPSIS
        .iter()
        .filter(|(_, note)| !note.is_empty())
        .map(|(form, _)| form.len())
        .max()
        .unwrap_or(0)
        + 4
}

/// One MODE: its name, a line for lists, and what it does.
struct ModeDoc {
    name: &'static str,
    about: &'static str,
    long: &'static str,
}

const CHECK: &str = "Run every check step of the stage; STATE/flags/check_results lists each \
                     check, and STATE/flags/<MODE>_ALL_CHECKED is written when all pass.";

/// The check stages that record the version they checked.
const CHECK_AND_RECORD: &str = "Run every check step of the stage; when all pass, record the \
                                package version in the history file and write \
                                STATE/flags/<MODE>_ALL_CHECKED. STATE/flags/check_results lists \
                                each check.";

const MODES: &[ModeDoc] = &[
    ModeDoc {
        name: "apply",
        about: "Run the apply steps; completed steps are skipped",
        long: "Run the package's apply steps. A step whose completion markers are present is \
               skipped, so a re-run resumes where the last one stopped.",
    },
    ModeDoc {
        name: "apply-check",
        about: "Run the apply checks; when all pass, record the version",
        long: CHECK_AND_RECORD,
    },
    ModeDoc {
        name: "config",
        about: "Run the config steps (after a configMap change), every one each time",
        long: "Run the package's config steps (after a configMap change). This stage runs every \
               step each time.",
    },
    ModeDoc {
        name: "config-check",
        about: "Run the config checks",
        long: CHECK,
    },
    ModeDoc {
        name: "upgrade",
        about: "Run the upgrade steps, every one each time",
        long: "Run the package's upgrade steps; steps marked upgrade_step get the previous and \
               the current version appended to their arguments. This stage runs every step each \
               time.",
    },
    ModeDoc {
        name: "upgrade-check",
        about: "Run the upgrade checks; when all pass, record the version",
        long: CHECK_AND_RECORD,
    },
    ModeDoc {
        name: "uninstall",
        about: "Run the uninstall steps, every one each time",
        long: "Run the package's uninstall steps. This stage runs every step each time.",
    },
    ModeDoc {
        name: "uninstall-check",
        about: "Run the uninstall checks; when all pass, record `uninstalled`",
        long: "Run every uninstall check step; when all pass, record `uninstalled` in the history \
               file and remove the package's completion markers.",
    },
    ModeDoc {
        name: "post-interrupt",
        about: "Run the post-interrupt steps; completed steps are skipped",
        long: "Run the package's post-interrupt steps, after its interrupt completed. Completed \
               steps are skipped.",
    },
    ModeDoc {
        name: "post-interrupt-check",
        about: "Run the post-interrupt checks",
        long: CHECK,
    },
    ModeDoc {
        name: "interrupt",
        about: "Run an interrupt's operations, each once per SKYHOOK_RESOURCE_ID",
        long: "Decode INTERRUPT_DATA (base64 JSON, see `agent interrupts list`) and run its \
               operations, each once per SKYHOOK_RESOURCE_ID. A reboot completes when the boot \
               ID has changed; the loop guard refuses more than SKYHOOK_REBOOT_MAX_ATTEMPTS \
               reboots in one boot.",
    },
];

/// The MODE commands, in the order of SPEC §1.1.
pub fn commands() -> impl Iterator<Item = Command> {
    MODES.iter().map(command)
}

fn command(m: &ModeDoc) -> Command {
    let name = m.name;
    let interrupt = name == "interrupt";
    let data = if interrupt { " INTERRUPT_DATA" } else { "" };
    let forms = [
        format!("agent [-q | -v] {name} ROOT_MOUNT COPY_DIR{data}"),
        format!("agent [-q | -v] {name} COPY_DIR{data}    (legacy: ROOT_MOUNT is /root)"),
    ];
    // `-h` prints the whole help as `--help` does: `request` tells them apart no more than an
    // operator argument could be either.
    let mut cmd = Command::new(name)
        .about(m.about)
        .long_about(m.long)
        .override_usage(forms.join("\n       "))
        .disable_help_flag(true)
        .arg(
            Arg::new("help")
                .short('h')
                .long("help")
                .action(ArgAction::HelpLong)
                .help("Print help"),
        )
        .arg(
            Arg::new("ROOT_MOUNT")
                .value_name("ROOT_MOUNT")
                .required(true)
                .value_hint(ValueHint::DirPath)
                .help(
                    "The host's root filesystem as the agent sees it (absolute): /root in an \
                     agent pod, / on the node itself; /root when left out (the legacy form)",
                ),
        )
        .arg(
            Arg::new("COPY_DIR")
                .value_name("COPY_DIR")
                .required(true)
                .value_hint(ValueHint::DirPath)
                .help(
                    "The package directory as a host path (absolute), e.g. \
                     /var/lib/skyhook/sk1/pkg-1.0.0-uid-3; when <ROOT_MOUNT><COPY_DIR> is \
                     missing it is copied from SKYHOOK_DATA_DIR",
                ),
        );
    if interrupt {
        cmd = cmd.arg(
            Arg::new("INTERRUPT_DATA")
                .value_name("INTERRUPT_DATA")
                .required(true)
                .value_hint(ValueHint::Other)
                .help(
                    "Base64 of the interrupt's JSON, e.g. from `agent interrupts encode \
                     '{\"type\":\"service_restart\",\"services\":[\"kubelet\"]}'`",
                ),
        );
    }
    cmd.after_help(after_help(name))
}

/// The environment, the exit codes and where to look next.
fn after_help(mode: &str) -> String {
    let width = ENVIRONMENT.iter().map(|v| v.name.len()).max().unwrap_or(0);
    let mut s = String::from("Environment:\n");
    for v in ENVIRONMENT {
        push_line!(
            s,
            "  {:width$}  {} ({})",
            v.name,
            v.meaning,
            v.default_text()
        );
    }
    let _ = write!(
        s,
        "\n{}\n\nSee also: agent plan {mode} ... (dry run), agent status ROOT_MOUNT, agent reset \
         --help",
        super::exit_codes()
    );
    s
}
