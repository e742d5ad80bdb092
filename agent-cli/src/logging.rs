//! The agent's diagnostics on stderr (SPEC §1.5, §2): logfmt or JSON lines, at the level
//! `-q`/`-v` ask for, else SKYHOOK_AGENT_LOG's.

use agent_core::exec::Output;
use agent_core::host::runtime::{LogFormat, Runtime};
use tracing::warn;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::cli::Verbosity;
use crate::logfmt;

/// Install the process's subscriber (once; later calls keep the first).
pub fn init(rt: &Runtime, verbosity: Verbosity) {
    let wanted = verbosity.filter().unwrap_or(&rt.log_filter);
    // An invalid filter is an invalid setting like any other: warned about, then the default.
    // `target=level` directives and a bare level, comma-separated (RUST_LOG's common form;
    // no span or field filters, which would link a regex engine into the node image).
    let (filter, bad_filter) = match wanted.parse::<Targets>() {
        Ok(filter) => (filter, None),
        Err(e) => (Targets::new().with_default(LevelFilter::INFO), Some(e)),
    };
    // SPEC §10: a closed stderr must neither panic nor stop the run; the writer drops what
    // it cannot write, and the subscriber must not report that on the same stderr.
    let output = Output::process();
    let builder = tracing_subscriber::fmt()
        .with_writer(move || output.log_writer())
        .log_internal_errors(false)
        .with_ansi(false)
        .with_target(false)
        // The filter is `filter`, layered on below: the builder lets everything through.
        .with_max_level(LevelFilter::TRACE);
    let _ = match rt.log_format {
        LogFormat::Text => builder
            .event_format(logfmt::Logfmt)
            .finish()
            .with(filter)
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .finish()
            .with(filter)
            .try_init(),
    };
    if let Some(e) = bad_filter {
        warn!(
            "environment variable SKYHOOK_AGENT_LOG={:?} is not a valid filter ({e}); using info",
            rt.log_filter
        );
    }
}
