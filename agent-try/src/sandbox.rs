//! The sandbox of `agent try`: namespaces, the overlay, `/proc`, `/dev`, `/sys`, and a root of
//! its own.
//!
//! Every host directory the sandbox shows is a read-only bind; the stages then run confined
//! ([`super::confine`]), where those mounts are locked read-only. Any missing kernel feature
//! stops the setup with one line naming it; there is no fallback that would run a step on the
//! real root.

use std::fs;
use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::Signal;
use nix::unistd::{ForkResult, fork, pivot_root};

use super::layout::{
    AGENT_EXE, CONFIGMAPS, DEVICES, HOST_DIRS, LOWER, MERGED, OUT, PACKAGE, UPPER, WORK,
};
use super::mounts::{bind, bind_read_only, make_private, mkdir, mount_proc, tmpfs};
use super::report::Report;
use super::{Spec, lifecycle, wait};

/// The sandbox process: unshare the namespaces, then fork the PID namespace's init and wait
/// for it. Returns the exit code for `agent try` (init's, or 128 + the signal that killed it).
/// `document` makes the report a JSON document.
pub(crate) fn enter(spec_file: &Path, document: fn(&Report) -> String) -> u8 {
    start_init(spec_file, document).unwrap_or_else(|e| setup_failed(&e))
}

fn start_init(spec_file: &Path, document: fn(&Report) -> String) -> Result<u8, String> {
    let spec: Spec = fs::read(spec_file)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        .map_err(|e| format!("reading {}: {e}", spec_file.display()))?;
    unshare_all(&spec)?;
    let (guard_r, guard_w) = nix::unistd::pipe().map_err(|e| format!("pipe: {e}"))?;
    // SAFETY: this process is single-threaded (started by exec, no runtime yet), so the child
    // may run any code after fork.
    match unsafe { fork() } {
        Err(e) => Err(format!(
            "fork of the sandbox's init (new PID namespace): {e}"
        )),
        Ok(ForkResult::Child) => {
            drop(guard_w);
            // Die with the sandbox process (which dies with `agent try`); and if it is already
            // gone, the write end of the pipe is closed: stop before doing anything.
            if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err() || parent_gone(&guard_r) {
                std::process::exit(1);
            }
            drop(guard_r);
            let code = init(&spec, document).unwrap_or_else(|e| setup_failed(&e).into());
            std::process::exit(code);
        }
        Ok(ForkResult::Parent { child }) => {
            drop(guard_r);
            wait(child).map_err(|e| format!("waiting for the sandbox: {e}"))
        }
    }
}

fn setup_failed(msg: &str) -> u8 {
    super::setup_failed("create the sandbox", msg)
}

/// Whether the write end of the guard pipe is closed (the parent died).
fn parent_gone(read: &std::os::fd::OwnedFd) -> bool {
    let mut fds = [nix::poll::PollFd::new(
        std::os::fd::AsFd::as_fd(read),
        nix::poll::PollFlags::POLLIN,
    )];
    matches!(nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO), Ok(n) if n > 0)
}

fn unshare_all(spec: &Spec) -> Result<(), String> {
    let uid = nix::unistd::geteuid();
    let gid = nix::unistd::getegid();
    let mut flags = CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS;
    flags.set(CloneFlags::CLONE_NEWUSER, spec.user_namespace);
    flags.set(CloneFlags::CLONE_NEWNET, !spec.network);
    unshare(flags).map_err(|e| {
        let what = if spec.user_namespace {
            "user, mount, PID, IPC and UTS namespaces (not root: this kernel must allow \
             unprivileged user namespaces, e.g. kernel.unprivileged_userns_clone=1 and \
             user.max_user_namespaces > 0)"
        } else {
            "mount, PID, IPC and UTS namespaces"
        };
        format!("unshare of new {what}: {e}")
    })?;
    if spec.user_namespace {
        let write = |file: &str, text: String| {
            fs::write(file, text).map_err(|e| format!("writing {file}: {e}"))
        };
        write("/proc/self/setgroups", "deny".into())?;
        write("/proc/self/uid_map", format!("0 {uid} 1"))?;
        write("/proc/self/gid_map", format!("0 {gid} 1"))?;
    }
    Ok(())
}

/// The sandbox's init: mount everything, pivot into the sandbox's own root, run the
/// lifecycle. Returns its exit code.
fn init(spec: &Spec, document: fn(&Report) -> String) -> Result<i32, String> {
    let _ = nix::unistd::sethostname("agent-try");
    make_private()?;

    let c = spec.scratch.join("c");
    tmpfs(&c, MsFlags::empty(), "mode=0755")
        .map_err(|e| format!("mounting a tmpfs on {}: {e}", c.display()))?;
    let inside = |p: &str| c.join(p.trim_start_matches('/'));
    for dir in [
        LOWER,
        UPPER,
        WORK,
        OUT,
        PACKAGE,
        CONFIGMAPS,
        "/.try/oldroot",
        MERGED,
        "/proc",
        "/dev",
        "/sys",
        "/tmp",
    ] {
        mkdir(&inside(dir))?;
    }
    fs::set_permissions(inside("/tmp"), fs::Permissions::from_mode(0o1777))
        .map_err(|e| format!("chmod {}: {e}", inside("/tmp").display()))?;

    let merged = mount_overlay(spec, &inside)?;
    let dev = mount_dev(&inside)?;
    mount_own_root(spec, &inside)?;
    let created = mount_overlay_specials(spec, &merged, &dev)?;

    nix::unistd::chdir(&c).map_err(|e| format!("chdir {}: {e}", c.display()))?;
    pivot_root(".", ".try/oldroot").map_err(|e| format!("pivot_root into the sandbox: {e}"))?;
    nix::unistd::chdir("/").map_err(|e| format!("chdir /: {e}"))?;
    umount2("/.try/oldroot", MntFlags::MNT_DETACH)
        .map_err(|e| format!("detaching the host's root from the sandbox: {e}"))?;
    let _ = fs::remove_dir("/.try/oldroot");

    Ok(lifecycle::run(spec, &created, document))
}

/// The overlay at MERGED: LOWER bound read-only as its lower layer, the upper layer on the
/// sandbox's tmpfs. Returns MERGED's path before the pivot.
fn mount_overlay(spec: &Spec, inside: &dyn Fn(&str) -> PathBuf) -> Result<PathBuf, String> {
    // The lower layer: one mount (no submounts, as overlayfs sees it), read-only. In a user
    // namespace the mounts below LOWER are locked to it (mount_namespaces(7)): neither a bind
    // without them nor overlayfs (which clones its layers) can take it.
    let initial = initial_user_namespace();
    bind_read_only(&spec.lower, &inside(LOWER), false).map_err(|e| {
        if initial {
            e
        } else {
            format!(
                "{e}: without root, the lower root {} must have no mounts below it (use \
                 --root DIR, or run as root)",
                spec.lower.display()
            )
        }
    })?;
    // In a user namespace, overlayfs must keep its metadata (opaque directories) in user.*
    // xattrs (`userxattr`, Linux 5.11+): without it, removing a lower directory fails with EIO.
    let options = format!(
        "lowerdir={},upperdir={},workdir={}{}",
        inside(LOWER).display(),
        inside(UPPER).display(),
        inside(WORK).display(),
        if initial { "" } else { ",userxattr" }
    );
    let merged = inside(MERGED);
    // nodev: a device node made in the sandbox (mknod) opens nothing; /dev is bound below.
    mount(
        Some("overlay"),
        &merged,
        Some("overlay"),
        MsFlags::MS_NODEV,
        Some(options.as_str()),
    )
    .map_err(|e| {
        let hint = if initial {
            ""
        } else {
            " (without root it needs Linux 5.11+ and unprivileged overlayfs in user namespaces)"
        };
        format!(
            "mounting overlayfs over {}: {e}: this kernel or user cannot mount overlayfs \
             here{hint}",
            spec.lower.display()
        )
    })?;

    Ok(merged)
}

/// A minimal /dev, shared by the sandbox's root and the overlay. Returns its path.
fn mount_dev(inside: &dyn Fn(&str) -> PathBuf) -> Result<PathBuf, String> {
    let dev = inside("/dev");
    tmpfs(&dev, MsFlags::MS_NOEXEC, "mode=0755")
        .map_err(|e| format!("mounting a tmpfs on the sandbox's /dev: {e}"))?;
    for name in DEVICES {
        let host = Path::new("/dev").join(name);
        if !host.exists() {
            continue;
        }
        let node = dev.join(name);
        fs::write(&node, b"").map_err(|e| format!("creating {}: {e}", node.display()))?;
        // Read-only: the node still opens for writing, its inode (mode, owner) stays the host's.
        bind_read_only(&host, &node, false)?;
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        symlink(target, dev.join(name))
            .map_err(|e| format!("creating /dev/{name} in the sandbox: {e}"))?;
    }
    mkdir(&dev.join("shm"))?;
    tmpfs(&dev.join("shm"), MsFlags::empty(), "mode=1777")
        .map_err(|e| format!("mounting /dev/shm in the sandbox: {e}"))?;

    Ok(dev)
}

/// The sandbox's own root: the host's libraries and tools, /proc, /sys, the output
/// directory, the package, the configMaps and the agent's executable.
fn mount_own_root(spec: &Spec, inside: &dyn Fn(&str) -> PathBuf) -> Result<(), String> {
    // The host's libraries and tools, read-only.
    for name in HOST_DIRS {
        let host = Path::new("/").join(name);
        let Ok(meta) = fs::symlink_metadata(&host) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&host).map_err(|e| format!("{}: {e}", host.display()))?;
            symlink(&target, inside(name))
                .map_err(|e| format!("linking {}: {e}", inside(name).display()))?;
        } else if meta.is_dir() {
            mkdir(&inside(name))?;
            bind_read_only(&host, &inside(name), true)?;
        }
    }
    mount_proc(&inside("/proc"))?;
    bind_read_only(Path::new("/sys"), &inside("/sys"), true)?;
    bind(&spec.out, &inside(OUT), false)?;
    bind_read_only(&spec.package_dir, &inside(PACKAGE), false)?;
    bind_read_only(&spec.scratch.join("configmaps"), &inside(CONFIGMAPS), false)?;
    let exe = inside(AGENT_EXE);
    fs::write(&exe, b"").map_err(|e| format!("creating {}: {e}", exe.display()))?;
    bind_read_only(&own_executable()?, &exe, false)?;

    Ok(())
}

/// The overlay's /proc, /dev and /sys. Mount points missing from the lower layer are
/// created in the upper layer and returned (the report leaves them out).
fn mount_overlay_specials(spec: &Spec, merged: &Path, dev: &Path) -> Result<Vec<String>, String> {
    let mut created = Vec::new();
    for name in ["proc", "dev", "sys"] {
        let p = merged.join(name);
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "/{name} in the lower root {} is not a directory",
                    spec.lower.display()
                ));
            }
            Err(_) => {
                mkdir(&p)?;
                created.push(format!("/{name}"));
            }
        }
    }
    mount_proc(&merged.join("proc"))?;
    bind(dev, &merged.join("dev"), true)?;
    bind_read_only(Path::new("/sys"), &merged.join("sys"), true)?;

    Ok(created)
}

/// This process's executable as a path of this mount namespace (the magic link names a mount
/// of the namespace it was started in, which a bind cannot take), and still the same file.
fn own_executable() -> Result<PathBuf, String> {
    use std::os::unix::fs::MetadataExt as _;
    let path =
        fs::read_link("/proc/self/exe").map_err(|e| format!("reading /proc/self/exe: {e}"))?;
    let same = |a: &fs::Metadata, b: &fs::Metadata| a.dev() == b.dev() && a.ino() == b.ino();
    match (fs::metadata("/proc/self/exe"), fs::metadata(&path)) {
        (Ok(running), Ok(named)) if same(&running, &named) => Ok(path),
        _ => Err(format!(
            "the agent's executable {} was replaced since it started",
            path.display()
        )),
    }
}

/// Whether this process is in the initial user namespace (its uid map is the identity).
fn initial_user_namespace() -> bool {
    fs::read_to_string("/proc/self/uid_map")
        .is_ok_and(|m| m.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"])
}
