//! The harness: fake host roots ([`host`]), the agent runner ([`agent`]), a package builder
//! ([`package`]), the byte formats the assertions are computed with ([`formats`]: CPython
//! `repr`, Go `encoding/json`, marker names, timestamps) and the seeded trials of the
//! reliability suites ([`reliability`]).
//!
//! A `FakeHost` is a temp dir holding `root/` (ROOT: a minimal busybox rootfs) and `work/` (the
//! agent's cwd and a scratch area outside ROOT). Every test builds its own.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod agent;
pub mod console;
mod formats;
mod host;
mod logfmt;
mod package;
mod reliability;
pub mod schema;

pub use agent::*;
pub use formats::*;
pub use host::*;
pub use logfmt::*;
pub use package::*;
pub use reliability::*;

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

/// The MODEs of SPEC §1.1, in its order.
pub const MODES: &[&str] = &[
    "apply",
    "apply-check",
    "config",
    "config-check",
    "upgrade",
    "upgrade-check",
    "uninstall",
    "uninstall-check",
    "post-interrupt",
    "post-interrupt-check",
    "interrupt",
];

/// The subcommands (SPEC §1.4) and `help`, as `agent --help` lists them.
pub const SUBCOMMANDS: &[&str] = &[
    "interrupts",
    "validate",
    "plan",
    "status",
    "reset",
    "try",
    "completions",
    "man",
    "help",
];

/// A hung agent fails its test after this long instead of hanging CI.
pub const AGENT_TIMEOUT: Duration = Duration::from_secs(60);

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

/// Interrupt markers of resource `abc_pkg_1.0.0` (`STATE/interrupts/flags/<RID>`).
pub const INTERRUPT_FLAGS: &str = "var/lib/skyhook/sk1/interrupts/flags/abc_pkg_1.0.0";
/// Interrupt logs of resource `abc_pkg_1.0.0` (`LOGS/pkg/1.0.0/interrupts`).
pub const INTERRUPT_LOGS: &str = "var/log/skyhook/sk1/pkg/1.0.0/interrupts";
/// Where every fake system tool records its argv (ROOT-relative).
pub const CALLS_LOG: &str = "var/tmp/calls.log";
/// The boot id file the agent reads (ROOT-relative).
pub const BOOT_ID_FILE: &str = "proc/sys/kernel/random/boot_id";

/// Set to a fake host's ROOT in the environment of the agents the reliability suites start, and
/// so inherited by every step and command they run: after a SIGKILL it tells which leftover
/// processes belong to that host (even one forked but not yet chrooted).
pub const HOST_TAG_VAR: &str = "AGENT_IT_FAKE_ROOT";

/// `STATE/flags/apply-check_ALL_CHECKED`.
pub const ALL_CHECKED: &str = "var/lib/skyhook/sk1/flags/apply-check_ALL_CHECKED";
/// INTERRUPT_DATA JSON of a `node_restart`.
pub const NODE_RESTART: &str = r#"{"type":"node_restart"}"#;
/// The host going down, as a fake `reboot` (run by the agent) plays it: SIGTERM to the agent
/// and to itself, as a shutdown sends it to every process, then, from a session of its own that
/// the agent does not stop (armed before the SIGTERM), SIGKILL of the agent 2 s later, as the
/// end of a shutdown does.
macro_rules! host_goes_down {
    () => {
        "agent=$PPID\n\
         rm -f /var/tmp/host-down.armed\n\
         setsid sh -c \": > /var/tmp/host-down.armed; sleep 2; kill -KILL $agent\" \
         </dev/null >/dev/null 2>&1 &\n\
         while [ ! -e /var/tmp/host-down.armed ]; do usleep 1000; done\n\
         kill -TERM $agent\n\
         kill -TERM $$\n\
         sleep 5"
    };
}
/// A fake `reboot` that takes the host down ([`host_goes_down!`]): its SIGTERM reaches the
/// agent, which is SIGKILLed 2 s later.
pub const REBOOT_SHUTS_DOWN: &str =
    concat!("echo \"fake reboot: shutting down\"\n", host_goes_down!());
/// What the agent prints once the shutdown it asked for has reached it (SPEC §9.4).
pub const SHUTDOWN_IN_PROGRESS: &str =
    "shutdown in progress; the reboot will be confirmed by boot ID on the next run";
/// What the agent says when a termination signal stopped it.
pub const STOPPED: &str = "agent stopped after receiving a termination signal";
/// A step environment variable (`Step::env`) and its value.
pub const FOO: (&str, &str) = ("FOO", "foo-value");

/// The workspace root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("agent-cli sits in the workspace root")
        .to_path_buf()
}

/// A file of the workspace, as text.
pub fn repo_file(rel: &str) -> String {
    fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// `INTERRUPT_FLAGS/<name>`: a marker of resource `abc_pkg_1.0.0`.
pub fn interrupt_marker(name: &str) -> String {
    format!("{INTERRUPT_FLAGS}/{name}")
}
