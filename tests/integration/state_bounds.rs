//! State files are read with a bound, and a fifo, socket or device is never opened (SPEC §5).
//!
//! A state file larger than its bound (markers 4 KiB; history, results records, check results
//! and lock files 16 MiB) is corrupt and handled as any corrupt state file, without being read:
//! the agent's memory does not grow with it. The large files here are sparse (`set_len`), so
//! they cost no disk, and the agent runs under a memory limit far below their size, as in a
//! container with a memory limit: an agent that read them whole would fail to allocate. A special file where a state or input file is expected is refused at once, naming
//! its type: every run here has a short timeout, so an agent blocked in `open(2)` fails the
//! test instead of hanging it.

use std::fs;
use std::os::unix::net::UnixListener;
use std::time::Duration;

use crate::util::{AgentCmd, FakeHost, HISTORY, PKG_DIR, PKG_FLAGS, Package, Run, STATE};

/// The agent itself needs a few MiB (`RLIMIT_DATA` counts its thread stacks too); reading a
/// 2 GiB file whole needs 2 GiB.
const MEMORY_LIMIT: u64 = 256 << 20;

/// An agent that blocks in `open(2)` on a fifo is killed, and the test fails, after this.
const NO_HANG: Duration = Duration::from_secs(20);

fn off_host() -> Package {
    Package::off_host(&["s1.sh"], &["s1_check.sh"])
}

/// Make the file at `<ROOT>/rel` a sparse file of `len` bytes: no disk, any size.
fn make_sparse(host: &FakeHost, rel: &str, len: u64) {
    let file = fs::File::create(host.path(rel)).unwrap();
    file.set_len(len).unwrap();
}

fn stage(host: &FakeHost, mode: &str) -> Run {
    host.stage_cmd(mode).timeout(NO_HANG).run()
}

/// A host where `apply` ran, and its results record (ROOT-relative).
fn applied() -> (FakeHost, String) {
    let host = FakeHost::new();
    host.install(&off_host());
    stage(&host, "apply").assert_success();
    (host, format!("{STATE}/results/pkg/1.0.0/apply.json"))
}

fn status(host: &FakeHost) -> AgentCmd {
    host.agent()
        .args(["status", &host.root_str()])
        .timeout(NO_HANG)
}

fn mkfifo(host: &FakeHost, rel: &str) {
    nix::unistd::mkfifo(
        &host.path(rel),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap_or_else(|e| panic!("mkfifo {rel}: {e}"));
}

/// A socket at `<ROOT>/rel`, bound through `/proc/self/fd` because the real path is longer
/// than a socket address may be.
fn bind_socket(host: &FakeHost, rel: &str) -> UnixListener {
    use std::os::fd::AsRawFd as _;
    let path = host.path(rel);
    let dir = fs::File::open(path.parent().unwrap()).unwrap();
    let short = format!(
        "/proc/self/fd/{}/{}",
        dir.as_raw_fd(),
        path.file_name().unwrap().to_str().unwrap()
    );
    UnixListener::bind(&short).unwrap_or_else(|e| panic!("bind {short}: {e}"))
}

#[test]
fn a_sparse_2_gib_history_is_corrupt_and_moved_aside_without_being_read() {
    let host = FakeHost::new();
    host.install(&off_host());
    stage(&host, "apply").assert_success();
    stage(&host, "apply-check").assert_success();
    make_sparse(&host, HISTORY, 2 << 30);
    let run = host
        .stage_cmd("apply-check")
        .timeout(NO_HANG)
        .data_limit(MEMORY_LIMIT)
        .run();
    run.assert_success();
    run.assert_stderr_line_contains(&["corrupt history file moved aside", "larger than 16 MiB"]);
    let backup = format!("{HISTORY}.backup");
    assert_eq!(fs::metadata(host.path(&backup)).unwrap().len(), 2 << 30);
    let history: serde_json::Value = serde_json::from_str(&host.read_string(HISTORY)).unwrap();
    assert_eq!(history["current-version"], "1.0.0", "{history:#}");
}

#[test]
fn a_sparse_4_gib_results_record_is_reported_corrupt_by_status_without_being_read() {
    let (host, record) = applied();
    make_sparse(&host, &record, 4 << 30);
    let run = status(&host).data_limit(MEMORY_LIMIT).run();
    run.assert_code(1);
    assert_eq!(run.out().lines().next(), Some("status: error"), "{run:?}");
    run.assert_stdout_contains(&format!(
        "results record apply.json: /{record} is corrupt: larger than 16 MiB"
    ));
}

#[test]
fn an_oversized_completion_marker_is_corrupt_and_the_step_runs_again() {
    let host = FakeHost::new();
    let pkg = off_host();
    host.install(&pkg);
    stage(&host, "apply").assert_success();
    let step = pkg.find("s1.sh");
    for marker in [step.native_marker(), step.legacy_marker()] {
        make_sparse(&host, &format!("{PKG_FLAGS}/{marker}"), 4097);
    }
    let run = stage(&host, "apply");
    run.assert_success();
    assert_eq!(host.ran_count("s1.sh"), 2, "{run:?}");
    run.assert_stderr_line_contains(&[
        "corrupt completion marker",
        &step.native_marker(),
        "larger than 4 KiB",
    ]);
}

#[test]
fn a_fifo_or_socket_where_a_state_file_belongs_is_refused_at_once_naming_its_type() {
    let pkg = off_host();
    let step = pkg.find("s1.sh");
    let marker = format!("{PKG_FLAGS}/{}", step.native_marker());
    // (where, the run that reads it, what is there)
    let cases = [
        (HISTORY.to_owned(), "apply-check", "a fifo"),
        (marker.clone(), "apply", "a fifo"),
        (marker, "apply", "a socket"),
        (format!("{STATE}/locks/pkg.lock"), "apply", "a fifo"),
    ];
    for (rel, mode, kind) in cases {
        let host = FakeHost::new();
        host.install(&pkg);
        stage(&host, "apply").assert_success();
        let _ = fs::remove_file(host.path(&rel));
        fs::create_dir_all(host.path(&rel).parent().unwrap()).unwrap();
        let _socket = if kind == "a socket" {
            Some(bind_socket(&host, &rel))
        } else {
            mkfifo(&host, &rel);
            None
        };
        let run = stage(&host, mode);
        run.assert_code(1);
        run.assert_stderr_line_contains(&[
            "agent execution failed",
            &format!("/{rel} is {kind}, not a regular file"),
        ]);
    }
}

#[test]
fn status_names_a_fifo_where_a_results_record_belongs() {
    let (host, record) = applied();
    fs::remove_file(host.path(&record)).unwrap();
    mkfifo(&host, &record);
    let run = status(&host).run();
    run.assert_code(1);
    run.assert_stdout_contains(&format!("/{record} is a fifo, not a regular file"));
}

#[test]
fn a_fifo_config_json_is_refused_at_once_by_the_run_and_by_validate() {
    let host = FakeHost::new();
    host.install(&off_host());
    let config = format!("{PKG_DIR}/config.json");
    fs::remove_file(host.path(&config)).unwrap();
    mkfifo(&host, &config);
    let run = stage(&host, "apply");
    run.assert_code(1);
    run.assert_stderr_line_contains(&["config.json", "a fifo, not a regular file"]);
    let run = host
        .agent()
        .arg("validate")
        .arg(host.path(PKG_DIR))
        .timeout(NO_HANG)
        .run();
    run.assert_code(1);
    run.assert_stdout_contains("a fifo, not a regular file");
}
