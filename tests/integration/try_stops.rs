//! `agent try` stops cleanly: every stop signal (SPEC §10) discards the sandbox and removes its
//! temporary directories, and an input file that is not a regular file is refused at once
//! (SPEC §5) instead of being opened for a blocking read.
//!
//! Each test gives the agent a `TMPDIR` of its own, so "nothing left behind" is a fact about
//! one directory.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::try_safety::{package, processes_with};
use crate::util::FakeHost;

/// A private `TMPDIR` for the agent.
fn tmpdir(host: &FakeHost) -> PathBuf {
    let dir = host.outside().join("tmp");
    std::fs::create_dir(&dir).unwrap();
    dir
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn try_every_stop_signal_discards_the_sandbox_and_its_temporary_directories() {
    require_root!();
    let host = FakeHost::new();
    let tmp = tmpdir(&host);
    // A sleep nobody else runs, to find it in /proc.
    let pkg = package(&host, "#!/bin/sh\nexec sleep 3221\n");
    let before = host.snapshot();
    for sig in ["TERM", "INT", "HUP", "USR1", "USR2", "ALRM", "QUIT"] {
        let running = host
            .agent()
            .env("TMPDIR", &tmp)
            .arg("try")
            .arg(&pkg)
            .args(["--root", &host.root_str(), "--stages", "apply"])
            .spawn();
        let deadline = Instant::now() + Duration::from_secs(30);
        while processes_with("sleep 3221").is_empty() {
            assert!(
                Instant::now() < deadline,
                "SIG{sig}: the step did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        running.signal(sig);
        let run = running.wait();
        run.assert_code(1)
            .assert_stderr_contains(&format!("agent try: stopped by SIG{sig}: "));
        assert!(
            entries(&tmp).is_empty(),
            "SIG{sig} left {:?} in TMPDIR",
            entries(&tmp)
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while !processes_with("sleep 3221").is_empty() {
            assert!(
                Instant::now() < deadline,
                "SIG{sig}: left running: {:?}",
                processes_with("sleep 3221")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        before.assert_unchanged(&host.snapshot(), &format!("after SIG{sig}"));
    }
}

#[test]
fn try_refuses_a_configmap_file_that_is_not_a_regular_file_at_once() {
    require_root!();
    let host = FakeHost::new();
    let tmp = tmpdir(&host);
    let pkg = package(&host, "#!/bin/sh\nexit 0\n");
    let fifo = host.outside().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let socket = host.outside().join("socket");
    let _listener = UnixListener::bind(&socket).unwrap();
    let dir = host.outside().join("a-dir");
    std::fs::create_dir(&dir).unwrap();
    let before = host.snapshot();
    for (file, kind) in [
        (fifo.as_path(), "is a FIFO"),
        (socket.as_path(), "is a socket"),
        (Path::new("/dev/null"), "is a character device"),
        (dir.as_path(), "is a directory"),
    ] {
        let run = host
            .agent()
            .env("TMPDIR", &tmp)
            .timeout(Duration::from_secs(20))
            .arg("try")
            .arg(&pkg)
            .args(["--root", &host.root_str(), "--configmap"])
            .arg(format!("settings.conf={}", file.display()))
            .run();
        run.assert_code(2).assert_stderr_contains(&format!(
            "error: --configmap settings.conf: {}: {kind}\n\nUsage: agent try ",
            file.display()
        ));
        assert!(
            entries(&tmp).is_empty(),
            "{kind}: left {:?} in TMPDIR",
            entries(&tmp)
        );
    }
    before.assert_unchanged(&host.snapshot(), "after refused configmaps");
}
