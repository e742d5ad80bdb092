//! The files of one interrupt resource, `STATE/interrupts/flags/<RID>/` (SPEC §9.3–§9.6):
//! `<TYPE>_<i>.complete` (shared with both upstream agents), `<TYPE>.complete` (kinds that run
//! no command), the after-reboot `<TYPE>_<i>.pending` marker (upstream's exact format) and the
//! loop guard's `<TYPE>_<i>.attempts` counter (a file the upstream agents ignore).
//!
//! This module is the only reader and writer of those formats; the runner, `agent plan`,
//! `agent status` and `agent reset` go through it.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::compat::timestamp;
use crate::host::errors::Chain;
use crate::host::fs::{HostFs, HostFsError, MARKER_BOUND};
use crate::state::markers;

/// `STATE/interrupts/flags`: one directory per interrupt resource.
pub(crate) fn resources_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("interrupts").join("flags")
}

/// `STATE/interrupts/flags/<RID>`: the markers of one interrupt resource.
pub fn resource_dir(state_dir: &Path, resource_id: &str) -> PathBuf {
    resources_dir(state_dir).join(resource_id)
}

/// `<TYPE>_<i>`: the name of a kind's operation `index`, which its markers begin with.
pub fn operation_name(kind: &str, index: usize) -> String {
    format!("{kind}_{index}")
}

/// Marker of a completed interrupt operation, shared with both upstream agents (SPEC §9.3).
pub fn complete_name(kind: &str, index: usize) -> String {
    format!("{}.{COMPLETE}", operation_name(kind, index))
}

/// Marker of an after-reboot operation waiting for the boot ID to change (SPEC §9.4).
pub fn pending_name(kind: &str, index: usize) -> String {
    format!("{}.{PENDING}", operation_name(kind, index))
}

/// Reboot loop guard counter; upstream agents ignore this file (SPEC §9.6).
pub fn attempts_name(kind: &str, index: usize) -> String {
    format!("{}.{ATTEMPTS}", operation_name(kind, index))
}

/// The content of a completion marker: the UTC time it was written (RFC 3339, nanoseconds).
fn complete_contents(now: SystemTime) -> String {
    timestamp::rfc3339_nano(now)
}

/// Write `<kind>.complete` in `dir`: the marker of a kind that runs no command (no index: the
/// name the upstream agents use for `no_op`).
///
/// # Errors
/// The marker cannot be written.
pub(crate) fn write_kind_done(
    fs: &HostFs,
    dir: &Path,
    kind: &str,
    now: SystemTime,
) -> Result<PathBuf, HostFsError> {
    let marker = kind_done_path(dir, kind);
    fs.write_atomic(&marker, complete_contents(now).as_bytes())
        .map(|()| marker)
}

/// `<dir>/<kind>.complete`.
pub(crate) fn kind_done_path(dir: &Path, kind: &str) -> PathBuf {
    dir.join(format!("{kind}.{COMPLETE}"))
}

/// The extensions of the files of an interrupt operation, as a directory listing shows them.
pub(crate) const EXTENSIONS: [&str; 3] = [COMPLETE, PENDING, ATTEMPTS];
/// `<TYPE>_<i>.complete` (or `<TYPE>.complete`).
pub const COMPLETE: &str = "complete";
/// `<TYPE>_<i>.pending`.
pub const PENDING: &str = "pending";
/// `<TYPE>_<i>.attempts`.
pub(crate) const ATTEMPTS: &str = "attempts";

/// `(stem, extension)` of a name in a marker directory that is one of the files above.
pub(crate) fn split_name(name: &str) -> Option<(&str, &str)> {
    name.rsplit_once('.')
        .filter(|(_, ext)| EXTENSIONS.contains(ext))
}

/// What a completion marker records: its content (trimmed), or `None` when it is corrupt in
/// the sense of SPEC §5 (the next run does the operation again).
pub(crate) fn parse_complete(bytes: &[u8]) -> Option<String> {
    (!markers::is_corrupt(bytes)).then(|| String::from_utf8_lossy(bytes).trim().to_owned())
}

/// What a pending marker says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// `boot-id:<B>`: a reboot was requested under boot `B`.
    BootId(String),
    /// Anything else (trimmed): replaced with a warning by the next run.
    Malformed(String),
}

impl Pending {
    /// Parse a pending marker's bytes (surrounding whitespace ignored).
    pub fn parse(bytes: &[u8]) -> Self {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim();
        match text.strip_prefix("boot-id:").map(str::trim) {
            Some(b) if !b.is_empty() => Self::BootId(b.to_owned()),
            _ => Self::Malformed(text.to_owned()),
        }
    }

    /// The bytes of a pending marker written under `boot_id`.
    pub fn contents(boot_id: &str) -> String {
        format!("boot-id:{boot_id}\n")
    }
}

/// The attempt count recorded under `boot_id` in an attempts file (`boot-id:<id>` and
/// `attempts:<n>` lines): 0 if it was recorded under another boot, `None` if the text is not
/// such a record (SPEC §9.6: the caller counts that as the limit, never as 0).
pub(crate) fn parse_attempts(text: &str, boot_id: &str) -> Option<u32> {
    let mut id = None;
    let mut count = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(v) = line.strip_prefix("boot-id:") {
            if id.replace(v.trim()).is_some() {
                return None;
            }
        } else if let Some(v) = line.strip_prefix("attempts:") {
            if count.replace(v.trim().parse::<u32>().ok()?).is_some() {
                return None;
            }
        } else {
            return None;
        }
    }
    match (id.filter(|i| !i.is_empty())?, count?) {
        (id, _) if id != boot_id => Some(0),
        (_, count) => Some(count),
    }
}

/// The bytes of an attempts file: `count` reboots requested under `boot_id`.
pub(crate) fn attempts_contents(boot_id: &str, count: u32) -> String {
    format!("boot-id:{boot_id}\nattempts:{count}\n")
}

/// The three files of operation `index` of kind `kind`, as host paths.
#[derive(Debug, Clone)]
pub(crate) struct OperationMarkers {
    pub complete: PathBuf,
    pub pending: PathBuf,
    pub attempts: PathBuf,
}

impl OperationMarkers {
    pub fn new(dir: &Path, kind: &str, index: usize) -> Self {
        Self {
            complete: dir.join(complete_name(kind, index)),
            pending: dir.join(pending_name(kind, index)),
            attempts: dir.join(attempts_name(kind, index)),
        }
    }

    /// The completion marker's file name.
    pub fn complete_name(&self) -> String {
        let name = self.complete.file_name().unwrap_or_default();
        name.to_string_lossy().into_owned()
    }

    /// Whether the operation is complete: its marker is a regular file that is not corrupt
    /// (SPEC §5); anything else at the path is an error.
    pub(crate) fn is_complete(&self, fs: &HostFs) -> Result<bool, HostFsError> {
        markers::is_done(fs, &self.complete)
    }

    /// Mark the operation complete.
    pub(crate) fn write_complete(&self, fs: &HostFs, now: SystemTime) -> Result<(), HostFsError> {
        fs.write_atomic(&self.complete, complete_contents(now).as_bytes())
    }

    /// The pending marker, `None` when there is none; one larger than [`MARKER_BOUND`] is
    /// malformed, not read (SPEC §5).
    pub(crate) fn read_pending(&self, fs: &HostFs) -> Result<Option<Pending>, HostFsError> {
        match fs.read(&self.pending, MARKER_BOUND) {
            Ok(bytes) => Ok(bytes.map(|bytes| Pending::parse(&bytes))),
            Err(err @ HostFsError::TooLarge { .. }) => {
                Ok(Some(Pending::Malformed(err.to_string())))
            }
            Err(err) => Err(err),
        }
    }

    /// Write the pending marker under `boot_id`, durably (before the command starts).
    pub(crate) fn write_pending(&self, fs: &HostFs, boot_id: &str) -> Result<(), HostFsError> {
        fs.write_atomic(&self.pending, Pending::contents(boot_id).as_bytes())
    }

    /// The host rebooted since the command ran: the pending marker becomes the completion
    /// marker.
    pub(crate) fn promote(&self, fs: &HostFs) -> Result<(), HostFsError> {
        fs.rename(&self.pending, &self.complete)
    }

    /// Drop the loop guard's count (once the operation completed).
    pub(crate) fn remove_attempts(&self, fs: &HostFs) -> Result<bool, HostFsError> {
        fs.remove_file(&self.attempts)
    }

    /// The attempts counted under `boot_id` (0 when there is no file), or why the file cannot
    /// be trusted: unreadable, or not a record `parse_attempts` accepts.
    pub(crate) fn read_attempts(&self, fs: &HostFs, boot_id: &str) -> Result<u32, String> {
        match fs.read(&self.attempts, MARKER_BOUND) {
            Ok(None) => Ok(0),
            Ok(Some(bytes)) => {
                let text = String::from_utf8_lossy(&bytes);
                parse_attempts(&text, boot_id).ok_or_else(|| {
                    let shown: String = text.trim().chars().take(100).collect();
                    format!("not a boot-id/attempts record: {shown:?}")
                })
            }
            Err(e) => Err(Chain(&e).to_string()),
        }
    }

    /// Record `count` reboots requested under `boot_id`.
    pub(crate) fn write_attempts(
        &self,
        fs: &HostFs,
        boot_id: &str,
        count: u32,
    ) -> Result<(), HostFsError> {
        fs.write_atomic(&self.attempts, attempts_contents(boot_id, count).as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_upstream_agents_names() {
        assert_eq!(complete_name("node_restart", 0), "node_restart_0.complete");
        assert_eq!(pending_name("node_restart", 0), "node_restart_0.pending");
        assert_eq!(attempts_name("node_restart", 0), "node_restart_0.attempts");
        assert_eq!(
            complete_name("service_restart", 12),
            "service_restart_12.complete"
        );
    }

    #[test]
    fn pending_markers_parse_to_a_boot_id_or_malformed() {
        assert_eq!(
            Pending::parse(b" boot-id: abc \n"),
            Pending::BootId("abc".into())
        );
        assert_eq!(
            Pending::parse(b"boot-id:"),
            Pending::Malformed("boot-id:".into())
        );
        assert_eq!(Pending::parse(b"\n"), Pending::Malformed(String::new()));
        assert_eq!(
            Pending::parse(b"garbage"),
            Pending::Malformed("garbage".into())
        );
        assert_eq!(
            Pending::parse(Pending::contents("b1").as_bytes()),
            Pending::BootId("b1".into())
        );
    }

    #[test]
    fn attempts_round_trip() {
        let text = attempts_contents("a", 2);
        assert_eq!(text, "boot-id:a\nattempts:2\n");
        assert_eq!(parse_attempts(&text, "a"), Some(2));
        assert_eq!(parse_attempts(&text, "b"), Some(0));
    }
}
