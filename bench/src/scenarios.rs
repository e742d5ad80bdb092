//! The scenarios of the suite. Each one runs the agent and its baseline alternately in the same
//! run (after one untimed warm-up of each), so both see the same machine, page cache and load.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};

use crate::host::{self, FakeRoot, Package};
use crate::measure::{self, Sample, median, ms, quantile};
use crate::report::{Row, Target};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// A step that does nothing: what the agent adds around a step is the subject.
const TRIVIAL_STEP: &str = "#!/bin/sh\nexit 0\n";
/// The two marker-sized files of the step-loop baseline (the agent's marker content).
const MARKER: &[u8] = b"last_run: 2026-01-01T00:00:00.123456789Z\nstep_always_runs: true";

/// What the scenarios share.
pub struct Bench {
    pub host: FakeRoot,
    pub agent: PathBuf,
    pub runs: usize,
    pub rows: Vec<Row>,
}

impl Bench {
    fn stderr_file(&self) -> PathBuf {
        self.host.work.join("agent.stderr")
    }

    /// The agent's stderr goes to a file (as a pod's would go to the container log), kept
    /// for the error message if the run fails.
    fn stderr(&self) -> anyhow::Result<File> {
        Ok(File::create(self.stderr_file())?)
    }

    /// Run the agent with `cmd` (stdout to `/dev/null`), failing on a non-zero exit.
    fn agent_run(&self, mut cmd: Command) -> anyhow::Result<Sample> {
        cmd.stdout(Stdio::null()).stderr(self.stderr()?);
        measure::run(&mut cmd, Some(&self.stderr_file()), |_| Ok(()))
    }
}

/// Run `baseline` and `agent` `runs` times each, alternating which goes first, after one
/// untimed warm-up of each.
fn interleave<B, A>(
    runs: usize,
    mut baseline: impl FnMut() -> anyhow::Result<B>,
    mut agent: impl FnMut() -> anyhow::Result<A>,
) -> anyhow::Result<(Vec<B>, Vec<A>)> {
    baseline()?;
    agent()?;
    let mut bs = Vec::with_capacity(runs);
    let mut xs = Vec::with_capacity(runs);
    for i in 0..runs {
        if i % 2 == 0 {
            bs.push(baseline()?);
            xs.push(agent()?);
        } else {
            xs.push(agent()?);
            bs.push(baseline()?);
        }
    }
    Ok((bs, xs))
}

fn walls_ms(samples: &[Sample]) -> Vec<f64> {
    samples.iter().map(|s| ms(s.wall)).collect()
}

#[allow(clippy::cast_precision_loss, reason = "RSS in KiB fits an f64 exactly")]
fn rss_mib(samples: &[Sample]) -> Vec<f64> {
    samples
        .iter()
        .map(|s| s.max_rss_kib as f64 / 1024.0)
        .collect()
}

fn spread(values: &[f64]) -> String {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{min:.3}..{max:.3}")
}

/// (a) A one-step `apply` as a package pod runs it the first time: wall time and peak RSS
/// against exec'ing the step itself.
pub fn apply_one(b: &mut Bench) -> anyhow::Result<()> {
    progress("a. 1-step apply");
    let pkg = b
        .host
        .install("one", &[("s.sh".into(), TRIVIAL_STEP.into())])?;
    let (base, agent) = interleave(
        b.runs,
        || {
            let mut cmd = b.host.step(&pkg, "s.sh");
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
            measure::run(&mut cmd, None, |_| Ok(()))
        },
        || {
            let dirs = b.host.fresh_dirs()?;
            b.agent_run(b.host.agent_stage(&b.agent, "apply", &pkg, &dirs.env()))
        },
    )?;
    let (bw, aw) = (walls_ms(&base), walls_ms(&agent));
    let (br, ar) = (rss_mib(&base), rss_mib(&agent));
    b.rows.push(Row {
        scenario: "a.apply-1".into(),
        metric: "wall".into(),
        unit: "ms",
        agent: median(&aw),
        baseline: Some(median(&bw)),
        baseline_is: "exec of the step itself".into(),
        target: Target::AtMost { limit: 20.0 },
        runs: b.runs,
        note: format!(
            "first apply of the package on a node the agent has run on; agent range {} ms",
            spread(&aw)
        ),
    });
    b.rows.push(Row {
        scenario: "a.apply-1".into(),
        metric: "peak RSS".into(),
        unit: "MiB",
        agent: median(&ar),
        baseline: Some(median(&br)),
        baseline_is: "exec of the step itself".into(),
        target: Target::AtMost { limit: 6.0 },
        runs: b.runs,
        note: "ru_maxrss of the agent (the largest of it and the processes it waited for)".into(),
    });
    Ok(())
}

/// The shell loop of (b): exec each step chrooted, then two durable writes per step with
/// the usual tools (write, `sync FILE`, `mv`, `sync DIR`).
const SHELL_LOOP: &str = r#"#!/bin/sh
# shell_loop.sh CHROOT|- DIR STEP...
root=$1; dir=$2; shift 2
marker='last_run: 2026-01-01T00:00:00.123456789Z
step_always_runs: true'
for step in "$@"; do
  if [ "$root" = - ]; then "$step"; else chroot "$root" "$step"; fi </dev/null >/dev/null 2>&1 || exit 1
  name=${step##*/}
  for m in a b; do
    printf '%s' "$marker" > "$dir/.$name.$m.tmp" || exit 1
    sync "$dir/.$name.$m.tmp" || exit 1
    mv "$dir/.$name.$m.tmp" "$dir/$name.$m" || exit 1
    sync "$dir" || exit 1
  done
done
"#;

/// The floor of (b): each step spawned chrooted and waited for, then its two durable writes,
/// from this process. Returns the wall time and its two parts (spawn and wait, writes).
fn syscall_floor(
    b: &Bench,
    pkg: &crate::host::Package,
    dir: &std::path::Path,
) -> anyhow::Result<(Duration, Duration, Duration)> {
    std::fs::create_dir_all(dir)?;
    let handle = File::open(dir)?;
    let (mut exec, mut writes) = (Duration::ZERO, Duration::ZERO);
    let started = Instant::now();
    for path in &pkg.steps {
        let at = Instant::now();
        let mut cmd = b.host.step(pkg, path);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let child = cmd.spawn().with_context(|| format!("spawning {path}"))?;
        let reaped = measure::reap(&child)?;
        ensure!(reaped.success(), "{path}: {}", reaped.describe());
        let written = Instant::now();
        measure::durable_write(dir, &handle, &format!("{path}.a"), MARKER)?;
        measure::durable_write(dir, &handle, &format!("{path}.b"), MARKER)?;
        exec += written - at;
        writes += written.elapsed();
    }
    Ok((started.elapsed(), exec, writes))
}

/// (b) An N-step apply: agent wall time per step against the shell loop of the issue (exec
/// each step chrooted, two durable small-file writes per step) and, for reference, the same
/// loop without a shell (the system calls alone). `rerun` keeps the state of the previous
/// runs (markers, five logs per step) instead of starting from none.
pub fn steps(b: &mut Bench, n: usize, rerun: bool) -> anyhow::Result<()> {
    progress(&format!(
        "b. {n}-step apply{}",
        if rerun { ", rerun" } else { "" }
    ));
    let steps: Vec<(String, String)> = (1..=n)
        .map(|i| (format!("s{i}.sh"), TRIVIAL_STEP.to_owned()))
        .collect();
    let pkg = b.host.install(&format!("steps{n}"), &steps)?;
    let script = b.host.work.join("shell_loop.sh");
    std::fs::write(&script, SHELL_LOOP)?;
    let step_paths: Vec<PathBuf> = pkg
        .steps
        .iter()
        .map(|p| {
            b.host
                .seen_by_step(pkg.copy_dir.join("skyhook_dir").join(p))
        })
        .collect();
    let fixed = b.host.fresh_dirs()?;
    let dirs = || {
        if rerun {
            Ok(fixed.clone())
        } else {
            b.host.fresh_dirs()
        }
    };
    let marker_dir = |d: &crate::host::RunDirs| b.host.real(&d.state).join("baseline");
    #[allow(clippy::cast_precision_loss, reason = "step counts are small")]
    let per_step = |d: std::time::Duration| ms(d) / n as f64;
    let name = format!("b.steps-{n}{}", if rerun { "-rerun" } else { "" });
    let mut populated = false;
    let mut shell = Vec::new();
    let mut floor = Vec::new();
    let mut agent = Vec::new();
    // Where the time of each timed run went, ms per step: the agent's phases (its own
    // timing, SKYHOOK_AGENT_PHASE_TIMES), and the floor's two parts.
    let mut agent_split: Vec<Vec<(String, f64, f64)>> = Vec::new();
    let mut floor_split: Vec<[f64; 2]> = Vec::new();
    for i in 0..=b.runs {
        let mut order = [0, 1, 2];
        order.rotate_left(i % 3);
        for which in order {
            let d = dirs()?;
            let sample = match which {
                0 => {
                    let dir = marker_dir(&d);
                    std::fs::create_dir_all(&dir)?;
                    let mut cmd = Command::new("/bin/sh");
                    cmd.arg(&script)
                        .arg(if b.host.chroot {
                            b.host.root.as_os_str()
                        } else {
                            std::ffi::OsStr::new("-")
                        })
                        .arg(&dir)
                        .args(&step_paths)
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(b.stderr()?);
                    per_step(measure::run(&mut cmd, Some(&b.stderr_file()), |_| Ok(()))?.wall)
                }
                1 => {
                    let dir = marker_dir(&d);
                    let (wall, exec, writes) = syscall_floor(b, &pkg, &dir)?;
                    if i > 0 {
                        floor_split.push([per_step(exec), per_step(writes)]);
                    }
                    per_step(wall)
                }
                _ => {
                    // A file per run: an agent that does not time its phases (an older
                    // build) leaves none, and then there is no split.
                    let phase_file = b.host.work.join(format!("phases-{name}-{i}.txt"));
                    let mut cmd = b.host.agent_stage(&b.agent, "apply", &pkg, &d.env());
                    cmd.env(measure::PHASE_TIMES_VAR, &phase_file);
                    let sample = b.agent_run(cmd)?;
                    if let Some(phases) = measure::read_phases(&phase_file)?.filter(|_| i > 0) {
                        agent_split.push(
                            phases
                                .into_iter()
                                .map(|p| {
                                    #[allow(clippy::cast_precision_loss, reason = "small counts")]
                                    let each = p.count as f64 / n as f64;
                                    (p.name, per_step(p.total), each)
                                })
                                .collect(),
                        );
                    }
                    if rerun && !populated {
                        // A node that has run this stage before keeps five logs per step
                        // (SPEC §8.10): from now on every run creates one and retention
                        // removes one.
                        populate_old_logs(&b.host, &d, &pkg)?;
                        populated = true;
                    }
                    per_step(sample.wall)
                }
            };
            // The first round warms up.
            if i > 0 {
                [&mut shell, &mut floor, &mut agent][which].push(sample);
            }
        }
    }
    let when = if rerun {
        "rerun on a node with the markers and five logs per step already there"
    } else {
        "first apply of the package"
    };
    b.rows.push(Row {
        scenario: name.clone(),
        metric: "wall per step".into(),
        unit: "ms",
        agent: median(&agent),
        baseline: Some(median(&shell)),
        baseline_is: "shell loop: chroot ROOT step, then 2 x (printf > tmp, sync tmp, mv, sync \
                      dir)"
            .into(),
        target: if rerun {
            Target::None
        } else {
            Target::RatioAtMost { limit: 1.2 }
        },
        runs: b.runs,
        note: format!(
            "{when}; agent range {} ms, shell loop range {} ms",
            spread(&agent),
            spread(&shell)
        ),
    });
    b.rows.push(Row {
        scenario: name.clone(),
        metric: "vs syscall floor".into(),
        unit: "ms",
        agent: median(&agent),
        baseline: Some(median(&floor)),
        baseline_is: "the same loop without a shell: fork+chroot+exec the step, wait, then 2 x \
                      (write temp, fsync, rename, fsync dir) from one process"
            .into(),
        target: Target::None,
        runs: b.runs,
        note: format!("floor range {} ms", spread(&floor)),
    });
    split_rows(b, &name, &agent, &agent_split, &floor_split);
    Ok(())
}

/// The split of (b)'s per-step time: each phase of the agent's (median over the runs of ms
/// per step), what its phases do not cover, and the floor's two parts beside the agent's
/// nearest equivalents, so that a regression names its phase.
fn split_rows(
    b: &mut Bench,
    name: &str,
    agent_wall: &[f64],
    agent_split: &[Vec<(String, f64, f64)>],
    floor_split: &[[f64; 2]],
) {
    let Some(first) = agent_split.first() else {
        return;
    };
    let of = |phase: &str| -> Vec<f64> {
        agent_split
            .iter()
            .map(|run| {
                run.iter()
                    .find(|(p, ..)| p == phase)
                    .map_or(0.0, |(_, ms, _)| *ms)
            })
            .collect()
    };
    let floor_exec: Vec<f64> = floor_split.iter().map(|s| s[0]).collect();
    let floor_writes: Vec<f64> = floor_split.iter().map(|s| s[1]).collect();
    let wall = median(agent_wall);
    let row = |metric: String, agent: f64, baseline: Option<f64>, baseline_is: &str| Row {
        scenario: name.to_owned(),
        metric,
        unit: "ms",
        agent,
        baseline,
        baseline_is: baseline_is.to_owned(),
        target: Target::None,
        runs: agent_split.len(),
        note: format!("{:.0} % of the agent's wall per step", 100.0 * agent / wall),
    };
    for (phase, _, each) in first {
        let values = of(phase);
        let (baseline, baseline_is) = match phase.as_str() {
            "wait" => (
                Some(median(&floor_exec)),
                "floor: fork+chroot+exec the step and wait for it",
            ),
            "markers" => (Some(median(&floor_writes)), "floor: the two durable writes"),
            _ => (None, ""),
        };
        let mut r = row(
            format!("split: {phase}"),
            median(&values),
            baseline,
            baseline_is,
        );
        r.note = format!("{}; {each:.2} per step", r.note);
        b.rows.push(r);
    }
    let other: Vec<f64> = agent_split
        .iter()
        .zip(agent_wall)
        .map(|(run, wall)| wall - run.iter().map(|(_, ms, _)| ms).sum::<f64>())
        .collect();
    b.rows
        .push(row("split: other".to_owned(), median(&other), None, ""));
    if let Some(last) = b.rows.last_mut() {
        last.note = format!(
            "{}; what no phase covers: process start-up and exit, config, pre-flight, locks, \
             START, the decisions' bookkeeping",
            last.note
        );
    }
}

/// Four older logs per step beside the one the warm-up run wrote.
fn populate_old_logs(
    host: &FakeRoot,
    dirs: &crate::host::RunDirs,
    pkg: &Package,
) -> anyhow::Result<()> {
    let dir = host.real(Path::new(&dirs.logs).join(&pkg.name).join(host::VERSION));
    for step in &pkg.steps {
        for k in 1..=4 {
            let name = format!("{step}-2020-01-01-000000.00000000{k}.log");
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(dir.join(name))?;
        }
    }
    Ok(())
}

/// Where the agent's stdout goes in a relay scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    DevNull,
    Pipe,
}

/// (c) and (f): relaying `size` bytes of step stdout. Returns the agent's peak RSS (MiB) of
/// every timed run of the four variants, for (f).
pub fn relay(b: &mut Bench, size: u64) -> anyhow::Result<Vec<f64>> {
    let label = size_label(size);
    progress(&format!("c. relay {label}"));
    let pkg = b
        .host
        .install("relay", &[("out.sh".into(), host::output_script(size))])?;
    let tee_log = b.host.real("/logs/tee.log");
    let mut all_rss = Vec::new();
    for (logs, sink) in [
        (true, Sink::DevNull),
        (true, Sink::Pipe),
        (false, Sink::DevNull),
        (false, Sink::Pipe),
    ] {
        let env: &[(&str, &str)] = if logs {
            &[]
        } else {
            &[("SKYHOOK_AGENT_WRITE_LOGS", "false")]
        };
        let (base, agent) = interleave(
            b.runs,
            || {
                let _ = std::fs::remove_file(&tee_log);
                let sample = baseline_relay(&b.host, &pkg, logs.then_some(&*tee_log), sink, size);
                let _ = std::fs::remove_file(&tee_log);
                sample
            },
            || {
                let dirs = b.host.fresh_dirs()?;
                let env: Vec<(&str, &str)> =
                    dirs.env().into_iter().chain(env.iter().copied()).collect();
                let mut cmd = b.host.agent_stage(&b.agent, "apply", &pkg, &env);
                cmd.stderr(b.stderr()?);
                let sample = match sink {
                    Sink::DevNull => {
                        cmd.stdout(Stdio::null());
                        measure::run(&mut cmd, Some(&b.stderr_file()), |_| Ok(()))?
                    }
                    Sink::Pipe => {
                        cmd.stdout(Stdio::piped());
                        measure::run(&mut cmd, Some(&b.stderr_file()), |child| {
                            let out = child.stdout.take().expect("piped");
                            let n = measure::drain(out)?;
                            ensure!(n >= size, "agent relayed {n} of {size} bytes");
                            Ok(())
                        })?
                    }
                };
                let files = b.host.files_under(Path::new(&dirs.logs).join(&pkg.name));
                let logged: Vec<u64> = files
                    .iter()
                    .filter_map(|p| std::fs::metadata(p).ok().map(|m| m.len()))
                    .collect();
                if logs {
                    ensure!(
                        logged == [size],
                        "expected one log of {size} bytes, found {logged:?}"
                    );
                } else {
                    ensure!(logged.is_empty(), "logs written with WRITE_LOGS=false");
                }
                // Up to 1 GiB each: not kept (a single inode, so nothing for the allocator).
                for f in files {
                    std::fs::remove_file(f)?;
                }
                Ok(sample)
            },
        )?;
        let (bw, aw) = (walls_ms(&base), walls_ms(&agent));
        let (br, ar) = (rss_mib(&base), rss_mib(&agent));
        let secs = |v: &[f64]| median(v) / 1e3;
        #[allow(clippy::cast_precision_loss, reason = "sizes are far below 2^52")]
        let rate = |v: &[f64]| size as f64 / MIB as f64 / secs(v);
        let sink_name = match sink {
            Sink::DevNull => "/dev/null",
            Sink::Pipe => "pipe",
        };
        let baseline_is = match (logs, sink) {
            (true, Sink::DevNull) => "step | tee LOG >/dev/null",
            (true, Sink::Pipe) => "step | tee LOG | reader",
            (false, Sink::DevNull) => "step >/dev/null",
            (false, Sink::Pipe) => "step | reader",
        };
        b.rows.push(Row {
            scenario: format!("c.relay-{label}"),
            metric: format!(
                "stdout -> {sink_name}{}",
                if logs { " + log" } else { ", no log" }
            ),
            unit: "s",
            agent: secs(&aw),
            baseline: Some(secs(&bw)),
            baseline_is: baseline_is.into(),
            // The target is against tee; without a log the baseline does not even write into
            // a pipe, which is reported for what it costs.
            // (c) is about 200 MB and 1 GB; the small size is there for the curves and (f).
            target: if logs && size >= 200 * MIB {
                Target::RatioAtMost { limit: 1.1 }
            } else {
                Target::None
            },
            runs: b.runs,
            note: format!(
                "agent {:.0} MiB/s, baseline {:.0} MiB/s; peak RSS agent {:.2} MiB, baseline \
                 {:.2} MiB",
                rate(&aw),
                rate(&bw),
                median(&ar),
                median(&br)
            ),
        });
        all_rss.extend(ar);
    }
    Ok(all_rss)
}

/// The baseline of a relay variant, built without a shell: the step chrooted, piped into
/// `tee LOG` when there is a log, into the bench's reader for a pipe.
fn baseline_relay(
    host: &FakeRoot,
    pkg: &Package,
    log: Option<&Path>,
    sink: Sink,
    size: u64,
) -> anyhow::Result<Sample> {
    let last_stdout = || match sink {
        Sink::DevNull => Stdio::null(),
        Sink::Pipe => Stdio::piped(),
    };
    let mut step = host.step(pkg, "out.sh");
    step.stderr(Stdio::null());
    measure::trim_heap();
    let started = Instant::now();
    let (mut step_child, mut tee_child) = if let Some(log) = log {
        step.stdout(Stdio::piped());
        let mut step_child = step.spawn()?;
        let pipe = step_child.stdout.take().expect("piped");
        let tee_child = Command::new("tee")
            .arg(log)
            .stdin(pipe)
            .stdout(last_stdout())
            .spawn()
            .context("spawning tee")?;
        (step_child, Some(tee_child))
    } else {
        step.stdout(last_stdout());
        (step.spawn()?, None)
    };
    let n = match sink {
        Sink::Pipe => match tee_child.as_mut() {
            Some(tee) => measure::drain(tee.stdout.take().expect("piped"))?,
            None => measure::drain(step_child.stdout.take().expect("piped"))?,
        },
        Sink::DevNull => size,
    };
    let reaped_tee = tee_child.as_ref().map(measure::reap).transpose()?;
    let reaped_step = measure::reap(&step_child)?;
    let wall = started.elapsed();
    ensure!(reaped_step.success(), "step: {}", reaped_step.describe());
    if let Some(t) = reaped_tee {
        ensure!(t.success(), "tee: {}", t.describe());
    }
    ensure!(n == size, "baseline moved {n} of {size} bytes");
    if let Some(log) = log {
        let len = std::fs::metadata(log)?.len();
        ensure!(len == size, "tee wrote {len} of {size} bytes");
    }
    Ok(Sample {
        wall,
        max_rss_kib: reaped_step
            .max_rss_kib
            .max(reaped_tee.map_or(0, |t| t.max_rss_kib)),
    })
}

/// (f): the agent's peak RSS must not grow with the output volume. Compared as the median of
/// all the runs of one size, within 10 %: the peak RSS of single runs varies by about ±5 %
/// (a few hundred KiB: allocator, thread start-up) whatever the size, while anything that
/// grew with the output would multiply between 10 MiB and 1 GiB.
pub fn rss_growth(b: &mut Bench, by_size: &[(u64, Vec<f64>)]) {
    let Some((small, small_runs)) = by_size.first() else {
        return;
    };
    let (small, small_rss) = (*small, median(small_runs));
    for (size, runs) in by_size {
        let (size, rss) = (*size, median(runs));
        let first = size == small;
        b.rows.push(Row {
            scenario: format!("f.rss-{}", size_label(size)),
            metric: "agent peak RSS".into(),
            unit: "MiB",
            agent: rss,
            baseline: (!first).then_some(small_rss),
            baseline_is: if first {
                String::new()
            } else {
                format!("the agent's peak RSS relaying {}", size_label(small))
            },
            target: if first {
                Target::None
            } else {
                Target::RatioAtMost { limit: 1.1 }
            },
            runs: runs.len(),
            note: format!(
                "median over the runs of the four relay variants; range {} MiB",
                spread(runs)
            ),
        });
    }
}

/// (d) Per-line latency: the bench writes a line into a FIFO that the step `cat`s to its
/// stdout, and times until the line arrives on the agent's stdout; one line in flight at a
/// time. The baseline reads the step's stdout directly.
pub fn latency(b: &mut Bench, lines: usize) -> anyhow::Result<()> {
    progress(&format!("d. latency of {lines} lines"));
    let fifo_host = Path::new("/tmp/lines.fifo");
    let fifo = b.host.real(fifo_host);
    if !fifo.exists() {
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes())?;
        // SAFETY: a valid C string.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
            return Err(std::io::Error::last_os_error()).context("mkfifo");
        }
    }
    let script = format!(
        "#!/bin/sh\nexec cat {}\n",
        b.host.seen_by_step(fifo_host).display()
    );
    let pkg = b.host.install("latency", &[("lines.sh".into(), script)])?;
    let (base, agent) = interleave(
        b.runs,
        || {
            let mut cmd = b.host.step(&pkg, "lines.sh");
            cmd.stderr(Stdio::null());
            ping_pong(&mut cmd, &fifo, lines, None)
        },
        || {
            let dirs = b.host.fresh_dirs()?;
            let mut cmd = b.host.agent_stage(&b.agent, "apply", &pkg, &dirs.env());
            cmd.stderr(b.stderr()?);
            ping_pong(&mut cmd, &fifo, lines, Some(&b.stderr_file()))
        },
    )?;
    let pick = |runs: &[Vec<f64>], q: f64| -> Vec<f64> {
        runs.iter().map(|sorted| quantile(sorted, q)).collect()
    };
    for (q, name) in [(0.5, "p50"), (0.99, "p99")] {
        let (a, bl) = (median(&pick(&agent, q)), median(&pick(&base, q)));
        b.rows.push(Row {
            scenario: "d.latency".into(),
            metric: format!("{name} per line"),
            unit: "ms",
            agent: a,
            baseline: Some(bl),
            baseline_is: "the step's stdout read directly".into(),
            target: if name == "p99" {
                Target::AtMost { limit: 0.5 }
            } else {
                Target::None
            },
            runs: b.runs,
            note: format!(
                "{lines} lines, one in flight, FIFO -> cat step -> reader; added by the agent \
                 {:.3} ms (median of per-run {name})",
                a - bl
            ),
        });
    }
    Ok(())
}

/// Spawn `cmd` with stdout piped, feed `lines` lines through the FIFO one at a time and
/// return the sorted latencies (ms).
fn ping_pong(
    cmd: &mut Command,
    fifo: &Path,
    lines: usize,
    stderr_file: Option<&Path>,
) -> anyhow::Result<Vec<f64>> {
    // Read-write: opening does not wait for the step, and the step sees end-of-file once this
    // handle is closed.
    let mut writer = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(fifo)
        .context("opening the FIFO")?;
    cmd.stdout(Stdio::piped());
    let mut latencies = Vec::with_capacity(lines);
    measure::run(cmd, stderr_file, |child| {
        let mut out = child.stdout.take().expect("piped");
        let mut buf = Vec::with_capacity(64 * 1024);
        let mut chunk = vec![0u8; 64 * 1024];
        let mut wait_for =
            |out: &mut std::process::ChildStdout, line: &[u8]| -> anyhow::Result<()> {
                loop {
                    if let Some(pos) = find(&buf, line) {
                        buf.drain(..pos + line.len());
                        return Ok(());
                    }
                    let n = out.read(&mut chunk)?;
                    if n == 0 {
                        bail!("stdout closed before {:?}", String::from_utf8_lossy(line));
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
            };
        // The step is running once its first line comes back.
        writer.write_all(b"ready\n")?;
        wait_for(&mut out, b"ready\n")?;
        for i in 0..lines {
            let line = format!("line {i}\n");
            let sent = Instant::now();
            writer.write_all(line.as_bytes())?;
            wait_for(&mut out, line.as_bytes())?;
            latencies.push(ms(sent.elapsed()));
        }
        drop(writer);
        measure::drain(out)?;
        Ok(())
    })?;
    latencies.sort_by(f64::total_cmp);
    Ok(latencies)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// (e) Process start-up: `agent --version` and a `no_op` interrupt in the fake root, against
/// exec'ing `true`.
pub fn startup(b: &mut Bench) -> anyhow::Result<()> {
    progress("e. start-up");
    let pkg = b
        .host
        .install("pkg", &[("s.sh".into(), TRIVIAL_STEP.into())])?;
    let no_op = "eyJ0eXBlIjoibm9fb3AifQ=="; // {"type":"no_op"}
    let true_bin = b.host.real("/bin/true");
    let baseline = || {
        let mut cmd = if b.host.chroot {
            Command::new(&true_bin)
        } else {
            Command::new("true")
        };
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        measure::run(&mut cmd, None, |_| Ok(()))
    };
    let cases: [(&str, &str); 2] = [("version", "agent --version"), ("no_op", "no_op interrupt")];
    for (case, what) in cases {
        let mut last_markers = None;
        let (base, agent) = interleave(b.runs, baseline, || {
            let dirs = b.host.fresh_dirs()?;
            let mut cmd = b.host.agent(&b.agent, &dirs.env());
            if case == "version" {
                cmd.arg("--version");
            } else {
                // The first run of this interrupt on a node that has run interrupts before,
                // after the package's apply (which created its results directory).
                let flags = b.host.real(&dirs.state).join("interrupts/flags");
                std::fs::create_dir_all(&flags)?;
                std::fs::create_dir_all(
                    b.host
                        .real(&dirs.state)
                        .join("results")
                        .join(&pkg.name)
                        .join(host::VERSION),
                )?;
                last_markers = Some(flags.join(host::RESOURCE_ID));
                cmd.arg("interrupt")
                    .arg(&b.host.root)
                    .arg(&pkg.copy_dir)
                    .arg(no_op);
            }
            b.agent_run(cmd)
        })?;
        if let Some(markers) = last_markers {
            ensure!(
                markers.join("no_op.complete").is_file(),
                "the no_op interrupt wrote no completion marker"
            );
        }
        let (bw, aw) = (walls_ms(&base), walls_ms(&agent));
        let (br, ar) = (rss_mib(&base), rss_mib(&agent));
        b.rows.push(Row {
            scenario: format!("e.{case}"),
            metric: "wall".into(),
            unit: "ms",
            agent: median(&aw),
            baseline: Some(median(&bw)),
            baseline_is: "exec of busybox true".into(),
            target: Target::AtMost { limit: 5.0 },
            runs: b.runs,
            note: format!("{what}; agent range {} ms", spread(&aw)),
        });
        b.rows.push(Row {
            scenario: format!("e.{case}"),
            metric: "peak RSS".into(),
            unit: "MiB",
            agent: median(&ar),
            baseline: Some(median(&br)),
            baseline_is: "exec of busybox true".into(),
            target: Target::None,
            runs: b.runs,
            note: "interrupt pods are capped at 64 MiB".into(),
        });
    }
    Ok(())
}

/// The cost of one durable small-file write on this filesystem (median of 50), for the
/// header: it is the unit of (b)'s baseline.
pub fn durable_write_cost(host: &FakeRoot) -> anyhow::Result<f64> {
    let dir = host.work.join("durable");
    std::fs::create_dir_all(&dir)?;
    let handle = File::open(&dir)?;
    let mut costs = Vec::new();
    for i in 0..50 {
        let started = Instant::now();
        measure::durable_write(&dir, &handle, &format!("f{}", i % 2), MARKER)?;
        costs.push(ms(started.elapsed()));
    }
    Ok(median(&costs))
}

pub fn size_label(size: u64) -> String {
    if size >= GIB && size % GIB == 0 {
        format!("{}GiB", size / GIB)
    } else {
        format!("{}MiB", size / MIB)
    }
}

fn progress(what: &str) {
    eprintln!("agent-bench: {what} ...");
}

/// A step printing one line: the shape of the scaling measurements of issue reports.
const ONE_LINE_STEP: &str = "#!/bin/sh\necho \"step ran\"\n";

/// How many runs of the same package in the same STATE and LOGS make one scaling sequence:
/// the first run and three reruns.
const SCALING_SEQUENCE: usize = 4;

/// The peak RSS a first run may reach, by step count: ≤ 6 MiB at 100 steps, ≤ 8 MiB at 3000
/// (docs/performance.md, "Memory flat in the package's size").
const FIRST_RUN_RSS_MIB: &[(usize, f64)] = &[(100, 6.0), (3000, 8.0)];

/// (g) Scaling: the per-step time and peak RSS of an N-step apply, on its first run and on
/// its third rerun in the same STATE and LOGS with `OVERLAY_ALWAYS_RUN_STEP=true` (every
/// step runs again, so every rerun adds one log per step to the package's log directory, as
/// on a node that reruns a stage). Each repetition runs the sequence of every step count in
/// turn, so all counts share the machine's conditions; the target compares the largest
/// count's third rerun with the 100-step first run of the same suite run.
pub fn scaling(b: &mut Bench, counts: &[usize]) -> anyhow::Result<()> {
    progress(&format!(
        "g. scaling over {counts:?} steps, first run and third rerun"
    ));
    let mut pkgs = Vec::new();
    for &n in counts {
        let steps: Vec<(String, String)> = (1..=n)
            .map(|i| (format!("s{i}.sh"), ONE_LINE_STEP.to_owned()))
            .collect();
        pkgs.push(b.host.install(&format!("scale{n}"), &steps)?);
    }
    let always = [("OVERLAY_ALWAYS_RUN_STEP", "true")];
    let run_once = |pkg: &Package, d: &crate::host::RunDirs| {
        let mut env: Vec<(&str, &str)> = d.env().to_vec();
        env.extend(always);
        b.agent_run(b.host.agent_stage(&b.agent, "apply", pkg, &env))
    };
    // Warm-up: one first run of each package (page cache, binary, step files).
    for pkg in &pkgs {
        run_once(pkg, &b.host.fresh_dirs()?)?;
    }
    // What the package's config needs: the peak RSS of `agent validate` (which loads and
    // checks the config and nothing else) over that of the smallest package.
    let mut config_rss = Vec::new();
    for pkg in &pkgs {
        let mut runs = Vec::new();
        for _ in 0..b.runs {
            let mut cmd = b.host.agent(&b.agent, &[]);
            cmd.arg("validate").arg(b.host.real(&pkg.copy_dir));
            runs.push(b.agent_run(cmd)?);
        }
        config_rss.push(median(&rss_mib(&runs)));
    }
    // [count][sequence position] -> samples
    let mut samples: Vec<Vec<Vec<Sample>>> = vec![vec![Vec::new(); SCALING_SEQUENCE]; counts.len()];
    for rep in 0..b.runs {
        // Alternate the order of the counts so none is always measured first.
        let mut order: Vec<usize> = (0..counts.len()).collect();
        if rep % 2 == 1 {
            order.reverse();
        }
        for k in order {
            let d = b.host.fresh_dirs()?;
            for position in &mut samples[k] {
                position.push(run_once(&pkgs[k], &d)?);
            }
        }
    }
    #[allow(clippy::cast_precision_loss, reason = "step counts are small")]
    let per_step =
        |n: usize, s: &[Sample]| -> Vec<f64> { s.iter().map(|x| ms(x.wall) / n as f64).collect() };
    let mut first_100 = None;
    let mut last = None;
    for (k, &n) in counts.iter().enumerate() {
        let first = per_step(n, &samples[k][0]);
        let third = per_step(n, &samples[k][SCALING_SEQUENCE - 1]);
        let (first_rss, third_rss) = (
            rss_mib(&samples[k][0]),
            rss_mib(&samples[k][SCALING_SEQUENCE - 1]),
        );
        if n == 100 {
            first_100 = Some(median(&first));
        }
        last = Some((n, median(&third), third.clone()));
        let name = format!("g.scale-{n}");
        let config_needs = config_rss[k] - config_rss[0];
        b.rows.push(Row {
            scenario: name.clone(),
            metric: "ms/step, first run".into(),
            unit: "ms",
            agent: median(&first),
            baseline: None,
            baseline_is: String::new(),
            target: Target::None,
            runs: b.runs,
            note: format!("range {} ms", spread(&first)),
        });
        b.rows.push(Row {
            scenario: name.clone(),
            metric: "ms/step, third rerun".into(),
            unit: "ms",
            agent: median(&third),
            baseline: Some(median(&first)),
            baseline_is: format!("the {n}-step first run"),
            target: Target::None,
            runs: b.runs,
            note: format!(
                "fourth run in the same STATE and LOGS, {} logs per step already there; range \
                 {} ms",
                SCALING_SEQUENCE - 1,
                spread(&third)
            ),
        });
        let absolute = FIRST_RUN_RSS_MIB.iter().find(|(steps, _)| *steps == n);
        b.rows.push(Row {
            scenario: name.clone(),
            metric: "peak RSS, first run".into(),
            unit: "MiB",
            agent: median(&first_rss),
            baseline: None,
            baseline_is: String::new(),
            target: absolute.map_or(Target::None, |&(_, limit)| Target::AtMost { limit }),
            runs: b.runs,
            note: format!("range {} MiB", spread(&first_rss)),
        });
        b.rows.push(Row {
            scenario: name.clone(),
            metric: "peak RSS, third rerun".into(),
            unit: "MiB",
            agent: median(&third_rss),
            baseline: None,
            baseline_is: String::new(),
            target: Target::AtMost {
                limit: 6.0 + config_needs,
            },
            runs: b.runs,
            note: format!(
                "6 MiB plus what the config needs ({config_needs:.2} MiB: the peak RSS of \
                 `agent validate` on this package, {:.2} MiB, over that on the {}-step \
                 package); range {} MiB",
                config_rss[k],
                counts[0],
                spread(&third_rss)
            ),
        });
        b.rows.push(Row {
            scenario: name,
            metric: "config alone (validate)".into(),
            unit: "MiB",
            agent: config_rss[k],
            baseline: None,
            baseline_is: String::new(),
            target: Target::None,
            runs: b.runs,
            note: "peak RSS of `agent validate COPY_DIR`".into(),
        });
    }
    if let (Some(base), Some((n, third, values))) = (first_100, last) {
        if n > 100 {
            b.rows.push(Row {
                scenario: format!("g.scale-{n}"),
                metric: "third rerun vs 100 steps".into(),
                unit: "ms",
                agent: third,
                baseline: Some(base),
                baseline_is: "ms/step of the 100-step first run, same suite run".into(),
                target: Target::RatioAtMost { limit: 1.3 },
                runs: values.len(),
                note: "per-step cost independent of the package's size and of the logs \
                       already present"
                    .into(),
            });
        }
    }
    Ok(())
}

/// (h) The node metrics (docs/metrics.md): a 200-step apply writing them (the default, plus
/// the copy in `SKYHOOK_AGENT_METRICS_DIR`) against the same apply with
/// `SKYHOOK_AGENT_WRITE_METRICS=false`. The per-step usage figures (rusage, byte counts) are
/// collected either way; what differs is the metrics state read and the two files written.
pub fn metrics(b: &mut Bench, n: usize) -> anyhow::Result<()> {
    progress(&format!("h. {n}-step apply, metrics on vs off"));
    let steps: Vec<(String, String)> = (1..=n)
        .map(|i| (format!("s{i}.sh"), TRIVIAL_STEP.to_owned()))
        .collect();
    let pkg = b.host.install(&format!("metrics{n}"), &steps)?;
    let textfile = "/textfile";
    std::fs::create_dir_all(b.host.real(textfile))?;
    #[allow(clippy::cast_precision_loss, reason = "step counts are small")]
    let per_step = |s: &Sample| ms(s.wall) / n as f64;
    let (off, on) = interleave(
        b.runs,
        || {
            let dirs = b.host.fresh_dirs()?;
            let mut env = dirs.env().to_vec();
            env.push(("SKYHOOK_AGENT_WRITE_METRICS", "false"));
            b.agent_run(b.host.agent_stage(&b.agent, "apply", &pkg, &env))
        },
        || {
            let dirs = b.host.fresh_dirs()?;
            let mut env = dirs.env().to_vec();
            env.push(("SKYHOOK_AGENT_METRICS_DIR", textfile));
            let sample = b.agent_run(b.host.agent_stage(&b.agent, "apply", &pkg, &env))?;
            let prom = b
                .host
                .real(&dirs.state)
                .join("metrics")
                .join(format!("{}.prom", pkg.name));
            ensure!(prom.is_file(), "no metrics file at {}", prom.display());
            Ok(sample)
        },
    )?;
    let (off_wall, on_wall): (Vec<f64>, Vec<f64>) = (
        off.iter().map(per_step).collect(),
        on.iter().map(per_step).collect(),
    );
    let name = format!("h.metrics-{n}");
    b.rows.push(Row {
        scenario: name.clone(),
        metric: "wall per step".into(),
        unit: "ms",
        agent: median(&on_wall),
        baseline: Some(median(&off_wall)),
        baseline_is: "the same apply with SKYHOOK_AGENT_WRITE_METRICS=false".into(),
        target: Target::RatioAtMost { limit: 1.1 },
        runs: b.runs,
        note: format!(
            "metrics on: STATE/metrics and a SKYHOOK_AGENT_METRICS_DIR copy; on range {} ms, \
             off range {} ms",
            spread(&on_wall),
            spread(&off_wall)
        ),
    });
    let (off_rss, on_rss) = (rss_mib(&off), rss_mib(&on));
    b.rows.push(Row {
        scenario: name,
        metric: "peak RSS".into(),
        unit: "MiB",
        agent: median(&on_rss),
        baseline: Some(median(&off_rss)),
        baseline_is: "the same apply with SKYHOOK_AGENT_WRITE_METRICS=false".into(),
        target: Target::None,
        runs: b.runs,
        note: "ru_maxrss of the agent".into(),
    });
    Ok(())
}
