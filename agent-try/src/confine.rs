//! Each stage's agent, and so every step, runs confined (SPEC §1.6): in a PID namespace of the
//! stage's own with a fresh procfs, a user namespace whose ids map one to one (also when `agent
//! try` runs as root), and a mount namespace owned by that user namespace, copied from the
//! sandbox's with the sandbox's own files covered.
//!
//! Copied into a mount namespace of a less privileged user namespace, every mount is locked
//! (mount_namespaces(7)): a read-only one cannot be made writable, by a remount or by
//! mount_setattr(2), and none can be unmounted to show what it covers. Steps have no
//! capability outside their user namespace: they cannot mount a filesystem of the machine, see
//! or signal a process outside the stage, or reach the root of one through `/proc/<pid>/root`.
//!
//! The stage runner (`agent try --stage MODE`, started by the lifecycle in the sandbox's mount
//! namespace) measures this instead of assuming it: before the stage's agent starts and again
//! after it ended, a process it forks into the stage's mount namespace checks that every mount
//! there of a filesystem of the machine is read-only and that making it writable fails. It
//! writes what it found to the lifecycle ([`Verdict`]).

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::ffi::CString;
use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl, openat};
use nix::mount::{MntFlags, MsFlags, umount2};
use nix::sched::{CloneFlags, setns, unshare};
use nix::sys::signal::{Signal, kill};
use nix::sys::stat::Mode;
use nix::unistd::{ForkResult, Pid, fork};

use super::layout::{
    AGENT_EXE, BOOT_ID, CONFIGMAPS, LOWER, MERGED, OUT, PACKAGE, PRIVATE, host_mount_points,
};
use super::mounts::{self, MountEntry};
use super::{setup_failed, wait};

/// What the stage runner found, one line each: `before ok N` / `before PROBLEM`, then
/// `after ok N` / `after PROBLEM` (N: the mounts of host filesystems checked).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub before: Option<Result<usize, String>>,
    pub after: Option<Result<usize, String>>,
}

impl Verdict {
    fn line(when: &str, result: &Result<usize, String>) -> String {
        match result {
            Ok(n) => format!("{when} ok {n}\n"),
            Err(problem) => format!("{when} {problem}\n"),
        }
    }

    pub(crate) fn parse(text: &str) -> Self {
        let mut v = Self::default();
        for (when, rest) in text.lines().filter_map(|line| line.split_once(' ')) {
            let slot = match when {
                "before" => &mut v.before,
                "after" => &mut v.after,
                _ => continue,
            };
            *slot = Some(match rest.strip_prefix("ok ").map(str::parse) {
                Some(Ok(n)) => Ok(n),
                _ => Err(rest.to_owned()),
            });
        }
        v
    }
}

/// The stage runner: confine `agent MODE /root COPY_DIR`, run it, check before and after.
/// Returns its exit code (the agent's, 128 + the signal that ended it, or
/// [`super::SETUP_FAILED`] when the stage could not be confined: then nothing ran).
pub(crate) fn run(mode: &str, copy_dir: &str, verdict_fd: i32) -> u8 {
    // SAFETY: the lifecycle passed this descriptor, open, to this process alone.
    let mut verdict = unsafe { File::from_raw_fd(verdict_fd) };
    let _ = fcntl(&verdict, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
    confine(mode, copy_dir, &mut verdict).unwrap_or_else(|e| cannot_confine(mode, &e))
}

fn cannot_confine(mode: &str, e: &str) -> u8 {
    setup_failed(&format!("confine the {mode} stage"), e)
}

fn confine(mode: &str, copy_dir: &str, verdict: &mut File) -> Result<u8, String> {
    // Only the stage's PID 1 goes into the new PID namespace: once it is gone, a fork there
    // fails, and the check after the stage forks.
    let own_pid_ns = nix::fcntl::open(
        "/proc/self/ns/pid",
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("opening /proc/self/ns/pid: {e}"))?;
    unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID)
        .map_err(|e| format!("unshare of a new mount and PID namespace: {e}"))?;
    mounts::make_private()?;
    // This process's procfs, kept open: the stage replaces the one at /proc with its own.
    let proc = nix::fcntl::open(
        "/proc",
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("opening /proc: {e}"))?;
    let host_devices = host_devices(&mounts::parse_mountinfo(&read_at(&proc, "self/mountinfo")?));
    let argv: Vec<CString> = ["agent", mode, MERGED, copy_dir]
        .iter()
        .map(|a| CString::new(*a).map_err(|_| format!("{a:?} holds a NUL byte")))
        .collect::<Result<_, _>>()?;
    let envp: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let (ready_r, ready_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| e.to_string())?;
    let (go_r, go_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| e.to_string())?;
    // SAFETY: this process is single-threaded (started by exec, no runtime), so the child may
    // run any code after fork.
    match unsafe { fork() } {
        Err(e) => Err(format!("fork of the stage's PID 1: {e}")),
        Ok(ForkResult::Child) => {
            drop((ready_r, go_w, proc));
            let Err(e) = enter_stage(&ready_w, &go_r, &argv, &envp);
            std::process::exit(cannot_confine(mode, &e).into());
        }
        Ok(ForkResult::Parent { child }) => {
            drop((ready_w, go_r));
            let result = setns(&own_pid_ns, CloneFlags::CLONE_NEWPID)
                .map_err(|e| format!("returning to the sandbox's PID namespace: {e}"))
                .and_then(|()| supervise(child, &proc, &ready_r, &go_w, &host_devices, verdict));
            if result.is_err() {
                let _ = kill(child, Signal::SIGKILL);
                let _ = wait(child);
            }
            result
        }
    }
}

/// The devices of the filesystems of the machine the sandbox's root shows (see
/// [`host_mount_points`]): LOWER's, the host directories', `/sys`'s, the device nodes', the
/// agent binary's, the output directory's.
fn host_devices(mounts: &[MountEntry]) -> BTreeSet<String> {
    let points = host_mount_points();
    mounts
        .iter()
        .filter(|m| points.iter().any(|p| m.mount_point.starts_with(p)))
        .map(|m| m.dev.clone())
        .collect()
}

/// The stage's PID 1 (the child): its own procfs, the sandbox's files covered, then a user and
/// mount namespace of its own, mapped by the runner; then the stage's agent.
fn enter_stage(
    ready: &OwnedFd,
    go: &OwnedFd,
    argv: &[CString],
    envp: &[CString],
) -> Result<Infallible, String> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(|e| e.to_string())?;
    let merged_proc = Path::new(MERGED).join("proc");
    for target in [Path::new("/proc"), merged_proc.as_path()] {
        umount2(target, MntFlags::MNT_DETACH)
            .map_err(|e| format!("detaching {}: {e}", target.display()))?;
        mounts::mount_proc(target)?;
    }
    if Path::new(BOOT_ID).exists() {
        mounts::bind_boot_id(Path::new(BOOT_ID), &merged_proc)?;
    }
    for private in [LOWER, OUT, PACKAGE, CONFIGMAPS] {
        umount2(private, MntFlags::MNT_DETACH).map_err(|e| format!("detaching {private}: {e}"))?;
    }
    let flags = MsFlags::MS_RDONLY | MsFlags::MS_NOEXEC;
    mounts::tmpfs(Path::new(PRIVATE), flags, "mode=0,size=4k")
        .map_err(|e| format!("covering {PRIVATE}: {e}"))?;
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
        .map_err(|e| format!("unshare of a new user and mount namespace: {e}"))?;
    nix::unistd::write(ready, b"u").map_err(|e| e.to_string())?;
    let mut answer = [0u8; 1];
    if nix::unistd::read(go, &mut answer) != Ok(1) {
        return Err("the stage runner did not let the stage start".into());
    }
    // Set again: a change of credentials may have cleared it.
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(|e| e.to_string())?;
    let exe = CString::new(AGENT_EXE).expect("no NUL");
    nix::unistd::execve(&exe, argv, envp).map_err(|e| format!("running {AGENT_EXE}: {e}"))
}

/// Map the child's user namespace, check it before the stage, let it start, wait for it, check
/// again.
fn supervise(
    child: Pid,
    proc: &OwnedFd,
    ready: &OwnedFd,
    go: &OwnedFd,
    host_devices: &BTreeSet<String>,
    verdict: &mut File,
) -> Result<u8, String> {
    let mut byte = [0u8; 1];
    if nix::unistd::read(ready, &mut byte) != Ok(1) {
        // It said why on stderr.
        return Ok(wait(child).unwrap_or(1));
    }
    map_ids(proc, child)?;
    let ns = openat(
        proc,
        format!("{child}/ns/mnt").as_str(),
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("opening the stage's mount namespace: {e}"))?;
    let before = separate_user_namespace(proc, child).and_then(|()| check(proc, &ns, host_devices));
    let _ = verdict.write_all(Verdict::line("before", &before).as_bytes());
    before?;
    nix::unistd::write(go, b"g").map_err(|e| e.to_string())?;
    let code = wait(child).unwrap_or(1);
    let after = check(proc, &ns, host_devices);
    let _ = verdict.write_all(Verdict::line("after", &after).as_bytes());
    Ok(code)
}

/// The child's ids inside are the runner's, each mapped to itself: root stays root for the
/// lower root's files (the overlay needs it), and holds capabilities only in the new namespace.
fn map_ids(proc: &OwnedFd, child: Pid) -> Result<(), String> {
    for file in ["uid_map", "gid_map"] {
        let own = read_at(proc, &format!("self/{file}"))?;
        let map: String = own
            .lines()
            .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
                [inside, _outside, count] => Some(format!("{inside} {inside} {count}\n")),
                _ => None,
            })
            .collect();
        let target = format!("{child}/{file}");
        let fd = open_at(proc, &target, OFlag::O_WRONLY)?;
        // One write(2): the kernel takes a map whole or not at all.
        nix::unistd::write(&fd, map.as_bytes())
            .map_err(|e| format!("writing /proc/{target} ({}): {e}", map.trim_end()))?;
    }
    Ok(())
}

/// The stage's user namespace is not the runner's.
fn separate_user_namespace(proc: &OwnedFd, child: Pid) -> Result<(), String> {
    let inode = |rel: &str| -> Result<u64, String> {
        open_at(proc, rel, OFlag::O_RDONLY)?
            .metadata()
            .map(|m| m.ino())
            .map_err(|e| format!("reading /proc/{rel}: {e}"))
    };
    if inode("self/ns/user")? == inode(&format!("{child}/ns/user"))? {
        return Err("the stage's user namespace is the sandbox's".into());
    }
    Ok(())
}

/// In a process forked into the stage's mount namespace: every mount of a host filesystem
/// there is read-only, and making it writable fails. Returns how many were checked.
fn check(proc: &OwnedFd, ns: &OwnedFd, host_devices: &BTreeSet<String>) -> Result<usize, String> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| e.to_string())?;
    // SAFETY: single-threaded, as above.
    match unsafe { fork() } {
        Err(e) => Err(format!("fork of the mount check: {e}")),
        Ok(ForkResult::Child) => {
            drop(r);
            let answer = match inspect(proc, ns, host_devices) {
                Ok(n) => format!("ok {n}"),
                Err(problem) => problem,
            };
            let _ = File::from(w).write_all(answer.as_bytes());
            std::process::exit(0);
        }
        Ok(ForkResult::Parent { child }) => {
            drop(w);
            let mut answer = String::new();
            let _ = File::from(r).read_to_string(&mut answer);
            let _ = wait(child);
            match answer.strip_prefix("ok ").map(str::parse) {
                Some(Ok(n)) => Ok(n),
                _ if answer.is_empty() => Err("the mount check ended without an answer".into()),
                _ => Err(answer),
            }
        }
    }
}

fn inspect(proc: &OwnedFd, ns: &OwnedFd, host_devices: &BTreeSet<String>) -> Result<usize, String> {
    setns(ns, CloneFlags::CLONE_NEWNS)
        .map_err(|e| format!("entering the stage's mount namespace: {e}"))?;
    let all = mounts::parse_mountinfo(&read_at(proc, "self/mountinfo")?);
    let mut problems = Vec::new();
    let mut checked = 0;
    for m in all.iter().filter(|m| host_devices.contains(&m.dev)) {
        checked += 1;
        let at = m.mount_point.display();
        if !m.read_only {
            problems.push(format!("{at} is writable"));
            continue;
        }
        // A mount covered by another one (a step may mount over it) keeps the read-only flag
        // mountinfo shows; only the one a path reaches can be probed.
        if mounts::mount_id(&m.mount_point).ok() != Some(m.id) {
            continue;
        }
        match mounts::try_make_writable(&m.mount_point) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
            Ok(()) => {
                let _ = mounts::make_read_only_again(&m.mount_point);
                problems.push(format!(
                    "{at} could be made writable (its mount is not locked)"
                ));
            }
            Err(e) => problems.push(format!("probing {at}: {e}")),
        }
    }
    if problems.is_empty() {
        Ok(checked)
    } else {
        Err(problems.join("; "))
    }
}

/// `/proc/<rel>`, opened through `proc` (a procfs directory).
fn open_at(proc: &OwnedFd, rel: &str, flags: OFlag) -> Result<File, String> {
    openat(proc, rel, flags | OFlag::O_CLOEXEC, Mode::empty())
        .map(File::from)
        .map_err(|e| format!("opening /proc/{rel}: {e}"))
}

fn read_at(proc: &OwnedFd, rel: &str) -> Result<String, String> {
    let mut text = String::new();
    open_at(proc, rel, OFlag::O_RDONLY)?
        .read_to_string(&mut text)
        .map_err(|e| format!("reading /proc/{rel}: {e}"))?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_reads_back_as_written() {
        let text = Verdict::line("before", &Ok(12))
            + &Verdict::line("after", &Err("/usr is writable".into()));
        assert_eq!(
            Verdict::parse(&text),
            Verdict {
                before: Some(Ok(12)),
                after: Some(Err("/usr is writable".into())),
            }
        );
        assert_eq!(Verdict::parse(""), Verdict::default());
    }
}
