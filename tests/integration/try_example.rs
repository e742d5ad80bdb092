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
    let report: Value = serde_json::from_slice(&run.stdout).expect("one JSON document");
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

// ---------------------------------------------------------------------------------------------
// examples/demo.sh: the README's first command
// ---------------------------------------------------------------------------------------------

/// The demo as the README runs it: `agent try` of the example package against a busybox
/// lower root it builds, the report with the installed files and the diff of the earlier
/// settings, in under 45 lines, the lower root unchanged, nothing left behind with `--clean`.
#[test]
fn demo_tries_the_example_lifecycle_and_shows_the_report_in_under_45_lines() {
    require_root!();
    let tmp = tempfile::tempdir().unwrap();
    let repo = example().join("../../..");
    let out = std::process::Command::new("bash")
        .arg(repo.join("examples/demo.sh"))
        .arg("--clean")
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .env("AGENT", env!("CARGO_BIN_EXE_agent"))
        .env("TMPDIR", tmp.path())
        .output()
        .expect("running examples/demo.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "demo failed: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    assert_eq!(stderr, "", "the demo writes its whole story on stdout");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.len() <= 45, "{} lines:\n{stdout}", lines.len());
    let sections: Vec<String> = lines
        .iter()
        .filter(|l| l.starts_with("==> "))
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        sections,
        [
            format!("==> agent {},", env!("CARGO_PKG_VERSION")).as_str(),
            "==> lower root:",
            "==> agent try",
            "==> the lower",
            "==> removed the",
        ],
        "{stdout}"
    );
    assert!(
        stdout.contains("==> the lower root after the run: unchanged"),
        "{stdout}"
    );
    for stage in [
        "apply",
        "apply-check",
        "config",
        "config-check",
        "interrupt node_restart",
        "post-interrupt",
        "post-interrupt-check",
    ] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("  {stage} ")) && l.contains(" succeeded ")),
            "{stage}:\n{stdout}"
        );
    }
    for added in [
        "/etc/sysctl.d/90-gpu-node-tuning.conf",
        "/etc/gpu-node-tuning/README",
        "/var/lib/gpu-node-tuning/status",
    ] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("  added     {added}  ("))),
            "{added}:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("  modified  /etc/gpu-node-tuning/node-tuning.conf  ("),
        "{stdout}"
    );
    assert!(
        stdout.contains("      -power_limit_percent=80\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("      +power_limit_percent=100\n"),
        "{stdout}"
    );
    assert!(stdout.contains("would run: reboot"), "{stdout}");
    // --clean removed the sandbox directory.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
