//! JSON that programs can rely on (SPEC §1.5): with `--format json`, stdout is exactly one
//! document, also when the subcommand fails; every document carries `schema_version`; and the
//! real output of each subcommand, success and failure, is valid against its schema in
//! docs/schemas/ (every required property there with its type, no property the schema does not
//! know).

use serde_json::{Value, json};

use crate::util::schema::{assert_document, violations};
use crate::util::{COPY_DIR, FakeHost, PKG_DIR, Package, Run, STATE, Step, hold_flock, repo};

const SCHEMAS: &[&str] = &[
    "error",
    "interrupts-list",
    "interrupts-encode",
    "interrupts-decode",
    "validate",
    "plan",
    "status",
    "reset",
    "logs",
    "try",
];

fn schema(name: &str) -> Value {
    let path = repo().join(format!("docs/schemas/{name}.schema.json"));
    serde_json::from_slice(&std::fs::read(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Assert the failure's exit code and its error document; the document.
#[track_caller]
fn assert_error_document(run: &Run, exit_code: i32) -> Value {
    run.assert_code(exit_code);
    let doc = assert_document("error", &run.stdout);
    assert_eq!(doc["error"]["exit_code"], exit_code, "{run:?}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(!message.is_empty(), "{run:?}");
    // The same message on stderr, for the person (clap's may span lines there).
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words(&run.err()).contains(&words(message)), "{run:?}");
    doc
}

#[test]
fn every_schema_is_a_draft_2020_12_document_with_a_version() {
    let listed: Vec<String> = std::fs::read_dir(repo().join("docs/schemas"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".schema.json"))
        .collect();
    assert_eq!(listed.len(), SCHEMAS.len(), "{listed:?}");
    for name in SCHEMAS {
        let s = schema(name);
        assert_eq!(
            s["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{name}"
        );
        assert!(
            s["title"].is_string() && s["description"].is_string(),
            "{name}"
        );
        // The top level (or each of its branches) requires `schema_version`, version 1.
        let tops: Vec<&Value> = match s["oneOf"].as_array() {
            Some(branches) => branches
                .iter()
                .map(|b| {
                    let r = b["$ref"].as_str().unwrap().trim_start_matches("#/$defs/");
                    &s["$defs"][r]
                })
                .collect(),
            None => vec![&s],
        };
        for top in tops {
            assert!(
                top["required"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("schema_version")),
                "{name}"
            );
            assert_eq!(top["properties"]["schema_version"]["const"], 1, "{name}");
            assert_eq!(top["additionalProperties"], false, "{name}");
        }
    }
}

#[test]
fn the_checker_finds_what_a_document_breaks() {
    let s = schema("error");
    let good = json!({"schema_version": 1, "error": {"message": "m", "exit_code": 2}});
    assert!(violations(&s, &s, &good, "").is_empty());
    for (bad, why) in [
        (
            json!({"error": {"message": "m", "exit_code": 2}}),
            "required property \"schema_version\"",
        ),
        (
            json!({"schema_version": 2, "error": {"message": "m", "exit_code": 2}}),
            "expected 1",
        ),
        (
            json!({"schema_version": 1, "error": {"message": 5, "exit_code": 2}}),
            "expected [\"string\"]",
        ),
        (
            json!({"schema_version": 1, "error": {"message": "m", "exit_code": 3}}),
            "is not one of",
        ),
        (
            json!({"schema_version": 1, "error": {"message": "m", "exit_code": 1, "x": 1}}),
            "property \"x\" is not in the schema",
        ),
    ] {
        let found = violations(&s, &s, &bad, "");
        assert!(found.iter().any(|f| f.contains(why)), "{bad}: {found:?}");
    }
    let unknown = json!({"type": "object", "patternProperties": {}});
    assert!(violations(&unknown, &unknown, &json!({}), "")[0].contains("does not know keyword"));
    let plan = schema("plan");
    let found = violations(&plan, &plan, &json!({"schema_version": 1, "plan": "x"}), "");
    assert!(
        found[0].contains("matches 0 of the oneOf branches"),
        "{found:?}"
    );
}

#[test]
fn interrupts_documents_match_their_schemas() {
    let host = FakeHost::new();
    let run = host
        .agent()
        .args(["interrupts", "list", "--format", "json"])
        .run();
    run.assert_success();
    let list = assert_document("interrupts-list", &run.stdout);
    assert!(list["kinds"].as_array().unwrap().len() >= 5, "{list:#}");

    let run = host
        .agent()
        .args([
            "interrupts",
            "encode",
            r#"{"type":"service_restart","services":["kubelet"]}"#,
            "--format",
            "json",
        ])
        .run();
    run.assert_success();
    let encoded = assert_document("interrupts-encode", &run.stdout);
    let data = encoded["data"].as_str().unwrap().to_owned();

    let run = host
        .agent()
        .args(["interrupts", "decode", &data, "--format", "json"])
        .run();
    run.assert_success();
    let decoded = assert_document("interrupts-decode", &run.stdout);
    assert_eq!(
        decoded["interrupt"],
        json!({"type": "service_restart", "services": ["kubelet"]})
    );

    for args in [
        ["interrupts", "encode", r#"{"type":"warp_drive"}"#],
        ["interrupts", "decode", "not base64!"],
    ] {
        let run = host.agent().args(args).args(["--format", "json"]).run();
        let doc = assert_error_document(&run, 1);
        assert!(
            run.err().contains(&format!(
                "agent: {}",
                doc["error"]["message"].as_str().unwrap()
            )),
            "{run:?}"
        );
    }
    let run = host
        .agent()
        .args(["interrupts", "encode", "--format", "json"])
        .run();
    assert_error_document(&run, 2);
}

#[test]
fn validate_documents_match_their_schema() {
    let host = FakeHost::new();
    host.install(&Package::simple());
    let copy_dir = host.path(COPY_DIR);
    let copy_dir = copy_dir.to_str().unwrap();
    let run = host
        .agent()
        .args(["validate", copy_dir, "--format", "json"])
        .run();
    run.assert_success();
    assert_eq!(assert_document("validate", &run.stdout)["valid"], true);
    host.write(
        &format!("{PKG_DIR}/config.json"),
        r#"{"schema_version": "v1"}"#,
    );
    let run = host
        .agent()
        .args(["validate", copy_dir, "--format", "json"])
        .run();
    run.assert_code(1);
    let invalid = assert_document("validate", &run.stdout);
    assert_eq!(invalid["valid"], false);
    assert!(invalid["errors"].as_u64().unwrap() > 0, "{invalid:#}");
    // clap's own usage error: the subcommand's argument is missing.
    let run = host.agent().args(["validate", "--format", "json"]).run();
    let doc = assert_error_document(&run, 2);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("<COPY_DIR>"),
        "{doc:#}"
    );
}

#[test]
fn plan_documents_match_their_schema() {
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step("apply", Step::new("s1.sh").on_host(false))
            .step("apply-check", Step::new("s1_check.sh").on_host(false))
            .root_file("etc/pkg/changed.conf", b"a\nb = 2\n", 0o644),
    );
    host.write_mode("etc/pkg/changed.conf", "a\nb = 1\n", 0o644);
    let root = host.root_str();
    let before = host.snapshot();
    let plan = |args: &[&str]| {
        host.agent()
            .arg("plan")
            .args(args)
            .args(["--format", "json"])
            .run()
    };
    let run = plan(&["apply", &root, COPY_DIR, "--diff"]);
    run.assert_success();
    let stage = assert_document("plan", &run.stdout);
    assert_eq!(stage["plan"], "stage");
    assert!(
        stage["writes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["diff"].is_string()),
        "{stage:#}"
    );
    let data = crate::util::interrupt_data(r#"{"type":"node_restart"}"#);
    let run = plan(&["interrupt", &root, COPY_DIR, &data]);
    run.assert_success();
    assert_eq!(assert_document("plan", &run.stdout)["plan"], "interrupt");
    // A MODE this agent does not know: the plan says a run would be a no-op, as a document.
    let run = plan(&["aply", &root, COPY_DIR]);
    run.assert_success();
    let unsupported = assert_document("plan", &run.stdout);
    assert_eq!(unsupported["plan"], "unsupported");
    assert_eq!(unsupported["mode"], "aply");
    // Failures: usage (exit 2) and a run that would fail before its first step (exit 1).
    assert_error_document(&plan(&["interrupt", &root, COPY_DIR]), 2);
    assert_error_document(&plan(&["apply", "relative", COPY_DIR]), 2);
    let run = host
        .agent()
        .env_remove("SKYHOOK_RESOURCE_ID")
        .args(["plan", "apply", &root, COPY_DIR, "--format", "json"])
        .run();
    let doc = assert_error_document(&run, 1);
    assert!(
        run.err().contains(&format!(
            "agent plan failed: {}",
            doc["error"]["message"].as_str().unwrap()
        )),
        "{run:?}"
    );
    before.assert_unchanged(&host.snapshot(), "plan");
}

#[test]
fn status_documents_match_their_schema() {
    let host = FakeHost::new();
    host.install(&Package::off_host(&["s1.sh", "s2.sh"], &["s1_check.sh"]));
    host.stage("apply").assert_success();
    host.stage("apply-check").assert_success();
    host.run(
        "apply",
        &[("OVERLAY_ALWAYS_RUN_STEP", "true"), ("FAIL_STEPS", "s2.sh")],
    )
    .assert_code(1);
    host.write_pending_reboot(1);
    let lock = format!("{STATE}/locks/pkg.lock");
    host.write(&lock, "pid=4242 boot_id=b started=2026-01-01T00:00:00Z\n");
    let mut holder = hold_flock(&host.path(&lock));
    let status = |extra: &[&str]| {
        host.agent()
            .args(["status", &host.root_str()])
            .args(extra)
            .run()
    };
    let run = status(&["--format", "json"]);
    let alias = status(&["--json"]);
    let _ = holder.kill();
    let _ = holder.wait();
    let doc = assert_document("status", &run.stdout);
    run.assert_code(i32::from(doc["status"] == "error"));
    let pkg = &doc["states"][0]["packages"][0];
    assert!(pkg["lock"].is_object(), "{doc:#}");
    assert!(pkg["last_run"].is_object(), "{doc:#}");
    assert!(!doc["errors"].as_array().unwrap().is_empty(), "{doc:#}");
    assert!(!pkg["interrupts"].as_array().unwrap().is_empty(), "{doc:#}");
    assert_eq!(alias.out(), run.out(), "--json is --format json");
    // An empty host.
    let empty = FakeHost::new();
    let run = empty
        .agent()
        .args(["status", &empty.root_str(), "--format", "json"])
        .run();
    run.assert_success();
    assert_eq!(
        assert_document("status", &run.stdout)["status"],
        "not-started"
    );
    assert_error_document(&status(&["--state-dir", "/..", "--format", "json"]), 2);
    assert_error_document(&host.agent().args(["status", "--format=json"]).run(), 2);
}

#[test]
fn logs_documents_match_their_schema() {
    let host = FakeHost::new();
    host.install(&Package::off_host(&["s1.sh"], &["s1_check.sh"]));
    host.stage("apply").assert_success();
    let logs = |extra: &[&str]| {
        host.agent()
            .args(["logs", &host.root_str(), "--format", "json"])
            .args(extra)
            .run()
    };
    let run = logs(&[]);
    run.assert_success();
    let latest = assert_document("logs", &run.stdout);
    assert_eq!(latest["run"]["mode"], "apply", "{latest:#}");
    assert_eq!(latest["logs"][0]["operation"], "s1.sh", "{latest:#}");
    let run = logs(&["--step", "s1.sh"]);
    run.assert_success();
    let step = assert_document("logs", &run.stdout);
    assert_eq!(step["run"], Value::Null, "{step:#}");
    assert_error_document(&logs(&["--step", "nowhere.sh"]), 1);
    assert_error_document(&logs(&["--package", ".."]), 2);
}

#[test]
fn reset_documents_match_their_schema() {
    let host = FakeHost::new();
    host.install(&Package::off_host(&["s1.sh"], &["s1_check.sh"]));
    host.stage("apply").assert_success();
    let reset = |extra: &[&str]| {
        host.agent()
            .args(["reset", &host.root_str(), COPY_DIR, "--format", "json"])
            .args(extra)
            .run()
    };
    let run = reset(&[]);
    run.assert_success();
    let shown = assert_document("reset", &run.stdout);
    assert_eq!(shown["removed"], false);
    assert!(!shown["files"].as_array().unwrap().is_empty(), "{shown:#}");
    let lock = format!("{STATE}/locks/pkg.lock");
    host.write(&lock, "pid=4242 boot_id=b started=2026-01-01T00:00:00Z\n");
    let mut holder = hold_flock(&host.path(&lock));
    let refused = reset(&["--yes"]);
    let _ = holder.kill();
    let _ = holder.wait();
    let doc = assert_error_document(&refused, 1);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("refusing to reset"),
        "{doc:#}"
    );
    let run = reset(&["--yes"]);
    run.assert_success();
    let removed = assert_document("reset", &run.stdout);
    assert_eq!(removed["removed"], true);
    assert_eq!(
        removed["records"].as_array().unwrap().len(),
        1,
        "{removed:#}"
    );
    assert_error_document(&reset(&["--stage", "aply"]), 2);
}

#[test]
fn try_errors_are_documents_too() {
    let host = FakeHost::new();
    host.install(&Package::simple());
    let package = host.path(COPY_DIR);
    let try_ = |extra: &[&str]| {
        host.agent()
            .arg("try")
            .arg(&package)
            .args(["--root", &host.root_str()])
            .args(extra)
            .run()
    };
    let doc = assert_error_document(&try_(&["--stages", "bogus", "--format", "json"]), 2);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("--stages: unknown stage \"bogus\""),
        "{doc:#}"
    );
    assert_error_document(&try_(&["--env", "novalue", "--json"]), 2);
    assert_error_document(&try_(&["--format", "json", "--json"]), 2);
}

/// A command line that asks for JSON gets a document even when it does not parse; one whose
/// format is itself malformed cannot be answered in it: text on stderr, nothing on stdout.
#[test]
fn the_format_is_read_before_the_command_line_parses() {
    let host = FakeHost::new();
    for args in [
        vec!["status", "--format", "json", "--bogus"],
        vec!["status", "--json"],
        vec!["plan", "--format=json", "apply"],
        vec!["interrupts", "list", "--format", "json", "extra"],
    ] {
        assert_error_document(&host.agent().args(&args).run(), 2);
    }
    let run = host
        .agent()
        .args(["status", &host.root_str(), "--format", "yaml"])
        .run();
    run.assert_code(2);
    assert!(run.stdout.is_empty(), "{run:?}");
    run.assert_stderr_contains("invalid value 'yaml' for '--format <FORMAT>'");
    // Nothing asked for JSON: the usage error is text only.
    let run = host.agent().args(["status", "--bogus"]).run();
    run.assert_code(2);
    assert!(run.stdout.is_empty(), "{run:?}");
}
