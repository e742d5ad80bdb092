//! `agent completions SHELL` and `agent man`: shell completions and the `agent.1` manual page,
//! generated from the same clap definitions as `--help`.

use std::process::ExitCode;

use agent_core::exec::Output;
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, roman};

use crate::request::USAGE;

#[derive(Debug, clap::Args)]
pub struct Completions {
    /// The shell to complete for (e.g. bash, zsh, fish).
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Install with e.g. `agent man > /usr/local/share/man/man1/agent.1`.")]
pub struct ManPage {}

pub fn completions(args: &Completions) -> ExitCode {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut super::command(), "agent", &mut out);
    Output::process().print(&String::from_utf8_lossy(&out));
    ExitCode::SUCCESS
}

pub fn man(_: &ManPage) -> ExitCode {
    Output::process().print(&man_page());
    ExitCode::SUCCESS
}

/// Environment variables the agent reads (SPEC §2), for the ENVIRONMENT section.
const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "SKYHOOK_RESOURCE_ID",
        "Required for stages and interrupts: <prefix>_<package>_<version>.",
    ),
    (
        "SKYHOOK_ROOT_DIR",
        "State directory under ROOT_MOUNT (default /etc/skyhook).",
    ),
    (
        "SKYHOOK_LOG_DIR",
        "Log directory under ROOT_MOUNT (default /var/log/skyhook).",
    ),
    (
        "SKYHOOK_DATA_DIR",
        "Package source for a missing COPY_DIR (default /skyhook-package).",
    ),
    (
        "SKYHOOK_AGENT_WRITE_LOGS",
        "Keep per-operation log files (default true).",
    ),
    (
        "SKYHOOK_STEP_TIMEOUT_SECONDS",
        "Per-operation timeout (default none).",
    ),
    (
        "SKYHOOK_REBOOT_MAX_ATTEMPTS",
        "Reboots an interrupt may request in one boot (default 3).",
    ),
    (
        "SKYHOOK_AGENT_LOG",
        "Filter of the agent's diagnostics (default info).",
    ),
    (
        "SKYHOOK_AGENT_LOG_FORMAT",
        "text or json diagnostics on stderr (default text).",
    ),
    (
        "SKYHOOK_AGENT_WRITE_METRICS",
        "Write the package's metrics file, STATE/metrics/<pkg>.prom, after each run (default true).",
    ),
    (
        "SKYHOOK_AGENT_METRICS_DIR",
        "Host directory that also gets the package's metrics file, skyhook_agent_<pkg>.prom (default none).",
    ),
    (
        "OVERLAY_ALWAYS_RUN_STEP",
        "Run completed steps again (default false).",
    ),
    (
        "COPY_RESOLV",
        "Copy the container's /etc/resolv.conf to the host (default true).",
    ),
];

/// `agent.1`: clap's name and subcommands sections around the operator forms, the environment
/// and the exit status, which clap does not know. No version or date in it, so the page
/// committed as docs/agent.1 is what every build prints.
pub fn man_page() -> String {
    let man = Man::new(super::command())
        .date("")
        .manual("agent")
        .source("agent");
    let mut out = Vec::new();
    let mut render = |f: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| {
        f(&mut out).expect("rendering into memory cannot fail");
    };
    render(&|w| man.render_title(w));
    render(&|w| man.render_name_section(w));
    let mut roff = Roff::new();
    roff.control("SH", ["SYNOPSIS"]).control("nf", []);
    for line in USAGE.lines() {
        roff.text([roman(line)]);
    }
    roff.control("fi", []);
    roff.control("SH", ["DESCRIPTION"]).text([roman(
        "Runs one stage (MODE) or the interrupt of a Skyhook/NodeWright package against the host \
         mounted at ROOT_MOUNT, reading and writing the same state files as the upstream agents. \
         `agent MODE --help` documents a mode; `agent SUBCOMMAND --help` a subcommand.",
    )]);
    roff.control("SH", ["ENVIRONMENT"]);
    for (name, what) in ENVIRONMENT {
        roff.control("TP", [])
            .text([bold(*name)])
            .text([roman(*what)]);
    }
    roff.control("SH", ["EXIT STATUS"]);
    for (code, what) in [
        (
            "0",
            "The operation satisfied its policy (including skipped completed work and unknown \
             modes); for status, a verdict that is not failed, reset or error.",
        ),
        (
            "1",
            "An operation failed, a runtime error occurred, or the run was stopped by a signal; \
             for status, the verdict is failed, reset or error; for logs, no such run or log.",
        ),
        ("2", "Malformed arguments."),
    ] {
        roff.control("TP", [])
            .text([bold(code)])
            .text([roman(what)]);
    }
    // The subcommands are documented here and by their own --help (no agent-status(1) pages).
    roff.control("SH", ["SUBCOMMANDS"]);
    for sub in super::command()
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
    {
        let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
        roff.control("TP", [])
            .text([bold(format!("agent {}", sub.get_name()))])
            .text([roman(format!(
                "{about}. See `agent {} --help`.",
                sub.get_name()
            ))]);
    }
    render(&|w| roff.to_writer(w));
    String::from_utf8(out).expect("roff output is UTF-8")
}
