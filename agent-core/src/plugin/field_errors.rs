//! Decoding errors that name the payload field and the expected type (SPEC §9.5), and
//! `did you mean` for near misses.
//!
//! serde's messages say what was wrong but not where (`invalid type: integer 5, expected a
//! sequence`). serde_json's errors carry a line, so the payload is laid out again with one
//! value per line ([`Layout`]) and `"type"` first (typetag then hands the rest of the stream
//! straight to the kind, without buffering it): the line of an error is the path of the value
//! it is about.

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// One step of a path into the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// `gpus[1]`, `limits.timeout_s`.
fn render(path: &[Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        let _ = match segment {
            Segment::Key(key) if out.is_empty() => write!(out, "{key}"),
            Segment::Key(key) => write!(out, ".{key}"),
            Segment::Index(i) => write!(out, "[{i}]"),
        };
    }
    out
}

/// A payload as JSON text with one value per line, and the path of each line's value.
#[derive(Debug, Default)]
pub(crate) struct Layout {
    pub(crate) text: String,
    /// `paths[n]` is the path of line `n + 1`; a closing bracket's line is its container's.
    paths: Vec<Vec<Segment>>,
}

impl Layout {
    /// `fields` laid out with `"type"` first.
    pub(crate) fn of(fields: &Map<String, Value>) -> Self {
        let mut entries: Vec<_> = fields.iter().collect();
        // A stable sort: `"type"` first, the others in their order.
        entries.sort_by_key(|(key, _)| key.as_str() != "type");
        let entries = entries
            .into_iter()
            .map(|(key, value)| (Segment::Key(key.clone()), value));
        let mut layout = Self::default();
        layout.nested("{", entries, &mut Vec::new(), "}");
        layout
    }

    fn line(&mut self, text: &str, path: &[Segment]) {
        self.text.push_str(text);
        self.text.push('\n');
        self.paths.push(path.to_vec());
    }

    /// An object's or an array's lines: `open`, each child's under its path, then `close`.
    fn nested<'v>(
        &mut self,
        open: &str,
        children: impl ExactSizeIterator<Item = (Segment, &'v Value)>,
        path: &mut Vec<Segment>,
        close: &str,
    ) {
        self.line(open, path);
        let len = children.len();
        for (i, (segment, child)) in children.enumerate() {
            let prefix = match &segment {
                Segment::Key(key) => format!("{}: ", Value::String(key.clone())),
                Segment::Index(_) => String::new(),
            };
            path.push(segment);
            self.value(&prefix, child, path, if i + 1 < len { "," } else { "" });
            path.pop();
        }
        self.line(close, path);
    }

    fn value(&mut self, prefix: &str, value: &Value, path: &mut Vec<Segment>, comma: &str) {
        match value {
            Value::Array(items) if !items.is_empty() => {
                let items = (0..items.len()).map(Segment::Index).zip(items);
                self.nested(&format!("{prefix}["), items, path, &format!("]{comma}"));
            }
            Value::Object(map) if !map.is_empty() => {
                let entries = map.keys().cloned().map(Segment::Key).zip(map.values());
                self.nested(&format!("{prefix}{{"), entries, path, &format!("}}{comma}"));
            }
            scalar => self.line(&format!("{prefix}{scalar}{comma}"), path),
        }
    }

    /// serde's message of `error` (raised decoding [`Layout::text`]), with the field it is
    /// about and in the payload's own terms: `field "timeout_s": expected an unsigned integer,
    /// found the string "5"`.
    pub(crate) fn describe(&self, error: &serde_json::Error) -> String {
        let full = error.to_string();
        let suffix = format!(" at line {} column {}", error.line(), error.column());
        let message = full.strip_suffix(&suffix).unwrap_or(&full);
        let path = error
            .line()
            .checked_sub(1)
            .and_then(|i| self.paths.get(i))
            .map_or(&[][..], Vec::as_slice);
        describe(message, path)
    }
}

/// `message` about the value at `path`, in the payload's terms.
fn describe(message: &str, path: &[Segment]) -> String {
    let at = |detail: String| {
        if path.is_empty() {
            detail
        } else {
            format!("field {:?}: {detail}", render(path))
        }
    };
    // The path of field `name` of the object at `parent`.
    let field = |parent: &[Segment], name: &str| {
        render(&[parent, &[Segment::Key(name.to_owned())]].concat())
    };
    if let Some(name) = quoted(message, "missing field `") {
        return format!("field {:?} is missing", field(path, name));
    }
    if let Some(name) = quoted(message, "unknown field `") {
        // Raised at the key, whose line is the field's own.
        let known = backquoted(message.split_once("expected").map_or("", |(_, list)| list));
        let parent = path.split_last().map_or(&[][..], |(_, parent)| parent);
        return format!(
            "unknown field {:?}{}",
            field(parent, name),
            suggestion(name, known.iter().copied())
        );
    }
    if let Some(name) = quoted(message, "unknown variant `") {
        let expected = message.split_once(", expected ").map_or("", |(_, e)| e);
        let known = backquoted(expected);
        return at(format!(
            "unknown value {name:?}, expected {}{}",
            expected.replace('`', "\""),
            suggestion(name, known.iter().copied())
        ));
    }
    let invalid = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "));
    if let Some((found, expected)) = invalid.and_then(|m| m.split_once(", expected ")) {
        return at(format!(
            "expected {}, found {}",
            expected_in_json(expected),
            found_in_json(found)
        ));
    }
    if let Some((length, expected)) = message
        .strip_prefix("invalid length ")
        .and_then(|m| m.split_once(", expected "))
    {
        return at(format!(
            "expected {}, found {length} elements",
            expected_in_json(expected)
        ));
    }
    at(message.to_owned())
}

/// The text between `prefix` (at the start of `message`) and the next backquote.
fn quoted<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    message.strip_prefix(prefix)?.split('`').next()
}

/// Every `` `name` `` in `text`.
fn backquoted(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// serde's name of a Rust type, as a payload author reads it.
fn expected_in_json(expected: &str) -> String {
    if let Some(n) = expected.strip_prefix("a tuple of size ") {
        return format!("an array of {n} elements");
    }
    match expected {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "an unsigned integer",
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "an integer",
        "f32" | "f64" => "a number",
        "a sequence" => "an array",
        "a map" => "an object",
        _ if expected.starts_with("struct ") => "an object",
        "a borrowed string" => "a string",
        "a character" => "a one-character string",
        "unit" => "null",
        other => other,
    }
    .to_owned()
}

/// serde's description of the value it found, as JSON.
fn found_in_json(found: &str) -> String {
    // `integer `5``: what it is, then its value in backquotes.
    let ticked = found
        .split_once(" `")
        .and_then(|(what, value)| Some((what, value.strip_suffix('`')?)));
    match ticked {
        Some(("integer", n)) => return format!("the integer {n}"),
        Some(("floating point", n)) => return format!("the number {n}"),
        Some(("boolean", b)) => return b.to_owned(),
        Some(("character", c)) => return format!("the string {c:?}"),
        _ => {}
    }
    if let Some(s) = found.strip_prefix("string ") {
        return format!("the string {s}");
    }
    match found {
        "sequence" => "an array",
        "map" => "an object",
        "unit value" => "null",
        other => other,
    }
    .to_owned()
}

/// ` (did you mean "gpus"?)` when one of `known` is within two edits of `word`.
pub(crate) fn suggestion<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    nearest(word, known).map_or_else(String::new, |near| format!(" (did you mean {near:?}?)"))
}

/// The one of `known` nearest to `word`, if within two edits (the first of equals).
pub(crate) fn nearest<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .filter(|k| *k != word)
        .map(|k| (strsim::damerau_levenshtein(word, k), k))
        .filter(|(distance, _)| *distance <= 2)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code, reason = "only decoded")]
    struct Kind {
        gpus: Vec<String>,
        timeout_s: u64,
        #[serde(default)]
        limits: Option<Limits>,
        #[serde(default)]
        mode: Option<Mode>,
        #[serde(default)]
        pair: Option<(u8, u8)>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "only decoded")]
    struct Limits {
        retries: u32,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    #[allow(dead_code, reason = "only decoded")]
    enum Mode {
        Soft,
        Hard,
    }

    fn error_of(json: &str) -> String {
        let value: Value = serde_json::from_str(json).unwrap();
        let layout = Layout::of(value.as_object().unwrap());
        let e = serde_json::from_str::<Kind>(&layout.text).unwrap_err();
        layout.describe(&e)
    }

    #[test]
    fn decoding_errors_name_the_field_and_the_expected_type() {
        for (json, expected) in [
            (
                r#"{"gpus":5,"timeout_s":1}"#,
                r#"field "gpus": expected an array, found the integer 5"#,
            ),
            (
                r#"{"gpus":["0",3],"timeout_s":1}"#,
                r#"field "gpus[1]": expected a string, found the integer 3"#,
            ),
            (
                r#"{"gpus":[],"timeout_s":"5"}"#,
                r#"field "timeout_s": expected an unsigned integer, found the string "5""#,
            ),
            (
                r#"{"gpus":[],"timeout_s":-1}"#,
                r#"field "timeout_s": expected an unsigned integer, found the integer -1"#,
            ),
            (
                r#"{"gpus":{},"timeout_s":1}"#,
                r#"field "gpus": expected an array, found an object"#,
            ),
            (
                r#"{"gpus":[],"timeout_s":null}"#,
                r#"field "timeout_s": expected an unsigned integer, found null"#,
            ),
            (r#"{"timeout_s":1}"#, r#"field "gpus" is missing"#),
            (
                r#"{"gpus":[],"timeout_s":1,"limits":{}}"#,
                r#"field "limits.retries" is missing"#,
            ),
            (
                r#"{"gpus":[],"timeout_s":1,"limits":{"retires":1}}"#,
                r#"unknown field "limits.retires" (did you mean "retries"?)"#,
            ),
            (
                r#"{"gpus":[],"timeout_s":1,"mode":"hrad"}"#,
                r#"field "mode": unknown value "hrad", expected "soft" or "hard" (did you mean "hard"?)"#,
            ),
            (
                r#"{"gpus":[],"timeout_s":1,"pair":[1]}"#,
                r#"field "pair": expected an array of 2 elements, found 1 elements"#,
            ),
        ] {
            assert_eq!(error_of(json), expected, "{json}");
        }
    }

    #[test]
    fn near_misses_within_two_edits_are_suggested() {
        let known = ["services", "gpus", "timeout_s"];
        assert_eq!(nearest("service", known), Some("services"));
        assert_eq!(nearest("gpu", known), Some("gpus"));
        assert_eq!(nearest("timeuot_s", known), Some("timeout_s"));
        assert_eq!(nearest("delay", known), None);
        assert_eq!(suggestion("delay", known), "");
        assert_eq!(suggestion("gpsu", known), r#" (did you mean "gpus"?)"#);
    }
}
