//! Starting one process the way `posix_spawn(3)` does: `clone(CLONE_VM)` on a small stack
//! of its own, so nothing of the agent's memory is copied (a `fork(2)` copies the page tables
//! of every resident page, and the exec tears them down again: a cost that grew with the
//! agent's memory, that is with the package's size), with the work a step needs between
//! clone and exec (a process group, stdio, chroot, chdir, the agent's own PATH search) and
//! one thing `posix_spawn` cannot do: the agent learns the child's pid before the step's
//! program starts, and releases it only once it has recorded the process group in the lock
//! file (SPEC §10). An agent killed at any moment has either recorded the group, or its child
//! sees the release pipe close and exits without running the step.
//!
//! # What runs in the child
//!
//! The child shares the agent's memory until its exec and runs beside the agent's threads,
//! so it only makes direct system calls (`exec/sys.rs`: no allocation, no lock, no `errno`) on what
//! [`spawn`] and [`ExecImage::new`] built before the clone, and it writes nothing but its own
//! stack. In order:
//!
//! 1. `close` of the agent's ends of the two pipes (the release pipe's write end, so that the
//!    child sees end-of-file when the agent dies; the error pipe's read end);
//! 2. `rt_sigaction` for every signal: the agent's handlers become `SIG_DFL`, and `SIGPIPE`
//!    too (every signal has been blocked since before the clone, so none of the agent's
//!    handlers can run in the child);
//! 3. `setpgid(0, 0)`: a process group of its own (SPEC §8.4);
//! 4. when the agent records the group: `read` of one byte from the release pipe; end-of-file
//!    (the agent died, or gave up) ends the child with `exit_group` before anything ran;
//! 5. `dup3` of `/dev/null` and the two output pipes onto 0, 1, 2 (or `fcntl(F_SETFD, 0)` for
//!    one that is already there);
//! 6. `close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`: nothing else reaches the step;
//! 7. `chroot` and `chdir` ([`ExecImage::enter`]);
//! 8. `rt_sigprocmask(SIG_SETMASK, {})`: the step starts with no signal blocked;
//! 9. `execve` of each candidate in turn ([`ExecImage::exec`]).
//!
//! A failure at any step is one `write` of the error number to the error pipe (close-on-exec:
//! a successful exec closes it, which is how the agent knows), then `exit_group(127)`.

use std::ffi::c_void;
use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, RawFd};
use std::sync::Mutex;

use nix::fcntl::OFlag;
use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};

use super::image::ExecImage;
use super::sys;

/// The child's stack: its frames are a few hundred bytes (the work is system calls), so this
/// leaves a wide margin; a guard page below it turns an overflow into a fault in the child.
const STACK_BYTES: usize = 64 * 1024;
const GUARD_BYTES: usize = 4096;

/// Start `image` with `stdio` as its descriptors 0, 1, 2, in a process group of its own.
/// When `before_exec` is given it is called with the child's pid while the child waits
/// before its exec (the program has not started); the child goes on once it returns.
/// Returns the pid once the exec has succeeded, or the error the child met (the same error
/// numbers as from an exec in a forked child: `ENOENT`, `EACCES`, `ENOEXEC`, a chroot's).
pub(super) fn spawn(
    image: &ExecImage,
    stdio: [BorrowedFd<'_>; 3],
    before_exec: Option<&dyn Fn(i32)>,
) -> io::Result<i32> {
    let (error_r, error_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let release = before_exec
        .map(|_| nix::unistd::pipe2(OFlag::O_CLOEXEC))
        .transpose()?;
    let stack = Stack::take()?;
    let args = ChildArgs {
        image,
        stdio: stdio.map(|fd| fd.as_raw_fd()),
        error: error_w.as_raw_fd(),
        release: release.as_ref().map(|(r, _)| r.as_raw_fd()),
        agent_ends: [
            error_r.as_raw_fd(),
            release.as_ref().map_or(-1, |(_, w)| w.as_raw_fd()),
        ],
    };
    let flags = if sys::SHARES_MEMORY {
        libc::CLONE_VM
    } else {
        0
    } | libc::SIGCHLD;
    // Every signal blocked from before the clone until the child has reset their actions
    // (step 2 above); this thread's mask is restored at once.
    let mut mask = SigSet::empty();
    pthread_sigmask(
        SigmaskHow::SIG_SETMASK,
        Some(&SigSet::all()),
        Some(&mut mask),
    )?;
    // SAFETY: `child` runs on `stack`, which is ours alone and stays mapped until the child
    // has exec'd or exited (the `Started` guard below and the end-of-file on the error pipe
    // see to it); it reads `args` and what it points to, which live in this frame until then
    // and are not changed meanwhile; what it does is listed in the module's documentation
    // (direct system calls only, nothing written but its own stack).
    let pid = unsafe {
        libc::clone(
            child,
            stack.top(),
            flags,
            (&raw const args).cast_mut().cast::<c_void>(),
        )
    };
    let clone_error = io::Error::last_os_error();
    // From here until the exec is known to have happened, the child may still use `stack`
    // and `args`: on any early return or panic, it is killed and reaped first.
    let mut started = (pid > 0).then_some(Started { pid, armed: true });
    // Restoring the mask this thread had cannot fail (a valid set, a valid `how`).
    let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&mask), None);
    let Some(started) = started.as_mut() else {
        return Err(clone_error);
    };
    drop(error_w);
    if let (Some(record), Some((release_r, release_w))) = (before_exec, release) {
        drop(release_r);
        record(pid);
        // One byte releases the child; if it died meanwhile, its end-of-file below says so.
        let _ = nix::unistd::write(&release_w, &[1]);
    }
    let mut errno = [0u8; 4];
    let n = read_full(error_r.as_fd(), &mut errno)?;
    if n == 0 {
        // The error pipe closed without a word: the exec happened (or the child died before
        // it, which its exit status will tell).
        started.armed = false;
        stack.give_back();
        return Ok(pid);
    }
    // The child exits right after reporting: reap it before its stack goes back.
    started.reap();
    stack.give_back();
    Err(io::Error::from_raw_os_error(if n == errno.len() {
        i32::from_ne_bytes(errno)
    } else {
        libc::EIO
    }))
}

/// What the child is given, by a pointer into [`spawn`]'s frame.
struct ChildArgs<'a> {
    image: &'a ExecImage,
    stdio: [RawFd; 3],
    /// The error pipe's write end (close-on-exec).
    error: RawFd,
    /// The release pipe's read end, when the agent records the group before the exec.
    release: Option<RawFd>,
    /// The agent's ends of the pipes, closed first (`-1`: none).
    agent_ends: [RawFd; 2],
}

/// The child's entry point (see the module's documentation for what it may do).
extern "C" fn child(arg: *mut c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildArgs` of `spawn`, alive and unchanged until this child has
    // exec'd or exited.
    let args = unsafe { &*arg.cast_const().cast::<ChildArgs<'_>>() };
    let errno = child_steps(args);
    let _ = sys::write(args.error, &errno.to_ne_bytes());
    sys::exit(127)
}

/// Steps 1 to 9; returns only on failure, with the error number.
fn child_steps(args: &ChildArgs<'_>) -> sys::Errno {
    for fd in args.agent_ends {
        if fd >= 0 {
            sys::close(fd);
        }
    }
    sys::default_signal_actions();
    if let Err(e) = sys::own_process_group() {
        return e;
    }
    if let Some(release) = args.release {
        let mut byte = [0u8; 1];
        if sys::read(release, &mut byte) != Ok(1) {
            // The agent is gone (or gave up) before recording the group: nothing runs.
            sys::exit(127);
        }
    }
    for (target, fd) in (0..).zip(args.stdio) {
        if let Err(e) = sys::move_to(fd, target) {
            return e;
        }
    }
    sys::close_others_on_exec();
    if let Err(e) = args.image.enter() {
        return e;
    }
    sys::unblock_signals();
    args.image.exec()
}

/// A child between clone and exec: killed and reaped when dropped armed, so that it can no
/// longer use the stack and the arguments that are about to go.
struct Started {
    pid: i32,
    armed: bool,
}

impl Started {
    fn reap(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.pid);
        while let Err(nix::errno::Errno::EINTR) = nix::sys::wait::waitpid(pid, None) {}
        self.armed = false;
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if self.armed {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            self.reap();
        }
    }
}

/// Read until `buf` is full or end-of-file; the byte count.
fn read_full(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match nix::unistd::read(fd, &mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(n)
}

/// A child stack: an anonymous mapping with a guard page at its low end. One is kept for
/// the next spawn (steps start one at a time), so a stage maps it once.
struct Stack {
    base: *mut c_void,
}

// SAFETY: the mapping is plain memory owned by this value; only the spare slot moves it
// between threads, and no two owners use it at once.
unsafe impl Send for Stack {}

static SPARE: Mutex<Option<Stack>> = Mutex::new(None);

impl Stack {
    fn take() -> io::Result<Self> {
        if let Some(stack) = SPARE.lock().ok().and_then(|mut s| s.take()) {
            return Ok(stack);
        }
        // SAFETY: a new private anonymous mapping; nothing else refers to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                GUARD_BYTES + STACK_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Self { base };
        // SAFETY: the first page of the mapping just made; the stack grows down towards it.
        if unsafe { libc::mprotect(base, GUARD_BYTES, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The initial stack pointer: the high end (page-aligned, so 16-byte aligned).
    fn top(&self) -> *mut c_void {
        // SAFETY: one past the end of the mapping, which is where a stack starts.
        unsafe { self.base.cast::<u8>().add(GUARD_BYTES + STACK_BYTES) }.cast()
    }

    /// Keep the stack for the next spawn (the child no longer uses it).
    fn give_back(self) {
        if let Ok(mut slot) = SPARE.lock() {
            if slot.is_none() {
                *slot = Some(self);
            }
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the whole mapping made in `take`, which no child uses any more (a stack is
        // dropped only once its child has exec'd, exited or been reaped).
        unsafe {
            libc::munmap(self.base, GUARD_BYTES + STACK_BYTES);
        }
    }
}
