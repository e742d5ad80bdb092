//! What the docs and examples show is what the agent does: the Kubernetes example pods run
//! against a fake host with their own args and env, the JSON diagnostics carry the field
//! names docs/operations.md lists, and docs/*.md and README.md name only files that exist.
//! Their console blocks are run by [`crate::docs_console`].

use std::path::Path;

use serde_json::Value;

use crate::util::{COPY_DIR, FakeHost, Package, Step, b64, repo, repo_file as read};

// ---------------------------------------------------------------------------------------------
// examples/kubernetes
// ---------------------------------------------------------------------------------------------

/// A container of an example manifest: the subset of YAML these files use (`args` as a JSON
/// flow list, `env` as `- name:` / `value: "<JSON string>"` pairs).
#[derive(Debug, Default)]
struct Container {
    name: String,
    image: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// The container's lines, for the remaining checks.
    text: String,
}

fn containers(rel: &str) -> Vec<Container> {
    let text = read(rel);
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<Container> = Vec::new();
    let mut pending_env: Option<String> = None;
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        let next = lines.get(i + 1).map_or("", |l| l.trim());
        if let (Some(name), Some(image)) =
            (t.strip_prefix("- name: "), next.strip_prefix("image: "))
        {
            out.push(Container {
                name: name.to_owned(),
                image: image.to_owned(),
                ..Container::default()
            });
            continue;
        }
        let Some(c) = out.last_mut() else { continue };
        c.text.push_str(t);
        c.text.push('\n');
        if let Some(args) = t.strip_prefix("args: ") {
            c.args = serde_json::from_str(args).unwrap_or_else(|e| panic!("{rel}: {t}: {e}"));
        } else if let Some(name) = t.strip_prefix("- name: ") {
            pending_env = Some(name.to_owned());
        } else if let Some(value) = t.strip_prefix("value: ") {
            let name = pending_env.take().expect("value after name");
            let value: String =
                serde_json::from_str(value).unwrap_or_else(|e| panic!("{rel}: {t}: {e}"));
            c.env.push((name, value));
        }
    }
    out
}

fn env<'a>(c: &'a Container, name: &str) -> &'a str {
    c.env
        .iter()
        .find(|(k, _)| k == name)
        .map_or_else(|| panic!("{} has no {name}", c.name), |(_, v)| v.as_str())
}

/// SPEC §13: what every agent container of the operator carries.
#[track_caller]
fn assert_operator_contract(c: &Container, text: &str) {
    assert_eq!(c.args[1], "/root", "{c:?}");
    let copy_dir = &c.args[2];
    // copyDir = /var/lib/skyhook/<skyhook>/<pkg>-<ver>-<uid>-<generation>
    let rest = copy_dir
        .strip_prefix("/var/lib/skyhook/")
        .expect("copy dir under /var/lib/skyhook");
    let (skyhook, leaf) = rest.split_once('/').unwrap();
    let (pkg, ver) = ("gpu-node-tuning", "1.1.0");
    let uid_gen = leaf
        .strip_prefix(&format!("{pkg}-{ver}-"))
        .expect("copy dir leaf <pkg>-<ver>-<uid>-<gen>");
    assert_eq!(
        env(c, "SKYHOOK_RESOURCE_ID"),
        format!("{skyhook}-{uid_gen}_{pkg}_{ver}")
    );
    assert_eq!(
        env(c, "SKYHOOK_ROOT_DIR"),
        format!("/var/lib/skyhook/{skyhook}")
    );
    assert_eq!(
        env(c, "SKYHOOK_LOG_DIR"),
        format!("/var/log/skyhook/{skyhook}")
    );
    assert_eq!(env(c, "COPY_RESOLV"), "false");
    env(c, "SKYHOOK_NODE_ORDER");
    assert_eq!(c.image, "AGENT_IMAGE");
    assert!(c.text.contains("privileged: true"), "{c:?}");
    assert!(c.text.contains("mountPath: /root"), "{c:?}");
    assert!(
        trimmed(text).contains("hostPath:\npath: /\n"),
        "host / is mounted"
    );
}

/// `text` with every line trimmed: the checks below do not depend on indentation.
fn trimmed(text: &str) -> String {
    text.lines().flat_map(|l| [l.trim(), "\n"]).collect()
}

/// Install the example package where the operator's init container would put it.
fn install_example(host: &FakeHost, copy_dir: &str) {
    let dest = host.path(copy_dir);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let status = std::process::Command::new("cp")
        .arg("-R")
        .arg(repo().join("examples/packages/gpu-node-tuning"))
        .arg(&dest)
        .status()
        .expect("cp");
    assert!(status.success());
}

/// Run the agent with a container's env and `args`, the pod's `/root` being the fake root.
fn run_as_pod(host: &FakeHost, env: &[(String, String)], args: &[String]) -> crate::util::Run {
    let mut cmd = host.agent().env_remove("SKYHOOK_RESOURCE_ID");
    for (k, v) in env {
        cmd = cmd.env(k, v.as_str());
    }
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            if a == "/root" {
                host.root_str()
            } else {
                a.clone()
            }
        })
        .collect();
    cmd.args(&args).run()
}

fn run_container(host: &FakeHost, c: &Container) -> crate::util::Run {
    run_as_pod(host, &c.env, &c.args)
}

#[test]
fn example_stage_job_matches_the_operator_contract_and_runs() {
    let text = read("examples/kubernetes/stage-job.yaml");
    let all = containers("examples/kubernetes/stage-job.yaml");
    let agents: Vec<&Container> = all.iter().filter(|c| c.image == "AGENT_IMAGE").collect();
    assert_eq!(agents.len(), 2, "{all:?}");
    assert_eq!(agents[0].args[0], "apply");
    assert_eq!(agents[1].args[0], "apply-check");
    for c in &agents {
        assert_operator_contract(c, &text);
        assert_eq!(c.args.len(), 3);
    }
    let init = &all[0];
    assert_eq!(env(init, "SKYHOOK_DIR"), agents[0].args[2]);

    require_root!();
    let host = FakeHost::new();
    install_example(&host, &agents[0].args[2]);
    // Plan first: read-only, shows every apply step would run.
    let before = host.snapshot();
    let mut plan = vec!["plan".to_owned()];
    plan.extend(agents[0].args.iter().cloned());
    let plan_run = run_as_pod(&host, &agents[0].env, &plan);
    plan_run.assert_success();
    assert!(
        plan_run.out().contains("install_profile.sh"),
        "{plan_run:?}"
    );
    before.assert_unchanged(&host.snapshot(), "plan");

    for c in &agents {
        run_container(&host, c).assert_success();
    }
    assert!(host.exists("etc/sysctl.d/90-gpu-node-tuning.conf"));
    assert!(host.is_file("var/lib/skyhook/demo/flags/apply-check_ALL_CHECKED"));
}

#[test]
fn example_interrupt_job_matches_the_operator_contract_and_runs() {
    let text = read("examples/kubernetes/interrupt-job.yaml");
    let all = containers("examples/kubernetes/interrupt-job.yaml");
    let agents: Vec<&Container> = all.iter().filter(|c| c.image == "AGENT_IMAGE").collect();
    assert_eq!(agents.len(), 1, "{all:?}");
    let c = agents[0];
    assert_eq!(c.args[0], "interrupt");
    assert_eq!(c.args.len(), 4);
    assert_operator_contract(c, &text);
    // SPEC §13: interrupt containers are limited to 500m CPU and 256Mi (the newest builder).
    assert!(
        c.text
            .contains("limits:\ncpu: 500m\nmemory: 256Mi\nrequests:\ncpu: 500m\nmemory: 256Mi\n"),
        "{c:?}"
    );
    assert!(
        !c.env.iter().any(|(k, _)| k.starts_with("GPU_TUNING")),
        "no package env"
    );
    let host = FakeHost::new();
    let decoded = host
        .agent()
        .args(["interrupts", "decode", &c.args[3]])
        .run();
    decoded.assert_success();
    assert_eq!(decoded.out(), "{\"type\":\"restart_all_services\"}\n");
    assert_eq!(c.args[3], b64(br#"{"type":"restart_all_services"}"#));

    require_root!();
    // The stage pod's init container put the package there.
    install_example(&host, &c.args[2]);
    run_container(&host, c).assert_success();
    assert_eq!(
        host.read_string("var/tmp/calls.log"),
        "service procps force-reload\n"
    );
    assert!(host.is_file(
        "var/lib/skyhook/demo/interrupts/flags/demo-6f1c2a9e-3b4d-4e8f-9a0b-1c2d3e4f5a6b-1_gpu-node-tuning_1.1.0/restart_all_services_0.complete"
    ));
    // The status pod reports it.
    let status = containers("examples/kubernetes/status-pod.yaml");
    assert_eq!(status[0].args[0], "status");
    let before = host.snapshot();
    let run = run_container(&host, &status[0]);
    run.assert_success();
    assert!(
        run.out().contains("restart_all_services_0 complete"),
        "{run:?}"
    );
    before.assert_unchanged(&host.snapshot(), "status");
}

/// What every Job of the operator carries (docs/deploy.md, "What the operator runs"), and the
/// `lines` of this one. Returns the Job's text (lines trimmed) and its containers' names.
#[track_caller]
fn assert_job_shape(rel: &str, stage: &str, lines: &[&str]) -> (String, Vec<String>) {
    let text = trimmed(&read(rel));
    let common = [
        "apiVersion: batch/v1\nkind: Job\n",
        "nodewright.nvidia.com/name: demo\n",
        "nodewright.nvidia.com/package: gpu-node-tuning-1.1.0\n",
        &format!("nodewright.nvidia.com/stage: {stage}\n"),
        "nodewright.nvidia.com/node: NODE_NAME\n",
        "nodewright.nvidia.com/generation: \"1\"\n",
        "nodewright.nvidia.com/resource-id: demo-6f1c2a9e-3b4d-4e8f-9a0b-1c2d3e4f5a6b-1_gpu-node-tuning_1.1.0\n",
        "parallelism: 1\ncompletions: 1\n",
        "podReplacementPolicy: Failed\n",
        "nodeName: NODE_NAME\n",
        "hostPID: true\nhostNetwork: true\n",
        "- key: node.kubernetes.io/unschedulable\noperator: Exists\n",
        "- key: nodewright.nvidia.com\noperator: Equal\nvalue: runtime-required\neffect: NoSchedule\n",
        "- key: node.kubernetes.io/not-ready\noperator: Exists\neffect: NoExecute\n",
        "- key: node.kubernetes.io/unreachable\noperator: Exists\neffect: NoExecute\n",
        // `done` replaces the pause container: the package image, exiting 0 at once.
        "- name: done\nimage: PACKAGE_IMAGE\ncommand: [\"/bin/sh\", \"-c\", \"exit 0\"]\n",
    ];
    for line in common.iter().chain(lines) {
        assert!(text.contains(line), "{rel} lacks {line:?}");
    }
    let names = containers(rel).into_iter().map(|c| c.name).collect();
    (text, names)
}

#[test]
fn example_jobs_have_the_operator_job_shapes() {
    let rel = "examples/kubernetes/stage-job.yaml";
    let stage = [
        // Each attempt a new pod; at most 4; disruptions not counted.
        "restartPolicy: Never\n",
        "backoffLimit: 3\n",
        "- action: Ignore\nonPodConditions:\n- type: DisruptionTarget\n",
        // The deadline per attempt, then the grace.
        "activeDeadlineSeconds: 3600\n",
        "terminationGracePeriodSeconds: 30\n",
        // ConfigMap keys as read-only files over the image's configmaps/.
        "- name: gpu-node-tuning\nmountPath: /skyhook-package/configmaps/node-tuning.conf\n\
         subPath: node-tuning.conf\nreadOnly: true\n",
        "configMap:\nname: demo-gpu-node-tuning-1.1.0\n",
    ];
    let (_, names) = assert_job_shape(rel, "apply", &stage);
    assert_eq!(
        names,
        [
            "gpu-node-tuning-init",
            "gpu-node-tuning-apply",
            "gpu-node-tuning-applycheck",
            "done"
        ],
        "the copy, the stage, its check, then done"
    );
    for c in containers(rel).iter().filter(|c| c.image == "AGENT_IMAGE") {
        // The chart's LimitRange: the agent and its steps share 512Mi.
        assert!(
            c.text.contains("limits:\ncpu: 500m\nmemory: 512Mi\n"),
            "{c:?}"
        );
    }

    let rel = "examples/kubernetes/interrupt-job.yaml";
    let interrupt = [
        "nodewright.nvidia.com/interrupt: \"True\"\n",
        // Restarted in place, across a reboot; one deadline over the whole Job.
        "restartPolicy: OnFailure\n",
        "backoffLimit: 2147483647\n",
        "activeDeadlineSeconds: 3600\ntemplate:\n",
    ];
    let (text, names) = assert_job_shape(rel, "interrupt", &interrupt);
    assert!(
        !text.contains("podFailurePolicy"),
        "the API forbids it with OnFailure"
    );
    assert_eq!(names, ["interrupt", "done"], "no copy container");
}

// ---------------------------------------------------------------------------------------------
// SKYHOOK_AGENT_LOG_FORMAT=json (docs/operations.md)
// ---------------------------------------------------------------------------------------------

fn json_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

#[test]
fn json_diagnostics_carry_the_documented_fields() {
    let host = FakeHost::new();
    host.install(
        &Package::new()
            .step("apply", Step::new("s1.sh").on_host(false))
            .step("apply-check", Step::new("s1_check.sh").on_host(false)),
    );
    let run = host
        .agent()
        .env("SKYHOOK_AGENT_LOG_FORMAT", "json")
        .args(["apply", &host.root_str(), COPY_DIR])
        .run();
    run.assert_success();
    let lines = json_lines(&run.err().replace("[s1.sh] to stderr\n", ""));
    let finished = lines
        .iter()
        .find(|v| v["message"] == "step finished")
        .unwrap_or_else(|| panic!("{run:?}"));
    for field in [
        "timestamp",
        "level",
        "message",
        "mode",
        "path",
        "result",
        "duration_ms",
        "decision",
    ] {
        assert!(finished.get(field).is_some(), "{field}: {finished}");
    }
    assert_eq!(finished["level"], "INFO");
    assert_eq!(finished["mode"], "apply");
    assert_eq!(finished["path"], "s1.sh");
    assert_eq!(finished["result"], "exit code 0");
    assert_eq!(finished["decision"], "succeeded");
    assert!(finished["duration_ms"].is_u64());

    // A second run skips the step: `skipping completed step` with its path.
    let again = host
        .agent()
        .env("SKYHOOK_AGENT_LOG_FORMAT", "json")
        .args(["apply", &host.root_str(), COPY_DIR])
        .run();
    let lines = json_lines(&again.err());
    assert!(
        lines
            .iter()
            .any(|v| v["message"] == "skipping completed step" && v["path"] == "s1.sh"),
        "{again:?}"
    );

    // Failures: level ERROR, the chain in the message.
    let failed = host
        .agent()
        .env("SKYHOOK_AGENT_LOG_FORMAT", "json")
        .args(["apply", &host.root_str(), "/nowhere"])
        .run();
    failed.assert_code(1);
    let lines = json_lines(&failed.err());
    assert!(
        lines.iter().any(|v| v["level"] == "ERROR"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("agent execution failed: "))),
        "{failed:?}"
    );
}

#[test]
fn json_diagnostics_of_an_interrupt_operation() {
    require_root!();
    let host = FakeHost::new();
    host.mkdir(COPY_DIR);
    let run = host
        .agent()
        .env("SKYHOOK_AGENT_LOG_FORMAT", "json")
        .args([
            "interrupt",
            &host.root_str(),
            COPY_DIR,
            &b64(br#"{"type":"service_restart","services":["kubelet"]}"#),
        ])
        .run();
    run.assert_success();
    let lines = json_lines(&run.err());
    let ops: Vec<&Value> = lines
        .iter()
        .filter(|v| v["message"] == "operation finished")
        .collect();
    assert_eq!(ops.len(), 2, "{run:?}");
    assert_eq!(ops[1]["command"], "systemctl restart kubelet");
    assert_eq!(ops[1]["result"], "exit code 0");
    assert_eq!(ops[1]["exit_code"], 0);
    assert!(ops[1].get("signal").is_none(), "{:?}", ops[1]);
    assert_eq!(ops[1]["decision"], "succeeded");
    assert!(ops[1]["duration_ms"].is_u64());
}

// ---------------------------------------------------------------------------------------------
// Links
// ---------------------------------------------------------------------------------------------

#[test]
fn docs_link_only_to_files_that_exist() {
    let mut docs = vec![
        "README.md".to_owned(),
        "CHANGELOG.md".to_owned(),
        "examples/kubernetes/README.md".to_owned(),
    ];
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if Path::new(&name).extension().is_some_and(|e| e == "md") {
            docs.push(format!("docs/{name}"));
        }
    }
    for doc in &docs {
        let text = read(doc);
        let dir = Path::new(doc).parent().unwrap();
        for (i, _) in text.match_indices("](") {
            let target = text[i + 2..].split(')').next().unwrap();
            if target.starts_with("http") || target.starts_with('#') {
                continue;
            }
            let file = target.split('#').next().unwrap();
            assert!(
                repo().join(dir).join(file).exists(),
                "{doc} links to {target}, which does not exist"
            );
        }
    }
}
