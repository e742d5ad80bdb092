//! SPEC §1.5: the last lines of a run that failed or was stopped. The operator keeps the last
//! 16 KiB of the container log in a `last-logs` annotation, so the run ends with what a person
//! needs from it, after `run finished`: which step or interrupt operation failed, how it ended
//! and what it accepts, its log, and what the run did not get to.

use agent_core::state::results::OperationResult;
use tracing::info;

/// What a run was about, and what it did: the summary is made from it.
#[derive(Debug, Default)]
pub(crate) struct SummaryFacts {
    /// Every step or interrupt operation the run considered, in order (the results record's).
    pub operations: Vec<OperationResult>,
    /// `(package, version)`, once known.
    pub package: Option<(String, String)>,
    /// The interrupt resource ID, for an interrupt run.
    pub resource_id: Option<String>,
    /// Every step of the stage, or operation of the interrupt, in order; `Err` says why it is
    /// not known. `None`: the run ended before it could know (bad input).
    pub planned: Option<Result<Vec<Planned>, String>>,
}

/// One step or interrupt operation the run was to consider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Planned {
    /// The step path, or the interrupt operation `<TYPE>_<i>`.
    pub id: String,
    /// The interrupt operation's command line.
    pub command: Option<String>,
}

impl Planned {
    fn shown(&self) -> String {
        match &self.command {
            Some(command) => format!("{} ({command})", self.id),
            None => self.id.clone(),
        }
    }
}

/// Log the summary of a run of `mode` that ended with `error` (`stopped`: a termination
/// signal).
pub(crate) fn log(mode: &str, error: &anyhow::Error, stopped: bool, out: &SummaryFacts) {
    let stage = mode != "interrupt";
    let (package, version) = out
        .package
        .as_ref()
        .map_or((None, None), |(p, v)| (Some(p.as_str()), Some(v.as_str())));
    let heading = if stopped {
        "summary: the run was stopped"
    } else {
        "summary: the run failed"
    };
    info!(
        mode,
        package,
        version,
        resource_id = out.resource_id.as_deref(),
        error = %format!("{error:#}"),
        "{heading}"
    );
    let failed = if stage {
        "summary: failed step"
    } else {
        "summary: failed operation"
    };
    for op in out
        .operations
        .iter()
        .filter(|op| op.succeeded == Some(false))
    {
        // A step is named by its path; an interrupt operation by `<TYPE>_<i>` and its command.
        let (step, operation, command) = if stage {
            (Some(op.operation.as_str()), None, None)
        } else {
            (None, op.id.as_deref(), Some(op.operation.as_str()))
        };
        info!(
            step,
            operation,
            command,
            exit_code = op.exit_code,
            signal = op.signal,
            accepted = op.accepted.as_deref(),
            log = op.log.as_deref(),
            "{failed}"
        );
    }
    match (&out.planned, out.operations.is_empty()) {
        (Some(Ok(planned)), _) => {
            let left = not_run(planned, &out.operations, stage);
            let list = (!left.is_empty()).then(|| {
                left.iter()
                    .map(|p| p.shown())
                    .collect::<Vec<_>>()
                    .join(", ")
            });
            if stage {
                info!(count = left.len(), steps = list, "summary: not run");
            } else {
                info!(count = left.len(), operations = list, "summary: not run");
            }
        }
        (_, true) => info!("summary: nothing ran"),
        (Some(Err(reason)), false) => {
            info!(reason = %reason, "summary: what was not run is unknown");
        }
        (None, false) => info!("summary: what was not run is unknown"),
    }
}

/// What the run did not get to: the planned steps after the last one it considered (one
/// result per step, in order), or the planned interrupt operations after the last one it
/// ran or skipped.
fn not_run<'p>(planned: &'p [Planned], done: &[OperationResult], stage: bool) -> Vec<&'p Planned> {
    let reached = if stage {
        done.len()
    } else {
        done.iter()
            .filter_map(|op| op.id.as_deref())
            .filter_map(|id| planned.iter().position(|p| p.id == id))
            .max()
            .map_or(0, |i| i + 1)
    };
    planned.iter().skip(reached).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(ids: &[&str]) -> Vec<Planned> {
        ids.iter()
            .map(|id| Planned {
                id: (*id).to_owned(),
                command: None,
            })
            .collect()
    }

    #[test]
    fn a_stage_did_not_run_the_steps_after_the_last_it_considered() {
        let steps = planned(&["a.sh", "b.sh", "c.sh"]);
        let done = [
            OperationResult::skipped("a.sh", "completion marker present"),
            OperationResult::not_started("b.sh", "missing environment variables: X"),
        ];
        assert_eq!(not_run(&steps, &done, true), [&steps[2]]);
        assert_eq!(not_run(&steps, &[], true).len(), 3);
    }

    #[test]
    fn an_interrupt_did_not_run_the_operations_after_the_last_it_reached() {
        let ops = planned(&["t_0", "t_1", "t_2"]);
        let done = [OperationResult::skipped("t_0", "completion marker present").with_id("t_0")];
        assert_eq!(not_run(&ops, &done, false), [&ops[1], &ops[2]]);
        // The loop guard refuses before an operation records anything.
        assert_eq!(not_run(&ops, &[], false).len(), 3);
    }
}
