//! The document pass without a tree of the whole document: the top-level fields are small and
//! kept as values, but `modes` is read one step object at a time, each checked and turned into
//! a [`Step`] as soon as it is parsed and then dropped. The memory of loading a config is then
//! the config itself plus one step's parse tree, whatever the number of steps.
//!
//! The findings are those of the tree-based pass, in the same order: each key of `modes`
//! collects its findings apart, in document order, and they are put in the canonical order
//! (known modes first, then unknown keys) once the document is read. A key given twice keeps
//! its last value, as a `serde_json::Value` object would.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize as _;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::Finding;
use crate::package::step::{Mode, Step};

/// The rules the pass applies as it reads `modes` (the validator's): a fresh copy of the
/// prototype checks each key, and its findings are kept with the key.
pub(super) trait ModeChecks: Clone {
    /// The key is not a stage mode.
    fn unknown_mode(&mut self, path: &str, key: &str);
    /// The key's value is not an array.
    fn not_an_array(&mut self, value: &Value, path: &str);
    /// Check one step entry: the step if it is valid, and its `path` if that is well-formed.
    fn step(&mut self, item: &Value, path: &str, mode: Mode) -> (Option<Step>, Option<String>);
    fn into_findings(self) -> Vec<Finding>;
}

/// A value that is either the shape the pass streams (an object, an array) or anything else,
/// kept whole so that the finding can describe it.
pub(super) enum Streamed<T> {
    Parsed(T),
    Other(Value),
}

/// The document: every top-level field but `modes`, and `modes` if present (the last one).
pub(super) struct Document {
    pub(super) top: Map<String, Value>,
    pub(super) modes: Option<Streamed<Modes>>,
}

/// What one key of `modes` gave.
pub(super) struct ModeKey {
    pub(super) mode: Option<Mode>,
    pub(super) findings: Vec<Finding>,
    /// `None` for an unknown mode or a value that is not an array.
    pub(super) steps: Option<ModeSteps>,
}

/// The steps of one mode.
pub(super) struct ModeSteps {
    /// Every step entry, valid or not.
    pub(super) count: usize,
    /// The steps that validated; `complete` is false if any did not.
    pub(super) steps: Vec<Step>,
    pub(super) complete: bool,
    /// `(index, step path)` of every step whose `path` is well-formed (its JSON path is
    /// made from the index when a finding needs it: [`step_path_field`]).
    pub(super) paths: Vec<(usize, String)>,
}

/// The keys of `modes`, in the order their findings are reported: known modes in canonical
/// order, then unknown keys by name.
pub(super) type Modes = BTreeMap<(bool, Option<Mode>, String), ModeKey>;

/// Parse the document `de` reads as a whole (trailing characters are an error, as for
/// `serde_json::from_str`), from a string or through a reader. The error is serde_json's, for
/// the caller's "not valid JSON" finding. Nesting is limited by serde_json to 128 levels, as
/// for a tree. Every step is checked; only those of `keep` (every mode when `None`) are kept.
/// Each key of `modes` is checked by a fresh copy of `checks`, its findings kept with the key.
pub(super) fn parse<'de, R: serde_json::de::Read<'de>, C: ModeChecks>(
    de: &mut serde_json::Deserializer<R>,
    checks: &C,
    keep: Option<Mode>,
) -> Result<Streamed<Document>, serde_json::Error> {
    let doc = Top(ModesSeed { checks, keep }).deserialize(&mut *de)?;
    de.end()?;
    Ok(doc)
}

/// The `visit_*` methods of every value the pass does not stream: the value itself.
macro_rules! other_values {
    () => {
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Ok(Streamed::Other(Value::Bool(v)))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Streamed::Other(Value::from(v)))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Streamed::Other(Value::from(v)))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Streamed::Other(Value::from(v)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Streamed::Other(Value::String(v.to_owned())))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Streamed::Other(Value::Null))
        }
    };
}

/// A visitor used as its own seed, for any JSON value.
macro_rules! visited_seed {
    ($t:ty) => {
        impl<'de, C: ModeChecks> DeserializeSeed<'de> for $t {
            type Value = <Self as Visitor<'de>>::Value;

            fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_any(self)
            }
        }
    };
}

/// An array where an object is streamed, kept whole.
fn other_seq<'de, T, A: SeqAccess<'de>>(seq: A) -> Result<Streamed<T>, A::Error> {
    Value::deserialize(SeqAccessDeserializer::new(seq)).map(Streamed::Other)
}

/// The top-level object: `modes` is read with the seed it holds.
struct Top<'a, C>(ModesSeed<'a, C>);

visited_seed!(Top<'_, C>);

impl<'de, C: ModeChecks> Visitor<'de> for Top<'_, C> {
    type Value = Streamed<Document>;

    other_values!();

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        other_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut top = Map::new();
        let mut modes = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "modes" {
                modes = Some(map.next_value_seed(self.0)?);
            } else {
                let value: Value = map.next_value()?;
                top.insert(key, value);
            }
        }
        Ok(Streamed::Parsed(Document { top, modes }))
    }
}

/// The `modes` object.
struct ModesSeed<'a, C> {
    checks: &'a C,
    keep: Option<Mode>,
}

// Not derived: a derive would ask `C: Copy` of the validator it only borrows.
impl<C> Clone for ModesSeed<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<C> Copy for ModesSeed<'_, C> {}

visited_seed!(ModesSeed<'_, C>);

impl<'de, C: ModeChecks> Visitor<'de> for ModesSeed<'_, C> {
    type Value = Streamed<Modes>;

    other_values!();

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        other_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut modes = Modes::new();
        while let Some(key) = map.next_key::<String>()? {
            let mode = key.parse::<Mode>().ok();
            let mode_path = field("modes", &key);
            let mut checks = self.checks.clone();
            let steps = match mode {
                None => {
                    // Parsed whole, as any value of the document is (nesting limit included).
                    let _: Value = map.next_value()?;
                    checks.unknown_mode(&mode_path, &key);
                    None
                }
                Some(mode) => {
                    let seed = StepsSeed {
                        checks: &mut checks,
                        mode,
                        mode_path: &mode_path,
                        keep: self.keep.is_none_or(|keep| keep == mode),
                    };
                    match map.next_value_seed(seed)? {
                        Streamed::Parsed(steps) => Some(steps),
                        Streamed::Other(value) => {
                            checks.not_an_array(&value, &mode_path);
                            None
                        }
                    }
                }
            };
            let entry = ModeKey {
                mode,
                findings: checks.into_findings(),
                steps,
            };
            modes.insert((mode.is_none(), mode, key), entry);
        }
        Ok(Streamed::Parsed(modes))
    }
}

/// The JSON path of the `path` field of step `i` of `mode` (`modes.apply[3].path`).
pub(super) fn step_path_field(mode: Mode, i: usize) -> String {
    field(&index(&field("modes", mode.as_str()), i), "path")
}

/// The array of one mode: each step object parsed, checked and dropped in turn.
struct StepsSeed<'a, C> {
    checks: &'a mut C,
    mode: Mode,
    mode_path: &'a str,
    /// Keep the steps (else each is checked and dropped).
    keep: bool,
}

visited_seed!(StepsSeed<'_, C>);

impl<'de, C: ModeChecks> Visitor<'de> for StepsSeed<'_, C> {
    type Value = Streamed<ModeSteps>;

    other_values!();

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(MapAccessDeserializer::new(map)).map(Streamed::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = ModeSteps {
            count: 0,
            steps: Vec::new(),
            complete: true,
            paths: Vec::new(),
        };
        while let Some(item) = seq.next_element::<Value>()? {
            let step_path = index(self.mode_path, out.count);
            let (step, path) = self.checks.step(&item, &step_path, self.mode);
            if let Some(path) = path {
                out.paths.push((out.count, path));
            }
            match step {
                Some(step) if self.keep => out.steps.push(step),
                Some(_) => {}
                None => out.complete = false,
            }
            out.count += 1;
        }
        out.steps.shrink_to_fit();
        out.paths.shrink_to_fit();
        Ok(Streamed::Parsed(out))
    }
}

/// A JSON string literal of `s`, cut after 100 characters so a huge value cannot flood a log.
pub(super) fn quote(s: &str) -> String {
    const MAX_CHARS: usize = 100;
    match s.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}...", Value::from(&s[..cut])),
        None => Value::from(s).to_string(),
    }
}

/// `parent.key`, or `parent["key"]` when the key is not a plain identifier.
pub(super) fn field(parent: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    match (parent.is_empty(), plain) {
        (true, true) => key.to_owned(),
        (false, true) => format!("{parent}.{key}"),
        (_, false) => format!("{parent}[{}]", Value::from(key)),
    }
}

pub(super) fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}
