//! SPEC §8.12 (ext): the results record written after every stage run. Field names are not
//! normative, so these tests look for the values the record must carry.

use serde_json::Value;

use crate::util::{FakeHost, Package, Step};

const RESULTS: &str = "var/lib/skyhook/sk1/results/pkg/1.0.0";

fn record(host: &FakeHost, mode: &str) -> Value {
    let path = format!("{RESULTS}/{mode}.json");
    serde_json::from_slice(&host.read(&path)).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"))
}

/// Every string anywhere in `v`.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.iter().for_each(|(k, x)| {
            out.push(k.clone());
            strings(x, out);
        }),
        _ => {}
    }
}

#[track_caller]
fn assert_mentions(v: &Value, needle: &str) {
    let mut all = Vec::new();
    strings(v, &mut all);
    assert!(
        all.iter().any(|s| s.contains(needle)),
        "the results record never mentions {needle:?}: {v:#}"
    );
}

fn off_host() -> Package {
    Package::off_host(&["s1.sh", "s2.sh"], &["s1_check.sh"])
}

#[test]
fn results_record_is_written_after_a_successful_stage() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply").assert_success();
    let v = record(&host, "apply");
    assert_mentions(&v, "apply");
    assert_mentions(&v, "s1.sh");
    assert_mentions(&v, "s2.sh");
    assert_mentions(&v, "ran");
    // The tail of each step's output is kept.
    assert_mentions(&v, "[s1.sh] args(0): ");
    let version = host.agent().arg("--version").run().out().trim().to_owned();
    assert_mentions(&v, &version);
    assert_eq!(host.mode(&format!("{RESULTS}/apply.json")), 0o600);
}

#[test]
fn results_record_is_written_after_a_failed_stage() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.run("apply", &[("FAIL_STEPS", "s1.sh")]).assert_code(1);
    let v = record(&host, "apply");
    assert_mentions(&v, "s1.sh");
}

#[test]
fn results_record_names_skipped_steps() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply").assert_success();
    host.stage("apply").assert_success();
    let v = record(&host, "apply");
    assert_mentions(&v, "skipped");
}

#[test]
fn each_mode_has_its_own_results_record() {
    let host = FakeHost::new();
    host.install(&off_host());
    host.stage("apply").assert_success();
    host.stage("apply-check").assert_success();
    assert_mentions(&record(&host, "apply-check"), "s1_check.sh");
    assert_mentions(&record(&host, "apply"), "s2.sh");
}

#[test]
fn results_record_output_tail_is_bounded() {
    let host = FakeHost::new();
    let big = Step::new("big.sh")
        .on_host(false)
        .script("#!/bin/sh\nyes 0123456789abcdef | head -c 100000\necho END-MARK\n");
    host.install(
        &Package::new()
            .step("apply", big)
            .step("apply-check", Step::new("big_check.sh").on_host(false)),
    );
    host.stage("apply").assert_success();
    let bytes = host.read(&format!("{RESULTS}/apply.json"));
    assert!(
        bytes.len() < 32 * 1024,
        "only the last 4 KiB of output is kept ({} bytes)",
        bytes.len()
    );
    assert_mentions(&record(&host, "apply"), "END-MARK");
}

/// SPEC §5: temp files a killed write left behind are cleaned later; a fresh one (a writer
/// that may still be alive) is left alone.
#[test]
fn stale_temp_files_of_killed_writes_are_cleaned() {
    let host = FakeHost::new();
    host.install(&off_host());
    let old = "var/lib/skyhook/sk1/flags/pkg/1.0.0/.s1.sh_W11fWzBd.tmp.4242.deadbeef";
    let fresh = "var/lib/skyhook/sk1/flags/.START.tmp.4343.cafef00d";
    host.write(old, "last_run: 2026");
    host.write(fresh, "");
    let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(host.path(old))
        .unwrap()
        .set_modified(an_hour_ago)
        .unwrap();
    host.stage("apply").assert_success();
    assert!(!host.exists(old), "a stale temp file is removed");
    assert!(
        host.exists(fresh),
        "a recent temp file may belong to a live writer"
    );
}
