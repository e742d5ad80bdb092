//! The operator's Jobs (SPEC §13; docs/deploy.md, "What the operator runs"), as podman runs:
//! a stage is one pod of init containers run in order — `<pkg>-init` (the package image copies
//! the package into COPY_DIR), `<pkg>-<stage>`, `<pkg>-<stage>check` — then `done`; the first
//! init container that exits non-zero fails the pod, and the Job's retry is a new pod that
//! copies again (`restartPolicy: Never`). An interrupt pod has the agent as its one init
//! container and is restarted in place (`restartPolicy: OnFailure`).

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::pod::{self, Image, Pod};
use crate::util::{COPY_DIR, FakeHost, Package, Run};

/// A stage container's limit: the chart's LimitRange default (512Mi), shared by the agent and
/// the steps it runs. Without swap on a node, memory plus swap is the same.
pub const STAGE_LIMITS: &[&str] = &["--memory", "512m", "--memory-swap", "512m"];

/// The interrupt container of the newest Job builder: 500m CPU, 256Mi (64Mi before, see
/// [`pod::INTERRUPT_LIMITS`]).
pub const INTERRUPT_LIMITS_256: &[&str] =
    &["--memory", "256m", "--memory-swap", "256m", "--cpus", "0.5"];

/// Where the package image holds the package, and where the operator mounts ConfigMap keys.
const PACKAGE_DATA: &str = "/skyhook-package";

/// The copy container's command, as the operator writes it.
const COPY_COMMAND: &str =
    "mkdir -p /root/${SKYHOOK_DIR} && cp -r /skyhook-package/* /root/${SKYHOOK_DIR}";

/// Busybox applets a package image needs: the operator runs `/bin/sh` from it (the copy and
/// the `done` container).
const PACKAGE_APPLETS: &[&str] = &["sh", "mkdir", "cp"];

static PACKAGE_IMAGES: AtomicUsize = AtomicUsize::new(0);

/// A package image: a static busybox (`/bin/sh`, `mkdir`, `cp`) and `package` under
/// `/skyhook-package`, imported from a tar (no build, no base image). Removed on drop.
pub fn package_image(package: &Package, host: &FakeHost) -> Image {
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    fs::create_dir_all(rootfs.join("bin")).unwrap();
    fs::copy("/bin/busybox", rootfs.join("bin/busybox")).expect("copy /bin/busybox");
    for applet in PACKAGE_APPLETS {
        symlink("busybox", rootfs.join("bin").join(applet)).unwrap();
    }
    package.write_into(&rootfs.join("skyhook-package"), host.root());
    let tar = dir.path().join("rootfs.tar");
    let status = Command::new("tar")
        .arg("-C")
        .arg(&rootfs)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .expect("run tar");
    assert!(status.success(), "tar of the package image failed");
    let tag = format!(
        "localhost/agent-container-suite-package:{}-{}",
        std::process::id(),
        PACKAGE_IMAGES.fetch_add(1, Ordering::Relaxed)
    );
    pod::podman_ok(&["import", "--quiet", tar.to_str().unwrap(), &tag]);
    // A package image: no agent binary in it, so no binary and no SBOM of the agent's.
    Image {
        tag,
        build_report: String::new(),
        sbom: PathBuf::new(),
        binary: PathBuf::new(),
    }
}

/// The package's ConfigMap as the operator mounts it: each key a read-only `subPath` file at
/// `/skyhook-package/configmaps/<key>`, over whatever the package image has there.
pub struct ConfigMap {
    dir: tempfile::TempDir,
    keys: Vec<String>,
}

impl ConfigMap {
    pub fn new(keys: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        for (key, value) in keys {
            fs::write(dir.path().join(key), value).unwrap();
        }
        Self {
            dir,
            keys: keys.iter().map(|(k, _)| (*k).to_owned()).collect(),
        }
    }

    /// The `--volume` flags: one read-only file per key.
    fn flags(&self) -> Vec<String> {
        self.keys
            .iter()
            .flat_map(|key| {
                [
                    "--volume".to_owned(),
                    format!(
                        "{}:{PACKAGE_DATA}/configmaps/{key}:ro",
                        self.dir.path().join(key).display()
                    ),
                ]
            })
            .collect()
    }
}

/// One (package, stage, node) Job: the agent image, the package image, the host.
pub struct StageJob<'a> {
    pub agent: &'a Image,
    pub package: &'a Image,
    pub host: &'a FakeHost,
    /// `apply`, `config`, ...: the stage container runs it, the check container `<stage>-check`.
    pub stage: &'a str,
    pub configmap: Option<&'a ConfigMap>,
    /// The pod's `terminationGracePeriodSeconds` (the package's `gracefulShutdown`).
    pub grace: Duration,
}

/// What one attempt (one pod) did: each container that ran, in order, with its result.
pub struct Attempt {
    pub containers: Vec<(String, Run)>,
}

impl Attempt {
    /// The container named `name` (`init`, the stage, `<stage>check`, `done`), if it ran.
    pub fn container(&self, name: &str) -> Option<&Run> {
        self.containers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, r)| r)
    }

    /// The names of the containers that ran, in order.
    pub fn ran(&self) -> Vec<&str> {
        self.containers.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Whether the pod succeeded (`done` exited 0): what completes the Job.
    pub fn succeeded(&self) -> bool {
        self.container("done").is_some_and(|r| r.code() == Some(0))
    }
}

impl<'a> StageJob<'a> {
    pub fn new(agent: &'a Image, package: &'a Image, host: &'a FakeHost, stage: &'a str) -> Self {
        Self {
            agent,
            package,
            host,
            stage,
            configmap: None,
            grace: Duration::from_secs(30),
        }
    }

    /// A container of this pod on `image`: privileged, host PID and network, the host at
    /// `/root`, the ConfigMap's keys.
    pub fn container(&self, image: &'a Image) -> Pod<'a> {
        let mut pod = Pod::operator(image, self.host);
        if let Some(configmap) = self.configmap {
            let flags = configmap.flags();
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            pod = pod.flags(&flags);
        }
        pod
    }

    /// `<pkg>-init`: the package image copies the package into COPY_DIR.
    pub fn copy_container(&self) -> Pod<'a> {
        self.container(self.package)
            .env("SKYHOOK_DIR", COPY_DIR)
            .args(&["/bin/sh", "-c", COPY_COMMAND])
    }

    /// `<pkg>-<stage>` (or its check, for `mode` = `<stage>-check`): the agent, limited as
    /// the chart's LimitRange limits it.
    pub fn agent_container(&self, mode: &str) -> Pod<'a> {
        self.container(self.agent)
            .flags(STAGE_LIMITS)
            .args(&[mode, "/root", COPY_DIR])
    }

    /// `done`: the package image's `sh -c "exit 0"`, which makes the pod succeed.
    pub fn done_container(&self) -> Pod<'a> {
        done_container(self.package)
    }

    /// One attempt, a new pod: the init containers in order, each only if the one before it
    /// exited 0, then `done`.
    pub fn attempt(&self) -> Attempt {
        self.attempt_from(Vec::new())
    }

    /// The rest of an attempt whose first containers already ran (`containers`, all exited 0).
    pub fn attempt_from(&self, mut containers: Vec<(String, Run)>) -> Attempt {
        let check = format!("{}-check", self.stage);
        let names = ["init", self.stage, check.as_str(), "done"];
        for name in &names[containers.len()..] {
            let run = match *name {
                "init" => self.copy_container().run(),
                "done" => self.done_container().run(),
                mode => self.agent_container(mode).run(),
            };
            let ok = run.code() == Some(0);
            containers.push(((*name).to_owned(), run));
            if !ok {
                break;
            }
        }
        Attempt { containers }
    }

    /// The kubelet ending an attempt at its deadline (`activeDeadlineSeconds`): SIGTERM to the
    /// container's main process, then, after the pod's grace period, SIGKILL of every process
    /// of the container. Returns how the container ended.
    pub fn deadline(&self, name: &str, running: crate::util::Running) -> Run {
        pod::terminate_like_kubelet(name);
        let mut running = running;
        let still_running = !running.exited_before(std::time::Instant::now() + self.grace);
        if still_running {
            kill_whole_container(name);
        }
        running.wait()
    }
}

/// The interrupt pod's `done` container, and a stage pod's: the package image's
/// `sh -c "exit 0"`.
pub fn done_container(package: &Image) -> Pod<'_> {
    Pod::bare(package).args(&["/bin/sh", "-c", "exit 0"])
}

/// SIGKILL every process of container `name`, as the kernel does to a container whose cgroup
/// runs out of memory with `memory.oom.group` (cgroup v2), and as the runtime does at the end
/// of a pod's grace period. This machine's cgroup v1 OOM killer kills only the process that
/// allocates, so the suite kills the container's cgroup itself.
pub fn kill_whole_container(name: &str) {
    let pid = pod::podman_ok(&["inspect", "--format", "{{.State.Pid}}", name]);
    let pid = pid.trim();
    let cgroups = fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/cgroup of container {name}: {e}"));
    // cgroup v1: the memory controller's group; v2: the unified one.
    let group = cgroups
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|(_, g)| format!("memory{g}")))
        .or_else(|| {
            cgroups
                .lines()
                .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
        })
        .unwrap_or_else(|| panic!("no cgroup of container {name} in {cgroups}"));
    let procs = Path::new("/sys/fs/cgroup")
        .join(group.trim_start_matches('/'))
        .join("cgroup.procs");
    // Until it is empty: a process may fork while the others are being killed.
    for _ in 0..50 {
        let Ok(list) = fs::read_to_string(&procs) else {
            return; // the container is gone, and its cgroup with it
        };
        let pids: Vec<&str> = list.split_whitespace().collect();
        if pids.is_empty() {
            return;
        }
        let status = Command::new("kill")
            .arg("-KILL")
            .args(&pids)
            .status()
            .expect("run kill");
        // A process that exited meanwhile makes kill fail; the next round sees the rest.
        let _ = status;
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "the processes of container {name} ({}) survived SIGKILL",
        procs.display()
    );
}

/// The last `n` bytes of `text` (the operator's `last-logs` keeps 16 KiB of a container's log).
pub fn tail(text: &str, n: usize) -> &str {
    let mut start = text.len().saturating_sub(n);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
