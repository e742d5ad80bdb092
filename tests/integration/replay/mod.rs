//! Replay of the upstream Python agent's transcripts (`tests/replay/transcripts/`).
//!
//! For every transcript: rebuild its package and fake host root from the transcript, run this
//! agent with the same arguments and environment (`$ROOT` = the fake root, `$WORKDIR` = a
//! scratch directory outside it), and compare what the transcript recorded:
//!
//! - stdout, byte for byte after normalization (below);
//! - the exit code;
//! - which steps ran (the execution headers, SPEC §8.3);
//! - that every line the steps and fake tools wrote to stderr reaches this agent's stderr;
//! - that nothing outside ROOT changes;
//! - at every `file tree after:` point, the files under ROOT with their contents as far as the
//!   transcript shows them: markers, history, check results, START/ALL_CHECKED, interrupt
//!   markers, files the package put on the host, and the calls the fake `systemctl`, `service`
//!   and `reboot` recorded in `/var/tmp/interrupt-calls.log`; symbolic links by their target;
//! - at every `modes (…)` point, the modes of the paths it lists (the `before` block is how the
//!   harness prepared the root: the replay prepares it the same way);
//! - at a `history entries after:` point, the number of history entries and the first and last
//!   version;
//! - at an `outside the fake root` point, what appeared beside the fake root.
//!
//! Normalization (applied to both sides): this agent's stdout is decoded as UTF-8 with invalid
//! bytes replaced by U+FFFD (the transcripts store text that way) and the fake root's and
//! scratch directory's paths are written `$ROOT` and `$WORKDIR`; in file contents, timestamps
//! (ISO 8601 / RFC 3339 date-times and Unix epoch seconds) become `<TIME>`.
//!
//! Not compared: the agent's own stderr lines (the legacy agent's tracebacks against this
//! agent's structured diagnostics), log files under `/var/log` (format and naming per SPEC
//! §8.10, pinned by the log tests), file modes other than those of a `modes (…)` block, and wall
//! time.
//!
//! Every remaining difference must be sanctioned by a row of [`table::SANCTIONED`], which
//! rewrites the legacy expectation into what the SPEC requires; anything else fails the test
//! with a diff naming the transcript and invocation. `docs/compatibility.md` lists the same rows.

mod table;
mod transcript;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{BASE_ENV, FakeHost, Reaper, Run};
use transcript::{Event, HOST_RESOLV_CONF, HistoryCount, Invocation, Modes, Outside, Transcript};

// ---------------------------------------------------------------------------------------------
// Expectations
// ---------------------------------------------------------------------------------------------

/// What one invocation must produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpInvocation {
    pub number: u32,
    pub title: String,
    pub mode: String,
    pub stdout: String,
    /// Lines the steps and fake tools wrote to stderr (the legacy relay's `[err]<time> `
    /// prefixes removed): each must appear in this agent's stderr.
    pub step_stderr: Vec<String>,
    /// Lines of stdout that arrive at a timing boundary, so that this agent may or may not
    /// relay them (a sanctioned row moves them here): left out of both sides of the stdout
    /// comparison.
    pub racy_stdout: Vec<String>,
    pub exit: i32,
}

/// The files under ROOT at a `file tree after:` point: path → normalized content (`None` when
/// the transcript does not show it: only existence is compared), and the symbolic links (path →
/// target; a link to a directory counts as a directory, as the listings show it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpTree {
    pub title: String,
    pub files: BTreeMap<String, Option<String>>,
    pub links: BTreeMap<String, String>,
    /// The files with setuid, setgid or sticky bits → those bits (the only file modes compared
    /// outside a `modes (…)` block).
    pub special: BTreeMap<String, u32>,
}

/// A step of the package config, as the rewrites need it.
#[derive(Debug, Clone)]
pub struct StepInfo {
    pub path: String,
    pub arguments: Vec<String>,
    pub returncodes: Vec<i64>,
    pub env: Vec<(String, String)>,
    pub on_host: bool,
}

/// The expectation for a whole transcript, in event order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub transcript: String,
    pub events: Vec<ExpEvent>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpEvent {
    Invocation(ExpInvocation),
    Tree(ExpTree),
    Modes(Modes),
    HistoryCount(HistoryCount),
    Outside(Outside),
}

impl Expected {
    /// The legacy agent's results, normalized.
    pub fn from_legacy(t: &Transcript) -> Self {
        let events = t
            .events
            .iter()
            .map(|e| match e {
                Event::Invocation(inv) => ExpEvent::Invocation(ExpInvocation {
                    number: inv.number,
                    title: inv.title.clone(),
                    mode: mode_of(inv),
                    stdout: inv.stdout.clone(),
                    step_stderr: step_stderr_lines(&inv.stderr),
                    racy_stdout: Vec::new(),
                    exit: inv.exit,
                }),
                Event::Tree(tree) => ExpEvent::Tree(ExpTree {
                    title: tree.title.clone(),
                    links: tree
                        .entries
                        .iter()
                        .filter(|(p, _)| compared_path(p))
                        .filter_map(|(p, e)| Some((p.clone(), e.link.clone()?)))
                        .collect(),
                    special: tree
                        .entries
                        .iter()
                        .filter(|(p, _)| compared_path(p))
                        .filter_map(|(p, e)| Some((p.clone(), e.mode? & 0o7000)))
                        .filter(|(_, bits)| *bits != 0)
                        .collect(),
                    files: tree
                        .entries
                        .iter()
                        .filter(|(p, e)| !e.dir && e.link.is_none() && compared_path(p))
                        .map(|(p, e)| {
                            let content = e.content.as_ref().map(|c| {
                                if c == HOST_RESOLV_CONF {
                                    normalize_content(&host_resolv_conf())
                                } else {
                                    normalize_content(c)
                                }
                            });
                            (p.clone(), content)
                        })
                        .collect(),
                }),
                Event::Modes(m) => ExpEvent::Modes(m.clone()),
                Event::HistoryCount(h) => ExpEvent::HistoryCount(h.clone()),
                Event::Outside(o) => ExpEvent::Outside(o.clone()),
            })
            .collect();
        Self {
            transcript: t.name.clone(),
            events,
        }
    }

    /// Mutable access to the invocations.
    pub fn invocations_mut(&mut self) -> impl Iterator<Item = &mut ExpInvocation> {
        self.events.iter_mut().filter_map(|e| match e {
            ExpEvent::Invocation(i) => Some(i),
            _ => None,
        })
    }

    /// Mutable access to the tree listings.
    pub fn trees_mut(&mut self) -> impl Iterator<Item = &mut ExpTree> {
        self.events.iter_mut().filter_map(|e| match e {
            ExpEvent::Tree(t) => Some(t),
            _ => None,
        })
    }

    /// The `modes (before)` block, and mutable access to the later ones.
    pub fn modes_mut(&mut self) -> (Option<Modes>, impl Iterator<Item = &mut Modes>) {
        let before = self.events.iter().find_map(|e| match e {
            ExpEvent::Modes(m) if m.title == "before" => Some(m.clone()),
            _ => None,
        });
        let after = self.events.iter_mut().filter_map(|e| match e {
            ExpEvent::Modes(m) if m.title != "before" => Some(m),
            _ => None,
        });
        (before, after)
    }

    /// Mutable access to the `outside the fake root` listings.
    pub fn outside_mut(&mut self) -> impl Iterator<Item = &mut Outside> {
        self.events.iter_mut().filter_map(|e| match e {
            ExpEvent::Outside(o) => Some(o),
            _ => None,
        })
    }

    /// Mutable access to the `history entries after:` counts.
    pub fn history_counts_mut(&mut self) -> impl Iterator<Item = &mut HistoryCount> {
        self.events.iter_mut().filter_map(|e| match e {
            ExpEvent::HistoryCount(h) => Some(h),
            _ => None,
        })
    }

    /// Invocation `n` (panics if the transcript has none: a table row out of date).
    pub fn invocation(&mut self, n: u32) -> &mut ExpInvocation {
        let name = self.transcript.clone();
        self.invocations_mut()
            .find(|i| i.number == n)
            .unwrap_or_else(|| panic!("{name} has no invocation {n}"))
    }

    /// The tree listing after invocation `n`'s block (the first listing that follows it).
    pub fn tree_after(&mut self, n: u32) -> &mut ExpTree {
        let name = self.transcript.clone();
        let mut seen = false;
        for e in &mut self.events {
            match e {
                ExpEvent::Invocation(i) if i.number == n => seen = true,
                ExpEvent::Tree(t) if seen => return t,
                _ => {}
            }
        }
        panic!("{name} has no tree listing after invocation {n}");
    }
}

/// The lines of a legacy stderr that steps and fake tools wrote: after removing the relay's
/// `[err]<time> ` prefixes, the lines the transcripts' scripts print (`[<step>] …`, `fake …`).
/// The agent's own lines (tracebacks, `WARNING:root:`) are not among them.
fn step_stderr_lines(stderr: &str) -> Vec<String> {
    let mut text = String::new();
    let mut rest = stderr;
    while let Some(k) = rest.find("[err]") {
        text.push_str(&rest[..k]);
        let after = &rest[k + 5..];
        let n = datetime_len(after.as_bytes());
        if n > 0 && after.as_bytes().get(n) == Some(&b' ') {
            rest = &after[n + 1..];
        } else {
            text.push_str("[err]");
            rest = after;
        }
    }
    text.push_str(rest);
    text.lines()
        .filter(|l| {
            (l.starts_with('[') && l.contains("] ") && !l.starts_with("[err]"))
                || l.starts_with("fake ")
        })
        .map(str::to_owned)
        .collect()
}

/// The operator MODE of an invocation (first argument; empty when there is none).
fn mode_of(inv: &Invocation) -> String {
    inv.args.first().cloned().unwrap_or_default()
}

/// Paths of a tree the replay compares: everything under ROOT except the log directory (SPEC
/// §8.10 formats, not compared) and what the harness's busybox root brings along.
fn compared_path(p: &str) -> bool {
    !["var/log/", "bin/", "usr/", "dev/", "proc/"]
        .iter()
        .any(|prefix| p.starts_with(prefix))
}

fn host_resolv_conf() -> String {
    String::from_utf8_lossy(&fs::read("/etc/resolv.conf").unwrap_or_default()).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Normalization
// ---------------------------------------------------------------------------------------------

/// Length of an ISO 8601 date-time starting at `s[0]` (`YYYY-MM-DDTHH:MM:SS`, optional
/// fraction, optional `Z` or `±HH:MM`), or 0.
fn datetime_len(s: &[u8]) -> usize {
    let digit = |i: usize| s.get(i).is_some_and(u8::is_ascii_digit);
    let at = |i: usize, c: u8| s.get(i) == Some(&c);
    let shape = [
        (0, b'd'),
        (1, b'd'),
        (2, b'd'),
        (3, b'd'),
        (4, b'-'),
        (5, b'd'),
        (6, b'd'),
        (7, b'-'),
        (8, b'd'),
        (9, b'd'),
        (10, b'T'),
        (11, b'd'),
        (12, b'd'),
        (13, b':'),
        (14, b'd'),
        (15, b'd'),
        (16, b':'),
        (17, b'd'),
        (18, b'd'),
    ];
    if !shape
        .iter()
        .all(|&(i, c)| if c == b'd' { digit(i) } else { at(i, c) })
    {
        return 0;
    }
    let mut n = 19;
    if at(n, b'.') && digit(n + 1) {
        n += 1;
        while digit(n) {
            n += 1;
        }
    }
    if at(n, b'Z') {
        n += 1;
    } else if (at(n, b'+') || at(n, b'-'))
        && digit(n + 1)
        && digit(n + 2)
        && at(n + 3, b':')
        && digit(n + 4)
        && digit(n + 5)
    {
        n += 6;
    }
    n
}

/// Replace every date-time with `<TIME>`; a content that is only Unix epoch seconds (the
/// Python agent's interrupt markers) also becomes `<TIME>`.
pub fn normalize_content(text: &str) -> String {
    let trimmed = text.trim();
    let (int, frac) = trimmed.split_once('.').unwrap_or((trimmed, "0"));
    if int.len() >= 9
        && int.bytes().all(|b| b.is_ascii_digit())
        && !frac.is_empty()
        && frac.bytes().all(|b| b.is_ascii_digit())
    {
        return "<TIME>".to_owned();
    }
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let len = datetime_len(&bytes[pos..]);
        if len > 0 {
            out.push_str("<TIME>");
            pos += len;
        } else {
            let c = text[pos..].chars().next().unwrap();
            out.push(c);
            pos += c.len_utf8();
        }
    }
    out
}

/// This agent's stdout as the transcripts store text.
fn normalize_stdout(bytes: &[u8], host: &FakeHost) -> String {
    String::from_utf8_lossy(bytes)
        .replace(&host.outside().display().to_string(), "$WORKDIR")
        .replace(&host.root_str(), "$ROOT")
}

/// The execution headers of a stdout (SPEC §8.3): which steps ran, in order.
pub fn headers(stdout: &str, mode: &str) -> Vec<String> {
    let prefix = format!("{mode} ");
    stdout
        .lines()
        .filter(|l| {
            l.starts_with(&prefix)
                && (l.ends_with(" True") || l.ends_with(" False"))
                && l.contains(" Idempotence.")
        })
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Rebuilding the package and the host
// ---------------------------------------------------------------------------------------------

/// The package config of the transcripts that do not show theirs, identified by the size of
/// `config.json` in their last tree listing: 2315 bytes is transcript 01's package, 412 bytes
/// the one-step package (`apply: s1.sh`, `apply-check: s1_check.sh`) whose text is written here
/// and checked against that size, 411 bytes the same package with `idempotence: true` for s1
/// ("s1 always runs").
fn config_of(t: &Transcript) -> String {
    if let Some(c) = &t.config {
        return c.clone();
    }
    let rel = in_package(t, "config.json");
    let size = t
        .last_tree()
        .and_then(|tree| tree.entries.get(&rel))
        .map_or_else(
            || panic!("{}: no config.json in the tree listing", t.name),
            |e| e.size,
        );
    let one_step = |always_runs: bool| {
        let step = |name: &str, path: &str, idempotence: bool| {
            format!(
                "{{\"name\":\"{name}\",\"path\":\"{path}\",\"arguments\":[],\"returncodes\":[0],\
                 \"on_host\":true,\"env\":{{}},\"idempotence\":{idempotence},\"upgrade_step\":false}}"
            )
        };
        format!(
            "{{\"schema_version\": \"v1\", \"package_name\": \"pkg\", \"package_version\": \
             \"1.0.0\", \"expected_config_files\": [],\n \"modes\": {{\"apply\": [ {} ], \
             \"apply-check\": [ {} ]}}}}\n",
            step("s1", "s1.sh", always_runs),
            step("s1c", "s1_check.sh", false)
        )
    };
    let text = match size {
        2315 => Transcript::load("01-apply-fresh")
            .config
            .expect("01 shows its config"),
        412 => one_step(false),
        411 => one_step(true),
        other => panic!("{}: unknown package (config.json of {other} bytes)", t.name),
    };
    assert_eq!(text.len() as u64, size, "{}: rebuilt config.json", t.name);
    text
}

/// The steps of a config.
pub fn steps_of(config: &str) -> Vec<StepInfo> {
    let v: Value = serde_json::from_str(config).expect("config.json parses");
    let mut out: Vec<StepInfo> = Vec::new();
    for steps in v["modes"].as_object().expect("modes").values() {
        for s in steps.as_array().expect("steps") {
            let strs = |k: &str| -> Vec<String> {
                s[k].as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_owned())
                    .collect()
            };
            out.push(StepInfo {
                path: s["path"].as_str().unwrap().to_owned(),
                arguments: strs("arguments"),
                returncodes: s["returncodes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c.as_i64().unwrap())
                    .collect(),
                env: s["env"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                            .collect()
                    })
                    .unwrap_or_default(),
                on_host: s["on_host"].as_bool().unwrap(),
            });
        }
    }
    out
}

/// The files a transcript does not show but lists with a size: rebuilt here from what they
/// print, each checked against the listed size (a name may have several candidates: the one of
/// the listed size is taken). `quiet.sh` is "a step with no output"; `envdump.sh` prints the
/// step's environment sorted (its output in transcript 30); 39's `cfg.sh` lists the configmaps
/// and prints `a.conf`; 43's `end.sh` prints `end`, 44's `after.sh` `after.sh runs`.
const UNSHOWN_FILES: &[(&str, &str)] = &[
    ("quiet.sh", "#!/bin/sh\nexit 0\n"),
    ("quiet_check.sh", "#!/bin/sh\nexit 0\n"),
    ("envdump.sh", "#!/bin/sh\nenv | LC_ALL=C sort\n"),
    (
        "cfg.sh",
        "#!/bin/sh\necho \"${0##*/}: configmaps:\"\nls -R configmaps\necho \"a.conf: $(cat configmaps/a.conf)\"\n",
    ),
    ("end.sh", "#!/bin/sh\necho end\n"),
    ("end_check.sh", "#!/bin/sh\necho end\n"),
    ("after.sh", "#!/bin/sh\necho \"${0##*/} runs\"\n"),
    ("after_check.sh", "#!/bin/sh\necho \"${0##*/} runs\"\n"),
];

/// The files the legacy harness gave the agent as stdin, rebuilt from what 44's step read.
const STDIN_FILES: &[(&str, &str)] = &[("stdin.txt", "a line on the agent's stdin\n")];

/// Files a listing shows as raw bytes, which the transcript's text holds only lossily: 43's
/// `blob.bin` is "all 256 byte values" in order (checked against the listing's lossy content).
fn binary_file(name: &str) -> Option<Vec<u8>> {
    (name == "blob.bin").then(|| (0..=255u8).collect())
}

/// `name` matches a shown file's header (`envp*.sh` stands for every `envp…sh`).
fn header_matches(header: &str, name: &str) -> bool {
    match header.split_once('*') {
        Some((pre, post)) => {
            name.len() >= pre.len() + post.len() && name.starts_with(pre) && name.ends_with(post)
        }
        None => header == name,
    }
}

/// The content of step file `base` listed with `size` bytes.
fn step_file(t: &Transcript, base: &str, size: Option<u64>) -> String {
    let fits = |body: &str| size.is_none_or(|n| body.len() as u64 == n);
    t.files
        .iter()
        .find(|(header, _)| header_matches(header, base))
        .map(|(_, b)| b.clone())
        .or_else(|| {
            UNSHOWN_FILES
                .iter()
                .find(|(name, body)| *name == base && fits(body))
                .map(|(_, b)| (*b).to_owned())
        })
        .or_else(|| t.step_script.clone())
        .unwrap_or_else(|| Transcript::load("01-apply-fresh").step_script.unwrap())
}

/// `rel` in the transcript's package directory, ROOT-relative.
fn in_package(t: &Transcript, rel: &str) -> String {
    format!("{}/{rel}", t.copy_dir.trim_start_matches('/'))
}

/// Write the package into `dir` (`skyhook_dir/`, `configmaps/`, `root_dir/`) as the first
/// listing that shows it has it: later listings show what the harness changed since.
fn write_package(t: &Transcript, dir: &Path) {
    let config = config_of(t);
    let listing = t
        .events
        .iter()
        .find_map(|e| match e {
            Event::Tree(tree) if tree.entries.contains_key(&in_package(t, "config.json")) => {
                Some(tree)
            }
            _ => None,
        })
        .expect("a tree listing with the package");
    fs::create_dir_all(dir.join("skyhook_dir")).unwrap();
    fs::create_dir_all(dir.join("configmaps")).unwrap();
    fs::write(dir.join("config.json"), &config).unwrap();
    for step in steps_of(&config) {
        let rel = in_package(t, &format!("skyhook_dir/{}", step.path));
        let listed = listing.entries.get(&rel).map(|e| e.size);
        let base = step.path.rsplit('/').next().unwrap();
        let body = step_file(t, base, listed);
        if let Some(size) = listed {
            assert_eq!(
                body.len() as u64,
                size,
                "{}: rebuilt {rel} differs in size from the listing",
                t.name
            );
        }
        let p = dir.join("skyhook_dir").join(&step.path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, body).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    }
    // What the listing shows under the package's root_dir/ (overlaid onto ROOT, SPEC §6) and
    // configmaps/, with the files' modes.
    for sub in ["root_dir", "configmaps"] {
        let prefix = in_package(t, &format!("{sub}/"));
        for (path, e) in &listing.entries {
            let Some(rel) = path.strip_prefix(&prefix) else {
                continue;
            };
            let p = dir.join(sub).join(rel);
            fs::create_dir_all(if e.dir { &p } else { p.parent().unwrap() }).unwrap();
            if let Some(target) = &e.link {
                std::os::unix::fs::symlink(target, &p).unwrap();
            } else if !e.dir {
                let shown = e
                    .content
                    .as_deref()
                    .unwrap_or_else(|| panic!("{}: {path}: content not shown", t.name));
                let name = rel.rsplit('/').next().unwrap();
                let bytes = binary_file(name).unwrap_or_else(|| shown.as_bytes().to_vec());
                assert_eq!(
                    String::from_utf8_lossy(&bytes),
                    shown,
                    "{}: rebuilt {path} differs from the listing",
                    t.name
                );
                assert_eq!(bytes.len() as u64, e.size, "{}: rebuilt {path}", t.name);
                fs::write(&p, bytes).unwrap();
                if let Some(mode) = e.mode {
                    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
                }
            }
        }
    }
}

/// The legacy harness's fake `systemctl`, `service` and `reboot`, rebuilt from what they print
/// and record in the transcripts (15–20, 23, 26): each prints `fake <tool> <args>` and appends
/// its command to `/var/tmp/interrupt-calls.log`; `FAKE_SYSTEMCTL_FAIL=<unit>` fails that
/// restart; `FAKE_REBOOT` = `ok` (default: exit 0), `fail` (exit 1), `sigterm-parent` (SIGTERM
/// to the process that started it, as a shutdown would).
const FAKE_TOOLS: &[(&str, &str)] = &[
    (
        "systemctl",
        "#!/bin/sh\necho \"fake systemctl $*\"\necho \"systemctl $*\" >> /var/tmp/interrupt-calls.log\n\
         for a in \"$@\"; do :; done\n\
         if [ -n \"${FAKE_SYSTEMCTL_FAIL:-}\" ] && [ \"$a\" = \"$FAKE_SYSTEMCTL_FAIL\" ]; then\n\
         echo \"fake systemctl: failing $a\" >&2; exit 1; fi\nexit 0\n",
    ),
    (
        "service",
        "#!/bin/sh\necho \"fake service $*\"\necho \"service $*\" >> /var/tmp/interrupt-calls.log\nexit 0\n",
    ),
    (
        "reboot",
        "#!/bin/sh\necho \"fake reboot: pretending to reboot\"\n\
         echo \"reboot $* (FAKE_REBOOT=${FAKE_REBOOT:-ok})\" >> /var/tmp/interrupt-calls.log\n\
         case \"${FAKE_REBOOT:-ok}\" in\n\
         fail) echo \"fake reboot: failing\" >&2; exit 1;;\n\
         sigterm-parent) kill -TERM \"$PPID\"; sleep 1; exit 0;;\n\
         esac\nexit 0\n",
    ),
];

/// Make the fake root what the transcripts' steps and tools need.
fn prepare_root(host: &FakeHost) {
    for (name, body) in FAKE_TOOLS {
        host.write_mode(&format!("usr/bin/{name}"), body, 0o755);
    }
    // 29's noisy.sh is a bash script; busybox sh runs it the same way.
    host.write_mode("bin/bash", "#!/bin/sh\nexec /bin/sh \"$@\"\n", 0o755);
    // 29's noisy.sh reads /dev/zero.
    let zero = host.path("dev/zero");
    let made = Command::new("/bin/busybox")
        .args(["mknod", "-m", "666", zero.to_str().unwrap(), "c", "1", "5"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(made, "cannot create <ROOT>/dev/zero");
}

// ---------------------------------------------------------------------------------------------
// The legacy harness's actions between invocations
// ---------------------------------------------------------------------------------------------

/// What the legacy harness did to the host before an invocation, as the transcript states it
/// (scenario comment or invocation title).
fn before_invocation(t: &Transcript, inv: &Invocation, host: &FakeHost) {
    let history = HISTORY_FILE;
    match (t.name.as_str(), inv.number) {
        // "upgrade from history current-version 0.9.0": the listing's oldest entry.
        ("11-upgrade-with-history", 1) => host.write(
            history,
            "{\"current-version\": \"0.9.0\", \"history\": [{\"version\": \"0.9.0\", \"time\": \
             \"2024-08-28T14:33:20.123456+00:00\"}]}",
        ),
        // "history file contains '{'", then "(corrupt history again)".
        ("12-corrupt-history", 1 | 2) => host.write(history, "{"),
        // "apply (flags removed)".
        ("07-returncodes-collapse", 3) => {
            fs::remove_dir_all(host.path("var/lib/skyhook/sk1/flags/pkg")).unwrap();
        }
        // "COPY_RESOLV=true with no <root>/etc".
        ("26-copy-resolv-and-write-logs", 3) => fs::remove_dir_all(host.path("etc")).unwrap(),
        // "the 0.9.0 marker kept": a marker of an older version, as the listings show it.
        ("36-uninstall-flows", 1) => host.write(
            "var/lib/skyhook/sk1/flags/pkg/0.9.0/s1.sh_W11fWzBd",
            "last_run: old",
        ),
        // "history with three entries (one with an extra key) and an extra top-level key": the
        // listing's entries below the one invocation 2 prepends.
        ("37-upgrade-history-several-versions", 1) => host.write(
            history,
            "{\"current-version\": \"0.9.0\", \"history\": [{\"version\": \"0.9.0\", \"time\": \
             \"2024-08-28T14:33:20.123456+00:00\"}, {\"version\": \"uninstalled\", \"time\": \
             \"2024-07-01T10:00:00.000001+00:00\"}, {\"version\": \"0.8.0\", \"time\": \
             \"2024-06-01T10:00:00+00:00\", \"note\": \"extra key in an entry\"}], \
             \"extra-top-level\": \"kept?\"}",
        ),
        // "config.json 1.1.0".
        ("37-upgrade-history-several-versions", 3) => {
            let config = in_package(t, "config.json");
            let text = host.read_string(&config).replacen(
                "\"package_version\": \"1.0.0\"",
                "\"package_version\": \"1.1.0\"",
                1,
            );
            host.write(&config, text);
        }
        ("38-history-edge-cases", 1) => {
            host.write(history, "{\"current-version\": \"\", \"history\": []}");
        }
        ("38-history-edge-cases", 2) => host.write(
            history,
            "{\"history\": [{\"version\": \"0.9.0\", \"time\": \"2024-08-28T14:33:20.123456+00:00\"}]}",
        ),
        ("38-history-edge-cases", 3) => host.write(history, "[]"),
        ("38-history-edge-cases", 4) => host.write(history, ""),
        // "100 existing entries": 0.100.0 (current) down to 0.1.0 (the count note's first and
        // last), with times of the length that gives the listed 6099 bytes after one more.
        ("38-history-edge-cases", 5) => {
            fs::remove_file(host.path(&format!("{history}.backup"))).unwrap();
            let entries: Vec<String> = (1..=100u32)
                .rev()
                .map(|i| {
                    format!(
                        "{{\"version\": \"0.{i}.0\", \"time\": \"2024-01-01T{:02}:{:02}:00+00:00\"}}",
                        i / 60,
                        i % 60
                    )
                })
                .collect();
            let text = format!(
                "{{\"current-version\": \"0.100.0\", \"history\": [{}]}}",
                entries.join(", ")
            );
            // The Python agent then wrote `1.0.0` for `0.100.0` (2 bytes fewer) and prepended
            // `{"version": "1.0.0", "time": "<32 bytes>"}, ` (66 bytes).
            assert_eq!(text.len() - 2 + 66, 6099, "38: the seeded history");
            host.write(history, text);
        }
        // "both present", then "sub/b.conf missing", "a directory", "a symlink to ../a.conf".
        ("39-config-mode-configmaps", 1 | 3 | 4 | 5) => {
            let b = in_package(t, "configmaps/sub/b.conf");
            let p = host.path(&b);
            if p.is_dir() && !p.is_symlink() {
                fs::remove_dir(&p).unwrap();
            } else if p.symlink_metadata().is_ok() {
                fs::remove_file(&p).unwrap();
            }
            match inv.number {
                1 => host.write(&b, "b=2\n"),
                4 => host.mkdir(&b),
                5 => host.symlink(&b, "../a.conf"),
                _ => {}
            }
        }
        // `expected_config_files [""]`, `[../config.json]`, `[/etc/passwd]`.
        ("39-config-mode-configmaps", 6..=8) => {
            let entry = match inv.number {
                6 => "\"\"",
                7 => "\"../config.json\"",
                _ => "\"/etc/passwd\"",
            };
            let text = config_of(t).replacen(
                "[\"a.conf\", \"sub/b.conf\"]",
                &format!("[{entry}]"),
                1,
            );
            let config = in_package(t, "config.json");
            if inv.number == 8 {
                let listed = t.last_tree().unwrap().entries[&config].size;
                assert_eq!(text.len() as u64, listed, "39: the last config.json");
            }
            host.write(&config, text);
        }
        // "relative symlinks to a file and to a dir inside root_dir" (the listing shows the
        // one to a directory as a directory), "a file whose host path is a relative symlink
        // (target.conf)", "a 0600 file overwriting a longer 0644 host file", "root_dir itself
        // 0700, root_dir/etc 0750" (and conf.d 0700, as its copies show).
        ("40-root-dir-overlay", 1) => {
            let root_dir = in_package(t, "root_dir");
            let link_to_dir = format!("{root_dir}/etc/pkg/link-to-dir");
            fs::remove_dir(host.path(&link_to_dir)).unwrap();
            host.symlink(&link_to_dir, "conf.d");
            for (dir, mode) in [("", 0o700), ("/etc", 0o750), ("/etc/pkg/conf.d", 0o700)] {
                let p = host.path(&format!("{root_dir}{dir}"));
                fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
            }
            host.write_mode(
                "etc/pkg/pkg.conf",
                "the host's own content, longer than the package's\n",
                0o644,
            );
            host.symlink("etc/pkg/hostlink.conf", "target.conf");
        }
        // "then a dangling symlink in root_dir".
        ("40-root-dir-overlay", 2) => {
            host.symlink(&in_package(t, "root_dir/etc/pkg/dangling"), "does-not-exist");
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------------------------

/// Run invocation `inv` of the transcript against `host`.
fn run_invocation(inv: &Invocation, host: &FakeHost) -> Run {
    let subst = |s: &str| {
        s.replace("$ROOT", &host.root_str())
            .replace("$WORKDIR", &host.outside().display().to_string())
    };
    let mut cmd = host.agent();
    for (k, _) in BASE_ENV {
        cmd = cmd.env_remove(k);
    }
    for (k, v) in &inv.env {
        cmd = cmd.env(k, subst(v));
    }
    if inv
        .env
        .iter()
        .any(|(k, v)| k == "FAKE_REBOOT" && v == "sigterm-parent")
    {
        // The shutdown reaches the agent but the host stays up: the agent waits for it to go
        // down for the stop grace (SPEC §9.4); 2 s instead of the default 20.
        cmd = cmd.env("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "2");
    }
    let args: Vec<String> = inv.args.iter().map(|a| subst(a)).collect();
    let root_at_slash_root = inv
        .notes
        .iter()
        .any(|n| n.contains("mount --rbind <root> /root"));
    let sigterm = inv
        .notes
        .iter()
        .any(|n| n.starts_with("(sent SIGTERM to agent"));
    if root_at_slash_root {
        // The legacy forms imply ROOT = /root: in a private mount namespace, the fake root is
        // bind-mounted on /root, as the legacy harness did.
        let agent = env!("CARGO_BIN_EXE_agent");
        let mut full = vec![
            "-m".to_owned(),
            "--propagation".to_owned(),
            "private".to_owned(),
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            "mount --rbind \"$0\" /root && exec \"$@\"".to_owned(),
            host.root_str(),
            agent.to_owned(),
        ];
        full.extend(args);
        return cmd.args(full).run_program(Path::new("/usr/bin/unshare"));
    }
    let mut cmd = cmd.args(args);
    // "(stdin: stdin.txt)": the agent's stdin is that file (44's step prints its line).
    let stdin = inv
        .notes
        .iter()
        .find_map(|n| n.split_once("(stdin: ")?.1.split_once(')'))
        .map(|(name, _)| {
            let text = STDIN_FILES
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap_or_else(|| panic!("no content for the stdin file {name}"))
                .1;
            let mut file = tempfile::NamedTempFile::new().unwrap();
            std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
            file
        });
    if let Some(file) = &stdin {
        cmd = cmd.stdin_file(file.path());
    }
    if !sigterm {
        return cmd.run();
    }
    // "SIGTERM to the agent while s1.sh sleeps 3 s": once the step runs (a process chrooted
    // into ROOT), send SIGTERM. (The legacy agent slept 1 s before each step, hence its 2.5 s.)
    let running = cmd.spawn();
    let deadline = Instant::now() + Duration::from_secs(30);
    while host.leftover_processes().is_empty() {
        assert!(Instant::now() < deadline, "the step never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    running.signal("TERM");
    running.wait()
}

/// The files and links under ROOT now, normalized like the expectation `exp` (content only
/// where it shows one; a link to a directory counts as the directory, as in the listings).
fn actual_tree(host: &FakeHost, exp: &ExpTree) -> ExpTree {
    let mut files = BTreeMap::new();
    let mut links = BTreeMap::new();
    let mut special = BTreeMap::new();
    for p in host
        .files_under("")
        .into_iter()
        .filter(|p| compared_path(p))
    {
        let full = host.path(&p);
        if fs::symlink_metadata(&full)
            .unwrap()
            .file_type()
            .is_symlink()
        {
            if !full.is_dir() {
                links.insert(p, fs::read_link(&full).unwrap().display().to_string());
            }
            continue;
        }
        let bits = fs::symlink_metadata(&full).unwrap().permissions().mode() & 0o7000;
        if bits != 0 {
            special.insert(p.clone(), bits);
        }
        let content = exp.files.get(&p).and_then(Option::as_ref).map(|_| {
            normalize_content(&String::from_utf8_lossy(
                &fs::read(&full).unwrap_or_default(),
            ))
        });
        files.insert(p, content);
    }
    ExpTree {
        title: exp.title.clone(),
        files,
        links,
        special,
    }
}

/// ROOT-relative path of a `modes (…)` block (`.` is ROOT).
fn modes_path(host: &FakeHost, p: &str) -> std::path::PathBuf {
    if p == "." {
        host.root().to_owned()
    } else {
        host.path(p)
    }
}

/// Give the paths of the `modes (before)` block the modes the legacy harness gave them.
fn prepare_modes(t: &Transcript, host: &FakeHost) {
    for (p, mode) in t.modes_before().map(|m| &m.modes).into_iter().flatten() {
        fs::set_permissions(modes_path(host, p), fs::Permissions::from_mode(*mode)).unwrap();
    }
}

/// The history file every transcript's package keeps.
const HISTORY_FILE: &str = "var/lib/skyhook/sk1/history/pkg.json";

/// The number of history entries and the first and last version, now.
fn actual_history_count(host: &FakeHost) -> Option<HistoryCount> {
    let v: Value = serde_json::from_slice(&fs::read(host.path(HISTORY_FILE)).ok()?).ok()?;
    let entries = v["history"].as_array()?;
    let version = |e: Option<&Value>| e.and_then(|e| e["version"].as_str()).map(str::to_owned);
    Some(HistoryCount {
        count: entries.len(),
        first: version(entries.first())?,
        last: version(entries.last())?,
    })
}

/// What is beside the fake root now (its parent, without the root and the scratch directory).
fn actual_outside(host: &FakeHost) -> Outside {
    let base = host.root().parent().expect("the fake root has a parent");
    let mut paths = vec![".".to_owned()];
    let mut walk = vec![base.to_owned()];
    while let Some(dir) = walk.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p == host.root() || p == host.outside() {
                continue;
            }
            paths.push(p.strip_prefix(base).unwrap().display().to_string());
            if fs::symlink_metadata(&p).unwrap().is_dir() {
                walk.push(p);
            }
        }
    }
    paths.sort();
    Outside { paths }
}

// ---------------------------------------------------------------------------------------------
// Comparing
// ---------------------------------------------------------------------------------------------

/// A line diff (longest common subsequence) with two lines of context, `-` expected, `+` got.
fn line_diff(expected: &str, got: &str) -> String {
    let old: Vec<&str> = expected.split_inclusive('\n').collect();
    let new: Vec<&str> = got.split_inclusive('\n').collect();
    // lcs[x][y]: length of the longest common subsequence of old[x..] and new[y..].
    let mut lcs = vec![vec![0u32; new.len() + 1]; old.len() + 1];
    for x in (0..old.len()).rev() {
        for y in (0..new.len()).rev() {
            lcs[x][y] = if old[x] == new[y] {
                lcs[x + 1][y + 1] + 1
            } else {
                lcs[x + 1][y].max(lcs[x][y + 1])
            };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut x, mut y) = (0, 0);
    while x < old.len() || y < new.len() {
        if x < old.len() && y < new.len() && old[x] == new[y] {
            ops.push((' ', old[x]));
            x += 1;
            y += 1;
        } else if y < new.len() && (x == old.len() || lcs[x][y + 1] >= lcs[x + 1][y]) {
            ops.push(('+', new[y]));
            y += 1;
        } else {
            ops.push(('-', old[x]));
            x += 1;
        }
    }
    let show = |line: &str| {
        let mut l = line
            .strip_suffix('\n')
            .map_or_else(|| format!("{line}⏎̸ (no newline)"), str::to_owned);
        if l.chars().count() > 160 {
            l = format!(
                "{}… ({} bytes)",
                l.chars().take(160).collect::<String>(),
                line.len()
            );
        }
        l
    };
    let mut out = String::new();
    let mut last_printed: Option<usize> = None;
    for (k, (op, line)) in ops.iter().enumerate() {
        let near = ops
            .iter()
            .enumerate()
            .skip(k.saturating_sub(2))
            .take(5)
            .any(|(_, (o, _))| *o != ' ');
        if !near {
            continue;
        }
        if last_printed.is_some_and(|p| p + 1 != k) {
            out.push_str("    ...\n");
        }
        let _ = writeln!(out, "    {op} {}", show(line));
        last_printed = Some(k);
    }
    out
}

fn compare_invocation(t: &str, exp: &ExpInvocation, run: &Run, got: &str, diffs: &mut Vec<String>) {
    let code = run.code();
    let stderr = run.err();
    let lost: Vec<&String> = exp
        .step_stderr
        .iter()
        .filter(|l| !stderr.contains(l.as_str()))
        .collect();
    if !lost.is_empty() {
        diffs.push(format!(
            "{t}, invocation {} ({}): lines the steps wrote to stderr are missing from the \
             agent's stderr: {lost:?}",
            exp.number, exp.title
        ));
    }
    let what = format!("{t}, invocation {} ({})", exp.number, exp.title);
    if code != Some(exp.exit) {
        diffs.push(format!(
            "{what}: exit code: expected {}, got {code:?}",
            exp.exit
        ));
    }
    let got = without_lines(got, &exp.racy_stdout);
    let got = got.as_str();
    let exp_ran = headers(&exp.stdout, &exp.mode);
    let got_ran = headers(got, &exp.mode);
    if exp_ran != got_ran {
        diffs.push(format!(
            "{what}: steps that ran (execution headers) differ:\n{}",
            line_diff(&(exp_ran.join("\n") + "\n"), &(got_ran.join("\n") + "\n"))
        ));
    }
    if exp.stdout != got {
        diffs.push(format!(
            "{what}: stdout differs (- expected, + got):\n{}",
            line_diff(&exp.stdout, got)
        ));
    }
}

/// `text` without the first occurrence of each of `lines` (whole lines).
fn without_lines(text: &str, lines: &[String]) -> String {
    let mut left: Vec<&str> = lines.iter().map(String::as_str).collect();
    text.split_inclusive('\n')
        .filter(|l| {
            let line = l.strip_suffix('\n').unwrap_or(l);
            match left.iter().position(|r| *r == line) {
                Some(i) => {
                    left.remove(i);
                    false
                }
                None => true,
            }
        })
        .collect()
}

fn compare_tree(t: &str, exp: &ExpTree, got: &ExpTree, diffs: &mut Vec<String>) {
    let what = format!("{t}, tree after {:?}", exp.title);
    let mut lines = Vec::new();
    for (p, c) in &exp.files {
        match got.files.get(p) {
            None => lines.push(format!("    missing: {p}")),
            Some(g) if c.is_some() && g != c => lines.push(format!(
                "    content of {p}:\n      expected {:?}\n      got      {:?}",
                c.as_deref().unwrap_or_default(),
                g.as_deref().unwrap_or_default()
            )),
            Some(_) => {}
        }
    }
    for p in got.files.keys() {
        if !exp.files.contains_key(p) {
            lines.push(format!("    unexpected: {p}"));
        }
    }
    for (p, target) in &exp.links {
        match got.links.get(p) {
            None => lines.push(format!("    missing link: {p} -> {target}")),
            Some(g) if g != target => {
                lines.push(format!("    link {p}: expected -> {target}, got -> {g}"));
            }
            Some(_) => {}
        }
    }
    for (p, target) in &got.links {
        if !exp.links.contains_key(p) {
            lines.push(format!("    unexpected link: {p} -> {target}"));
        }
    }
    if exp.special != got.special {
        let octal = |m: &BTreeMap<String, u32>| -> Vec<String> {
            m.iter().map(|(p, bits)| format!("{p} {bits:o}")).collect()
        };
        lines.push(format!(
            "    setuid, setgid and sticky bits: expected {:?}, got {:?}",
            octal(&exp.special),
            octal(&got.special)
        ));
    }
    if !lines.is_empty() {
        diffs.push(format!(
            "{what}: files under ROOT differ:\n{}",
            lines.join("\n")
        ));
    }
}

fn compare_modes(t: &str, exp: &Modes, host: &FakeHost, diffs: &mut Vec<String>) {
    let wrong: Vec<String> = exp
        .modes
        .iter()
        .filter_map(|(p, mode)| {
            let got =
                fs::symlink_metadata(modes_path(host, p)).map(|m| m.permissions().mode() & 0o7777);
            match got {
                Ok(g) if g == *mode => None,
                Ok(g) => Some(format!("    {p}: expected {mode:o}, got {g:o}")),
                Err(e) => Some(format!("    {p}: expected {mode:o}, got {e}")),
            }
        })
        .collect();
    if !wrong.is_empty() {
        diffs.push(format!(
            "{t}, modes ({}) differ:\n{}",
            exp.title,
            wrong.join("\n")
        ));
    }
}

/// Replay one transcript; panics listing every unsanctioned difference.
fn replay(name: &str) {
    require_root!();
    let t = Transcript::load(name);
    let host = FakeHost::new();
    let _reaper = Reaper(&host);
    prepare_root(&host);
    let package_dir = if name == "25-legacy-data-dir-copy-and-root-dir" {
        // "copy_dir absent in root_mount -> copied from SKYHOOK_DATA_DIR".
        host.outside().join("skyhook-package")
    } else {
        host.path(&t.copy_dir)
    };
    write_package(&t, &package_dir);
    prepare_modes(&t, &host);

    let steps = steps_of(&config_of(&t));
    let expected = table::apply_all(&t, Expected::from_legacy(&t), &steps);

    let mut diffs = Vec::new();
    let mut invocations = t.invocations();
    // The scratch directory outside ROOT (the agent's cwd; transcript 25's package source).
    let outside_before = host.snapshot_outside();
    for e in &expected.events {
        match e {
            ExpEvent::Invocation(exp) => {
                let inv = invocations.next().expect("same events");
                before_invocation(&t, inv, &host);
                let run = run_invocation(inv, &host);
                let got = normalize_stdout(&run.stdout, &host);
                compare_invocation(name, exp, &run, &got, &mut diffs);
                let outside = host.snapshot_outside();
                let written = outside_before.diff(&outside);
                if !written.is_empty() {
                    diffs.push(format!(
                        "{name}, invocation {}: the agent changed files outside ROOT:\n    {}",
                        exp.number,
                        written.join("\n    ")
                    ));
                }
            }
            ExpEvent::Tree(exp) => {
                let got = table::ignore_agent_only(actual_tree(&host, exp));
                compare_tree(name, exp, &got, &mut diffs);
            }
            ExpEvent::Modes(exp) => compare_modes(name, exp, &host, &mut diffs),
            ExpEvent::HistoryCount(exp) => {
                let got = actual_history_count(&host);
                if got.as_ref() != Some(exp) {
                    diffs.push(format!(
                        "{name}, history entries: expected {exp:?}, got {got:?}"
                    ));
                }
            }
            ExpEvent::Outside(exp) => {
                let got = actual_outside(&host);
                if &got != exp {
                    diffs.push(format!(
                        "{name}, beside the fake root: expected {:?}, got {:?}",
                        exp.paths, got.paths
                    ));
                }
            }
        }
    }
    assert!(
        diffs.is_empty(),
        "replay of {name}: {} difference(s) from the upstream agent that no row of the table in \
         tests/integration/replay/table.rs (docs/compatibility.md) sanctions:\n\n{}",
        diffs.len(),
        diffs.join("\n\n")
    );
}

macro_rules! replay_tests {
    ($($(#[$attr:meta])* $test:ident => $name:literal,)*) => {
        $(
            #[test]
            $(#[$attr])*
            fn $test() {
                replay($name);
            }
        )*
        /// Every vendored transcript, in order.
        const TRANSCRIPTS: &[&str] = &[$($name),*];
    };
}

replay_tests! {
    replay_01_apply_fresh => "01-apply-fresh",
    replay_02_apply_rerun_idempotence => "02-apply-rerun-idempotence",
    replay_03_apply_always_run_step => "03-apply-always-run-step",
    replay_04_apply_check_pass => "04-apply-check-pass",
    replay_05_apply_check_fail => "05-apply-check-fail",
    replay_06_apply_step_fails => "06-apply-step-fails",
    replay_07_returncodes_collapse => "07-returncodes-collapse",
    replay_08_missing_env_var => "08-missing-env-var",
    replay_09_mode_without_steps => "09-mode-without-steps",
    replay_10_upgrade_no_history => "10-upgrade-no-history",
    replay_11_upgrade_with_history => "11-upgrade-with-history",
    replay_12_corrupt_history => "12-corrupt-history",
    replay_13_uninstall_cycle => "13-uninstall-cycle",
    replay_14_post_interrupt_and_config => "14-post-interrupt-and-config",
    replay_15_interrupt_service_restart => "15-interrupt-service-restart",
    replay_16_interrupt_service_restart_fails => "16-interrupt-service-restart-fails",
    replay_17_interrupt_node_restart => "17-interrupt-node-restart",
    replay_18_interrupt_node_restart_sigterm => "18-interrupt-node-restart-sigterm",
    replay_19_interrupt_node_restart_fails => "19-interrupt-node-restart-fails",
    replay_20_interrupt_no_op_and_others => "20-interrupt-no-op-and-others",
    replay_22_cli_forms_and_errors => "22-cli-forms-and-errors",
    replay_23_cli_legacy_forms => "23-cli-legacy-forms",
    replay_25_legacy_data_dir_copy_and_root_dir => "25-legacy-data-dir-copy-and-root-dir",
    replay_26_copy_resolv_and_write_logs => "26-copy-resolv-and-write-logs",
    replay_27_log_retention => "27-log-retention",
    replay_28_sigterm_during_step => "28-sigterm-during-step",
    replay_29_output_framing => "29-output-framing",
    replay_30_step_environment_and_markers => "30-step-environment-and-markers",
    replay_36_uninstall_flows => "36-uninstall-flows",
    replay_37_upgrade_history_several_versions => "37-upgrade-history-several-versions",
    replay_38_history_edge_cases => "38-history-edge-cases",
    replay_39_config_mode_configmaps => "39-config-mode-configmaps",
    replay_40_root_dir_overlay => "40-root-dir-overlay",
    replay_41_boolean_and_dir_env_variants => "41-boolean-and-dir-env-variants",
    replay_42_step_env_precedence_node_order => "42-step-env-precedence-node-order",
    replay_43_binary_and_long_output => "43-binary-and-long-output",
    replay_44_stdin_and_background_child => "44-stdin-and-background-child",
    replay_45_interrupt_service_restart_resume => "45-interrupt-service-restart-resume",
}

#[test]
fn every_vendored_transcript_is_replayed() {
    let mut vendored: Vec<String> = fs::read_dir(transcript::transcripts_dir())
        .expect("tests/replay/transcripts")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(".txt").map(str::to_owned))
        .collect();
    vendored.sort();
    assert_eq!(
        vendored, TRANSCRIPTS,
        "each transcript needs its replay test"
    );
}

#[test]
fn every_transcript_parses_into_invocations_and_listings() {
    for name in TRANSCRIPTS {
        let t = Transcript::load(name);
        assert!(t.invocations().count() > 0, "{name}: no invocation parsed");
        assert!(t.last_tree().is_some(), "{name}: no tree listing parsed");
        // The package can be rebuilt (config identified, every listed step file sized right).
        let dir = tempfile::tempdir().unwrap();
        write_package(&t, dir.path());
    }
    // The steps' stderr lines are found under the legacy relay's prefixes.
    let stderr_of = |name: &str, n: u32| {
        let mut e = Expected::from_legacy(&Transcript::load(name));
        e.invocation(n).step_stderr.clone()
    };
    assert_eq!(
        stderr_of("01-apply-fresh", 1),
        ["[s1.sh] to stderr", "[s2.sh] to stderr"]
    );
    assert_eq!(
        stderr_of("16-interrupt-service-restart-fails", 1),
        ["fake systemctl: failing kubelet"]
    );
    assert_eq!(
        stderr_of("07-returncodes-collapse", 1),
        ["[rc3.sh] to stderr", "[rc3.sh] exiting 3"]
    );
}

#[test]
fn every_sanctioned_difference_is_observed_and_documented() {
    table::assert_rows_are_used_and_documented(TRANSCRIPTS);
}
