//! Property tests over agent-core's public API, for the parsers that take input the agent does
//! not control: the interrupt decoder (INTERRUPT_DATA), the config parser (config.json), the
//! resource ID (SKYHOOK_RESOURCE_ID) and log names (retention reads whatever is in the log
//! directory), plus CPython `repr` against the local python3 (legacy marker names hash it).
//!
//! Properties: no input panics; what the agent writes, it reads back to the same value; what
//! it accepts has the shape the rest of the agent relies on (single path components, relative
//! step paths). `PROPTEST_CASES` raises the number of cases (proptest's own variable).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_core::compat::{pyrepr, timestamp};
use agent_core::host::fs::HostFs;
use agent_core::host::identity::ResourceId;
use agent_core::package::config::PackageConfig;
use agent_core::package::step::{Mode, Step};
use agent_core::plugin::contract::{DecodeError, MAX_PAYLOAD_BYTES};
use agent_core::state::logs;
use agent_core::{BoxError, Interrupt, InterruptContext, InterruptError, InterruptKind};
use base64::Engine as _;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};

/// proptest's defaults (`PROPTEST_CASES` included), without regression files: these are
/// integration tests, and a failure prints its minimal input.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// A kind registered in this test binary (the built-in kinds live in another crate)
// ---------------------------------------------------------------------------------------------

/// Like `service_restart`: a list of names, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PropRestart {
    units: Vec<String>,
}

#[agent_core::interrupt(
    type = "prop_restart",
    summary = "property-test kind",
    example = r#"{"type":"prop_restart","units":["a.service"]}"#
)]
impl InterruptKind for PropRestart {
    fn validate(&self) -> Result<(), BoxError> {
        match self
            .units
            .iter()
            .find(|u| u.is_empty() || u.starts_with('-'))
        {
            Some(u) => Err(format!("units: {u:?} is not a unit name").into()),
            None => Ok(()),
        }
    }

    async fn run(&self, _cx: &InterruptContext) -> Result<(), InterruptError> {
        Ok(())
    }
}

/// A kind without fields, tolerant of unknown ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct PropNothing {}

#[agent_core::interrupt(type = "prop_nothing", summary = "property-test kind without fields")]
impl InterruptKind for PropNothing {
    async fn run(&self, _cx: &InterruptContext) -> Result<(), InterruptError> {
        Ok(())
    }
}

fn unit_name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_.@:\\\\][a-zA-Z0-9_.@:\\\\-]{0,30}"
}

// ---------------------------------------------------------------------------------------------
// Interrupt decoder
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn decoding_any_text_never_panics(data in ".{0,200}") {
        let _ = <dyn Interrupt>::from_base64(&data);
    }

    #[test]
    fn decoding_any_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = <dyn Interrupt>::from_json_bytes(&bytes);
        let _ = <dyn Interrupt>::from_base64(&base64::engine::general_purpose::STANDARD.encode(&bytes));
    }

    #[test]
    fn decoding_any_json_never_panics(value in json_value()) {
        let _ = <dyn Interrupt>::from_json_bytes(value.to_string().as_bytes());
        if let Value::Object(mut map) = value {
            for kind in ["prop_restart", "prop_nothing"] {
                map.insert("type".into(), kind.into());
                let _ = <dyn Interrupt>::from_json_bytes(Value::Object(map.clone()).to_string().as_bytes());
            }
        }
    }

    #[test]
    fn encoded_interrupts_decode_to_themselves(units in prop::collection::vec(unit_name(), 0..6)) {
        let kind: Box<dyn Interrupt> = Box::new(PropRestart { units: units.clone() });
        let data = kind.to_base64();
        let decoded = <dyn Interrupt>::from_base64(&data).unwrap();
        prop_assert!(decoded.unknown_fields.is_empty());
        prop_assert_eq!(decoded.interrupt.to_json(), kind.to_json());
        prop_assert_eq!(decoded.interrupt.type_name(), "prop_restart");
        // Whitespace around the data and missing padding are tolerated.
        let unpadded = data.trim_end_matches('=');
        let again = <dyn Interrupt>::from_base64(&format!(" {unpadded}\n")).unwrap();
        prop_assert_eq!(again.interrupt.to_json(), kind.to_json());
    }

    #[test]
    fn invalid_unit_names_are_refused_by_validation(
        good in prop::collection::vec(unit_name(), 0..3),
        bad in "-[a-z-]{0,10}",
    ) {
        let mut units = good;
        units.push(bad);
        let json = json!({"type": "prop_restart", "units": units}).to_string();
        let err = <dyn Interrupt>::from_json_bytes(json.as_bytes()).unwrap_err();
        let is_invalid = matches!(err, DecodeError::Invalid { .. });
        prop_assert!(is_invalid, "{:?}", err);
    }

    #[test]
    fn unknown_fields_are_reported_by_name(
        extra in prop::collection::btree_map("[a-z]{1,8}", json_value(), 0..4),
    ) {
        let mut map = serde_json::Map::new();
        for (k, v) in &extra {
            map.insert(k.clone(), v.clone());
        }
        map.insert("type".into(), "prop_nothing".into());
        let decoded = <dyn Interrupt>::from_json_bytes(Value::Object(map).to_string().as_bytes()).unwrap();
        let mut expected: Vec<String> = extra.keys().filter(|k| *k != "type").cloned().collect();
        expected.sort();
        let mut got = decoded.unknown_fields.clone();
        got.sort();
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn unknown_types_name_every_registered_type(name in "[a-z_]{1,20}") {
        prop_assume!(name != "prop_restart" && name != "prop_nothing");
        let err = <dyn Interrupt>::from_json_bytes(json!({"type": name}).to_string().as_bytes()).unwrap_err();
        prop_assert_eq!(
            err.to_string(),
            format!("unknown interrupt {name:?} must be one of: prop_nothing, prop_restart")
        );
    }
}

#[test]
fn payloads_over_one_mebibyte_are_refused_before_decoding() {
    let json = format!(
        r#"{{"type":"prop_restart","units":["{}"]}}"#,
        "a".repeat(MAX_PAYLOAD_BYTES)
    );
    assert!(matches!(
        <dyn Interrupt>::from_json_bytes(json.as_bytes()),
        Err(DecodeError::TooLarge(_))
    ));
    let data = base64::engine::general_purpose::STANDARD.encode(json.as_bytes());
    let err = <dyn Interrupt>::from_base64(&data).unwrap_err();
    assert!(matches!(err, DecodeError::TooLarge(_)), "{err:?}");
    assert!(err.to_string().contains("over the limit of 1 MiB"), "{err}");
    // Garbage of that size is refused by its size, not parsed.
    let err = <dyn Interrupt>::from_base64(&"!".repeat(2 * MAX_PAYLOAD_BYTES)).unwrap_err();
    assert!(matches!(err, DecodeError::TooLarge(_)), "{err:?}");
    // Just under the limit decodes.
    let fits = format!(
        r#"{{"type":"prop_restart","units":["{}"]}}"#,
        "a".repeat(MAX_PAYLOAD_BYTES - 64)
    );
    let data = base64::engine::general_purpose::STANDARD.encode(fits.as_bytes());
    assert!(<dyn Interrupt>::from_base64(&data).is_ok());
}

// ---------------------------------------------------------------------------------------------
// Arbitrary JSON
// ---------------------------------------------------------------------------------------------

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
        prop::sample::select(vec!["v1", "apply", "s.sh", "..", "/", "", "env:X", "1.0.0"])
            .prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(".{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

// ---------------------------------------------------------------------------------------------
// Config parser
// ---------------------------------------------------------------------------------------------

/// Everything the rest of the agent relies on in an accepted config.
fn assert_accepted_shape(config: &PackageConfig) {
    let single = |s: &str| !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\0']);
    assert!(single(&config.package_name), "{config:?}");
    assert!(single(&config.package_version), "{config:?}");
    let mut any_step = false;
    for (mode, steps) in &config.modes {
        for step in steps {
            any_step = true;
            assert!(
                !step.path.is_empty() && !step.path.starts_with('/'),
                "{step:?}"
            );
            assert!(!step.path.split('/').any(|c| c == ".."), "{step:?}");
            assert!(!step.path.contains('\0'), "{step:?}");
            assert!(!step.returncodes.is_empty(), "{step:?}");
            assert!(!step.upgrade_step || mode.is_upgrade(), "{step:?}");
            for (k, v) in &step.env {
                assert!(!k.is_empty() && !k.contains(['=', '\0']) && !v.contains('\0'));
            }
        }
    }
    assert!(any_step);
}

fn step_strategy() -> impl Strategy<Value = Step> {
    (
        "[a-zA-Z0-9_.-]{1,12}",
        "[a-z0-9_]{1,8}(/[a-z0-9_]{1,8}){0,2}\\.sh",
        prop::collection::vec(".{0,10}", 0..4),
        prop::collection::vec(any::<i64>(), 1..4),
        any::<bool>(),
        prop::collection::btree_map("[A-Z_][A-Z0-9_]{0,8}", "[^\\x00]{0,10}", 0..3),
        any::<bool>(),
    )
        .prop_map(
            |(name, path, arguments, returncodes, on_host, env, disabled)| Step {
                name,
                path,
                arguments: arguments.into_iter().map(|a| a.replace('\0', "")).collect(),
                returncodes,
                on_host,
                env,
                idempotence_disabled: disabled,
                upgrade_step: false,
            },
        )
}

fn step_json(step: &Step) -> Value {
    json!({
        "name": step.name,
        "path": step.path,
        "arguments": step.arguments,
        "returncodes": step.returncodes,
        "on_host": step.on_host,
        "env": step.env,
        "idempotence": step.idempotence_disabled,
        "upgrade_step": step.upgrade_step,
    })
}

/// A valid config: every non-check mode chosen gets its check twin.
fn config_strategy() -> impl Strategy<Value = (String, String, BTreeMap<Mode, Vec<Step>>)> {
    let non_check: Vec<Mode> = Mode::ALL.into_iter().filter(|m| !m.is_check()).collect();
    (
        "[a-z][a-z0-9_.-]{0,15}",
        (0u32..20, 0u32..20, 0u32..100),
        prop::sample::subsequence(non_check, 1..=5),
        prop::collection::vec(prop::collection::vec(step_strategy(), 1..4), 10),
    )
        .prop_map(|(name, (major, minor, patch), modes, mut steps)| {
            let mut map = BTreeMap::new();
            for mode in modes {
                let twin = mode.check_twin().unwrap();
                let i = Mode::ALL.iter().position(|m| *m == mode).unwrap();
                map.insert(mode, std::mem::take(&mut steps[i]));
                let j = Mode::ALL.iter().position(|m| *m == twin).unwrap();
                map.insert(twin, std::mem::take(&mut steps[j]));
            }
            (name, format!("{major}.{minor}.{patch}"), map)
        })
}

fn config_document(name: &str, version: &str, modes: &BTreeMap<Mode, Vec<Step>>) -> Value {
    let modes: serde_json::Map<String, Value> = modes
        .iter()
        .map(|(m, steps)| (m.to_string(), steps.iter().map(step_json).collect()))
        .collect();
    json!({
        "schema_version": "v1",
        "package_name": name,
        "package_version": version,
        "expected_config_files": [],
        "modes": modes,
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn parsing_any_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Ok((config, _)) = PackageConfig::from_slice(&bytes) {
            assert_accepted_shape(&config);
        }
    }

    #[test]
    fn parsing_any_json_never_panics(value in json_value()) {
        if let Ok((config, _)) = PackageConfig::from_slice(value.to_string().as_bytes()) {
            assert_accepted_shape(&config);
        }
    }

    #[test]
    fn a_valid_config_parses_to_what_was_written((name, version, modes) in config_strategy()) {
        let doc = config_document(&name, &version, &modes);
        let (config, _warnings) = PackageConfig::from_slice(doc.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("{e}\n{doc:#}"));
        prop_assert_eq!(&config.package_name, &name);
        prop_assert_eq!(&config.package_version, &version);
        prop_assert_eq!(&config.modes, &modes);
        assert_accepted_shape(&config);
        // Pretty or compact, the same document.
        let pretty = serde_json::to_vec_pretty(&doc).unwrap();
        prop_assert_eq!(PackageConfig::from_slice(&pretty).unwrap().0, config);
    }

    #[test]
    fn replacing_any_part_of_a_valid_config_never_panics(
        (name, version, modes) in config_strategy(),
        pick in any::<prop::sample::Index>(),
        replacement in prop::option::of(json_value()),
    ) {
        let mut doc = config_document(&name, &version, &modes);
        let mut pointers = Vec::new();
        collect_pointers(&doc, "", &mut pointers);
        let pointer = pick.get(&pointers).clone();
        if let Some((parent, key)) = pointer.rsplit_once('/') {
            match (doc.pointer_mut(parent), replacement) {
                (Some(Value::Object(map)), Some(v)) => { map.insert(key.replace("~1", "/").replace("~0", "~"), v); }
                (Some(Value::Object(map)), None) => { map.remove(&key.replace("~1", "/").replace("~0", "~")); }
                (Some(Value::Array(items)), Some(v)) => items[key.parse::<usize>().unwrap()] = v,
                (Some(Value::Array(items)), None) => { items.remove(key.parse::<usize>().unwrap()); }
                _ => {}
            }
        }
        match PackageConfig::from_slice(doc.to_string().as_bytes()) {
            Ok((config, _)) => assert_accepted_shape(&config),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

fn collect_pointers(value: &Value, at: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                collect_pointers(v, &p, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                collect_pointers(v, &p, out);
            }
        }
        _ => {}
    }
}

#[test]
fn deeply_nested_and_huge_configs_fail_cleanly() {
    for depth in [100, 127, 128, 129, 10_000] {
        let doc = format!(
            r#"{{"schema_version":"v1","x":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let _ = PackageConfig::from_slice(doc.as_bytes());
    }
    let doc = format!(
        r#"{{"schema_version":"v1","package_name":"{}/x"}}"#,
        "n".repeat(8 << 20)
    );
    let err = PackageConfig::from_slice(doc.as_bytes()).unwrap_err();
    // The finding quotes at most 100 characters of the value.
    assert!(err.to_string().len() < 300, "{}", err.to_string().len());
}

// ---------------------------------------------------------------------------------------------
// Resource ID
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn parsing_any_resource_id_never_panics_and_accepts_only_safe_names(id in ".{0,40}") {
        if let Ok(rid) = ResourceId::parse(&id) {
            for part in [&rid.package, &rid.version] {
                prop_assert!(!part.is_empty() && part != "." && part != ".." && !part.contains('/'));
            }
            prop_assert!(!rid.version.contains('_'));
            let suffix = format!("_{}_{}", rid.package, rid.version);
            prop_assert!(id.ends_with(&suffix));
            let prefix = &id[..id.len() - rid.package.len() - rid.version.len() - 2];
            prop_assert!(!prefix.is_empty() && !prefix.contains('_'));
        }
    }

    #[test]
    fn resource_ids_round_trip(
        prefix in "[a-z0-9-]{1,20}",
        package in "[a-z0-9][a-z0-9_.-]{0,20}",
        version in "[0-9][0-9a-z.+-]{0,12}",
    ) {
        let id = format!("{prefix}_{package}_{version}");
        let rid = ResourceId::parse(&id).unwrap();
        prop_assert_eq!(rid.package, package);
        prop_assert_eq!(rid.version, version);
        prop_assert_eq!(rid.id, id);
    }
}

// ---------------------------------------------------------------------------------------------
// Log names
// ---------------------------------------------------------------------------------------------

/// Years 1970..=9999 in nanoseconds.
fn any_time() -> impl Strategy<Value = SystemTime> {
    (0u64..253_402_300_799, 0u32..1_000_000_000).prop_map(|(s, n)| UNIX_EPOCH + Duration::new(s, n))
}

fn time_from_nanos(n: i128) -> SystemTime {
    let abs = n.unsigned_abs();
    let magnitude = Duration::new(
        u64::try_from(abs / 1_000_000_000).unwrap(),
        u32::try_from(abs % 1_000_000_000).unwrap(),
    );
    if n < 0 {
        UNIX_EPOCH - magnitude
    } else {
        UNIX_EPOCH + magnitude
    }
}

fn nanos(t: SystemTime) -> i128 {
    i128::try_from(t.duration_since(UNIX_EPOCH).unwrap().as_nanos()).unwrap()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn log_stamps_round_trip(t in any_time()) {
        let stamp = timestamp::log_stamp(t);
        prop_assert_eq!(stamp.len(), 27);
        prop_assert_eq!(timestamp::parse_log_stamp(&stamp), Some(nanos(t)));
    }

    #[test]
    fn parsing_any_log_stamp_never_panics_and_accepts_only_canonical_stamps(
        s in "[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{6}(\\.[0-9]{9})?|[0-9.-]{0,30}|.{0,30}",
    ) {
        if let Some(n) = timestamp::parse_log_stamp(&s) {
            let canonical = timestamp::log_stamp(time_from_nanos(n));
            // Legacy stamps are the whole-second prefix of the new ones.
            prop_assert!(canonical == s || canonical.starts_with(&format!("{s}.000000000")), "{} {}", s, canonical);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..config() })]

    /// Retention keeps exactly the `keep` newest logs of a step, by timestamp and collision
    /// index, and never touches another step's logs or files that are not logs.
    #[test]
    fn retention_keeps_the_newest_logs_of_exactly_one_step(
        times in prop::collection::vec(0u64..4, 1..12),
        keep in 1usize..7,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let fs = HostFs::new(dir.path());
        let log_dir = Path::new("/logs/pkg/1.0.0");
        let base = UNIX_EPOCH + Duration::from_secs(1_796_034_448);
        // One index for the whole sequence, as one run keeps it.
        let mut index = logs::LogIndex::new(log_dir, ["sub/x.sh", "sub/x.sh-y"]);
        let mut created = Vec::new();
        for (i, t) in times.iter().enumerate() {
            let when = base + Duration::from_secs(*t);
            let log = index.create(&fs, "sub/x.sh", when).unwrap();
            created.push((*t, i, log.host_path.file_name().unwrap().to_str().unwrap().to_owned()));
            // Another step whose name starts like this one's, and the legacy error files.
            index.create(&fs, "sub/x.sh-y", when).unwrap();
        }
        let sub = dir.path().join("logs/pkg/1.0.0/sub");
        std::fs::write(sub.join("x.sh-2026-11-30-102728.log.err"), "legacy").unwrap();
        std::fs::write(sub.join("x.sh-notes.txt"), "other").unwrap();
        index.retain(&fs, "sub/x.sh", keep).unwrap();
        // Newest first: later time, then later creation (a higher collision index).
        created.sort_by_key(|c| std::cmp::Reverse((c.0, c.1)));
        let mut expected: Vec<String> = created.iter().take(keep).map(|c| c.2.clone()).collect();
        expected.sort();
        let mut remaining: Vec<String> = std::fs::read_dir(&sub)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("x.sh-2") && Path::new(n).extension().is_some_and(|e| e == "log"))
            .collect();
        remaining.sort();
        prop_assert_eq!(remaining, expected);
        let others = std::fs::read_dir(&sub)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_str().unwrap().starts_with("x.sh-y-"))
            .count();
        prop_assert_eq!(others, times.len());
        prop_assert!(sub.join("x.sh-2026-11-30-102728.log.err").exists());
        prop_assert!(sub.join("x.sh-notes.txt").exists());
    }
}

// ---------------------------------------------------------------------------------------------
// CPython repr, against the local python3, in batches
// ---------------------------------------------------------------------------------------------

/// Strings built from the characters that matter to `repr`: quotes, backslashes, controls,
/// separators, format characters, private use, unassigned, astral, and anything at all.
fn repr_input() -> impl Strategy<Value = String> {
    let special = prop::sample::select(vec![
        '\'',
        '"',
        '\\',
        '\t',
        '\n',
        '\r',
        '\0',
        '\x1b',
        '\x7f',
        '\u{85}',
        '\u{a0}',
        '\u{ad}',
        '\u{2028}',
        '\u{2029}',
        '\u{200b}',
        '\u{200d}',
        '\u{202e}',
        '\u{feff}',
        '\u{e000}',
        '\u{fffe}',
        '\u{ffff}',
        '\u{378}',
        '\u{e0001}',
        '\u{f0000}',
        '\u{10ffff}',
        'é',
        '😀',
        '\u{3000}',
        '\u{1680}',
        ' ',
    ]);
    let c = prop_oneof![
        4 => prop::char::range(' ', '~'),
        3 => special,
        1 => prop::char::range('\u{0}', '\u{ff}'),
        1 => prop::char::range('\u{100}', '\u{ffff}'),
        1 => any::<char>(),
    ];
    prop::collection::vec(c, 0..12).prop_map(|cs| cs.into_iter().collect())
}

/// `repr` of each string and of each list, by python3; plus, per string, the code points
/// python3's Unicode database does not know (assigned since its version).
fn python_reprs(
    strings: &[String],
    lists: &[Vec<String>],
) -> (Vec<String>, Vec<Vec<u32>>, Vec<String>) {
    let script = "import sys, json, unicodedata\n\
        data = json.loads(sys.stdin.buffer.read().decode('utf-8'))\n\
        out = {'reprs': [repr(s) for s in data['strings']],\n\
               'unknown': [[ord(c) for c in s if unicodedata.category(c) == 'Cn'] for s in data['strings']],\n\
               'lists': [repr(l) for l in data['lists']]}\n\
        sys.stdout.write(json.dumps(out))\n";
    let input = serde_json::to_vec(&json!({"strings": strings, "lists": lists})).unwrap();
    let mut child = Command::new("python3")
        .args(["-c", script])
        .env("PYTHONIOENCODING", "utf-8")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 is required to check repr against CPython");
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "python3 failed");
    let v: Value = serde_json::from_slice(&output.stdout).unwrap();
    let strings_of = |key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    };
    let unknown = v["unknown"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cps| {
            cps.as_array()
                .unwrap()
                .iter()
                .map(|c| u32::try_from(c.as_u64().unwrap()).unwrap())
                .collect()
        })
        .collect();
    (strings_of("reprs"), unknown, strings_of("lists"))
}

/// Whether `c` was assigned after the local python3's Unicode version: python3 escapes it, the
/// agent (CPython 3.13, Unicode 15.1) may print it. Not a disagreement about `repr` itself.
fn newer_than_python(c: u32) -> bool {
    char::from_u32(c).is_some_and(|c| {
        unicode_general_category::get_general_category(c)
            != unicode_general_category::GeneralCategory::Unassigned
    })
}

#[test]
fn repr_matches_python3_on_generated_strings() {
    let cases: usize = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
        * 16;
    let mut runner = TestRunner::deterministic();
    let strategy = repr_input();
    let strings: Vec<String> = (0..cases)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect();
    let lists: Vec<Vec<String>> = strings.chunks(3).map(<[String]>::to_vec).collect();
    let (reprs, unknown, list_reprs) = python_reprs(&strings, &lists);
    let mut version_edges = 0;
    let mut mismatches = Vec::new();
    for ((s, expected), unknown) in strings.iter().zip(&reprs).zip(&unknown) {
        if unknown.iter().any(|c| newer_than_python(*c)) {
            version_edges += 1;
            continue;
        }
        let got = pyrepr::repr_str(s);
        if &got != expected {
            mismatches.push(format!("{s:?}: agent {got}, python3 {expected}"));
        }
    }
    for ((list, expected), chunk) in lists.iter().zip(&list_reprs).zip(unknown.chunks(3)) {
        if chunk.iter().flatten().any(|c| newer_than_python(*c)) {
            continue;
        }
        let got = pyrepr::repr_str_list(list);
        if &got != expected {
            mismatches.push(format!("{list:?}: agent {got}, python3 {expected}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {cases} reprs differ from python3:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert!(
        version_edges < cases / 10,
        "{version_edges} strings skipped"
    );
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn int_list_repr_is_python_like(ints in prop::collection::vec(any::<i64>(), 0..6)) {
        let expected = format!(
            "[{}]",
            ints.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        );
        prop_assert_eq!(pyrepr::repr_int_list(&ints), expected);
    }
}
