//! The manual page `agent.1` and the shell completions, rendered from the command tree: every
//! MODE and subcommand with its arguments and flags, then the environment, the files and the
//! exit codes (the tables of [`super::environment`]). No version or date in the page, so the
//! one committed as docs/agent.1 is what every build of a version prints.

use std::fmt::Write as _;

use clap::{Arg, Command};
use clap_mangen::roff::{Inline, Roff, bold, italic, roman};

use super::environment::{ENVIRONMENT, EXIT_STATUS, FILES};
use super::{about, is_mode, modes, tree};

/// `agent completions SHELL`.
pub fn completions(shell: clap_complete::Shell) -> String {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut tree().clone(), "agent", &mut out);
    String::from_utf8(out).expect("completion scripts are UTF-8")
}

/// `agent man`.
pub fn page() -> String {
    let mut root = tree().clone();
    root.build();
    let mut r = Roff::new();
    r.control("TH", ["AGENT", "1", "\"\"", "agent", "User Commands"]);

    r.control("SH", ["NAME"]);
    r.text([roman(format!("agent - {}", about(&root)))]);

    r.control("SH", ["SYNOPSIS"]).control("nf", []);
    let column = modes::synopsis_note_column();
    for (form, note) in modes::SYNOPSIS {
        let mut line = synopsis(form);
        if !note.is_empty() {
            let pad = column - form.len();
            line.push(roman(format!("{:pad$}({note})", "")));
        }
        r.text(line);
    }
    r.control("fi", []);

    r.control("SH", ["DESCRIPTION"]);
    r.text(inline(
        "Runs one stage (MODE) or the interrupt of a Skyhook/NodeWright package against the \
         host mounted at ROOT_MOUNT, reading and writing the same state files as the upstream \
         agents; the subcommands inspect, lint, plan and reset that work. `agent help MODE` and \
         `agent help SUBCOMMAND` print what this page says about one.",
    ));

    r.control("SH", ["MODES"]);
    r.text(inline(
        "The operator's stages. An unknown MODE is a no-op with a warning (exit 0), so a newer \
         operator can drive an older agent; a word within two edits of a subcommand is a \
         typo (exit 2).",
    ));
    let mut mode_args: Vec<&Arg> = Vec::new();
    for mode in root.get_subcommands().filter(|c| is_mode(c.get_name())) {
        let mut head = vec![bold(format!("agent {}", mode.get_name()))];
        for arg in mode.get_positionals() {
            head.extend([roman(" "), italic(value_name(arg))]);
            if !mode_args.iter().any(|a| a.get_id() == arg.get_id()) {
                mode_args.push(arg);
            }
        }
        r.control("TP", []).text(head);
        paragraphs(&mut r, &long_about(mode));
    }
    r.control("SS", ["The arguments of the MODEs"]);
    for arg in mode_args {
        r.control("TP", []).text([italic(value_name(arg))]);
        paragraphs(&mut r, &help(arg));
    }

    r.control("SH", ["SUBCOMMANDS"]);
    for sub in root.get_subcommands().filter(|c| !is_mode(c.get_name())) {
        if sub.has_subcommands() {
            for leaf in sub.get_subcommands() {
                subcommand(&mut r, leaf);
            }
        } else {
            subcommand(&mut r, sub);
        }
    }

    r.control("SH", ["OPTIONS"]);
    r.text(inline(
        "Before a MODE, or anywhere in a subcommand's command line. `--help` and `--version` \
         also work in any position of an operator form.",
    ));
    for arg in root.get_arguments().filter(|a| !a.is_hide_set()) {
        option(&mut r, arg);
    }

    r.control("SH", ["ENVIRONMENT"]);
    for v in ENVIRONMENT {
        r.control("TP", []).text([bold(v.name)]);
        let mut text = inline(v.meaning);
        text.push(roman(format!(" ({}).", v.default_text())));
        r.text(text);
    }

    r.control("SH", ["FILES"]);
    r.text(inline(
        "STATE is SKYHOOK_ROOT_DIR and LOGS is SKYHOOK_LOG_DIR, both under ROOT_MOUNT. \
         docs/state-layout.md gives every file, its format and who reads it.",
    ));
    for (path, what) in FILES {
        r.control("TP", []).text([bold(*path)]);
        r.text(inline(what));
    }

    r.control("SH", ["EXIT STATUS"]);
    for (code, what) in EXIT_STATUS {
        r.control("TP", []).text([bold(*code)]);
        r.text(inline(what));
    }

    r.control("SH", ["EXAMPLES"]);
    for (command, what) in EXAMPLES {
        r.control("TP", []).text([bold(*command)]);
        r.text(inline(what));
    }

    r.control("SH", ["SEE ALSO"]);
    r.text(inline(
        "docs/operations.md, docs/state-layout.md, docs/package-format.md, docs/interrupts.md \
         and docs/try.md in the agent's source; docs/schemas/ has the schema of every JSON \
         document a subcommand prints.",
    ));
    r.render()
}

const EXAMPLES: &[(&str, &str)] = &[
    (
        "agent apply /root /var/lib/skyhook/sk1/pkg-1.0.0-uid-3",
        "Run the package's apply stage against the host mounted at /root, as the operator does.",
    ),
    (
        "agent plan apply / /var/lib/skyhook/sk1/pkg-1.0.0-uid-3",
        "On the node itself: which apply steps a run would run or skip, and why.",
    ),
    (
        "agent status / --format json",
        "What the agent left on this node, as one JSON document; exit 1 when the verdict is error.",
    ),
    (
        "agent interrupts encode '{\"type\":\"service_restart\",\"services\":[\"kubelet\"]}'",
        "The INTERRUPT_DATA argument of an interrupt that restarts kubelet.",
    ),
    (
        "agent try ./my-package --interrupt '{\"type\":\"node_restart\"}'",
        "A package's whole lifecycle in a throwaway sandbox of /, and what it changed.",
    ),
    (
        "source <(agent completions bash)",
        "Complete MODEs, subcommands and flags in bash.",
    ),
];

/// One subcommand: its usage, what it does, its arguments and flags, and its notes.
fn subcommand(r: &mut Roff, cmd: &Command) {
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.strip_prefix("Usage: ").unwrap_or(&usage);
    let mut forms = usage.lines().map(str::trim);
    r.control("TP", [])
        .text(synopsis(forms.next().unwrap_or_default()));
    let more: Vec<&str> = forms.collect();
    if !more.is_empty() {
        for form in more {
            r.text(synopsis(form)).control("br", []);
        }
        r.control("sp", []);
    }
    paragraphs(r, &long_about(cmd));
    let args: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_global_set())
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    if args.is_empty() && cmd.get_after_help().is_none() {
        return;
    }
    r.control("RS", []);
    for arg in args {
        option(r, arg);
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        notes(r, &after.to_string());
    }
    r.control("RE", []);
}

/// One argument or flag: its names and value, its help, its default and possible values.
fn option(r: &mut Roff, arg: &Arg) {
    let mut head = Vec::new();
    let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
    if arg.is_positional() {
        head.push(italic(value_name(arg)));
    } else {
        if let Some(short) = arg.get_short() {
            head.push(bold(format!("-{short}")));
        }
        if let Some(long) = arg.get_long() {
            if !head.is_empty() {
                head.push(roman(", "));
            }
            head.push(bold(format!("--{long}")));
        }
        if takes_value {
            for name in arg.get_value_names().into_iter().flatten() {
                head.extend([roman(" "), italic(name.as_str())]);
            }
        }
    }
    r.control("TP", []).text(head);
    let mut text = help(arg);
    let possible: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_owned())
        .collect();
    if !possible.is_empty() {
        let _ = write!(text, " (one of: {})", possible.join(", "));
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if takes_value && !defaults.is_empty() && !arg.is_hide_default_value_set() {
        let _ = write!(text, " (default: {})", defaults.join(","));
    }
    paragraphs(r, text.trim_start());
}

/// A subcommand's notes after its flags: paragraphs, and lists (`Exit codes:` and the lines
/// indented under it) kept as they are.
fn notes(r: &mut Roff, text: &str) {
    for para in text.split("\n\n") {
        let mut lines = para.lines();
        let first = lines.next().unwrap_or_default();
        let rest: Vec<&str> = lines.collect();
        r.control("PP", []);
        if !rest.is_empty() && rest.iter().all(|l| l.starts_with("  ")) {
            r.text(inline(first));
            r.control("nf", []);
            for line in rest {
                r.text(inline(line));
            }
            r.control("fi", []);
        } else {
            r.text(inline(&sentence(para)));
        }
    }
}

/// A positional argument's name: its value name, upper case.
fn value_name(arg: &Arg) -> String {
    arg.get_value_names()
        .and_then(|names| names.first())
        .map_or_else(|| arg.get_id().as_str().to_uppercase(), ToString::to_string)
}

fn long_about(cmd: &Command) -> String {
    cmd.get_long_about()
        .or(cmd.get_about())
        .map(ToString::to_string)
        .unwrap_or_default()
}

fn help(arg: &Arg) -> String {
    arg.get_long_help()
        .or(arg.get_help())
        .map(ToString::to_string)
        .unwrap_or_default()
}

/// Text in paragraphs (blank lines between them), each ending with a full stop.
fn paragraphs(r: &mut Roff, text: &str) {
    for (i, para) in text.split("\n\n").enumerate() {
        if i > 0 {
            r.control("IP", []);
        }
        r.text(inline(&sentence(para)));
    }
}

/// A paragraph on one line, ending with a full stop.
fn sentence(para: &str) -> String {
    let mut para = para.split_whitespace().collect::<Vec<_>>().join(" ");
    if !para.is_empty() && !para.ends_with(['.', ')', ':']) {
        para.push('.');
    }
    para
}

/// Text whose `code spans` are set in bold.
fn inline(text: &str) -> Vec<Inline> {
    text.split('`')
        .enumerate()
        .filter(|(_, part)| !part.is_empty())
        .map(|(i, part)| if i % 2 == 1 { bold(part) } else { roman(part) })
        .collect()
}

/// A usage line in the manual's conventions: literal words in bold, placeholders (upper
/// case) in italics, brackets and bars in roman.
fn synopsis(line: &str) -> Vec<Inline> {
    let mut out = Vec::new();
    for (i, word) in line.split_whitespace().enumerate() {
        if i > 0 {
            out.push(roman(" "));
        }
        let core = word.trim_start_matches(['[', '<']);
        let open = &word[..word.len() - core.len()];
        let core_end = core.trim_end_matches([']', '>', '.']);
        let close = &core[core_end.len()..];
        let (open, close) = (open.replace('<', ""), close.replace('>', ""));
        if !open.is_empty() {
            out.push(roman(open));
        }
        if core_end == "|" {
            out.push(roman(core_end));
        } else if !core_end.is_empty() {
            let placeholder = core_end
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '=');
            out.push(if placeholder {
                italic(core_end)
            } else {
                bold(core_end)
            });
        }
        if !close.is_empty() {
            out.push(roman(close));
        }
    }
    out
}
