//! The build's identity: the commit agent-cli/build/commit.rs finds (against throwaway git
//! checkouts), and the binary naming it in `agent --version`, the `run started` record and the
//! results record.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::{FakeHost, Package};

#[path = "../../agent-cli/build/commit.rs"]
mod commit;

/// The commit the binary under test embeds (agent-cli/build.rs).
const EMBEDDED: &str = env!("AGENT_GIT_SHA");

/// `git -C dir ARGS`, which must succeed; its trimmed stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .expect("git is needed to test the embedded commit");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A workspace laid out as this one (some of the binary's sources), committed on `main`.
fn checkout(dir: &Path) -> String {
    std::fs::create_dir_all(dir.join("agent-cli/src")).unwrap();
    std::fs::write(dir.join("Cargo.toml"), "[workspace]\n").unwrap();
    std::fs::write(dir.join("agent-cli/src/main.rs"), "fn main() {}\n").unwrap();
    git(dir, &["init", "--quiet", "--initial-branch=main"]);
    git(dir, &["add", "."]);
    git(dir, &["commit", "--quiet", "-m", "one"]);
    git(dir, &["rev-parse", "HEAD"])
}

#[track_caller]
fn assert_watches(found: &commit::Commit, paths: &[PathBuf]) {
    for path in paths {
        assert!(
            found.watch.contains(path),
            "{} is not watched: {found:?}",
            path.display()
        );
    }
    for path in &found.watch {
        assert!(
            path.exists(),
            "watching a missing path reruns every build: {found:?}"
        );
    }
}

#[test]
fn a_clean_checkout_embeds_head_and_an_edit_of_the_binarys_sources_makes_it_dirty() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let head = checkout(root);
    let found = commit::find(root, None);
    assert_eq!(found.id, head);
    assert_eq!(found.warning, None);
    assert_watches(
        &found,
        &[
            root.join(".git/HEAD"),
            root.join(".git/refs/heads/main"),
            root.join("Cargo.toml"),
            root.join("agent-cli/src"),
        ],
    );

    // Untracked files (a target directory, scratch files) do not make a build dirty: two
    // builds of one commit embed one id.
    std::fs::create_dir(root.join("target")).unwrap();
    std::fs::write(root.join("target/junk"), "x").unwrap();
    std::fs::write(root.join("notes.txt"), "x").unwrap();
    assert_eq!(commit::find(root, None).id, head);
    // Nor does a tracked file the binary is not built from (docs, scripts, tests): the id
    // follows the binary's sources, which rerun the build script when they change.
    std::fs::write(root.join("README.md"), "one\n").unwrap();
    git(root, &["add", "README.md"]);
    git(root, &["commit", "--quiet", "-m", "readme"]);
    let head = git(root, &["rev-parse", "HEAD"]);
    std::fs::write(root.join("README.md"), "two\n").unwrap();
    assert_eq!(commit::find(root, None).id, head);

    std::fs::write(
        root.join("agent-cli/src/main.rs"),
        "fn main() { edited() }\n",
    )
    .unwrap();
    assert_eq!(commit::find(root, None).id, format!("{head}-dirty"));
    // Staged counts too.
    git(root, &["add", "agent-cli/src/main.rs"]);
    assert_eq!(commit::find(root, None).id, format!("{head}-dirty"));
    // The build leaves the index alone (no lock, no rewrite).
    assert!(!root.join(".git/index.lock").exists());
}

#[test]
fn git_sha_from_the_environment_wins_and_an_empty_one_is_unset() {
    let dir = tempfile::tempdir().unwrap();
    let head = checkout(dir.path());
    let given = commit::find(dir.path(), Some("0123abc"));
    assert_eq!(given.id, "0123abc");
    assert!(given.watch.is_empty(), "{given:?}");
    assert_eq!(commit::find(dir.path(), Some("")).id, head);
}

#[test]
fn without_a_checkout_of_its_own_the_commit_is_unknown() {
    // A source tarball.
    let dir = tempfile::tempdir().unwrap();
    let plain = commit::find(dir.path(), None);
    assert_eq!(
        plain,
        commit::Commit {
            id: "unknown".into(),
            warning: None,
            watch: Vec::new(),
        }
    );
    assert_eq!(commit::find(dir.path(), Some("abc")).id, "abc");

    // A copy vendored into another repository: that repository's commit is not the agent's.
    checkout(dir.path());
    let vendored = dir.path().join("vendor/agent");
    std::fs::create_dir_all(&vendored).unwrap();
    std::fs::write(vendored.join("Cargo.toml"), "[workspace]\n").unwrap();
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "--quiet", "-m", "vendor"]);
    assert_eq!(commit::find(&vendored, None).id, "unknown");
}

#[test]
fn a_checkout_git_cannot_read_is_unknown_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".git"), "gitdir: /nonexistent/worktree\n").unwrap();
    let found = commit::find(dir.path(), None);
    assert_eq!(found.id, "unknown");
    assert!(
        found
            .warning
            .as_deref()
            .is_some_and(|w| w.contains("GIT_SHA")),
        "{found:?}"
    );
}

#[test]
fn a_linked_worktree_watches_its_own_head_and_the_shared_branch() {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("main");
    let main_head = checkout(&main);
    let wt = dir.path().join("wt");
    git(
        &main,
        &[
            "worktree",
            "add",
            "--quiet",
            "-b",
            "side",
            wt.to_str().unwrap(),
        ],
    );
    std::fs::write(wt.join("Cargo.toml"), "[workspace]\n# side\n").unwrap();
    git(&wt, &["commit", "--quiet", "-am", "side"]);
    let wt_head = git(&wt, &["rev-parse", "HEAD"]);
    assert_ne!(wt_head, main_head);
    assert!(
        wt.join(".git").is_file(),
        "a linked worktree's .git is a file"
    );

    let found = commit::find(&wt, None);
    assert_eq!(found.id, wt_head);
    let git_dir = main.join(".git");
    assert_watches(
        &found,
        &[
            git_dir.join("worktrees/wt/HEAD"),
            git_dir.join("refs/heads/side"),
        ],
    );
    assert_eq!(commit::find(&main, None).id, main_head);

    // Refs only in packed-refs: the file, and the directory the loose ref will appear in.
    git(&main, &["pack-refs", "--all"]);
    assert!(!git_dir.join("refs/heads/side").exists());
    let packed = commit::find(&wt, None);
    assert_eq!(packed.id, wt_head);
    assert_watches(
        &packed,
        &[git_dir.join("packed-refs"), git_dir.join("refs/heads")],
    );

    // Detached: HEAD holds the commit itself.
    git(&wt, &["checkout", "--quiet", "--detach"]);
    let detached = commit::find(&wt, None);
    assert_eq!(detached.id, wt_head);
    assert_watches(&detached, &[git_dir.join("worktrees/wt/HEAD")]);
}

/// The commit this binary must embed: `GIT_SHA` given to its build, else this checkout's HEAD.
fn expected_commit() -> String {
    if let Some(sha) = option_env!("GIT_SHA").filter(|s| !s.is_empty()) {
        return sha.to_owned();
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new("git")
        .args(["-C", repo.to_str().unwrap(), "rev-parse", "HEAD"])
        .output()
        .expect("git is needed to test the embedded commit");
    assert!(
        out.status.success(),
        "built without GIT_SHA outside a git checkout: nothing to compare the embedded \
         commit {EMBEDDED:?} with ({})",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn the_binary_embeds_the_commit_it_was_built_from() {
    let expected = expected_commit();
    assert!(
        EMBEDDED == expected || EMBEDDED == format!("{expected}-dirty"),
        "embedded {EMBEDDED:?}, built from {expected:?}"
    );
}

#[test]
fn version_prints_the_commit_on_stderr_and_the_version_alone_on_stdout() {
    let host = FakeHost::new();
    for args in [&["--version"][..], &["-V"], &["status", "--version"]] {
        let run = host.agent().args(args).run();
        run.assert_success();
        assert_eq!(run.out().lines().count(), 1, "{args:?}: {run:?}");
        assert_eq!(
            run.err(),
            format!("commit {EMBEDDED}\n"),
            "{args:?}: {run:?}"
        );
    }
}

#[test]
fn run_started_and_the_results_record_name_the_commit() {
    let host = FakeHost::new();
    host.install(&Package::off_host(&["s1.sh"], &["s1_check.sh"]));
    let run = host.stage("apply");
    run.assert_success();
    run.assert_stderr_line_contains(&["run started", &format!("git_sha={EMBEDDED} ")]);
    let path = "var/lib/skyhook/sk1/results/pkg/1.0.0/apply.json";
    let record: Value = serde_json::from_slice(&host.read(path)).unwrap();
    assert_eq!(record["git_sha"], EMBEDDED, "{record:#}");
}

/// Every crate of the workspace that the `agent` binary links (its default features, normal
/// dependencies) is in the build script's list of sources, manifest and `src/`: otherwise an
/// edit of it neither reruns the build script nor marks the build `-dirty`.
#[test]
fn the_build_scripts_sources_are_every_workspace_crate_the_binary_links() {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--offline", "--locked", "--format-version", "1"])
        .current_dir(crate::util::repo())
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let root = PathBuf::from(meta["workspace_root"].as_str().unwrap());
    let local: Vec<&Value> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["source"].is_null())
        .collect();
    let id_of = |name: &str| {
        local
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["id"].as_str().unwrap().to_owned())
    };
    let nodes = meta["resolve"]["nodes"].as_array().unwrap();
    let mut linked = vec![id_of("agent-cli").expect("agent-cli is a workspace package")];
    let mut i = 0;
    while i < linked.len() {
        let node = nodes
            .iter()
            .find(|n| n["id"] == linked[i].as_str())
            .unwrap();
        for dep in node["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            let id = dep["pkg"].as_str().unwrap();
            if normal && local.iter().any(|p| p["id"] == id) && !linked.iter().any(|l| l == id) {
                linked.push(id.to_owned());
            }
        }
        i += 1;
    }
    let mut missing = Vec::new();
    for id in &linked {
        let package = local.iter().find(|p| p["id"] == id.as_str()).unwrap();
        let manifest = Path::new(package["manifest_path"].as_str().unwrap());
        let dir = manifest.parent().unwrap().strip_prefix(&root).unwrap();
        for path in [dir.join("Cargo.toml"), dir.join("src")] {
            let path = path.to_str().unwrap().to_owned();
            if !commit::SOURCES.contains(&path.as_str()) {
                missing.push(path);
            }
        }
    }
    assert!(
        linked.len() >= 4,
        "agent-cli links the workspace crates: {linked:?}"
    );
    assert!(
        missing.is_empty(),
        "not in agent-cli/build/commit.rs SOURCES: {missing:?}"
    );
}
