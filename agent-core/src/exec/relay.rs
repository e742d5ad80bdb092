//! The data path of a running operation: the child's stdout and stderr pipes to the agent's
//! own streams and to the log file, in arrival order, in constant memory (SPEC §8.4, §8.10).
//!
//! It runs on a blocking thread (`poll(2)` on the two pipes) while the async side waits for the
//! process, cancellation and timeouts. Once the operation's main process has exited, the async
//! side says so through a [`Drain`]: whatever still holds the pipes then (a helper the step
//! left running) is relayed until the pipes have been idle for [`DrainPolicy::idle`], and
//! never longer than [`DrainPolicy::limit`] (SPEC §8.4 leftover processes). Each chunk takes
//! the cheapest path the kernel offers for the agent's stream:
//!
//! - a pipe (a container's stdout): `tee(2)` duplicates the chunk into it without copying,
//!   then `splice(2)` moves it into the log (or to `/dev/null` when there is no log);
//! - a regular file or `/dev/null`: `splice(2)` into it, duplicated for the log through a
//!   scratch pipe with `tee(2)`;
//! - anything else (a terminal, a socket, an in-memory sink in tests): `read` then `write`.
//!
//! Only the last [`TAIL_BYTES`] of each chunk pass through user space, for the results record
//! (the last bytes of every chunk contain the last bytes of the whole output). A chunk is
//! always consumed completely before the next one is looked at, so the log receives the two
//! streams exactly in the order their chunks were taken from the pipes.

use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{self, FcntlArg, OFlag, SpliceFFlags};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::stat::{SFlag, fstat};

use super::{LineState, Sink, TAIL_BYTES, Tail};

/// Capacity asked for the operation's pipes and for the agent's own streams when they are
/// pipes: fewer wake-ups and larger zero-copy moves per chunk. The kernel caps it at
/// `/proc/sys/fs/pipe-max-size` (1 MiB by default); a refusal leaves the 64 KiB default.
pub(crate) const PIPE_CAPACITY: usize = 1 << 20;

/// The buffer of the copy path, and of the last bytes of each chunk.
const COPY_BUFFER: usize = 64 * 1024;

/// Chunks up to this size are copied (one `read`, one `write` per destination) on the splice
/// path: for interactive output that is fewer system calls than splicing.
const SMALL_CHUNK: usize = 16 * 1024;

/// How long the relay goes on once the operation's main process has exited (SPEC §8.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DrainPolicy {
    /// Stop once the pipes have been idle this long after the exit (the Go agent's
    /// `WaitDelay`).
    pub idle: Duration,
    /// Stop this long after the exit whatever arrives: a helper that never stops writing
    /// must not hold the agent.
    pub limit: Duration,
}

impl Default for DrainPolicy {
    fn default() -> Self {
        Self {
            idle: Duration::from_secs(2),
            limit: Duration::from_secs(20),
        }
    }
}

/// How long a relay told to stop at once still takes what the pipes hold or are about to get
/// (the last words of the main process, a stopped group's end-of-file), at most.
const FINAL_SWEEP: Duration = Duration::from_millis(100);

/// [`Drain`] states.
const RUNNING: u8 = 0;
const EXITED: u8 = 1;
const STOP: u8 = 2;

/// The async side's hold on a running relay: it says when the main process exited, or that
/// the relay must stop at once (a second termination signal). Each call wakes the relay.
#[derive(Debug)]
pub struct Drain {
    state: Arc<AtomicU8>,
    wake: OwnedFd,
}

/// The relay's side of a [`Drain`].
#[derive(Debug)]
pub(crate) struct Wake {
    state: Arc<AtomicU8>,
    fd: OwnedFd,
}

/// A [`Drain`] and the [`Wake`] to hand to [`Relay::new`]: made before the spawn, so that no
/// failure can come between starting a process and relaying its output.
pub(crate) fn drain_pair() -> io::Result<(Drain, Wake)> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
    let state = Arc::new(AtomicU8::new(RUNNING));
    Ok((
        Drain {
            state: state.clone(),
            wake: w,
        },
        Wake { state, fd: r },
    ))
}

impl Drain {
    /// The main process has exited: relay what is left until the pipes are idle.
    pub(crate) fn main_exited(&self) {
        let _ = self
            .state
            .compare_exchange(RUNNING, EXITED, Ordering::SeqCst, Ordering::SeqCst);
        self.wake();
    }

    /// Stop relaying now: what the pipes already hold is taken, then they are let go.
    pub(crate) fn stop_now(&self) {
        self.state.store(STOP, Ordering::SeqCst);
        self.wake();
    }

    fn wake(&self) {
        // A full wake pipe already holds a wake-up.
        let _ = nix::unistd::write(&self.wake, &[1]);
    }
}

impl Wake {
    /// Empty the wake pipe and say what the async side asked for.
    fn take(&self) -> u8 {
        let mut buf = [0u8; 64];
        while nix::unistd::read(&self.fd, &mut buf).is_ok_and(|n| n > 0) {}
        self.state.load(Ordering::SeqCst)
    }
}

/// What the relay hands back once both pipes reached end-of-file, or it stopped waiting.
#[derive(Debug)]
pub struct Relayed {
    pub tail: Tail,
    /// The first error writing the log; output to the agent's streams continued.
    pub log_error: Option<String>,
    /// Bytes taken from each pipe, in the order the pipes were given.
    pub bytes: Vec<u64>,
    /// The pipes that had not reached end-of-file when the relay stopped (their read ends):
    /// a process the operation left behind may hold their write ends.
    pub held: Vec<OwnedFd>,
}

/// How a chunk reaches the agent's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// The stream is a pipe: `tee(2)` into it.
    Tee,
    /// The stream is a regular file or the null device: `splice(2)` into it.
    Splice,
    /// `read` + `write` through a buffer.
    Copy,
}

struct Stream {
    /// The read end of the child's pipe.
    pipe: OwnedFd,
    /// The agent's stream (its descriptor, [`Sink::fd`], feeds the zero-copy paths).
    sink: Arc<dyn Sink>,
    /// Whether the agent's stream is left mid-line; updated with each chunk, under its lock.
    line: Arc<LineState>,
    path: Path,
    open: bool,
    last: Option<u8>,
    /// Bytes taken from the pipe so far.
    bytes: u64,
}

/// One operation's relay: both pipes, the log, the tail.
pub struct Relay {
    streams: Vec<Stream>,
    wake: Wake,
    policy: DrainPolicy,
    log: Option<File>,
    /// The log was opened `O_APPEND`, which `splice(2)` refuses; restored at the end.
    log_append: bool,
    /// Bytes can be spliced into the log; otherwise they are copied into it.
    log_splice: bool,
    log_error: Option<String>,
    tail: Tail,
    buf: Vec<u8>,
    /// `/dev/null`, opened on first use, to drop bytes without copying them.
    null: Option<File>,
    /// The scratch pipe of the splice path, created on first use.
    scratch: Option<(OwnedFd, OwnedFd)>,
}

/// Ask for a bigger pipe; a refusal (limits) keeps the current size.
pub(crate) fn grow_pipe(fd: BorrowedFd<'_>) {
    let current = fcntl::fcntl(fd, FcntlArg::F_GETPIPE_SZ).unwrap_or(0);
    if usize::try_from(current).unwrap_or(0) < PIPE_CAPACITY {
        let _ = fcntl::fcntl(
            fd,
            FcntlArg::F_SETPIPE_SZ(i32::try_from(PIPE_CAPACITY).unwrap_or(i32::MAX)),
        );
    }
}

impl Relay {
    /// `pipes`: the read ends of the child's stdout and stderr with the agent's streams they
    /// go to (the sink and its line state). `log`: the operation's log file (a duplicate of
    /// the caller's handle). `wake`: what the async side says through the [`Drain`] of the
    /// same pair.
    pub fn new(
        pipes: Vec<(OwnedFd, Arc<dyn Sink>, Arc<LineState>)>,
        log: Option<File>,
        wake: Wake,
        policy: DrainPolicy,
    ) -> Self {
        let streams = pipes
            .into_iter()
            .map(|(pipe, sink, line)| {
                let path = sink.fd().map_or(Path::Copy, path_for);
                if path == Path::Tee {
                    if let Some(f) = sink.fd() {
                        grow_pipe(f);
                    }
                }
                Stream {
                    pipe,
                    sink,
                    line,
                    path,
                    open: true,
                    last: None,
                    bytes: 0,
                }
            })
            .collect();
        // After the streams' paths are chosen, as before the log's O_APPEND is cleared.
        let (log_append, log_splice) = log.as_ref().map_or((false, false), prepare_log);
        Self {
            streams,
            wake,
            policy,
            log,
            log_append,
            log_splice,
            log_error: None,
            tail: Tail::new(TAIL_BYTES),
            buf: vec![0u8; COPY_BUFFER],
            null: None,
            scratch: None,
        }
    }

    /// Relay until both pipes reach end-of-file, or until the [`Drain`] ends it: at once, or
    /// by the [`DrainPolicy`] once the main process has exited.
    pub fn run(mut self) -> Relayed {
        // When the main process exited, and when a byte last arrived since.
        let mut exited: Option<Instant> = None;
        let mut last_data = Instant::now();
        // Told to stop: what the pipes already hold (the main process's last words) is still
        // taken, until this deadline.
        let mut stop_by: Option<Instant> = None;
        loop {
            let open: Vec<usize> = (0..self.streams.len())
                .filter(|&i| self.streams[i].open)
                .collect();
            if open.is_empty() {
                break;
            }
            let end = stop_by
                .or(exited
                    .map(|at| (last_data.max(at) + self.policy.idle).min(at + self.policy.limit)));
            let timeout = match end.map(|end| end.checked_duration_since(Instant::now())) {
                None => PollTimeout::NONE,
                Some(Some(left)) if !left.is_zero() => poll_timeout(left),
                Some(_) => break,
            };
            let (ready, woken) = {
                let mut fds: Vec<PollFd<'_>> = open
                    .iter()
                    .map(|&i| PollFd::new(self.streams[i].pipe.as_fd(), PollFlags::POLLIN))
                    .chain(std::iter::once(PollFd::new(
                        self.wake.fd.as_fd(),
                        PollFlags::POLLIN,
                    )))
                    .collect();
                match nix::poll::poll(&mut fds, timeout) {
                    Ok(_) | Err(Errno::EINTR) => {}
                    // Cannot happen with valid descriptors; stop rather than spin.
                    Err(_) => break,
                }
                let woken = fds.last().and_then(PollFd::any).unwrap_or(false);
                let ready: Vec<usize> = open
                    .iter()
                    .zip(&fds)
                    .filter(|(_, fd)| fd.any().unwrap_or(true))
                    .map(|(&i, _)| i)
                    .collect();
                (ready, woken)
            };
            if woken {
                match self.wake.take() {
                    STOP if stop_by.is_none() => stop_by = Some(Instant::now() + FINAL_SWEEP),
                    EXITED if exited.is_none() => exited = Some(Instant::now()),
                    _ => {}
                }
            }
            for i in ready {
                let before = self.streams[i].bytes;
                if !self.pump_framed(i) {
                    self.streams[i].open = false;
                }
                if self.streams[i].bytes != before {
                    last_data = Instant::now();
                }
            }
        }
        if let (true, Some(log)) = (self.log_append, &self.log) {
            let _ = set_append(log, true);
        }
        Relayed {
            bytes: self.streams.iter().map(|s| s.bytes).collect(),
            tail: self.tail,
            log_error: self.log_error,
            held: self
                .streams
                .into_iter()
                .filter(|s| s.open)
                .map(|s| s.pipe)
                .collect(),
        }
    }

    /// Move one chunk of stream `i`; `false` at end-of-file (or an unreadable pipe). Under the
    /// stream's line lock, so that agent text written to the same stream (a log record) comes
    /// before or after the chunk, and knows whether the chunk ended its line (SPEC §8.4 line
    /// framing).
    fn pump_framed(&mut self, i: usize) -> bool {
        let line = self.streams[i].line.clone();
        let mut open = line.lock();
        let before = self.streams[i].bytes;
        let more = match self.streams[i].path {
            Path::Tee => self.tee_chunk(i),
            Path::Splice => self.splice_chunk(i),
            Path::Copy => self.copy_chunk(i),
        };
        if self.streams[i].bytes != before {
            if let Some(last) = self.streams[i].last {
                *open = last != b'\n';
            }
        }
        more
    }

    /// `read` + `write`: the path for small chunks and for streams the kernel cannot splice
    /// into.
    fn copy_chunk(&mut self, i: usize) -> bool {
        let n = match read_some(self.streams[i].pipe.as_fd(), &mut self.buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => n,
        };
        self.streams[i].bytes += n as u64;
        self.deliver(i, n, true);
        true
    }

    /// Hand `buf[..n]` to the agent's stream (when `to_sink`), the log and the tail.
    fn deliver(&mut self, i: usize, n: usize, to_sink: bool) {
        let bytes = &self.buf[..n];
        // Every chunk ends here, whichever path moved the rest of it.
        if let Some(&last) = bytes.last() {
            self.streams[i].last = Some(last);
        }
        if to_sink {
            // A closed or failing agent stream must not stop the operation (SPEC §8.4).
            let _ = self.streams[i].sink.write_all(bytes);
        }
        self.tail.push(bytes);
        write_log(self.log.as_mut(), &mut self.log_error, bytes);
    }

    /// The stream is a pipe: duplicate what is buffered into it, then consume it into the log.
    fn tee_chunk(&mut self, i: usize) -> bool {
        let mut retried = false;
        loop {
            let stream = &self.streams[i];
            let Some(sink_fd) = stream.sink.fd() else {
                // The stream was found closed: copy from now on (its writes are dropped).
                self.streams[i].path = Path::Copy;
                return self.copy_chunk(i);
            };
            let pipe = stream.pipe.as_fd();
            match fcntl::tee(
                pipe,
                sink_fd,
                PIPE_CAPACITY,
                SpliceFFlags::SPLICE_F_NONBLOCK,
            ) {
                Ok(0) => return false,
                Ok(n) => {
                    self.consume(i, n, false);
                    return true;
                }
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) if !retried => {
                    // Nothing buffered after all, or the agent's stream is full: wait for room
                    // as a blocking write would, then try once more.
                    if available(pipe) == 0 {
                        return true;
                    }
                    wait_writable(sink_fd);
                    retried = true;
                }
                Err(_) => {
                    // The stream refuses tee (closed reader, exotic pipe): copy from now on,
                    // with its errors ignored as before.
                    self.streams[i].path = Path::Copy;
                    return self.copy_chunk(i);
                }
            }
        }
    }

    /// The stream is a regular file or `/dev/null`: splice what is buffered into it.
    fn splice_chunk(&mut self, i: usize) -> bool {
        let n = available(self.streams[i].pipe.as_fd());
        if n <= SMALL_CHUNK {
            // Small chunks, end-of-file and spurious wake-ups alike.
            return self.copy_chunk(i);
        }
        self.consume(i, n, true);
        true
    }

    /// Consume exactly `n` bytes buffered at the head of stream `i`'s pipe: into the agent's
    /// stream too when `to_sink` (the tee path already put them there), into the log, and
    /// their last bytes into the tail.
    fn consume(&mut self, i: usize, n: usize, to_sink: bool) {
        self.streams[i].bytes += n as u64;
        let rest = n.min(TAIL_BYTES);
        let mut body = n - rest;
        while body > 0 {
            let moved = if to_sink {
                self.splice_to_sink_and_log(i, body)
            } else {
                self.splice_to_log(i, body)
            };
            body -= moved;
        }
        match read_exact(self.streams[i].pipe.as_fd(), &mut self.buf[..rest]) {
            Ok(()) => self.deliver(i, rest, to_sink),
            // The bytes are buffered, so this cannot fail short of a kernel bug; the pipe is
            // then unusable and end-of-file handling takes over.
            Err(_) => self.streams[i].open = false,
        }
    }

    /// Move up to `len` bytes from stream `i`'s pipe into the log (or drop them when there is
    /// none); returns how many left the pipe.
    fn splice_to_log(&mut self, i: usize, len: usize) -> usize {
        let Some(log) = &self.log else {
            return self.discard(i, len);
        };
        if self.log_splice {
            match splice_once(self.streams[i].pipe.as_fd(), log.as_fd(), len) {
                Ok(n) if n > 0 => return n,
                // A filesystem without splice support: copy from now on.
                Err(Errno::EINVAL) => self.log_splice = false,
                other => {
                    note_log_error(&mut self.log_error, other.err());
                    return self.discard(i, len);
                }
            }
        }
        self.copy_exact(i, len.min(COPY_BUFFER), false)
    }

    /// Stream `i` goes to a file or `/dev/null`: up to `len` bytes to it and to the log;
    /// returns how many left the pipe.
    fn splice_to_sink_and_log(&mut self, i: usize, len: usize) -> usize {
        let stream = &self.streams[i];
        let pipe = stream.pipe.as_fd();
        let Some(sink_fd) = stream.sink.fd() else {
            return self.copy_exact(i, len.min(COPY_BUFFER), true);
        };
        if self.log.is_none() {
            return match splice_once(pipe, sink_fd, len) {
                Ok(n) if n > 0 => n,
                _ => self.discard(i, len),
            };
        }
        if !self.log_splice {
            return self.copy_exact(i, len.min(COPY_BUFFER), true);
        }
        // Duplicate into the scratch pipe for the log, then move the original to the stream.
        let Some((scratch_r, scratch_w)) = scratch_pipe(&mut self.scratch) else {
            return self.copy_exact(i, len.min(COPY_BUFFER), true);
        };
        let (scratch_r, scratch_w) = (scratch_r.as_fd(), scratch_w.as_fd());
        let duplicated = loop {
            match fcntl::tee(pipe, scratch_w, len, SpliceFFlags::SPLICE_F_NONBLOCK) {
                Err(Errno::EINTR) => {}
                Ok(n) if n > 0 => break n,
                _ => return self.copy_exact(i, len.min(COPY_BUFFER), true),
            }
        };
        // The log first, from the duplicate; whatever it refuses is dropped from the scratch
        // pipe so it is empty again for the next chunk.
        let mut left = duplicated;
        while left > 0 {
            let log = self.log.as_ref().expect("checked above");
            match splice_once(scratch_r, log.as_fd(), left) {
                Ok(n) if n > 0 => left -= n,
                // A filesystem without splice support: copy this chunk and the next ones.
                Err(Errno::EINVAL) => {
                    self.log_splice = false;
                    while left > 0 {
                        let n = left.min(COPY_BUFFER);
                        if read_exact(scratch_r, &mut self.buf[..n]).is_err() {
                            break;
                        }
                        write_log(self.log.as_mut(), &mut self.log_error, &self.buf[..n]);
                        left -= n;
                    }
                    drop_bytes(scratch_r, left, null_fd(&mut self.null), &mut self.buf);
                    left = 0;
                }
                other => {
                    note_log_error(&mut self.log_error, other.err());
                    drop_bytes(scratch_r, left, null_fd(&mut self.null), &mut self.buf);
                    left = 0;
                }
            }
        }
        // Then the original to the agent's stream.
        let mut left = duplicated;
        while left > 0 {
            match splice_once(pipe, sink_fd, left) {
                Ok(n) if n > 0 => left -= n,
                _ => {
                    drop_bytes(pipe, left, null_fd(&mut self.null), &mut self.buf);
                    left = 0;
                }
            }
        }
        duplicated
    }

    /// Read exactly `len` (≤ the buffer) buffered bytes and deliver them; returns `len`.
    fn copy_exact(&mut self, i: usize, len: usize, to_sink: bool) -> usize {
        if read_exact(self.streams[i].pipe.as_fd(), &mut self.buf[..len]).is_err() {
            self.streams[i].open = false;
            return len;
        }
        self.deliver(i, len, to_sink);
        len
    }

    /// Drop `len` buffered bytes of stream `i` (no log to take them); returns `len`.
    fn discard(&mut self, i: usize, len: usize) -> usize {
        drop_bytes(
            self.streams[i].pipe.as_fd(),
            len,
            null_fd(&mut self.null),
            &mut self.buf,
        );
        len
    }
}

// The relay's lazily made descriptors and its error slot are reached through free functions
// taking one field each, so they can be borrowed while a stream's descriptors are.

/// `/dev/null`, opened on first use.
fn null_fd(null: &mut Option<File>) -> Option<BorrowedFd<'_>> {
    if null.is_none() {
        *null = File::options().write(true).open("/dev/null").ok();
    }
    null.as_ref().map(AsFd::as_fd)
}

/// The scratch pipe of the splice path, created on first use.
fn scratch_pipe(scratch: &mut Option<(OwnedFd, OwnedFd)>) -> Option<&(OwnedFd, OwnedFd)> {
    if scratch.is_none() {
        let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).ok()?;
        grow_pipe(w.as_fd());
        *scratch = Some((r, w));
    }
    scratch.as_ref()
}

/// Write `bytes` to the log, if there is one, keeping the first error.
fn write_log(log: Option<&mut File>, error: &mut Option<String>, bytes: &[u8]) {
    if let Some(Err(e)) = log.map(|log| log.write_all(bytes)) {
        error.get_or_insert_with(|| e.to_string());
    }
}

/// Keep the first error writing the log.
fn note_log_error(slot: &mut Option<String>, e: Option<Errno>) {
    let e = e.map_or_else(
        || io::Error::from(io::ErrorKind::WriteZero),
        io::Error::from,
    );
    slot.get_or_insert_with(|| e.to_string());
}

/// Which path suits the agent's stream behind `fd`.
fn path_for(fd: BorrowedFd<'_>) -> Path {
    let Ok(st) = fstat(fd) else {
        return Path::Copy;
    };
    let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
    // splice(2) refuses files opened O_APPEND (`agent >> file`), and those are not ours to
    // change.
    let append = fcntl::fcntl(fd, FcntlArg::F_GETFL).map_or(true, |flags| {
        OFlag::from_bits_truncate(flags).contains(OFlag::O_APPEND)
    });
    match kind {
        SFlag::S_IFIFO => Path::Tee,
        SFlag::S_IFREG if !append => Path::Splice,
        SFlag::S_IFCHR if st.st_rdev == libc::makedev(1, 3) => Path::Splice,
        _ => Path::Copy,
    }
}

/// The log is ours and only we write it: writing at its end without `O_APPEND` is the same,
/// and lets `splice(2)` in. Returns whether `O_APPEND` has to be restored, and whether the log
/// can take spliced bytes (else they are copied into it, appended as before).
fn prepare_log(log: &File) -> (bool, bool) {
    let Ok(flags) = fcntl::fcntl(log.as_fd(), FcntlArg::F_GETFL) else {
        return (false, false);
    };
    if !OFlag::from_bits_truncate(flags).contains(OFlag::O_APPEND) {
        return (false, true);
    }
    let mut positioned = log;
    if io::Seek::seek(&mut positioned, io::SeekFrom::End(0)).is_err()
        || set_append(log, false).is_err()
    {
        return (false, false);
    }
    (true, true)
}

fn set_append(file: &File, on: bool) -> nix::Result<()> {
    let mut flags = OFlag::from_bits_truncate(fcntl::fcntl(file.as_fd(), FcntlArg::F_GETFL)?);
    flags.set(OFlag::O_APPEND, on);
    fcntl::fcntl(file.as_fd(), FcntlArg::F_SETFL(flags)).map(drop)
}

/// Bytes buffered in a pipe (`FIONREAD`); 0 if unknown.
fn available(pipe: BorrowedFd<'_>) -> usize {
    rustix::io::ioctl_fionread(pipe).map_or(0, |n| usize::try_from(n).unwrap_or(0))
}

/// A poll timeout of at least `d` (rounded up to the millisecond, so that the deadline has
/// passed when it fires).
fn poll_timeout(d: Duration) -> PollTimeout {
    let ms = d.as_micros().div_ceil(1000);
    PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
}

/// Block until `fd` can take more bytes (or is broken).
fn wait_writable(fd: BorrowedFd<'_>) {
    let mut fds = [PollFd::new(fd, PollFlags::POLLOUT)];
    while let Err(Errno::EINTR) = nix::poll::poll(&mut fds, PollTimeout::NONE) {}
}

fn splice_once(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> nix::Result<usize> {
    loop {
        match fcntl::splice(
            from,
            None,
            to,
            None,
            len,
            SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK,
        ) {
            Err(Errno::EINTR) => {}
            other => return other,
        }
    }
}

/// Remove `len` buffered bytes from `pipe`: spliced to `/dev/null`, else read and dropped.
fn drop_bytes(pipe: BorrowedFd<'_>, mut len: usize, null: Option<BorrowedFd<'_>>, buf: &mut [u8]) {
    if let Some(null) = null {
        while len > 0 {
            match splice_once(pipe, null, len) {
                Ok(n) if n > 0 => len -= n,
                _ => break,
            }
        }
    }
    while len > 0 {
        let want = len.min(buf.len());
        if read_exact(pipe, &mut buf[..want]).is_err() {
            return;
        }
        len -= want;
    }
}

fn read_some(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match nix::unistd::read(fd, buf) {
            Err(Errno::EINTR) => {}
            other => return other.map_err(io::Error::from),
        }
    }
}

/// Read exactly `buf.len()` bytes the caller knows are buffered (waiting for them if the pipe
/// is non-blocking and they are not yet visible).
fn read_exact(fd: BorrowedFd<'_>, mut buf: &mut [u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match nix::unistd::read(fd, buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => buf = &mut buf[n..],
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => {
                let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
                let _ = nix::poll::poll(&mut fds, PollTimeout::NONE);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
