//! Running the agent: a pending invocation, a running agent and the outcome of a run.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{AGENT_TIMEOUT, BASE_ENV, FakeHost};

/// A pending agent invocation.
pub struct AgentCmd {
    args: Vec<OsString>,
    env: BTreeMap<String, OsString>,
    cwd: PathBuf,
    timeout: Duration,
    hold_stdin: bool,
    /// A file the agent reads as its stdin (default: `/dev/null`).
    stdin_file: Option<PathBuf>,
    /// Shell commands run (as root) in a mount namespace of the agent's own before it starts.
    mount_setup: Option<String>,
    /// `RLIMIT_DATA` of the agent, in bytes.
    data_limit: Option<u64>,
}

impl AgentCmd {
    /// A command with no arguments and the base environment, run in `cwd`.
    pub fn in_dir(cwd: &Path) -> Self {
        Self {
            args: Vec::new(),
            env: BASE_ENV
                .iter()
                .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
                .collect(),
            cwd: cwd.to_owned(),
            timeout: AGENT_TIMEOUT,
            hold_stdin: false,
            stdin_file: None,
            mount_setup: None,
            data_limit: None,
        }
    }

    /// Append one argument.
    #[must_use]
    pub fn arg(mut self, a: impl Into<OsString>) -> Self {
        self.args.push(a.into());
        self
    }

    /// Append arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Set (or override) an environment variable.
    #[must_use]
    pub fn env(mut self, k: &str, v: impl Into<OsString>) -> Self {
        self.env.insert(k.to_owned(), v.into());
        self
    }

    /// Remove a variable of the base environment.
    #[must_use]
    pub fn env_remove(mut self, k: &str) -> Self {
        self.env.remove(k);
        self
    }

    /// Kill the agent and fail the test after `d` (default [`AGENT_TIMEOUT`]).
    #[must_use]
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }

    /// Give the agent a stdin pipe that stays open (never written, never closed) while it runs.
    #[must_use]
    pub fn hold_stdin_open(mut self) -> Self {
        self.hold_stdin = true;
        self
    }

    /// Give the agent the file `path` as its stdin.
    #[must_use]
    pub fn stdin_file(mut self, path: &Path) -> Self {
        self.stdin_file = Some(path.to_owned());
        self
    }

    /// Run the agent in a mount namespace of its own (`unshare --mount`), after the shell
    /// commands `setup` (mounts of tmpfs or read-only binds over directories of the fake root):
    /// the mounts exist for the agent alone and vanish with it, whatever happens to the test.
    /// `setup` runs under `set -e`; a failing command fails the run with exit code 97. Needs root; see
    /// [`mount_namespaces_work`].
    #[must_use]
    pub fn in_mount_namespace(mut self, setup: &str) -> Self {
        self.mount_setup = Some(setup.to_owned());
        self
    }

    /// Run the agent under a memory limit: `RLIMIT_DATA` (its heap and private mappings) of
    /// `bytes`, as a container's memory limit would stop it. An agent whose memory grows with
    /// the size of a file it reads fails to allocate and aborts. A limit rather than a
    /// measurement: `ru_maxrss` of a child spawned from the test binary starts at the test
    /// binary's own high-water mark, and `busybox time` misreports it by the page size.
    #[must_use]
    pub fn data_limit(mut self, bytes: u64) -> Self {
        self.data_limit = Some(bytes);
        self
    }

    /// Start the agent.
    pub fn spawn(self) -> Running {
        let mut cmd = match &self.mount_setup {
            None if self.data_limit.is_some() => {
                let kib = self.data_limit.unwrap_or_default() / 1024;
                let mut cmd = Command::new("/bin/busybox");
                cmd.args([
                    "sh",
                    "-c",
                    &format!("ulimit -d {kib} && exec \"$0\" \"$@\""),
                ])
                .arg(env!("CARGO_BIN_EXE_agent"));
                cmd
            }
            Some(_) if self.data_limit.is_some() => {
                panic!("a data limit and a mount namespace of its own are not combined")
            }
            Some(setup) => {
                let mut cmd = Command::new("/usr/bin/unshare");
                cmd.args(["--mount", "--propagation", "private", "/bin/sh", "-c"])
                    .arg(format!(
                        "(set -e\n{setup}\n) >&2 || exit 97\nexec \"$0\" \"$@\""
                    ))
                    .arg(env!("CARGO_BIN_EXE_agent"));
                cmd
            }
            None => Command::new(env!("CARGO_BIN_EXE_agent")),
        };
        cmd.args(&self.args)
            .env_clear()
            .envs(&self.env)
            .current_dir(&self.cwd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(match &self.stdin_file {
                Some(path) => Stdio::from(std::fs::File::open(path).expect("the stdin file")),
                None if self.hold_stdin => Stdio::piped(),
                None => Stdio::null(),
            });
        let mut child = cmd.spawn().expect("spawn the agent binary");
        let stdin = child.stdin.take();
        let out = drain(child.stdout.take().unwrap());
        let err = drain(child.stderr.take().unwrap());
        Running {
            child,
            stdin,
            out,
            err,
            started: Instant::now(),
            timeout: self.timeout,
            description: format!("agent {:?}", self.args),
        }
    }

    /// Run the agent to completion.
    pub fn run(self) -> Run {
        self.spawn().wait()
    }
}

fn drain(mut r: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

/// A running agent.
pub struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    out: mpsc::Receiver<Vec<u8>>,
    err: mpsc::Receiver<Vec<u8>>,
    started: Instant,
    timeout: Duration,
    description: String,
}

impl Running {
    /// The agent's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send a signal (`"TERM"`, `"INT"`, …) to the agent with busybox `kill`.
    pub fn signal(&self, sig: &str) {
        let status = Command::new("/bin/busybox")
            .args(["kill", "-s", sig, &self.pid().to_string()])
            .status()
            .expect("run busybox kill");
        assert!(status.success(), "kill -s {sig} {} failed", self.pid());
    }

    /// Whether the agent has exited.
    pub fn has_exited(&mut self) -> bool {
        self.child.try_wait().unwrap().is_some()
    }

    /// Wait for the agent to exit (and its output pipes to close), within the timeout.
    pub fn wait(mut self) -> Run {
        let deadline = self.started + self.timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let out = self
                    .out
                    .recv_timeout(Duration::from_secs(2))
                    .unwrap_or_default();
                let err = self
                    .err
                    .recv_timeout(Duration::from_secs(2))
                    .unwrap_or_default();
                panic!(
                    "{} did not finish within {:?} (killed)\n--- stdout ---\n{}\n--- stderr ---\n{}",
                    self.description,
                    self.timeout,
                    excerpt(&out),
                    excerpt(&err)
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let elapsed = self.started.elapsed();
        drop(self.stdin.take());
        // A step process that outlives the agent keeps the pipes open: that is a failure too.
        let grace = Duration::from_secs(10);
        let stdout = self.out.recv_timeout(grace).unwrap_or_else(|_| {
            panic!(
                "{}: the agent exited ({status}) but its stdout stayed open: \
                 a process it started is still running",
                self.description
            )
        });
        let stderr = self.err.recv_timeout(grace).unwrap_or_else(|_| {
            panic!(
                "{}: the agent exited ({status}) but its stderr stayed open: \
                 a process it started is still running",
                self.description
            )
        });
        Run {
            status,
            stdout,
            stderr,
            elapsed,
            description: self.description,
        }
    }
}

/// The outcome of one agent invocation.
pub struct Run {
    /// Exit status.
    pub status: ExitStatus,
    /// Everything written to stdout.
    pub stdout: Vec<u8>,
    /// Everything written to stderr.
    pub stderr: Vec<u8>,
    /// Wall time.
    pub elapsed: Duration,
    description: String,
}

fn excerpt(bytes: &[u8]) -> String {
    const MAX: usize = 6000;
    let s = String::from_utf8_lossy(bytes);
    if s.len() <= MAX {
        s.into_owned()
    } else {
        let mut cut = MAX;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}\n... ({} bytes in total)", &s[..cut], bytes.len())
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} -> {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.description,
            self.status,
            excerpt(&self.stdout),
            excerpt(&self.stderr)
        )
    }
}

impl Run {
    /// The exit code (`None` if the agent was killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// stdout, lossily decoded.
    pub fn out(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// stderr, lossily decoded.
    pub fn err(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// Assert that the host's shutdown ended the agent (SPEC §9.4): it said so on stdout and
    /// waited, never exiting by itself, until the SIGKILL of the host going down.
    #[track_caller]
    pub fn assert_killed_by_the_shutdown(&self) -> &Self {
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(
            self.status.signal(),
            Some(9),
            "the agent should wait for the host to go down (SIGKILL)\n{self:?}"
        );
        self.assert_stdout_contains(&format!("{}\n", super::SHUTDOWN_IN_PROGRESS))
    }

    /// Assert the exit code.
    #[track_caller]
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(self.code(), Some(code), "unexpected exit code\n{self:?}");
        self
    }

    /// Assert exit 0.
    #[track_caller]
    pub fn assert_success(&self) -> &Self {
        self.assert_code(0)
    }

    /// stderr with each logfmt record's values unquoted (`msg="a \"b\""` reads `msg=a "b"`),
    /// so that a message can be looked for as the agent wrote it.
    pub fn err_text(&self) -> String {
        self.err()
            .lines()
            .map(|l| match super::parse_logfmt(l) {
                Ok(pairs) => pairs
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                Err(_) => l.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Assert stderr contains `needle` (as written, or in a record's unquoted values).
    #[track_caller]
    pub fn assert_stderr_contains(&self, needle: &str) -> &Self {
        assert!(
            self.err().contains(needle) || self.err_text().contains(needle),
            "stderr does not contain {needle:?}\n{self:?}"
        );
        self
    }

    /// Assert stdout contains `needle`.
    #[track_caller]
    pub fn assert_stdout_contains(&self, needle: &str) -> &Self {
        assert!(
            self.out().contains(needle),
            "stdout does not contain {needle:?}\n{self:?}"
        );
        self
    }

    /// Assert that one single stderr line contains every needle.
    #[track_caller]
    pub fn assert_stderr_line_contains(&self, needles: &[&str]) -> &Self {
        let (err, text) = (self.err(), self.err_text());
        assert!(
            err.lines()
                .chain(text.lines())
                .any(|l| needles.iter().all(|n| l.contains(n))),
            "no stderr line contains all of {needles:?}\n{self:?}"
        );
        self
    }

    /// Assert stderr has a line exactly equal to `line`.
    #[track_caller]
    pub fn assert_stderr_has_line(&self, line: &str) -> &Self {
        assert!(
            self.err().lines().any(|l| l == line),
            "stderr has no line equal to {line:?}\n{self:?}"
        );
        self
    }

    /// stdout after the banner (panics if stdout does not start with `banner`).
    #[track_caller]
    pub fn after_banner(&self, banner: &str) -> &[u8] {
        assert!(
            self.stdout.starts_with(banner.as_bytes()),
            "stdout does not start with the expected banner\n--- expected banner ---\n{banner}\n{self:?}"
        );
        &self.stdout[banner.len()..]
    }
}

impl AgentCmd {
    /// Start `program` (a distributor's build of the agent) instead of `agent`, with the same
    /// arguments, environment and cwd.
    pub fn spawn_program(self, program: &Path) -> Running {
        let mut cmd = Command::new(program);
        cmd.args(&self.args)
            .env_clear()
            .envs(&self.env)
            .current_dir(&self.cwd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
        let out = drain(child.stdout.take().unwrap());
        let err = drain(child.stderr.take().unwrap());
        Running {
            child,
            stdin: None,
            out,
            err,
            started: Instant::now(),
            timeout: self.timeout,
            description: format!("{} {:?}", program.display(), self.args),
        }
    }

    /// Run `program` to completion (see [`Self::spawn_program`]).
    pub fn run_program(self, program: &Path) -> Run {
        self.spawn_program(program).wait()
    }
}

impl Running {
    /// Poll until the agent exits (`true`) or `deadline` passes (`false`).
    pub fn exited_before(&mut self, deadline: Instant) -> bool {
        loop {
            if self.has_exited() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::sleep((deadline - now).min(Duration::from_micros(500)));
        }
    }

    /// SIGKILL the agent (an OOM kill, an eviction, a power loss), then everything it left
    /// running (see [`FakeHost::kill_leftover_processes`]), and collect its output.
    pub fn kill_hard(mut self, host: &FakeHost) -> Run {
        let _ = self.child.kill();
        let _ = self.child.wait();
        host.kill_leftover_processes();
        self.wait()
    }
}

/// strace, which stops an agent at a chosen system call ([`AgentCmd::spawn_stopped_at`]).
const STRACE: &str = "/usr/bin/strace";

/// An agent held stopped by strace at a system call, and strace itself.
pub struct Stopped {
    /// strace: its exit status is the agent's (a signal that killed the agent kills it too).
    pub strace: Running,
    /// The agent's own pid (a child of strace).
    pub pid: u32,
    /// What strace reports, which says when the agent is stopped.
    _trace: tempfile::NamedTempFile,
}

impl Stopped {
    /// Let the agent continue from where it was stopped.
    pub fn resume(&self) {
        super::signal_pid(self.pid, "CONT");
    }
}

impl AgentCmd {
    /// Start the agent under strace, which stops it (SIGSTOP) when it first enters `syscall`:
    /// a fixed point inside a run at which a test acts (starts a second agent, sends a signal)
    /// without racing the agent. Returns once the agent is stopped there.
    pub fn spawn_stopped_at(mut self, syscall: &str) -> Stopped {
        if !Path::new(STRACE).is_file() {
            super::cannot_run(
                "it stops the agent at a system call with strace, which is missing: install it \
                 (apt-get install strace; scripts/test.sh does)",
            );
        }
        let trace = tempfile::NamedTempFile::new().expect("a temp file for strace's report");
        let mut traced: Vec<OsString> = vec![
            "-o".into(),
            trace.path().into(),
            "-e".into(),
            format!("trace={syscall}").into(),
            "-e".into(),
            format!("inject={syscall}:signal=SIGSTOP:when=1").into(),
            env!("CARGO_BIN_EXE_agent").into(),
        ];
        traced.append(&mut self.args);
        let mut strace = Self {
            args: traced,
            ..self
        }
        .spawn_program(Path::new(STRACE));
        // strace reports the group stop the injected SIGSTOP caused; the agent is in a tracing
        // stop at every traced event too, so its state alone does not say it.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let report = std::fs::read_to_string(trace.path()).unwrap_or_default();
            if report.contains("--- stopped by SIGSTOP ---") {
                let pid =
                    std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", strace.pid()))
                        .ok()
                        .and_then(|c| c.split_whitespace().next()?.parse::<u32>().ok())
                        .expect("the pid of the agent under strace");
                return Stopped {
                    strace,
                    pid,
                    _trace: trace,
                };
            }
            assert!(
                !strace.has_exited() && Instant::now() < deadline,
                "the agent under strace never entered {syscall}: {report}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
