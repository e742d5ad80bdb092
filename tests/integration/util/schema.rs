//! A small JSON Schema checker for the documents of `--format json` (docs/schemas/, draft
//! 2020-12): the keywords those schemas use, and a failure for any other, so a schema cannot
//! lean on a keyword that is silently not checked.

use serde_json::Value;

use super::repo_file;

/// Assert that `doc` is valid against `docs/schemas/<name>.schema.json`.
#[track_caller]
pub fn assert_valid(name: &str, doc: &Value) {
    let schema: Value =
        serde_json::from_str(&repo_file(&format!("docs/schemas/{name}.schema.json")))
            .unwrap_or_else(|e| panic!("docs/schemas/{name}.schema.json: {e}"));
    let problems = violations(&schema, &schema, doc, "");
    assert!(
        problems.is_empty(),
        "not a valid {name} document:\n  {}\n{doc:#}",
        problems.join("\n  ")
    );
}

/// Assert that stdout is exactly one JSON document valid against schema `name`; the document.
#[track_caller]
pub fn assert_document(name: &str, stdout: &[u8]) -> Value {
    let doc: Value = serde_json::from_slice(stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}",
            String::from_utf8_lossy(stdout)
        )
    });
    assert_valid(name, &doc);
    doc
}

/// Keywords that only annotate.
const ANNOTATIONS: &[&str] = &["$schema", "$id", "title", "description", "$defs"];

/// What `doc` (at JSON pointer `at`) breaks of `schema`; `root` resolves `$ref`s.
pub fn violations(root: &Value, schema: &Value, doc: &Value, at: &str) -> Vec<String> {
    let Some(keywords) = schema.as_object() else {
        return vec![format!("{at}: the schema is not an object: {schema}")];
    };
    let mut out = Vec::new();
    for (keyword, value) in keywords {
        match keyword.as_str() {
            k if ANNOTATIONS.contains(&k) => {}
            "$ref" => {
                let target = value
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .and_then(|name| root["$defs"].get(name));
                match target {
                    Some(target) => out.extend(violations(root, target, doc, at)),
                    None => out.push(format!("{at}: unresolved $ref {value}")),
                }
            }
            "type" => {
                let types: Vec<&str> = match value {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => vec![],
                };
                if !types.iter().any(|t| has_type(doc, t)) {
                    out.push(format!("{at}: expected {types:?}, found {doc}"));
                }
            }
            "enum" => {
                if !value.as_array().is_some_and(|vs| vs.contains(doc)) {
                    out.push(format!("{at}: {doc} is not one of {value}"));
                }
            }
            "const" => {
                if doc != value {
                    out.push(format!("{at}: expected {value}, found {doc}"));
                }
            }
            "minimum" => {
                if doc.as_f64().zip(value.as_f64()).is_some_and(|(d, m)| d < m) {
                    out.push(format!("{at}: {doc} is below {value}"));
                }
            }
            "required" => {
                for name in value.as_array().into_iter().flatten() {
                    let name = name.as_str().unwrap_or_default();
                    if doc.as_object().is_some_and(|o| !o.contains_key(name)) {
                        out.push(format!("{at}: required property {name:?} is missing"));
                    }
                }
            }
            "properties" => {
                let Some(object) = doc.as_object() else {
                    continue;
                };
                for (name, sub) in value.as_object().into_iter().flatten() {
                    if let Some(v) = object.get(name) {
                        out.extend(violations(root, sub, v, &format!("{at}/{name}")));
                    }
                }
            }
            "additionalProperties" => {
                let Some(object) = doc.as_object() else {
                    continue;
                };
                let known = keywords.get("properties").and_then(Value::as_object);
                for (name, v) in object {
                    if known.is_some_and(|k| k.contains_key(name)) {
                        continue;
                    }
                    match value {
                        Value::Bool(false) => {
                            out.push(format!("{at}: property {name:?} is not in the schema"));
                        }
                        Value::Bool(true) => {}
                        sub => out.extend(violations(root, sub, v, &format!("{at}/{name}"))),
                    }
                }
            }
            "items" => {
                for (i, item) in doc.as_array().into_iter().flatten().enumerate() {
                    out.extend(violations(root, value, item, &format!("{at}/{i}")));
                }
            }
            "oneOf" => {
                let branches: Vec<Vec<String>> = value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|branch| violations(root, branch, doc, at))
                    .collect();
                let matching = branches.iter().filter(|b| b.is_empty()).count();
                if matching != 1 {
                    out.push(format!(
                        "{at}: matches {matching} of the oneOf branches, not one: {}",
                        branches
                            .iter()
                            .map(|b| b.join("; "))
                            .collect::<Vec<_>>()
                            .join(" | ")
                    ));
                }
            }
            other => out.push(format!("{at}: the checker does not know keyword {other:?}")),
        }
    }
    out
}

fn has_type(doc: &Value, t: &str) -> bool {
    match t {
        "object" => doc.is_object(),
        "array" => doc.is_array(),
        "string" => doc.is_string(),
        "integer" => doc.is_i64() || doc.is_u64(),
        "number" => doc.is_number(),
        "boolean" => doc.is_boolean(),
        "null" => doc.is_null(),
        _ => false,
    }
}
