//! The commit a build of the agent embeds (`agent --version`, the `run started` record, the
//! results record, the metrics' build info): read by agent-cli/build.rs, and tested on its own
//! by tests/integration/build_info.rs.
//!
//! In order: `GIT_SHA` from the build's environment when it is set and not empty (a
//! distributor's build, the image's build stage, which has no `.git`); else the git checkout
//! holding this workspace: `HEAD`'s commit, with `-dirty` when a tracked source of the binary
//! ([`SOURCES`]) differs from it; else `unknown` (a build from a source tarball without
//! `GIT_SHA`).
//!
//! `-dirty` is a function of the sources the binary is built from, so two builds of one tree
//! embed the same id: the build script reruns exactly when `HEAD` or one of those sources
//! changes, and other files (docs, scripts, tests, a target directory, untracked scratch files)
//! count neither way, whenever the build script last ran.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What the build embeds, and the files whose change must rerun the build script.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Commit {
    /// The commit id (`<hex>` or `<hex>-dirty`), `GIT_SHA`, or `unknown`.
    pub id: String,
    /// Set when a git checkout was there but could not be read (say, git refuses a checkout
    /// owned by another user): why, for a build warning.
    pub warning: Option<String>,
    /// Existing files and directories: the checkout's `HEAD`, the branch it names, the packed
    /// refs, and the sources of the binary. Empty without a checkout. (Not the index: git
    /// rewrites it on a mere `git status`, and each rewrite would rebuild the agent.)
    pub watch: Vec<PathBuf>,
}

/// What the `agent` binary is built from, relative to the workspace root: a tracked change in
/// one of them makes the build `-dirty`, and a change to one reruns the build script.
pub const SOURCES: &[&str] = &[
    "Cargo.toml",
    "Cargo.lock",
    "agent-cli/Cargo.toml",
    "agent-cli/build.rs",
    "agent-cli/build",
    "agent-cli/src",
    "agent-core/Cargo.toml",
    "agent-core/src",
    "agent-try/Cargo.toml",
    "agent-try/src",
    "agent-macros/Cargo.toml",
    "agent-macros/src",
    "interrupts/Cargo.toml",
    "interrupts/src",
];

/// The commit of the workspace at `root`, or `explicit` (`GIT_SHA`) when it is not empty.
pub fn find(root: &Path, explicit: Option<&str>) -> Commit {
    if let Some(sha) = explicit.filter(|s| !s.is_empty()) {
        return Commit {
            id: sha.to_owned(),
            ..Commit::default()
        };
    }
    match from_git(root) {
        Ok(Some(commit)) => commit,
        other => Commit {
            id: "unknown".to_owned(),
            warning: other.err(),
            ..Commit::default()
        },
    }
}

/// `Ok(None)`: `root` is not the top of a git checkout (a tarball, or a copy vendored into
/// another repository, whose commit is not the agent's). `Err`: a checkout git could not read.
fn from_git(root: &Path) -> Result<Option<Commit>, String> {
    let Ok(top) = git(root, &["rev-parse", "--show-toplevel"]) else {
        return if root.join(".git").exists() {
            Err(format!(
                "{} is a git checkout git cannot read (`git rev-parse` failed): the commit is \
                 `unknown`; set GIT_SHA",
                root.display()
            ))
        } else {
            Ok(None)
        };
    };
    let same = |a: &Path, b: &Path| a.canonicalize().ok() == b.canonicalize().ok();
    if !same(Path::new(&top), root) {
        return Ok(None);
    }
    let head = git(root, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .map_err(|e| format!("{}: no commit at HEAD ({e})", root.display()))?;
    // --no-optional-locks: status neither locks nor rewrites the index, so a build leaves the
    // checkout as it found it (and does not trigger its own rerun).
    let sources: Vec<&str> = SOURCES
        .iter()
        .copied()
        .filter(|s| root.join(s).exists())
        .collect();
    let mut status = vec![
        "--no-optional-locks",
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
    ];
    status.extend(&sources);
    let changes =
        git(root, &status).map_err(|e| format!("{}: git status failed ({e})", root.display()))?;
    let id = if changes.is_empty() {
        head
    } else {
        format!("{head}-dirty")
    };

    let mut watch = Vec::new();
    let mut git_paths = vec!["HEAD", "packed-refs"];
    // The branch HEAD names (none when detached): in a linked worktree HEAD is the
    // worktree's, the refs the main checkout's; `--git-path` resolves both.
    let branch = git(root, &["symbolic-ref", "--quiet", "HEAD"]).ok();
    if let Some(branch) = &branch {
        git_paths.push(branch);
    }
    for name in git_paths {
        let Ok(path) = git(root, &["rev-parse", "--git-path", name]) else {
            continue;
        };
        let path = root.join(path);
        if path.exists() {
            watch.push(path);
        } else if Some(name) == branch.as_deref() {
            // A branch only in packed-refs: its loose file appears in this directory when the
            // branch moves.
            if let Some(dir) = path.parent().filter(|d| d.exists()) {
                watch.push(dir.to_path_buf());
            }
        }
    }
    watch.extend(sources.iter().map(|s| root.join(s)));
    Ok(Some(Commit {
        id,
        warning: None,
        watch,
    }))
}

/// `git -C dir ARGS`' trimmed stdout, or why it failed. The repository is the one at `dir`,
/// whatever `GIT_DIR` and friends a calling hook set.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_COMMON_DIR")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("running git: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
