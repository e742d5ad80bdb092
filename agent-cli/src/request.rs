//! Operator argv forms → [`Request`] (SPEC §1.1), with usage errors and suggestions; the
//! forms themselves are documented by the command tree ([`crate::cli`]).

use std::ffi::OsString;
use std::path::PathBuf;

use agent_core::package::step::Mode;

use crate::cli::{Verbosity, is_mode, is_subcommand, suggest_mode, suggest_subcommand};

/// The legacy forms' implied host root mount.
pub const DEFAULT_ROOT: &str = "/root";

/// What the operator asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Version,
    /// Usage text, or the help of one topic: a MODE or a subcommand.
    Help(Option<String>),
    /// A stage MODE (or an unknown one, a forward-compatible no-op, whose data if any is
    /// ignored), or `interrupt` with its data.
    Operator {
        mode: String,
        root: PathBuf,
        copy_dir: PathBuf,
        data: Option<String>,
    },
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
    #[error("the argument '{0}' cannot be used with '{1}'")]
    Verbosity(String, String),
}

/// Whether `arg` asks for help / the version.
fn is_help(arg: &str) -> bool {
    matches!(arg, "--help" | "-h")
}
fn is_version(arg: &str) -> bool {
    matches!(arg, "--version" | "-V")
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
        return Ok(Request::Help(args.iter().find(|a| is_mode(a)).cloned()));
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
    match (mode.as_str(), data) {
        // `interrupt ROOT COPY_DIR` without data: nothing to run.
        ("interrupt", None) => Err(UsageError::EmptyInterruptData),
        ("interrupt", Some(data)) if data.is_empty() => Err(UsageError::EmptyInterruptData),
        (stage, Some(_)) if stage.parse::<Mode>().is_ok() => {
            Err(UsageError::StageWithData(mode.clone()))
        }
        // Every valid form: a stage without data, `interrupt` with its data, and an unknown
        // MODE with or without data (a future operator stage may carry data, as `interrupt`
        // does; it is the same warned no-op either way).
        _ => Ok(Request::Operator {
            mode: mode.clone(),
            root: PathBuf::from(root),
            copy_dir: PathBuf::from(copy_dir),
            data: data.cloned(),
        }),
    }
}

/// `agent help [TOPIC]`.
fn help_topic(topic: Option<&str>) -> Result<Request, UsageError> {
    match topic {
        None => Ok(Request::Help(None)),
        Some(topic) if is_mode(topic) || is_subcommand(topic) || topic == "help" => {
            Ok(Request::Help(Some(topic.to_owned())))
        }
        // `agent help --help`: the help of `help`.
        Some(topic) if is_help(topic) => Ok(Request::Help(Some("help".to_owned()))),
        Some(topic) => Err(UsageError::UnknownTopic {
            topic: topic.to_owned(),
            suggestion: suggest_mode(topic).or_else(|| suggest_subcommand(topic)),
        }),
    }
}

/// The `-q`/`--quiet` and `-v`/`--verbose` flags before an operator form or a subcommand, and
/// the arguments after them. No operator argument is one of them: a MODE is a lowercase word
/// (SPEC §1.1), ROOT and COPY_DIR are absolute.
pub fn leading_verbosity(args: &[OsString]) -> Result<(Verbosity, &[OsString]), UsageError> {
    let (mut quiet, mut verbose): (Option<&str>, Option<&str>) = (None, None);
    let mut rest = args;
    while let Some((first, after)) = rest.split_first() {
        match first.to_str() {
            Some(flag @ ("-q" | "--quiet")) => quiet = Some(flag),
            Some(flag @ ("-v" | "--verbose")) => verbose = Some(flag),
            _ => break,
        }
        if let (Some(q), Some(v)) = (quiet, verbose) {
            return Err(UsageError::Verbosity(q.to_owned(), v.to_owned()));
        }
        rest = after;
    }
    let verbosity = Verbosity {
        quiet: quiet.is_some(),
        verbose: verbose.is_some(),
    };
    Ok((verbosity, rest))
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
            Ok(Request::Operator {
                mode: "apply".into(),
                root: "/root".into(),
                copy_dir: "/var/lib/skyhook/x".into(),
                data: None
            })
        );
        assert_eq!(
            p(&["interrupt", "/r", "/c", "ZGF0YQ=="]),
            Ok(Request::Operator {
                mode: "interrupt".into(),
                root: "/r".into(),
                copy_dir: "/c".into(),
                data: Some("ZGF0YQ==".into())
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
            Ok(Request::Operator {
                mode: "apply".into(),
                root: "/root".into(),
                copy_dir: "/c".into(),
                data: None
            })
        );
        assert_eq!(
            p(&["interrupt", "/c", "ZGF0YQ=="]),
            Ok(Request::Operator {
                mode: "interrupt".into(),
                root: "/root".into(),
                copy_dir: "/c".into(),
                data: Some("ZGF0YQ==".into())
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
        let apply = Ok(Request::Help(Some("apply".into())));
        assert_eq!(p(&["apply", "--help"]), apply);
        assert_eq!(p(&["apply", "-h"]), apply);
        assert_eq!(p(&["apply", "/root", "/c", "--help"]), apply);
        assert_eq!(p(&["--help", "apply"]), apply);
        assert_eq!(p(&["help", "apply"]), apply);
        assert_eq!(p(&["help"]), Ok(Request::Help(None)));
        assert_eq!(
            p(&["help", "status"]),
            Ok(Request::Help(Some("status".into())))
        );
        assert_eq!(
            p(&["interrupt", "/r", "/c", "-h"]),
            Ok(Request::Help(Some("interrupt".into())))
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
            matches!(p(&["bogus", "/r", "/c"]), Ok(Request::Operator { mode, .. }) if mode == "bogus")
        );
        assert!(
            matches!(p(&["bogus", "/r", "/c", "x"]), Ok(Request::Operator { mode, .. }) if mode == "bogus")
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
            Ok(Request::Operator { .. })
        ));
        assert!(p(&["interrupt", "/r", "/c", "x"]).is_ok());
    }
}
