//! Every console block of the repository's Markdown (README.md, docs/*.md, the examples') is a
//! test: its `$ ` commands run as a reader types them, and each prints what the block shows
//! (the format: [`crate::util::console`]). `DOCS_BLESS=1` rewrites the shown lines of the
//! blocks that differ from a real run instead of failing (README.md, "Docs are tests").
//!
//! How they run: each document's commands in order in one `sh` (so `cd`, `export` and the
//! files a block makes carry over to the next block), stdout and stderr in one stream as a
//! terminal shows them, the repository as the working directory, the built `agent` first on
//! PATH, in a mount namespace of their own where a fresh tmpfs is `/tmp` and every other
//! filesystem of this machine is read-only: the docs' fixed paths (`/tmp/demo`) cannot collide
//! between documents or with anything else, and a command cannot write outside `/tmp`. And in
//! a PID namespace of their own: a `reboot` a step runs (the tour's root has busybox's)
//! reaches that namespace's init, never this machine's, and nothing they start outlives them.
//! Before anything runs, a stage, an interrupt, a `reset --yes` or an `agent try` whose ROOT
//! (LOWER) is not a scratch directory under `/tmp` is refused.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::util::console::{self, Matcher, Shown};
use crate::util::{AgentCmd, BASE_ENV, repo};

/// The variable that turns the check into a rewrite of the docs.
const BLESS: &str = "DOCS_BLESS";

/// How long one document's commands may take together.
const DOC_TIMEOUT: Duration = Duration::from_secs(180);

/// Set up the mount namespace (`$1` is the repository), then hand over to the commands:
/// every mount but the kernel's own file systems read-only (with the flags it has, which a
/// user namespace may not drop), a tmpfs on /tmp; checked without writing anything.
const PRELUDE: &str = r#"(set -e
while read -r _ _ _ _ point options _; do
    case $point in /proc | /proc/* | /sys | /sys/* | /dev | /dev/*) continue ;; esac
    case ,$options, in *,ro,*) continue ;; esac
    rest=${options#rw}
    mount -o "remount,bind,ro$rest" "$point" 2>/dev/null || [ "$point" != / ]
done </proc/self/mountinfo
# The repository and the agent's directory stay where they are when they are under /tmp (a
# clone in /tmp): bound aside on a scratch tmpfs over /mnt, then moved back over the new /tmp.
mount -t tmpfs docs-keep /mnt
n=0
for p in "$1" "$2"; do
    case $p in /tmp/*) mkdir "/mnt/$n" && mount --rbind "$p" "/mnt/$n" ;; esac
    n=$((n + 1))
done
mount -t tmpfs -o mode=1777 docs-tmp /tmp
n=0
for p in "$1" "$2"; do
    case $p in /tmp/*) mkdir -p "$p" && mount --move "/mnt/$n" "$p" ;; esac
    n=$((n + 1))
done
umount /mnt
if [ -w / ] || [ -w "$1" ]; then
    echo "docs: / or $1 is still writable in the docs' mount namespace" >&2
    exit 1
fi
) >&2 || exit 97
cd "$1" && shift 2 || exit 97
exec 2>&1 </dev/null
"#;

/// The Markdown files of the repository (not under `target/` or a hidden directory).
fn markdown_files() -> Vec<String> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap())
            .collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = format!("{rel}{name}");
            if entry.file_type().unwrap().is_dir() {
                if !name.starts_with('.') && name != "target" {
                    walk(&entry.path(), &format!("{path}/"), out);
                }
            } else if Path::new(&name).extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo(), "", &mut out);
    out
}

/// The simple commands of a shell command line, as words (quotes removed; `|`, `;`, `&`,
/// parentheses, backquotes and newlines separate commands). Enough to find the `agent`
/// invocations of the docs, not a shell.
pub fn simple_commands(cmd: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = vec![Vec::new()];
    let mut word = String::new();
    let mut started = false;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let flush = |word: &mut String, started: &mut bool, out: &mut Vec<Vec<String>>| {
        if *started {
            out.last_mut().unwrap().push(std::mem::take(word));
            *started = false;
        }
    };
    for c in cmd.chars() {
        if std::mem::take(&mut escaped) {
            // `\` and a newline continue the line; `\x` is `x`.
            if c != '\n' {
                word.push(c);
                started = true;
            }
            continue;
        }
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, '\\') => escaped = true,
            (None, '|' | ';' | '&' | '(' | ')' | '`' | '\n') => {
                flush(&mut word, &mut started, &mut out);
                out.push(Vec::new());
            }
            (None, c) if c.is_whitespace() => flush(&mut word, &mut started, &mut out),
            (None, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    flush(&mut word, &mut started, &mut out);
    out.retain(|w| !w.is_empty());
    out
}

/// Whether `word` is a variable assignment (`NAME=value`) before a command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The arguments of each `agent` invocation in `cmd` (after assignments and `env`/`exec`).
pub fn agent_invocations(cmd: &str) -> Vec<Vec<String>> {
    simple_commands(cmd)
        .into_iter()
        .filter_map(|words| {
            let at = words
                .iter()
                .position(|w| !is_assignment(w) && !matches!(w.as_str(), "env" | "exec"))?;
            let program = Path::new(&words[at]).file_name()?.to_str()?;
            (program == "agent").then(|| words[at + 1..].to_vec())
        })
        .collect()
}

/// Why running `cmd` could change this machine's own files: a stage or interrupt, a reset
/// with `--yes` or an `agent try` whose ROOT (LOWER) is not a scratch directory under /tmp.
pub fn touches_the_host(cmd: &str) -> Option<String> {
    let scratch = |p: &str| p.starts_with("/tmp/") && !p.split('/').any(|c| c == "..");
    for args in agent_invocations(cmd) {
        let flag = |f: &str| args.iter().any(|a| a == f);
        if ["--help", "-h", "--version", "-V"].iter().any(|f| flag(f)) {
            continue;
        }
        let Some(sub) = args.first().map(String::as_str) else {
            continue;
        };
        let positional: Vec<&str> = args[1..]
            .iter()
            .map(String::as_str)
            .filter(|a| !a.starts_with('-'))
            .collect();
        let root = match sub {
            mode if crate::util::MODES.contains(&mode) => {
                let needed = if mode == "interrupt" { 3 } else { 2 };
                if positional.len() < needed {
                    return Some(format!(
                        "`agent {mode}` in its legacy form runs on ROOT /root"
                    ));
                }
                positional[0]
            }
            "reset" if flag("--yes") => positional.first().copied().unwrap_or("(none)"),
            "try" => {
                let at = args.iter().position(|a| a == "--root");
                let value = at.and_then(|i| args.get(i + 1)).map(String::as_str);
                match value.or_else(|| args.iter().find_map(|a| a.strip_prefix("--root="))) {
                    Some(lower) => lower,
                    None => return Some("`agent try` without --root runs on LOWER /".to_owned()),
                }
            }
            _ => continue,
        };
        if !scratch(root) {
            return Some(format!("`agent {sub}` runs on ROOT {root}"));
        }
    }
    None
}

/// What one command printed (stdout and stderr as one stream) and its exit status.
#[derive(Debug)]
pub struct Ran {
    pub output: String,
    pub code: i32,
}

/// The tag the script prints after each command: `\x1edocs-end INDEX STATUS\x1e`.
const END: &str = "\x1edocs-end ";

/// Run `commands` in order in one shell, in the mount namespace of the docs.
pub fn run_commands(commands: &[Shown]) -> Result<Vec<Ran>, String> {
    let root = repo();
    let agent = Path::new(env!("CARGO_BIN_EXE_agent"));
    // Under /tmp they are kept (the prelude moves them over the new /tmp); /tmp itself cannot be.
    for (what, path) in [
        ("the repository", root.as_path()),
        ("the agent binary's directory", agent.parent().unwrap()),
    ] {
        if path == Path::new("/tmp") {
            crate::util::cannot_run(&format!(
                "{what} is /tmp, which the docs' commands get a fresh tmpfs for"
            ));
        }
    }
    let mut script = PRELUDE.to_owned();
    for (k, c) in commands.iter().enumerate() {
        script.push_str(&c.text);
        let _ = writeln!(script, "\nprintf '\\036docs-end {k} %d\\036' \"$?\"");
    }
    let mut cmd = AgentCmd::in_dir(&root);
    for (k, _) in BASE_ENV {
        cmd = cmd.env_remove(k);
    }
    let path = format!(
        "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        agent.parent().unwrap().display()
    );
    let run = cmd
        .env("PATH", path)
        .env("HOME", "/tmp")
        .env("LANG", "C.UTF-8")
        .timeout(DOC_TIMEOUT)
        .args(["--mount", "--propagation", "private", "--pid", "--fork"])
        .args(["--mount-proc", "--kill-child", "/bin/sh", "-c"])
        .arg(&script)
        .arg("sh")
        .arg(&root)
        .arg(agent.parent().unwrap())
        .run_program(Path::new("/usr/bin/unshare"));
    if run.code() == Some(97) {
        return Err(format!(
            "could not set up the docs' mount namespace (a tmpfs on /tmp, the rest read-only):\n{}",
            run.err()
        ));
    }
    let out = run.out();
    let mut rest = out.as_str();
    let mut ran = Vec::new();
    for (k, c) in commands.iter().enumerate() {
        let tag = format!("{END}{k} ");
        let Some(at) = rest.find(&tag) else {
            return Err(format!(
                "line {}: the shell ended before `{}` did ({}); it printed:\n{rest}{}",
                c.line,
                c.text,
                run.status,
                run.err()
            ));
        };
        let after = &rest[at + tag.len()..];
        let end = after.find('\x1e').expect("the end of the tag");
        ran.push(Ran {
            output: rest[..at].to_owned(),
            code: after[..end].parse().expect("an exit status"),
        });
        rest = &after[end + 1..];
    }
    Ok(ran)
}

/// What checking one document found: nothing (`Ok`), or every problem with its `file:line`.
/// With `bless`, blocks that differ are rewritten instead (and listed in `Ok`).
pub fn check_doc(name: &str, text: &str, bless: bool) -> Result<Vec<String>, Vec<String>> {
    let sessions = console::parse(name, text)?;
    if sessions.commands.is_empty() {
        return Ok(Vec::new());
    }
    let refused: Vec<String> = sessions
        .commands
        .iter()
        .filter_map(|c| {
            touches_the_host(&c.text).map(|why| {
                format!(
                    "{name}:{}: not run: {why}, this machine's own files. The docs run their \
                     commands only against a scratch root under /tmp: use one, or mark the \
                     block `<!-- not run: REASON -->`",
                    c.line
                )
            })
        })
        .collect();
    if !refused.is_empty() {
        return Err(refused);
    }
    let ran = run_commands(&sessions.commands).map_err(|e| vec![format!("{name}: {e}")])?;
    let m = Matcher::new(sessions.commands.iter().map(|c| c.text.as_str()));
    let mut differ = Vec::new();
    let mut problems = Vec::new();
    let mut missing = Vec::new();
    for (k, (c, r)) in sessions.commands.iter().zip(&ran).enumerate() {
        if console::shows(&m, &c.expected, &r.output, r.code) {
            continue;
        }
        let new = console::bless(&m, &c.expected, &r.output, r.code);
        if r.code == 127 {
            // A program that is not there (not built yet, not installed): never blessed.
            missing.push(format!(
                "{name}:{}: `{}` exited 127, not found:\n{}",
                c.line, c.text, r.output
            ));
            continue;
        }
        problems.push(format!(
            "{name}:{}: `{}` (exit {}) printed other lines than the doc shows; `-` the doc's, \
             `+` the real ones ({BLESS}=1 rewrites them):\n{}",
            c.line,
            c.text,
            r.code,
            console::diff(name, c.expected_at, &c.expected, &new)
        ));
        differ.push((k, new));
    }
    if !missing.is_empty() {
        missing.extend(problems);
        Err(missing)
    } else if problems.is_empty() {
        Ok(Vec::new())
    } else if bless {
        let path = repo().join(name);
        std::fs::write(&path, console::rewrite(text, &sessions.commands, &differ))
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        Ok(problems)
    } else {
        Err(problems)
    }
}

/// Every console block of every Markdown file of the repository prints what it shows, or is
/// marked not run with a reason (with DOCS_BLESS=1: is rewritten to what it prints).
#[test]
fn console_blocks_of_the_docs_print_what_they_show() {
    require_root!();
    let bless = std::env::var_os(BLESS).is_some_and(|v| v == "1");
    let started = Instant::now();
    let docs: Vec<(String, String)> = markdown_files()
        .into_iter()
        .map(|name| {
            let text = crate::util::repo_file(&name);
            (name, text)
        })
        .collect();
    let results: Vec<Result<Vec<String>, Vec<String>>> = std::thread::scope(|s| {
        let running: Vec<_> = docs
            .iter()
            .map(|(name, text)| s.spawn(move || check_doc(name, text, bless)))
            .collect();
        running.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut failures = Vec::new();
    for result in results {
        match result {
            Ok(rewritten) => {
                for r in rewritten {
                    eprintln!("{BLESS}: rewrote {r}");
                }
            }
            Err(problems) => failures.extend(problems),
        }
    }
    assert!(docs.iter().any(|(n, _)| n == "README.md"), "{docs:?}");
    assert!(
        failures.is_empty(),
        "{} problem(s) in the docs' console blocks:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    eprintln!(
        "the console blocks of {} Markdown files ran in {:?}",
        docs.len(),
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// The checker itself
// ---------------------------------------------------------------------------------------------

fn lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_owned).collect()
}

#[test]
fn a_block_with_other_output_fails_with_a_diff_naming_the_file_and_line() {
    require_root!();
    let doc = "# A doc\n\n```console\n$ echo hello; echo world\nhello\nplanet\n```\n";
    let problems = check_doc("scratch.md", doc, false).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    let p = &problems[0];
    assert!(
        p.starts_with("scratch.md:4: `echo hello; echo world` (exit 0) printed other lines"),
        "{p}"
    );
    assert!(p.contains("\n  scratch.md:5  hello\n"), "{p}");
    assert!(p.contains("\n- scratch.md:6  planet\n+ world\n"), "{p}");
}

#[test]
fn blocks_that_show_the_real_output_pass_and_carry_their_state_to_the_next_block() {
    require_root!();
    let doc = "```console\n\
               $ cd /tmp && mkdir demo && echo made >demo/file && export SHOWN=yes\n\
               ```\n\
               \n\
               Then:\n\
               \n\
               ```console\n\
               $ cat demo/file; pwd; echo \"$SHOWN\" >&2\n\
               made\n\
               /tmp\n\
               yes\n\
               $ [ -w /etc ] || echo /etc is read-only; [ -w \"$OLDPWD\" ] || echo so is the repository\n\
               /etc is read-only\n\
               so is the repository\n\
               $ false\n\
               [exit 1]\n\
               ```\n";
    assert_eq!(check_doc("scratch.md", doc, false), Ok(Vec::new()));
}

#[test]
fn a_command_that_exits_otherwise_than_shown_fails() {
    require_root!();
    let doc = "```console\n$ echo no; exit_code() { return 3; }; exit_code\nno\n```\n";
    let problems = check_doc("scratch.md", doc, false).unwrap_err();
    assert!(problems[0].contains("(exit 3)"), "{problems:?}");
    assert!(problems[0].contains("\n+ [exit 3]\n"), "{problems:?}");
}

#[test]
fn bracketed_dots_match_any_text_within_one_line() {
    let m = Matcher::default();
    assert!(m.line_matches("started pid [..] at [..]", "started pid 42 at noon"));
    assert!(m.line_matches("[..]", "anything at all"));
    assert!(m.line_matches("a[..]b", "ab"));
    assert!(m.line_matches("a[..]b[..]b", "a b b b"));
    assert!(!m.line_matches("started pid [..] at [..]", "stopped pid 42 at noon"));
    assert!(!m.line_matches("a [..] c", "a b d"));
    assert!(!m.line_matches("[..] end", "the end."));
    assert!(!m.line_matches("a[..]b[..]b", "a b"));
    assert!(!m.line_matches("exact", "exact but longer"));
}

#[test]
fn three_dots_alone_on_a_line_match_any_number_of_lines() {
    let m = Matcher::default();
    let excerpt = lines("first\n...\nlast");
    assert!(m.lines_match(&excerpt, &["first", "last"]));
    assert!(m.lines_match(&excerpt, &["first", "a", "b", "c", "last"]));
    assert!(!m.lines_match(&excerpt, &["first", "a", "b"]));
    assert!(!m.lines_match(&excerpt, &["zero", "first", "last"]));
    assert!(!m.lines_match(&lines("first\nlast"), &["first", "a", "last"]));
    assert!(m.lines_match(&lines("..."), &[]));
    assert!(m.lines_match(&lines("...\nb\n..."), &["a", "b", "c"]));
    assert!(!m.lines_match(&lines("...\nb\n..."), &["a", "c"]));
}

#[test]
fn what_varies_from_run_to_run_is_redacted_and_nothing_else() {
    let m = Matcher::new(["echo 3f9c1d52-0b7e-4c1a-9d2e-5a6b7c8d9e0f > boot_id"]);
    let same = |a: &str, b: &str| m.line_matches(a, b);
    assert!(same(
        "time=2026-12-02T05:21:29.794439Z level=info msg=\"run started\" git_sha=4ab218c9f995dd2d2ce874760d5a82b946081dc2 pid=22384",
        "time=2026-12-03T17:00:00.000001Z level=info msg=\"run started\" git_sha=6fd1318e47386df17306e7ad27fd37970b329b4e-dirty pid=7"
    ));
    assert!(same(
        "duration_ms=9 cpu_user_ms=9 cpu_system_ms=0 max_rss_kib=2160 stdout_bytes=353",
        "duration_ms=10 cpu_user_ms=8 cpu_system_ms=2 max_rss_kib=1908 stdout_bytes=353"
    ));
    assert!(same(
        "log: /l/a.sh-2026-11-30-121434.467069283.log; 18 ms; peak RSS 1.9 MiB",
        "log: /l/a.sh-2026-12-02-055721.364385903.log; 7 ms; peak RSS 12 MiB"
    ));
    assert!(same(
        "boot ID: 4778ce92-a720-49a0-b570-81af0bb99b25",
        "boot ID: 11111111-2222-4333-8444-555555555555"
    ));
    assert!(same(
        r#"{"version":"0.1.0","git_sha":"unknown"} commit 4ab218c9f995dd2d2ce874760d5a82b946081dc2"#,
        r#"{"version":"0.1.0","git_sha":"6fd1318e47386df17306e7ad27fd37970b329b4e"} commit unknown"#
    ));
    // Not what varies: the values the docs were found wrong in.
    assert!(!same("stdout_bytes=425", "stdout_bytes=373"));
    assert!(!same(
        "git_sha=3f9c2e1",
        "git_sha=6fd1318e47386df17306e7ad27fd37970b329b4e"
    ));
    assert!(!same("time=yesterday", "time=2026-12-03T17:00:00.000001Z"));
    // A boot ID the document's own commands wrote is compared as it is.
    assert!(!same(
        "boot ID: 3f9c1d52-0b7e-4c1a-9d2e-5a6b7c8d9e0f",
        "boot ID: 11111111-2222-4333-8444-555555555555"
    ));
}

#[test]
fn a_block_that_is_neither_a_session_nor_marked_fails_naming_its_line() {
    let doc = "text\n\n```sh\n$ agent status /tmp/x\nstatus: done\n```\n";
    let problems = console::parse("doc.md", doc).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("doc.md:3: a ```sh block with a `$ ` command (line 4)"),
        "{problems:?}"
    );
    let doc = "```console\nstatus: done\n$ agent status /tmp/x\n```\n";
    let problems = console::parse("doc.md", doc).unwrap_err();
    assert!(
        problems[0].starts_with("doc.md:2: output before the first `$ ` command"),
        "{problems:?}"
    );
    // A block of commands only, and one of output only, are no sessions: left alone.
    let doc = "```sh\nexamples/demo.sh\n```\n\n```\nstatus: done\n```\n";
    let found = console::parse("doc.md", doc).unwrap();
    assert!(found.commands.is_empty(), "{found:?}");
}

#[test]
fn a_not_run_marker_needs_a_reason_and_a_block_after_it() {
    for marker in [
        "<!-- not run -->",
        "<!-- not run: -->",
        "<!-- not run:  -->",
    ] {
        let doc = format!("{marker}\n```console\n$ reboot\n```\n");
        let problems = console::parse("doc.md", &doc).unwrap_err();
        assert_eq!(problems.len(), 1, "{marker}: {problems:?}");
        assert!(
            problems[0].starts_with("doc.md:1: a not-run marker needs a reason"),
            "{problems:?}"
        );
    }
    let doc = "<!-- not run: needs a cluster -->\n\ntext\n```console\n$ kubectl get nodes\n```\n";
    let problems = console::parse("doc.md", doc).unwrap_err();
    assert!(
        problems[0].starts_with("doc.md:1: a not-run marker belongs on the line just before"),
        "{problems:?}"
    );
    let doc = "<!-- not run: needs a Kubernetes cluster -->\n```console\n$ kubectl get nodes\nNAME\n```\n\n\
               <!-- not run: needs a cluster -->\n```sh\n$ kubectl logs x\n```\n\n\
               ```console\n$ echo \\\n    run\nrun\n```\n";
    let found = console::parse("doc.md", doc).unwrap();
    assert_eq!(found.not_run, 1);
    assert_eq!(found.commands.len(), 1, "{found:?}");
    assert_eq!(found.commands[0].text, "echo \\\n    run");
    assert_eq!(
        (found.commands[0].line, found.commands[0].expected_at),
        (13, 15)
    );
    assert_eq!(found.commands[0].expected, ["run"]);
}

#[test]
fn commands_on_this_machine_s_own_root_are_refused_before_anything_runs() {
    for cmd in [
        "agent apply / /var/lib/skyhook/x",
        "agent apply /var/lib/skyhook/x",
        "SKYHOOK_ROOT_DIR=/tmp/s agent interrupt /root /x eyJ0eXBlIjoibm9fb3AifQ==",
        "agent try examples/packages/gpu-node-tuning",
        "agent try pkg --root /srv/node",
        "agent try pkg --root=/",
        "cd /tmp && agent reset / --package p --yes",
        "agent config /tmp/../ /x",
        "true | env A=1 agent upgrade /srv /x",
        "agent apply \\\n    / /x",
    ] {
        assert!(touches_the_host(cmd).is_some(), "{cmd}");
    }
    for cmd in [
        "agent apply /tmp/demo/root /var/lib/skyhook/demo/x",
        "agent apply /tmp/demo/root \\\n    /var/lib/skyhook/demo/x 2>&1 >/dev/null",
        "agent plan apply / /x",
        "agent status /",
        "agent reset / --package p",
        "agent try pkg --root /tmp/node-root --env A=1",
        "agent apply --help",
        "agent interrupts encode '{\"type\":\"no_op\"}'",
        "echo agent apply /",
    ] {
        assert_eq!(touches_the_host(cmd), None, "{cmd}");
    }
    // Checked before the shell starts: nothing of the document runs.
    let doc = "```console\n$ echo ran\nran\n$ agent apply / /var/lib/x\n```\n";
    let problems = check_doc("doc.md", doc, false).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("doc.md:4: not run: `agent apply` runs on ROOT /,"),
        "{problems:?}"
    );
}

#[test]
fn bless_keeps_the_shown_lines_that_still_match_and_takes_the_rest_from_the_run() {
    let m = Matcher::default();
    let shown = lines("header [..]\n...\nstep a: ok\nstep b: ok\ndone in 5 ms");
    let output = "header v2\nnoise\nnoise\nstep a: ok\nstep b: FAILED\ndone in 7 ms\n";
    let new = console::bless(&m, &shown, output, 1);
    assert_eq!(
        new,
        lines("header [..]\n...\nstep a: ok\nstep b: FAILED\ndone in 5 ms\n[exit 1]")
    );
    assert!(console::shows(&m, &new, output, 1));
    assert!(!console::shows(&m, &shown, output, 1));

    // An excerpt stays an excerpt: a changed line between two `...` is replaced in place.
    let shown = lines("first\n...\nchanged line x=1\n...\nlast");
    let output = "first\na\nb\nchanged line x=2\nc\nlast\n";
    let new = console::bless(&m, &shown, output, 0);
    assert_eq!(new, lines("first\n...\nchanged line x=2\n...\nlast"));

    // A changed line at the end of an excerpt is replaced by the real last line, not dropped;
    // one between two `...` by the first real line like it.
    let shown = lines("head\n...\nchecks passed: apply-check");
    let output = "head\nx\ny\ncheck stages whose checks all passed: apply-check\n";
    assert_eq!(
        console::bless(&m, &shown, output, 0),
        lines("head\n...\ncheck stages whose checks all passed: apply-check")
    );
    let shown = lines("a\n...\n  arguments: old\n...\nz");
    let output = "a\nb\n  arguments: ['--profile']\n  env: X=1\nz\n";
    assert_eq!(
        console::bless(&m, &shown, output, 0),
        lines("a\n...\n  arguments: ['--profile']\n...\nz")
    );

    // Lines that match are left as the doc has them.
    let shown = lines("ok [..]\n...");
    assert_eq!(console::bless(&m, &shown, "ok 1\n2\n3\n", 0), shown);

    // And the document is rewritten in place, its other lines untouched.
    let text = "intro\n\n```console\n$ run\nold\n$ other\nsame\n```\nend\n";
    let found = console::parse("doc.md", text).unwrap();
    let rewritten = console::rewrite(text, &found.commands, &[(0, lines("new 1\nnew 2"))]);
    assert_eq!(
        rewritten,
        "intro\n\n```console\n$ run\nnew 1\nnew 2\n$ other\nsame\n```\nend\n"
    );
}
