//! Malformed input, as a table (SPEC §1.1–§1.2, §2, §4, §6, §7, §9.1–§9.2): one row per bad
//! input — argv, environment values, `SKYHOOK_RESOURCE_ID`, `INTERRUPT_DATA`, config.json
//! (every rule of SPEC §7, wrong types, invalid UTF-8, huge and deeply nested documents) and
//! step files (missing, a directory, a fifo, a symbolic link loop, ...) — with the exit code
//! and the message substring it must produce.
//!
//! Every row runs against its own fake host, and ROOT (and the scratch dir outside it, the
//! agent's cwd) is hashed before and after: a rejected input writes nothing — no START, no
//! lock, no log, no chmod of a step file. A stage may print the banner before it finds a bad
//! config, but nothing else reaches stdout. Usage errors (exit 2) print nothing on stdout;
//! environment errors and the arguments pre-flight validates (SPEC §6 step 1) are found before
//! the banner. The message is found on one stderr line, and stderr stays under 8 KiB for every
//! row, the huge inputs included (but for the rows of a known defect, below).
//!
//! The test runs every row and reports all failing rows at once.

use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStringExt as _;
use std::os::unix::fs::symlink;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{AgentCmd, COPY_DIR, FakeHost, PKG_DIR, Package, b64, interrupt_data};

/// One argv element or environment value.
#[derive(Clone, Copy)]
enum Val {
    /// Text; `{ROOT}` and `{OUTSIDE}` stand for the fake host's ROOT and the scratch dir
    /// outside it.
    Text(&'static str),
    /// Raw bytes (not UTF-8).
    Bytes(&'static [u8]),
    /// `INTERRUPT_DATA`: standard base64 of these JSON bytes.
    Payload(&'static [u8]),
    /// Built per host (inputs too large to spell out).
    Make(fn() -> OsString),
}

impl Val {
    fn resolve(self, host: &FakeHost) -> OsString {
        match self {
            Val::Text(t) => t
                .replace("{ROOT}", &host.root_str())
                .replace("{OUTSIDE}", host.outside().to_str().unwrap())
                .into(),
            Val::Bytes(b) => OsString::from_vec(b.to_vec()),
            Val::Payload(json) => crate::util::b64(json).into(),
            Val::Make(f) => f(),
        }
    }
}

/// What may reach stdout.
#[derive(Clone, Copy, Debug)]
enum Stdout {
    /// Nothing: usage errors and environment errors come before the banner (SPEC §1.1, §6.1).
    Empty,
    /// The startup banner (SPEC §3) and nothing after it.
    Banner,
}

/// One malformed input.
struct Case {
    name: &'static str,
    args: &'static [Val],
    /// Environment changes over the base environment; `None` removes the variable.
    env: &'static [(&'static str, Option<Val>)],
    /// Prepares the fake host (package directory, step files, ...) before the "before" hash.
    setup: fn(&FakeHost),
    code: i32,
    /// A substring of one stderr line.
    message: &'static str,
    stdout: Stdout,
}

const ROOT: Val = Val::Text("{ROOT}");
const CD: Val = Val::Text(COPY_DIR);
const APPLY: &[Val] = &[Val::Text("apply"), ROOT, CD];

/// A usage error (exit 2) against a valid package.
const USAGE: Case = Case {
    name: "",
    args: APPLY,
    env: &[],
    setup: valid,
    code: 2,
    message: "",
    stdout: Stdout::Empty,
};
/// A bad environment value: exit 1 before the banner.
const ENV: Case = Case { code: 1, ..USAGE };
/// An argument that pre-flight step 1 rejects (SPEC §6): exit 1 before the banner.
const VALIDATION: Case = ENV;
/// A failure after the banner (package data, config.json, step files).
const STAGE: Case = Case {
    code: 1,
    stdout: Stdout::Banner,
    ..USAGE
};
/// A rejected `INTERRUPT_DATA`: exit 1 after the banner (SPEC §9.2).
const INTERRUPT: Case = Case {
    setup: package_dir_only,
    ..STAGE
};

/// The prefix of every §9.2 decoding error.
macro_rules! malformed {
    ($detail:literal) => {
        concat!(
            r#"serialized interrupt must be base64-encoded JSON with a "type" field: "#,
            $detail
        )
    };
}

static CASES: &[Case] = &[
    // -----------------------------------------------------------------------------------------
    // argv (SPEC §1.1): exit 2, nothing on stdout
    // -----------------------------------------------------------------------------------------
    Case {
        name: "argv: no arguments",
        args: &[],
        message: "expected 2, 3, or 4 arguments; received 0",
        ..USAGE
    },
    Case {
        name: "argv: one argument",
        args: &[Val::Text("apply")],
        message: "expected 2, 3, or 4 arguments; received 1",
        ..USAGE
    },
    Case {
        name: "argv: five arguments",
        args: &[Val::Text("apply"), ROOT, CD, Val::Text("x"), Val::Text("y")],
        message: "expected 2, 3, or 4 arguments; received 5",
        ..USAGE
    },
    Case {
        name: "argv: --version with an argument",
        args: &[Val::Text("--version"), Val::Text("apply")],
        message: "--version takes no arguments",
        ..USAGE
    },
    Case {
        name: "argv: relative root mount",
        args: &[Val::Text("apply"), Val::Text("root"), CD],
        message: r#"root mount "root" is not absolute"#,
        ..USAGE
    },
    Case {
        name: "argv: empty root mount",
        args: &[Val::Text("apply"), Val::Text(""), CD],
        message: r#"root mount "" is not absolute"#,
        ..USAGE
    },
    Case {
        name: "argv: relative copy directory",
        args: &[
            Val::Text("apply"),
            ROOT,
            Val::Text("var/lib/skyhook/sk1/pkg"),
        ],
        message: r#"copy directory "var/lib/skyhook/sk1/pkg" is not absolute"#,
        ..USAGE
    },
    Case {
        name: "argv: legacy form with a relative copy directory",
        args: &[Val::Text("apply"), Val::Text("./pkg")],
        message: r#"copy directory "./pkg" is not absolute"#,
        ..USAGE
    },
    Case {
        name: "argv: interrupt with empty data",
        args: &[Val::Text("interrupt"), ROOT, CD, Val::Text("")],
        message: "interrupt data must not be empty",
        ..USAGE
    },
    Case {
        name: "argv: interrupt without data",
        args: &[Val::Text("interrupt"), CD],
        message: "interrupt data must not be empty",
        ..USAGE
    },
    Case {
        name: "argv: stage with interrupt data",
        args: &[
            Val::Text("apply"),
            ROOT,
            CD,
            Val::Payload(br#"{"type":"no_op"}"#),
        ],
        message: r#"stage "apply" does not accept interrupt data"#,
        ..USAGE
    },
    Case {
        name: "argv: a subcommand's typo in the MODE position",
        args: &[Val::Text("staus"), ROOT, CD],
        message: r#"unknown command "staus"; did you mean "status"?"#,
        ..USAGE
    },
    Case {
        name: "argv: mode not UTF-8",
        args: &[Val::Bytes(b"appl\xff"), ROOT, CD],
        message: "argument \"appl\u{fffd}\" is not valid UTF-8",
        ..USAGE
    },
    Case {
        name: "argv: root mount not UTF-8",
        args: &[Val::Text("apply"), Val::Bytes(b"/tmp/\xc3("), CD],
        message: "argument \"/tmp/\u{fffd}(\" is not valid UTF-8",
        ..USAGE
    },
    Case {
        name: "argv: interrupt data not UTF-8",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Bytes(b"eyJ0\xfe\xff"),
        ],
        message: "is not valid UTF-8",
        ..USAGE
    },
    // Well-formed argv whose paths cannot be used: exit 1 (SPEC §1.2, §5, §6).
    Case {
        name: "argv: copy directory climbing out of the host root",
        args: &[Val::Text("apply"), ROOT, Val::Text("/var/../../etc")],
        message: "copy directory /var/../../etc: /var/../../etc escapes the host root",
        ..ENV
    },
    Case {
        name: "argv: copy directory is the host root",
        args: &[Val::Text("apply"), ROOT, Val::Text("/")],
        message: "the package directory cannot be the host root",
        ..VALIDATION
    },
    Case {
        name: "argv: root mount does not exist",
        args: &[Val::Text("apply"), Val::Text("{OUTSIDE}/no-such-root"), CD],
        message: "inspecting host root",
        ..VALIDATION
    },
    Case {
        name: "argv: root mount is a regular file",
        args: &[Val::Text("apply"), Val::Text("{OUTSIDE}/root-file"), CD],
        setup: |h| fs::write(h.outside().join("root-file"), "not a directory").unwrap(),
        message: "root-file is a regular file, not a directory",
        ..VALIDATION
    },
    Case {
        name: "argv: copy directory is a regular file",
        setup: |h| h.write(PKG_DIR, "not a directory"),
        message: "package directory /var/lib/skyhook/sk1/pkg-1.0.0-uid1-1 exists and is a regular file, not a directory",
        ..STAGE
    },
    // -----------------------------------------------------------------------------------------
    // SKYHOOK_RESOURCE_ID (SPEC §4): exit 1, before the banner
    // -----------------------------------------------------------------------------------------
    Case {
        name: "resource ID: unset",
        env: &[("SKYHOOK_RESOURCE_ID", None)],
        message: "SKYHOOK_RESOURCE_ID is not set: expected <prefix>_<package>_<version>, e.g. sk1-uid_pkg_1.0.0",
        ..ENV
    },
    Case {
        name: "resource ID: no underscore",
        env: &[("SKYHOOK_RESOURCE_ID", Some(Val::Text("abc")))],
        message: r#"resource ID "abc" must end in _PACKAGE_VERSION"#,
        ..ENV
    },
    Case {
        name: "resource ID: no prefix",
        env: &[("SKYHOOK_RESOURCE_ID", Some(Val::Text("_pkg_1.0.0")))],
        message: r#"resource ID "_pkg_1.0.0" must end in _PACKAGE_VERSION"#,
        ..ENV
    },
    Case {
        name: "resource ID: empty package",
        env: &[("SKYHOOK_RESOURCE_ID", Some(Val::Text("abc__1.0.0")))],
        message: r#"resource ID "abc__1.0.0" must end in _PACKAGE_VERSION"#,
        ..ENV
    },
    Case {
        name: "resource ID: empty version",
        env: &[("SKYHOOK_RESOURCE_ID", Some(Val::Text("abc_pkg_")))],
        message: r#"resource ID "abc_pkg_" must end in _PACKAGE_VERSION"#,
        ..ENV
    },
    Case {
        name: "resource ID: package is ..",
        env: &[("SKYHOOK_RESOURCE_ID", Some(Val::Text("abc_.._1.0.0")))],
        message: r#"package name ".." must be a single path component"#,
        ..ENV
    },
    Case {
        name: "resource ID: package climbs with a slash",
        env: &[(
            "SKYHOOK_RESOURCE_ID",
            Some(Val::Text("abc_../../etc_1.0.0")),
        )],
        message: r#"package name "../../etc" must be a single path component"#,
        ..ENV
    },
    Case {
        name: "resource ID: version is .",
        env: &[("SKYHOOK_RESOURCE_ID", Some(Val::Text("abc_pkg_.")))],
        message: r#"package version "." must be a single path component"#,
        ..ENV
    },
    Case {
        name: "resource ID: version with a slash",
        env: &[("SKYHOOK_RESOURCE_ID", Some(Val::Text("abc_pkg_1.0/..")))],
        message: r#"package version "1.0/.." must be a single path component"#,
        ..ENV
    },
    Case {
        name: "resource ID: not UTF-8",
        env: &[("SKYHOOK_RESOURCE_ID", Some(Val::Bytes(b"abc_pkg_\xff")))],
        message: "environment variable SKYHOOK_RESOURCE_ID=\"abc_pkg_\u{fffd}\": is not valid UTF-8",
        ..ENV
    },
    Case {
        name: "resource ID: interrupt with a slash in the prefix",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(br#"{"type":"no_op"}"#),
        ],
        env: &[("SKYHOOK_RESOURCE_ID", Some(Val::Text("../../x_pkg_1.0.0")))],
        setup: package_dir_only,
        message: r#"resource ID "../../x_pkg_1.0.0" must be a single path component"#,
        ..ENV
    },
    // -----------------------------------------------------------------------------------------
    // Other environment values (SPEC §2): exit 1, before the banner
    // -----------------------------------------------------------------------------------------
    Case {
        name: "env: SKYHOOK_ROOT_DIR climbs out of the host root",
        env: &[("SKYHOOK_ROOT_DIR", Some(Val::Text("../../x")))],
        message: r#"environment variable SKYHOOK_ROOT_DIR="../../x": escapes the host root"#,
        ..ENV
    },
    Case {
        name: "env: SKYHOOK_ROOT_DIR climbs out after descending",
        env: &[(
            "SKYHOOK_ROOT_DIR",
            Some(Val::Text("/var/lib/../../../work")),
        )],
        message: r#"SKYHOOK_ROOT_DIR="/var/lib/../../../work": escapes the host root"#,
        ..ENV
    },
    Case {
        name: "env: SKYHOOK_LOG_DIR is /..",
        env: &[("SKYHOOK_LOG_DIR", Some(Val::Text("/..")))],
        message: r#"environment variable SKYHOOK_LOG_DIR="/..": escapes the host root"#,
        ..ENV
    },
    Case {
        name: "env: SKYHOOK_ROOT_DIR not UTF-8",
        env: &[("SKYHOOK_ROOT_DIR", Some(Val::Bytes(b"/var/lib/\xff")))],
        message: "environment variable SKYHOOK_ROOT_DIR=\"/var/lib/\u{fffd}\": is not valid UTF-8",
        ..ENV
    },
    Case {
        name: "env: SKYHOOK_LOG_DIR not UTF-8",
        env: &[("SKYHOOK_LOG_DIR", Some(Val::Bytes(b"\x80log")))],
        message: "environment variable SKYHOOK_LOG_DIR=\"\u{fffd}log\": is not valid UTF-8",
        ..ENV
    },
    Case {
        name: "env: relative SKYHOOK_DATA_DIR",
        env: &[("SKYHOOK_DATA_DIR", Some(Val::Text("skyhook-package")))],
        message: r#"environment variable SKYHOOK_DATA_DIR="skyhook-package": must be an absolute path"#,
        ..ENV
    },
    Case {
        name: "env: boolean not UTF-8",
        env: &[("COPY_RESOLV", Some(Val::Bytes(b"tru\xe9")))],
        message: "environment variable COPY_RESOLV=\"tru\u{fffd}\": is not valid UTF-8",
        ..ENV
    },
    Case {
        name: "env: legacy invocation with a missing SKYHOOK_DATA_DIR",
        env: &[(
            "SKYHOOK_DATA_DIR",
            Some(Val::Text("{OUTSIDE}/no-such-package")),
        )],
        setup: nothing,
        message: "/no-such-package\" to copy it from does not exist either",
        ..STAGE
    },
    // -----------------------------------------------------------------------------------------
    // INTERRUPT_DATA (SPEC §9.1–§9.2): exit 1 after the banner, nothing run
    // -----------------------------------------------------------------------------------------
    Case {
        name: "interrupt data: not base64",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Text("!!! not base64 !!!"),
        ],
        message: malformed!("invalid base64"),
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: URL-safe base64 alphabet",
        // `{"type":"no_op","x":"??>"}` in the URL-safe alphabet (`_` for `/`, `-` for `+`).
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Text("eyJ0eXBlIjoibm9fb3AiLCJ4IjoiPz8-In0_"),
        ],
        message: malformed!("invalid base64"),
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: base64 of text that is not JSON",
        args: &[Val::Text("interrupt"), ROOT, CD, Val::Payload(b"{not json")],
        message: malformed!("invalid JSON"),
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: JSON followed by garbage",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(br#"{"type":"no_op"} {"type":"node_restart"}"#),
        ],
        message: malformed!("invalid JSON: trailing characters"),
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: JSON that is not UTF-8",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(b"{\"type\":\"no_op\",\"x\":\"\xff\"}"),
        ],
        message: malformed!("invalid JSON"),
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: a JSON array",
        args: &[Val::Text("interrupt"), ROOT, CD, Val::Payload(b"[1, 2]")],
        message: malformed!("not a JSON object"),
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: a JSON string",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(br#""node_restart""#),
        ],
        message: malformed!("not a JSON object"),
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: missing type",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(br#"{"services":["kubelet"]}"#),
        ],
        message: malformed!(r#"missing "type""#),
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: type is a number",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(br#"{"type":7}"#),
        ],
        message: malformed!(r#""type" must be a string"#),
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: type is null",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(br#"{"type":null}"#),
        ],
        message: malformed!(r#""type" must be a string"#),
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: unknown type",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(br#"{"type":"bogus"}"#),
        ],
        message: r#"unknown interrupt "bogus" must be one of: no_op, node_restart, restart_all_services, script_interrupt, service_restart"#,
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: type in the wrong case",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(br#"{"type":"Node_Restart"}"#),
        ],
        message: r#"unknown interrupt "Node_Restart" must be one of: "#,
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: services is a string",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(br#"{"type":"service_restart","services":"kubelet"}"#),
        ],
        message: malformed!(r#"field "services": expected an array, found the string "kubelet""#),
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: a service is a number",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(br#"{"type":"service_restart","services":["kubelet",1]}"#),
        ],
        message: malformed!(r#"field "services[1]": expected a string, found the integer 1"#),
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: service name is an option",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(br#"{"type":"service_restart","services":["kubelet","--now"]}"#),
        ],
        message: r#"invalid service_restart interrupt: services: "--now" must not start with '-'"#,
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: service name with a shell separator",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(br#"{"type":"service_restart","services":["x;reboot"]}"#),
        ],
        message: r#"invalid service_restart interrupt: services: "x;reboot" is not a valid systemd unit name"#,
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: service name with a slash",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(br#"{"type":"service_restart","services":["../../bin/sh"]}"#),
        ],
        message: r#"services: "../../bin/sh" is not a valid systemd unit name"#,
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: empty service name",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Payload(br#"{"type":"service_restart","services":[""]}"#),
        ],
        message: "invalid service_restart interrupt: services: a service name is empty",
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: deeply nested unknown field",
        args: &[Val::Text("interrupt"), ROOT, CD, Val::Make(nested_payload)],
        message: malformed!("invalid JSON: recursion limit exceeded"),
        ..INTERRUPT
    },
    Case {
        name: "interrupt data: huge service list ending in an option",
        args: &[
            Val::Text("interrupt"),
            ROOT,
            CD,
            Val::Make(huge_service_payload),
        ],
        message: r#"invalid service_restart interrupt: services: "-H" must not start with '-'"#,
        ..INTERRUPT
    },
    // -----------------------------------------------------------------------------------------
    // config.json (SPEC §6.6, §7): exit 1, the banner only
    // -----------------------------------------------------------------------------------------
    Case {
        name: "config: missing",
        setup: |h| {
            valid(h);
            fs::remove_file(h.path(&format!("{PKG_DIR}/config.json"))).unwrap();
        },
        message: "config.json: No such file or directory",
        ..STAGE
    },
    Case {
        name: "config: a directory",
        setup: |h| {
            valid(h);
            fs::remove_file(h.path(&format!("{PKG_DIR}/config.json"))).unwrap();
            h.mkdir(&format!("{PKG_DIR}/config.json"));
        },
        message: "config.json: Is a directory",
        ..STAGE
    },
    Case {
        name: "config: a fifo",
        // Opening a fifo for reading blocks until a writer comes: the row's timeout catches it.
        setup: |h| {
            valid(h);
            let config = h.path(&format!("{PKG_DIR}/config.json"));
            fs::remove_file(&config).unwrap();
            mkfifo(&config);
        },
        message: "config.json: a fifo, not a regular file",
        ..STAGE
    },
    Case {
        name: "config: empty file",
        setup: |h| raw(h, b""),
        message: "config.json: config is not valid JSON: EOF while parsing",
        ..STAGE
    },
    Case {
        name: "config: truncated JSON",
        setup: |h| raw(h, br#"{"schema_version": "v1", "modes": {"#),
        message: "config.json: config is not valid JSON",
        ..STAGE
    },
    Case {
        name: "config: not UTF-8",
        setup: |h| raw(h, b"{\"schema_version\": \"v\xff1\"}"),
        message: "config.json: config is not valid UTF-8",
        ..STAGE
    },
    Case {
        name: "config: a JSON array",
        setup: |h| raw(h, b"[]"),
        message: "config.json: expected a JSON object, found an array",
        ..STAGE
    },
    Case {
        name: "config: JSON null",
        setup: |h| raw(h, b"null"),
        message: "config.json: expected a JSON object, found null",
        ..STAGE
    },
    Case {
        name: "config: deeply nested document",
        setup: |h| {
            let depth = 100_000;
            let doc = format!(
                r#"{{"schema_version":"v1","x":{}{}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            );
            raw(h, doc.as_bytes());
        },
        message: "config.json: config is not valid JSON: recursion limit exceeded",
        ..STAGE
    },
    Case {
        name: "config: huge document with one bad entry at the end",
        setup: |h| {
            edited(h, |c| {
                let mut files: Vec<Value> =
                    (0..150_000).map(|i| json!(format!("{i}.conf"))).collect();
                files.push(json!(1));
                c["expected_config_files"] = Value::Array(files);
            });
        },
        message: "config.json: expected_config_files[150000]: expected a string, found number 1",
        ..STAGE
    },
    Case {
        name: "config: 1 MiB package name",
        setup: |h| {
            edited(h, |c| {
                c["package_name"] = json!(format!("{}/", "a".repeat(1 << 20)));
            });
        },
        message: r#"aaaa"... must be a single path component"#,
        ..STAGE
    },
    Case {
        name: "config: unknown schema version",
        setup: |h| edited(h, |c| c["schema_version"] = json!("v2")),
        message: "config.json: schema_version: unknown skyhook-agent schema version: v2",
        ..STAGE
    },
    Case {
        name: "config: schema version is a number",
        setup: |h| edited(h, |c| c["schema_version"] = json!(1)),
        message: "schema_version: expected a string, found number 1",
        ..STAGE
    },
    Case {
        name: "config: schema version missing",
        setup: |h| {
            edited(h, |c| {
                drop(c.as_object_mut().unwrap().remove("schema_version"));
            });
        },
        message: "schema_version: required field is missing",
        ..STAGE
    },
    Case {
        name: "config: package name climbs",
        setup: |h| edited(h, |c| c["package_name"] = json!("../../../../etc")),
        message: r#"package_name: "../../../../etc" must be a single path component"#,
        ..STAGE
    },
    Case {
        name: "config: package name is ..",
        setup: |h| edited(h, |c| c["package_name"] = json!("..")),
        message: r#"package_name: ".." must be a single path component"#,
        ..STAGE
    },
    Case {
        name: "config: package name is empty",
        setup: |h| edited(h, |c| c["package_name"] = json!("")),
        message: r#"package_name: "" must be a single path component"#,
        ..STAGE
    },
    Case {
        name: "config: package name with NUL",
        setup: |h| edited(h, |c| c["package_name"] = json!("pkg\u{0}x")),
        message: "package_name: \"pkg\\u0000x\" must be a single path component",
        ..STAGE
    },
    Case {
        name: "config: package name is a number",
        setup: |h| edited(h, |c| c["package_name"] = json!(7)),
        message: "package_name: expected a string, found number 7",
        ..STAGE
    },
    Case {
        name: "config: package version is not semver",
        setup: |h| edited(h, |c| c["package_version"] = json!("1.0")),
        message: r#"package_version: "1.0" is not a valid semantic version"#,
        ..STAGE
    },
    Case {
        name: "config: package version climbs",
        setup: |h| edited(h, |c| c["package_version"] = json!("1.0.0/../../..")),
        message: r#"package_version: "1.0.0/../../.." is not a valid semantic version"#,
        ..STAGE
    },
    Case {
        name: "config: package version with a leading zero",
        setup: |h| edited(h, |c| c["package_version"] = json!("01.0.0")),
        message: r#"package_version: "01.0.0" is not a valid semantic version"#,
        ..STAGE
    },
    Case {
        name: "config: expected_config_files is a string",
        setup: |h| edited(h, |c| c["expected_config_files"] = json!("a.conf")),
        message: r#"expected_config_files: expected an array, found string "a.conf""#,
        ..STAGE
    },
    Case {
        name: "config: expected config file climbs out of configmaps",
        setup: |h| {
            edited(h, |c| {
                c["expected_config_files"] = json!(["../config.json"]);
            });
        },
        message: r#"expected config file "../config.json" must be a non-empty relative path without ".." components"#,
        ..STAGE
    },
    Case {
        name: "config: expected config file is absolute",
        setup: |h| edited(h, |c| c["expected_config_files"] = json!(["/etc/shadow"])),
        message: r#"expected config file "/etc/shadow" must be a non-empty relative path without ".." components"#,
        ..STAGE
    },
    Case {
        name: "config: expected config file is missing",
        setup: |h| edited(h, |c| c["expected_config_files"] = json!(["a.conf"])),
        message: r#"expected config file "a.conf" was not found in the configmaps directory"#,
        ..STAGE
    },
    Case {
        name: "config: expected config file is a directory",
        setup: |h| {
            edited(h, |c| c["expected_config_files"] = json!(["a.conf"]));
            h.mkdir(&format!("{PKG_DIR}/configmaps/a.conf"));
        },
        message: r#"expected config file "a.conf" was not found in the configmaps directory (found a directory)"#,
        ..STAGE
    },
    Case {
        name: "config: modes is an array",
        setup: |h| edited(h, |c| c["modes"] = json!([])),
        message: "modes: expected an object, found an array",
        ..STAGE
    },
    Case {
        name: "config: unknown mode",
        setup: |h| edited(h, |c| c["modes"]["bogus"] = json!([])),
        message: r#"modes.bogus: unknown stage mode "bogus""#,
        ..STAGE
    },
    Case {
        name: "config: interrupt is not a config mode",
        setup: |h| edited(h, |c| c["modes"]["interrupt"] = json!([])),
        message: r#"modes.interrupt: unknown stage mode "interrupt""#,
        ..STAGE
    },
    Case {
        name: "config: a mode is an object",
        setup: |h| edited(h, |c| c["modes"]["apply"] = json!({})),
        message: "modes.apply: expected an array, found an object",
        ..STAGE
    },
    Case {
        name: "config: a step is a number",
        setup: |h| edited(h, |c| c["modes"]["apply"] = json!([1])),
        message: "modes.apply[0]: expected an object, found number 1",
        ..STAGE
    },
    Case {
        name: "config: no steps at all",
        setup: |h| edited(h, |c| c["modes"] = json!({"apply": [], "apply-check": []})),
        message: "config.json: There are no defined steps",
        ..STAGE
    },
    Case {
        name: "config: only check modes have steps",
        setup: |h| {
            edited(h, |c| {
                drop(c["modes"].as_object_mut().unwrap().remove("apply"));
            });
        },
        message: "modes: only check modes have steps",
        ..STAGE
    },
    Case {
        name: "config: non-check mode without its check twin",
        setup: |h| edited(h, |c| c["modes"]["apply-check"] = json!([])),
        message: "modes.apply-check: must have steps because modes.apply has steps",
        ..STAGE
    },
    Case {
        name: "config: step name missing",
        setup: |h| step_edited(h, |s| drop(s.as_object_mut().unwrap().remove("name"))),
        message: "modes.apply[0].name: required field is missing",
        ..STAGE
    },
    Case {
        name: "config: step name outside the pattern",
        setup: |h| step_edited(h, |s| s["name"] = json!("s1; rm -rf /")),
        message: r#"modes.apply[0].name: "s1; rm -rf /" must match ^[a-zA-Z0-9_\-.]+$"#,
        ..STAGE
    },
    Case {
        name: "config: step path is absolute",
        setup: |h| step_edited(h, |s| s["path"] = json!("/bin/sh")),
        message: r#"modes.apply[0].path: "/bin/sh" must be a relative path"#,
        ..STAGE
    },
    Case {
        name: "config: step path climbs out of skyhook_dir",
        setup: |h| step_edited(h, |s| s["path"] = json!("../../../../../bin/sh")),
        message: r#"modes.apply[0].path: "../../../../../bin/sh" must not contain a ".." component"#,
        ..STAGE
    },
    Case {
        name: "config: step path climbs after descending",
        setup: |h| step_edited(h, |s| s["path"] = json!("sub/../../config.json")),
        message: r#"modes.apply[0].path: "sub/../../config.json" must not contain a ".." component"#,
        ..STAGE
    },
    Case {
        name: "config: step path is empty",
        setup: |h| step_edited(h, |s| s["path"] = json!("")),
        message: "modes.apply[0].path: must not be empty",
        ..STAGE
    },
    Case {
        name: "config: step path with NUL",
        setup: |h| step_edited(h, |s| s["path"] = json!("s1.sh\u{0}../x")),
        message: "modes.apply[0].path: \"s1.sh\\u0000../x\" must not contain NUL",
        ..STAGE
    },
    Case {
        name: "config: step path is null",
        setup: |h| step_edited(h, |s| s["path"] = Value::Null),
        message: "modes.apply[0].path: expected a string, found null",
        ..STAGE
    },
    Case {
        name: "config: argument is a number",
        setup: |h| step_edited(h, |s| s["arguments"] = json!(["a", 1])),
        message: "modes.apply[0].arguments[1]: expected a string, found number 1",
        ..STAGE
    },
    Case {
        name: "config: argument with NUL",
        setup: |h| step_edited(h, |s| s["arguments"] = json!(["a\u{0}b"])),
        message: "modes.apply[0].arguments[0]: \"a\\u0000b\" must not contain NUL",
        ..STAGE
    },
    Case {
        name: "config: empty returncodes",
        setup: |h| step_edited(h, |s| s["returncodes"] = json!([])),
        message: "modes.apply[0].returncodes: must contain at least one code",
        ..STAGE
    },
    Case {
        name: "config: returncode is a float",
        setup: |h| step_edited(h, |s| s["returncodes"] = json!([0.5])),
        message: "modes.apply[0].returncodes[0]: expected an integer, found number 0.5",
        ..STAGE
    },
    Case {
        name: "config: returncode is a string",
        setup: |h| step_edited(h, |s| s["returncodes"] = json!(["0"])),
        message: r#"modes.apply[0].returncodes[0]: expected an integer, found string "0""#,
        ..STAGE
    },
    Case {
        name: "config: returncode beyond i64",
        setup: |h| step_edited(h, |s| s["returncodes"] = json!([u64::MAX])),
        message: "modes.apply[0].returncodes[0]: 18446744073709551615 is out of range",
        ..STAGE
    },
    Case {
        name: "config: on_host is a string",
        setup: |h| step_edited(h, |s| s["on_host"] = json!("yes")),
        message: r#"modes.apply[0].on_host: expected a boolean, found string "yes""#,
        ..STAGE
    },
    Case {
        name: "config: idempotence is a number",
        setup: |h| step_edited(h, |s| s["idempotence"] = json!(0)),
        message: "modes.apply[0].idempotence: expected a boolean, found number 0",
        ..STAGE
    },
    Case {
        name: "config: upgrade_step is null",
        setup: |h| step_edited(h, |s| s["upgrade_step"] = Value::Null),
        message: "modes.apply[0].upgrade_step: expected a boolean, found null",
        ..STAGE
    },
    Case {
        name: "config: env is an array",
        setup: |h| step_edited(h, |s| s["env"] = json!(["X=1"])),
        message: "modes.apply[0].env: expected an object, found an array",
        ..STAGE
    },
    Case {
        name: "config: env value is a number",
        setup: |h| step_edited(h, |s| s["env"] = json!({"X": 1})),
        message: "modes.apply[0].env.X: expected a string, found number 1",
        ..STAGE
    },
    Case {
        name: "config: env name with =",
        setup: |h| step_edited(h, |s| s["env"] = json!({"PATH=/tmp": "x"})),
        message: "is not a valid environment variable name",
        ..STAGE
    },
    Case {
        name: "config: upgrade_step outside the upgrade modes",
        setup: |h| step_edited(h, |s| s["upgrade_step"] = json!(true)),
        message: "modes.apply[0].upgrade_step: may only be true in modes.upgrade and modes.upgrade-check, not in modes.apply",
        ..STAGE
    },
    Case {
        name: "config: upgrade step with arguments",
        setup: |h| {
            edited(h, |c| {
                c["modes"]["upgrade"] = json!([{
                    "name": "up", "path": "s1.sh", "arguments": ["x"], "returncodes": [0],
                    "on_host": false, "idempotence": false, "upgrade_step": true
                }]);
                c["modes"]["upgrade-check"] = c["modes"]["apply-check"].clone();
            });
        },
        message: "modes.upgrade[0].arguments: must be empty for an upgrade step",
        ..STAGE
    },
    Case {
        name: "config: bad config in a check stage",
        args: &[Val::Text("apply-check"), ROOT, CD],
        setup: |h| step_edited(h, |s| s["returncodes"] = json!([])),
        message: "modes.apply[0].returncodes: must contain at least one code",
        ..STAGE
    },
    Case {
        name: "config: bad config in an uninstall stage",
        args: &[Val::Text("uninstall"), ROOT, CD],
        setup: |h| step_edited(h, |s| s["path"] = json!("../un.sh")),
        message: r#"modes.apply[0].path: "../un.sh" must not contain a ".." component"#,
        ..STAGE
    },
    // -----------------------------------------------------------------------------------------
    // Step files (SPEC §7): exit 1, the banner only
    // -----------------------------------------------------------------------------------------
    Case {
        name: "step file: missing",
        setup: |h| replace_step_file(h, |_| {}),
        message: r#"modes.apply[0].path: step file "s1.sh" does not exist in"#,
        ..STAGE
    },
    Case {
        name: "step file: a directory",
        setup: |h| replace_step_file(h, |p| fs::create_dir(p).unwrap()),
        message: r#"modes.apply[0].path: step file "s1.sh" in"#,
        ..STAGE
    },
    Case {
        name: "step file: a fifo",
        setup: |h| replace_step_file(h, mkfifo),
        message: "skyhook_dir is not a regular file",
        ..STAGE
    },
    Case {
        name: "step file: a symbolic link loop",
        setup: |h| {
            replace_step_file(h, |p| {
                symlink("loop-b.sh", p).unwrap();
                symlink("s1.sh", p.with_file_name("loop-b.sh")).unwrap();
            });
        },
        message: "cannot be inspected: Too many levels of symbolic links",
        ..STAGE
    },
    Case {
        name: "step file: a link to itself",
        setup: |h| replace_step_file(h, |p| symlink("s1.sh", p).unwrap()),
        message: "cannot be inspected: Too many levels of symbolic links",
        ..STAGE
    },
    Case {
        name: "step file: a dangling link",
        setup: |h| replace_step_file(h, |p| symlink("nowhere.sh", p).unwrap()),
        message: r#"modes.apply[0].path: step file "s1.sh" does not exist in"#,
        ..STAGE
    },
    Case {
        name: "step file: a link to a directory",
        setup: |h| replace_step_file(h, |p| symlink("/", p).unwrap()),
        message: "skyhook_dir is not a regular file",
        ..STAGE
    },
    Case {
        name: "step file: below a regular file",
        setup: |h| step_edited(h, |s| s["path"] = json!("s1_check.sh/s1.sh")),
        message: r#"modes.apply[0].path: step file "s1_check.sh/s1.sh" does not exist in"#,
        ..STAGE
    },
    Case {
        name: "step file: skyhook_dir missing",
        setup: |h| {
            valid(h);
            fs::remove_dir_all(h.path(&format!("{PKG_DIR}/skyhook_dir"))).unwrap();
        },
        message: r#"modes.apply[0].path: step file "s1.sh" does not exist in"#,
        ..STAGE
    },
    Case {
        name: "step file: check step missing",
        setup: |h| {
            valid(h);
            fs::remove_file(h.path(&format!("{PKG_DIR}/skyhook_dir/s1_check.sh"))).unwrap();
        },
        message: r#"modes.apply-check[0].path: step file "s1_check.sh" does not exist in"#,
        ..STAGE
    },
];

// ---------------------------------------------------------------------------------------------
// Setups
// ---------------------------------------------------------------------------------------------

/// The valid package every config row starts from. Its steps run off host, and nothing in the
/// table may run them: a run would append to `<ROOT>/var/tmp/ran.log` and fail the row.
fn package() -> Package {
    Package::off_host(&["s1.sh"], &["s1_check.sh"])
}

fn nothing(_: &FakeHost) {}

fn valid(host: &FakeHost) {
    host.install(&package());
}

/// An existing (empty) package directory: what interrupts run in.
fn package_dir_only(host: &FakeHost) {
    host.mkdir(PKG_DIR);
}

fn raw(host: &FakeHost, bytes: &[u8]) {
    host.install(&package().with_raw_config(bytes));
}

fn edited(host: &FakeHost, edit: impl FnOnce(&mut Value)) {
    let mut config = package().config_json();
    edit(&mut config);
    // Compact: the huge rows stay smaller.
    raw(host, &serde_json::to_vec(&config).unwrap());
}

/// Edit `modes.apply[0]`.
fn step_edited(host: &FakeHost, edit: impl FnOnce(&mut Value)) {
    edited(host, |c| edit(&mut c["modes"]["apply"][0]));
}

/// Install the package without `s1.sh`, then let `make` put something at its path.
fn replace_step_file(host: &FakeHost, make: impl FnOnce(&std::path::Path)) {
    host.install(&package().without_script("s1.sh"));
    make(&host.path(&format!("{PKG_DIR}/skyhook_dir/s1.sh")));
}

fn mkfifo(path: &std::path::Path) {
    let ok = Command::new("/bin/busybox")
        .arg("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {}", path.display());
}

/// `{"type":"no_op","x":[[[...]]]}`, nested far beyond serde_json's limit of 128.
fn nested_payload() -> OsString {
    let depth = 5_000;
    let json = format!(
        r#"{{"type":"no_op","x":{}{}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    );
    interrupt_data(&json).into()
}

/// A `service_restart` payload of about 90 KiB (about 120 KiB of base64: a single argv string
/// is limited to 128 KiB) whose last service is an option.
fn huge_service_payload() -> OsString {
    let mut services: Vec<String> = (0..6_800).map(|i| format!("unit-{i:05}")).collect();
    services.push("-H".to_owned());
    let json = json!({"type": "service_restart", "services": services}).to_string();
    assert!(json.len() > 85_000, "{}", json.len());
    let data = interrupt_data(&json);
    assert!(data.len() < 128 * 1024, "{}", data.len());
    data.into()
}

// ---------------------------------------------------------------------------------------------
// Rows built at run time
// ---------------------------------------------------------------------------------------------

/// `agent MODE ROOT COPY_DIR` on a host with the valid package.
fn stage(host: &FakeHost, mode: &str) -> AgentCmd {
    valid(host);
    host.stage_cmd(mode)
}

/// `agent interrupt ROOT COPY_DIR DATA` on a host with a package directory.
fn interrupt(host: &FakeHost, data: impl Into<OsString>) -> AgentCmd {
    package_dir_only(host);
    host.stage_cmd("interrupt").arg(data)
}

/// `apply` with `bytes` as config.json.
fn raw_row(name: &str, bytes: Vec<u8>, message: &str) -> Row {
    row(format!("config: {name}"), 1, message, move |h| {
        raw(h, &bytes);
        h.stage_cmd("apply")
    })
}

/// `apply` with the valid config edited at JSON `pointer` (`None`: the entry removed).
fn doc_row(name: &str, pointer: &'static str, value: Option<Value>, message: &str) -> Row {
    row(format!("config: {name}"), 1, message, move |h| {
        edited(h, |c| {
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            let map = c.pointer_mut(parent).unwrap().as_object_mut().unwrap();
            match &value {
                Some(v) => drop(map.insert(key.to_owned(), v.clone())),
                None => drop(map.remove(key)),
            }
        });
        h.stage_cmd("apply")
    })
}

/// `apply` with `entry` in `expected_config_files`, after `prepare`.
fn config_file_row(name: &str, entry: &'static str, message: &str, prepare: fn(&FakeHost)) -> Row {
    row(format!("config: {name}"), 1, message, move |h| {
        edited(h, |c| c["expected_config_files"] = json!([entry]));
        prepare(h);
        h.stage_cmd("apply")
    })
}

/// Inputs whose rows need values or setups that a static [`Case`] cannot hold.
fn more_rows() -> Vec<Row> {
    let not_utf8 = |b: &[u8]| OsString::from_vec(b.to_vec());
    let mut rows = vec![
        row(
            "argv: check stage with interrupt data",
            2,
            r#"stage "apply-check" does not accept interrupt data"#,
            |h| stage(h, "apply-check").arg("x"),
        ),
        row(
            "argv: copy directory not UTF-8",
            2,
            "is not valid UTF-8",
            move |h| {
                valid(h);
                h.agent()
                    .args(["apply", &h.root_str()])
                    .arg(not_utf8(b"/var/lib/\xc3\x28"))
            },
        ),
        row(
            "env: SKYHOOK_DATA_DIR not UTF-8",
            1,
            "is not valid UTF-8",
            move |h| stage(h, "apply").env("SKYHOOK_DATA_DIR", not_utf8(b"/\xfe")),
        ),
    ];
    // Well-formed but not for this agent: forward compatible no-ops (SPEC §1.1).
    for mode in ["reticulate", "", "APPLY"] {
        rows.push(row(
            format!("argv: unknown mode {mode:?}"),
            0,
            "this agent version does not support the requested stage; treating it as a no-op",
            move |h| stage(h, mode),
        ));
    }
    for (var, value) in [
        ("SKYHOOK_ROOT_DIR", "/.."),
        ("SKYHOOK_LOG_DIR", "/var/log/../../.."),
        ("SKYHOOK_LOG_DIR", ".."),
    ] {
        rows.push(row(
            format!("env: {var}={value:?}"),
            1,
            format!("environment variable {var}={value:?}: escapes the host root"),
            move |h| stage(h, "apply").env(var, value),
        ));
    }
    // An invalid extension setting is warned about and takes the default, and a bad boolean
    // is false: not errors. Shown with a no-op mode so that nothing runs.
    let seconds = "is not a non-negative number of seconds; using the default";
    let attempts = "is not a positive integer; using the default (3)";
    for (var, value, message) in [
        ("SKYHOOK_STEP_TIMEOUT_SECONDS", "soon", seconds),
        ("SKYHOOK_STEP_TIMEOUT_SECONDS", "-1", seconds),
        ("SKYHOOK_STEP_TIMEOUT_SECONDS", "NaN", seconds),
        ("SKYHOOK_STEP_TIMEOUT_SECONDS", "inf", seconds),
        ("SKYHOOK_STEP_TIMEOUT_SECONDS", "1e300", seconds),
        ("SKYHOOK_AGENT_STOP_GRACE_SECONDS", "20s", seconds),
        ("SKYHOOK_AGENT_STOP_GRACE_SECONDS", " 5", seconds),
        ("SKYHOOK_REBOOT_MAX_ATTEMPTS", "0", attempts),
        ("SKYHOOK_REBOOT_MAX_ATTEMPTS", "-3", attempts),
        ("SKYHOOK_REBOOT_MAX_ATTEMPTS", "4294967296", attempts),
        (
            "SKYHOOK_AGENT_LOG_FORMAT",
            "xml",
            "is not text or json; using the default (text)",
        ),
        (
            "SKYHOOK_AGENT_WRITE_LOGS",
            "maybe",
            "is not true or false; treating it as false",
        ),
    ] {
        rows.push(row(
            format!("env: {var}={value:?} (a warning)"),
            0,
            format!("environment variable {var}={value:?} {message}"),
            move |h| stage(h, "future-mode").env(var, value),
        ));
    }
    let shape = "must end in _PACKAGE_VERSION";
    for (rid, message) in [
        ("", "SKYHOOK_RESOURCE_ID is not set"),
        ("abc_1.0.0", shape),
        ("___", shape),
        (
            "abc_._1.0.0",
            r#"package name "." must be a single path component"#,
        ),
        (
            "abc_pkg_..",
            r#"package version ".." must be a single path component"#,
        ),
    ] {
        rows.push(row(format!("resource ID: {rid:?}"), 1, message, move |h| {
            stage(h, "apply").env("SKYHOOK_RESOURCE_ID", rid)
        }));
    }
    for (name, data, message) in [
        (
            "whitespace only",
            "   ",
            "base64-encoded JSON with a \"type\" field",
        ),
        (
            "a newline inside",
            "eyJ0eXBl\nIjoibm9fb3AifQ==",
            "invalid base64",
        ),
    ] {
        rows.push(row(
            format!("interrupt data: {name}"),
            1,
            message,
            move |h| interrupt(h, data),
        ));
    }
    // Values quoted whole in the message (see `huge_interrupt_values_are_cut_in_error_messages`).
    let huge = [
        row("resource ID: 100 000 bytes", 1, shape, |h| {
            stage(h, "apply").env("SKYHOOK_RESOURCE_ID", "x".repeat(100_000))
        }),
        row(
            "interrupt data: a 90 kB service name",
            1,
            "is not a valid systemd unit name",
            |h| {
                let json = json!({"type": "service_restart", "services": ["a".repeat(90_000)]});
                interrupt(h, b64(json.to_string().as_bytes()))
            },
        ),
    ];
    rows.extend(huge.into_iter().map(|r| Row {
        max_stderr: usize::MAX,
        ..r
    }));
    rows.extend([
        row("config: a symbolic link loop", 1, "config.json", |h| {
            valid(h);
            let config = format!("{PKG_DIR}/config.json");
            fs::remove_file(h.path(&config)).unwrap();
            h.symlink(&config, "config.json");
            h.stage_cmd("apply")
        }),
        raw_row(
            "UTF-8 byte order mark",
            b"\xef\xbb\xbf{}".to_vec(),
            "config is not valid JSON",
        ),
        raw_row(
            "trailing characters",
            b"{} {}".to_vec(),
            "config is not valid JSON",
        ),
        raw_row(
            "a number",
            b"5".to_vec(),
            "expected a JSON object, found number 5",
        ),
        raw_row(
            "10 MB of whitespace around a string",
            [b" ".repeat(10 << 20), b"\"v1\"".to_vec()].concat(),
            "expected a JSON object, found string \"v1\"",
        ),
        raw_row(
            "returncodes beyond u64",
            serde_json::to_string(&package().config_json())
                .unwrap()
                .replacen("\"returncodes\":[0]", "\"returncodes\":[1e400]", 1)
                .into_bytes(),
            "config is not valid JSON",
        ),
        config_file_row(
            "expected config file is empty",
            "",
            r#"expected config file "" must be a non-empty relative path"#,
            |_| {},
        ),
        config_file_row(
            "expected config file is a fifo",
            "f.conf",
            "(found a fifo)",
            |h| {
                mkfifo(&h.path(&format!("{PKG_DIR}/configmaps/f.conf")));
            },
        ),
        config_file_row(
            "expected config file is a link loop",
            "l.conf",
            "symbolic link cycle at",
            |h| {
                h.symlink(&format!("{PKG_DIR}/configmaps/l.conf"), "l.conf");
            },
        ),
    ]);
    for (name, pointer, value, message) in [
        (
            "package name missing",
            "/package_name",
            None,
            "package_name: required field is missing",
        ),
        (
            "package name is null",
            "/package_name",
            Some(Value::Null),
            "package_name: expected a string, found null",
        ),
        (
            "package name is a path",
            "/package_name",
            Some(json!("a/b")),
            r#"package_name: "a/b" must be a single path component"#,
        ),
        (
            "package version is a number",
            "/package_version",
            Some(json!(1)),
            "package_version: expected a string",
        ),
        (
            "expected_config_files missing",
            "/expected_config_files",
            None,
            "expected_config_files: required field is missing",
        ),
        (
            "modes missing",
            "/modes",
            None,
            "modes: required field is missing",
        ),
        (
            "modes is empty",
            "/modes",
            Some(json!({})),
            "There are no defined steps",
        ),
        (
            "step path missing",
            "/modes/apply/0/path",
            None,
            "modes.apply[0].path: required field is missing",
        ),
        (
            "step path is a number",
            "/modes/apply/0/path",
            Some(json!(7)),
            "modes.apply[0].path: expected a string, found number 7",
        ),
        (
            "arguments is a string",
            "/modes/apply/0/arguments",
            Some(json!("a b")),
            "modes.apply[0].arguments: expected an array",
        ),
        (
            "upgrade_step missing",
            "/modes/apply/0/upgrade_step",
            None,
            "modes.apply[0].upgrade_step: required field is missing",
        ),
        (
            "env name is empty",
            "/modes/apply/0/env",
            Some(json!({"": "x"})),
            "is not a valid environment variable name",
        ),
        (
            "env value with NUL",
            "/modes/apply/0/env",
            Some(json!({"A": "x\u{0}"})),
            "must not contain NUL",
        ),
    ] {
        rows.push(doc_row(name, pointer, value, message));
    }
    rows
}

// ---------------------------------------------------------------------------------------------
// The runner
// ---------------------------------------------------------------------------------------------

/// Lines of the startup banner (SPEC §3).
const BANNER_LINES: usize = 21;
/// A row whose agent runs longer has hung (every row fails fast).
const ROW_TIMEOUT: Duration = Duration::from_secs(15);
/// A rejected input must not flood the log: usage text and one error line fit in this.
const MAX_STDERR: usize = 8 * 1024;

/// A row ready to run: static [`Case`]s, and the rows [`more_rows`] builds at run time.
struct Row {
    name: String,
    code: i32,
    message: String,
    /// `None`: not checked.
    stdout: Option<Stdout>,
    max_stderr: usize,
    /// Prepares the host and returns the command to run.
    build: Box<dyn Fn(&FakeHost) -> AgentCmd + Send + Sync>,
}

impl Case {
    fn row(&'static self) -> Row {
        Row {
            name: self.name.to_owned(),
            code: self.code,
            message: self.message.to_owned(),
            stdout: Some(self.stdout),
            max_stderr: MAX_STDERR,
            build: Box::new(move |host| {
                (self.setup)(host);
                let mut cmd = host.agent();
                for (name, value) in self.env {
                    cmd = match value {
                        Some(v) => cmd.env(name, v.resolve(host)),
                        None => cmd.env_remove(name),
                    };
                }
                cmd.args(self.args.iter().map(|a| a.resolve(host)))
            }),
        }
    }
}

/// A row built at run time. A usage error (exit 2) must leave stdout empty.
fn row(
    name: impl Into<String>,
    code: i32,
    message: impl Into<String>,
    build: impl Fn(&FakeHost) -> AgentCmd + Send + Sync + 'static,
) -> Row {
    Row {
        name: name.into(),
        code,
        message: message.into(),
        stdout: (code == 2).then_some(Stdout::Empty),
        max_stderr: MAX_STDERR,
        build: Box::new(build),
    }
}

/// Run one row; `Err` lists everything wrong with it.
fn check(row: &Row) -> Result<(), String> {
    let host = FakeHost::bare();
    let cmd = (row.build)(&host);
    let before = host.snapshot();
    let outside_before = host.snapshot_outside();
    let run = cmd.timeout(ROW_TIMEOUT).run();

    let mut problems = Vec::new();
    if run.code() != Some(row.code) {
        problems.push(format!("exit code {:?}, expected {}", run.code(), row.code));
    }
    let err = run.err_text();
    if !err.lines().any(|l| l.contains(&row.message)) {
        problems.push(format!("no stderr line contains {:?}", row.message));
    }
    if run.stderr.len() > row.max_stderr {
        problems.push(format!(
            "{} bytes on stderr (more than {})",
            run.stderr.len(),
            row.max_stderr
        ));
    }
    let out = run.out();
    match row.stdout {
        Some(Stdout::Empty) if !out.is_empty() => {
            problems.push("stdout is not empty".to_owned());
        }
        Some(Stdout::Banner) => {
            let lines: Vec<&str> = out.lines().collect();
            let is_banner = out.ends_with('\n')
                && lines.len() == BANNER_LINES
                && lines[1] == "-CLI CONFIGURATION--"
                && lines[0] == "--------------------"
                && lines[BANNER_LINES - 1] == "--------------------";
            if !is_banner {
                problems.push("stdout is not exactly the banner".to_owned());
            }
        }
        _ => {}
    }
    for (what, diff) in [
        ("under ROOT", before.diff(&host.snapshot())),
        (
            "outside ROOT",
            outside_before.diff(&host.snapshot_outside()),
        ),
    ] {
        if !diff.is_empty() {
            problems.push(format!(
                "the tree {what} changed:\n    {}",
                diff.join("\n    ")
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\n{run:?}", problems.join("\n")))
    }
}

#[test]
fn every_malformed_input_is_rejected_with_its_code_and_message_and_changes_nothing() {
    let rows: Vec<Row> = CASES.iter().map(Case::row).chain(more_rows()).collect();
    assert!(rows.len() >= 150, "only {} rows", rows.len());
    let mut names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), rows.len(), "row names must be unique");
    let unstated: Vec<&str> = rows
        .iter()
        .filter(|r| r.message.is_empty())
        .map(|r| r.name.as_str())
        .collect();
    assert!(unstated.is_empty(), "rows without a message: {unstated:?}");

    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(row) = rows.get(i) else { break };
                    let outcome =
                        catch_unwind(AssertUnwindSafe(|| check(row))).unwrap_or_else(|panic| {
                            let what = panic
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                                .unwrap_or_default();
                            Err(format!("panicked: {what}"))
                        });
                    if let Err(why) = outcome {
                        failures.lock().unwrap().push((i, why));
                    }
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort_by_key(|(i, _)| *i);
    let report: Vec<String> = failures
        .iter()
        .map(|(i, why)| format!("--- row {i}: {} ---\n{why}", rows[*i].name))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} rows failed (in {:?}):\n{}",
        failures.len(),
        rows.len(),
        started.elapsed(),
        report.join("\n")
    );
}

/// SPEC §4 and §7 define a name as one path component (non-empty, not `.` or `..`, no `/`, no
/// NUL) but a directory entry is also at most 255 bytes. A longer resource ID (an interrupt's
/// marker directory) or package name (the stage lock, flags, history) passes validation today
/// and fails with ENAMETOOLONG at the first write, the lock, after creating `STATE/locks`.
#[test]
fn names_longer_than_a_file_name_are_rejected_before_anything_is_written() {
    let long = "a".repeat(300);
    let interrupt = FakeHost::bare();
    package_dir_only(&interrupt);
    let stage = FakeHost::bare();
    edited(&stage, |c| c["package_name"] = json!(long));
    for (host, cmd, what) in [
        (
            &interrupt,
            interrupt
                .interrupt(&interrupt_data(r#"{"type":"no_op"}"#))
                .env("SKYHOOK_RESOURCE_ID", format!("{long}_pkg_1.0.0")),
            "a 305-byte resource ID",
        ),
        (&stage, stage.stage_cmd("apply"), "a 300-byte package name"),
    ] {
        let before = host.snapshot();
        let run = cmd.run();
        run.assert_code(1);
        before.assert_unchanged(&host.snapshot(), what);
    }
}

/// config.json findings cut a value after 100 characters so that a huge input cannot make a
/// huge log line (the `1 MiB package name` row). Interrupt decoding errors quote the offending
/// value whole: a 90 KB type name, field value or service name comes back as a 90 KB line.
#[test]
#[ignore = "defect: INTERRUPT_DATA decoding errors quote the whole offending value (a 90 KB \
            error line), unlike config.json findings, which cut values at 100 characters"]
fn huge_interrupt_values_are_cut_in_error_messages() {
    let huge = "x".repeat(90_000);
    for payload in [
        json!({"type": huge}),
        json!({"type": "service_restart", "services": huge}),
        json!({"type": "service_restart", "services": [format!("-{huge}")]}),
    ] {
        let host = FakeHost::bare();
        package_dir_only(&host);
        let run = host.interrupt(&interrupt_data(&payload.to_string())).run();
        run.assert_code(1);
        assert!(
            run.stderr.len() < MAX_STDERR,
            "{} bytes of stderr for a rejected payload",
            run.stderr.len()
        );
    }
}
