//! The results record (SPEC §8.12, ext): what the last run of a stage or interrupt did, for
//! `agent status` and for humans, in `STATE/results/<pkg>/<ver>/<MODE>.json`.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::exec::usage::Usage;
use crate::exec::{Outcome, Termination};
use crate::host::fs::{HostFs, HostFsError, RECORD_BOUND};

/// One run of the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultsRecord {
    pub agent_version: String,
    /// The commit the agent was built from (`-dirty` when its tree had changes), or
    /// `unknown`; empty in records written before it was recorded.
    #[serde(default)]
    pub git_sha: String,
    /// The stage mode, or `interrupt`.
    pub mode: String,
    pub resource_id: String,
    pub package: String,
    pub version: String,
    /// UTC RFC 3339.
    pub started: String,
    /// UTC RFC 3339; while the run is `running`, its start time (so the record still sorts as
    /// the newest).
    pub finished: String,
    pub exit_code: u8,
    /// `running` from the start of the run until its end replaces the record (SPEC §8.12);
    /// `None` in records of earlier versions, which were only written at the end.
    #[serde(default)]
    pub result: Option<RecordedResult>,
    /// The error that made the run fail, as printed.
    #[serde(default)]
    pub error: Option<String>,
    pub operations: Vec<OperationResult>,
}

/// Where a run is, as its record says (`"result"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordedResult {
    /// Written when the run starts: a run killed outright (or one whose final record could not
    /// be written) leaves its record saying so, never the previous run's success.
    Running,
    Succeeded,
    Failed,
    /// Stopped by a termination signal (SPEC §10).
    Stopped,
}

impl RecordedResult {
    /// Its name in the record: `running`, `succeeded`, `failed`, `stopped`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
        }
    }
}

impl ResultsRecord {
    /// The record written when a run starts (SPEC §8.12). Its exit code and error are what a
    /// reader that does not know `result` (an earlier agent's `agent status`) should see if the
    /// run never replaces it.
    pub fn running(
        (agent_version, git_sha): (&str, &str),
        mode: &str,
        resource_id: &str,
        (package, version): (&str, &str),
        started: &str,
    ) -> Self {
        Self {
            agent_version: agent_version.to_owned(),
            git_sha: git_sha.to_owned(),
            mode: mode.to_owned(),
            resource_id: resource_id.to_owned(),
            package: package.to_owned(),
            version: version.to_owned(),
            started: started.to_owned(),
            finished: started.to_owned(),
            exit_code: 1,
            result: Some(RecordedResult::Running),
            error: Some(unrecorded(mode)),
            operations: Vec::new(),
        }
    }

    /// Whether the record says its run has not finished.
    pub fn is_running(&self) -> bool {
        self.result == Some(RecordedResult::Running)
    }

    /// Where it is kept under `state_dir`: [`path`](fn@path) of its package, version and mode.
    pub fn path(&self, state_dir: &Path) -> PathBuf {
        path(state_dir, &self.package, &self.version, &self.mode)
    }
}

/// What a `running` record means once no agent runs it any more.
pub(crate) fn unrecorded(mode: &str) -> String {
    format!("the last {mode} ended without recording its result")
}

/// What happened to one step or interrupt operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationResult {
    /// The step's path, or the interrupt command line.
    pub operation: String,
    /// `ran` or `skipped`. (Words the agent mostly takes from its own text: a record keeps
    /// one per step, without an allocation of its own for each.)
    pub decision: Cow<'static, str>,
    /// Why it ran or was skipped.
    pub reason: Cow<'static, str>,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub signal: Option<i32>,
    #[serde(default)]
    pub succeeded: Option<bool>,
    #[serde(default)]
    pub duration_ms: Option<u64>,
    /// Host path of the operation's log file, or `not written (<cause>)` when it could not
    /// be created or written (SPEC §8.10); `None` when logs are off.
    #[serde(default)]
    pub log: Option<String>,
    /// The last 4 KiB of its output (lossy UTF-8).
    #[serde(default)]
    pub output_tail: Option<String>,
    /// What the operation's process cost: CPU time, peak memory, output bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Interrupt operations: `<TYPE>_<i>`, the name of its completion marker without
    /// `.complete` (the `operation` of a command that ran is its command line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What counts as success for it, as the error names it: a step's `returncodes`
    /// (`[0, 3]`), `[0]` for an interrupt command, `[0] or SIGTERM` for one that completes
    /// after a reboot (the shutdown kills it). Operations that ran a process; `None` in
    /// records of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<String>,
}

impl OperationResult {
    pub fn skipped(operation: impl Into<String>, reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            operation: operation.into(),
            decision: "skipped".into(),
            reason: reason.into(),
            ..Self::default()
        }
    }

    /// An operation that did not get to run its process (e.g. a missing `env:` variable).
    pub fn not_started(operation: impl Into<String>, reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            operation: operation.into(),
            decision: "ran".into(),
            reason: reason.into(),
            succeeded: Some(false),
            ..Self::default()
        }
    }

    pub fn ran(
        operation: impl Into<String>,
        reason: impl Into<Cow<'static, str>>,
        outcome: &Outcome,
        succeeded: bool,
        log: Option<String>,
    ) -> Self {
        let (exit_code, signal) = match outcome.termination {
            Termination::Exited(c) => (Some(c), None),
            Termination::Signalled(s) => (None, Some(s)),
        };
        Self {
            operation: operation.into(),
            decision: "ran".into(),
            reason: reason.into(),
            exit_code,
            signal,
            succeeded: Some(succeeded),
            duration_ms: Some(u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX)),
            log,
            output_tail: Some(String::from_utf8_lossy(&outcome.tail).into_owned()),
            usage: Some(outcome.usage),
            ..Self::default()
        }
    }

    /// The same, saying what counts as success for it (see [`OperationResult::accepted`]).
    #[must_use]
    pub(crate) fn with_accepted(mut self, accepted: impl Into<String>) -> Self {
        self.accepted = Some(accepted.into());
        self
    }

    /// The same, naming the interrupt operation (`<TYPE>_<i>`).
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

/// `STATE/results/<pkg>/<ver>/<name>.json`.
pub fn path(state_dir: &Path, package: &str, version: &str, name: &str) -> PathBuf {
    state_dir
        .join("results")
        .join(package)
        .join(version)
        .join(format!("{name}.json"))
}

/// Write the record atomically, first cleaning what killed writes left in its directory
/// (SPEC §5). SPEC §8.12: the record is a diagnostic, written by atomic rename (never torn)
/// but not fsynced; a crash may lose the last record, never what decides whether work runs.
pub fn write(fs: &HostFs, file: &Path, record: &ResultsRecord) -> Result<(), HostFsError> {
    if let Some(dir) = file.parent() {
        fs.clean_stale_temps(dir);
    }
    super::write_json_diagnostic(fs, file, record, 0o600)
}

/// Read a record; `None` when missing or unreadable as a record. One larger than
/// `RECORD_BOUND` is corrupt and not read: `HostFsError::TooLarge` (SPEC §5).
pub fn read(fs: &HostFs, file: &Path) -> Result<Option<ResultsRecord>, HostFsError> {
    Ok(fs
        .read(file, RECORD_BOUND)?
        .and_then(|bytes| serde_json::from_slice(&bytes).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn round_trips_through_the_host() {
        let root = tempfile::tempdir().unwrap();
        let fs = HostFs::new(root.path());
        let mut outcome = Outcome::new(Termination::Signalled(9));
        outcome.duration = Duration::from_millis(1500);
        outcome.tail = b"last words\xff".to_vec();
        outcome.usage = Usage {
            user_cpu_us: 1_250_000,
            system_cpu_us: 40,
            max_rss_bytes: 3 << 20,
            stdout_bytes: 17,
            stderr_bytes: 0,
        };
        let record = ResultsRecord {
            agent_version: "1.2.3".into(),
            git_sha: "0123abcd-dirty".into(),
            mode: "apply".into(),
            resource_id: "abc_pkg_1.0.0".into(),
            package: "pkg".into(),
            version: "1.0.0".into(),
            started: "2026-11-30T10:00:00Z".into(),
            finished: "2026-11-30T10:00:02Z".into(),
            exit_code: 1,
            result: Some(RecordedResult::Failed),
            error: Some("boom".into()),
            operations: vec![
                OperationResult::skipped("a.sh", "completion marker present"),
                OperationResult::ran(
                    "b.sh",
                    "no completion marker",
                    &outcome,
                    false,
                    Some("/l/b.log".into()),
                ),
            ],
        };
        let file = path(Path::new("/state"), "pkg", "1.0.0", "apply");
        assert_eq!(file, Path::new("/state/results/pkg/1.0.0/apply.json"));
        assert_eq!(record.path(Path::new("/state")), file);
        write(&fs, &file, &record).unwrap();
        let back = read(&fs, &file).unwrap().unwrap();
        assert_eq!(back, record);
        assert_eq!(back.operations[1].signal, Some(9));
        assert_eq!(
            back.operations[1].output_tail.as_deref(),
            Some("last words\u{fffd}")
        );
        assert_eq!(back.operations[1].duration_ms, Some(1500));
        assert_eq!(back.operations[1].usage, Some(outcome.usage));
        assert_eq!(back.operations[0].usage, None);
        // Records written before the usage figures existed still read.
        let text = std::fs::read_to_string(root.path().join("state/results/pkg/1.0.0/apply.json"))
            .unwrap();
        assert!(text.contains("\"max_rss_bytes\": 3145728"), "{text}");
        let old: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut old = old;
        for op in old["operations"].as_array_mut().unwrap() {
            op.as_object_mut().unwrap().remove("usage");
        }
        // ... and so do records written before the commit was.
        assert_eq!(old["git_sha"], "0123abcd-dirty");
        old.as_object_mut().unwrap().remove("git_sha");
        let back: ResultsRecord = serde_json::from_value(old).unwrap();
        assert_eq!(back.operations[1].usage, None);
        assert_eq!(back.git_sha, "");
    }

    #[test]
    fn the_start_record_says_running_and_records_of_earlier_versions_have_no_result() {
        let r = ResultsRecord::running(
            ("1.2.3", "0123abcd"),
            "apply-check",
            "abc_pkg_1.0.0",
            ("pkg", "1.0.0"),
            "2026-11-30T10:00:00Z",
        );
        let json: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(json["result"], "running");
        assert_eq!(json["git_sha"], "0123abcd");
        assert_eq!(json["finished"], "2026-11-30T10:00:00Z");
        assert_eq!(json["exit_code"], 1);
        assert_eq!(
            json["error"],
            "the last apply-check ended without recording its result"
        );
        assert!(r.is_running());
        let mut old = json;
        old.as_object_mut().unwrap().remove("result");
        let old: ResultsRecord = serde_json::from_value(old).unwrap();
        assert_eq!(old.result, None);
        assert!(!old.is_running());
    }

    #[test]
    fn a_result_is_named_as_the_record_says_it() {
        use RecordedResult::{Failed, Running, Stopped, Succeeded};
        for r in [Running, Succeeded, Failed, Stopped] {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
    }

    #[test]
    fn a_missing_or_corrupt_record_reads_as_none() {
        let root = tempfile::tempdir().unwrap();
        let fs = HostFs::new(root.path());
        let file = Path::new("/r.json");
        assert_eq!(read(&fs, file).unwrap(), None);
        std::fs::write(root.path().join("r.json"), "{").unwrap();
        assert_eq!(read(&fs, file).unwrap(), None);
    }

    #[test]
    fn a_record_larger_than_the_bound_is_an_error_and_is_not_read() {
        let root = tempfile::tempdir().unwrap();
        let fs = HostFs::new(root.path());
        let sparse = std::fs::File::create(root.path().join("r.json")).unwrap();
        sparse.set_len(4 << 30).unwrap();
        let err = read(&fs, Path::new("/r.json")).unwrap_err();
        assert!(matches!(err, HostFsError::TooLarge { .. }), "{err:?}");
    }
}
