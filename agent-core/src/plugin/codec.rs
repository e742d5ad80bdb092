//! The wire codec of interrupts (SPEC §9.1, §9.2): INTERRUPT_DATA to a `Box<dyn Interrupt>`
//! through the typetag registry and back, and the startup self-check that every registered
//! kind's example goes through it.

use base64::Engine as _;

use crate::plugin::contract::{
    DecodeError, DuplicateKind, Interrupt, MAX_PAYLOAD_BYTES, panic_message,
};
use crate::plugin::field_errors::{self, Layout};
use crate::plugin::registry::{self, InterruptDescriptor, check_unique_in};

/// A decoded payload, with the fields the kind does not know (ignored, worth a warning).
#[derive(Debug)]
pub struct Decoded {
    pub interrupt: Box<dyn Interrupt>,
    pub unknown_fields: Vec<String>,
    /// The payload fields the kind accepts, when it has a fixed list.
    known_fields: &'static [&'static str],
}

impl Decoded {
    /// [`Decoded::unknown_fields`] as a warning names them: `service (did you mean
    /// "services"?)` for a known field within two edits.
    pub fn unknown_field_notes(&self) -> Vec<String> {
        unknown_field_notes(&self.unknown_fields, self.known_fields)
    }
}

fn unknown_field_notes(unknown: &[String], known: &[&str]) -> Vec<String> {
    unknown
        .iter()
        .map(|f| format!("{f}{}", field_errors::suggestion(f, known.iter().copied())))
        .collect()
}

/// `; unknown fields: gpu (did you mean "gpus"?)` after an error, when there are any: a
/// misspelt field is often why a required one is missing or a check fails.
fn unknown_fields_note(unknown: &[String], known: &[&str]) -> String {
    if unknown.is_empty() {
        String::new()
    } else {
        format!(
            "; unknown fields: {}",
            unknown_field_notes(unknown, known).join(", ")
        )
    }
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
        decode(bytes, Health::Check)
    }
}

/// Whether decoding first checks the kind's own example (SPEC §9.5: the payloads of a broken
/// kind are refused). The check itself decodes the example without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    Check,
    Skip,
}

/// `from_json_bytes`, with or without the kind's health check first.
fn decode(bytes: &[u8], health: Health) -> Result<Decoded, DecodeError> {
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
            let known = registry::type_names();
            return Err(DecodeError::UnknownType {
                suggestion: field_errors::suggestion(&type_name, known.iter().copied()),
                found: type_name,
                known: known.join(", "),
            });
        }
        [one] => *one,
        [first, second, ..] => {
            return Err(DecodeError::Duplicate(DuplicateKind {
                type_name: first.type_name,
                first: first.module,
                second: second.module,
            }));
        }
    };
    if health == Health::Check {
        if let Some(problem) = broken(descriptor) {
            return Err(DecodeError::BrokenKind {
                type_name: descriptor.type_name,
                module: descriptor.module,
                problem,
            });
        }
    }
    // The names the kind's Deserialize accepts (aliases included), when it has a list:
    // known before decoding, so that a failure can name a misspelt field too.
    let known_fields = (descriptor.fields)();
    let listed_unknown: Option<Vec<String>> = known_fields.map(|known| {
        fields
            .keys()
            .filter(|k| k.as_str() != "type" && !known.contains(&k.as_str()))
            .cloned()
            .collect()
    });
    let known = known_fields.unwrap_or_default();
    let note = unknown_fields_note(listed_unknown.as_deref().unwrap_or_default(), known);
    // SPEC §9.5: errors name the field and the expected type.
    let layout = Layout::of(fields);
    let interrupt: Box<dyn Interrupt> = serde_json::from_str(&layout.text)
        .map_err(|e| DecodeError::Malformed(format!("{}{note}", layout.describe(&e))))?;
    // The kind's own code: a panic in it refuses the payload, it does not stop the agent.
    let validated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        interrupt.validate_payload()
    }))
    .unwrap_or_else(|payload| {
        Err(format!("its validate panicked: {}", panic_message(payload.as_ref())).into())
    });
    validated.map_err(|error| DecodeError::Invalid {
        type_name: type_name.clone(),
        error,
        unknown: note,
    })?;
    // No fixed field list (`#[serde(flatten)]`, a map): whatever the canonical form does not
    // carry was ignored by the kind.
    let unknown_fields = listed_unknown.unwrap_or_else(|| {
        let canonical: serde_json::Value =
            serde_json::from_str(&interrupt.to_json()).unwrap_or_default();
        fields
            .keys()
            .filter(|k| canonical.get(k.as_str()).is_none())
            .cloned()
            .collect()
    });
    Ok(Decoded {
        interrupt,
        unknown_fields,
        known_fields: known,
    })
}

/// Standard alphabet; padding optional on input (operators always pad, hand-made payloads
/// sometimes do not).
const BASE64_LENIENT: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// Why a kind fails the registry's self-check (SPEC §9.5).
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Duplicate(#[from] DuplicateKind),
    /// A kind's example does not come back as itself through the real decoder.
    #[error("interrupt kind {type_name:?} (module {module}): its example {example} {problem}")]
    Example {
        type_name: &'static str,
        module: &'static str,
        example: &'static str,
        problem: String,
    },
}

/// The full self-check: no two kinds share a name, and every kind's example decodes
/// through the real decoder to that same kind and serializes back to the same JSON (so what
/// the listing shows is what the decoder accepts). At startup only names are checked
/// ([`registry::check_unique`]): a kind that fails the rest is named by the listing and only
/// its payloads are refused (SPEC §9.5).
pub fn check() -> Result<(), RegistryError> {
    let all = registry::kinds();
    check_unique_in(all.iter().copied())?;
    all.into_iter().try_for_each(check_example)
}

/// Why kind `d` is broken (its example does not decode, validate or come back as itself), as
/// `agent interrupts list` names it; `None` for a sound kind.
pub fn broken(d: &InterruptDescriptor) -> Option<String> {
    match check_example(d) {
        Err(RegistryError::Example {
            example, problem, ..
        }) => Some(format!("its example {example} {problem}")),
        Err(e) => Some(e.to_string()),
        Ok(()) => None,
    }
}

/// The example of one kind, through the real decoder.
pub fn check_example(d: &InterruptDescriptor) -> Result<(), RegistryError> {
    let fail = |problem: String| RegistryError::Example {
        type_name: d.type_name,
        module: d.module,
        example: d.example,
        problem,
    };
    let decoded = decode(d.example.as_bytes(), Health::Skip)
        .map_err(|e| fail(format!("does not decode: {e}")))?;
    if (d.type_id)() != decoded.interrupt.kind_type_id() {
        return Err(fail(format!(
            "decodes to another Rust type (registered as {:?})",
            decoded.interrupt.type_name()
        )));
    }
    if !decoded.unknown_fields.is_empty() {
        return Err(fail(format!(
            "has fields the kind does not know: {}",
            decoded.unknown_fields.join(", ")
        )));
    }
    let again = decoded.interrupt.to_json();
    let same = serde_json::from_str::<serde_json::Value>(&again).ok()
        == serde_json::from_str::<serde_json::Value>(d.example).ok();
    if !same {
        return Err(fail(format!(
            "serializes back as {again}: make the example the kind's canonical form"
        )));
    }
    Ok(())
}
