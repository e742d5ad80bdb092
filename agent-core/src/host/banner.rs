//! The legacy startup banner (SPEC §3): operators and e2e tests parse it, so it is byte-exact.

use std::fmt::Write as _;
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
    let mut s = String::with_capacity(768);
    // The section titles are Python's `str.center(20, "-")` of the legacy agent.
    let _ = writeln!(s, "--------------------");
    let _ = writeln!(s, "-CLI CONFIGURATION--");
    let _ = writeln!(s, "mode: {}", inv.mode);
    let _ = writeln!(s, "root_mount: {}", inv.root_mount.display());
    let _ = writeln!(s, "copy_dir: {}", inv.copy_dir.display());
    let _ = writeln!(
        s,
        "interrupt_data: {}",
        inv.interrupt_data.unwrap_or("None")
    );
    let _ = writeln!(s, "always_run_step: {}", py_bool(rt.always_run_step));
    let _ = writeln!(s, "-ENV CONFIGURATION--");
    let _ = writeln!(s, "COPY_RESOLV: {}", py_bool(rt.copy_resolv));
    let _ = writeln!(
        s,
        "OVERLAY_ALWAYS_RUN_STEP: {}",
        py_bool(rt.always_run_step)
    );
    let _ = writeln!(s, "SKYHOOK_RESOURCE_ID: {}", rt.resource_id);
    let _ = writeln!(s, "SKYHOOK_DATA_DIR: {}", rt.data_dir.display());
    let _ = writeln!(s, "SKYHOOK_ROOT_DIR: {}", rt.state_dir.display());
    let _ = writeln!(s, "SKYHOOK_LOG_DIR: {}", rt.log_dir.display());
    let _ = writeln!(s, "SKYHOOK_AGENT_BUFFER_LIMIT: {}", rt.buffer_limit);
    let _ = writeln!(s, "SKYHOOK_AGENT_WRITE_LOGS: {}", py_bool(rt.write_logs));
    let _ = writeln!(s, "Directory CONFIGURATION");
    let _ = writeln!(
        s,
        "flag_dir: {}",
        rt.package_flags_dir(&rid.package, &rid.version).display()
    );
    let _ = writeln!(
        s,
        "log_dir: {}",
        rt.package_log_dir(&rid.package, &rid.version).display()
    );
    let _ = writeln!(
        s,
        "history_file: {}",
        rt.history_file(&rid.package).display()
    );
    let _ = writeln!(s, "--------------------");
    s
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
