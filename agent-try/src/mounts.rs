//! Mount primitives of the sandbox (bind, read-only, fresh procfs) and the reader of
//! `/proc/<pid>/mountinfo` its checks use.

use std::ffi::CString;
use std::fs;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};

/// Parts of procfs a step must not write through (SPEC §1.6): kernel settings, the magic
/// SysRq key, interrupt affinities, bus and driver interfaces. Root of the steps' user
/// namespace owns these files (ids mapped one to one), so only the read-only bind stops it.
const PROC_READ_ONLY: &[&str] = &[
    "sys",
    "sysrq-trigger",
    "irq",
    "bus",
    "fs",
    "acpi",
    "scsi",
    "driver",
];

/// `mount --make-rprivate /`: nothing this mount namespace mounts propagates out of it.
pub(crate) fn make_private() -> Result<(), String> {
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("making the mounts private (mount --make-rprivate /): {e}"))
}

pub(crate) fn mkdir(p: &Path) -> Result<(), String> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(p)
        .map_err(|e| format!("creating {}: {e}", p.display()))
}

/// A tmpfs at `target`, `nosuid` and `nodev`, and with `flags`.
pub(crate) fn tmpfs(target: &Path, flags: MsFlags, options: &str) -> nix::Result<()> {
    let flags = flags | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    mount(Some("tmpfs"), target, Some("tmpfs"), flags, Some(options))
}

pub(crate) fn bind(source: &Path, target: &Path, recursive: bool) -> Result<(), String> {
    let mut flags = MsFlags::MS_BIND;
    flags.set(MsFlags::MS_REC, recursive);
    mount(Some(source), target, None::<&str>, flags, None::<&str>).map_err(|e| {
        format!(
            "bind-mounting {} on {}: {e}",
            source.display(),
            target.display()
        )
    })
}

/// A bind of `source` on `target`, read-only with every mount below it.
pub(crate) fn bind_read_only(source: &Path, target: &Path, recursive: bool) -> Result<(), String> {
    bind(source, target, recursive)?;
    set_read_only(target, true, libc::AT_RECURSIVE as libc::c_uint).map_err(|e| {
        format!(
            "making {} read-only (mount_setattr, Linux 5.12+): {e}",
            target.display()
        )
    })
}

/// Make the mount at `target` read-only or writable; with `AT_RECURSIVE` in `flags`, every
/// mount below it too (mount_setattr(2), Linux 5.12+).
fn set_read_only(target: &Path, read_only: bool, flags: libc::c_uint) -> std::io::Result<()> {
    use libc::MOUNT_ATTR_RDONLY as RDONLY;
    let attr = libc::mount_attr {
        attr_set: if read_only { RDONLY } else { 0 },
        attr_clr: if read_only { 0 } else { RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    let path = CString::new(target.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `path` is a valid C string and `attr` a valid `struct mount_attr` of the size
    // passed; the kernel only reads both.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            std::ptr::from_ref(&attr),
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Try to make the mount at `target` writable. A mount that came into a less privileged mount
/// namespace read-only is locked so (mount_namespaces(7)): the kernel answers `EPERM`.
pub(crate) fn try_make_writable(target: &Path) -> std::io::Result<()> {
    set_read_only(target, false, 0)
}

/// Make the single mount at `target` read-only again (after a probe that should have failed).
pub(crate) fn make_read_only_again(target: &Path) -> std::io::Result<()> {
    set_read_only(target, true, 0)
}

/// A fresh procfs of the caller's PID namespace at `target`, with [`PROC_READ_ONLY`]
/// read-only (a step that loads sysctl values fails instead of changing the host's kernel).
pub(crate) fn mount_proc(target: &Path) -> Result<(), String> {
    mount(
        Some("proc"),
        target,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| format!("mounting a fresh /proc at {}: {e}", target.display()))?;
    for sub in PROC_READ_ONLY {
        let p = target.join(sub);
        if p.exists() {
            bind_read_only(&p, &p, false)?;
        }
    }
    Ok(())
}

/// Bind the boot ID file `file` over `<proc>/sys/kernel/random/boot_id`.
pub(crate) fn bind_boot_id(file: &Path, proc: &Path) -> Result<(), String> {
    bind(file, &proc.join("sys/kernel/random/boot_id"), false)
}

/// One line of `/proc/<pid>/mountinfo` (proc_pid_mountinfo(5)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MountEntry {
    pub id: u64,
    /// The superblock's device, `major:minor`.
    pub dev: String,
    /// The mount's root within its filesystem.
    pub root: PathBuf,
    pub mount_point: PathBuf,
    /// The per-mount `ro` option.
    pub read_only: bool,
}

/// The mounts of a mountinfo text; lines that do not parse are left out.
pub(crate) fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split(' ');
            let id = f.next()?.parse().ok()?;
            let _parent = f.next()?;
            let dev = f.next()?.to_owned();
            let root = unescape(f.next()?);
            let mount_point = unescape(f.next()?);
            let read_only = f.next()?.split(',').any(|o| o == "ro");
            Some(MountEntry {
                id,
                dev,
                root,
                mount_point,
                read_only,
            })
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt as _;
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// The ID of the mount `path` is on (statx(2) `STATX_MNT_ID`, Linux 5.8+), links not followed.
pub(crate) fn mount_id(path: &Path) -> std::io::Result<u64> {
    use rustix::fs::{AtFlags, CWD, StatxFlags};
    let stx = rustix::fs::statx(CWD, path, AtFlags::SYMLINK_NOFOLLOW, StatxFlags::MNT_ID)?;
    if stx.stx_mask & StatxFlags::MNT_ID.bits() == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "statx gives no mount ID (Linux 5.8+)",
        ));
    }
    Ok(stx.stx_mnt_id)
}

/// Where an existing path is in its filesystem: the superblock's device and the path from
/// that filesystem's root. Two paths that name the same directory through different mounts
/// (a bind mount alias) have the same location.
pub(crate) fn location(path: &Path, mounts: &[MountEntry]) -> Result<(String, PathBuf), String> {
    let id = mount_id(path).map_err(|e| format!("statx {}: {e}", path.display()))?;
    let m = mounts.iter().find(|m| m.id == id).ok_or_else(|| {
        format!(
            "{}: mount {id} is not in /proc/self/mountinfo",
            path.display()
        )
    })?;
    let rel = path.strip_prefix(&m.mount_point).map_err(|_| {
        format!(
            "{} is not below its mount point {}",
            path.display(),
            m.mount_point.display()
        )
    })?;
    Ok((m.dev.clone(), m.root.join(rel)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_device_root_mount_point_and_read_only() {
        let text = "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw\n\
                    37 36 0:31 / /a\\040b ro,nosuid - tmpfs tmpfs rw\n\
                    garbage\n";
        assert_eq!(
            parse_mountinfo(text),
            [
                MountEntry {
                    id: 36,
                    dev: "98:0".into(),
                    root: "/mnt1".into(),
                    mount_point: "/mnt/parent".into(),
                    read_only: false,
                },
                MountEntry {
                    id: 37,
                    dev: "0:31".into(),
                    root: "/".into(),
                    mount_point: "/a b".into(),
                    read_only: true,
                },
            ]
        );
    }

    #[test]
    fn a_path_is_located_from_its_filesystems_root() {
        let mounts = parse_mountinfo(&fs::read_to_string("/proc/self/mountinfo").unwrap());
        let (dev, path) = location(Path::new("/proc/self"), &mounts).unwrap();
        // The last mount at /proc is the one the path reaches.
        let proc = mounts
            .iter()
            .rev()
            .find(|m| m.mount_point == Path::new("/proc"))
            .unwrap();
        assert_eq!((dev, path), (proc.dev.clone(), PathBuf::from("/self")));
    }
}
