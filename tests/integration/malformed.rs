//! Malformed input, as a table: argv, environment values, SKYHOOK_RESOURCE_ID, INTERRUPT_DATA,
//! config.json (every rule of SPEC §7, wrong types, invalid UTF-8, huge and deeply nested
//! documents) and step files (missing, a directory, a fifo, a symbolic link loop, ...).
//!
//! Every case states its exit code and a substring of its stderr, and proves that nothing
//! under ROOT (nor in the agent's working directory outside it) changed: the tree is hashed
//! before and after (paths, types, modes, content hashes, link targets). The cases of one
//! table all run; a failure lists every case that failed.

use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::ffi::OsStringExt as _;
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::{AgentCmd, COPY_DIR, FakeHost, PKG_DIR, Package, Step, b64, tree_stamp};

/// How a case prepares its host and builds its command.
type Setup = Box<dyn Fn(&FakeHost) -> AgentCmd>;

struct Case {
    name: String,
    setup: Setup,
    code: i32,
    /// A substring of stderr.
    message: String,
}

fn case(
    name: impl Into<String>,
    code: i32,
    message: impl Into<String>,
    setup: impl Fn(&FakeHost) -> AgentCmd + 'static,
) -> Case {
    Case {
        name: name.into(),
        setup: Box::new(setup),
        code,
        message: message.into(),
    }
}

/// Run every case on a fresh host; panic listing the cases that failed.
fn run_table(table: &str, cases: Vec<Case>) {
    let mut failures = Vec::new();
    let count = cases.len();
    for c in cases {
        let host = FakeHost::new();
        let cmd = (c.setup)(&host);
        let before = tree_stamp(host.root());
        let before_outside = tree_stamp(host.outside());
        // A case that hangs (a fifo opened for reading, say) fails quickly instead.
        let run = cmd.timeout(Duration::from_secs(15)).run();
        let mut problems = Vec::new();
        if run.code() != Some(c.code) {
            problems.push(format!("exit code {:?}, expected {}", run.code(), c.code));
        }
        if !run.err().contains(&c.message) {
            problems.push(format!("stderr lacks {:?}", c.message));
        }
        let changed = before.diff(&tree_stamp(host.root()));
        if !changed.is_empty() {
            problems.push(format!("ROOT changed:\n  {}", changed.join("\n  ")));
        }
        let changed = before_outside.diff(&tree_stamp(host.outside()));
        if !changed.is_empty() {
            problems.push(format!(
                "the working directory changed:\n  {}",
                changed.join("\n  ")
            ));
        }
        if !problems.is_empty() {
            let err = run.err();
            let tail: String = err
                .chars()
                .rev()
                .take(1500)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            failures.push(format!(
                "[{}] {}\n--- stderr (end) ---\n{tail}",
                c.name,
                problems.join("; ")
            ));
        }
    }
    let _ = writeln!(std::io::stderr(), "{table}: {count} cases");
    assert!(
        failures.is_empty(),
        "{table}: {} of {count} cases failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

fn non_utf8(bytes: &[u8]) -> OsString {
    OsString::from_vec(bytes.to_vec())
}

/// `agent apply ROOT COPY_DIR` on a host with the simple package installed.
fn apply(host: &FakeHost) -> AgentCmd {
    host.install(&Package::simple());
    host.agent().args(["apply", &host.root_str(), COPY_DIR])
}

/// `agent interrupt ROOT COPY_DIR DATA` on a host with the simple package installed.
fn interrupt(host: &FakeHost, data: impl Into<OsString>) -> AgentCmd {
    host.install(&Package::simple());
    host.agent()
        .args(["interrupt", &host.root_str(), COPY_DIR])
        .arg(data)
}

// ---------------------------------------------------------------------------------------------
// argv
// ---------------------------------------------------------------------------------------------

#[test]
fn malformed_argv() {
    require_root!();
    let usage = |name: &str, args: Vec<String>, message: &str| {
        let args2 = args.clone();
        case(name, 2, message, move |h: &FakeHost| {
            h.install(&Package::simple());
            let root = h.root_str();
            h.agent()
                .args(args2.iter().map(|a| a.replace("{ROOT}", &root)))
        })
    };
    let s = |v: &[&str]| v.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    let cases = vec![
        usage(
            "no arguments",
            s(&[]),
            "expected 2, 3, or 4 arguments; received 0",
        ),
        usage(
            "one argument",
            s(&["apply"]),
            "expected 2, 3, or 4 arguments; received 1",
        ),
        usage(
            "five arguments",
            s(&["apply", "{ROOT}", COPY_DIR, "x", "y"]),
            "expected 2, 3, or 4 arguments; received 5",
        ),
        usage(
            "--version with an argument",
            s(&["--version", "x"]),
            "--version takes no arguments",
        ),
        usage(
            "relative root mount",
            s(&["apply", "root", COPY_DIR]),
            "root mount \"root\" is not absolute",
        ),
        usage(
            "empty root mount",
            s(&["apply", "", COPY_DIR]),
            "root mount \"\" is not absolute",
        ),
        usage(
            "relative copy directory",
            s(&["apply", "{ROOT}", "var/lib/x"]),
            "copy directory \"var/lib/x\" is not absolute",
        ),
        usage(
            "interrupt with empty data",
            s(&["interrupt", "{ROOT}", COPY_DIR, ""]),
            "interrupt data must not be empty",
        ),
        usage(
            "stage with interrupt data",
            s(&["apply", "{ROOT}", COPY_DIR, "eyJ0eXBlIjoibm9fb3AifQ=="]),
            "stage \"apply\" does not accept interrupt data",
        ),
        usage(
            "check stage with interrupt data",
            s(&["apply-check", "{ROOT}", COPY_DIR, "x"]),
            "stage \"apply-check\" does not accept interrupt data",
        ),
        case(
            "mode that is not UTF-8",
            2,
            "is not valid UTF-8",
            |h: &FakeHost| {
                h.install(&Package::simple());
                h.agent()
                    .arg(non_utf8(b"appl\xff"))
                    .args([h.root_str(), COPY_DIR.to_owned()])
            },
        ),
        case(
            "copy directory that is not UTF-8",
            2,
            "is not valid UTF-8",
            |h: &FakeHost| {
                h.install(&Package::simple());
                h.agent()
                    .args(["apply", &h.root_str()])
                    .arg(non_utf8(b"/var/lib/\xc3\x28"))
            },
        ),
        // Well-formed but not for this agent: forward compatible no-ops (SPEC §1.1).
        case(
            "unknown mode",
            0,
            "this agent version does not support the requested stage; treating it as a no-op",
            |h: &FakeHost| {
                h.install(&Package::simple());
                h.agent().args(["reticulate", &h.root_str(), COPY_DIR])
            },
        ),
        case(
            "empty mode",
            0,
            "this agent version does not support the requested stage",
            |h: &FakeHost| {
                h.install(&Package::simple());
                h.agent().args(["", &h.root_str(), COPY_DIR])
            },
        ),
        case(
            "mode in another case",
            0,
            "this agent version does not support the requested stage",
            |h: &FakeHost| {
                h.install(&Package::simple());
                h.agent().args(["APPLY", &h.root_str(), COPY_DIR])
            },
        ),
        case(
            "copy directory escaping the root",
            1,
            "escapes the host root",
            |h: &FakeHost| {
                h.install(&Package::simple());
                h.agent().args(["apply", &h.root_str(), "/var/../../etc"])
            },
        ),
        case(
            "copy directory that is a file",
            1,
            "package directory /var/lib/pkgfile exists and is a regular file, not a directory",
            |h: &FakeHost| {
                h.write("var/lib/pkgfile", "x");
                h.agent().args(["apply", &h.root_str(), "/var/lib/pkgfile"])
            },
        ),
        case(
            "root mount that does not exist",
            1,
            "host root",
            |h: &FakeHost| {
                let missing = h.outside().join("no-such-root");
                h.agent()
                    .args(["apply", missing.to_str().unwrap(), COPY_DIR])
            },
        ),
        case(
            "root mount that is a file",
            1,
            "host root",
            |h: &FakeHost| {
                let file = h.outside().join("a-file");
                std::fs::write(&file, "x").unwrap();
                h.agent().args(["apply", file.to_str().unwrap(), COPY_DIR])
            },
        ),
    ];
    run_table("argv", cases);
}

// ---------------------------------------------------------------------------------------------
// Environment values
// ---------------------------------------------------------------------------------------------

#[test]
fn malformed_environment_values() {
    require_root!();
    let env_case = |var: &'static str, value: OsString, code: i32, message: &str| {
        let name = format!("{var}={value:?}");
        case(name, code, message, move |h: &FakeHost| {
            apply(h).env(var, value.clone())
        })
    };
    let v = |s: &str| OsString::from(s);
    let seconds = "is not a non-negative number of seconds; using the default";
    let warn_case = |var: &'static str, value: &'static str, message: &str| {
        case(
            format!("{var}={value:?}"),
            0,
            format!("environment variable {var}={value:?} {message}"),
            move |h: &FakeHost| {
                h.install(&Package::simple());
                h.agent()
                    .env(var, value)
                    .args(["future-mode", &h.root_str(), COPY_DIR])
            },
        )
    };
    let cases = vec![
        env_case("SKYHOOK_ROOT_DIR", v("../../x"), 1, "escapes the host root"),
        env_case("SKYHOOK_ROOT_DIR", v("/.."), 1, "escapes the host root"),
        env_case(
            "SKYHOOK_ROOT_DIR",
            v("/var/lib/../../../etc"),
            1,
            "escapes the host root",
        ),
        env_case(
            "SKYHOOK_LOG_DIR",
            v("/var/log/../../.."),
            1,
            "escapes the host root",
        ),
        env_case("SKYHOOK_LOG_DIR", v(".."), 1, "escapes the host root"),
        env_case(
            "SKYHOOK_ROOT_DIR",
            non_utf8(b"/var/lib/\xff"),
            1,
            "SKYHOOK_ROOT_DIR=\"/var/lib/\u{fffd}\": is not valid UTF-8",
        ),
        env_case(
            "SKYHOOK_LOG_DIR",
            non_utf8(b"\x80"),
            1,
            "is not valid UTF-8",
        ),
        env_case(
            "SKYHOOK_DATA_DIR",
            v("skyhook-package"),
            1,
            "must be an absolute path",
        ),
        env_case(
            "SKYHOOK_DATA_DIR",
            non_utf8(b"/\xfe"),
            1,
            "is not valid UTF-8",
        ),
        env_case("COPY_RESOLV", non_utf8(b"tru\xe9"), 1, "COPY_RESOLV"),
        // An invalid extension setting is warned about and takes the default, not an error:
        // shown with a no-op mode so that nothing runs.
        warn_case("SKYHOOK_STEP_TIMEOUT_SECONDS", "soon", seconds),
        warn_case("SKYHOOK_STEP_TIMEOUT_SECONDS", "-1", seconds),
        warn_case("SKYHOOK_STEP_TIMEOUT_SECONDS", "NaN", seconds),
        warn_case("SKYHOOK_STEP_TIMEOUT_SECONDS", "inf", seconds),
        warn_case("SKYHOOK_STEP_TIMEOUT_SECONDS", "1e300", seconds),
        warn_case("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "20s", seconds),
        warn_case("SKYHOOK_AGENT_STOP_GRACE_SECONDS", " 5", seconds),
        warn_case(
            "SKYHOOK_REBOOT_MAX_ATTEMPTS",
            "0",
            "is not a positive integer; using the default (3)",
        ),
        warn_case(
            "SKYHOOK_REBOOT_MAX_ATTEMPTS",
            "-3",
            "is not a positive integer; using the default (3)",
        ),
        warn_case(
            "SKYHOOK_REBOOT_MAX_ATTEMPTS",
            "4294967296",
            "is not a positive integer; using the default (3)",
        ),
        warn_case(
            "SKYHOOK_AGENT_LOG_FORMAT",
            "xml",
            "is not text or json; using the default (text)",
        ),
        // A bad boolean is false with a warning, not an error: shown with a no-op mode so
        // that nothing runs.
        case(
            "SKYHOOK_AGENT_WRITE_LOGS=maybe",
            0,
            "SKYHOOK_AGENT_WRITE_LOGS=\"maybe\" is not true or false; treating it as false",
            |h: &FakeHost| {
                h.install(&Package::simple());
                h.agent().env("SKYHOOK_AGENT_WRITE_LOGS", "maybe").args([
                    "future-mode",
                    &h.root_str(),
                    COPY_DIR,
                ])
            },
        ),
    ];
    run_table("environment", cases);
}

// ---------------------------------------------------------------------------------------------
// SKYHOOK_RESOURCE_ID
// ---------------------------------------------------------------------------------------------

#[test]
fn malformed_resource_ids() {
    require_root!();
    let rid_case = |rid: OsString, message: &str| {
        let name = format!("SKYHOOK_RESOURCE_ID={rid:?}");
        case(name, 1, message, move |h: &FakeHost| {
            apply(h).env("SKYHOOK_RESOURCE_ID", rid.clone())
        })
    };
    let v = |s: &str| OsString::from(s);
    let shape = "must end in _PACKAGE_VERSION";
    let huge = "x".repeat(100_000);
    let cases = vec![
        case(
            "SKYHOOK_RESOURCE_ID unset",
            1,
            "SKYHOOK_RESOURCE_ID is not set: expected <prefix>_<package>_<version>, e.g. sk1-uid_pkg_1.0.0",
            |h: &FakeHost| apply(h).env_remove("SKYHOOK_RESOURCE_ID"),
        ),
        rid_case(v(""), "SKYHOOK_RESOURCE_ID is not set"),
        rid_case(v("abc"), shape),
        rid_case(v("abc_1.0.0"), shape),
        rid_case(v("_pkg_1.0.0"), shape),
        rid_case(v("abc__1.0.0"), shape),
        rid_case(v("abc_pkg_"), shape),
        rid_case(v("___"), shape),
        rid_case(v(&huge), shape),
        rid_case(
            v("abc_pkg/../../x_1.0.0"),
            "package name \"pkg/../../x\" must be a single path component",
        ),
        rid_case(
            v("abc_.._1.0.0"),
            "package name \"..\" must be a single path component",
        ),
        rid_case(
            v("abc_._1.0.0"),
            "package name \".\" must be a single path component",
        ),
        rid_case(
            v("abc_pkg_.."),
            "package version \"..\" must be a single path component",
        ),
        rid_case(non_utf8(b"abc_pkg\xff_1.0.0"), "is not valid UTF-8"),
        // For interrupts the whole ID names a directory.
        case(
            "interrupt with a resource ID that is a path",
            1,
            "resource ID \"a/../../b_pkg_1.0.0\" must be a single path component",
            |h: &FakeHost| {
                interrupt(h, b64(br#"{"type":"no_op"}"#))
                    .env("SKYHOOK_RESOURCE_ID", "a/../../b_pkg_1.0.0")
            },
        ),
    ];
    run_table("resource ID", cases);
}

// ---------------------------------------------------------------------------------------------
// INTERRUPT_DATA
// ---------------------------------------------------------------------------------------------

#[test]
fn malformed_interrupt_data() {
    const MALFORMED: &str =
        "serialized interrupt must be base64-encoded JSON with a \"type\" field";
    require_root!();
    let data_case = |name: &str, data: String, message: &str| {
        case(name, 1, message, move |h: &FakeHost| {
            interrupt(h, data.clone())
        })
    };
    let json_case = |name: &str, json: &[u8], message: &str| data_case(name, b64(json), message);
    let nested = format!(
        r#"{{"type":"no_op","x":{}{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let big_name = format!(
        r#"{{"type":"service_restart","services":["{}"]}}"#,
        "a".repeat(90_000)
    );
    let cases = vec![
        data_case("not base64", "!!!".into(), "invalid base64"),
        data_case("whitespace only", "   ".into(), MALFORMED),
        data_case(
            "URL-safe alphabet",
            "eyJ0eXBlIjoibm9fb3AifQ".replace('J', "-").replace('0', "_"),
            "invalid base64",
        ),
        data_case(
            "newline inside",
            "eyJ0eXBl\nIjoibm9fb3AifQ==".into(),
            "invalid base64",
        ),
        json_case("not JSON", b"reboot please", "invalid JSON"),
        // Empty JSON encodes to empty data: a usage error.
        case(
            "empty JSON",
            2,
            "interrupt data must not be empty",
            |h: &FakeHost| interrupt(h, b64(b"")),
        ),
        json_case("invalid UTF-8", b"{\"type\":\"no_op\xff\"}", "invalid JSON"),
        json_case(
            "trailing characters",
            br#"{"type":"no_op"}}"#,
            "invalid JSON",
        ),
        json_case("an array", b"[]", "not a JSON object"),
        json_case("a string", br#""node_restart""#, "not a JSON object"),
        json_case("no type", br#"{"services":[]}"#, "missing \"type\""),
        json_case(
            "type is a number",
            br#"{"type":5}"#,
            "\"type\" must be a string",
        ),
        json_case(
            "type is null",
            br#"{"type":null}"#,
            "\"type\" must be a string",
        ),
        json_case(
            "unknown type",
            br#"{"type":"reboot_now"}"#,
            "unknown interrupt \"reboot_now\" must be one of: no_op, node_restart, \
             restart_all_services, script_interrupt, service_restart",
        ),
        json_case(
            "type in another case",
            br#"{"type":"Node_Restart"}"#,
            "unknown interrupt \"Node_Restart\"",
        ),
        json_case(
            "services is a string",
            br#"{"type":"service_restart","services":"kubelet"}"#,
            MALFORMED,
        ),
        json_case(
            "services hold a number",
            br#"{"type":"service_restart","services":[1]}"#,
            MALFORMED,
        ),
        json_case(
            "deeply nested",
            nested.as_bytes(),
            "recursion limit exceeded",
        ),
        json_case(
            "a 90 kB service name",
            big_name.as_bytes(),
            "is not a valid systemd unit name",
        ),
    ];
    run_table("INTERRUPT_DATA", cases);
}

// ---------------------------------------------------------------------------------------------
// config.json
// ---------------------------------------------------------------------------------------------

fn step_json(name: &str, path: &str) -> Value {
    json!({
        "name": name, "path": path, "arguments": [], "returncodes": [0], "on_host": true,
        "env": {}, "idempotence": false, "upgrade_step": false
    })
}

/// A valid config: `apply: [s1.sh]`, `apply-check: [s1_check.sh]`.
fn valid_config() -> Value {
    json!({
        "schema_version": "v1",
        "package_name": "pkg",
        "package_version": "1.0.0",
        "expected_config_files": [],
        "modes": {
            "apply": [step_json("s1", "s1.sh")],
            "apply-check": [step_json("s1c", "s1_check.sh")],
        }
    })
}

/// `valid_config()` with the value at JSON `pointer` replaced (`None`: removed).
fn edited(pointer: &str, value: Option<Value>) -> Value {
    let mut doc = valid_config();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = doc.pointer_mut(parent).unwrap();
    match (target, value) {
        (Value::Object(map), Some(v)) => {
            map.insert(key.to_owned(), v);
        }
        (Value::Object(map), None) => {
            map.remove(key);
        }
        (Value::Array(items), Some(v)) => items[key.parse::<usize>().unwrap()] = v,
        _ => panic!("cannot edit {pointer}"),
    }
    doc
}

/// A case running `apply` with `bytes` as config.json; stderr must name the file and `message`.
fn config_case(name: &str, bytes: Vec<u8>, message: &str) -> Case {
    case(name, 1, message, move |h: &FakeHost| {
        h.install(&Package::simple().with_raw_config(&bytes));
        h.agent().args(["apply", &h.root_str(), COPY_DIR])
    })
}

fn doc_case(name: &str, doc: &Value, message: &str) -> Case {
    config_case(name, serde_json::to_vec_pretty(doc).unwrap(), message)
}

#[test]
fn malformed_config_json() {
    require_root!();
    let e = |p: &str, v: Value| edited(p, Some(v));
    let r = |p: &str| edited(p, None);
    let step0 = "/modes/apply/0";
    let mut only_checks = valid_config();
    only_checks["modes"]
        .as_object_mut()
        .unwrap()
        .remove("apply");
    let mut no_twin = valid_config();
    no_twin["modes"]
        .as_object_mut()
        .unwrap()
        .remove("apply-check");
    let mut upgrade_with_args = valid_config();
    upgrade_with_args["modes"]["upgrade"] = json!([step_json("u", "s1.sh")]);
    upgrade_with_args["modes"]["upgrade"][0]["upgrade_step"] = json!(true);
    upgrade_with_args["modes"]["upgrade"][0]["arguments"] = json!(["x"]);
    upgrade_with_args["modes"]["upgrade-check"] = json!([step_json("uc", "s1_check.sh")]);
    let nested = format!(
        r#"{{"schema_version":"v1","x":{}{}}}"#,
        "[".repeat(300),
        "]".repeat(300)
    );
    let huge_name = e(
        "/package_name",
        json!(format!("a/{}", "b".repeat(5_000_000))),
    );

    let cases = vec![
        case("config.json missing", 1, "config.json", |h: &FakeHost| {
            h.install(&Package::simple());
            std::fs::remove_file(h.path(&format!("{PKG_DIR}/config.json"))).unwrap();
            h.agent().args(["apply", &h.root_str(), COPY_DIR])
        }),
        case(
            "config.json is a directory",
            1,
            "config.json: Is a directory",
            |h: &FakeHost| {
                h.install(&Package::simple());
                let p = h.path(&format!("{PKG_DIR}/config.json"));
                std::fs::remove_file(&p).unwrap();
                std::fs::create_dir(&p).unwrap();
                h.agent().args(["apply", &h.root_str(), COPY_DIR])
            },
        ),
        case(
            "config.json is a fifo",
            1,
            "not a regular file",
            |h: &FakeHost| {
                h.install(&Package::simple());
                let p = h.path(&format!("{PKG_DIR}/config.json"));
                std::fs::remove_file(&p).unwrap();
                mkfifo(&p);
                h.agent().args(["apply", &h.root_str(), COPY_DIR])
            },
        ),
        case(
            "config.json is a symbolic link loop",
            1,
            "config.json",
            |h: &FakeHost| {
                h.install(&Package::simple());
                std::fs::remove_file(h.path(&format!("{PKG_DIR}/config.json"))).unwrap();
                h.symlink(&format!("{PKG_DIR}/config.json"), "config.json");
                h.agent().args(["apply", &h.root_str(), COPY_DIR])
            },
        ),
        config_case("empty file", Vec::new(), "config is not valid JSON"),
        config_case(
            "invalid UTF-8",
            b"{\"schema_version\": \"v1\xff\"}".to_vec(),
            "config is not valid UTF-8",
        ),
        config_case(
            "UTF-8 byte order mark",
            b"\xef\xbb\xbf{}".to_vec(),
            "config is not valid JSON",
        ),
        config_case(
            "trailing characters",
            b"{} {}".to_vec(),
            "config is not valid JSON",
        ),
        config_case(
            "truncated",
            br#"{"schema_version": "v1", "modes": {"#.to_vec(),
            "config is not valid JSON",
        ),
        config_case(
            "deeply nested",
            nested.into_bytes(),
            "recursion limit exceeded",
        ),
        config_case(
            "an array",
            b"[]".to_vec(),
            "expected a JSON object, found an array",
        ),
        config_case(
            "a number",
            b"5".to_vec(),
            "expected a JSON object, found number 5",
        ),
        config_case(
            "null",
            b"null".to_vec(),
            "expected a JSON object, found null",
        ),
        config_case(
            "10 MB of whitespace around a string",
            [b" ".repeat(10 << 20), b"\"v1\"".to_vec()].concat(),
            "expected a JSON object, found string \"v1\"",
        ),
        doc_case(
            "schema_version missing",
            &r("/schema_version"),
            "schema_version: required field is missing",
        ),
        doc_case(
            "schema_version a number",
            &e("/schema_version", json!(1)),
            "schema_version: expected a string, found number 1",
        ),
        doc_case(
            "schema_version v2",
            &e("/schema_version", json!("v2")),
            "schema_version: unknown skyhook-agent schema version: v2",
        ),
        doc_case(
            "package_name missing",
            &r("/package_name"),
            "package_name: required field is missing",
        ),
        doc_case(
            "package_name null",
            &e("/package_name", Value::Null),
            "package_name: expected a string, found null",
        ),
        doc_case(
            "package_name a path",
            &e("/package_name", json!("a/b")),
            "package_name: \"a/b\" must be a single path component",
        ),
        doc_case(
            "package_name ..",
            &e("/package_name", json!("..")),
            "package_name: \"..\" must be a single path component",
        ),
        doc_case(
            "package_name empty",
            &e("/package_name", json!("")),
            "package_name: \"\" must be a single path component",
        ),
        doc_case(
            "package_name with NUL",
            &e("/package_name", json!("p\u{0}")),
            "package_name: \"p\\u0000\" must be a single path component",
        ),
        doc_case("huge package_name", &huge_name, "package_name: \"a/bbbbb"),
        doc_case(
            "package_version not semver",
            &e("/package_version", json!("1.0")),
            "package_version: \"1.0\" is not a valid semantic version",
        ),
        doc_case(
            "package_version a path",
            &e("/package_version", json!("../1.0.0")),
            "is not a valid semantic version",
        ),
        doc_case(
            "package_version a number",
            &e("/package_version", json!(1)),
            "package_version: expected a string",
        ),
        doc_case(
            "expected_config_files missing",
            &r("/expected_config_files"),
            "expected_config_files: required field is missing",
        ),
        doc_case(
            "expected_config_files a string",
            &e("/expected_config_files", json!("a")),
            "expected_config_files: expected an array",
        ),
        doc_case(
            "expected_config_files holding a number",
            &e("/expected_config_files", json!([1])),
            "expected_config_files[0]: expected a string, found number 1",
        ),
        doc_case(
            "modes missing",
            &r("/modes"),
            "modes: required field is missing",
        ),
        doc_case(
            "modes an array",
            &e("/modes", json!([])),
            "modes: expected an object, found an array",
        ),
        doc_case(
            "modes empty",
            &e("/modes", json!({})),
            "There are no defined steps",
        ),
        doc_case(
            "unknown mode",
            &e("/modes/apply-later", json!([])),
            "modes.apply-later: unknown stage mode \"apply-later\"",
        ),
        doc_case(
            "interrupt as a mode",
            &e("/modes/interrupt", json!([])),
            "modes.interrupt: unknown stage mode \"interrupt\"",
        ),
        doc_case(
            "mode not an array",
            &e("/modes/apply", json!({})),
            "modes.apply: expected an array, found an object",
        ),
        doc_case(
            "step not an object",
            &e(step0, json!("s1.sh")),
            "modes.apply[0]: expected an object, found string \"s1.sh\"",
        ),
        doc_case(
            "only check modes",
            &only_checks,
            "modes: only check modes have steps",
        ),
        doc_case(
            "mode without its check twin",
            &no_twin,
            "modes.apply-check: must have steps because modes.apply has steps",
        ),
        doc_case(
            "step name missing",
            &r("/modes/apply/0/name"),
            "modes.apply[0].name: required field is missing",
        ),
        doc_case(
            "step name with a space",
            &e("/modes/apply/0/name", json!("s 1")),
            "modes.apply[0].name: \"s 1\" must match",
        ),
        doc_case(
            "step name with a slash",
            &e("/modes/apply/0/name", json!("../s1")),
            "must match",
        ),
        doc_case(
            "step path missing",
            &r("/modes/apply/0/path"),
            "modes.apply[0].path: required field is missing",
        ),
        doc_case(
            "step path empty",
            &e("/modes/apply/0/path", json!("")),
            "modes.apply[0].path: must not be empty",
        ),
        doc_case(
            "step path absolute",
            &e("/modes/apply/0/path", json!("/bin/sh")),
            "modes.apply[0].path: \"/bin/sh\" must be a relative path",
        ),
        doc_case(
            "step path with NUL",
            &e("/modes/apply/0/path", json!("s1.sh\u{0}")),
            "must not contain NUL",
        ),
        doc_case(
            "step path a number",
            &e("/modes/apply/0/path", json!(7)),
            "modes.apply[0].path: expected a string, found number 7",
        ),
        doc_case(
            "arguments a string",
            &e("/modes/apply/0/arguments", json!("a b")),
            "modes.apply[0].arguments: expected an array",
        ),
        doc_case(
            "arguments holding a number",
            &e("/modes/apply/0/arguments", json!(["a", 2])),
            "modes.apply[0].arguments[1]: expected a string, found number 2",
        ),
        doc_case(
            "argument with NUL",
            &e("/modes/apply/0/arguments", json!(["a\u{0}b"])),
            "modes.apply[0].arguments[0]: \"a\\u0000b\" must not contain NUL",
        ),
        doc_case(
            "returncodes empty",
            &e("/modes/apply/0/returncodes", json!([])),
            "modes.apply[0].returncodes: must contain at least one code",
        ),
        doc_case(
            "returncodes holding a string",
            &e("/modes/apply/0/returncodes", json!(["0"])),
            "modes.apply[0].returncodes[0]: expected an integer, found string \"0\"",
        ),
        doc_case(
            "returncodes holding a float",
            &e("/modes/apply/0/returncodes", json!([0.5])),
            "expected an integer, found number 0.5",
        ),
        config_case(
            "returncodes beyond i64",
            String::from_utf8(serde_json::to_vec(&valid_config()).unwrap())
                .unwrap()
                .replacen(
                    "\"returncodes\":[0]",
                    "\"returncodes\":[9223372036854775808]",
                    1,
                )
                .into_bytes(),
            "modes.apply[0].returncodes[0]: 9223372036854775808 is out of range",
        ),
        config_case(
            "returncodes beyond u64",
            String::from_utf8(serde_json::to_vec(&valid_config()).unwrap())
                .unwrap()
                .replacen("\"returncodes\":[0]", "\"returncodes\":[1e400]", 1)
                .into_bytes(),
            "config is not valid JSON",
        ),
        doc_case(
            "on_host a string",
            &e("/modes/apply/0/on_host", json!("true")),
            "modes.apply[0].on_host: expected a boolean, found string \"true\"",
        ),
        doc_case(
            "idempotence null",
            &e("/modes/apply/0/idempotence", Value::Null),
            "modes.apply[0].idempotence: expected a boolean, found null",
        ),
        doc_case(
            "upgrade_step missing",
            &r("/modes/apply/0/upgrade_step"),
            "modes.apply[0].upgrade_step: required field is missing",
        ),
        doc_case(
            "upgrade_step outside upgrade",
            &e("/modes/apply/0/upgrade_step", json!(true)),
            "modes.apply[0].upgrade_step: may only be true in modes.upgrade and modes.upgrade-check",
        ),
        doc_case(
            "upgrade step with arguments",
            &upgrade_with_args,
            "modes.upgrade[0].arguments: must be empty for an upgrade step",
        ),
        doc_case(
            "env a string",
            &e("/modes/apply/0/env", json!("A=1")),
            "modes.apply[0].env: expected an object",
        ),
        doc_case(
            "env value a number",
            &e("/modes/apply/0/env", json!({"A": 1})),
            "modes.apply[0].env.A: expected a string, found number 1",
        ),
        doc_case(
            "env name empty",
            &e("/modes/apply/0/env", json!({"": "x"})),
            "is not a valid environment variable name",
        ),
        doc_case(
            "env name with =",
            &e("/modes/apply/0/env", json!({"A=B": "x"})),
            "\"A=B\" is not a valid environment variable name",
        ),
        doc_case(
            "env value with NUL",
            &e("/modes/apply/0/env", json!({"A": "x\u{0}"})),
            "must not contain NUL",
        ),
    ];
    run_table("config.json", cases);
}

fn mkfifo(path: &std::path::Path) {
    let status = std::process::Command::new("/bin/busybox")
        .args(["mkfifo", path.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
}

// ---------------------------------------------------------------------------------------------
// Step files and expected config files
// ---------------------------------------------------------------------------------------------

/// A case where `apply` runs the simple package after `prepare` changed its files.
fn files_case(name: &str, message: &str, prepare: impl Fn(&FakeHost) + 'static) -> Case {
    case(name, 1, message, move |h: &FakeHost| {
        h.install(&Package::simple());
        prepare(h);
        h.agent().args(["apply", &h.root_str(), COPY_DIR])
    })
}

#[test]
fn malformed_step_and_config_files() {
    require_root!();
    let step = format!("{PKG_DIR}/skyhook_dir/s1.sh");
    let check = format!("{PKG_DIR}/skyhook_dir/s1_check.sh");
    let with_files = |name: &str, message: &str, entry: &'static str, prepare: fn(&FakeHost)| {
        case(name, 1, message, move |h: &FakeHost| {
            h.install(&Package::simple().expect_config_file(entry));
            prepare(h);
            h.agent().args(["apply", &h.root_str(), COPY_DIR])
        })
    };
    let (s1, s2, s3, s4, s5, s6, s7) = (
        step.clone(),
        step.clone(),
        step.clone(),
        step.clone(),
        step.clone(),
        step.clone(),
        check.clone(),
    );
    let cases = vec![
        files_case(
            "step file missing",
            "modes.apply[0].path: step file \"s1.sh\" does not exist in",
            move |h| {
                std::fs::remove_file(h.path(&s1)).unwrap();
            },
        ),
        files_case(
            "step file is a directory",
            "step file \"s1.sh\" in",
            move |h| {
                std::fs::remove_file(h.path(&s2)).unwrap();
                h.mkdir(&s2);
            },
        ),
        files_case("step file is a fifo", "is not a regular file", move |h| {
            std::fs::remove_file(h.path(&s3)).unwrap();
            mkfifo(&h.path(&s3));
        }),
        files_case(
            "step file is a symbolic link loop",
            "step file \"s1.sh\" in",
            move |h| {
                std::fs::remove_file(h.path(&s4)).unwrap();
                h.symlink(&s4, "s1.sh");
            },
        ),
        files_case(
            "step file is a dangling link",
            "step file \"s1.sh\" does not exist",
            move |h| {
                std::fs::remove_file(h.path(&s5)).unwrap();
                h.symlink(&s5, "missing.sh");
            },
        ),
        files_case(
            "step file is a link to a directory",
            "is not a regular file",
            move |h| {
                std::fs::remove_file(h.path(&s6)).unwrap();
                h.symlink(&s6, ".");
            },
        ),
        files_case(
            "check step file missing",
            "modes.apply-check[0].path: step file \"s1_check.sh\" does not exist",
            move |h| {
                std::fs::remove_file(h.path(&s7)).unwrap();
            },
        ),
        case(
            "step below a file",
            1,
            "step file \"s1.sh/x.sh\" does not exist",
            |h: &FakeHost| {
                let pkg = Package::new()
                    .step("apply", Step::new("s1.sh"))
                    .step("apply", Step::new("s1.sh/x.sh"))
                    .step("apply-check", Step::new("s1_check.sh"))
                    .without_script("s1.sh/x.sh");
                h.install(&pkg);
                h.agent().args(["apply", &h.root_str(), COPY_DIR])
            },
        ),
        case(
            "skyhook_dir missing",
            1,
            "does not exist",
            |h: &FakeHost| {
                h.install(&Package::simple());
                std::fs::remove_dir_all(h.path(&format!("{PKG_DIR}/skyhook_dir"))).unwrap();
                h.agent().args(["apply", &h.root_str(), COPY_DIR])
            },
        ),
        with_files(
            "expected config file missing",
            "expected config file \"node.conf\" was not found in the configmaps directory",
            "node.conf",
            |_| {},
        ),
        with_files(
            "expected config file escaping",
            "expected config file \"../config.json\" must be a non-empty relative path without \"..\" components",
            "../config.json",
            |_| {},
        ),
        with_files(
            "expected config file absolute",
            "expected config file \"/etc/passwd\" must be a non-empty relative path",
            "/etc/passwd",
            |_| {},
        ),
        with_files(
            "expected config file empty",
            "expected config file \"\" must be a non-empty relative path",
            "",
            |_| {},
        ),
        with_files(
            "expected config file is a directory",
            "(found a directory)",
            "dir.conf",
            |h| {
                h.mkdir(&format!("{PKG_DIR}/configmaps/dir.conf"));
            },
        ),
        with_files(
            "expected config file is a fifo",
            "(found a fifo)",
            "fifo.conf",
            |h| {
                mkfifo(&h.path(&format!("{PKG_DIR}/configmaps/fifo.conf")));
            },
        ),
        with_files(
            "expected config file is a link loop",
            "symbolic link cycle at",
            "loop.conf",
            |h| {
                h.symlink(&format!("{PKG_DIR}/configmaps/loop.conf"), "loop.conf");
            },
        ),
    ];
    run_table("step and config files", cases);
}
