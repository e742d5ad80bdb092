//! The version ledger `STATE/history/<pkg>.json` (SPEC §8.9).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::compat::timestamp::rfc3339_nano;
use crate::host::fs::{HostFs, HostFsError, RECORD_BOUND};

/// The version an upgrade starts from when history is missing, empty or corrupt.
pub(crate) const UNKNOWN_VERSION: &str = "unknown";

/// SPEC §8.9: the ledger keeps at most this many entries, newest first.
pub(crate) const MAX_ENTRIES: usize = 100;

/// The ledger as the Python agent writes it (`{"current-version": ..., "history": [...]}`).
/// Field order is the output order; keys this agent does not know (another agent's additions)
/// are carried through a rewrite.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Ledger {
    #[serde(
        rename = "current-version",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    current_version: Option<String>,
    #[serde(default)]
    history: Vec<Entry>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    version: String,
    /// Kept verbatim: the Python agent wrote `+00:00` offsets, this agent writes `Z`.
    time: String,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// One entry of the ledger as `agent status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub version: String,
    pub time: String,
}

/// The ledger as read without side effects (`agent status`, `agent plan`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    pub current_version: Option<String>,
    pub entries: Vec<HistoryEntry>,
    /// Set when the file exists but cannot be used.
    pub problem: Option<String>,
    /// Not JSON of the ledger's shape: the next run that reads it moves it to `.backup`.
    pub corrupt: bool,
}

impl History {
    /// The previous version an upgrade would see (SPEC §8.9): `current-version`, else
    /// `unknown`.
    pub(crate) fn previous_version(&self) -> String {
        self.current_version
            .clone()
            .unwrap_or_else(|| UNKNOWN_VERSION.to_owned())
    }
}

/// Why a ledger file cannot be used: each means "unknown" (SPEC §5, §8.9), and the file is moved
/// to `.backup` with a warning the next time a run reads it.
#[derive(Debug, thiserror::Error)]
enum Corruption {
    /// Empty or whitespace only (what a crash or a full disk leaves).
    #[error("the file is empty")]
    Empty,
    /// JSON of the ledger's shape whose `current-version` is missing, null or blank: the one
    /// value the file exists for.
    #[error("no current-version")]
    NoCurrentVersion,
    /// Not JSON of the ledger's shape.
    #[error(transparent)]
    Json(serde_json::Error),
    /// Larger than any ledger (SPEC §5): not read.
    #[error(transparent)]
    TooLarge(HostFsError),
}

/// SPEC §8.9 formats: this agent's indented JSON and the Python agent's compact one. Only a
/// ledger that names its current version is usable.
fn parse(bytes: &[u8]) -> Result<Ledger, Corruption> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Corruption::Empty);
    }
    let ledger = serde_json::from_slice::<Ledger>(bytes).map_err(Corruption::Json)?;
    if known(ledger.current_version.clone()).is_none() {
        return Err(Corruption::NoCurrentVersion);
    }
    Ok(ledger)
}

/// Read and parse the ledger at `file`; `None` when it does not exist. A file larger than
/// [`RECORD_BOUND`] is corrupt without being read (SPEC §5).
fn read_ledger(
    fs: &HostFs,
    file: &Path,
) -> Result<Option<Result<Ledger, Corruption>>, HostFsError> {
    match fs.read(file, RECORD_BOUND) {
        Ok(bytes) => Ok(bytes.map(|bytes| parse(&bytes))),
        Err(err @ HostFsError::TooLarge { .. }) => Ok(Some(Err(Corruption::TooLarge(err)))),
        Err(err) => Err(err),
    }
}

/// SPEC §5: an empty value means "unknown", never a version.
fn known(version: Option<String>) -> Option<String> {
    version.filter(|version| !version.trim().is_empty())
}

/// The `current-version` recorded in history, or `None` when the file is missing or unusable
/// (empty, without a current version, corrupt: renamed to `<file>.backup` with a warning).
pub fn current_version(fs: &HostFs, file: &Path) -> Result<Option<String>, HostFsError> {
    let ledger = load(fs, file)?;
    Ok(known(ledger.and_then(|ledger| ledger.current_version)))
}

/// Read the ledger without moving an unusable file aside: reading state never repairs it
/// (`agent status` and `agent plan` report; the next run that needs the file moves it).
pub fn inspect(fs: &HostFs, file: &Path) -> Result<History, HostFsError> {
    Ok(match read_ledger(fs, file)? {
        None => History::default(),
        Some(Ok(ledger)) => History {
            current_version: known(ledger.current_version),
            entries: ledger
                .history
                .into_iter()
                .map(|e| HistoryEntry {
                    version: e.version,
                    time: e.time,
                })
                .collect(),
            ..History::default()
        },
        Some(Err(why)) => History {
            problem: Some(format!("the history file is corrupt: {why}")),
            corrupt: true,
            ..History::default()
        },
    })
}

/// Prepend `{"version": version, "time": now}` and set `current-version` (cap 100 entries).
pub fn record(fs: &HostFs, file: &Path, version: &str, now: SystemTime) -> Result<(), HostFsError> {
    let mut ledger = load(fs, file)?.unwrap_or_default();
    ledger.history.insert(
        0,
        Entry {
            version: version.to_owned(),
            time: rfc3339_nano(now),
            extra: Map::new(),
        },
    );
    ledger.history.truncate(MAX_ENTRIES);
    ledger.current_version = Some(version.to_owned());
    let mut text = serde_json::to_string_pretty(&ledger)
        .expect("a ledger of strings and JSON values always serializes");
    text.push('\n');
    fs.write_atomic(file, text.as_bytes())
}

/// Read and parse the ledger. `None` when it is missing or unusable; an unusable file (empty,
/// without a current version, corrupt) is first moved to `<file>.backup` (replacing an older
/// backup) so the evidence survives the fresh ledger written later, as the Python agent did
/// with an empty or unparsable one.
fn load(fs: &HostFs, file: &Path) -> Result<Option<Ledger>, HostFsError> {
    match read_ledger(fs, file)? {
        None => Ok(None),
        Some(Ok(ledger)) => Ok(Some(ledger)),
        Some(Err(err)) => {
            let backup = backup_path(file)?;
            fs.rename(file, &backup)?;
            tracing::warn!(
                file = %file.display(),
                backup = %backup.display(),
                error = %err,
                "corrupt history file moved aside; treating the installed version as unknown"
            );
            Ok(None)
        }
    }
}

/// `<file>.backup`, next to the cleaned `file`.
fn backup_path(file: &Path) -> Result<PathBuf, HostFsError> {
    let mut backup = OsString::from(HostFs::clean(file)?);
    backup.push(".backup");
    Ok(PathBuf::from(backup))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    const FILE: &str = "/var/lib/skyhook/sk1/history/pkg.json";

    /// Exactly what the Python agent left on disk in transcript 11 (no trailing newline).
    const PYTHON_LEDGER: &str = r#"{"current-version": "1.0.0", "history": [{"version": "1.0.0", "time": "2026-11-30T10:28:09.400130+00:00"}, {"version": "0.9.0", "time": "2024-08-28T14:33:20.123456+00:00"}]}"#;

    /// 2026-11-30T10:30:00.5Z
    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::new(1_796_034_600, 500_000_000)
    }

    fn host() -> (tempfile::TempDir, HostFs) {
        let dir = tempfile::tempdir().unwrap();
        let fs = HostFs::new(dir.path());
        (dir, fs)
    }

    fn put(fs: &HostFs, path: &str, contents: &str) {
        fs.write_atomic(Path::new(path), contents.as_bytes())
            .unwrap();
    }

    fn get(fs: &HostFs, path: &str) -> Option<String> {
        fs.read(Path::new(path), RECORD_BOUND)
            .unwrap()
            .map(|bytes| String::from_utf8(bytes).unwrap())
    }

    #[test]
    fn reads_the_python_agent_ledger() {
        let (_dir, fs) = host();
        put(&fs, FILE, PYTHON_LEDGER);
        assert_eq!(
            current_version(&fs, Path::new(FILE)).unwrap().as_deref(),
            Some("1.0.0")
        );
        assert_eq!(
            get(&fs, FILE).as_deref(),
            Some(PYTHON_LEDGER),
            "reading changes nothing"
        );
    }

    #[test]
    fn missing_file_is_none_and_is_not_created() {
        let (dir, fs) = host();
        assert_eq!(current_version(&fs, Path::new(FILE)).unwrap(), None);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_ledger_larger_than_the_bound_is_corrupt_and_moved_aside_unread() {
        let (dir, fs) = host();
        put(&fs, FILE, "");
        let real = dir.path().join(FILE.trim_start_matches('/'));
        // Sparse: 2 GiB of nothing that costs no disk; reading it whole would cost 2 GiB.
        std::fs::File::options()
            .write(true)
            .open(&real)
            .unwrap()
            .set_len(2 << 30)
            .unwrap();
        let h = inspect(&fs, Path::new(FILE)).unwrap();
        assert!(h.corrupt, "{h:?}");
        assert_eq!(
            h.problem.as_deref(),
            Some(
                format!("the history file is corrupt: {FILE} is corrupt: larger than 16 MiB")
                    .as_str()
            )
        );
        assert_eq!(current_version(&fs, Path::new(FILE)).unwrap(), None);
        assert!(!real.exists(), "moved aside");
        let backup = dir
            .path()
            .join(format!("{}.backup", FILE.trim_start_matches('/')));
        assert_eq!(std::fs::metadata(backup).unwrap().len(), 2 << 30);
        record(&fs, Path::new(FILE), "1.0.0", now()).unwrap();
        assert_eq!(
            current_version(&fs, Path::new(FILE)).unwrap().as_deref(),
            Some("1.0.0")
        );
    }

    /// SPEC §5: an empty state file means "unknown" with a warning; like a corrupt ledger it
    /// is moved aside (the Python agent did that too).
    #[test]
    fn empty_or_blank_file_is_moved_to_backup_and_treated_as_none() {
        let (_dir, fs) = host();
        for blank in ["", " \n\t\r\n"] {
            put(&fs, FILE, blank);
            assert_eq!(current_version(&fs, Path::new(FILE)).unwrap(), None);
            assert_eq!(get(&fs, FILE), None, "{blank:?}");
            assert_eq!(
                get(&fs, "/var/lib/skyhook/sk1/history/pkg.json.backup").as_deref(),
                Some(blank)
            );
        }
    }

    /// SPEC §8.9: a ledger that names no current version cannot tell the previous one: it is
    /// unusable like a corrupt one (the Python agent passed `""` on, or crashed).
    #[test]
    fn missing_null_or_empty_current_version_is_moved_to_backup_and_treated_as_none() {
        let (_dir, fs) = host();
        for ledger in [
            r#"{"history": []}"#,
            "{}",
            r#"{"current-version": null, "history": []}"#,
            r#"{"current-version": "", "history": []}"#,
            r#"{"current-version": "  "}"#,
        ] {
            put(&fs, FILE, ledger);
            assert_eq!(
                current_version(&fs, Path::new(FILE)).unwrap(),
                None,
                "{ledger}"
            );
            assert_eq!(get(&fs, FILE), None, "{ledger}");
            assert_eq!(
                get(&fs, "/var/lib/skyhook/sk1/history/pkg.json.backup").as_deref(),
                Some(ledger)
            );
        }
    }

    #[test]
    fn corrupt_file_is_moved_to_backup_and_treated_as_none() {
        let (_dir, fs) = host();
        for corrupt in [
            "{",
            "not json",
            "[]",
            "\"1.0.0\"",
            r#"{"current-version": 1}"#,
            r#"{"current-version": "1.0.0", "history": {}}"#,
            r#"{"current-version": "1.0.0", "history": [{"version": "1.0.0"}]}"#,
            r#"{"current-version": "1.0.0", "history": ["1.0.0"]}"#,
        ] {
            put(&fs, FILE, corrupt);
            put(
                &fs,
                "/var/lib/skyhook/sk1/history/pkg.json.backup",
                "older backup",
            );
            assert_eq!(
                current_version(&fs, Path::new(FILE)).unwrap(),
                None,
                "{corrupt}"
            );
            assert_eq!(get(&fs, FILE), None, "{corrupt}");
            assert_eq!(
                get(&fs, "/var/lib/skyhook/sk1/history/pkg.json.backup").as_deref(),
                Some(corrupt)
            );
        }
    }

    #[test]
    fn record_writes_indented_json_with_a_newline() {
        let (dir, fs) = host();
        record(&fs, Path::new(FILE), "1.0.0", now()).unwrap();
        assert_eq!(
            get(&fs, FILE).unwrap(),
            "{\n  \"current-version\": \"1.0.0\",\n  \"history\": [\n    {\n      \"version\": \"1.0.0\",\n      \"time\": \"2026-11-30T10:30:00.5Z\"\n    }\n  ]\n}\n"
        );
        let real = dir.path().join(FILE.trim_start_matches('/'));
        assert_eq!(
            std::os::unix::fs::MetadataExt::mode(&std::fs::metadata(real).unwrap()) & 0o777,
            0o600
        );
    }

    #[test]
    fn record_prepends_to_the_python_agent_ledger() {
        let (_dir, fs) = host();
        put(&fs, FILE, PYTHON_LEDGER);
        record(&fs, Path::new(FILE), "uninstalled", now()).unwrap();
        assert_eq!(
            get(&fs, FILE).unwrap(),
            r#"{
  "current-version": "uninstalled",
  "history": [
    {
      "version": "uninstalled",
      "time": "2026-11-30T10:30:00.5Z"
    },
    {
      "version": "1.0.0",
      "time": "2026-11-30T10:28:09.400130+00:00"
    },
    {
      "version": "0.9.0",
      "time": "2024-08-28T14:33:20.123456+00:00"
    }
  ]
}
"#
        );
        assert_eq!(
            current_version(&fs, Path::new(FILE)).unwrap().as_deref(),
            Some("uninstalled")
        );
    }

    #[test]
    fn record_keeps_unknown_fields() {
        let (_dir, fs) = host();
        put(
            &fs,
            FILE,
            r#"{"schema": 2, "current-version": "0.9.0", "history": [{"time": "t0", "version": "0.9.0", "node": "n1"}]}"#,
        );
        record(&fs, Path::new(FILE), "1.0.0", now()).unwrap();
        assert_eq!(
            get(&fs, FILE).unwrap(),
            r#"{
  "current-version": "1.0.0",
  "history": [
    {
      "version": "1.0.0",
      "time": "2026-11-30T10:30:00.5Z"
    },
    {
      "version": "0.9.0",
      "time": "t0",
      "node": "n1"
    }
  ],
  "schema": 2
}
"#
        );
    }

    #[test]
    fn record_caps_the_ledger_at_100_entries() {
        let (_dir, fs) = host();
        for i in 0..105u64 {
            record(
                &fs,
                Path::new(FILE),
                &format!("1.0.{i}"),
                now() + Duration::from_secs(i),
            )
            .unwrap();
        }
        let ledger: Value = serde_json::from_str(&get(&fs, FILE).unwrap()).unwrap();
        let history = ledger["history"].as_array().unwrap();
        assert_eq!(history.len(), MAX_ENTRIES);
        assert_eq!(history[0]["version"], "1.0.104");
        assert_eq!(history[99]["version"], "1.0.5");
        assert_eq!(ledger["current-version"], "1.0.104");
    }

    #[test]
    fn record_over_a_corrupt_file_backs_it_up_and_starts_fresh() {
        let (_dir, fs) = host();
        put(&fs, FILE, "{");
        record(&fs, Path::new(FILE), "1.0.0", now()).unwrap();
        assert_eq!(
            get(&fs, "/var/lib/skyhook/sk1/history/pkg.json.backup").as_deref(),
            Some("{")
        );
        let ledger: Value = serde_json::from_str(&get(&fs, FILE).unwrap()).unwrap();
        assert_eq!(
            ledger,
            serde_json::json!({
                "current-version": "1.0.0",
                "history": [{"version": "1.0.0", "time": "2026-11-30T10:30:00.5Z"}],
            })
        );
    }

    #[test]
    fn record_over_an_empty_file_backs_it_up_and_starts_fresh() {
        let (_dir, fs) = host();
        put(&fs, FILE, "");
        record(&fs, Path::new(FILE), "1.0.0", now()).unwrap();
        assert_eq!(
            current_version(&fs, Path::new(FILE)).unwrap().as_deref(),
            Some("1.0.0")
        );
        assert_eq!(
            get(&fs, "/var/lib/skyhook/sk1/history/pkg.json.backup").as_deref(),
            Some("")
        );
    }

    #[test]
    fn a_symbolic_link_at_the_ledger_is_an_error() {
        let (dir, fs) = host();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("target"), PYTHON_LEDGER).unwrap();
        let real = dir.path().join(FILE.trim_start_matches('/'));
        std::fs::create_dir_all(real.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(outside.path().join("target"), &real).unwrap();
        let err = current_version(&fs, Path::new(FILE)).unwrap_err();
        assert_eq!(err.to_string(), format!("{FILE} is a symbolic link"));
        assert!(record(&fs, Path::new(FILE), "1.0.0", now()).is_err());
        assert_eq!(
            std::fs::read_to_string(outside.path().join("target")).unwrap(),
            PYTHON_LEDGER
        );
    }

    #[test]
    fn history_is_read_without_moving_a_corrupt_file() {
        let root = tempfile::tempdir().unwrap();
        let fs = HostFs::new(root.path());
        let file = Path::new("/h/pkg.json");
        assert_eq!(inspect(&fs, file).unwrap(), History::default());
        std::fs::create_dir_all(root.path().join("h")).unwrap();
        std::fs::write(
            root.path().join("h/pkg.json"),
            r#"{"current-version": "1.0.0", "history": [{"version": "1.0.0", "time": "2026-11-30T10:28:09.400130+00:00"}]}"#,
        )
        .unwrap();
        let h = inspect(&fs, file).unwrap();
        assert_eq!(h.current_version.as_deref(), Some("1.0.0"));
        assert_eq!(h.entries[0].time, "2026-11-30T10:28:09.400130+00:00");
        assert_eq!(h.previous_version(), "1.0.0");
        for unusable in ["{", "", r#"{"current-version": "", "history": []}"#] {
            std::fs::write(root.path().join("h/pkg.json"), unusable).unwrap();
            let h = inspect(&fs, file).unwrap();
            assert!(h.corrupt && h.problem.is_some(), "{unusable:?}");
            assert_eq!(h.previous_version(), "unknown");
            assert!(root.path().join("h/pkg.json").exists(), "left in place");
            assert!(!root.path().join("h/pkg.json.backup").exists());
        }
    }
}
