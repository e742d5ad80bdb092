//! What the binary says it is (SPEC §1.3).

/// The version embedded at build time (SPEC §1.3): `AGENT_VERSION` (the crate version when
/// unset); when it is set but empty, the embedded [`GIT_SHA`] (which may be `unknown`).
pub fn version() -> &'static str {
    match option_env!("AGENT_VERSION") {
        None => env!("CARGO_PKG_VERSION"),
        Some(v) if !v.is_empty() => v,
        Some(_) => GIT_SHA,
    }
}

/// The commit the binary was built from, `-dirty` when its tracked sources differed from it:
/// `GIT_SHA` at build time, else the git checkout it was built in, else `unknown`
/// (agent-cli/build/commit.rs).
pub const GIT_SHA: &str = env!("AGENT_GIT_SHA");
