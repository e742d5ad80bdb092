use super::*;

fn step(disabled: bool) -> Step {
    Step {
        name: "s".into(),
        path: "s.sh".into(),
        arguments: vec![],
        returncodes: vec![0],
        on_host: true,
        env: std::collections::BTreeMap::new(),
        idempotence_disabled: disabled,
        upgrade_step: false,
    }
}

#[test]
fn decision_table_first_matching_rule_wins() {
    let auto = step(false);
    let disabled = step(true);
    assert_eq!(
        decide(Mode::ApplyCheck, &auto, true, true),
        Decision::CheckStage
    );
    assert_eq!(decide(Mode::Apply, &auto, false, true), Decision::NoMarker);
    assert_eq!(
        decide(Mode::Apply, &auto, true, true),
        Decision::AlwaysRunPolicy
    );
    assert_eq!(
        decide(Mode::Config, &auto, true, false),
        Decision::StageAlwaysRuns
    );
    assert_eq!(
        decide(Mode::Uninstall, &auto, true, false),
        Decision::StageAlwaysRuns
    );
    assert_eq!(
        decide(Mode::Upgrade, &auto, true, false),
        Decision::StageAlwaysRuns
    );
    assert_eq!(
        decide(Mode::Apply, &disabled, true, false),
        Decision::IdempotenceDisabled
    );
    assert_eq!(
        decide(Mode::PostInterrupt, &auto, true, false),
        Decision::SkipCompleted
    );
    assert!(!Decision::SkipCompleted.runs());
    assert!(Decision::NoMarker.runs());
}
