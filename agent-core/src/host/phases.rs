//! Where a run's time goes, for the benchmark (docs/performance.md): when
//! `SKYHOOK_AGENT_PHASE_TIMES` names a file, the agent adds up the time of each phase of its
//! operations and writes the totals there when it exits, so that a regression names its
//! phase. Off (the default), a phase costs one relaxed atomic load and no clock read.
//!
//! The file has one line per phase, `<phase> <count> <total nanoseconds>`:
//!
//! ```text
//! spawn 100 8123456
//! record 100 912345
//! ```

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The variable naming the file the totals are written to.
pub const PHASE_TIMES_VAR: &str = "SKYHOOK_AGENT_PHASE_TIMES";

/// A part of an operation's cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Starting the process: its pipes, argv and environment, the clone and the exec,
    /// without [`Phase::Record`].
    Spawn,
    /// Writing the running process group into the lock file, and clearing it (SPEC §10).
    Record,
    /// From the exec to the main process reaped and its output relayed: the step itself.
    Wait,
    /// Reading a step's markers to decide whether it runs (SPEC §8.2).
    Decide,
    /// Writing a step's two markers (SPEC §8.7).
    Markers,
    /// Creating, closing and pruning a step's log (SPEC §8.10).
    Log,
    /// Writing the results record (SPEC §8.12), at the start and at the end of the run.
    Results,
    /// Writing the metrics files (docs/metrics.md).
    Metrics,
}

impl Phase {
    /// Every phase, in the order of the file.
    pub const ALL: [Phase; 8] = [
        Phase::Spawn,
        Phase::Record,
        Phase::Wait,
        Phase::Decide,
        Phase::Markers,
        Phase::Log,
        Phase::Results,
        Phase::Metrics,
    ];

    /// The name in the file.
    pub const fn as_str(self) -> &'static str {
        match self {
            Phase::Spawn => "spawn",
            Phase::Record => "record",
            Phase::Wait => "wait",
            Phase::Decide => "decide",
            Phase::Markers => "markers",
            Phase::Log => "log",
            Phase::Results => "results",
            Phase::Metrics => "metrics",
        }
    }
}

static ON: AtomicBool = AtomicBool::new(false);
static COUNTS: [AtomicU64; Phase::ALL.len()] = [const { AtomicU64::new(0) }; Phase::ALL.len()];
static NANOS: [AtomicU64; Phase::ALL.len()] = [const { AtomicU64::new(0) }; Phase::ALL.len()];

/// Start adding up phase times (the binary does, when [`PHASE_TIMES_VAR`] is set).
pub fn enable() {
    ON.store(true, Ordering::Relaxed);
}

/// The start of a phase: `None` (and no clock read) when timing is off.
pub fn start() -> Option<Instant> {
    ON.load(Ordering::Relaxed).then(Instant::now)
}

/// Add the time since `started` (from [`start`]) to `phase`.
pub fn end(phase: Phase, started: Option<Instant>) {
    end_without(phase, started, Duration::ZERO);
}

/// Add the time since `started` to `phase`, less `nested` (a phase timed inside it).
pub(crate) fn end_without(phase: Phase, started: Option<Instant>, nested: Duration) {
    if let Some(started) = started {
        let nanos =
            u64::try_from(started.elapsed().saturating_sub(nested).as_nanos()).unwrap_or(u64::MAX);
        COUNTS[phase as usize].fetch_add(1, Ordering::Relaxed);
        NANOS[phase as usize].fetch_add(nanos, Ordering::Relaxed);
    }
}

/// Run `f` as `phase`.
pub fn time<T>(phase: Phase, f: impl FnOnce() -> T) -> T {
    let started = start();
    let out = f();
    end(phase, started);
    out
}

/// The totals so far, as the file has them.
pub fn render() -> String {
    let mut text = String::new();
    for phase in Phase::ALL {
        let _ = writeln!(
            text,
            "{} {} {}",
            phase.as_str(),
            COUNTS[phase as usize].load(Ordering::Relaxed),
            NANOS[phase as usize].load(Ordering::Relaxed)
        );
    }
    text
}

/// Write the totals to `path` (a path of the agent's own filesystem, not under ROOT).
///
/// # Errors
/// The file cannot be written.
pub fn write(path: &Path) -> std::io::Result<()> {
    std::fs::write(path, render())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_add_up_only_once_enabled_and_render_one_line_each() {
        // Tests share the process: this is the only one that enables timing.
        assert!(start().is_none(), "timing is off by default");
        time(Phase::Markers, || ());
        assert!(render().contains("markers 0 0\n"), "{}", render());
        enable();
        for _ in 0..3 {
            time(Phase::Markers, || {
                std::thread::sleep(std::time::Duration::from_millis(1));
            });
        }
        let text = render();
        let line = text.lines().find(|l| l.starts_with("markers ")).unwrap();
        let fields: Vec<u64> = line
            .split(' ')
            .skip(1)
            .map(|f| f.parse().unwrap())
            .collect();
        assert_eq!(fields[0], 3, "{text}");
        assert!(fields[1] >= 3_000_000, "{text}");
        assert_eq!(text.lines().count(), Phase::ALL.len());
        assert_eq!(
            text.lines()
                .map(|l| l.split(' ').next().unwrap())
                .collect::<Vec<_>>(),
            [
                "spawn", "record", "wait", "decide", "markers", "log", "results", "metrics"
            ]
        );
    }
}
