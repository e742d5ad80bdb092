//! After every operator run: the package's node metrics (docs/metrics.md), written
//! beside the results record. A diagnostic: whatever goes wrong is a warning with its cause,
//! and the run's exit code stays the one its steps decided.

use std::time::SystemTime;

use agent_core::host::errors::Chain;
use agent_core::host::fs::HostFs;
use agent_core::host::runtime::Runtime;
use agent_core::state::metrics::{self, FinishedRun, InterruptTally, ResultLabel};
use agent_core::state::results::ResultsRecord;
use agent_core::state::status;
use tracing::{debug, warn};

/// Fold the finished run, as its completed results record says it ended, into
/// `STATE/metrics/<pkg>.prom` (and the copy in `SKYHOOK_AGENT_METRICS_DIR`), unless
/// `SKYHOOK_AGENT_WRITE_METRICS=false`.
pub(crate) fn save(
    fs: &HostFs,
    rt: &Runtime,
    record: &ResultsRecord,
    started: SystemTime,
    interrupt: Option<(&str, InterruptTally)>,
) {
    if !rt.write_metrics {
        return;
    }
    let result = ResultLabel::of(record.result);
    let run = FinishedRun {
        record,
        result,
        started,
        finished: SystemTime::now(),
        interrupt,
        // After the results record: the verdict `agent status` gives once this run exits.
        standing: Some(status::standing(fs, rt, record)),
    };
    let written = metrics::record(
        fs,
        &rt.state_dir,
        rt.metrics_dir.as_deref(),
        &run,
        (crate::version::version(), crate::version::GIT_SHA),
    );
    if let Some(problem) = &written.sidecar_problem {
        warn!(
            file = %metrics::sidecar_path(&rt.state_dir, &record.package).display(),
            error = %problem,
            "could not read the previous metrics; starting them afresh"
        );
    }
    for (file, e) in &written.failures {
        warn!(file = %file.display(), error = %Chain(e), "could not write the metrics file");
    }
    for file in &written.files {
        debug!(file = %file.display(), "metrics written");
    }
}
