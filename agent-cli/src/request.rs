//! Operator argv forms → [`Request`] (SPEC §1.1), with usage errors.

use std::ffi::OsString;
use std::path::PathBuf;

/// Usage text printed by `--help` and after every usage error.
pub const USAGE: &str = "\
usage:
  agent MODE ROOT_MOUNT COPY_DIR
  agent interrupt ROOT_MOUNT COPY_DIR INTERRUPT_DATA
  agent --version
  agent MODE COPY_DIR                        (legacy: ROOT_MOUNT is /root)
  agent interrupt COPY_DIR INTERRUPT_DATA    (legacy: ROOT_MOUNT is /root)

modes:
  apply apply-check config config-check upgrade upgrade-check uninstall uninstall-check
  post-interrupt post-interrupt-check interrupt

subcommands (see `agent <subcommand> --help`):
  agent interrupts list [--format text|json]   interrupt kinds this binary knows
  agent interrupts encode '<json>'             JSON payload -> base64 INTERRUPT_DATA
  agent interrupts decode <base64>             INTERRUPT_DATA -> canonical JSON
  agent validate COPY_DIR [--format text|json] lint a package directory offline
  agent plan MODE ROOT_MOUNT COPY_DIR          dry run: which steps would run or be skipped, and why
  agent plan interrupt ROOT_MOUNT COPY_DIR INTERRUPT_DATA
  agent status ROOT_MOUNT [--format text|json] verdict (exit 1 on error), packages, errors
";

/// The legacy forms' implied host root mount.
pub const DEFAULT_ROOT: &str = "/root";

/// What the operator asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Version,
    Help,
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
        Some("--version") if args.len() == 1 => return Ok(Request::Version),
        Some("--version") => return Err(UsageError::VersionArgs),
        Some("--help" | "-h") => return Ok(Request::Help),
        _ => {}
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
        (_, Some(_)) => Err(UsageError::StageWithData(mode.clone())),
        (_, None) => Ok(Request::Stage {
            mode: mode.clone(),
            root,
            copy_dir,
        }),
    }
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
        assert_eq!(p(&["--help"]), Ok(Request::Help));
        assert_eq!(p(&["-h", "x"]), Ok(Request::Help));
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
    fn unknown_modes_parse_as_stages() {
        assert!(
            matches!(p(&["bogus", "/r", "/c"]), Ok(Request::Stage { mode, .. }) if mode == "bogus")
        );
    }
}
