//! The image under test and the operator's pod shape, as podman flags.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::util::{AgentCmd, FakeHost, Run, Running};

/// The OCI runtime and the flags this machine needs, in one place.
///
/// - `--runtime runc`: podman's other runtime, crun, refuses the hybrid cgroup v1 layout of the
///   machines these tests run on; runc runs the privileged container.
/// - `--ulimit nofile=… nproc=…`: by default podman asks for open-file and process limits above
///   the hard limits of these machines, whose root lacks CAP_SYS_RESOURCE to raise them, and runc
///   fails (`error setting rlimits for ready process: operation not permitted`). Explicit limits
///   under the hard ones start the container.
/// - `--pull never`: everything runs offline; the image is built locally.
const RUNTIME_FLAGS: &[&str] = &[
    "--runtime",
    "runc",
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1024:1024",
    "--pull",
    "never",
];

/// The operator's package and interrupt pods (SPEC §13): privileged, host PID and host network,
/// the host's `/` at `/root` (here: a fake host root, never the real one).
const POD_SHAPE: &[&str] = &["--privileged", "--pid", "host", "--network", "host"];

/// Interrupt pods are limited to 64 MiB of memory and 500m CPU. Kubernetes nodes run without
/// swap, so memory plus swap is capped at the same 64 MiB.
pub const INTERRUPT_LIMITS: &[&str] = &["--memory", "64m", "--memory-swap", "64m", "--cpus", "0.5"];

/// The operator's resource ID for package `pkg` 1.0.0 of Skyhook `sk1`, uid `uid1`, generation 1
/// (`<skyhook>-<uid>-<generation>_<pkg>_<ver>`).
pub const RESOURCE_ID: &str = "sk1-uid1-1_pkg_1.0.0";
/// `STATE/interrupts/flags/<RESOURCE_ID>`, ROOT-relative.
pub const INTERRUPT_FLAGS: &str = "var/lib/skyhook/sk1/interrupts/flags/sk1-uid1-1_pkg_1.0.0";

/// The podman executable (the test command installs it; its absence is a failure).
pub fn podman() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("podman"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "podman is missing: the container suite needs podman and runc \
             (apt-get install podman runc; scripts/test.sh installs them when run as root)"
        )
    })
}

/// The pods are rootful podman's: privileged, host PID and network, memory and CPU limits
/// (which rootless podman cannot set on cgroup v1). Root of a user namespace is not enough.
fn require_real_root() {
    let uid_map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
    let initial_namespace =
        uid_map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"];
    assert!(
        crate::util::is_root() && initial_namespace,
        "the container suite needs root: it runs privileged pods with host PID and network and \
         memory limits through rootful podman; run scripts/test.sh as root"
    );
}

/// Run podman with `args`, panicking with its output unless it succeeds; returns stdout.
pub fn podman_ok(args: &[&str]) -> String {
    let out = Command::new(podman())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running podman {args:?}: {e}"));
    assert!(
        out.status.success(),
        "podman {args:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The image built from the working tree by scripts/build-image.sh, removed on drop.
pub struct Image {
    pub tag: String,
    /// What scripts/build-image.sh printed last (`built TAG: N bytes uncompressed ...`).
    pub build_report: String,
    /// The SBOM it wrote (`sbom: PATH`).
    pub sbom: PathBuf,
    /// The static binary the image holds, as built.
    pub binary: PathBuf,
}

impl Image {
    /// Build the image with a tag of its own. The static binary is built in a target directory
    /// of its own: the target directory of this test run is locked by the cargo running it.
    pub fn build() -> Self {
        Self::build_with("agent-container-suite", &[])
    }

    /// Build an image with scripts/build-image.sh and `options` (`--package ...`), tagged
    /// `localhost/<name>:<pid>`.
    pub fn build_with(name: &str, options: &[&str]) -> Self {
        let tag = format!("localhost/{name}:{}", std::process::id());
        let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("container-suite-target");
        Self::build_in(&tag, &target_dir, options)
    }

    /// scripts/build-image.sh OPTIONS TAG with CARGO_TARGET_DIR=`target_dir`.
    pub fn build_in(tag: &str, target_dir: &Path, options: &[&str]) -> Self {
        require_real_root();
        podman();
        let repo = repo();
        let out = Command::new(repo.join("scripts/build-image.sh"))
            .args(options)
            .arg(tag)
            .current_dir(&repo)
            .env("CARGO_TARGET_DIR", target_dir)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/build-image.sh");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "scripts/build-image.sh {tag} failed ({}): {stdout}",
            out.status
        );
        let sbom = stdout
            .lines()
            .find_map(|l| l.strip_prefix("sbom: "))
            .unwrap_or_else(|| panic!("scripts/build-image.sh names no SBOM: {stdout}"));
        let triple = match std::env::consts::ARCH {
            "x86_64" => "x86_64-unknown-linux-gnu",
            "aarch64" => "aarch64-unknown-linux-gnu",
            other => panic!("no image for {other}"),
        };
        Self {
            tag: tag.to_owned(),
            build_report: stdout.lines().last().unwrap_or_default().to_owned(),
            sbom: PathBuf::from(sbom),
            binary: target_dir.join(triple).join("release/agent"),
        }
    }

    /// `podman image inspect`'s document for the image.
    pub fn inspect(&self) -> serde_json::Value {
        let text = podman_ok(&["image", "inspect", &self.tag]);
        let mut all: serde_json::Value = serde_json::from_str(&text).unwrap();
        all[0].take()
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        // Untags, and removes the image when no other tag names it.
        let _ = Command::new(podman())
            .args(["image", "rm", "--force", &self.tag])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The commit the working tree is at (`git rev-parse HEAD`).
pub fn git_head() -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo())
        .args(["rev-parse", "HEAD"])
        .output()
        .expect("run git (the container suite builds the image from a git checkout)");
    assert!(
        out.status.success(),
        "git rev-parse HEAD in {}: {}",
        repo().display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("agent-cli sits in the workspace root")
        .to_path_buf()
}

static CONTAINERS: AtomicUsize = AtomicUsize::new(0);

/// One `podman run` of the image: flags, then the agent's arguments.
pub struct Pod<'a> {
    image: &'a Image,
    name: String,
    flags: Vec<String>,
    env: Vec<(String, String)>,
    args: Vec<String>,
    timeout: Duration,
}

impl<'a> Pod<'a> {
    /// A bare `podman run` of the image (runtime flags only), with no host mounted.
    pub fn bare(image: &'a Image) -> Self {
        let n = CONTAINERS.fetch_add(1, Ordering::Relaxed);
        Self {
            image,
            name: format!("agent-container-suite-{}-{n}", std::process::id()),
            flags: Vec::new(),
            env: Vec::new(),
            args: Vec::new(),
            timeout: Duration::from_secs(120),
        }
    }

    /// The operator's pod on `host`: privileged, host PID and network, the fake host root at
    /// `/root`, and the operator's environment (SPEC §13) for resource [`RESOURCE_ID`].
    pub fn operator(image: &'a Image, host: &FakeHost) -> Self {
        let root = host.root();
        // Only ever a fake root in a temp directory: never the real host's `/`.
        assert!(
            root != Path::new("/") && root.starts_with(std::env::temp_dir()),
            "refusing to mount {} as the host root",
            root.display()
        );
        let mut pod = Self::bare(image);
        pod.flags.extend(POD_SHAPE.iter().map(|s| (*s).to_owned()));
        // `rslave`: the operator's hostPath mount has propagation HostToContainer.
        pod.flags.extend([
            "--volume".to_owned(),
            format!("{}:/root:rslave", root.display()),
        ]);
        for (k, v) in [
            ("SKYHOOK_RESOURCE_ID", RESOURCE_ID),
            ("SKYHOOK_ROOT_DIR", "/var/lib/skyhook/sk1"),
            ("SKYHOOK_LOG_DIR", "/var/log/skyhook/sk1"),
            ("COPY_RESOLV", "false"),
            ("SKYHOOK_NODE_ORDER", "0"),
        ] {
            pod = pod.env(k, v);
        }
        pod
    }

    /// The container's name (for `podman kill`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Add podman flags.
    #[must_use]
    pub fn flags(mut self, flags: &[&str]) -> Self {
        self.flags.extend(flags.iter().map(|s| (*s).to_owned()));
        self
    }

    /// Set an environment variable of the container.
    #[must_use]
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.retain(|(key, _)| key != k);
        self.env.push((k.to_owned(), v.to_owned()));
        self
    }

    /// The agent's arguments (after the image's entrypoint).
    #[must_use]
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|s| (*s).to_owned()));
        self
    }

    fn command(self) -> AgentCmd {
        let mut argv: Vec<String> = vec!["run".into(), "--rm".into(), "--name".into(), self.name];
        argv.extend(RUNTIME_FLAGS.iter().map(|s| (*s).to_owned()));
        // A container outliving a failed case is killed by conmon, not left behind.
        argv.extend([
            "--timeout".to_owned(),
            (self.timeout.as_secs() + 30).to_string(),
        ]);
        argv.extend(self.flags);
        for (k, v) in &self.env {
            argv.extend(["--env".to_owned(), format!("{k}={v}")]);
        }
        argv.push(self.image.tag.clone());
        argv.extend(self.args);
        // podman itself runs with the harness's base environment (PATH, HOME, …); the
        // container gets only what the --env flags give it.
        let mut cmd = AgentCmd::in_dir(&std::env::temp_dir());
        for k in [
            "SKYHOOK_RESOURCE_ID",
            "COPY_RESOLV",
            "SKYHOOK_ROOT_DIR",
            "SKYHOOK_LOG_DIR",
        ] {
            cmd = cmd.env_remove(k);
        }
        cmd.args(argv).timeout(self.timeout)
    }

    /// Start the container (attached: its stdout and stderr are the agent's).
    pub fn spawn(self) -> Running {
        self.command().spawn_program(&podman())
    }

    /// Run the container to completion.
    pub fn run(self) -> Run {
        self.spawn().wait()
    }
}

/// What the kubelet does to a pod it deletes: SIGTERM to the container's main process (the
/// agent) only; containerd's shim kills whatever is left once that process exits, or everything
/// at the end of the grace period.
///
/// Not `podman stop`: for a container in the host's PID namespace (`--pid host`, as the operator's
/// pods are) podman stops with `runc kill --all`, which sends SIGTERM to every process in the
/// container's cgroup, the running step included, so the agent gets no chance to let it finish.
pub fn terminate_like_kubelet(name: &str) {
    podman_ok(&["kill", "--signal", "SIGTERM", name]);
}
