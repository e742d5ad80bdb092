//! The process runner shared by steps and interrupts: chroot or not, a process group per
//! operation, explicit environment, raw streaming to the agent's output and a log file,
//! cancellation, timeouts.

mod cancel;
mod image;
pub mod leftovers;
pub(crate) mod operation;
mod relay;
mod spawn;
mod sys;
pub mod usage;

pub use cancel::Cancellation;

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tracing::warn;

use crate::host::phases::{self, Phase};

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
#[derive(Debug, Default)]
pub(crate) struct FdSink {
    /// `None`: the stream could not be duplicated (it was not open when the agent started).
    fd: Option<OwnedFd>,
    closed: AtomicBool,
}

impl FdSink {
    /// A sink writing to `fd`, which it owns.
    pub fn new(fd: OwnedFd) -> Self {
        Self {
            fd: Some(fd),
            closed: AtomicBool::new(false),
        }
    }

    /// A sink writing to a duplicate of `fd` (e.g. `std::io::stdout().as_fd()`): the same
    /// open stream, owned by the sink. A descriptor that cannot be duplicated (not open)
    /// gives a sink whose writes fail as writes to it would.
    pub(crate) fn duplicate(fd: BorrowedFd<'_>) -> Self {
        fd.try_clone_to_owned()
            .map_or_else(|_| Self::default(), Self::new)
    }

    /// Whether the reader went away (a write failed with `EPIPE`).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }
}

impl Sink for FdSink {
    fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        if self.is_closed() {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let Some(fd) = &self.fd else {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        };
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
        self.fd.as_ref().map(AsFd::as_fd)
    }
}

/// `io::Write` over the agent's stderr that never fails: for the log writer, whose output is
/// diagnostics and must not stop (or crash) the agent when stderr is closed (SPEC §10). Each
/// record starts a line, whatever a step wrote last (SPEC §8.4). Made by
/// [`Output::log_writer`].
#[derive(Clone)]
pub struct LossyWriter {
    sink: Arc<dyn Sink>,
    line: Arc<LineState>,
}

impl io::Write for LossyWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.line.write_line_start(&*self.sink, buf);
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

/// Whether the bytes last relayed to one of the agent's streams left a line open, behind the
/// lock that orders the relay's chunks and the agent's own text on that stream (SPEC §8.4
/// line framing).
#[derive(Debug, Default)]
pub(crate) struct LineState(Mutex<bool>);

impl LineState {
    fn lock(&self) -> std::sync::MutexGuard<'_, bool> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Write agent text (one or more whole lines) so that it starts a line: after a newline
    /// when an operation's output left its last line open. Errors are ignored, as for every
    /// write of the agent's own text (SPEC §10).
    fn write_line_start(&self, sink: &dyn Sink, text: &[u8]) {
        if text.is_empty() {
            return;
        }
        let mut open = self.lock();
        let _ = if *open {
            sink.write_all(&[b"\n", text].concat())
        } else {
            sink.write_all(text)
        };
        *open = false;
    }
}

/// The agent's two output streams.
#[derive(Clone)]
pub struct Output {
    pub stdout: Arc<dyn Sink>,
    pub stderr: Arc<dyn Sink>,
    stdout_line: Arc<LineState>,
    stderr_line: Arc<LineState>,
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
            stdout_line: Arc::default(),
            stderr_line: Arc::default(),
        }
    }

    /// The process's own stdout and stderr. Every caller shares the same two sinks, so a
    /// stream found closed stays closed for all of them.
    pub fn process() -> Self {
        static PROCESS: OnceLock<Output> = OnceLock::new();
        PROCESS
            .get_or_init(|| {
                Self::new(
                    Arc::new(FdSink::duplicate(io::stdout().as_fd())),
                    Arc::new(FdSink::duplicate(io::stderr().as_fd())),
                )
            })
            .clone()
    }

    /// Print agent text on stdout (banner, headers, echoed commands). A closed stdout must
    /// not stop the agent from finishing its work, so errors are ignored.
    ///
    /// SPEC §8.4 line framing: when an operation's output did not end its last line, a
    /// newline goes first, so the text (an execution header) starts a line.
    pub fn print(&self, text: &str) {
        self.stdout_line
            .write_line_start(&*self.stdout, text.as_bytes());
    }

    /// Print agent text on stderr, framed and ignoring errors like [`Output::print`].
    pub fn eprint(&self, text: &str) {
        self.stderr_line
            .write_line_start(&*self.stderr, text.as_bytes());
    }

    /// The writer of the agent's log records: stderr, framed like [`Output::eprint`], so that
    /// a record never continues a line a step left open (SPEC §8.4: a JSON log stays one
    /// object per line).
    pub fn log_writer(&self) -> LossyWriter {
        LossyWriter {
            sink: self.stderr.clone(),
            line: self.stderr_line.clone(),
        }
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

impl Termination {
    /// The exit code, when the process exited.
    pub fn exit_code(self) -> Option<i32> {
        match self {
            Termination::Exited(c) => Some(c),
            Termination::Signalled(_) => None,
        }
    }

    /// The signal's name (`SIGKILL`), or its number, when a signal ended the process.
    pub fn signal(self) -> Option<String> {
        match self {
            Termination::Exited(_) => None,
            Termination::Signalled(s) => Some(
                Signal::try_from(s).map_or_else(|_| s.to_string(), |sig| sig.as_str().to_owned()),
            ),
        }
    }
}

/// Await `work`, calling `beat` with the time elapsed every `every` while it has not finished
/// (SPEC §1.5: a heartbeat record while an operation runs; `every` zero: no heartbeat).
pub(crate) async fn with_heartbeat<F: std::future::Future>(
    work: F,
    every: Duration,
    mut beat: impl FnMut(Duration),
) -> F::Output {
    if every.is_zero() {
        return work.await;
    }
    tokio::pin!(work);
    let started = tokio::time::Instant::now();
    let mut tick = tokio::time::interval_at(started + every, every);
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = tick.tick() => beat(started.elapsed()),
        }
    }
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
    /// The last `TAIL_BYTES` of the combined output, for the results record.
    pub tail: Vec<u8>,
    /// CPU time, peak memory and output bytes (see [`usage`] for what is counted).
    pub usage: usage::Usage,
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
            usage: usage::Usage::default(),
        }
    }
}

/// How much of an operation's output the results record keeps.
pub(crate) const TAIL_BYTES: usize = 4096;

/// The last `cap` bytes written, in constant memory.
#[derive(Debug, Clone)]
pub(crate) struct Tail {
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

    pub(crate) fn into_vec(self) -> Vec<u8> {
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
    /// The file exists, but the interpreter its `#!` line names does not (exec says `ENOENT`
    /// for both).
    #[error("interpreter {interpreter:?} of {file} not found")]
    Interpreter { file: String, interpreter: String },
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
    pub cancel: Cancellation,
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
    /// The group `pid` (its leader is the operation's process) runs `operation`.
    fn started(&self, pid: i32, operation: &str);
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

    /// Start `spec` with `stdio` as its descriptors 0, 1, 2 (SPEC §8.4: its own process
    /// group, `execve` semantics, chroot and cwd), its group recorded before its program
    /// starts (SPEC §10: a killed agent leaves no group the next run cannot see). The pid.
    /// The time the record took is added to `recording`.
    fn start(
        &self,
        recording: &std::cell::Cell<Duration>,
        spec: &ProcessSpec,
        program: &str,
        stdio: [BorrowedFd<'_>; 3],
    ) -> Result<i32, ExecError> {
        let spawn_err = spawn_error(program);
        let image = image::ExecImage::new(spec).map_err(spawn_err)?;
        let record = self.recorder.as_ref().map(|recorder| {
            // The whole command line: which of a kind's operations (`nvidia-smi -i 3`) runs.
            let line = std::iter::once(program)
                .chain(spec.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ");
            move |pid: i32| {
                let started = phases::start();
                recorder.started(pid, &line);
                phases::end(Phase::Record, started);
                if let Some(started) = started {
                    recording.set(recording.get() + started.elapsed());
                }
            }
        });
        let record = record.as_ref().map(|r| r as &dyn Fn(i32));
        spawn::spawn(&image, stdio, record).map_err(|source| match source.raw_os_error() {
            Some(libc::ENOEXEC) => ExecError::ExecFormat {
                program: program.to_owned(),
            },
            Some(libc::ENOENT) => image::missing_interpreter(spec, &image.candidate_paths())
                .unwrap_or_else(|| spawn_err(source)),
            _ => spawn_err(source),
        })
    }
}

/// `ExecError::Spawn` of `program`, for `map_err`.
fn spawn_error(program: &str) -> impl Fn(io::Error) -> ExecError + Copy + '_ {
    move |source| ExecError::Spawn {
        program: program.to_owned(),
        source,
    }
}

/// `/dev/null`, the stdin of every operation (SPEC §8.4), opened once.
fn dev_null() -> io::Result<BorrowedFd<'static>> {
    static DEV_NULL: OnceLock<OwnedFd> = OnceLock::new();
    if DEV_NULL.get().is_none() {
        let fd = OwnedFd::from(std::fs::OpenOptions::new().read(true).open("/dev/null")?);
        // Another thread may have opened it meanwhile: one of the two is kept.
        let _ = DEV_NULL.set(fd);
    }
    Ok(DEV_NULL.get().expect("set above").as_fd())
}

/// The relay of an operation's stdout and stderr (`pipes`, read ends) to the agent's streams
/// and `log`, on a blocking thread of its own.
fn start_relay(
    output: &Output,
    [out_r, err_r]: [OwnedFd; 2],
    log: Option<File>,
    wake: relay::Wake,
) -> tokio::task::JoinHandle<relay::Relayed> {
    let relay = relay::Relay::new(
        vec![
            (out_r, output.stdout.clone(), output.stdout_line.clone()),
            (err_r, output.stderr.clone(), output.stderr_line.clone()),
        ],
        log,
        wake,
        relay::DrainPolicy::default(),
    );
    tokio::task::spawn_blocking(move || relay.run())
}

/// SPEC §8.4: the pipes were let go while processes the operation left running still held
/// them; say which.
fn warn_if_still_held(program: &str, held: &[OwnedFd]) {
    let held = leftovers::still_held(held);
    if held.is_empty() {
        return;
    }
    let holders = leftovers::holding_pipes(&held);
    if holders.is_empty() {
        warn!(
            operation = %program,
            "a process the operation left running still holds its output; no longer relaying it"
        );
    } else {
        warn!(
            operation = %program,
            held_by = %leftovers::describe(&holders),
            "processes the operation left running still hold its output; no longer relaying it"
        );
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
    /// own cleanup runs), then SIGKILL after `stop_grace`; whatever is left in a group so
    /// stopped is killed once its main process has exited.
    ///
    /// SPEC §8.4 leftover processes: the main process exiting ends the operation. What it
    /// left running (a helper started with `&`, `nohup`, `setsid`) keeps running; its output
    /// is relayed until the pipes have been idle for 2 s (at most 20 s, and not at all after
    /// a second termination signal), then the pipes are let go with a warning naming the
    /// processes that hold them. [`leftovers::end`] ends them when the agent exits.
    async fn run(
        &self,
        cfg: &Config,
        spec: &ProcessSpec,
        log: Option<&mut File>,
    ) -> Result<Outcome, ExecError> {
        let program = spec.program.display().to_string();
        let spawn_err = spawn_error(&program);
        // Our own pipes: the relay thread owns the read ends (see `relay`), and they get a
        // larger buffer before the child writes anything.
        let (out_r, out_w) = output_pipe().map_err(spawn_err)?;
        let (err_r, err_w) = output_pipe().map_err(spawn_err)?;
        let spawning = phases::start();
        let (drain, wake) = relay::drain_pair().map_err(spawn_err)?;
        let started = Instant::now();
        let recording = std::cell::Cell::new(Duration::ZERO);
        let spawned = self.start(
            &recording,
            spec,
            &program,
            [dev_null().map_err(spawn_err)?, out_w.as_fd(), err_w.as_fd()],
        );
        // Only once our copies of the write ends are closed can the pipes reach end-of-file
        // when the child's side closes.
        drop((out_w, err_w));
        let pid = spawned?;
        phases::end_without(Phase::Spawn, spawning, recording.get());
        let waiting = phases::start();
        // The relay writes the log through its own handle on the same open file.
        let (log, log_error) = match log.map(|file| file.try_clone()).transpose() {
            Ok(log) => (log, None),
            Err(e) => (None, Some(e.to_string())),
        };
        let mut relay = Some(start_relay(&cfg.output, [out_r, err_r], log, wake));
        // What the kernel accounts to the process, read once it has exited and before the
        // async side reaps it (see `usage`).
        let mut exit_wait = Some(tokio::task::spawn_blocking(move || usage::wait_exited(pid)));
        let mut accounted = None;
        let mut relayed = None;
        let mut status = None;
        let mut cancelled = false;
        let mut forced = false;
        let mut timed_out = false;
        // The group was told to stop (SIGTERM sent): what is left of it goes once the main
        // process has exited.
        let mut stopping = false;
        // The relay was told to stop at once.
        let mut let_go = false;
        // When the group was asked to stop: SIGKILL is due `stop_grace` later.
        let mut kill_at: Option<tokio::time::Instant> = None;
        let timeout_at = cfg.timeout.map(deadline_after);
        let stop = |kill_at: &mut Option<tokio::time::Instant>, stopping: &mut bool| {
            if kill_at.is_none() {
                stop_group(pid, Signal::SIGTERM);
                *stopping = true;
                *kill_at = Some(deadline_after(cfg.stop_grace));
            }
        };
        // The main process was reaped, which ends the operation (and its duration): the
        // relay goes on only while the pipes are busy.
        let reaped = |st: i32, stopping: bool| {
            if stopping {
                stop_group(pid, Signal::SIGKILL);
            }
            drain.main_exited();
            (st, started.elapsed())
        };

        while status.is_none() || relay.is_some() {
            tokio::select! {
                r = join(&mut relay), if relay.is_some() => {
                    relay = None;
                    // A panic in the relay is a bug: propagate it.
                    relayed = Some(r.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic())));
                }
                r = join(&mut exit_wait), if status.is_none() => {
                    exit_wait = None;
                    accounted = r.ok().and_then(Result::ok);
                    // It has exited (or its figures could not be read, and then it is
                    // waited for here): reaping it does not hold the runtime.
                    let st = usage::reap(pid).map_err(|source| ExecError::Wait { program: program.clone(), source })?;
                    status = Some(reaped(st, stopping));
                }
                () = cfg.cancel.stop.cancelled(), if !cancelled && status.is_none() => {
                    cancelled = true;
                    match spec.first_signal {
                        FirstSignal::Stop => stop(&mut kill_at, &mut stopping),
                        FirstSignal::Finish => warn!(
                            operation = %program,
                            pid,
                            running = %format_running(started.elapsed()),
                            "waiting for the running operation to finish before stopping; \
                             a second termination signal stops it"
                        ),
                    }
                }
                () = cfg.cancel.force.cancelled(), if cancelled && !forced && status.is_none() => {
                    forced = true;
                    if kill_at.is_none() {
                        warn!(
                            operation = %program,
                            pid,
                            grace = %format_running(cfg.stop_grace),
                            "stopping the running operation: SIGTERM to its process group, SIGKILL after the grace period"
                        );
                    }
                    stop(&mut kill_at, &mut stopping);
                }
                // SPEC §10: a second signal does not wait for the pipes of what the operation
                // left running.
                () = cfg.cancel.force.cancelled(), if status.is_some() && relay.is_some() && !let_go => {
                    let_go = true;
                    drain.stop_now();
                }
                () = sleep_until(timeout_at), if !timed_out && status.is_none() && timeout_at.is_some() => {
                    // SPEC §10: the deadline can be noticed late (the agent was paused or
                    // throttled); a process that exited by then is judged by its exit status.
                    // Reaped only once its usage is read, so that no exit between the two
                    // loses the figures.
                    let exited_now = usage::exited_now(pid);
                    accounted = accounted.or(exited_now);
                    let reaped_now = if exited_now.is_some() { usage::reap(pid).ok() } else { None };
                    if let Some(st) = reaped_now {
                        status = Some(reaped(st, stopping));
                    } else {
                        timed_out = true;
                        stop(&mut kill_at, &mut stopping);
                    }
                }
                () = sleep_until(kill_at), if kill_at.is_some() && status.is_none() => {
                    stop_group(pid, Signal::SIGKILL);
                    kill_at = None;
                }
            }
        }
        phases::end(Phase::Wait, waiting);
        if let Some(recorder) = &self.recorder {
            phases::time(Phase::Record, || recorder.finished());
        }
        let (status, duration) = status.expect("loop ends after wait");
        let relayed = relayed.expect("loop ends after the relay");
        warn_if_still_held(&program, &relayed.held);
        let status = std::process::ExitStatus::from_raw(status);
        let termination = match (status.code(), status.signal()) {
            (Some(code), _) => Termination::Exited(code),
            (None, Some(sig)) => Termination::Signalled(sig),
            (None, None) => Termination::Signalled(0),
        };
        Ok(Outcome {
            termination,
            duration,
            timed_out,
            cancelled,
            log_error: log_error.or(relayed.log_error),
            usage: usage::Usage {
                stdout_bytes: relayed.bytes.first().copied().unwrap_or(0),
                stderr_bytes: relayed.bytes.get(1).copied().unwrap_or(0),
                ..accounted.unwrap_or_default()
            },
            tail: relayed.tail.into_vec(),
        })
    }
}

/// `1.2s`, for log lines.
fn format_running(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// A pipe for one of the child's output streams: (read end for the relay, write end for the
/// child), close-on-exec (the child gets its end through dup2), as large as allowed.
fn output_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    relay::grow_pipe(r.as_fd());
    Ok((r, w))
}

/// The result of a blocking task once it finished (the relay, the wait for the exit).
async fn join<T>(
    task: &mut Option<tokio::task::JoinHandle<T>>,
) -> Result<T, tokio::task::JoinError> {
    match task.as_mut() {
        Some(handle) => handle.await,
        None => std::future::pending().await,
    }
}

/// Longer than any run: a timeout or grace beyond it (`Command::timeout` has no upper bound;
/// a kind may say `Duration::MAX`) is as good as none, and adding it to now cannot overflow.
const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// `now + d`, with `d` clamped to [`FAR_FUTURE`] (`Instant + Duration` panics on overflow).
fn deadline_after(d: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(d.min(FAR_FUTURE)).unwrap_or(now)
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Signal the process group `pgid` (its leader's pid).
fn stop_group(pgid: i32, signal: Signal) {
    let _ = killpg(Pid::from_raw(pgid), signal);
}

#[cfg(test)]
mod tests;
