//! A Go `encoding/json`-compatible writer, just enough for the step fingerprint (SPEC §8.7).
//!
//! The Go agent names its completion markers after a SHA-256 of `json.Marshal` output, so the
//! bytes hashed here must be Go's. serde_json escapes differently (it neither HTML-escapes nor
//! escapes U+2028/U+2029), hence this small writer.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Appends `s` as a JSON string literal, byte for byte as Go's `json.Marshal` writes it.
///
/// Takes bytes because Go strings may hold invalid UTF-8: Go replaces each byte that does not
/// start a valid sequence with `\ufffd` and resumes at the next byte.
pub(crate) fn write_string(out: &mut String, s: &[u8]) {
    out.push('"');
    for chunk in s.utf8_chunks() {
        for c in chunk.valid().chars() {
            write_char(out, c);
        }
        // SPEC appendix: every invalid byte becomes one `\ufffd`; an invalid chunk holds only
        // bytes Go would also reject one at a time (a truncated sequence cannot restart).
        for _ in chunk.invalid() {
            out.push_str("\\ufffd");
        }
    }
    out.push('"');
}

/// [`write_string`] for text already known to be UTF-8.
pub(crate) fn write_str(out: &mut String, s: &str) {
    write_string(out, s.as_bytes());
}

fn write_char(out: &mut String, c: char) {
    // SPEC appendix: Go ≥ 1.22 escape set, with HTML escaping on (the `Marshal` default).
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\0'..='\u{1f}' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        }
        c => out.push(c),
    }
}

/// The Go agent's step fingerprint: lowercase hex SHA-256 of
/// `{"path":P,"arguments":[...],"returnCodes":[...],"env":{...},"onHost":B}`.
///
/// The Go agent turns missing arguments and env into `[]` and `{}` before hashing, never `null`,
/// so empty slices and maps are written that way here too.
pub(crate) fn step_fingerprint(
    path: &str,
    arguments: &[String],
    returncodes: &[i64],
    env: &BTreeMap<String, String>,
    on_host: bool,
) -> String {
    let json = fingerprint_json(path, arguments, returncodes, env, on_host);
    let mut hex = String::with_capacity(64);
    for byte in Sha256::digest(json.as_bytes()) {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// The compact JSON hashed by [`step_fingerprint`]: struct fields in Go declaration order, map
/// keys in byte order (Go sorts map keys; `BTreeMap<String, _>` iterates in byte order).
fn fingerprint_json(
    path: &str,
    arguments: &[String],
    returncodes: &[i64],
    env: &BTreeMap<String, String>,
    on_host: bool,
) -> String {
    let mut json = String::from("{\"path\":");
    write_str(&mut json, path);
    json.push_str(",\"arguments\":[");
    write_list(&mut json, arguments, |json, argument| {
        write_str(json, argument);
    });
    json.push_str("],\"returnCodes\":[");
    write_list(&mut json, returncodes, |json, code| {
        let _ = write!(json, "{code}");
    });
    json.push_str("],\"env\":{");
    write_list(&mut json, env, |json, (key, value)| {
        write_str(json, key);
        json.push(':');
        write_str(json, value);
    });
    json.push_str("},\"onHost\":");
    json.push_str(if on_host { "true" } else { "false" });
    json.push('}');
    json
}

/// `items`, each written by `write`, separated by commas.
fn write_list<T>(
    json: &mut String,
    items: impl IntoIterator<Item = T>,
    write: impl Fn(&mut String, T),
) {
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        write(json, item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go_string(s: &[u8]) -> String {
        let mut out = String::new();
        write_string(&mut out, s);
        out
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn plain_ascii_is_literal() {
        assert_eq!(
            go_string(b"scripts/apply.sh --x=1 'q' ~"),
            r#""scripts/apply.sh --x=1 'q' ~""#
        );
        assert_eq!(go_string(b""), r#""""#);
    }

    #[test]
    fn escapes_quote_and_backslash() {
        assert_eq!(go_string(br#"say "hi" \o/"#), r#""say \"hi\" \\o/""#);
    }

    #[test]
    fn escapes_named_controls() {
        assert_eq!(go_string(b"\n\r\t\x08\x0c"), r#""\n\r\t\b\f""#);
    }

    #[test]
    fn escapes_other_controls_as_lowercase_u00xx() {
        assert_eq!(
            go_string(b"\x00\x01\x0b\x1b\x1f"),
            r#""\u0000\u0001\u000b\u001b\u001f""#
        );
    }

    #[test]
    fn keeps_del_and_c1_controls_literal() {
        assert_eq!(
            go_string("\x7f\u{85}\u{9f}".as_bytes()),
            "\"\x7f\u{85}\u{9f}\""
        );
    }

    #[test]
    fn escapes_html_characters() {
        assert_eq!(
            go_string(b"<a href=x>&amp;</a>"),
            r#""\u003ca href=x\u003e\u0026amp;\u003c/a\u003e""#
        );
    }

    #[test]
    fn escapes_line_and_paragraph_separators() {
        assert_eq!(
            go_string("a\u{2028}b\u{2029}c".as_bytes()),
            r#""a\u2028b\u2029c""#
        );
    }

    #[test]
    fn keeps_non_ascii_literal() {
        assert_eq!(
            go_string("é 日本 😀 \u{a0}\u{feff}\u{fffd}".as_bytes()),
            "\"é 日本 😀 \u{a0}\u{feff}\u{fffd}\""
        );
    }

    #[test]
    fn replaces_each_invalid_byte_with_ufffd() {
        assert_eq!(go_string(b"a\xffb"), r#""a\ufffdb""#);
        // A truncated sequence: one replacement per byte, then decoding resumes.
        assert_eq!(go_string(b"\xe2\x82x"), r#""\ufffd\ufffdx""#);
        assert_eq!(go_string(b"\xe2\x82"), r#""\ufffd\ufffd""#);
        // An encoded surrogate, an overlong NUL, and a code point above U+10FFFF.
        assert_eq!(go_string(b"\xed\xa0\x80"), r#""\ufffd\ufffd\ufffd""#);
        assert_eq!(go_string(b"\xc0\x80"), r#""\ufffd\ufffd""#);
        assert_eq!(
            go_string(b"\xf4\x90\x80\x80"),
            r#""\ufffd\ufffd\ufffd\ufffd""#
        );
        // A lone continuation byte before a valid multi-byte character.
        assert_eq!(go_string(b"\x80\xc3\xa9"), "\"\\ufffdé\"");
    }

    /// Go's decoding loop: a valid sequence of 1 to 4 bytes, else one U+FFFD for one byte.
    fn go_decode(bytes: &[u8]) -> String {
        let mut decoded = String::new();
        let mut i = 0;
        while i < bytes.len() {
            let valid = (1..=4.min(bytes.len() - i))
                .find_map(|n| std::str::from_utf8(&bytes[i..i + n]).ok().map(|s| (s, n)));
            if let Some((s, n)) = valid {
                decoded.push_str(s);
                i += n;
            } else {
                decoded.push('\u{fffd}');
                i += 1;
            }
        }
        decoded
    }

    proptest::proptest! {
        #[test]
        fn output_is_json_for_what_go_decodes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..32)) {
            let parsed: String = serde_json::from_str(&go_string(&bytes)).unwrap();
            proptest::prop_assert_eq!(parsed, go_decode(&bytes));
        }

        #[test]
        fn output_round_trips_valid_text(s in "(\\PC|[<>&\u{2028}\u{2029}\u{0}-\u{1f}\"\\\\])*") {
            let out = go_string(s.as_bytes());
            let escaped_only = !out.contains(['<', '>', '&', '\u{2028}', '\u{2029}']);
            proptest::prop_assert!(escaped_only, "unescaped character in {}", out);
            let parsed: String = serde_json::from_str(&out).unwrap();
            proptest::prop_assert_eq!(parsed, s);
        }
    }

    #[test]
    fn fingerprint_json_layout() {
        let env = BTreeMap::from([
            ("b".to_owned(), "2".to_owned()),
            ("B".to_owned(), "<1>".to_owned()),
            ("a".to_owned(), String::new()),
        ]);
        assert_eq!(
            fingerprint_json("s.sh", &strings(&["x", "env:Y"]), &[0, -1], &env, false),
            r#"{"path":"s.sh","arguments":["x","env:Y"],"returnCodes":[0,-1],"env":{"B":"\u003c1\u003e","a":"","b":"2"},"onHost":false}"#
        );
    }

    #[test]
    fn fingerprint_json_empty_collections() {
        assert_eq!(
            fingerprint_json("a.sh", &[], &[], &BTreeMap::new(), true),
            r#"{"path":"a.sh","arguments":[],"returnCodes":[],"env":{},"onHost":true}"#
        );
    }

    #[test]
    fn fingerprint_golden() {
        let args = strings(&["--mode", "fast"]);
        assert_eq!(
            step_fingerprint("scripts/apply.sh", &args, &[0, 2], &BTreeMap::new(), true),
            "f3f526b85e0a962f2b4b68089385cd5b4829c09a436112f6586ff5f288e4ecf4"
        );
    }

    #[test]
    fn fingerprint_changes_with_every_input() {
        let args = strings(&["--mode", "fast"]);
        let env = BTreeMap::new();
        let base = step_fingerprint("scripts/apply.sh", &args, &[0, 2], &env, true);
        let with_env = BTreeMap::from([("K".to_owned(), "V".to_owned())]);
        let variants = [
            step_fingerprint("scripts/apply2.sh", &args, &[0, 2], &env, true),
            step_fingerprint("scripts/apply.sh", &args[..1], &[0, 2], &env, true),
            step_fingerprint("scripts/apply.sh", &args, &[0], &env, true),
            step_fingerprint("scripts/apply.sh", &args, &[0, 2], &with_env, true),
            step_fingerprint("scripts/apply.sh", &args, &[0, 2], &env, false),
        ];
        for variant in &variants {
            assert_ne!(variant, &base);
            assert_eq!(variant.len(), 64);
            assert!(
                variant
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            );
        }
    }
}
