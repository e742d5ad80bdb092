//! `agent validate COPY_DIR`: lint a package directory offline (SPEC §1.4, §7).

use std::process::ExitCode;

use agent_core::package::config::{self as package, Finding, PackageConfig, Severity};
use serde::Serialize;

use crate::cli::Validate;
use crate::output;

#[derive(Debug, Serialize)]
struct Report {
    config: String,
    valid: bool,
    package: Option<String>,
    version: Option<String>,
    errors: usize,
    warnings: usize,
    findings: Vec<Finding>,
}

pub fn run(args: &Validate) -> ExitCode {
    let config = args.copy_dir.join("config.json");
    let bytes = package::read_input_file(&config);
    let findings = match &bytes {
        Ok(bytes) => package::lint(
            bytes,
            &args.copy_dir.join("skyhook_dir"),
            &args.copy_dir.join("configmaps"),
        ),
        Err(e) => vec![Finding {
            severity: Severity::Error,
            path: String::new(),
            message: format!("reading {}: {e}", config.display()),
        }],
    };
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let (package, version) = bytes
        .ok()
        .filter(|_| errors == 0)
        .and_then(|bytes| PackageConfig::from_slice(&bytes).ok())
        .map(|(c, _)| (c.package_name, c.package_version))
        .unzip();
    let report = Report {
        config: config.display().to_string(),
        valid: errors == 0,
        errors,
        warnings: findings.len() - errors,
        package,
        version,
        findings,
    };
    output::print_result(args.format, &report, || render(&report));
    ExitCode::from(u8::from(!report.valid))
}

fn render(r: &Report) -> String {
    let mut s = String::new();
    for f in &r.findings {
        let level = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        push_line!(s, "{level}: {f}");
    }
    match (&r.package, &r.version) {
        (Some(name), Some(version)) if r.valid => {
            push_line!(
                s,
                "{}: valid: package {name} {version}, {}",
                r.config,
                output::plural(r.warnings, "warning")
            );
        }
        _ => {
            push_line!(
                s,
                "{}: invalid: {}, {}",
                r.config,
                output::plural(r.errors, "error"),
                output::plural(r.warnings, "warning")
            );
        }
    }
    s
}
