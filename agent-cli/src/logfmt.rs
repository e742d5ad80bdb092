//! The text form of the agent's diagnostics on stderr (SPEC §1.5): one logfmt record a line,
//! `time=… level=info msg="run started" key=value …`, every value that holds a space, `=`, a
//! quote, a backslash or a control character quoted.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The logfmt event formatter.
pub struct Logfmt;

impl<S, N> FormatEvent<S, N> for Logfmt
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut time = String::new();
        SystemTime.format_time(&mut Writer::new(&mut time))?;
        let mut fields = Fields::default();
        event.record(&mut fields);
        let level = event.metadata().level().as_str().to_ascii_lowercase();
        write!(
            w,
            "time={} level={level} msg={}",
            value(&time),
            value(&fields.message)
        )?;
        for (key, v) in &fields.rest {
            write!(w, " {key}={}", value(v))?;
        }
        writeln!(w)
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    rest: Vec<(String, String)>,
}

impl Fields {
    fn push(&mut self, field: &Field, text: String) {
        if field.name() == "message" {
            self.message = text;
        } else {
            let key = field.name().trim_start_matches("r#").to_owned();
            self.rest.push((key, text));
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, format!("{value:?}"));
    }
}

/// `value` as a logfmt value: bare when it is safe, else quoted with `\"`, `\\`, `\n`, `\r`,
/// `\t` and `\u{…}` escapes.
pub fn value(v: &str) -> String {
    let bare = !v.is_empty()
        && v.chars()
            .all(|c| !c.is_control() && !c.is_whitespace() && !matches!(c, '=' | '"' | '\\'));
    if bare {
        return v.to_owned();
    }
    let mut s = String::with_capacity(v.len() + 2);
    s.push('"');
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(s, "\\u{{{:x}}}", u32::from(c));
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::value;

    #[test]
    fn values_are_quoted_when_they_need_it() {
        assert_eq!(value("failed"), "failed");
        assert_eq!(value("exit code 4"), r#""exit code 4""#);
        assert_eq!(value("a=b"), r#""a=b""#);
        assert_eq!(value(r#"say "hi""#), r#""say \"hi\"""#);
        assert_eq!(value("a\\b"), r#""a\\b""#);
        assert_eq!(value("two\nlines"), r#""two\nlines""#);
        assert_eq!(value(""), r#""""#);
        assert_eq!(value("/var/log/x.log"), "/var/log/x.log");
    }
}
