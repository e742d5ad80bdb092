use super::*;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn a_second_agent_waits_until_the_first_releases() {
    let root = tempfile::tempdir().unwrap();
    let fs = HostFs::new(root.path());
    let cancel = CancellationToken::new();
    let path = package_lock_path(Path::new("/state"), "pkg");
    assert_eq!(path, Path::new("/state/locks/pkg.lock"));
    let first = block_on(acquire(&fs, &path, Some("b1"), &cancel)).unwrap();
    let content = std::fs::read_to_string(root.path().join("state/locks/pkg.lock")).unwrap();
    assert!(content.starts_with(&format!("pid={} boot_id=b1 started=", std::process::id())));

    let fs2 = fs.clone();
    let path2 = path.clone();
    let waiter = std::thread::spawn(move || {
        let cancel = CancellationToken::new();
        let started = std::time::Instant::now();
        let lock = block_on(acquire(&fs2, &path2, None, &cancel)).unwrap();
        (started.elapsed(), lock.path().to_path_buf())
    });
    std::thread::sleep(Duration::from_millis(300));
    drop(first);
    let (elapsed, got) = waiter.join().unwrap();
    assert!(elapsed >= Duration::from_millis(250), "{elapsed:?}");
    assert_eq!(got, path);
}

#[test]
fn the_running_line_round_trips_and_junk_is_not_a_group() {
    let g = RunningGroup {
        pgid: 4712,
        start_ticks: 81234,
        pid_ns: 4_026_531_836,
        operation: "/var/lib/p/skyhook_dir/a b\n.sh".into(),
    };
    let text = format!("pid=1 boot_id=b started=t\n{}\n   ", g.render());
    let parsed = RunningGroup::parse(&text).unwrap();
    assert_eq!(
        (parsed.pgid, parsed.start_ticks, parsed.pid_ns),
        (4712, 81234, 4_026_531_836)
    );
    assert_eq!(parsed.operation, r#""/var/lib/p/skyhook_dir/a b\n.sh""#);
    for junk in [
        "pid=1 boot_id=b started=t\n",
        "running: pgid=x start_ticks=1 pid_ns=1 operation=\"a\"",
        "running: pgid=1 start_ticks=1 pid_ns=1 operation=\"init\"",
        "running: pgid=5 start_ticks=1 operation=\"a\"",
    ] {
        assert_eq!(RunningGroup::parse(junk), None, "{junk:?}");
    }
}

/// A process group of its own running `sleep`, recorded in a lock file as a killed
/// holder would have left it.
fn orphan(root: &Path, seconds: &str) -> std::process::Child {
    use std::os::unix::process::CommandExt as _;
    let child = std::process::Command::new("sleep")
        .arg(seconds)
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = i32::try_from(child.id()).unwrap();
    let group = RunningGroup::of(pgid, "/pkg/skyhook_dir/held.sh").unwrap();
    std::fs::create_dir_all(root.join("state/locks")).unwrap();
    std::fs::write(
        root.join("state/locks/pkg.lock"),
        format!("pid=1 boot_id=b1 started=t\n{}\n", group.render()),
    )
    .unwrap();
    child
}

#[test]
fn the_next_holder_waits_for_a_group_a_killed_holder_left_running() {
    let root = tempfile::tempdir().unwrap();
    let fs = HostFs::new(root.path());
    let cancel = CancellationToken::new();
    let path = package_lock_path(Path::new("/state"), "pkg");
    let mut child = orphan(root.path(), "0.5");
    let reaper = std::thread::spawn(move || child.wait());
    let started = std::time::Instant::now();
    let lock = block_on(acquire(&fs, &path, Some("b1"), &cancel)).unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    reaper.join().unwrap().unwrap();
    let text = std::fs::read_to_string(root.path().join("state/locks/pkg.lock")).unwrap();
    assert!(!text.contains("running:"), "{text:?}");

    // While an operation runs, the file names its group; afterwards it no longer does.
    let recorder = lock.group_recorder().unwrap();
    let me = i32::try_from(std::process::id()).unwrap();
    recorder.started(me, "/pkg/skyhook_dir/a.sh");
    let text = std::fs::read_to_string(root.path().join("state/locks/pkg.lock")).unwrap();
    let group = RunningGroup::parse(&text).unwrap();
    assert_eq!(group.pgid, me);
    recorder.finished();
    let after = std::fs::read_to_string(root.path().join("state/locks/pkg.lock")).unwrap();
    assert_eq!(after, lock.holder);
}

#[test]
fn a_group_recorded_under_another_boot_is_not_waited_for() {
    let root = tempfile::tempdir().unwrap();
    let fs = HostFs::new(root.path());
    let cancel = CancellationToken::new();
    let path = package_lock_path(Path::new("/state"), "pkg");
    let mut child = orphan(root.path(), "5");
    let started = std::time::Instant::now();
    let lock = block_on(acquire(&fs, &path, Some("b2"), &cancel));
    let elapsed = started.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    lock.unwrap();
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
}

#[test]
fn cancellation_stops_the_wait() {
    let root = tempfile::tempdir().unwrap();
    let fs = HostFs::new(root.path());
    let cancel = CancellationToken::new();
    let path = interrupt_lock_path(Path::new("/state"), "abc_pkg_1.0.0");
    assert_eq!(path, Path::new("/state/locks/interrupt-abc_pkg_1.0.0.lock"));
    let _held = block_on(acquire(&fs, &path, None, &cancel)).unwrap();
    let cancel2 = CancellationToken::new();
    cancel2.cancel();
    let err = block_on(acquire(&fs, &path, None, &cancel2)).unwrap_err();
    assert!(matches!(err, LockError::Stopped));
}

#[test]
fn a_link_at_the_lock_path_is_refused() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("state/locks")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.path().join("state/locks/pkg.lock")).unwrap();
    let fs = HostFs::new(root.path());
    let cancel = CancellationToken::new();
    let err = block_on(acquire(
        &fs,
        Path::new("/state/locks/pkg.lock"),
        None,
        &cancel,
    ))
    .unwrap_err();
    assert!(
        format!("{:#}", anyhow_like(&err)).contains("is a symbolic link"),
        "{err:?}"
    );
}

#[test]
fn holder_reads_who_holds_a_lock_without_creating_it() {
    let root = tempfile::tempdir().unwrap();
    let fs = HostFs::new(root.path());
    let cancel = CancellationToken::new();
    let path = package_lock_path(Path::new("/state"), "pkg");
    assert_eq!(holder(&fs, &path).unwrap(), None);
    assert!(
        !root.path().join("state").exists(),
        "the probe creates nothing"
    );

    let held = block_on(acquire(&fs, &path, Some("b1"), &cancel)).unwrap();
    let h = holder(&fs, &path).unwrap().expect("held");
    assert_eq!(h.pid, Some(std::process::id()));
    assert_eq!(h.boot_id.as_deref(), Some("b1"));
    assert!(h.started.is_some());
    let TryLock::Busy(busy) = try_acquire(&fs, &path, None).unwrap() else {
        panic!("a held lock must not be taken");
    };
    assert_eq!(busy.pid, Some(std::process::id()));
    drop(held);

    assert_eq!(holder(&fs, &path).unwrap(), None, "released");
    let TryLock::Acquired(guard) = try_acquire(&fs, &path, Some("b2")).unwrap() else {
        panic!("a free lock is taken");
    };
    let h = holder(&fs, &path).unwrap().expect("held by try_acquire");
    assert_eq!(h.boot_id.as_deref(), Some("b2"));
    drop(guard);
    assert_eq!(holder(&fs, &path).unwrap(), None);
}

#[test]
fn holder_parses_the_running_line() {
    let h = Holder::parse(
        "pid=42 boot_id=b started=2026-01-01T00:00:00Z\nrunning: pgid=43 start_ticks=1 pid_ns=2 operation=\"/p/apply.sh\"\n",
    );
    assert_eq!(h.pid, Some(42));
    assert_eq!(h.operation.as_deref(), Some("/p/apply.sh"));
    assert_eq!(Holder::parse("junk"), Holder::default());
}

fn anyhow_like(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}
