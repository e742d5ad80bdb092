//! The kind's code on a thread of its own (SPEC §9.5): a panic in it is caught there, and the
//! agent can give up on it.
//!
//! The kind's `run` is polled by a runtime on its own thread. What it hands its context is
//! forwarded to the agent's runtime ([`Forward`]), so every command is spawned, watched, stopped
//! and recorded there, as it would be without the worker. The agent gives up on the kind on
//! the second termination signal (SPEC §10), or when its own code (outside its operations)
//! outlives SKYHOOK_STEP_TIMEOUT_SECONDS: from then on no operation starts, the kind has the
//! stop grace to return, and then its future is dropped. A kind blocked in synchronous code
//! cannot be dropped; the agent leaves its thread behind and ends the run.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

use crate::host::runtime::format_seconds;
use crate::plugin::contract::{
    Command, CompletionPolicy, Interrupt, InterruptContext, InterruptError, Operations,
    panic_message,
};

/// How long a kind's thread has to let go of the kind's future once told to: a thread that
/// polls it does so at once; one that does not is blocked.
const LET_GO: Duration = Duration::from_millis(200);

/// When the agent gives up on a kind.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// The second termination signal (SPEC §10).
    pub force: CancellationToken,
    /// SKYHOOK_AGENT_STOP_GRACE_SECONDS.
    pub grace: Duration,
    /// SKYHOOK_STEP_TIMEOUT_SECONDS: the longest the kind's own code may run between
    /// operations.
    pub timeout: Option<Duration>,
}

impl Limits {
    /// Never give up (a dry run: nothing runs, nothing to stop).
    pub(crate) fn none() -> Self {
        Self {
            force: CancellationToken::new(),
            grace: Duration::ZERO,
            timeout: None,
        }
    }
}

/// Entered by the kind's thread before the kind's code runs (in a kind's tests: the trap that
/// refuses to start processes outside the context).
pub(crate) trait Confine: Send + Sync + std::fmt::Debug {
    /// # Errors
    /// The thread could not be confined: the kind's code does not run.
    fn enter(&self) -> Result<(), String>;
}

/// Why the agent gave up on a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GaveUp {
    Stopped,
    TimedOut(Duration),
}

impl GaveUp {
    /// What an operation, or the kind's run, fails with once the agent gave up on the kind.
    fn error(self, type_name: &'static str) -> InterruptError {
        match self {
            Self::Stopped => InterruptError::Stopped,
            Self::TimedOut(t) => InterruptError::KindTimedOut {
                type_name,
                seconds: format_seconds(Some(t)),
            },
        }
    }
}

/// How a kind's `run` ended.
#[derive(Debug)]
pub(crate) enum KindEnd {
    Returned(Result<(), InterruptError>),
    /// The panic's message, with where it was raised when known.
    Panicked(String),
    /// The agent gave up on it, and its future was dropped after the grace.
    Dropped(GaveUp),
    /// The agent gave up on it, and its thread did not let go: blocked in synchronous code.
    Blocked(GaveUp),
}

impl KindEnd {
    /// The kind's result: a panic as [`InterruptError::Panicked`], a kind the agent gave up
    /// on as the stop or the timeout.
    pub(crate) fn into_result(
        self,
        type_name: &'static str,
        limits: &Limits,
    ) -> Result<(), InterruptError> {
        match self {
            Self::Returned(result) => result,
            Self::Panicked(message) => Err(InterruptError::Panicked { type_name, message }),
            Self::Dropped(why) => Err(why.error(type_name)),
            Self::Blocked(why) => Err(InterruptError::KindBlocked {
                type_name,
                grace: format_seconds(Some(limits.grace)),
                cause: match why {
                    GaveUp::Stopped => "the second termination signal".to_owned(),
                    GaveUp::TimedOut(t) => format!(
                        "its own code timed out after {}s (SKYHOOK_STEP_TIMEOUT_SECONDS)",
                        format_seconds(Some(t))
                    ),
                },
            }),
        }
    }
}

/// A copy of `interrupt` the kind's thread can own, made as the operator's bytes make one
/// (serialized, then decoded and validated).
pub(crate) fn owned_copy(
    interrupt: &(dyn Interrupt + 'static),
) -> Result<Arc<dyn Interrupt>, InterruptError> {
    let decoded = <dyn Interrupt>::from_json_bytes(interrupt.to_json().as_bytes())?;
    Ok(decoded.interrupt.into())
}

/// What the kind's thread reports.
enum Polled {
    Returned(Result<(), InterruptError>),
    Panicked(String),
    /// It let go of the kind's future when told to.
    Dropped,
}

/// Run `interrupt`'s `run` on a thread of its own, against `ops` (which run on the caller's
/// runtime), until it ends or the agent gives up on it (`limits`). Returns once no operation
/// it started is still running.
pub(crate) async fn run_kind(
    interrupt: Arc<dyn Interrupt>,
    ops: Arc<dyn Operations>,
    limits: &Limits,
    confine: Option<Arc<dyn Confine>>,
) -> KindEnd {
    let type_name = interrupt.type_name();
    let (activity, mut watching) = watch::channel(Activity {
        awaiting: 0,
        tasks: 0,
        idle_since: Instant::now(),
    });
    let activity = Arc::new(activity);
    let refused = Arc::new(std::sync::Mutex::new(None));
    let forward = Arc::new(Forward {
        inner: ops,
        type_name,
        agent: tokio::runtime::Handle::current(),
        activity: activity.clone(),
        refused: refused.clone(),
    });
    let cx = InterruptContext::new(forward);
    let let_go = CancellationToken::new();
    let (done, mut ended) = oneshot::channel();
    install_panic_hook();
    let told = let_go.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("interrupt {type_name}"))
        .spawn(move || {
            let polled = match confine.map_or(Ok(()), |c| c.enter()) {
                Ok(()) => poll_kind(&*interrupt, &cx, &told),
                Err(e) => Polled::Returned(Err(InterruptError::kind(format!(
                    "confining the thread of interrupt kind {type_name:?}: {e}"
                )))),
            };
            // The agent may have stopped waiting; nothing to tell then.
            let _ = done.send(polled);
        });
    if let Err(e) = spawned {
        return KindEnd::Returned(Err(InterruptError::kind(format!(
            "starting a thread for interrupt kind {type_name:?}: {e}"
        ))));
    }

    let end = match watch_kind(&mut ended, &mut watching, limits).await {
        Ok(polled) => from_polled(polled, None),
        Err(why) => {
            // From now on no operation starts.
            *refused
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why);
            if let Some(polled) = grace(&mut ended, &mut watching, limits.grace).await {
                from_polled(polled, Some(why))
            } else {
                let_go.cancel();
                if let Ok(polled) = tokio::time::timeout(LET_GO, &mut ended).await {
                    from_polled(polled, Some(why))
                } else {
                    error!(
                        kind = type_name,
                        "the interrupt kind is blocked in synchronous code; leaving its thread \
                         behind"
                    );
                    KindEnd::Blocked(why)
                }
            }
        }
    };
    // Operations the kind started and stopped waiting for are judged and recorded first.
    let _ = watching.wait_for(|a| a.tasks == 0).await;
    end
}

fn from_polled(polled: Result<Polled, oneshot::error::RecvError>, why: Option<GaveUp>) -> KindEnd {
    match (polled, why) {
        (Ok(Polled::Returned(result)), Some(GaveUp::TimedOut(t))) if result.is_ok() => {
            // It finished within the grace, but it had run out of time: a timed-out command
            // fails too, whatever it would have done.
            KindEnd::Dropped(GaveUp::TimedOut(t))
        }
        (Ok(Polled::Returned(result)), _) => KindEnd::Returned(result),
        (Ok(Polled::Panicked(message)), _) => KindEnd::Panicked(message),
        (Ok(Polled::Dropped), Some(why)) => KindEnd::Dropped(why),
        (Ok(Polled::Dropped), None) | (Err(_), _) => {
            KindEnd::Panicked("its thread ended without a result".to_owned())
        }
    }
}

/// Wait for the kind to end, or for a reason to give up on it.
async fn watch_kind(
    ended: &mut oneshot::Receiver<Polled>,
    watching: &mut watch::Receiver<Activity>,
    limits: &Limits,
) -> Result<Result<Polled, oneshot::error::RecvError>, GaveUp> {
    loop {
        // SPEC §9.5: the kind's own code, between its operations, is bounded by the timeout.
        let idle_deadline = limits.timeout.and_then(|t| {
            let a = watching.borrow_and_update();
            (a.awaiting == 0).then(|| (a.idle_since + t, t))
        });
        let idle = async {
            match idle_deadline {
                Some((at, _)) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            polled = &mut *ended => return Ok(polled),
            () = limits.force.cancelled() => return Err(GaveUp::Stopped),
            () = idle => {
                let t = idle_deadline.map_or(Duration::ZERO, |(_, t)| t);
                warn!(timeout_s = t.as_secs(), "the interrupt kind's own code ran out of time");
                return Err(GaveUp::TimedOut(t));
            }
            _ = watching.changed() => {}
        }
    }
}

/// The kind's grace once the agent gave up on it: `grace` to return, and for as long as it
/// waits for an operation (which the agent is stopping: SIGTERM, then SIGKILL after the same
/// grace). `None` when it did not return.
async fn grace(
    ended: &mut oneshot::Receiver<Polled>,
    watching: &mut watch::Receiver<Activity>,
    grace: Duration,
) -> Option<Result<Polled, oneshot::error::RecvError>> {
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        let awaiting = watching.borrow_and_update().awaiting;
        tokio::select! {
            biased;
            polled = &mut *ended => return Some(polled),
            _ = watching.changed() => {}
            () = tokio::time::sleep_until(deadline), if awaiting == 0 => return None,
        }
    }
}

/// On the kind's thread: a runtime of its own (its timers and tasks), and the panic caught.
fn poll_kind(
    interrupt: &dyn Interrupt,
    cx: &InterruptContext,
    let_go: &CancellationToken,
) -> Polled {
    KIND_THREAD.with(|k| k.set(true));
    let polled = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| InterruptError::kind(format!("starting the kind's runtime: {e}")));
        let rt = match rt {
            Ok(rt) => rt,
            Err(e) => return Polled::Returned(Err(e)),
        };
        rt.block_on(async {
            tokio::select! {
                biased;
                result = interrupt.run_operations(cx) => Polled::Returned(result),
                // Dropping the kind's future here drops whatever it was waiting for.
                () = let_go.cancelled() => Polled::Dropped,
            }
        })
    }));
    match polled {
        Ok(polled) => polled,
        Err(payload) => {
            let location = PANIC_LOCATION.with(RefCell::take);
            let message = panic_message(payload.as_ref());
            Polled::Panicked(match location {
                Some(at) => format!("{message} (at {at})"),
                None => message,
            })
        }
    }
}

thread_local! {
    /// Set on a kind's thread: its panics are reported by the run, not by the hook.
    static KIND_THREAD: Cell<bool> = const { Cell::new(false) };
    static PANIC_LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A panic on a kind's thread is part of the run's result (`interrupt kind "x" panicked: ...`),
/// on the agent's log like any failure; the default hook's lines would come first, unformatted.
/// Elsewhere the previous hook runs as before.
fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
            if KIND_THREAD.with(Cell::get) {
                let at = info.location().map(ToString::to_string);
                PANIC_LOCATION.with(|l| *l.borrow_mut() = at);
            } else {
                previous(info);
            }
        }));
    });
}

/// What the kind is doing, as the agent watches it.
#[derive(Debug, Clone, Copy)]
struct Activity {
    /// Operations the kind is waiting for.
    awaiting: usize,
    /// Operations still running on the agent's runtime (also ones the kind stopped waiting
    /// for).
    tasks: usize,
    /// Since when the kind has been in its own code (when `awaiting` is 0).
    idle_since: Instant,
}

/// The context's operations as the kind's thread sees them: commands go to the agent's
/// runtime; the rest is synchronous and answered where it is asked.
#[derive(Debug)]
struct Forward {
    inner: Arc<dyn Operations>,
    type_name: &'static str,
    agent: tokio::runtime::Handle,
    activity: Arc<watch::Sender<Activity>>,
    /// Set once the agent gave up on the kind: no operation starts after that.
    refused: Arc<std::sync::Mutex<Option<GaveUp>>>,
}

/// Counts one awaited operation while it lives; when the last one ends, the kind is back in
/// its own code.
struct Awaiting<'a>(&'a watch::Sender<Activity>);

impl Drop for Awaiting<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|a| {
            a.awaiting -= 1;
            a.idle_since = Instant::now();
        });
    }
}

/// Counts one operation running on the agent's runtime while it lives.
struct Task(Arc<watch::Sender<Activity>>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.send_modify(|a| a.tasks -= 1);
    }
}

#[async_trait::async_trait]
impl Operations for Forward {
    async fn operation(
        &self,
        index: usize,
        policy: CompletionPolicy,
        command: Command,
    ) -> Result<(), InterruptError> {
        let refused = *self
            .refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(why) = refused {
            return Err(why.error(self.type_name));
        }
        self.activity.send_modify(|a| {
            a.awaiting += 1;
            a.tasks += 1;
        });
        let _awaiting = Awaiting(&self.activity);
        let task = Task(self.activity.clone());
        let inner = self.inner.clone();
        let running = self.agent.spawn(async move {
            let _task = task;
            inner.operation(index, policy, command).await
        });
        match running.await {
            Ok(result) => result,
            // The agent's runtime is shutting down: it is stopping.
            Err(e) if e.is_cancelled() => Err(InterruptError::Stopped),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    fn mark_done(&self) -> Result<(), InterruptError> {
        self.inner.mark_done()
    }

    fn is_complete(&self, index: usize) -> Result<bool, InterruptError> {
        self.inner.is_complete(index)
    }

    fn node_name(&self) -> Option<String> {
        self.inner.node_name()
    }

    fn shutdown_in_progress(&self) -> bool {
        self.inner.shutdown_in_progress()
    }
}
