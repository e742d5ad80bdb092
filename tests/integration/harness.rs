//! Self-tests of the harness: the fake host works and the byte-format helpers the other tests
//! compute expectations with are right (golden values from SPEC.md and the legacy transcripts).

use std::process::Command;
use std::time::Duration;

use crate::util::{
    BOOT_ID, FakeHost, Package, Step, fingerprint_json, go_json_str, legacy_marker_name,
    native_marker_name, parse_log_name, parse_rfc3339_nano_utc, py_repr_str, sha256_hex,
};

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// What `python3 -c script` prints for `input` on its standard input.
fn python3(script: &str, input: &[u8]) -> String {
    let Ok(out) = Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(input)?;
            child.wait_with_output()
        })
    else {
        crate::util::cannot_run("python3 is missing: install it (scripts/test.sh does)");
    };
    assert!(out.status.success(), "python3 failed: {script}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn sha256_matches_known_digests() {
    assert_eq!(
        sha256_hex(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    // Two blocks of padding.
    assert_eq!(
        sha256_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    );
    // Python's hashlib as an oracle independent of the crate the agent hashes with too.
    let corpus: Vec<String> = (0..130).map(|n| "é\n\"x".repeat(n)).collect();
    let expected = python3(
        "import sys,json,hashlib\nfor s in json.load(sys.stdin): print(hashlib.sha256(s.encode()).hexdigest())",
        &serde_json::to_vec(&corpus).unwrap(),
    );
    let ours: Vec<String> = corpus.iter().map(|s| sha256_hex(s.as_bytes())).collect();
    assert_eq!(ours, expected.lines().collect::<Vec<_>>());
}

#[test]
fn native_marker_name_matches_the_spec_golden_value() {
    let json = fingerprint_json(
        "scripts/apply.sh",
        &strings(&["--mode", "fast"]),
        &[0, 2],
        &[],
        true,
    );
    assert_eq!(
        json,
        r#"{"path":"scripts/apply.sh","arguments":["--mode","fast"],"returnCodes":[0,2],"env":{},"onHost":true}"#
    );
    assert_eq!(
        native_marker_name(
            "scripts/apply.sh",
            &strings(&["--mode", "fast"]),
            &[0, 2],
            &[],
            true
        ),
        "apply.sh-f3f526b85e0a962f2b4b68089385cd5b4829c09a436112f6586ff5f288e4ecf4.flag"
    );
}

#[test]
fn go_json_escapes_like_encoding_json() {
    assert_eq!(go_json_str("a<b>&c"), r#""a\u003cb\u003e\u0026c""#);
    assert_eq!(go_json_str("q\"b\\"), r#""q\"b\\""#);
    assert_eq!(
        go_json_str("\n\r\t\u{8}\u{c}\u{1}"),
        r#""\n\r\t\b\f\u0001""#
    );
    assert_eq!(go_json_str("\u{2028}\u{2029}é"), "\"\\u2028\\u2029é\"");
}

#[test]
fn legacy_marker_names_match_the_transcripts() {
    let cases: &[(&str, &[&str], &[i64], &str)] = &[
        (
            "s1.sh",
            &["a", "env:FOO"],
            &[0],
            "s1.sh_WydhJywgJ2VudjpGT08nXV9bMF0=",
        ),
        ("s2.sh", &[], &[0], "s2.sh_W11fWzBd"),
        ("up.sh", &["u1"], &[0], "up.sh_Wyd1MSddX1swXQ=="),
        ("q.sh", &["?"], &[0], "q.sh_Wyc/J11fWzBd"),
        (
            "sub/deep.sh",
            &["it's", "a b", "é"],
            &[0],
            "sub/deep.sh_WyJpdCdzIiwgJ2EgYicsICfDqSddX1swXQ==",
        ),
    ];
    for (path, args, rcs, expected) in cases {
        assert_eq!(&legacy_marker_name(path, &strings(args), rcs), expected);
    }
    let long = "z".repeat(200);
    let name = legacy_marker_name("long.sh", &[long], &[0]);
    assert!(name.starts_with("long.sh_Wyd6enp6"), "{name}");
    assert!(name.ends_with("enp6eiddX1swXQ=="), "{name}");
}

#[test]
fn py_repr_matches_python3() {
    let corpus = [
        "plain",
        "it's",
        "say \"hi\"",
        "both ' and \"",
        "back\\slash",
        "tab\there",
        "nl\nx",
        "cr\r",
        "\u{1}\u{7f}",
        "é ✓",
        "",
    ];
    assert_eq!(py_repr_str("it's"), "\"it's\"");
    assert_eq!(py_repr_str("both ' and \""), "'both \\' and \"'");
    let expected = python3(
        "import sys,json\nfor s in json.load(sys.stdin): print(repr(s))",
        &serde_json::to_vec(&corpus).unwrap(),
    );
    let ours: Vec<String> = corpus.iter().map(|s| py_repr_str(s)).collect();
    assert_eq!(ours, expected.lines().collect::<Vec<_>>());
}

#[test]
fn rfc3339_nano_parser_accepts_only_go_format() {
    assert!(parse_rfc3339_nano_utc("2026-11-30T10:27:28.149141Z").is_some());
    assert!(parse_rfc3339_nano_utc("2026-11-30T10:27:28Z").is_some());
    assert!(parse_rfc3339_nano_utc("2026-11-30T10:27:28.123456789Z").is_some());
    assert!(parse_rfc3339_nano_utc("2026-11-30T10:27:28.149140Z").is_none());
    assert!(parse_rfc3339_nano_utc("2026-11-30T10:27:28.149141").is_none());
    assert!(parse_rfc3339_nano_utc("2026-11-30T10:27:28.149141+00:00").is_none());
    for bad in [
        "2026-11-30t10:27:28Z",
        "2026-13-30T10:27:28Z",
        "2026-11-30T10:27:28.Z",
        "2026-11-30T10:27:28.1234567891Z",
        "2026-11-30 10:27:28Z",
        "26-11-30T10:27:28Z",
    ] {
        assert!(parse_rfc3339_nano_utc(bad).is_none(), "{bad}");
    }
    let a = parse_rfc3339_nano_utc("1970-01-02T00:00:01.5Z").unwrap();
    assert_eq!(
        a.duration_since(std::time::UNIX_EPOCH).unwrap(),
        Duration::new(86_401, 500_000_000)
    );
}

#[test]
fn log_name_parser_splits_base_timestamp_and_collision() {
    let n = parse_log_name("x-y-2026-11-30-102928.000000001.log").unwrap();
    assert_eq!(n.base, "x-y");
    assert_eq!(n.collision, None);
    let n = parse_log_name("x-2026-11-30-102928.123456789-2.log").unwrap();
    assert_eq!(n.base, "x");
    assert_eq!(n.collision, Some(2));
    assert_eq!(
        n.time.duration_since(std::time::UNIX_EPOCH).unwrap(),
        Duration::new(1_796_034_568, 123_456_789)
    );
    assert!(parse_log_name("x-2026-11-30-102928.log").is_none());
    assert!(parse_log_name("x-2026-13-30-102928.123456789.log").is_none());
    assert!(parse_log_name("-2026-11-30-102928.123456789.log").is_none());
    assert!(parse_log_name("x-2026-11-30-102928.123456789.log.err").is_none());
}

#[test]
fn fake_host_has_busybox_fake_tools_and_boot_id() {
    let host = FakeHost::new();
    assert!(host.is_file("bin/busybox"));
    assert!(host.exists("bin/sh"));
    assert!(
        !host.exists("bin/reboot"),
        "busybox reboot must never be linked"
    );
    assert!(host.is_file("usr/bin/systemctl"));
    assert_eq!(
        host.read_string("proc/sys/kernel/random/boot_id").trim(),
        BOOT_ID
    );
    assert!(!host.exists("var/log"));
}

#[test]
fn fake_host_chroot_runs_busybox_shell() {
    require_root!();
    let host = FakeHost::new();
    let out = Command::new("/bin/busybox")
        .args([
            "chroot",
            &host.root_str(),
            "/bin/sh",
            "-c",
            "echo hi; pwd; sleep 0 & wait $!",
        ])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n/\n");
    assert!(out.stderr.is_empty(), "{out:?}");
}

#[test]
fn fake_system_tools_only_record_their_arguments() {
    require_root!();
    let host = FakeHost::new();
    let out = Command::new("/bin/busybox")
        .args([
            "chroot",
            &host.root_str(),
            "/bin/sh",
            "-c",
            "/usr/bin/systemctl restart kubelet && /usr/bin/reboot",
        ])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        host.read_string("var/tmp/calls.log"),
        "systemctl restart kubelet\nreboot \n"
    );
}

#[test]
fn package_builder_writes_config_scripts_and_dirs() {
    let host = FakeHost::new();
    let pkg = Package::standard().configmap("a.conf", b"a").root_file(
        "etc/pkg/pkg.conf",
        b"from root_dir",
        0o644,
    );
    host.install(&pkg);
    let cfg: serde_json::Value =
        serde_json::from_slice(&host.read(&format!("{}/config.json", crate::util::PKG_DIR)))
            .unwrap();
    assert_eq!(cfg["modes"]["apply"][0]["arguments"][1], "env:FOO");
    assert_eq!(cfg["modes"]["apply"][1]["idempotence"], true);
    let script = format!("{}/skyhook_dir/s1.sh", crate::util::PKG_DIR);
    assert_eq!(host.mode(&script), 0o644);
    assert!(
        host.read_string(&script)
            .contains("echo \"s1.sh $*\" >> \"/var/tmp/ran.log\"")
    );
    assert!(host.is_file(&format!("{}/configmaps/a.conf", crate::util::PKG_DIR)));
    assert!(host.is_file(&format!(
        "{}/root_dir/etc/pkg/pkg.conf",
        crate::util::PKG_DIR
    )));
    let off_host = Package::new().step("apply", Step::new("o.sh").on_host(false));
    let host2 = FakeHost::new();
    host2.install(&off_host);
    let body = host2.read_string(&format!("{}/skyhook_dir/o.sh", crate::util::PKG_DIR));
    assert!(body.contains(&format!("{}/var/tmp/ran.log", host2.root_str())));
}

#[test]
fn snapshot_reports_added_changed_and_removed_paths() {
    let host = FakeHost::new();
    host.write("etc/a", "1");
    host.write("etc/b", "1");
    let before = host.snapshot();
    host.write("etc/a", "2");
    std::fs::remove_file(host.path("etc/b")).unwrap();
    host.write("etc/c", "1");
    let diff = before.diff(&host.snapshot());
    assert_eq!(diff.len(), 3, "{diff:?}");
    assert!(diff[0].starts_with("~ etc/a"));
    assert!(diff[1].starts_with("- etc/b"));
    assert!(diff[2].starts_with("+ etc/c"));
}

#[test]
fn no_test_name_is_repeated_across_suites() {
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests");
    let mut seen = std::collections::BTreeMap::<String, Vec<String>>::new();
    let mut dirs = vec![tests.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let mut after_test = false;
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let line = line.trim();
                if line == "#[test]" {
                    after_test = true;
                } else if let Some(rest) = line.strip_prefix("fn ").filter(|_| after_test) {
                    let name = rest.split('(').next().unwrap().to_owned();
                    let file = path.strip_prefix(&tests).unwrap().display().to_string();
                    seen.entry(name).or_default().push(file);
                    after_test = false;
                }
            }
        }
    }
    assert!(seen.len() > 400, "only {} tests found", seen.len());
    let repeated: Vec<_> = seen.iter().filter(|(_, files)| files.len() > 1).collect();
    assert!(repeated.is_empty(), "test names used twice: {repeated:?}");
}
