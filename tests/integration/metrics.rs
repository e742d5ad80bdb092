//! Issue 13: what each step and interrupt operation cost (results record, result lines,
//! `agent status`) and the node metrics file in the Prometheus text format
//! (`STATE/metrics/<pkg>.prom`, and its copy in `SKYHOOK_AGENT_METRICS_DIR`), read back with
//! a real text-format parser after success, failure, a signal stop, an interrupt with a
//! reboot, and with a metrics directory that is missing or cannot be written.

use prometheus_parse::{Scrape, Value};

use crate::util::{
    COPY_DIR, FakeHost, PKG_DIR, Package, REBOOT_SHUTS_DOWN, Run, STATE, Step, interrupt_data,
};

const PROM: &str = "var/lib/skyhook/sk1/metrics/pkg.prom";
const TEXTFILE_DIR: &str = "/var/lib/node_exporter/textfile";
const COPY: &str = "var/lib/node_exporter/textfile/skyhook_agent_pkg.prom";
const RESULTS: &str = "var/lib/skyhook/sk1/results/pkg/1.0.0";
const WRITE_FAILED: &str = "could not write the metrics file";

/// Writes 6 bytes to stdout and 4 to stderr.
const TALKER: &str = "#!/bin/sh\nprintf 'hello\\n'\nprintf 'err\\n' >&2\n";
/// Runs `dd` with a 32 MiB buffer in a child it waits for (runs on the host's /bin/sh:
/// `on_host: false`).
const BIG: &str = "#!/bin/sh\ndd if=/dev/zero of=/dev/null bs=32M count=1 2>/dev/null\n";

/// Parse with a real Prometheus text-format parser; every sample line must have been taken,
/// and every family must have HELP and TYPE.
pub fn scrape(text: &str) -> Scrape {
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("parsing");
    let lines = text.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(
        scrape.samples.len(),
        lines,
        "lines the parser did not take:\n{text}"
    );
    for s in &scrape.samples {
        assert!(scrape.docs.contains_key(&s.metric), "no HELP: {}", s.metric);
        assert!(
            text.contains(&format!("# TYPE {} ", s.metric)),
            "no TYPE: {}",
            s.metric
        );
        for (k, v) in s.labels.iter() {
            // Bounded labels: no timestamps, no free text.
            assert!(
                [
                    "package",
                    "version",
                    "stage",
                    "step",
                    "interrupt",
                    "operation",
                    "resource_id",
                    "result",
                    "mode",
                    "stream",
                    "git_sha",
                    "verdict",
                ]
                .contains(&k.as_str()),
                "{k}={v} in {}",
                s.metric
            );
        }
    }
    scrape
}

fn metrics(host: &FakeHost) -> Scrape {
    assert_eq!(host.mode(PROM) & 0o777, 0o644);
    scrape(&host.read_string(PROM))
}

/// The value of the one series of `metric` whose labels include `labels`.
fn value(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<f64> = s
        .samples
        .iter()
        .filter(|x| x.metric == metric && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .map(|x| match x.value {
            Value::Counter(v) | Value::Gauge(v) => v,
            ref other => panic!("{metric}: {other:?}"),
        })
        .collect();
    assert!(found.len() <= 1, "{metric} {labels:?}: {found:?}");
    found.first().copied()
}

fn is_counter(s: &Scrape, metric: &str) -> bool {
    s.samples
        .iter()
        .filter(|x| x.metric == metric)
        .all(|x| matches!(x.value, Value::Counter(_)))
}

fn result_of(s: &Scrape, stage: &str, result: &str) -> Option<f64> {
    value(
        s,
        "skyhook_agent_stage_last_run_result",
        &[("package", "pkg"), ("stage", stage), ("result", result)],
    )
}

fn step(s: &Scrape, metric: &str, stage: &str, path: &str, extra: &[(&str, &str)]) -> Option<f64> {
    let mut labels = vec![
        ("package", "pkg"),
        ("version", "1.0.0"),
        ("stage", stage),
        ("step", path),
    ];
    labels.extend_from_slice(extra);
    value(s, &format!("skyhook_agent_step_last_run_{metric}"), &labels)
}

fn record(host: &FakeHost, mode: &str) -> serde_json::Value {
    serde_json::from_str(&host.read_string(&format!("{RESULTS}/{mode}.json"))).unwrap()
}

fn apply(host: &FakeHost, env: &[(&str, &str)]) -> Run {
    let mut cmd = host.agent().args(["apply", &host.root_str(), COPY_DIR]);
    for (k, v) in env {
        cmd = cmd.env(k, *v);
    }
    cmd.run()
}

fn two_steps() -> Package {
    Package::new()
        .step("apply", Step::new("talk.sh").script(TALKER))
        .step("apply", Step::new("big.sh").on_host(false).script(BIG))
        .step("apply-check", Step::new("talk_check.sh").script(TALKER))
}

#[test]
fn a_successful_run_records_what_each_step_cost_everywhere() {
    require_root!();
    let host = FakeHost::new();
    host.install(&two_steps());
    host.mkdir(TEXTFILE_DIR.trim_start_matches('/'));
    let run = apply(&host, &[("SKYHOOK_AGENT_METRICS_DIR", TEXTFILE_DIR)]);
    run.assert_success();

    // The result line on stderr.
    run.assert_stderr_line_contains(&[
        "step finished",
        "path=talk.sh",
        "stdout_bytes=6",
        "stderr_bytes=4",
        "cpu_user_ms=",
        "cpu_system_ms=",
        "max_rss_kib=",
    ]);
    // The results record.
    let rec = record(&host, "apply");
    let talk = &rec["operations"][0]["usage"];
    assert_eq!(talk["stdout_bytes"], 6, "{rec}");
    assert_eq!(talk["stderr_bytes"], 4, "{rec}");
    let big = &rec["operations"][1]["usage"];
    assert!(
        big["max_rss_bytes"].as_u64().unwrap() >= 32 << 20,
        "dd's buffer, in a child the step waited for: {rec}"
    );
    assert!(big["user_cpu_us"].is_u64() && big["system_cpu_us"].is_u64());

    // The metrics file, and its copy for node-exporter.
    let s = metrics(&host);
    assert_eq!(host.read(PROM), host.read(COPY));
    assert_eq!(host.mode(COPY) & 0o777, 0o644);
    let out = [("stream", "stdout")];
    let err = [("stream", "stderr")];
    assert_eq!(
        step(&s, "output_bytes", "apply", "talk.sh", &out),
        Some(6.0)
    );
    assert_eq!(
        step(&s, "output_bytes", "apply", "talk.sh", &err),
        Some(4.0)
    );
    let peak = step(&s, "max_rss_bytes", "apply", "big.sh", &[]).unwrap();
    #[allow(clippy::cast_precision_loss, reason = "byte counts far below 2^53")]
    let recorded = big["max_rss_bytes"].as_u64().unwrap() as f64;
    assert!((peak - recorded).abs() < 0.5, "{peak} vs {recorded}");
    assert!(peak >= f64::from(32 << 20), "{peak}");
    assert_eq!(step(&s, "exit_code", "apply", "big.sh", &[]), Some(0.0));
    assert_eq!(step(&s, "success", "apply", "big.sh", &[]), Some(1.0));
    let user = step(&s, "cpu_seconds", "apply", "big.sh", &[("mode", "user")]).unwrap();
    let system = step(&s, "cpu_seconds", "apply", "big.sh", &[("mode", "system")]).unwrap();
    assert!(
        user >= 0.0 && system > 0.0,
        "dd zeroes 32 MiB: {user} {system}"
    );
    let duration = step(&s, "duration_seconds", "apply", "big.sh", &[]).unwrap();
    assert!(duration > 0.0 && duration < 60.0, "{duration}");
    assert_eq!(result_of(&s, "apply", "succeeded"), Some(1.0));
    assert_eq!(result_of(&s, "apply", "failed"), Some(0.0));
    let stage = [
        ("stage", "apply"),
        ("version", "1.0.0"),
        ("resource_id", "abc_pkg_1.0.0"),
    ];
    let start = value(
        &s,
        "skyhook_agent_stage_last_run_start_timestamp_seconds",
        &stage,
    );
    let end = value(
        &s,
        "skyhook_agent_stage_last_run_end_timestamp_seconds",
        &stage,
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        start.unwrap() <= end.unwrap() && end.unwrap() <= now + 1.0 && start.unwrap() > now - 120.0
    );
    assert_eq!(
        value(
            &s,
            "skyhook_agent_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        Some(1.0)
    );
    assert!(is_counter(&s, "skyhook_agent_stage_runs_total"));
    assert!(!is_counter(
        &s,
        "skyhook_agent_step_last_run_duration_seconds"
    ));

    // `agent status`, text and JSON.
    let status = host.agent().args(["status", &host.root_str()]).run();
    status.assert_success();
    assert!(
        status.out().lines().any(|l| l.contains("ran talk.sh")
            && l.contains("stdout 6 B, stderr 4 B")
            && l.contains("peak RSS")),
        "{status:?}"
    );
    let json = host
        .agent()
        .args(["status", &host.root_str(), "--json"])
        .run();
    let v: serde_json::Value = serde_json::from_str(&json.out()).unwrap();
    let ops = &v["states"][0]["packages"][0]["last_run"]["operations"];
    assert_eq!(ops[0]["usage"]["stdout_bytes"], 6, "{v}");

    // A later stage adds its series; the apply series stay.
    host.stage("apply-check").assert_success();
    let s = metrics(&host);
    assert_eq!(result_of(&s, "apply", "succeeded"), Some(1.0));
    assert_eq!(result_of(&s, "apply-check", "succeeded"), Some(1.0));
    assert_eq!(
        step(&s, "output_bytes", "apply-check", "talk_check.sh", &out),
        Some(6.0)
    );
    assert_eq!(
        step(&s, "output_bytes", "apply", "talk.sh", &out),
        Some(6.0)
    );
    let runs = [("stage", "apply"), ("result", "succeeded")];
    assert_eq!(
        value(&s, "skyhook_agent_stage_runs_total", &runs),
        Some(1.0)
    );
    // Without SKYHOOK_AGENT_METRICS_DIR this time: the copy is left as it was.
    assert!(!host.read_string(COPY).contains("apply-check"));
}

#[test]
fn a_failed_step_is_in_the_metrics_and_the_run_fails_as_before() {
    require_root!();
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step(
                "apply",
                Step::new("fail.sh").script("#!/bin/sh\necho failing\nexit 3\n"),
            )
            .step("apply-check", Step::new("fail_check.sh")),
    );
    let run = apply(&host, &[]);
    run.assert_code(1);
    let s = metrics(&host);
    assert_eq!(result_of(&s, "apply", "failed"), Some(1.0));
    assert_eq!(result_of(&s, "apply", "succeeded"), Some(0.0));
    assert_eq!(step(&s, "exit_code", "apply", "fail.sh", &[]), Some(3.0));
    assert_eq!(step(&s, "success", "apply", "fail.sh", &[]), Some(0.0));
    assert_eq!(
        step(
            &s,
            "output_bytes",
            "apply",
            "fail.sh",
            &[("stream", "stdout")]
        ),
        Some(8.0)
    );
    let stage = [("stage", "apply")];
    assert_eq!(
        value(&s, "skyhook_agent_stage_last_run_exit_code", &stage),
        Some(1.0)
    );
    // A second failure counts.
    apply(&host, &[]).assert_code(1);
    let s = metrics(&host);
    let runs = [("stage", "apply"), ("result", "failed")];
    assert_eq!(
        value(&s, "skyhook_agent_stage_runs_total", &runs),
        Some(2.0)
    );
}

#[test]
fn a_signal_stop_is_recorded_as_stopped_with_the_finished_step() {
    require_root!();
    let host = FakeHost::new();
    host.install_held_apply("echo finished");
    let run = host.stop_held_apply(host.agent());
    run.assert_code(1);
    run.assert_stderr_contains("agent stopped after receiving a termination signal");
    let s = metrics(&host);
    assert_eq!(result_of(&s, "apply", "stopped"), Some(1.0));
    assert_eq!(result_of(&s, "apply", "failed"), Some(0.0));
    assert_eq!(step(&s, "success", "apply", "held.sh", &[]), Some(1.0));
    assert_eq!(
        step(
            &s,
            "output_bytes",
            "apply",
            "held.sh",
            &[("stream", "stdout")]
        ),
        Some(9.0)
    );
    assert_eq!(
        step(&s, "success", "apply", "next.sh", &[]),
        None,
        "never started"
    );
}

/// The metrics of the package's interrupts (the package named by SKYHOOK_RESOURCE_ID).
fn interrupt_counter(s: &Scrape, name: &str) -> Option<f64> {
    value(
        s,
        &format!("skyhook_agent_interrupt_{name}_total"),
        &[("package", "pkg"), ("interrupt", "node_restart")],
    )
}

#[test]
fn an_interrupt_with_a_reboot_counts_the_reboot_and_the_completion_after_it() {
    require_root!();
    let host = FakeHost::new();
    host.mkdir(PKG_DIR);
    // A fake `reboot` killed by the shutdown it starts, which then takes the host down.
    host.set_fake_tool("reboot", REBOOT_SHUTS_DOWN);
    let data = interrupt_data(r#"{"type":"node_restart"}"#);
    let run = host.interrupt(&data).run();
    run.assert_killed_by_the_shutdown();
    run.assert_stderr_line_contains(&["operation finished", "command=reboot", "stdout_bytes=27"]);
    let s = metrics(&host);
    assert!(is_counter(
        &s,
        "skyhook_agent_interrupt_reboots_requested_total"
    ));
    assert_eq!(interrupt_counter(&s, "reboots_requested"), Some(1.0));
    assert_eq!(interrupt_counter(&s, "operations_completed"), Some(0.0));
    assert_eq!(interrupt_counter(&s, "loop_guard_refusals"), Some(0.0));
    let op = [
        ("package", "pkg"),
        ("interrupt", "node_restart"),
        ("operation", "node_restart_0"),
    ];
    assert_eq!(
        value(
            &s,
            "skyhook_agent_interrupt_operation_last_run_exit_code",
            &op
        ),
        Some(143.0),
        "killed by SIGTERM: 128 + 15"
    );
    assert_eq!(
        value(
            &s,
            "skyhook_agent_interrupt_operation_last_run_success",
            &op
        ),
        Some(1.0)
    );
    let out = [&op[..], &[("stream", "stdout")]].concat();
    assert_eq!(
        value(
            &s,
            "skyhook_agent_interrupt_operation_last_run_output_bytes",
            &out
        ),
        Some(27.0)
    );
    assert_eq!(result_of(&s, "interrupt", "succeeded"), Some(1.0));
    let rec = record(&host, "interrupt");
    assert_eq!(rec["operations"][0]["id"], "node_restart_0", "{rec}");
    assert_eq!(rec["operations"][0]["usage"]["stdout_bytes"], 27, "{rec}");

    // After the reboot: the pending marker is promoted, which completes the operation.
    host.set_boot_id("99999999-2222-4333-8444-555555555555");
    host.interrupt(&data).run().assert_success();
    let s = metrics(&host);
    assert_eq!(interrupt_counter(&s, "reboots_requested"), Some(1.0));
    assert_eq!(interrupt_counter(&s, "operations_completed"), Some(1.0));
    // The operation's figures are those of its last run (the reboot).
    assert_eq!(
        value(
            &s,
            "skyhook_agent_interrupt_operation_last_run_exit_code",
            &op
        ),
        Some(143.0)
    );

    // The loop guard: a node that asked for three reboots under this boot ID.
    let guarded = FakeHost::new();
    guarded.mkdir(PKG_DIR);
    let flags = format!("{STATE}/interrupts/flags/abc_pkg_1.0.0");
    let boot = guarded.read_string("proc/sys/kernel/random/boot_id");
    let boot = boot.trim();
    guarded.write(
        &format!("{flags}/node_restart_0.pending"),
        format!("boot-id:{boot}\n"),
    );
    guarded.write(
        &format!("{flags}/node_restart_0.attempts"),
        format!("boot-id:{boot}\nattempts:3\n"),
    );
    let refused = guarded.interrupt(&data).run();
    refused.assert_code(1);
    refused.assert_stderr_contains("reboot requested 3 times");
    let s = metrics(&guarded);
    let refusals = value(
        &s,
        "skyhook_agent_interrupt_loop_guard_refusals_total",
        &[("interrupt", "node_restart")],
    );
    assert_eq!(refusals, Some(1.0));
    assert_eq!(result_of(&s, "interrupt", "failed"), Some(1.0));
}

/// The package's `agent status` verdict: `(verdict with value 1, the pending-reboot gauge)`.
fn standing(s: &Scrape) -> (String, Option<f64>) {
    let on: Vec<String> = s
        .samples
        .iter()
        .filter(|x| x.metric == "skyhook_agent_status" && x.labels.get("package") == Some("pkg"))
        .filter(|x| matches!(x.value, Value::Gauge(v) if v > 0.5))
        .filter_map(|x| x.labels.get("verdict").map(str::to_owned))
        .collect();
    let all = s
        .samples
        .iter()
        .filter(|x| x.metric == "skyhook_agent_status")
        .count();
    assert_eq!(all, 8, "one series per verdict");
    assert_eq!(on.len(), 1, "exactly one verdict is 1: {on:?}");
    let pending = value(s, "skyhook_agent_reboot_pending", &[("package", "pkg")]);
    (on[0].clone(), pending)
}

/// `skyhook_agent_status{verdict}` says what `agent status` says of the package once the run
/// is over (its own lock does not make it `running`), and `skyhook_agent_reboot_pending`
/// whether a reboot it asked for waits for a new boot.
#[test]
fn the_status_verdict_and_the_pending_reboot_are_gauges() {
    require_root!();
    let host = FakeHost::new();
    host.install(&Package::off_host(&["s1.sh", "s2.sh"], &["s1_check.sh"]));
    apply(&host, &[("FAIL_STEPS", "s2.sh")]).assert_code(1);
    assert_eq!(standing(&metrics(&host)), ("failed".to_owned(), Some(0.0)));
    apply(&host, &[]).assert_success();
    assert_eq!(standing(&metrics(&host)), ("done".to_owned(), Some(0.0)));

    let stopped = FakeHost::new();
    stopped.install_held_apply("exit 0");
    stopped.stop_held_apply(stopped.agent()).assert_code(1);
    assert_eq!(
        standing(&metrics(&stopped)),
        ("stopped".to_owned(), Some(0.0))
    );

    // An interrupt whose reboot takes the host down: the run that asked for it leaves the
    // package waiting for the new boot.
    let rebooted = FakeHost::new();
    rebooted.mkdir(PKG_DIR);
    rebooted.set_fake_tool("reboot", REBOOT_SHUTS_DOWN);
    let data = interrupt_data(r#"{"type":"node_restart"}"#);
    rebooted
        .interrupt(&data)
        .run()
        .assert_killed_by_the_shutdown();
    assert_eq!(
        standing(&metrics(&rebooted)),
        ("reboot-pending".to_owned(), Some(1.0))
    );
    rebooted.set_boot_id("99999999-2222-4333-8444-555555555555");
    rebooted.interrupt(&data).run().assert_success();
    assert_eq!(
        standing(&metrics(&rebooted)),
        ("done".to_owned(), Some(0.0))
    );
}

#[test]
fn a_missing_or_unwritable_metrics_directory_is_a_warning_and_the_result_stands() {
    require_root!();
    let host = FakeHost::new();
    host.install(&two_steps());

    // Turned off: no metrics at all, the usage still in the results record.
    host.mkdir(TEXTFILE_DIR.trim_start_matches('/'));
    let run = apply(
        &host,
        &[
            ("SKYHOOK_AGENT_WRITE_METRICS", "false"),
            ("SKYHOOK_AGENT_METRICS_DIR", TEXTFILE_DIR),
        ],
    );
    run.assert_success();
    assert!(!host.exists(&format!("{STATE}/metrics")));
    assert!(host.list(TEXTFILE_DIR.trim_start_matches('/')).is_empty());
    assert_eq!(
        record(&host, "apply")["operations"][0]["usage"]["stdout_bytes"],
        6
    );
    std::fs::remove_dir(host.path(TEXTFILE_DIR.trim_start_matches('/'))).unwrap();

    // Missing: warned about with the cause, not created; the stage succeeds.
    let run = apply(&host, &[("SKYHOOK_AGENT_METRICS_DIR", TEXTFILE_DIR)]);
    run.assert_success();
    run.assert_stderr_line_contains(&[
        "level=warn",
        WRITE_FAILED,
        "/var/lib/node_exporter/textfile/skyhook_agent_pkg.prom",
        "No such file or directory",
    ]);
    assert!(!host.exists(TEXTFILE_DIR.trim_start_matches('/')));
    metrics(&host);

    // A regular file where the directory should be, and STATE/metrics a file too: nothing
    // can be written, the step's result decides the exit code all the same.
    host.write("var/lib/node_exporter/textfile", "not a directory");
    std::fs::remove_dir_all(host.path(&format!("{STATE}/metrics"))).unwrap();
    host.write(&format!("{STATE}/metrics"), "not a directory");
    let run = apply(&host, &[("SKYHOOK_AGENT_METRICS_DIR", TEXTFILE_DIR)]);
    run.assert_success();
    run.assert_stderr_line_contains(&[WRITE_FAILED, "textfile", "is not a directory"]);
    run.assert_stderr_line_contains(&[WRITE_FAILED, "metrics/pkg.prom", "is not a directory"]);

    // With a failing step the exit code stays the step's.
    let failing = FakeHost::new();
    failing.install(
        &Package::new()
            .step("apply", Step::new("fail.sh").script("#!/bin/sh\nexit 3\n"))
            .step("apply-check", Step::new("fail_check.sh")),
    );
    failing.write("var/lib/node_exporter/textfile", "not a directory");
    let run = apply(&failing, &[("SKYHOOK_AGENT_METRICS_DIR", TEXTFILE_DIR)]);
    run.assert_code(1);
    run.assert_stderr_line_contains(&[WRITE_FAILED, "is not a directory"]);
    run.assert_stderr_contains("exit code 3 is not an accepted return code");
}

/// The README's demo leaves a metrics file the parser accepts in the sandbox it keeps, and
/// `agent status` on that sandbox shows what each step cost.
#[test]
fn after_the_demo_the_sandbox_has_metrics_and_status_shows_the_step_figures() {
    require_root!();
    let host = FakeHost::new();
    let scratch = tempfile::tempdir().unwrap();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new("bash")
        .arg(repo.join("examples/demo.sh"))
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .env("AGENT", env!("CARGO_BIN_EXE_agent"))
        .env("DEMO_ROOT", host.root())
        .env("TMPDIR", scratch.path())
        .output()
        .expect("running examples/demo.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prom = stdout
        .lines()
        .find(|l| {
            l.contains("metrics")
                && std::path::Path::new(l.trim_end())
                    .extension()
                    .is_some_and(|e| e == "prom")
        })
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or_else(|| panic!("the demo names no metrics file:\n{stdout}"));
    let s = scrape(&std::fs::read_to_string(prom).unwrap());
    let labels = [
        ("package", "gpu-node-tuning"),
        ("stage", "apply"),
        ("step", "install_profile.sh"),
        ("stream", "stdout"),
    ];
    let bytes = value(&s, "skyhook_agent_step_last_run_output_bytes", &labels);
    assert!(bytes.is_some_and(|b| b > 0.0), "{bytes:?}");
    let done = [
        ("package", "gpu-node-tuning"),
        ("stage", "post-interrupt-check"),
        ("version", "1.1.0"),
        ("result", "succeeded"),
    ];
    assert_eq!(
        value(&s, "skyhook_agent_stage_last_run_result", &done),
        Some(1.0)
    );

    // `agent status` on the kept upper layer: the state the sandbox's agent wrote
    // (`<upper>/var/lib/skyhook/try/metrics/<pkg>.prom`).
    let state_in_sandbox = std::path::Path::new("var/lib/skyhook/try");
    let upper = std::path::Path::new(prom)
        .ancestors()
        .find(|dir| dir.ends_with(state_in_sandbox))
        .and_then(|state| state.ancestors().nth(4))
        .unwrap_or_else(|| panic!("{prom} is not under var/lib/skyhook/try"))
        .to_path_buf();
    // The upper layer holds only what the sandbox changed: give it the boot ID a host has.
    let boot_id = upper.join("proc/sys/kernel/random/boot_id");
    std::fs::create_dir_all(boot_id.parent().unwrap()).unwrap();
    std::fs::write(&boot_id, "4f5dcd1e-140f-4802-8330-d845479b4024\n").unwrap();
    let status = host
        .agent()
        .env("SKYHOOK_ROOT_DIR", "/var/lib/skyhook/try")
        .args(["status", upper.to_str().unwrap()])
        .run();
    status.assert_success();
    assert!(
        status
            .out()
            .lines()
            .any(|l| l.trim_start().starts_with("ran ")
                && l.contains("peak RSS")
                && l.contains("cpu ")),
        "{status:?}"
    );
}

/// docs/performance.md: `SKYHOOK_AGENT_PHASE_TIMES` names a file (outside ROOT) where the
/// agent writes, when it exits, the total time of each phase of its operations; the
/// benchmark reads it to split a step's cost.
#[test]
fn the_phase_times_file_counts_each_phase_of_every_step() {
    let host = FakeHost::new();
    host.install(&two_steps());
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("phases.txt");
    let run = apply(
        &host,
        &[("SKYHOOK_AGENT_PHASE_TIMES", file.to_str().unwrap())],
    );
    run.assert_success();
    let text = std::fs::read_to_string(&file).expect("the phase times file");
    let phases: Vec<(&str, u64, u64)> = text
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let [name, count, nanos] = fields[..] else {
                panic!("malformed line {line:?} in {text:?}")
            };
            (name, count.parse().unwrap(), nanos.parse().unwrap())
        })
        .collect();
    let names: Vec<&str> = phases.iter().map(|p| p.0).collect();
    assert_eq!(
        names,
        [
            "spawn", "record", "wait", "decide", "markers", "log", "results", "metrics"
        ]
    );
    let count = |name: &str| phases.iter().find(|p| p.0 == name).unwrap().1;
    // Two steps: each spawned, waited for, decided, marked; its group recorded and cleared;
    // its log opened, closed and pruned. The results record at the start and at the end.
    assert_eq!(
        [
            count("spawn"),
            count("wait"),
            count("decide"),
            count("markers")
        ],
        [2, 2, 2, 2],
        "{text}"
    );
    assert_eq!(count("record"), 4, "{text}");
    assert_eq!(count("log"), 6, "{text}");
    assert_eq!(count("results"), 2, "{text}");
    assert_eq!(count("metrics"), 1, "{text}");
    assert!(
        phases.iter().all(|p| p.1 == 0 || p.2 > 0),
        "a counted phase took no time: {text}"
    );
}
