//! `agent try` on the bundled example package: its whole lifecycle, `root_dir/` overlay and a
//! `node_restart` interrupt included, against a fake host root that stays byte-identical.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{FakeHost, Run};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("agent-cli sits in the workspace root")
        .join("examples/packages/gpu-node-tuning")
}

fn try_example(host: &FakeHost, extra: &[&str]) -> Run {
    host.agent()
        .arg("try")
        .arg(example())
        .args([
            "--root",
            &host.root_str(),
            "--env",
            "GPU_TUNING_TARGET=/",
            "--env",
            "GPU_TUNING_PROFILE=training",
            "--interrupt",
            r#"{"type":"node_restart"}"#,
        ])
        .args(extra)
        .run()
}

/// The files the example installs on a node (its README's table, the config stage's settings
/// and the `root_dir/` overlay), as host paths.
const INSTALLED: &[&str] = &[
    "/etc/sysctl.d/90-gpu-node-tuning.conf",
    "/etc/gpu-node-tuning/persistenced.conf",
    "/etc/gpu-node-tuning/VERSION",
    "/etc/gpu-node-tuning/activation",
    "/etc/gpu-node-tuning/node-tuning.conf",
    "/etc/gpu-node-tuning/README",
    "/var/lib/gpu-node-tuning/status",
];

#[test]
fn try_runs_the_example_lifecycle_and_reports_what_it_installs() {
    require_root!();
    let host = FakeHost::new();
    let before = host.snapshot();
    let run = try_example(&host, &[]);
    run.assert_success();
    before.assert_unchanged(&host.snapshot(), "agent try on the example package");
    let out = run.out();
    for stage in [
        "apply ",
        "apply-check ",
        "config ",
        "config-check ",
        "interrupt node_restart ",
        "post-interrupt ",
        "post-interrupt-check ",
    ] {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(stage) && l.contains(" succeeded ")),
            "stage {stage:?} did not succeed:\n{out}"
        );
    }
    assert!(
        out.contains("interrupt node_restart_0: would run: reboot"),
        "{out}"
    );
    for path in INSTALLED {
        assert!(
            out.lines()
                .any(|l| l.starts_with("  added ") && l.contains(&format!(" {path}  ("))),
            "{path} not reported as added:\n{out}"
        );
    }
    // Nothing of the agent's own state is listed as a host change.
    assert!(!out.contains("  added     /var/lib/skyhook"), "{out}");
    assert!(!out.contains("  added     /var/log"), "{out}");
    assert!(out.contains("result: succeeded"), "{out}");
}

#[test]
fn try_json_gives_the_documented_fields() {
    require_root!();
    let host = FakeHost::new();
    let before = host.snapshot();
    let run = try_example(&host, &["--json"]);
    run.assert_success();
    before.assert_unchanged(&host.snapshot(), "agent try --json on the example package");
    let report: Value = crate::util::schema::assert_document("try", &run.stdout);
    assert_eq!(report["result"], "succeeded");
    assert_eq!(report["package"], "gpu-node-tuning");
    let stages: Vec<&str> = report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        [
            "apply",
            "apply-check",
            "config",
            "config-check",
            "interrupt",
            "post-interrupt",
            "post-interrupt-check"
        ]
    );
    for s in report["stages"].as_array().unwrap() {
        assert_eq!(s["result"], "succeeded", "{s}");
        assert!(s["duration_ms"].is_u64(), "{s}");
        assert!(
            s["steps_ran"].is_u64() && s["steps_skipped"].is_u64(),
            "{s}"
        );
    }
    assert_eq!(report["stages"][0]["steps_ran"], 2);
    let changes = report["changes"].as_array().unwrap();
    for c in changes {
        assert!(
            ["added", "modified", "deleted"].contains(&c["kind"].as_str().unwrap()),
            "{c}"
        );
        assert!(c["path"].as_str().unwrap().starts_with('/'), "{c}");
    }
    for path in INSTALLED {
        assert!(
            changes
                .iter()
                .any(|c| c["path"] == *path && c["kind"] == "added" && c["type"] == "file"),
            "{path}: {changes:?}"
        );
    }
    let interrupts = report["interrupts"].as_array().unwrap();
    assert_eq!(interrupts.len(), 1);
    assert_eq!(interrupts[0]["type"], "node_restart");
    assert_eq!(interrupts[0]["operations"][0]["command"], "reboot");
    assert!(interrupts[0]["simulated_reboot"]["boot_id_after"].is_string());
    assert!(
        report["agent_state"]["files"]["markers"]
            .as_u64()
            .is_some_and(|n| n > 0)
    );
}
