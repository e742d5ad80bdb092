//! Every file the agent keeps on the host: markers, history, results, logs, locks, status.

pub(crate) mod flags;
pub(crate) mod history;
pub mod interrupt_markers;
pub mod locks;
pub mod logs;
pub mod markers;
pub mod metrics;
pub mod results;
pub mod status;

/// Write `value` as pretty JSON and a newline to the diagnostic `file` (SPEC §8.12; missing
/// parents created), serialized straight into the temp file through a buffer: records that
/// grow with the number of steps are never held whole in memory.
pub(crate) fn write_json_diagnostic<T: serde::Serialize>(
    fs: &crate::host::fs::HostFs,
    file: &std::path::Path,
    value: &T,
    mode: u32,
) -> Result<(), crate::host::fs::HostFsError> {
    use std::io::Write as _;
    fs.write_diagnostic_with(file, mode, true, |file| {
        let mut out = std::io::BufWriter::new(file);
        serde_json::to_writer_pretty(&mut out, value)?;
        out.write_all(b"\n")?;
        out.flush()
    })
}
