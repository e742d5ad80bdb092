//! Operator argv forms → [`Request`] (SPEC §1.1), with usage errors, help and suggestions.

use std::ffi::OsString;
use std::path::PathBuf;

use agent_core::package::step::Mode;

/// Usage text printed by `--help` and after every usage error; `agent try` where it is built
/// in (the default `try` feature).
macro_rules! usage {
    ($try_lines:literal) => {
        concat!(
            "\
usage:
  agent MODE ROOT_MOUNT COPY_DIR
  agent interrupt ROOT_MOUNT COPY_DIR INTERRUPT_DATA
  agent --version | -V
  agent --help | -h | help [MODE | SUBCOMMAND]
  agent MODE COPY_DIR                        (legacy: ROOT_MOUNT is /root)
  agent interrupt COPY_DIR INTERRUPT_DATA    (legacy: ROOT_MOUNT is /root)

modes:
  apply apply-check config config-check upgrade upgrade-check uninstall uninstall-check
  post-interrupt post-interrupt-check interrupt

`agent MODE --help` (or `agent help MODE`) documents a mode: arguments, environment, exit codes.

subcommands (see `agent <subcommand> --help` or `agent help <subcommand>`):
  agent interrupts list [--format text|json]   interrupt kinds this binary knows
  agent interrupts encode '<json>'             JSON payload -> base64 INTERRUPT_DATA
  agent interrupts decode <base64>             INTERRUPT_DATA -> canonical JSON
  agent validate COPY_DIR [--format text|json] lint a package directory offline
  agent plan MODE ROOT_MOUNT COPY_DIR          dry run: which steps would run or be skipped, and why
  agent plan interrupt ROOT_MOUNT COPY_DIR INTERRUPT_DATA
  agent status ROOT_MOUNT [--format text|json] verdict (exit 1 on failed, reset, error), packages, errors
  agent logs ROOT_MOUNT [--package NAME] [--step PATH | --operation OPERATION] [--run N]
                                               the logs of the latest run, a step or an operation
  agent reset ROOT_MOUNT COPY_DIR [--stage MODE] [--step PATH] [--yes]
  agent reset ROOT_MOUNT --package NAME [--package-version VERSION] [--yes]
  agent reset ROOT_MOUNT --interrupt RESOURCE_ID [--operation OPERATION] [--yes]
                                               make work run again: show, then remove its markers
",
            $try_lines,
            "  agent completions bash|zsh|fish              shell completions for the subcommands
  agent man                                    the manual page agent.1 (roff), as in docs/agent.1
"
        )
    };
}

#[cfg(feature = "try")]
pub const USAGE: &str = usage!(
    "  agent try PACKAGE_DIR [--root LOWER] [--stages LIST] [--interrupt JSON]... [--configmap NAME=FILE]...
            [--env K=V]... [--keep DIR] [--no-network] [--json]
                                               a package's whole lifecycle in a throwaway
                                               copy-on-write sandbox of LOWER, and what it changed
"
);
#[cfg(not(feature = "try"))]
pub const USAGE: &str = usage!("");

/// The legacy forms' implied host root mount.
pub const DEFAULT_ROOT: &str = "/root";

/// What the operator asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Version,
    /// Usage text, or the help of one topic.
    Help(Option<HelpTopic>),
    /// A stage MODE, or an unknown one (a forward-compatible no-op).
    Stage {
        mode: String,
        root: PathBuf,
        copy_dir: PathBuf,
    },
    Interrupt {
        root: PathBuf,
        copy_dir: PathBuf,
        data: String,
    },
}

/// What `--help` or `help` was asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelpTopic {
    /// A stage MODE or `interrupt`.
    Mode(String),
    /// A subcommand: its clap help.
    Subcommand(String),
}

/// A malformed command line (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsageError {
    #[error("expected 2, 3, or 4 arguments; received {0}")]
    Count(usize),
    #[error("--version takes no arguments")]
    VersionArgs,
    #[error("argument {0:?} is not valid UTF-8")]
    NotUtf8(String),
    #[error("root mount {0:?} is not absolute")]
    RootNotAbsolute(String),
    #[error("copy directory {0:?} is not absolute")]
    CopyDirNotAbsolute(String),
    #[error("interrupt data must not be empty")]
    EmptyInterruptData,
    #[error("stage {0:?} does not accept interrupt data")]
    StageWithData(String),
    /// A word close to a subcommand name: a person's typo, not an operator stage.
    #[error("unknown command {word:?}; did you mean {suggestion:?}?")]
    UnknownCommand {
        word: String,
        suggestion: &'static str,
    },
    #[error("no help for {topic:?}{}", suggestion.map(|s| format!("; did you mean {s}?")).unwrap_or_default())]
    UnknownTopic {
        topic: String,
        suggestion: Option<&'static str>,
    },
}

/// Whether `arg` asks for help / the version.
fn is_help(arg: &str) -> bool {
    matches!(arg, "--help" | "-h")
}
fn is_version(arg: &str) -> bool {
    matches!(arg, "--version" | "-V")
}

/// A stage MODE or `interrupt`.
pub fn is_mode(name: &str) -> bool {
    name == "interrupt" || name.parse::<Mode>().is_ok()
}

/// The mode an operator most likely meant by `mode`, for `did you mean …?`: the closest name
/// by edit distance (letter case ignored), if it is within two edits.
pub fn suggest_mode(mode: &str) -> Option<&'static str> {
    closest(
        mode,
        Mode::ALL
            .iter()
            .map(|m| m.as_str())
            .chain(std::iter::once("interrupt")),
    )
}

/// The subcommand a person most likely meant by `word`, if it is within two edits of one and
/// closer to it than to any MODE (`interupt` is a mistyped mode, not `interrupts`).
pub fn suggest_subcommand(word: &str) -> Option<&'static str> {
    let sub = closest(word, crate::commands::NAMES.iter().copied())?;
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

/// Dispatch on argument count, in the order of SPEC §1.1.
pub fn parse(args: Vec<OsString>) -> Result<Request, UsageError> {
    let args: Vec<String> = args
        .into_iter()
        .map(|a| {
            a.into_string()
                .map_err(|a| UsageError::NotUtf8(a.to_string_lossy().into_owned()))
        })
        .collect::<Result<_, _>>()?;
    match args.first().map(String::as_str) {
        Some(v) if is_version(v) && args.len() == 1 => return Ok(Request::Version),
        Some(v) if is_version(v) => return Err(UsageError::VersionArgs),
        Some("help") => return help_topic(args.get(1).map(String::as_str)),
        _ => {}
    }
    // `--help` or `-h` anywhere: an operator argument never has that value (ROOT and COPY_DIR
    // are absolute, INTERRUPT_DATA is base64). The help of the first mode named, if any.
    if args.iter().any(|a| is_help(a)) {
        let topic = args.iter().find(|a| is_mode(a)).cloned();
        return Ok(Request::Help(topic.map(HelpTopic::Mode)));
    }
    // `agent apply ... --version`: likewise never an operator argument.
    if args.first().is_some_and(|m| is_mode(m)) && args.iter().any(|a| is_version(a)) {
        return Ok(Request::Version);
    }
    // SPEC §1.1: a word within two edits of a subcommand name (one for a name of four letters
    // or fewer) is a person's typo; any other
    // unknown word is an operator stage this version does not know.
    if let Some(word) = args.first().filter(|w| !is_mode(w)) {
        if let Some(suggestion) = suggest_subcommand(word) {
            return Err(UsageError::UnknownCommand {
                word: word.clone(),
                suggestion,
            });
        }
    }
    let (mode, root, copy_dir, data) = match args.as_slice() {
        [mode, copy_dir] => (mode, DEFAULT_ROOT, copy_dir, None),
        [mode, copy_dir, data] if mode == "interrupt" => (mode, DEFAULT_ROOT, copy_dir, Some(data)),
        [mode, root, copy_dir] => (mode, root.as_str(), copy_dir, None),
        [mode, root, copy_dir, data] => (mode, root.as_str(), copy_dir, Some(data)),
        other => return Err(UsageError::Count(other.len())),
    };
    if !root.starts_with('/') {
        return Err(UsageError::RootNotAbsolute(root.to_owned()));
    }
    if !copy_dir.starts_with('/') {
        return Err(UsageError::CopyDirNotAbsolute(copy_dir.clone()));
    }
    let (root, copy_dir) = (PathBuf::from(root), PathBuf::from(copy_dir));
    match (mode.as_str(), data) {
        ("interrupt", Some(data)) if data.is_empty() => Err(UsageError::EmptyInterruptData),
        ("interrupt", Some(data)) => Ok(Request::Interrupt {
            root,
            copy_dir,
            data: data.clone(),
        }),
        // `interrupt ROOT COPY_DIR` without data: nothing to run.
        ("interrupt", None) => Err(UsageError::EmptyInterruptData),
        (known, Some(_)) if is_mode(known) => Err(UsageError::StageWithData(mode.clone())),
        // An unknown MODE with data: a future operator stage may carry data, as `interrupt`
        // does; it is the same warned no-op as without.
        _ => Ok(Request::Stage {
            mode: mode.clone(),
            root,
            copy_dir,
        }),
    }
}

/// `agent help [TOPIC]`.
fn help_topic(topic: Option<&str>) -> Result<Request, UsageError> {
    let Some(topic) = topic else {
        return Ok(Request::Help(None));
    };
    if is_mode(topic) {
        return Ok(Request::Help(Some(HelpTopic::Mode(topic.to_owned()))));
    }
    if crate::commands::NAMES.contains(&topic) {
        return Ok(Request::Help(Some(HelpTopic::Subcommand(topic.to_owned()))));
    }
    Err(UsageError::UnknownTopic {
        topic: topic.to_owned(),
        suggestion: suggest_mode(topic).or_else(|| suggest_subcommand(topic)),
    })
}

/// What one mode does, for its help text.
fn mode_summary(mode: &str) -> &'static str {
    match mode {
        "apply" => {
            "Run the package's apply steps. A step whose completion markers are present is \
             skipped, so a re-run resumes where the last one stopped."
        }
        "config" => {
            "Run the package's config steps (after a configMap change). This stage runs every \
             step each time."
        }
        "upgrade" => {
            "Run the package's upgrade steps; steps marked `upgrade_step` get the previous and \
             the current version appended to their arguments. This stage runs every step each time."
        }
        "uninstall" => "Run the package's uninstall steps. This stage runs every step each time.",
        "post-interrupt" => {
            "Run the package's post-interrupt steps, after its interrupt completed. Completed \
             steps are skipped."
        }
        "interrupt" => {
            "Decode INTERRUPT_DATA (base64 JSON, see `agent interrupts list`) and run its \
             operations, each once per SKYHOOK_RESOURCE_ID. A reboot completes when the boot \
             ID has changed; the loop guard refuses more than SKYHOOK_REBOOT_MAX_ATTEMPTS \
             reboots in one boot."
        }
        "apply-check" | "upgrade-check" => {
            "Run every check step of the stage; when all pass, record the package version in \
             the history file and write STATE/flags/<MODE>_ALL_CHECKED. \
             STATE/flags/check_results lists each check."
        }
        "uninstall-check" => {
            "Run every uninstall check step; when all pass, record `uninstalled` in the history \
             file and remove the package's completion markers."
        }
        _ => {
            "Run every check step of the stage; STATE/flags/check_results lists each check \
             and STATE/flags/<MODE>_ALL_CHECKED is written when all pass."
        }
    }
}

/// `agent MODE --help`: what the mode does, its arguments, environment and exit codes.
pub fn mode_help(mode: &str) -> String {
    let forms = if mode == "interrupt" {
        "  agent interrupt ROOT_MOUNT COPY_DIR INTERRUPT_DATA\n  \
         agent interrupt COPY_DIR INTERRUPT_DATA              (legacy: ROOT_MOUNT is /root)\n"
            .to_owned()
    } else {
        format!(
            "  agent {mode} ROOT_MOUNT COPY_DIR\n  \
             agent {mode} COPY_DIR                 (legacy: ROOT_MOUNT is /root)\n"
        )
    };
    let data = if mode == "interrupt" {
        "  INTERRUPT_DATA  base64 of the interrupt's JSON, e.g. from\n                  \
         `agent interrupts encode '{\"type\":\"service_restart\",\"services\":[\"kubelet\"]}'`\n"
    } else {
        ""
    };
    format!(
        "agent {mode}: {summary}\n\n\
         usage:\n{forms}\n\
         arguments:\n  \
         ROOT_MOUNT      the host's root filesystem as the agent sees it (absolute): /root in\n                  \
         an agent pod, / on the node itself\n  \
         COPY_DIR        the package directory as a host path (absolute), e.g.\n                  \
         /var/lib/skyhook/sk1/pkg-1.0.0-uid-3; when <ROOT_MOUNT><COPY_DIR> is missing it is\n                  \
         copied from SKYHOOK_DATA_DIR\n\
         {data}\n\
         environment:\n  \
         SKYHOOK_RESOURCE_ID          required: <prefix>_<package>_<version>, e.g. sk1-uid_pkg_1.0.0\n  \
         SKYHOOK_ROOT_DIR             state directory under ROOT_MOUNT (default /etc/skyhook)\n  \
         SKYHOOK_LOG_DIR              log directory under ROOT_MOUNT (default /var/log/skyhook)\n  \
         SKYHOOK_DATA_DIR             package source for a missing COPY_DIR (default /skyhook-package)\n  \
         SKYHOOK_AGENT_WRITE_LOGS     keep per-step log files (default true)\n  \
         SKYHOOK_STEP_TIMEOUT_SECONDS per-operation timeout (default none)\n  \
         SKYHOOK_REBOOT_MAX_ATTEMPTS  reboots allowed in one boot (default 3)\n  \
         SKYHOOK_AGENT_LOG            diagnostics filter (default info)\n  \
         SKYHOOK_AGENT_LOG_FORMAT     text or json diagnostics on stderr (default text)\n  \
         SKYHOOK_AGENT_WRITE_METRICS  write STATE/metrics/<pkg>.prom after each run (default true)\n  \
         SKYHOOK_AGENT_METRICS_DIR    also write the metrics file there (e.g. node-exporter's)\n  \
         OVERLAY_ALWAYS_RUN_STEP      run completed steps again (default false)\n  \
         COPY_RESOLV                  copy /etc/resolv.conf to the host (default true)\n\n\
         exit codes:\n  \
         0  the stage satisfied its policy (steps ran or were skipped as completed)\n  \
         1  a step or check failed, a runtime error, or stopped by a signal\n  \
         2  malformed arguments\n\n\
         see also: agent plan {mode} ... (dry run), agent status ROOT_MOUNT, agent reset --help\n",
        summary = mode_summary(mode),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Request, UsageError> {
        parse(args.iter().map(OsString::from).collect())
    }

    #[test]
    fn operator_forms() {
        assert_eq!(
            p(&["apply", "/root", "/var/lib/skyhook/x"]),
            Ok(Request::Stage {
                mode: "apply".into(),
                root: "/root".into(),
                copy_dir: "/var/lib/skyhook/x".into()
            })
        );
        assert_eq!(
            p(&["interrupt", "/r", "/c", "ZGF0YQ=="]),
            Ok(Request::Interrupt {
                root: "/r".into(),
                copy_dir: "/c".into(),
                data: "ZGF0YQ==".into()
            })
        );
        assert_eq!(p(&["--version"]), Ok(Request::Version));
        assert_eq!(p(&["-V"]), Ok(Request::Version));
        assert_eq!(p(&["--help"]), Ok(Request::Help(None)));
        assert_eq!(p(&["-h", "x"]), Ok(Request::Help(None)));
    }

    #[test]
    fn legacy_forms_imply_root() {
        assert_eq!(
            p(&["apply", "/c"]),
            Ok(Request::Stage {
                mode: "apply".into(),
                root: "/root".into(),
                copy_dir: "/c".into()
            })
        );
        assert_eq!(
            p(&["interrupt", "/c", "ZGF0YQ=="]),
            Ok(Request::Interrupt {
                root: "/root".into(),
                copy_dir: "/c".into(),
                data: "ZGF0YQ==".into()
            })
        );
    }

    #[test]
    fn usage_errors_have_the_specified_messages() {
        let msg = |args: &[&str]| p(args).unwrap_err().to_string();
        assert_eq!(msg(&[]), "expected 2, 3, or 4 arguments; received 0");
        assert_eq!(msg(&["apply"]), "expected 2, 3, or 4 arguments; received 1");
        assert_eq!(
            msg(&["a", "/b", "/c", "d", "e"]),
            "expected 2, 3, or 4 arguments; received 5"
        );
        assert_eq!(msg(&["--version", "x"]), "--version takes no arguments");
        assert_eq!(
            msg(&["apply", "root", "/c"]),
            r#"root mount "root" is not absolute"#
        );
        assert_eq!(
            msg(&["apply", "/root", "c"]),
            r#"copy directory "c" is not absolute"#
        );
        assert_eq!(
            msg(&["interrupt", "/r", "/c", ""]),
            "interrupt data must not be empty"
        );
        assert_eq!(
            msg(&["apply", "/r", "/c", "x"]),
            r#"stage "apply" does not accept interrupt data"#
        );
    }

    #[test]
    fn help_in_every_position_and_form() {
        let apply = Ok(Request::Help(Some(HelpTopic::Mode("apply".into()))));
        assert_eq!(p(&["apply", "--help"]), apply);
        assert_eq!(p(&["apply", "-h"]), apply);
        assert_eq!(p(&["apply", "/root", "/c", "--help"]), apply);
        assert_eq!(p(&["--help", "apply"]), apply);
        assert_eq!(p(&["help", "apply"]), apply);
        assert_eq!(p(&["help"]), Ok(Request::Help(None)));
        assert_eq!(
            p(&["help", "status"]),
            Ok(Request::Help(Some(HelpTopic::Subcommand("status".into()))))
        );
        assert_eq!(
            p(&["interrupt", "/r", "/c", "-h"]),
            Ok(Request::Help(Some(HelpTopic::Mode("interrupt".into()))))
        );
        assert_eq!(p(&["apply", "/r", "/c", "--version"]), Ok(Request::Version));
        assert_eq!(
            p(&["help", "aply"]).unwrap_err().to_string(),
            r#"no help for "aply"; did you mean apply?"#
        );
    }

    #[test]
    fn suggestions_pick_the_closest_mode_within_two_edits() {
        assert_eq!(suggest_mode("aply"), Some("apply"));
        assert_eq!(suggest_mode("APPLY"), Some("apply"));
        assert_eq!(suggest_mode("apply-chek"), Some("apply-check"));
        assert_eq!(suggest_mode("interupt"), Some("interrupt"));
        assert_eq!(suggest_mode("reticulate"), None);
        assert_eq!(suggest_mode(""), None);
    }

    #[test]
    fn unknown_modes_parse_as_stages() {
        assert!(
            matches!(p(&["bogus", "/r", "/c"]), Ok(Request::Stage { mode, .. }) if mode == "bogus")
        );
        assert!(
            matches!(p(&["bogus", "/r", "/c", "x"]), Ok(Request::Stage { mode, .. }) if mode == "bogus")
        );
    }

    #[test]
    fn a_word_close_to_a_subcommand_is_a_typo() {
        let msg = |args: &[&str]| p(args).unwrap_err().to_string();
        assert_eq!(
            msg(&["staus", "/r"]),
            r#"unknown command "staus"; did you mean "status"?"#
        );
        assert_eq!(
            msg(&["validat", "/c"]),
            r#"unknown command "validat"; did you mean "validate"?"#
        );
        assert_eq!(
            msg(&["staus"]),
            r#"unknown command "staus"; did you mean "status"?"#
        );
        // No operator MODE is within two edits of a subcommand.
        for mode in Mode::ALL {
            assert_eq!(suggest_subcommand(mode.as_str()), None, "{mode:?}");
        }
        assert_eq!(suggest_subcommand("interupt"), None);
        assert_eq!(suggest_subcommand("intrrupts"), Some("interrupts"));
        // A short name takes one edit: `bogus` is two from `logs`, an unknown stage.
        assert_eq!(suggest_subcommand("log"), Some("logs"));
        assert_eq!(suggest_subcommand("bogus"), None);
        assert!(matches!(
            p(&["bogus", "/r", "/c"]),
            Ok(Request::Stage { .. })
        ));
        assert!(p(&["interrupt", "/r", "/c", "x"]).is_ok());
    }
}
