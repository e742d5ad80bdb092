//! The host's boot ID (SPEC §9.4): what tells a reboot that happened from one that did not.

use std::path::Path;

use crate::host::errors::Chain;
use crate::host::fs::{HostFs, MARKER_BOUND};

/// Where the host's boot ID is, relative to ROOT.
pub(crate) const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// The boot ID could not be read; never taken as a changed boot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("reading the host boot ID from {path}: {reason}")]
pub struct BootIdError {
    pub path: String,
    pub reason: String,
}

/// The host's boot ID: trimmed; empty or unreadable is an error, never a "changed" boot.
///
/// # Errors
/// The file cannot be resolved or read, or it is blank.
pub fn read_boot_id(fs: &HostFs) -> Result<String, BootIdError> {
    let err = |reason: String| BootIdError {
        path: BOOT_ID_PATH.to_owned(),
        reason,
    };
    // As the host sees the file, through the rooted lookup; a boot ID is 37 bytes.
    let bytes = fs
        .read_host_file(Path::new(BOOT_ID_PATH), MARKER_BOUND)
        .map_err(|e| err(Chain(&e).to_string()))?
        .ok_or_else(|| err(std::io::Error::from_raw_os_error(libc::ENOENT).to_string()))?;
    let text = String::from_utf8_lossy(&bytes);
    let id = text.trim();
    if id.is_empty() {
        return Err(err("empty".into()));
    }
    Ok(id.to_owned())
}
