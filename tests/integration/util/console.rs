//! The console blocks of the Markdown docs as tests (clap's `trycmd` is the model): finding them,
//! matching a command's real output against the lines a block shows, and rewriting those lines
//! from a real run (bless). Running them is `docs_console`'s.
//!
//! A ```` ```console ```` block is a session: each `$ ` line is a command (a line ending in `\`
//! continues on the next), the lines below it up to the next `$ ` are its output, stdout and
//! stderr as a terminal shows them. In those lines `[..]` matches any text within a line, `...`
//! alone on a line matches any number of lines, and a last line `[exit N]` says the command
//! exits N (0 when there is none). Values that change from run to run (times, durations, pids,
//! peak memory, the commit, boot IDs) are redacted on both sides before lines are compared, so
//! the docs show them as a real run printed them.
//!
//! A block that cannot run here is marked on the line before its fence with
//! `<!-- not run: REASON -->`. A marker without a reason, a marker not followed by a fence, and
//! a block of another kind that holds `$ ` lines (a session that would not run) are errors.

use std::fmt::Write as _;
use std::sync::LazyLock;

use regex::{Captures, Regex};

/// The marker of a block that is not run: `<!-- not run: REASON -->` on the line before it.
pub const NOT_RUN: &str = "<!-- not run";

/// A command of a console block and the output the doc shows for it.
#[derive(Debug, Clone)]
pub struct Shown {
    /// 1-based line of its `$ ` line.
    pub line: usize,
    /// The command as the shell reads it: `$ ` cut, continuation lines joined with `\n`.
    pub text: String,
    /// The lines shown below it (the block's indentation cut).
    pub expected: Vec<String>,
    /// 1-based line of the first of them (where they would start when there are none).
    pub expected_at: usize,
    /// The indentation of the block, put back by [`rewrite`].
    pub indent: String,
}

/// The sessions of one document, in order.
#[derive(Debug, Default)]
pub struct Sessions {
    /// Every command of every console block that is run, in document order.
    pub commands: Vec<Shown>,
    /// Console blocks marked not run.
    pub not_run: usize,
}

/// Find the sessions of document `name`; `Err` lists every block that is neither a session
/// nor marked, and every marker that is wrong, each with `name:line`.
pub fn parse(name: &str, text: &str) -> Result<Sessions, Vec<String>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Sessions::default();
    let mut problems = Vec::new();
    let mut marked = false;
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        if let Some(after) = trimmed.strip_prefix(NOT_RUN) {
            let reason = after
                .strip_prefix(':')
                .and_then(|r| r.trim_end().strip_suffix("-->"))
                .map(str::trim);
            if reason.is_none_or(str::is_empty) {
                problems.push(format!(
                    "{name}:{}: a not-run marker needs a reason: `<!-- not run: REASON -->`, got `{trimmed}`",
                    i + 1
                ));
            }
            if !lines
                .get(i + 1)
                .is_some_and(|l| l.trim_start().starts_with("```"))
            {
                problems.push(format!(
                    "{name}:{}: a not-run marker belongs on the line just before a code block's fence",
                    i + 1
                ));
            }
            marked = true;
            i += 1;
            continue;
        }
        let Some(fence) = trimmed.strip_prefix("```") else {
            marked = false;
            i += 1;
            continue;
        };
        let indent = &lines[i][..lines[i].len() - trimmed.len()];
        let info = fence.split_whitespace().next().unwrap_or("");
        let Some(close) = (i + 1..lines.len()).find(|&j| lines[j].trim() == "```") else {
            problems.push(format!("{name}:{}: a code block that is not closed", i + 1));
            break;
        };
        let body: Vec<&str> = lines[i + 1..close]
            .iter()
            .map(|l| l.strip_prefix(indent).unwrap_or_else(|| l.trim_start()))
            .collect();
        if marked {
            out.not_run += usize::from(info == "console");
        } else if info == "console" {
            parse_session(name, i + 2, indent, &body, &mut out.commands, &mut problems);
        } else if let Some(k) = body.iter().position(|l| l.starts_with("$ ")) {
            problems.push(format!(
                "{name}:{}: a ```{info} block with a `$ ` command (line {}): fence it ```console \
                 so that it runs, or mark it `<!-- not run: REASON -->`",
                i + 1,
                i + 2 + k
            ));
        }
        marked = false;
        i = close + 1;
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The commands of one console block whose first body line is line `first` of the document.
fn parse_session(
    name: &str,
    first: usize,
    indent: &str,
    body: &[&str],
    commands: &mut Vec<Shown>,
    problems: &mut Vec<String>,
) {
    let start = commands.len();
    let mut k = 0;
    while k < body.len() {
        let line = first + k;
        if let Some(cmd) = body[k].strip_prefix("$ ") {
            let mut text = cmd.to_owned();
            while text.ends_with('\\') && k + 1 < body.len() {
                k += 1;
                text.push('\n');
                text.push_str(body[k]);
            }
            commands.push(Shown {
                line,
                text,
                expected: Vec::new(),
                expected_at: first + k + 1,
                indent: indent.to_owned(),
            });
        } else if commands.len() > start {
            commands
                .last_mut()
                .unwrap()
                .expected
                .push(body[k].to_owned());
        } else {
            problems.push(format!(
                "{name}:{line}: output before the first `$ ` command of a ```console block"
            ));
            return;
        }
        k += 1;
    }
    if commands.len() == start {
        problems.push(format!(
            "{name}:{}: a ```console block without a `$ ` command",
            first - 1
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// Matching
// ---------------------------------------------------------------------------------------------

/// Values that differ from run to run, and what they are replaced with on both sides.
static REDACTIONS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // RFC 3339 UTC times (records, history, results).
        (r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z", "<time>"),
        // The times in log file names.
        (r"\b\d{4}-\d\d-\d\d-\d{6}\.\d{9}\b", "<time>"),
        // What a process cost and who it was.
        (
            r"\b(pid|duration_ms|cpu_user_ms|cpu_system_ms|max_rss_kib|elapsed_s)=\d+",
            "$1=<n>",
        ),
        (
            r#""(pid|duration_ms|cpu_user_ms|cpu_system_ms|max_rss_kib|elapsed_s)":\d+"#,
            "\"$1\":<n>",
        ),
        (r"\b\d+(?:\.\d+)? ms\b", "<n> ms"),
        (
            r"\bpeak RSS \d+(?:\.\d+)? (?:B|KiB|MiB|GiB)\b",
            "peak RSS <size>",
        ),
        // The same in the metrics file: times (Unix and durations) and peak memory.
        (
            r"^(skyhook_agent_[a-z_]+_(?:seconds|max_rss_bytes)(?:\{[^}]*\})?) [0-9.e+-]+$",
            "$1 <n>",
        ),
        // The commit the binary was built from.
        (
            r#"(\bgit_sha=|\bgit_sha="|"git_sha":"|\bcommit )(?:[0-9a-f]{40}(?:-dirty)?|unknown)\b"#,
            "$1<commit>",
        ),
    ]
    .into_iter()
    .map(|(re, with)| (Regex::new(re).expect("a redaction"), with))
    .collect()
});

/// A UUID (a boot ID), or its first 8 digits and `…` as `agent status` cuts them.
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[0-9a-f]{8}(?:-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|…)").unwrap()
});

/// How one document's lines are compared: the redactions, less the UUIDs its own commands
/// name (a boot ID the reader writes is not one that varies).
#[derive(Debug, Default, Clone)]
pub struct Matcher {
    keep: Vec<String>,
}

impl Matcher {
    /// The matcher of a document whose commands are `commands`.
    pub fn new<'a>(commands: impl IntoIterator<Item = &'a str>) -> Self {
        let mut keep: Vec<String> = commands
            .into_iter()
            .flat_map(|c| UUID.find_iter(c).map(|m| m.as_str().to_owned()))
            .collect();
        keep.sort();
        keep.dedup();
        Self { keep }
    }

    /// `line` with what varies replaced.
    pub fn redact(&self, line: &str) -> String {
        let mut out = UUID
            .replace_all(line, |c: &Captures<'_>| {
                let (uuid, short) = match c[0].strip_suffix('…') {
                    Some(first) => (first, "…"),
                    None => (&c[0], ""),
                };
                if self.keep.iter().any(|k| k.starts_with(uuid)) {
                    c[0].to_owned()
                } else {
                    format!("<uuid>{short}")
                }
            })
            .into_owned();
        for (re, with) in REDACTIONS.iter() {
            out = re.replace_all(&out, *with).into_owned();
        }
        out
    }

    /// Whether the real line `actual` matches the shown line `pattern` (`[..]`: any text).
    pub fn line_matches(&self, pattern: &str, actual: &str) -> bool {
        let pattern = self.redact(pattern);
        let actual = self.redact(actual);
        let parts: Vec<&str> = pattern.split("[..]").collect();
        let [first, middle @ .., last] = parts.as_slice() else {
            return pattern == actual;
        };
        let Some(mut rest) = actual.strip_prefix(first) else {
            return false;
        };
        for part in middle {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        rest.ends_with(last)
    }

    /// Whether the real lines `actual` match the shown lines `pattern` (`...`: any lines).
    pub fn lines_match(&self, pattern: &[String], actual: &[&str]) -> bool {
        let (m, n) = (pattern.len(), actual.len());
        // fits[j]: pattern[i..] matches actual[j..], for the current i (from the end).
        let mut fits = vec![false; n + 1];
        fits[n] = true;
        for i in (0..m).rev() {
            let mut next = vec![false; n + 1];
            for j in (0..=n).rev() {
                next[j] = if pattern[i] == "..." {
                    fits[j] || (j < n && next[j + 1])
                } else {
                    j < n && fits[j + 1] && self.line_matches(&pattern[i], actual[j])
                };
            }
            fits = next;
        }
        fits[0]
    }
}

/// `shown` split into its output lines and the exit code its last line `[exit N]` gives (0).
pub fn split_exit(shown: &[String]) -> (&[String], i32) {
    if let Some((last, rest)) = shown.split_last()
        && let Some(code) = last
            .strip_prefix("[exit ")
            .and_then(|l| l.strip_suffix(']'))
            .and_then(|c| c.parse().ok())
    {
        return (rest, code);
    }
    (shown, 0)
}

/// Whether a command that printed `output` and exited `code` shows as `shown`.
pub fn shows(m: &Matcher, shown: &[String], output: &str, code: i32) -> bool {
    let (lines, exit) = split_exit(shown);
    exit == code && m.lines_match(lines, &output.lines().collect::<Vec<_>>())
}

// ---------------------------------------------------------------------------------------------
// Bless
// ---------------------------------------------------------------------------------------------

/// The lines to show for a command that printed `output` and exited `code`: the shown lines
/// where they still match (their `[..]`, their `...` and the values the redactions cover kept),
/// the real lines where they do not. Always lines that [`shows`] the real run.
pub fn bless(m: &Matcher, shown: &[String], output: &str, code: i32) -> Vec<String> {
    let (pattern, _) = split_exit(shown);
    let actual: Vec<&str> = output.lines().collect();
    let mut out = if m.lines_match(pattern, &actual) {
        pattern.to_vec()
    } else {
        merge(m, pattern, &actual)
    };
    if !m.lines_match(&out, &actual) {
        out = actual.iter().map(|l| (*l).to_owned()).collect();
    }
    if code != 0 {
        out.push(format!("[exit {code}]"));
    }
    out
}

/// The pairs `(i, j)` of a longest common subsequence of `0..m` and `0..n` under `same`.
pub fn common(m: usize, n: usize, same: impl Fn(usize, usize) -> bool) -> Vec<(usize, usize)> {
    let mut len = vec![vec![0_usize; n + 1]; m + 1];
    for i in (0..m).rev() {
        for j in (0..n).rev() {
            len[i][j] = if same(i, j) {
                len[i + 1][j + 1] + 1
            } else {
                len[i + 1][j].max(len[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut pairs) = (0, 0, Vec::new());
    while i < m && j < n {
        if same(i, j) && len[i][j] == len[i + 1][j + 1] + 1 {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if len[i + 1][j] >= len[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

/// The shown lines that match real ones kept, each stretch between them redone from the real
/// lines (an excerpt's `...` kept).
fn merge(m: &Matcher, pattern: &[String], actual: &[&str]) -> Vec<String> {
    let pairs = common(pattern.len(), actual.len(), |i, j| {
        pattern[i] != "..." && m.line_matches(&pattern[i], actual[j])
    });
    let mut out = Vec::new();
    let (mut pi, mut aj) = (0, 0);
    for (i, j) in pairs.into_iter().chain([(pattern.len(), actual.len())]) {
        merge_stretch(m, &pattern[pi..i], &actual[aj..j], &mut out);
        if let Some(kept) = pattern.get(i) {
            out.push(kept.clone());
        }
        (pi, aj) = (i + 1, j + 1);
    }
    out
}

/// One stretch of shown lines none of which matched, and the real lines beside it.
fn merge_stretch(m: &Matcher, shown: &[String], real: &[&str], out: &mut Vec<String>) {
    if !shown.iter().any(|l| l == "...") {
        out.extend(real.iter().map(|l| (*l).to_owned()));
        return;
    }
    // An excerpt stays one: a changed line at either end of the stretch becomes the real line
    // at that end, one between two `...` the first real line like it; `...` stays for the
    // lines between, and a real line no `...` covers is shown.
    let mut picks: Vec<Option<usize>> = vec![None; shown.len()];
    let (mut lo, mut hi) = (0, real.len());
    let last = shown.len() - 1;
    if shown[0] != "..." && lo < hi {
        picks[0] = Some(lo);
        lo += 1;
    }
    if last > 0 && shown[last] != "..." && lo < hi {
        picks[last] = Some(hi - 1);
        hi -= 1;
    }
    for i in 1..last {
        if shown[i] != "..."
            && let Some(k) = first_like(m, &shown[i], &real[lo..hi])
        {
            picks[i] = Some(lo + k);
            lo += k + 1;
        }
    }
    let ellipsis = |out: &Vec<String>| out.last().is_some_and(|l| l == "...");
    let mut next = 0;
    for (line, pick) in shown.iter().zip(picks) {
        if line == "..." {
            if !ellipsis(out) {
                out.push("...".to_owned());
            }
            continue;
        }
        let Some(k) = pick else { continue };
        if !ellipsis(out) {
            out.extend(real[next..k].iter().map(|l| (*l).to_owned()));
        }
        out.push(real[k].to_owned());
        next = k + 1;
    }
    if !ellipsis(out) {
        out.extend(real[next..].iter().map(|l| (*l).to_owned()));
    }
}

/// The first line of `real` like `line`: the same first word, or half its words shared.
fn first_like(m: &Matcher, line: &str, real: &[&str]) -> Option<usize> {
    let line = m.redact(line);
    let words: Vec<&str> = line.split_whitespace().collect();
    real.iter().position(|r| {
        let r = m.redact(r);
        let theirs: Vec<&str> = r.split_whitespace().collect();
        let shared = theirs.iter().filter(|w| words.contains(w)).count();
        words.first().is_some_and(|w| theirs.first() == Some(w))
            || shared * 2 >= words.len().max(theirs.len()).max(1)
    })
}

/// `shown` (at document line `at`) against `new`, as a diff: `-` the doc's lines, `+` the
/// lines a bless would write; each of the doc's lines with its `name:line`.
pub fn diff(name: &str, at: usize, shown: &[String], new: &[String]) -> String {
    let pairs = common(shown.len(), new.len(), |i, j| shown[i] == new[j]);
    let mut out = String::new();
    let (mut i, mut j) = (0, 0);
    for (pi, pj) in pairs.into_iter().chain([(shown.len(), new.len())]) {
        for (k, l) in shown.iter().enumerate().take(pi).skip(i) {
            let _ = writeln!(out, "- {name}:{}  {l}", at + k);
        }
        for l in &new[j..pj] {
            let _ = writeln!(out, "+ {l}");
        }
        if let Some(l) = shown.get(pi) {
            let _ = writeln!(out, "  {name}:{}  {l}", at + pi);
        }
        (i, j) = (pi + 1, pj + 1);
    }
    out
}

/// `text` with the shown lines of each command in `new` (its index in the parsed commands
/// and its lines) replaced.
pub fn rewrite(text: &str, commands: &[Shown], new: &[(usize, Vec<String>)]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut new: Vec<&(usize, Vec<String>)> = new.iter().collect();
    new.sort_by_key(|(k, _)| std::cmp::Reverse(commands[*k].expected_at));
    for (k, shown) in new {
        let c = &commands[*k];
        let from = c.expected_at - 1;
        let indented = shown.iter().map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{}{l}", c.indent)
            }
        });
        lines.splice(from..from + c.expected.len(), indented);
    }
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}
