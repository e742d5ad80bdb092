//! Package directories: config.json, step scripts, configmaps and root_dir.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use super::{legacy_marker_name, native_marker_name};

/// The default step script (transcript 01's, plus a line in the run-log and `FAIL_STEPS`).
///
/// Tokens replaced at install time: `@PATH@` (the step's configured path), `@RAN_LOG@` and
/// `@TMP@` (`/var/tmp/...` for `on_host: true`, `<ROOT>/var/tmp/...` otherwise), `@ROOT@`.
pub const DEFAULT_SCRIPT: &str = r#"#!/bin/sh
n=$(basename "$0")
echo "[$n] args($#): $*"
echo "[$n] pwd=$(pwd) STEP_ROOT=$STEP_ROOT SKYHOOK_DIR=$SKYHOOK_DIR X=${X:-}"
if [ -n "${CURRENT_VERSION:-}${PREVIOUS_VERSION:-}" ]; then echo "[$n] CURRENT_VERSION=${CURRENT_VERSION:-} PREVIOUS_VERSION=${PREVIOUS_VERSION:-}"; fi
echo "[$n] to stderr" >&2
echo "@PATH@ $*" >> "@RAN_LOG@"
case " ${FAIL_STEPS:-} " in *" @PATH@ "*) exit "${FAIL_RC:-3}";; esac
exit 0
"#;

/// One step of a package config.
#[derive(Clone, Debug)]
#[allow(
    clippy::struct_excessive_bools,
    clippy::struct_field_names,
    reason = "mirrors the config.json step object"
)]
pub struct Step {
    pub name: String,
    pub path: String,
    pub arguments: Vec<String>,
    pub returncodes: Vec<i64>,
    pub on_host: bool,
    pub env: Vec<(String, String)>,
    /// `true` = Idempotence.Disabled (always runs).
    pub idempotence: bool,
    pub upgrade_step: bool,
    script: Option<String>,
    file_mode: u32,
}

impl Step {
    /// A step running `path` with no arguments, returncodes `[0]`, on host, Auto idempotence.
    pub fn new(path: &str) -> Self {
        Self {
            name: path.replace('/', "-"),
            path: path.to_owned(),
            arguments: Vec::new(),
            returncodes: vec![0],
            on_host: true,
            env: Vec::new(),
            idempotence: false,
            upgrade_step: false,
            script: None,
            file_mode: 0o644,
        }
    }

    #[must_use]
    pub fn name(mut self, name: &str) -> Self {
        name.clone_into(&mut self.name);
        self
    }

    #[must_use]
    pub fn args(mut self, args: &[&str]) -> Self {
        self.arguments = args.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    #[must_use]
    pub fn returncodes(mut self, rcs: &[i64]) -> Self {
        self.returncodes = rcs.to_vec();
        self
    }

    #[must_use]
    pub fn on_host(mut self, on_host: bool) -> Self {
        self.on_host = on_host;
        self
    }

    #[must_use]
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.to_owned(), v.to_owned()));
        self
    }

    /// Idempotence Disabled (`"idempotence": true`): the step always runs.
    #[must_use]
    pub fn always_run(mut self) -> Self {
        self.idempotence = true;
        self
    }

    #[must_use]
    pub fn upgrade_step(mut self) -> Self {
        self.upgrade_step = true;
        self
    }

    /// Use `body` (tokens allowed) instead of the default script.
    #[must_use]
    pub fn script(mut self, body: &str) -> Self {
        self.script = Some(body.to_owned());
        self
    }

    /// Mode of the step file (default 0644: the agent must add the execute bits).
    #[must_use]
    pub fn file_mode(mut self, mode: u32) -> Self {
        self.file_mode = mode;
        self
    }

    /// The config.json object.
    pub fn to_json(&self) -> Value {
        let env: serde_json::Map<String, Value> = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        json!({
            "name": self.name,
            "path": self.path,
            "arguments": self.arguments,
            "returncodes": self.returncodes,
            "on_host": self.on_host,
            "env": env,
            "idempotence": self.idempotence,
            "upgrade_step": self.upgrade_step,
        })
    }

    /// The legacy (Python) marker name, relative to the flag dir.
    pub fn legacy_marker(&self) -> String {
        legacy_marker_name(&self.path, &self.arguments, &self.returncodes)
    }

    /// The native (Go) marker name, relative to the flag dir.
    pub fn native_marker(&self) -> String {
        native_marker_name(
            &self.path,
            &self.arguments,
            &self.returncodes,
            &self.env,
            self.on_host,
        )
    }
}

/// A package directory: config.json, step scripts, configmaps, root_dir.
#[derive(Clone, Debug)]
pub struct Package {
    pub name: String,
    pub version: String,
    modes: Vec<(String, Vec<Step>)>,
    expected_config_files: Vec<String>,
    configmaps: Vec<(String, Vec<u8>)>,
    root_files: Vec<(String, Vec<u8>, u32)>,
    scripts: Vec<(String, String)>,
    no_scripts: Vec<String>,
    raw_config: Option<Vec<u8>>,
}

impl Default for Package {
    fn default() -> Self {
        Self::new()
    }
}

impl Package {
    /// Package `pkg` version `1.0.0` with no modes.
    pub fn new() -> Self {
        Self::named("pkg", "1.0.0")
    }

    /// A package with another config.json name/version.
    pub fn named(name: &str, version: &str) -> Self {
        Self {
            name: name.to_owned(),
            version: version.to_owned(),
            modes: Vec::new(),
            expected_config_files: Vec::new(),
            configmaps: Vec::new(),
            root_files: Vec::new(),
            scripts: Vec::new(),
            no_scripts: Vec::new(),
            raw_config: None,
        }
    }

    /// `apply: [s1.sh]`, `apply-check: [s1_check.sh]`.
    pub fn simple() -> Self {
        Self::new()
            .step("apply", Step::new("s1.sh"))
            .step("apply-check", Step::new("s1_check.sh"))
    }

    /// Transcript 01's package: every mode, `s1.sh ['a', 'env:FOO']` with env X, `s2.sh` always
    /// running, upgrade steps with `upgrade_step`.
    pub fn standard() -> Self {
        Self::new()
            .step(
                "apply",
                Step::new("s1.sh")
                    .name("s1")
                    .args(&["a", "env:FOO"])
                    .env("X", "from-step-env"),
            )
            .step("apply", Step::new("s2.sh").name("s2").always_run())
            .step("apply-check", Step::new("s1_check.sh").name("s1c"))
            .step("apply-check", Step::new("s2_check.sh").name("s2c"))
            .step("config", Step::new("cfg.sh").name("cfg").args(&["c"]))
            .step("config-check", Step::new("cfg_check.sh").name("cfgc"))
            .step("upgrade", Step::new("up.sh").name("up").args(&["u1"]))
            .step("upgrade", Step::new("up2.sh").name("up2").upgrade_step())
            .step(
                "upgrade-check",
                Step::new("up_check.sh").name("upc").upgrade_step(),
            )
            .step("upgrade-check", Step::new("up2_check.sh").name("up2c"))
            .step("uninstall", Step::new("un.sh").name("un"))
            .step("uninstall-check", Step::new("un_check.sh").name("unc"))
            .step("post-interrupt", Step::new("pi.sh").name("pi"))
            .step("post-interrupt-check", Step::new("pi_check.sh").name("pic"))
    }

    /// Steps that run off host (no chroot): `apply` in `apply`, `checks` in `apply-check`.
    pub fn off_host(apply: &[&str], checks: &[&str]) -> Self {
        let pkg = apply.iter().fold(Self::new(), |p, s| {
            p.step("apply", Step::new(s).on_host(false))
        });
        checks.iter().fold(pkg, |p, s| {
            p.step("apply-check", Step::new(s).on_host(false))
        })
    }

    /// Append a step to `mode`.
    #[must_use]
    pub fn step(mut self, mode: &str, step: Step) -> Self {
        if let Some((_, steps)) = self.modes.iter_mut().find(|(m, _)| m == mode) {
            steps.push(step);
        } else {
            self.modes.push((mode.to_owned(), vec![step]));
        }
        self
    }

    /// Declare `mode` with an empty step list.
    #[must_use]
    pub fn empty_mode(mut self, mode: &str) -> Self {
        if !self.modes.iter().any(|(m, _)| m == mode) {
            self.modes.push((mode.to_owned(), Vec::new()));
        }
        self
    }

    /// The steps of `mode`.
    pub fn steps(&self, mode: &str) -> &[Step] {
        self.modes
            .iter()
            .find(|(m, _)| m == mode)
            .map_or(&[], |(_, s)| s.as_slice())
    }

    /// The step with `path` in any mode.
    pub fn find(&self, path: &str) -> &Step {
        self.modes
            .iter()
            .flat_map(|(_, s)| s)
            .find(|s| s.path == path)
            .unwrap_or_else(|| panic!("no step with path {path}"))
    }

    /// Script body (tokens allowed) for every step with `path`.
    #[must_use]
    pub fn script(mut self, path: &str, body: &str) -> Self {
        self.scripts.push((path.to_owned(), body.to_owned()));
        self
    }

    /// Do not create the file of step `path`.
    #[must_use]
    pub fn without_script(mut self, path: &str) -> Self {
        self.no_scripts.push(path.to_owned());
        self
    }

    /// A file in `configmaps/`.
    #[must_use]
    pub fn configmap(mut self, name: &str, contents: &[u8]) -> Self {
        self.configmaps.push((name.to_owned(), contents.to_vec()));
        self
    }

    /// An `expected_config_files` entry.
    #[must_use]
    pub fn expect_config_file(mut self, name: &str) -> Self {
        self.expected_config_files.push(name.to_owned());
        self
    }

    /// A file in `root_dir/` (overlaid onto ROOT).
    #[must_use]
    pub fn root_file(mut self, rel: &str, contents: &[u8], mode: u32) -> Self {
        self.root_files
            .push((rel.to_owned(), contents.to_vec(), mode));
        self
    }

    /// The config.json this package would write.
    pub fn config_json(&self) -> Value {
        let modes: serde_json::Map<String, Value> = self
            .modes
            .iter()
            .map(|(m, steps)| {
                (
                    m.clone(),
                    Value::Array(steps.iter().map(Step::to_json).collect()),
                )
            })
            .collect();
        json!({
            "schema_version": "v1",
            "package_name": self.name,
            "package_version": self.version,
            "expected_config_files": self.expected_config_files,
            "modes": modes,
        })
    }

    /// Replace config.json by `value`.
    #[must_use]
    pub fn with_config(mut self, value: &Value) -> Self {
        self.raw_config = Some(serde_json::to_vec_pretty(value).unwrap());
        self
    }

    /// Replace config.json by raw bytes.
    #[must_use]
    pub fn with_raw_config(mut self, bytes: &[u8]) -> Self {
        self.raw_config = Some(bytes.to_vec());
        self
    }

    /// Write the package into `dir` (created); tokens resolve against host root `root`.
    pub fn write_into(&self, dir: &Path, root: &Path) {
        fs::create_dir_all(dir.join("skyhook_dir")).unwrap();
        fs::create_dir_all(dir.join("configmaps")).unwrap();
        let config = self
            .raw_config
            .clone()
            .unwrap_or_else(|| serde_json::to_vec_pretty(&self.config_json()).unwrap());
        fs::write(dir.join("config.json"), config).unwrap();
        fs::set_permissions(dir.join("config.json"), fs::Permissions::from_mode(0o644)).unwrap();

        let mut written: Vec<String> = Vec::new();
        for step in self.modes.iter().flat_map(|(_, s)| s) {
            if written.contains(&step.path) || self.no_scripts.contains(&step.path) {
                continue;
            }
            written.push(step.path.clone());
            let body = step
                .script
                .clone()
                .or_else(|| {
                    self.scripts
                        .iter()
                        .find(|(p, _)| *p == step.path)
                        .map(|(_, b)| b.clone())
                })
                .unwrap_or_else(|| DEFAULT_SCRIPT.to_owned());
            let tmp = if step.on_host {
                "/var/tmp".to_owned()
            } else {
                format!("{}/var/tmp", root.display())
            };
            let body = body
                .replace("@PATH@", &step.path)
                .replace("@RAN_LOG@", &format!("{tmp}/ran.log"))
                .replace("@TMP@", &tmp)
                .replace("@ROOT@", &root.display().to_string());
            let p = dir.join("skyhook_dir").join(&step.path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, body).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(step.file_mode)).unwrap();
        }
        for (name, contents) in &self.configmaps {
            let p = dir.join("configmaps").join(name);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, contents).unwrap();
        }
        for (rel, contents, mode) in &self.root_files {
            let p = dir.join("root_dir").join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, contents).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(*mode)).unwrap();
        }
    }
}
