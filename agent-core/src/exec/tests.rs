use super::*;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

fn config(timeout: Option<Duration>) -> (Config, Arc<MemorySink>, Arc<MemorySink>, Cancellation) {
    let out = Arc::new(MemorySink::default());
    let err = Arc::new(MemorySink::default());
    let handle = Cancellation::new();
    let cfg = Config {
        output: Output::new(out.clone(), err.clone()),
        cancel: handle.clone(),
        stop_grace: Duration::from_millis(300),
        timeout,
        runner: Arc::new(ProcessRunner::default()),
    };
    (cfg, out, err, handle)
}

fn sh(script: &str) -> ProcessSpec {
    ProcessSpec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("X".into(), "x-value".into()),
        ],
        cwd: "/".into(),
        chroot: None,
        first_signal: FirstSignal::Finish,
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn relays_stdout_and_stderr_raw_and_both_to_the_log() {
    let (cfg, out, err, _h) = config(None);
    let dir = tempfile::tempdir().unwrap();
    let mut log = File::create(dir.path().join("log")).unwrap();
    let o = rt()
        .block_on(cfg.run(
            &sh("printf 'a\\nb'; printf 'e' >&2; echo $X"),
            Some(&mut log),
        ))
        .unwrap();
    assert_eq!(o.termination, Termination::Exited(0));
    assert_eq!(out.contents(), b"a\nbx-value\n");
    assert_eq!(err.contents(), b"e");
    let logged = std::fs::read(dir.path().join("log")).unwrap();
    assert_eq!(logged.len(), b"a\nbx-value\ne".len());
}

/// stdout: digits and newlines; stderr: letters and semicolons, so each stream can be
/// picked back out of the combined log. Written concurrently by `cat` in 128 KiB blocks,
/// large enough for the zero-copy paths.
fn big_output(dir: &Path) -> (ProcessSpec, Vec<u8>, Vec<u8>) {
    let d = dir.display();
    let make = format!(
        "seq 1 300000 > {d}/a; seq 300001 400000 > {d}/c; \
         seq 1 150000 | tr '0-9\\n' 'a-j;' > {d}/b"
    );
    assert!(
        std::process::Command::new("/bin/sh")
            .args(["-c", &make])
            .status()
            .unwrap()
            .success()
    );
    let read = |n: &str| std::fs::read(dir.join(n)).unwrap();
    let out = [read("a"), read("c")].concat();
    let err = read("b");
    let spec = sh(&format!("(cat {d}/a; cat {d}/c) & cat {d}/b >&2; wait"));
    (spec, out, err)
}

fn split_streams(log: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let is_out = |b: &u8| b.is_ascii_digit() || *b == b'\n';
    (
        log.iter().copied().filter(is_out).collect(),
        log.iter().copied().filter(|b| !is_out(b)).collect(),
    )
}

/// A log opened the way `hostfs::create_new` opens it, with a line already in it (the
/// interrupt echo).
fn append_log(dir: &Path) -> File {
    use std::io::Write as _;
    let mut log = File::options()
        .create_new(true)
        .append(true)
        .open(dir.join("log"))
        .unwrap();
    log.write_all(b"header\n").unwrap();
    log
}

fn finish_log(dir: &Path, mut log: File) -> Vec<u8> {
    use std::io::Write as _;
    log.write_all(b"after\n").unwrap();
    let logged = std::fs::read(dir.join("log")).unwrap();
    let body = logged
        .strip_prefix(b"header\n".as_slice())
        .and_then(|b| b.strip_suffix(b"after\n".as_slice()))
        .expect("the relay appends between what was written before and after");
    body.to_vec()
}

fn config_with(stdout: Arc<dyn Sink>, stderr: Arc<dyn Sink>) -> Config {
    Config {
        output: Output::new(stdout, stderr),
        cancel: Cancellation::new(),
        stop_grace: Duration::from_millis(300),
        timeout: None,
        runner: Arc::new(ProcessRunner::default()),
    }
}

#[test]
fn large_output_reaches_a_pipe_a_file_and_the_log_byte_exact() {
    use std::io::Read as _;
    let dir = tempfile::tempdir().unwrap();
    let (out_r, out_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        File::from(out_r).read_to_end(&mut bytes).unwrap();
        bytes
    });
    let err_file = File::create(dir.path().join("stderr")).unwrap();
    let cfg = config_with(
        Arc::new(FdSink::new(out_w)),
        Arc::new(FdSink::new(err_file.into())),
    );
    let (spec, out, err) = big_output(dir.path());
    let mut log = append_log(dir.path());
    let o = rt().block_on(cfg.run(&spec, Some(&mut log))).unwrap();
    // The sink owns the pipe's write end: the reader sees end-of-file once it is gone.
    drop(cfg);
    assert_eq!(o.termination, Termination::Exited(0));
    assert_eq!(o.log_error, None);
    assert_eq!(reader.join().unwrap(), out, "stdout pipe");
    assert_eq!(
        std::fs::read(dir.path().join("stderr")).unwrap(),
        err,
        "stderr file"
    );
    let logged = finish_log(dir.path(), log);
    assert_eq!(
        split_streams(&logged),
        (out, err),
        "each stream in order in the log"
    );
    assert_eq!(o.tail, logged[logged.len() - TAIL_BYTES..]);
}

#[test]
fn large_output_to_dev_null_still_fills_the_log_and_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let null = File::options().write(true).open("/dev/null").unwrap();
    let sink: Arc<dyn Sink> = Arc::new(FdSink::new(null.into()));
    let cfg = config_with(sink.clone(), sink);
    let (spec, out, err) = big_output(dir.path());
    let mut log = append_log(dir.path());
    let o = rt().block_on(cfg.run(&spec, Some(&mut log))).unwrap();
    let logged = finish_log(dir.path(), log);
    assert_eq!(split_streams(&logged), (out, err));
    assert_eq!(o.tail, logged[logged.len() - TAIL_BYTES..]);
}

#[test]
fn large_output_through_the_copy_path_is_byte_exact() {
    let (cfg, out, err, _h) = config(None);
    let dir = tempfile::tempdir().unwrap();
    let (spec, expected_out, expected_err) = big_output(dir.path());
    let mut log = append_log(dir.path());
    let o = rt().block_on(cfg.run(&spec, Some(&mut log))).unwrap();
    assert_eq!(out.contents(), expected_out);
    assert_eq!(err.contents(), expected_err);
    let logged = finish_log(dir.path(), log);
    assert_eq!(split_streams(&logged), (expected_out, expected_err));
    assert_eq!(o.tail, logged[logged.len() - TAIL_BYTES..]);
}

#[test]
fn without_a_log_the_tail_is_still_the_last_bytes() {
    // Both streams into one sink: the sink sees the bytes in the order they were relayed,
    // which is the order the tail keeps (stderr may be drained after stdout's last bytes).
    let relayed = Arc::new(MemorySink::default());
    let sink: Arc<dyn Sink> = relayed.clone();
    let cfg = config_with(sink.clone(), sink);
    let dir = tempfile::tempdir().unwrap();
    let (spec, out, err) = big_output(dir.path());
    let spec = ProcessSpec {
        args: vec!["-c".into(), format!("{}; printf end", spec.args[1])],
        ..spec
    };
    let o = rt().block_on(cfg.run(&spec, None)).unwrap();
    let relayed = relayed.contents();
    assert_eq!(relayed.len(), out.len() + err.len() + 3);
    assert_eq!(o.tail.len(), TAIL_BYTES);
    assert_eq!(o.tail, relayed[relayed.len() - TAIL_BYTES..]);
    let (relayed_out, _) = split_streams(&relayed);
    assert_eq!(relayed_out, out, "stdout relayed whole and in order");
}

#[test]
fn tail_keeps_the_last_bytes_in_order() {
    let mut t = Tail::new(5);
    t.push(b"abc");
    t.push(b"defg");
    assert_eq!(t.clone().into_vec(), b"cdefg");
    t.push(b"0123456789");
    assert_eq!(t.into_vec(), b"56789");
}

#[test]
fn reports_real_exit_codes_and_signals() {
    let (cfg, ..) = config(None);
    let rt = rt();
    assert_eq!(
        rt.block_on(cfg.run(&sh("exit 3"), None))
            .unwrap()
            .termination,
        Termination::Exited(3)
    );
    assert_eq!(
        rt.block_on(cfg.run(&sh("kill -9 $$"), None))
            .unwrap()
            .termination,
        Termination::Signalled(9)
    );
}

#[test]
fn stdin_is_empty() {
    let (cfg, out, ..) = config(None);
    rt().block_on(cfg.run(&sh("cat; echo done"), None)).unwrap();
    assert_eq!(out.contents(), b"done\n");
}

/// SIGKILLs, when dropped, the processes whose pids a test's script wrote to `pids` (one per
/// line): what an operation leaves running outlives it, and a test must not leave it behind.
struct Leftovers {
    dir: tempfile::TempDir,
}

impl Leftovers {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// The file the script appends the pids to.
    fn file(&self) -> std::path::PathBuf {
        self.dir.path().join("pids")
    }

    fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.file())
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect()
    }
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        for pid in self.pids() {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// Whether `pid` runs (a zombie does not).
fn running(pid: i32) -> bool {
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !state.is_empty() && !state.contains(") Z ")
}

#[test]
fn a_background_job_outlives_the_operation() {
    // SPEC §8.4: a helper a step starts keeps running (a later step may use it).
    let (cfg, ..) = config(None);
    let left = Leftovers::new();
    let script = format!(
        "sleep 30 > /dev/null 2>&1 & echo $! >> {}; exit 0",
        left.file().display()
    );
    let o = rt().block_on(cfg.run(&sh(&script), None)).unwrap();
    assert_eq!(o.termination, Termination::Exited(0));
    assert!(o.duration < Duration::from_secs(10));
    let [pid] = left.pids()[..] else {
        panic!("{:?}", left.pids())
    };
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        running(pid),
        "the background job was ended with its operation"
    );
}

#[test]
fn a_leftover_holding_the_pipes_is_relayed_until_they_are_idle_then_let_go() {
    let (cfg, out, ..) = config(None);
    let left = Leftovers::new();
    let script = format!(
        "(sleep 0.5; echo late; exec sleep 30) & echo $! >> {}; echo main",
        left.file().display()
    );
    let start = Instant::now();
    let o = rt().block_on(cfg.run(&sh(&script), None)).unwrap();
    let took = start.elapsed();
    assert_eq!(o.termination, Termination::Exited(0));
    // A hang check: the leftover holds the pipes for 30 s.
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(
        o.duration < took,
        "the operation ended with its main process, not with the relay: {o:?}"
    );
    assert_eq!(out.contents(), b"main\nlate\n");
    let [pid] = left.pids()[..] else {
        panic!("{:?}", left.pids())
    };
    assert!(running(pid), "only the pipes were let go, not the process");
}

#[test]
fn a_second_signal_stops_relaying_a_leftover_at_once() {
    let (cfg, out, _err, handle) = config(None);
    let left = Leftovers::new();
    // Never idle, and out of the group: without the signal, only the relay's upper bound
    // would end it.
    let script = format!(
        "setsid sh -c 'while :; do echo tick; sleep 0.05; done' & echo $! >> {}; exit 0",
        left.file().display()
    );
    let handle = Arc::new(handle);
    let again = handle.clone();
    let start = Instant::now();
    let o = run_signalled(
        &cfg,
        &sh(&script),
        || handle.stop.cancel(),
        Some(Box::new(move || again.force.cancel())),
    );
    let took = start.elapsed();
    assert_eq!(o.termination, Termination::Exited(0));
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(out.contents().starts_with(b"tick\n"));
}

#[test]
fn the_relay_of_a_leftover_that_never_stops_writing_has_an_upper_bound() {
    use std::io::Write as _;
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
    let sink = Arc::new(MemorySink::default());
    let (drain, wake) = relay::drain_pair().unwrap();
    let policy = relay::DrainPolicy {
        idle: Duration::from_millis(300),
        limit: Duration::from_millis(800),
    };
    let relay = relay::Relay::new(
        vec![(r, sink.clone(), Arc::new(LineState::default()))],
        None,
        wake,
        policy,
    );
    let writing = Arc::new(AtomicBool::new(true));
    let writer = {
        let writing = writing.clone();
        std::thread::spawn(move || {
            let mut w = File::from(w);
            while writing.load(Ordering::Relaxed) {
                let _ = w.write_all(b"tick\n");
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let relaying = std::thread::spawn(move || relay.run());
    std::thread::sleep(Duration::from_millis(100));
    let exited = Instant::now();
    drain.main_exited();
    let relayed = relaying.join().unwrap();
    let took = exited.elapsed();
    writing.store(false, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(took >= Duration::from_millis(700), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(relayed.held.len(), 1, "the pipe was still held");
    assert!(sink.contents().starts_with(b"tick\n"));
}

#[test]
fn the_relay_of_an_idle_leftover_ends_after_the_idle_time() {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
    let (drain, wake) = relay::drain_pair().unwrap();
    let policy = relay::DrainPolicy {
        idle: Duration::from_millis(300),
        limit: Duration::from_secs(30),
    };
    let sink: Arc<dyn Sink> = Arc::new(MemorySink::default());
    let relay = relay::Relay::new(
        vec![(r, sink, Arc::new(LineState::default()))],
        None,
        wake,
        policy,
    );
    let relaying = std::thread::spawn(move || relay.run());
    let exited = Instant::now();
    drain.main_exited();
    let relayed = relaying.join().unwrap();
    let took = exited.elapsed();
    drop(w);
    assert!(took >= Duration::from_millis(250), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(relayed.held.len(), 1);
}

#[test]
fn timeout_terminates_the_group() {
    let (cfg, ..) = config(Some(Duration::from_millis(200)));
    let o = rt().block_on(cfg.run(&sh("sleep 30"), None)).unwrap();
    assert!(o.timed_out);
    assert_eq!(o.termination, Termination::Signalled(15));
}

/// Run `spec`, calling `signal` on the handle 150 ms in (and `again` 150 ms later, if
/// given).
fn run_signalled(
    cfg: &Config,
    spec: &ProcessSpec,
    signal: impl FnOnce(),
    again: Option<Box<dyn FnOnce()>>,
) -> Outcome {
    rt().block_on(async {
        let run = cfg.run(spec, None);
        tokio::pin!(run);
        tokio::select! {
            _ = &mut run => unreachable!("finished before the signal"),
            () = tokio::time::sleep(Duration::from_millis(150)) => signal(),
        }
        if let Some(again) = again {
            tokio::select! {
                _ = &mut run => unreachable!("finished before the second signal"),
                () = tokio::time::sleep(Duration::from_millis(150)) => again(),
            }
        }
        run.await.unwrap()
    })
}

#[test]
fn cancellation_lets_the_running_operation_finish() {
    let (cfg, out, _err, handle) = config(None);
    let spec = sh("trap 'echo got-term' TERM; sleep 0.6; echo finished");
    let o = run_signalled(&cfg, &spec, || handle.stop.cancel(), None);
    assert!(o.cancelled);
    assert_eq!(o.termination, Termination::Exited(0));
    assert_eq!(
        out.contents(),
        b"finished\n",
        "not signalled, ran to its end"
    );
}

#[test]
fn first_signal_stop_stops_the_group_at_once() {
    let (cfg, _out, _err, handle) = config(None);
    let mut spec = sh("sleep 5");
    spec.first_signal = FirstSignal::Stop;
    let o = run_signalled(&cfg, &spec, || handle.stop.cancel(), None);
    assert!(o.cancelled);
    assert_eq!(o.termination, Termination::Signalled(15));
    assert!(o.duration < Duration::from_secs(4));
}

#[test]
fn forced_cancellation_sends_sigterm_then_sigkill_after_the_grace() {
    let (cfg, _out, _err, handle) = config(None);
    let handle = Arc::new(handle);
    let again = handle.clone();
    let spec = sh("trap '' TERM; sleep 5 & wait; sleep 5");
    let o = run_signalled(
        &cfg,
        &spec,
        || handle.stop.cancel(),
        Some(Box::new(move || again.force.cancel())),
    );
    assert!(o.cancelled);
    assert_eq!(o.termination, Termination::Signalled(9));
    assert!(o.duration < Duration::from_secs(4));
}

#[test]
fn a_step_that_traps_sigterm_and_exits_zero_is_judged_normally() {
    let (cfg, out, _err, handle) = config(None);
    let handle = Arc::new(handle);
    let again = handle.clone();
    let spec = sh("trap 'echo bye; exit 0' TERM; while :; do sleep 0.05; done");
    let o = run_signalled(
        &cfg,
        &spec,
        || handle.stop.cancel(),
        Some(Box::new(move || again.force.cancel())),
    );
    assert!(o.cancelled);
    assert_eq!(o.termination, Termination::Exited(0));
    assert_eq!(out.contents(), b"bye\n");
}

#[test]
fn a_process_that_exited_before_a_late_deadline_is_judged_by_its_exit_status() {
    // The deadline is noticed late, as after the agent was paused: block the runtime
    // thread past both the exit and the deadline, then let the loop see both at once. The
    // process outlives the first poll by a margin a loaded machine does not eat up.
    let (cfg, ..) = config(Some(Duration::from_millis(1500)));
    let spec = sh("sleep 1; exit 0");
    let o = rt()
        .block_on(async {
            let run = cfg.run(&spec, None);
            tokio::pin!(run);
            tokio::select! {
                biased;
                _ = &mut run => unreachable!("the child cannot be reaped this early"),
                () = std::future::ready(()) => {}
            }
            std::thread::sleep(Duration::from_millis(2500));
            run.await
        })
        .unwrap();
    assert!(!o.timed_out, "{o:?}");
    assert_eq!(o.termination, Termination::Exited(0));
}

/// `dir/name` holding `contents`, mode 0755.
fn executable(dir: &Path, name: &str, contents: &str) -> std::path::PathBuf {
    let file = dir.join(name);
    std::fs::write(&file, contents).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    file
}

/// Run `file` by its path, with no arguments.
fn by_path(file: &Path) -> ProcessSpec {
    let mut spec = sh("");
    spec.program = file.to_owned();
    spec.args.clear();
    spec
}

#[test]
fn a_timeout_and_a_stop_grace_too_long_to_add_to_now_are_as_good_as_none() {
    // A kind's `Command::timeout` has no upper bound: `Duration::MAX` must not panic.
    let (mut cfg, out, ..) = config(Some(Duration::MAX));
    cfg.stop_grace = Duration::MAX;
    let o = rt().block_on(cfg.run(&sh("echo ran"), None)).unwrap();
    assert_eq!(o.termination, Termination::Exited(0));
    assert!(!o.timed_out, "{o:?}");
    assert_eq!(out.contents(), b"ran\n");
    // A second signal computes the SIGKILL deadline from the grace.
    let (mut cfg, _, _, handle) = config(Some(Duration::MAX));
    cfg.stop_grace = Duration::MAX;
    handle.stop.cancel();
    handle.force.cancel();
    let o = rt().block_on(cfg.run(&sh("exec sleep 30"), None)).unwrap();
    assert_eq!(o.termination, Termination::Signalled(15), "{o:?}");
}

#[test]
fn a_file_without_a_shebang_is_an_exec_format_error() {
    let (cfg, out, ..) = config(None);
    let dir = tempfile::tempdir().unwrap();
    let file = executable(dir.path(), "noshebang", "echo ran-by-sh\n");
    let spec = by_path(&file);
    let err = rt().block_on(cfg.run(&spec, None)).unwrap_err();
    assert!(matches!(err, ExecError::ExecFormat { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "spawning {}: exec format error (no `#!` line, or built for another machine)",
            file.display()
        )
    );
    assert!(out.contents().is_empty());
}

#[test]
fn programs_without_a_slash_are_found_in_the_path_of_the_child_environment() {
    let (cfg, out, ..) = config(None);
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let tool = bin.join("tool");
    std::fs::write(&tool, "#!/bin/sh\necho tool $1\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let spec = ProcessSpec {
        program: "tool".into(),
        args: vec!["x".into()],
        env: vec![(
            "PATH".into(),
            format!("/nonexistent:{}", bin.display()).into(),
        )],
        cwd: "/".into(),
        chroot: None,
        first_signal: FirstSignal::Finish,
    };
    let rt = rt();
    let o = rt.block_on(cfg.run(&spec, None)).unwrap();
    assert_eq!(o.termination, Termination::Exited(0));
    assert_eq!(out.contents(), b"tool x\n");

    std::fs::write(&tool, "echo no shebang\n").unwrap();
    let err = rt.block_on(cfg.run(&spec, None)).unwrap_err();
    assert!(matches!(err, ExecError::ExecFormat { .. }), "{err:?}");

    let missing = ProcessSpec {
        program: "missing-tool".into(),
        ..spec
    };
    let err = rt.block_on(cfg.run(&missing, None)).unwrap_err();
    let ExecError::Spawn { source, .. } = err else {
        panic!("{err:?}")
    };
    assert_eq!(source.kind(), io::ErrorKind::NotFound);
}

#[test]
fn output_ending_mid_line_gets_a_newline_before_the_next_print() {
    let (cfg, out, ..) = config(None);
    let rt = rt();
    rt.block_on(cfg.run(&sh("printf 'no newline'"), None))
        .unwrap();
    cfg.output.print("header\n");
    rt.block_on(cfg.run(&sh("echo line"), None)).unwrap();
    cfg.output.print("header\n");
    rt.block_on(cfg.run(&sh("printf 'x' >&2"), None)).unwrap();
    cfg.output.print("header\n");
    assert_eq!(
        String::from_utf8(out.contents()).unwrap(),
        "no newline\nheader\nline\nheader\nheader\n"
    );
}

#[test]
fn stderr_ending_mid_line_gets_a_newline_before_the_next_agent_record() {
    use std::io::Write as _;
    let (cfg, _out, err, _h) = config(None);
    let rt = rt();
    rt.block_on(cfg.run(&sh("printf 'no newline' >&2"), None))
        .unwrap();
    cfg.output
        .log_writer()
        .write_all(b"{\"record\":1}\n")
        .unwrap();
    rt.block_on(cfg.run(&sh("echo line >&2"), None)).unwrap();
    cfg.output
        .log_writer()
        .write_all(b"{\"record\":2}\n")
        .unwrap();
    rt.block_on(cfg.run(&sh("printf 'x' >&2"), None)).unwrap();
    cfg.output.eprint("message\n");
    rt.block_on(cfg.run(&sh("printf 'y'"), None)).unwrap();
    cfg.output.eprint("stdout's open line is not stderr's\n");
    assert_eq!(
        String::from_utf8(err.contents()).unwrap(),
        "no newline\n{\"record\":1}\nline\n{\"record\":2}\nx\nmessage\n\
         stdout's open line is not stderr's\n"
    );
}

/// A directory holding `tool` (`contents`, mode 0755) and a PATH of `entries` directories
/// ending with it.
fn tool_in_path(contents: &str, entries: usize) -> (tempfile::TempDir, ProcessSpec) {
    let dir = tempfile::tempdir().unwrap();
    executable(dir.path(), "tool", contents);
    let mut path: Vec<String> = (1..entries).map(|i| format!("/nonexistent-{i}")).collect();
    path.push(dir.path().display().to_string());
    let spec = ProcessSpec {
        program: "tool".into(),
        args: Vec::new(),
        env: vec![("PATH".into(), path.join(":").into())],
        cwd: "/".into(),
        chroot: None,
        first_signal: FirstSignal::Finish,
    };
    (dir, spec)
}

#[test]
fn a_file_without_a_shebang_found_in_the_path_is_refused_whatever_the_number_of_entries() {
    // SPEC §8.4: the standard library's own search (execvp) would run it through /bin/sh.
    let rt = rt();
    for entries in [1, 2] {
        let (cfg, out, ..) = config(None);
        let (_dir, spec) = tool_in_path("echo ran-by-sh\n", entries);
        let err = rt.block_on(cfg.run(&spec, None)).unwrap_err();
        assert!(
            matches!(err, ExecError::ExecFormat { .. }),
            "PATH of {entries}: {err:?}"
        );
        assert_eq!(
            err.to_string(),
            "spawning tool: exec format error (no `#!` line, or built for another machine)"
        );
        assert!(out.contents().is_empty(), "PATH of {entries}");
    }
}

#[test]
fn a_missing_interpreter_is_named() {
    let rt = rt();
    let (cfg, ..) = config(None);
    // By path (the program names a file).
    let dir = tempfile::tempdir().unwrap();
    let file = executable(
        dir.path(),
        "badinterp.sh",
        "#!/bin/does-not-exist -e\necho hi\n",
    );
    let err = rt.block_on(cfg.run(&by_path(&file), None)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "interpreter \"/bin/does-not-exist\" of {} not found",
            file.display()
        )
    );
    // Looked up in PATH: the file found there is named.
    for entries in [1, 2] {
        let (dir, spec) = tool_in_path("#!/bin/does-not-exist\n", entries);
        let err = rt.block_on(cfg.run(&spec, None)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "interpreter \"/bin/does-not-exist\" of {}/tool not found",
                dir.path().display()
            ),
            "PATH of {entries}"
        );
    }
}

#[test]
fn a_closed_stdout_is_not_written_again() {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
    drop(r);
    let sink = FdSink::new(w);
    let e = sink.write_all(b"x").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    assert!(sink.is_closed());
    assert!(sink.fd().is_none(), "no zero-copy path to a closed stream");
    let cfg = config_with(Arc::new(sink), Arc::new(MemorySink::default()));
    let o = rt()
        .block_on(cfg.run(&sh("echo to-a-closed-stdout; exit 4"), None))
        .unwrap();
    assert_eq!(o.termination, Termination::Exited(4));
    assert_eq!(o.tail, b"to-a-closed-stdout\n");
}

#[test]
fn spawn_failure_names_the_program() {
    let (cfg, ..) = config(None);
    let mut spec = sh("");
    spec.program = "/nonexistent/step.sh".into();
    let err = rt().block_on(cfg.run(&spec, None)).unwrap_err();
    assert_eq!(err.to_string(), "spawning /nonexistent/step.sh");
}

#[test]
fn cancelling_force_also_stops() {
    let c = Cancellation::new();
    assert!(!c.is_stopping());
    c.force.cancel();
    assert!(c.stop.is_cancelled(), "stop is a child of force");
    assert!(c.is_stopping());
}

#[test]
fn stopping_only_does_not_force() {
    let c = Cancellation::new();
    c.stop.cancel();
    assert!(c.is_stopping());
    assert!(!c.force.is_cancelled());
}

#[test]
fn a_set_flag_is_stopping_before_any_token_is_cancelled() {
    let flag = Arc::new(AtomicBool::new(false));
    let c = Cancellation::with_flag(flag.clone());
    assert!(!c.is_stopping());
    flag.store(true, Ordering::SeqCst);
    assert!(
        c.is_stopping(),
        "the flag a signal handler sets is seen at once"
    );
    assert!(!c.stop.is_cancelled());
}

#[test]
fn a_duplicated_sink_owns_its_own_descriptor() {
    use std::io::Read as _;
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
    let sink = FdSink::duplicate(w.as_fd());
    drop(w);
    sink.write_all(b"still open").unwrap();
    drop(sink);
    let mut got = Vec::new();
    File::from(r).read_to_end(&mut got).unwrap();
    assert_eq!(got, b"still open", "end-of-file once the sink is gone");
}

/// What `/proc/<pid>/exe` was when the runner reported each group.
#[derive(Debug, Default)]
struct ExeWhenRecorded(Mutex<Vec<(i32, std::path::PathBuf)>>);

impl GroupRecorder for ExeWhenRecorded {
    fn started(&self, pgid: i32, _operation: &str) {
        let exe = std::fs::read_link(format!("/proc/{pgid}/exe")).unwrap_or_default();
        self.0.lock().unwrap().push((pgid, exe));
    }

    fn finished(&self) {}
}

#[test]
fn the_group_is_recorded_before_the_operations_program_starts() {
    // SPEC §10: an agent killed at any instant has recorded the group of a program that runs.
    // When the group is reported, the child is still an image of this test binary: its
    // program (the shell) has not been exec'd yet.
    let recorder = Arc::new(ExeWhenRecorded::default());
    let (mut cfg, out, ..) = config(None);
    cfg.runner = Arc::new(ProcessRunner::recording(recorder.clone()));
    let o = rt().block_on(cfg.run(&sh("echo $$"), None)).unwrap();
    assert_eq!(o.termination, Termination::Exited(0));
    let seen = recorder.0.lock().unwrap().clone();
    let [(pgid, exe)] = &seen[..] else {
        panic!("one group per operation: {seen:?}")
    };
    assert_eq!(
        String::from_utf8(out.contents()).unwrap(),
        format!("{pgid}\n"),
        "the recorded group is led by the operation's process"
    );
    assert_eq!(
        exe,
        &std::env::current_exe().unwrap(),
        "the operation's program had started before its group was recorded"
    );
}

/// A recorder that fails the way a bug would.
#[derive(Debug)]
struct PanickingRecorder;

impl GroupRecorder for PanickingRecorder {
    fn started(&self, _pgid: i32, _operation: &str) {
        panic!("recording the group failed");
    }

    fn finished(&self) {}
}

#[test]
fn a_panic_while_recording_the_group_ends_the_child_before_its_program_starts() {
    // The child shares the agent's memory until its exec: it must be gone before the frame
    // that holds its stack and arguments unwinds, and the program must not have run.
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let (mut cfg, ..) = config(None);
    cfg.runner = Arc::new(ProcessRunner::recording(Arc::new(PanickingRecorder)));
    let spec = sh(&format!("touch {}", ran.display()));
    let rt = rt();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(cfg.run(&spec, None))
    }));
    assert!(result.is_err(), "the panic reaches the caller");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !ran.exists(),
        "the program ran although its group was not recorded"
    );
    // And the runner still works.
    let (cfg, out, ..) = config(None);
    rt.block_on(cfg.run(&sh("echo again"), None)).unwrap();
    assert_eq!(out.contents(), b"again\n");
}

#[test]
fn descriptors_the_agent_holds_without_close_on_exec_do_not_reach_the_operation() {
    // As with both upstream agents (Python's close_fds, Go's exec.Cmd): the operation gets
    // its three standard streams, not what the agent itself inherited.
    let file = tempfile::tempfile().unwrap();
    let inherited = nix::unistd::dup(&file).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&inherited);
    let flags = nix::fcntl::fcntl(&inherited, nix::fcntl::FcntlArg::F_GETFD).unwrap();
    assert_eq!(flags & libc::FD_CLOEXEC, 0, "dup(2) clears close-on-exec");
    let (cfg, out, ..) = config(None);
    let script = format!("if [ -e /proc/self/fd/{fd} ]; then echo open; else echo closed; fi");
    rt().block_on(cfg.run(&sh(&script), None)).unwrap();
    assert_eq!(out.contents(), b"closed\n");
    drop(inherited);
}

/// A handler that does nothing, for a signal the agent catches.
extern "C" fn ignore_signal(_: libc::c_int) {}

#[test]
fn the_operation_starts_with_no_signal_blocked_caught_or_sigpipe_ignored() {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, sigaction};
    // A handler of the agent's, as signal-hook installs for the stop requests (SIGUSR2 is
    // sent to nothing in this test binary); the standard library ignores SIGPIPE.
    let action = SigAction::new(
        SigHandler::Handler(ignore_signal),
        SaFlags::empty(),
        nix::sys::signal::SigSet::empty(),
    );
    // SAFETY: the handler does nothing, so it is async-signal-safe.
    unsafe { sigaction(Signal::SIGUSR2, &action) }.unwrap();
    let (cfg, out, ..) = config(None);
    rt().block_on(cfg.run(&sh("exec cat /proc/self/status"), None))
        .unwrap();
    let status = String::from_utf8(out.contents()).unwrap();
    let mask = |name: &str| {
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {status}"));
        u64::from_str_radix(line.trim(), 16).unwrap()
    };
    assert_eq!(mask("SigBlk:"), 0, "{status}");
    assert_eq!(mask("SigCgt:"), 0, "{status}");
    let sigpipe = 1u64 << (libc::SIGPIPE - 1);
    assert_eq!(mask("SigIgn:") & sigpipe, 0, "SIGPIPE ignored: {status}");
}

#[test]
fn a_file_without_execute_permission_is_refused_with_the_systems_error() {
    let (cfg, out, ..) = config(None);
    let dir = tempfile::tempdir().unwrap();
    let file = executable(dir.path(), "noexec.sh", "#!/bin/sh\necho ran\n");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = rt().block_on(cfg.run(&by_path(&file), None)).unwrap_err();
    let ExecError::Spawn { program, source } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(program, &file.display().to_string());
    assert_eq!(source.raw_os_error(), Some(libc::EACCES), "{err:?}");
    assert!(out.contents().is_empty());
}

#[test]
fn a_chroot_that_fails_is_a_spawn_error_naming_the_program() {
    let (cfg, out, ..) = config(None);
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh("echo ran");
    spec.chroot = Some(dir.path().join("missing-root"));
    let err = rt().block_on(cfg.run(&spec, None)).unwrap_err();
    let ExecError::Spawn { program, source } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(program, "/bin/sh");
    // Not root: EPERM; root: the directory is missing.
    assert!(
        matches!(source.raw_os_error(), Some(libc::ENOENT | libc::EPERM)),
        "{err:?}"
    );
    assert!(out.contents().is_empty());
}
