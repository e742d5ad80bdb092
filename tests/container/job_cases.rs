//! The cases of the operator's Job shapes (docs/deploy.md, "What the operator runs"): a stage
//! retried in a new pod, a deadline kill past the grace, a whole-container kill, ConfigMap keys
//! as read-only files over the package image, and the interrupt Job of a reboot.

use std::fs;
use std::time::{Duration, Instant};

use crate::cases::host;
use crate::job::{self, ConfigMap, INTERRUPT_LIMITS_256, StageJob};
use crate::pod::{INTERRUPT_FLAGS, Image, Pod};
use crate::util::{
    ALL_CHECKED, BOOT_ID, COPY_DIR, FakeHost, NODE_RESTART, PKG_DIR, PKG_FLAGS, Package, Run, Step,
    interrupt_data,
};

/// podman's exit code for a container killed by SIGKILL.
const KILLED: i32 = 137;

/// A step that fails on its first run and succeeds after (`/var/tmp/<step>.failed` remembers).
const FAILS_ONCE: &str = "#!/bin/sh
echo \"@PATH@ $*\" >> \"@RAN_LOG@\"
if [ ! -e /var/tmp/@PATH@.failed ]; then
  : > /var/tmp/@PATH@.failed
  echo \"@PATH@: failing once\" >&2
  exit 1
fi
echo \"@PATH@: ok\"
";

/// A step that, on its first run, writes 40 KiB of noise to stderr, says it started and hangs
/// (until its container is killed); on the next run it holds 96 MiB (of the stage container's
/// 512Mi, shared with the agent) and succeeds.
const HANGS_ONCE: &str = "#!/bin/sh
echo \"@PATH@ $*\" >> \"@RAN_LOG@\"
if [ ! -e /var/tmp/@PATH@.once ]; then
  : > /var/tmp/@PATH@.once
  i=0
  while [ $i -lt 400 ]; do
    echo \"@PATH@: working, line $i ................................................................\" >&2
    i=$((i + 1))
  done
  : > /var/tmp/@PATH@.started
  sleep 120
fi
x=$(yes | head -c 100663296)
echo \"@PATH@: held ${#x} bytes\"
";

/// The package of the stage cases: `s1.sh`, then `middle` (a step script), then `s3.sh`; one
/// check.
fn three_steps(middle: &str, script: &str) -> Package {
    Package::new()
        .step("apply", Step::new("s1.sh"))
        .step("apply", Step::new(middle).script(script))
        .step("apply", Step::new("s3.sh"))
        .step("apply-check", Step::new("s1_check.sh"))
}

/// The steps that ran, in order (`<ROOT>/var/tmp/ran.log`, one line per run).
fn ran(host: &FakeHost) -> Vec<String> {
    host.ran().iter().map(|l| l.trim().to_owned()).collect()
}

#[track_caller]
fn assert_marked(host: &FakeHost, pkg: &Package, step: &str, marked: bool) {
    let marker = format!("{PKG_FLAGS}/{}", pkg.find(step).native_marker());
    assert_eq!(
        host.is_file(&marker),
        marked,
        "{step} marked: {:?}",
        host.list(PKG_FLAGS)
    );
}

/// A stage whose first pod fails (a step exits 1): the Job's next attempt is a new pod, which
/// copies the package into COPY_DIR again (here it was removed in between: nothing carries
/// over but STATE) and resumes from the markers.
pub fn stage_job_retry_is_a_new_pod_that_copies_again(image: &Image) {
    let host = host();
    let pkg = three_steps("s2.sh", FAILS_ONCE);
    let package = job::package_image(&pkg, &host);
    let job = StageJob::new(image, &package, &host, "apply");

    let first = job.attempt();
    assert_eq!(first.ran(), ["init", "apply"], "the pod fails at the stage");
    first.container("init").unwrap().assert_success();
    first.container("apply").unwrap().assert_code(1);
    assert!(!first.succeeded());
    assert_eq!(ran(&host), ["s1.sh", "s2.sh"]);
    assert_marked(&host, &pkg, "s1.sh", true);
    assert_marked(&host, &pkg, "s2.sh", false);

    fs::remove_dir_all(host.path(PKG_DIR)).unwrap();
    let second = job.attempt();
    assert_eq!(second.ran(), ["init", "apply", "apply-check", "done"]);
    assert!(second.succeeded(), "the Job completes");
    assert!(
        host.is_file(&format!("{PKG_DIR}/config.json")),
        "copied again"
    );
    assert_eq!(
        ran(&host),
        ["s1.sh", "s2.sh", "s2.sh", "s3.sh", "s1_check.sh"]
    );
    for step in ["s1.sh", "s2.sh", "s3.sh"] {
        assert_marked(&host, &pkg, step, true);
    }
    assert!(host.is_file(ALL_CHECKED));
}

/// The first attempt's stage container is started and, once `hangs.sh` hangs, ended by `end`
/// (its name, the running container); the second attempt (a new pod) must run `hangs.sh`
/// again and complete. Returns how the first stage container ended, and the second attempt.
fn killed_mid_step_then_resumed(
    job: &StageJob<'_>,
    pkg: &Package,
    end: impl FnOnce(&str, crate::util::Running) -> Run,
) -> (Run, job::Attempt) {
    let host = job.host;
    let copy = job.copy_container().run();
    copy.assert_success();
    let stage = job.agent_container(job.stage);
    let name = stage.name().to_owned();
    let running = stage.spawn();
    host.wait_for("var/tmp/hangs.sh.started", Duration::from_secs(60));
    let killed = end(&name, running);
    killed.assert_code(KILLED);
    assert!(
        !killed
            .err()
            .lines()
            .any(|l| l.contains("step finished") && l.contains("hangs.sh")),
        "the agent died with its step: no result line\n{killed:?}"
    );
    assert_eq!(
        ran(host),
        ["s1.sh", "hangs.sh"],
        "nothing after the killed step"
    );
    assert_marked(host, pkg, "s1.sh", true);
    assert_marked(host, pkg, "hangs.sh", false);

    let second = job.attempt();
    assert_eq!(second.ran(), ["init", "apply", "apply-check", "done"]);
    assert!(second.succeeded(), "the Job completes");
    second
        .container("apply")
        .unwrap()
        .assert_stdout_contains("hangs.sh: held 100663295 bytes");
    assert_eq!(
        ran(host),
        ["s1.sh", "hangs.sh", "hangs.sh", "s3.sh", "s1_check.sh"],
        "the killed step runs again, the completed one does not"
    );
    for step in ["s1.sh", "hangs.sh", "s3.sh"] {
        assert_marked(host, pkg, step, true);
    }
    (killed, second)
}

/// The attempt's deadline (`activeDeadlineSeconds`): SIGTERM to the agent, which lets the
/// running step go on; after the pod's grace the whole container is killed, the step with it.
/// The last 16 KiB of the container's log (the operator keeps that much) name the operation the
/// agent was waiting for. The next attempt runs the step again.
pub fn stage_deadline_kills_the_container_after_the_grace(image: &Image) {
    let host = host();
    let pkg = three_steps("hangs.sh", HANGS_ONCE);
    let package = job::package_image(&pkg, &host);
    let mut job = StageJob::new(image, &package, &host, "apply");
    job.grace = Duration::from_secs(3);
    // Killed (137), not exited: the agent was still waiting for the step when the grace ran out.
    let (killed, _) =
        killed_mid_step_then_resumed(&job, &pkg, |name, running| job.deadline(name, running));
    let log = killed.err();
    let tail = job::tail(&log, 16 * 1024);
    assert!(
        tail.contains("waiting for the running operation to finish before stopping")
            && tail.contains("hangs.sh"),
        "the last 16 KiB of the log do not name the operation the agent waited for:\n{tail}"
    );
}

/// A step exhausting the stage container's memory: on cgroup v2 the kubelet's
/// `memory.oom.group` kills every process of the container, the agent with its step (no result
/// line, no marker). Simulated by a SIGKILL of every process of the container (this machine's
/// cgroup v1 kills only the allocating process). The next attempt resumes correctly.
pub fn stage_whole_container_kill_is_resumed_by_the_next_attempt(image: &Image) {
    let host = host();
    let pkg = three_steps("hangs.sh", HANGS_ONCE);
    let package = job::package_image(&pkg, &host);
    let job = StageJob::new(image, &package, &host, "apply");
    killed_mid_step_then_resumed(&job, &pkg, |name, running| {
        job::kill_whole_container(name);
        running.wait()
    });
}

/// ConfigMap keys are read-only `subPath` files over the package image's `configmaps/` (some
/// keys mounted, some baked into the image, one mounted over a baked default); the copy
/// container copies them into COPY_DIR as regular files, and `expected_config_files` holds
/// for all of them. A key in neither fails the stage, naming it.
pub fn configmap_keys_are_read_only_files_over_the_package_image(image: &Image) {
    let pkg = Package::new()
        .configmap("baked.conf", b"baked=1\n")
        .configmap("mounted.conf", b"image-default=1\n")
        .expect_config_file("baked.conf")
        .expect_config_file("mounted.conf")
        .expect_config_file("only-mounted.conf")
        .step(
            "config",
            Step::new("show.sh").script(
                "#!/bin/sh\nfor f in baked.conf mounted.conf only-mounted.conf; do\n  \
                 printf '%s: ' \"$f\"; cat \"$SKYHOOK_DIR/configmaps/$f\"\ndone\n",
            ),
        )
        .step("config-check", Step::new("show_check.sh"));
    let configmap = ConfigMap::new(&[
        ("mounted.conf", "from-configmap=1\n"),
        ("only-mounted.conf", "only=1\n"),
    ]);
    let host = host();
    let package = job::package_image(&pkg, &host);
    let mut job = StageJob::new(image, &package, &host, "config");
    job.configmap = Some(&configmap);

    // What the package's containers see: regular files, read-only where mounted.
    let inside = job
        .container(&package)
        .args(&[
            "/bin/sh",
            "-c",
            "cd /skyhook-package/configmaps && for f in *; do [ -f \"$f\" ] && [ ! -L \"$f\" ] \
             || exit 10; done && if echo x > mounted.conf; then exit 11; fi && \
             cat mounted.conf only-mounted.conf baked.conf",
        ])
        .run();
    inside.assert_success();
    assert_eq!(
        inside.out(),
        "from-configmap=1\nonly=1\nbaked=1\n",
        "{inside:?}"
    );

    let attempt = job.attempt();
    assert_eq!(attempt.ran(), ["init", "config", "config-check", "done"]);
    assert!(attempt.succeeded());
    attempt.container("config").unwrap().assert_stdout_contains(
        "baked.conf: baked=1\nmounted.conf: from-configmap=1\nonly-mounted.conf: only=1\n",
    );
    for (name, content) in [
        ("baked.conf", "baked=1\n"),
        ("mounted.conf", "from-configmap=1\n"),
        ("only-mounted.conf", "only=1\n"),
    ] {
        let rel = format!("{PKG_DIR}/configmaps/{name}");
        let meta = fs::symlink_metadata(host.path(&rel)).unwrap();
        assert!(meta.file_type().is_file(), "{rel} is a regular file");
        assert_eq!(host.read_string(&rel), content);
    }

    // Without the key in the ConfigMap, and not baked into the image: refused before a step runs.
    let partial = ConfigMap::new(&[("mounted.conf", "from-configmap=1\n")]);
    let other = crate::cases::host();
    let package = job::package_image(&pkg, &other);
    let mut job = StageJob::new(image, &package, &other, "config");
    job.configmap = Some(&partial);
    let attempt = job.attempt();
    assert_eq!(attempt.ran(), ["init", "config"]);
    let config = attempt.container("config").unwrap();
    config.assert_code(1);
    config.assert_stderr_contains("only-mounted.conf");
    assert!(ran(&other).is_empty(), "{:?}", ran(&other));
}

/// The interrupt Job of a reboot (docs/interrupts.md, "The reboot's exit code"), in the newest
/// builder's 256Mi: the fake `reboot` SIGTERMs the agent as the shutdown does; the agent keeps
/// its container running (the Job must not complete before the host goes down) until the host
/// goes down (every process of the container SIGKILLed). The kubelet then restarts the container
/// in place under a new boot ID: it completes the interrupt without rebooting again and exits
/// 0, and `done` completes the Job.
pub fn interrupt_reboot_completes_the_job_only_after_the_new_boot(image: &Image) {
    let host = host();
    let pkg = Package::simple();
    host.install(&pkg);
    let package = job::package_image(&pkg, &host);
    host.set_fake_tool(
        "reboot",
        "echo \"fake reboot: shutting down\"\n: > /var/tmp/reboot.signalled\nkill -TERM $PPID\n\
         sleep 60",
    );
    let data = interrupt_data(NODE_RESTART);
    let interrupt = || {
        Pod::operator(image, &host)
            .flags(INTERRUPT_LIMITS_256)
            .args(&["interrupt", "/root", COPY_DIR, &data])
    };

    let pod = interrupt();
    let name = pod.name().to_owned();
    let mut running = pod.spawn();
    host.wait_for("var/tmp/reboot.signalled", Duration::from_secs(60));
    assert!(
        !running.exited_before(Instant::now() + Duration::from_secs(3)),
        "the interrupt container exited before the host went down"
    );
    let pending = format!("{INTERRUPT_FLAGS}/node_restart_0.pending");
    assert_eq!(
        host.read_string(&pending).trim(),
        format!("boot-id:{BOOT_ID}")
    );
    job::kill_whole_container(&name);
    let down = running.wait();
    down.assert_code(KILLED);
    down.assert_stdout_contains("shutdown in progress");

    // The host is back under a new boot ID; the kubelet restarts the init container in place.
    host.set_boot_id("99999999-8888-4777-8666-555555555555");
    let restarted = interrupt().run();
    restarted.assert_success();
    restarted.assert_stderr_contains("skipping completed interrupt after host reboot");
    assert_eq!(host.calls(), ["reboot"], "the reboot was requested once");
    assert_eq!(
        host.list(INTERRUPT_FLAGS),
        ["node_restart_0.complete"],
        "the pending marker became the completion marker"
    );
    job::done_container(&package).run().assert_success();
}

/// examples/kubernetes shows these Jobs (docs/deploy.md): every manifest passes
/// `kubernetes-validate --strict` (no unknown field, every type right). scripts/test.sh
/// installs the tool and names it in `KUBERNETES_VALIDATE`; without it this case fails.
pub fn examples_pass_kubernetes_validate_strict(_image: &Image) {
    let tool = std::env::var_os("KUBERNETES_VALIDATE")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join("kubernetes-validate"))
                    .find(|p| p.is_file())
            })
        })
        .unwrap_or_else(|| {
            panic!(
                "kubernetes-validate is missing: scripts/test.sh installs it (pip install \
                 kubernetes-validate==1.37.0) and sets KUBERNETES_VALIDATE"
            )
        });
    let dir = crate::pod::repo().join("examples/kubernetes");
    let mut manifests: Vec<std::path::PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    manifests.sort();
    assert!(manifests.len() >= 3, "{manifests:?}");
    let out = std::process::Command::new(&tool)
        .arg("--strict")
        .args(&manifests)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", tool.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "kubernetes-validate --strict failed:\n{text}"
    );
    // The stage Job's file holds its ConfigMap too: 4 resources in all.
    assert_eq!(text.matches(" passed for resource ").count(), 4, "{text}");
}
