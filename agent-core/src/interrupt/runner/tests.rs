use super::*;
use crate::plugin::contract::InterruptContext;
use crate::state::interrupt_markers::parse_attempts;
use crate::testing::TestHost;

pub(crate) struct Host {
    _dir: tempfile::TempDir,
    test: TestHost,
}

impl std::ops::Deref for Host {
    type Target = TestHost;
    fn deref(&self) -> &TestHost {
        &self.test
    }
}

impl Host {
    pub(crate) fn new(answers: &[Termination]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let test = TestHost::new(dir.path());
        test.answer(answers.iter().copied());
        Self { _dir: dir, test }
    }

    pub(crate) fn cx(&self) -> InterruptContext {
        InterruptContext::new(Arc::new(Performer::new(
            self.test.settings().clone(),
            "kind",
        )))
    }

    pub(crate) fn ran(&self) -> Vec<String> {
        self.test.commands()
    }

    /// Everything under the fake root except the boot ID.
    pub(crate) fn state_files(&self) -> Vec<String> {
        let mut out = Vec::new();
        let dir = self.markers_dir();
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                let content = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
                out.push(format!("{name}={content}"));
            }
        }
        out.sort();
        out
    }
}

pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

pub(crate) fn reboot() -> Command {
    Command::new("reboot")
}

#[test]
fn attempts_count_only_under_the_same_boot() {
    assert_eq!(parse_attempts("boot-id:a\nattempts:2\n", "a"), Some(2));
    assert_eq!(parse_attempts("boot-id:a\nattempts:2\n", "b"), Some(0));
    // SPEC §9.6: what cannot be read is never 0.
    for unreadable in [
        "garbage",
        "",
        "boot-id:a\n",
        "attempts:2\n",
        "boot-id:a\nattempts:two\n",
        "boot-id:a\nattempts:1\nattempts:0\n",
        "boot-id:\nattempts:1\n",
    ] {
        assert_eq!(parse_attempts(unreadable, "a"), None, "{unreadable:?}");
    }
}

#[test]
fn completed_operations_are_skipped_and_others_run_and_are_marked() {
    let host = Host::new(&[]);
    let cx = host.cx();
    block_on(cx.operation(
        0,
        CompletionPolicy::OnSuccess,
        Command::new("systemctl").arg("daemon-reload"),
    ))
    .unwrap();
    assert!(host.marker("kind_0.complete").is_some());
    let cx = host.cx();
    block_on(cx.operation(
        0,
        CompletionPolicy::OnSuccess,
        Command::new("systemctl").arg("daemon-reload"),
    ))
    .unwrap();
    assert_eq!(host.ran(), ["systemctl daemon-reload"]);
    assert_eq!(
        host.stdout(),
        "systemctl daemon-reload\nSkipping interrupt kind_0 because it was already run for test_pkg_1.0.0\n"
    );
}

#[test]
fn a_failed_operation_is_not_marked_and_earlier_markers_stay() {
    let host = Host::new(&[Termination::Exited(0), Termination::Exited(5)]);
    let cx = host.cx();
    block_on(cx.operation(0, CompletionPolicy::OnSuccess, Command::new("a"))).unwrap();
    let err = block_on(cx.operation(1, CompletionPolicy::OnSuccess, Command::new("b").arg("x")))
        .unwrap_err();
    assert_eq!(err.to_string(), "b x: exit code 5");
    assert!(host.marker("kind_0.complete").is_some());
    assert!(host.marker("kind_1.complete").is_none());
}

#[test]
fn reboot_writes_the_pending_marker_before_running_and_sigterm_means_shutdown() {
    let host = Host::new(&[Termination::Signalled(libc::SIGTERM)]);
    let cx = host.cx();
    block_on(cx.operation(0, CompletionPolicy::AfterReboot, reboot())).unwrap();
    assert!(cx.shutdown_in_progress());
    assert_eq!(
        host.marker("kind_0.pending").as_deref(),
        Some("boot-id:boot-1\n")
    );
    assert!(host.marker("kind_0.complete").is_none());
    assert_eq!(host.ran(), ["reboot"]);
}

#[test]
fn a_changed_boot_id_promotes_the_pending_marker_without_rebooting() {
    let host = Host::new(&[Termination::Signalled(libc::SIGTERM)]);
    block_on(
        host.cx()
            .operation(0, CompletionPolicy::AfterReboot, reboot()),
    )
    .unwrap();
    host.set_boot_id("boot-2");
    let cx = host.cx();
    block_on(cx.operation(0, CompletionPolicy::AfterReboot, reboot())).unwrap();
    assert!(!cx.shutdown_in_progress());
    assert_eq!(host.ran(), ["reboot"], "no second reboot");
    assert!(host.marker("kind_0.pending").is_none());
    assert_eq!(
        host.marker("kind_0.complete").as_deref(),
        Some("boot-id:boot-1\n")
    );
    assert!(host.marker("kind_0.attempts").is_none());
}

#[test]
fn the_same_boot_id_reboots_again_until_the_loop_guard_trips() {
    let sigterm = Termination::Signalled(libc::SIGTERM);
    let host = Host::new(&[sigterm, sigterm, sigterm, sigterm]);
    for _ in 0..3 {
        block_on(
            host.cx()
                .operation(0, CompletionPolicy::AfterReboot, reboot()),
        )
        .unwrap();
    }
    let err = block_on(
        host.cx()
            .operation(0, CompletionPolicy::AfterReboot, reboot()),
    )
    .unwrap_err();
    let file = host.settings().markers_dir.join("kind_0.attempts");
    assert_eq!(
        err.to_string(),
        format!(
            "reboot requested 3 times but the host never restarted; refusing to reboot again \
             (loop guard: SKYHOOK_REBOOT_MAX_ATTEMPTS=3, counted in {f}). Find out why the \
             host does not restart, then allow new attempts with `agent reset {root} \
             --interrupt {rid} --yes` (or remove {f}), or raise SKYHOOK_REBOOT_MAX_ATTEMPTS",
            f = file.display(),
            root = host.settings().fs.root().display(),
            rid = host.settings().resource_id,
        )
    );
    assert_eq!(host.ran().len(), 3);
    assert_eq!(
        host.marker("kind_0.pending").as_deref(),
        Some("boot-id:boot-1\n")
    );
    // A new boot resets the count (and completes the operation).
    host.set_boot_id("boot-2");
    block_on(
        host.cx()
            .operation(0, CompletionPolicy::AfterReboot, reboot()),
    )
    .unwrap();
    assert!(host.marker("kind_0.complete").is_some());
}

#[test]
fn a_malformed_pending_marker_is_replaced_and_the_command_runs() {
    let host = Host::new(&[Termination::Signalled(libc::SIGTERM)]);
    let dir = host.markers_dir();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("kind_0.pending"), "garbage").unwrap();
    block_on(
        host.cx()
            .operation(0, CompletionPolicy::AfterReboot, reboot()),
    )
    .unwrap();
    assert_eq!(host.ran(), ["reboot"]);
    assert_eq!(
        host.marker("kind_0.pending").as_deref(),
        Some("boot-id:boot-1\n")
    );
}

#[test]
fn reboot_exiting_zero_without_a_shutdown_fails_after_the_wait() {
    let host = Host::new(&[Termination::Exited(0)]);
    let cx = host.cx();
    let err = block_on(cx.operation(0, CompletionPolicy::AfterReboot, reboot())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "reboot was enqueued but the host did not restart within 10s"
    );
    assert!(
        host.marker("kind_0.pending").is_some(),
        "pending survives for the next run"
    );
}

#[test]
fn a_termination_signal_during_the_wait_is_the_shutdown() {
    let mut host = Host::new(&[Termination::Exited(0)]);
    host.test.settings_mut().reboot_wait = Duration::from_secs(30);
    let cx = host.cx();
    block_on(async {
        let op = cx.operation(0, CompletionPolicy::AfterReboot, reboot());
        tokio::pin!(op);
        tokio::select! {
            _ = &mut op => unreachable!("waits for the shutdown"),
            () = tokio::time::sleep(Duration::from_millis(50)) => host.cancel(),
        }
        op.await
    })
    .unwrap();
    assert!(cx.shutdown_in_progress());
}

#[test]
fn reboot_failing_is_an_error_and_keeps_the_pending_marker() {
    let host = Host::new(&[Termination::Exited(1)]);
    let err = block_on(
        host.cx()
            .operation(0, CompletionPolicy::AfterReboot, reboot()),
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "reboot: exit code 1");
}

#[test]
fn an_unreadable_boot_id_is_an_error_and_nothing_runs() {
    let host = Host::new(&[]);
    host.set_boot_id("  ");
    let err = block_on(
        host.cx()
            .operation(0, CompletionPolicy::AfterReboot, reboot()),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "reading the host boot ID from /proc/sys/kernel/random/boot_id: empty"
    );
    assert!(host.ran().is_empty());
    assert!(host.marker("kind_0.pending").is_none());
}

#[test]
fn cancellation_before_an_operation_starts_nothing() {
    let host = Host::new(&[]);
    host.cancel();
    let err = block_on(
        host.cx()
            .operation(0, CompletionPolicy::OnSuccess, Command::new("a")),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent stopped after receiving a termination signal"
    );
    assert!(host.ran().is_empty());
}

#[test]
fn a_command_timeout_applies_and_the_shorter_of_two_wins() {
    let mut host = Host::new(&[]);
    let cx = host.cx();
    let short = Command::new("a").timeout(Duration::from_secs(2));
    block_on(cx.operation(0, CompletionPolicy::OnSuccess, short.clone())).unwrap();
    block_on(cx.operation(1, CompletionPolicy::OnSuccess, Command::new("b"))).unwrap();
    host.test.settings_mut().exec.timeout = Some(Duration::from_secs(5));
    let cx = host.cx();
    let long = Command::new("c").timeout(Duration::from_secs(60));
    block_on(cx.operation(2, CompletionPolicy::OnSuccess, long)).unwrap();
    block_on(cx.operation(3, CompletionPolicy::OnSuccess, short.clone())).unwrap();
    assert_eq!(
        host.timeouts(),
        [
            Some(Duration::from_secs(2)),
            None,
            Some(Duration::from_secs(5)),
            Some(Duration::from_secs(2)),
        ]
    );

    host.answer_timed_out();
    let err = block_on(host.cx().operation(4, CompletionPolicy::OnSuccess, short)).unwrap_err();
    assert_eq!(err.to_string(), "a: timed out after 2s");
    assert!(host.marker("kind_4.complete").is_none());
}

#[test]
fn mark_done_writes_the_unindexed_marker() {
    let host = Host::new(&[]);
    host.cx().mark_done().unwrap();
    assert!(host.marker("kind.complete").is_some());
}

/// Runs `a`, waits in its own code (a timer, or its thread blocked), then runs `b`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct WaitsBetween {
    blocking: bool,
}

#[crate::interrupt(
    type = "waits_between",
    summary = "waits between its operations",
    example = r#"{"type":"waits_between","blocking":false}"#
)]
impl crate::InterruptKind for WaitsBetween {
    async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
        cx.operation(0, CompletionPolicy::OnSuccess, Command::new("a"))
            .await?;
        if self.blocking {
            std::thread::sleep(Duration::from_secs(60));
        } else {
            tokio::time::sleep(Duration::from_secs(600)).await;
        }
        cx.operation(1, CompletionPolicy::OnSuccess, Command::new("b"))
            .await
    }
}

/// Run `waits_between` on `host`, with a second termination signal once `a` ran when
/// `signal` is set.
fn run_waiting(host: &TestHost, blocking: bool, signal: bool) -> InterruptError {
    let payload = format!(r#"{{"type":"waits_between","blocking":{blocking}}}"#);
    let signal_after_a = async {
        while signal && host.commands().is_empty() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        if signal {
            host.force_stop();
        }
    };
    let ((result, _), ()) = block_on(async { tokio::join!(host.run(&payload), signal_after_a) });
    assert_eq!(host.commands(), ["a"], "b never starts");
    assert!(host.marker("waits_between_0.complete").is_some());
    result.unwrap_err()
}

#[test]
fn the_second_signal_drops_a_kind_waiting_in_its_own_code_after_the_grace() {
    let host = TestHost::temp();
    let err = run_waiting(&host, false, true);
    assert!(matches!(err, InterruptError::Stopped), "{err:?}");
}

#[test]
fn a_kind_blocked_in_synchronous_code_is_left_after_the_grace_of_the_second_signal() {
    let host = TestHost::temp();
    let err = run_waiting(&host, true, true);
    assert_eq!(
        err.to_string(),
        r#"interrupt kind "waits_between" is blocked in synchronous code: it did not return within SKYHOOK_AGENT_STOP_GRACE_SECONDS=0.01s after the second termination signal, so the agent left it"#
    );
}

#[test]
fn the_step_timeout_bounds_a_kind_s_own_code() {
    let mut host = TestHost::temp();
    host.settings_mut().exec.timeout = Some(Duration::from_millis(50));
    let err = run_waiting(&host, false, false);
    assert_eq!(
        err.to_string(),
        r#"interrupt kind "waits_between" timed out after 0.05s in its own code (outside its operations; SKYHOOK_STEP_TIMEOUT_SECONDS)"#
    );

    let mut host = TestHost::temp();
    host.settings_mut().exec.timeout = Some(Duration::from_millis(50));
    let err = run_waiting(&host, true, false);
    assert_eq!(
        err.to_string(),
        r#"interrupt kind "waits_between" is blocked in synchronous code: it did not return within SKYHOOK_AGENT_STOP_GRACE_SECONDS=0.01s after its own code timed out after 0.05s (SKYHOOK_STEP_TIMEOUT_SECONDS), so the agent left it"#
    );
}
