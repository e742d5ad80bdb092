//! The sanctioned differences between this agent and the upstream Python agent, as observed by
//! replaying the upstream transcripts: ONE table, [`SANCTIONED`]. Each row names what the legacy
//! agent did, what this agent does instead, and the SPEC section or upstream change that
//! requires it, and carries the rewrite that turns the legacy expectation into this agent's.
//! `docs/compatibility.md` lists the same rows; a test keeps the two in step and fails on a row
//! that no transcript needs.

use std::fmt::Write as _;

use super::{ExpTree, Expected, StepInfo, headers};
use crate::util::{BOOT_ID, Banner, legacy_marker_name, native_marker_name};

/// One sanctioned difference.
pub struct Sanction {
    /// Short identifier, also the anchor in docs/compatibility.md.
    pub id: &'static str,
    /// What the Python agent did.
    pub legacy: &'static str,
    /// What this agent does.
    pub agent: &'static str,
    /// The SPEC section or upstream change that sanctions it.
    pub basis: &'static str,
    /// Transcripts the row applies to (empty: all).
    pub scope: &'static [&'static str],
    /// Rewrites the legacy expectation into this agent's.
    pub rewrite: fn(&mut Expected, &[StepInfo]),
    /// State paths (ROOT-relative) only this agent writes; left out of the comparison.
    pub agent_only: Option<fn(&str) -> bool>,
}

const STATE: &str = "var/lib/skyhook/sk1";
const FLAGS: &str = "var/lib/skyhook/sk1/flags/pkg/1.0.0";
const HISTORY: &str = "var/lib/skyhook/sk1/history/pkg.json";
const INTERRUPT_FLAGS: &str = "var/lib/skyhook/sk1/interrupts/flags/abc_pkg_1.0.0";

/// THE table.
pub static SANCTIONED: &[Sanction] = &[
    Sanction {
        id: "relay-prefixes",
        legacy: "prefixed every relayed line of step output with `[out]<local time> ` \
                 (`[err]` on stderr), and left a dangling prefix after the last line",
        agent: "relays the step's bytes unchanged",
        basis: "SPEC §8.4 Output",
        scope: &[],
        rewrite: relay_prefixes,
        agent_only: None,
    },
    Sanction {
        id: "result-lines",
        legacy: "printed `SUCEEDED: <step> <args>`, `FAILED: <step> <args> <code>` and \
                 `INTERRUPT FAILED: [...] return_code: N` on stdout",
        agent: "prints no result line; the result of each step is logged on stderr",
        basis: "SPEC §8.4 (Go), §8.6",
        scope: &[],
        rewrite: result_lines,
        agent_only: None,
    },
    Sanction {
        id: "diagnostics-on-stderr",
        legacy: "printed its own notes on stdout: `Skipping <step> because <flag> exists.`, \
                 `Flag exists but … so running step`, `WARNING: <flag> exists … \
                 OVERLAY_ALWAYS_RUN_STEP …`, `no existing history found …`, `Failed to load \
                 existing history …`, `<step>: Expected environment variable did not exist: X`",
        agent: "logs the same facts on stderr (skips, always-run warning, history warnings, the \
                missing-variables error); stdout carries only the banner, headers, step output \
                and interrupt commands",
        basis: "SPEC §1.2, §2 (SKYHOOK_AGENT_LOG_FORMAT), §8.2, §8.5, §8.9",
        scope: &[],
        rewrite: diagnostics_on_stderr,
        agent_only: None,
    },
    Sanction {
        id: "marker-content",
        legacy: "wrote `step_always_runs: True|False` (and a local time without zone) in step \
                 markers",
        agent: "writes `step_always_runs: true|false` (and UTC RFC 3339 with `Z`)",
        basis: "SPEC §8.7 Content",
        scope: &[],
        rewrite: marker_content,
        agent_only: None,
    },
    Sanction {
        id: "native-markers",
        legacy: "wrote only its own marker `<path>_<base64>` per completed step",
        agent: "also writes the Go agent's `<base>-<sha256>.flag` beside it",
        basis: "SPEC §8.7 (both markers)",
        scope: &[],
        rewrite: native_markers,
        agent_only: None,
    },
    Sanction {
        id: "history-format",
        legacy: "wrote the history file as compact JSON with `+00:00` times and no final newline",
        agent: "writes it 2-space indented with a final newline, times in UTC with `Z`; keys it \
                does not know (in the file or in an entry) are kept, after its own",
        basis: "SPEC §8.9",
        scope: &[],
        rewrite: history_format,
        agent_only: None,
    },
    Sanction {
        id: "agent-state",
        legacy: "kept no results record, metrics or lock files",
        agent: "writes `STATE/results/<pkg>/<ver>/<MODE>.json` and `STATE/metrics/<pkg>.prom` \
                (with its `.json`) after every run and holds `STATE/locks/<pkg>.lock` / \
                `STATE/locks/interrupt-<RID>.lock`; the upstream agents ignore them (contents \
                pinned by the results, metrics and locking tests)",
        basis: "SPEC §8.12, §11; docs/metrics.md",
        scope: &[],
        rewrite: none,
        agent_only: Some(agent_state),
    },
    Sanction {
        id: "returncodes",
        legacy: "collapsed every non-zero exit code to 1, so `rc3.sh` exiting 3 with \
                 returncodes [0, 3] failed and `rc1.sh` exiting 7 with returncodes [1] succeeded",
        agent: "judges the real exit code: rc3.sh succeeds (marker), then rc1.sh (exit 0, not in \
                [1]) fails; the rerun skips rc3.sh; rc1.sh exiting 7 fails",
        basis: "SPEC §8.6 (fix)",
        scope: &["07-returncodes-collapse"],
        rewrite: returncodes,
        agent_only: None,
    },
    Sanction {
        id: "corrupt-history-version",
        legacy: "passed an empty PREVIOUS_VERSION to the first upgrade step after finding a \
                 corrupt history (`unknown` to the next ones)",
        agent: "treats a corrupt history as unknown for every step: `unknown`",
        basis: "SPEC §8.9 (missing/empty/corrupt → `unknown`)",
        scope: &["12-corrupt-history", "38-history-edge-cases"],
        rewrite: corrupt_history_version,
        agent_only: None,
    },
    Sanction {
        id: "history-without-current-version",
        legacy: "took a `current-version` of `\"\"` as the previous version (an empty \
                 PREVIOUS_VERSION, `''` in the upgrade step's arguments, the file kept), and \
                 crashed (exit 1, no step run) on a history file without `current-version` or \
                 one that is not a JSON object (`[]`)",
        agent: "treats each as an unusable history file, like an empty or corrupt one: moves it \
                to `<pkg>.json.backup` with a warning and runs the upgrade from `unknown`",
        basis: "SPEC §5 (empty or corrupt state file → unknown, with a warning), §8.9",
        scope: &["38-history-edge-cases"],
        rewrite: history_without_current_version,
        agent_only: None,
    },
    Sanction {
        id: "history-cap",
        legacy: "kept every history entry (101 after an upgrade-check on a history of 100)",
        agent: "keeps the newest 100 entries",
        basis: "SPEC §8.9 (at most 100 entries)",
        scope: &["38-history-edge-cases"],
        rewrite: history_cap,
        agent_only: None,
    },
    Sanction {
        id: "expected-config-files",
        legacy: "accepted an `expected_config_files` entry whenever the path existed: a \
                 directory, `\"\"` (the configmaps directory itself), `../config.json` (outside \
                 the configmaps directory)",
        agent: "requires a non-empty relative path without `..` to a regular file (after \
                links) under `configmaps/`: exit 1 before any step (`expected config file \
                \"sub/b.conf\" was not found in the configmaps directory (found a directory)`, \
                `expected config file \"\" must be a non-empty relative path without \"..\" \
                components`)",
        basis: "SPEC §6 step 7",
        scope: &["39-config-mode-configmaps"],
        rewrite: expected_config_files,
        agent_only: None,
    },
    Sanction {
        id: "root-dir-modes",
        legacy: "gave existing host directories the modes of their `root_dir/` counterparts: \
                 ROOT took `root_dir`'s 0700, `/etc` 0750, `/var/tmp` lost its sticky 1777 for \
                 0755",
        agent: "creates the directories the overlay needs with the source's modes and leaves \
                those that exist as they are (ROOT itself is never changed)",
        basis: "SPEC §6 step 7 (never chmod ROOT), §5",
        scope: &["40-root-dir-overlay"],
        rewrite: root_dir_modes,
        agent_only: None,
    },
    Sanction {
        id: "root-dir-special-bits",
        legacy: "kept setuid, setgid and sticky bits on the files it copied from `root_dir/` \
                 (`opt/pkg/bin/suid-tool` stayed `-rwsr-xr-x` on the host)",
        agent: "drops them from the copies (`-rwxr-xr-x`)",
        basis: "SPEC §5 (copies keep the permission bits minus setuid/setgid/sticky), §6 step 7",
        scope: &["40-root-dir-overlay"],
        rewrite: root_dir_special_bits,
        agent_only: None,
    },
    Sanction {
        id: "empty-state-dir",
        legacy: "took an empty SKYHOOK_ROOT_DIR as it was: its state right under ROOT \
                 (`<ROOT>/flags/START`), the banner showing `SKYHOOK_ROOT_DIR: ` and `flag_dir: \
                 /flags/pkg/1.0.0`",
        agent: "an empty directory variable is unset: the default `/etc/skyhook`, in the \
                banner too",
        basis: "SPEC §2 (directory variables: empty → default)",
        scope: &["41-boolean-and-dir-env-variants"],
        rewrite: empty_state_dir,
        agent_only: None,
    },
    Sanction {
        id: "cleaned-state-dir",
        legacy: "printed SKYHOOK_ROOT_DIR as given: `/var/lib/skyhook/sk1/`, `flag_dir: \
                 /var/lib/skyhook/sk1//flags/pkg/1.0.0`",
        agent: "prints the cleaned paths (`/var/lib/skyhook/sk1`, `…/sk1/flags/pkg/1.0.0`)",
        basis: "SPEC §3 (paths are cleaned)",
        scope: &["41-boolean-and-dir-env-variants"],
        rewrite: cleaned_state_dir,
        agent_only: None,
    },
    Sanction {
        id: "relative-state-dir",
        legacy: "appended a relative SKYHOOK_ROOT_DIR to ROOT without a `/` (`var/relstate` \
                 became `<ROOT>var/relstate`): its state went to a directory beside the host \
                 root, outside it",
        agent: "resolves it under ROOT (`/var/relstate`, in the banner too) and writes nothing \
                outside ROOT",
        basis: "SPEC §2 (directory variables stay inside ROOT), §5",
        scope: &["41-boolean-and-dir-env-variants"],
        rewrite: relative_state_dir,
        agent_only: None,
    },
    Sanction {
        id: "step-stdin",
        legacy: "let steps read the agent's own stdin (44's step read the line the agent was \
                 given)",
        agent: "gives every step and interrupt command `/dev/null` as stdin (the step reads \
                end-of-file)",
        basis: "SPEC §8.4 (stdin is `/dev/null`)",
        scope: &["44-stdin-and-background-child"],
        rewrite: step_stdin,
        agent_only: None,
    },
    Sanction {
        id: "leftover-output-window",
        legacy: "relayed a step's output until every process holding its pipes had exited (44's \
                 background child printed its line 2 s after bg.sh exited, and the agent waited \
                 for it)",
        agent: "relays a leftover process's output until the pipes have been idle for 2 s after \
                the step's main process exited, then lets go (the process lives on): a line \
                printed right at that boundary, as 44's is, may or may not be relayed",
        basis: "SPEC §8.4 (leftover processes, the Go agent's `WaitDelay`)",
        scope: &["44-stdin-and-background-child"],
        rewrite: leftover_output_window,
        agent_only: None,
    },
    Sanction {
        id: "unknown-mode",
        legacy: "printed the banner, then warned and exited 0",
        agent: "warns and exits 0 without a banner",
        basis: "SPEC §1.1 (unknown MODE: no banner)",
        scope: &["22-cli-forms-and-errors"],
        rewrite: unknown_mode,
        agent_only: None,
    },
    Sanction {
        id: "validation-first",
        legacy: "printed a partial banner and crashed (exit 1) on 0, 1 or 5 arguments and on a \
                 missing or malformed SKYHOOK_RESOURCE_ID; with a relative copy_dir it wrote \
                 START and failed the first step",
        agent: "validates before printing or writing anything: a malformed command line is a \
                usage error (exit 2), a bad resource ID exits 1; nothing on stdout, nothing on \
                disk",
        basis: "SPEC §1.1, §1.2, §3, §6 step 1",
        scope: &["22-cli-forms-and-errors"],
        rewrite: validation_first,
        agent_only: None,
    },
    Sanction {
        id: "on-host-false",
        legacy: "ran `on_host: false` steps through its chroot helper like the others",
        agent: "runs them without chroot from `<ROOT>COPY_DIR`: cwd, STEP_ROOT and SKYHOOK_DIR \
                carry the ROOT prefix",
        basis: "SPEC §8.4 (`on_host: false`)",
        scope: &["30-step-environment-and-markers"],
        rewrite: on_host_false,
        agent_only: None,
    },
    Sanction {
        id: "long-marker-name",
        legacy: "crashed (`File name too long`, exit 1) writing the marker of a step whose \
                 legacy marker name exceeds 255 bytes, after the step had run",
        agent: "skips that legacy marker with a warning, writes the native one, exits 0",
        basis: "SPEC §8.7 (legacy name over 255 bytes)",
        scope: &["30-step-environment-and-markers"],
        rewrite: long_marker_name,
        agent_only: None,
    },
    Sanction {
        id: "reboot-by-boot-id",
        legacy: "marked `node_restart_0.complete` as soon as `reboot` exited 0 or its helper was \
                 SIGTERMed (then exiting 1), and removed it when `reboot` failed",
        agent: "keeps `node_restart_0.pending` (`boot-id:<id>`) and an attempts count until a \
                run sees another boot ID: a `reboot` that returns without the host going down \
                fails after 10 s and runs again next time; the agent's own SIGTERM during the \
                reboot means shutdown: it says so and waits for the host to go down, exiting 1 \
                if it is still up after the stop grace, never 0 (the operator's interrupt Job \
                completes on the restart that sees the new boot ID, docs/interrupts.md); a \
                failed reboot leaves the pending marker, so the next run under the same boot \
                ID runs it again",
        basis: "SPEC §9.4, §9.6",
        scope: &[
            "17-interrupt-node-restart",
            "18-interrupt-node-restart-sigterm",
            "19-interrupt-node-restart-fails",
        ],
        rewrite: reboot_by_boot_id,
        agent_only: None,
    },
    Sanction {
        id: "banner-before-resolv",
        legacy: "copied resolv.conf before printing the banner, so its crash on a root without \
                 /etc printed nothing",
        agent: "prints the banner, then stops with exit 1 (`<R>/etc is not a directory`)",
        basis: "SPEC §6 steps 2–3",
        scope: &["26-copy-resolv-and-write-logs"],
        rewrite: banner_before_resolv,
        agent_only: None,
    },
];

/// Rows that apply to transcript `name`.
fn rows_for(name: &str) -> impl Iterator<Item = &'static Sanction> + '_ {
    SANCTIONED
        .iter()
        .filter(move |s| s.scope.is_empty() || s.scope.contains(&name))
}

/// The legacy expectation rewritten by every row in scope, in table order.
pub fn apply_all(
    t: &super::transcript::Transcript,
    mut e: Expected,
    steps: &[StepInfo],
) -> Expected {
    for row in rows_for(&t.name) {
        (row.rewrite)(&mut e, steps);
    }
    e
}

/// `tree` without the paths only this agent writes.
pub fn ignore_agent_only(mut tree: ExpTree) -> ExpTree {
    let agent_only = |p: &String| SANCTIONED.iter().filter_map(|s| s.agent_only).any(|f| f(p));
    tree.files.retain(|p, _| !agent_only(p));
    tree.links.retain(|p, _| !agent_only(p));
    tree
}

/// docs/compatibility.md shows exactly this table, and no row is stale: a row for every
/// transcript changes some transcript's expectation, a scoped row changes each transcript of
/// its scope (rows that only leave agent-only paths out are exempt).
pub fn assert_rows_are_used_and_documented(transcripts: &[&str]) {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/compatibility.md"),
    )
    .expect("docs/compatibility.md");
    let loaded: Vec<_> = transcripts
        .iter()
        .map(|n| super::transcript::Transcript::load(n))
        .collect();
    let table = markdown_table();
    assert!(
        doc.contains(&table),
        "docs/compatibility.md must hold the table of sanctioned differences exactly as \
         tests/integration/replay/table.rs has it:\n\n{table}"
    );
    for row in SANCTIONED {
        for s in row.scope {
            assert!(
                transcripts.contains(s),
                "row `{}`: unknown transcript {s}",
                row.id
            );
        }
        if row.agent_only.is_some() {
            continue;
        }
        let changes = |t: &&super::transcript::Transcript| {
            let steps = super::steps_of(&super::config_of(t));
            // Apply the rows before this one, then see whether this one changes anything.
            let mut e = Expected::from_legacy(t);
            for earlier in rows_for(&t.name) {
                if std::ptr::eq(earlier, row) {
                    break;
                }
                (earlier.rewrite)(&mut e, &steps);
            }
            let before = e.clone();
            (row.rewrite)(&mut e, &steps);
            e != before
        };
        if row.scope.is_empty() {
            assert!(
                loaded.iter().any(|t| changes(&t)),
                "row `{}` changes no transcript's expectation: remove it",
                row.id
            );
        } else {
            for t in loaded
                .iter()
                .filter(|t| row.scope.contains(&t.name.as_str()))
            {
                assert!(
                    changes(&t),
                    "row `{}` changes nothing in {}: take it out of the row's scope",
                    row.id,
                    t.name
                );
            }
        }
    }
}

/// The table as docs/compatibility.md shows it.
pub fn markdown_table() -> String {
    let cell = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace('|', "\\|")
    };
    let mut out = String::from(
        "| id | upstream Python agent | this agent | sanctioned by |\n|---|---|---|---|\n",
    );
    for row in SANCTIONED {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            row.id,
            cell(row.legacy),
            cell(row.agent),
            cell(row.basis)
        );
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Rewrites
// ---------------------------------------------------------------------------------------------

/// Remove every `[out]<time> ` the legacy relay inserted.
fn relay_prefixes(e: &mut Expected, _: &[StepInfo]) {
    for inv in e.invocations_mut() {
        let mut out = String::new();
        let mut rest = inv.stdout.as_str();
        while let Some(k) = rest.find("[out]") {
            out.push_str(&rest[..k]);
            let after = &rest[k + 5..];
            let n = super::datetime_len(after.as_bytes());
            if n > 0 && after.as_bytes().get(n) == Some(&b' ') {
                rest = &after[n + 1..];
            } else {
                out.push_str("[out]");
                rest = after;
            }
        }
        out.push_str(rest);
        inv.stdout = out;
    }
}

/// Remove the result lines; one printed after an unterminated line of step output ended that
/// line, which the agent does with `\n` (SPEC §8.4 line framing).
fn result_lines(e: &mut Expected, _: &[StepInfo]) {
    for inv in e.invocations_mut() {
        let mut out = String::new();
        for line in inv.stdout.split_inclusive('\n') {
            let cut = ["INTERRUPT FAILED: ", "SUCEEDED: ", "FAILED: "]
                .iter()
                .filter_map(|m| line.find(m))
                .min();
            match cut {
                Some(0) => {}
                Some(k) => {
                    out.push_str(&line[..k]);
                    out.push('\n');
                }
                None => out.push_str(line),
            }
        }
        inv.stdout = out;
    }
}

/// No rewrite (rows that only leave agent-only paths out).
fn none(_: &mut Expected, _: &[StepInfo]) {}

/// The legacy agent's own stdout notes, by how they start or end.
fn is_legacy_note(line: &str) -> bool {
    let l = line.trim_end_matches('\n');
    (l.starts_with("Skipping ") && l.ends_with(" exists."))
        || l.starts_with("Flag exists but ")
        || (l.starts_with("WARNING: ") && l.contains("OVERLAY_ALWAYS_RUN_STEP"))
        || l.starts_with("no existing history found for ")
        || l.starts_with("Failed to load existing history, ")
        || l.contains(": Expected environment variable did not exist: ")
}

fn diagnostics_on_stderr(e: &mut Expected, _: &[StepInfo]) {
    for inv in e.invocations_mut() {
        inv.stdout = inv
            .stdout
            .split_inclusive('\n')
            .filter(|l| !is_legacy_note(l))
            .collect();
    }
}

/// A step marker path split into its version directory (`<state>/flags/pkg/<ver>`, any state
/// directory and version) and the marker's name.
fn step_marker(path: &str) -> Option<(&str, &str)> {
    // 41's empty SKYHOOK_ROOT_DIR put the Python agent's state right under ROOT.
    let k = if path.starts_with("flags/pkg/") {
        "flags/pkg/".len()
    } else {
        path.find("/flags/pkg/")? + "/flags/pkg/".len()
    };
    let name = k + path[k..].find('/')? + 1;
    Some((&path[..name - 1], &path[name..]))
}

fn marker_content(e: &mut Expected, _: &[StepInfo]) {
    for tree in e.trees_mut() {
        for (p, c) in &mut tree.files {
            if let Some(c) = c.as_mut().filter(|_| step_marker(p).is_some()) {
                *c = c
                    .replace("step_always_runs: True", "step_always_runs: true")
                    .replace("step_always_runs: False", "step_always_runs: false");
            }
        }
    }
}

/// The native marker of `step` in version directory `dir`, relative to ROOT.
fn native_marker_in(dir: &str, step: &StepInfo) -> String {
    format!(
        "{dir}/{}",
        native_marker_name(
            &step.path,
            &step.arguments,
            &step.returncodes,
            &step.env,
            step.on_host
        )
    )
}

/// The native marker of `step` for version 1.0.0, relative to ROOT.
fn native_marker(step: &StepInfo) -> String {
    native_marker_in(FLAGS, step)
}

/// Beside every legacy marker of a step (any version), its native marker.
fn native_markers(e: &mut Expected, steps: &[StepInfo]) {
    for tree in e.trees_mut() {
        let mut native = Vec::new();
        for (path, content) in &tree.files {
            let Some((dir, name)) = step_marker(path) else {
                continue;
            };
            for step in steps
                .iter()
                .filter(|s| legacy_marker_name(&s.path, &s.arguments, &s.returncodes) == name)
            {
                native.push((native_marker_in(dir, step), content.clone()));
            }
        }
        tree.files.extend(native);
    }
}

/// The legacy history rendered as this agent writes it: `serde_json`'s pretty printer, the
/// known keys first and the others (another agent's additions, kept) after them, sorted.
fn history_format(e: &mut Expected, _: &[StepInfo]) {
    use serde_json::{Map, Value};
    /// `"key": value` at `indent`, nested values indented below it.
    fn field(key: &str, value: &Value, indent: &str) -> String {
        let pretty = serde_json::to_string_pretty(value).unwrap();
        format!(
            "{indent}\"{key}\": {}",
            pretty.replace('\n', &format!("\n{indent}"))
        )
    }
    /// The fields of `map`: `known` first, in that order, then the rest.
    fn fields(
        map: &Map<String, Value>,
        known: &[&str],
        indent: &str,
        render: &dyn Fn(&str, &Value) -> String,
    ) -> Vec<String> {
        known
            .iter()
            .filter_map(|k| Some(render(k, map.get(*k)?)))
            .chain(
                map.iter()
                    .filter(|(k, _)| !known.contains(&k.as_str()))
                    .map(|(k, v)| field(k, v, indent)),
            )
            .collect()
    }
    for tree in e.trees_mut() {
        let Some(Some(c)) = tree.files.get_mut(HISTORY) else {
            continue;
        };
        let v: Value = serde_json::from_str(c).expect("legacy history parses");
        let entry = |h: &Value| {
            let map = h.as_object().expect("legacy history entries are objects");
            let inner = fields(map, &["version", "time"], "      ", &|k, v| {
                field(k, v, "      ")
            });
            format!("    {{\n{}\n    }}", inner.join(",\n"))
        };
        let render = |k: &str, v: &Value| match (k, v.as_array()) {
            ("history", Some(entries)) if !entries.is_empty() => {
                let entries: Vec<String> = entries.iter().map(entry).collect();
                format!("  \"history\": [\n{}\n  ]", entries.join(",\n"))
            }
            _ => field(k, v, "  "),
        };
        let map = v.as_object().expect("the legacy history is an object");
        let top = fields(map, &["current-version", "history"], "  ", &render);
        *c = format!("{{\n{}\n}}\n", top.join(",\n"));
    }
}

/// The state directories of the transcripts: the operator's, and the default and the resolved
/// relative SKYHOOK_ROOT_DIR of 41.
const STATE_DIRS: &[&str] = &[STATE, "etc/skyhook", "var/relstate"];

fn agent_state(path: &str) -> bool {
    STATE_DIRS.iter().any(|state| {
        ["results", "metrics", "locks"]
            .iter()
            .any(|dir| path.starts_with(&format!("{state}/{dir}/")))
    })
}

/// The lines of `stdout` from the header of `path` up to the next header (or the end).
fn step_block(stdout: &str, mode: &str, path: &str) -> String {
    let heads = headers(stdout, mode);
    let head = heads
        .iter()
        .find(|h| h.starts_with(&format!("{mode} {path} ")))
        .unwrap_or_else(|| panic!("no header of {path}"));
    let start = stdout.find(head.as_str()).unwrap();
    let rest = &stdout[start + head.len() + 1..];
    let end = heads
        .iter()
        .filter_map(|h| rest.find(h.as_str()))
        .min()
        .unwrap_or(rest.len());
    stdout[start..start + head.len() + 1 + end].to_owned()
}

fn returncodes(e: &mut Expected, steps: &[StepInfo]) {
    let rc1 = {
        let inv2 = e.invocation(2);
        step_block(&inv2.stdout, "apply", "rc1.sh")
    };
    // 1: rc3.sh exits 3, in [0, 3]: success; rc1.sh then exits 0, not in [1]: failure.
    let inv1 = e.invocation(1);
    inv1.stdout.push_str(&rc1);
    inv1.exit = 1;
    // 2: rc3.sh is complete (marker from 1) and skipped; rc1.sh exits 1, in [1]: success.
    let inv2 = e.invocation(2);
    let rc3 = step_block(&inv2.stdout, "apply", "rc3.sh");
    inv2.stdout = inv2.stdout.replacen(&rc3, "", 1);
    inv2.step_stderr.retain(|l| !l.starts_with("[rc3.sh] "));
    // 3 (markers removed): rc3.sh succeeds; rc1.sh exits 7, not in [1]: failure, no marker.
    e.invocation(3).exit = 1;
    let rc1_step = steps.iter().find(|s| s.path == "rc1.sh").expect("rc1.sh");
    let tree = e.tree_after(3);
    tree.files.remove(&format!(
        "{FLAGS}/{}",
        legacy_marker_name("rc1.sh", &rc1_step.arguments, &rc1_step.returncodes)
    ));
    tree.files.remove(&native_marker(rc1_step));
}

/// The invocation that found the corrupt (12: `{`) or empty (38) history.
fn corrupt_history_version(e: &mut Expected, _: &[StepInfo]) {
    let n = match e.transcript.as_str() {
        "12-corrupt-history" => 1,
        "38-history-edge-cases" => 4,
        other => panic!("corrupt-history-version does not cover {other}"),
    };
    let inv = e.invocation(n);
    inv.stdout = inv
        .stdout
        .replacen("PREVIOUS_VERSION=\n", "PREVIOUS_VERSION=unknown\n", 1);
}

/// 38: `current-version: ""` (1), no `current-version` (2), `[]` (3): each run as with no
/// usable history, the same output as 1 once `""` reads `unknown`.
fn history_without_current_version(e: &mut Expected, _: &[StepInfo]) {
    let first = e.invocation(1);
    first.stdout = first
        .stdout
        .replace("PREVIOUS_VERSION=\n", "PREVIOUS_VERSION=unknown\n")
        .replace("['', '1.0.0']", "['unknown', '1.0.0']")
        .replace("args(2):  1.0.0\n", "args(2): unknown 1.0.0\n");
    let first = first.clone();
    for n in [2, 3] {
        let inv = e.invocation(n);
        inv.stdout.clone_from(&first.stdout);
        inv.step_stderr.clone_from(&first.step_stderr);
        inv.exit = 0;
    }
}

/// 38: of 1.0.0 and the 100 entries 0.100.0 … 0.1.0 before it, the newest 100 end at 0.2.0.
fn history_cap(e: &mut Expected, _: &[StepInfo]) {
    for count in e.history_counts_mut() {
        if count.count > 100 {
            count.count = 100;
            "0.2.0".clone_into(&mut count.last);
        }
    }
}

/// The banner of a stdout: its lines up to the second dashed line.
fn banner_only(stdout: &str) -> String {
    let end = stdout
        .match_indices("--------------------\n")
        .nth(1)
        .map(|(k, m)| k + m.len())
        .expect("a banner");
    stdout[..end].to_owned()
}

/// 39: `sub/b.conf` a directory (4), `[""]` (6), `[../config.json]` (7): refused after the
/// banner, no step run.
fn expected_config_files(e: &mut Expected, _: &[StepInfo]) {
    for n in [4, 6, 7] {
        let inv = e.invocation(n);
        inv.stdout = banner_only(&inv.stdout);
        inv.step_stderr.clear();
        inv.exit = 1;
    }
}

/// The directories of the `modes (before)` block keep those modes.
fn root_dir_modes(e: &mut Expected, _: &[StepInfo]) {
    let (before, after) = e.modes_mut();
    let before = before.expect("a modes (before) block");
    for modes in after {
        for (path, mode) in &mut modes.modes {
            if let Some(kept) = before.modes.get(path) {
                *mode = *kept;
            }
        }
    }
}

/// Only the package's own files (under STATE) keep their special bits.
fn root_dir_special_bits(e: &mut Expected, _: &[StepInfo]) {
    for tree in e.trees_mut() {
        tree.special
            .retain(|path, _| path.starts_with(&format!("{STATE}/")));
    }
}

/// In invocation `n`'s banner, SKYHOOK_ROOT_DIR `from` reads `to`, and so do the flag and
/// history paths under it.
fn banner_state_dir(e: &mut Expected, n: u32, from: &str, to: &str) {
    let inv = e.invocation(n);
    inv.stdout = inv
        .stdout
        .replacen(
            &format!("SKYHOOK_ROOT_DIR: {from}\n"),
            &format!("SKYHOOK_ROOT_DIR: {to}\n"),
            1,
        )
        .replacen(
            &format!("flag_dir: {from}/"),
            &format!("flag_dir: {to}/"),
            1,
        )
        .replacen(
            &format!("history_file: {from}/"),
            &format!("history_file: {to}/"),
            1,
        );
}

/// 41, invocation 5: the state under `/etc/skyhook`.
fn empty_state_dir(e: &mut Expected, _: &[StepInfo]) {
    banner_state_dir(e, 5, "", "/etc/skyhook");
    for tree in e.trees_mut() {
        let legacy: Vec<String> = tree
            .files
            .keys()
            .filter(|p| p.starts_with("flags/"))
            .cloned()
            .collect();
        for p in legacy {
            let content = tree.files.remove(&p).unwrap();
            tree.files.insert(format!("etc/skyhook/{p}"), content);
        }
    }
}

/// 41, invocation 6: `/var/lib/skyhook/sk1/` without its final `/`.
fn cleaned_state_dir(e: &mut Expected, _: &[StepInfo]) {
    banner_state_dir(e, 6, "/var/lib/skyhook/sk1/", "/var/lib/skyhook/sk1");
}

/// 41, invocation 7: START and s1.sh's markers under `<ROOT>/var/relstate`, nothing beside ROOT.
fn relative_state_dir(e: &mut Expected, steps: &[StepInfo]) {
    banner_state_dir(e, 7, "var/relstate", "/var/relstate");
    for outside in e.outside_mut() {
        outside.paths.retain(|p| p == ".");
    }
    let s1 = steps.iter().find(|s| s.path == "s1.sh").expect("s1.sh");
    let flags = "var/relstate/flags";
    let marker = Some("last_run: <TIME>\nstep_always_runs: true".to_owned());
    let tree = e.tree_after(7);
    tree.files
        .insert(format!("{flags}/START"), Some(String::new()));
    tree.files.insert(
        format!(
            "{flags}/pkg/1.0.0/{}",
            legacy_marker_name(&s1.path, &s1.arguments, &s1.returncodes)
        ),
        marker.clone(),
    );
    tree.files
        .insert(native_marker_in(&format!("{flags}/pkg/1.0.0"), s1), marker);
}

fn step_stdin(e: &mut Expected, _: &[StepInfo]) {
    let inv = e.invocation(1);
    inv.stdout = inv.stdout.replacen(
        "stdin.sh read: a line on the agent's stdin\n",
        "stdin.sh: EOF on stdin\n",
        1,
    );
}

fn leftover_output_window(e: &mut Expected, _: &[StepInfo]) {
    const LATE: &str = "late output from the background child";
    let inv = e.invocation(1);
    inv.stdout = inv.stdout.replacen(&format!("{LATE}\n"), "", 1);
    inv.racy_stdout.push(LATE.to_owned());
}

fn unknown_mode(e: &mut Expected, _: &[StepInfo]) {
    for inv in e.invocations_mut() {
        if inv.mode == "bogus" || inv.mode == "APPLY" {
            inv.stdout.clear();
        }
    }
}

fn validation_first(e: &mut Expected, _: &[StepInfo]) {
    for inv in e.invocations_mut() {
        match inv.number {
            // 0 or 1 argument, 5 arguments, a relative COPY_DIR: usage errors.
            1 | 2 | 3 | 8 => {
                inv.stdout.clear();
                inv.exit = 2;
            }
            // SKYHOOK_RESOURCE_ID missing or without `_PACKAGE_VERSION`.
            6 | 7 => inv.stdout.clear(),
            _ => {}
        }
    }
    // Nothing written: START came from invocation 8.
    for tree in e.trees_mut() {
        tree.files.remove(&format!("{STATE}/flags/START"));
    }
}

fn on_host_false(e: &mut Expected, _: &[StepInfo]) {
    let inv = e.invocation(1);
    let block = step_block(&inv.stdout, "apply", "envdump.sh");
    let prefixed: String = block
        .split_inclusive('\n')
        .map(|l| {
            for var in ["PWD=", "SKYHOOK_DIR=", "STEP_ROOT="] {
                if let Some(v) = l.strip_prefix(var) {
                    return format!("{var}$ROOT{v}");
                }
            }
            l.to_owned()
        })
        .collect();
    inv.stdout = inv.stdout.replacen(&block, &prefixed, 1);
}

fn long_marker_name(e: &mut Expected, steps: &[StepInfo]) {
    e.invocation(1).exit = 0;
    let long = steps
        .iter()
        .find(|s| {
            legacy_marker_name(&s.path, &s.arguments, &s.returncodes)
                .split('/')
                .any(|c| c.len() > 255)
        })
        .expect("a step with a long legacy marker name");
    let tree = e.tree_after(1);
    tree.files.insert(
        native_marker(long),
        Some("last_run: <TIME>\nstep_always_runs: false".to_owned()),
    );
}

fn reboot_by_boot_id(e: &mut Expected, _: &[StepInfo]) {
    let complete = format!("{INTERRUPT_FLAGS}/node_restart_0.complete");
    let pending = format!("{INTERRUPT_FLAGS}/node_restart_0.pending");
    let attempts = format!("{INTERRUPT_FLAGS}/node_restart_0.attempts");
    let pending_content = Some(format!("boot-id:{BOOT_ID}\n"));
    let attempts_content = |n: u32| Some(format!("boot-id:{BOOT_ID}\nattempts:{n}\n"));
    let calls = "var/tmp/interrupt-calls.log";
    match e.transcript.as_str() {
        "17-interrupt-node-restart" => {
            // 1: reboot exits 0 but the host stays up: failure after the wait.
            e.invocation(1).exit = 1;
            // 2: same boot ID: the reboot runs again (and fails the same way).
            let inv = e.invocation(2);
            inv.stdout = inv.stdout.replacen(
                "Skipping interrupt node_restart_0 because it was already run for abc_pkg_1.0.0\n",
                "reboot\nfake reboot: pretending to reboot\n",
                1,
            );
            inv.exit = 1;
            let tree = e.tree_after(2);
            tree.files.remove(&complete);
            tree.files.insert(pending, pending_content);
            tree.files.insert(attempts, attempts_content(2));
            if let Some(Some(c)) = tree.files.get_mut(calls) {
                *c = c.repeat(2);
            }
        }
        "18-interrupt-node-restart-sigterm" => {
            // The shutdown's SIGTERM reaches the agent while reboot runs: it says so and waits
            // for the host to go down; the host stays up, so after the stop grace it exits 1,
            // as the legacy agent did (never 0: the operator's Job would complete).
            let inv = e.invocation(1);
            inv.stdout.push_str(
                "shutdown in progress; the reboot will be confirmed by boot ID on the next run\n",
            );
            let tree = e.tree_after(1);
            tree.files.remove(&complete);
            tree.files.insert(pending, pending_content);
            tree.files.insert(attempts, attempts_content(1));
        }
        "19-interrupt-node-restart-fails" => {
            let tree = e.tree_after(1);
            tree.files.insert(pending, pending_content);
            tree.files.insert(attempts, attempts_content(1));
        }
        other => panic!("reboot-by-boot-id does not cover {other}"),
    }
}

fn banner_before_resolv(e: &mut Expected, _: &[StepInfo]) {
    // Invocation 3's environment: the base one with COPY_RESOLV=true.
    let banner = Banner {
        mode: "apply".to_owned(),
        root_mount: "$ROOT".to_owned(),
        copy_dir: "/var/lib/skyhook/sk1/pkg-1.0.0-uid1-1".to_owned(),
        interrupt_data: None,
        always_run_step: false,
        copy_resolv: true,
        overlay_always_run_step: false,
        resource_id: "abc_pkg_1.0.0".to_owned(),
        data_dir: "/skyhook-package".to_owned(),
        root_dir: "/var/lib/skyhook/sk1".to_owned(),
        log_dir: "/var/log/skyhook/sk1".to_owned(),
        buffer_limit: "8192".to_owned(),
        write_logs: true,
        package: "pkg".to_owned(),
        version: "1.0.0".to_owned(),
    }
    .render();
    e.invocation(3).stdout = banner;
}
