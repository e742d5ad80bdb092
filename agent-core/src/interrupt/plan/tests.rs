use super::*;
use crate::exec::Termination;
use crate::interrupt::runner::tests::{Host, block_on, reboot};
use crate::plugin::contract::InterruptContext;

/// A dry-run context of kind `kind` over `host`, and what it planned.
fn dry(host: &Host) -> (InterruptContext, Arc<DryRun>) {
    let dry = Arc::new(DryRun {
        settings: host.settings().clone(),
        type_name: "kind",
        state: Mutex::new(Planned::default()),
    });
    (InterruptContext::new(dry.clone()), dry)
}

fn plan(host: &Host, ops: &[(usize, CompletionPolicy, Command)]) -> Vec<PlannedOperation> {
    let (cx, dry) = dry(host);
    for (i, policy, command) in ops {
        block_on(cx.operation(*i, *policy, command.clone())).unwrap();
    }
    dry.state().operations.clone()
}

#[test]
fn a_dry_run_judges_each_operation_and_runs_and_writes_nothing() {
    let host = Host::new(&[]);
    block_on(
        host.cx()
            .operation(0, CompletionPolicy::OnSuccess, Command::new("a")),
    )
    .unwrap();
    let before = host.state_files();
    let planned = plan(
        &host,
        &[
            (0, CompletionPolicy::OnSuccess, Command::new("a")),
            (1, CompletionPolicy::OnSuccess, Command::new("b").arg("x")),
            (2, CompletionPolicy::AfterReboot, reboot()),
            (3, CompletionPolicy::OnSuccess, Command::new("c")),
        ],
    );
    let actions: Vec<_> = planned
        .iter()
        .map(|p| (p.operation.as_str(), p.action))
        .collect();
    assert_eq!(
        actions,
        [
            ("kind_0", PlannedAction::Skip),
            ("kind_1", PlannedAction::Run),
            ("kind_2", PlannedAction::Run),
            ("kind_3", PlannedAction::NotReached),
        ]
    );
    assert_eq!(planned[1].command.as_deref(), Some("b x"));
    assert!(
        planned[2].reason.contains("attempt 1 of 3") && planned[2].reason.contains("boot-1"),
        "{planned:?}"
    );
    assert_eq!(host.ran(), ["a"], "the dry run ran nothing");
    assert_eq!(host.state_files(), before, "the dry run wrote nothing");
    assert_eq!(host.stdout(), "a\n", "the dry run printed nothing");
}

#[test]
fn a_dry_run_shows_the_reboot_protocol() {
    let sigterm = Termination::Signalled(libc::SIGTERM);
    let host = Host::new(&[sigterm, sigterm, sigterm]);
    block_on(
        host.cx()
            .operation(0, CompletionPolicy::AfterReboot, reboot()),
    )
    .unwrap();
    let again = plan(&host, &[(0, CompletionPolicy::AfterReboot, reboot())]);
    assert_eq!(again[0].action, PlannedAction::Run);
    assert!(
        again[0].reason.starts_with("reboot again (attempt 2 of 3)"),
        "{again:?}"
    );

    host.set_boot_id("boot-2");
    let after = plan(&host, &[(0, CompletionPolicy::AfterReboot, reboot())]);
    assert_eq!(after[0].action, PlannedAction::Skip);
    assert!(
        after[0].reason.starts_with(
            "complete after reboot: pending with boot ID boot-1, current boot ID boot-2"
        ),
        "{after:?}"
    );

    host.set_boot_id("boot-1");
    for _ in 0..2 {
        block_on(
            host.cx()
                .operation(0, CompletionPolicy::AfterReboot, reboot()),
        )
        .unwrap();
    }
    let before = host.state_files();
    let refused = plan(
        &host,
        &[
            (0, CompletionPolicy::AfterReboot, reboot()),
            (1, CompletionPolicy::OnSuccess, Command::new("b")),
        ],
    );
    assert_eq!(refused[0].action, PlannedAction::Fail);
    assert!(
        refused[0]
            .reason
            .starts_with("loop guard would refuse: reboot requested 3 times"),
        "{refused:?}"
    );
    assert_eq!(refused[1].action, PlannedAction::NotReached);
    assert_eq!(host.ran().len(), 3);
    assert_eq!(host.state_files(), before);
}

#[test]
fn a_dry_run_reports_an_unreadable_boot_id_as_a_failure() {
    let host = Host::new(&[]);
    host.set_boot_id(" ");
    let planned = plan(&host, &[(0, CompletionPolicy::AfterReboot, reboot())]);
    assert_eq!(planned[0].action, PlannedAction::Fail);
    assert!(planned[0].reason.contains("empty"), "{planned:?}");
}

#[test]
fn a_dry_run_of_mark_done_records_without_writing() {
    let host = Host::new(&[]);
    let (cx, dry) = dry(&host);
    cx.mark_done().unwrap();
    let planned = dry.state().operations.clone();
    assert_eq!(planned[0].action, PlannedAction::Record);
    assert_eq!(planned[0].operation, "kind");
    assert!(host.marker("kind.complete").is_none());
}
