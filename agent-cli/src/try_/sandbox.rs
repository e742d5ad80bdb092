//! The sandbox of `agent try`: namespaces, the overlay, `/proc`, `/dev`, `/sys`, and a root of
//! its own.
//!
//! Any missing kernel feature stops the setup with one line naming it; there is no fallback
//! that would run a step on the real root.

use std::ffi::CString;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, fork, pivot_root};

use super::{SETUP_FAILED, Spec, lifecycle};

/// Inside the sandbox's own root: the overlay the stages run on (their ROOT_MOUNT).
pub(crate) const MERGED: &str = "/root";
/// Inside the sandbox's own root: the lower layer (a read-only bind), the upper layer, the
/// output directory and the package as given.
pub(crate) const LOWER: &str = "/.try/lower";
pub(crate) const UPPER: &str = "/.try/upper";
pub(crate) const OUT: &str = "/.try/out";
pub(crate) const PACKAGE: &str = "/.try/package";
pub(crate) const CONFIGMAPS: &str = "/.try/configmaps";
/// The simulated boot ID file, bind-mounted over the sandbox's `/proc/sys/kernel/random/boot_id`.
pub(crate) const BOOT_ID: &str = "/.try/boot_id";

/// Host directories the sandbox's own root shows read-only (the agent binary's libraries, and
/// a shell for steps with `on_host: false`).
const HOST_DIRS: &[&str] = &[
    "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc",
];

/// Device nodes of the minimal `/dev`, bound from the host's.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// The sandbox process: unshare the namespaces, then fork the PID namespace's init and wait
/// for it. Returns the exit code for `agent try` (init's, or 128 + the signal that killed it).
pub(crate) fn enter(spec_file: &Path) -> u8 {
    let spec: Spec = match fs::read(spec_file)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => return setup_failed(&format!("reading {}: {e}", spec_file.display())),
    };
    if let Err(e) = unshare_all(&spec) {
        return setup_failed(&e);
    }
    let (guard_r, guard_w) = match nix::unistd::pipe() {
        Ok(p) => p,
        Err(e) => return setup_failed(&format!("pipe: {e}")),
    };
    // SAFETY: this process is single-threaded (started by exec, no runtime yet), so the child
    // may run any code after fork.
    match unsafe { fork() } {
        Err(e) => setup_failed(&format!(
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
            let code = match init(&spec) {
                Ok(code) => code,
                Err(e) => {
                    setup_failed(&e);
                    SETUP_FAILED
                }
            };
            std::process::exit(code);
        }
        Ok(ForkResult::Parent { child }) => {
            drop(guard_r);
            loop {
                match waitpid(child, None) {
                    Ok(WaitStatus::Exited(_, code)) => {
                        return u8::try_from(code).unwrap_or(1);
                    }
                    Ok(WaitStatus::Signaled(_, sig, _)) => {
                        return u8::try_from(128 + sig as i32).unwrap_or(1);
                    }
                    Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return setup_failed(&format!("waiting for the sandbox: {e}")),
                }
            }
        }
    }
}

fn setup_failed(msg: &str) -> u8 {
    let _ = writeln!(
        std::io::stderr(),
        "agent try: cannot create the sandbox: {msg}; nothing was run"
    );
    u8::try_from(SETUP_FAILED).unwrap_or(1)
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
    if spec.user_namespace {
        flags |= CloneFlags::CLONE_NEWUSER;
    }
    if !spec.network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
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
fn init(spec: &Spec) -> Result<i32, String> {
    let _ = nix::unistd::sethostname("agent-try");
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("making the mounts private (mount --make-rprivate /): {e}"))?;

    let c = spec.scratch.join("c");
    mount(
        Some("tmpfs"),
        &c,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755"),
    )
    .map_err(|e| format!("mounting a tmpfs on {}: {e}", c.display()))?;
    let inside = |p: &str| c.join(p.trim_start_matches('/'));
    for dir in [
        LOWER,
        UPPER,
        "/.try/work",
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

    // The lower layer: one mount (no submounts, as overlayfs sees it), read-only.
    bind(&spec.lower, &inside(LOWER), false)?;
    read_only(&inside(LOWER))?;
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        inside(LOWER).display(),
        inside(UPPER).display(),
        inside("/.try/work").display()
    );
    let merged = inside(MERGED);
    // In a user namespace, overlayfs must keep its metadata (opaque directories) in user.*
    // xattrs (`userxattr`, Linux 5.11+): without it, removing a lower directory fails with EIO.
    let initial = initial_user_namespace();
    let options = if initial {
        options
    } else {
        format!("{options},userxattr")
    };
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

    // A minimal /dev, shared by the sandbox's root and the overlay.
    let dev = inside("/dev");
    mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC | MsFlags::MS_NODEV,
        Some("mode=0755"),
    )
    .map_err(|e| format!("mounting a tmpfs on the sandbox's /dev: {e}"))?;
    for name in DEVICES {
        let host = Path::new("/dev").join(name);
        if !host.exists() {
            continue;
        }
        let node = dev.join(name);
        fs::write(&node, b"").map_err(|e| format!("creating {}: {e}", node.display()))?;
        bind(&host, &node, false)?;
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
    mount(
        Some("tmpfs"),
        &dev.join("shm"),
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=1777"),
    )
    .map_err(|e| format!("mounting /dev/shm in the sandbox: {e}"))?;

    // The sandbox's own root: the host's libraries and tools, read-only.
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
            bind(&host, &inside(name), true)?;
            read_only(&inside(name))?;
        }
    }
    mount_proc(&inside("/proc"))?;
    bind(Path::new("/sys"), &inside("/sys"), true)?;
    read_only(&inside("/sys"))?;
    bind(&spec.out, &inside(OUT), false)?;
    bind(&spec.package_dir, &inside(PACKAGE), false)?;
    read_only(&inside(PACKAGE))?;
    bind(&spec.scratch.join("configmaps"), &inside(CONFIGMAPS), false)?;
    read_only(&inside(CONFIGMAPS))?;

    // The overlay's /proc, /dev and /sys. Mount points missing from the lower layer are
    // created in the upper layer; the report leaves them out.
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
    bind(&dev, &merged.join("dev"), true)?;
    bind(Path::new("/sys"), &merged.join("sys"), true)?;
    read_only(&merged.join("sys"))?;

    nix::unistd::chdir(&c).map_err(|e| format!("chdir {}: {e}", c.display()))?;
    pivot_root(".", ".try/oldroot").map_err(|e| format!("pivot_root into the sandbox: {e}"))?;
    nix::unistd::chdir("/").map_err(|e| format!("chdir /: {e}"))?;
    umount2("/.try/oldroot", MntFlags::MNT_DETACH)
        .map_err(|e| format!("detaching the host's root from the sandbox: {e}"))?;
    let _ = fs::remove_dir("/.try/oldroot");

    Ok(lifecycle::run(spec, &created))
}

/// Whether this process is in the initial user namespace (its uid map is the identity).
fn initial_user_namespace() -> bool {
    fs::read_to_string("/proc/self/uid_map")
        .is_ok_and(|m| m.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"])
}

/// A fresh procfs of the sandbox's PID namespace, with `/proc/sys` and `/proc/sysrq-trigger`
/// read-only (a step that loads sysctl values fails instead of changing the host's kernel).
fn mount_proc(target: &Path) -> Result<(), String> {
    mount(
        Some("proc"),
        target,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| format!("mounting a fresh /proc at {}: {e}", target.display()))?;
    for sub in ["sys", "sysrq-trigger"] {
        let p = target.join(sub);
        if p.exists() {
            bind(&p, &p, false)?;
            read_only(&p)?;
        }
    }
    Ok(())
}

fn mkdir(p: &Path) -> Result<(), String> {
    match fs::DirBuilder::new().recursive(true).mode(0o755).create(p) {
        Ok(()) => Ok(()),
        Err(e) => Err(format!("creating {}: {e}", p.display())),
    }
}

fn bind(source: &Path, target: &Path, recursive: bool) -> Result<(), String> {
    let mut flags = MsFlags::MS_BIND;
    if recursive {
        flags |= MsFlags::MS_REC;
    }
    mount(Some(source), target, None::<&str>, flags, None::<&str>).map_err(|e| {
        format!(
            "bind-mounting {} on {}: {e}",
            source.display(),
            target.display()
        )
    })
}

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Make the mount at `target` and every mount below it read-only (mount_setattr(2), Linux
/// 5.12+).
fn read_only(target: &Path) -> Result<(), String> {
    const MOUNT_ATTR_RDONLY: u64 = 1;
    let path = CString::new(target.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: path holds a NUL byte", target.display()))?;
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `path` is a valid C string and `attr` a valid `struct mount_attr` of the size
    // passed; the kernel only reads both.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE,
            std::ptr::from_ref(&attr),
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "making {} read-only (mount_setattr, Linux 5.12+): {}",
            target.display(),
            std::io::Error::last_os_error()
        ))
    }
}

/// Replace the sandbox's boot ID with `id` (a simulated reboot): bind a file holding it over
/// `<MERGED>/proc/sys/kernel/random/boot_id`. Runs in the sandbox's init, after the pivot.
pub(crate) fn set_boot_id(id: &str) -> Result<(), String> {
    fs::write(BOOT_ID, format!("{id}\n")).map_err(|e| format!("writing {BOOT_ID}: {e}"))?;
    let target = PathBuf::from(MERGED).join("proc/sys/kernel/random/boot_id");
    bind(Path::new(BOOT_ID), &target, false)
}
