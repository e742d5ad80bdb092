//! config.json validation (SPEC §7): no input panics, and an accepted config has the shape the
//! rest of the agent relies on (names that are single path components, relative step paths
//! without `..`, at least one return code per step).

#![no_main]

use agent_core::package::config::PackageConfig;
use libfuzzer_sys::fuzz_target;

fn single_component(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\0'])
}

fuzz_target!(|data: &[u8]| {
    let Ok((config, _warnings)) = PackageConfig::from_slice(data) else {
        return;
    };
    assert!(single_component(&config.package_name), "{config:?}");
    assert!(single_component(&config.package_version), "{config:?}");
    for step in config.modes.values().flatten() {
        assert!(
            !step.path.is_empty() && !step.path.starts_with('/'),
            "{step:?}"
        );
        assert!(!step.path.split('/').any(|c| c == ".."), "{step:?}");
        assert!(!step.returncodes.is_empty(), "{step:?}");
    }
});
