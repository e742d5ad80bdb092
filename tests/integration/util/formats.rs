//! The byte formats the assertions are computed with: the startup banner, CPython `repr`, Go
//! `encoding/json`, marker names, timestamps, log names and legacy history files.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use base64::Engine as _;

use super::{COPY_DIR, FakeHost};

/// The expected startup banner (SPEC §3); defaults are the transcripts' base environment.
#[allow(
    clippy::struct_excessive_bools,
    reason = "mirrors the banner's boolean lines"
)]
pub struct Banner {
    pub mode: String,
    pub root_mount: String,
    pub copy_dir: String,
    pub interrupt_data: Option<String>,
    pub always_run_step: bool,
    pub copy_resolv: bool,
    pub overlay_always_run_step: bool,
    pub resource_id: String,
    pub data_dir: String,
    pub root_dir: String,
    pub log_dir: String,
    pub buffer_limit: String,
    pub write_logs: bool,
    /// Package name parsed from the resource ID.
    pub package: String,
    /// Package version parsed from the resource ID.
    pub version: String,
}

impl Banner {
    /// The banner of `agent MODE <host root> COPY_DIR` under the base environment.
    pub fn new(mode: &str, host: &FakeHost) -> Self {
        Self {
            mode: mode.to_owned(),
            root_mount: host.root_str(),
            copy_dir: COPY_DIR.to_owned(),
            interrupt_data: None,
            always_run_step: false,
            copy_resolv: false,
            overlay_always_run_step: false,
            resource_id: "abc_pkg_1.0.0".to_owned(),
            data_dir: "/skyhook-package".to_owned(),
            root_dir: "/var/lib/skyhook/sk1".to_owned(),
            log_dir: "/var/log/skyhook/sk1".to_owned(),
            buffer_limit: "8192".to_owned(),
            write_logs: true,
            package: "pkg".to_owned(),
            version: "1.0.0".to_owned(),
        }
    }

    /// The exact bytes.
    pub fn render(&self) -> String {
        let b = |v: bool| if v { "True" } else { "False" };
        let mut s = String::new();
        s.push_str("--------------------\n-CLI CONFIGURATION--\n");
        let _ = writeln!(s, "mode: {}", self.mode);
        let _ = writeln!(s, "root_mount: {}", self.root_mount);
        let _ = writeln!(s, "copy_dir: {}", self.copy_dir);
        let _ = writeln!(
            s,
            "interrupt_data: {}",
            self.interrupt_data.as_deref().unwrap_or("None")
        );
        let _ = writeln!(s, "always_run_step: {}", b(self.always_run_step));
        s.push_str("-ENV CONFIGURATION--\n");
        let _ = writeln!(s, "COPY_RESOLV: {}", b(self.copy_resolv));
        let _ = writeln!(
            s,
            "OVERLAY_ALWAYS_RUN_STEP: {}",
            b(self.overlay_always_run_step)
        );
        let _ = writeln!(s, "SKYHOOK_RESOURCE_ID: {}", self.resource_id);
        let _ = writeln!(s, "SKYHOOK_DATA_DIR: {}", self.data_dir);
        let _ = writeln!(s, "SKYHOOK_ROOT_DIR: {}", self.root_dir);
        let _ = writeln!(s, "SKYHOOK_LOG_DIR: {}", self.log_dir);
        let _ = writeln!(s, "SKYHOOK_AGENT_BUFFER_LIMIT: {}", self.buffer_limit);
        let _ = writeln!(s, "SKYHOOK_AGENT_WRITE_LOGS: {}", b(self.write_logs));
        s.push_str("Directory CONFIGURATION\n");
        let _ = writeln!(
            s,
            "flag_dir: {}/flags/{}/{}",
            self.root_dir, self.package, self.version
        );
        let _ = writeln!(
            s,
            "log_dir: {}/{}/{}",
            self.log_dir, self.package, self.version
        );
        let _ = writeln!(
            s,
            "history_file: {}/history/{}.json",
            self.root_dir, self.package
        );
        s.push_str("--------------------\n");
        s
    }
}

/// CPython `repr(str)` for the strings these tests use (ASCII, quotes, backslashes, control
/// characters, printable non-ASCII such as `é`).
pub fn py_repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::new();
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..=0xa0).contains(&(c as u32)) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// CPython `repr(list[str])`.
pub fn py_repr_strs(items: &[String]) -> String {
    let parts: Vec<String> = items.iter().map(|s| py_repr_str(s)).collect();
    format!("[{}]", parts.join(", "))
}

/// CPython `repr(list[int])`.
pub fn py_repr_ints(items: &[i64]) -> String {
    let parts: Vec<String> = items.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// Standard base64 with padding.
pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `<PATH>_<base64(repr(args) + "_" + repr(returncodes))>` (SPEC §8.7).
pub fn legacy_marker_name(path: &str, args: &[String], rcs: &[i64]) -> String {
    let payload = format!("{}_{}", py_repr_strs(args), py_repr_ints(rcs));
    format!("{path}_{}", b64(payload.as_bytes()))
}

/// Go `encoding/json` string encoding (SPEC appendix).
pub fn go_json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The compact Go JSON the native marker hashes.
pub fn fingerprint_json(
    path: &str,
    args: &[String],
    rcs: &[i64],
    env: &[(String, String)],
    on_host: bool,
) -> String {
    let args: Vec<String> = args.iter().map(|a| go_json_str(a)).collect();
    let rcs: Vec<String> = rcs.iter().map(ToString::to_string).collect();
    let mut env: Vec<&(String, String)> = env.iter().collect();
    env.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    env.dedup_by(|a, b| a.0 == b.0);
    let env: Vec<String> = env
        .iter()
        .map(|(k, v)| format!("{}:{}", go_json_str(k), go_json_str(v)))
        .collect();
    format!(
        "{{\"path\":{},\"arguments\":[{}],\"returnCodes\":[{}],\"env\":{{{}}},\"onHost\":{}}}",
        go_json_str(path),
        args.join(","),
        rcs.join(","),
        env.join(","),
        on_host
    )
}

/// `<basename(PATH)>-<sha256hex>.flag` (SPEC §8.7).
pub fn native_marker_name(
    path: &str,
    args: &[String],
    rcs: &[i64],
    env: &[(String, String)],
    on_host: bool,
) -> String {
    let base = path.rsplit('/').next().unwrap();
    let hash = sha256_hex(fingerprint_json(path, args, rcs, env, on_host).as_bytes());
    format!("{base}-{hash}.flag")
}

/// SHA-256 as lowercase hex.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(data)
        .iter()
        .fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Parse Go's `RFC3339Nano` in UTC: `YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z`, fraction without trailing
/// zeros. `None` if the string is not exactly that.
pub fn parse_rfc3339_nano_utc(s: &str) -> Option<SystemTime> {
    let frac = s.strip_suffix('Z')?.get(19..)?;
    if frac.len() > 10 || frac.ends_with('0') {
        return None;
    }
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second][optional [.[subsecond]]]Z"
    );
    let t = time::PrimitiveDateTime::parse(s, &format).ok()?;
    Some(t.assume_utc().into())
}

/// Assert `t` is within a few minutes of now.
#[track_caller]
pub fn assert_recent(t: SystemTime, what: &str) {
    let now = SystemTime::now();
    let diff = now.duration_since(t).unwrap_or_else(|e| e.duration());
    assert!(
        diff < Duration::from_secs(300),
        "{what}: timestamp is not close to now ({diff:?} away)"
    );
}

/// Assert marker content `last_run: <RFC3339Nano UTC>\nstep_always_runs: <always>`.
#[track_caller]
pub fn assert_marker_content(content: &str, always: bool, what: &str) {
    let (first, second) = content
        .split_once('\n')
        .unwrap_or_else(|| panic!("{what}: marker content {content:?} is not two lines"));
    let ts = first
        .strip_prefix("last_run: ")
        .unwrap_or_else(|| panic!("{what}: marker content {content:?} lacks `last_run: `"));
    let t = parse_rfc3339_nano_utc(ts)
        .unwrap_or_else(|| panic!("{what}: {ts:?} is not a UTC RFC3339Nano timestamp"));
    assert_recent(t, what);
    assert_eq!(
        second,
        format!("step_always_runs: {always}"),
        "{what}: second line of marker content {content:?}"
    );
}

/// A parsed log file name `<base>-YYYY-MM-DD-HHMMSS.nnnnnnnnn[-N].log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogName {
    pub base: String,
    pub time: SystemTime,
    pub collision: Option<u32>,
}

/// Parse a log file name in this agent's format (nine-digit nanoseconds, optional `-N`).
pub fn parse_log_name(name: &str) -> Option<LogName> {
    let stem = name.strip_suffix(".log")?;
    // The optional collision index comes after the timestamp's nanoseconds.
    let (stem, collision) = match stem.rsplit_once('-') {
        Some((head, n))
            if !n.is_empty() && n.len() < 6 && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            (head, Some(n.parse().ok()?))
        }
        _ => (stem, None),
    };
    // "-YYYY-MM-DD-HHMMSS.nnnnnnnnn" is 28 bytes.
    let (base, ts) = stem.split_at_checked(stem.len().checked_sub(28)?)?;
    let format = time::macros::format_description!(
        "-[year]-[month]-[day]-[hour][minute][second].[subsecond digits:9]"
    );
    let time = time::PrimitiveDateTime::parse(ts, &format).ok()?;
    (!base.is_empty()).then(|| LogName {
        base: base.to_owned(),
        time: time.assume_utc().into(),
        collision,
    })
}

/// A history file as the Python agent wrote it (compact, `+00:00` times), newest first.
pub fn python_history(current: &str, versions: &[&str]) -> String {
    let entries: Vec<String> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            format!(
                "{{\"version\": \"{v}\", \"time\": \"2026-11-{:02}T10:27:44.132205+00:00\"}}",
                28 - (i % 28)
            )
        })
        .collect();
    format!(
        "{{\"current-version\": \"{current}\", \"history\": [{}]}}",
        entries.join(", ")
    )
}

/// INTERRUPT_DATA for a JSON payload: standard base64 with padding.
pub fn interrupt_data(json: &str) -> String {
    b64(json.as_bytes())
}
