//! The legacy startup banner (SPEC §3): operators and e2e tests parse it, so it is byte-exact.

use std::path::Path;

use crate::host::identity::ResourceId;
use crate::host::runtime::Runtime;

/// What the banner shows of the command line.
#[derive(Debug, Clone, Copy)]
pub struct Invocation<'a> {
    pub mode: &'a str,
    pub root_mount: &'a Path,
    pub copy_dir: &'a Path,
    pub interrupt_data: Option<&'a str>,
}

/// Python's `str(bool)`.
const fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// The banner, every line ending in `\n`. Directory lines use the resource ID's names
/// (SPEC §8: they can differ from config.json's).
pub fn render(inv: &Invocation<'_>, rt: &Runtime, rid: &ResourceId) -> String {
    let (package, version) = (&rid.package, &rid.version);
    // The section titles are Python's `str.center(20, "-")` of the legacy agent.
    let lines = [
        "--------------------".to_owned(),
        "-CLI CONFIGURATION--".to_owned(),
        format!("mode: {}", inv.mode),
        format!("root_mount: {}", inv.root_mount.display()),
        format!("copy_dir: {}", inv.copy_dir.display()),
        format!("interrupt_data: {}", inv.interrupt_data.unwrap_or("None")),
        format!("always_run_step: {}", py_bool(rt.always_run_step)),
        "-ENV CONFIGURATION--".to_owned(),
        format!("COPY_RESOLV: {}", py_bool(rt.copy_resolv)),
        format!("OVERLAY_ALWAYS_RUN_STEP: {}", py_bool(rt.always_run_step)),
        format!("SKYHOOK_RESOURCE_ID: {}", rt.resource_id),
        format!("SKYHOOK_DATA_DIR: {}", rt.data_dir.display()),
        format!("SKYHOOK_ROOT_DIR: {}", rt.state_dir.display()),
        format!("SKYHOOK_LOG_DIR: {}", rt.log_dir.display()),
        format!("SKYHOOK_AGENT_BUFFER_LIMIT: {}", rt.buffer_limit),
        format!("SKYHOOK_AGENT_WRITE_LOGS: {}", py_bool(rt.write_logs)),
        "Directory CONFIGURATION".to_owned(),
        format!(
            "flag_dir: {}",
            rt.package_flags_dir(package, version).display()
        ),
        format!(
            "log_dir: {}",
            rt.package_log_dir(package, version).display()
        ),
        format!("history_file: {}", rt.history_file(package).display()),
        "--------------------".to_owned(),
    ];
    lines.map(|line| line + "\n").concat()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::ffi::OsString;

    fn runtime(vars: &[(&str, &str)]) -> Runtime {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        Runtime::from_lookup(|n| map.get(n).cloned()).unwrap()
    }

    #[test]
    fn matches_the_legacy_banner_byte_for_byte() {
        let rt = runtime(&[
            ("SKYHOOK_RESOURCE_ID", "abc_pkg_1.0.0"),
            ("COPY_RESOLV", "false"),
            ("SKYHOOK_ROOT_DIR", "/var/lib/skyhook/sk1"),
            ("SKYHOOK_LOG_DIR", "/var/log/skyhook/sk1"),
        ]);
        let rid = ResourceId::parse(&rt.resource_id).unwrap();
        let inv = Invocation {
            mode: "apply",
            root_mount: Path::new("/root"),
            copy_dir: Path::new("/var/lib/skyhook/sk1/pkg-1.0.0-uid1-1"),
            interrupt_data: None,
        };
        let expected = "\
--------------------
-CLI CONFIGURATION--
mode: apply
root_mount: /root
copy_dir: /var/lib/skyhook/sk1/pkg-1.0.0-uid1-1
interrupt_data: None
always_run_step: False
-ENV CONFIGURATION--
COPY_RESOLV: False
OVERLAY_ALWAYS_RUN_STEP: False
SKYHOOK_RESOURCE_ID: abc_pkg_1.0.0
SKYHOOK_DATA_DIR: /skyhook-package
SKYHOOK_ROOT_DIR: /var/lib/skyhook/sk1
SKYHOOK_LOG_DIR: /var/log/skyhook/sk1
SKYHOOK_AGENT_BUFFER_LIMIT: 8192
SKYHOOK_AGENT_WRITE_LOGS: True
Directory CONFIGURATION
flag_dir: /var/lib/skyhook/sk1/flags/pkg/1.0.0
log_dir: /var/log/skyhook/sk1/pkg/1.0.0
history_file: /var/lib/skyhook/sk1/history/pkg.json
--------------------
";
        assert_eq!(render(&inv, &rt, &rid), expected);
    }

    #[test]
    fn prints_interrupt_data_and_python_booleans() {
        let rt = runtime(&[
            ("SKYHOOK_RESOURCE_ID", "abc_pkg_1.0.0"),
            ("OVERLAY_ALWAYS_RUN_STEP", "TRUE"),
            ("SKYHOOK_AGENT_WRITE_LOGS", "false"),
            ("SKYHOOK_AGENT_BUFFER_LIMIT", "not-a-number"),
        ]);
        let rid = ResourceId::parse(&rt.resource_id).unwrap();
        let inv = Invocation {
            mode: "interrupt",
            root_mount: Path::new("/root"),
            copy_dir: Path::new("/x"),
            interrupt_data: Some("eyJ0eXBlIjoibm9fb3AifQ=="),
        };
        let text = render(&inv, &rt, &rid);
        for line in [
            "interrupt_data: eyJ0eXBlIjoibm9fb3AifQ==\n",
            "always_run_step: True\n",
            "OVERLAY_ALWAYS_RUN_STEP: True\n",
            "COPY_RESOLV: True\n",
            "SKYHOOK_AGENT_WRITE_LOGS: False\n",
            "SKYHOOK_AGENT_BUFFER_LIMIT: not-a-number\n",
            "flag_dir: /etc/skyhook/flags/pkg/1.0.0\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from\n{text}");
        }
    }
}
