use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

use prometheus_parse::{Scrape, Value};

use super::*;
use crate::exec::usage::Usage;

fn op(path: &str, exit: i32, usage: Usage) -> OperationResult {
    OperationResult {
        operation: path.into(),
        decision: "ran".into(),
        reason: "no completion marker".into(),
        exit_code: Some(exit),
        succeeded: Some(exit == 0),
        duration_ms: Some(1500),
        usage: Some(usage),
        ..OperationResult::default()
    }
}

fn run_record(mode: &str, version: &str, operations: Vec<OperationResult>) -> ResultsRecord {
    ResultsRecord {
        agent_version: "0.1.0".into(),
        git_sha: "abc123".into(),
        mode: mode.into(),
        resource_id: format!("sk-uid-1_pkg_{version}"),
        package: "pkg".into(),
        version: version.into(),
        started: String::new(),
        finished: String::new(),
        exit_code: 0,
        result: None,
        error: None,
        operations,
    }
}

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn fold(m: &mut PackageMetrics, r: &ResultsRecord, result: ResultLabel) {
    m.package = "pkg".into();
    m.fold(&FinishedRun {
        record: r,
        result,
        started: at(1_000),
        finished: at(1_002),
        interrupt: None,
        standing: None,
    });
}

const USAGE: Usage = Usage {
    user_cpu_us: 1_250_000,
    system_cpu_us: 250_000,
    max_rss_bytes: 5 << 20,
    stdout_bytes: 42,
    stderr_bytes: 7,
};

/// Parse with a real text-format parser, checking that it took every sample line and that
/// every family has HELP and TYPE.
fn parse(text: &str) -> Scrape {
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let sample_lines = text.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(scrape.samples.len(), sample_lines, "{text}");
    for s in &scrape.samples {
        assert!(
            scrape.docs.contains_key(&s.metric),
            "no HELP for {}",
            s.metric
        );
        assert!(
            text.contains(&format!("# TYPE {} ", s.metric)),
            "no TYPE for {}",
            s.metric
        );
    }
    assert!(text.ends_with('\n'));
    scrape
}

fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<f64> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
            _ => panic!("{metric}: unexpected type"),
        })
        .collect();
    assert!(found.len() <= 1, "{metric} {labels:?}: {found:?}");
    found.first().copied()
}

#[test]
fn a_stage_run_renders_every_family_with_the_steps_figures() {
    let mut m = PackageMetrics::default();
    let r = run_record(
        "apply",
        "1.0.0",
        vec![
            op("a.sh", 0, USAGE),
            OperationResult::skipped("b.sh", "completion marker present"),
        ],
    );
    fold(&mut m, &r, ResultLabel::Succeeded);
    let text = m.render(("0.1.0", "abc123"));
    let scrape = parse(&text);
    let step = [("package", "pkg"), ("stage", "apply"), ("step", "a.sh")];
    assert_eq!(
        value(
            &scrape,
            "skyhook_agent_step_last_run_duration_seconds",
            &step
        ),
        Some(1.5)
    );
    let user = [&step[..], &[("mode", "user")]].concat();
    assert_eq!(
        value(&scrape, "skyhook_agent_step_last_run_cpu_seconds", &user),
        Some(1.25)
    );
    let system = [&step[..], &[("mode", "system")]].concat();
    assert_eq!(
        value(&scrape, "skyhook_agent_step_last_run_cpu_seconds", &system),
        Some(0.25)
    );
    assert_eq!(
        value(&scrape, "skyhook_agent_step_last_run_max_rss_bytes", &step),
        Some(f64::from(5 << 20))
    );
    let stderr = [&step[..], &[("stream", "stderr")]].concat();
    assert_eq!(
        value(&scrape, "skyhook_agent_step_last_run_output_bytes", &stderr),
        Some(7.0)
    );
    assert_eq!(
        value(&scrape, "skyhook_agent_step_last_run_exit_code", &step),
        Some(0.0)
    );
    // A skipped step that never ran here has no figures.
    let skipped = [("step", "b.sh")];
    assert_eq!(
        value(
            &scrape,
            "skyhook_agent_step_last_run_duration_seconds",
            &skipped
        ),
        None
    );
    let stage = [("stage", "apply"), ("version", "1.0.0")];
    assert_eq!(
        value(
            &scrape,
            "skyhook_agent_stage_last_run_start_timestamp_seconds",
            &stage
        ),
        Some(1000.0)
    );
    assert_eq!(
        value(
            &scrape,
            "skyhook_agent_stage_last_run_duration_seconds",
            &stage
        ),
        Some(2.0)
    );
    let ok = [&stage[..], &[("result", "succeeded")]].concat();
    assert_eq!(
        value(&scrape, "skyhook_agent_stage_last_run_result", &ok),
        Some(1.0)
    );
    let failed = [&stage[..], &[("result", "failed")]].concat();
    assert_eq!(
        value(&scrape, "skyhook_agent_stage_last_run_result", &failed),
        Some(0.0)
    );
    assert_eq!(
        value(
            &scrape,
            "skyhook_agent_build_info",
            &[("git_sha", "abc123")]
        ),
        Some(1.0)
    );
    let types: HashMap<&str, bool> = scrape
        .samples
        .iter()
        .map(|s| (s.metric.as_str(), matches!(s.value, Value::Counter(_))))
        .collect();
    assert!(types["skyhook_agent_stage_runs_total"]);
    assert!(!types["skyhook_agent_step_last_run_duration_seconds"]);
}

#[test]
fn stages_keep_each_other_and_skipped_steps_keep_their_last_figures() {
    let mut m = PackageMetrics::default();
    fold(
        &mut m,
        &run_record(
            "apply",
            "1.0.0",
            vec![op("a.sh", 0, USAGE), op("b.sh", 0, USAGE)],
        ),
        ResultLabel::Succeeded,
    );
    fold(
        &mut m,
        &run_record("apply-check", "1.0.0", vec![op("a_check.sh", 0, USAGE)]),
        ResultLabel::Succeeded,
    );
    // The rerun skips a.sh and runs b.sh, which fails now.
    let mut failing = op("b.sh", 3, Usage::default());
    failing.succeeded = Some(false);
    fold(
        &mut m,
        &run_record(
            "apply",
            "1.0.0",
            vec![
                OperationResult::skipped("a.sh", "completion marker present"),
                failing,
            ],
        ),
        ResultLabel::Failed,
    );
    assert_eq!(m.steps["apply"]["a.sh"].max_rss_bytes, 5 << 20);
    assert_eq!(m.steps["apply"]["b.sh"].exit_code, 3);
    assert!(!m.steps["apply"]["b.sh"].succeeded);
    assert!(m.steps["apply-check"].contains_key("a_check.sh"));
    assert_eq!(m.runs["apply"], [1, 1, 0]);
    assert_eq!(m.stages["apply"].result, ResultLabel::Failed as u8);

    // A run that succeeds with a.sh alone: b.sh is no longer configured.
    fold(
        &mut m,
        &run_record("apply", "1.1.0", vec![op("a.sh", 0, USAGE)]),
        ResultLabel::Succeeded,
    );
    assert_eq!(m.steps["apply"].keys().collect::<Vec<_>>(), ["a.sh"]);
    assert_eq!(m.steps["apply"]["a.sh"].version, "1.1.0");
    parse(&m.render(("0.1.0", "unknown")));
}

#[test]
fn interrupt_counters_accumulate_across_runs() {
    let mut m = PackageMetrics {
        package: "pkg".into(),
        ..PackageMetrics::default()
    };
    let mut reboot = op("reboot", 0, USAGE).with_id("node_restart_0");
    reboot.reason = "reboot requested".into();
    let r = run_record("interrupt", "1.0.0", vec![reboot]);
    let tally = InterruptTally {
        completed: 0,
        reboots_requested: 1,
        loop_guard_refusals: 0,
    };
    for _ in 0..2 {
        m.fold(&FinishedRun {
            record: &r,
            result: ResultLabel::Succeeded,
            started: at(5),
            finished: at(6),
            interrupt: Some(("node_restart", tally)),
            standing: None,
        });
    }
    let after = InterruptTally {
        completed: 1,
        reboots_requested: 0,
        loop_guard_refusals: 1,
    };
    m.fold(&FinishedRun {
        record: &run_record("interrupt", "1.0.0", Vec::new()),
        result: ResultLabel::Failed,
        started: at(7),
        finished: at(8),
        interrupt: Some(("node_restart", after)),
        standing: None,
    });
    let scrape = parse(&m.render(("0.1.0", "unknown")));
    let kind = [("interrupt", "node_restart"), ("package", "pkg")];
    assert_eq!(
        value(
            &scrape,
            "skyhook_agent_interrupt_reboots_requested_total",
            &kind
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &scrape,
            "skyhook_agent_interrupt_operations_completed_total",
            &kind
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &scrape,
            "skyhook_agent_interrupt_loop_guard_refusals_total",
            &kind
        ),
        Some(1.0)
    );
    let op0 = [
        ("interrupt", "node_restart"),
        ("operation", "node_restart_0"),
    ];
    assert_eq!(
        value(
            &scrape,
            "skyhook_agent_interrupt_operation_last_run_max_rss_bytes",
            &op0
        ),
        Some(f64::from(5 << 20))
    );
    let stage = [("stage", "interrupt"), ("result", "failed")];
    assert_eq!(
        value(&scrape, "skyhook_agent_stage_last_run_result", &stage),
        Some(1.0)
    );
    // Steps are a stage's; an interrupt run has none.
    assert!(m.steps.is_empty());
}

#[test]
fn label_values_are_escaped() {
    let mut m = PackageMetrics::default();
    fold(
        &mut m,
        &run_record(
            "apply",
            "1.0.0",
            vec![op("dir/we\"ird\\step\n.sh", 0, USAGE)],
        ),
        ResultLabel::Succeeded,
    );
    let text = m.render(("0.1.0", "unknown"));
    assert!(text.contains(r#"step="dir/we\"ird\\step\n.sh""#), "{text}");
    assert!(!text.contains("step\n.sh"));
}

#[test]
fn record_writes_the_file_the_sidecar_and_the_copy_and_reports_what_failed() {
    let root = tempfile::tempdir().unwrap();
    let fs = HostFs::new(root.path());
    std::fs::create_dir_all(root.path().join("textfile")).unwrap();
    let r = run_record("apply", "1.0.0", vec![op("a.sh", 0, USAGE)]);
    let run = FinishedRun {
        record: &r,
        result: ResultLabel::Succeeded,
        started: at(1),
        finished: at(2),
        interrupt: None,
        standing: None,
    };
    let state = Path::new("/state");
    let written = record(&fs, state, Some(Path::new("/textfile")), &run, ("1", "x"));
    assert!(written.failures.is_empty(), "{:?}", written.failures);
    assert_eq!(written.sidecar_problem, None);
    let prom = root.path().join("state/metrics/pkg.prom");
    let copy = root.path().join("textfile/skyhook_agent_pkg.prom");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&prom), 0o644);
    assert_eq!(mode(&copy), 0o644);
    assert_eq!(std::fs::read(&prom).unwrap(), std::fs::read(&copy).unwrap());

    // The next run reads the sidecar back: the counter goes on.
    let written = record(&fs, state, Some(Path::new("/missing")), &run, ("1", "x"));
    let text = std::fs::read_to_string(&prom).unwrap();
    let scrape = parse(&text);
    let ok = [("stage", "apply"), ("result", "succeeded")];
    assert_eq!(
        value(&scrape, "skyhook_agent_stage_runs_total", &ok),
        Some(2.0)
    );
    // A missing textfile directory is reported, and not created.
    assert_eq!(written.failures.len(), 1, "{:?}", written.failures);
    assert_eq!(
        written.failures[0].0,
        Path::new("/missing/skyhook_agent_pkg.prom")
    );
    assert!(!root.path().join("missing").exists());

    // A corrupt sidecar: reported, and the figures start afresh.
    std::fs::write(root.path().join("state/metrics/pkg.json"), "{").unwrap();
    let written = record(&fs, state, None, &run, ("1", "x"));
    assert!(written.sidecar_problem.is_some());
    let scrape = parse(&std::fs::read_to_string(&prom).unwrap());
    assert_eq!(
        value(&scrape, "skyhook_agent_stage_runs_total", &ok),
        Some(1.0)
    );
}

#[test]
fn the_verdict_is_one_gauge_per_verdict_and_the_pending_reboot_one_gauge() {
    let mut m = PackageMetrics {
        package: "pkg".into(),
        ..PackageMetrics::default()
    };
    let record = run_record("interrupt", "1.0.0", Vec::new());
    let standing = |verdict, reboot_pending| Standing {
        verdict,
        reboot_pending,
    };
    m.fold(&FinishedRun {
        record: &record,
        result: ResultLabel::Succeeded,
        started: at(1),
        finished: at(2),
        interrupt: Some(("node_restart", InterruptTally::default())),
        standing: Some(standing(Verdict::RebootPending, true)),
    });
    let scrape = parse(&m.render(("0.1.0", "unknown")));
    for v in Verdict::ALL {
        let expected = if v == Verdict::RebootPending {
            1.0
        } else {
            0.0
        };
        assert_eq!(
            value(
                &scrape,
                "skyhook_agent_status",
                &[("package", "pkg"), ("verdict", v.as_str())]
            ),
            Some(expected),
            "{v:?}"
        );
    }
    assert_eq!(
        value(
            &scrape,
            "skyhook_agent_reboot_pending",
            &[("package", "pkg")]
        ),
        Some(1.0)
    );

    // The next run's standing replaces it; one without (a test fold) keeps it.
    m.fold(&FinishedRun {
        record: &record,
        result: ResultLabel::Failed,
        started: at(3),
        finished: at(4),
        interrupt: Some(("node_restart", InterruptTally::default())),
        standing: Some(standing(Verdict::Failed, false)),
    });
    m.fold(&FinishedRun {
        record: &record,
        result: ResultLabel::Failed,
        started: at(5),
        finished: at(6),
        interrupt: None,
        standing: None,
    });
    let scrape = parse(&m.render(("0.1.0", "unknown")));
    let of = |v: &str| {
        value(
            &scrape,
            "skyhook_agent_status",
            &[("package", "pkg"), ("verdict", v)],
        )
    };
    assert_eq!((of("failed"), of("reboot-pending")), (Some(1.0), Some(0.0)));
    assert_eq!(
        value(
            &scrape,
            "skyhook_agent_reboot_pending",
            &[("package", "pkg")]
        ),
        Some(0.0)
    );

    // A sidecar written before the verdict was kept has no such series.
    let fresh = PackageMetrics {
        package: "pkg".into(),
        ..PackageMetrics::default()
    };
    assert!(
        !fresh
            .render(("0.1.0", "unknown"))
            .contains("skyhook_agent_status")
    );
}

#[test]
fn a_runs_label_is_the_word_of_its_recorded_result_and_anything_unfinished_failed() {
    for r in [
        RecordedResult::Succeeded,
        RecordedResult::Failed,
        RecordedResult::Stopped,
    ] {
        assert_eq!(ResultLabel::of(Some(r)).as_str(), r.as_str());
    }
    assert_eq!(
        ResultLabel::of(Some(RecordedResult::Running)),
        ResultLabel::Failed
    );
    assert_eq!(ResultLabel::of(None), ResultLabel::Failed);
}
