//! The interrupt plugin contract: the [`InterruptKind`] trait a kind implements, the
//! [`Interrupt`] trait object the core runs, its wire codec, and the [`InterruptContext`]
//! through which a kind hands its commands to the core.
//!
//! A kind owns its commands; the core owns markers, reboot bookkeeping, logs and execution.
//! A kind is declared once, with [`macro@crate::interrupt`] on its `impl InterruptKind` block,
//! which registers it for decoding and listing: a crate that adds a kind edits nothing else.

use std::any::TypeId;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use base64::Engine as _;

pub use crate::interrupt::runner::{InterruptContext, InterruptError};
use crate::plugin::registry;

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
    #[error("unknown interrupt {found:?} must be one of: {known}")]
    UnknownType { found: String, known: String },
    /// The binary links no kind at all (typically a test binary that does not name the crate
    /// providing its kinds).
    #[error(
        "unknown interrupt {found:?}: this binary links no interrupt kinds (name the crate \
         that provides it: `use the_crate as _;`)"
    )]
    NoKinds { found: String },
    #[error(transparent)]
    Duplicate(#[from] registry::DuplicateKind),
    #[error("serialized interrupt is {0} bytes, over the limit of 1 MiB")]
    TooLarge(usize),
    /// The kind's [`InterruptKind::validate`] refused the payload. The message includes the
    /// kind's error, which is kept as it is in `error`.
    #[error("invalid {type_name} interrupt: {error}")]
    Invalid { type_name: String, error: BoxError },
}

/// A decoded payload, with the fields the kind does not know (ignored, worth a warning).
#[derive(Debug)]
pub struct Decoded {
    pub interrupt: Box<dyn Interrupt>,
    pub unknown_fields: Vec<String>,
}

impl dyn Interrupt {
    /// Canonical compact JSON (`{"type":...,...}`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("interrupt kinds serialize to JSON")
    }

    /// INTERRUPT_DATA: standard base64 of the canonical JSON (`to_json`).
    pub fn to_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.to_json())
    }

    /// Decode INTERRUPT_DATA.
    ///
    /// # Errors
    /// The SPEC §9.2 messages.
    pub fn from_base64(data: &str) -> Result<Decoded, DecodeError> {
        let data = data.trim();
        if data.len() > MAX_PAYLOAD_BYTES * 4 / 3 + 4 {
            return Err(DecodeError::TooLarge(data.len() / 4 * 3));
        }
        let bytes = BASE64_LENIENT
            .decode(data)
            .map_err(|e| DecodeError::Malformed(format!("invalid base64: {e}")))?;
        Self::from_json_bytes(&bytes)
    }

    /// Decode the JSON form (as `agent interrupts encode` takes it).
    ///
    /// # Errors
    /// The SPEC §9.2 messages.
    pub fn from_json_bytes(bytes: &[u8]) -> Result<Decoded, DecodeError> {
        if bytes.len() > MAX_PAYLOAD_BYTES {
            return Err(DecodeError::TooLarge(bytes.len()));
        }
        let value: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| DecodeError::Malformed(format!("invalid JSON: {e}")))?;
        let serde_json::Value::Object(fields) = &value else {
            return Err(DecodeError::Malformed("not a JSON object".into()));
        };
        let type_name = match fields.get("type") {
            Some(serde_json::Value::String(t)) => t.clone(),
            Some(_) => return Err(DecodeError::Malformed("\"type\" must be a string".into())),
            None => return Err(DecodeError::Malformed("missing \"type\"".into())),
        };
        let descriptor = match registry::find_all(&type_name).as_slice() {
            [] if registry::kinds().is_empty() => {
                return Err(DecodeError::NoKinds { found: type_name });
            }
            [] => {
                return Err(DecodeError::UnknownType {
                    found: type_name,
                    known: registry::type_names().join(", "),
                });
            }
            [one] => *one,
            [first, second, ..] => {
                return Err(DecodeError::Duplicate(registry::DuplicateKind {
                    type_name: first.type_name,
                    first: first.module,
                    second: second.module,
                }));
            }
        };
        let interrupt: Box<dyn Interrupt> = serde_json::from_value(value.clone())
            .map_err(|e| DecodeError::Malformed(e.to_string()))?;
        interrupt
            .validate_payload()
            .map_err(|error| DecodeError::Invalid {
                type_name: type_name.clone(),
                error,
            })?;
        let unknown_fields = if let Some(known) = (descriptor.fields)() {
            // The names the kind's Deserialize accepts (aliases included).
            fields
                .keys()
                .filter(|k| k.as_str() != "type" && !known.contains(&k.as_str()))
                .cloned()
                .collect()
        } else {
            // No fixed field list (`#[serde(flatten)]`, a map): whatever the canonical form
            // does not carry was ignored by the kind.
            let canonical: serde_json::Value =
                serde_json::from_str(&interrupt.to_json()).unwrap_or_default();
            fields
                .keys()
                .filter(|k| canonical.get(k.as_str()).is_none())
                .cloned()
                .collect()
        };
        Ok(Decoded {
            interrupt,
            unknown_fields,
        })
    }
}

/// Standard alphabet; padding optional on input (operators always pad, hand-made payloads
/// sometimes do not).
const BASE64_LENIENT: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

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
        for a in &self.args {
            write!(f, " {a}")?;
        }
        Ok(())
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
