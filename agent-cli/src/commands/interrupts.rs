//! `agent interrupts list|encode|decode`.

use std::fmt::Write as _;
use std::process::ExitCode;

use agent_core::Interrupt;
use agent_core::exec::Output;
use agent_core::plugin::codec;
use agent_core::plugin::contract::DecodeError;
use agent_core::plugin::registry::{self, InterruptDescriptor};

#[derive(Debug, clap::Subcommand)]
pub enum Interrupts {
    /// Every interrupt kind this binary knows: built-in and linked third-party kinds.
    List {
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// JSON payload → base64 INTERRUPT_DATA (validated by decoding it). Refuses data of
    /// 128 KiB or more: Linux caps one command-line argument there (MAX_ARG_STRLEN).
    Encode {
        /// e.g. `{"type":"service_restart","services":["kubelet"]}`
        json: String,
    },
    /// base64 INTERRUPT_DATA → canonical JSON.
    Decode { data: String },
}

/// One kind as listed: its descriptor, and why it is broken (SPEC §9.5), if it is.
#[derive(Debug, serde::Serialize)]
struct Listed<'a> {
    #[serde(flatten)]
    descriptor: &'a InterruptDescriptor,
    #[serde(skip_serializing_if = "Option::is_none")]
    broken: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn run(cmd: Interrupts) -> ExitCode {
    let out = Output::process();
    match cmd {
        Interrupts::List { format } => {
            let kinds: Vec<Listed<'_>> = registry::kinds()
                .into_iter()
                .map(|descriptor| Listed {
                    descriptor,
                    broken: codec::broken(descriptor),
                })
                .collect();
            let text = match format {
                Format::Json => {
                    let mut s =
                        serde_json::to_string_pretty(&kinds).expect("descriptors serialize");
                    s.push('\n');
                    s
                }
                Format::Text => {
                    let width = kinds
                        .iter()
                        .map(|k| k.descriptor.type_name.len())
                        .max()
                        .unwrap_or(0);
                    let mut s = String::new();
                    for Listed {
                        descriptor: k,
                        broken,
                    } in &kinds
                    {
                        let _ = writeln!(s, "{:width$}  {}", k.type_name, k.summary);
                        let _ = writeln!(
                            s,
                            "{:width$}  module: {}  example: {}",
                            "", k.module, k.example
                        );
                        if let Some(problem) = broken {
                            let _ = writeln!(
                                s,
                                "{:width$}  BROKEN: {problem}; its payloads are refused",
                                ""
                            );
                        }
                    }
                    s
                }
            };
            out.print(&text);
            // SPEC §9.5: a broken kind is named, and the listing says the binary has one.
            let mut code = ExitCode::SUCCESS;
            for Listed {
                descriptor: k,
                broken,
            } in &kinds
            {
                if let Some(problem) = broken {
                    code = fail(&DecodeError::BrokenKind {
                        type_name: k.type_name,
                        module: k.module,
                        problem: problem.clone(),
                    });
                }
            }
            code
        }
        Interrupts::Encode { json } => match <dyn Interrupt>::from_json_bytes(json.as_bytes()) {
            Ok(decoded) => {
                warn_unknown(&decoded.unknown_field_notes());
                let data = decoded.interrupt.to_base64();
                if data.len() >= MAX_ARG_STRLEN {
                    return fail(&format!(
                        "INTERRUPT_DATA would be {} bytes: {ARGV_LIMIT}",
                        data.len()
                    ));
                }
                out.print(&format!("{data}\n"));
                ExitCode::SUCCESS
            }
            Err(e @ DecodeError::TooLarge(_)) => fail(&format!("{e}; {ARGV_LIMIT}")),
            Err(e) => fail(&e),
        },
        Interrupts::Decode { data } => match <dyn Interrupt>::from_base64(&data) {
            Ok(decoded) => {
                warn_unknown(&decoded.unknown_field_notes());
                out.print(&format!("{}\n", decoded.interrupt.to_json()));
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        },
    }
}

/// Linux caps one argument of `execve(2)` at 32 pages, 128 KiB with its terminating NUL
/// (`MAX_ARG_STRLEN`): INTERRUPT_DATA reaches the agent as one argument.
const MAX_ARG_STRLEN: usize = 32 * 4096;

const ARGV_LIMIT: &str = "INTERRUPT_DATA is passed as one command-line argument, which Linux \
     caps at 128 KiB (MAX_ARG_STRLEN), so the agent's 1 MiB payload limit cannot be reached \
     through argv";

fn warn_unknown(fields: &[String]) {
    if !fields.is_empty() {
        crate::eprint_out(&format!(
            "warning: ignoring unknown interrupt fields: {}\n",
            fields.join(", ")
        ));
    }
}

fn fail(e: &dyn std::fmt::Display) -> ExitCode {
    crate::eprint_out(&format!("agent: {e}\n"));
    ExitCode::from(1)
}
