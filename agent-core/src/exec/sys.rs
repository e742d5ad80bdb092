//! The system calls the child makes between `clone` and `exec`.
//!
//! The child shares the agent's memory (`CLONE_VM`) and runs while the agent's thread goes on,
//! so it must not touch what that thread uses: not the heap (no allocation), no lock, and not
//! the thread's thread-local storage, which the child inherits as it is. glibc's wrappers
//! write `errno` there on failure, and its cancellable calls (`read`, `write`, `close`) update
//! the thread's cancellation state; a child using them could change the `errno` the agent's
//! thread reads an instant later. So on x86-64 and AArch64 every call is made directly
//! (`syscall`, `svc 0`) and returns the error number as a value. Other architectures fall
//! back to glibc's wrappers, and the child to copy-on-write memory of its own (`fork`
//! semantics, see [`SHARES_MEMORY`]).

/// An error number (`EACCES`, ...), as the kernel returned it.
pub(super) type Errno = i32;

/// Whether the child shares the agent's memory until it execs (`CLONE_VM`). Only where the
/// calls below touch no thread state of the agent's.
pub(super) const SHARES_MEMORY: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    reason = "register-width values of 64-bit targets"
)]
mod call {
    use super::Errno;

    /// One system call with up to four arguments; `Err` with the error number the kernel
    /// returned (`-4095..=-1`), else the result.
    ///
    /// # Safety
    /// `nr` and its arguments must form a valid call (pointers to live memory of the sizes
    /// the call expects).
    #[cfg(target_arch = "x86_64")]
    pub(super) unsafe fn raw(nr: libc::c_long, a: [usize; 4]) -> Result<usize, Errno> {
        let ret: isize;
        // SAFETY: the x86-64 Linux calling convention: number in rax, arguments in rdi, rsi,
        // rdx, r10; the kernel clobbers rcx and r11 and returns in rax. The caller vouches
        // for the arguments.
        unsafe {
            core::arch::asm!(
                "syscall",
                inlateout("rax") nr as isize => ret,
                in("rdi") a[0],
                in("rsi") a[1],
                in("rdx") a[2],
                in("r10") a[3],
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        result(ret)
    }

    /// As for x86-64.
    ///
    /// # Safety
    /// As for x86-64.
    #[cfg(target_arch = "aarch64")]
    pub(super) unsafe fn raw(nr: libc::c_long, a: [usize; 4]) -> Result<usize, Errno> {
        let ret: isize;
        // SAFETY: the AArch64 Linux calling convention: number in x8, arguments in x0..x3,
        // result in x0; nothing else is clobbered. The caller vouches for the arguments.
        unsafe {
            core::arch::asm!(
                "svc 0",
                in("x8") nr,
                inlateout("x0") a[0] as isize => ret,
                in("x1") a[1],
                in("x2") a[2],
                in("x3") a[3],
                options(nostack),
            );
        }
        result(ret)
    }

    fn result(ret: isize) -> Result<usize, Errno> {
        if (-4095..0).contains(&ret) {
            // In -4095..-1: the negated error number fits.
            Err(i32::try_from(-ret).unwrap_or(libc::EINVAL))
        } else {
            Ok(ret as usize)
        }
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod call {
    use super::Errno;

    /// glibc's `syscall(2)`: it sets `errno`, which is the child's own here (the child does
    /// not share the agent's memory on these architectures).
    ///
    /// # Safety
    /// As for the direct calls.
    pub(super) unsafe fn raw(nr: libc::c_long, a: [usize; 4]) -> Result<usize, Errno> {
        // SAFETY: the caller vouches for the arguments.
        let r = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3]) };
        if r < 0 {
            // SAFETY: `__errno_location` returns this thread's errno, valid to read.
            Err(unsafe { *libc::__errno_location() })
        } else {
            #[allow(
                clippy::cast_sign_loss,
                clippy::cast_possible_truncation,
                reason = "not negative here; results fit a usize"
            )]
            Ok(r as usize)
        }
    }
}

/// A call whose arguments are plain numbers (descriptors, flags, ids): nothing it is given
/// can point to memory.
fn numbers(nr: libc::c_long, a: [usize; 4]) -> Result<usize, Errno> {
    // SAFETY: every argument is a number, none a pointer.
    unsafe { call::raw(nr, a) }
}

/// An `int` argument (a descriptor, an exit code) in the register the kernel reads it from:
/// its low 32 bits, as the kernel's `unsigned int` or `int` (a negative descriptor is as
/// invalid there).
#[allow(clippy::cast_sign_loss, reason = "the kernel reads the low 32 bits")]
fn int(v: libc::c_int) -> usize {
    v as u32 as usize
}

pub(super) fn close(fd: libc::c_int) {
    let _ = numbers(libc::SYS_close, [int(fd), 0, 0, 0]);
}

/// `f` until it fails with something other than `EINTR`.
fn restarted(mut f: impl FnMut() -> Result<usize, Errno>) -> Result<usize, Errno> {
    loop {
        match f() {
            Err(libc::EINTR) => {}
            r => return r,
        }
    }
}

/// Read into `buf`; `Ok(0)` at end-of-file.
pub(super) fn read(fd: libc::c_int, buf: &mut [u8]) -> Result<usize, Errno> {
    let (ptr, len) = (buf.as_mut_ptr() as usize, buf.len());
    // SAFETY: `buf` is valid for writes of `len` bytes for the call.
    restarted(|| unsafe { call::raw(libc::SYS_read, [int(fd), ptr, len, 0]) })
}

/// Write `buf` (a few bytes: one `write` to a pipe is atomic up to `PIPE_BUF`).
pub(super) fn write(fd: libc::c_int, buf: &[u8]) -> Result<usize, Errno> {
    let (ptr, len) = (buf.as_ptr() as usize, buf.len());
    // SAFETY: `buf` is valid for reads of `len` bytes for the call.
    restarted(|| unsafe { call::raw(libc::SYS_write, [int(fd), ptr, len, 0]) })
}

/// `setpgid(0, 0)`: a process group of its own, led by the child.
pub(super) fn own_process_group() -> Result<(), Errno> {
    numbers(libc::SYS_setpgid, [0, 0, 0, 0]).map(drop)
}

/// Make `from` the descriptor `to`, without close-on-exec.
pub(super) fn move_to(from: libc::c_int, to: libc::c_int) -> Result<(), Errno> {
    if from == to {
        // dup3 refuses equal descriptors; the one we have must only survive the exec.
        numbers(libc::SYS_fcntl, [int(to), libc::F_SETFD as usize, 0, 0]).map(drop)
    } else {
        numbers(libc::SYS_dup3, [int(from), int(to), 0, 0]).map(drop)
    }
}

/// Every descriptor from 3 up closes at exec (`close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`,
/// Linux 5.11): the step gets its three standard streams and nothing the agent inherited
/// without close-on-exec. On an older kernel the call fails and they are inherited as before.
pub(super) fn close_others_on_exec() {
    let _ = numbers(
        libc::SYS_close_range,
        [3, u32::MAX as usize, libc::CLOSE_RANGE_CLOEXEC as usize, 0],
    );
}

/// `chroot(path)`.
pub(super) fn chroot(path: &core::ffi::CStr) -> Result<(), Errno> {
    // SAFETY: `path` is a NUL-terminated string that lives across the call.
    unsafe { call::raw(libc::SYS_chroot, [path.as_ptr() as usize, 0, 0, 0]) }.map(drop)
}

/// `chdir(path)`.
pub(super) fn chdir(path: &core::ffi::CStr) -> Result<(), Errno> {
    // SAFETY: as for `chroot`.
    unsafe { call::raw(libc::SYS_chdir, [path.as_ptr() as usize, 0, 0, 0]) }.map(drop)
}

/// `execve(file, argv, envp)`: returns only on failure.
///
/// # Safety
/// `argv` and `envp` must be NULL-terminated arrays of pointers to NUL-terminated strings,
/// all alive across the call.
pub(super) unsafe fn execve(
    file: &core::ffi::CStr,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
) -> Errno {
    // SAFETY: `file` is NUL-terminated; the caller vouches for `argv` and `envp`.
    match unsafe {
        call::raw(
            libc::SYS_execve,
            [file.as_ptr() as usize, argv as usize, envp as usize, 0],
        )
    } {
        Err(e) => e,
        Ok(_) => libc::EINVAL,
    }
}

/// End the child with `code` (`exit_group`: the child is a process of its own).
pub(super) fn exit(code: i32) -> ! {
    loop {
        let _ = numbers(libc::SYS_exit_group, [int(code), 0, 0, 0]);
    }
}

/// The kernel's `struct sigaction` on x86-64 and AArch64 (both have `sa_restorer`).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[repr(C)]
#[derive(Default)]
struct KernelSigaction {
    handler: usize,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

/// The size of the kernel's signal set, which `rt_sigaction` and `rt_sigprocmask` check.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const SIGSET_SIZE: usize = 8;

/// Give every signal the agent handles its default action back, and `SIGPIPE` too (the
/// standard library ignores it in the agent; a step gets the default, as from
/// `std::process::Command`). The child starts with every signal blocked, so none of the
/// agent's handlers can run in it (they would act on the agent's memory); ignored signals
/// stay ignored, as exec keeps them.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(super) fn default_signal_actions() {
    for sig in 1..=64usize {
        if sig == libc::SIGKILL as usize || sig == libc::SIGSTOP as usize {
            continue;
        }
        let mut old = KernelSigaction::default();
        // SAFETY: `old` is valid for writes of the kernel's struct sigaction; no new action.
        if unsafe {
            call::raw(
                libc::SYS_rt_sigaction,
                [sig, 0, (&raw mut old) as usize, SIGSET_SIZE],
            )
        }
        .is_err()
        {
            continue;
        }
        let ignored = old.handler == libc::SIG_IGN;
        if old.handler != libc::SIG_DFL && (!ignored || sig == libc::SIGPIPE as usize) {
            let default = KernelSigaction::default();
            // SAFETY: `default` (SIG_DFL, no flags) is a valid struct sigaction for the call.
            let _ = unsafe {
                call::raw(
                    libc::SYS_rt_sigaction,
                    [sig, (&raw const default) as usize, 0, SIGSET_SIZE],
                )
            };
        }
    }
}

/// As on x86-64, through glibc (the child has memory of its own on these architectures).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) fn default_signal_actions() {
    for sig in 1..libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: an all-zero sigaction is a valid value to be overwritten.
        let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: `old` is valid for writes; no new action is given.
        if unsafe { libc::sigaction(sig, core::ptr::null(), &raw mut old) } != 0 {
            continue;
        }
        let ignored = old.sa_sigaction == libc::SIG_IGN;
        if old.sa_sigaction != libc::SIG_DFL && (!ignored || sig == libc::SIGPIPE) {
            // SAFETY: SIG_DFL runs no code.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
}

/// Unblock every signal: the step starts with an empty signal mask, as from
/// `std::process::Command` (exec keeps the mask).
pub(super) fn unblock_signals() {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        let empty: u64 = 0;
        // SAFETY: `empty` is a valid kernel signal set for the call; no old set is asked.
        let _ = unsafe {
            call::raw(
                libc::SYS_rt_sigprocmask,
                [
                    libc::SIG_SETMASK as usize,
                    (&raw const empty) as usize,
                    0,
                    SIGSET_SIZE,
                ],
            )
        };
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // SAFETY: an all-zero sigset_t is the empty set; sigprocmask only reads it.
        let empty: libc::sigset_t = unsafe { core::mem::zeroed() };
        // SAFETY: as above.
        unsafe {
            libc::sigprocmask(libc::SIG_SETMASK, &raw const empty, core::ptr::null_mut());
        }
    }
}
