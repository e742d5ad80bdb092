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
use crate::host::errors::Chain;
use crate::host::fs::{HostFs, HostFsError};

/// How many logs of one step (or interrupt) are kept.
pub(crate) const RETAINED_LOGS: usize = 5;

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
        let mut dirs: HashMap<PathBuf, IndexedDir> = HashMap::new();
        // A path that is not relative is refused when its log is created.
        let registered = rels
            .into_iter()
            .filter_map(|rel| StepLogs::new(dir, rel).ok());
        for step in registered {
            let steps = &mut dirs.entry(step.dir).or_default().steps;
            steps.entry(step.base.into()).or_default();
        }
        Self {
            dir: dir.to_path_buf(),
            dirs,
        }
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
            dir.steps.insert(step.base.as_str().into(), step.read(fs)?);
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
                if let Some(entry) = Entry::new(nanos, false, index) {
                    // Room for this one only: the first log of a step would otherwise take
                    // room for four, for every step of a large package.
                    logs.reserve_exact(1);
                    logs.push(entry);
                }
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
        step.newest_first(logs);
        let surplus = logs.split_off(keep);
        // Remove every surplus log even if one fails, then report the first failure: the
        // other deletions are still worth doing, and a log that could not be removed stays
        // indexed (it is still there).
        let mut first_error = None;
        for log in surplus {
            let path = step.dir.join(step.name_of(log));
            // Not fsynced: an old log back after a crash is removed by the next retention.
            if let Err(err) = fs.remove_file_unsynced(&path) {
                warn!(file = %path.display(), error = %Chain(&err), "cannot remove old log");
                logs.push(log);
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// The logs of operation `rel` (a step path, or `interrupts/<type>`) under `dir`
/// (`LOGS/<pkg>/<ver>`), newest first: by the parsed timestamp, then the collision index, as
/// retention orders them (SPEC §8.10). Host paths; files whose names do not parse as logs of
/// exactly that operation are left out. `Ok` and empty when there are none.
pub fn logs_of(fs: &HostFs, dir: &Path, rel: &str) -> Result<Vec<PathBuf>, HostFsError> {
    let step = StepLogs::new(dir, rel)?;
    let mut logs = step.read(fs)?;
    step.newest_first(&mut logs);
    Ok(logs
        .into_iter()
        .map(|log| step.dir.join(step.name_of(log)))
        .collect())
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
            // `get` is `None` off a character boundary: no stamp starts there.
            let cut = head.len().checked_sub(len);
            let base = cut.and_then(|cut| head.get(..cut)?.strip_suffix('-'));
            if let Some(base) = base.filter(|base| !out[..k].contains(&Some(*base))) {
                out[k] = Some(base);
                k += 1;
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

    /// The logs of this step alone, read from its directory.
    fn read(&self, fs: &HostFs) -> Result<Vec<Entry>, HostFsError> {
        let mut logs = Vec::new();
        fs.visit_dir(&self.dir, |name| {
            logs.extend(parse_log_name(&self.base, name));
        })?;
        Ok(logs)
    }

    /// Sort `logs` newest first, as retention orders them (SPEC §8.10): by the parsed
    /// timestamp, then the collision index; the name breaks ties (a legacy and a new stamp of
    /// the same second) so the outcome does not depend on directory order.
    fn newest_first(&self, logs: &mut [Entry]) {
        logs.sort_by(|a, b| {
            (b.nanos(), b.index)
                .cmp(&(a.nanos(), a.index))
                .then_with(|| self.name_of(*b).cmp(&self.name_of(*a)))
        });
    }

    /// The name `log` was read from.
    fn name_of(&self, log: Entry) -> String {
        let stamp =
            format_log_stamp(log.nanos(), log.legacy).expect("an indexed stamp formats back");
        self.file_name(&stamp, log.index)
    }
}

/// Whether a failure to create or prune a log is a refusal of the host's layout (a symbolic
/// link, a path leaving ROOT or its directory), which stops the run as for any state path
/// (SPEC §5), rather than log trouble (SPEC §8.10), which does not.
pub(crate) fn is_refusal(err: &HostFsError) -> bool {
    matches!(
        err,
        HostFsError::SymbolicLink { .. }
            | HostFsError::Escapes { .. }
            | HostFsError::NotRelative { .. }
    )
}

/// Where the output of one operation is logged.
#[derive(Debug)]
pub(crate) enum OperationLog {
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
pub(crate) struct InvocationLogs {
    /// `None` when `SKYHOOK_AGENT_WRITE_LOGS` is false.
    index: Option<LogIndex>,
    /// The operation whose log was created last and not yet pruned.
    unpruned: Option<String>,
    warned: bool,
}

impl InvocationLogs {
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
                let cause = Chain(&err).to_string();
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
    pub(crate) fn prune(&mut self, fs: &HostFs, rel: &str) -> Result<(), HostFsError> {
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
mod tests;
