use super::validation::{STEP_FIELDS, TOP_LEVEL_FIELDS};
use super::*;
use serde_json::Value;

use proptest::prelude::*;
use serde_json::json;

/// The config.json of legacy transcript 01, byte for byte.
const TRANSCRIPT_01: &str = r#"{
  "schema_version": "v1",
  "package_name": "pkg",
  "package_version": "1.0.0",
  "expected_config_files": [],
  "modes": {
"apply": [
  {"name":"s1","path":"s1.sh","arguments":["a", "env:FOO"],"returncodes":[0],"on_host":true,"env":{"X": "from-step-env"},"idempotence":false,"upgrade_step":false},
  {"name":"s2","path":"s2.sh","arguments":[],"returncodes":[0],"on_host":true,"env":{},"idempotence":true,"upgrade_step":false}
],
"apply-check": [
  {"name":"s1c","path":"s1_check.sh","arguments":[],"returncodes":[0],"on_host":true,"env":{},"idempotence":false,"upgrade_step":false},
  {"name":"s2c","path":"s2_check.sh","arguments":[],"returncodes":[0],"on_host":true,"env":{},"idempotence":false,"upgrade_step":false}
],
"config": [ {"name":"cfg","path":"cfg.sh","arguments":["c"],"returncodes":[0],"on_host":true,"env":{},"idempotence":false,"upgrade_step":false} ],
"config-check": [ {"name":"cfgc","path":"cfg_check.sh","arguments":[],"returncodes":[0],"on_host":true,"env":{},"idempotence":false,"upgrade_step":false} ],
"upgrade": [
  {"name":"up","path":"up.sh","arguments":["u1"],"returncodes":[0],"on_host":true,"env":{},"idempotence":false,"upgrade_step":false},
  {"name":"up2","path":"up2.sh","arguments":[],"returncodes":[0],"on_host":true,"env":{},"idempotence":false,"upgrade_step":true}
],
"upgrade-check": [
  {"name":"upc","path":"up_check.sh","arguments":[],"returncodes":[0],"on_host":true,"env":{},"idempotence":false,"upgrade_step":true},
  {"name":"up2c","path":"up2_check.sh","arguments":[],"returncodes":[0],"on_host":true,"env":{},"idempotence":false,"upgrade_step":false}
],
"uninstall": [ {"name":"un","path":"un.sh","arguments":[],"returncodes":[0],"on_host":true,"env":{},"idempotence":false,"upgrade_step":false} ],
"uninstall-check": [ {"name":"unc","path":"un_check.sh","arguments":[],"returncodes":[0],"on_host":true,"env":{},"idempotence":false,"upgrade_step":false} ],
"post-interrupt": [ {"name":"pi","path":"pi.sh","arguments":[],"returncodes":[0],"on_host":true,"env":{},"idempotence":false,"upgrade_step":false} ],
"post-interrupt-check": [ {"name":"pic","path":"pi_check.sh","arguments":[],"returncodes":[0],"on_host":true,"env":{},"idempotence":false,"upgrade_step":false} ]
  }
}
"#;

fn step(name: &str, path: &str) -> Value {
    json!({
        "name": name, "path": path, "arguments": [], "returncodes": [0],
        "on_host": true, "env": {}, "idempotence": false, "upgrade_step": false,
    })
}

/// A minimal valid config: one apply step and its check.
fn minimal() -> Value {
    json!({
        "schema_version": "v1",
        "package_name": "pkg",
        "package_version": "1.0.0",
        "expected_config_files": [],
        "modes": {
            "apply": [step("s1", "s1.sh")],
            "apply-check": [step("s1c", "s1_check.sh")],
        },
    })
}

fn parse(doc: &Value) -> Result<(PackageConfig, Vec<Finding>), ConfigError> {
    PackageConfig::from_slice(doc.to_string().as_bytes())
}

/// The Display of the first error, which is what the operator sees.
fn first_error(doc: &Value) -> String {
    first_error_bytes(doc.to_string().as_bytes())
}

fn first_error_bytes(bytes: &[u8]) -> String {
    match PackageConfig::from_slice(bytes) {
        Ok((config, _)) => panic!("expected an error, got {config:?}"),
        Err(ConfigError::Invalid(finding)) => {
            assert_eq!(finding.severity, Severity::Error);
            finding.to_string()
        }
        Err(e) => panic!("unexpected {e:?}"),
    }
}

fn warnings(doc: &Value) -> Vec<String> {
    let (_, warnings) = parse(doc).expect("valid config");
    assert!(warnings.iter().all(|w| w.severity == Severity::Warning));
    warnings.iter().map(ToString::to_string).collect()
}

fn with(mut doc: Value, pointer: &str, value: Value) -> Value {
    *doc.pointer_mut(pointer)
        .unwrap_or_else(|| panic!("no {pointer}")) = value;
    doc
}

fn without(mut doc: Value, pointer: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    doc.pointer_mut(parent)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove(key)
        .unwrap();
    doc
}

#[test]
fn transcript_01_config_parses() {
    let (config, warnings) = PackageConfig::from_slice(TRANSCRIPT_01.as_bytes()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.schema_version, "v1");
    assert_eq!(config.package_name, "pkg");
    assert_eq!(config.package_version, "1.0.0");
    assert!(config.expected_config_files.is_empty());
    assert_eq!(config.modes.len(), 10);
    let s1 = &config.steps(Mode::Apply)[0];
    assert_eq!(
        s1,
        &Step {
            name: "s1".into(),
            path: "s1.sh".into(),
            arguments: vec!["a".into(), "env:FOO".into()],
            returncodes: vec![0],
            on_host: true,
            env: BTreeMap::from([("X".into(), "from-step-env".into())]),
            idempotence_disabled: false,
            upgrade_step: false,
        }
    );
    assert_eq!(config.steps(Mode::Upgrade)[1].path, "up2.sh");
    assert!(config.steps(Mode::Upgrade)[1].upgrade_step);
    assert!(config.steps(Mode::UpgradeCheck)[0].upgrade_step);
    assert_eq!(config.steps(Mode::PostInterruptCheck)[0].name, "pic");
}

#[test]
fn idempotence_true_means_disabled() {
    let (config, _) = PackageConfig::from_slice(TRANSCRIPT_01.as_bytes()).unwrap();
    let apply = config.steps(Mode::Apply);
    assert!(!apply[0].idempotence_disabled);
    assert_eq!(apply[0].idempotence_label(), "Idempotence.Auto");
    assert!(apply[1].idempotence_disabled);
    assert_eq!(apply[1].idempotence_label(), "Idempotence.Disabled");
}

#[test]
fn absent_mode_has_no_steps() {
    let (config, _) = parse(&minimal()).unwrap();
    assert!(config.steps(Mode::Config).is_empty());
    assert_eq!(config.steps(Mode::Apply).len(), 1);
}

#[test]
fn env_null_or_absent_is_empty() {
    let doc = with(minimal(), "/modes/apply/0/env", Value::Null);
    assert!(parse(&doc).unwrap().0.steps(Mode::Apply)[0].env.is_empty());
    let doc = without(minimal(), "/modes/apply/0/env");
    assert!(parse(&doc).unwrap().0.steps(Mode::Apply)[0].env.is_empty());
}

#[test]
fn env_values_must_be_strings() {
    let doc = with(minimal(), "/modes/apply/0/env", json!({"A": "x", "B": 1}));
    assert_eq!(
        first_error(&doc),
        "modes.apply[0].env.B: expected a string, found number 1"
    );
    let doc = with(minimal(), "/modes/apply/0/env", json!(["A=x"]));
    assert_eq!(
        first_error(&doc),
        "modes.apply[0].env: expected an object, found an array"
    );
}

#[test]
fn env_names_must_be_usable() {
    let doc = with(minimal(), "/modes/apply/0/env", json!({"A=B": "x"}));
    assert_eq!(
        first_error(&doc),
        r#"modes.apply[0].env["A=B"]: "A=B" is not a valid environment variable name"#
    );
    let doc = with(minimal(), "/modes/apply/0/env", json!({"A": "x\u{0}y"}));
    assert_eq!(
        first_error(&doc),
        r#"modes.apply[0].env.A: "x\u0000y" must not contain NUL"#
    );
}

#[test]
fn root_dir_is_accepted_and_ignored() {
    let mut doc = minimal();
    doc["root_dir"] = json!("/");
    let (config, warnings) = parse(&doc).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(config, parse(&minimal()).unwrap().0);
}

#[test]
fn schema_version_must_be_v1() {
    let doc = with(minimal(), "/schema_version", json!("v2"));
    assert_eq!(
        first_error(&doc),
        "schema_version: unknown skyhook-agent schema version: v2"
    );
}

#[test]
fn unknown_schema_version_is_the_only_lint_finding() {
    let doc = json!({"schema_version": "v2", "modes": 3});
    let findings = lint(
        doc.to_string().as_bytes(),
        Path::new("/nonexistent"),
        Path::new("/nonexistent"),
    );
    let shown: Vec<String> = findings.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        ["schema_version: unknown skyhook-agent schema version: v2"]
    );
}

#[test]
fn top_level_fields_are_required() {
    for key in TOP_LEVEL_FIELDS {
        let doc = without(minimal(), &format!("/{key}"));
        assert_eq!(
            first_error(&doc),
            format!("{key}: required field is missing")
        );
    }
}

#[test]
fn top_level_types_are_checked() {
    let cases = [
        (
            "/schema_version",
            json!(1),
            "schema_version: expected a string, found number 1",
        ),
        (
            "/package_name",
            json!(null),
            "package_name: expected a string, found null",
        ),
        (
            "/package_version",
            json!(1.5),
            "package_version: expected a string, found number 1.5",
        ),
        (
            "/expected_config_files",
            json!("a"),
            r#"expected_config_files: expected an array, found string "a""#,
        ),
        (
            "/expected_config_files",
            json!(["a", true]),
            "expected_config_files[1]: expected a string, found boolean true",
        ),
        (
            "/modes",
            json!([]),
            "modes: expected an object, found an array",
        ),
    ];
    for (pointer, value, expected) in cases {
        assert_eq!(first_error(&with(minimal(), pointer, value)), expected);
    }
}

#[test]
fn document_must_be_an_object() {
    assert_eq!(
        first_error_bytes(b"[]"),
        "expected a JSON object, found an array"
    );
    assert_eq!(
        first_error_bytes(b"\"v1\""),
        r#"expected a JSON object, found string "v1""#
    );
}

#[test]
fn package_name_must_be_a_single_path_component() {
    for name in ["", ".", "..", "a/b", "/a", "a\u{0}b"] {
        let doc = with(minimal(), "/package_name", json!(name));
        assert_eq!(
            first_error(&doc),
            format!(
                "package_name: {} must be a single path component",
                Value::from(name)
            )
        );
    }
    for name in ["pkg", "package_with_underscores", "a.b", "..a"] {
        assert!(
            parse(&with(minimal(), "/package_name", json!(name))).is_ok(),
            "{name}"
        );
    }
}

#[test]
fn package_version_must_be_semver() {
    let doc = with(minimal(), "/package_version", json!("1.0"));
    assert_eq!(
        first_error(&doc),
        r#"package_version: "1.0" is not a valid semantic version"#
    );
}

#[test]
fn semver_matches_the_semver_org_pattern() {
    // The valid and invalid examples published with the semver.org regex.
    let valid = [
        "0.0.4",
        "1.2.3",
        "10.20.30",
        "1.1.2-prerelease+meta",
        "1.1.2+meta",
        "1.1.2+meta-valid",
        "1.0.0-alpha",
        "1.0.0-beta",
        "1.0.0-alpha.beta",
        "1.0.0-alpha.beta.1",
        "1.0.0-alpha.1",
        "1.0.0-alpha0.valid",
        "1.0.0-alpha.0valid",
        "1.0.0-alpha-a.b-c-somethinglong+build.1-aef.1-its-okay",
        "1.0.0-rc.1+build.1",
        "2.0.0-rc.1+build.123",
        "1.2.3-beta",
        "10.2.3-DEV-SNAPSHOT",
        "1.2.3-SNAPSHOT-123",
        "1.0.0",
        "2.0.0",
        "1.1.7",
        "2.0.0+build.1848",
        "2.0.1-alpha.1227",
        "1.0.0-alpha+beta",
        "1.2.3----RC-SNAPSHOT.12.9.1--.12+788",
        "1.2.3----R-S.12.9.1--.12+meta",
        "1.2.3----RC-SNAPSHOT.12.9.1--.12",
        "1.0.0+0.build.1-rc.10000aaa-kk-0.1",
        "99999999999999999999999.999999999999999999.99999999999999999",
        "1.0.0-0A.is.legal",
    ];
    let invalid = [
        "1",
        "1.2",
        "1.2.3-0123",
        "1.2.3-0123.0123",
        "1.1.2+.123",
        "+invalid",
        "-invalid",
        "-invalid+invalid",
        "-invalid.01",
        "alpha",
        "alpha.beta",
        "alpha.beta.1",
        "alpha.1",
        "alpha+beta",
        "alpha_beta",
        "alpha.",
        "alpha..",
        "beta",
        "1.0.0-alpha_beta",
        "-alpha.",
        "1.0.0-alpha..",
        "1.0.0-alpha..1",
        "1.0.0-alpha...1",
        "1.0.0-alpha....1",
        "1.0.0-alpha.....1",
        "1.0.0-alpha......1",
        "1.0.0-alpha.......1",
        "01.1.1",
        "1.01.1",
        "1.1.01",
        "1.2",
        "1.2.3.DEV",
        "1.2-SNAPSHOT",
        "1.2.31.2.3----RC-SNAPSHOT.12.09.1--..12+788",
        "1.2-RC-SNAPSHOT",
        "-1.0.3-gamma+b7718",
        "+justmeta",
        "9.8.7+meta+meta",
        "9.8.7-whatever+meta+meta",
        "99999999999999999999999.999999999999999999.99999999999999999----RC-SNAPSHOT.12.09.1--------------------------------..12",
        "",
        "1.0.0\n",
        " 1.0.0",
        "1.0.0-",
        "1.0.0+",
        "1.0.0-a+",
        "١.٢.٣",
    ];
    for v in valid {
        assert!(is_semver(v), "{v:?} should be valid");
    }
    for v in invalid {
        assert!(!is_semver(v), "{v:?} should be invalid");
    }
}

#[test]
fn modes_keys_must_be_stage_modes() {
    let mut doc = minimal();
    doc["modes"]["interrupt"] = json!([]);
    assert_eq!(
        first_error(&doc),
        "modes.interrupt: unknown stage mode \"interrupt\" (expected one of apply, apply-check, config, \
         config-check, upgrade, upgrade-check, uninstall, uninstall-check, post-interrupt, post-interrupt-check)"
    );
    let mut doc = minimal();
    doc["modes"]["Apply"] = json!([]);
    assert!(first_error(&doc).starts_with("modes.Apply: unknown stage mode \"Apply\""));
}

#[test]
fn mode_value_must_be_an_array_of_objects() {
    let doc = with(minimal(), "/modes/apply", json!({}));
    assert_eq!(
        first_error(&doc),
        "modes.apply: expected an array, found an object"
    );
    let doc = with(minimal(), "/modes/apply/0", json!("s1.sh"));
    assert_eq!(
        first_error(&doc),
        r#"modes.apply[0]: expected an object, found string "s1.sh""#
    );
}

#[test]
fn step_fields_are_required() {
    for key in STEP_FIELDS.into_iter().filter(|&k| k != "env") {
        let doc = without(minimal(), &format!("/modes/apply-check/0/{key}"));
        assert_eq!(
            first_error(&doc),
            format!("modes.apply-check[0].{key}: required field is missing")
        );
    }
}

#[test]
fn step_boolean_fields_must_be_booleans() {
    for key in ["on_host", "idempotence", "upgrade_step"] {
        let doc = with(minimal(), &format!("/modes/apply/0/{key}"), json!("true"));
        assert_eq!(
            first_error(&doc),
            format!(r#"modes.apply[0].{key}: expected a boolean, found string "true""#)
        );
    }
}

#[test]
fn step_name_must_match_the_pattern() {
    let doc = with(minimal(), "/modes/apply/0/name", json!("bad name!"));
    assert_eq!(
        first_error(&doc),
        r#"modes.apply[0].name: "bad name!" must match ^[a-zA-Z0-9_\-.]+$"#
    );
    let doc = with(minimal(), "/modes/apply/0/name", json!(""));
    assert_eq!(
        first_error(&doc),
        r#"modes.apply[0].name: "" must match ^[a-zA-Z0-9_\-.]+$"#
    );
    assert!(parse(&with(minimal(), "/modes/apply/0/name", json!("a-Z_0.9"))).is_ok());
}

#[test]
fn step_path_must_be_relative_without_dotdot() {
    let cases = [
        ("", "modes.apply[0].path: must not be empty"),
        (
            "/bin/sh",
            r#"modes.apply[0].path: "/bin/sh" must be a relative path"#,
        ),
        (
            "../x.sh",
            r#"modes.apply[0].path: "../x.sh" must not contain a ".." component"#,
        ),
        (
            "a/../../x.sh",
            r#"modes.apply[0].path: "a/../../x.sh" must not contain a ".." component"#,
        ),
        (
            "x\u{0}.sh",
            r#"modes.apply[0].path: "x\u0000.sh" must not contain NUL"#,
        ),
    ];
    for (path, expected) in cases {
        assert_eq!(
            first_error(&with(minimal(), "/modes/apply/0/path", json!(path))),
            expected
        );
    }
    assert!(parse(&with(minimal(), "/modes/apply/0/path", json!("dir/..x.sh"))).is_ok());
}

#[test]
fn arguments_must_be_strings() {
    let doc = with(minimal(), "/modes/apply/0/arguments", json!(["a", 1]));
    assert_eq!(
        first_error(&doc),
        "modes.apply[0].arguments[1]: expected a string, found number 1"
    );
    let doc = with(minimal(), "/modes/apply/0/arguments", json!("a"));
    assert_eq!(
        first_error(&doc),
        r#"modes.apply[0].arguments: expected an array, found string "a""#
    );
    let doc = with(minimal(), "/modes/apply/0/arguments", json!(["a\u{0}"]));
    assert_eq!(
        first_error(&doc),
        r#"modes.apply[0].arguments[0]: "a\u0000" must not contain NUL"#
    );
}

#[test]
fn returncodes_must_contain_at_least_one_code() {
    let doc = json!({
        "schema_version": "v1", "package_name": "pkg", "package_version": "1.0.0",
        "expected_config_files": [],
        "modes": {
            "apply": [step("s1", "s1.sh"), with(step("s2", "s2.sh"), "/returncodes", json!([]))],
            "apply-check": [step("s1c", "s1_check.sh")],
        },
    });
    assert_eq!(
        first_error(&doc),
        "modes.apply[1].returncodes: must contain at least one code"
    );
}

#[test]
fn returncodes_must_be_integers() {
    let cases = [
        (
            json!([0, 1.0]),
            "modes.apply[0].returncodes[1]: expected an integer, found number 1.0",
        ),
        (
            json!([0.5]),
            "modes.apply[0].returncodes[0]: expected an integer, found number 0.5",
        ),
        (
            json!(["0"]),
            r#"modes.apply[0].returncodes[0]: expected an integer, found string "0""#,
        ),
        (
            json!([u64::MAX]),
            "modes.apply[0].returncodes[0]: 18446744073709551615 is out of range",
        ),
        (
            json!(0),
            "modes.apply[0].returncodes: expected an array, found number 0",
        ),
    ];
    for (codes, expected) in cases {
        assert_eq!(
            first_error(&with(minimal(), "/modes/apply/0/returncodes", codes)),
            expected
        );
    }
    // Python reports death by signal N as -N; such codes are legitimate.
    let doc = with(
        minimal(),
        "/modes/apply/0/returncodes",
        json!([0, -15, 255]),
    );
    assert_eq!(
        parse(&doc).unwrap().0.steps(Mode::Apply)[0].returncodes,
        [0, -15, 255]
    );
}

#[test]
fn floats_written_with_exponents_are_not_integers() {
    let text = minimal()
        .to_string()
        .replace(r#""returncodes":[0]"#, r#""returncodes":[1e0]"#);
    assert_eq!(
        first_error_bytes(text.as_bytes()),
        "modes.apply[0].returncodes[0]: expected an integer, found number 1.0"
    );
}

#[test]
fn unknown_step_field_warns_at_run_time_and_errors_in_lint() {
    let mut doc = minimal();
    doc["modes"]["apply"][0]["timeout"] = json!(5);
    assert_eq!(warnings(&doc), ["modes.apply[0].timeout: unknown field"]);
    let finding = lint_findings(&doc)
        .into_iter()
        .find(|f| f.path == "modes.apply[0].timeout")
        .unwrap();
    assert_eq!(finding.severity, Severity::Error);
    assert_eq!(finding.message, "unknown field");
}

#[test]
fn unknown_top_level_field_warns_at_run_time_and_errors_in_lint() {
    let mut doc = minimal();
    doc["extra field"] = json!(1);
    assert_eq!(warnings(&doc), [r#"["extra field"]: unknown field"#]);
    let finding = lint_findings(&doc)
        .into_iter()
        .find(|f| f.message == "unknown field")
        .unwrap();
    assert_eq!(finding.severity, Severity::Error);
}

#[test]
fn non_string_root_dir_warns_at_run_time() {
    let mut doc = minimal();
    doc["root_dir"] = json!(1);
    assert_eq!(
        warnings(&doc),
        ["root_dir: expected a string, found number 1"]
    );
}

#[test]
fn no_steps_anywhere_is_an_error() {
    let doc = with(minimal(), "/modes", json!({}));
    assert_eq!(first_error(&doc), "There are no defined steps");
    let doc = with(minimal(), "/modes", json!({"apply": [], "apply-check": []}));
    assert_eq!(first_error(&doc), "There are no defined steps");
}

#[test]
fn only_check_modes_is_an_error() {
    let doc = with(
        minimal(),
        "/modes",
        json!({"apply-check": [step("c", "c_check.sh")], "apply": []}),
    );
    assert_eq!(
        first_error(&doc),
        "modes: only check modes have steps; at least one of apply, config, upgrade, uninstall, \
         post-interrupt must have steps"
    );
}

#[test]
fn non_check_mode_needs_steps_in_its_check_twin() {
    let doc = with(minimal(), "/modes/apply-check", json!([]));
    assert_eq!(
        first_error(&doc),
        "modes.apply-check: must have steps because modes.apply has steps"
    );
    let doc = without(minimal(), "/modes/apply-check");
    assert_eq!(
        first_error(&doc),
        "modes.apply-check: must have steps because modes.apply has steps"
    );
    let mut doc = minimal();
    doc["modes"]["post-interrupt"] = json!([step("p", "p.sh")]);
    assert_eq!(
        first_error(&doc),
        "modes.post-interrupt-check: must have steps because modes.post-interrupt has steps"
    );
}

#[test]
fn upgrade_step_only_in_upgrade_modes() {
    let doc = with(minimal(), "/modes/apply/0/upgrade_step", json!(true));
    assert_eq!(
        first_error(&doc),
        "modes.apply[0].upgrade_step: may only be true in modes.upgrade and modes.upgrade-check, not in modes.apply"
    );
    let doc = with(minimal(), "/modes/apply-check/0/upgrade_step", json!(true));
    assert!(first_error(&doc).starts_with("modes.apply-check[0].upgrade_step: may only be true"));
}

#[test]
fn upgrade_step_must_not_have_arguments() {
    let mut doc = minimal();
    doc["modes"]["upgrade"] = json!([with(
        with(step("u", "u.sh"), "/upgrade_step", json!(true)),
        "/arguments",
        json!(["x"])
    )]);
    doc["modes"]["upgrade-check"] = json!([step("uc", "u_check.sh")]);
    assert_eq!(
        first_error(&doc),
        "modes.upgrade[0].arguments: must be empty for an upgrade step (the agent passes the previous and \
         current versions)"
    );
}

#[test]
fn upgrade_steps_are_accepted_in_upgrade_and_upgrade_check() {
    let mut doc = minimal();
    doc["modes"]["upgrade"] = json!([with(step("u", "u.sh"), "/upgrade_step", json!(true))]);
    doc["modes"]["upgrade-check"] =
        json!([with(step("uc", "u_check.sh"), "/upgrade_step", json!(true))]);
    let (config, _) = parse(&doc).unwrap();
    assert!(config.steps(Mode::Upgrade)[0].upgrade_step);
    assert!(config.steps(Mode::UpgradeCheck)[0].upgrade_step);
}

#[test]
fn control_characters_in_a_step_path_are_a_warning() {
    let mut doc = minimal();
    doc["modes"]["apply"][0]["path"] = json!("a\nb.sh");
    doc["modes"]["apply-check"][0]["path"] = json!("a\nb_check.sh");
    let found = warnings(&doc);
    assert!(
        found.iter().any(
            |w| w.starts_with("modes.apply[0].path: \"a\\nb.sh\" contains a control character")
        ),
        "{found:?}"
    );
}

#[test]
fn step_without_check_pair_is_a_warning() {
    let doc = with(minimal(), "/modes/apply-check/0/path", json!("other.sh"));
    assert_eq!(
        warnings(&doc),
        [r#"modes.apply[0].path: no check step "s1_check.sh" for "s1.sh" in modes.apply-check"#]
    );
}

#[test]
fn check_pair_is_looked_up_in_the_twin_mode_only() {
    let mut doc = with(minimal(), "/modes/apply-check/0/path", json!("other.sh"));
    doc["modes"]["config"] = json!([step("c", "c.sh")]);
    doc["modes"]["config-check"] = json!([step("cc", "s1_check.sh"), step("cc2", "c_check.sh")]);
    assert_eq!(warnings(&doc).len(), 1);
}

#[test]
fn expected_check_path_inserts_before_the_extension() {
    assert_eq!(expected_check_path("x.sh"), "x_check.sh");
    assert_eq!(expected_check_path("x.py"), "x_check.py");
    assert_eq!(expected_check_path("x"), "x_check");
    assert_eq!(expected_check_path("x."), "x_check");
    assert_eq!(expected_check_path("a.tar.gz"), "a.tar_check.gz");
    assert_eq!(expected_check_path("dir.v1/x"), "dir.v1/x_check");
    assert_eq!(expected_check_path("dir.v1/x.sh"), "dir.v1/x_check.sh");
}

#[test]
fn steps_without_extension_pair_with_check_suffix() {
    let doc = with(
        with(minimal(), "/modes/apply/0/path", json!("install")),
        "/modes/apply-check/0/path",
        json!("install_check"),
    );
    assert!(warnings(&doc).is_empty());
}

#[test]
fn invalid_utf8_is_a_clean_error() {
    assert_eq!(
        first_error_bytes(b"{\"schema_version\": \"v\xff\"}"),
        "config is not valid UTF-8: invalid utf-8 sequence of 1 bytes from index 21"
    );
}

#[test]
fn invalid_json_is_a_clean_error() {
    assert_eq!(
        first_error_bytes(b""),
        "config is not valid JSON: EOF while parsing a value at line 1 column 0"
    );
    assert_eq!(
        first_error_bytes(b"{\"a\": 1,}"),
        "config is not valid JSON: trailing comma at line 1 column 9"
    );
}

#[test]
fn deeply_nested_json_is_a_clean_error() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(
        first_error_bytes(deep.as_bytes())
            .starts_with("config is not valid JSON: recursion limit exceeded")
    );
    let deep = format!(
        "{{\"modes\": {}{}}}",
        "{\"a\":".repeat(10_000),
        "}".repeat(10_000)
    );
    assert!(
        first_error_bytes(deep.as_bytes())
            .starts_with("config is not valid JSON: recursion limit exceeded")
    );
}

#[test]
fn from_slice_returns_the_first_error_in_document_order() {
    let doc = with(
        with(minimal(), "/package_name", json!("a/b")),
        "/modes/apply/0/name",
        json!("!"),
    );
    assert_eq!(
        first_error(&doc),
        r#"package_name: "a/b" must be a single path component"#
    );
}

#[test]
fn long_values_are_cut_in_messages() {
    let doc = with(minimal(), "/package_version", json!("x".repeat(1000)));
    assert_eq!(
        first_error(&doc),
        format!(
            r#"package_version: "{}"... is not a valid semantic version"#,
            "x".repeat(100)
        )
    );
}

fn package_dir(doc: &Value, step_files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), doc.to_string()).unwrap();
    std::fs::create_dir(dir.path().join("skyhook_dir")).unwrap();
    std::fs::create_dir(dir.path().join("configmaps")).unwrap();
    for f in step_files {
        std::fs::write(dir.path().join("skyhook_dir").join(f), "#!/bin/sh\n").unwrap();
    }
    dir
}

fn load(dir: &Path) -> Result<(PackageConfig, Vec<Finding>), ConfigError> {
    PackageConfig::load(&dir.join("config.json"), &dir.join("skyhook_dir"))
}

fn load_stage(dir: &Path, mode: Mode) -> Result<(PackageConfig, Vec<Finding>), ConfigError> {
    PackageConfig::load_stage(&dir.join("config.json"), &dir.join("skyhook_dir"), mode)
}

fn lint_findings(doc: &Value) -> Vec<Finding> {
    let dir = package_dir(doc, &["s1.sh", "s1_check.sh"]);
    lint(
        doc.to_string().as_bytes(),
        &dir.path().join("skyhook_dir"),
        &dir.path().join("configmaps"),
    )
}

#[test]
fn load_accepts_existing_step_files_and_links_to_them() {
    let dir = package_dir(&minimal(), &["s1.sh", "real.sh"]);
    std::os::unix::fs::symlink("real.sh", dir.path().join("skyhook_dir/s1_check.sh")).unwrap();
    let (config, warnings) = load(dir.path()).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(config.steps(Mode::Apply)[0].path, "s1.sh");
}

#[test]
fn load_rejects_a_missing_step_file() {
    let dir = package_dir(&minimal(), &["s1.sh"]);
    let err = load(dir.path()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            r#"modes.apply-check[0].path: step file "s1_check.sh" does not exist in {}"#,
            dir.path().join("skyhook_dir").display()
        )
    );
}

#[test]
fn load_rejects_a_step_file_that_is_not_a_regular_file() {
    let dir = package_dir(&minimal(), &["s1_check.sh"]);
    std::fs::create_dir(dir.path().join("skyhook_dir/s1.sh")).unwrap();
    let err = load(dir.path()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            r#"modes.apply[0].path: step file "s1.sh" in {} is not a regular file"#,
            dir.path().join("skyhook_dir").display()
        )
    );
    // A dangling link does not exist.
    std::fs::remove_dir(dir.path().join("skyhook_dir/s1.sh")).unwrap();
    std::os::unix::fs::symlink("gone.sh", dir.path().join("skyhook_dir/s1.sh")).unwrap();
    assert!(
        load(dir.path())
            .unwrap_err()
            .to_string()
            .contains(r#"step file "s1.sh" does not exist"#)
    );
}

#[test]
fn load_reports_the_schema_error_before_files() {
    let doc = with(minimal(), "/package_version", json!("1"));
    let dir = package_dir(&doc, &[]);
    assert_eq!(
        load(dir.path()).unwrap_err().to_string(),
        r#"package_version: "1" is not a valid semantic version"#
    );
}

#[test]
fn load_names_an_unreadable_config() {
    let dir = tempfile::tempdir().unwrap();
    let err = load(dir.path()).unwrap_err();
    let ConfigError::Read { path, source } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(path, &dir.path().join("config.json").display().to_string());
    assert_eq!(source.kind(), io::ErrorKind::NotFound);
    assert_eq!(err.to_string(), format!("reading {path}"));
}

#[test]
fn lint_reports_every_finding_in_path_order() {
    let mut doc = minimal();
    let mut apply: Vec<Value> = (0..12).map(|i| step(&format!("s{i}"), "s1.sh")).collect();
    apply[10]["returncodes"] = json!([]);
    apply[2]["name"] = json!("bad name!");
    apply[9]["path"] = json!("missing.sh");
    apply[1]["extra"] = json!(true);
    doc["modes"]["apply"] = Value::Array(apply);
    doc["package_version"] = json!("1.0");
    doc["expected_config_files"] = json!(["present.conf", "absent.conf", "../x"]);
    let dir = package_dir(&doc, &["s1.sh", "s1_check.sh"]);
    std::fs::write(dir.path().join("configmaps/present.conf"), "").unwrap();
    let findings = lint(
        doc.to_string().as_bytes(),
        &dir.path().join("skyhook_dir"),
        &dir.path().join("configmaps"),
    );
    let shown: Vec<String> = findings
        .iter()
        .map(|f| format!("{:?} {f}", f.severity))
        .collect();
    let skyhook_dir = dir.path().join("skyhook_dir");
    assert_eq!(
        shown,
        [
            r#"Error expected_config_files[1]: expected config file "absent.conf" was not found in the configmaps directory"#.to_owned(),
            r#"Error expected_config_files[2]: expected config file "../x" must be a non-empty relative path without ".." components"#.to_owned(),
            "Error modes.apply[1].extra: unknown field".to_owned(),
            r#"Error modes.apply[2].name: "bad name!" must match ^[a-zA-Z0-9_\-.]+$"#.to_owned(),
            format!(r#"Error modes.apply[9].path: step file "missing.sh" does not exist in {}"#, skyhook_dir.display()),
            r#"Warning modes.apply[9].path: no check step "missing_check.sh" for "missing.sh" in modes.apply-check"#.to_owned(),
            "Error modes.apply[10].returncodes: must contain at least one code".to_owned(),
            r#"Error package_version: "1.0" is not a valid semantic version"#.to_owned(),
        ]
    );
}

#[test]
fn lint_of_a_valid_package_is_empty() {
    assert_eq!(lint_findings(&minimal()), []);
}

#[test]
fn lint_of_unparsable_bytes_is_one_error() {
    let findings = lint(
        b"nope",
        Path::new("/nonexistent"),
        Path::new("/nonexistent"),
    );
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].severity, Severity::Error);
    assert_eq!(findings[0].path, "");
}

#[test]
fn findings_serialize_with_lowercase_severity() {
    let finding = Finding {
        severity: Severity::Warning,
        path: "a".into(),
        message: "m".into(),
    };
    assert_eq!(
        serde_json::to_string(&finding).unwrap(),
        r#"{"severity":"warning","path":"a","message":"m"}"#
    );
}

/// Any JSON value, nested a few levels, with keys drawn from the schema so that the
/// validator's deeper branches are reached.
fn arbitrary_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("schema_version".to_owned()),
        Just("package_name".to_owned()),
        Just("package_version".to_owned()),
        Just("expected_config_files".to_owned()),
        Just("modes".to_owned()),
        Just("apply".to_owned()),
        Just("apply-check".to_owned()),
        Just("upgrade".to_owned()),
        Just("name".to_owned()),
        Just("path".to_owned()),
        Just("arguments".to_owned()),
        Just("returncodes".to_owned()),
        Just("env".to_owned()),
        Just("upgrade_step".to_owned()),
        ".{0,4}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        Just(json!("v1")),
        Just(json!("1.0.0")),
        ".{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = PackageConfig::from_slice(&bytes);
        let _ = lint(&bytes, Path::new("/nonexistent"), Path::new("/nonexistent"));
    }

    #[test]
    fn arbitrary_json_never_panics(doc in arbitrary_json()) {
        let bytes = doc.to_string().into_bytes();
        let result = PackageConfig::from_slice(&bytes);
        let findings = lint(&bytes, Path::new("/nonexistent"), Path::new("/nonexistent"));
        // lint is a superset: whatever stops a run is among its findings.
        if let Err(ConfigError::Invalid(first)) = &result {
            prop_assert!(findings.contains(first));
        }
    }

    #[test]
    fn mutated_valid_config_never_panics(pointer in prop_oneof![
        Just("/schema_version"), Just("/package_name"), Just("/package_version"),
        Just("/expected_config_files"), Just("/modes"), Just("/modes/apply"), Just("/modes/apply/0"),
        Just("/modes/apply/0/name"), Just("/modes/apply/0/path"), Just("/modes/apply/0/arguments"),
        Just("/modes/apply/0/returncodes"), Just("/modes/apply/0/env"), Just("/modes/apply-check/0/upgrade_step"),
    ], value in arbitrary_json()) {
        let doc = with(minimal(), pointer, value);
        let bytes = doc.to_string().into_bytes();
        match PackageConfig::from_slice(&bytes) {
            Ok((config, warnings)) => {
                prop_assert!(warnings.iter().all(|w| w.severity == Severity::Warning));
                prop_assert!(!config.modes.is_empty());
            }
            Err(ConfigError::Invalid(first)) => prop_assert_eq!(first.severity, Severity::Error),
            Err(e) => prop_assert!(false, "unexpected {e:?}"),
        }
        let _ = lint(&bytes, Path::new("/nonexistent"), Path::new("/nonexistent"));
    }
}

mod load_tests {
    use super::*;

    #[test]
    fn load_refuses_a_fifo_config_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.json");
        nix::unistd::mkfifo(&config, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = PackageConfig::load(&config, &dir.path().join("skyhook_dir")).unwrap_err();
        assert_eq!(
            format!("{err}: {}", std::error::Error::source(&err).unwrap()),
            format!("reading {}: a fifo, not a regular file", config.display())
        );
    }

    #[test]
    fn load_refuses_a_directory_config() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.json");
        std::fs::create_dir(&config).unwrap();
        let err = PackageConfig::load(&config, &dir.path().join("skyhook_dir")).unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }), "{err:?}");
    }
}

/// The document is read one step at a time; its findings and model must still be those of
/// the whole tree: the first error by the canonical order of modes whatever their order in
/// the text, and a key given twice keeping its last value.
#[test]
fn findings_and_model_do_not_depend_on_key_order_or_repetition() {
    let s = |name: &str, path: &str| step(name, path).to_string();
    let bad = r#"{"name":"b","path":"/abs.sh","arguments":[],"returncodes":[0],"on_host":true,"idempotence":false,"upgrade_step":false}"#;
    // `config` (invalid) comes first in the text, `apply` (invalid) after: apply is reported.
    let doc = format!(
        r#"{{"modes": {{"config": [{bad}], "bogus": 1, "apply": [{}, {bad}], "apply-check": [{}], "config-check": [{}]}},
           "schema_version": "v1", "package_name": "pkg", "package_version": "1.0.0", "expected_config_files": []}}"#,
        s("a", "a.sh"),
        s("ac", "a_check.sh"),
        s("cc", "cfg_check.sh"),
    );
    assert_eq!(
        first_error_bytes(doc.as_bytes()),
        "modes.apply[1].path: \"/abs.sh\" must be a relative path"
    );
    let mut paths: Vec<String> = lint(
        doc.as_bytes(),
        Path::new("/nonexistent"),
        Path::new("/nonexistent"),
    )
    .into_iter()
    .filter(|f| f.severity == Severity::Error && !f.message.starts_with("step file"))
    .map(|f| f.path)
    .collect();
    paths.dedup();
    assert_eq!(
        paths,
        ["modes.apply[1].path", "modes.bogus", "modes.config[0].path"]
    );

    // An invalid `apply` replaced by a valid one, and `modes` itself given twice: the last wins.
    let doc = format!(
        r#"{{"schema_version": "v1", "package_name": "pkg", "package_version": "1.0.0", "expected_config_files": [],
           "modes": {{"uninstall": 3}},
           "modes": {{"apply": [{bad}], "apply-check": [{}], "apply": [{}, {}]}}}}"#,
        s("ac", "a_check.sh"),
        s("a1", "a1.sh"),
        s("a2", "a2.sh"),
    );
    let (config, _) = PackageConfig::from_slice(doc.as_bytes()).expect("the last keys are valid");
    let names: Vec<&str> = config
        .steps(Mode::Apply)
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["a1", "a2"]);
    assert!(config.steps(Mode::Uninstall).is_empty());
}

/// Every step file of [`TRANSCRIPT_01`].
fn transcript_01_dir() -> tempfile::TempDir {
    let doc: Value = serde_json::from_str(TRANSCRIPT_01).unwrap();
    let files: Vec<String> = doc["modes"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|steps| steps.as_array().unwrap())
        .map(|s| s["path"].as_str().unwrap().to_owned())
        .collect();
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let dir = package_dir(&doc, &files);
    std::fs::write(dir.path().join("config.json"), TRANSCRIPT_01).unwrap();
    dir
}

#[test]
fn a_stage_load_keeps_the_steps_of_its_mode_only() {
    let dir = transcript_01_dir();
    let (all, _) = load(dir.path()).unwrap();
    let (apply, warnings) = load_stage(dir.path(), Mode::Apply).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(apply.steps(Mode::Apply), all.steps(Mode::Apply));
    assert_eq!(apply.steps(Mode::Apply).len(), 2);
    for mode in Mode::ALL.into_iter().filter(|m| *m != Mode::Apply) {
        assert!(apply.steps(mode).is_empty(), "{mode}");
    }
    assert_eq!(
        (
            &apply.package_name,
            &apply.package_version,
            &apply.expected_config_files
        ),
        (
            &all.package_name,
            &all.package_version,
            &all.expected_config_files
        )
    );
    // uninstall-check removes the markers of every mode's steps: it keeps them all.
    let (uninstall_check, _) = load_stage(dir.path(), Mode::UninstallCheck).unwrap();
    assert_eq!(uninstall_check, all);
}

#[test]
fn a_stage_load_checks_the_steps_of_every_mode() {
    // A broken step of another mode fails the run as with a full load.
    let doc = with(minimal(), "/modes/apply-check/0/returncodes", json!("zero"));
    let dir = package_dir(&doc, &["s1.sh", "s1_check.sh"]);
    let full = load(dir.path()).unwrap_err().to_string();
    let stage = load_stage(dir.path(), Mode::Apply).unwrap_err().to_string();
    assert_eq!(stage, full);
    assert!(
        stage.starts_with("modes.apply-check[0].returncodes: "),
        "{stage}"
    );
    // And a missing step file of another mode.
    let dir = package_dir(&minimal(), &["s1.sh"]);
    let stage = load_stage(dir.path(), Mode::Apply).unwrap_err().to_string();
    assert!(
        stage.starts_with(r#"modes.apply-check[0].path: step file "s1_check.sh" does not exist"#),
        "{stage}"
    );
}

#[test]
fn a_config_read_as_it_goes_is_judged_as_its_bytes_are() {
    // The file is parsed through a reader; what is not a JSON document as read gets the
    // finding of its whole text, exactly as before.
    let valid = minimal().to_string();
    let cases: Vec<Vec<u8>> = vec![
        b"{\"schema_version\": \"v1\", \"package_name\": \"p\xff\"}".to_vec(),
        b"\xef\xbb\xbf{}".to_vec(),
        b"{\"schema_version\": \"v1\",".to_vec(),
        format!("{valid} trailing").into_bytes(),
        b"[1, 2]".to_vec(),
        b"".to_vec(),
        format!("{}{}", "[".repeat(200), "]".repeat(200)).into_bytes(),
        valid
            .replace("\"s1.sh\"", "\"s1.sh\", \"path\": \"../x\"")
            .into_bytes(),
    ];
    for bytes in cases {
        let dir = package_dir(&minimal(), &["s1.sh", "s1_check.sh"]);
        std::fs::write(dir.path().join("config.json"), &bytes).unwrap();
        let read = load(dir.path()).unwrap_err().to_string();
        assert_eq!(
            read,
            first_error_bytes(&bytes),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
    }
    // A valid one loads as from its bytes, warnings included.
    let mut doc = minimal();
    doc["modes"]["apply"][0]["extra"] = json!(1);
    let dir = package_dir(&doc, &["s1.sh", "s1_check.sh"]);
    let read = load(dir.path()).unwrap();
    assert_eq!(read.1.len(), 1, "the unknown field's warning: {:?}", read.1);
    assert_eq!(
        read,
        PackageConfig::from_slice(doc.to_string().as_bytes()).unwrap()
    );
}
