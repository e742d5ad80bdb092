//! Per-operation log files (SPEC §8.10): names, collisions, retention, and what a run does
//! when its logs cannot be written.
//!
//! A stage (or an interrupt run) reads each log directory it writes into once, into a
//! [`LogIndex`], and keeps that index up to date as it creates and prunes logs: naming a log
//! and applying retention then cost the same whatever the number of steps of the package and
//! of logs already in its directory. The package lock (SPEC §11) makes the run the only writer
//! of its logs while it holds the index.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use tracing::{debug, warn};

use crate::compat::timestamp::{format_log_stamp, log_stamp, parse_log_stamp};
use crate::host::fs::{HostFs, HostFsError};

/// How many logs of one step (or interrupt) are kept.
pub const RETAINED_LOGS: usize = 5;

/// A freshly created log file.
#[derive(Debug)]
pub struct LogFile {
    /// Host path (`/var/log/skyhook/pkg/1.0.0/s1.sh-2026-...log`), ROOT not included.
    pub host_path: PathBuf,
    pub file: File,
}

/// The logs of the steps of one run under `LOGS/<pkg>/<ver>`, each directory read once.
#[derive(Debug)]
pub struct LogIndex {
    /// `LOGS/<pkg>/<ver>`, host path.
    dir: PathBuf,
    /// Step log directories (`dir` and the subdirectories of steps with a `/` in their path).
    dirs: HashMap<PathBuf, IndexedDir>,
}

#[derive(Debug, Default)]
struct IndexedDir {
    /// Whether the logs of the steps registered below were read from the directory.
    listed: bool,
    /// The logs of each step, by base name (`s1.sh` of `sub/s1.sh`), in no particular order.
    steps: HashMap<Box<str>, Vec<Entry>>,
}

/// One log of one step: its name is rebuilt from these when it is deleted (a parsed stamp
/// formats back to its exact text), which keeps the index at 24 bytes per log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// Unix seconds and nanoseconds of the stamp.
    secs: i64,
    subsec: u32,
    /// The stamp is the legacy `YYYY-MM-DD-HHMMSS` (no fraction).
    legacy: bool,
    /// 0 for `<base>-<stamp>.log`, n for `<base>-<stamp>-<n>.log`.
    index: u64,
}

const NANOS_PER_SEC: i128 = 1_000_000_000;

impl Entry {
    fn new(nanos: i128, legacy: bool, index: u64) -> Option<Self> {
        Some(Self {
            secs: i64::try_from(nanos.div_euclid(NANOS_PER_SEC)).ok()?,
            subsec: u32::try_from(nanos.rem_euclid(NANOS_PER_SEC)).ok()?,
            legacy,
            index,
        })
    }

    fn nanos(self) -> i128 {
        i128::from(self.secs) * NANOS_PER_SEC + i128::from(self.subsec)
    }
}

impl LogIndex {
    /// An index of the logs under `dir` of the operations `rels` (relative step paths, or
    /// `interrupts/<type>`). Nothing is read until a step's log is first created or pruned;
    /// then its whole directory is read once for every registered step in it.
    pub fn new<'a>(dir: &Path, rels: impl IntoIterator<Item = &'a str>) -> Self {
        let mut index = Self {
            dir: dir.to_path_buf(),
            dirs: HashMap::new(),
        };
        for rel in rels {
            // A path that is not relative is refused when its log is created.
            if let Ok(step) = StepLogs::new(dir, rel) {
                index
                    .dirs
                    .entry(step.dir)
                    .or_default()
                    .steps
                    .entry(step.base.into())
                    .or_default();
            }
        }
        index
    }

    /// The indexed logs of `step`, reading its directory if this run has not yet.
    fn logs_of(&mut self, fs: &HostFs, step: &StepLogs) -> Result<&mut Vec<Entry>, HostFsError> {
        let dir = self.dirs.entry(step.dir.clone()).or_default();
        if !dir.listed {
            dir.steps.entry(step.base.as_str().into()).or_default();
            let steps = &mut dir.steps;
            let listed = fs.visit_dir(&step.dir, |name| {
                for base in candidate_bases(name).into_iter().flatten() {
                    if let Some(logs) = steps.get_mut(base) {
                        logs.extend(parse_log_name(base, name));
                    }
                }
            });
            if let Err(err) = listed {
                // Tried again by the next operation; nothing half-read stays behind.
                steps.values_mut().for_each(Vec::clear);
                return Err(err);
            }
            dir.listed = true;
        } else if !dir.steps.contains_key(step.base.as_str()) {
            // Not registered up front: read the directory again, for this step alone.
            let mut logs = Vec::new();
            fs.visit_dir(&step.dir, |name| {
                logs.extend(parse_log_name(&step.base, name));
            })?;
            dir.steps.insert(step.base.as_str().into(), logs);
        }
        Ok(dir
            .steps
            .get_mut(step.base.as_str())
            .expect("inserted above"))
    }

    /// Create the log file of one operation: `<dir>/<dirname(rel)>/<basename(rel)>-<stamp>.log`,
    /// with `-1`, `-2`, ... on collision (next = max existing index + 1).
    pub fn create(
        &mut self,
        fs: &HostFs,
        rel: &str,
        now: SystemTime,
    ) -> Result<LogFile, HostFsError> {
        let step = StepLogs::new(&self.dir, rel)?;
        let stamp = log_stamp(now);
        let nanos = parse_log_stamp(&stamp).expect("a written stamp parses");
        let logs = self.logs_of(fs, &step)?;
        // SPEC §8.10: an index is never reused, so a log deleted by retention cannot come back
        // under its old name and be mistaken for an older one. Index 0 is the unsuffixed name.
        let mut index = logs
            .iter()
            .filter(|log| !log.legacy && log.nanos() == nanos)
            .map(|log| log.index + 1)
            .max()
            .unwrap_or(0);
        loop {
            let host_path = HostFs::clean(&step.dir.join(step.file_name(&stamp, index)))?;
            if let Some(file) = fs.create_new(&host_path)? {
                logs.extend(Entry::new(nanos, false, index));
                return Ok(LogFile { host_path, file });
            }
            // Taken although not indexed (a file another writer made, same nanosecond): the
            // next one.
            index += 1;
        }
    }

    /// Keep the `keep` newest logs of `rel` (by parsed timestamp, then collision index);
    /// files whose names do not parse as logs of exactly that step are ignored.
    pub fn retain(&mut self, fs: &HostFs, rel: &str, keep: usize) -> Result<(), HostFsError> {
        let step = StepLogs::new(&self.dir, rel)?;
        let logs = self.logs_of(fs, &step)?;
        if logs.len() <= keep {
            return Ok(());
        }
        // Newest first; the name breaks ties (a legacy and a new stamp of the same second) so
        // the outcome does not depend on directory order.
        logs.sort_by(|a, b| {
            (b.nanos(), b.index)
                .cmp(&(a.nanos(), a.index))
                .then_with(|| step.name_of(*b).cmp(&step.name_of(*a)))
        });
        let surplus = logs.split_off(keep);
        // Remove every surplus log even if one fails, then report the first failure: the
        // other deletions are still worth doing, and a log that could not be removed stays
        // indexed (it is still there).
        let mut first_error = None;
        for log in surplus {
            let path = step.dir.join(step.name_of(log));
            // Not fsynced: an old log back after a crash is removed by the next retention.
            if let Err(err) = fs.remove_file_unsynced(&path) {
                warn!(file = %path.display(), error = %error_chain(&err), "cannot remove old log");
                logs.push(log);
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// The base names `name` could be a log of: what precedes `-<stamp>.log` or
/// `-<stamp>-<n>.log` for a stamp of either format. At most one parse per base exists (the
/// base fixes the rest of the name), so a name is indexed once for each step it belongs to.
fn candidate_bases(name: &str) -> [Option<&str>; 4] {
    const STAMP_LENGTHS: [usize; 2] = [
        "2026-11-30-102740".len(),
        "2026-11-30-102740.123456789".len(),
    ];
    let mut out = [None; 4];
    let Some(rest) = name.strip_suffix(".log") else {
        return out;
    };
    let heads = [Some(rest), rest.rsplit_once('-').map(|(head, _)| head)];
    let mut k = 0;
    for head in heads.into_iter().flatten() {
        for len in STAMP_LENGTHS {
            let Some(cut) = head.len().checked_sub(len) else {
                continue;
            };
            if !head.is_char_boundary(cut) {
                continue;
            }
            if let Some(base) = head[..cut].strip_suffix('-') {
                if !out[..k].contains(&Some(base)) {
                    out[k] = Some(base);
                    k += 1;
                }
            }
        }
    }
    out
}

/// Parse `name` as exactly `<base>-<stamp>[-<n>].log`. Parsing the whole remainder after the
/// prefix is what keeps step `x` away from `x-y-<stamp>.log` of step `x-y` (the Python agent
/// matched the prefix alone and deleted them), and away from the legacy `.log.err` files.
fn parse_log_name(base: &str, name: &str) -> Option<Entry> {
    const LEGACY_LEN: usize = "2026-11-30-102740".len();
    let rest = name
        .strip_prefix(base)?
        .strip_prefix('-')?
        .strip_suffix(".log")?;
    if let Some(nanos) = parse_log_stamp(rest) {
        return Entry::new(nanos, rest.len() == LEGACY_LEN, 0);
    }
    let (stamp, index) = rest.rsplit_once('-')?;
    // Only the decimal forms `create` writes: 1, 2, ..., no sign, no leading zero.
    if index.is_empty() || index.starts_with('0') || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Entry::new(
        parse_log_stamp(stamp)?,
        stamp.len() == LEGACY_LEN,
        index.parse().ok()?,
    )
}

/// Where the logs of one step live and how they are named.
struct StepLogs {
    /// Host directory holding the logs: `<dir>/<dirname(rel)>`.
    dir: PathBuf,
    /// `basename(rel)`: every log name of this step starts with it and `-`.
    base: String,
}

impl StepLogs {
    fn new(dir: &Path, rel: &str) -> Result<Self, HostFsError> {
        let not_relative = || HostFsError::NotRelative {
            path: rel.to_owned(),
        };
        let mut parts = Vec::new();
        for component in Path::new(rel).components() {
            match component {
                Component::Normal(part) => parts.push(part),
                Component::CurDir => {}
                Component::RootDir | Component::ParentDir | Component::Prefix(_) => {
                    return Err(not_relative());
                }
            }
        }
        let base = parts.pop().ok_or_else(not_relative)?;
        let base = base.to_str().ok_or_else(not_relative)?;
        let mut log_dir = dir.to_path_buf();
        log_dir.extend(parts);
        Ok(Self {
            dir: log_dir,
            base: base.to_owned(),
        })
    }

    fn file_name(&self, stamp: &str, index: u64) -> String {
        if index == 0 {
            format!("{}-{stamp}.log", self.base)
        } else {
            format!("{}-{stamp}-{index}.log", self.base)
        }
    }

    /// The name `log` was read from.
    fn name_of(&self, log: Entry) -> String {
        let stamp =
            format_log_stamp(log.nanos(), log.legacy).expect("an indexed stamp formats back");
        self.file_name(&stamp, log.index)
    }
}

/// An error and its causes on one line (`creating directory /var/log/x: Read-only file
/// system (os error 30)`): SPEC §5 wants the OS cause in every message about a file.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Whether a failure to create or prune a log is a refusal of the host's layout (a symbolic
/// link, a path leaving ROOT or its directory), which stops the run as for any state path
/// (SPEC §5), rather than log trouble (SPEC §8.10), which does not.
pub fn is_refusal(err: &HostFsError) -> bool {
    matches!(
        err,
        HostFsError::SymbolicLink { .. }
            | HostFsError::Escapes { .. }
            | HostFsError::NotRelative { .. }
    )
}

/// Where the output of one operation is logged.
#[derive(Debug)]
pub enum OperationLog {
    /// `SKYHOOK_AGENT_WRITE_LOGS` is false.
    Off,
    Open(LogFile),
    /// SPEC §8.10: the log could not be created; the operation runs as if logs were off.
    NotWritten {
        cause: String,
    },
}

impl OperationLog {
    /// The file the operation's output goes to, if any.
    pub fn file(&mut self) -> Option<&mut File> {
        match self {
            Self::Open(log) => Some(&mut log.file),
            Self::Off | Self::NotWritten { .. } => None,
        }
    }
}

/// The logs of one stage or interrupt run, and the rule for log trouble (SPEC §8.10): a log
/// that cannot be created or written is warned about once per run, with its cause; the
/// operation runs without it (its output still streams to the agent's stdout and stderr), the
/// results record says `not written (<cause>)`, and the exit code is the steps' alone.
#[derive(Debug)]
pub struct RunLogs {
    /// `None` when `SKYHOOK_AGENT_WRITE_LOGS` is false.
    index: Option<LogIndex>,
    /// The operation whose log was created last and not yet pruned.
    unpruned: Option<String>,
    warned: bool,
}

impl RunLogs {
    /// The logs of operations `rels` under `dir`, or none at all when `write` is false.
    pub fn new<'a>(write: bool, dir: &Path, rels: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            index: write.then(|| LogIndex::new(dir, rels)),
            unpruned: None,
            warned: false,
        }
    }

    /// Open the log of operation `rel`. Only a refusal (SPEC §5) is an error; any other
    /// failure is log trouble and gives [`OperationLog::NotWritten`].
    pub fn open(
        &mut self,
        fs: &HostFs,
        rel: &str,
        now: SystemTime,
    ) -> Result<OperationLog, HostFsError> {
        let Some(index) = self.index.as_mut() else {
            return Ok(OperationLog::Off);
        };
        match index.create(fs, rel, now) {
            Ok(log) => {
                self.unpruned = Some(rel.to_owned());
                Ok(OperationLog::Open(log))
            }
            Err(err) if is_refusal(&err) => Err(err),
            Err(err) => {
                let cause = error_chain(&err);
                self.trouble(rel, &cause);
                Ok(OperationLog::NotWritten { cause })
            }
        }
    }

    /// After the operation: the value of the results record's `log` field (the log's host
    /// path, or `not written (<cause>)`; `None` when logs are off). `write_error` is the first
    /// error writing the log, if any.
    pub fn close(
        &mut self,
        rel: &str,
        log: &OperationLog,
        write_error: Option<&str>,
    ) -> Option<String> {
        match (log, write_error) {
            (OperationLog::Off, _) => None,
            (OperationLog::NotWritten { cause }, _) => Some(format!("not written ({cause})")),
            (OperationLog::Open(file), Some(err)) => {
                let cause = format!("writing {}: {err}", file.host_path.display());
                self.trouble(rel, &cause);
                Some(format!("not written ({cause})"))
            }
            (OperationLog::Open(file), None) => Some(file.host_path.display().to_string()),
        }
    }

    /// Retention (SPEC §8.10) for `rel`, if this run created a log of it since the last
    /// call: an operation that ran without a log prunes nothing, as with logs off. Only a
    /// refusal is an error; a log that cannot be removed is warned about.
    pub fn prune(&mut self, fs: &HostFs, rel: &str) -> Result<(), HostFsError> {
        if self.unpruned.as_deref() != Some(rel) {
            return Ok(());
        }
        self.unpruned = None;
        let Some(index) = self.index.as_mut() else {
            return Ok(());
        };
        match index.retain(fs, rel, RETAINED_LOGS) {
            Err(err) if is_refusal(&err) => Err(err),
            // Each failed removal was warned about with its file.
            Ok(()) | Err(_) => Ok(()),
        }
    }

    fn trouble(&mut self, rel: &str, cause: &str) {
        if self.warned {
            debug!(operation = rel, error = cause, "log not written");
        } else {
            self.warned = true;
            warn!(
                operation = rel,
                error = cause,
                "cannot write the log; output is still streamed and the run goes on without it \
                 (warned once per run)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, symlink};
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    const LOG_DIR: &str = "/var/log/skyhook/sk1/pkg/1.0.0";

    /// 2026-11-30T10:27:28.136997Z
    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::new(1_796_034_448, 136_997_000)
    }

    fn host() -> (tempfile::TempDir, HostFs) {
        let dir = tempfile::tempdir().unwrap();
        let fs = HostFs::new(dir.path());
        (dir, fs)
    }

    /// The first log of `rel` in a run: an index of its own.
    fn create(fs: &HostFs, dir: &Path, rel: &str, now: SystemTime) -> Result<LogFile, HostFsError> {
        LogIndex::new(dir, [rel]).create(fs, rel, now)
    }

    /// Retention of `rel` in a run that created no log of it yet: an index of its own.
    fn retain(fs: &HostFs, dir: &Path, rel: &str, keep: usize) -> Result<(), HostFsError> {
        LogIndex::new(dir, [rel]).retain(fs, rel, keep)
    }

    fn names_in(path: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(path)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    fn touch(root: &Path, names: &[&str]) {
        let dir = root.join(LOG_DIR.trim_start_matches('/'));
        std::fs::create_dir_all(&dir).unwrap();
        for name in names {
            std::fs::write(dir.join(name), name).unwrap();
        }
    }

    #[test]
    fn create_names_the_file_after_the_step_and_the_stamp() {
        let (dir, fs) = host();
        let mut log = create(&fs, Path::new(LOG_DIR), "s1.sh", now()).unwrap();
        assert_eq!(
            log.host_path,
            Path::new("/var/log/skyhook/sk1/pkg/1.0.0/s1.sh-2026-11-30-102728.136997000.log")
        );
        log.file.write_all(b"out\nerr\n").unwrap();
        let real = fs.resolve(&log.host_path).unwrap();
        assert_eq!(std::fs::read(&real).unwrap(), b"out\nerr\n");
        assert_eq!(std::fs::metadata(&real).unwrap().mode() & 0o777, 0o600);
        assert!(real.starts_with(dir.path()));
    }

    #[test]
    fn create_puts_subdirectory_steps_in_subdirectories() {
        let (_dir, fs) = host();
        let log = create(&fs, Path::new(LOG_DIR), "sub/dir/s.sh", now()).unwrap();
        assert_eq!(
            log.host_path,
            Path::new(
                "/var/log/skyhook/sk1/pkg/1.0.0/sub/dir/s.sh-2026-11-30-102728.136997000.log"
            )
        );
        let log = create(&fs, Path::new(LOG_DIR), "interrupts/service_restart", now()).unwrap();
        assert_eq!(
            log.host_path,
            Path::new(
                "/var/log/skyhook/sk1/pkg/1.0.0/interrupts/service_restart-2026-11-30-102728.136997000.log"
            )
        );
    }

    #[test]
    fn create_numbers_collisions_from_one() {
        let (_dir, fs) = host();
        let names: Vec<String> = (0..4)
            .map(|_| {
                let log = create(&fs, Path::new(LOG_DIR), "s1.sh", now()).unwrap();
                log.host_path
                    .file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(
            names,
            [
                "s1.sh-2026-11-30-102728.136997000.log",
                "s1.sh-2026-11-30-102728.136997000-1.log",
                "s1.sh-2026-11-30-102728.136997000-2.log",
                "s1.sh-2026-11-30-102728.136997000-3.log",
            ]
        );
    }

    #[test]
    fn create_never_reuses_an_index() {
        let (dir, fs) = host();
        // Retention removed the unsuffixed log and -1; -2 is the newest of this stamp.
        touch(
            dir.path(),
            &[
                "s1.sh-2026-11-30-102728.136997000-2.log",
                "s1.sh-2026-11-30-102728.136997000-10.log",
            ],
        );
        let log = create(&fs, Path::new(LOG_DIR), "s1.sh", now()).unwrap();
        assert_eq!(
            log.host_path.file_name().unwrap(),
            "s1.sh-2026-11-30-102728.136997000-11.log"
        );
    }

    #[test]
    fn create_ignores_other_stamps_and_other_steps() {
        let (dir, fs) = host();
        touch(
            dir.path(),
            &[
                "s1.sh-2026-11-30-102728.136997001-4.log",
                "s1.sh-2026-11-30-102728-7.log",
                "s1.sh-x-2026-11-30-102728.136997000.log",
            ],
        );
        let log = create(&fs, Path::new(LOG_DIR), "s1.sh", now()).unwrap();
        assert_eq!(
            log.host_path.file_name().unwrap(),
            "s1.sh-2026-11-30-102728.136997000.log"
        );
    }

    #[test]
    fn create_and_retain_refuse_paths_leaving_the_log_directory() {
        let (dir, fs) = host();
        for rel in ["", "/etc/passwd", "../x", "sub/../../x", "."] {
            let err = create(&fs, Path::new(LOG_DIR), rel, now()).unwrap_err();
            assert!(
                matches!(err, HostFsError::NotRelative { .. }),
                "{rel:?}: {err:?}"
            );
            assert!(retain(&fs, Path::new(LOG_DIR), rel, 5).is_err());
        }
        assert_eq!(
            HostFsError::NotRelative {
                path: "../x".into()
            }
            .to_string(),
            "../x is not a relative path below its directory"
        );
        assert!(names_in(dir.path()).is_empty());
    }

    #[test]
    fn retain_keeps_the_newest_across_legacy_and_new_stamps() {
        let (dir, fs) = host();
        touch(
            dir.path(),
            &[
                "x-2026-11-30-102859.log",
                "x-2026-11-30-102901.log",
                "x-2026-11-30-102903.log",
                "x-2026-11-30-102903.000000001.log",
                "x-2026-11-30-102905.500000000.log",
                "x-2026-11-30-102906.log",
                "x-2026-11-30-102908.250000000.log",
            ],
        );
        retain(&fs, Path::new(LOG_DIR), "x", RETAINED_LOGS).unwrap();
        assert_eq!(
            names_in(&dir.path().join(LOG_DIR.trim_start_matches('/'))),
            [
                "x-2026-11-30-102903.000000001.log",
                "x-2026-11-30-102903.log",
                "x-2026-11-30-102905.500000000.log",
                "x-2026-11-30-102906.log",
                "x-2026-11-30-102908.250000000.log",
            ]
        );
    }

    #[test]
    fn retain_orders_collisions_after_their_stamp() {
        let (dir, fs) = host();
        touch(
            dir.path(),
            &[
                "x-2026-11-30-102900.000000000-1.log",
                "x-2026-11-30-102900.000000000-2.log",
                "x-2026-11-30-102900.000000000-10.log",
                "x-2026-11-30-102900.000000000.log",
                "x-2026-11-30-102859.999999999-9.log",
            ],
        );
        retain(&fs, Path::new(LOG_DIR), "x", 2).unwrap();
        assert_eq!(
            names_in(&dir.path().join(LOG_DIR.trim_start_matches('/'))),
            [
                "x-2026-11-30-102900.000000000-10.log",
                "x-2026-11-30-102900.000000000-2.log"
            ]
        );
    }

    #[test]
    fn retain_leaves_other_steps_with_the_same_prefix_alone() {
        let (dir, fs) = host();
        // Transcript 27: step `x` and step `x-y` share a log directory.
        let other_step = [
            "x-y-2026-11-30-102900.log.err",
            "x-y-2026-11-30-102909.log",
            "x-y-2026-11-30-102912.log",
            "x-y-2026-11-30-102914.log",
            "x-y-2026-11-30-102915.000000000.log",
            "x-y-2026-11-30-102916.000000000-1.log",
        ];
        touch(dir.path(), &other_step);
        touch(
            dir.path(),
            &["x-2026-11-30-102908.log", "x-2026-11-30-102911.log"],
        );
        retain(&fs, Path::new(LOG_DIR), "x", 1).unwrap();
        let mut expected: Vec<&str> = other_step.to_vec();
        expected.push("x-2026-11-30-102911.log");
        expected.sort_unstable();
        assert_eq!(
            names_in(&dir.path().join(LOG_DIR.trim_start_matches('/'))),
            expected
        );
    }

    #[test]
    fn retain_ignores_legacy_err_files_and_unrelated_names() {
        let (dir, fs) = host();
        let ignored = [
            "x-2026-11-30-102859.log.err",
            "x-2026-11-30-102901.log.err",
            "x-2026-11-30-102901.log.1",
            "x-2026-11-30-102901-01.log",
            "x-2026-11-30-102901--1.log",
            "x-2026-11-30-102901-.log",
            "x-2026-11-30.log",
            ".x-2026-11-30-102901.log.tmp.1.ab",
            "x-2026-11-30-102901.12.log",
            "x.log",
            "notes.txt",
        ];
        touch(dir.path(), &ignored);
        touch(
            dir.path(),
            &["x-2026-11-30-102908.log", "x-2026-11-30-102911.log"],
        );
        retain(&fs, Path::new(LOG_DIR), "x", 0).unwrap();
        let mut expected = ignored.to_vec();
        expected.sort_unstable();
        assert_eq!(
            names_in(&dir.path().join(LOG_DIR.trim_start_matches('/'))),
            expected
        );
    }

    #[test]
    fn retain_works_in_subdirectories_and_on_missing_directories() {
        let (dir, fs) = host();
        retain(&fs, Path::new(LOG_DIR), "sub/s.sh", 5).unwrap();
        for second in 0..8 {
            let t = now() + Duration::from_secs(second);
            create(&fs, Path::new(LOG_DIR), "sub/s.sh", t).unwrap();
        }
        create(&fs, Path::new(LOG_DIR), "s.sh", now()).unwrap();
        retain(&fs, Path::new(LOG_DIR), "sub/s.sh", RETAINED_LOGS).unwrap();
        let log_dir = dir.path().join(LOG_DIR.trim_start_matches('/'));
        assert_eq!(
            names_in(&log_dir.join("sub")),
            [
                "s.sh-2026-11-30-102731.136997000.log",
                "s.sh-2026-11-30-102732.136997000.log",
                "s.sh-2026-11-30-102733.136997000.log",
                "s.sh-2026-11-30-102734.136997000.log",
                "s.sh-2026-11-30-102735.136997000.log",
            ]
        );
        assert_eq!(
            names_in(&log_dir),
            ["s.sh-2026-11-30-102728.136997000.log", "sub"]
        );
    }

    #[test]
    fn retain_refuses_to_delete_through_a_symbolic_link() {
        let (dir, fs) = host();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("victim"), "keep").unwrap();
        touch(dir.path(), &["x-2026-11-30-102911.log"]);
        let log_dir = dir.path().join(LOG_DIR.trim_start_matches('/'));
        symlink(
            outside.path().join("victim"),
            log_dir.join("x-2026-11-30-102859.log"),
        )
        .unwrap();
        let err = retain(&fs, Path::new(LOG_DIR), "x", 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/var/log/skyhook/sk1/pkg/1.0.0/x-2026-11-30-102859.log is a symbolic link"
        );
        assert_eq!(
            std::fs::read(outside.path().join("victim")).unwrap(),
            b"keep"
        );
        assert_eq!(
            names_in(&log_dir),
            ["x-2026-11-30-102859.log", "x-2026-11-30-102911.log"]
        );
    }

    /// Every file under `path`, relative, sorted.
    fn tree(path: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![path.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let entry = entry.unwrap();
                if entry.file_type().unwrap().is_dir() {
                    stack.push(entry.path());
                } else {
                    let rel = entry.path().strip_prefix(path).unwrap().to_owned();
                    out.push(rel.display().to_string());
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn a_run_long_index_names_and_prunes_as_a_listing_per_operation_would() {
        // The same operations, once through one index for the whole run and once listing the
        // directory for every operation (an index per call), give the same files.
        let rels = ["x", "x-y", "sub/s.sh", "x.sh"];
        let seeded = [
            "x-2026-11-30-102727.log",
            "x-2026-11-30-102727.log.err",
            "x-2026-11-30-102728.136997000-4.log",
            "x-y-2026-11-30-102700.log",
            "x.sh-2026-11-30-102728.000000000.log",
            "x.sh-2026-11-30-102728.log",
            "notes.txt",
        ];
        let run = |per_call: bool| {
            let (dir, fs) = host();
            touch(dir.path(), &seeded);
            let mut index = LogIndex::new(Path::new(LOG_DIR), rels);
            for round in 0..9u64 {
                for (i, rel) in rels.iter().enumerate() {
                    // Rounds 0-2 share one stamp (collisions); later rounds move on.
                    let t = now() + Duration::from_secs(round.saturating_sub(2) * 10 + i as u64);
                    let keep = if round == 4 { 2 } else { RETAINED_LOGS };
                    if per_call {
                        create(&fs, Path::new(LOG_DIR), rel, t).unwrap();
                        retain(&fs, Path::new(LOG_DIR), rel, keep).unwrap();
                    } else {
                        index.create(&fs, rel, t).unwrap();
                        index.retain(&fs, rel, keep).unwrap();
                    }
                }
            }
            tree(&dir.path().join(LOG_DIR.trim_start_matches('/')))
        };
        let listed = run(true);
        assert_eq!(run(false), listed);
        // Five of each step, the untouched files, and the legacy `.log.err`.
        assert_eq!(listed.len(), 4 * 5 + 2, "{listed:?}");
        assert!(listed.contains(&"notes.txt".to_owned()));
        assert!(listed.contains(&"x-2026-11-30-102727.log.err".to_owned()));
    }

    #[test]
    fn a_legacy_and_a_new_stamp_of_the_same_second_are_ordered_by_name() {
        for (names, kept) in [
            (
                [
                    "x-2026-11-30-102903.log",
                    "x-2026-11-30-102903.000000000.log",
                ],
                "x-2026-11-30-102903.log",
            ),
            (
                [
                    "x-2026-11-30-102903-3.log",
                    "x-2026-11-30-102903.000000000-3.log",
                ],
                "x-2026-11-30-102903.000000000-3.log",
            ),
        ] {
            let (dir, fs) = host();
            touch(dir.path(), &names);
            retain(&fs, Path::new(LOG_DIR), "x", 1).unwrap();
            assert_eq!(
                names_in(&dir.path().join(LOG_DIR.trim_start_matches('/'))),
                [kept]
            );
        }
    }

    #[test]
    fn an_index_reads_each_directory_once_per_run() {
        let (dir, fs) = host();
        let mut index = LogIndex::new(Path::new(LOG_DIR), ["x", "y"]);
        index.create(&fs, "x", now()).unwrap();
        // Written behind the index's back after its one listing: not seen by retention ...
        touch(
            dir.path(),
            &["y-2020-01-01-000000.log", "x-2020-01-01-000000.log"],
        );
        index.create(&fs, "y", now()).unwrap();
        index.retain(&fs, "x", 1).unwrap();
        index.retain(&fs, "y", 1).unwrap();
        let log_dir = dir.path().join(LOG_DIR.trim_start_matches('/'));
        assert!(log_dir.join("y-2020-01-01-000000.log").exists());
        assert!(log_dir.join("x-2020-01-01-000000.log").exists());
        // ... and a name taken behind its back is still never overwritten.
        touch(dir.path(), &["x-2026-11-30-102728.136997000-1.log"]);
        let log = index.create(&fs, "x", now()).unwrap();
        assert_eq!(
            log.host_path.file_name().unwrap(),
            "x-2026-11-30-102728.136997000-2.log"
        );
        assert_eq!(
            std::fs::read(log_dir.join("x-2026-11-30-102728.136997000-1.log")).unwrap(),
            b"x-2026-11-30-102728.136997000-1.log"
        );
    }

    #[test]
    fn an_index_reads_again_for_a_step_it_was_not_told_about() {
        let (dir, fs) = host();
        touch(
            dir.path(),
            &["z-2020-01-01-000000.log", "z-2020-01-01-000001.log"],
        );
        let mut index = LogIndex::new(Path::new(LOG_DIR), ["x"]);
        index.create(&fs, "x", now()).unwrap();
        index.retain(&fs, "z", 1).unwrap();
        assert_eq!(
            names_in(&dir.path().join(LOG_DIR.trim_start_matches('/'))),
            [
                "x-2026-11-30-102728.136997000.log",
                "z-2020-01-01-000001.log"
            ]
        );
    }

    #[test]
    fn candidate_bases_find_every_step_a_name_can_belong_to() {
        assert_eq!(
            candidate_bases("x-y-2026-11-30-102903.log"),
            [Some("x-y"), None, None, None]
        );
        assert_eq!(
            candidate_bases("a-2026-11-30-102903.000000001-12.log"),
            [Some("a"), None, None, None]
        );
        assert_eq!(candidate_bases("x.log.err"), [None; 4]);
        assert_eq!(candidate_bases("-2026-11-30-102903.log")[0], Some(""));
        // Multi-byte names near the cut do not panic.
        assert_eq!(candidate_bases("ééééééééééééééééééé.log"), [None; 4]);
    }

    #[test]
    fn log_trouble_is_a_log_not_written_and_a_refusal_an_error() {
        let (dir, fs) = host();
        // LOGS/<pkg> is a file: the directory cannot be created.
        std::fs::create_dir_all(dir.path().join("var/log/skyhook/sk1")).unwrap();
        std::fs::write(dir.path().join("var/log/skyhook/sk1/pkg"), "").unwrap();
        let mut logs = RunLogs::new(true, Path::new(LOG_DIR), ["s.sh"]);
        let log = logs.open(&fs, "s.sh", now()).unwrap();
        let OperationLog::NotWritten { cause } = &log else {
            panic!("{log:?}");
        };
        assert_eq!(cause, "/var/log/skyhook/sk1/pkg is not a directory");
        assert_eq!(
            logs.close("s.sh", &log, None).as_deref(),
            Some("not written (/var/log/skyhook/sk1/pkg is not a directory)")
        );
        // Nothing was created, so nothing is pruned (and nothing fails).
        logs.prune(&fs, "s.sh").unwrap();

        // A link in the log path stays a refusal (SPEC §5).
        let (dir, fs) = host();
        std::fs::create_dir_all(dir.path().join("var/log/skyhook")).unwrap();
        symlink("/tmp", dir.path().join("var/log/skyhook/sk1")).unwrap();
        let mut logs = RunLogs::new(true, Path::new(LOG_DIR), ["s.sh"]);
        let err = logs.open(&fs, "s.sh", now()).unwrap_err();
        assert_eq!(err.to_string(), "/var/log/skyhook/sk1 is a symbolic link");
    }

    #[test]
    fn a_log_that_failed_to_write_is_recorded_as_not_written() {
        let (_dir, fs) = host();
        let mut logs = RunLogs::new(true, Path::new(LOG_DIR), ["s.sh"]);
        let log = logs.open(&fs, "s.sh", now()).unwrap();
        assert!(matches!(log, OperationLog::Open(_)));
        assert_eq!(
            logs.close("s.sh", &log, Some("No space left on device (os error 28)"))
                .as_deref(),
            Some(
                "not written (writing /var/log/skyhook/sk1/pkg/1.0.0/\
                 s.sh-2026-11-30-102728.136997000.log: No space left on device (os error 28))"
            )
        );
        let fine = logs.open(&fs, "s.sh", now()).unwrap();
        assert_eq!(
            logs.close("s.sh", &fine, None).as_deref(),
            Some("/var/log/skyhook/sk1/pkg/1.0.0/s.sh-2026-11-30-102728.136997000-1.log")
        );
        let mut off = RunLogs::new(false, Path::new(LOG_DIR), ["s.sh"]);
        let log = off.open(&fs, "s.sh", now()).unwrap();
        assert!(matches!(log, OperationLog::Off));
        assert_eq!(off.close("s.sh", &log, None), None);
    }
}
