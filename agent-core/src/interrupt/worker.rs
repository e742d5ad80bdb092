//! The kind's code on a thread of its own (SPEC §9.5): a panic in it is caught there, and the
//! agent's runtime never runs code it does not own.
//!
//! The kind's `run` is polled by a runtime on its own thread. What it hands its context is
//! forwarded to the agent's runtime ([`Forward`]), so every command is spawned, watched, stopped
//! and recorded there, as it would be without the worker.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::sync::{Arc, Once};

use tokio::sync::oneshot;

use crate::plugin::contract::{
    Command, CompletionPolicy, Interrupt, InterruptContext, InterruptError, Operations,
};

/// How a kind's `run` ended.
#[derive(Debug)]
pub(crate) enum KindEnd {
    Returned(Result<(), InterruptError>),
    /// The panic's message, with where it was raised when known.
    Panicked(String),
}

impl KindEnd {
    /// The kind's result, a panic as [`InterruptError::Panicked`].
    pub(crate) fn into_result(self, type_name: &'static str) -> Result<(), InterruptError> {
        match self {
            Self::Returned(result) => result,
            Self::Panicked(message) => Err(InterruptError::Panicked { type_name, message }),
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

/// Run `interrupt`'s `run` on a thread of its own, against `ops` (which run on the caller's
/// runtime), and wait for it to end.
pub(crate) async fn run_kind(interrupt: Arc<dyn Interrupt>, ops: Arc<dyn Operations>) -> KindEnd {
    let type_name = interrupt.type_name();
    let forward = Arc::new(Forward {
        inner: ops,
        agent: tokio::runtime::Handle::current(),
    });
    let cx = InterruptContext::new(forward);
    let (done, ended) = oneshot::channel();
    install_panic_hook();
    let spawned = std::thread::Builder::new()
        .name(format!("interrupt {type_name}"))
        .spawn(move || {
            let end = poll_kind(&*interrupt, &cx);
            // The agent may have stopped waiting; nothing to tell then.
            let _ = done.send(end);
        });
    if let Err(e) = spawned {
        return KindEnd::Returned(Err(InterruptError::kind(format!(
            "starting a thread for interrupt kind {type_name:?}: {e}"
        ))));
    }
    ended
        .await
        .unwrap_or_else(|_| KindEnd::Panicked("its thread ended without a result".to_owned()))
}

/// On the kind's thread: a runtime of its own (its timers and tasks), and the panic caught.
fn poll_kind(interrupt: &dyn Interrupt, cx: &InterruptContext) -> KindEnd {
    KIND_THREAD.with(|k| k.set(true));
    let polled = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| InterruptError::kind(format!("starting the kind's runtime: {e}")))?;
        rt.block_on(interrupt.run_operations(cx))
    }));
    match polled {
        Ok(result) => KindEnd::Returned(result),
        Err(payload) => {
            let location = PANIC_LOCATION.with(RefCell::take);
            let message = panic_message(payload.as_ref());
            KindEnd::Panicked(match location {
                Some(at) => format!("{message} (at {at})"),
                None => message,
            })
        }
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
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

/// The context's operations as the kind's thread sees them: commands go to the agent's
/// runtime; the rest is synchronous and answered where it is asked.
#[derive(Debug)]
struct Forward {
    inner: Arc<dyn Operations>,
    agent: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl Operations for Forward {
    async fn operation(
        &self,
        index: usize,
        policy: CompletionPolicy,
        command: Command,
    ) -> Result<(), InterruptError> {
        let inner = self.inner.clone();
        let task = self
            .agent
            .spawn(async move { inner.operation(index, policy, command).await });
        match task.await {
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
