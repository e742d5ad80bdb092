//! The interrupt plugin contract: the [`InterruptKind`] trait a kind implements, the
//! [`Interrupt`] trait object the core runs (its wire codec is in
//! [`codec`](crate::plugin::codec)), and the [`InterruptContext`] through which a kind hands
//! its commands to the core.
//!
//! A kind owns its commands; the core owns markers, reboot bookkeeping, logs and execution.
//! A kind is declared once, with [`macro@crate::interrupt`] on its `impl InterruptKind` block,
//! which registers it for decoding and listing: a crate that adds a kind edits nothing else.

use std::any::TypeId;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::exec::{ExecError, Termination};
use crate::host::boot::BootIdError;
use crate::host::fs::StateFailure;

/// The error type of a kind's own failures: any error, with its source chain.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One kind of interrupt: the trait a kind implements, declared with
/// [`macro@crate::interrupt`] on the impl block:
///
/// ```
/// use agent_core::{Command, CompletionPolicy, InterruptContext, InterruptError, InterruptKind};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, Serialize, Deserialize)]
/// pub struct SysctlReload {}
///
/// #[agent_core::interrupt(type = "sysctl_reload", summary = "sysctl --system")]
/// impl InterruptKind for SysctlReload {
///     async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
///         let reload = Command::new("sysctl").arg("--system");
///         cx.operation(0, CompletionPolicy::OnSuccess, reload).await
///     }
/// }
/// ```
///
/// The struct's fields are the payload's fields; payload fields the kind does not declare are
/// reported (and ignored) by the decoder. The attribute fills in the constants from its
/// `type`, `summary` and `example`, and registers the kind as an [`Interrupt`] for decoding
/// and listing; the trait cannot be implemented without it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not declared as an interrupt kind",
    label = "not declared with #[agent_core::interrupt]",
    note = "declare the kind once, on its impl block: \
            `#[agent_core::interrupt(type = \"my_kind\", summary = \"...\")] impl InterruptKind for {Self} {{ ... }}`"
)]
pub trait InterruptKind:
    crate::__private::Declared + fmt::Debug + Send + Sync + Sized + 'static
{
    /// The wire name: `"type"` in INTERRUPT_DATA. Also names its markers (`<TYPE>_<i>.complete`).
    const TYPE: &'static str;
    /// One line for listings.
    const SUMMARY: &'static str;
    /// An example payload (compact JSON); the registry checks that it decodes to this kind and
    /// serializes back to itself.
    const EXAMPLE: &'static str;

    /// Check the decoded payload (e.g. service names). The core calls it after decoding, before
    /// a run or a plan touches anything; `run` can rely on it. Shared checks are in
    /// [`crate::plugin::validate`].
    ///
    /// # Errors
    /// A message naming the offending field and value, shown as
    /// `invalid <type> interrupt: <message>`.
    fn validate(&self) -> Result<(), BoxError> {
        Ok(())
    }

    /// Run the interrupt: build each command and hand it to `cx` as an indexed operation.
    /// Implement it as `async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError>`.
    ///
    /// # Errors
    /// The first operation that failed, a host error from the core, or the kind's own
    /// failure ([`InterruptError::kind`]).
    fn run(&self, cx: &InterruptContext)
    -> impl Future<Output = Result<(), InterruptError>> + Send;
}

/// The wire identity of a kind, available on trait objects.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not declared as an interrupt kind",
    label = "`Interrupt` is implemented by #[agent_core::interrupt]",
    note = "implement `InterruptKind` instead, with \
            `#[agent_core::interrupt(type = \"my_kind\", summary = \"...\")] impl InterruptKind for {Self} {{ ... }}`"
)]
pub trait Named {
    fn type_name(&self) -> &'static str;

    /// The Rust type behind the trait object (for the registry's self-check).
    #[doc(hidden)]
    fn kind_type_id(&self) -> TypeId;
}

impl<T: InterruptKind> Named for T {
    fn type_name(&self) -> &'static str {
        T::TYPE
    }

    fn kind_type_id(&self) -> TypeId {
        TypeId::of::<T>()
    }
}

/// A decoded interrupt of any kind: what INTERRUPT_DATA becomes, and what the core runs.
///
/// Implemented for each [`InterruptKind`] by [`macro@crate::interrupt`] (which also registers
/// it with typetag under the kind's wire name); it forwards to the kind.
#[typetag::serde(tag = "type")]
#[async_trait::async_trait]
pub trait Interrupt: Named + fmt::Debug + Send + Sync {
    /// [`InterruptKind::validate`] (named apart, so that a kind's own `validate` is not
    /// ambiguous where both traits are in scope).
    ///
    /// # Errors
    /// The kind's message.
    fn validate_payload(&self) -> Result<(), BoxError>;

    /// [`InterruptKind::run`].
    ///
    /// # Errors
    /// The kind's.
    async fn run_operations(&self, cx: &InterruptContext) -> Result<(), InterruptError>;
}

/// SPEC §9.2: payloads over 1 MiB are rejected before decoding.
pub const MAX_PAYLOAD_BYTES: usize = 1 << 20;

/// Why INTERRUPT_DATA could not be decoded (SPEC §9.2).
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("serialized interrupt must be base64-encoded JSON with a \"type\" field: {0}")]
    Malformed(String),
    /// `suggestion`: ` (did you mean "x"?)` for a registered type within two edits, or empty.
    #[error("unknown interrupt {found:?} must be one of: {known}{suggestion}")]
    UnknownType {
        found: String,
        known: String,
        suggestion: String,
    },
    /// The binary links no kind at all (typically a test binary that does not name the crate
    /// providing its kinds).
    #[error(
        "unknown interrupt {found:?}: this binary links no interrupt kinds (name the crate \
         that provides it: `use the_crate as _;`)"
    )]
    NoKinds { found: String },
    #[error(transparent)]
    Duplicate(#[from] DuplicateKind),
    /// SPEC §9.5: the kind's own example does not decode, validate or come back as itself:
    /// the kind is declared wrong, and only its payloads are refused.
    #[error(
        "interrupt kind {type_name:?} (module {module}) is broken, so its payloads are refused: \
         {problem}"
    )]
    BrokenKind {
        type_name: &'static str,
        module: &'static str,
        problem: String,
    },
    #[error("serialized interrupt is {0} bytes, over the limit of 1 MiB")]
    TooLarge(usize),
    /// The kind's [`InterruptKind::validate`] refused the payload. The message includes the
    /// kind's error, which is kept as it is in `error`; `unknown` names the payload's unknown
    /// fields (`; unknown fields: gpu (did you mean "gpus"?)`), or is empty.
    #[error("invalid {type_name} interrupt: {error}{unknown}")]
    Invalid {
        type_name: String,
        error: BoxError,
        unknown: String,
    },
}

/// Two kinds registered under one wire name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("interrupt type {type_name:?} is registered twice: by {first} and by {second}")]
pub struct DuplicateKind {
    pub type_name: &'static str,
    pub first: &'static str,
    pub second: &'static str,
}

/// The message of a panic caught in a kind's code.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
        .to_owned()
}

/// A command line an interrupt operation runs chrooted into the host, with its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub program: String,
    pub args: Vec<String>,
    /// Stop the command after this long: SIGTERM to its process group, SIGKILL after the
    /// agent's stop grace; the operation fails with `timed out after Ns`. The shorter of this
    /// and `SKYHOOK_STEP_TIMEOUT_SECONDS` applies.
    pub timeout: Option<Duration>,
}

impl Command {
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            timeout: None,
        }
    }

    #[must_use]
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Set the `timeout` field: stop the command after this long.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// As echoed on stdout before it runs: `systemctl restart kubelet`.
impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.program)?;
        self.args.iter().try_for_each(|a| write!(f, " {a}"))
    }
}

/// When an operation counts as complete (SPEC §9.3, §9.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CompletionPolicy {
    /// Complete when the command exits 0.
    OnSuccess,
    /// Complete once the host's boot ID has changed since the command was started: the
    /// command reboots the host, and the agent is usually killed before it can see a result.
    AfterReboot,
}

/// After a reboot command exited 0, how long the agent waits for the shutdown to stop it.
pub const REBOOT_WAIT: Duration = Duration::from_secs(10);

/// Why an interrupt failed.
#[derive(Debug, thiserror::Error)]
pub enum InterruptError {
    #[error("{command}: {termination}")]
    CommandFailed {
        command: String,
        termination: Termination,
    },
    #[error("{command}: timed out after {seconds}s")]
    TimedOut { command: String, seconds: String },
    #[error("reboot was enqueued but the host did not restart within {}s", REBOOT_WAIT.as_secs())]
    RebootNotObserved,
    /// The loop guard (SPEC §9.6); the message says where the count is and how to reset it.
    #[error(
        "reboot requested {count} times but the host never restarted; refusing to reboot again \
         (loop guard: SKYHOOK_REBOOT_MAX_ATTEMPTS={max}, counted in {attempts_file}). Find out \
         why the host does not restart, then allow new attempts with `agent reset {root} \
         --interrupt {resource_id} --yes` (or remove {attempts_file}), or raise \
         SKYHOOK_REBOOT_MAX_ATTEMPTS"
    )]
    RebootLoop {
        count: u32,
        max: u32,
        /// Host path of the attempts file.
        attempts_file: String,
        root: String,
        resource_id: String,
    },
    #[error("reading the host boot ID from {path}: {reason}")]
    BootId { path: String, reason: String },
    #[error("agent stopped after receiving a termination signal")]
    Stopped,
    #[error("{command}")]
    Exec {
        command: String,
        #[source]
        source: ExecError,
    },
    /// Host state could not be read or written.
    #[error(transparent)]
    State(#[from] StateFailure),
    /// The payload failed the kind's [`InterruptKind::validate`].
    /// The kind's error is part of the message and kept as it is in `error`.
    #[error("invalid {type_name} interrupt: {error}")]
    Invalid {
        type_name: &'static str,
        error: BoxError,
    },
    /// The payload could not be decoded (the operator path decodes before it runs).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A kind's own failure (e.g. a precondition it checks itself), with its source.
    #[error(transparent)]
    Kind(BoxError),
    /// SPEC §9.5: the kind returned `Ok` although one of its operations failed; the core
    /// fails the run for it. `error` is the failure the kind was handed.
    #[error("kind returned success after operation {operation} failed: {error}")]
    SwallowedFailure { operation: String, error: String },
    /// SPEC §9.5: one index, one operation per run (the index names its marker).
    #[error(
        "operation {index} ({operation}) was already run in this run: each operation of a kind \
         has an index of its own, which names its marker"
    )]
    DuplicateOperation { operation: String, index: usize },
    /// SPEC §9.5: with SKYHOOK_STEP_TIMEOUT_SECONDS set, the kind's own code (outside its
    /// operations) ran longer than that without returning or handing over an operation.
    #[error(
        "interrupt kind {type_name:?} timed out after {seconds}s in its own code (outside its \
         operations; SKYHOOK_STEP_TIMEOUT_SECONDS)"
    )]
    KindTimedOut {
        type_name: &'static str,
        seconds: String,
    },
    /// SPEC §9.5: the kind did not return within the stop grace after the agent gave up on
    /// it, and its thread did not let go of it: it is blocked in synchronous code.
    #[error(
        "interrupt kind {type_name:?} is blocked in synchronous code: it did not return within \
         SKYHOOK_AGENT_STOP_GRACE_SECONDS={grace}s after {cause}, so the agent left it"
    )]
    KindBlocked {
        type_name: &'static str,
        grace: String,
        /// `the second termination signal`, or the kind's own timeout.
        cause: String,
    },
    /// SPEC §9.5: a panic in the kind's code, caught by the core.
    #[error("interrupt kind {type_name:?} panicked: {message}")]
    Panicked {
        type_name: &'static str,
        message: String,
    },
}

impl InterruptError {
    /// Whether the kind's own code is at fault (it panicked, blocked, ran out of time,
    /// returned its own error, repeated an index, or its payload is invalid), rather than an
    /// operation, the host's state or a stop.
    pub fn is_kind_fault(&self) -> bool {
        matches!(
            self,
            Self::Invalid { .. }
                | Self::Decode(_)
                | Self::Kind(_)
                | Self::DuplicateOperation { .. }
                | Self::KindTimedOut { .. }
                | Self::KindBlocked { .. }
                | Self::Panicked { .. }
        )
    }

    /// A kind's own failure: `InterruptError::kind("no node to drain")`, or any error.
    pub fn kind(error: impl Into<BoxError>) -> Self {
        Self::Kind(error.into())
    }
}

impl From<BootIdError> for InterruptError {
    fn from(e: BootIdError) -> Self {
        Self::BootId {
            path: e.path,
            reason: e.reason,
        }
    }
}

/// The core's side of an interrupt run, handed to [`InterruptKind::run`]: the only way a kind
/// reaches markers, the reboot protocol, execution and logs.
///
/// The contract owns the type; the interrupt runner (a real run) and `agent plan` (a dry run)
/// provide what is behind it, so the kind's code is the same in both.
#[derive(Debug)]
pub struct InterruptContext {
    ops: Arc<dyn Operations>,
}

/// What stands behind an [`InterruptContext`]: a real run or a dry run.
#[async_trait::async_trait]
pub(crate) trait Operations: fmt::Debug + Send + Sync {
    async fn operation(
        &self,
        index: usize,
        policy: CompletionPolicy,
        command: Command,
    ) -> Result<(), InterruptError>;
    fn mark_done(&self) -> Result<(), InterruptError>;
    fn is_complete(&self, index: usize) -> Result<bool, InterruptError>;
    fn node_name(&self) -> Option<String>;
    fn shutdown_in_progress(&self) -> bool;
}

impl InterruptContext {
    pub(crate) fn new(ops: Arc<dyn Operations>) -> Self {
        Self { ops }
    }

    /// The node's name as the kubelet knows it, for kinds that talk to the API server:
    /// `NODE_NAME` from the agent's environment, else the host's hostname.
    pub fn node_name(&self) -> Option<String> {
        self.ops.node_name()
    }

    /// Mark a kind that runs no command as done (`<TYPE>.complete`, no index: the name the
    /// upstream agents use for `no_op`).
    ///
    /// # Errors
    /// The marker cannot be written.
    pub fn mark_done(&self) -> Result<(), InterruptError> {
        self.ops.mark_done()
    }

    /// Operation `index` of this interrupt: skipped if already complete, else `command` runs
    /// chrooted into the host under `policy`, and its marker is written once it counts as
    /// complete.
    ///
    /// # Errors
    /// The command failed, the agent was stopped, or host state could not be read or written.
    pub async fn operation(
        &self,
        index: usize,
        policy: CompletionPolicy,
        command: Command,
    ) -> Result<(), InterruptError> {
        self.ops.operation(index, policy, command).await
    }

    /// Whether operation `index` is already complete (so a kind can skip preconditions of a
    /// command that will not run again).
    ///
    /// # Errors
    /// Something other than a regular file is at the marker path.
    pub fn is_complete(&self, index: usize) -> Result<bool, InterruptError> {
        self.ops.is_complete(index)
    }

    /// True once an after-reboot operation saw the shutdown it asked for.
    pub fn shutdown_in_progress(&self) -> bool {
        self.ops.shutdown_in_progress()
    }
}

/// The field names `T`'s `Deserialize` accepts (aliases included), read from what it passes
/// to `deserialize_struct`; `None` for a kind without a fixed list (`#[serde(flatten)]`).
pub(crate) fn field_names<T: serde::de::DeserializeOwned>() -> Option<&'static [&'static str]> {
    let mut probe = FieldProbe(None);
    let _ = T::deserialize(&mut probe);
    probe.0
}

struct FieldProbe(Option<&'static [&'static str]>);

impl<'de> serde::Deserializer<'de> for &mut FieldProbe {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0 = Some(fields);
        Err(serde::de::Error::custom("fields read"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}
