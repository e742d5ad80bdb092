//! The sandbox's own root, as its init, the stage runner and the lifecycle name it (after the
//! pivot): where the overlay, its layers, the output and the package are, and which host
//! paths it shows.

/// The overlay the stages run on (their ROOT_MOUNT).
pub(crate) const MERGED: &str = "/root";
/// Everything of the sandbox's own that the steps must not reach: the lower layer (a
/// read-only bind), the upper layer, the output directory, the package as given, the
/// configMap keys. A stage's namespace covers it with an empty
/// read-only tmpfs.
pub(crate) const PRIVATE: &str = "/.try";
pub(crate) const LOWER: &str = "/.try/lower";
pub(crate) const UPPER: &str = "/.try/upper";
pub(crate) const WORK: &str = "/.try/work";
pub(crate) const OUT: &str = "/.try/out";
pub(crate) const PACKAGE: &str = "/.try/package";
pub(crate) const CONFIGMAPS: &str = "/.try/configmaps";
/// The simulated boot ID file, bound over `/proc/sys/kernel/random/boot_id` of the overlay.
pub(crate) const BOOT_ID: &str = "/.try/boot_id";
/// The agent binary the stages run, a read-only bind of `agent try`'s own executable: a step
/// that opens `/proc/<pid>/exe` of the stage's agent finds a read-only file.
pub(crate) const AGENT_EXE: &str = "/.agent";

/// Host directories the sandbox's own root shows read-only (the agent binary's libraries, and
/// a shell for steps with `on_host: false`).
pub(crate) const HOST_DIRS: &[&str] = &[
    "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc",
];

/// Device nodes of the minimal `/dev`, bound read-only from the host's.
pub(crate) const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Where the sandbox's own root shows a filesystem of the machine (read-only): the host
/// directories, `/sys` (twice), the device nodes, the agent binary and the parts of
/// [`PRIVATE`] bound from outside. Every mount at or below one of them is of a host
/// filesystem.
pub(crate) fn host_mount_points() -> Vec<String> {
    let mut points: Vec<String> = HOST_DIRS.iter().map(|d| format!("/{d}")).collect();
    points.extend(DEVICES.iter().map(|d| format!("/dev/{d}")));
    points.extend(
        [
            "/sys",
            "/root/sys",
            AGENT_EXE,
            LOWER,
            OUT,
            PACKAGE,
            CONFIGMAPS,
        ]
        .map(str::to_owned),
    );
    points
}
