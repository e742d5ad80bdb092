//! The container suite: the agent image, built from the working tree by
//! scripts/build-image.sh, run by podman with runc in the operator's pod shape (privileged, host
//! PID and network, the host's `/` at `/root`, SPEC §13) against fake host roots: the busybox
//! roots of the integration tests, never the real host.
//!
//! Run by scripts/test.sh (`cargo test -p agent-cli --test container`). podman and runc are
//! required: without them every case fails, none is skipped. Arguments: substrings selecting
//! cases by name; `--list` lists them.
//!
//! A custom harness: the image is built once for all cases and removed at the end.

#![forbid(unsafe_code)]
#![allow(
    clippy::print_stdout,
    reason = "a test harness: its report is what it prints, in libtest's format"
)]
#![allow(
    clippy::missing_panics_doc,
    reason = "test helpers panic by design: a panic is a failed assertion"
)]
#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    clippy::too_many_lines,
    clippy::similar_names,
    reason = "the shared harness is written for the integration tests"
)]

use std::process::ExitCode;
use std::time::Instant;

#[path = "../integration/util/mod.rs"]
#[macro_use]
#[allow(
    dead_code,
    unused_macros,
    unused_imports,
    reason = "the shared harness offers helpers this suite does not use"
)]
mod util;

mod cases;
mod job;
mod job_cases;
mod pod;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in cases::ALL {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    // Flags libtest accepts (--nocapture, --test-threads=N, ...) are ignored: cases run one
    // after another and their output is not captured.
    let filters: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    let selected: Vec<&cases::Case> = cases::ALL
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f)))
        .collect();
    let filtered_out = cases::ALL.len() - selected.len();
    let started = Instant::now();
    println!("\nrunning {} tests", selected.len());

    let mut failed: Vec<&str> = Vec::new();
    let image = if selected.is_empty() {
        None
    } else if let Ok(image) = std::thread::Builder::new()
        .name("build the image".into())
        .spawn(pod::Image::build)
        .unwrap()
        .join()
    {
        Some(image)
    } else {
        // Without an image no case can run: every selected case fails.
        failed.extend(selected.iter().map(|(name, _)| *name));
        for (name, _) in &selected {
            println!("test {name} ... FAILED (the image could not be built)");
        }
        None
    };
    if let Some(image) = &image {
        for (name, case) in &selected {
            let outcome = std::thread::scope(|s| {
                std::thread::Builder::new()
                    .name((*name).to_owned())
                    .spawn_scoped(s, || case(image))
                    .unwrap()
                    .join()
            });
            let verdict = if outcome.is_ok() {
                "ok"
            } else {
                failed.push(name);
                "FAILED"
            };
            println!("test {name} ... {verdict}");
        }
    }
    drop(image);

    let passed = selected.len() - failed.len();
    if !failed.is_empty() {
        println!("\nfailures:");
        for name in &failed {
            println!("    {name}");
        }
    }
    println!(
        "\ntest result: {}. {passed} passed; {} failed; 0 ignored; 0 measured; {filtered_out} \
         filtered out; finished in {:.2}s\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
