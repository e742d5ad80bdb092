//! `agent interrupts list|encode|decode`.

use std::process::ExitCode;

use agent_core::Interrupt;
use agent_core::plugin::codec;
use agent_core::plugin::contract::DecodeError;
use agent_core::plugin::registry::{self, InterruptDescriptor};
use serde::Serialize;

use crate::cli::{Format, Interrupts};
use crate::output::{self, Failure};

/// One kind as listed: its descriptor, and why it is broken (SPEC §9.5), if it is.
#[derive(Debug, Serialize)]
struct Listed<'a> {
    #[serde(flatten)]
    descriptor: &'a InterruptDescriptor,
    #[serde(skip_serializing_if = "Option::is_none")]
    broken: Option<String>,
}

/// `interrupts list --format json`.
#[derive(Serialize)]
struct List<'a> {
    kinds: &'a [Listed<'a>],
}

/// `interrupts encode --format json`.
#[derive(Serialize)]
struct Encoded<'a> {
    data: &'a str,
}

/// `interrupts decode --format json`.
#[derive(Serialize)]
struct Decoded {
    interrupt: serde_json::Value,
}

pub fn run(cmd: &Interrupts) -> ExitCode {
    let (format, result) = match cmd {
        Interrupts::List { format } => return list(*format),
        Interrupts::Encode { json, format } => (*format, encode(json, *format)),
        Interrupts::Decode { data, format } => (*format, decode(data, *format)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => output::fail(format, &["interrupts"], "agent", &e),
    }
}

fn list(format: Format) -> ExitCode {
    let kinds: Vec<Listed<'_>> = registry::kinds()
        .into_iter()
        .map(|descriptor| Listed {
            descriptor,
            broken: codec::broken(descriptor),
        })
        .collect();
    output::print_result(format, &List { kinds: &kinds }, || render_list(&kinds));
    // SPEC §9.5: a broken kind is named, and the listing says the binary has one.
    let mut code = ExitCode::SUCCESS;
    for listed in &kinds {
        if let Some(problem) = &listed.broken {
            let e = DecodeError::BrokenKind {
                type_name: listed.descriptor.type_name,
                module: listed.descriptor.module,
                problem: problem.clone(),
            };
            output::eprint(&format!("agent: {e}\n"));
            code = ExitCode::from(1);
        }
    }
    code
}

fn render_list(kinds: &[Listed<'_>]) -> String {
    let width = kinds
        .iter()
        .map(|k| k.descriptor.type_name.len())
        .max()
        .unwrap_or(0);
    let mut s = String::new();
    for listed in kinds {
        let k = listed.descriptor;
        push_line!(s, "{:width$}  {}", k.type_name, k.summary);
        push_line!(
            s,
            "{:width$}  module: {}  example: {}",
            "",
            k.module,
            k.example
        );
        if let Some(problem) = &listed.broken {
            push_line!(
                s,
                "{:width$}  BROKEN: {problem}; its payloads are refused",
                ""
            );
        }
    }
    s
}

fn encode(json: &str, format: Format) -> Result<(), Failure> {
    let decoded = <dyn Interrupt>::from_json_bytes(json.as_bytes()).map_err(|e| match e {
        DecodeError::TooLarge(_) => Failure::failed(format!("{e}; {ARGV_LIMIT}")),
        e => Failure::failed(e.to_string()),
    })?;
    warn_unknown(&decoded.unknown_field_notes());
    let data = decoded.interrupt.to_base64();
    if data.len() >= MAX_ARG_STRLEN {
        return Err(Failure::failed(format!(
            "INTERRUPT_DATA would be {} bytes: {ARGV_LIMIT}",
            data.len()
        )));
    }
    output::print_result(format, &Encoded { data: &data }, || format!("{data}\n"));
    Ok(())
}

fn decode(data: &str, format: Format) -> Result<(), Failure> {
    let decoded = <dyn Interrupt>::from_base64(data).map_err(|e| Failure::failed(e.to_string()))?;
    warn_unknown(&decoded.unknown_field_notes());
    let canonical = decoded.interrupt.to_json();
    let body = Decoded {
        interrupt: serde_json::from_str(&canonical).expect("canonical JSON parses"),
    };
    output::print_result(format, &body, || format!("{canonical}\n"));
    Ok(())
}

/// Linux caps one argument of `execve(2)` at 32 pages, 128 KiB with its terminating NUL
/// (`MAX_ARG_STRLEN`): INTERRUPT_DATA reaches the agent as one argument.
const MAX_ARG_STRLEN: usize = 32 * 4096;

const ARGV_LIMIT: &str = "INTERRUPT_DATA is passed as one command-line argument, which Linux \
     caps at 128 KiB (MAX_ARG_STRLEN), so the agent's 1 MiB payload limit cannot be reached \
     through argv";

fn warn_unknown(fields: &[String]) {
    if !fields.is_empty() {
        output::eprint(&format!(
            "warning: ignoring unknown interrupt fields: {}\n",
            fields.join(", ")
        ));
    }
}
