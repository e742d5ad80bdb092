//! `agent-bench`: the agent's performance suite. Every scenario runs the release agent in a
//! fake host root built in a temp dir and, in the same run, a baseline doing the same work
//! without the agent; it reports the medians, their ratio and whether the target is met.
//!
//! ```text
//! cargo run --release -p agent-bench                 # everything (a few minutes)
//! cargo run --release -p agent-bench -- --quick      # 10/200 steps, 10/200 MiB
//! cargo run --release -p agent-bench -- --scenario c --json results.json
//! ```
//! See docs/performance.md for what each scenario measures.

#![allow(clippy::print_stdout, reason = "the report is the product")]

mod host;
mod measure;
mod report;
mod scenarios;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context as _, bail};
use clap::Parser;

use crate::report::Row;
use crate::scenarios::Bench;

/// The agent's performance suite: each scenario against a baseline measured in the same run.
#[derive(Debug, Parser)]
#[command(name = "agent-bench")]
#[allow(clippy::struct_excessive_bools, reason = "command-line flags")]
struct Cli {
    /// Shorter run: 10- and 200-step applies, 10 MiB and 200 MiB of output (still >= 5 runs).
    #[arg(long)]
    quick: bool,
    /// Run only this scenario: a|apply, b|steps, c|relay, d|latency, e|startup, f|rss
    /// (f runs c), g|scaling, h|metrics. Repeatable.
    #[arg(long = "scenario", value_name = "X")]
    scenarios: Vec<String>,
    /// Timed runs of the agent and of the baseline per scenario (after one warm-up each).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(5..))]
    runs: u16,
    /// Step counts of (b) (default 10,100,200,1000; --quick 10,200).
    #[arg(long, value_delimiter = ',', value_name = "N,N")]
    steps: Vec<usize>,
    /// Step counts of the scaling scenario (g) (default 10,100,1000,3000,5000; --quick 10,100,1000).
    #[arg(long, value_delimiter = ',', value_name = "N,N")]
    scaling_steps: Vec<usize>,
    /// Output sizes of (c)/(f) in MiB (default 10,200,1024; --quick 10,200).
    #[arg(long, value_delimiter = ',', value_name = "MIB,MIB")]
    sizes_mib: Vec<u64>,
    /// Lines of the latency scenario (d).
    #[arg(long, default_value_t = 10_000)]
    lines: usize,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// The agent binary to measure (default: build target/release/agent first).
    #[arg(long, value_name = "PATH")]
    agent: Option<PathBuf>,
    /// Where to create the fake host root (default: the system temp dir). Its filesystem
    /// decides what an fsync costs.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Also run the largest step count again on a node that kept its markers and five logs
    /// per step (reported, no target).
    #[arg(long)]
    rerun: bool,
    /// Keep the fake host root after the run (its path is printed), e.g. to profile the
    /// agent against it.
    #[arg(long)]
    keep: bool,
    /// Run steps unconfined (`on_host: false`) even as root.
    #[arg(long)]
    no_chroot: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Apply,
    Steps,
    Relay,
    Latency,
    Startup,
    Scaling,
    Metrics,
}

fn parse_scenarios(names: &[String]) -> anyhow::Result<Vec<Scenario>> {
    let all = [
        Scenario::Apply,
        Scenario::Steps,
        Scenario::Relay,
        Scenario::Latency,
        Scenario::Startup,
        Scenario::Scaling,
        Scenario::Metrics,
    ];
    if names.is_empty() {
        return Ok(all.to_vec());
    }
    let mut chosen = Vec::new();
    for name in names {
        let s = match name.as_str() {
            "a" | "apply" => Scenario::Apply,
            "b" | "steps" => Scenario::Steps,
            "c" | "relay" | "f" | "rss" => Scenario::Relay,
            "d" | "latency" => Scenario::Latency,
            "e" | "startup" => Scenario::Startup,
            "g" | "scaling" => Scenario::Scaling,
            "h" | "metrics" => Scenario::Metrics,
            other => {
                bail!(
                    "unknown scenario {other:?} (a..h or apply, steps, relay, latency, startup, \
                     scaling, metrics)"
                )
            }
        };
        if !chosen.contains(&s) {
            chosen.push(s);
        }
    }
    // Always in the documented order.
    Ok(all.into_iter().filter(|s| chosen.contains(s)).collect())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> anyhow::Result<()> {
    let scenarios = parse_scenarios(&cli.scenarios)?;
    let agent = match &cli.agent {
        Some(path) => std::fs::canonicalize(path)
            .with_context(|| format!("agent binary {}", path.display()))?,
        None => build_agent()?,
    };
    // SAFETY: geteuid cannot fail.
    let is_root = unsafe { libc::geteuid() } == 0;
    let chroot = is_root && !cli.no_chroot;
    let host = host::FakeRoot::new(cli.dir.as_deref(), chroot)?;
    let steps = pick(&cli.steps, cli.quick, &[10, 200], &[10, 100, 200, 1000]);
    let scaling = pick(
        &cli.scaling_steps,
        cli.quick,
        &[10, 100, 1000],
        &[10, 100, 1000, 3000, 5000],
    );
    let sizes: Vec<u64> = pick(&cli.sizes_mib, cli.quick, &[10, 200], &[10, 200, 1024])
        .iter()
        .map(|mib| mib * 1024 * 1024)
        .collect();

    let load_before = measure::load_average();
    let durable = scenarios::durable_write_cost(&host)?;
    let machine = Machine {
        kernel: read_trimmed("/proc/sys/kernel/osrelease"),
        cpus: std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        cpu_model: cpu_model(),
        filesystem: filesystem_type(&host.root),
        fake_root: host.root.display().to_string(),
        mode: if chroot {
            "root: on_host steps chrooted into the fake root".into()
        } else if is_root {
            "--no-chroot: on_host:false steps, unconfined, state in the fake root".into()
        } else {
            "not root: on_host:false steps, unconfined (no chroot), state in the fake root".into()
        },
        agent: agent.display().to_string(),
        runs: usize::from(cli.runs),
        durable_write_ms: durable,
        load_before,
        load_after: f64::NAN,
    };
    print!("{}", machine.describe());
    if !chroot {
        eprintln!(
            "agent-bench: steps run unconfined ({}); figures are comparable to each other, not \
             to a chrooted run",
            if is_root { "--no-chroot" } else { "not root" }
        );
    }
    if load_before > 0.5 {
        eprintln!(
            "agent-bench: warning: load average {load_before:.2} > 0.5; other work on this \
             machine will blur the figures"
        );
    }

    let mut bench = Bench {
        host,
        agent,
        runs: usize::from(cli.runs),
        rows: Vec::new(),
    };
    for s in scenarios {
        match s {
            Scenario::Apply => scenarios::apply_one(&mut bench)?,
            Scenario::Steps => {
                for &n in &steps {
                    scenarios::steps(&mut bench, n, false)?;
                }
                if let Some(&largest) = steps.iter().max().filter(|_| cli.rerun) {
                    scenarios::steps(&mut bench, largest, true)?;
                }
            }
            Scenario::Relay => {
                let mut rss = Vec::new();
                for &size in &sizes {
                    rss.push((size, scenarios::relay(&mut bench, size)?));
                }
                scenarios::rss_growth(&mut bench, &rss);
            }
            Scenario::Latency => scenarios::latency(&mut bench, cli.lines)?,
            Scenario::Startup => scenarios::startup(&mut bench)?,
            Scenario::Scaling => scenarios::scaling(&mut bench, &scaling)?,
            Scenario::Metrics => scenarios::metrics(&mut bench, 200)?,
        }
    }
    let machine = Machine {
        load_after: measure::load_average(),
        ..machine
    };

    println!();
    print!("{}", report::table(&bench.rows));
    println!();
    print!("{}", report::notes(&bench.rows));
    let judged: Vec<&Row> = bench.rows.iter().filter(|r| r.pass().is_some()).collect();
    let met = judged.iter().filter(|r| r.pass() == Some(true)).count();
    println!(
        "\n{met} of {} targets met; load average {:.2} before, {:.2} after",
        judged.len(),
        machine.load_before,
        machine.load_after
    );
    if cli.keep {
        if let Some(dir) = bench.host.keep() {
            println!("fake host root kept in {}", dir.display());
        }
    }
    if let Some(path) = &cli.json {
        let doc = serde_json::json!({ "machine": machine, "rows": bench.rows });
        std::fs::write(path, serde_json::to_vec_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn pick<T: Copy>(given: &[T], quick: bool, short: &[T], full: &[T]) -> Vec<T> {
    if !given.is_empty() {
        given.to_vec()
    } else if quick {
        short.to_vec()
    } else {
        full.to_vec()
    }
}

/// Build the release agent of this workspace and return its path: the bench measures the
/// binary operators run, whatever profile the bench itself was built with.
fn build_agent() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    // <target>/<profile>/agent-bench
    let target = exe
        .parent()
        .and_then(Path::parent)
        .context("locating the target directory")?
        .to_path_buf();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("locating the workspace")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("agent-bench: building the release agent ...");
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "agent-cli", "--bin", "agent"])
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(workspace)
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("cargo build of the agent failed ({status})");
    }
    Ok(target.join("release").join("agent"))
}

/// What the figures were measured on.
#[derive(Debug, Clone, serde::Serialize)]
struct Machine {
    kernel: String,
    cpus: usize,
    cpu_model: String,
    filesystem: String,
    fake_root: String,
    mode: String,
    agent: String,
    runs: usize,
    durable_write_ms: f64,
    load_before: f64,
    load_after: f64,
}

impl Machine {
    fn describe(&self) -> String {
        format!(
            "agent-bench: {} CPUs ({}), Linux {}, fake root on {} ({})\n\
             mode: {}\nagent: {}\nruns per scenario: {} (medians; one warm-up each)\n\
             one durable small-file write (write, fsync, rename, dir fsync): {:.2} ms\n\
             load average before: {:.2}\n",
            self.cpus,
            self.cpu_model,
            self.kernel,
            self.filesystem,
            self.fake_root,
            self.mode,
            self.agent,
            self.runs,
            self.durable_write_ms,
            self.load_before
        )
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn cpu_model() -> String {
    read_trimmed("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default()
}

fn filesystem_type(path: &Path) -> String {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return "unknown".into();
    };
    // SAFETY: an all-zero statfs is valid; statfs writes into it.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and pointer.
    if unsafe { libc::statfs(c.as_ptr(), &raw mut st) } != 0 {
        return "unknown".into();
    }
    #[allow(clippy::cast_sign_loss, reason = "a magic number")]
    match st.f_type as u64 {
        0xEF53 => "ext4".into(),
        0x0102_1994 => "tmpfs".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x794C_7630 => "overlayfs".into(),
        other => format!("fs magic {other:#x}"),
    }
}
