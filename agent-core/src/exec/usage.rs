//! What one operation cost: CPU time and peak memory as the kernel accounted them to
//! its process, and the bytes it wrote to stdout and stderr as the relay counted them.
//!
//! The kernel figures come from `waitid(2)` with `WNOWAIT` and a `struct rusage` (the Linux
//! system call takes one, like `wait4(2)`): it reports the operation's main process once it
//! has exited, without reaping it, so the async side still reaps it and reads its exit status
//! as before. What is counted is exactly what `wait4(2)` would return for that process:
//!
//! - its own user and system CPU time and peak resident set size;
//! - plus those of every descendant it waited for itself (a shell step's commands, which the
//!   shell reaps; their own reaped children are in their figures in turn). The peak is the
//!   largest single process of those, not a sum.
//!
//! Not counted: descendants it did not wait for. A background process still running when the
//! main process exits is killed with the rest of the group (SPEC §10) and reaped by whoever
//! inherits it (init, or a subreaper), so its time and memory are in no operation's figures;
//! a daemon a step starts is not part of the step's cost. The peak also includes the memory
//! the child shared with the agent before its `exec` (it is started with `clone(CLONE_VM)`,
//! see `spawn`; the kernel records the shared image's peak at `exec`): the agent's few MiB,
//! however small the step.

use std::io;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Resource use of one operation (a step or an interrupt command).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// User CPU time of the process and the descendants it waited for, in microseconds.
    pub user_cpu_us: u64,
    /// System CPU time, likewise.
    pub system_cpu_us: u64,
    /// Largest resident set size of the process or of one descendant it waited for, in bytes.
    pub max_rss_bytes: u64,
    /// Bytes the operation wrote to its stdout.
    pub stdout_bytes: u64,
    /// Bytes the operation wrote to its stderr.
    pub stderr_bytes: u64,
}

impl Usage {
    /// User plus system CPU time.
    pub fn cpu(&self) -> Duration {
        Duration::from_micros(self.user_cpu_us.saturating_add(self.system_cpu_us))
    }
}

/// Block until the child `pid` has exited, leaving it to be reaped, and return what the kernel
/// accounted to it (the byte counts, the relay's, left zero). `ECHILD` once someone else
/// reaped it.
pub(crate) fn wait_exited(pid: i32) -> io::Result<Usage> {
    loop {
        match waitid(pid, libc::WEXITED | libc::WNOWAIT) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r?.ok_or_else(|| io::Error::from_raw_os_error(libc::ECHILD)),
        }
    }
}

/// [`wait_exited`] without blocking: `None` while the child still runs.
pub(crate) fn exited_now(pid: i32) -> Option<Usage> {
    waitid(pid, libc::WEXITED | libc::WNOWAIT | libc::WNOHANG)
        .ok()
        .flatten()
}

/// Reap the child `pid` (waiting for it to exit if it has not): its raw wait status.
pub fn reap(pid: i32) -> io::Result<i32> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a live local the call writes the wait status into.
        let r = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        if r == pid {
            return Ok(status);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// The raw `waitid` system call, which (unlike the libc wrapper) fills a `struct rusage`.
/// `Ok(None)`: `WNOHANG` and the child has not exited.
fn waitid(pid: i32, options: libc::c_int) -> io::Result<Option<Usage>> {
    let Ok(id) = libc::id_t::try_from(pid) else {
        return Err(io::Error::from_raw_os_error(libc::ECHILD));
    };
    // SAFETY: both structures are plain data for the kernel to fill; all-zero is valid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waitid(P_PID, id, &info, options, &ru) with pointers to the two live locals.
    let r = unsafe {
        libc::syscall(
            libc::SYS_waitid,
            libc::P_PID,
            id,
            &raw mut info,
            options,
            &raw mut ru,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled `info`; `si_pid` is 0 when WNOHANG found nothing.
    if unsafe { info.si_pid() } == 0 {
        return Ok(None);
    }
    Ok(Some(Usage {
        user_cpu_us: micros(ru.ru_utime),
        system_cpu_us: micros(ru.ru_stime),
        // Linux reports ru_maxrss in KiB.
        max_rss_bytes: u64::try_from(ru.ru_maxrss)
            .unwrap_or(0)
            .saturating_mul(1024),
        ..Usage::default()
    }))
}

fn micros(tv: libc::timeval) -> u64 {
    let secs = u64::try_from(tv.tv_sec).unwrap_or(0);
    let usecs = u64::try_from(tv.tv_usec).unwrap_or(0);
    secs.saturating_mul(1_000_000).saturating_add(usecs)
}

#[cfg(test)]
mod tests;
