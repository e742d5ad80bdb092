//! `agent plan` as a diff (issue 16 item 6): each file of the `root_dir/` overlay is marked
//! `new`, `changed` or `unchanged` against what is under ROOT (read only, links never
//! followed), `--diff` shows a unified diff of changed text files, and JSON `writes` are
//! objects.

use serde_json::{Value, json};

use crate::util::{COPY_DIR, FakeHost, PKG_DIR, Package, Run, Step};

fn overlay_package() -> Package {
    Package::new()
        .step("apply", Step::new("s1.sh").on_host(false))
        .step("apply-check", Step::new("s1_check.sh").on_host(false))
        .root_file("etc/pkg/changed.conf", b"a\nb = 2\nc\n", 0o644)
        .root_file("etc/pkg/mode.conf", b"same\n", 0o600)
        .root_file("etc/pkg/new.conf", b"new\n", 0o644)
        .root_file("etc/pkg/same.conf", b"same\n", 0o644)
        .root_file("lib/pkg/blob.bin", b"\x00\x01\x02", 0o644)
        .root_file("opt/link/x.conf", b"x\n", 0o644)
}

/// A host holding the overlay's files in every state: changed, new, unchanged, binary, a
/// permission change, and a destination behind a link that leaves ROOT.
fn host_with_overlay() -> FakeHost {
    let host = FakeHost::new();
    host.install(&overlay_package());
    host.write_mode("etc/pkg/changed.conf", "a\nb = 1\nc\n", 0o644);
    host.write_mode("etc/pkg/mode.conf", "same\n", 0o644);
    host.write_mode("etc/pkg/same.conf", "same\n", 0o644);
    host.write_mode("lib/pkg/blob.bin", b"\x00\x09", 0o644);
    let outside = host.outside().join("secret");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("x.conf"), "outside\n").unwrap();
    host.symlink("opt/link", &outside);
    host
}

fn plan(host: &FakeHost, extra: &[&str]) -> Run {
    let root = host.root_str();
    let mut args = vec!["plan", "apply", root.as_str(), COPY_DIR];
    args.extend_from_slice(extra);
    host.agent().args(args).run()
}

fn overlay_lines(run: &Run) -> Vec<String> {
    run.out()
        .lines()
        .filter(|l| l.contains("(root_dir overlay") || l.starts_with("root_dir overlay:"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn plan_marks_each_overlay_file_new_changed_or_unchanged() {
    let host = host_with_overlay();
    let before = host.snapshot();
    let run = plan(&host, &[]);
    run.assert_success();
    assert_eq!(
        overlay_lines(&run),
        [
            "  changed       /etc/pkg/changed.conf (root_dir overlay)",
            "  changed       /etc/pkg/mode.conf (root_dir overlay; same content, other permission bits)",
            "  new           /etc/pkg/new.conf (root_dir overlay)",
            "  unchanged     /etc/pkg/same.conf (root_dir overlay)",
            "  changed       /lib/pkg/blob.bin (root_dir overlay)",
            "  unknown       /opt/link/x.conf (root_dir overlay; /opt/link is a symbolic link)",
            "root_dir overlay: 1 new, 3 changed, 1 unchanged, 1 not compared",
        ],
        "{run:?}"
    );
    assert!(!run.out().contains("@@"), "no diff without --diff\n{run:?}");
    before.assert_unchanged(&host.snapshot(), "plan");
}

#[test]
fn plan_diff_shows_a_unified_diff_of_changed_text_files_only() {
    let host = host_with_overlay();
    let before = host.snapshot();
    let run = plan(&host, &["--diff"]);
    run.assert_success();
    let out = run.out();
    let diffs = &out[out.find("\nsummary:").expect("summary line")..];
    let diffs = &diffs[diffs.find("\n\n").map_or(diffs.len(), |i| i + 1)..];
    assert_eq!(
        diffs,
        "\n--- /etc/pkg/changed.conf (host)\n\
         +++ /etc/pkg/changed.conf (root_dir)\n\
         @@ -1,3 +1,3 @@\n a\n-b = 1\n+b = 2\n c\n\
         \n/etc/pkg/mode.conf: same content, only the permission bits change\n\
         \n/lib/pkg/blob.bin: binary file, not diffed\n",
        "{run:?}"
    );
    assert!(
        !out.contains("outside"),
        "a link out of ROOT is never read\n{run:?}"
    );
    before.assert_unchanged(&host.snapshot(), "plan --diff");
}

#[test]
fn plan_json_writes_are_objects_with_kind_and_condition() {
    let host = host_with_overlay();
    let run = plan(&host, &["--format", "json", "--diff"]);
    run.assert_success();
    let v: Value = serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{run:?}"));
    let writes = v["writes"].as_array().expect("writes is an array");
    let find = |path: &str| {
        writes
            .iter()
            .find(|w| w["path"] == path)
            .unwrap_or_else(|| panic!("no write {path}: {v:#}"))
            .clone()
    };
    let source = |rel: &str| {
        host.path(&format!("{PKG_DIR}/root_dir/{rel}"))
            .display()
            .to_string()
    };
    assert_eq!(
        find("/etc/pkg/changed.conf"),
        json!({
            "path": "/etc/pkg/changed.conf",
            "kind": "changed",
            "condition": "root_dir overlay",
            "source": source("etc/pkg/changed.conf"),
            "diff": "--- /etc/pkg/changed.conf (host)\n+++ /etc/pkg/changed.conf (root_dir)\n@@ -1,3 +1,3 @@\n a\n-b = 1\n+b = 2\n c\n",
        })
    );
    assert_eq!(
        find("/etc/pkg/new.conf"),
        json!({
            "path": "/etc/pkg/new.conf",
            "kind": "new",
            "condition": "root_dir overlay",
            "source": source("etc/pkg/new.conf"),
        })
    );
    assert_eq!(find("/etc/pkg/same.conf")["kind"], "unchanged");
    assert_eq!(
        find("/lib/pkg/blob.bin")["diff"],
        json!({"not_shown": "binary file, not diffed"})
    );
    assert_eq!(find("/opt/link/x.conf")["kind"], "unknown");
    // Every write is an object with the three fields; state writes say when they happen.
    for w in writes {
        assert!(w["path"].is_string() && w["kind"].is_string(), "{w:#}");
        assert!(w.get("condition").is_some(), "{w:#}");
    }
    assert!(
        writes.iter().any(|w| w["kind"] == "state"
            && w["condition"] == "if the step succeeds"
            && w["path"].as_str().unwrap().contains("s1.sh")),
        "{v:#}"
    );
    assert!(
        writes
            .iter()
            .any(|w| w["kind"] == "lock" && w["condition"].is_null()),
        "{v:#}"
    );
}

#[test]
fn plan_of_a_package_without_overlay_prints_no_overlay_summary() {
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step("apply", Step::new("s1.sh").on_host(false))
            .step("apply-check", Step::new("s1_check.sh").on_host(false)),
    );
    let run = plan(&host, &["--diff"]);
    run.assert_success();
    assert!(overlay_lines(&run).is_empty(), "{run:?}");
    assert!(
        run.out().ends_with("summary: 1 step to run, 0 to skip\n"),
        "{run:?}"
    );
}
