//! Test support for interrupt kinds: run a kind through the real orchestration (markers,
//! boot-ID protocol, logs) against a directory standing in for the host root, with a runner
//! that records commands and spawns nothing.
//!
//! ```no_run
//! # async fn demo(root: &std::path::Path, kind: &dyn agent_core::Interrupt) {
//! use agent_core::testing::TestHost;
//! let host = TestHost::new(root).env("NODE_NAME", "gpu-node-7");
//! let (result, _records) = host.run(kind).await;
//! result.unwrap();
//! assert_eq!(host.commands(), ["kubectl drain gpu-node-7 --timeout=300s"]);
//! # }
//! ```

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::execution::{
    self, Cancel, CancelHandle, ExecError, MemorySink, Outcome, Output, ProcessSpec, Runner,
    Termination,
};
use crate::hostfs::HostFs;
use crate::interrupt::Interrupt;
use crate::interrupts::{
    self, InterruptError, InterruptOutcome, InterruptSettings, OperationRecord,
};

/// Records every command line and answers with scripted terminations (exit 0 once the script
/// is used up). Nothing is spawned.
#[derive(Debug, Default)]
pub struct ScriptedRunner {
    commands: Mutex<Vec<String>>,
    answers: Mutex<VecDeque<Termination>>,
}

impl ScriptedRunner {
    /// Answer the next commands with these terminations, in order.
    pub fn answer(&self, terminations: impl IntoIterator<Item = Termination>) {
        self.answers.lock().expect("lock").extend(terminations);
    }

    /// Every command line run so far (`program arg arg`).
    pub fn commands(&self) -> Vec<String> {
        self.commands.lock().expect("lock").clone()
    }
}

#[async_trait::async_trait]
impl Runner for ScriptedRunner {
    async fn run(
        &self,
        cfg: &execution::Config,
        spec: &ProcessSpec,
        _log: Option<&mut File>,
    ) -> Result<Outcome, ExecError> {
        let mut line = spec.program.display().to_string();
        for a in &spec.args {
            line.push(' ');
            line.push_str(a);
        }
        self.commands.lock().expect("lock").push(line);
        let termination = self
            .answers
            .lock()
            .expect("lock")
            .pop_front()
            .unwrap_or(Termination::Exited(0));
        let mut outcome = Outcome::new(termination);
        outcome.cancelled = cfg.cancel.is_cancelled();
        Ok(outcome)
    }
}

/// A fake host for one interrupt kind's tests: `root` stands in for ROOT (a temp dir the
/// test owns), boot ID `boot-1`, resource ID `test_pkg_1.0.0`.
#[derive(Debug)]
pub struct TestHost {
    root: PathBuf,
    runner: Arc<ScriptedRunner>,
    stdout: Arc<MemorySink>,
    cancel: CancelHandle,
    settings: InterruptSettings,
}

/// Where [`TestHost`] keeps interrupt markers, as a host path.
pub const TEST_MARKERS_DIR: &str = "/etc/skyhook/interrupts/flags/test_pkg_1.0.0";

impl TestHost {
    pub fn new(root: &Path) -> Self {
        let runner = Arc::new(ScriptedRunner::default());
        let stdout = Arc::new(MemorySink::default());
        let (cancel, token) = Cancel::new();
        let settings = InterruptSettings {
            fs: HostFs::new(root),
            exec: execution::Config {
                output: Output::new(stdout.clone(), Arc::new(MemorySink::default())),
                cancel: token,
                stop_grace: Duration::from_millis(10),
                timeout: None,
                runner: runner.clone(),
            },
            resource_id: "test_pkg_1.0.0".into(),
            markers_dir: TEST_MARKERS_DIR.into(),
            log_dir: Some("/var/log/skyhook/pkg/1.0.0".into()),
            copy_dir: "/var/lib/skyhook/pkg-1.0.0".into(),
            base_env: Vec::new(),
            reboot_max_attempts: crate::runtime::DEFAULT_REBOOT_MAX_ATTEMPTS,
            reboot_wait: Duration::from_millis(50),
        };
        let host = Self {
            root: root.to_path_buf(),
            runner,
            stdout,
            cancel,
            settings,
        };
        host.set_boot_id("boot-1");
        host
    }

    /// Add a variable to the agent environment the kind sees.
    #[must_use]
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.settings
            .base_env
            .push((OsString::from(name), OsString::from(value)));
        self
    }

    /// Answer the next commands with these terminations (default: exit 0).
    pub fn answer(&self, terminations: impl IntoIterator<Item = Termination>) {
        self.runner.answer(terminations);
    }

    /// Write the host's boot ID.
    pub fn set_boot_id(&self, id: &str) {
        let dir = self.root.join("proc/sys/kernel/random");
        std::fs::create_dir_all(&dir).expect("create the fake boot_id directory");
        std::fs::write(dir.join("boot_id"), format!("{id}\n")).expect("write the fake boot_id");
    }

    /// Behave as if the agent received SIGTERM.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// The settings a run uses.
    pub fn settings(&self) -> &InterruptSettings {
        &self.settings
    }

    /// The settings a run uses (adjust fields before [`TestHost::run`] if needed).
    pub fn settings_mut(&mut self) -> &mut InterruptSettings {
        &mut self.settings
    }

    /// Run `kind` through the core's orchestration.
    pub async fn run(
        &self,
        kind: &dyn Interrupt,
    ) -> (
        Result<InterruptOutcome, InterruptError>,
        Vec<OperationRecord>,
    ) {
        interrupts::run_interrupt(self.settings.clone(), kind).await
    }

    /// Command lines run so far.
    pub fn commands(&self) -> Vec<String> {
        self.runner.commands()
    }

    /// What the agent printed on stdout.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout.contents()).into_owned()
    }

    /// The marker directory on the real filesystem.
    pub fn markers_dir(&self) -> PathBuf {
        self.root.join(&TEST_MARKERS_DIR[1..])
    }

    /// The content of marker `name` (`node_restart_0.pending`, ...), if present.
    pub fn marker(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.markers_dir().join(name)).ok()
    }
}
