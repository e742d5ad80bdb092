//! The report of `agent try`: per stage, then what changed on the host, read from the
//! overlay's upper layer against the lower layer.
//!
//! overlayfs records a deletion as a whiteout (a character device 0/0) and a directory that
//! replaced a lower one as an opaque directory (xattr `trusted.overlay.opaque` or, mounted
//! with `userxattr`, `user.overlay.opaque` = `y`). A file merely copied up (opened for
//! writing, touched) with the same type, content and mode is not a change.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::Path;
use std::time::Duration;

use agent_core::state::results::OperationResult;
use nix::sys::stat::{Mode, SFlag, mknod};
use serde::Serialize;

use super::{LOG_DIR, STATE_DIR};

/// A unified diff is shown for text files up to this size (both sides).
const DIFF_LIMIT: u64 = 64 * 1024;

/// The whole report; `--format json` prints it as is, a JSON document (docs/try.md lists the
/// fields).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub(crate) package: String,
    pub(crate) version: String,
    pub(crate) lower: String,
    pub(crate) copy_dir: String,
    pub(crate) resource_id: String,
    /// `host` or `none` (`--no-network`).
    pub(crate) network: String,
    /// `succeeded` or `failed`.
    pub(crate) result: String,
    pub(crate) error: Option<String>,
    pub(crate) stages: Vec<StageReport>,
    pub(crate) interrupts: Vec<InterruptReport>,
    pub(crate) changes: Vec<Change>,
    pub(crate) agent_state: AgentState,
    /// The `--keep` directory.
    pub(crate) kept: Option<String>,
    /// Whether "the lower root was not written" was measured (SPEC §1.6).
    pub(crate) isolation: Isolation,
}

/// What the stage runners measured about the steps' reach (see `confine`).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Isolation {
    /// Every stage whose steps ran was checked before and after, and nothing was found.
    pub verified: bool,
    /// What was checked, or what could not be verified.
    pub detail: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct StageReport {
    /// The MODE, or `interrupt`.
    pub stage: String,
    /// The interrupt's type, for `interrupt`.
    pub interrupt: Option<String>,
    /// `succeeded`, `failed` or `not-run` (an earlier stage failed).
    pub result: String,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// Steps that ran and that were skipped; for an interrupt, operations a node would run
    /// and those it would not (complete already, or only recorded).
    pub steps_ran: usize,
    pub steps_skipped: usize,
    pub steps: Vec<StepReport>,
    /// The stage's output (banner, headers, steps' output, diagnostics), in the `--keep`
    /// directory.
    pub output: Option<String>,
    pub error: Option<String>,
    /// The last lines of the output of a stage that failed.
    pub output_tail: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct StepReport {
    pub path: String,
    /// `ran` or `skipped`.
    pub decision: String,
    pub reason: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub succeeded: Option<bool>,
    pub duration_ms: Option<u64>,
}

impl StageReport {
    pub fn new(stage: &str, duration: Duration, output: String) -> Self {
        Self {
            stage: stage.to_owned(),
            result: "failed".into(),
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            output: Some(output),
            ..Self::default()
        }
    }

    pub fn not_run(stage: &str) -> Self {
        Self {
            stage: stage.to_owned(),
            result: "not-run".into(),
            ..Self::default()
        }
    }

    pub fn set_steps(&mut self, ops: &[OperationResult]) {
        self.steps = ops
            .iter()
            .map(|op| StepReport {
                path: op.operation.clone(),
                decision: op.decision.to_string(),
                reason: op.reason.to_string(),
                exit_code: op.exit_code,
                signal: op.signal,
                succeeded: op.succeeded,
                duration_ms: op.duration_ms,
            })
            .collect();
        self.steps_ran = ops.iter().filter(|o| o.decision == "ran").count();
        self.steps_skipped = ops.iter().filter(|o| o.decision == "skipped").count();
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct InterruptReport {
    pub r#type: String,
    /// Canonical JSON.
    pub payload: String,
    pub result: String,
    pub operations: Vec<InterruptOperation>,
    /// Set when an after-reboot operation was completed by a simulated reboot.
    pub simulated_reboot: Option<SimulatedReboot>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct InterruptOperation {
    pub operation: String,
    /// The command a real run would run (never run here).
    pub command: Option<String>,
    /// `on-success` or `after-reboot`.
    pub policy: Option<String>,
    /// What `agent plan interrupt` says: `run`, `skip`, `record`, ...
    pub action: String,
    pub reason: String,
}

impl InterruptOperation {
    /// What a node would do: `would run: COMMAND`, `ACTION: COMMAND` or `ACTION`.
    pub fn what(&self) -> String {
        match (&self.command, self.action.as_str()) {
            (Some(cmd), "run") => format!("would run: {cmd}"),
            (Some(cmd), action) => format!("{action}: {cmd}"),
            (None, action) => action.to_owned(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct SimulatedReboot {
    pub boot_id_before: String,
    pub boot_id_after: String,
}

/// One change on the host.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Change {
    /// Host path.
    pub path: String,
    /// `added`, `modified` or `deleted`.
    pub kind: String,
    /// `file`, `dir`, `symlink` or `other` (after the change; before it, for `deleted`).
    pub r#type: String,
    /// Permission bits (octal) before and after, where there is a before and an after.
    pub mode_before: Option<String>,
    pub mode_after: Option<String>,
    /// For `modified`: whether the content (or link target, or type) changed, or only the mode.
    pub content_changed: Option<bool>,
    pub size: Option<u64>,
    /// A symlink's target (after).
    pub target: Option<String>,
    /// A unified diff, for text files up to 64 KiB.
    pub diff: Option<String>,
}

/// The agent's own files in the sandbox (not counted as changes to the host).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct AgentState {
    /// Files per category: `package` (COPY_DIR), `markers` (step completion markers),
    /// `stage-flags` (START, check_results, *_ALL_CHECKED), `history`, `results`,
    /// `interrupt-markers`, `locks`, `metrics`, `logs`, `other`.
    pub files: BTreeMap<String, usize>,
    /// Every file, as a host path.
    pub paths: Vec<String>,
}

/// Walk `upper` against `lower`. Left out of the changes, besides the agent's state and log
/// directories: the mount points the sandbox `created` in the upper layer, and `copy_dir`
/// (COPY_DIR, a host path).
pub(crate) fn changes(
    lower: &Path,
    upper: &Path,
    created: &[String],
    copy_dir: &str,
) -> std::io::Result<(Vec<Change>, AgentState)> {
    let mut out = Walk {
        lower,
        upper,
        created,
        copy_dir,
        changes: Vec::new(),
        state: AgentState::default(),
    };
    out.dir("")?;
    // A directory added only to hold the agent's state (e.g. /var/lib/skyhook) is the agent's.
    let kept: Vec<Change> = out
        .changes
        .iter()
        .filter(|c| {
            !is_ancestor_dir(c)
                || out
                    .changes
                    .iter()
                    .any(|o| is_below(&o.path, &c.path) && !is_ancestor_dir(o))
        })
        .cloned()
        .collect();
    Ok((kept, out.state))
}

/// An added directory on the way to the agent's state or log directory.
fn is_ancestor_dir(c: &Change) -> bool {
    c.kind == "added"
        && c.r#type == "dir"
        && [STATE_DIR, LOG_DIR]
            .iter()
            .any(|d| *d == c.path || is_below(d, &c.path))
}

/// Whether `path` is strictly below the directory `dir` (`dir/...`).
fn is_below(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.starts_with('/'))
}

struct Walk<'a> {
    lower: &'a Path,
    upper: &'a Path,
    created: &'a [String],
    copy_dir: &'a str,
    changes: Vec<Change>,
    state: AgentState,
}

fn type_name(meta: &fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_symlink() {
        "symlink"
    } else if t.is_dir() {
        "dir"
    } else if t.is_file() {
        "file"
    } else {
        "other"
    }
}

fn mode(meta: &fs::Metadata) -> String {
    format!("{:04o}", meta.permissions().mode() & 0o7777)
}

fn is_whiteout(meta: &fs::Metadata) -> bool {
    meta.file_type().is_char_device() && meta.rdev() == 0
}

fn is_opaque(path: &Path) -> bool {
    ["trusted.overlay.opaque", "user.overlay.opaque"]
        .iter()
        .any(|name| {
            let mut buf = [0u8; 16];
            rustix::fs::lgetxattr(path, *name, &mut buf[..]).is_ok_and(|len| buf[..len] == *b"y")
        })
}

impl Walk<'_> {
    /// The agent's own file, or a path below one of its directories.
    fn agent_category(&self, host: &str) -> Option<&'static str> {
        let under = |dir: &str| host == dir || host.starts_with(&format!("{dir}/"));
        if under(LOG_DIR) {
            return Some("logs");
        }
        if under(self.copy_dir) {
            return Some("package");
        }
        let rest = host.strip_prefix(&format!("{STATE_DIR}/"))?;
        Some(match rest.split('/').next().unwrap_or_default() {
            // flags/<pkg>/<ver>/... are step markers; flags/START and the like, stage flags.
            "flags" if rest.matches('/').count() >= 3 => "markers",
            "flags" => "stage-flags",
            "history" => "history",
            "results" => "results",
            "locks" => "locks",
            "interrupts" => "interrupt-markers",
            "metrics" => "metrics",
            _ => "other",
        })
    }

    /// The directory `rel` (a path below the layers' roots, `""` for the roots themselves).
    fn dir(&mut self, rel: &str) -> std::io::Result<()> {
        let udir = self.upper.join(rel);
        let mut names: Vec<_> = fs::read_dir(&udir)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()?;
        names.sort();
        for name in names {
            let name = name.to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            self.entry(&child)?;
        }
        // An opaque directory hides everything of the lower one it does not hold itself.
        let ldir = self.lower.join(rel);
        if !rel.is_empty() && is_opaque(&udir) && ldir.is_dir() {
            if let Ok(entries) = fs::read_dir(&ldir) {
                let mut gone: Vec<String> = entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| fs::symlink_metadata(udir.join(n)).is_err())
                    .collect();
                gone.sort();
                for n in gone {
                    let child = format!("{rel}/{n}");
                    if let Ok(meta) = fs::symlink_metadata(self.lower.join(&child)) {
                        self.push_deleted(&child, &meta);
                    }
                }
            }
        }
        Ok(())
    }

    /// `rel` (never `""`, as for [`Self::entry`]) was deleted.
    fn push_deleted(&mut self, rel: &str, lower: &fs::Metadata) {
        self.changes.push(Change {
            path: format!("/{rel}"),
            kind: "deleted".into(),
            r#type: type_name(lower).into(),
            mode_before: Some(mode(lower)),
            size: lower.is_file().then_some(lower.len()),
            ..Change::default()
        });
    }

    /// The entry `rel` of the upper layer (below the root, so never `""`; host path `/{rel}`).
    fn entry(&mut self, rel: &str) -> std::io::Result<()> {
        let host = format!("/{rel}");
        if self.created.contains(&host) {
            return Ok(());
        }
        let upath = self.upper.join(rel);
        let lpath = self.lower.join(rel);
        let umeta = fs::symlink_metadata(&upath)?;
        let lmeta = fs::symlink_metadata(&lpath).ok();
        if let Some(cat) = self.agent_category(&host) {
            if umeta.is_dir() {
                return self.dir(rel);
            }
            if !is_whiteout(&umeta) {
                *self.state.files.entry(cat.to_owned()).or_default() += 1;
                self.state.paths.push(host);
            }
            return Ok(());
        }
        if is_whiteout(&umeta) {
            if let Some(l) = &lmeta {
                self.push_deleted(rel, l);
            }
            return Ok(());
        }
        let ty = type_name(&umeta);
        let target = umeta
            .file_type()
            .is_symlink()
            .then(|| fs::read_link(&upath).map(|t| t.display().to_string()))
            .transpose()?;
        let base = Change {
            path: host,
            kind: "added".into(),
            r#type: ty.into(),
            mode_after: (ty != "symlink").then(|| mode(&umeta)),
            size: umeta.is_file().then_some(umeta.len()),
            target,
            ..Change::default()
        };
        match lmeta {
            None => self.changes.push(base),
            Some(l) => {
                let same_type = type_name(&l) == ty;
                let content_changed = !same_type
                    || match ty {
                        "file" => l.len() != umeta.len() || fs::read(&lpath)? != fs::read(&upath)?,
                        "symlink" => fs::read_link(&lpath)? != fs::read_link(&upath)?,
                        _ => false,
                    };
                let mode_changed = ty != "symlink" && mode(&l) != mode(&umeta);
                if content_changed || mode_changed {
                    let diff = (same_type && ty == "file" && content_changed)
                        .then(|| unified_diff(&lpath, &upath, &base.path))
                        .flatten();
                    self.changes.push(Change {
                        kind: "modified".into(),
                        mode_before: (type_name(&l) != "symlink").then(|| mode(&l)),
                        content_changed: Some(content_changed),
                        diff,
                        ..base
                    });
                }
            }
        }
        if umeta.is_dir() {
            self.dir(rel)?;
        }
        Ok(())
    }
}

/// A unified diff of two small text files, or `None`.
fn unified_diff(before: &Path, after: &Path, host: &str) -> Option<String> {
    let small = |p: &Path| fs::metadata(p).is_ok_and(|m| m.len() <= DIFF_LIMIT);
    if !small(before) || !small(after) {
        return None;
    }
    let a = String::from_utf8(fs::read(before).ok()?).ok()?;
    let b = String::from_utf8(fs::read(after).ok()?).ok()?;
    if a.contains('\0') || b.contains('\0') {
        return None;
    }
    let diff = similar::TextDiff::from_lines(&a, &b);
    Some(
        diff.unified_diff()
            .context_radius(3)
            .header(&format!("{host} (lower)"), &format!("{host} (sandbox)"))
            .to_string(),
    )
}

/// Copy the upper layer to `dest` for `--keep`: files, directories and symlinks as they are,
/// without setuid and setgid bits (SPEC §1.6: a step's setuid-root copy must not run as root
/// for whoever can read the keep directory), whiteouts as character devices 0/0 where this
/// process may create them, else listed in `dest/../whiteouts.txt`. FIFOs, sockets and other
/// devices are left out.
pub(crate) fn copy_upper(upper: &Path, dest: &Path) -> std::io::Result<()> {
    let mut whiteouts = Vec::new();
    copy_tree(upper, dest, "", &mut whiteouts)?;
    if !whiteouts.is_empty() {
        let list = dest.with_file_name("whiteouts.txt");
        fs::write(list, whiteouts.join("\n") + "\n")?;
    }
    Ok(())
}

/// Permission bits a kept file or directory gets.
fn kept_mode(mode: u32) -> u32 {
    mode & 0o1777
}

/// Copy the regular file `src` (never through a link) to the new file `dest`, with the
/// source's permission bits less setuid and setgid.
fn copy_file(src: &Path, dest: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut from = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(src)?;
    let meta = from.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: not a regular file", src.display()),
        ));
    }
    let mut to = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dest)?;
    std::io::copy(&mut from, &mut to)?;
    to.set_permissions(fs::Permissions::from_mode(kept_mode(meta.mode())))
}

fn copy_tree(
    src: &Path,
    dest: &Path,
    rel: &str,
    whiteouts: &mut Vec<String>,
) -> std::io::Result<()> {
    let meta = fs::symlink_metadata(src)?;
    let t = meta.file_type();
    if t.is_dir() {
        fs::create_dir_all(dest)?;
        for e in fs::read_dir(src)? {
            let e = e?;
            let name = e.file_name();
            let child = format!("{rel}/{}", name.to_string_lossy());
            copy_tree(&e.path(), &dest.join(&name), &child, whiteouts)?;
        }
        fs::set_permissions(dest, fs::Permissions::from_mode(kept_mode(meta.mode())))?;
    } else if t.is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(src)?, dest)?;
    } else if t.is_file() {
        copy_file(src, dest)?;
    } else if is_whiteout(&meta) && mknod(dest, SFlag::S_IFCHR, Mode::empty(), 0).is_err() {
        whiteouts.push(rel.to_owned());
    }
    Ok(())
}

/// One line of the stage table.
pub(crate) fn stage_line(s: &StageReport) -> String {
    let name = match &s.interrupt {
        Some(t) => format!("interrupt {t}"),
        None => s.stage.clone(),
    };
    if s.result == "not-run" {
        return format!("{name:<22} not run (an earlier stage failed)");
    }
    let plural = if s.steps_ran == 1 { "" } else { "s" };
    let (what, ran, skipped) = if s.interrupt.is_some() {
        ("operation", "would run", "not")
    } else {
        ("step", "ran", "skipped")
    };
    let counts = format!(
        "{} {what}{plural} {ran}, {} {skipped}",
        s.steps_ran, s.steps_skipped
    );
    let code = s
        .exit_code
        .map_or_else(|| "-".to_owned(), |c| format!("exit {c}"));
    format!(
        "{name:<22} {:<9} {code:<7} {counts}  {} ms",
        s.result, s.duration_ms
    )
}

/// The text report.
pub(crate) fn render(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "try: {} {} in a copy-on-write sandbox of {} (network: {})",
        r.package, r.version, r.lower, r.network
    );
    let _ = writeln!(s, "stages:");
    for st in &r.stages {
        let _ = writeln!(s, "  {}", stage_line(st));
        if let Some(e) = &st.error {
            let _ = writeln!(s, "      error: {e}");
        }
        if let Some(t) = &st.output_tail {
            let _ = writeln!(s, "      last output:");
            for l in t.lines() {
                let _ = writeln!(s, "        {l}");
            }
        }
    }
    for i in &r.interrupts {
        for op in &i.operations {
            let what = op.what();
            if op.command.is_some() && op.action == "run" {
                let _ = writeln!(s, "  interrupt {}: {what}", op.operation);
            } else {
                let _ = writeln!(s, "  interrupt {}: {what} ({})", op.operation, op.reason);
            }
        }
        if let Some(rb) = &i.simulated_reboot {
            let _ = writeln!(
                s,
                "  interrupt {}: reboot simulated, boot ID {} -> {}",
                i.r#type, rb.boot_id_before, rb.boot_id_after
            );
        }
    }
    let count = |k: &str| r.changes.iter().filter(|c| c.kind == k).count();
    let _ = writeln!(
        s,
        "changes to the host: {} added, {} modified, {} deleted",
        count("added"),
        count("modified"),
        count("deleted")
    );
    for c in &r.changes {
        let detail = match (c.kind.as_str(), c.r#type.as_str()) {
            (_, "symlink") => format!("symlink -> {}", c.target.as_deref().unwrap_or("?")),
            ("deleted", t) => t.to_owned(),
            ("modified", t) if c.content_changed == Some(false) => format!(
                "{t}, mode {} -> {}",
                c.mode_before.as_deref().unwrap_or("?"),
                c.mode_after.as_deref().unwrap_or("?")
            ),
            (_, "file") => format!(
                "file {}, {} bytes",
                c.mode_after.as_deref().unwrap_or("?"),
                c.size.unwrap_or(0)
            ),
            (_, t) => format!("{t} {}", c.mode_after.as_deref().unwrap_or("")),
        };
        let _ = writeln!(s, "  {:<9} {}  ({})", c.kind, c.path, detail.trim_end());
        if let Some(d) = &c.diff {
            for l in d.lines() {
                let _ = writeln!(s, "      {l}");
            }
        }
    }
    let total: usize = r.agent_state.files.values().sum();
    let parts: Vec<String> = r
        .agent_state
        .files
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let _ = writeln!(
        s,
        "agent's own files (under {STATE_DIR} and {LOG_DIR}): {total} ({})",
        parts.join(", ")
    );
    if let Some(k) = &r.kept {
        let _ = writeln!(s, "kept: {k} (upper/, report.json, the stages' output)");
    }
    if let Some(e) = &r.error {
        let _ = writeln!(s, "error: {e}");
    }
    if r.isolation.verified {
        let _ = writeln!(
            s,
            "result: {}; the lower root was not written (verified: {})",
            r.result, r.isolation.detail
        );
    } else {
        let _ = writeln!(
            s,
            "result: {}; not verified that the lower root was not written: {}",
            r.result, r.isolation.detail
        );
    }
    s
}
