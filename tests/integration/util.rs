//! The harness: fake host roots, a package builder, the agent runner and the byte-format helpers
//! (CPython `repr`, Go `encoding/json`, marker names, timestamps) the assertions are computed with.
//!
//! A `FakeHost` is a temp dir holding `root/` (ROOT: a minimal busybox rootfs) and `work/` (the
//! agent's cwd and a scratch area outside ROOT). Every test builds its own.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::io::{Read, Write as _};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use serde_json::{Value, json};

/// Host-absolute package directory, as the operator passes it (transcripts' copy_dir).
pub const COPY_DIR: &str = "/var/lib/skyhook/sk1/pkg-1.0.0-uid1-1";
/// STATE relative to ROOT (`SKYHOOK_ROOT_DIR` of the base environment).
pub const STATE: &str = "var/lib/skyhook/sk1";
/// `STATE/flags`.
pub const FLAGS: &str = "var/lib/skyhook/sk1/flags";
/// `STATE/flags/START`.
pub const START: &str = "var/lib/skyhook/sk1/flags/START";
/// `STATE/flags/check_results`.
pub const CHECK_RESULTS: &str = "var/lib/skyhook/sk1/flags/check_results";
/// Step markers of package `pkg` version `1.0.0`.
pub const PKG_FLAGS: &str = "var/lib/skyhook/sk1/flags/pkg/1.0.0";
/// History file of package `pkg`.
pub const HISTORY: &str = "var/lib/skyhook/sk1/history/pkg.json";
/// LOGS relative to ROOT (`SKYHOOK_LOG_DIR` of the base environment).
pub const LOGS: &str = "var/log/skyhook/sk1";
/// Step logs of package `pkg` version `1.0.0`.
pub const PKG_LOGS: &str = "var/log/skyhook/sk1/pkg/1.0.0";
/// The package directory relative to ROOT.
pub const PKG_DIR: &str = "var/lib/skyhook/sk1/pkg-1.0.0-uid1-1";
/// Run-log every default step script appends to (ROOT-relative).
pub const RAN_LOG: &str = "var/tmp/ran.log";

/// The base environment of the legacy transcripts.
pub const BASE_ENV: [(&str, &str); 7] = [
    (
        "PATH",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    ),
    ("HOME", "/root"),
    ("LANG", "C.UTF-8"),
    ("SKYHOOK_RESOURCE_ID", "abc_pkg_1.0.0"),
    ("COPY_RESOLV", "false"),
    ("SKYHOOK_ROOT_DIR", "/var/lib/skyhook/sk1"),
    ("SKYHOOK_LOG_DIR", "/var/log/skyhook/sk1"),
];

/// A hung agent fails its test after this long instead of hanging CI.
pub const AGENT_TIMEOUT: Duration = Duration::from_secs(60);

/// Busybox applets linked into `<ROOT>/bin` (never `reboot`, `halt` or `poweroff`).
const APPLETS: &[&str] = &[
    "sh", "echo", "cat", "sleep", "env", "pwd", "basename", "dirname", "printf", "ls", "touch",
    "mkdir", "rm", "kill", "true", "false", "head", "tail", "tr", "date", "wc", "seq", "yes", "dd",
    "test", "[", "sort", "grep", "cut", "sed", "id", "stat", "readlink", "chmod", "ln", "cp", "mv",
    "tee", "awk", "setsid", "usleep",
];

/// Fake system tools: they only record their argv in `<ROOT>/var/tmp/calls.log`.
const FAKE_TOOLS: &[&str] = &["reboot", "shutdown", "systemctl", "service", "kubectl"];

/// The fake boot id of every fake host.
pub const BOOT_ID: &str = "11111111-2222-4333-8444-555555555555";

/// Fail the calling test unless it runs as root: of the machine, or of a user namespace
/// (scripts/test.sh runs the test binaries under `unshare --user --map-root-user --mount` when
/// it is not run as root). A test that could not run its assertions never counts as passed.
macro_rules! require_root {
    () => {
        $crate::util::require_root()
    };
}

/// Whether this process may make mount namespaces and mount tmpfs in them (root with
/// `CAP_SYS_ADMIN`, `unshare` and `mount` installed), for [`AgentCmd::in_mount_namespace`].
pub fn mount_namespaces_work() -> bool {
    let dir = tempfile::tempdir().expect("temp dir");
    Command::new("/usr/bin/unshare")
        .args(["--mount", "--propagation", "private", "/bin/sh", "-c"])
        .arg("mount -t tmpfs -o size=64k tmpfs \"$0\" && touch \"$0/x\"")
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        && !dir.path().join("x").exists()
}

/// Whether the effective uid is 0 (from `/proc/self/status`; 0 also for the root of a user
/// namespace, which may chroot and bind-mount inside its own mount namespace).
pub fn is_root() -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().nth(1))
        .is_some_and(|euid| euid == "0")
}

/// Panic unless running as root (see [`require_root!`]).
#[track_caller]
pub fn require_root() {
    if !is_root() {
        cannot_run(
            "it chroots into a fake host root, which needs root: run it as root, or through \
             scripts/test.sh, which runs the test binaries as root of a user namespace \
             (unshare --user --map-root-user --mount) when it is not root",
        );
    }
}

/// Fail the calling test because its precondition does not hold here (never a silent pass).
#[track_caller]
pub fn cannot_run(why: &str) -> ! {
    panic!("this test cannot run on this machine: {why}");
}

// ---------------------------------------------------------------------------------------------
// Fake host
// ---------------------------------------------------------------------------------------------

/// A temp dir holding a minimal host root (`root/`) and a scratch dir outside it (`work/`).
pub struct FakeHost {
    _dir: tempfile::TempDir,
    root: PathBuf,
    work: PathBuf,
}

impl Default for FakeHost {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeHost {
    /// A fresh host root: busybox with applet links in `/bin`, fake system tools in `/usr/bin`,
    /// `/etc`, `/tmp`, `/var/tmp`, `/root`, `/dev/null` and a fake boot id. No `/var/log`.
    pub fn new() -> Self {
        let busybox = Path::new("/bin/busybox");
        assert!(
            busybox.is_file(),
            "/bin/busybox is missing: the integration tests need a static busybox \
             (`apt-get install busybox-static`)"
        );
        let dir = tempfile::Builder::new()
            .prefix("agent-it-")
            .tempdir()
            .expect("create temp dir");
        let base = fs::canonicalize(dir.path()).expect("canonicalize temp dir");
        let root = base.join("root");
        let work = base.join("work");
        for d in [
            "bin",
            "usr/bin",
            "etc",
            "tmp",
            "var/tmp",
            "root",
            "proc/sys/kernel/random",
        ] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::create_dir_all(&work).unwrap();
        fs::set_permissions(root.join("tmp"), fs::Permissions::from_mode(0o1777)).unwrap();
        fs::copy(busybox, root.join("bin/busybox")).expect("copy busybox");
        fs::set_permissions(root.join("bin/busybox"), fs::Permissions::from_mode(0o755)).unwrap();
        for applet in APPLETS {
            symlink("busybox", root.join("bin").join(applet)).unwrap();
        }
        for tool in FAKE_TOOLS {
            let p = root.join("usr/bin").join(tool);
            fs::write(
                &p,
                format!("#!/bin/sh\necho \"{tool} $*\" >> /var/tmp/calls.log\nexit 0\n"),
            )
            .unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        }
        // Shells redirect background jobs' stdin from /dev/null: a character device when we may
        // create one (root with CAP_MKNOD), else an empty regular file that reads as EOF.
        fs::create_dir_all(root.join("dev")).unwrap();
        let dev_null = root.join("dev/null");
        let made = Command::new("/bin/busybox")
            .args([
                "mknod",
                "-m",
                "666",
                dev_null.to_str().unwrap(),
                "c",
                "1",
                "3",
            ])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !made {
            fs::write(&dev_null, "").unwrap();
            fs::set_permissions(&dev_null, fs::Permissions::from_mode(0o666)).unwrap();
        }
        fs::write(
            root.join("proc/sys/kernel/random/boot_id"),
            format!("{BOOT_ID}\n"),
        )
        .unwrap();
        Self {
            _dir: dir,
            root,
            work,
        }
    }

    /// ROOT as a path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// ROOT as a string (temp dirs are ASCII).
    pub fn root_str(&self) -> String {
        self.root.to_str().expect("UTF-8 temp dir").to_owned()
    }

    /// A scratch directory outside ROOT (also the agent's cwd).
    pub fn outside(&self) -> &Path {
        &self.work
    }

    /// `<ROOT>/rel` (`rel` may start with `/`).
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    /// Write a file under ROOT, creating parents.
    pub fn write(&self, rel: &str, contents: impl AsRef<[u8]>) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, contents).unwrap();
    }

    /// Write a file under ROOT with an explicit mode.
    pub fn write_mode(&self, rel: &str, contents: impl AsRef<[u8]>, mode: u32) {
        self.write(rel, contents);
        fs::set_permissions(self.path(rel), fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Create a directory (and parents) under ROOT.
    pub fn mkdir(&self, rel: &str) {
        fs::create_dir_all(self.path(rel)).unwrap();
    }

    /// Create a symlink at `rel` pointing to `target` (taken literally).
    pub fn symlink(&self, rel: &str, target: impl AsRef<Path>) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        symlink(target, p).unwrap();
    }

    /// Bytes of a file under ROOT (panics with the path if missing).
    pub fn read(&self, rel: &str) -> Vec<u8> {
        fs::read(self.path(rel)).unwrap_or_else(|e| panic!("reading <ROOT>/{rel}: {e}"))
    }

    /// A file under ROOT as UTF-8.
    pub fn read_string(&self, rel: &str) -> String {
        String::from_utf8(self.read(rel)).unwrap_or_else(|e| panic!("<ROOT>/{rel}: {e}"))
    }

    /// Whether anything (file, dir, dangling link) exists at `rel`.
    pub fn exists(&self, rel: &str) -> bool {
        fs::symlink_metadata(self.path(rel)).is_ok()
    }

    /// Whether `rel` is a regular file (not following a final symlink).
    pub fn is_file(&self, rel: &str) -> bool {
        fs::symlink_metadata(self.path(rel)).is_ok_and(|m| m.file_type().is_file())
    }

    /// Permission bits (including special bits) of `rel`.
    pub fn mode(&self, rel: &str) -> u32 {
        fs::symlink_metadata(self.path(rel))
            .unwrap_or_else(|e| panic!("stat <ROOT>/{rel}: {e}"))
            .mode()
            & 0o7777
    }

    /// Sorted entry names of a directory under ROOT (empty if it does not exist).
    pub fn list(&self, rel: &str) -> Vec<String> {
        let Ok(rd) = fs::read_dir(self.path(rel)) else {
            return Vec::new();
        };
        let mut names: Vec<String> = rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Sorted paths (relative to `rel`) of every non-directory below `rel`.
    pub fn files_under(&self, rel: &str) -> Vec<String> {
        let base = self.path(rel);
        let mut out = Vec::new();
        if base.is_dir() {
            walk(&base, &base, &mut |p, meta| {
                if !meta.is_dir() {
                    out.push(p.to_owned());
                }
            });
        }
        out.sort();
        out
    }

    /// Snapshot of everything under ROOT (paths, types, modes, content hashes, link targets).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::of(&self.root)
    }

    /// Snapshot of the scratch dir outside ROOT.
    pub fn snapshot_outside(&self) -> Snapshot {
        Snapshot::of(&self.work)
    }

    /// Lines of `<ROOT>/var/tmp/ran.log` (`<step path> <args...>` per run of a default script).
    pub fn ran(&self) -> Vec<String> {
        fs::read_to_string(self.path(RAN_LOG))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// How many times the default script of step `path` ran.
    pub fn ran_count(&self, path: &str) -> usize {
        self.ran()
            .iter()
            .filter(|l| l.split(' ').next() == Some(path))
            .count()
    }

    /// Install `pkg` at `<ROOT>COPY_DIR`.
    pub fn install(&self, pkg: &Package) {
        pkg.write_into(&self.path(COPY_DIR), &self.root);
    }

    /// A command running the agent with the base environment, cwd = the scratch dir.
    pub fn agent(&self) -> AgentCmd {
        AgentCmd::in_dir(&self.work)
    }

    /// `agent MODE ROOT COPY_DIR` with the base environment plus `env`.
    pub fn run(&self, mode: &str, env: &[(&str, &str)]) -> Run {
        let mut cmd = self.agent().args([mode, &self.root_str(), COPY_DIR]);
        for (k, v) in env {
            cmd = cmd.env(k, v);
        }
        cmd.run()
    }

    /// `agent MODE ROOT COPY_DIR` with the base environment.
    pub fn stage(&self, mode: &str) -> Run {
        self.run(mode, &[])
    }

    /// Wait until `<ROOT>/rel` exists (a step signalling it started), panicking after `timeout`.
    pub fn wait_for(&self, rel: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.exists(rel) {
            assert!(
                Instant::now() < deadline,
                "<ROOT>/{rel} did not appear within {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn walk(base: &Path, dir: &Path, f: &mut dyn FnMut(&str, &fs::Metadata)) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let meta = fs::symlink_metadata(&p).unwrap();
        let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
        f(&rel, &meta);
        if meta.is_dir() {
            walk(base, &p, f);
        }
    }
}

/// What a tree looked like: one line per path.
#[derive(Clone, PartialEq, Eq)]
pub struct Snapshot(BTreeMap<String, String>);

impl Snapshot {
    /// Snapshot every path below `base`.
    pub fn of(base: &Path) -> Self {
        let mut map = BTreeMap::new();
        if base.exists() {
            walk(base, base, &mut |rel, meta| {
                let mode = meta.mode() & 0o7777;
                let desc = if meta.file_type().is_symlink() {
                    let target = fs::read_link(base.join(rel)).unwrap();
                    format!("l -> {}", target.display())
                } else if meta.is_dir() {
                    format!("d {mode:o}")
                } else if meta.is_file() {
                    let bytes = fs::read(base.join(rel)).unwrap();
                    format!("f {mode:o} {}B {}", bytes.len(), &sha256_hex(&bytes)[..16])
                } else {
                    format!("? {mode:o}")
                };
                map.insert(rel.to_owned(), desc);
            });
        }
        Self(map)
    }

    /// Human-readable differences (`+ added`, `- removed`, `~ changed`).
    pub fn diff(&self, after: &Self) -> Vec<String> {
        let mut out = Vec::new();
        for (k, v) in &self.0 {
            match after.0.get(k) {
                None => out.push(format!("- {k} ({v})")),
                Some(w) if w != v => out.push(format!("~ {k} ({v} => {w})")),
                Some(_) => {}
            }
        }
        for (k, v) in &after.0 {
            if !self.0.contains_key(k) {
                out.push(format!("+ {k} ({v})"));
            }
        }
        out
    }

    /// Panic listing the differences if `after` differs.
    #[track_caller]
    pub fn assert_unchanged(&self, after: &Self, context: &str) {
        let d = self.diff(after);
        assert!(
            d.is_empty(),
            "{context}: the tree changed:\n{}",
            d.join("\n")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Running the agent
// ---------------------------------------------------------------------------------------------

/// A pending agent invocation.
pub struct AgentCmd {
    args: Vec<OsString>,
    env: BTreeMap<String, OsString>,
    cwd: PathBuf,
    timeout: Duration,
    hold_stdin: bool,
    /// Shell commands run (as root) in a mount namespace of the agent's own before it starts.
    mount_setup: Option<String>,
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
            mount_setup: None,
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

    /// Start the agent.
    pub fn spawn(self) -> Running {
        let mut cmd = match &self.mount_setup {
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
            .stdin(if self.hold_stdin {
                Stdio::piped()
            } else {
                Stdio::null()
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

    /// Assert stderr contains `needle`.
    #[track_caller]
    pub fn assert_stderr_contains(&self, needle: &str) -> &Self {
        assert!(
            self.err().contains(needle),
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
        let err = self.err();
        assert!(
            err.lines().any(|l| needles.iter().all(|n| l.contains(n))),
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

// ---------------------------------------------------------------------------------------------
// Banner
// ---------------------------------------------------------------------------------------------

/// The expected startup banner (SPEC §3); defaults are the transcripts' base environment.
#[allow(
    clippy::struct_excessive_bools,
    reason = "mirrors the banner's boolean lines"
)]
pub struct Banner {
    pub mode: String,
    pub root_mount: String,
    pub copy_dir: String,
    pub interrupt_data: Option<String>,
    pub always_run_step: bool,
    pub copy_resolv: bool,
    pub overlay_always_run_step: bool,
    pub resource_id: String,
    pub data_dir: String,
    pub root_dir: String,
    pub log_dir: String,
    pub buffer_limit: String,
    pub write_logs: bool,
    /// Package name parsed from the resource ID.
    pub package: String,
    /// Package version parsed from the resource ID.
    pub version: String,
}

impl Banner {
    /// The banner of `agent MODE <host root> COPY_DIR` under the base environment.
    pub fn new(mode: &str, host: &FakeHost) -> Self {
        Self {
            mode: mode.to_owned(),
            root_mount: host.root_str(),
            copy_dir: COPY_DIR.to_owned(),
            interrupt_data: None,
            always_run_step: false,
            copy_resolv: false,
            overlay_always_run_step: false,
            resource_id: "abc_pkg_1.0.0".to_owned(),
            data_dir: "/skyhook-package".to_owned(),
            root_dir: "/var/lib/skyhook/sk1".to_owned(),
            log_dir: "/var/log/skyhook/sk1".to_owned(),
            buffer_limit: "8192".to_owned(),
            write_logs: true,
            package: "pkg".to_owned(),
            version: "1.0.0".to_owned(),
        }
    }

    /// The exact bytes.
    pub fn render(&self) -> String {
        let b = |v: bool| if v { "True" } else { "False" };
        let mut s = String::new();
        s.push_str("--------------------\n-CLI CONFIGURATION--\n");
        let _ = writeln!(s, "mode: {}", self.mode);
        let _ = writeln!(s, "root_mount: {}", self.root_mount);
        let _ = writeln!(s, "copy_dir: {}", self.copy_dir);
        let _ = writeln!(
            s,
            "interrupt_data: {}",
            self.interrupt_data.as_deref().unwrap_or("None")
        );
        let _ = writeln!(s, "always_run_step: {}", b(self.always_run_step));
        s.push_str("-ENV CONFIGURATION--\n");
        let _ = writeln!(s, "COPY_RESOLV: {}", b(self.copy_resolv));
        let _ = writeln!(
            s,
            "OVERLAY_ALWAYS_RUN_STEP: {}",
            b(self.overlay_always_run_step)
        );
        let _ = writeln!(s, "SKYHOOK_RESOURCE_ID: {}", self.resource_id);
        let _ = writeln!(s, "SKYHOOK_DATA_DIR: {}", self.data_dir);
        let _ = writeln!(s, "SKYHOOK_ROOT_DIR: {}", self.root_dir);
        let _ = writeln!(s, "SKYHOOK_LOG_DIR: {}", self.log_dir);
        let _ = writeln!(s, "SKYHOOK_AGENT_BUFFER_LIMIT: {}", self.buffer_limit);
        let _ = writeln!(s, "SKYHOOK_AGENT_WRITE_LOGS: {}", b(self.write_logs));
        s.push_str("Directory CONFIGURATION\n");
        let _ = writeln!(
            s,
            "flag_dir: {}/flags/{}/{}",
            self.root_dir, self.package, self.version
        );
        let _ = writeln!(
            s,
            "log_dir: {}/{}/{}",
            self.log_dir, self.package, self.version
        );
        let _ = writeln!(
            s,
            "history_file: {}/history/{}.json",
            self.root_dir, self.package
        );
        s.push_str("--------------------\n");
        s
    }
}

// ---------------------------------------------------------------------------------------------
// Packages
// ---------------------------------------------------------------------------------------------

/// The default step script (transcript 01's, plus a line in the run-log and `FAIL_STEPS`).
///
/// Tokens replaced at install time: `@PATH@` (the step's configured path), `@RAN_LOG@` and
/// `@TMP@` (`/var/tmp/...` for `on_host: true`, `<ROOT>/var/tmp/...` otherwise), `@ROOT@`.
pub const DEFAULT_SCRIPT: &str = r#"#!/bin/sh
n=$(basename "$0")
echo "[$n] args($#): $*"
echo "[$n] pwd=$(pwd) STEP_ROOT=$STEP_ROOT SKYHOOK_DIR=$SKYHOOK_DIR X=${X:-}"
if [ -n "${CURRENT_VERSION:-}${PREVIOUS_VERSION:-}" ]; then echo "[$n] CURRENT_VERSION=${CURRENT_VERSION:-} PREVIOUS_VERSION=${PREVIOUS_VERSION:-}"; fi
echo "[$n] to stderr" >&2
echo "@PATH@ $*" >> "@RAN_LOG@"
case " ${FAIL_STEPS:-} " in *" @PATH@ "*) exit "${FAIL_RC:-3}";; esac
exit 0
"#;

/// One step of a package config.
#[derive(Clone, Debug)]
#[allow(
    clippy::struct_excessive_bools,
    clippy::struct_field_names,
    reason = "mirrors the config.json step object"
)]
pub struct Step {
    pub name: String,
    pub path: String,
    pub arguments: Vec<String>,
    pub returncodes: Vec<i64>,
    pub on_host: bool,
    pub env: Vec<(String, String)>,
    /// `true` = Idempotence.Disabled (always runs).
    pub idempotence: bool,
    pub upgrade_step: bool,
    script: Option<String>,
    file_mode: u32,
}

impl Step {
    /// A step running `path` with no arguments, returncodes `[0]`, on host, Auto idempotence.
    pub fn new(path: &str) -> Self {
        Self {
            name: path.replace('/', "-"),
            path: path.to_owned(),
            arguments: Vec::new(),
            returncodes: vec![0],
            on_host: true,
            env: Vec::new(),
            idempotence: false,
            upgrade_step: false,
            script: None,
            file_mode: 0o644,
        }
    }

    #[must_use]
    pub fn name(mut self, name: &str) -> Self {
        name.clone_into(&mut self.name);
        self
    }

    #[must_use]
    pub fn args(mut self, args: &[&str]) -> Self {
        self.arguments = args.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    #[must_use]
    pub fn returncodes(mut self, rcs: &[i64]) -> Self {
        self.returncodes = rcs.to_vec();
        self
    }

    #[must_use]
    pub fn on_host(mut self, on_host: bool) -> Self {
        self.on_host = on_host;
        self
    }

    #[must_use]
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.to_owned(), v.to_owned()));
        self
    }

    /// Idempotence Disabled (`"idempotence": true`): the step always runs.
    #[must_use]
    pub fn always_run(mut self) -> Self {
        self.idempotence = true;
        self
    }

    #[must_use]
    pub fn upgrade_step(mut self) -> Self {
        self.upgrade_step = true;
        self
    }

    /// Use `body` (tokens allowed) instead of the default script.
    #[must_use]
    pub fn script(mut self, body: &str) -> Self {
        self.script = Some(body.to_owned());
        self
    }

    /// Mode of the step file (default 0644: the agent must add the execute bits).
    #[must_use]
    pub fn file_mode(mut self, mode: u32) -> Self {
        self.file_mode = mode;
        self
    }

    /// The config.json object.
    pub fn to_json(&self) -> Value {
        let env: serde_json::Map<String, Value> = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        json!({
            "name": self.name,
            "path": self.path,
            "arguments": self.arguments,
            "returncodes": self.returncodes,
            "on_host": self.on_host,
            "env": env,
            "idempotence": self.idempotence,
            "upgrade_step": self.upgrade_step,
        })
    }

    /// The legacy (Python) marker name, relative to the flag dir.
    pub fn legacy_marker(&self) -> String {
        legacy_marker_name(&self.path, &self.arguments, &self.returncodes)
    }

    /// The native (Go) marker name, relative to the flag dir.
    pub fn native_marker(&self) -> String {
        native_marker_name(
            &self.path,
            &self.arguments,
            &self.returncodes,
            &self.env,
            self.on_host,
        )
    }
}

/// A package directory: config.json, step scripts, configmaps, root_dir.
#[derive(Clone, Debug)]
pub struct Package {
    pub name: String,
    pub version: String,
    modes: Vec<(String, Vec<Step>)>,
    expected_config_files: Vec<String>,
    configmaps: Vec<(String, Vec<u8>)>,
    root_files: Vec<(String, Vec<u8>, u32)>,
    scripts: Vec<(String, String)>,
    no_scripts: Vec<String>,
    raw_config: Option<Vec<u8>>,
}

impl Default for Package {
    fn default() -> Self {
        Self::new()
    }
}

impl Package {
    /// Package `pkg` version `1.0.0` with no modes.
    pub fn new() -> Self {
        Self::named("pkg", "1.0.0")
    }

    /// A package with another config.json name/version.
    pub fn named(name: &str, version: &str) -> Self {
        Self {
            name: name.to_owned(),
            version: version.to_owned(),
            modes: Vec::new(),
            expected_config_files: Vec::new(),
            configmaps: Vec::new(),
            root_files: Vec::new(),
            scripts: Vec::new(),
            no_scripts: Vec::new(),
            raw_config: None,
        }
    }

    /// `apply: [s1.sh]`, `apply-check: [s1_check.sh]`.
    pub fn simple() -> Self {
        Self::new()
            .step("apply", Step::new("s1.sh"))
            .step("apply-check", Step::new("s1_check.sh"))
    }

    /// Transcript 01's package: every mode, `s1.sh ['a', 'env:FOO']` with env X, `s2.sh` always
    /// running, upgrade steps with `upgrade_step`.
    pub fn standard() -> Self {
        Self::new()
            .step(
                "apply",
                Step::new("s1.sh")
                    .name("s1")
                    .args(&["a", "env:FOO"])
                    .env("X", "from-step-env"),
            )
            .step("apply", Step::new("s2.sh").name("s2").always_run())
            .step("apply-check", Step::new("s1_check.sh").name("s1c"))
            .step("apply-check", Step::new("s2_check.sh").name("s2c"))
            .step("config", Step::new("cfg.sh").name("cfg").args(&["c"]))
            .step("config-check", Step::new("cfg_check.sh").name("cfgc"))
            .step("upgrade", Step::new("up.sh").name("up").args(&["u1"]))
            .step("upgrade", Step::new("up2.sh").name("up2").upgrade_step())
            .step(
                "upgrade-check",
                Step::new("up_check.sh").name("upc").upgrade_step(),
            )
            .step("upgrade-check", Step::new("up2_check.sh").name("up2c"))
            .step("uninstall", Step::new("un.sh").name("un"))
            .step("uninstall-check", Step::new("un_check.sh").name("unc"))
            .step("post-interrupt", Step::new("pi.sh").name("pi"))
            .step("post-interrupt-check", Step::new("pi_check.sh").name("pic"))
    }

    /// Append a step to `mode`.
    #[must_use]
    pub fn step(mut self, mode: &str, step: Step) -> Self {
        if let Some((_, steps)) = self.modes.iter_mut().find(|(m, _)| m == mode) {
            steps.push(step);
        } else {
            self.modes.push((mode.to_owned(), vec![step]));
        }
        self
    }

    /// Declare `mode` with an empty step list.
    #[must_use]
    pub fn empty_mode(mut self, mode: &str) -> Self {
        if !self.modes.iter().any(|(m, _)| m == mode) {
            self.modes.push((mode.to_owned(), Vec::new()));
        }
        self
    }

    /// The steps of `mode`.
    pub fn steps(&self, mode: &str) -> &[Step] {
        self.modes
            .iter()
            .find(|(m, _)| m == mode)
            .map_or(&[], |(_, s)| s.as_slice())
    }

    /// The step with `path` in any mode.
    pub fn find(&self, path: &str) -> &Step {
        self.modes
            .iter()
            .flat_map(|(_, s)| s)
            .find(|s| s.path == path)
            .unwrap_or_else(|| panic!("no step with path {path}"))
    }

    /// Script body (tokens allowed) for every step with `path`.
    #[must_use]
    pub fn script(mut self, path: &str, body: &str) -> Self {
        self.scripts.push((path.to_owned(), body.to_owned()));
        self
    }

    /// Do not create the file of step `path`.
    #[must_use]
    pub fn without_script(mut self, path: &str) -> Self {
        self.no_scripts.push(path.to_owned());
        self
    }

    /// A file in `configmaps/`.
    #[must_use]
    pub fn configmap(mut self, name: &str, contents: &[u8]) -> Self {
        self.configmaps.push((name.to_owned(), contents.to_vec()));
        self
    }

    /// An `expected_config_files` entry.
    #[must_use]
    pub fn expect_config_file(mut self, name: &str) -> Self {
        self.expected_config_files.push(name.to_owned());
        self
    }

    /// A file in `root_dir/` (overlaid onto ROOT).
    #[must_use]
    pub fn root_file(mut self, rel: &str, contents: &[u8], mode: u32) -> Self {
        self.root_files
            .push((rel.to_owned(), contents.to_vec(), mode));
        self
    }

    /// The config.json this package would write.
    pub fn config_json(&self) -> Value {
        let modes: serde_json::Map<String, Value> = self
            .modes
            .iter()
            .map(|(m, steps)| {
                (
                    m.clone(),
                    Value::Array(steps.iter().map(Step::to_json).collect()),
                )
            })
            .collect();
        json!({
            "schema_version": "v1",
            "package_name": self.name,
            "package_version": self.version,
            "expected_config_files": self.expected_config_files,
            "modes": modes,
        })
    }

    /// Replace config.json by `value`.
    #[must_use]
    pub fn with_config(mut self, value: &Value) -> Self {
        self.raw_config = Some(serde_json::to_vec_pretty(value).unwrap());
        self
    }

    /// Replace config.json by raw bytes.
    #[must_use]
    pub fn with_raw_config(mut self, bytes: &[u8]) -> Self {
        self.raw_config = Some(bytes.to_vec());
        self
    }

    /// Write the package into `dir` (created); tokens resolve against host root `root`.
    pub fn write_into(&self, dir: &Path, root: &Path) {
        fs::create_dir_all(dir.join("skyhook_dir")).unwrap();
        fs::create_dir_all(dir.join("configmaps")).unwrap();
        let config = self
            .raw_config
            .clone()
            .unwrap_or_else(|| serde_json::to_vec_pretty(&self.config_json()).unwrap());
        fs::write(dir.join("config.json"), config).unwrap();
        fs::set_permissions(dir.join("config.json"), fs::Permissions::from_mode(0o644)).unwrap();

        let mut written: Vec<String> = Vec::new();
        for step in self.modes.iter().flat_map(|(_, s)| s) {
            if written.contains(&step.path) || self.no_scripts.contains(&step.path) {
                continue;
            }
            written.push(step.path.clone());
            let body = step
                .script
                .clone()
                .or_else(|| {
                    self.scripts
                        .iter()
                        .find(|(p, _)| *p == step.path)
                        .map(|(_, b)| b.clone())
                })
                .unwrap_or_else(|| DEFAULT_SCRIPT.to_owned());
            let tmp = if step.on_host {
                "/var/tmp".to_owned()
            } else {
                format!("{}/var/tmp", root.display())
            };
            let body = body
                .replace("@PATH@", &step.path)
                .replace("@RAN_LOG@", &format!("{tmp}/ran.log"))
                .replace("@TMP@", &tmp)
                .replace("@ROOT@", &root.display().to_string());
            let p = dir.join("skyhook_dir").join(&step.path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, body).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(step.file_mode)).unwrap();
        }
        for (name, contents) in &self.configmaps {
            let p = dir.join("configmaps").join(name);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, contents).unwrap();
        }
        for (rel, contents, mode) in &self.root_files {
            let p = dir.join("root_dir").join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, contents).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(*mode)).unwrap();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Byte formats
// ---------------------------------------------------------------------------------------------

/// CPython `repr(str)` for the strings these tests use (ASCII, quotes, backslashes, control
/// characters, printable non-ASCII such as `é`).
pub fn py_repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::new();
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..=0xa0).contains(&(c as u32)) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// CPython `repr(list[str])`.
pub fn py_repr_strs(items: &[String]) -> String {
    let parts: Vec<String> = items.iter().map(|s| py_repr_str(s)).collect();
    format!("[{}]", parts.join(", "))
}

/// CPython `repr(list[int])`.
pub fn py_repr_ints(items: &[i64]) -> String {
    let parts: Vec<String> = items.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// Standard base64 with padding.
pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `<PATH>_<base64(repr(args) + "_" + repr(returncodes))>` (SPEC §8.7).
pub fn legacy_marker_name(path: &str, args: &[String], rcs: &[i64]) -> String {
    let payload = format!("{}_{}", py_repr_strs(args), py_repr_ints(rcs));
    format!("{path}_{}", b64(payload.as_bytes()))
}

/// Go `encoding/json` string encoding (SPEC appendix).
pub fn go_json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The compact Go JSON the native marker hashes.
pub fn fingerprint_json(
    path: &str,
    args: &[String],
    rcs: &[i64],
    env: &[(String, String)],
    on_host: bool,
) -> String {
    let args: Vec<String> = args.iter().map(|a| go_json_str(a)).collect();
    let rcs: Vec<String> = rcs.iter().map(ToString::to_string).collect();
    let mut env: Vec<&(String, String)> = env.iter().collect();
    env.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    env.dedup_by(|a, b| a.0 == b.0);
    let env: Vec<String> = env
        .iter()
        .map(|(k, v)| format!("{}:{}", go_json_str(k), go_json_str(v)))
        .collect();
    format!(
        "{{\"path\":{},\"arguments\":[{}],\"returnCodes\":[{}],\"env\":{{{}}},\"onHost\":{}}}",
        go_json_str(path),
        args.join(","),
        rcs.join(","),
        env.join(","),
        on_host
    )
}

/// `<basename(PATH)>-<sha256hex>.flag` (SPEC §8.7).
pub fn native_marker_name(
    path: &str,
    args: &[String],
    rcs: &[i64],
    env: &[(String, String)],
    on_host: bool,
) -> String {
    let base = path.rsplit('/').next().unwrap();
    let hash = sha256_hex(fingerprint_json(path, args, rcs, env, on_host).as_bytes());
    format!("{base}-{hash}.flag")
}

/// SHA-256 as lowercase hex.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(data)
        .iter()
        .fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Parse Go's `RFC3339Nano` in UTC: `YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z`, fraction without trailing
/// zeros. `None` if the string is not exactly that.
pub fn parse_rfc3339_nano_utc(s: &str) -> Option<SystemTime> {
    let frac = s.strip_suffix('Z')?.get(19..)?;
    if frac.len() > 10 || frac.ends_with('0') {
        return None;
    }
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second][optional [.[subsecond]]]Z"
    );
    let t = time::PrimitiveDateTime::parse(s, &format).ok()?;
    Some(t.assume_utc().into())
}

/// Assert `t` is within a few minutes of now.
#[track_caller]
pub fn assert_recent(t: SystemTime, what: &str) {
    let now = SystemTime::now();
    let diff = now.duration_since(t).unwrap_or_else(|e| e.duration());
    assert!(
        diff < Duration::from_secs(300),
        "{what}: timestamp is not close to now ({diff:?} away)"
    );
}

/// Assert marker content `last_run: <RFC3339Nano UTC>\nstep_always_runs: <always>`.
#[track_caller]
pub fn assert_marker_content(content: &str, always: bool, what: &str) {
    let (first, second) = content
        .split_once('\n')
        .unwrap_or_else(|| panic!("{what}: marker content {content:?} is not two lines"));
    let ts = first
        .strip_prefix("last_run: ")
        .unwrap_or_else(|| panic!("{what}: marker content {content:?} lacks `last_run: `"));
    let t = parse_rfc3339_nano_utc(ts)
        .unwrap_or_else(|| panic!("{what}: {ts:?} is not a UTC RFC3339Nano timestamp"));
    assert_recent(t, what);
    assert_eq!(
        second,
        format!("step_always_runs: {always}"),
        "{what}: second line of marker content {content:?}"
    );
}

/// A parsed log file name `<base>-YYYY-MM-DD-HHMMSS.nnnnnnnnn[-N].log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogName {
    pub base: String,
    pub time: SystemTime,
    pub collision: Option<u32>,
}

/// Parse a log file name in this agent's format (nine-digit nanoseconds, optional `-N`).
pub fn parse_log_name(name: &str) -> Option<LogName> {
    let stem = name.strip_suffix(".log")?;
    // The optional collision index comes after the timestamp's nanoseconds.
    let (stem, collision) = match stem.rsplit_once('-') {
        Some((head, n))
            if !n.is_empty() && n.len() < 6 && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            (head, Some(n.parse().ok()?))
        }
        _ => (stem, None),
    };
    // "-YYYY-MM-DD-HHMMSS.nnnnnnnnn" is 28 bytes.
    let (base, ts) = stem.split_at_checked(stem.len().checked_sub(28)?)?;
    let format = time::macros::format_description!(
        "-[year]-[month]-[day]-[hour][minute][second].[subsecond digits:9]"
    );
    let time = time::PrimitiveDateTime::parse(ts, &format).ok()?;
    (!base.is_empty()).then(|| LogName {
        base: base.to_owned(),
        time: time.assume_utc().into(),
        collision,
    })
}

/// Whether `/proc/<pid>` is a live (not zombie) process.
pub fn process_alive(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesised command name.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or("X");
    !matches!(state, "Z" | "X" | "x")
}

/// Poll `cond` every 10 ms until it holds or `timeout` passes; returns whether it held.
pub fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A history file as the Python agent wrote it (compact, `+00:00` times), newest first.
pub fn python_history(current: &str, versions: &[&str]) -> String {
    let entries: Vec<String> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            format!(
                "{{\"version\": \"{v}\", \"time\": \"2026-11-{:02}T10:27:44.132205+00:00\"}}",
                28 - (i % 28)
            )
        })
        .collect();
    format!(
        "{{\"current-version\": \"{current}\", \"history\": [{}]}}",
        entries.join(", ")
    )
}

// ---------------------------------------------------------------------------------------------
// Interrupts
// ---------------------------------------------------------------------------------------------

/// Interrupt markers of resource `abc_pkg_1.0.0` (`STATE/interrupts/flags/<RID>`).
pub const INTERRUPT_FLAGS: &str = "var/lib/skyhook/sk1/interrupts/flags/abc_pkg_1.0.0";
/// Interrupt logs of resource `abc_pkg_1.0.0` (`LOGS/pkg/1.0.0/interrupts`).
pub const INTERRUPT_LOGS: &str = "var/log/skyhook/sk1/pkg/1.0.0/interrupts";
/// Where every fake system tool records its argv (ROOT-relative).
pub const CALLS_LOG: &str = "var/tmp/calls.log";
/// The boot id file the agent reads (ROOT-relative).
pub const BOOT_ID_FILE: &str = "proc/sys/kernel/random/boot_id";

/// INTERRUPT_DATA for a JSON payload: standard base64 with padding.
pub fn interrupt_data(json: &str) -> String {
    b64(json.as_bytes())
}

impl FakeHost {
    /// Replace the fake system tool `name` in `/usr/bin`: it records `name $*` in the calls log
    /// like the default one, then runs `behaviour` (shell, inside the chroot).
    pub fn set_fake_tool(&self, name: &str, behaviour: &str) {
        self.write_mode(
            &format!("usr/bin/{name}"),
            format!("#!/bin/sh\necho \"{name} $*\" >> /var/tmp/calls.log\n{behaviour}\n"),
            0o755,
        );
    }

    /// Write the host's boot id (`<ROOT>/proc/sys/kernel/random/boot_id`, newline-terminated).
    pub fn set_boot_id(&self, id: &str) {
        self.write(BOOT_ID_FILE, format!("{id}\n"));
    }

    /// Lines of the calls log (`<tool> <args>`, trailing blanks trimmed), in call order.
    pub fn calls(&self) -> Vec<String> {
        fs::read_to_string(self.path(CALLS_LOG))
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim_end().to_owned())
            .collect()
    }

    /// `agent interrupt ROOT COPY_DIR DATA` with the base environment.
    pub fn interrupt(&self, data: &str) -> AgentCmd {
        self.agent()
            .args(["interrupt", &self.root_str(), COPY_DIR, data])
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

/// Send `sig` (`"KILL"`, `"TERM"`, …) to process `pid` with busybox `kill`; ignores a process
/// that is already gone.
pub fn signal_pid(pid: u32, sig: &str) {
    let _ = Command::new("/bin/busybox")
        .args(["kill", "-s", sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

// ---------------------------------------------------------------------------------------------
// Reliability suites: fault injection (crash, malformed input, security, concurrency)
// ---------------------------------------------------------------------------------------------

/// Set to a fake host's ROOT in the environment of the agents the reliability suites start, and
/// so inherited by every step and command they run: after a SIGKILL it tells which leftover
/// processes belong to that host (even one forked but not yet chrooted).
pub const HOST_TAG_VAR: &str = "AGENT_IT_FAKE_ROOT";

/// Trials per randomized scenario: `AGENT_RELIABILITY_TRIALS` (the long mode), else `default`.
pub fn reliability_trials(default: usize) -> usize {
    match std::env::var("AGENT_RELIABILITY_TRIALS") {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("AGENT_RELIABILITY_TRIALS={v:?} is not a number")),
        Err(_) => default,
    }
}

/// The seeds of a randomized scenario: `AGENT_RELIABILITY_SEED` alone (to replay a failure),
/// else `base + i` for each of `trials` trials.
pub fn reliability_seeds(base: u64, trials: usize) -> Vec<u64> {
    if let Ok(v) = std::env::var("AGENT_RELIABILITY_SEED") {
        let v = v.trim();
        let seed = v
            .strip_prefix("0x")
            .map_or_else(|| v.parse(), |hex| u64::from_str_radix(hex, 16))
            .unwrap_or_else(|_| panic!("AGENT_RELIABILITY_SEED={v:?} is not a number"));
        return vec![seed];
    }
    (0..trials as u64).map(|i| base + i).collect()
}

/// A seeded generator: a trial replays exactly from its seed (with this Cargo.lock).
#[derive(Debug, Clone)]
pub struct SeededRng(rand::rngs::StdRng);

impl SeededRng {
    pub fn new(seed: u64) -> Self {
        Self(rand::SeedableRng::seed_from_u64(seed))
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        rand::Rng::random_range(&mut self.0, 0..n)
    }

    /// Uniform in `0..=max`, in microseconds.
    pub fn duration_up_to(&mut self, max: Duration) -> Duration {
        let micros = u64::try_from(max.as_micros()).unwrap_or(u64::MAX);
        Duration::from_micros(rand::Rng::random_range(&mut self.0, 0..=micros))
    }
}

/// Prints the seed of a randomized trial if the trial panics, with the command that replays it.
pub struct SeedReport {
    pub scenario: &'static str,
    pub seed: u64,
}

impl Drop for SeedReport {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = writeln!(
                std::io::stderr(),
                "{}: trial with seed {} failed; replay it with AGENT_RELIABILITY_SEED={} \
                 cargo test --test integration {}",
                self.scenario,
                self.seed,
                self.seed,
                self.scenario
            );
        }
    }
}

/// Whether `name` is a temp file of the agent's atomic writes (`.<name>.tmp.<pid>.<hex>`):
/// a killed writer leaves these behind, and no reader may take one for state.
pub fn is_state_temp_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    let Some(infix) = rest.rfind(".tmp.") else {
        return false;
    };
    let Some((pid, random)) = rest[infix + 5..].split_once('.') else {
        return false;
    };
    !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && !random.is_empty()
        && random.bytes().all(|b| b.is_ascii_hexdigit())
}

impl FakeHost {
    /// [`FakeHost::agent`] with [`HOST_TAG_VAR`] set, so [`Running::kill_hard`] can find what
    /// the agent started.
    pub fn tagged_agent(&self) -> AgentCmd {
        self.agent().env(HOST_TAG_VAR, self.root_str())
    }

    /// Append `line` and a newline to a file under ROOT (created if missing).
    pub fn append_line(&self, rel: &str, line: &str) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .unwrap();
        writeln!(f, "{line}").unwrap();
    }

    /// Pids of the processes left by this host's agents: chrooted into ROOT, or carrying
    /// [`HOST_TAG_VAR`] for this ROOT in their environment.
    pub fn leftover_processes(&self) -> Vec<u32> {
        let tag = format!("{HOST_TAG_VAR}={}", self.root_str());
        let me = std::process::id();
        let mut pids = Vec::new();
        let Ok(entries) = fs::read_dir("/proc") else {
            return pids;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == me || !process_alive(pid) {
                continue;
            }
            let chrooted = fs::read_link(format!("/proc/{pid}/root")).is_ok_and(|r| r == self.root);
            let tagged = fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == tag.as_bytes()));
            if chrooted || tagged {
                pids.push(pid);
            }
        }
        pids
    }

    /// SIGKILL every leftover process of this host until none is left, as the end of the
    /// agent's container (its PID namespace) would. Returns how many were killed.
    pub fn kill_leftover_processes(&self) -> usize {
        let mut killed = 0;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let pids = self.leftover_processes();
            if pids.is_empty() {
                return killed;
            }
            assert!(
                Instant::now() < deadline,
                "processes {pids:?} of the fake host survive SIGKILL"
            );
            killed += pids.len();
            let mut cmd = Command::new("/bin/busybox");
            cmd.args(["kill", "-9"]);
            cmd.args(pids.iter().map(ToString::to_string));
            let _ = cmd.stderr(Stdio::null()).status();
            std::thread::sleep(Duration::from_millis(5));
        }
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

/// Hold an exclusive `flock` on `path` from another process (python3) until the returned child
/// is killed; returns once the lock is held.
pub fn hold_flock(path: &Path) -> Child {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import fcntl, sys, time\n\
             f = open(sys.argv[1], 'a')\n\
             fcntl.flock(f, fcntl.LOCK_EX)\n\
             print('locked', flush=True)\n\
             time.sleep(3600)\n",
            path.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 is needed to hold a lock");
    let mut line = [0u8; 7];
    child
        .stdout
        .take()
        .unwrap()
        .read_exact(&mut line)
        .expect("python3 did not take the lock");
    assert_eq!(&line, b"locked\n");
    child
}

/// [`Snapshot`] for large trees, as cheap as a `stat` per path: type, mode, size, inode,
/// modification and change times, link target, and a hash of the content of files under
/// 256 KiB. The change time moves on every write, chmod, rename or link of an entry and no
/// process can set it back, so bigger files (busybox, a 10 MB config) need not be read to
/// know they are untouched.
pub fn tree_stamp(base: &Path) -> Snapshot {
    use std::hash::{DefaultHasher, Hasher};
    let mut map = BTreeMap::new();
    if base.exists() {
        walk(base, base, &mut |rel, meta| {
            let path = base.join(rel);
            let mut desc = format!(
                "{:o} {} ino={} mtime={}.{} ctime={}.{}",
                meta.mode(),
                meta.len(),
                meta.ino(),
                meta.mtime(),
                meta.mtime_nsec(),
                meta.ctime(),
                meta.ctime_nsec()
            );
            if meta.file_type().is_symlink() {
                let _ = write!(desc, " -> {}", fs::read_link(&path).unwrap().display());
            } else if meta.is_file() && meta.len() < 256 * 1024 {
                let mut h = DefaultHasher::new();
                h.write(&fs::read(&path).unwrap());
                let _ = write!(desc, " #{:016x}", h.finish());
            }
            map.insert(rel.to_owned(), desc);
        });
    }
    Snapshot(map)
}

/// When dropped (a test that ends, or panics), SIGKILLs what the host's agents left running:
/// an agent a failed assertion abandoned, stopped or waiting, would otherwise keep its steps
/// polling for a file in a temp dir that no longer exists. Finds the agents started with
/// [`FakeHost::tagged_agent`] and every process chrooted into ROOT.
pub struct Reaper<'a>(pub &'a FakeHost);

impl Drop for Reaper<'_> {
    fn drop(&mut self) {
        for _ in 0..500 {
            let pids = self.0.leftover_processes();
            if pids.is_empty() {
                return;
            }
            let mut cmd = Command::new("/bin/busybox");
            cmd.args(["kill", "-9"]);
            cmd.args(pids.iter().map(ToString::to_string));
            let _ = cmd.stderr(Stdio::null()).status();
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
