//! Parser of the upstream agent's transcripts (`tests/replay/transcripts/*.txt`).
//!
//! Layout of a transcript: `# key: value` header comments (scenario, copy_dir, base environment),
//! optionally the package's `config.json`, the step script every step file holds and other
//! files (`----- noisy.sh -----`), a `#` comment describing the scenario, then in order
//! `invocation N: title` blocks (the exact command with its `env -i` environment, notes such as
//! `(sent SIGTERM …)`, stdout, stderr, exit code), `file tree after: title` blocks (one line
//! per path, small file contents as `    | ` lines, `l path -> target` for symbolic links), and
//! the harness's own measurements between them: `modes (…)` of chosen paths (those `before` the
//! first invocation are how the harness prepared the root), the number of history entries, and
//! what appeared outside the fake root.
//!
//! The text is UTF-8 except where a listing shows a file's raw bytes (43's `blob.bin`): it is
//! read with invalid bytes replaced by U+FFFD, as the comparison reads this agent's files.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Where the vendored transcripts live.
pub fn transcripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/replay/transcripts")
}

const INVOCATION: &str =
    "================================================================ invocation ";
const TREE: &str =
    "================================================================ file tree after: ";
const NO_NEWLINE_STREAM: &str = "<<no newline at end of ";
const NO_NEWLINE_FILE: &str = "    <<no newline at end>>";
/// What the transcript shows instead of the content of the copied resolv.conf.
pub const HOST_RESOLV_CONF: &str =
    "(identical to this machine's /etc/resolv.conf; content not shown)";

/// One parsed transcript.
#[derive(Debug, Clone)]
pub struct Transcript {
    pub name: String,
    /// `copy_dir` of the header.
    pub copy_dir: String,
    /// The package's `config.json`, when the transcript shows it.
    pub config: Option<String>,
    /// The script every step file holds, when shown.
    pub step_script: Option<String>,
    /// Other files shown by name (`----- noisy.sh -----`).
    pub files: Vec<(String, String)>,
    /// Invocations, tree listings and the harness's measurements, in transcript order.
    pub events: Vec<Event>,
}

#[derive(Debug, Clone)]
pub enum Event {
    Invocation(Invocation),
    Tree(Tree),
    Modes(Modes),
    HistoryCount(HistoryCount),
    Outside(Outside),
}

/// A `modes (title)` block: permission bits (with the special bits) of chosen paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Modes {
    pub title: String,
    /// ROOT-relative path (`.` for ROOT itself) → mode.
    pub modes: BTreeMap<String, u32>,
}

/// `history entries after: N; first: "version": "A"; last: "version": "B"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryCount {
    pub count: usize,
    pub first: String,
    pub last: String,
}

/// `outside the fake root, beside it (…)`: the paths the harness found next to the fake root
/// (not the root itself nor its own scratch files), `.` first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outside {
    pub paths: Vec<String>,
}

/// One run of the legacy agent.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub number: u32,
    pub title: String,
    /// The complete environment (`env -i`), values verbatim (`$ROOT`, `$WORKDIR` unresolved).
    pub env: Vec<(String, String)>,
    /// Arguments after the program name, verbatim.
    pub args: Vec<String>,
    /// Lines between the command and the stdout block (`(sent SIGTERM …)`, `(run inside: …)`).
    pub notes: Vec<String>,
    pub stdout: String,
    pub stderr: String,
    pub exit: i32,
}

/// A `file tree after:` listing.
#[derive(Debug, Clone)]
pub struct Tree {
    pub title: String,
    pub entries: BTreeMap<String, Entry>,
}

/// One path of a listing (relative to ROOT, no leading `./`, no trailing `/`). The listing
/// shows a symbolic link to a directory as a directory (it does not descend into it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub dir: bool,
    pub size: u64,
    /// Content, when the listing shows it (small files; empty files always).
    pub content: Option<String>,
    /// The target of a symbolic link (`l path -> target`), as it is written.
    pub link: Option<String>,
    /// A file's mode, from the listing's `-rwsr-xr-x`.
    pub mode: Option<u32>,
}

impl Transcript {
    /// Load and parse `<transcripts_dir>/<name>.txt`.
    pub fn load(name: &str) -> Self {
        let path = transcripts_dir().join(format!("{name}.txt"));
        let bytes = fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        Self::parse(name, &String::from_utf8_lossy(&bytes))
    }

    /// Parse a transcript's text.
    pub fn parse(name: &str, text: &str) -> Self {
        let lines: Vec<&str> = text.split('\n').collect();
        let mut t = Self {
            name: name.to_owned(),
            copy_dir: String::new(),
            config: None,
            step_script: None,
            files: Vec::new(),
            events: Vec::new(),
        };
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            if let Some(v) = line.strip_prefix("# copy_dir: ") {
                v.clone_into(&mut t.copy_dir);
                i += 1;
            } else if let Some(rest) = line.strip_prefix(INVOCATION) {
                let (inv, next) = parse_invocation(name, rest, &lines, i + 1);
                t.events.push(Event::Invocation(inv));
                i = next;
            } else if let Some(title) = line.strip_prefix(TREE) {
                let (tree, next) = parse_tree(title, &lines, i + 1);
                t.events.push(Event::Tree(tree));
                i = next;
            } else if let Some(title) = line
                .strip_prefix("----- modes (")
                .and_then(|r| r.strip_suffix(") -----"))
            {
                let (body, next) = indented(&lines, i + 1);
                let modes = body
                    .iter()
                    .map(|l| {
                        let words: Vec<&str> = l.split_whitespace().collect();
                        let [mode, _kind, path] = words[..] else {
                            panic!("{name}: bad modes line {l:?}");
                        };
                        let mode = u32::from_str_radix(mode, 8)
                            .unwrap_or_else(|_| panic!("{name}: bad mode in {l:?}"));
                        (path.to_owned(), mode)
                    })
                    .collect();
                t.events.push(Event::Modes(Modes {
                    title: title.to_owned(),
                    modes,
                }));
                i = next;
            } else if let Some(rest) = line.strip_prefix("----- history entries after: ") {
                t.events
                    .push(Event::HistoryCount(parse_history_count(name, rest)));
                i += 1;
            } else if line.starts_with("----- outside the fake root") {
                let (body, next) = indented(&lines, i + 1);
                t.events.push(Event::Outside(Outside {
                    paths: body
                        .iter()
                        .map(|l| l.trim().trim_start_matches("./").to_owned())
                        .collect(),
                }));
                i = next;
            } else if line.starts_with("----- ") && line.ends_with(" -----") {
                let header = &line[6..line.len() - 6];
                let (body, next) = section(&lines, i + 1);
                if header.ends_with("/config.json") {
                    t.config = Some(body);
                } else if header.starts_with("step script") {
                    t.step_script = Some(body);
                } else {
                    t.files.push((header.to_owned(), body));
                }
                i = next;
            } else {
                i += 1;
            }
        }
        assert!(!t.copy_dir.is_empty(), "{name}: no `# copy_dir:` header");
        t
    }

    /// The invocations, in order.
    pub fn invocations(&self) -> impl Iterator<Item = &Invocation> {
        self.events.iter().filter_map(|e| match e {
            Event::Invocation(i) => Some(i),
            _ => None,
        })
    }

    /// The last tree listing.
    pub fn last_tree(&self) -> Option<&Tree> {
        self.events.iter().rev().find_map(|e| match e {
            Event::Tree(t) => Some(t),
            _ => None,
        })
    }

    /// The modes the harness gave chosen paths before the first invocation.
    pub fn modes_before(&self) -> Option<&Modes> {
        self.events.iter().find_map(|e| match e {
            Event::Modes(m) if m.title == "before" => Some(m),
            _ => None,
        })
    }
}

/// A file section: lines up to a blank line, the next section, or the scenario comment.
fn section(lines: &[&str], start: usize) -> (String, usize) {
    let mut i = start;
    let mut body = String::new();
    while i < lines.len() {
        let l = lines[i];
        if l.is_empty() || l == "#" || l.starts_with("# ") || l.starts_with("----- ") {
            break;
        }
        body.push_str(l);
        body.push('\n');
        i += 1;
    }
    (body, i)
}

/// The indented lines from `start` up to the first that is not.
fn indented<'a>(lines: &[&'a str], start: usize) -> (Vec<&'a str>, usize) {
    let mut i = start;
    while i < lines.len() && lines[i].starts_with("    ") {
        i += 1;
    }
    (lines[start..i].to_vec(), i)
}

/// `101; first: "version": "1.0.0"; last: "version": "0.1.0"`.
fn parse_history_count(name: &str, text: &str) -> HistoryCount {
    let parts: Vec<&str> = text.split("; ").collect();
    let version = |part: &str, key: &str| {
        part.strip_prefix(key)
            .and_then(|v| v.strip_prefix("\"version\": \""))
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or_else(|| panic!("{name}: bad history count {text:?}"))
            .to_owned()
    };
    match parts[..] {
        [count, first, last] => HistoryCount {
            count: count
                .parse()
                .unwrap_or_else(|_| panic!("{name}: bad history count {text:?}")),
            first: version(first, "first: "),
            last: version(last, "last: "),
        },
        _ => panic!("{name}: bad history count {text:?}"),
    }
}

fn parse_invocation(name: &str, header: &str, lines: &[&str], start: usize) -> (Invocation, usize) {
    let (number, title) = header
        .split_once(": ")
        .unwrap_or_else(|| panic!("{name}: bad invocation header {header:?}"));
    let number: u32 = number
        .parse()
        .unwrap_or_else(|_| panic!("{name}: bad invocation number in {header:?}"));
    let mut i = start;
    let command = lines[i]
        .strip_prefix("$ env -i ")
        .unwrap_or_else(|| panic!("{name}: invocation {number}: no `$ env -i` command line"));
    let words = shell_words(command);
    let program = words
        .iter()
        .position(|w| w == "legacy-agent")
        .unwrap_or_else(|| panic!("{name}: invocation {number}: no legacy-agent in the command"));
    let env = words[..program]
        .iter()
        .map(|w| {
            let (k, v) = w
                .split_once('=')
                .unwrap_or_else(|| panic!("{name}: invocation {number}: bad env word {w:?}"));
            (k.to_owned(), v.to_owned())
        })
        .collect();
    let args = words[program + 1..].to_vec();
    i += 1;
    let mut notes = Vec::new();
    while !lines[i].starts_with("----- stdout (") {
        notes.push(lines[i].trim().to_owned());
        i += 1;
    }
    let (stdout, declared_out, next) = stream(lines, i, "----- stderr (");
    let (stderr, _, next) = stream(lines, next, "----- exit code: ");
    i = next;
    let exit: i32 = lines[i]["----- exit code: ".len()..]
        .split_whitespace()
        .next()
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("{name}: invocation {number}: bad exit code line"));
    // Check the parser against the byte count the transcript declares. The count is of the
    // original bytes: invalid UTF-8 is stored as U+FFFD, and the fake root's path (the same in
    // every occurrence) as `$ROOT`.
    if !stdout.contains('\u{fffd}') {
        let roots = stdout.matches("$ROOT").count() as u64;
        let parsed = stdout.len() as u64;
        let consistent = if roots == 0 {
            parsed == declared_out
        } else {
            declared_out >= parsed && (declared_out - parsed) % roots == 0
        };
        assert!(
            consistent,
            "{name}: invocation {number}: parsed stdout ({parsed} bytes) does not match the \
             declared {declared_out} bytes"
        );
    }
    (
        Invocation {
            number,
            title: title.to_owned(),
            env,
            args,
            notes,
            stdout,
            stderr,
            exit,
        },
        i + 1,
    )
}

/// A `----- stdout (N bytes) -----` block up to the line starting with `end`.
fn stream(lines: &[&str], header: usize, end: &str) -> (String, u64, usize) {
    let declared: u64 = lines[header]
        .split('(')
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("bad stream header {:?}", lines[header]));
    let mut i = header + 1;
    let mut body: Vec<&str> = Vec::new();
    while !lines[i].starts_with(end) {
        body.push(lines[i]);
        i += 1;
    }
    let mut text = String::new();
    let unterminated = body
        .last()
        .is_some_and(|l| l.starts_with(NO_NEWLINE_STREAM));
    if unterminated {
        body.pop();
    }
    for l in &body {
        text.push_str(l);
        text.push('\n');
    }
    if unterminated {
        text.pop();
    }
    (text, declared, i)
}

fn parse_tree(title: &str, lines: &[&str], start: usize) -> (Tree, usize) {
    let mut entries = BTreeMap::new();
    let mut i = start;
    while i < lines.len() && !lines[i].is_empty() {
        let l = lines[i];
        i += 1;
        let (kind, rest) = l.split_at(2);
        let rest = rest.strip_prefix("./").unwrap_or(rest);
        if kind == "l " {
            let (path, target) = rest
                .split_once(" -> ")
                .unwrap_or_else(|| panic!("bad link line {l:?}"));
            entries.insert(
                path.to_owned(),
                Entry {
                    dir: false,
                    size: 0,
                    content: None,
                    link: Some(target.to_owned()),
                    mode: None,
                },
            );
            continue;
        }
        let dir = match kind {
            "d " => true,
            "f " => false,
            _ => panic!("bad tree line {l:?}"),
        };
        if dir {
            let path = rest.trim_end_matches('/');
            if !path.is_empty() {
                entries.insert(
                    path.to_owned(),
                    Entry {
                        dir: true,
                        size: 0,
                        content: None,
                        link: None,
                        mode: None,
                    },
                );
            }
            continue;
        }
        let (path, meta) = rest
            .rsplit_once("  (")
            .unwrap_or_else(|| panic!("bad file line {l:?}"));
        let size: u64 = meta
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("bad size in {l:?}"));
        let mut shown: Vec<String> = Vec::new();
        let mut terminated = true;
        while i < lines.len() && lines[i].starts_with("    |") {
            let mut c = lines[i]["    |".len()..].strip_prefix(' ').unwrap_or("");
            if let Some(s) = c.strip_suffix(NO_NEWLINE_FILE) {
                c = s;
                terminated = false;
            }
            shown.push(c.to_owned());
            i += 1;
        }
        let content = if shown.is_empty() {
            (size == 0).then(String::new)
        } else if shown.len() == 1 && shown[0] == HOST_RESOLV_CONF {
            Some(HOST_RESOLV_CONF.to_owned())
        } else {
            let mut s = shown.join("\n");
            if terminated {
                s.push('\n');
            }
            Some(s)
        };
        entries.insert(
            path.to_owned(),
            Entry {
                dir: false,
                size,
                content,
                link: None,
                mode: meta.split(", ").nth(1).map(|m| parse_mode(m, l)),
            },
        );
    }
    (
        Tree {
            title: title.to_owned(),
            entries,
        },
        i,
    )
}

/// `-rwsr-xr-x` → `0o4755` (`s`/`S`, `t`/`T` the special bits with and without `x`).
fn parse_mode(text: &str, line: &str) -> u32 {
    let chars: Vec<char> = text.trim_end_matches(')').chars().collect();
    assert_eq!(chars.len(), 10, "bad mode in {line:?}");
    let mut mode = 0;
    for (k, c) in chars[1..].iter().enumerate() {
        let bit = 1 << (8 - k);
        let special = match k {
            2 => 0o4000,
            5 => 0o2000,
            8 => 0o1000,
            _ => 0,
        };
        match c {
            '-' => {}
            's' | 't' => mode |= bit | special,
            'S' | 'T' => mode |= special,
            _ => mode |= bit,
        }
    }
    mode
}

/// Split a command line the way the transcript's shell quoted it: words separated by spaces,
/// `'…'` literal, `$'…'` with backslash escapes (`\n`, `\t`, `\\`, `\'`).
pub fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '$' if chars.peek() == Some(&'\'') => {
                chars.next();
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '\'' => break,
                        '\\' => match chars.next() {
                            Some('n') => cur.push('\n'),
                            Some('t') => cur.push('\t'),
                            Some(o) => cur.push(o),
                            None => {}
                        },
                        o => cur.push(o),
                    }
                }
            }
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            o => {
                in_word = true;
                cur.push(o);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}
