//! `agent try PACKAGE_DIR`: a package's whole lifecycle in a throwaway copy-on-write sandbox of
//! a host root, and what it changed there (docs/try.md).
//!
//! Four processes:
//! - `agent try` ([`run`]) checks the input, starts the sandbox, waits for it (any stop signal
//!   discards it at once) and gives back the report;
//! - the sandbox process (`sandbox::enter`), started as `agent try --sandbox SPEC` in a new
//!   session, unshares the namespaces and forks
//! - the sandbox's init (PID 1 of its PID namespace), which mounts the overlay, `/proc`, `/dev`
//!   and `/sys`, pivots into a small root of its own (`layout`) and runs the lifecycle
//!   (`lifecycle`);
//! - for each stage, the stage runner (`confine`, `agent try --stage MODE`), which runs the
//!   agent's own operator form, `agent MODE /root COPY_DIR`, with the sandbox's overlay at
//!   `/root`, in namespaces of the stage's own where the steps reach nothing of the machine
//!   but read-only, locked mounts, and checks that before and after the stage.
//!
//! The lower layer is only ever a read-only overlayfs lower layer; the upper layer lives on a
//! tmpfs of the sandbox's mount namespace and is gone with it (`--keep DIR` copies it out).
//! Modules depend one way: the crate's root → `sandbox` → `lifecycle` → `confine`, `report`;
//! all of them on `layout` and `mounts`.
//!
//! The command line is agent-cli's: it parses `agent try` and gives [`run`] the values
//! ([`Options`]), prints what comes back ([`Outcome`], [`Error`]) in its output contract, and
//! hands the processes `agent try` starts of itself to [`internal`], with the function that
//! makes a [`Report`] one of its JSON documents.

mod confine;
mod layout;
mod lifecycle;
mod mounts;
mod report;
mod sandbox;

use std::ffi::OsString;
use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agent_core::Interrupt;
use agent_core::host::errors::Chain;
use agent_core::package::config::PackageConfig;
use agent_core::package::step::Mode;
use nix::sys::wait::{WaitStatus, waitpid};
use serde::{Deserialize, Serialize};

pub use report::Report;

/// The operator's names inside the sandbox (SPEC §13), for the skyhook `try`.
pub(crate) const STATE_DIR: &str = "/var/lib/skyhook/try";
pub(crate) const LOG_DIR: &str = "/var/log/skyhook/try";

/// What `agent try` is asked to do: the values of its command line.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// The package directory (config.json, skyhook_dir/, configmaps/, root_dir/).
    pub package_dir: &'a Path,
    /// The host root to use as the read-only lower layer (`--root`).
    pub root: &'a Path,
    /// Comma-separated stages to run before the interrupts (`--stages`).
    pub stages: &'a str,
    /// Interrupt payloads as JSON (`--interrupt`).
    pub interrupts: &'a [String],
    /// `NAME=FILE` configMap keys (`--configmap`).
    pub configmaps: &'a [String],
    /// `K=V` variables for the stages (`--env`).
    pub env: &'a [String],
    /// Where to keep the upper layer, the stage outputs and the report (`--keep`).
    pub keep: Option<&'a Path>,
    /// The host's network; a new, empty network namespace without it (`--no-network`).
    pub network: bool,
    /// The stages' `SKYHOOK_AGENT_LOG`, over an `--env SKYHOOK_AGENT_LOG` (`-q`/`-v`).
    pub log_filter: Option<&'a str>,
    /// The report as the JSON document, not as text.
    pub json: bool,
}

/// Why `agent try` did not run the lifecycle (SPEC §1.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Malformed arguments (exit 2).
    Usage(String),
    /// The operation failed (exit 1).
    Failed(String),
}

/// How a run of `agent try` that got its sandbox started ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The lifecycle ran to its end: the report in the form asked for, and whether every
    /// stage succeeded.
    Report { report: String, succeeded: bool },
    /// The sandbox could not be set up (it said why on stderr); nothing was run.
    NotSetUp,
    /// The sandbox ended (or was stopped) before the report: why, and the stages that had
    /// finished, as lines for stderr (empty when none had).
    Unfinished { message: String, progress: String },
}

/// What the sandbox needs, written by `agent try` and read by the sandbox process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Spec {
    /// The lower layer (canonical).
    pub lower: PathBuf,
    /// The package directory (canonical).
    pub package_dir: PathBuf,
    /// The scratch directory: `c/` (the sandbox's root tmpfs mount point), `configmaps/`.
    pub scratch: PathBuf,
    /// Where the report, the stage outputs and (with `--keep`) the upper layer go.
    pub out: PathBuf,
    pub keep: bool,
    pub user_namespace: bool,
    pub network: bool,
    pub package: String,
    pub version: String,
    pub resource_id: String,
    /// COPY_DIR inside the sandbox.
    pub copy_dir: String,
    pub plan: Vec<Item>,
    /// Environment of the stages on top of the inherited one.
    pub env: Vec<(String, String)>,
    /// configMap keys, staged under `scratch/configmaps/`.
    pub configmaps: Vec<String>,
}

/// One item of the lifecycle.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(crate) enum Item {
    Stage { mode: String },
    Interrupt { payload: String },
}

/// Exit code of the sandbox process when its setup failed (it printed why).
pub(crate) const SETUP_FAILED: u8 = 3;

/// Say on stderr that `agent try` cannot `what` (e.g. `create the sandbox`), and why;
/// [`SETUP_FAILED`].
pub(crate) fn setup_failed(what: &str, why: &str) -> u8 {
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("agent try: cannot {what}: {why}; nothing was run\n").as_bytes(),
    );
    SETUP_FAILED
}

/// The words of the command lines `agent try` starts itself with ([`internal`] reads them):
/// `try --sandbox SPEC` and `try --stage MODE --copy-dir DIR --verdict-fd FD`.
pub(crate) const TRY: &str = "try";
pub(crate) const SANDBOX: &str = "--sandbox";
pub(crate) const STAGE: &str = "--stage";
pub(crate) const COPY_DIR: &str = "--copy-dir";
pub(crate) const VERDICT_FD: &str = "--verdict-fd";

/// The processes `agent try` starts of itself (see the crate's documentation), which are no
/// part of the command line people use: `try --sandbox SPEC` and `try --stage MODE --copy-dir
/// DIR --verdict-fd FD`. `None` for any other command line. `document` makes the report the
/// JSON document `--format json` prints.
pub fn internal(args: &[OsString], document: fn(&Report) -> String) -> Option<ExitCode> {
    let args: Vec<&str> = args.iter().map(|a| a.to_str()).collect::<Option<_>>()?;
    match args.as_slice() {
        [TRY, SANDBOX, spec] => Some(ExitCode::from(sandbox::enter(Path::new(spec), document))),
        [TRY, STAGE, mode, COPY_DIR, copy_dir, VERDICT_FD, fd] => {
            let fd = fd.parse().ok()?;
            Some(ExitCode::from(confine::run(mode, copy_dir, fd)))
        }
        _ => None,
    }
}

/// `agent try`: check the input, run the lifecycle in the sandbox, and give back its report.
pub fn run(options: &Options<'_>) -> Result<Outcome, Error> {
    // Before anything is created: a stop signal from here on removes what was.
    let stopped = StopFlag::install().map_err(Error::Failed)?;
    let (spec, _scratch) = prepare(options)?;
    let ended = supervise(&spec, &stopped).map_err(Error::Failed)?;
    Ok(finish(options.json, &spec, &ended))
}

/// Check every argument and stage the scratch directory. Nothing is started before this passes.
fn prepare(args: &Options<'_>) -> Result<(Spec, Scratch), Error> {
    let package_dir = std::fs::canonicalize(args.package_dir)
        .map_err(failed("package directory", args.package_dir))?;
    let config_path = package_dir.join("config.json");
    let skyhook_dir = package_dir.join("skyhook_dir");
    let (config, _warnings) = PackageConfig::load(&config_path, &skyhook_dir)
        .map_err(|e| Error::Failed(format!("loading {}: {}", config_path.display(), Chain(&e))))?;
    let (pkg, ver) = (config.package_name, config.package_version);
    let lower = std::fs::canonicalize(args.root).map_err(failed("lower root", args.root))?;
    if !lower.is_dir() {
        return Err(Error::Failed(format!(
            "lower root {} is not a directory",
            lower.display()
        )));
    }
    // overlayfs takes the layers as a comma- and colon-separated option string.
    if lower.to_string_lossy().contains([',', ':', '\\']) {
        return Err(Error::Failed(format!(
            "lower root {}: overlayfs cannot take a path containing ',', ':' or '\\'",
            lower.display()
        )));
    }

    let mut plan = Vec::new();
    for mode in args
        .stages
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        mode.parse::<Mode>().map_err(|_| {
            Error::Usage(format!(
                "--stages: unknown stage {mode:?} (one of apply, apply-check, config, \
                 config-check, upgrade, upgrade-check, uninstall, uninstall-check, \
                 post-interrupt, post-interrupt-check)"
            ))
        })?;
        plan.push(Item::Stage {
            mode: mode.to_owned(),
        });
    }
    for payload in args.interrupts {
        let usage = |e: &dyn std::fmt::Display| Error::Usage(format!("--interrupt {payload}: {e}"));
        let interrupt = <dyn Interrupt>::from_json_bytes(payload.as_bytes())
            .map_err(|e| usage(&e))?
            .interrupt;
        interrupt.validate_payload().map_err(|e| usage(&e))?;
        plan.push(Item::Interrupt {
            payload: interrupt.to_json(),
        });
        for mode in ["post-interrupt", "post-interrupt-check"] {
            plan.push(Item::Stage {
                mode: mode.to_owned(),
            });
        }
    }
    if plan.is_empty() {
        return Err(Error::Usage("--stages: no stage to run".into()));
    }

    let mut env = Vec::new();
    for kv in args.env {
        match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() && !k.contains('\0') && !v.contains('\0') => {
                env.push((k.to_owned(), v.to_owned()));
            }
            _ => return Err(Error::Usage(format!("--env {kv:?}: expected K=V"))),
        }
    }
    // `-q`/`-v` set the level of the stages' diagnostics, over an `--env SKYHOOK_AGENT_LOG`.
    if let Some(filter) = args.log_filter {
        env.retain(|(k, _)| k != "SKYHOOK_AGENT_LOG");
        env.push(("SKYHOOK_AGENT_LOG".to_owned(), filter.to_owned()));
    }

    let scratch = Scratch::new()?;
    let scratch_path = scratch.0.clone();
    let cm_dir = scratch_path.join("configmaps");
    std::fs::create_dir(&cm_dir)
        .and_then(|()| std::fs::create_dir(scratch_path.join("c")))
        .map_err(failed("creating", &cm_dir))?;
    let mut configmaps = Vec::new();
    for nf in args.configmaps {
        let Some((name, file)) = nf.split_once('=') else {
            return Err(Error::Usage(format!(
                "--configmap {nf:?}: expected NAME=FILE"
            )));
        };
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(Error::Usage(format!(
                "--configmap {nf:?}: NAME must be a single path component"
            )));
        }
        stage_configmap(name, Path::new(file), &cm_dir.join(name))?;
        configmaps.push(name.to_owned());
    }

    let (out, keep) = if let Some(dir) = args.keep {
        (keep_dir(dir, &lower)?, true)
    } else {
        let dir = scratch_path.join("out");
        std::fs::create_dir(&dir).map_err(failed("creating", &dir))?;
        (dir, false)
    };

    let spec = Spec {
        lower,
        package_dir,
        scratch: scratch_path.clone(),
        out,
        keep,
        user_namespace: !nix::unistd::geteuid().is_root(),
        network: args.network,
        resource_id: format!("try-uid-1_{pkg}_{ver}"),
        copy_dir: format!("{STATE_DIR}/{pkg}-{ver}-try-1"),
        package: pkg,
        version: ver,
        plan,
        env,
        configmaps,
    };
    let file = scratch_path.join("spec.json");
    std::fs::write(
        &file,
        serde_json::to_vec(&spec).expect("the spec serializes"),
    )
    .map_err(failed("writing", &file))?;
    Ok((spec, scratch))
}

/// Copy the `--configmap` file `file` to `dest`. Anything but a regular file (after links) is
/// a usage error, refused before it is opened (SPEC §5): a FIFO would block the read forever.
fn stage_configmap(name: &str, file: &Path, dest: &Path) -> Result<(), Error> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let reading = |e: std::io::Error| {
        Error::Failed(format!(
            "--configmap {name}: reading {}: {e}",
            file.display()
        ))
    };
    let regular = |meta: std::fs::Metadata| {
        if meta.is_file() {
            return Ok(());
        }
        Err(Error::Usage(format!(
            "--configmap {name}: {}: {}",
            file.display(),
            file_kind(meta.file_type())
        )))
    };
    regular(std::fs::metadata(file).map_err(reading)?)?;
    // Non-blocking, in case it was replaced by a FIFO since.
    let mut src = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(file)
        .map_err(reading)?;
    regular(src.metadata().map_err(reading)?)?;
    let mut to = std::fs::File::create_new(dest).map_err(failed("creating", dest))?;
    std::io::copy(&mut src, &mut to).map_err(reading)?;
    Ok(())
}

/// `Error::Failed` saying `<what> <path>: <cause>` (its text made only on failure).
fn failed<E: std::fmt::Display>(what: &'static str, path: &Path) -> impl FnOnce(E) -> Error {
    move |e| Error::Failed(format!("{what} {}: {e}", path.display()))
}

/// What a file that is not a regular one is, for an error message.
fn file_kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    [
        (t.is_dir(), "is a directory"),
        (t.is_fifo(), "is a FIFO"),
        (t.is_socket(), "is a socket"),
        (t.is_char_device(), "is a character device"),
        (t.is_block_device(), "is a block device"),
    ]
    .into_iter()
    .find_map(|(is, kind)| is.then_some(kind))
    .unwrap_or("is not a regular file")
}

/// The `--keep` directory: new or empty, outside the lower root, mode 0700.
///
/// "Outside" is a fact about the filesystem, not about path strings: a directory reached
/// through a bind mount of LOWER, or of a directory in it, is inside. Each path is located in
/// its filesystem (the mount's device and root, mountinfo); LOWER `/` takes every other path as
/// outside (the keep directory is then one that LOWER holds, on purpose).
fn keep_dir(dir: &Path, lower: &Path) -> Result<PathBuf, Error> {
    let keep_err = |e: String| Error::Failed(format!("--keep {}: {e}", dir.display()));
    let outside_lower = |p: &Path| -> Result<(), Error> {
        if lower == Path::new("/") {
            return Ok(());
        }
        let inside = p.starts_with(lower) || {
            let mounts = std::fs::read_to_string("/proc/self/mountinfo")
                .map(|t| mounts::parse_mountinfo(&t))
                .map_err(|e| keep_err(format!("reading /proc/self/mountinfo: {e}")))?;
            let (lower_dev, lower_path) = mounts::location(lower, &mounts).map_err(keep_err)?;
            let (dev, path) = mounts::location(p, &mounts).map_err(keep_err)?;
            dev == lower_dev && path.starts_with(lower_path)
        };
        if inside {
            let lower = lower.display();
            return Err(keep_err(format!(
                "inside the lower root {lower}, which is never written"
            )));
        }
        Ok(())
    };
    // Refused before anything is created: the nearest existing ancestor, links resolved.
    let absolute = std::path::absolute(dir).map_err(|e| keep_err(e.to_string()))?;
    let existing = absolute
        .ancestors()
        .find_map(|a| std::fs::canonicalize(a).ok())
        .unwrap_or_default();
    outside_lower(&existing)?;
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(keep_err("the directory is not empty".into()));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| keep_err(format!("creating it: {e}")))?;
        }
        Err(e) => return Err(keep_err(e.to_string())),
    }
    let dir = std::fs::canonicalize(dir).map_err(|e| keep_err(e.to_string()))?;
    outside_lower(&dir)?;
    // It holds copies of what the steps wrote: for its owner alone.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| keep_err(format!("chmod 0700: {e}")))?;
    Ok(dir)
}

/// The scratch directory (`$TMPDIR/agent-try-XXXXXX`), removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Self, Error> {
        let template = std::env::temp_dir().join("agent-try-XXXXXX");
        nix::unistd::mkdtemp(&template)
            .map(Self)
            .map_err(failed("creating a scratch directory", &template))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How the sandbox ended.
enum Ended {
    /// Its process exited with this code.
    Exited(i32),
    /// A stop signal to `agent try` discarded it.
    Stopped(i32),
}

/// Every signal that asks `agent try` to stop (SPEC §10). Each discards the sandbox at once
/// (there is no host state to protect) and removes the temporary directories.
const STOP_SIGNALS: [i32; 7] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGQUIT,
];

/// The stop signal `agent try` received, 0 while none.
struct StopFlag(Arc<AtomicUsize>);

impl StopFlag {
    fn install() -> Result<Self, String> {
        let flag = Arc::new(AtomicUsize::new(0));
        for sig in STOP_SIGNALS {
            let number = usize::try_from(sig).expect("signal numbers are positive");
            signal_hook::flag::register_usize(sig, Arc::clone(&flag), number)
                .map_err(|e| format!("installing a signal handler: {e}"))?;
        }
        Ok(Self(flag))
    }

    fn received(&self) -> Option<i32> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            n => Some(i32::try_from(n).unwrap_or(libc::SIGTERM)),
        }
    }
}

/// Start the sandbox process and wait for it; a stop signal kills it (and with it, by its
/// parent-death signal and its PID namespace, everything in the sandbox).
fn supervise(spec: &Spec, stopped: &StopFlag) -> Result<Ended, String> {
    if let Some(sig) = stopped.received() {
        return Ok(Ended::Stopped(sig));
    }
    let mut cmd = std::process::Command::new("/proc/self/exe");
    cmd.args([TRY, SANDBOX]).arg(spec.scratch.join("spec.json"));
    cmd.stdin(std::process::Stdio::null());
    // SAFETY: setsid and prctl are async-signal-safe system calls; nothing else runs between
    // fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            // Out of the terminal's process group: a Ctrl-C reaches `agent try` only, which
            // discards the whole sandbox.
            nix::unistd::setsid()?;
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting the sandbox process: {e}"))?;
    loop {
        let status = child
            .try_wait()
            .map_err(|e| format!("waiting for the sandbox: {e}"))?;
        if let Some(sig) = stopped.received() {
            // Both do nothing once it has been reaped.
            let _ = child.kill();
            let _ = child.wait();
            return Ok(Ended::Stopped(sig));
        }
        if let Some(status) = status {
            return Ok(Ended::Exited(exit_code(status)));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn finish(json: bool, spec: &Spec, ended: &Ended) -> Outcome {
    // The sandbox rendered the report in both forms; it exists only if the lifecycle ran to
    // its end.
    let file = if json { "report.json" } else { "report.txt" };
    let message = match (ended, std::fs::read(spec.out.join(file)).ok()) {
        (Ended::Exited(code), Some(report)) => {
            return Outcome::Report {
                report: String::from_utf8_lossy(&report).into_owned(),
                succeeded: *code == 0,
            };
        }
        // The sandbox said what was missing, on stderr.
        (Ended::Exited(code), None) if *code == i32::from(SETUP_FAILED) => {
            return Outcome::NotSetUp;
        }
        (Ended::Exited(code), None) => format!(
            "the sandbox ended before the lifecycle finished ({})",
            match code {
                c if *c > 128 => format!("its init was killed by signal {}", c - 128),
                c => format!("exit code {c}"),
            }
        ),
        (Ended::Stopped(sig), _) => {
            let name = nix::sys::signal::Signal::try_from(*sig)
                .map_or_else(|_| sig.to_string(), |s| s.as_str().to_owned());
            format!("stopped by {name}: the sandbox and every process in it were discarded")
        }
    };
    let keep_note = if spec.keep {
        format!("; kept in {}", spec.out.display())
    } else {
        String::new()
    };
    // What a run that did not reach its report can say about LOWER (SPEC §1.6: measured, never
    // assumed).
    Outcome::Unfinished {
        message: format!(
            "{message}; not verified after the run that the lower root {} was not written (the \
             steps of each stage that started ran only after its mounts were checked read-only \
             and locked){keep_note}",
            spec.lower.display()
        ),
        progress: progress(spec),
    }
}

/// The stages that finished before the sandbox ended, one line each.
fn progress(spec: &Spec) -> String {
    let Ok(text) = std::fs::read_to_string(spec.out.join("stages.txt")) else {
        return String::new();
    };
    let mut s = String::new();
    for line in text.lines() {
        let _ = writeln!(s, "  {line}");
    }
    if !s.is_empty() {
        s.insert_str(0, "stages that finished:\n");
    }
    s
}

/// A child's exit code, or 128 + the signal that ended it.
pub(crate) fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Wait for the forked `child`: its exit code, or 128 + the signal that ended it.
pub(crate) fn wait(child: nix::unistd::Pid) -> nix::Result<u8> {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => return Ok(u8::try_from(code).unwrap_or(1)),
            Ok(WaitStatus::Signaled(_, sig, _)) => {
                return Ok(u8::try_from(128 + sig as i32).unwrap_or(1));
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}
