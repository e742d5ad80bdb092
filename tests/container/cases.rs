//! The cases: the image, then the agent in the operator's pod shape against fake host roots.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::job_cases;
use crate::pod::{self, INTERRUPT_FLAGS, INTERRUPT_LIMITS, Image, Pod, RESOURCE_ID};
use crate::util::{
    COPY_DIR, FakeHost, HISTORY, PKG_FLAGS, PKG_LOGS, Package, START, Step, interrupt_data,
};

/// A case: its name and its body.
pub type Case = (&'static str, fn(&Image));

/// Every case, in the order they run.
pub const ALL: &[Case] = &[
    ("image_is_one_static_binary_from_scratch", image_contents),
    ("version", version),
    ("sbom_lists_the_crates_linked_into_the_binary", sbom),
    ("interrupts_list", interrupts_list),
    ("example_package_apply_then_apply_check", example_apply),
    ("example_package_config_then_config_check", example_config),
    ("e2e_simple", e2e_simple),
    ("e2e_dont_write_logs", e2e_dont_write_logs),
    ("e2e_reap_old_logs", e2e_reap_old_logs),
    ("e2e_interrupt_no_op", e2e_interrupt_no_op),
    ("interrupt_service_restart", interrupt_service_restart),
    (
        "interrupt_pod_memory_limit_holds",
        interrupt_pod_memory_limit_holds,
    ),
    (
        "pod_deletion_during_a_long_step_finishes_it_and_starts_no_other",
        pod_deletion_during_a_long_step,
    ),
    // The operator's Jobs (job_cases.rs).
    (
        "job_stage_retry_is_a_new_pod_that_copies_again_and_resumes",
        job_cases::stage_job_retry_is_a_new_pod_that_copies_again,
    ),
    (
        "job_stage_deadline_kills_the_container_after_the_grace",
        job_cases::stage_deadline_kills_the_container_after_the_grace,
    ),
    (
        "job_stage_whole_container_kill_is_resumed_by_the_next_attempt",
        job_cases::stage_whole_container_kill_is_resumed_by_the_next_attempt,
    ),
    (
        "job_configmap_keys_are_read_only_files_over_the_package_image",
        job_cases::configmap_keys_are_read_only_files_over_the_package_image,
    ),
    (
        "job_interrupt_reboot_completes_the_job_only_after_the_new_boot",
        job_cases::interrupt_reboot_completes_the_job_only_after_the_new_boot,
    ),
    (
        "job_examples_pass_kubernetes_validate_strict",
        job_cases::examples_pass_kubernetes_validate_strict,
    ),
    (
        "distributor_image_runs_its_own_kind",
        distributor_image_runs_its_own_kind,
    ),
    // Last: a second release build from nothing, the slowest case.
    (
        "a_second_build_into_another_target_directory_is_the_same_binary_and_image",
        reproducible,
    ),
];

/// Busybox applets the example package uses beyond the harness's fake root.
const EXTRA_APPLETS: &[&str] = &["cmp", "mktemp", "uname", "od", "expr"];

/// A fake host root for a pod: the integration tests' busybox root plus a few applets.
pub fn host() -> FakeHost {
    let host = FakeHost::new();
    for applet in EXTRA_APPLETS {
        let link = host.path(&format!("bin/{applet}"));
        if fs::symlink_metadata(&link).is_err() {
            symlink("busybox", link).unwrap();
        }
    }
    host
}

// ---------------------------------------------------------------------------------------------
// The image
// ---------------------------------------------------------------------------------------------

/// The image holds the agent and its license, nothing else; runs as root; carries the OCI
/// labels; and stays small.
fn image_contents(image: &Image) {
    eprintln!("{}", image.build_report);
    let inspect: Value =
        serde_json::from_str(&pod::podman_ok(&["image", "inspect", &image.tag])).unwrap();
    let inspect = &inspect[0];
    let config = &inspect["Config"];
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/local/bin/agent"])
    );
    assert_eq!(config["User"], "0:0");
    let labels = &config["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert!(
        labels["org.opencontainers.image.revision"]
            .as_str()
            .is_some_and(|r| r.len() >= 40),
        "revision label: {labels}"
    );

    // The files of every layer, from `podman save`.
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("image.tar");
    pod::podman_ok(&[
        "save",
        "--format",
        "docker-archive",
        "--output",
        archive.to_str().unwrap(),
        &image.tag,
    ]);
    let unpacked = dir.path().join("unpacked");
    fs::create_dir(&unpacked).unwrap();
    tar(&[
        "-xf",
        archive.to_str().unwrap(),
        "-C",
        unpacked.to_str().unwrap(),
    ]);
    let manifest: Value =
        serde_json::from_slice(&fs::read(unpacked.join("manifest.json")).unwrap()).unwrap();
    let mut files = Vec::new();
    for layer in manifest[0]["Layers"].as_array().expect("layers") {
        let layer = unpacked.join(layer.as_str().unwrap());
        let listing = tar(&["-tvf", layer.to_str().unwrap()]);
        for line in listing.lines() {
            // `-rwxr-xr-x 0/0 4194304 2026-01-01 00:00 usr/local/bin/agent`
            if !line.starts_with('d') {
                let name = line.split_whitespace().last().unwrap();
                files.push(name.trim_start_matches("./").to_owned());
            }
        }
    }
    files.sort();
    assert_eq!(
        files,
        ["usr/local/bin/agent", "usr/share/licenses/agent/LICENSE"],
        "the image holds the agent and its license only"
    );
    let license = fs::read_to_string(pod::repo().join("LICENSE")).unwrap();
    assert!(license.contains("Apache License"));

    let size = inspect["Size"].as_u64().expect("image size");
    assert!(
        size < 5_000_000,
        "the image is {size} bytes uncompressed; the goal is under 5 MB"
    );
}

fn tar(args: &[&str]) -> String {
    let out = Command::new("tar").args(args).output().expect("run tar");
    assert!(
        out.status.success(),
        "tar {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `podman run IMAGE --version` prints the version, and the commit the image was built from
/// (the working tree's HEAD, or GIT_SHA when given; its revision label names it too): the binary runs without a
/// loader or libc.
fn version(image: &Image) {
    let run = Pod::bare(image).args(&["--version"]).run();
    run.assert_success();
    assert_eq!(
        run.out(),
        format!("{}\n", env!("CARGO_PKG_VERSION")),
        "{run:?}"
    );
    // build-image.sh hands a GIT_SHA of the environment to the build; else the build finds HEAD.
    let head = std::env::var("GIT_SHA")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(pod::git_head);
    let commit = run.err();
    let commit = commit
        .strip_prefix("commit ")
        .and_then(|c| c.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("--version names no commit on stderr: {run:?}"));
    assert!(
        commit == head || commit == format!("{head}-dirty"),
        "the image's agent names commit {commit:?}; the working tree is at {head}"
    );
    assert_eq!(
        image.inspect()["Config"]["Labels"]["org.opencontainers.image.revision"],
        commit,
        "the revision label names the commit the binary embeds"
    );
}

/// Crates linked into the binary the SBOM must list: the runtime, the wire formats, the
/// command line, the workspace's own crates.
const LINKED: &[&str] = &[
    "tokio",
    "typetag",
    "serde",
    "serde_json",
    "clap",
    "nix",
    "tracing",
    "tracing-subscriber",
    "agent-core",
    "interrupts",
];

/// Crates the SBOM must not list: dev-dependencies only (the tests' helpers; tempfile also
/// behind agent-core's `testing` feature, which only tests turn on), and the proc macros and
/// build-script helpers that run at build time.
const NOT_LINKED: &[&str] = &[
    "proptest",
    "tempfile",
    "trybuild",
    "prometheus-parse",
    "rand",
    "toml",
    "serde_derive",
    "syn",
    "proc-macro2",
    "agent-macros",
    "autocfg",
];

/// The SBOM next to the image: CycloneDX describing the `agent` binary, listing the crates
/// linked into it with version, license and purl, and no dev-dependency; the image's label
/// holds its digest.
fn sbom(image: &Image) {
    let bytes = fs::read(&image.sbom)
        .unwrap_or_else(|e| panic!("reading the SBOM {}: {e}", image.sbom.display()));
    let bom: Value = serde_json::from_slice(&bytes).expect("the SBOM is JSON");
    assert_eq!(bom["bomFormat"], "CycloneDX");
    assert_eq!(bom["specVersion"], "1.5");
    let described = &bom["metadata"]["component"];
    assert_eq!(described["name"], "agent", "{described}");
    assert_eq!(described["version"], env!("CARGO_PKG_VERSION"));
    let components = bom["components"].as_array().expect("components");
    let names: Vec<&str> = components
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for name in LINKED {
        assert!(names.contains(name), "the SBOM lacks {name}: {names:?}");
    }
    for name in NOT_LINKED {
        assert!(
            !names.contains(name),
            "the SBOM lists {name}, which is not linked into the binary: {names:?}"
        );
    }
    for c in components {
        assert!(
            c["version"].is_string() && c["purl"].is_string() && c["licenses"].is_array(),
            "a component without version, purl or license: {c}"
        );
    }
    // Every edge of the dependency graph joins two listed components.
    let listed: Vec<&str> = components
        .iter()
        .map(|c| c["bom-ref"].as_str().unwrap())
        .chain(described["bom-ref"].as_str())
        .collect();
    for dep in bom["dependencies"].as_array().expect("dependencies") {
        for r in std::iter::once(&dep["ref"]).chain(dep["dependsOn"].as_array().unwrap()) {
            assert!(
                listed.contains(&r.as_str().unwrap()),
                "unlisted {r} in {dep}"
            );
        }
    }
    assert_eq!(
        image.inspect()["Config"]["Labels"]["com.nvidia.skyhook.agent.sbom.digest"],
        format!("sha256:{}", crate::util::sha256_hex(&bytes)),
        "the image's label holds the SBOM's digest"
    );
}

/// scripts/build-image.sh again, into a new target directory: the same static binary, byte
/// for byte, the same SBOM and the same image (config digest), from a build that shares
/// nothing with the first but the sources and the toolchain. Neither binary names a path of
/// this machine (the checkout, the target directory, the cargo home), which would differ on
/// another.
fn reproducible(image: &Image) {
    let target = tempfile::tempdir().unwrap();
    let again = Image::build_in(&format!("{}-again", image.tag), target.path(), &[]);
    let read =
        |path: &Path| fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let cargo_home = std::env::var_os("CARGO_HOME").map_or_else(
        || Path::new(&std::env::var_os("HOME").expect("HOME")).join(".cargo"),
        std::path::PathBuf::from,
    );
    let binary = read(&again.binary);
    for path in [pod::repo(), target.path().to_path_buf(), cargo_home] {
        let needle = path.to_str().unwrap().as_bytes();
        assert!(
            !binary.windows(needle.len()).any(|w| w == needle),
            "{} names {}: remap it (--remap-path-prefix)",
            again.binary.display(),
            path.display()
        );
    }
    assert_eq!(
        crate::util::sha256_hex(&binary),
        crate::util::sha256_hex(&read(&image.binary)),
        "two builds of one commit: {} and {} differ",
        image.binary.display(),
        again.binary.display()
    );
    assert_eq!(
        fs::read_to_string(&again.sbom).unwrap(),
        fs::read_to_string(&image.sbom).unwrap(),
        "the SBOMs of two builds differ"
    );
    assert_eq!(
        again.inspect()["Id"],
        image.inspect()["Id"],
        "the image's config digest differs between two builds"
    );
}

/// `interrupts list` names every built-in kind.
fn interrupts_list(image: &Image) {
    let run = Pod::bare(image)
        .args(&["interrupts", "list", "--format", "json"])
        .run();
    run.assert_success();
    let listed: Value = serde_json::from_str(&run.out()).unwrap_or_else(|e| panic!("{e}\n{run:?}"));
    let text = listed.to_string();
    for kind in [
        "node_restart",
        "service_restart",
        "restart_all_services",
        "no_op",
        "script_interrupt",
    ] {
        assert!(
            text.contains(&format!("\"{kind}\"")),
            "{kind} not listed: {text}"
        );
    }
    let run = Pod::bare(image).args(&["interrupts", "list"]).run();
    run.assert_success();
    run.assert_stdout_contains("service_restart");
}

// ---------------------------------------------------------------------------------------------
// The example package in a package pod
// ---------------------------------------------------------------------------------------------

const EXAMPLE_RID: &str = "sk1-uid1-1_gpu-node-tuning_1.1.0";
const EXAMPLE_COPY_DIR: &str = "/var/lib/skyhook/sk1/gpu-node-tuning-1.1.0-uid1-1";
const EXAMPLE_FLAGS: &str = "var/lib/skyhook/sk1/flags/gpu-node-tuning/1.1.0";

/// A host with examples/packages/gpu-node-tuning copied to its package directory, as the
/// operator leaves it before the first stage.
fn example_host() -> FakeHost {
    let host = host();
    copy_tree(
        &pod::repo().join("examples/packages/gpu-node-tuning"),
        &host.path(EXAMPLE_COPY_DIR),
    );
    host.mkdir(EXAMPLE_TARGET);
    host
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// Where the example package installs its files, inside the fake host. Not `/`: there the
/// package would load its settings into the running kernel with `sysctl`.
const EXAMPLE_TARGET: &str = "/srv/node";

/// The example package's pod for `mode`.
fn example_pod<'a>(image: &'a Image, host: &FakeHost, mode: &str) -> Pod<'a> {
    Pod::operator(image, host)
        .env("SKYHOOK_RESOURCE_ID", EXAMPLE_RID)
        .env("GPU_TUNING_TARGET", EXAMPLE_TARGET)
        .env("GPU_TUNING_PROFILE", "training")
        .args(&[mode, "/root", EXAMPLE_COPY_DIR])
}

fn example_apply(image: &Image) {
    let host = example_host();
    let run = example_pod(image, &host, "apply").run();
    run.assert_success();
    run.assert_stdout_contains("-CLI CONFIGURATION--\nmode: apply\nroot_mount: /root\n");
    run.assert_stdout_contains(
        "apply install_profile.sh ['--profile', 'env:GPU_TUNING_PROFILE', '--target', \
         'env:GPU_TUNING_TARGET'] [0] Idempotence.Auto True\n",
    );
    // The steps ran chrooted into the host: their files are in the host root.
    let sysctl = host.read_string("srv/node/etc/sysctl.d/90-gpu-node-tuning.conf");
    assert!(sysctl.contains("vm.swappiness = 1"), "{sysctl}");
    assert_eq!(
        host.read_string("srv/node/etc/gpu-node-tuning/VERSION"),
        "1.1.0\n"
    );
    // Not the live root: the activation is deferred (exit code 3, accepted).
    let activation = host.read_string("srv/node/etc/gpu-node-tuning/activation");
    assert!(activation.contains("state=deferred"), "{activation}");
    let markers = host.list(EXAMPLE_FLAGS);
    assert!(
        markers.iter().any(|m| {
            m.starts_with("install_profile.sh-")
                && Path::new(m).extension().is_some_and(|e| e == "flag")
        }),
        "{markers:?}"
    );

    let run = example_pod(image, &host, "apply-check").run();
    run.assert_success();
    assert_eq!(
        host.read_string("var/lib/skyhook/sk1/flags/check_results"),
        "install_profile_check.sh False\nactivate_check.sh False"
    );
    assert!(host.is_file("var/lib/skyhook/sk1/flags/apply-check_ALL_CHECKED"));
    let history: Value =
        serde_json::from_str(&host.read_string("var/lib/skyhook/sk1/history/gpu-node-tuning.json"))
            .unwrap();
    assert_eq!(history["current-version"], "1.1.0", "{history}");
}

fn example_config(image: &Image) {
    let host = example_host();
    let settings = "srv/node/etc/gpu-node-tuning/node-tuning.conf";
    let run = example_pod(image, &host, "config").run();
    run.assert_success();
    assert_eq!(
        host.read(settings),
        fs::read(pod::repo().join("examples/packages/gpu-node-tuning/configmaps/node-tuning.conf"))
            .unwrap(),
        "{run:?}"
    );
    let run = example_pod(image, &host, "config-check").run();
    run.assert_success();
    assert!(host.is_file("var/lib/skyhook/sk1/flags/config-check_ALL_CHECKED"));

    // A changed settings file fails the check (exit 1).
    host.write(settings, "power_limit_percent=50\n");
    let run = example_pod(image, &host, "config-check").run();
    run.assert_code(1);
    assert!(!host.exists("var/lib/skyhook/sk1/flags/config-check_ALL_CHECKED"));
}

// ---------------------------------------------------------------------------------------------
// The upstream end-to-end assertions
// ---------------------------------------------------------------------------------------------

fn stage<'a>(image: &'a Image, host: &FakeHost, mode: &str) -> Pod<'a> {
    Pod::operator(image, host).args(&[mode, "/root", COPY_DIR])
}

/// The step logs of `s1.sh`.
fn s1_logs(host: &FakeHost) -> Vec<String> {
    host.list(PKG_LOGS)
        .into_iter()
        .filter(|n| n.starts_with("s1.sh-") && Path::new(n).extension().is_some_and(|e| e == "log"))
        .collect()
}

/// upstream `simple`: the log has the step's stdout; `flags/START`, the step's marker and
/// `history/<pkg>.json` exist.
fn e2e_simple(image: &Image) {
    let host = host();
    let pkg = Package::simple();
    host.install(&pkg);
    let run = stage(image, &host, "apply").run();
    run.assert_success();
    run.assert_stdout_contains("apply s1.sh [] [0] Idempotence.Auto True\n[s1.sh] args(0): \n");
    let logs = s1_logs(&host);
    assert_eq!(logs.len(), 1, "{logs:?}");
    let log = host.read_string(&format!("{PKG_LOGS}/{}", logs[0]));
    assert!(log.contains("[s1.sh] args(0): "), "{log}");
    assert!(log.contains("[s1.sh] to stderr"), "{log}");
    assert!(host.is_file(START));
    let step = pkg.find("s1.sh");
    assert!(host.is_file(&format!("{PKG_FLAGS}/{}", step.legacy_marker())));
    assert!(host.is_file(&format!("{PKG_FLAGS}/{}", step.native_marker())));

    stage(image, &host, "apply-check").run().assert_success();
    let history: Value = serde_json::from_str(&host.read_string(HISTORY)).unwrap();
    assert_eq!(history["current-version"], "1.0.0", "{history}");
}

/// upstream `dont_write_logs`: with SKYHOOK_AGENT_WRITE_LOGS=false the log dir never exists.
fn e2e_dont_write_logs(image: &Image) {
    let host = host();
    host.install(&Package::simple());
    for mode in ["apply", "apply-check"] {
        let run = stage(image, &host, mode)
            .env("SKYHOOK_AGENT_WRITE_LOGS", "false")
            .run();
        run.assert_success();
        run.assert_stdout_contains("[s1");
        assert!(
            !host.exists("var/log/skyhook"),
            "{:?}",
            host.list("var/log")
        );
    }
    assert!(host.is_file(HISTORY));
}

/// upstream `reap_old_logs`: repeated failing runs keep exactly the 5 newest logs.
fn e2e_reap_old_logs(image: &Image) {
    let host = host();
    host.install(&Package::simple());
    for i in 1..=7 {
        let run = stage(image, &host, "apply")
            .env("FAIL_STEPS", "s1.sh")
            .run();
        run.assert_code(1);
        assert_eq!(s1_logs(&host).len(), i.min(5), "after run {i}");
    }
    assert_eq!(host.ran_count("s1.sh"), 7);
    assert!(
        host.list(PKG_FLAGS).is_empty(),
        "a failed step leaves no marker"
    );
}

/// upstream `interrupt`: `interrupts/flags/<rid>/no_op.complete`.
fn e2e_interrupt_no_op(image: &Image) {
    let host = host();
    host.install(&Package::simple());
    let data = interrupt_data(r#"{"type":"no_op"}"#);
    let run = interrupt_pod(image, &host, &data).run();
    run.assert_success();
    run.assert_stdout_contains("mode: interrupt\n");
    assert!(host.is_file(&format!("{INTERRUPT_FLAGS}/no_op.complete")));
    assert_eq!(host.list(INTERRUPT_FLAGS), ["no_op.complete"]);
}

// ---------------------------------------------------------------------------------------------
// Interrupt pods
// ---------------------------------------------------------------------------------------------

/// The third-party shipping path (docs/deploy.md, "Third-party kinds"): the image of
/// examples/distributor-template, built by scripts/build-image.sh from its own manifest, lock
/// file and profile, names its build, lists its kind and runs it in an interrupt pod.
fn distributor_image_runs_its_own_kind(_stock: &Image) {
    // A target directory of its own: the binary is also named `agent`, and the stock image's
    // (which the reproducibility case compares) must stay as it was built.
    let target_dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("container-suite-distributor-target");
    let image = Image::build_in(
        &format!(
            "localhost/agent-container-suite-distributor:{}",
            std::process::id()
        ),
        &target_dir,
        &[
            "--manifest-path",
            "examples/distributor-template/Cargo.toml",
            "--package",
            "my-agent",
            "--bin",
            "agent",
        ],
    );
    let run = Pod::bare(&image).args(&["--version"]).run();
    run.assert_success();
    assert_eq!(
        run.out(),
        format!("{}+my-agent.0.1.0\n", env!("CARGO_PKG_VERSION")),
        "{run:?}"
    );
    let run = Pod::bare(&image).args(&["interrupts", "list"]).run();
    run.assert_success();
    run.assert_stdout_contains("module: custom_interrupt::pod_drain");

    let host = host();
    host.install(&Package::simple());
    host.set_fake_tool("kubectl", "exit 0");
    let data = interrupt_data(r#"{"type":"pod_drain","node_name":"gpu-node-7"}"#);
    let run = interrupt_pod(&image, &host, &data).run();
    run.assert_success();
    let drain = "kubectl drain gpu-node-7 --ignore-daemonsets --timeout=300s";
    run.assert_stdout_contains(&format!("{drain}\n"));
    assert_eq!(host.calls(), [drain]);
    assert_eq!(host.list(INTERRUPT_FLAGS), ["pod_drain_0.complete"]);
}

/// The operator's interrupt pod: `[interrupt, /root, copyDir, base64]`, 64 MiB, 500m CPU.
fn interrupt_pod<'a>(image: &'a Image, host: &FakeHost, data: &str) -> Pod<'a> {
    Pod::operator(image, host)
        .flags(INTERRUPT_LIMITS)
        .args(&["interrupt", "/root", COPY_DIR, data])
}

fn interrupt_service_restart(image: &Image) {
    let host = host();
    host.install(&Package::simple());
    let data = interrupt_data(r#"{"type":"service_restart","services":["containerd","kubelet"]}"#);
    let run = interrupt_pod(image, &host, &data).run();
    run.assert_success();
    run.assert_stdout_contains("systemctl restart kubelet\n");
    let calls = [
        "systemctl daemon-reload",
        "systemctl restart containerd",
        "systemctl restart kubelet",
    ];
    assert_eq!(host.calls(), calls);
    assert_eq!(
        host.list(INTERRUPT_FLAGS),
        [
            "service_restart_0.complete",
            "service_restart_1.complete",
            "service_restart_2.complete"
        ]
    );
    // Done once per resource ID: a second pod runs nothing.
    let run = interrupt_pod(image, &host, &data).run();
    run.assert_success();
    run.assert_stdout_contains(&format!(
        "Skipping interrupt service_restart_2 because it was already run for {RESOURCE_ID}"
    ));
    assert_eq!(host.calls(), calls);
}

/// The interrupt pod's 64 MiB limit holds: the agent works inside it (the other interrupt cases
/// run there), and an operation that needs more is killed, failing the interrupt without a
/// marker. The same operation without the limit succeeds, so the limit is what stopped it.
fn interrupt_pod_memory_limit_holds(image: &Image) {
    // 128 MiB in a shell variable (less the final newline, which `$(...)` drops).
    let hungry = "x=$(yes | head -c 134217728)\necho \"held ${#x} bytes\"";
    let held = "held 134217727 bytes";
    let data = interrupt_data(r#"{"type":"service_restart","services":[]}"#);

    let limited = host();
    limited.install(&Package::simple());
    limited.set_fake_tool("systemctl", hungry);
    let run = interrupt_pod(image, &limited, &data).run();
    run.assert_code(1);
    assert!(!run.out().contains(held), "{run:?}");
    // Killed by the kernel's OOM killer, inside the pod's cgroup.
    run.assert_stderr_line_contains(&["systemctl daemon-reload", "SIGKILL"]);
    assert!(
        !limited.exists(&format!("{INTERRUPT_FLAGS}/service_restart_0.complete")),
        "{:?}",
        limited.list(INTERRUPT_FLAGS)
    );

    let unlimited = host();
    unlimited.install(&Package::simple());
    unlimited.set_fake_tool("systemctl", hungry);
    let run = Pod::operator(image, &unlimited)
        .args(&["interrupt", "/root", COPY_DIR, &data])
        .run();
    run.assert_success();
    run.assert_stdout_contains(held);
    assert!(unlimited.is_file(&format!("{INTERRUPT_FLAGS}/service_restart_0.complete")));
}

// ---------------------------------------------------------------------------------------------
// Termination
// ---------------------------------------------------------------------------------------------

/// A pod deleted during a long step (SIGTERM to the agent, as the kubelet sends it), SPEC §10: the step is not signalled
/// and finishes (its marker is written), no later step starts, and the agent exits 1.
fn pod_deletion_during_a_long_step(image: &Image) {
    let host = host();
    let pkg = Package::new()
        .step(
            "apply",
            Step::new("long.sh").script(
                "#!/bin/sh\necho \"long: started\"\n: > /var/tmp/long.started\nsleep 4\n\
                 echo \"long: finished\"\necho \"long.sh\" >> /var/tmp/ran.log\n",
            ),
        )
        .step("apply", Step::new("s2.sh"))
        .step("apply-check", Step::new("long_check.sh"))
        .step("apply-check", Step::new("s2_check.sh"));
    host.install(&pkg);
    let pod = stage(image, &host, "apply");
    let name = pod.name().to_owned();
    let running = pod.spawn();
    host.wait_for("var/tmp/long.started", Duration::from_secs(60));
    pod::terminate_like_kubelet(&name);
    let run = running.wait();
    run.assert_code(1);
    run.assert_stdout_contains("long: finished");
    run.assert_stderr_contains("agent stopped after receiving a termination signal");
    assert_eq!(host.ran(), ["long.sh"], "no later step started");
    let long = pkg.find("long.sh");
    assert!(
        host.is_file(&format!("{PKG_FLAGS}/{}", long.native_marker())),
        "the finished step's marker: {:?}",
        host.list(PKG_FLAGS)
    );
    assert!(!host.exists(&format!(
        "{PKG_FLAGS}/{}",
        pkg.find("s2.sh").native_marker()
    )));
}
