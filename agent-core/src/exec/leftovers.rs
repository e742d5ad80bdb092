//! Processes an operation left running (SPEC §8.4 leftover processes, §10): a helper a step
//! starts with `&`, `nohup` or `setsid` keeps running after the step (a later step may use it,
//! as with both upstream agents) and is ended when the agent exits, as a container runtime
//! ends a pod's processes.
//!
//! The agent is a child subreaper ([`adopt`]): whatever its operations leave behind, even in
//! a session or process group of its own, becomes its child when its parent exits, so that
//! [`end`] finds all of it among the agent's descendants. Outside a container nothing else
//! would end them: no orphan survives the agent.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsFd as _, OwnedFd};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{Signal, kill};
use nix::sys::stat::fstat;
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use tracing::{info, warn};

/// How often [`end`] looks again whether the processes are gone.
const POLL: Duration = Duration::from_millis(10);

/// How long [`end`] goes on sending SIGKILL to processes that keep appearing (forks).
const KILL_LIMIT: Duration = Duration::from_secs(5);

/// A process, for log lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub pid: i32,
    /// Its command line (`sleep 30`), or its name when the command line is empty.
    pub command: String,
}

/// Make the agent the reaper of the processes its operations leave behind.
pub fn adopt() {
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        warn!(
            error = %e,
            "cannot adopt the processes the operations leave running; those that leave their \
             process group may outlive the agent"
        );
    }
}

/// End the agent's descendants: SIGTERM, then SIGKILL to those still running after `grace`.
/// Called when the agent exits, once no operation runs.
pub fn end(grace: Duration) {
    // Every descendant of a subreaper is a child of it or below one: with no child (the run
    // started no process, or all were reaped), there is nothing to look for in `/proc`.
    if !has_children() {
        return;
    }
    let me = Pid::this().as_raw();
    let first = descendants(me);
    if first.is_empty() {
        return;
    }
    info!(
        processes = %describe(&first),
        grace = %format!("{:.1}s", grace.as_secs_f64()),
        "ending the processes the operations left running: SIGTERM, SIGKILL after the grace \
         period"
    );
    let started = Instant::now();
    let mut told = BTreeSet::new();
    loop {
        let alive = descendants(me);
        if alive.is_empty() {
            return;
        }
        if started.elapsed() >= grace {
            break;
        }
        // Forks made meanwhile get theirs too.
        for p in alive.iter().filter(|p| told.insert(p.pid)) {
            let _ = kill(Pid::from_raw(p.pid), Signal::SIGTERM);
        }
        std::thread::sleep(POLL);
    }
    warn!(
        processes = %describe(&descendants(me)),
        "killing the processes still running after the grace period"
    );
    let killing = Instant::now();
    while killing.elapsed() < KILL_LIMIT {
        let alive = descendants(me);
        if alive.is_empty() {
            return;
        }
        for p in &alive {
            let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
        }
        std::thread::sleep(POLL);
    }
}

/// The inodes of the pipes (given by their read ends) that some process still holds open for
/// writing: a pipe whose writers have all gone reports a hang-up.
pub(crate) fn still_held(pipes: &[OwnedFd]) -> Vec<u64> {
    pipes
        .iter()
        .filter(|pipe| {
            let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::empty())];
            nix::poll::poll(&mut fds, PollTimeout::ZERO).is_ok()
                && !fds[0]
                    .revents()
                    .is_some_and(|r| r.contains(PollFlags::POLLHUP))
        })
        .filter_map(|pipe| fstat(pipe.as_fd()).ok())
        .map(|st| st.st_ino)
        .collect()
}

/// The processes (other than the agent) that hold one of the pipes with these inodes open.
pub(crate) fn holding_pipes(inodes: &[u64]) -> Vec<Process> {
    let me = Pid::this().as_raw();
    let links: BTreeSet<String> = inodes.iter().map(|i| format!("pipe:[{i}]")).collect();
    pids()
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.flatten().any(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|target| links.contains(&*target.to_string_lossy()))
                })
            })
        })
        .map(process)
        .collect()
}

/// `1234 (sleep 30), 1240 (sh -c …)`.
pub fn describe(processes: &[Process]) -> String {
    processes
        .iter()
        .map(|p| format!("{} ({})", p.pid, p.command))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The running descendants of `root`. Zombies among the agent's own children
/// are reaped on the way (the agent adopted them, nobody else will).
fn descendants(root: i32) -> Vec<Process> {
    let mut children: BTreeMap<i32, Vec<(i32, bool)>> = BTreeMap::new();
    for pid in pids() {
        if let Some((state, parent)) = stat(pid) {
            children
                .entry(parent)
                .or_default()
                .push((pid, state == 'Z'));
        }
    }
    let mut found = Vec::new();
    let mut queue = vec![root];
    while let Some(parent) = queue.pop() {
        for &(pid, zombie) in children.get(&parent).map_or(&[][..], Vec::as_slice) {
            if zombie {
                if parent == root {
                    let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
                }
            } else {
                found.push(pid);
                queue.push(pid);
            }
        }
    }
    found.into_iter().map(process).collect()
}

/// Whether the agent has any child, running or not yet reaped (`waitid(2)` fails with
/// `ECHILD` only when there is none; `WNOWAIT` leaves an exited one to be reaped as before).
fn has_children() -> bool {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    !matches!(
        nix::sys::wait::waitid(nix::sys::wait::Id::All, flags),
        Err(nix::errno::Errno::ECHILD)
    )
}

/// Every pid in `/proc`.
fn pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
}

/// State and parent of `pid` (`/proc/<pid>/stat`: the fields after the command name, which
/// may itself hold spaces and parentheses).
fn stat(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

fn process(pid: i32) -> Process {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    let command = if words.is_empty() {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|c| c.trim_end().to_owned())
            .unwrap_or_default()
    } else {
        words.join(" ")
    };
    Process { pid, command }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exited_child_counts_as_a_child_and_stays_to_be_reaped() {
        let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
        // Wait for it to exit without reaping it.
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
        nix::sys::wait::waitid(nix::sys::wait::Id::Pid(pid), flags).unwrap();
        assert!(has_children());
        assert!(child.wait().unwrap().success(), "still there to be reaped");
    }

    #[test]
    fn describes_processes_by_pid_and_command() {
        let ps = [
            Process {
                pid: 12,
                command: "sleep 30".into(),
            },
            Process {
                pid: 13,
                command: "sh -c x".into(),
            },
        ];
        assert_eq!(describe(&ps), "12 (sleep 30), 13 (sh -c x)");
    }

    #[test]
    fn a_pipe_is_still_held_while_a_write_end_is_open() {
        let (held_r, held_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (gone_r, gone_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        drop(gone_w);
        let ino = fstat(&held_r).unwrap().st_ino;
        assert_eq!(still_held(&[held_r, gone_r]), [ino]);
        drop(held_w);
    }

    #[test]
    fn finds_the_processes_holding_a_pipe() {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let ino = nix::sys::stat::fstat(&r).unwrap().st_ino;
        let mut child = std::process::Command::new("/bin/sleep")
            .arg("30")
            .stdout(std::process::Stdio::from(w))
            .spawn()
            .unwrap();
        let found = holding_pipes(&[ino]);
        let _ = child.kill();
        let _ = child.wait();
        let pid = i32::try_from(child.id()).unwrap();
        // Other tests of this binary fork meanwhile, and a forked child holds every descriptor
        // until its exec: only the sleep is asked for, and the test process itself.
        assert!(
            found.contains(&Process {
                pid,
                command: "/bin/sleep 30".into()
            }),
            "{found:?}"
        );
        let own = i32::try_from(std::process::id()).unwrap();
        assert!(
            found.iter().all(|p| p.pid != own),
            "the agent's own end is not counted: {found:?}"
        );
    }
}
