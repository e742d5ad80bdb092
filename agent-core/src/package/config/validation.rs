//! The rules of SPEC §7 over the parsed document, each finding named by its JSON path: one
//! validator for the run ([`PackageConfig::load`]) and for `agent validate` ([`lint`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;

use serde_json::{Map, Value};

use super::stream::{self, ModeChecks, Modes, Streamed, field, index, quote, step_path_field};
use super::{
    ConfigError, Finding, NO_DEFINED_STEPS, PackageConfig, SCHEMA_VERSION, STEP_NAME_PATTERN,
    Severity, expected_check_path, is_semver,
};
use crate::host::errors::Chain;
use crate::host::identity::is_single_component;
use crate::host::preflight;
use crate::package::step::{Mode, Step};

/// Unknown fields are tolerated at run time (a newer operator may add some) but rejected by
/// `agent validate`, which exists to catch typos.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strictness {
    Run,
    Lint,
}

/// Which directories the file rules look in; `None` skips the rule.
#[derive(Debug, Default)]
pub(super) struct Files<'a> {
    pub(super) skyhook_dir: Option<&'a Path>,
    pub(super) configmaps_dir: Option<&'a Path>,
}

pub(super) const TOP_LEVEL_FIELDS: [&str; 5] = [
    "schema_version",
    "package_name",
    "package_version",
    "expected_config_files",
    "modes",
];
pub(super) const STEP_FIELDS: [&str; 8] = [
    "name",
    "path",
    "arguments",
    "returncodes",
    "on_host",
    "env",
    "idempotence",
    "upgrade_step",
];

/// What the document pass hands to the file pass and to the model builder.
#[derive(Debug, Default)]
pub(super) struct Parsed {
    config: Option<PackageConfig>,
    /// `(mode, index, step path)` of every step whose `path` is well-formed.
    step_files: Vec<(Mode, usize, String)>,
    /// `(json path, entry)` of every string in `expected_config_files`.
    expected_files: Vec<(String, String)>,
}

#[derive(Clone)]
pub(super) struct Validator {
    strictness: Strictness,
    /// The only mode whose steps the config keeps (every mode's when `None`); every step is
    /// checked all the same.
    keep: Option<Mode>,
    pub(super) findings: Vec<Finding>,
}

impl Validator {
    pub(super) fn new(strictness: Strictness) -> Self {
        Self {
            strictness,
            keep: None,
            findings: Vec::new(),
        }
    }

    /// Keep only the steps of `mode` (`None`: of every mode).
    pub(super) fn keeping(mut self, mode: Option<Mode>) -> Self {
        self.keep = mode;
        self
    }

    /// Validate and return the config with its warnings, or the first error found.
    pub(super) fn run(
        mut self,
        bytes: &[u8],
        files: &Files<'_>,
    ) -> Result<(PackageConfig, Vec<Finding>), ConfigError> {
        let config = self.check(bytes, files);
        self.result(config)
    }

    /// [`Validator::run`] on the document `reader` gives, parsed as it is read, so that the
    /// file is never held whole. `None` when it is not a JSON document as read (not UTF-8,
    /// a syntax error, a read error): the caller then checks the file's bytes with
    /// [`Validator::run`], whose finding names the problem exactly as it always has.
    pub(super) fn run_reader(
        mut self,
        reader: impl io::Read,
        files: &Files<'_>,
    ) -> Option<Result<(PackageConfig, Vec<Finding>), ConfigError>> {
        let mut de = serde_json::Deserializer::from_reader(reader);
        let doc = stream::parse(&mut de, &Validator::new(self.strictness), self.keep).ok()?;
        let parsed = self.check_parsed(doc);
        let config = self.check_files(parsed, files);
        Some(self.result(config))
    }

    fn result(
        self,
        config: Option<PackageConfig>,
    ) -> Result<(PackageConfig, Vec<Finding>), ConfigError> {
        if let Some(first) = self.findings.iter().find(|f| f.severity == Severity::Error) {
            return Err(ConfigError::Invalid(first.clone()));
        }
        // Every rule that leaves a part of the config unbuilt also reports an error, so this
        // is unreachable; it is handled rather than unwrapped because the agent runs as root.
        match config {
            Some(config) => Ok((config, self.findings)),
            None => Err(ConfigError::Invalid(Finding {
                severity: Severity::Error,
                path: String::new(),
                message: "config is invalid".to_owned(),
            })),
        }
    }

    /// Every rule, in document order; the config is built only if no rule failed.
    pub(super) fn check(&mut self, bytes: &[u8], files: &Files<'_>) -> Option<PackageConfig> {
        let parsed = self.check_document(bytes);
        self.check_files(parsed, files)
    }

    /// The file rules over what the document pass found, then the config if nothing failed.
    fn check_files(&mut self, parsed: Option<Parsed>, files: &Files<'_>) -> Option<PackageConfig> {
        let parsed = parsed?;
        if let Some(dir) = files.skyhook_dir {
            for (mode, i, step_path) in &parsed.step_files {
                self.check_step_file(&step_path_field(*mode, *i), step_path, dir);
            }
        }
        if let Some(dir) = files.configmaps_dir {
            for (json_path, entry) in &parsed.expected_files {
                if let Err(e) = preflight::check_config_file(dir, entry) {
                    self.error(json_path, Chain(&e).to_string());
                }
            }
        }
        parsed.config.filter(|_| !self.has_errors())
    }

    pub(super) fn error(&mut self, path: &str, message: impl Into<String>) {
        self.push(Severity::Error, path, message.into());
    }

    fn warning(&mut self, path: &str, message: impl Into<String>) {
        self.push(Severity::Warning, path, message.into());
    }

    /// An error under `agent validate`, a warning at run time.
    fn lint_error(&mut self, path: &str, message: impl Into<String>) {
        let severity = match self.strictness {
            Strictness::Run => Severity::Warning,
            Strictness::Lint => Severity::Error,
        };
        self.push(severity, path, message.into());
    }

    fn push(&mut self, severity: Severity, path: &str, message: String) {
        self.findings.push(Finding {
            severity,
            path: path.to_owned(),
            message,
        });
    }

    fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }

    fn check_document(&mut self, bytes: &[u8]) -> Option<Parsed> {
        let text = std::str::from_utf8(bytes)
            .inspect_err(|e| self.error("", format!("config is not valid UTF-8: {e}")))
            .ok()?;
        // serde_json refuses nesting deeper than 128 levels, so hostile input cannot overflow
        // the stack here or in the recursive drop of a value.
        let mut de = serde_json::Deserializer::from_str(text);
        let doc = stream::parse(&mut de, &Validator::new(self.strictness), self.keep)
            .inspect_err(|e| self.error("", format!("config is not valid JSON: {e}")))
            .ok()?;
        self.check_parsed(doc)
    }

    /// The document rules over a parsed document.
    fn check_parsed(&mut self, doc: Streamed<stream::Document>) -> Option<Parsed> {
        let doc = match doc {
            Streamed::Parsed(doc) => doc,
            Streamed::Other(other) => {
                self.error(
                    "",
                    format!("expected a JSON object, found {}", describe(&other)),
                );
                return None;
            }
        };
        let top = &doc.top;

        let schema_version = self.required(top, "", "schema_version", Self::string);
        if let Some(version) = schema_version.filter(|&v| v != SCHEMA_VERSION) {
            // The other rules are those of v1; applying them to another schema would only add
            // noise to the one finding that matters.
            self.error(
                "schema_version",
                format!("unknown skyhook-agent schema version: {version}"),
            );
            return None;
        }

        let package_name = self
            .required(top, "", "package_name", Self::string)
            .filter(|name| {
                self.rule(is_single_component(name), "package_name", || {
                    format!("{} must be a single path component", quote(name))
                })
            });

        let package_version = self
            .required(top, "", "package_version", Self::string)
            .filter(|version| {
                self.rule(is_semver(version), "package_version", || {
                    format!("{} is not a valid semantic version", quote(version))
                })
            });

        let mut parsed = Parsed::default();
        let expected_config_files =
            self.required(top, "", "expected_config_files", Self::string_array);
        if let Some(entries) = &expected_config_files {
            parsed.expected_files = entries
                .iter()
                .enumerate()
                .map(|(i, entry)| (index("expected_config_files", i), entry.clone()))
                .collect();
        }

        let modes = match doc.modes {
            None => {
                self.missing("", "modes");
                None
            }
            Some(Streamed::Other(other)) => {
                self.expected("an object", &other, "modes");
                None
            }
            Some(Streamed::Parsed(modes)) => self.modes(modes, &mut parsed),
        };

        // `root_dir` is read by the legacy agent's packaging tooling, never by the agent.
        if let Some(root_dir) = top.get("root_dir").filter(|v| !v.is_string()) {
            self.lint_error("root_dir", expected("a string", root_dir));
        }
        for key in sorted_keys(top) {
            if !TOP_LEVEL_FIELDS.contains(&key) && key != "root_dir" {
                self.lint_error(&field("", key), "unknown field");
            }
        }

        // Built only if every field validated.
        parsed.config = (|| {
            Some(PackageConfig {
                schema_version: schema_version?.to_owned(),
                package_name: package_name?.to_owned(),
                package_version: package_version?.to_owned(),
                expected_config_files: expected_config_files?,
                modes: modes?,
            })
        })();
        Some(parsed)
    }

    /// `modes` and the whole-document rules over it. `None` if any step did not validate.
    fn modes(&mut self, keys: Modes, parsed: &mut Parsed) -> Option<BTreeMap<Mode, Vec<Step>>> {
        let mut complete = true;
        let mut modes = BTreeMap::new();
        // Per mode: the number of step entries (valid or not) and the well-formed step paths.
        let mut counts: BTreeMap<Mode, usize> = BTreeMap::new();
        let mut paths: BTreeMap<Mode, Vec<(usize, String)>> = BTreeMap::new();
        for (_, key) in keys {
            self.findings.extend(key.findings);
            let (Some(mode), Some(steps)) = (key.mode, key.steps) else {
                complete = false;
                continue;
            };
            counts.insert(mode, steps.count);
            if !steps.paths.is_empty() {
                paths.insert(mode, steps.paths);
            }
            complete &= steps.complete;
            modes.insert(mode, steps.steps);
        }

        self.document_rules(&counts, &paths);
        for (mode, mode_paths) in paths {
            parsed
                .step_files
                .extend(mode_paths.into_iter().map(|(i, path)| (mode, i, path)));
        }
        complete.then_some(modes)
    }

    /// SPEC §7 rules over the whole set of modes.
    fn document_rules(
        &mut self,
        counts: &BTreeMap<Mode, usize>,
        paths: &BTreeMap<Mode, Vec<(usize, String)>>,
    ) {
        let has_steps = |mode: Mode| counts.get(&mode).is_some_and(|&n| n > 0);
        let non_check: Vec<Mode> = Mode::ALL.into_iter().filter(|m| !m.is_check()).collect();
        if !Mode::ALL.into_iter().any(has_steps) {
            self.error("", NO_DEFINED_STEPS);
            return;
        }
        if !non_check.iter().any(|&m| has_steps(m)) {
            let names: Vec<&str> = non_check.iter().map(|m| m.as_str()).collect();
            self.error(
                "modes",
                format!(
                    "only check modes have steps; at least one of {} must have steps",
                    names.join(", ")
                ),
            );
        }
        for &mode in &non_check {
            let twin = mode
                .check_twin()
                .expect("every non-check mode has a check twin");
            if !has_steps(mode) {
                continue;
            }
            if !has_steps(twin) {
                self.error(
                    &field("modes", twin.as_str()),
                    format!("must have steps because modes.{mode} has steps"),
                );
                continue;
            }
            // Warning only (SPEC §7): a check step proves its step's work is done.
            let check_paths: BTreeSet<&str> = paths
                .get(&twin)
                .into_iter()
                .flatten()
                .map(|(_, p)| p.as_str())
                .collect();
            for (i, step_path) in paths.get(&mode).into_iter().flatten() {
                let expected = expected_check_path(step_path);
                if !check_paths.contains(expected.as_str()) {
                    self.warning(
                        &step_path_field(mode, *i),
                        format!(
                            "no check step {} for {} in modes.{twin}",
                            quote(&expected),
                            quote(step_path)
                        ),
                    );
                }
            }
        }
    }

    /// One step object. Returns the step if every field validated, and its `path` if that
    /// field alone is well-formed (so file checks still run on an otherwise broken step).
    pub(super) fn step(
        &mut self,
        value: &Value,
        path: &str,
        mode: Mode,
    ) -> (Option<Step>, Option<String>) {
        let Some(object) = self.object(value, path) else {
            return (None, None);
        };

        let name = self
            .required(object, path, "name", Self::string)
            // The finding's path is built only for a name that breaks the rule.
            .filter(|name| {
                is_step_name(name)
                    || self.rule(false, &field(path, "name"), || {
                        format!("{} must match {STEP_NAME_PATTERN}", quote(name))
                    })
            });

        let step_path = self
            .required(object, path, "path", Self::string)
            .filter(|p| {
                if let Some(problem) = step_path_problem(p) {
                    self.error(&field(path, "path"), problem);
                    return false;
                }
                // `check_results` holds one `<PATH> <True|False>` line per step, and headers and
                // logs name the path: a newline (or any control character) breaks them.
                if p.chars().any(char::is_control) {
                    self.warning(
                        &field(path, "path"),
                        format!(
                            "{} contains a control character, which breaks the lines of \
                         check_results, execution headers and logs",
                            quote(p)
                        ),
                    );
                }
                true
            });

        let arguments = self
            .required(object, path, "arguments", Self::string_array)
            .filter(|args| {
                let mut ok = true;
                for (i, arg) in args.iter().enumerate() {
                    if arg.contains('\0') {
                        self.error(
                            &index(&field(path, "arguments"), i),
                            format!("{} must not contain NUL", quote(arg)),
                        );
                        ok = false;
                    }
                }
                ok
            });

        let returncodes = self.required(object, path, "returncodes", Self::returncodes);
        let on_host = self.required(object, path, "on_host", Self::bool);
        let idempotence = self.required(object, path, "idempotence", Self::bool);
        let upgrade_step = self.required(object, path, "upgrade_step", Self::bool);
        let env = match object.get("env") {
            None | Some(Value::Null) => Some(BTreeMap::new()),
            Some(v) => self.env(v, &field(path, "env")),
        };

        // SPEC §7: upgrade steps receive the versions as their only arguments (§8.5).
        let mut upgrade_ok = true;
        if upgrade_step == Some(true) {
            upgrade_ok &= self.rule(mode.is_upgrade(), &field(path, "upgrade_step"), || {
                format!(
                    "may only be true in modes.upgrade and modes.upgrade-check, not in modes.{mode}"
                )
            });
            let no_arguments = arguments.as_ref().is_none_or(Vec::is_empty);
            upgrade_ok &= self.rule(no_arguments, &field(path, "arguments"), || {
                "must be empty for an upgrade step (the agent passes the previous and current versions)"
            });
        }

        for key in sorted_keys(object) {
            if !STEP_FIELDS.contains(&key) {
                self.lint_error(&field(path, key), "unknown field");
            }
        }

        // Built only if every field and the upgrade rules validated.
        let step = (|| {
            upgrade_ok.then_some(())?;
            Some(Step {
                name: name?.to_owned(),
                path: step_path?.to_owned(),
                arguments: arguments?,
                returncodes: returncodes?,
                on_host: on_host?,
                env: env?,
                idempotence_disabled: idempotence?,
                upgrade_step: upgrade_step?,
            })
        })();
        (step, step_path.map(str::to_owned))
    }

    fn returncodes(&mut self, value: &Value, path: &str) -> Option<Vec<i64>> {
        let items = self.array(value, path)?;
        if items.is_empty() {
            self.error(path, "must contain at least one code");
            return None;
        }
        let mut codes = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::Number(n) if n.as_i64().is_some() => codes.extend(n.as_i64()),
                // Integral but beyond i64: no process exits with it, so it can never match.
                Value::Number(n) if n.is_u64() => {
                    self.error(&index(path, i), format!("{n} is out of range"));
                    ok = false;
                }
                other => {
                    self.error(&index(path, i), expected("an integer", other));
                    ok = false;
                }
            }
        }
        ok.then_some(codes)
    }

    fn env(&mut self, value: &Value, path: &str) -> Option<BTreeMap<String, String>> {
        let object = self.object(value, path)?;
        let mut env = BTreeMap::new();
        let mut ok = true;
        for key in sorted_keys(object) {
            let var_path = field(path, key);
            // execve(2) cannot carry these; reject them here rather than fail mid-stage.
            let valid = !(key.is_empty() || key.contains('=') || key.contains('\0'));
            ok &= self.rule(valid, &var_path, || {
                format!("{} is not a valid environment variable name", quote(key))
            });
            match self.string(&object[key], &var_path) {
                Some(v) if v.contains('\0') => {
                    self.error(&var_path, format!("{} must not contain NUL", quote(v)));
                    ok = false;
                }
                Some(v) => {
                    env.insert(key.to_owned(), v.to_owned());
                }
                None => ok = false,
            }
        }
        ok.then_some(env)
    }

    fn check_step_file(&mut self, json_path: &str, step_path: &str, skyhook_dir: &Path) {
        let full = skyhook_dir.join(step_path);
        let dir = skyhook_dir.display();
        let q = quote(step_path);
        match std::fs::metadata(&full) {
            Ok(meta) if meta.is_file() => {}
            Ok(_) => self.error(
                json_path,
                format!("step file {q} in {dir} is not a regular file"),
            ),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                self.error(json_path, format!("step file {q} does not exist in {dir}"));
            }
            Err(e) => self.error(
                json_path,
                format!("step file {q} in {dir} cannot be inspected: {e}"),
            ),
        }
    }

    /// Whether rule `ok` holds; a finding at `path` when it does not.
    fn rule<M: Into<String>>(&mut self, ok: bool, path: &str, message: impl FnOnce() -> M) -> bool {
        if !ok {
            self.error(path, message());
        }
        ok
    }

    // Typed access. Each reports a finding naming the path, the expected type and what was found.

    /// `key` of `object` (a finding when it is missing), read by `read` at its JSON path.
    fn required<'v, T>(
        &mut self,
        object: &'v Map<String, Value>,
        parent: &str,
        key: &str,
        read: impl FnOnce(&mut Self, &'v Value, &str) -> Option<T>,
    ) -> Option<T> {
        let Some(value) = object.get(key) else {
            self.missing(parent, key);
            return None;
        };
        read(self, value, &field(parent, key))
    }

    fn missing(&mut self, parent: &str, key: &str) {
        self.error(&field(parent, key), "required field is missing");
    }

    /// `read`, the value at `path` as `what` (`a string`, ...); a finding when it is not.
    fn typed<T>(&mut self, read: Option<T>, what: &str, value: &Value, path: &str) -> Option<T> {
        if read.is_none() {
            self.expected(what, value, path);
        }
        read
    }

    fn expected(&mut self, what: &str, value: &Value, path: &str) {
        self.error(path, expected(what, value));
    }

    fn string<'v>(&mut self, value: &'v Value, path: &str) -> Option<&'v str> {
        self.typed(value.as_str(), "a string", value, path)
    }

    fn bool(&mut self, value: &Value, path: &str) -> Option<bool> {
        self.typed(value.as_bool(), "a boolean", value, path)
    }

    fn array<'v>(&mut self, value: &'v Value, path: &str) -> Option<&'v Vec<Value>> {
        self.typed(value.as_array(), "an array", value, path)
    }

    fn object<'v>(&mut self, value: &'v Value, path: &str) -> Option<&'v Map<String, Value>> {
        self.typed(value.as_object(), "an object", value, path)
    }

    fn string_array(&mut self, value: &Value, path: &str) -> Option<Vec<String>> {
        let items = self.array(value, path)?;
        let mut strings = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match self.string(item, &index(path, i)) {
                Some(s) => strings.push(s.to_owned()),
                None => ok = false,
            }
        }
        ok.then_some(strings)
    }
}

/// `^[a-zA-Z0-9_\-.]+$`
pub(super) fn is_step_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Why a step `path` cannot be used under `skyhook_dir`, if it cannot.
pub(super) fn step_path_problem(p: &str) -> Option<String> {
    let q = quote(p);
    if p.is_empty() {
        Some("must not be empty".to_owned())
    } else if p.contains('\0') {
        Some(format!("{q} must not contain NUL"))
    } else if p.starts_with('/') {
        Some(format!("{q} must be a relative path"))
    } else if p.split('/').any(|c| c == "..") {
        Some(format!("{q} must not contain a \"..\" component"))
    } else {
        None
    }
}

/// `expected <what>, found <value>`.
fn expected(what: &str, value: &Value) -> String {
    format!("expected {what}, found {}", describe(value))
}

/// A value as findings show it: its JSON type, and the value itself when short.
pub(super) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {}", quote(s)),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

pub(super) fn sorted_keys(object: &Map<String, Value>) -> Vec<&str> {
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys
}

/// A path split into text and digit runs so that `modes.apply[10]` sorts after
/// `modes.apply[9]`. Digit runs compare by length first (leading zeros stripped), then text.
pub(super) fn path_sort_key(path: &str) -> Vec<(bool, usize, String)> {
    let mut key = Vec::new();
    let mut rest = path;
    while let Some(first) = rest.chars().next() {
        let digits = first.is_ascii_digit();
        let end = rest
            .find(|c: char| c.is_ascii_digit() != digits)
            .unwrap_or(rest.len());
        let (run, tail) = rest.split_at(end);
        if digits {
            let trimmed = run.trim_start_matches('0');
            key.push((false, trimmed.len(), trimmed.to_owned()));
        } else {
            key.push((true, 0, run.to_owned()));
        }
        rest = tail;
    }
    key
}

impl ModeChecks for Validator {
    fn unknown_mode(&mut self, path: &str, key: &str) {
        let known: Vec<&str> = Mode::ALL.iter().map(|m| m.as_str()).collect();
        self.error(
            path,
            format!(
                "unknown stage mode {} (expected one of {})",
                quote(key),
                known.join(", ")
            ),
        );
    }

    fn not_an_array(&mut self, value: &Value, path: &str) {
        self.expected("an array", value, path);
    }

    fn step(&mut self, item: &Value, path: &str, mode: Mode) -> (Option<Step>, Option<String>) {
        Validator::step(self, item, path, mode)
    }

    fn into_findings(self) -> Vec<Finding> {
        self.findings
    }
}
