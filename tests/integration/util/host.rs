//! Fake host roots: building one, reading and writing under ROOT, snapshots of a tree, the
//! processes a host's agents left behind.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{Read, Write as _};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{
    AgentCmd, BOOT_ID, BOOT_ID_FILE, CALLS_LOG, COPY_DIR, HOST_TAG_VAR, INTERRUPT_FLAGS, Package,
    RAN_LOG, Run, Step, sha256_hex,
};

/// Busybox applets linked into `<ROOT>/bin` (never `reboot`, `halt` or `poweroff`).
const APPLETS: &[&str] = &[
    "sh", "echo", "cat", "sleep", "env", "pwd", "basename", "dirname", "printf", "ls", "touch",
    "mkdir", "rm", "kill", "true", "false", "head", "tail", "tr", "date", "wc", "seq", "yes", "dd",
    "test", "[", "sort", "grep", "cut", "sed", "id", "stat", "readlink", "chmod", "ln", "cp", "mv",
    "tee", "awk", "setsid", "usleep",
];

/// Fake system tools: they only record their argv in `<ROOT>/var/tmp/calls.log`.
const FAKE_TOOLS: &[&str] = &["reboot", "shutdown", "systemctl", "service", "kubectl"];

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

    /// A fresh host without `bin/busybox`, for tests in which nothing may run chrooted: hashing
    /// the 2 MB binary twice per run would dominate them, and a command that ran anyway would
    /// still show (in the hashes, the calls log or stdout). The applet links stay (dangling).
    pub fn bare() -> Self {
        let host = Self::new();
        fs::remove_file(host.path("bin/busybox")).unwrap();
        host
    }

    /// A fresh host with an empty package directory at COPY_DIR: what interrupts run in.
    pub fn with_package_dir() -> Self {
        let host = Self::new();
        host.mkdir(COPY_DIR);
        host
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

    /// `agent MODE ROOT COPY_DIR`, not yet run.
    pub fn stage_cmd(&self, mode: &str) -> AgentCmd {
        self.agent().args([mode, &self.root_str(), COPY_DIR])
    }

    /// `agent MODE ROOT COPY_DIR` with the base environment plus `env`.
    pub fn run(&self, mode: &str, env: &[(&str, &str)]) -> Run {
        let mut cmd = self.stage_cmd(mode);
        for (k, v) in env {
            cmd = cmd.env(k, v);
        }
        cmd.run()
    }

    /// `agent MODE ROOT COPY_DIR` with the base environment.
    pub fn stage(&self, mode: &str) -> Run {
        self.run(mode, &[])
    }

    /// A reboot of resource `abc_pkg_1.0.0` requested in this boot, `attempts` times: its
    /// `node_restart_0` pending and attempts markers.
    pub fn write_pending_reboot(&self, attempts: u32) {
        self.write(
            &format!("{INTERRUPT_FLAGS}/node_restart_0.pending"),
            format!("boot-id:{BOOT_ID}\n"),
        );
        self.write(
            &format!("{INTERRUPT_FLAGS}/node_restart_0.attempts"),
            format!("boot-id:{BOOT_ID}\nattempts:{attempts}\n"),
        );
    }

    /// Install an apply whose first step, `held.sh`, writes `/var/tmp/started`, waits for
    /// `/var/tmp/release` and then runs `last` (one shell line); `next.sh` and an apply-check
    /// step `next_check.sh` follow. Run it with [`FakeHost::stop_held_apply`].
    pub fn install_held_apply(&self, last: &str) {
        let held = format!(
            "#!/bin/sh\necho started > /var/tmp/started\n\
             while [ ! -e /var/tmp/release ]; do usleep 10000; done\n{last}\n"
        );
        self.install(
            &Package::new()
                .step("apply", Step::new("held.sh").script(&held))
                .step("apply", Step::new("next.sh"))
                .step("apply-check", Step::new("next_check.sh")),
        );
    }

    /// Start `agent` (an apply of [`FakeHost::install_held_apply`]'s package), send it SIGTERM
    /// once `held.sh` runs, then let the step finish; the agent's result.
    pub fn stop_held_apply(&self, agent: AgentCmd) -> Run {
        let agent = agent
            .args(["apply", &self.root_str(), COPY_DIR])
            .timeout(Duration::from_secs(40))
            .spawn();
        self.wait_for("var/tmp/started", Duration::from_secs(20));
        agent.signal("TERM");
        std::thread::sleep(Duration::from_millis(300));
        self.write("var/tmp/release", "");
        agent.wait()
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

    /// The markers of a reboot `node_restart_0` of resource `abc_pkg_1.0.0` requested
    /// `attempts` times under the current boot ID ([`BOOT_ID`]): `attempts` at the loop
    /// guard's limit makes the next run refuse.
    pub fn write_reboot_requested(&self, attempts: u32) {
        self.write(
            &super::interrupt_marker("node_restart_0.pending"),
            format!("boot-id:{BOOT_ID}\n"),
        );
        self.write(
            &super::interrupt_marker("node_restart_0.attempts"),
            format!("boot-id:{BOOT_ID}\nattempts:{attempts}\n"),
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

/// Whether `/proc/<pid>` is a live (not zombie) process.
pub fn process_alive(pid: u32) -> bool {
    !matches!(process_state(pid), None | Some('Z' | 'X' | 'x'))
}

/// The state letter of `/proc/<pid>/stat` (`R`, `S`, `Z`, `t` for a tracing stop, …).
pub fn process_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the parenthesised command name.
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
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

/// Send `sig` (`"KILL"`, `"TERM"`, …) to process `pid` with busybox `kill`; ignores a process
/// that is already gone.
pub fn signal_pid(pid: u32, sig: &str) {
    let _ = Command::new("/bin/busybox")
        .args(["kill", "-s", sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status();
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
