//! The status of interrupt resources: their markers (read through
//! [`interrupt_markers`](crate::state::interrupt_markers)), the pending reboot in words, the
//! loop guard's verdict.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{Found, InterruptOperation, InterruptStatus, Note, Verdict, chain, list};
use crate::host::fs::{MARKER_BOUND, is_temp_name};
use crate::state::interrupt_markers::{self, ATTEMPTS, COMPLETE, PENDING, Pending};

impl Found<'_> {
    /// The markers of interrupt resource `rid` in `dir`, judged by the boot ID and the loop
    /// guard's limit, and who holds its lock.
    pub(super) fn interrupt_status(
        &self,
        dir: &Path,
        rid: &str,
        note: &mut Note<'_>,
    ) -> InterruptStatus {
        let Found {
            fs, rt, boot_id, ..
        } = *self;
        let max_attempts = rt.reboot_max_attempts;
        // Keyed by (type, index, name) so `kind_2` sorts before `kind_10`.
        let mut stems: BTreeMap<(String, usize, String), BTreeSet<String>> = BTreeMap::new();
        for name in list(fs, dir, note) {
            let split = interrupt_markers::split_name(&name).filter(|_| !is_temp_name(&name));
            let Some((stem, ext)) = split else {
                continue;
            };
            stems
                .entry(operation_order(stem))
                .or_default()
                .insert(ext.to_owned());
        }
        // `Err` carries the reason a marker that exists cannot be read.
        let read =
            |stem: &str, ext: &str, note: &mut Note<'_>| -> Result<Option<Vec<u8>>, String> {
                let path = dir.join(format!("{stem}.{ext}"));
                fs.read(&path, MARKER_BOUND).map_err(|e| {
                    let reason = chain(&e);
                    note(&format!("interrupt marker {}", path.display()), &reason);
                    reason
                })
            };
        let mut operations = Vec::new();
        for ((_, _, stem), exts) in stems {
            let attempts = exts
                .contains(ATTEMPTS)
                .then(|| read(&stem, ATTEMPTS, note))
                .and_then(|result| result.ok().flatten())
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .and_then(|text| interrupt_markers::parse_attempts(&text, boot_id?));
            let op = if exts.contains(COMPLETE) {
                let (state, detail) = match read(&stem, COMPLETE, note) {
                    Err(reason) => (
                        "unreadable",
                        format!("the completion marker cannot be read: {reason}"),
                    ),
                    Ok(content) => {
                        match interrupt_markers::parse_complete(&content.unwrap_or_default()) {
                            Some(time) => ("complete", time),
                            None => (
                                "unknown",
                                "corrupt completion marker: the next run does the operation again"
                                    .to_owned(),
                            ),
                        }
                    }
                };
                InterruptOperation {
                    operation: stem,
                    state: state.into(),
                    detail,
                    ..InterruptOperation::default()
                }
            } else if exts.contains(PENDING) {
                let (state, pending, detail) = match read(&stem, PENDING, note) {
                    Err(reason) => (
                        "unreadable",
                        None,
                        format!("the pending marker cannot be read: {reason}"),
                    ),
                    Ok(content) => {
                        let (pending, text) = match Pending::parse(&content.unwrap_or_default()) {
                            Pending::BootId(b) => (Some(b), String::new()),
                            Pending::Malformed(text) => (None, text),
                        };
                        let detail = pending_words(
                            pending.as_deref(),
                            &text,
                            boot_id,
                            attempts,
                            max_attempts,
                        );
                        ("pending", pending, detail)
                    }
                };
                let rebooted_since = pending.is_some() && pending.as_deref() != boot_id;
                InterruptOperation {
                    operation: stem,
                    state: state.into(),
                    detail,
                    loop_guard_refuses: !rebooted_since && attempts.unwrap_or(0) >= max_attempts,
                    pending_boot_id: pending,
                    attempts,
                }
            } else {
                InterruptOperation {
                    operation: stem,
                    state: "pending".into(),
                    detail: format!(
                        "reboot attempts recorded ({} of {max_attempts} in this boot), no pending \
                         marker",
                        attempts.unwrap_or(0)
                    ),
                    loop_guard_refuses: attempts.unwrap_or(0) >= max_attempts,
                    attempts,
                    ..InterruptOperation::default()
                }
            };
            operations.push(op);
        }
        let lock = self.interrupt_lock(rid, note);
        let status = if lock.is_some() {
            Verdict::Running
        } else if operations.iter().any(operation_failed) {
            Verdict::Error
        } else if operations.iter().any(|op| op.state == "pending") {
            Verdict::RebootPending
        } else {
            Verdict::Done
        };
        InterruptStatus {
            resource_id: rid.to_owned(),
            status,
            lock,
            operations,
        }
    }
}

/// A marker that cannot be trusted, or a pending reboot the loop guard will refuse to repeat.
pub(super) fn operation_failed(op: &InterruptOperation) -> bool {
    match op.state.as_str() {
        "complete" => false,
        "pending" => op.loop_guard_refuses,
        _ => true,
    }
}

/// A pending reboot in words: which boot asked for it, whether the host has booted since,
/// and how many of the loop guard's attempts are spent.
pub(super) fn pending_words(
    pending: Option<&str>,
    content: &str,
    current: Option<&str>,
    attempts: Option<u32>,
    max: u32,
) -> String {
    let spent = attempts.unwrap_or(0);
    match (pending, current) {
        (Some(p), Some(now)) if p != now => format!(
            "reboot requested in boot {}; the host has booted since (now boot {}): the next \
             interrupt run marks it complete",
            short_id(p),
            short_id(now)
        ),
        (Some(p), Some(_)) if spent >= max => format!(
            "reboot requested in boot {}, waiting for a new boot (attempts {spent} of {max}): \
             the loop guard refuses another reboot in this boot",
            short_id(p)
        ),
        (Some(p), Some(_)) => format!(
            "reboot requested in boot {}, waiting for a new boot (attempts {spent} of {max})",
            short_id(p)
        ),
        (Some(p), None) => format!(
            "reboot requested in boot {}; the current boot ID cannot be read",
            short_id(p)
        ),
        (None, _) => {
            format!("malformed pending marker {content:?}: the next run replaces it and reboots")
        }
    }
}

/// A boot ID short enough to read (`3f9c1a2b…`); the full one is in `--format json`.
pub(super) fn short_id(id: &str) -> String {
    match id.char_indices().nth(8) {
        Some((i, _)) => format!("{}…", &id[..i]),
        None => id.to_owned(),
    }
}

/// `(type, index, stem)` of `<TYPE>_<i>`; `(stem, 0, stem)` for an unindexed marker.
pub(super) fn operation_order(stem: &str) -> (String, usize, String) {
    match stem.rsplit_once('_') {
        Some((kind, i)) if !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) => (
            kind.to_owned(),
            i.parse().unwrap_or(usize::MAX),
            stem.to_owned(),
        ),
        _ => (stem.to_owned(), 0, stem.to_owned()),
    }
}
