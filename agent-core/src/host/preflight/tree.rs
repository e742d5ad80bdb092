//! The trees pre-flight copies: scanning a source (following links, refusing cycles and
//! special files), copying package data into a fresh directory, overlaying `root_dir` onto the
//! host, and replacing one file atomically with the agent's one atomic write. Destinations are
//! reached and written through descriptors ([`Located`], [`hostfs::open_dir_below`]), never
//! through a path the kernel would resolve again.

use std::ffi::{OsStr, OsString};
use std::fs::{self, OpenOptions, Permissions};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::PreflightError;
use crate::host::fs::{
    self as hostfs, DirSync, HostFs, HostFsError, Kind, Links, Located, Missing,
};

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
        let is_dir = meta.is_dir();
        if is_dir {
            let id = (meta.dev(), meta.ino());
            if ancestors.contains(&id) {
                return Err(PreflightError::SymlinkCycle(source.display().to_string()));
            }
            let frame = Frame {
                source: source.clone(),
                rel: rel.clone(),
                children: children(&source)?,
            };
            ancestors.push(id);
            stack.push(frame);
        } else {
            check_file(&source, &meta)?;
        }
        entries.push(Entry {
            rel,
            source,
            is_dir,
            mode: meta.mode() & 0o777,
        });
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
    stat_error(path, &path.display().to_string(), "reading", e)
}

/// Accept only "nothing there" from a failed `stat` of a path that may be created.
pub(super) fn check_absent(path: &Path, host: &str, e: io::Error) -> Result<(), PreflightError> {
    if e.kind() == io::ErrorKind::NotFound && !is_symlink(path) {
        return Ok(());
    }
    Err(stat_error(path, host, "inspecting", e))
}

fn is_symlink(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// A failed `stat` of `path` (`shown` in messages): a link cycle and a dangling link named as
/// such, anything else the OS error of `op` (`NotFound` only when no link is there).
fn stat_error(path: &Path, shown: &str, op: &'static str, e: io::Error) -> PreflightError {
    if e.raw_os_error() == Some(libc::ELOOP) {
        return PreflightError::SymlinkCycle(shown.to_owned());
    }
    if e.kind() == io::ErrorKind::NotFound && is_symlink(path) {
        return PreflightError::Other(format!("{shown} is a dangling symbolic link"));
    }
    io_error(op, shown)(e)
}

/// A directory whose mode is set once everything is written: where it is (relative to the
/// copy's top, or a host path), its host path for messages, its final mode.
pub(super) type NewDir = (PathBuf, String, u32);

/// Copy entries into `dest_top`, a directory this run created (its entries are reached from
/// its descriptor, refusing links). Files replace files (the node-files merge); directories
/// are recorded in `dirs` with their final modes, applied once everything is written.
pub(super) fn copy_entries(
    entries: &[Entry],
    dest_top: &OwnedFd,
    host_top: &str,
    dirs: &mut Vec<NewDir>,
) -> Result<(), PreflightError> {
    for entry in entries {
        let host = format!("{host_top}/{}", entry.rel.display());
        let (parent_rel, name) = split_rel(&entry.rel);
        let parent = hostfs::open_dir_below(dest_top, Path::new(host_top), parent_rel)?
            .ok_or_else(|| super::missing_dir(host_top, parent_rel))?;
        let dest = Located::entry(&parent, &Path::new(host_top).join(parent_rel), name)?;
        place(entry, &dest, || {
            format!("cannot merge {} into {host}", entry.source.display())
        })?;
        if entry.is_dir {
            dirs.push((entry.rel.clone(), host, entry.mode));
        }
    }
    Ok(())
}

/// `a/b/c` as (`a/b`, `c`).
fn split_rel(rel: &Path) -> (&Path, &OsStr) {
    (
        rel.parent().unwrap_or(Path::new("")),
        rel.file_name().expect("a scanned entry has a name"),
    )
}

/// Overlay entries onto the host as the host sees its paths ([`Links::InRoot`]). Directories
/// this run creates are recorded in `created` (host paths) with their final modes.
pub(super) fn overlay_entries(
    fs: &HostFs,
    entries: &[Entry],
    created: &mut Vec<NewDir>,
) -> Result<(), PreflightError> {
    for entry in entries {
        // Missing directories on the way exist only behind a link into a missing directory
        // (the others are entries before this one); they are created 0755.
        let dest = fs
            .locate(
                &Path::new("/").join(&entry.rel),
                Links::InRoot,
                Missing::Create,
            )?
            .expect("a creating lookup always ends at an entry");
        let host = dest.host();
        let made = place(entry, &dest, || {
            format!(
                "cannot overlay {} onto {}",
                entry.source.display(),
                host.display()
            )
        })?;
        // An existing directory is reused as is: the host owns the modes of its directories.
        if made {
            let shown = host.display().to_string();
            created.push((host, shown, entry.mode));
        }
    }
    Ok(())
}

/// Put `entry` at `dest`: a directory is created there owner-only (`true`) or kept if there
/// is one; a file replaces a file or nothing. Anything else there is refused, `refusal` saying
/// what could not be done.
fn place(
    entry: &Entry,
    dest: &Located,
    refusal: impl FnOnce() -> String,
) -> Result<bool, PreflightError> {
    match (entry.is_dir, dest.kind) {
        (true, None) => {
            dest.create_dir(0o700)?;
            Ok(true)
        }
        (true, Some(Kind::Dir)) => Ok(false),
        (false, None | Some(Kind::File)) => {
            replace_file(&entry.source, dest, entry.mode)?;
            Ok(false)
        }
        (_, Some(kind)) => Err(PreflightError::Other(format!(
            "{}: it is {}",
            refusal(),
            kind.name()
        ))),
    }
}

/// Give new directories their final modes, children first (a parent made read-only cannot
/// get in the way of a non-root caller), each opened with `open` and changed through its
/// descriptor. Every directory is tried; the first error is returned.
pub(super) fn apply_dir_modes(
    dirs: &[NewDir],
    open: impl Fn(&Path) -> Result<OwnedFd, PreflightError>,
) -> Result<(), PreflightError> {
    let mut first_error = None;
    for (dir, host, mode) in dirs.iter().rev() {
        let changed = open(dir).and_then(|fd| {
            let file = fs::File::from(fd);
            file.set_permissions(Permissions::from_mode(*mode))
                .map_err(io_error("setting the mode of", host))?;
            let _ = file.sync_all();
            Ok(())
        });
        if let Err(e) = changed {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Write `source`'s content to the entry `dest` with exactly `mode`, atomically: a temporary
/// file in the same directory (its descriptor), fsync, then rename. Readers of host files
/// (resolv.conf, daemons' configs) never see a half-written file, and a running binary is
/// replaced rather than rewritten (which would fail with ETXTBSY).
pub(super) fn replace_file(source: &Path, dest: &Located, mode: u32) -> Result<(), PreflightError> {
    let host = dest.host().display().to_string();
    let host = host.as_str();
    // O_NONBLOCK: if a fifo was swapped in after the scan, fail below instead of hanging.
    let mut input = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(source)
        .map_err(|e| source_error(source, e))?;
    let meta = input.metadata().map_err(|e| source_error(source, e))?;
    check_file(source, &meta)?;

    let target = dest.name.as_deref().expect("a file destination has a name");
    let write_error = io_error("writing", host);
    clean_stale_copies_in(&dest.dir, &dest.dir_host, target);
    // The one atomic replace of the agent; the copy keeps the source's permission bits.
    hostfs::replace_in(
        &dest.dir,
        &dest.dir_host,
        target,
        mode,
        DirSync::BestEffort,
        |output| io::copy(&mut input, output).map(drop),
    )
    .map_err(|e| match e {
        HostFsError::Io { source, .. } => write_error(source),
        other => write_error(io::Error::other(other.to_string())),
    })
}

/// SPEC §5: remove what killed copies of `target` left in `dir` (an open directory, `dir_host`
/// its host path) — temp files and partial package directories in [`hostfs::temp_name`]'s
/// scheme, and the `.skyhook-tmp-*` / `.skyhook-partial-*` names of earlier releases — once
/// they are old enough that no live writer can own them. Temp files of other targets in a
/// host directory belong to whoever wrote them and are left alone. Best effort.
pub(super) fn clean_stale_copies_in(fd: &OwnedFd, dir_host: &Path, target: &OsStr) {
    let target = target.to_string_lossy();
    hostfs::remove_stale_temps(
        fd,
        dir_host,
        |name| hostfs::is_temp_name_of(name, &target) || hostfs::is_earlier_temp_name(name),
        hostfs::STALE_TEMP_AGE,
    );
}

/// Make a rename or a new entry durable. Best effort: some filesystems refuse to fsync a
/// directory, and the data itself has already been synced.
pub(super) fn sync_dir(dir: &OwnedFd) {
    let _ = nix::unistd::fsync(dir);
}

/// `map_err(io_error("writing", host))`: [`PreflightError::Io`] of `op` on `host` (its text
/// made only when there is an error).
pub(super) fn io_error<E: Into<io::Error>>(
    op: &'static str,
    host: impl std::fmt::Display,
) -> impl FnOnce(E) -> PreflightError {
    move |source| PreflightError::Io {
        op,
        path: host.to_string(),
        source: source.into(),
    }
}

/// Only regular files and directories are copied: `Unsupported` unless `meta` (of `path`) is
/// a regular file.
pub(super) fn check_file(path: &Path, meta: &fs::Metadata) -> Result<(), PreflightError> {
    if meta.is_file() {
        return Ok(());
    }
    Err(PreflightError::Unsupported {
        path: path.display().to_string(),
        kind: kind_name(meta),
    })
}

/// What `meta` describes, for messages ("a fifo", ...).
pub(super) fn kind_name(meta: &fs::Metadata) -> &'static str {
    hostfs::kind_name(meta.mode())
}
