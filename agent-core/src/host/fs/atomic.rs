//! The agent's one atomic replace and its one temp-name scheme (SPEC §5): how a state file or
//! a host file pre-flight copies is replaced, how its temp files are named and recognised,
//! and how the ones a killed writer left are cleaned.

use std::collections::hash_map::RandomState;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use nix::errno::Errno;
use nix::fcntl::{self, AtFlags, OFlag};
use nix::sys::stat::{self, Mode};
use nix::unistd::{self, UnlinkatFlags};

use super::{
    FILE_MODE, HostFsError, Kind, NAME_MAX, TEMP_INFIX, io_error, io_source, kind_of, set_mode,
    sync_fd,
};

/// Whether `name` is a temp file of an atomic write (`replace_in`: `.<name>.tmp.<pid>.<random>`,
/// also a partial package copy) or one of an earlier release (`is_earlier_temp_name`).
/// Readers that list directories must skip these.
pub fn is_temp_name(name: &str) -> bool {
    is_current_temp_name(name) || is_earlier_temp_name(name)
}

/// `.skyhook-tmp-<pid>-<n>` and `.skyhook-partial-<pid>-<n>`: the temp files and partial
/// package copies of earlier releases' pre-flight.
pub(crate) fn is_earlier_temp_name(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix(".skyhook-tmp-")
        .or_else(|| name.strip_prefix(".skyhook-partial-"))
    else {
        return false;
    };
    rest.split_once('-').is_some_and(|(pid, n)| {
        [pid, n]
            .iter()
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// `.<name>.tmp.<pid>.<random>`: this release's scheme ([`temp_name`]).
pub(super) fn is_current_temp_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    let Some(infix) = rest.rfind(TEMP_INFIX) else {
        return false;
    };
    let Some((pid, random)) = rest[infix + TEMP_INFIX.len()..].split_once('.') else {
        return false;
    };
    !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && !random.is_empty()
        && random.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `name` is a temp file of [`HostFs::write_atomic`] (or a pre-flight copy) for
/// `target`: the target part may be shortened to fit `NAME_MAX` (see [`temp_name`]).
pub(crate) fn is_temp_name_of(name: &str, target: &str) -> bool {
    if !is_current_temp_name(name) {
        return false;
    }
    let infix = name.rfind(TEMP_INFIX).expect("a temp name has the infix");
    let shown = &name[1..infix];
    // A shortened target leaves the whole name within a UTF-8 character (3 bytes) of NAME_MAX.
    shown == target || (target.starts_with(shown) && name.len() + 3 >= NAME_MAX)
}

/// How durable a replacement must be: whether the file and its directory are fsynced, and
/// whether a failed fsync of the directory after the rename fails the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DirSync {
    /// Agent state (SPEC §5): a replacement that may not survive a crash is an error.
    Required,
    /// Host files the pre-flight copies: some filesystems refuse to fsync a directory, and
    /// the data itself was synced.
    BestEffort,
    /// Diagnostics (results records, metrics; SPEC §8.12): still an atomic rename, but no
    /// fsync at all; after a crash the previous content, or none, may come back.
    Never,
}

/// The one atomic replace of the agent (SPEC §5), for state and for the host files pre-flight
/// copies: `write` fills a temp file created in `dir` (`.<name>.tmp.<pid>.<random>`, mode
/// `mode`, never an existing entry), which is fsynced and renamed over `name`; then `dir` is
/// fsynced. On failure the temp file is removed and the previous content stays. `dir_host` and
/// the error messages name the directory as a host path.
pub(crate) fn replace_in(
    dir: &OwnedFd,
    dir_host: &Path,
    name: &OsStr,
    mode: u32,
    dir_sync: DirSync,
    write: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<(), HostFsError> {
    let host = dir_host.join(name);
    let (temp, mut file) = create_temp(dir, name, mode, &host)?;
    let written = write(&mut file)
        .map_err(|source| io_source("writing", &host, source))
        .and_then(|()| {
            if dir_sync == DirSync::Never {
                return Ok(());
            }
            file.sync_all()
                .map_err(|source| io_source("syncing", &host, source))
        })
        .and_then(|()| {
            fcntl::renameat(dir, temp.as_os_str(), dir, name)
                .map_err(|errno| io_error("replacing", &host, errno))
        });
    if let Err(err) = written {
        // The target was never touched; only our temp file has to go.
        let _ = unistd::unlinkat(dir, temp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        return Err(err);
    }
    // If only this fsync fails the new content is already in place; the error still reaches
    // the caller because the replacement may not survive a crash.
    match dir_sync {
        DirSync::Never => Ok(()),
        DirSync::Required => sync_fd(dir, dir_host),
        DirSync::BestEffort => {
            let _ = sync_fd(dir, dir_host);
            Ok(())
        }
    }
}

/// Create the temp file for `name` in `dir`: `.<name>.tmp.<pid>.<random>`, `mode`, never an
/// existing entry.
pub(super) fn create_temp(
    dir: &OwnedFd,
    name: &OsStr,
    mode: u32,
    host: &Path,
) -> Result<(OsString, File), HostFsError> {
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    loop {
        let temp = temp_name(name);
        match fcntl::openat(
            dir,
            temp.as_os_str(),
            flags,
            Mode::from_bits_truncate(FILE_MODE),
        ) {
            Ok(fd) => {
                if let Err(err) = set_mode(&fd, mode, host) {
                    let _ = unistd::unlinkat(dir, temp.as_os_str(), UnlinkatFlags::NoRemoveDir);
                    return Err(err);
                }
                return Ok((temp, File::from(fd)));
            }
            Err(Errno::EEXIST) => {}
            Err(errno) => return Err(io_error("creating temporary file for", host, errno)),
        }
    }
}

/// Remove what killed writers left in `dir` (an open directory, `dir_host` as a host path):
/// the entries `select` accepts that are at least `min_age` old, files and directories (a
/// partial package copy) alike; a link is never one of ours. Younger ones may belong to a
/// writer that is still running. Best effort: failures are logged at debug level and skipped.
/// Returns how many were removed.
pub(crate) fn remove_stale_temps(
    dir: &OwnedFd,
    dir_host: &Path,
    select: impl Fn(&str) -> bool,
    min_age: Duration,
) -> usize {
    let mut names = Vec::new();
    if let Err(errno) = list_fd(dir, |name| {
        if select(name) {
            names.push(name.to_owned());
        }
    }) {
        tracing::debug!(dir = %dir_host.display(), error = %errno, "cannot list directory for stale temp files");
        return 0;
    }
    let now = SystemTime::now();
    let mut removed = 0;
    for name in names {
        let host = dir_host.join(&name);
        let stat = match stat::fstatat(dir, name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(errno) => {
                tracing::debug!(file = %host.display(), error = %errno, "cannot inspect temp file");
                continue;
            }
        };
        let modified = SystemTime::UNIX_EPOCH
            + Duration::new(
                u64::try_from(stat.st_mtime).unwrap_or(0),
                u32::try_from(stat.st_mtime_nsec).unwrap_or(0),
            );
        if now.duration_since(modified).unwrap_or_default() < min_age {
            continue;
        }
        let result = match kind_of(stat.st_mode) {
            Kind::File | Kind::Other(_) => {
                unistd::unlinkat(dir, name.as_str(), UnlinkatFlags::NoRemoveDir)
            }
            Kind::Dir => remove_tree_at(dir, OsStr::new(&name)),
            Kind::Symlink => continue,
        };
        match result {
            Ok(()) => {
                removed += 1;
                tracing::debug!(file = %host.display(), "removed a stale temp file");
            }
            Err(errno) => {
                tracing::debug!(file = %host.display(), error = %errno, "cannot remove stale temp file");
            }
        }
    }
    if removed > 0 {
        let _ = sync_fd(dir, dir_host);
    }
    removed
}

/// Call `visit` with every entry name of an open directory (UTF-8 names only).
pub(super) fn list_fd(dir: &OwnedFd, mut visit: impl FnMut(&str)) -> Result<(), Errno> {
    list_names(dir, |name| {
        if let Some(name) = name.to_str() {
            visit(name);
        }
    })
}

/// Call `visit` with every entry name of an open directory but `.` and `..`.
fn list_names(dir: &OwnedFd, mut visit: impl FnMut(&OsStr)) -> Result<(), Errno> {
    let mut stream = nix::dir::Dir::from_fd(dir.try_clone().map_err(|_| Errno::EBADF)?)?;
    for entry in stream.iter() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            visit(OsStr::from_bytes(name));
        }
    }
    Ok(())
}

/// `rm -r` of the directory `name` in `parent`, never following a link.
pub(crate) fn remove_tree_at(parent: &OwnedFd, name: &OsStr) -> Result<(), Errno> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let dir = fcntl::openat(parent, name, flags, Mode::empty())?;
    let mut entries = Vec::new();
    list_names(&dir, |name| entries.push(name.to_os_string()))?;
    for entry in entries {
        let stat = stat::fstatat(&dir, entry.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
        if kind_of(stat.st_mode) == Kind::Dir {
            remove_tree_at(&dir, &entry)?;
        } else {
            unistd::unlinkat(&dir, entry.as_os_str(), UnlinkatFlags::NoRemoveDir)?;
        }
    }
    unistd::unlinkat(parent, name, UnlinkatFlags::RemoveDir)
}

/// `.<name>.tmp.<pid>.<random>`, with `<name>` shortened so the whole stays within
/// `NAME_MAX`: legacy marker names may themselves be close to 255 bytes (SPEC §8.7).
pub(crate) fn temp_name(target: &OsStr) -> OsString {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    hasher.write_u128(nanos);
    let suffix = format!(
        "{TEMP_INFIX}{}.{:016x}",
        std::process::id(),
        hasher.finish()
    );

    let budget = NAME_MAX - 1 - suffix.len();
    let bytes = target.as_bytes();
    let mut keep = bytes.len().min(budget);
    // Cut on a character boundary so the temp name stays UTF-8 and `list_dir` (hence
    // `clean_stale_temps`) can still see it.
    if let Ok(text) = std::str::from_utf8(bytes) {
        while !text.is_char_boundary(keep) {
            keep -= 1;
        }
    }
    let mut name = OsString::from(".");
    name.push(OsStr::from_bytes(&bytes[..keep]));
    name.push(suffix);
    name
}
