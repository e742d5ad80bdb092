//! The trees pre-flight copies: scanning a source (following links, refusing cycles and
//! special files), copying package data into a fresh directory, overlaying `root_dir` onto the
//! host, and replacing one file atomically with the agent's one atomic write.

use std::ffi::OsString;
use std::fs::{self, DirBuilder, File, OpenOptions, Permissions};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::{PreflightError, Resolved, resolve_in_root};
use crate::host::fs::{self as hostfs, DirSync, HostFsError};

/// A file or directory of a source tree, found by [`scan_tree`].
#[derive(Debug)]
pub(super) struct Entry {
    /// Relative to the tree's top.
    rel: PathBuf,
    /// The real source path (links not resolved; opening it follows them).
    source: PathBuf,
    is_dir: bool,
    /// Permission bits without setuid/setgid/sticky (SPEC §5).
    mode: u32,
}

/// Every entry below `top`, parents before children, siblings by name. Links are followed;
/// a link back to a directory being walked is a cycle, and anything that is neither a regular
/// file nor a directory is refused.
pub(super) fn scan_tree(top: &Path) -> Result<Vec<Entry>, PreflightError> {
    struct Frame {
        source: PathBuf,
        rel: PathBuf,
        children: std::vec::IntoIter<OsString>,
    }
    let top_meta = stat_source(top)?;
    let mut ancestors = vec![(top_meta.dev(), top_meta.ino())];
    let mut stack = vec![Frame {
        source: top.to_path_buf(),
        rel: PathBuf::new(),
        children: children(top)?,
    }];
    let mut entries = Vec::new();
    while let Some(frame) = stack.last_mut() {
        let Some(name) = frame.children.next() else {
            stack.pop();
            ancestors.pop();
            continue;
        };
        let source = frame.source.join(&name);
        let rel = frame.rel.join(&name);
        let meta = stat_source(&source)?;
        let mode = meta.mode() & 0o777;
        if meta.is_dir() {
            let id = (meta.dev(), meta.ino());
            if ancestors.contains(&id) {
                return Err(PreflightError::SymlinkCycle(source.display().to_string()));
            }
            let frame = Frame {
                source: source.clone(),
                rel: rel.clone(),
                children: children(&source)?,
            };
            entries.push(Entry {
                rel,
                source,
                is_dir: true,
                mode,
            });
            ancestors.push(id);
            stack.push(frame);
        } else if meta.is_file() {
            entries.push(Entry {
                rel,
                source,
                is_dir: false,
                mode,
            });
        } else {
            return Err(PreflightError::Unsupported {
                path: source.display().to_string(),
                kind: kind_name(meta.file_type()),
            });
        }
    }
    Ok(entries)
}

pub(super) fn children(dir: &Path) -> Result<std::vec::IntoIter<OsString>, PreflightError> {
    let read = fs::read_dir(dir).map_err(|e| source_error(dir, e))?;
    let mut names = read
        .map(|entry| entry.map(|e| e.file_name()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| source_error(dir, e))?;
    names.sort();
    Ok(names.into_iter())
}

/// `stat` (following links) of a source path, with cycles and dangling links named as such.
pub(super) fn stat_source(path: &Path) -> Result<fs::Metadata, PreflightError> {
    fs::metadata(path).map_err(|e| source_error(path, e))
}

pub(super) fn source_error(path: &Path, e: io::Error) -> PreflightError {
    let shown = path.display().to_string();
    if e.raw_os_error() == Some(libc::ELOOP) {
        return PreflightError::SymlinkCycle(shown);
    }
    if e.kind() == io::ErrorKind::NotFound
        && fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
    {
        return PreflightError::Other(format!("{shown} is a dangling symbolic link"));
    }
    PreflightError::Io {
        op: "reading",
        path: shown,
        source: e,
    }
}

/// Accept only "nothing there" from a failed `stat` of a path that may be created.
pub(super) fn check_absent(path: &Path, host: &str, e: io::Error) -> Result<(), PreflightError> {
    if e.raw_os_error() == Some(libc::ELOOP) {
        return Err(PreflightError::SymlinkCycle(host.to_owned()));
    }
    if e.kind() != io::ErrorKind::NotFound {
        return Err(PreflightError::Io {
            op: "inspecting",
            path: host.to_owned(),
            source: e,
        });
    }
    if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(PreflightError::Other(format!(
            "{host} is a dangling symbolic link"
        )));
    }
    Ok(())
}

/// Copy entries into `dest_top`, a directory this run created (so nothing in it is a link).
/// Files replace files (the node-files merge); directories are recorded in `dirs` with their
/// final modes, applied once everything is written.
pub(super) fn copy_entries(
    entries: &[Entry],
    dest_top: &Path,
    host_top: &str,
    dirs: &mut Vec<(PathBuf, String, u32)>,
) -> Result<(), PreflightError> {
    for entry in entries {
        let dest = dest_top.join(&entry.rel);
        let host = format!("{host_top}/{}", entry.rel.display());
        let existing = match fs::symlink_metadata(&dest) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_error("inspecting", &host)(e)),
        };
        match (entry.is_dir, existing) {
            (true, None) => {
                DirBuilder::new()
                    .mode(0o700)
                    .create(&dest)
                    .map_err(io_error("creating directory", &host))?;
                dirs.push((dest, host, entry.mode));
            }
            (true, Some(meta)) if meta.is_dir() => dirs.push((dest, host, entry.mode)),
            (false, None) => replace_file(&entry.source, &dest, entry.mode, &host)?,
            (false, Some(meta)) if meta.is_file() => {
                replace_file(&entry.source, &dest, entry.mode, &host)?;
            }
            (_, Some(meta)) => {
                return Err(PreflightError::Other(format!(
                    "cannot merge {} into {host}: it is {}",
                    entry.source.display(),
                    kind_name(meta.file_type())
                )));
            }
        }
    }
    Ok(())
}

pub(super) fn overlay_entries(
    root: &Path,
    entries: &[Entry],
    created: &mut Vec<(PathBuf, String, u32)>,
) -> Result<(), PreflightError> {
    for entry in entries {
        let components: Vec<OsString> = entry.rel.iter().map(ToOwned::to_owned).collect();
        let dest = resolve_in_root(root, &components)?;
        match (entry.is_dir, &dest.meta) {
            (true, None) => {
                ensure_parent(&dest)?;
                DirBuilder::new()
                    .mode(0o700)
                    .create(&dest.real)
                    .map_err(io_error("creating directory", &dest.host))?;
                created.push((dest.real, dest.host, entry.mode));
            }
            // Reused as is: the host owns the modes of its existing directories.
            (true, Some(meta)) if meta.is_dir() => {}
            (false, None) => {
                ensure_parent(&dest)?;
                replace_file(&entry.source, &dest.real, entry.mode, &dest.host)?;
            }
            (false, Some(meta)) if meta.is_file() => {
                replace_file(&entry.source, &dest.real, entry.mode, &dest.host)?;
            }
            (_, Some(meta)) => {
                return Err(PreflightError::Other(format!(
                    "cannot overlay {} onto {}: it is {}",
                    entry.source.display(),
                    dest.host,
                    kind_name(meta.file_type())
                )));
            }
        }
    }
    Ok(())
}

/// Create the missing parents of a resolved destination (only a link into a missing
/// directory gets here with one missing), 0755.
pub(super) fn ensure_parent(dest: &Resolved) -> Result<(), PreflightError> {
    match dest.real.parent() {
        Some(parent) if fs::symlink_metadata(parent).is_err() => {
            let host = Path::new(&dest.host)
                .parent()
                .map_or_else(|| "/".to_owned(), |p| p.display().to_string());
            create_dirs(parent, 0o755, &host)
        }
        _ => Ok(()),
    }
}

/// `mkdir -p` with `mode` for the directories it creates (the umask does not apply).
pub(super) fn create_dirs(path: &Path, mode: u32, host: &str) -> Result<(), PreflightError> {
    let mut missing = Vec::new();
    let mut cursor = Some(path);
    while let Some(dir) = cursor {
        if fs::symlink_metadata(dir).is_ok() {
            break;
        }
        missing.push(dir);
        cursor = dir.parent();
    }
    DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(path)
        .map_err(io_error("creating directory", host))?;
    for dir in missing {
        fs::set_permissions(dir, Permissions::from_mode(mode))
            .map_err(io_error("setting the mode of", host))?;
    }
    Ok(())
}

pub(super) fn apply_dir_modes(dirs: &[(PathBuf, String, u32)]) -> Result<(), PreflightError> {
    let mut first_error = None;
    // Children first, so a parent made read-only cannot get in the way of a non-root caller.
    for (dir, host, mode) in dirs.iter().rev() {
        if let Err(e) = fs::set_permissions(dir, Permissions::from_mode(*mode)) {
            first_error.get_or_insert(PreflightError::Io {
                op: "setting the mode of",
                path: host.clone(),
                source: e,
            });
        }
        sync_dir(dir);
    }
    first_error.map_or(Ok(()), Err)
}

/// Write `source`'s content to `dest` with exactly `mode`, atomically: a temporary file in the
/// same directory, fsync, then rename. Readers of host files (resolv.conf, daemons' configs)
/// never see a half-written file, and a running binary is replaced rather than rewritten
/// (which would fail with ETXTBSY).
pub(super) fn replace_file(
    source: &Path,
    dest: &Path,
    mode: u32,
    host: &str,
) -> Result<(), PreflightError> {
    let dir = dest.parent().expect("a destination file has a parent");
    // O_NONBLOCK: if a fifo was swapped in after the scan, fail below instead of hanging.
    let mut input = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(source)
        .map_err(|e| source_error(source, e))?;
    let meta = input.metadata().map_err(|e| source_error(source, e))?;
    if !meta.is_file() {
        return Err(PreflightError::Unsupported {
            path: source.display().to_string(),
            kind: kind_name(meta.file_type()),
        });
    }

    let target = dest.file_name().expect("a destination file has a name");
    let write_error = |source: io::Error| PreflightError::Io {
        op: "writing",
        path: host.to_owned(),
        source,
    };
    let dir_fd = open_dir(dir).map_err(write_error)?;
    clean_stale_copies_in(&dir_fd, dir, target);
    // The one atomic replace of the agent; the copy keeps the source's permission bits.
    hostfs::replace_in(&dir_fd, dir, target, mode, DirSync::BestEffort, |output| {
        io::copy(&mut input, output).map(drop)
    })
    .map_err(|e| match e {
        HostFsError::Io { source, .. } => write_error(source),
        other => write_error(io::Error::other(other.to_string())),
    })
}

/// SPEC §5: remove what killed copies of `target` left in `dir` — temp files and partial
/// package directories in [`hostfs::temp_name`]'s scheme, and the `.skyhook-tmp-*` /
/// `.skyhook-partial-*` names of earlier releases — once they are old enough that no live
/// writer can own them. Temp files of other targets in a host directory belong to whoever
/// wrote them and are left alone. Best effort.
pub(super) fn clean_stale_copies(dir: &Path, target: &std::ffi::OsStr) {
    if let Ok(fd) = open_dir(dir) {
        clean_stale_copies_in(&fd, dir, target);
    }
}

pub(super) fn clean_stale_copies_in(fd: &OwnedFd, dir: &Path, target: &std::ffi::OsStr) {
    let target = target.to_string_lossy();
    hostfs::remove_stale_temps(
        fd,
        dir,
        |name| hostfs::is_temp_name_of(name, &target) || hostfs::is_earlier_temp_name(name),
        hostfs::STALE_TEMP_AGE,
    );
}

/// Open a directory of a destination (already resolved inside ROOT) for the `*at` calls.
pub(super) fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
        .map(OwnedFd::from)
}

/// Make a rename or a new entry durable. Best effort: some filesystems refuse to fsync a
/// directory, and the data itself has already been synced.
pub(super) fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

pub(super) fn io_error(op: &'static str, host: &str) -> impl FnOnce(io::Error) -> PreflightError {
    let path = host.to_owned();
    move |source| PreflightError::Io { op, path, source }
}

pub(super) fn kind_name(file_type: fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_file() {
        "a regular file"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_fifo() {
        "a fifo"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}
