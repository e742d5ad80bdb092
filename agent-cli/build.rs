//! Embed the build's identity (SPEC §1.3): `AGENT_VERSION` is read by the crate itself
//! (`option_env!`); the commit (build/commit.rs says where it comes from) is given to it as
//! `AGENT_GIT_SHA`, the `agent_cli::GIT_SHA` constant.

use std::path::Path;

#[path = "build/commit.rs"]
mod commit;

fn main() {
    println!("cargo:rerun-if-env-changed=AGENT_VERSION");
    println!("cargo:rerun-if-env-changed=GIT_SHA");
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it");
    let root = Path::new(&manifest_dir)
        .parent()
        .expect("agent-cli sits in the workspace root");
    let explicit = std::env::var("GIT_SHA").ok();
    // One line of build-script output per directive: a newline would smuggle in another.
    if let Some(sha) = explicit
        .as_deref()
        .filter(|s| s.chars().any(char::is_control))
    {
        panic!("GIT_SHA {sha:?} contains a control character");
    }
    let found = commit::find(root, explicit.as_deref());
    if let Some(warning) = &found.warning {
        println!("cargo:warning={warning}");
    }
    for path in &found.watch {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    println!("cargo:rustc-env=AGENT_GIT_SHA={}", found.id);
}
