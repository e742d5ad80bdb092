//! Test support for interrupt kinds (cargo feature `testing`): run a kind through the real
//! decoder and orchestration (markers, boot-ID protocol, logs) against a directory standing in
//! for the host root, with a runner that records commands and spawns nothing, and with the
//! kind's own code refused any process it starts itself; and [`assert_kind`], the
//! conformance check every kind's own tests call. What a kind's tests need is re-exported
//! here: [`InterruptOutcome`], [`OperationRecord`], [`Termination`], [`PlannedOperation`],
//! [`PlannedAction`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use agent_core::testing::TestHost;
//! # use agent_core::{Command, CompletionPolicy, InterruptContext, InterruptError, InterruptKind};
//! # #[derive(Debug, serde::Serialize, serde::Deserialize)]
//! # struct KubeletRestart {}
//! # #[agent_core::interrupt(type = "kubelet_restart", summary = "systemctl restart kubelet")]
//! # impl InterruptKind for KubeletRestart {
//! #     async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError> {
//! #         let restart = Command::new("systemctl").args(["restart", "kubelet"]);
//! #         cx.operation(0, CompletionPolicy::OnSuccess, restart).await
//! #     }
//! # }
//! let host = TestHost::temp();
//! let (result, _records) = host.run(r#"{"type":"kubelet_restart"}"#).await;
//! result.unwrap();
//! assert_eq!(host.commands(), ["systemctl restart kubelet"]);
//! assert!(host.marker("kubelet_restart_0.complete").is_some());
//! # }
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::exec::{
    self, Cancellation, ExecError, MemorySink, Outcome, Output, ProcessSpec, Runner,
};
use crate::host::fs::HostFs;
use crate::interrupt::plan;
use crate::interrupt::runner::{self, InterruptSettings};
use crate::plugin::codec;
use crate::plugin::contract::{CompletionPolicy, Interrupt, InterruptError, InterruptKind};
use crate::plugin::registry;
use spawn_trap::SpawnTrap;

pub use crate::exec::Termination;
pub use crate::interrupt::plan::PlannedOperation;
pub use crate::interrupt::runner::{InterruptOutcome, OperationRecord};
pub use crate::stage::plan::PlannedAction;

/// Records every command line and answers with scripted terminations (exit 0 once the script
/// is used up). Nothing is spawned.
#[derive(Debug, Default)]
pub struct ScriptedRunner {
    /// Every command line run so far, with the timeout it ran under.
    ran: Mutex<Vec<(String, Option<Duration>)>>,
    answers: Mutex<VecDeque<Outcome>>,
}

impl ScriptedRunner {
    /// Answer the next commands with these terminations, in order.
    pub fn answer(&self, terminations: impl IntoIterator<Item = Termination>) {
        let outcomes = terminations.into_iter().map(Outcome::new);
        self.answers.lock().expect("lock").extend(outcomes);
    }

    /// The next command runs into its timeout.
    pub fn answer_timed_out(&self) {
        // The command outlives its timeout and is stopped with SIGTERM.
        let mut outcome = Outcome::new(Termination::Signalled(libc::SIGTERM));
        outcome.timed_out = true;
        self.answers.lock().expect("lock").push_back(outcome);
    }

    /// Every command line run so far (`program arg arg`).
    pub fn commands(&self) -> Vec<String> {
        let ran = self.ran.lock().expect("lock");
        ran.iter().map(|(command, _)| command.clone()).collect()
    }

    /// The timeout each command ran under, in order.
    pub fn timeouts(&self) -> Vec<Option<Duration>> {
        let ran = self.ran.lock().expect("lock");
        ran.iter().map(|&(_, timeout)| timeout).collect()
    }
}

#[async_trait::async_trait]
impl Runner for ScriptedRunner {
    async fn run(
        &self,
        cfg: &exec::Config,
        spec: &ProcessSpec,
        _log: Option<&mut File>,
    ) -> Result<Outcome, ExecError> {
        let mut line = spec.program.display().to_string();
        for a in &spec.args {
            line.push(' ');
            line.push_str(a);
        }
        self.ran.lock().expect("lock").push((line, cfg.timeout));
        let answer = self.answers.lock().expect("lock").pop_front();
        let mut outcome = answer.unwrap_or_else(|| Outcome::new(Termination::Exited(0)));
        outcome.cancelled = cfg.cancel.is_stopping();
        Ok(outcome)
    }
}

/// A fake host for one interrupt kind's tests: `root` stands in for ROOT (a temp dir the
/// test owns), boot ID `boot-1`, resource ID `test_pkg_1.0.0`.
#[derive(Debug)]
pub struct TestHost {
    /// A temp directory this host owns ([`TestHost::temp`]), removed on drop.
    _dir: Option<Arc<tempfile::TempDir>>,
    root: PathBuf,
    runner: Arc<ScriptedRunner>,
    stdout: Arc<MemorySink>,
    cancel: Cancellation,
    settings: InterruptSettings,
}

/// Where [`TestHost`] keeps interrupt markers, as a host path.
pub const TEST_MARKERS_DIR: &str = "/etc/skyhook/interrupts/flags/test_pkg_1.0.0";

impl TestHost {
    pub fn new(root: &Path) -> Self {
        Self::build(root, None)
    }

    /// A host in a fresh temp directory, removed when the host is dropped.
    pub fn temp() -> Self {
        let dir = tempfile::tempdir().expect("create a temp directory for the test host");
        let root = dir.path().to_path_buf();
        Self::build(&root, Some(Arc::new(dir)))
    }

    fn build(root: &Path, dir: Option<Arc<tempfile::TempDir>>) -> Self {
        let runner = Arc::new(ScriptedRunner::default());
        let stdout = Arc::new(MemorySink::default());
        let cancel = Cancellation::new();
        let settings = InterruptSettings {
            fs: HostFs::new(root),
            exec: exec::Config {
                output: Output::new(stdout.clone(), Arc::new(MemorySink::default())),
                cancel: cancel.clone(),
                stop_grace: Duration::from_millis(10),
                timeout: None,
                runner: runner.clone(),
            },
            resource_id: "test_pkg_1.0.0".into(),
            markers_dir: TEST_MARKERS_DIR.into(),
            log_dir: Some("/var/log/skyhook/pkg/1.0.0".into()),
            copy_dir: "/var/lib/skyhook/pkg-1.0.0".into(),
            base_env: Vec::new(),
            reboot_max_attempts: crate::host::runtime::DEFAULT_REBOOT_MAX_ATTEMPTS,
            reboot_wait: Duration::from_millis(50),
            heartbeat: Duration::ZERO,
        };
        let host = Self {
            _dir: dir,
            root: root.to_path_buf(),
            runner,
            stdout,
            cancel,
            settings,
        };
        host.set_boot_id("boot-1");
        host
    }

    /// The directory standing in for ROOT.
    pub fn root(&self) -> &Path {
        &self.root
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

    /// The next command runs into its timeout.
    pub fn answer_timed_out(&self) {
        self.runner.answer_timed_out();
    }

    /// The timeout each command ran under (the shorter of its own and the agent's), in order.
    pub fn timeouts(&self) -> Vec<Option<Duration>> {
        self.runner.timeouts()
    }

    /// Write the host's boot ID.
    pub fn set_boot_id(&self, id: &str) {
        let dir = self.root.join("proc/sys/kernel/random");
        std::fs::create_dir_all(&dir).expect("create the fake boot_id directory");
        std::fs::write(dir.join("boot_id"), format!("{id}\n")).expect("write the fake boot_id");
    }

    /// Behave as if the agent received SIGTERM.
    pub fn cancel(&self) {
        self.cancel.stop.cancel();
    }

    /// Behave as if the agent received a second SIGTERM: the running command is stopped, and
    /// the kind has the stop grace (10 ms here) to return before its code is dropped.
    pub fn force_stop(&self) {
        self.cancel.force.cancel();
    }

    /// The settings a run uses.
    pub fn settings(&self) -> &InterruptSettings {
        &self.settings
    }

    /// The settings a run uses (adjust fields before [`TestHost::run`] if needed).
    pub fn settings_mut(&mut self) -> &mut InterruptSettings {
        &mut self.settings
    }

    /// Run the interrupt `payload` (JSON, as `agent interrupts encode` takes it) as the agent
    /// runs INTERRUPT_DATA: through the real decoder (registry, validation), then the core's
    /// orchestration. A payload that does not decode fails with [`InterruptError::Decode`].
    pub async fn run(
        &self,
        payload: &str,
    ) -> (
        Result<InterruptOutcome, InterruptError>,
        Vec<OperationRecord>,
    ) {
        match <dyn Interrupt>::from_json_bytes(payload.as_bytes()) {
            Ok(decoded) => {
                let trap = Arc::new(SpawnTrap::default());
                let run = runner::run_confined(
                    self.settings.clone(),
                    decoded.interrupt.into(),
                    Some(trap.clone()),
                )
                .await;
                (spawned_outside(&trap).map_or(run.result, Err), run.records)
            }
            Err(e) => (Err(e.into()), Vec::new()),
        }
    }

    /// Run `kind` as the operator's bytes would: serialized, then decoded again
    /// ([`TestHost::run`]), so a kind that does not survive the wire fails here too.
    pub async fn run_kind(
        &self,
        kind: &(dyn Interrupt + 'static),
    ) -> (
        Result<InterruptOutcome, InterruptError>,
        Vec<OperationRecord>,
    ) {
        self.run(&kind.to_json()).await
    }

    /// Dry-run `payload` (`agent plan interrupt`): decoded as in [`TestHost::run`], each
    /// operation judged against the markers without running or writing anything.
    ///
    /// # Errors
    /// The payload does not decode, or the kind gave up.
    pub async fn plan(&self, payload: &str) -> Result<Vec<PlannedOperation>, InterruptError> {
        let decoded = <dyn Interrupt>::from_json_bytes(payload.as_bytes())?;
        let trap = Arc::new(SpawnTrap::default());
        let (planned, result) = plan::plan_confined(
            self.settings.clone(),
            decoded.interrupt.as_ref(),
            Some(trap.clone()),
        )
        .await;
        if let Some(e) = spawned_outside(&trap) {
            return Err(e);
        }
        result.map(|()| planned)
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

    /// The names of the files in the marker directory, sorted.
    pub fn markers(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.markers_dir())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Every file under the root with its content (what a dry run must leave unchanged).
    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else {
                    out.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(&self.root, &mut out);
        out
    }
}

/// The conformance check of interrupt kind `K`, for the kind's own tests (call it from a plain
/// `#[test]`, not inside an async runtime):
///
/// ```ignore
/// #[test]
/// fn conforms() {
///     agent_core::testing::assert_kind::<SysctlReload>();
/// }
/// ```
///
/// With `K`'s example payload, on fresh [`TestHost`]s, it checks that:
/// - `K` is registered in this binary, once, and its example decodes through the real decoder
///   to `K` and serializes back to the same JSON;
/// - an unknown payload field is reported (or refused, with `deny_unknown_fields`);
/// - a dry run plans operations named `<type>_<i>` (or `<type>`), runs nothing and writes
///   nothing, and a real run then runs exactly the commands the plan announced (answering
///   after-reboot operations with the shutdown, and changing the boot ID, until complete);
/// - the kind's code starts no process itself (every run and plan of a [`TestHost`] refuses
///   and reports it);
/// - the example runs at least one operation or marks the kind done
///   ([`Conformance::runs_nothing`] for a kind that does nothing on purpose);
/// - the run leaves only markers named `<type>_<i>.complete` (or `<type>.complete`), one per
///   operation, and a second run skips them all and runs nothing;
/// - when any one of its commands fails (each in turn, up to the first reboot), the run fails
///   naming it (a kind that returns `Ok` anyway is named for it) and writes no marker for it,
///   and the next run skips the operations before it and resumes there.
///
/// # Panics
/// On the first check that fails, with what was expected and what happened.
pub fn assert_kind<K: InterruptKind>() {
    Conformance::new().check::<K>();
}

/// [`assert_kind`] with settings: environment the kind needs (`NODE_NAME`, ...).
#[derive(Debug, Default, Clone)]
pub struct Conformance {
    env: Vec<(String, String)>,
    runs_nothing: bool,
}

impl Conformance {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a variable to the environment of every run.
    #[must_use]
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The kind runs no operation and marks nothing done on purpose (like `script_interrupt`,
    /// whose package's scripts do the work). Without it, a kind whose example runs nothing
    /// fails the check.
    #[must_use]
    pub fn runs_nothing(mut self) -> Self {
        self.runs_nothing = true;
        self
    }

    fn host(&self) -> TestHost {
        self.env
            .iter()
            .fold(TestHost::temp(), |host, (k, v)| host.env(k, v))
    }

    /// Run the checks of [`assert_kind`] on `K`.
    ///
    /// # Panics
    /// On the first check that fails.
    pub fn check<K: InterruptKind>(&self) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("start an async runtime for assert_kind");
        let ty = K::TYPE;
        let who = format!(
            "assert_kind::<{}> (type {ty:?})",
            std::any::type_name::<K>()
        );
        let fail = |what: String| fail(&who, &what);

        // Registered, once, and the example survives the real decoder.
        let Some(descriptor) = registry::descriptor_of::<K>() else {
            fail(format!(
                "not registered in this binary: declare it with #[agent_core::interrupt] and, in \
                 a test outside the kind's crate, name that crate (`use the_crate as _;`). \
                 Registered types: [{}]",
                registry::type_names().join(", ")
            ))
        };
        if let Err(e) = registry::check_unique() {
            fail(e.to_string());
        }
        if let Err(e) = codec::check_example(descriptor) {
            fail(e.to_string());
        }
        let example = K::EXAMPLE;

        // Unknown fields are reported, or refused by name.
        let mut extra: serde_json::Value =
            serde_json::from_str(example).expect("checked: the example decodes");
        extra["assert_kind_unknown_field"] = serde_json::Value::Bool(true);
        match <dyn Interrupt>::from_json_bytes(extra.to_string().as_bytes()) {
            Ok(d) if d.unknown_fields == ["assert_kind_unknown_field"] => {}
            Ok(d) => fail(format!(
                "an unknown payload field was reported as {:?}, not [\"assert_kind_unknown_field\"]",
                d.unknown_fields
            )),
            Err(e) if e.to_string().contains("assert_kind_unknown_field") => {}
            Err(e) => fail(format!(
                "an unknown payload field was refused without naming it: {e}"
            )),
        }

        // Plan, then run, until complete (a reboot ends a run; the next boot continues).
        let host = self.host();
        let mut operations = Vec::new();
        for boot in 1..=10 {
            let before = host.snapshot();
            let ran_before = host.commands().len();
            let planned = rt
                .block_on(host.plan(example))
                .unwrap_or_else(|e| fail(format!("the dry run of the example failed: {e}")));
            if host.snapshot() != before || host.commands().len() != ran_before {
                fail("the dry run ran a command or wrote a file".into());
            }
            for op in &planned {
                if !is_operation_name(&op.operation, ty) {
                    fail(format!(
                        "planned operation {:?} is not named {ty}_<i> or {ty}",
                        op.operation
                    ));
                }
                if !operations.contains(&op.operation) && op.action != PlannedAction::NotReached {
                    operations.push(op.operation.clone());
                }
            }
            let will_run: Vec<&PlannedOperation> = planned
                .iter()
                .filter(|op| op.action == PlannedAction::Run)
                .collect();
            host.answer(will_run.iter().map(|op| shutdown_or_success(op)));
            let (result, _) = rt.block_on(host.run(example));
            let ran = host.commands()[ran_before..].to_vec();
            let announced: Vec<String> = will_run
                .iter()
                .filter_map(|op| op.command.clone())
                .collect();
            if ran != announced {
                fail(format!(
                    "the run ran {ran:?}, the dry run announced {announced:?}"
                ));
            }
            match result {
                Ok(InterruptOutcome::Completed) => break,
                Ok(InterruptOutcome::ShutdownInProgress) => {
                    host.set_boot_id(&format!("boot-{}", boot + 1));
                }
                Err(e) => fail(format!("the run of the example failed: {e}")),
            }
            if boot == 10 {
                fail("still rebooting after 10 boots".into());
            }
        }

        // SPEC §9.5: a kind whose example hands over no operation, and marks nothing done,
        // does nothing on a node (a `cx.operation(..)` not awaited never runs).
        if operations.is_empty() && !self.runs_nothing {
            fail(
                "the example ran no operation and marked nothing done: hand each command to \
                 `cx.operation(i, ..).await` (an operation that is not awaited never runs), or \
                 call `cx.mark_done()` when the kind runs none; for a kind that does nothing on \
                 purpose, check it with Conformance::new().runs_nothing()"
                    .into(),
            );
        }

        // One completion marker per operation, and nothing else.
        let mut expected: Vec<String> = operations
            .iter()
            .map(|op| format!("{op}.complete"))
            .collect();
        expected.sort();
        if host.markers() != expected {
            fail(format!(
                "after the run the marker directory holds {:?}, expected {expected:?}",
                host.markers()
            ));
        }

        // A second run skips every operation.
        let ran_before = host.commands().len();
        let (result, records) = rt.block_on(host.run(example));
        if let Err(e) = result {
            fail(format!("the second run failed: {e}"));
        }
        if host.commands().len() != ran_before {
            fail(format!(
                "the second run ran {:?}; every operation was complete",
                &host.commands()[ran_before..]
            ));
        }
        if let Some(r) = records
            .iter()
            .find(|r| !matches!(r, OperationRecord::Skipped { .. }))
        {
            fail(format!("the second run did not skip: {r:?}"));
        }

        self.check_resume(&rt, example, &who);
    }

    /// Fail each command of the first run in turn (on a fresh host), then resume.
    fn check_resume(&self, rt: &tokio::runtime::Runtime, example: &str, who: &str) {
        let planned = rt.block_on(self.host().plan(example)).unwrap_or_default();
        let runs: Vec<&PlannedOperation> = planned
            .iter()
            .filter(|op| op.action == PlannedAction::Run)
            .collect();
        // The commands that can fail and resume: those before the first reboot.
        let before_reboot = runs
            .iter()
            .position(|op| op.policy == Some(CompletionPolicy::AfterReboot))
            .unwrap_or(runs.len());
        for failing in 0..before_reboot {
            self.check_failure_at(rt, example, who, &runs, failing);
        }
    }

    /// Command `failing` of `runs` exits 1: the run fails naming it, leaves no marker for it,
    /// keeps those before it, and the next run skips those and runs it again.
    fn check_failure_at(
        &self,
        rt: &tokio::runtime::Runtime,
        example: &str,
        who: &str,
        runs: &[&PlannedOperation],
        failing: usize,
    ) {
        let fail = |what: String| fail(who, &what);
        let host = self.host();
        let op = runs[failing];
        let command = op.command.clone().unwrap_or_default();
        host.answer((0..failing).map(|_| Termination::Exited(0)));
        host.answer([Termination::Exited(1)]);
        let (result, _) = rt.block_on(host.run(example));
        let expected = format!("{command}: exit code 1");
        match result {
            Err(InterruptError::SwallowedFailure { operation, .. }) => fail(format!(
                "the kind returned Ok after {command:?} ({operation}) exited 1: pass the failure \
                 on (`cx.operation(..).await?`); on a node the agent fails the run for it"
            )),
            Err(e) if e.to_string().contains(&expected) => {}
            other => fail(format!(
                "when {command:?} exits 1 the run must fail with {expected:?}, got {other:?}"
            )),
        }
        let marker = format!("{}.complete", op.operation);
        if host.marker(&marker).is_some() {
            fail(format!("{marker} was written although {command:?} failed"));
        }
        let done: Vec<&str> = runs[..failing]
            .iter()
            .map(|op| op.operation.as_str())
            .collect();
        for op in &done {
            if host.marker(&format!("{op}.complete")).is_none() {
                fail(format!(
                    "{op} succeeded before {command:?} failed but has no marker"
                ));
            }
        }
        let ran_before = host.commands().len();
        let (result, records) = rt.block_on(host.run(example));
        if let Err(e) = result {
            fail(format!("the run after {command:?} failed, failed: {e}"));
        }
        let skipped: Vec<String> = records
            .iter()
            .filter_map(|r| match r {
                OperationRecord::Skipped { marker } => Some(marker.clone()),
                _ => None,
            })
            .collect();
        for op in &done {
            if !skipped.contains(&format!("{op}.complete")) {
                fail(format!(
                    "the run after {command:?} failed did not skip {op}, which was complete"
                ));
            }
        }
        if !host.commands()[ran_before..].contains(&command) {
            fail(format!(
                "the run after {command:?} failed did not run it again"
            ));
        }
        if host.marker(&marker).is_none() {
            fail(format!("{marker} missing after the resumed run"));
        }
    }
}

/// SPEC §9.5: the error of a run in which the kind tried to start a process itself.
fn spawned_outside(trap: &SpawnTrap) -> Option<InterruptError> {
    let calls = trap.attempts();
    (!calls.is_empty()).then(|| {
        InterruptError::kind(format!(
            "the kind started a process itself ({}), outside its context; the call was refused. \
             Hand every command to cx.operation, which runs, records and stops it: on a node, \
             std::process::Command or tokio::process::Command in a kind runs unrecorded, and \
             outlives a stop",
            calls.join(", ")
        ))
    })
}

fn fail(who: &str, what: &str) -> ! {
    panic!("{who}: {what}")
}

/// `<type>_<i>` or `<type>`.
fn is_operation_name(name: &str, ty: &str) -> bool {
    name == ty
        || name
            .strip_prefix(ty)
            .and_then(|rest| rest.strip_prefix('_'))
            .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
}

/// How the fake host answers a planned command: a reboot is killed by the shutdown.
fn shutdown_or_success(op: &PlannedOperation) -> Termination {
    if op.policy == Some(CompletionPolicy::AfterReboot) {
        Termination::Signalled(libc::SIGTERM)
    } else {
        Termination::Exited(0)
    }
}

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod spawn_trap;
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
mod spawn_trap {
    //! The trap needs a seccomp filter written for the architecture; elsewhere a kind's tests
    //! fail saying so, rather than pass without the check.
    #[derive(Debug, Default)]
    pub(crate) struct SpawnTrap;

    impl SpawnTrap {
        pub(crate) fn attempts(&self) -> Vec<&'static str> {
            Vec::new()
        }
    }

    impl crate::interrupt::worker::Confine for SpawnTrap {
        fn enter(&self) -> Result<(), String> {
            Err("the spawn trap supports x86_64 and aarch64 Linux only".into())
        }
    }
}

#[cfg(test)]
mod tests;
