//! Advisory locks serializing agents on one host (SPEC §11, ext): `STATE/locks/<pkg>.lock`
//! while a stage of that package runs, `STATE/locks/interrupt-<RID>.lock` while an interrupt
//! runs. `flock` semantics: a lock held by a dead process, or from an earlier boot, is gone.
//!
//! The lock file also says who holds it and, while an operation runs, which process group
//! runs it (SPEC §10): an agent killed outright (SIGKILL outside a container) leaves that
//! group running, and the next agent to take the lock waits for it instead of starting the
//! same step beside it.
//!
//! ```text
//! pid=4711 boot_id=0d5c… started=2026-01-01T00:00:00.000000000Z
//! running: pgid=4712 start_ticks=81234 pid_ns=4026531836 operation="/var/lib/…/apply.sh"
//! ```

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::signal::killpg;
use nix::unistd::Pid;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::compat::timestamp;
use crate::exec::GroupRecorder;
use crate::host::fs::{HostFs, HostFsError, RECORD_BOUND};

/// How often a waiting agent retries.
const POLL: Duration = Duration::from_millis(100);

/// Why a lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("opening lock {path}")]
    Open {
        path: String,
        #[source]
        source: HostFsError,
    },
    #[error("locking {path}")]
    Lock {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("agent stopped after receiving a termination signal")]
    Stopped,
}

impl LockError {
    /// [`LockError::Open`] of the lock file at `host_path`, for `map_err`.
    fn open(host_path: &Path) -> impl FnOnce(HostFsError) -> Self + '_ {
        |source| Self::Open {
            path: host_path.display().to_string(),
            source,
        }
    }

    /// [`LockError::Lock`] of the lock file at `host_path`.
    fn lock(host_path: &Path, errno: Errno) -> Self {
        Self::Lock {
            path: host_path.display().to_string(),
            source: errno.into(),
        }
    }
}

/// A held lock; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct Lock {
    flock: Flock<File>,
    path: PathBuf,
    /// The holder line written into the lock file.
    holder: String,
}

impl Lock {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records each operation's process group in the lock file while it runs (SPEC §10), for
    /// [`crate::exec::ProcessRunner::recording`]. `None` if the file cannot be shared.
    pub fn group_recorder(&self) -> Option<Arc<dyn GroupRecorder>> {
        let file = self.flock.try_clone().ok()?;
        let len = self.flock.metadata().ok()?.len();
        Some(Arc::new(LockFileRecorder {
            file: Mutex::new((file, len)),
            holder: self.holder.clone(),
        }))
    }
}

/// Writes the running operation's group into the lock file.
#[derive(Debug)]
struct LockFileRecorder {
    /// The lock file and the length of its text: this agent holds the lock, so nothing else
    /// writes it, and the length need not be asked again (one system call less per write).
    file: Mutex<(File, u64)>,
    holder: String,
}

impl LockFileRecorder {
    fn write(&self, text: &str) {
        let mut guard = self.file.lock().expect("lock file");
        let (file, len) = &mut *guard;
        if overwrite_from(file, *len, text).is_ok() {
            *len = text.len() as u64;
        } else if let Ok(meta) = file.metadata() {
            *len = meta.len();
        }
    }
}

/// The holder line this process writes into a lock it takes (read back by [`Holder::parse`]).
fn holder_text(boot_id: Option<&str>) -> String {
    format!(
        "pid={} boot_id={} started={}\n",
        std::process::id(),
        boot_id.unwrap_or("unknown"),
        timestamp::rfc3339_nano(SystemTime::now())
    )
}

/// Replace the lock file's text in place (a new file would be a new inode, outside the lock):
/// one write covering the old text (padded with spaces), then the new length. A kill in
/// between leaves trailing spaces, never a record cut short or a stale line.
fn overwrite(file: &File, text: &str) -> std::io::Result<()> {
    overwrite_from(file, file.metadata()?.len(), text)
}

/// [`overwrite`] of a file whose text is `old` bytes long.
fn overwrite_from(file: &File, old: u64, text: &str) -> std::io::Result<()> {
    let mut bytes = text.as_bytes().to_vec();
    if let Ok(old) = usize::try_from(old) {
        if old > bytes.len() && old <= MAX_LOCK_TEXT {
            bytes.resize(old, b' ');
        } else if old > bytes.len() {
            file.set_len(0)?;
        }
    }
    file.write_all_at(&bytes, 0)?;
    // Padded over a longer text: cut to the new one (otherwise the write gave the file its
    // length already).
    if bytes.len() != text.len() {
        file.set_len(text.len() as u64)?;
    }
    Ok(())
}

/// More than the agent ever writes into a lock file.
const MAX_LOCK_TEXT: usize = 4096;

impl GroupRecorder for LockFileRecorder {
    fn started(&self, pgid: i32, operation: &str) {
        // Without the start time a reused pid could be taken for the group: record nothing.
        let Some(group) = RunningGroup::of(pgid, operation) else {
            return;
        };
        self.write(&format!("{}{}\n", self.holder, group.render()));
    }

    fn finished(&self) {
        self.write(&self.holder);
    }
}

/// An operation's process group as the lock file records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunningGroup {
    pub pgid: i32,
    /// Start time of the group leader, in clock ticks after boot (`/proc/<pid>/stat`).
    pub start_ticks: u64,
    /// The PID namespace the pgid belongs to (`/proc/self/ns/pid`).
    pub pid_ns: u64,
    pub operation: String,
}

impl RunningGroup {
    fn of(pgid: i32, operation: &str) -> Option<Self> {
        let leader = process_stat(pgid)?;
        Some(Self {
            pgid,
            start_ticks: leader.start_ticks,
            pid_ns: own_pid_namespace()?,
            operation: operation.to_owned(),
        })
    }

    fn render(&self) -> String {
        format!(
            "running: pgid={} start_ticks={} pid_ns={} operation={:?}",
            self.pgid, self.start_ticks, self.pid_ns, self.operation
        )
    }

    /// The `running:` line of a lock file, if there is a well-formed one.
    pub fn parse(lock_text: &str) -> Option<Self> {
        let line = lock_text
            .lines()
            .find_map(|l| l.strip_prefix("running: "))?;
        let (fields, operation) = line.split_once(" operation=")?;
        let mut pgid = None;
        let mut start_ticks = None;
        let mut pid_ns = None;
        for field in fields.split(' ') {
            match field.split_once('=')? {
                ("pgid", v) => pgid = v.parse().ok(),
                ("start_ticks", v) => start_ticks = v.parse().ok(),
                ("pid_ns", v) => pid_ns = v.parse().ok(),
                _ => return None,
            }
        }
        Some(Self {
            pgid: pgid.filter(|p: &i32| *p > 1)?,
            start_ticks: start_ticks?,
            pid_ns: pid_ns?,
            operation: operation.to_owned(),
        })
    }

    /// Whether this group's leader (the operation's own process) still runs: same PID
    /// namespace, a live process with that pid which started at the recorded time and still
    /// leads the group. A reused pid has another start time.
    pub fn still_running(&self) -> bool {
        if own_pid_namespace() != Some(self.pid_ns) {
            return false;
        }
        // Cheap first: no such group at all.
        if killpg(Pid::from_raw(self.pgid), None) == Err(Errno::ESRCH) {
            return false;
        }
        process_stat(self.pgid).is_some_and(|p| {
            p.start_ticks == self.start_ticks && p.pgrp == self.pgid && p.state != 'Z'
        })
    }
}

/// The fields of `/proc/<pid>/stat` this module needs.
struct ProcessStat {
    state: char,
    pgrp: i32,
    start_ticks: u64,
}

fn process_stat(pid: i32) -> Option<ProcessStat> {
    // Read with one buffer (the line is a few hundred bytes), not sized from the file's
    // length first: this runs for every operation, between its clone and its exec.
    let mut bytes = Vec::with_capacity(1024);
    File::open(format!("/proc/{pid}/stat"))
        .ok()?
        .read_to_end(&mut bytes)
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    // `pid (comm) state ppid pgrp …`: comm may hold spaces and parentheses, so fields are
    // counted after the last `)`. starttime is field 22, the 20th after comm.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcessStat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

/// The inode of this process's PID namespace (it never changes: `setns` and `unshare` of a
/// PID namespace apply to the children made afterwards, not to the caller).
fn own_pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt as _;
    static OWN: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *OWN.get_or_init(|| std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino()))
}

/// `STATE/locks/<pkg>.lock`.
pub fn package_lock_path(state_dir: &Path, package: &str) -> PathBuf {
    state_dir.join("locks").join(format!("{package}.lock"))
}

/// `STATE/locks/interrupt-<RID>.lock`.
pub fn interrupt_lock_path(state_dir: &Path, resource_id: &str) -> PathBuf {
    state_dir
        .join("locks")
        .join(format!("interrupt-{resource_id}.lock"))
}

/// Take the exclusive lock at `host_path`, waiting (and saying who holds it) while another
/// agent has it, then for the process group of an operation a killed holder left running
/// (SPEC §10). Cancellation stops either wait.
pub async fn acquire(
    fs: &HostFs,
    host_path: &Path,
    boot_id: Option<&str>,
    cancel: &CancellationToken,
) -> Result<Lock, LockError> {
    let shown = host_path.display().to_string();
    let mut file = fs
        .open_lock_file(host_path)
        .map_err(LockError::open(host_path))?;
    let mut logged = false;
    let mut flock = loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => break lock,
            Err((f, Errno::EWOULDBLOCK | Errno::EINTR)) => {
                file = f;
                if !logged {
                    // Who holds it: the lock file's first line, if it has one.
                    let text = read_holder(&mut file);
                    let holder = text.lines().next().map(str::trim).filter(|l| !l.is_empty());
                    let holder = holder.unwrap_or("unknown");
                    info!(lock = %shown, holder = %holder, "waiting for another agent to release the lock");
                    logged = true;
                }
                tokio::select! {
                    () = cancel.cancelled() => return Err(LockError::Stopped),
                    () = tokio::time::sleep(POLL) => {}
                }
            }
            Err((_, errno)) => return Err(LockError::lock(host_path, errno)),
        }
    };
    let previous = read_holder(&mut flock);
    if let Some(group) = orphaned_group(&previous, boot_id) {
        info!(
            lock = %shown,
            pgid = group.pgid,
            operation = %group.operation,
            holder = %previous.lines().next().unwrap_or_default(),
            "waiting for an operation of an earlier run to finish: its agent was killed but its process group is still running"
        );
        while group.still_running() {
            tokio::select! {
                () = cancel.cancelled() => return Err(LockError::Stopped),
                () = tokio::time::sleep(POLL) => {}
            }
        }
        info!(lock = %shown, pgid = group.pgid, "the earlier run's operation has finished");
    }
    // Who holds it, for the next agent's message. Written in place: replacing the file
    // would move the lock to another inode.
    let holder = holder_text(boot_id);
    let _ = overwrite(&flock, &holder);
    Ok(Lock {
        flock,
        path: host_path.to_path_buf(),
        holder,
    })
}

/// The group a killed holder recorded, if it is still running under this boot.
fn orphaned_group(previous: &str, boot_id: Option<&str>) -> Option<RunningGroup> {
    let group = RunningGroup::parse(previous)?;
    let same_boot = boot_id.is_some_and(|b| {
        previous
            .split_whitespace()
            .any(|f| f.strip_prefix("boot_id=") == Some(b))
    });
    (same_boot && group.still_running()).then_some(group)
}

/// The lock file's text (at most 4 KiB: a holder line and a `running:` line). A file larger
/// than [`RECORD_BOUND`] is corrupt (SPEC §5): its holder is unknown, and it is not read.
fn read_holder(file: &mut File) -> String {
    if file.metadata().map_or(true, |m| m.len() > RECORD_BOUND) {
        return String::new();
    }
    let mut bytes = Vec::new();
    let _ = file.seek(SeekFrom::Start(0));
    let _ = file.take(MAX_LOCK_TEXT as u64).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Who holds a lock, as the holder wrote it into the lock file (`pid=… boot_id=… started=…`,
/// and while an operation runs, a `running: … operation="…"` line).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Holder {
    pub pid: Option<u32>,
    pub boot_id: Option<String>,
    /// UTC RFC 3339.
    pub started: Option<String>,
    /// The operation running under the lock, when the holder recorded one.
    pub operation: Option<String>,
}

impl Holder {
    /// `pid 4711 since <started>` (`pid unknown` when the lock file does not say), for
    /// messages about who holds a lock.
    pub fn describe(&self) -> String {
        let pid = self
            .pid
            .map_or_else(|| "unknown".to_owned(), |p| p.to_string());
        match &self.started {
            Some(started) => format!("pid {pid} since {started}"),
            None => format!("pid {pid}"),
        }
    }

    /// Parse the lock file's text; fields that are missing or malformed are `None`.
    pub fn parse(text: &str) -> Self {
        let mut holder = Self::default();
        let mut lines = text.lines();
        for field in lines.next().unwrap_or_default().split_whitespace() {
            match field.split_once('=') {
                Some(("pid", v)) => holder.pid = v.parse().ok(),
                Some(("boot_id", v)) if v != "unknown" => holder.boot_id = Some(v.to_owned()),
                Some(("started", v)) => holder.started = Some(v.to_owned()),
                _ => {}
            }
        }
        holder.operation = lines
            .filter_map(|l| l.strip_prefix("running: "))
            .find_map(|l| l.split_once(" operation="))
            .map(|(_, op)| op.trim().trim_matches('"').to_owned());
        holder
    }
}

/// Whether an agent holds the lock at `host_path`, and who: `Ok(None)` when nobody does or
/// there is no lock file. Read-only: the file is never created, and the probe is a shared
/// lock held for an instant (an agent taking the lock in that instant waits one poll).
pub fn holder(fs: &HostFs, host_path: &Path) -> Result<Option<Holder>, LockError> {
    let Some(mut file) = fs
        .open_file(host_path)
        .map_err(LockError::open(host_path))?
    else {
        return Ok(None);
    };
    let text = read_holder(&mut file);
    match Flock::lock(file, FlockArg::LockSharedNonblock) {
        Ok(_released_on_drop) => Ok(None),
        Err((_, Errno::EWOULDBLOCK)) => Ok(Some(Holder::parse(&text))),
        Err((_, errno)) => Err(LockError::lock(host_path, errno)),
    }
}

/// The outcome of [`try_acquire`].
#[derive(Debug)]
pub enum TryLock {
    /// The lock, released when dropped.
    Acquired(Flock<File>),
    /// Another agent holds it.
    Busy(Holder),
}

/// Take the exclusive lock at `host_path` without waiting (maintenance commands such as
/// `agent reset`, which refuse rather than wait), recording this process as the holder.
pub fn try_acquire(
    fs: &HostFs,
    host_path: &Path,
    boot_id: Option<&str>,
) -> Result<TryLock, LockError> {
    let file = fs
        .open_lock_file(host_path)
        .map_err(LockError::open(host_path))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(flock) => {
            let _ = overwrite(&flock, &holder_text(boot_id));
            Ok(TryLock::Acquired(flock))
        }
        Err((mut file, Errno::EWOULDBLOCK)) => {
            Ok(TryLock::Busy(Holder::parse(&read_holder(&mut file))))
        }
        Err((_, errno)) => Err(LockError::lock(host_path, errno)),
    }
}

#[cfg(test)]
mod tests;
