//! The README's first commands. `examples/demo.sh`: `agent try` of the example package against
//! a lower root the demo builds, from a static busybox or from this machine's own tools
//! (`DEMO_LOWER=host-tools`, what a machine without a static busybox gets), run as root and as
//! an unprivileged user; nothing outside its sandbox directory changes. "A short tour": every
//! command has the tour's scratch ROOT, and run as written (in a temp dir) they succeed and
//! write nowhere else.

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, chown};
use std::path::{Path, PathBuf};

use crate::docs_console::agent_invocations;
use crate::util::console;
use crate::util::{AgentCmd, BASE_ENV, Run, Snapshot, repo, repo_file, sha256_hex, tree_stamp};

/// The uid and gid of `nobody`, the unprivileged user the demo is run as.
const NOBODY: u32 = 65534;

/// Who runs the demo.
#[derive(Clone, Copy, PartialEq, Eq)]
enum User {
    /// The test process's own user (root for these tests).
    Caller,
    /// A user with no capabilities and a uid other than 0: `nobody` via `setpriv` when the
    /// test is root of the machine, a user of a nested user namespace (`unshare --map-user`)
    /// when it is root of a user namespace, the test's own user otherwise.
    Unprivileged,
}

/// A finished run of the demo and the temp dir it ran in.
struct DemoRun {
    run: Run,
    /// TMPDIR of the run: the demo makes its sandbox directory here.
    tmp: PathBuf,
    _dir: tempfile::TempDir,
}

impl DemoRun {
    fn out(&self) -> String {
        self.run.out()
    }

    /// The `==> ` lines, cut to their first three words.
    fn sections(&self) -> Vec<String> {
        self.out()
            .lines()
            .filter(|l| l.starts_with("==> "))
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .collect()
    }

    /// The `==> lower root: ...` line.
    fn lower_root_line(&self) -> String {
        let out = self.out();
        out.lines()
            .find(|l| l.starts_with("==> lower root: "))
            .unwrap_or_else(|| panic!("no lower root line:\n{out}"))
            .to_owned()
    }

    /// What is left in TMPDIR.
    fn left_in_tmp(&self) -> Vec<String> {
        fs::read_dir(&self.tmp)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

/// Whether this process is in the machine's initial user namespace (its uid map is the
/// identity over every uid).
fn in_initial_user_namespace() -> bool {
    let map = fs::read_to_string("/proc/self/uid_map").expect("reading /proc/self/uid_map");
    map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"]
}

/// Whether this process has no effective capabilities and a uid other than 0.
fn is_unprivileged() -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.split_whitespace().next().unwrap_or("").to_owned())
    };
    field("Uid:").is_some_and(|uid| uid != "0")
        && field("CapEff:").is_some_and(|caps| caps.chars().all(|c| c == '0'))
}

/// Fails the run (exit 99) unless the shell runs without capabilities and not as uid 0, then
/// runs the demo with bash.
const UNPRIVILEGED_GUARD: &str = r#"if [ "$(id -u)" = 0 ] || ! grep -Eq '^CapEff:[[:space:]]*0+$' /proc/self/status; then
    echo "demo test: not an unprivileged user (uid $(id -u))" >&2
    exit 99
fi
exec bash "$@""#;

/// A command in `cwd` with the environment of a user's shell instead of the agent's base
/// environment: the usual PATH (after `path_first`, when not empty) and HOME.
fn user_shell_env(cwd: &Path, home: &Path, path_first: &str) -> AgentCmd {
    let mut cmd = AgentCmd::in_dir(cwd);
    for (k, _) in BASE_ENV {
        cmd = cmd.env_remove(k);
    }
    let path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
    let path = if path_first.is_empty() {
        path.to_owned()
    } else {
        format!("{path_first}:{path}")
    };
    cmd.env("PATH", path).env("HOME", home)
}

/// Run `examples/demo.sh ARGS` as `user` with the test's agent binary (`AGENT`), a TMPDIR of
/// its own, a user's minimal environment and `env` on top.
fn run_demo(user: User, env: &[(&str, &str)], args: &[&str]) -> DemoRun {
    let dir = tempfile::Builder::new()
        .prefix("agent-demo-it-")
        .tempdir()
        .expect("create temp dir");
    let base = fs::canonicalize(dir.path()).unwrap();
    let tmp = base.join("tmp");
    fs::create_dir(&tmp).unwrap();
    let mut agent = PathBuf::from(env!("CARGO_BIN_EXE_agent"));
    let mut program = PathBuf::from("/bin/bash");
    let mut prefix: Vec<String> = Vec::new();
    if user == User::Unprivileged {
        // The user must reach the binary and own TMPDIR.
        fs::set_permissions(&base, fs::Permissions::from_mode(0o755)).unwrap();
        let copy = base.join("agent");
        fs::copy(&agent, &copy).expect("copy the agent binary");
        fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).unwrap();
        agent = copy;
        if is_unprivileged() {
            // Already an unprivileged user: run the demo as it is.
        } else if in_initial_user_namespace() {
            chown(&tmp, Some(NOBODY), Some(NOBODY)).unwrap();
            program = PathBuf::from("/usr/bin/setpriv");
            prefix = [
                format!("--reuid={NOBODY}"),
                format!("--regid={NOBODY}"),
                "--clear-groups".into(),
                "/bin/bash".into(),
            ]
            .into();
        } else {
            // Root of a user namespace: a nested one maps this user (0) to `nobody` inside;
            // on the machine it is the unprivileged user that made the outer namespace.
            program = PathBuf::from("/usr/bin/unshare");
            prefix = [
                "--user".to_owned(),
                format!("--map-user={NOBODY}"),
                format!("--map-group={NOBODY}"),
                "/bin/bash".into(),
            ]
            .into();
        }
        prefix.extend(["-c".into(), UNPRIVILEGED_GUARD.into(), "bash".into()]);
    }
    let mut cmd = user_shell_env(&base, &tmp, "")
        .env("TMPDIR", &tmp)
        .env("AGENT", &agent);
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    let run = cmd
        .args(prefix)
        .arg(repo().join("examples/demo.sh"))
        .args(args)
        .run_program(&program);
    DemoRun {
        run,
        tmp,
        _dir: dir,
    }
}

/// The report of a successful demo: every stage succeeded, the files the package installs
/// are added, the earlier settings file shows its diff, the interrupt would reboot, the lower
/// root is unchanged; all on stdout, in under 45 lines.
#[track_caller]
fn assert_demo_report(demo: &DemoRun) {
    demo.run.assert_success();
    let stdout = demo.out();
    assert_eq!(
        demo.run.err(),
        "",
        "the demo writes its whole story on stdout\n{:?}",
        demo.run
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.len() <= 45, "{} lines:\n{stdout}", lines.len());
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
    for line in [
        "  modified  /etc/gpu-node-tuning/node-tuning.conf  (",
        "      -power_limit_percent=80\n",
        "      +power_limit_percent=100\n",
        "  interrupt node_restart_0: would run: reboot\n",
        "result: succeeded; the lower root was not written (verified: ",
    ] {
        assert!(stdout.contains(line), "{line:?}:\n{stdout}");
    }
}

/// The sections of a run with `--clean`.
fn clean_sections() -> [String; 5] {
    [
        format!("==> agent {},", env!("CARGO_PKG_VERSION")),
        "==> lower root:".into(),
        "==> agent try".into(),
        "==> the lower".into(),
        "==> removed the".into(),
    ]
}

/// What the demo could touch outside its sandbox directory: where the package and the agent
/// write on a real host, where an installed busybox and the package manager's record of it
/// would go, the entries of the system directories, and the package's own source.
struct Outside {
    trees: Vec<(PathBuf, Snapshot)>,
    files: Vec<(PathBuf, Option<String>)>,
    listings: Vec<(PathBuf, Vec<String>)>,
}

/// Directories stamped whole ([`tree_stamp`]): none of them is written by anything else.
fn outside_trees() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = [
        "/etc/gpu-node-tuning",
        "/etc/sysctl.d",
        "/var/lib/gpu-node-tuning",
        "/var/lib/skyhook",
        "/var/log/skyhook",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    dirs.push(repo().join("examples/packages/gpu-node-tuning"));
    dirs
}

/// Files stamped one by one (absent is a state too).
const OUTSIDE_FILES: &[&str] = &[
    "/bin/busybox",
    "/usr/bin/busybox",
    "/var/lib/dpkg/status",
    "/etc/hostname",
];

/// Directories whose entry names are compared (their files change for other reasons).
const OUTSIDE_LISTINGS: &[&str] = &[
    "/etc",
    "/var",
    "/var/lib",
    "/usr",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/local/bin",
];

impl Outside {
    fn now() -> Self {
        let file_stamp = |p: &Path| {
            fs::symlink_metadata(p).ok().map(|m| {
                let content = if m.is_file() {
                    sha256_hex(&fs::read(p).unwrap())
                } else {
                    String::new()
                };
                format!(
                    "{:o} {} ino={} ctime={}.{} {content}",
                    m.mode(),
                    m.len(),
                    m.ino(),
                    m.ctime(),
                    m.ctime_nsec()
                )
            })
        };
        let names = |p: &Path| {
            let mut v: Vec<String> = fs::read_dir(p)
                .map(|d| {
                    d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            v
        };
        Self {
            trees: outside_trees()
                .into_iter()
                .map(|d| {
                    let s = tree_stamp(&d);
                    (d, s)
                })
                .collect(),
            files: OUTSIDE_FILES
                .iter()
                .map(|f| (PathBuf::from(f), file_stamp(Path::new(f))))
                .collect(),
            listings: OUTSIDE_LISTINGS
                .iter()
                .map(|d| (PathBuf::from(d), names(Path::new(d))))
                .collect(),
        }
    }

    #[track_caller]
    fn assert_unchanged(&self, demo: &DemoRun) {
        let after = Self::now();
        for ((dir, before), (_, now)) in self.trees.iter().zip(&after.trees) {
            before.assert_unchanged(now, &format!("{} after the demo", dir.display()));
        }
        for ((file, before), (_, now)) in self.files.iter().zip(&after.files) {
            assert_eq!(
                before,
                now,
                "{} changed during the demo\n{:?}",
                file.display(),
                demo.run
            );
        }
        for ((dir, before), (_, now)) in self.listings.iter().zip(&after.listings) {
            assert_eq!(
                before,
                now,
                "the entries of {} changed during the demo\n{:?}",
                dir.display(),
                demo.run
            );
        }
    }
}

/// The demo as the README runs it, with `--clean`: the report with the installed files and the
/// diff of the earlier settings, in under 45 lines, the lower root unchanged, nothing left
/// behind.
#[test]
fn demo_tries_the_example_lifecycle_and_shows_the_report_in_under_45_lines() {
    require_root!();
    let demo = run_demo(User::Caller, &[], &["--clean"]);
    assert_demo_report(&demo);
    assert_eq!(demo.sections(), clean_sections(), "{}", demo.out());
    assert_eq!(
        demo.left_in_tmp(),
        Vec::<String>::new(),
        "--clean left these"
    );
}

/// Without a static busybox (forced with `DEMO_LOWER=host-tools`), the demo builds its lower
/// root from this machine's own `sh` and utilities with their shared libraries and dynamic
/// loader, runs the whole lifecycle as root and changes nothing outside its sandbox directory.
#[test]
fn demo_builds_its_lower_root_from_host_tools_without_busybox_and_touches_nothing_outside() {
    require_root!();
    let outside = Outside::now();
    let demo = run_demo(User::Caller, &[("DEMO_LOWER", "host-tools")], &[]);
    assert_demo_report(&demo);
    outside.assert_unchanged(&demo);
    let line = demo.lower_root_line();
    assert!(
        line.contains(" host tools (sh, sed, awk, ...) and ") && !line.contains("busybox"),
        "{line}"
    );
    // The kept sandbox directory holds the lower root: the host's own tools, no busybox.
    let sandboxes = demo.left_in_tmp();
    assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
    let lower = demo.tmp.join(&sandboxes[0]).join("lower");
    assert!(!lower.join("bin/busybox").exists());
    for tool in ["sh", "sed", "awk", "grep", "cmp", "date"] {
        let meta = fs::symlink_metadata(lower.join("bin").join(tool)).unwrap();
        assert!(meta.is_file(), "bin/{tool} is not a regular file");
        assert_eq!(meta.mode() & 0o777, 0o755, "bin/{tool}");
    }
    let libs: Vec<_> = ["lib", "lib64", "usr/lib"]
        .iter()
        .map(|d| lower.join(d))
        .filter(|d| d.is_dir())
        .collect();
    assert!(
        !libs.is_empty(),
        "no shared libraries in {}",
        lower.display()
    );
}

/// The same as an unprivileged user (no capabilities, not uid 0): `agent try` runs in a user
/// namespace of that user's own, and nothing outside the sandbox directory changes.
#[test]
fn demo_runs_as_an_unprivileged_user_with_the_host_tools_lower_root() {
    let outside = Outside::now();
    let demo = run_demo(
        User::Unprivileged,
        &[("DEMO_LOWER", "host-tools")],
        &["--clean"],
    );
    assert_demo_report(&demo);
    outside.assert_unchanged(&demo);
    assert_eq!(demo.sections(), clean_sections(), "{}", demo.out());
    assert!(
        demo.lower_root_line().contains(" host tools "),
        "{}",
        demo.out()
    );
    assert_eq!(
        demo.left_in_tmp(),
        Vec::<String>::new(),
        "--clean left these"
    );
}

/// A `DEMO_LOWER` the demo does not know: exit 2, naming the value and the choices, before
/// building or creating anything.
#[test]
fn demo_refuses_an_unknown_lower_root_kind_with_exit_2() {
    let demo = run_demo(User::Caller, &[("DEMO_LOWER", "alpine")], &[]);
    demo.run.assert_code(2);
    assert_eq!(
        demo.run.err(),
        "demo: DEMO_LOWER must be auto, busybox or host-tools, got 'alpine'\n"
    );
    assert_eq!(demo.run.out(), "");
    assert_eq!(demo.left_in_tmp(), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------------
// README.md, "A short tour"
// ---------------------------------------------------------------------------------------------

/// The tour's scratch directory and the ROOT every command of it names.
const TOUR_DIR: &str = "/tmp/demo";
const TOUR_ROOT: &str = "/tmp/demo/root";

/// The README's "A short tour" section.
fn tour() -> String {
    let readme = repo_file("README.md");
    let start = readme
        .find("\n## A short tour\n")
        .expect("README.md has a section \"A short tour\"")
        + 1;
    let rest = &readme[start..];
    let end = rest[1..].find("\n## ").map_or(rest.len(), |i| i + 1);
    rest[..end].to_owned()
}

/// The ROOT each `agent` invocation of `cmd` works on (`None` for one that takes none).
fn roots_of(cmd: &str) -> Vec<Option<String>> {
    agent_invocations(cmd)
        .into_iter()
        .map(|args| {
            let at = match args.first().map(String::as_str) {
                Some("validate") => return None,
                Some("plan") => 2,
                _ => 1,
            };
            Some(
                args.get(at)
                    .unwrap_or_else(|| panic!("{cmd}: no ROOT"))
                    .clone(),
            )
        })
        .collect()
}

/// The tour copied as a newcomer would: every command names the scratch ROOT (checked before
/// anything runs), the set-up names only paths below the scratch directory; then, run as
/// written with the scratch directory in a temp dir, every command succeeds, shows the first
/// line the README shows, and the package's files land in the scratch root and nowhere else.
#[test]
fn readme_tour_runs_every_command_against_its_scratch_root_and_writes_nothing_else() {
    require_root!();
    let tour = tour();
    let commands: Vec<(String, String)> = console::parse("README.md", &tour)
        .unwrap()
        .commands
        .into_iter()
        .map(|c| (c.text, c.expected.join("\n")))
        .collect();
    let mut setup = 0;
    for (cmd, _) in &commands {
        let roots = roots_of(cmd);
        for root in roots.iter().flatten() {
            assert_eq!(
                root, TOUR_ROOT,
                "the tour runs `{cmd}` against another ROOT"
            );
        }
        if roots.is_empty() {
            // The set-up names only paths below the scratch directory.
            setup += 1;
            for word in cmd.split_whitespace().filter(|w| w.starts_with('/')) {
                assert!(
                    word.starts_with(&format!("{TOUR_DIR}/")),
                    "the tour's set-up names {word}, outside {TOUR_DIR}:\n{cmd}"
                );
            }
        }
    }
    assert!(commands.len() >= 9, "{commands:?}");
    assert!(setup >= 4, "the tour has no set-up commands: {commands:?}");

    let dir = tempfile::Builder::new()
        .prefix("agent-tour-it-")
        .tempdir()
        .unwrap();
    let scratch = fs::canonicalize(dir.path()).unwrap().join("demo");
    let scratch = scratch.to_str().unwrap();
    let out = dir.path().join("out");
    fs::create_dir(&out).unwrap();
    let mut script = String::new();
    for (i, (cmd, _)) in commands.iter().enumerate() {
        let cmd = cmd.replace(TOUR_DIR, scratch);
        let o = out.display();
        let _ = writeln!(script, "{cmd} >{o}/{i}.out 2>&1; echo $? >{o}/{i}.rc");
    }
    let agent_dir = Path::new(env!("CARGO_BIN_EXE_agent")).parent().unwrap();
    let outside = Outside::now();
    let run = user_shell_env(&repo(), dir.path(), agent_dir.to_str().unwrap())
        .args(["-c", &script])
        .run_program(Path::new("/bin/bash"));
    run.assert_success();
    for (i, (cmd, shown)) in commands.iter().enumerate() {
        let rc = fs::read_to_string(out.join(format!("{i}.rc"))).unwrap();
        let real = fs::read_to_string(out.join(format!("{i}.out")))
            .unwrap()
            .replace(scratch, TOUR_DIR);
        assert_eq!(rc.trim(), "0", "`{cmd}` failed:\n{real}");
        match shown.lines().next() {
            None => assert_eq!(real, "", "`{cmd}`"),
            Some("...") => {}
            Some(first) => assert_eq!(real.lines().next(), Some(first), "`{cmd}`:\n{real}"),
        }
    }
    let demo = DemoRun {
        run,
        tmp: out.clone(),
        _dir: dir,
    };
    outside.assert_unchanged(&demo);
    let root = Path::new(scratch).join("root");
    for file in [
        "etc/gpu-node-tuning/README",
        "srv/node/etc/sysctl.d/90-gpu-node-tuning.conf",
        "srv/node/etc/gpu-node-tuning/activation",
        "var/lib/skyhook/demo/metrics/gpu-node-tuning.prom",
    ] {
        assert!(
            root.join(file).is_file(),
            "{file} is not in the scratch root"
        );
    }
}

/// examples/make-root.sh's roots (README's tour, the docs, the demo's lower root) hold stand-ins
/// for the commands that act on a machine, with either set of tools: busybox's `reboot`
/// there would call reboot(2) on this machine when an interrupt runs as root against the root.
/// Checked by reading them: running one here is what must never happen.
#[test]
fn make_root_gives_stand_ins_for_the_commands_that_act_on_a_machine() {
    for tools in ["busybox", "host-tools"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("root");
        let out = std::process::Command::new(repo().join("examples/make-root.sh"))
            .args(["--tools", tools])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "make-root.sh --tools {tools}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for name in [
            "reboot",
            "halt",
            "poweroff",
            "shutdown",
            "systemctl",
            "service",
        ] {
            let path = dir.join("bin").join(name);
            let meta = fs::symlink_metadata(&path)
                .unwrap_or_else(|e| panic!("--tools {tools}: {}: {e}", path.display()));
            assert!(
                meta.is_file(),
                "--tools {tools}: {name} is not a regular file"
            );
            assert!(
                meta.mode() & 0o111 != 0,
                "--tools {tools}: {name} is not executable"
            );
            let text = fs::read_to_string(&path).unwrap();
            assert!(
                text.starts_with("#!/bin/sh\n") && text.contains("stand-in"),
                "--tools {tools}: {name} is not a stand-in:\n{text}"
            );
            assert!(
                !text.contains("busybox"),
                "--tools {tools}: {name}:\n{text}"
            );
        }
    }
}
