//! A strict logfmt parser for the agent's text diagnostics: `key=value` pairs separated by one
//! space, keys of letters, digits, `_`, `.` and `-`, values bare (no space, `=`, `"`, `\` or
//! control character) or quoted with the escapes `\"`, `\\`, `\n`, `\r`, `\t`.

/// The pairs of one record, in order; `Err` says where `line` is not logfmt.
pub fn parse_logfmt(line: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    let mut chars = line.char_indices().peekable();
    loop {
        let start = chars.peek().map_or(line.len(), |(i, _)| *i);
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| *c != '=') {
            if !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) {
                return Err(format!("bad key character {c:?} at {start}: {line}"));
            }
            key.push(c);
        }
        if key.is_empty() || chars.next().is_none() {
            return Err(format!("expected key=value at {start}: {line}"));
        }
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '"').is_some() {
            loop {
                match chars.next() {
                    None => return Err(format!("unterminated quote after {key}: {line}")),
                    Some((_, '"')) => break,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, '"')) => value.push('"'),
                        Some((_, '\\')) => value.push('\\'),
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, 'r')) => value.push('\r'),
                        Some((_, 't')) => value.push('\t'),
                        other => return Err(format!("bad escape {other:?} in {key}: {line}")),
                    },
                    Some((_, c)) if c.is_control() => {
                        return Err(format!("control character in {key}: {line}"));
                    }
                    Some((_, c)) => value.push(c),
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| *c != ' ') {
                if c == '=' || c == '"' || c == '\\' || c.is_control() {
                    return Err(format!("{c:?} in the bare value of {key}: {line}"));
                }
                value.push(c);
            }
            if value.is_empty() {
                return Err(format!("empty bare value of {key}: {line}"));
            }
        }
        pairs.push((key, value));
        match chars.next() {
            None => return Ok(pairs),
            Some((_, ' ')) if chars.peek().is_some_and(|(_, c)| *c != ' ') => {}
            Some((i, c)) => return Err(format!("expected one space at {i}, found {c:?}: {line}")),
        }
    }
}

/// The value of `key` in a parsed record.
pub fn field<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[test]
fn the_parser_is_strict() {
    assert_eq!(
        parse_logfmt(r#"level=info msg="a \"b\"" n=3"#).unwrap(),
        [
            ("level".into(), "info".into()),
            ("msg".into(), r#"a "b""#.into()),
            ("n".into(), "3".into())
        ]
    );
    for bad in [
        "result=exit code 4",
        "msg=\"open",
        "k=a=b",
        "k=",
        "k=v  j=w",
        "INFO run started",
        "k=v ",
    ] {
        assert!(parse_logfmt(bad).is_err(), "{bad}");
    }
}

/// `v` as the agent writes a logfmt value: bare when safe, else quoted.
pub fn logfmt_value(v: &str) -> String {
    let bare = !v.is_empty()
        && v.chars()
            .all(|c| !c.is_control() && !c.is_whitespace() && !matches!(c, '=' | '"' | '\\'));
    if bare {
        return v.to_owned();
    }
    let escaped = v
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
        .replace('\t', "\\t");
    format!("\"{escaped}\"")
}
