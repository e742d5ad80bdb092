//! Pre-flight host preparation (SPEC §6): resolv.conf, package data, `root_dir` overlay,
//! expected config files.
//!
//! Two kinds of trees are copied: package data from the container (sources are followed
//! through symbolic links, as the legacy `shutil.copytree(symlinks=False)` did) and the
//! package's `root_dir` onto the host. Every host destination is reached through the rooted
//! lookup of [`crate::host::fs`], from a descriptor of ROOT, and written through descriptors:
//! host files (resolv.conf, the overlay) the way the host itself sees them, with ROOT as `/`
//! ([`Links::InRoot`]: the agent sees the host through a mount, so an absolute link target
//! like `/run/x` means `<ROOT>/run/x`, and following it naively would write into the agent's
//! own container instead); COPY_DIR, which the rest of the run uses through its path in the
//! agent's view, through relative links only ([`Links::Relative`]).

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::host::fs::{self as hostfs, HostFs, HostFsError, Links, Located, Missing};
use crate::host::identity::{IdentityError, ResourceId};
use crate::host::runtime::Runtime;

/// Errors of pre-flight; messages name the paths involved.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// Neither `<ROOT><COPY_DIR>` nor SKYHOOK_DATA_DIR, its source, exists.
    #[error(
        "package directory {package} (ROOT_MOUNT + COPY_DIR) does not exist, and \
         SKYHOOK_DATA_DIR {data_dir:?} to copy it from does not exist either: check ROOT_MOUNT \
         and COPY_DIR, or set SKYHOOK_DATA_DIR to the package's directory in this container"
    )]
    MissingPackageData { package: String, data_dir: String },
    #[error("expected config file {0:?} was not found in the configmaps directory")]
    MissingConfigFile(String),
    /// Something other than a regular file is at the entry's path (`found`: "a directory", ...).
    #[error(
        "expected config file {entry:?} was not found in the configmaps directory (found {found})"
    )]
    ConfigFileNotRegular { entry: String, found: &'static str },
    #[error(
        "expected config file {0:?} must be a non-empty relative path without \"..\" components"
    )]
    InvalidConfigFilePath(String),
    /// Following links at `path` never ends.
    #[error("symbolic link cycle at {0}")]
    SymlinkCycle(String),
    /// Only regular files and directories are copied (`kind`: "a fifo", "a socket", ...).
    #[error("{path} is {kind}; only regular files and directories can be copied")]
    Unsupported { path: String, kind: &'static str },
    /// A host destination that cannot be reached or written as SPEC §5 and §6 say: a link
    /// that leaves ROOT, a link cycle, a file where a directory belongs, the OS cause.
    #[error(transparent)]
    Host(#[from] HostFsError),
    #[error("{op} {path}")]
    Io {
        op: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },
    /// SPEC §6.3: without `<R>/etc` the host is not mounted where the agent was told.
    #[error(
        "cannot copy resolv.conf: {etc} is not a directory; is the host's root mounted at {root}?"
    )]
    NoEtc { etc: String, root: String },
    #[error(transparent)]
    ResourceId(#[from] IdentityError),
    /// COPY_DIR climbs above `/`.
    #[error("copy directory {path}")]
    CopyDir {
        path: String,
        #[source]
        source: HostFsError,
    },
    #[error("copy directory {0}: the package directory cannot be the host root")]
    CopyDirIsRoot(String),
    /// STATE cannot be written through (a link or a file along the path).
    #[error("SKYHOOK_ROOT_DIR {path}")]
    StateDir {
        path: String,
        #[source]
        source: HostFsError,
    },
    #[error("{0}")]
    Other(String),
}

/// The inputs of a run once SPEC §6 step 1 accepted them.
#[derive(Debug, Clone)]
pub struct Validated {
    pub resource_id: ResourceId,
    /// COPY_DIR, cleaned, host-absolute.
    pub copy_dir: PathBuf,
}

/// SPEC §6 step 1: everything that can be checked before the first write, shared by the run and
/// `agent plan` so both fail alike: the resource ID's form (one path component for an
/// interrupt), ROOT a directory, COPY_DIR neither `/` nor ROOT itself (also through links) and
/// not leading out of ROOT, and STATE free of links and files along its path (every state
/// write would refuse them, after resolv.conf and the package data were written). The
/// environment (SKYHOOK_DATA_DIR absolute, STATE and LOGS inside ROOT) was checked when
/// [`Runtime`] was built. Nothing is written.
///
/// # Errors
/// The first problem, naming the variable or argument and the path.
pub fn validate(
    root: &Path,
    copy_dir: &Path,
    rt: &Runtime,
    interrupt: bool,
) -> Result<Validated, PreflightError> {
    let resource_id = ResourceId::parse(&rt.resource_id)?;
    if interrupt {
        resource_id.check_directory_name()?;
    }
    let cleaned = HostFs::clean(copy_dir).map_err(|source| PreflightError::CopyDir {
        path: copy_dir.display().to_string(),
        source,
    })?;
    check_root(root)?;
    // COPY_DIR is `/`, or a link along it leads back to ROOT itself: copying or overlaying
    // there would write the package over the host's top directory.
    if host_components(&cleaned)?.is_empty()
        || locate_package_dir(root, &cleaned, Missing::Stop)?.is_some_and(|dir| dir.name.is_none())
    {
        return Err(PreflightError::CopyDirIsRoot(
            copy_dir.display().to_string(),
        ));
    }
    HostFs::new(root)
        .check_dir_path(&rt.state_dir)
        .map_err(|source| PreflightError::StateDir {
            path: rt.state_dir.display().to_string(),
            source,
        })?;
    Ok(Validated {
        resource_id,
        copy_dir: cleaned,
    })
}

/// Copy `source` (the container's `/etc/resolv.conf`, following links) to `<root>/etc/resolv.conf`.
///
/// A destination link is followed if it resolves inside ROOT (SPEC §6.3). `<root>/etc` must
/// already be a directory (following links inside ROOT): a host root without one is not the
/// host, so nothing is created there.
pub fn copy_resolv(root: &Path, source: &Path) -> Result<(), PreflightError> {
    check_root(root)?;
    check_host_etc(root)?;
    let source_meta = stat_source(source)?;
    check_file(source, &source_meta)?;

    let dest = HostFs::new(root)
        .locate(
            Path::new("/etc/resolv.conf"),
            Links::InRoot,
            Missing::Create,
        )?
        .expect("a creating lookup always ends at an entry");
    if let Some(kind) = dest.kind_name().filter(|_| !dest.is_file()) {
        return Err(PreflightError::Other(format!(
            "{} is {kind}, not a regular file",
            dest.host().display()
        )));
    }
    replace_file(source, &dest, source_meta.mode() & 0o777)?;
    tracing::debug!(source = %source.display(), destination = %dest.host().display(), "copied resolv.conf to the host");
    Ok(())
}

/// SPEC §6.3: `<root>/etc` is a directory (following links inside ROOT), as on every host;
/// without it the host's `/` is not mounted at ROOT.
///
/// # Errors
/// [`PreflightError::NoEtc`], or a link at `/etc` leading out of ROOT.
pub(crate) fn check_host_etc(root: &Path) -> Result<(), PreflightError> {
    let no_etc = || PreflightError::NoEtc {
        etc: root.join("etc").display().to_string(),
        root: root.display().to_string(),
    };
    match HostFs::new(root).locate(Path::new("/etc"), Links::InRoot, Missing::Stop) {
        Ok(Some(etc)) if etc.is_dir() => Ok(()),
        Err(e @ (HostFsError::LinkOutsideRoot { .. } | HostFsError::SymlinkCycle { .. })) => {
            Err(e.into())
        }
        Ok(_) | Err(_) => Err(no_etc()),
    }
}

/// Make sure `<root><copy_dir>` holds the package (SPEC §6.4).
///
/// An existing directory is used as is. Otherwise `data_dir` is copied and `node_files` (if it
/// exists) merged over it, into a temporary sibling that is renamed into place only when
/// complete, so a failed copy never leaves a package directory that looks finished.
pub fn ensure_package_data(
    root: &Path,
    copy_dir: &Path,
    data_dir: &Path,
    node_files: &Path,
) -> Result<(), PreflightError> {
    check_root(root)?;
    let is_root = || PreflightError::CopyDirIsRoot(copy_dir.display().to_string());
    let components = host_components(copy_dir)?;
    if components.is_empty() {
        return Err(is_root());
    }
    let host = host_display(&components);
    if let Some(found) = locate_package_dir(root, Path::new(&host), Missing::Stop)? {
        match found.kind_name() {
            _ if found.name.is_none() => return Err(is_root()),
            None => {}
            Some(_) if found.is_dir() => return Ok(()),
            Some(kind) => {
                return Err(PreflightError::Other(format!(
                    "package directory {host} exists and is {kind}, not a directory"
                )));
            }
        }
    }

    let data_meta = match fs::metadata(data_dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(PreflightError::MissingPackageData {
                package: join_real(root, &components).display().to_string(),
                data_dir: data_dir.display().to_string(),
            });
        }
        Err(e) => return Err(source_error(data_dir, e)),
    };
    if !data_meta.is_dir() {
        return Err(PreflightError::Other(format!(
            "package data directory {:?} is not a directory",
            data_dir.display().to_string()
        )));
    }
    // Both sources are scanned before anything is written: a cycle or a fifo deep inside
    // fails the copy without creating anything.
    let data = scan_tree(data_dir)?;
    let node = match fs::metadata(node_files) {
        Ok(meta) if meta.is_dir() => scan_tree(node_files)?,
        Ok(meta) => {
            return Err(not_a_dir(
                format!("node files {}", node_files.display()),
                &meta,
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(source_error(node_files, e)),
    };

    // Missing parents are created (0755) on the way.
    let dest = locate_package_dir(root, Path::new(&host), Missing::Create)?
        .expect("a creating lookup always ends at an entry");
    let Some(name) = dest.name.clone() else {
        return Err(is_root());
    };
    if dest.is_dir() {
        // Another agent of the same package copied it meanwhile.
        return Ok(());
    }
    clean_stale_copies_in(&dest.dir, &dest.dir_host, &name);
    let temp = hostfs::temp_name(&name);
    let top = dest.sibling(&temp)?.create_dir(0o700)?;

    let result = (|| {
        let mut dirs = vec![(PathBuf::new(), host.clone(), data_meta.mode() & 0o777)];
        copy_entries(&data, &top, &host, &mut dirs)?;
        copy_entries(&node, &top, &host, &mut dirs)?;
        apply_dir_modes(&dirs, |rel| {
            hostfs::open_dir_below(&top, Path::new(&host), rel)?
                .ok_or_else(|| missing_dir(&host, rel))
        })?;
        nix::fcntl::renameat(&dest.dir, temp.as_os_str(), &dest.dir, name.as_os_str())
            .map_err(io_error("moving the package copy into place at", &host))?;
        sync_dir(&dest.dir);
        Ok(())
    })();
    if result.is_ok() {
        tracing::info!(source = %data_dir.display(), destination = %host, "copied package data");
    } else {
        // Best effort: the error that matters is the one being returned.
        let _ = hostfs::remove_tree_at(&dest.dir, &temp);
    }
    result
}

/// SPEC §5, §6.1: COPY_DIR through the rooted lookup. The rest of the run reads the package
/// through `<ROOT>COPY_DIR` as a path in the agent's view, where an absolute link target means
/// something else than on the host, so only relative links may be on the way (and those stay
/// inside ROOT); a link at COPY_DIR itself is followed likewise.
fn locate_package_dir(
    root: &Path,
    copy_dir: &Path,
    missing: Missing,
) -> Result<Option<Located>, PreflightError> {
    Ok(HostFs::new(root).locate(copy_dir, Links::Relative, missing)?)
}

/// Overlay `<root><copy_dir>/root_dir` onto `root` (SPEC §6.7).
///
/// Existing host directories are reused untouched (ROOT itself is never chmod-ed); files are
/// replaced atomically; new directories and files get the source permission bits minus
/// setuid/setgid/sticky.
pub fn overlay_root_dir(root: &Path, copy_dir: &Path) -> Result<(), PreflightError> {
    check_root(root)?;
    let mut components = host_components(copy_dir)?;
    components.push(OsString::from("root_dir"));
    let host = host_display(&components);
    let source = join_real(root, &components);
    match fs::metadata(&source) {
        Ok(meta) if meta.is_dir() => {}
        Ok(meta) => return Err(not_a_dir(&host, &meta)),
        Err(e) => return check_absent(&source, &host, e),
    }
    let entries = scan_tree(&source)?;

    let fs = HostFs::new(root);
    let mut created = Vec::new();
    let result = overlay_entries(&fs, &entries, &mut created);
    // New directories start owner-only so a half-done overlay exposes nothing; give them their
    // final modes even when the overlay failed part way. They are opened again refusing
    // links: this run created them, so a link there now was put there since.
    let modes = apply_dir_modes(&created, |dir| {
        fs.locate(dir, Links::Refuse, Missing::Stop)?
            .ok_or_else(|| missing_dir("/", dir))?
            .open_dir()
            .map_err(PreflightError::from)
    });
    result.and(modes)
}

/// Every entry must be a relative path to a regular file under `<root><copy_dir>/configmaps`.
pub fn check_expected_config_files(
    root: &Path,
    copy_dir: &Path,
    files: &[String],
) -> Result<(), PreflightError> {
    let mut components = host_components(copy_dir)?;
    components.push(OsString::from("configmaps"));
    let configmaps = join_real(root, &components);
    files
        .iter()
        .try_for_each(|entry| check_config_file(&configmaps, entry))
}

/// One `expected_config_files` entry: a non-empty relative path without `..` to a regular file
/// (after following links, as Kubernetes ConfigMap volumes are made of links) under
/// `configmaps_dir` (a real path). Shared with `agent validate`.
pub(crate) fn check_config_file(configmaps_dir: &Path, entry: &str) -> Result<(), PreflightError> {
    if entry.is_empty()
        || entry.contains('\0')
        || entry.starts_with('/')
        || entry.split('/').any(|c| c == "..")
    {
        return Err(PreflightError::InvalidConfigFilePath(entry.to_owned()));
    }
    let path = configmaps_dir.join(entry);
    match fs::metadata(&path) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(meta) => Err(PreflightError::ConfigFileNotRegular {
            entry: entry.to_owned(),
            found: kind_name(&meta),
        }),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            Err(PreflightError::MissingConfigFile(entry.to_owned()))
        }
        Err(e) => Err(source_error(&path, e)),
    }
}

/// ROOT must be an existing directory: creating it would write below an unmounted path.
fn check_root(root: &Path) -> Result<(), PreflightError> {
    match fs::metadata(root) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(meta) => Err(not_a_dir(format!("host root {}", root.display()), &meta)),
        Err(e) => Err(io_error("inspecting host root", root.display())(e)),
    }
}

/// `<what> is <kind>, not a directory`, `meta` saying what it is.
fn not_a_dir(what: impl std::fmt::Display, meta: &fs::Metadata) -> PreflightError {
    PreflightError::Other(format!("{what} is {}, not a directory", kind_name(meta)))
}

/// The lexically cleaned components of a host-absolute path (`..` may not climb above `/`).
fn host_components(host_path: &Path) -> Result<Vec<OsString>, PreflightError> {
    // Past the cleaned path's leading `/`. A `..` above `/` is pre-flight's own refusal.
    let cleaned = HostFs::clean(host_path).map_err(|_| {
        PreflightError::Other(format!("{} escapes the host root", host_path.display()))
    })?;
    Ok(cleaned.iter().skip(1).map(OsStr::to_owned).collect())
}

fn join_real(root: &Path, components: &[OsString]) -> PathBuf {
    let mut path = root.to_path_buf();
    path.extend(components);
    path
}

/// How the operator knows the path: host-absolute, without the ROOT mount.
fn host_display(components: &[OsString]) -> String {
    join_real(Path::new("/"), components)
        .to_string_lossy()
        .into_owned()
}

/// A directory this run created, gone when its mode was to be set.
fn missing_dir(base: &str, rel: &Path) -> PreflightError {
    io_error("opening directory", Path::new(base).join(rel).display())(io::ErrorKind::NotFound)
}

mod tree;

use tree::{
    apply_dir_modes, check_absent, check_file, clean_stale_copies_in, copy_entries, io_error,
    kind_name, overlay_entries, replace_file, scan_tree, source_error, stat_source, sync_dir,
};

#[cfg(test)]
mod tests;
