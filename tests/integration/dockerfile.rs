//! SPEC §12: `containers/agent.Dockerfile` and `.dockerignore`, checked as text against the
//! workspace: the static binary the build stage compiles for each architecture, the prebuilt
//! path, the `FROM scratch` final stage (entrypoint, user, labels, license), the build arguments
//! the binary embeds, and a build context that holds every file cargo needs. The container
//! suite (tests/container) builds the image and runs it.

use crate::util::{repo, repo_file as read};

/// One Dockerfile instruction: keyword and arguments, continuation lines joined.
#[derive(Debug, Clone)]
struct Instruction {
    keyword: String,
    args: String,
}

/// The stages of the Dockerfile, each a list of instructions starting with its `FROM`.
fn stages() -> Vec<Vec<Instruction>> {
    let text = read("containers/agent.Dockerfile");
    let mut logical = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        if let Some(body) = trimmed.strip_suffix('\\') {
            current.push_str(body);
            current.push(' ');
        } else {
            current.push_str(trimmed);
            logical.push(std::mem::take(&mut current));
        }
    }
    let mut stages: Vec<Vec<Instruction>> = vec![Vec::new()];
    for line in logical.iter().filter(|l| !l.is_empty()) {
        let (keyword, args) = line.split_once(' ').unwrap_or((line, ""));
        let ins = Instruction {
            keyword: keyword.to_ascii_uppercase(),
            args: args.trim().to_owned(),
        };
        if ins.keyword == "FROM" {
            stages.push(Vec::new());
        }
        stages.last_mut().unwrap().push(ins);
    }
    stages
}

fn find<'a>(stage: &'a [Instruction], keyword: &str) -> Vec<&'a Instruction> {
    stage.iter().filter(|i| i.keyword == keyword).collect()
}

/// The TOML file `rel`, parsed.
fn manifest(rel: &str) -> toml::Value {
    toml::Value::Table(read(rel).parse().unwrap_or_else(|e| panic!("{rel}: {e}")))
}

/// The string at `dotted.key` of the TOML file `rel`.
fn toml_value(rel: &str, key: &str) -> String {
    key.split('.')
        .try_fold(&manifest(rel), |v, k| v.get(k))
        .and_then(toml::Value::as_str)
        .unwrap_or_else(|| panic!("no {key} in {rel}"))
        .to_owned()
}

/// The stage named `name` (`FROM ... AS name`).
fn stage<'a>(stages: &'a [Vec<Instruction>], name: &str) -> &'a [Instruction] {
    stages
        .iter()
        .find(|s| {
            s.first().is_some_and(|from| {
                from.keyword == "FROM"
                    && from
                        .args
                        .rsplit_once(" AS ")
                        .is_some_and(|(_, n)| n.trim() == name)
            })
        })
        .unwrap_or_else(|| panic!("no stage named {name}"))
}

#[test]
fn dockerfile_final_stage_is_from_scratch_with_nothing_but_the_binary_and_license() {
    let stages = stages();
    let (preamble, stages) = stages.split_first().unwrap();
    assert!(
        preamble.iter().all(|i| i.keyword == "ARG"),
        "only ARGs before the first FROM: {preamble:?}"
    );
    assert!(stages.len() >= 2, "multi-stage: {stages:?}");
    let runtime = stages.last().unwrap();
    assert_eq!(runtime[0].args, "scratch AS runtime", "the final stage");
    // No shell in the final image: nothing runs there at build time.
    assert!(find(runtime, "RUN").is_empty());
    let copies: Vec<&str> = find(runtime, "COPY")
        .iter()
        .map(|c| c.args.as_str())
        .collect();
    assert_eq!(
        copies,
        [
            "--from=binary /out/agent /usr/local/bin/agent",
            "LICENSE /usr/share/licenses/agent/LICENSE"
        ]
    );
    assert!(
        read("LICENSE").contains("Apache License"),
        "the license file the image carries"
    );
    let license = toml_value("Cargo.toml", "workspace.package.license");
    assert_eq!(license, "Apache-2.0");
}

#[test]
fn dockerfile_takes_the_binary_from_the_build_stage_or_a_prebuilt_one() {
    let stages = stages();
    // `binary` is whichever stage AGENT_BINARY names; the build stage unless told otherwise.
    let binary = stage(&stages, "binary");
    assert_eq!(binary.len(), 1, "{binary:?}");
    assert_eq!(binary[0].args, "${AGENT_BINARY} AS binary");
    let default = find(&stages[0], "ARG")
        .into_iter()
        .find_map(|a| a.args.strip_prefix("AGENT_BINARY="))
        .expect("a global ARG AGENT_BINARY=<stage>");
    assert_eq!(default, "build");
    stage(&stages, default);
    // The prebuilt stage: the build context's `agent`, where the build stage leaves its own.
    let prebuilt = stage(&stages, "prebuilt");
    assert_eq!(prebuilt[0].args, "scratch AS prebuilt");
    let copies: Vec<&str> = find(prebuilt, "COPY")
        .iter()
        .map(|c| c.args.as_str())
        .collect();
    assert_eq!(copies, ["agent /out/agent"]);
    assert!(find(prebuilt, "RUN").is_empty());
    // scripts/build-image.sh takes that path with a static binary it built.
    let script = read("scripts/build-image.sh");
    for needle in [
        "--build-arg AGENT_BINARY=prebuilt",
        "--file containers/agent.Dockerfile",
        "-C target-feature=+crt-static",
        "cp \"$binary\" \"$context/agent\"",
        "cp LICENSE \"$context/LICENSE\"",
    ] {
        assert!(script.contains(needle), "build-image.sh lacks {needle}");
    }
}

#[test]
fn dockerfile_builds_a_static_agent_of_the_workspace_locked_for_amd64_and_arm64() {
    let stages = stages();
    let build = stage(&stages, "build");
    let run = find(build, "RUN")
        .into_iter()
        .find(|r| r.args.contains("cargo build"))
        .expect("a RUN with cargo build");
    // What it builds is a build argument (a distributor's package, docs/deploy.md), by default
    // the agent of this workspace.
    let package = toml_value("agent-cli/Cargo.toml", "package.name");
    for (arg, default) in [
        ("AGENT_MANIFEST", "Cargo.toml"),
        ("AGENT_PACKAGE", package.as_str()),
        ("AGENT_BIN", "agent"),
    ] {
        assert!(
            find(build, "ARG")
                .iter()
                .any(|a| a.args == format!("{arg}={default}")),
            "ARG {arg}={default} in the build stage"
        );
    }
    for flag in [
        "--release",
        "--locked",
        "--manifest-path \"${AGENT_MANIFEST}\"",
        "-p \"${AGENT_PACKAGE}\"",
        "--bin \"${AGENT_BIN}\"",
        "--target \"${target}\"",
        "RUSTFLAGS=\"-C target-feature=+crt-static ",
        // The paths of the build machine stay out of the binary, under the names
        // scripts/build-image.sh gives them (docs/deploy.md#reproducible-builds).
        "--remap-path-prefix=/src=/agent",
        "--remap-path-prefix=${CARGO_HOME}=/cargo",
        "--remap-path-prefix=/src/target=/target",
    ] {
        assert!(
            run.args.contains(flag),
            "cargo build lacks {flag}: {}",
            run.args
        );
    }
    // The [[bin]] that builds target/<triple>/release/agent.
    let bins = manifest("agent-cli/Cargo.toml")["bin"].clone();
    assert!(
        bins.as_array()
            .unwrap()
            .iter()
            .any(
                |b| b.get("name").and_then(toml::Value::as_str) == Some("agent")
                    && b.get("path").and_then(toml::Value::as_str) == Some("src/bin/agent.rs")
            ),
        "agent-cli declares the agent binary: {bins:?}"
    );
    assert!(repo().join("agent-cli/src/bin/agent.rs").is_file());
    assert!(
        run.args
            .contains("install -D -m 0755 \"target/${target}/release/${AGENT_BIN}\" /out/agent"),
        "{}",
        run.args
    );
    // TARGETARCH picks the Rust target: both node architectures, anything else refused.
    assert!(
        find(build, "ARG").iter().any(|a| a.args == "TARGETARCH"),
        "ARG TARGETARCH in the build stage"
    );
    for (arch, triple) in [
        ("amd64", "x86_64-unknown-linux-gnu"),
        ("arm64", "aarch64-unknown-linux-gnu"),
    ] {
        assert!(
            run.args.contains(&format!("{arch}) target={triple};")),
            "{arch} -> {triple}: {}",
            run.args
        );
    }
    assert!(run.args.contains("unsupported TARGETARCH"), "{}", run.args);
    // It compiles on the build machine and cross-links for the target.
    assert!(
        build[0].args.starts_with("--platform=$BUILDPLATFORM "),
        "{:?}",
        build[0]
    );

    // The toolchain is at least the workspace's rust-version.
    let wanted = toml_value("Cargo.toml", "workspace.package.rust-version");
    let arg = find(&stages[0], "ARG")
        .into_iter()
        .find_map(|a| a.args.strip_prefix("RUST_VERSION="))
        .expect("ARG RUST_VERSION=<version>");
    let parse = |v: &str| -> Vec<u32> { v.split('.').map(|p| p.parse().unwrap()).collect() };
    assert!(
        parse(arg) >= parse(&wanted),
        "{arg} < rust-version {wanted}"
    );
    assert!(build[0].args.contains("${RUST_VERSION}"), "{:?}", build[0]);
}

#[test]
fn dockerfile_passes_the_version_build_args_the_binary_embeds() {
    let stages = stages();
    let build = stage(&stages, "build");
    let args: Vec<&str> = find(build, "ARG").iter().map(|a| a.args.as_str()).collect();
    for name in ["AGENT_VERSION", "GIT_SHA"] {
        assert!(
            args.iter().any(|a| a.split('=').next() == Some(name)),
            "ARG {name} in the build stage: {args:?}"
        );
        let run = find(build, "RUN")
            .into_iter()
            .find(|r| r.args.contains("cargo build"))
            .unwrap();
        assert!(
            run.args.contains(&format!("export {name}")),
            "{name} reaches cargo: {}",
            run.args
        );
        // ... where the binary (AGENT_VERSION) or its build script (GIT_SHA) reads it at
        // compile time, and which rebuilds when it changes.
        let build_rs = read("agent-cli/build.rs");
        assert!(
            read("agent-cli/src/version.rs").contains(&format!("option_env!(\"{name}\")"))
                || build_rs.contains(&format!("env::var(\"{name}\")")),
            "{name} is read at compile time"
        );
        assert!(build_rs.contains(&format!("rerun-if-env-changed={name}")));
    }
}

#[test]
fn dockerfile_runtime_stage_runs_the_agent_as_root() {
    let stages = stages();
    let runtime = stages.last().unwrap();
    let entry: Vec<&str> = find(runtime, "ENTRYPOINT")
        .iter()
        .map(|e| e.args.as_str())
        .collect();
    assert_eq!(entry, [r#"["/usr/local/bin/agent"]"#]);
    let user: Vec<&str> = find(runtime, "USER")
        .iter()
        .map(|u| u.args.as_str())
        .collect();
    assert_eq!(user, ["0:0"]);
}

#[test]
fn dockerfile_labels_follow_oci_annotations() {
    let stages = stages();
    let runtime = stages.last().unwrap();
    let labels: String = find(runtime, "LABEL")
        .iter()
        .map(|l| l.args.clone())
        .collect::<Vec<_>>()
        .join(" ");
    let license = toml_value("Cargo.toml", "workspace.package.license");
    for (key, value) in [
        ("org.opencontainers.image.version", "${AGENT_VERSION}"),
        ("org.opencontainers.image.revision", "${GIT_SHA}"),
        ("org.opencontainers.image.licenses", license.as_str()),
    ] {
        assert!(
            labels.contains(&format!("{key}=\"{value}\"")),
            "LABEL {key}={value}: {labels}"
        );
    }
    let args: Vec<&str> = find(runtime, "ARG")
        .iter()
        .map(|a| a.args.as_str())
        .collect();
    assert!(
        args.iter().any(|a| a.starts_with("AGENT_VERSION"))
            && args.iter().any(|a| a.starts_with("GIT_SHA")),
        "the labels' build args are declared in the runtime stage: {args:?}"
    );
}

/// Whether `.dockerignore` leaves `rel` (a path relative to the repository) out of the context.
/// Handles the pattern forms the file uses: a path prefix and `**/<name>`.
fn ignored(patterns: &[String], rel: &str) -> bool {
    patterns.iter().any(|p| {
        if let Some(name) = p.strip_prefix("**/") {
            rel.split('/').any(|c| c == name)
        } else {
            rel == p || rel.starts_with(&format!("{p}/"))
        }
    })
}

#[test]
fn dockerignore_keeps_everything_cargo_needs_and_drops_build_output() {
    let patterns: Vec<String> = read(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    for p in &patterns {
        assert!(
            !p.starts_with('!') && !p.contains('*')
                || p.starts_with("**/") && !p[3..].contains('*'),
            "pattern {p:?} is beyond what this check understands"
        );
    }
    assert!(ignored(&patterns, "target"));
    assert!(ignored(&patterns, ".git"));
    assert!(!ignored(&patterns, "LICENSE"), "the image carries LICENSE");

    let root = manifest("Cargo.toml");
    let members: Vec<&str> = root["workspace"]["members"]
        .as_array()
        .expect("workspace members")
        .iter()
        .filter_map(toml::Value::as_str)
        .collect();
    assert!(members.contains(&"agent-cli"), "{members:?}");
    let mut needed: Vec<String> = vec!["Cargo.toml".into(), "Cargo.lock".into()];
    for member in &members {
        needed.push(format!("{member}/Cargo.toml"));
        // Every `path = "..."` (targets and path dependencies), relative to the member.
        let mut stack = vec![manifest(&format!("{member}/Cargo.toml"))];
        while let Some(value) = stack.pop() {
            match value {
                toml::Value::Table(t) => {
                    for (k, v) in t {
                        match v.as_str() {
                            Some(p) if k == "path" => {
                                needed.push(normalize(&format!("{member}/{p}")));
                            }
                            _ => stack.push(v),
                        }
                    }
                }
                toml::Value::Array(a) => stack.extend(a),
                _ => {}
            }
        }
        if repo().join(member).join("build.rs").exists() {
            needed.push(format!("{member}/build.rs"));
        }
    }
    for path in &needed {
        assert!(
            repo().join(path).exists(),
            "{path} is named by a manifest but missing"
        );
        assert!(
            !ignored(&patterns, path),
            ".dockerignore drops {path}, which cargo needs"
        );
    }
}

/// `a/b/../c` → `a/c`.
fn normalize(p: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            ".." => {
                out.pop();
            }
            "." | "" => {}
            c => out.push(c),
        }
    }
    out.join("/")
}

#[test]
fn the_lock_file_is_current_so_locked_builds_succeed() {
    assert_locked(&repo());
}

/// `cargo metadata --locked --offline` succeeds in `dir`: its lock file is current.
fn assert_locked(dir: &std::path::Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--locked", "--offline", "--format-version", "1"])
        .current_dir(dir)
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata --locked in {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// docs/deploy.md, "Third-party kinds": the distributor template is a workspace of its own
/// with a current lock file, the stock image's release profile, agent-cli without `agent
/// try`, and a `main` that names its kinds; build-image.sh and the Dockerfile build it by
/// manifest, package and binary.
#[test]
fn the_distributor_template_builds_locked_with_the_stock_profile() {
    let dir = "examples/distributor-template";
    let template = manifest(&format!("{dir}/Cargo.toml"));
    assert!(
        template.get("workspace").is_some(),
        "a workspace of its own"
    );
    let root = manifest("Cargo.toml");
    assert_eq!(
        template["profile"]["release"], root["profile"]["release"],
        "the stock release profile"
    );
    let agent_cli = &template["dependencies"]["agent-cli"];
    assert_eq!(agent_cli["default-features"].as_bool(), Some(false));
    assert!(repo().join(dir).join("Cargo.lock").is_file());
    assert_locked(&repo().join(dir));
    assert!(
        read(&format!("{dir}/src/main.rs")).contains("agent_cli::main_with_kinds!("),
        "the template names its kinds"
    );
    let excluded = root["workspace"]["exclude"].as_array().unwrap();
    assert!(
        excluded.iter().any(|e| e.as_str() == Some(dir)),
        "{excluded:?}"
    );
    let script = read("scripts/build-image.sh");
    for needle in [
        "--manifest-path) ",
        "--package|-p) ",
        "--bin) ",
        "--manifest-path \"$manifest\" -p \"$package\" --bin \"$bin\"",
        "version=$agent_version+$package.$package_version",
    ] {
        assert!(script.contains(needle), "build-image.sh lacks {needle}");
    }
}
