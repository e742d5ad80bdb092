//! What the command tree generates (SPEC §1.5): `agent completions bash|zsh|fish`, which complete
//! the MODEs too, and `agent man`; the repository keeps both as the binary prints them
//! (docs/completions/, docs/agent.1; `scripts/generate-cli-docs.sh` writes them).

use std::process::Command;

use crate::util::{FakeHost, MODES, SUBCOMMANDS, repo, repo_file};

/// The checked-in file of each shell, as docs/completions/ names it.
const SCRIPTS: &[(&str, &str)] = &[
    ("bash", "docs/completions/agent.bash"),
    ("zsh", "docs/completions/_agent"),
    ("fish", "docs/completions/agent.fish"),
];

fn generated(host: &FakeHost, args: &[&str]) -> String {
    let run = host.agent().args(args).run();
    run.assert_success();
    assert!(run.stderr.is_empty(), "{run:?}");
    run.out()
}

#[test]
fn completions_for_bash_zsh_and_fish_name_every_mode_subcommand_and_flag() {
    let host = FakeHost::new();
    for (shell, _) in SCRIPTS {
        let script = generated(&host, &["completions", shell]);
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell}: no {sub}\n{script}");
        }
        for mode in MODES {
            // Each shell's way of offering a word as a (sub)command to complete.
            let offered = match *shell {
                "bash" => format!(" {mode} "),
                "zsh" => format!("'{mode}:"),
                _ => format!("-a \"{mode}\""),
            };
            assert!(script.contains(&offered), "{shell}: no MODE {mode}");
        }
        for flag in [
            "format",
            "state-dir",
            "yes",
            "package-version",
            "interrupt",
            "quiet",
            "verbose",
        ] {
            assert!(script.contains(flag), "{shell}: no --{flag}");
        }
    }
    host.agent()
        .args(["completions", "tcsh"])
        .run()
        .assert_code(2);
}

#[test]
fn bash_completes_modes_subcommands_topics_and_flags() {
    let host = FakeHost::new();
    let script = host.outside().join("agent.bash");
    std::fs::write(&script, generated(&host, &["completions", "bash"])).unwrap();
    // The words typed so far, and the completions bash offers for the last one.
    let complete = |words: &str, cword: usize| -> String {
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; \
                 _agent agent \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; \
                 echo \"${{COMPREPLY[@]}}\"",
                script.display()
            ))
            .output()
            .expect("bash runs");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    assert_eq!(complete("agent ap", 1), "apply apply-check");
    assert_eq!(
        complete("agent post", 1),
        "post-interrupt post-interrupt-check"
    );
    assert_eq!(complete("agent -v unin", 2), "uninstall uninstall-check");
    assert_eq!(complete("agent sta", 1), "status");
    assert_eq!(complete("agent res", 1), "reset");
    assert_eq!(complete("agent help va", 2), "validate");
    assert_eq!(complete("agent plan upg", 2), "upgrade upgrade-check");
    assert_eq!(complete("agent interrupts l", 2), "list");
    assert_eq!(complete("agent status /r --st", 3), "--state-dir");
    assert_eq!(complete("agent reset /r --ye", 3), "--yes");
    assert_eq!(complete("agent status /r --format ''", 4), "text json");
    // ROOT_MOUNT and COPY_DIR: nothing of its own, so bash completes file names.
    assert_eq!(complete("agent apply /r", 2), "");
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(
        text.contains("complete -F _agent -o nosort -o bashdefault -o default agent"),
        "{text}"
    );
}

#[test]
fn the_committed_completions_and_man_page_are_what_the_binary_generates() {
    let host = FakeHost::new();
    for (shell, file) in SCRIPTS {
        assert_eq!(
            generated(&host, &["completions", shell]),
            repo_file(file),
            "{file} is stale: regenerate it with scripts/generate-cli-docs.sh"
        );
    }
    assert_eq!(
        generated(&host, &["man"]),
        repo_file("docs/agent.1"),
        "docs/agent.1 is stale: regenerate it with scripts/generate-cli-docs.sh"
    );
}

/// The text of section `name` of a man page (up to the next `.SH`).
fn section<'a>(page: &'a str, name: &str) -> &'a str {
    let head = format!("\n.SH {name}\n");
    let at = page
        .find(&head)
        .unwrap_or_else(|| panic!("no section {name}\n{page}"))
        + head.len();
    let len = page[at..].find("\n.SH ").unwrap_or(page.len() - at);
    &page[at..at + len]
}

/// The bold words that open each `.TP` entry of a section.
fn entries(section: &str) -> Vec<String> {
    let lines: Vec<&str> = section.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0] == ".TP")
        .filter_map(|w| w[1].strip_prefix("\\fB"))
        .map(|rest| rest.split("\\fR").next().unwrap().replace("\\-", "-"))
        .collect()
}

#[test]
fn the_man_page_documents_every_mode_subcommand_variable_file_and_exit_code() {
    let host = FakeHost::new();
    let page = generated(&host, &["man"]);
    assert!(page.contains("\n.TH AGENT 1 "), "{page}");
    assert!(
        section(&page, "NAME").starts_with("agent \\- Node agent for Skyhook"),
        "{page}"
    );
    // Roff only: no Markdown code spans, no help text pasted in.
    assert!(!page.contains('`'), "a Markdown backtick\n{page}");
    assert!(!page.to_lowercase().contains("usage:"), "{page}");
    let synopsis = section(&page, "SYNOPSIS");
    assert!(
        synopsis.contains("\\fBagent\\fR [\\fB\\-q\\fR | \\fB\\-v\\fR] \\fIMODE\\fR \\fIROOT_MOUNT\\fR \\fICOPY_DIR\\fR\n"),
        "{synopsis}"
    );
    assert!(synopsis.contains("\\fIINTERRUPT_DATA\\fR"), "{synopsis}");

    let modes = entries(section(&page, "MODES"));
    let expected: Vec<String> = MODES.iter().map(|m| format!("agent {m}")).collect();
    assert_eq!(modes, expected);

    for sub in SUBCOMMANDS.iter().filter(|s| **s != "interrupts") {
        assert!(
            section(&page, "SUBCOMMANDS").contains(&format!(
                ".TP\n\\fBagent\\fR \\fB{}\\fR",
                sub.replace('-', "\\-")
            )),
            "no {sub}"
        );
    }
    for leaf in ["list", "encode", "decode"] {
        assert!(
            section(&page, "SUBCOMMANDS").contains(&format!(
                ".TP\n\\fBagent\\fR \\fBinterrupts\\fR \\fB{leaf}\\fR"
            )),
            "no interrupts {leaf}"
        );
    }

    let variables = entries(section(&page, "ENVIRONMENT"));
    for name in [
        // SPEC §2.
        "COPY_RESOLV",
        "OVERLAY_ALWAYS_RUN_STEP",
        "SKYHOOK_AGENT_WRITE_LOGS",
        "SKYHOOK_AGENT_BUFFER_LIMIT",
        "SKYHOOK_RESOURCE_ID",
        "SKYHOOK_DATA_DIR",
        "SKYHOOK_ROOT_DIR",
        "SKYHOOK_LOG_DIR",
        "SKYHOOK_NODE_ORDER",
        "SKYHOOK_AGENT_LOG_FORMAT",
        "SKYHOOK_AGENT_LOG",
        "SKYHOOK_STEP_TIMEOUT_SECONDS",
        "SKYHOOK_REBOOT_MAX_ATTEMPTS",
        // The agent's own.
        "SKYHOOK_AGENT_STOP_GRACE_SECONDS",
        "SKYHOOK_AGENT_HEARTBEAT_SECONDS",
        "SKYHOOK_AGENT_WRITE_METRICS",
        "SKYHOOK_AGENT_METRICS_DIR",
    ] {
        assert!(
            variables.iter().any(|v| v == name),
            "no {name}: {variables:?}"
        );
    }
    // docs/operations.md's table lists the same variables.
    let operations = repo_file("docs/operations.md");
    let table = operations
        .split("## Environment")
        .nth(1)
        .expect("operations.md has an Environment section");
    let documented: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with("| variable"))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
        .collect();
    assert_eq!(documented, variables, "docs/operations.md, Environment");

    // Every file of FILES is a row of docs/state-layout.md's table.
    let layout = repo_file("docs/state-layout.md");
    let files = entries(section(&page, "FILES"));
    assert!(files.len() >= 8, "{files:?}");
    for file in files {
        assert!(layout.contains(&format!("| `{file}")), "{file}");
    }

    let codes = entries(section(&page, "\"EXIT STATUS\""));
    assert_eq!(codes, ["0", "1", "2"]);
    assert!(!entries(section(&page, "EXAMPLES")).is_empty());

    // groff reads it without a warning.
    let out = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .arg(repo().join("docs/agent.1"))
        .output()
        .expect("groff runs (scripts/test.sh installs groff-base)");
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "groff: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
