//! Advisory locks serializing agents on one host (SPEC §11, ext): `STATE/locks/<pkg>.lock`
//! while a stage of that package runs, `STATE/locks/interrupt-<RID>.lock` while an interrupt
//! runs. `flock` semantics: a lock held by a dead process, or from an earlier boot, is gone.

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use tracing::info;

use crate::execution::Cancel;
use crate::hostfs::{HostFs, HostFsError};
use crate::timestamp;

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

/// A held lock; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct Lock {
    _flock: Flock<File>,
    path: PathBuf,
}

impl Lock {
    pub fn path(&self) -> &Path {
        &self.path
    }
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
/// agent has it. Cancellation stops the wait.
pub async fn acquire(
    fs: &HostFs,
    host_path: &Path,
    boot_id: Option<&str>,
    cancel: &Cancel,
) -> Result<Lock, LockError> {
    let shown = host_path.display().to_string();
    let mut file = fs
        .open_lock_file(host_path)
        .map_err(|source| LockError::Open {
            path: shown.clone(),
            source,
        })?;
    let mut logged = false;
    let mut flock = loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => break lock,
            Err((f, Errno::EWOULDBLOCK | Errno::EINTR)) => {
                file = f;
                if !logged {
                    let holder = read_holder(&mut file);
                    info!(lock = %shown, holder = %holder, "waiting for another agent to release the lock");
                    logged = true;
                }
                tokio::select! {
                    () = cancel.cancelled() => return Err(LockError::Stopped),
                    () = tokio::time::sleep(POLL) => {}
                }
            }
            Err((_, errno)) => {
                return Err(LockError::Lock {
                    path: shown,
                    source: errno.into(),
                });
            }
        }
    };
    // Who holds it, for the next agent's message. Written in place: replacing the file
    // would move the lock to another inode.
    let holder = format!(
        "pid={} boot_id={} started={}\n",
        std::process::id(),
        boot_id.unwrap_or("unknown"),
        timestamp::rfc3339_nano(SystemTime::now())
    );
    let _ = flock
        .set_len(0)
        .and_then(|()| flock.seek(SeekFrom::Start(0)).map(|_| ()))
        .and_then(|()| flock.write_all(holder.as_bytes()));
    Ok(Lock {
        _flock: flock,
        path: host_path.to_path_buf(),
    })
}

fn read_holder(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.seek(SeekFrom::Start(0));
    let _ = file.take(256).read_to_string(&mut text);
    let text = text.trim();
    if text.is_empty() {
        "unknown".to_owned()
    } else {
        text.to_owned()
    }
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
    let shown = host_path.display().to_string();
    let open_err = |source| LockError::Open {
        path: shown.clone(),
        source,
    };
    if !fs.is_file(host_path).map_err(open_err)? {
        return Ok(None);
    }
    let real = fs.resolve(host_path).map_err(open_err)?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&real)
        .map_err(|source| LockError::Lock {
            path: shown.clone(),
            source,
        })?;
    let text = {
        let mut bytes = Vec::new();
        let _ = (&mut file).take(4096).read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    };
    match Flock::lock(file, FlockArg::LockSharedNonblock) {
        Ok(_released_on_drop) => Ok(None),
        Err((_, Errno::EWOULDBLOCK)) => Ok(Some(Holder::parse(&text))),
        Err((_, errno)) => Err(LockError::Lock {
            path: shown,
            source: errno.into(),
        }),
    }
}

/// A lock taken by [`try_acquire`]; released when dropped.
#[derive(Debug)]
pub struct HeldLock {
    _flock: Flock<File>,
}

/// The outcome of [`try_acquire`].
#[derive(Debug)]
pub enum TryLock {
    Acquired(HeldLock),
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
    let shown = host_path.display().to_string();
    let file = fs
        .open_lock_file(host_path)
        .map_err(|source| LockError::Open {
            path: shown.clone(),
            source,
        })?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut flock) => {
            let holder = format!(
                "pid={} boot_id={} started={}\n",
                std::process::id(),
                boot_id.unwrap_or("unknown"),
                timestamp::rfc3339_nano(SystemTime::now())
            );
            let _ = flock
                .set_len(0)
                .and_then(|()| flock.seek(SeekFrom::Start(0)).map(|_| ()))
                .and_then(|()| std::io::Write::write_all(&mut *flock, holder.as_bytes()));
            Ok(TryLock::Acquired(HeldLock { _flock: flock }))
        }
        Err((mut file, Errno::EWOULDBLOCK)) => {
            let mut bytes = Vec::new();
            let _ = file.seek(SeekFrom::Start(0));
            let _ = (&mut file).take(4096).read_to_end(&mut bytes);
            Ok(TryLock::Busy(Holder::parse(&String::from_utf8_lossy(
                &bytes,
            ))))
        }
        Err((_, errno)) => Err(LockError::Lock {
            path: shown,
            source: errno.into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn a_second_agent_waits_until_the_first_releases() {
        let root = tempfile::tempdir().unwrap();
        let fs = HostFs::new(root.path());
        let (_h, cancel) = Cancel::new();
        let path = package_lock_path(Path::new("/state"), "pkg");
        assert_eq!(path, Path::new("/state/locks/pkg.lock"));
        let first = block_on(acquire(&fs, &path, Some("b1"), &cancel)).unwrap();
        let content = std::fs::read_to_string(root.path().join("state/locks/pkg.lock")).unwrap();
        assert!(content.starts_with(&format!("pid={} boot_id=b1 started=", std::process::id())));

        let fs2 = fs.clone();
        let path2 = path.clone();
        let waiter = std::thread::spawn(move || {
            let (_h, cancel) = Cancel::new();
            let started = std::time::Instant::now();
            let lock = block_on(acquire(&fs2, &path2, None, &cancel)).unwrap();
            (started.elapsed(), lock.path().to_path_buf())
        });
        std::thread::sleep(Duration::from_millis(300));
        drop(first);
        let (elapsed, got) = waiter.join().unwrap();
        assert!(elapsed >= Duration::from_millis(250), "{elapsed:?}");
        assert_eq!(got, path);
    }

    #[test]
    fn cancellation_stops_the_wait() {
        let root = tempfile::tempdir().unwrap();
        let fs = HostFs::new(root.path());
        let (_h, cancel) = Cancel::new();
        let path = interrupt_lock_path(Path::new("/state"), "abc_pkg_1.0.0");
        assert_eq!(path, Path::new("/state/locks/interrupt-abc_pkg_1.0.0.lock"));
        let _held = block_on(acquire(&fs, &path, None, &cancel)).unwrap();
        let (handle, cancel2) = Cancel::new();
        handle.cancel();
        let err = block_on(acquire(&fs, &path, None, &cancel2)).unwrap_err();
        assert!(matches!(err, LockError::Stopped));
    }

    #[test]
    fn a_link_at_the_lock_path_is_refused() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("state/locks")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.path().join("state/locks/pkg.lock"))
            .unwrap();
        let fs = HostFs::new(root.path());
        let (_h, cancel) = Cancel::new();
        let err = block_on(acquire(
            &fs,
            Path::new("/state/locks/pkg.lock"),
            None,
            &cancel,
        ))
        .unwrap_err();
        assert!(
            format!("{:#}", anyhow_like(&err)).contains("is a symbolic link"),
            "{err:?}"
        );
    }

    #[test]
    fn holder_reads_who_holds_a_lock_without_creating_it() {
        let root = tempfile::tempdir().unwrap();
        let fs = HostFs::new(root.path());
        let (_h, cancel) = Cancel::new();
        let path = package_lock_path(Path::new("/state"), "pkg");
        assert_eq!(holder(&fs, &path).unwrap(), None);
        assert!(
            !root.path().join("state").exists(),
            "the probe creates nothing"
        );

        let held = block_on(acquire(&fs, &path, Some("b1"), &cancel)).unwrap();
        let h = holder(&fs, &path).unwrap().expect("held");
        assert_eq!(h.pid, Some(std::process::id()));
        assert_eq!(h.boot_id.as_deref(), Some("b1"));
        assert!(h.started.is_some());
        let TryLock::Busy(busy) = try_acquire(&fs, &path, None).unwrap() else {
            panic!("a held lock must not be taken");
        };
        assert_eq!(busy.pid, Some(std::process::id()));
        drop(held);

        assert_eq!(holder(&fs, &path).unwrap(), None, "released");
        let TryLock::Acquired(guard) = try_acquire(&fs, &path, Some("b2")).unwrap() else {
            panic!("a free lock is taken");
        };
        let h = holder(&fs, &path).unwrap().expect("held by try_acquire");
        assert_eq!(h.boot_id.as_deref(), Some("b2"));
        drop(guard);
        assert_eq!(holder(&fs, &path).unwrap(), None);
    }

    #[test]
    fn holder_parses_the_running_line() {
        let h = Holder::parse(
            "pid=42 boot_id=b started=2026-01-01T00:00:00Z\nrunning: pgid=43 start_ticks=1 pid_ns=2 operation=\"/p/apply.sh\"\n",
        );
        assert_eq!(h.pid, Some(42));
        assert_eq!(h.operation.as_deref(), Some("/p/apply.sh"));
        assert_eq!(Holder::parse("junk"), Holder::default());
    }

    fn anyhow_like(e: &dyn std::error::Error) -> String {
        let mut s = e.to_string();
        let mut src = e.source();
        while let Some(c) = src {
            s.push_str(": ");
            s.push_str(&c.to_string());
            src = c.source();
        }
        s
    }
}
