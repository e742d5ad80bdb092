//! `agent completions bash|zsh|fish` and `agent man` (the committed docs/agent.1), generated from
//! the clap definitions.

use std::path::Path;
use std::process::Command;

use crate::util::FakeHost;

const SUBCOMMANDS: &[&str] = &[
    "interrupts",
    "validate",
    "plan",
    "status",
    "reset",
    "try",
    "completions",
    "man",
];

#[test]
fn completions_for_bash_zsh_and_fish_name_every_subcommand_and_flag() {
    let host = FakeHost::new();
    for shell in ["bash", "zsh", "fish"] {
        let run = host.agent().args(["completions", shell]).run();
        run.assert_success();
        let script = run.out();
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell}: no {sub}\n{script}");
        }
        for flag in ["format", "state-dir", "yes", "package-version", "interrupt"] {
            assert!(script.contains(flag), "{shell}: no --{flag}");
        }
    }
    host.agent()
        .args(["completions", "tcsh"])
        .run()
        .assert_code(2);
}

#[test]
fn bash_completes_subcommands_and_their_flags() {
    let host = FakeHost::new();
    let script = host.outside().join("agent.bash");
    let run = host.agent().args(["completions", "bash"]).run();
    run.assert_success();
    std::fs::write(&script, &run.stdout).unwrap();
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
    assert_eq!(complete("agent sta", 1), "status");
    assert_eq!(complete("agent res", 1), "reset");
    assert_eq!(complete("agent status /r --st", 3), "--state-dir");
    assert_eq!(complete("agent reset /r --ye", 3), "--yes");
    assert_eq!(complete("agent status /r --format ''", 4), "text json");
}

#[test]
fn the_man_page_is_generated_and_committed_as_docs_agent_1() {
    let host = FakeHost::new();
    let run = host.agent().arg("man").run();
    run.assert_success();
    let page = run.out();
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/agent.1");
    let on_disk = std::fs::read_to_string(&committed).unwrap();
    assert_eq!(
        page, on_disk,
        "docs/agent.1 is stale: regenerate it with `agent man > docs/agent.1`"
    );
    for needle in [
        ".TH agent 1",
        ".SH NAME\nagent \\- ",
        ".SH SYNOPSIS\n.nf\n",
        "  agent MODE ROOT_MOUNT COPY_DIR\n",
        "  agent interrupt ROOT_MOUNT COPY_DIR INTERRUPT_DATA\n",
        ".SH ENVIRONMENT\n",
        "\\fBSKYHOOK_RESOURCE_ID\\fR",
        "\\fBSKYHOOK_REBOOT_MAX_ATTEMPTS\\fR",
        ".SH \"EXIT STATUS\"\n",
        ".SH SUBCOMMANDS\n",
    ] {
        assert!(page.contains(needle), "missing {needle:?}\n{page}");
    }
    for sub in SUBCOMMANDS {
        assert!(
            page.contains(&format!("\\fBagent {sub}\\fR")),
            "no {sub}\n{page}"
        );
    }
    // groff reads it without a warning, when groff is there.
    if let Ok(out) = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .arg(&committed)
        .output()
    {
        assert!(out.status.success(), "{out:?}");
        assert!(
            out.stderr.is_empty(),
            "groff: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
