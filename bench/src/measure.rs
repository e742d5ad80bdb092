//! Running a process and measuring it: wall time from spawn to reap, peak RSS from `wait4(2)`,
//! plus the statistics the report needs.

use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

/// One measured run of a process (and everything it waited for).
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub wall: Duration,
    /// `ru_maxrss` of the reaped child: the largest RSS of the child or of any descendant it
    /// waited for, in KiB.
    pub max_rss_kib: u64,
}

/// How a reaped process ended.
#[derive(Debug, Clone, Copy)]
pub struct Reaped {
    pub status: libc::c_int,
    pub max_rss_kib: u64,
}

impl Reaped {
    pub fn success(self) -> bool {
        libc::WIFEXITED(self.status) && libc::WEXITSTATUS(self.status) == 0
    }

    pub fn describe(self) -> String {
        if libc::WIFEXITED(self.status) {
            format!("exit code {}", libc::WEXITSTATUS(self.status))
        } else if libc::WIFSIGNALED(self.status) {
            format!("signal {}", libc::WTERMSIG(self.status))
        } else {
            format!("wait status {}", self.status)
        }
    }
}

/// Reap `child` with `wait4(2)`, which also reports its peak RSS. `std`'s own `wait` must not
/// be called afterwards (the pid is gone).
pub fn reap(child: &Child) -> io::Result<Reaped> {
    let pid = libc::pid_t::try_from(child.id()).map_err(io::Error::other)?;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value; wait4 only writes into the two pointers.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers are valid for writes for the duration of the call.
        let r = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) };
        if r == pid {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(Reaped {
        status,
        max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    })
}

/// Spawn `cmd`, let `during` talk to it (e.g. drain its stdout), reap it and time the whole.
/// A failure exit is an error that quotes `stderr_file` when there is one.
pub fn run(
    cmd: &mut Command,
    stderr_file: Option<&Path>,
    during: impl FnOnce(&mut Child) -> anyhow::Result<()>,
) -> anyhow::Result<Sample> {
    // A pre-exec hook makes `std` fork instead of vfork: a vforked child shares the bench's
    // memory until exec, and the kernel would count the bench's RSS as the child's peak.
    // A forked child starts from a copy of the bench's anonymous pages only, which
    // `rss_floor` reports.
    // SAFETY: the hook does nothing.
    unsafe {
        cmd.pre_exec(|| Ok(()));
    }
    trim_heap();
    let started = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("spawning {cmd:?}"))?;
    let talked = during(&mut child);
    let reaped = reap(&child).with_context(|| format!("waiting for {cmd:?}"))?;
    let wall = started.elapsed();
    talked?;
    if !reaped.success() {
        let stderr = stderr_file
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        bail!("{cmd:?} failed with {}: {stderr}", reaped.describe());
    }
    Ok(Sample {
        wall,
        max_rss_kib: reaped.max_rss_kib,
    })
}

/// Give the bench's free heap memory back to the kernel before forking a measured process:
/// a forked child starts with a copy of the bench's resident anonymous pages, and they would
/// count in the child's peak RSS.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Read `r` to end-of-file with a large buffer (what a log collector does), returning the byte
/// count.
pub fn drain(mut r: impl io::Read) -> io::Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        match r.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Make `cmd` chroot into `root` and change to `cwd` before exec, as the agent does for host
/// steps (SPEC §8.4). `None` leaves it unconfined (the non-root mode).
pub fn confine(cmd: &mut Command, root: Option<&Path>, cwd: &Path) {
    match root {
        Some(root) => {
            let root = cstring(root);
            let cwd = cstring(cwd);
            // SAFETY: only async-signal-safe syscalls on pre-built C strings run between fork
            // and exec.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::chroot(root.as_ptr()) != 0 || libc::chdir(cwd.as_ptr()) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        None => {
            cmd.current_dir(cwd);
        }
    }
}

fn cstring(p: &Path) -> std::ffi::CString {
    use std::os::unix::ffi::OsStrExt as _;
    std::ffi::CString::new(p.as_os_str().as_bytes()).expect("paths built by the bench have no NUL")
}

/// The durable small-file write of the step-loop baseline: temp file, write, fsync, rename
/// over the target, fsync the directory (SPEC §5).
pub fn durable_write(dir: &Path, dir_handle: &File, name: &str, contents: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let temp = dir.join(format!(".{name}.tmp"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temp)?;
    file.write_all(contents)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, dir.join(name))?;
    dir_handle.sync_all()
}

/// The variable naming the file where the agent writes its phase times when it exits
/// (agent-core `host::phases`).
pub const PHASE_TIMES_VAR: &str = "SKYHOOK_AGENT_PHASE_TIMES";

/// One line of the agent's phase times: `<phase> <count> <total nanoseconds>`.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseTime {
    pub name: String,
    pub count: u64,
    pub total: Duration,
}

/// The phase times the agent wrote to `path` (see [`PHASE_TIMES_VAR`]); `None` when it wrote
/// none (a build that does not time its phases).
pub fn read_phases(path: &Path) -> anyhow::Result<Option<Vec<PhaseTime>>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(e)
                .with_context(|| format!("reading the agent's phase times {}", path.display()));
        }
    };
    text.lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let [name, count, nanos] = fields[..] else {
                bail!("{}: malformed line {line:?}", path.display());
            };
            Ok(PhaseTime {
                name: name.to_owned(),
                count: count.parse()?,
                total: Duration::from_nanos(nanos.parse()?),
            })
        })
        .collect::<anyhow::Result<_>>()
        .map(Some)
}

/// The median of `values` (the mean of the two middle ones for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        f64::midpoint(v[n / 2 - 1], v[n / 2])
    }
}

/// Nearest-rank quantile `q` (0..=1) of already sorted values.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "a rank within a small slice"
    )]
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// `ms` of a duration, as a float.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The 1-minute load average.
pub fn load_average() -> f64 {
    let mut text = String::new();
    let _ = File::open("/proc/loadavg").and_then(|mut f| f.read_to_string(&mut text));
    text.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_quantiles() {
        assert!((median(&[3.0, 1.0, 2.0]) - 2.0).abs() < f64::EPSILON);
        assert!((median(&[4.0, 1.0, 2.0, 3.0]) - 2.5).abs() < f64::EPSILON);
        let sorted: Vec<f64> = (1..=100).map(f64::from).collect();
        assert!((quantile(&sorted, 0.99) - 99.0).abs() < f64::EPSILON);
        assert!((quantile(&sorted, 0.5) - 50.0).abs() < f64::EPSILON);
        assert!((quantile(&sorted, 1.0) - 100.0).abs() < f64::EPSILON);
    }

    #[test]
    #[allow(clippy::zombie_processes, reason = "reaped by `reap`")]
    fn reap_reports_status_and_rss() {
        let child = Command::new("/bin/sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        let reaped = reap(&child).unwrap();
        assert!(!reaped.success());
        assert_eq!(reaped.describe(), "exit code 3");
        assert!(reaped.max_rss_kib > 0);
    }
}
