//! In a kind's tests, its code may not start processes (SPEC §9.5): every command goes through
//! the context, where the core runs, records and stops it; a `std::process::Command` in a kind
//! would run on the test machine and pass, and on a node it would run unrecorded and
//! unstoppable.
//!
//! A seccomp filter on the kind's thread (and the threads it starts) sends every attempt to
//! start a process (`fork`, `vfork`, `clone` without `CLONE_THREAD`, `execve`, `execveat`) to a
//! supervisor thread, which records it and fails the call with `EPERM`: nothing runs, and
//! the run reports what the kind tried. `clone3` fails with `ENOSYS`, so that the C library
//! falls back to `clone`, whose flags the filter can read (threads stay allowed).

use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::sync::{Arc, Mutex, mpsc};

use crate::interrupt::worker::Confine;

/// What a kind's thread tried to start, as the supervisor saw it.
#[derive(Debug, Default)]
pub(crate) struct SpawnTrap {
    attempts: Arc<Mutex<Vec<&'static str>>>,
}

impl SpawnTrap {
    /// The system calls the kind tried (`clone`, `execve`, ...), in order.
    pub(crate) fn attempts(&self) -> Vec<&'static str> {
        self.attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl Confine for SpawnTrap {
    fn enter(&self) -> Result<(), String> {
        // The supervisor is started before the filter exists, so it is not under it.
        let (send_fd, receive_fd) = mpsc::channel::<OwnedFd>();
        let attempts = self.attempts.clone();
        std::thread::Builder::new()
            .name("spawn trap".into())
            .spawn(move || {
                if let Ok(listener) = receive_fd.recv() {
                    supervise(&listener, &attempts);
                }
            })
            .map_err(|e| format!("starting the supervisor thread: {e}"))?;
        let listener = install()?;
        send_fd
            .send(listener)
            .map_err(|_| "the supervisor thread ended".to_owned())
    }
}

#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64

/// The calls that start a process on this architecture, by number and name.
#[cfg(target_arch = "x86_64")]
const SPAWNS: [(libc::c_long, &str); 4] = [
    (libc::SYS_fork, "fork"),
    (libc::SYS_vfork, "vfork"),
    (libc::SYS_execve, "execve"),
    (libc::SYS_execveat, "execveat"),
];
#[cfg(target_arch = "aarch64")]
const SPAWNS: [(libc::c_long, &str); 2] = [
    (libc::SYS_execve, "execve"),
    (libc::SYS_execveat, "execveat"),
];

fn name_of(nr: libc::c_int) -> &'static str {
    if libc::c_long::from(nr) == libc::SYS_clone {
        return "clone";
    }
    SPAWNS
        .iter()
        .find(|(n, _)| *n == libc::c_long::from(nr))
        .map_or("a process-starting call", |(_, name)| name)
}

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    jump(code, k, 0, 0)
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: u16::try_from(code).expect("BPF opcodes are 16 bits"),
        jt,
        jf,
        k,
    }
}

fn nr(call: libc::c_long) -> u32 {
    u32::try_from(call).expect("system call numbers are small")
}

/// The filter: notify on the calls that start a process, `ENOSYS` for `clone3`, allow the
/// rest (and everything of another architecture).
fn program() -> Vec<libc::sock_filter> {
    use libc::{
        BPF_ABS, BPF_JEQ, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_RET, BPF_W, SECCOMP_RET_ALLOW,
        SECCOMP_RET_ERRNO, SECCOMP_RET_USER_NOTIF,
    };
    const ARCH_OFFSET: u32 = 4;
    const NR_OFFSET: u32 = 0;
    // args[0], low 32 bits (little endian): the clone flags.
    const ARG0_OFFSET: u32 = 16;
    let clone_thread = u32::try_from(libc::CLONE_THREAD).expect("CLONE_THREAD fits");
    let enosys = u32::try_from(libc::ENOSYS).expect("ENOSYS fits");
    let spawns = u8::try_from(SPAWNS.len()).expect("a few calls");
    // Layout (jump offsets count from the next instruction):
    //   0 ld arch; 1 jeq ARCH ? 2 : ALLOW; 2 ld nr; 3 jeq clone ? 4 : 6;
    //   4 ld arg0; 5 jset CLONE_THREAD ? ALLOW : NOTIFY;
    //   6 jeq clone3 ? ENOSYS : 7; 7.. jeq spawn_i ? NOTIFY : next;
    //   then ALLOW, NOTIFY, ENOSYS.
    let mut p = vec![
        stmt(BPF_LD | BPF_W | BPF_ABS, ARCH_OFFSET),
        jump(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 0, 0), // jf patched below
        stmt(BPF_LD | BPF_W | BPF_ABS, NR_OFFSET),
        jump(BPF_JMP | BPF_JEQ | BPF_K, nr(libc::SYS_clone), 0, 2),
        stmt(BPF_LD | BPF_W | BPF_ABS, ARG0_OFFSET),
        jump(BPF_JMP | BPF_JSET | BPF_K, clone_thread, 0, 0), // patched below
        jump(BPF_JMP | BPF_JEQ | BPF_K, nr(libc::SYS_clone3), 0, 0), // patched below
    ];
    for (i, (call, _)) in SPAWNS.iter().enumerate() {
        let i = u8::try_from(i).expect("a few calls");
        // To NOTIFY: past the remaining checks and ALLOW.
        p.push(jump(BPF_JMP | BPF_JEQ | BPF_K, nr(*call), spawns - i, 0));
    }
    let allow = p.len();
    p.push(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    let notify = p.len();
    p.push(stmt(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF));
    let enosys_at = p.len();
    p.push(stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | enosys));
    let to = |from: usize, target: usize| u8::try_from(target - from - 1).expect("short jumps");
    p[1].jf = to(1, allow);
    p[5].jt = to(5, allow);
    p[5].jf = to(5, notify);
    p[6].jt = to(6, enosys_at);
    p
}

/// Install the filter on the calling thread; the listener's descriptor.
fn install() -> Result<OwnedFd, String> {
    let mut filter = program();
    let prog = libc::sock_fprog {
        len: u16::try_from(filter.len()).expect("a short program"),
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) takes integer arguments only and affects the calling
    // thread (and what it starts); it is what allows an unprivileged thread a filter.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if rc != 0 {
        return Err(format!(
            "prctl(PR_SET_NO_NEW_PRIVS): {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: seccomp(2) reads `prog` (a valid sock_fprog pointing at `filter`, both alive
    // for the call) and installs a copy on the calling thread only (no TSYNC flag); with
    // NEW_LISTENER it returns a new descriptor, which we own from here on.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &raw const prog,
        )
    };
    if fd < 0 {
        return Err(format!(
            "seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER): {}",
            std::io::Error::last_os_error()
        ));
    }
    let fd = libc::c_int::try_from(fd).expect("descriptors are ints");
    // SAFETY: `fd` was just returned by seccomp(2) and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Record each notified call and fail it with `EPERM`, until no thread uses the filter.
fn supervise(listener: &OwnedFd, attempts: &Mutex<Vec<&'static str>>) {
    loop {
        let mut poll = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the duration of the call.
        let ready = unsafe { libc::poll(&raw mut poll, 1, -1) };
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if poll.revents & libc::POLLIN == 0 {
            // POLLHUP: the kind's threads are gone.
            return;
        }
        // SAFETY: seccomp_notif is plain integers; all zeroes is what RECV requires.
        let mut request: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: RECV fills the seccomp_notif it is given, which lives across the call.
        let rc = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &raw mut request,
            )
        };
        if rc != 0 {
            // The caller went away before we read it (ENOENT): nothing to answer.
            continue;
        }
        attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(name_of(request.data.nr));
        let response = libc::seccomp_notif_resp {
            id: request.id,
            val: 0,
            error: -libc::EPERM,
            flags: 0,
        };
        // SAFETY: SEND reads the seccomp_notif_resp it is given, which lives across the call.
        let _ = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &raw const response,
            )
        };
    }
}
