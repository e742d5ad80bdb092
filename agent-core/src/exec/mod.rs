//! The process runner shared by steps and interrupts: chroot or not, a process group per
//! operation, explicit environment, raw streaming to the agent's output and a log file,
//! cancellation, timeouts.

mod relay;

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::sync::watch;
use tracing::warn;

/// Did an operation satisfy its execution policy?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Success,
    Failed,
}

/// Where raw bytes go: the agent's stdout/stderr, or memory in tests.
pub trait Sink: Send + Sync {
    fn write_all(&self, buf: &[u8]) -> io::Result<()>;

    /// The descriptor behind the sink, if any: step output then reaches it with `tee(2)` or
    /// `splice(2)` instead of passing through the agent's memory.
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

/// An unbuffered file descriptor (the agent's own stdout or stderr): step output is relayed
/// as it arrives, never held back waiting for a newline.
///
/// SPEC §10: once the reader has gone (`EPIPE`, e.g. `agent … | head -1`), the stream is
/// closed for good: nothing more is written to it and the agent carries on with its work.
#[derive(Debug)]
pub struct FdSink {
    fd: RawFd,
    closed: AtomicBool,
}

impl FdSink {
    /// A sink writing to `fd`, which must stay open for the life of the sink.
    pub const fn new(fd: RawFd) -> Self {
        Self {
            fd,
            closed: AtomicBool::new(false),
        }
    }

    /// Whether the reader went away (a write failed with `EPIPE`).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }
}

impl Sink for FdSink {
    fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        if self.is_closed() {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        // SAFETY: the descriptor stays open for the life of the sink (see `new`).
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd) };
        while !buf.is_empty() {
            match nix::unistd::write(fd, buf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = &buf[n..],
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => {
                    if e == nix::errno::Errno::EPIPE {
                        self.closed.store(true, Ordering::Relaxed);
                    }
                    return Err(e.into());
                }
            }
        }
        Ok(())
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        if self.is_closed() {
            return None;
        }
        // SAFETY: as above.
        Some(unsafe { BorrowedFd::borrow_raw(self.fd) })
    }
}

/// `io::Write` over a [`Sink`] that never fails: for the log writer, whose output is
/// diagnostics and must not stop (or crash) the agent when stderr is closed (SPEC §10).
#[derive(Clone)]
pub struct LossyWriter(pub Arc<dyn Sink>);

impl io::Write for LossyWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let _ = self.0.write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Captures everything written, for tests.
#[derive(Debug, Default)]
pub struct MemorySink(Mutex<Vec<u8>>);

impl MemorySink {
    pub fn contents(&self) -> Vec<u8> {
        self.0.lock().expect("sink lock").clone()
    }
}

impl Sink for MemorySink {
    fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        self.0.lock().expect("sink lock").extend_from_slice(buf);
        Ok(())
    }
}

/// The agent's two output streams.
#[derive(Clone)]
pub struct Output {
    pub stdout: Arc<dyn Sink>,
    pub stderr: Arc<dyn Sink>,
    /// The bytes last relayed from an operation's stdout did not end with a newline.
    open_line: Arc<AtomicBool>,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Output")
    }
}

impl Output {
    pub fn new(stdout: Arc<dyn Sink>, stderr: Arc<dyn Sink>) -> Self {
        Self {
            stdout,
            stderr,
            open_line: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The process's own stdout and stderr. Every caller shares the same two sinks, so a
    /// stream found closed stays closed for all of them.
    pub fn process() -> Self {
        static PROCESS: OnceLock<Output> = OnceLock::new();
        PROCESS
            .get_or_init(|| Self::new(Arc::new(FdSink::new(1)), Arc::new(FdSink::new(2))))
            .clone()
    }

    /// Print agent text on stdout (banner, headers, echoed commands). A closed stdout must
    /// not stop the agent from finishing its work, so errors are ignored.
    ///
    /// SPEC §8.4 line framing: when an operation's output did not end its last line, a
    /// newline goes first, so the text (an execution header) starts a line.
    pub fn print(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.open_line.swap(false, Ordering::Relaxed) {
            let _ = self.stdout.write_all(format!("\n{text}").as_bytes());
        } else {
            let _ = self.stdout.write_all(text.as_bytes());
        }
    }

    /// Print agent text on stderr, ignoring errors like [`Output::print`].
    pub fn eprint(&self, text: &str) {
        let _ = self.stderr.write_all(text.as_bytes());
    }

    /// Remember how an operation's stdout ended (its last relayed byte).
    fn relayed_stdout(&self, last: u8) {
        self.open_line.store(last != b'\n', Ordering::Relaxed);
    }
}

/// Sender side of cancellation (the signal handler holds it).
#[derive(Debug)]
pub struct CancelHandle(watch::Sender<u8>);

/// Nothing requested.
const RUNNING: u8 = 0;
/// The first termination signal: finish the running operation, start nothing after it.
const STOP: u8 = 1;
/// The second one: stop the running operation too.
const FORCE: u8 = 2;

/// Cancellation (SPEC §10). Once requested, no new operation starts; the running one is left
/// to finish (or stopped at once, see [`FirstSignal`]) until a second request
/// ([`CancelHandle::force`]) stops it.
#[derive(Debug, Clone)]
pub struct Cancel(watch::Receiver<u8>, Option<&'static AtomicBool>);

impl Cancel {
    pub fn new() -> (CancelHandle, Cancel) {
        let (tx, rx) = watch::channel(RUNNING);
        (CancelHandle(tx), Cancel(rx, None))
    }

    /// Also cancelled once `flag` is set. A signal handler sets the flag synchronously, so a
    /// signal is seen by the very next check (e.g. between two steps), before the task that
    /// forwards it through the [`CancelHandle`] has had a chance to run.
    pub fn with_flag(flag: &'static AtomicBool) -> (CancelHandle, Cancel) {
        let (tx, rx) = watch::channel(RUNNING);
        (CancelHandle(tx), Cancel(rx, Some(flag)))
    }

    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow() >= STOP || self.1.is_some_and(|f| f.load(Ordering::SeqCst))
    }

    /// Resolves once cancelled (never, if the handle is dropped uncancelled).
    pub async fn cancelled(&self) {
        self.reached(STOP).await;
    }

    /// Resolves once the running operation is to be stopped too ([`CancelHandle::force`]).
    pub async fn forced(&self) {
        self.reached(FORCE).await;
    }

    async fn reached(&self, level: u8) {
        let mut rx = self.0.clone();
        if rx.wait_for(|l| *l >= level).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl CancelHandle {
    /// Start nothing new; let the running operation finish.
    pub fn cancel(&self) {
        self.0.send_if_modified(|l| {
            let was = *l;
            *l = was.max(STOP);
            *l != was
        });
    }

    /// Stop the running operation as well (its process group gets SIGTERM, then SIGKILL).
    pub fn force(&self) {
        self.0.send_replace(FORCE);
    }
}

/// What the first termination signal does to a running operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FirstSignal {
    /// SPEC §10: it runs to completion and is judged normally; a second signal stops it.
    #[default]
    Finish,
    /// SPEC §9.4: its process group is stopped at once. For after-reboot operations, whose
    /// command the host's shutdown is expected to end anyway.
    Stop,
}

/// One process to run.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// The executable as seen by the process (inside the chroot when there is one).
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The complete environment (nothing else is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// Working directory (inside the chroot when there is one).
    pub cwd: PathBuf,
    /// chroot into this directory before exec; `None` when ROOT is `/` or the step is not on
    /// the host.
    pub chroot: Option<PathBuf>,
    pub first_signal: FirstSignal,
}

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    Exited(i32),
    Signalled(i32),
}

impl std::fmt::Display for Termination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Termination::Exited(c) => write!(f, "exit code {c}"),
            Termination::Signalled(s) => match Signal::try_from(*s) {
                Ok(sig) => write!(f, "signal {}", sig.as_str()),
                Err(_) => write!(f, "signal {s}"),
            },
        }
    }
}

/// The result of running one process.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub termination: Termination,
    pub duration: Duration,
    /// The timeout fired and the process group was stopped.
    pub timed_out: bool,
    /// A termination signal arrived while the process ran (whether or not it was stopped).
    pub cancelled: bool,
    /// A write to the log file failed (output was still relayed); the first error.
    pub log_error: Option<String>,
    /// The last [`TAIL_BYTES`] of the combined output, for the results record.
    pub tail: Vec<u8>,
}

impl Outcome {
    /// An outcome with nothing but its termination (for runners that spawn nothing).
    pub fn new(termination: Termination) -> Self {
        Self {
            termination,
            duration: Duration::ZERO,
            timed_out: false,
            cancelled: false,
            log_error: None,
            tail: Vec::new(),
        }
    }
}

/// How much of an operation's output the results record keeps.
pub const TAIL_BYTES: usize = 4096;

/// The last `cap` bytes written, in constant memory.
#[derive(Debug, Clone)]
pub struct Tail {
    buf: std::collections::VecDeque<u8>,
    cap: usize,
}

impl Tail {
    pub fn new(cap: usize) -> Self {
        Self {
            buf: std::collections::VecDeque::with_capacity(cap),
            cap,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        let bytes = &bytes[bytes.len().saturating_sub(self.cap)..];
        let overflow = (self.buf.len() + bytes.len()).saturating_sub(self.cap);
        self.buf.drain(..overflow);
        self.buf.extend(bytes);
    }

    pub fn into_vec(self) -> Vec<u8> {
        self.buf.into()
    }
}

/// Failures to run a process at all (as opposed to a process that failed).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("spawning {program}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    /// SPEC §8.4: `ENOEXEC` is never retried through `/bin/sh`.
    #[error("spawning {program}: exec format error (no `#!` line, or built for another machine)")]
    ExecFormat { program: String },
    #[error("waiting for {program}")]
    Wait {
        program: String,
        #[source]
        source: io::Error,
    },
}

/// Execution policy shared by steps and interrupt operations.
#[derive(Debug, Clone)]
pub struct Config {
    pub output: Output,
    pub cancel: Cancel,
    /// Between SIGTERM and SIGKILL when stopping a process group.
    pub stop_grace: Duration,
    pub timeout: Option<Duration>,
    /// Spawns processes: [`ProcessRunner`] in production, a recording fake in unit tests.
    pub runner: Arc<dyn Runner>,
}

impl Config {
    /// Run `spec` under this policy (see [`ProcessRunner`] for the semantics).
    pub async fn run(
        &self,
        spec: &ProcessSpec,
        log: Option<&mut File>,
    ) -> Result<Outcome, ExecError> {
        self.runner.run(self, spec, log).await
    }
}

/// What runs processes; behind a trait so orchestration can be unit-tested without spawning
/// anything (least of all `reboot`).
#[async_trait::async_trait]
pub trait Runner: Send + Sync + std::fmt::Debug {
    async fn run(
        &self,
        cfg: &Config,
        spec: &ProcessSpec,
        log: Option<&mut File>,
    ) -> Result<Outcome, ExecError>;
}

/// Told when an operation's process group starts and when it is gone, so that a later run can
/// find a group that outlived a killed agent (SPEC §10; the lock file records it, §11).
pub trait GroupRecorder: Send + Sync + std::fmt::Debug {
    /// The group `pgid` (its leader is the operation's process) runs `operation`.
    fn started(&self, pgid: i32, operation: &str);
    /// The operation's group has ended.
    fn finished(&self);
}

/// The real runner.
#[derive(Debug, Clone, Default)]
pub struct ProcessRunner {
    recorder: Option<Arc<dyn GroupRecorder>>,
}

impl ProcessRunner {
    /// A runner that reports each operation's process group to `recorder`.
    pub fn recording(recorder: Arc<dyn GroupRecorder>) -> Self {
        Self {
            recorder: Some(recorder),
        }
    }
}

#[async_trait::async_trait]
impl Runner for ProcessRunner {
    /// Run `spec` to completion, relaying its stdout and stderr raw to the agent's streams and,
    /// in arrival order, to `log`.
    ///
    /// Signal semantics (SPEC §10): the first cancellation lets the operation finish (it is
    /// judged by how it ends) unless `spec.first_signal` says to stop it; a forced
    /// cancellation or the timeout sends SIGTERM to the whole process group (so the package's
    /// own cleanup runs), then SIGKILL after `stop_grace`. When the main process has exited,
    /// whatever is left in its group (background grandchildren) is killed so that nothing
    /// outlives the operation and the pipes reach end-of-file.
    async fn run(
        &self,
        cfg: &Config,
        spec: &ProcessSpec,
        log: Option<&mut File>,
    ) -> Result<Outcome, ExecError> {
        let program = spec.program.display().to_string();
        let spawn_err = |source: io::Error| ExecError::Spawn {
            program: program.clone(),
            source,
        };
        let image = ExecImage::new(spec).map_err(spawn_err)?;
        // Our own pipes rather than `Stdio::piped()`: the relay thread owns the read ends
        // (see `relay`), and they get a larger buffer before the child writes anything.
        let (out_r, out_w) = output_pipe().map_err(spawn_err)?;
        let (err_r, err_w) = output_pipe().map_err(spawn_err)?;
        let mut cmd = tokio::process::Command::new(&spec.program);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(out_w))
            .stderr(Stdio::from(err_w))
            .process_group(0)
            .kill_on_drop(false);
        if spec.chroot.is_none() && image.candidates.len() == 1 {
            // Nothing to do between fork and exec, and no PATH search: the standard library
            // spawns with posix_spawn(3), which fails with ENOEXEC instead of trying the
            // shell (glibc >= 2.15; pinned by the unit tests) and costs no fork.
            cmd.args(&spec.args)
                .env_clear()
                .envs(spec.env.iter().map(|(k, v)| (k, v)))
                .current_dir(&spec.cwd);
        } else {
            // SAFETY: between fork and exec the closure makes only async-signal-safe system
            // calls (chroot, chdir, execve) on strings and pointer arrays built before the
            // fork.
            unsafe {
                cmd.pre_exec(move || Err(image.exec()));
            }
        }

        let started = Instant::now();
        let spawned = cmd.spawn();
        // The command holds our copies of the write ends: only once they are closed can the
        // pipes reach end-of-file when the child's side closes.
        drop(cmd);
        let mut child = spawned.map_err(|source| {
            if source.raw_os_error() == Some(libc::ENOEXEC) {
                ExecError::ExecFormat {
                    program: program.clone(),
                }
            } else {
                spawn_err(source)
            }
        })?;
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        if let (Some(recorder), Some(pg)) = (&self.recorder, pgid) {
            recorder.started(pg.as_raw(), &program);
        }
        // The relay writes the log through its own handle on the same open file.
        let mut log_error: Option<String> = None;
        let log = log.and_then(|file| match file.try_clone() {
            Ok(dup) => Some(dup),
            Err(e) => {
                log_error = Some(e.to_string());
                None
            }
        });
        let relay = relay::Relay::new(
            vec![
                (out_r, cfg.output.stdout.clone()),
                (err_r, cfg.output.stderr.clone()),
            ],
            log,
        );
        let mut relay = Some(tokio::task::spawn_blocking(move || relay.run()));
        let mut relayed = None;
        let mut status = None;
        let mut cancelled = false;
        let mut forced = false;
        let mut timed_out = false;
        // When the group was asked to stop: SIGKILL is due `stop_grace` later.
        let mut kill_at: Option<tokio::time::Instant> = None;
        let timeout_at = cfg.timeout.map(|t| tokio::time::Instant::now() + t);
        let stop = |kill_at: &mut Option<tokio::time::Instant>| {
            if kill_at.is_none() {
                stop_group(pgid, Signal::SIGTERM);
                *kill_at = Some(tokio::time::Instant::now() + cfg.stop_grace);
            }
        };

        while status.is_none() || relay.is_some() {
            tokio::select! {
                r = join(&mut relay), if relay.is_some() => {
                    relay = None;
                    relayed = Some(r);
                }
                r = child.wait(), if status.is_none() => {
                    let st = r.map_err(|source| ExecError::Wait { program: program.clone(), source })?;
                    status = Some(exited(st, pgid));
                }
                () = cfg.cancel.cancelled(), if !cancelled && status.is_none() => {
                    cancelled = true;
                    match spec.first_signal {
                        FirstSignal::Stop => stop(&mut kill_at),
                        FirstSignal::Finish => warn!(
                            operation = %program,
                            pid = pgid.map_or(0, Pid::as_raw),
                            running = %format_running(started.elapsed()),
                            "waiting for the running operation to finish before stopping; \
                             a second termination signal stops it"
                        ),
                    }
                }
                () = cfg.cancel.forced(), if cancelled && !forced && status.is_none() => {
                    forced = true;
                    if kill_at.is_none() {
                        warn!(
                            operation = %program,
                            pid = pgid.map_or(0, Pid::as_raw),
                            grace = %format_running(cfg.stop_grace),
                            "stopping the running operation: SIGTERM to its process group, SIGKILL after the grace period"
                        );
                    }
                    stop(&mut kill_at);
                }
                () = sleep_until(timeout_at), if !timed_out && status.is_none() && timeout_at.is_some() => {
                    // SPEC §10: the deadline can be noticed late (the agent was paused or
                    // throttled); a process that exited by then is judged by its exit status.
                    if let Ok(Some(st)) = child.try_wait() {
                        status = Some(exited(st, pgid));
                    } else {
                        timed_out = true;
                        stop(&mut kill_at);
                    }
                }
                () = sleep_until(kill_at), if kill_at.is_some() && status.is_none() => {
                    stop_group(pgid, Signal::SIGKILL);
                    kill_at = None;
                }
            }
        }
        if let Some(recorder) = &self.recorder {
            recorder.finished();
        }
        let status = status.expect("loop ends after wait");
        let relayed = relayed.expect("loop ends after the relay");
        if let Some(last) = relayed.last_bytes.first().copied().flatten() {
            cfg.output.relayed_stdout(last);
        }
        let termination = match (status.code(), status.signal()) {
            (Some(code), _) => Termination::Exited(code),
            (None, Some(sig)) => Termination::Signalled(sig),
            (None, None) => Termination::Signalled(0),
        };
        Ok(Outcome {
            termination,
            duration: started.elapsed(),
            timed_out,
            cancelled,
            log_error: log_error.or(relayed.log_error),
            tail: relayed.tail.into_vec(),
        })
    }
}

/// The main process has exited: whatever is left in its group would keep the pipes open
/// forever, so it goes too.
fn exited(status: std::process::ExitStatus, pgid: Option<Pid>) -> std::process::ExitStatus {
    stop_group(pgid, Signal::SIGKILL);
    status
}

/// `1.2s`, for log lines.
fn format_running(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// Everything `execve(2)` needs, built before the fork: the child may only make
/// async-signal-safe calls, so it allocates nothing.
///
/// SPEC §8.4: the program runs with `execve` semantics. glibc's `execvp` (what the standard
/// library calls after a fork) runs a file the kernel refuses with `ENOEXEC` through
/// `/bin/sh`, so a step without a `#!` line, or built for another machine, would run as a
/// shell script; here `ENOEXEC` fails the spawn.
struct ExecImage {
    chroot: Option<CString>,
    cwd: CString,
    /// The files to try in order: the program itself when it names a path, else the program
    /// in each PATH directory (PATH of the child's environment, resolved inside the chroot).
    candidates: Vec<CString>,
    _argv: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    envp: Vec<*const libc::c_char>,
}

// SAFETY: the raw pointers point into the `CString`s the image owns, which never move or
// change; the image is only read (in the child, after fork).
unsafe impl Send for ExecImage {}
// SAFETY: as above.
unsafe impl Sync for ExecImage {}

/// glibc's search path when PATH is unset (`confstr(_CS_PATH)`).
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

impl ExecImage {
    fn new(spec: &ProcessSpec) -> io::Result<Self> {
        let c = |bytes: &[u8]| {
            CString::new(bytes)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "contains a NUL byte"))
        };
        let program = spec.program.as_os_str().as_bytes();
        let candidates = if program.contains(&b'/') {
            vec![c(program)?]
        } else if program.is_empty() {
            Vec::new()
        } else {
            let path = spec
                .env
                .iter()
                .rev()
                .find(|(k, _)| k == "PATH")
                .map_or(DEFAULT_PATH, |(_, v)| v.as_bytes());
            path.split(|b| *b == b':')
                .map(|dir| {
                    // An empty entry is the current directory, as for execvp.
                    let dir = if dir.is_empty() { b".".as_slice() } else { dir };
                    let mut file = dir.to_vec();
                    if !file.ends_with(b"/") {
                        file.push(b'/');
                    }
                    file.extend_from_slice(program);
                    c(&file)
                })
                .collect::<io::Result<_>>()?
        };
        let argv_strings: Vec<CString> = std::iter::once(Ok(c(program)?))
            .chain(spec.args.iter().map(|a| c(a.as_bytes())))
            .collect::<io::Result<_>>()?;
        let envp_strings: Vec<CString> = spec
            .env
            .iter()
            .map(|(k, v)| {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                c(&kv)
            })
            .collect::<io::Result<_>>()?;
        let pointers = |strings: &[CString]| {
            strings
                .iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        Ok(Self {
            chroot: spec
                .chroot
                .as_deref()
                .map(|r| c(r.as_os_str().as_bytes()))
                .transpose()?,
            cwd: c(OsStr::as_bytes(spec.cwd.as_os_str()))?,
            candidates,
            argv: pointers(&argv_strings),
            _argv: argv_strings,
            envp: pointers(&envp_strings),
            _envp: envp_strings,
        })
    }

    /// In the child: chroot, chdir, exec. Returns only on failure, with the error to report.
    fn exec(&self) -> io::Error {
        // SAFETY: valid NUL-terminated strings and NULL-terminated pointer arrays owned by
        // `self`; these calls are async-signal-safe.
        unsafe {
            if let Some(root) = &self.chroot {
                if libc::chroot(root.as_ptr()) != 0 {
                    return io::Error::last_os_error();
                }
            }
            if libc::chdir(self.cwd.as_ptr()) != 0 {
                return io::Error::last_os_error();
            }
            // execvp's search rules, minus its shell fallback: skip directories where the
            // file is missing, remember a permission error, stop at any other error.
            let mut denied = false;
            for file in &self.candidates {
                libc::execve(file.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr());
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EACCES) => denied = true,
                    Some(
                        libc::ENOENT
                        | libc::ENOTDIR
                        | libc::ESTALE
                        | libc::ENODEV
                        | libc::ETIMEDOUT,
                    ) if self.candidates.len() > 1 => {}
                    _ => return err,
                }
            }
            io::Error::from_raw_os_error(if denied { libc::EACCES } else { libc::ENOENT })
        }
    }
}

/// A pipe for one of the child's output streams: (read end for the relay, write end for the
/// child), close-on-exec (the child gets its end through dup2), as large as allowed.
fn output_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    relay::grow_pipe(r.as_fd());
    Ok((r, w))
}

/// The relay's result once it finished (a panic in it is a bug: propagate it).
async fn join(relay: &mut Option<tokio::task::JoinHandle<relay::Relayed>>) -> relay::Relayed {
    match relay.as_mut() {
        Some(handle) => match handle.await {
            Ok(relayed) => relayed,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        },
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn stop_group(pgid: Option<Pid>, signal: Signal) {
    if let Some(pg) = pgid {
        let _ = killpg(pg, signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::Path;

    fn config(
        timeout: Option<Duration>,
    ) -> (Config, Arc<MemorySink>, Arc<MemorySink>, CancelHandle) {
        let out = Arc::new(MemorySink::default());
        let err = Arc::new(MemorySink::default());
        let (handle, cancel) = Cancel::new();
        let cfg = Config {
            output: Output::new(out.clone(), err.clone()),
            cancel,
            stop_grace: Duration::from_millis(300),
            timeout,
            runner: Arc::new(ProcessRunner::default()),
        };
        (cfg, out, err, handle)
    }

    fn sh(script: &str) -> ProcessSpec {
        ProcessSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("X".into(), "x-value".into()),
            ],
            cwd: "/".into(),
            chroot: None,
            first_signal: FirstSignal::Finish,
        }
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn relays_stdout_and_stderr_raw_and_both_to_the_log() {
        let (cfg, out, err, _h) = config(None);
        let dir = tempfile::tempdir().unwrap();
        let mut log = File::create(dir.path().join("log")).unwrap();
        let o = rt()
            .block_on(cfg.run(
                &sh("printf 'a\\nb'; printf 'e' >&2; echo $X"),
                Some(&mut log),
            ))
            .unwrap();
        assert_eq!(o.termination, Termination::Exited(0));
        assert_eq!(out.contents(), b"a\nbx-value\n");
        assert_eq!(err.contents(), b"e");
        let logged = std::fs::read(dir.path().join("log")).unwrap();
        assert_eq!(logged.len(), b"a\nbx-value\ne".len());
    }

    /// stdout: digits and newlines; stderr: letters and semicolons, so each stream can be
    /// picked back out of the combined log. Written concurrently by `cat` in 128 KiB blocks,
    /// large enough for the zero-copy paths.
    fn big_output(dir: &Path) -> (ProcessSpec, Vec<u8>, Vec<u8>) {
        let d = dir.display();
        let make = format!(
            "seq 1 300000 > {d}/a; seq 300001 400000 > {d}/c; \
             seq 1 150000 | tr '0-9\\n' 'a-j;' > {d}/b"
        );
        assert!(
            std::process::Command::new("/bin/sh")
                .args(["-c", &make])
                .status()
                .unwrap()
                .success()
        );
        let read = |n: &str| std::fs::read(dir.join(n)).unwrap();
        let out = [read("a"), read("c")].concat();
        let err = read("b");
        let spec = sh(&format!("(cat {d}/a; cat {d}/c) & cat {d}/b >&2; wait"));
        (spec, out, err)
    }

    fn split_streams(log: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let is_out = |b: &u8| b.is_ascii_digit() || *b == b'\n';
        (
            log.iter().copied().filter(is_out).collect(),
            log.iter().copied().filter(|b| !is_out(b)).collect(),
        )
    }

    /// A log opened the way `hostfs::create_new` opens it, with a line already in it (the
    /// interrupt echo).
    fn append_log(dir: &Path) -> File {
        use std::io::Write as _;
        let mut log = File::options()
            .create_new(true)
            .append(true)
            .open(dir.join("log"))
            .unwrap();
        log.write_all(b"header\n").unwrap();
        log
    }

    fn finish_log(dir: &Path, mut log: File) -> Vec<u8> {
        use std::io::Write as _;
        log.write_all(b"after\n").unwrap();
        let logged = std::fs::read(dir.join("log")).unwrap();
        let body = logged
            .strip_prefix(b"header\n".as_slice())
            .and_then(|b| b.strip_suffix(b"after\n".as_slice()))
            .expect("the relay appends between what was written before and after");
        body.to_vec()
    }

    fn config_with(stdout: Arc<dyn Sink>, stderr: Arc<dyn Sink>) -> Config {
        let (handle, cancel) = Cancel::new();
        std::mem::forget(handle);
        Config {
            output: Output::new(stdout, stderr),
            cancel,
            stop_grace: Duration::from_millis(300),
            timeout: None,
            runner: Arc::new(ProcessRunner::default()),
        }
    }

    #[test]
    fn large_output_reaches_a_pipe_a_file_and_the_log_byte_exact() {
        use std::io::Read as _;
        use std::os::fd::AsRawFd as _;
        let dir = tempfile::tempdir().unwrap();
        let (out_r, out_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            File::from(out_r).read_to_end(&mut bytes).unwrap();
            bytes
        });
        let err_file = File::create(dir.path().join("stderr")).unwrap();
        let cfg = config_with(
            Arc::new(FdSink::new(out_w.as_raw_fd())),
            Arc::new(FdSink::new(err_file.as_raw_fd())),
        );
        let (spec, out, err) = big_output(dir.path());
        let mut log = append_log(dir.path());
        let o = rt().block_on(cfg.run(&spec, Some(&mut log))).unwrap();
        drop(out_w);
        assert_eq!(o.termination, Termination::Exited(0));
        assert_eq!(o.log_error, None);
        assert_eq!(reader.join().unwrap(), out, "stdout pipe");
        assert_eq!(
            std::fs::read(dir.path().join("stderr")).unwrap(),
            err,
            "stderr file"
        );
        let logged = finish_log(dir.path(), log);
        assert_eq!(
            split_streams(&logged),
            (out, err),
            "each stream in order in the log"
        );
        assert_eq!(o.tail, logged[logged.len() - TAIL_BYTES..]);
    }

    #[test]
    fn large_output_to_dev_null_still_fills_the_log_and_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let null = File::options().write(true).open("/dev/null").unwrap();
        let sink: Arc<dyn Sink> = Arc::new(FdSink::new(std::os::fd::AsRawFd::as_raw_fd(&null)));
        let cfg = config_with(sink.clone(), sink);
        let (spec, out, err) = big_output(dir.path());
        let mut log = append_log(dir.path());
        let o = rt().block_on(cfg.run(&spec, Some(&mut log))).unwrap();
        let logged = finish_log(dir.path(), log);
        assert_eq!(split_streams(&logged), (out, err));
        assert_eq!(o.tail, logged[logged.len() - TAIL_BYTES..]);
    }

    #[test]
    fn large_output_through_the_copy_path_is_byte_exact() {
        let (cfg, out, err, _h) = config(None);
        let dir = tempfile::tempdir().unwrap();
        let (spec, expected_out, expected_err) = big_output(dir.path());
        let mut log = append_log(dir.path());
        let o = rt().block_on(cfg.run(&spec, Some(&mut log))).unwrap();
        assert_eq!(out.contents(), expected_out);
        assert_eq!(err.contents(), expected_err);
        let logged = finish_log(dir.path(), log);
        assert_eq!(split_streams(&logged), (expected_out, expected_err));
        assert_eq!(o.tail, logged[logged.len() - TAIL_BYTES..]);
    }

    #[test]
    fn without_a_log_the_tail_is_still_the_last_bytes() {
        let null = File::options().write(true).open("/dev/null").unwrap();
        let sink: Arc<dyn Sink> = Arc::new(FdSink::new(std::os::fd::AsRawFd::as_raw_fd(&null)));
        let cfg = config_with(sink.clone(), sink);
        let dir = tempfile::tempdir().unwrap();
        let (spec, out, _) = big_output(dir.path());
        let spec = ProcessSpec {
            args: vec!["-c".into(), format!("{}; printf end", spec.args[1])],
            ..spec
        };
        let o = rt().block_on(cfg.run(&spec, None)).unwrap();
        assert!(o.tail.ends_with(b"end"));
        if !o.tail.contains(&b';') {
            // stderr finished first: the tail is all stdout.
            assert_eq!(
                o.tail[..TAIL_BYTES - 3],
                out[out.len() - (TAIL_BYTES - 3)..]
            );
        }
    }

    #[test]
    fn tail_keeps_the_last_bytes_in_order() {
        let mut t = Tail::new(5);
        t.push(b"abc");
        t.push(b"defg");
        assert_eq!(t.clone().into_vec(), b"cdefg");
        t.push(b"0123456789");
        assert_eq!(t.into_vec(), b"56789");
    }

    #[test]
    fn reports_real_exit_codes_and_signals() {
        let (cfg, ..) = config(None);
        let rt = rt();
        assert_eq!(
            rt.block_on(cfg.run(&sh("exit 3"), None))
                .unwrap()
                .termination,
            Termination::Exited(3)
        );
        assert_eq!(
            rt.block_on(cfg.run(&sh("kill -9 $$"), None))
                .unwrap()
                .termination,
            Termination::Signalled(9)
        );
    }

    #[test]
    fn stdin_is_empty() {
        let (cfg, out, ..) = config(None);
        rt().block_on(cfg.run(&sh("cat; echo done"), None)).unwrap();
        assert_eq!(out.contents(), b"done\n");
    }

    #[test]
    fn background_grandchildren_do_not_outlive_the_operation() {
        let (cfg, ..) = config(None);
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; exit 0", pidfile.display());
        let o = rt().block_on(cfg.run(&sh(&script), None)).unwrap();
        assert!(o.duration < Duration::from_secs(10));
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(Duration::from_millis(50));
        // Reaped by init or a zombie at most: it must not be running.
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(
            state.is_empty() || state.contains(") Z "),
            "grandchild still alive: {state}"
        );
    }

    #[test]
    fn timeout_terminates_the_group() {
        let (cfg, ..) = config(Some(Duration::from_millis(200)));
        let o = rt().block_on(cfg.run(&sh("sleep 30"), None)).unwrap();
        assert!(o.timed_out);
        assert_eq!(o.termination, Termination::Signalled(15));
    }

    /// Run `spec`, calling `signal` on the handle 150 ms in (and `again` 150 ms later, if
    /// given).
    fn run_signalled(
        cfg: &Config,
        spec: &ProcessSpec,
        signal: impl FnOnce(),
        again: Option<Box<dyn FnOnce()>>,
    ) -> Outcome {
        rt().block_on(async {
            let run = cfg.run(spec, None);
            tokio::pin!(run);
            tokio::select! {
                _ = &mut run => unreachable!("finished before the signal"),
                () = tokio::time::sleep(Duration::from_millis(150)) => signal(),
            }
            if let Some(again) = again {
                tokio::select! {
                    _ = &mut run => unreachable!("finished before the second signal"),
                    () = tokio::time::sleep(Duration::from_millis(150)) => again(),
                }
            }
            run.await.unwrap()
        })
    }

    #[test]
    fn cancellation_lets_the_running_operation_finish() {
        let (cfg, out, _err, handle) = config(None);
        let spec = sh("trap 'echo got-term' TERM; sleep 0.6; echo finished");
        let o = run_signalled(&cfg, &spec, || handle.cancel(), None);
        assert!(o.cancelled);
        assert_eq!(o.termination, Termination::Exited(0));
        assert_eq!(
            out.contents(),
            b"finished\n",
            "not signalled, ran to its end"
        );
    }

    #[test]
    fn first_signal_stop_stops_the_group_at_once() {
        let (cfg, _out, _err, handle) = config(None);
        let mut spec = sh("sleep 5");
        spec.first_signal = FirstSignal::Stop;
        let o = run_signalled(&cfg, &spec, || handle.cancel(), None);
        assert!(o.cancelled);
        assert_eq!(o.termination, Termination::Signalled(15));
        assert!(o.duration < Duration::from_secs(4));
    }

    #[test]
    fn forced_cancellation_sends_sigterm_then_sigkill_after_the_grace() {
        let (cfg, _out, _err, handle) = config(None);
        let handle = Arc::new(handle);
        let again = handle.clone();
        let spec = sh("trap '' TERM; sleep 5 & wait; sleep 5");
        let o = run_signalled(
            &cfg,
            &spec,
            || handle.cancel(),
            Some(Box::new(move || again.force())),
        );
        assert!(o.cancelled);
        assert_eq!(o.termination, Termination::Signalled(9));
        assert!(o.duration < Duration::from_secs(4));
    }

    #[test]
    fn a_step_that_traps_sigterm_and_exits_zero_is_judged_normally() {
        let (cfg, out, _err, handle) = config(None);
        let handle = Arc::new(handle);
        let again = handle.clone();
        let spec = sh("trap 'echo bye; exit 0' TERM; while :; do sleep 0.05; done");
        let o = run_signalled(
            &cfg,
            &spec,
            || handle.cancel(),
            Some(Box::new(move || again.force())),
        );
        assert!(o.cancelled);
        assert_eq!(o.termination, Termination::Exited(0));
        assert_eq!(out.contents(), b"bye\n");
    }

    #[test]
    fn a_process_that_exited_before_a_late_deadline_is_judged_by_its_exit_status() {
        // The deadline is noticed late, as after the agent was paused: block the runtime
        // thread past both the exit and the deadline, then let the loop see both at once.
        let (cfg, ..) = config(Some(Duration::from_millis(300)));
        let spec = sh("exit 0");
        let o = rt()
            .block_on(async {
                let run = cfg.run(&spec, None);
                tokio::pin!(run);
                tokio::select! {
                    biased;
                    _ = &mut run => unreachable!("the child cannot be reaped this early"),
                    () = std::future::ready(()) => {}
                }
                std::thread::sleep(Duration::from_millis(600));
                run.await
            })
            .unwrap();
        assert!(!o.timed_out, "{o:?}");
        assert_eq!(o.termination, Termination::Exited(0));
    }

    #[test]
    fn a_file_without_a_shebang_is_an_exec_format_error() {
        let (cfg, out, ..) = config(None);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("noshebang");
        std::fs::write(&file, "echo ran-by-sh\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut spec = sh("");
        spec.program = file.clone();
        spec.args.clear();
        let err = rt().block_on(cfg.run(&spec, None)).unwrap_err();
        assert!(matches!(err, ExecError::ExecFormat { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "spawning {}: exec format error (no `#!` line, or built for another machine)",
                file.display()
            )
        );
        assert!(out.contents().is_empty());
    }

    #[test]
    fn programs_without_a_slash_are_found_in_the_path_of_the_child_environment() {
        let (cfg, out, ..) = config(None);
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tool = bin.join("tool");
        std::fs::write(&tool, "#!/bin/sh\necho tool $1\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let spec = ProcessSpec {
            program: "tool".into(),
            args: vec!["x".into()],
            env: vec![(
                "PATH".into(),
                format!("/nonexistent:{}", bin.display()).into(),
            )],
            cwd: "/".into(),
            chroot: None,
            first_signal: FirstSignal::Finish,
        };
        let rt = rt();
        let o = rt.block_on(cfg.run(&spec, None)).unwrap();
        assert_eq!(o.termination, Termination::Exited(0));
        assert_eq!(out.contents(), b"tool x\n");

        std::fs::write(&tool, "echo no shebang\n").unwrap();
        let err = rt.block_on(cfg.run(&spec, None)).unwrap_err();
        assert!(matches!(err, ExecError::ExecFormat { .. }), "{err:?}");

        let missing = ProcessSpec {
            program: "missing-tool".into(),
            ..spec
        };
        let err = rt.block_on(cfg.run(&missing, None)).unwrap_err();
        let ExecError::Spawn { source, .. } = err else {
            panic!("{err:?}")
        };
        assert_eq!(source.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn output_ending_mid_line_gets_a_newline_before_the_next_print() {
        let (cfg, out, ..) = config(None);
        let rt = rt();
        rt.block_on(cfg.run(&sh("printf 'no newline'"), None))
            .unwrap();
        cfg.output.print("header\n");
        rt.block_on(cfg.run(&sh("echo line"), None)).unwrap();
        cfg.output.print("header\n");
        rt.block_on(cfg.run(&sh("printf 'x' >&2"), None)).unwrap();
        cfg.output.print("header\n");
        assert_eq!(
            String::from_utf8(out.contents()).unwrap(),
            "no newline\nheader\nline\nheader\nheader\n"
        );
    }

    #[test]
    fn a_closed_stdout_is_not_written_again() {
        let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
        drop(r);
        let sink = FdSink::new(std::os::fd::AsRawFd::as_raw_fd(&w));
        let e = sink.write_all(b"x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
        assert!(sink.is_closed());
        assert!(sink.fd().is_none(), "no zero-copy path to a closed stream");
        let cfg = config_with(Arc::new(sink), Arc::new(MemorySink::default()));
        let o = rt()
            .block_on(cfg.run(&sh("echo to-a-closed-stdout; exit 4"), None))
            .unwrap();
        assert_eq!(o.termination, Termination::Exited(4));
        assert_eq!(o.tail, b"to-a-closed-stdout\n");
        drop(w);
    }

    #[test]
    fn spawn_failure_names_the_program() {
        let (cfg, ..) = config(None);
        let mut spec = sh("");
        spec.program = "/nonexistent/step.sh".into();
        let err = rt().block_on(cfg.run(&spec, None)).unwrap_err();
        assert_eq!(err.to_string(), "spawning /nonexistent/step.sh");
    }
}
