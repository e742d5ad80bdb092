//! Step completion markers: the legacy name and the Go fingerprint name (SPEC §8.7).
//!
//! Nodes upgraded from either upstream agent already carry these markers, and a step they mark
//! must not run again, so the names are those agents' names byte for byte. [`StepMarkers`] is
//! the one reader and writer of a step's two markers; `is_done` is the completion rule every
//! marker (step or interrupt) is read by.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use tracing::warn;

use crate::compat::{gojson, pyrepr, timestamp};
use crate::host::fs::{HostFs, HostFsError, MARKER_BOUND};
use crate::host::identity::NAME_MAX;
use crate::package::step::Step;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use std::collections::BTreeMap;

/// The Python agent's marker name, relative to `STATE/flags/<pkg>/<ver>/`.
///
/// `PATH` keeps its subdirectories, and the standard base64 alphabet contains `/`, so the name
/// may nest directories; both are what the Python agent wrote. `arguments` are the configured
/// ones (`env:` unresolved, no upgrade versions appended).
pub fn legacy_marker_name(path: &str, arguments: &[String], returncodes: &[i64]) -> String {
    // SPEC §8.7: base64std(repr(arguments) + "_" + repr(returncodes)), padded.
    let key = format!(
        "{}_{}",
        pyrepr::repr_str_list(arguments),
        pyrepr::repr_int_list(returncodes)
    );
    format!("{path}_{}", STANDARD.encode(key))
}

/// Whether the filesystem can hold `name` (a relative marker name).
///
/// Long arguments make a base64 component longer than `NAME_MAX`; the Python agent crashed
/// there, this agent skips the legacy marker instead and relies on the native one.
pub(crate) fn legacy_name_fits(name: &str) -> bool {
    // SPEC §8.7: a component over 255 bytes means no legacy marker.
    name.split('/').all(|component| component.len() <= NAME_MAX)
}

/// The Go agent's marker name, in the same directory as the legacy marker.
///
/// The Go agent keeps only the base name of `PATH`, so steps with one base name in different
/// subdirectories are told apart by the fingerprint alone.
pub fn native_marker_name(
    path: &str,
    arguments: &[String],
    returncodes: &[i64],
    env: &BTreeMap<String, String>,
    on_host: bool,
) -> String {
    // SPEC §8.7: <basename(PATH)>-<sha256hex>.flag
    let fingerprint = gojson::step_fingerprint(path, arguments, returncodes, env, on_host);
    format!("{}-{fingerprint}.flag", go_base(path))
}

/// Contents of both step markers.
///
/// Both upstream agents only test for existence; the contents are for operators, in the Go
/// agent's format (lowercase booleans, no trailing newline).
pub(crate) fn marker_contents(last_run_rfc3339: &str, always_runs: bool) -> String {
    // SPEC §8.7: `last_run: <ts>\nstep_always_runs: true|false`.
    format!("last_run: {last_run_rfc3339}\nstep_always_runs: {always_runs}")
}

/// Go's `filepath.Base` on Unix: the last element, trailing slashes ignored.
fn go_base(path: &str) -> &str {
    if path.is_empty() {
        return ".";
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/";
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

/// The two completion markers of one step (SPEC §8.7), as host paths.
#[derive(Debug, Clone)]
pub struct StepMarkers {
    /// `None` when a component of the legacy name would exceed 255 bytes.
    pub legacy: Option<PathBuf>,
    pub native: PathBuf,
}

impl StepMarkers {
    pub fn new(flags_dir: &Path, step: &Step) -> Self {
        let legacy = legacy_marker_name(&step.path, &step.arguments, &step.returncodes);
        let native = native_marker_name(
            &step.path,
            &step.arguments,
            &step.returncodes,
            &step.env,
            step.on_host,
        );
        Self {
            legacy: legacy_name_fits(&legacy).then(|| flags_dir.join(legacy)),
            native: flags_dir.join(native),
        }
    }

    /// Either marker, as a non-empty regular file, means completed; anything else at a marker
    /// path is an error.
    pub fn completed(&self, fs: &HostFs) -> Result<bool, HostFsError> {
        if is_done(fs, &self.native)? {
            return Ok(true);
        }
        match &self.legacy {
            Some(legacy) => is_done(fs, legacy),
            None => Ok(false),
        }
    }

    /// The markers of this step that exist as regular files (corrupt ones too), legacy first;
    /// anything else at a marker path is an error.
    pub fn present(&self, fs: &HostFs) -> Result<Vec<&Path>, HostFsError> {
        let mut present = Vec::new();
        for marker in self.legacy.iter().chain(std::iter::once(&self.native)) {
            if fs.is_file(marker)? {
                present.push(marker.as_path());
            }
        }
        Ok(present)
    }

    /// Write both markers (the legacy one only when its name fits).
    pub fn write(&self, fs: &HostFs, step: &Step, now: SystemTime) -> Result<(), HostFsError> {
        let contents = marker_contents(&timestamp::rfc3339_nano(now), step.idempotence_disabled);
        fs.write_atomic(&self.native, contents.as_bytes())?;
        if let Some(legacy) = &self.legacy {
            fs.write_atomic(legacy, contents.as_bytes())?;
        } else {
            warn!(
                path = %step.path,
                "legacy marker name would exceed 255 bytes; only the native marker records completion"
            );
        }
        Ok(())
    }

    /// Give a completed step its missing marker, with the content of the one present: a run
    /// killed between the two writes of [`StepMarkers::write`] (or a node last run by an agent
    /// that wrote only one name) would otherwise keep one marker forever, and an agent that
    /// reads only the other name would run the step again (SPEC §8.7: both markers).
    pub(crate) fn complete_pair(&self, fs: &HostFs) -> Result<(), HostFsError> {
        let Some(legacy) = &self.legacy else {
            return Ok(());
        };
        let done = |path: &Path| {
            read_marker(fs, path).map(|marker| match marker {
                Marker::Done(content) => Some(content),
                Marker::Absent | Marker::Corrupt(_) => None,
            })
        };
        match (done(&self.native)?, done(legacy)?) {
            (Some(content), None) => fs.write_atomic(legacy, &content),
            (None, Some(content)) => fs.write_atomic(&self.native, &content),
            _ => Ok(()),
        }
    }

    /// Remove both markers.
    pub fn remove(&self, fs: &HostFs) -> Result<(), HostFsError> {
        fs.remove_file(&self.native)?;
        if let Some(legacy) = &self.legacy {
            fs.remove_file(legacy)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn legacy_name_without_arguments() {
        assert_eq!(
            legacy_marker_name("apply.sh", &[], &[0]),
            "apply.sh_W11fWzBd"
        );
    }

    #[test]
    fn legacy_name_keeps_base64_padding() {
        assert_eq!(
            legacy_marker_name("s1.sh", &strings(&["a", "env:FOO"]), &[0]),
            "s1.sh_WydhJywgJ2VudjpGT08nXV9bMF0="
        );
        assert_eq!(
            legacy_marker_name("up.sh", &strings(&["u1"]), &[0]),
            "up.sh_Wyd1MSddX1swXQ=="
        );
    }

    #[test]
    fn legacy_name_nests_on_base64_slash() {
        // base64("['?']_[0]") contains '/': the Python agent wrote q.sh_Wyc/J11fWzBd.
        let name = legacy_marker_name("q.sh", &strings(&["?"]), &[0]);
        assert_eq!(name, "q.sh_Wyc/J11fWzBd");
        assert!(legacy_name_fits(&name));
    }

    #[test]
    fn legacy_name_keeps_step_subdirectory_and_quotes() {
        assert_eq!(
            legacy_marker_name("sub/deep.sh", &strings(&["it's", "a b", "é"]), &[0]),
            "sub/deep.sh_WyJpdCdzIiwgJ2EgYicsICfDqSddX1swXQ=="
        );
        assert_eq!(
            legacy_marker_name("sub/dir/s.sh", &strings(&["say \"hi\"", "it's"]), &[0, 2]),
            "sub/dir/s.sh_WydzYXkgImhpIicsICJpdCdzIl1fWzAsIDJd"
        );
    }

    #[test]
    fn legacy_name_too_long_for_a_long_argument() {
        let name = legacy_marker_name("long.sh", &["z".repeat(200)], &[0]);
        let expected = format!("long.sh_Wyd6{}eiddX1swXQ==", "enp6".repeat(66));
        assert_eq!(name, expected);
        assert!(!legacy_name_fits(&name));
    }

    #[test]
    fn legacy_name_fits_up_to_255_bytes_per_component() {
        assert!(legacy_name_fits(&format!("a/{}", "b".repeat(255))));
        assert!(!legacy_name_fits(&format!("a/{}", "b".repeat(256))));
        assert!(legacy_name_fits(&format!(
            "{}/{}",
            "b".repeat(255),
            "c".repeat(255)
        )));
        // Bytes, not characters: 128 two-byte characters are 256 bytes.
        assert!(!legacy_name_fits(&"é".repeat(128)));
    }

    #[test]
    fn native_name_uses_basename_and_fingerprint() {
        let args = strings(&["--mode", "fast"]);
        assert_eq!(
            native_marker_name("scripts/apply.sh", &args, &[0, 2], &BTreeMap::new(), true),
            "apply.sh-f3f526b85e0a962f2b4b68089385cd5b4829c09a436112f6586ff5f288e4ecf4.flag"
        );
    }

    #[test]
    fn native_name_of_nested_step_hashes_the_full_path() {
        let env = BTreeMap::new();
        let nested = native_marker_name("sub/dir/s.sh", &[], &[0], &env, true);
        let top = native_marker_name("s.sh", &[], &[0], &env, true);
        assert_ne!(nested, top);
        assert_eq!(
            nested,
            format!(
                "s.sh-{}.flag",
                gojson::step_fingerprint("sub/dir/s.sh", &[], &[0], &env, true)
            )
        );
    }

    #[test]
    fn go_base_matches_filepath_base() {
        assert_eq!(go_base("sub/dir/s.sh"), "s.sh");
        assert_eq!(go_base("s.sh"), "s.sh");
        assert_eq!(go_base("dir/"), "dir");
        assert_eq!(go_base(""), ".");
        assert_eq!(go_base("//"), "/");
    }

    #[test]
    fn contents_exact_bytes() {
        assert_eq!(
            marker_contents("2026-11-30T10:29:25.369131Z", false),
            "last_run: 2026-11-30T10:29:25.369131Z\nstep_always_runs: false"
        );
        assert_eq!(
            marker_contents("2026-01-02T03:04:05Z", true),
            "last_run: 2026-01-02T03:04:05Z\nstep_always_runs: true"
        );
    }
}

/// SPEC §5, §8.7: a completion marker that is empty, whitespace only, or holds a NUL byte is
/// corrupt. A writer killed mid-write (a non-atomic agent) leaves it empty; XFS leaves a file
/// whose data never reached the disk before a crash full of NULs. Any other content counts:
/// every upstream writer puts `last_run: …` there, but only existence was ever checked.
pub(crate) fn is_corrupt(content: &[u8]) -> bool {
    content.iter().all(u8::is_ascii_whitespace) || content.contains(&0)
}

/// What is at a marker path (SPEC §5, §8.7).
pub(crate) enum Marker {
    Absent,
    /// Empty, blank, NUL bytes, or larger than [`MARKER_BOUND`]: "unknown"; the reason.
    Corrupt(String),
    /// A completion, with the content.
    Done(Vec<u8>),
}

/// Read the marker at `path`, never more than [`MARKER_BOUND`] + 1 bytes of it. Anything
/// other than a regular file at the path is an error.
pub(crate) fn read_marker(fs: &HostFs, path: &Path) -> Result<Marker, HostFsError> {
    match fs.read(path, MARKER_BOUND) {
        Ok(None) => Ok(Marker::Absent),
        Ok(Some(content)) if is_corrupt(&content) => Ok(Marker::Corrupt(format!(
            "{} bytes, empty, blank or NUL bytes",
            content.len()
        ))),
        Ok(Some(content)) => Ok(Marker::Done(content)),
        Err(err @ HostFsError::TooLarge { .. }) => Ok(Marker::Corrupt(err.to_string())),
        Err(err) => Err(err),
    }
}

/// Whether the marker at `path` records a completion (SPEC §5, §8.7, §9.3): a regular file
/// that is not [corrupt](is_corrupt) nor larger than [`MARKER_BOUND`]. A corrupt one means
/// "unknown": the safe action, running again, is taken with a warning. Anything other than a
/// regular file at the path is an error.
pub(crate) fn is_done(fs: &HostFs, path: &Path) -> Result<bool, HostFsError> {
    match read_marker(fs, path)? {
        Marker::Absent => Ok(false),
        Marker::Corrupt(reason) => {
            tracing::warn!(
                marker = %path.display(),
                reason = %reason,
                "corrupt completion marker; treating the work as not done"
            );
            Ok(false)
        }
        Marker::Done(_) => Ok(true),
    }
}

#[cfg(test)]
mod is_done_tests {
    use super::is_done;
    use crate::host::fs::HostFs;
    use std::path::Path;

    #[test]
    fn only_a_non_empty_regular_file_counts() {
        let root = tempfile::tempdir().unwrap();
        let fs = HostFs::new(root.path());
        let p = Path::new("/flags/m");
        assert!(!is_done(&fs, p).unwrap());
        std::fs::create_dir_all(root.path().join("flags")).unwrap();
        std::fs::write(root.path().join("flags/m"), "").unwrap();
        assert!(!is_done(&fs, p).unwrap(), "empty means unknown");
        std::fs::write(root.path().join("flags/m"), "last_run: x").unwrap();
        assert!(is_done(&fs, p).unwrap());
        std::fs::write(root.path().join("flags/m"), [0u8; 38]).unwrap();
        assert!(!is_done(&fs, p).unwrap(), "NUL-filled means unknown");
        std::fs::write(root.path().join("flags/m"), b"last_run: x\0\0").unwrap();
        assert!(!is_done(&fs, p).unwrap(), "a NUL anywhere means corrupt");
        std::fs::write(root.path().join("flags/m"), b"\n\t ").unwrap();
        assert!(!is_done(&fs, p).unwrap(), "blank means unknown");
        std::fs::write(root.path().join("flags/m"), b"1796034537.5101383").unwrap();
        assert!(
            is_done(&fs, p).unwrap(),
            "the Python agent's content counts"
        );
        std::fs::write(root.path().join("flags/m"), [b'x'; 4096]).unwrap();
        assert!(is_done(&fs, p).unwrap(), "4 KiB is within the bound");
        std::fs::write(root.path().join("flags/m"), [b'x'; 4097]).unwrap();
        assert!(!is_done(&fs, p).unwrap(), "larger than 4 KiB means corrupt");
        std::fs::remove_file(root.path().join("flags/m")).unwrap();
        std::fs::create_dir(root.path().join("flags/m")).unwrap();
        assert!(is_done(&fs, p).is_err(), "a directory is an error");
    }
}
