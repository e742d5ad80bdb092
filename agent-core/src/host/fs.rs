//! Rooted host I/O (SPEC §5): every write of agent state and logs goes through [`HostFs`].
//!
//! The host's `/` is mounted at ROOT and its content is not ours: package steps and other host
//! software can leave symbolic links in a path like `<R>/var/lib/skyhook` that would redirect
//! our writes outside ROOT (into the agent container) or onto another host file. Resolving the whole path with
//! `open(2)` would follow them. Instead every operation opens ROOT once and walks the path one
//! component at a time with `openat(O_DIRECTORY | O_NOFOLLOW)`, so a link anywhere below ROOT
//! is seen and refused, and a component swapped between a check and a use cannot redirect us.

use std::collections::hash_map::RandomState;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use nix::errno::Errno;
use nix::fcntl::{self, AtFlags, OFlag};
use nix::sys::stat::{self, Mode, SFlag};
use nix::unistd::{self, UnlinkatFlags};

/// Errors of rooted host I/O. Messages name the host path (ROOT-relative, as `/var/lib/...`).
#[derive(Debug, thiserror::Error)]
pub enum HostFsError {
    #[error("{path} escapes the host root")]
    Escapes { path: String },
    #[error("{path} is a symbolic link")]
    SymbolicLink { path: String },
    #[error("{path} is not a directory")]
    NotADirectory { path: String },
    #[error("{path} is not a regular file")]
    NotARegularFile { path: String },
    /// A name meant to stay inside a directory (a step's relative PATH) is empty, absolute or
    /// has a `..` component.
    #[error("{path} is not a relative path below its directory")]
    NotRelative { path: String },
    #[error("{op} {path}")]
    Io {
        op: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// SPEC §5: state files are 0600.
const FILE_MODE: u32 = 0o600;
/// SPEC §5: directories we create are 0755.
const DIR_MODE: u32 = 0o755;
/// Longest file name most Linux filesystems accept (`NAME_MAX`).
const NAME_MAX: usize = 255;
/// Temp files younger than this may belong to a writer that is still running (another agent
/// pod of the same Skyhook shares STATE, and each pod has its own PID namespace, so the PID in
/// the name cannot tell a live writer from a dead one).
pub(crate) const STALE_TEMP_AGE: Duration = Duration::from_secs(10 * 60);

/// Marker between the target name and the writer's identity in temp file names.
const TEMP_INFIX: &str = ".tmp.";

/// The host filesystem as seen through ROOT. Paths given to its methods are host-absolute
/// (`/var/lib/skyhook/flags/START`) or ROOT-relative; they are lexically cleaned and must stay
/// inside ROOT.
#[derive(Debug, Clone)]
pub struct HostFs {
    root: PathBuf,
}

/// What a directory walk does about a component that does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Missing {
    /// Create it (0755), as `mkdir -p` does.
    Create,
    /// Stop and report that the directory is absent.
    Stop,
}

/// The type of a directory entry, as `lstat(2)` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

/// A host path split into its parent directory and final name, both cleaned.
struct Target {
    /// Host path of the parent directory.
    dir: PathBuf,
    name: OsString,
    /// Host path of the target itself, for error messages.
    host: PathBuf,
}

impl HostFs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The ROOT mount itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Lexically clean `host_path` (`.`/`..`/`//`) and return it as a host-absolute path, or
    /// `Escapes` if `..` would leave `/`.
    pub fn clean(host_path: &Path) -> Result<PathBuf, HostFsError> {
        let mut parts: Vec<&OsStr> = Vec::new();
        for component in host_path.components() {
            match component {
                Component::Normal(name) => parts.push(name),
                Component::ParentDir => {
                    // Unlike Go's filepath.Clean, `/..` is not silently `/`: a caller that
                    // climbs above the host root has computed a wrong path (SPEC §2, §5).
                    if parts.pop().is_none() {
                        return Err(HostFsError::Escapes {
                            path: host_path.display().to_string(),
                        });
                    }
                }
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
        let mut cleaned = PathBuf::from("/");
        cleaned.extend(parts);
        Ok(cleaned)
    }

    /// The real path under ROOT of a host path (`<R>path`), after [`HostFs::clean`].
    pub fn resolve(&self, host_path: &Path) -> Result<PathBuf, HostFsError> {
        let cleaned = Self::clean(host_path)?;
        let relative = cleaned.strip_prefix("/").unwrap_or(&cleaned);
        if relative.as_os_str().is_empty() {
            return Ok(self.root.clone());
        }
        Ok(self.root.join(relative))
    }

    /// Create a directory and its missing parents (0755). No existing component below ROOT
    /// may be a symbolic link or a non-directory.
    pub fn create_dir_all(&self, host_path: &Path) -> Result<(), HostFsError> {
        let dir = Self::clean(host_path)?;
        self.walk_create(&dir).map(drop)
    }

    /// Check, writing nothing, that the existing part of a directory path can be written
    /// through: no component below ROOT is a symbolic link or a non-directory (what every
    /// write below it would refuse). Missing components are fine: writers create them.
    pub fn check_dir_path(&self, host_path: &Path) -> Result<(), HostFsError> {
        let dir = Self::clean(host_path)?;
        self.walk_existing(&dir).map(drop)
    }

    /// Atomic replace (temp file in the same directory, fsync, rename, directory fsync),
    /// mode 0600, parents created as by [`HostFs::create_dir_all`].
    pub fn write_atomic(&self, host_path: &Path, contents: &[u8]) -> Result<(), HostFsError> {
        let target = Self::split(host_path)?;
        let dir = self.walk_create(&target.dir)?;
        // `renameat` would replace a link rather than follow it, but SPEC §5 wants a link at
        // the destination reported, and a directory there cannot be replaced by a file.
        match entry_kind(&dir, &target.name, &target.host)? {
            None | Some(Kind::File) => {}
            Some(Kind::Symlink) => return Err(symbolic_link(&target.host)),
            Some(Kind::Dir | Kind::Other) => return Err(not_a_regular_file(&target.host)),
        }

        let (temp_name, file) = create_temp(&dir, &target)?;
        let written = write_and_sync(file, contents, &target.host).and_then(|()| {
            fcntl::renameat(&dir, temp_name.as_os_str(), &dir, target.name.as_os_str())
                .map_err(|errno| io_error("replacing", &target.host, errno))
        });
        if let Err(err) = written {
            // The target was never touched; only our temp file has to go.
            let _ = unistd::unlinkat(&dir, temp_name.as_os_str(), UnlinkatFlags::NoRemoveDir);
            return Err(err);
        }
        // If only this fsync fails the new content is already in place; the error still
        // reaches the caller because the replacement may not survive a crash.
        sync_fd(&dir, &target.dir)
    }

    /// Read a state file: `Ok(None)` if it does not exist; `SymbolicLink` / `NotARegularFile`
    /// if something else is there.
    pub fn read(&self, host_path: &Path) -> Result<Option<Vec<u8>>, HostFsError> {
        let target = Self::split(host_path)?;
        let Some(dir) = self.walk_existing(&target.dir)? else {
            return Ok(None);
        };
        // Check the type before opening: opening a FIFO blocks and opening a device can have
        // side effects.
        match entry_kind(&dir, &target.name, &target.host)? {
            None => return Ok(None),
            Some(Kind::File) => {}
            Some(Kind::Symlink) => return Err(symbolic_link(&target.host)),
            Some(Kind::Dir | Kind::Other) => return Err(not_a_regular_file(&target.host)),
        }
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let fd = match fcntl::openat(&dir, target.name.as_os_str(), flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Ok(None),
            Err(Errno::ELOOP) => return Err(symbolic_link(&target.host)),
            Err(errno) => return Err(io_error("opening", &target.host, errno)),
        };
        // The entry may have been swapped between the type check and the open.
        let stat = stat::fstat(&fd).map_err(|errno| io_error("inspecting", &target.host, errno))?;
        if kind_of(stat.st_mode) != Kind::File {
            return Err(not_a_regular_file(&target.host));
        }
        let mut contents = Vec::new();
        File::from(fd)
            .read_to_end(&mut contents)
            .map_err(|source| io_source("reading", &target.host, source))?;
        Ok(Some(contents))
    }

    /// `Ok(true)` iff a regular file exists at the path (marker semantics), `Ok(false)` if
    /// nothing is there, `SymbolicLink` / `NotARegularFile` for anything else.
    pub fn is_file(&self, host_path: &Path) -> Result<bool, HostFsError> {
        let target = Self::split(host_path)?;
        let Some(dir) = self.walk_existing(&target.dir)? else {
            return Ok(false);
        };
        match entry_kind(&dir, &target.name, &target.host)? {
            None => Ok(false),
            Some(Kind::File) => Ok(true),
            Some(Kind::Symlink) => Err(symbolic_link(&target.host)),
            Some(Kind::Dir | Kind::Other) => Err(not_a_regular_file(&target.host)),
        }
    }

    /// Remove a file if present; `Ok(false)` if it did not exist. A symbolic link or a
    /// directory at the path is refused and left in place. The directory is fsynced so a
    /// removed marker stays removed after a crash.
    pub fn remove_file(&self, host_path: &Path) -> Result<bool, HostFsError> {
        self.remove(host_path, true)
    }

    /// [`HostFs::remove_file`] without the directory fsync, for files whose return after a
    /// crash is harmless (old logs: the next retention removes them again).
    pub fn remove_file_unsynced(&self, host_path: &Path) -> Result<bool, HostFsError> {
        self.remove(host_path, false)
    }

    fn remove(&self, host_path: &Path, durable: bool) -> Result<bool, HostFsError> {
        let target = Self::split(host_path)?;
        let Some(dir) = self.walk_existing(&target.dir)? else {
            return Ok(false);
        };
        match entry_kind(&dir, &target.name, &target.host)? {
            None => return Ok(false),
            Some(Kind::File | Kind::Other) => {}
            Some(Kind::Symlink) => return Err(symbolic_link(&target.host)),
            Some(Kind::Dir) => return Err(not_a_regular_file(&target.host)),
        }
        match unistd::unlinkat(&dir, target.name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
            Ok(()) => {}
            Err(Errno::ENOENT) => return Ok(false),
            Err(errno) => return Err(io_error("removing", &target.host, errno)),
        }
        if durable {
            sync_fd(&dir, &target.dir)?;
        }
        Ok(true)
    }

    /// Rename within ROOT (both paths checked), then fsync the destination directory (and the
    /// source directory when it differs). Missing parents of `to` are created as by
    /// [`HostFs::create_dir_all`]; an existing file at `to` is replaced.
    pub fn rename(&self, from: &Path, to: &Path) -> Result<(), HostFsError> {
        let source = Self::split(from)?;
        let dest = Self::split(to)?;
        let source_dir = self
            .walk_existing(&source.dir)?
            .ok_or_else(|| io_error("renaming", &source.host, Errno::ENOENT))?;
        match entry_kind(&source_dir, &source.name, &source.host)? {
            None => return Err(io_error("renaming", &source.host, Errno::ENOENT)),
            Some(Kind::Symlink) => return Err(symbolic_link(&source.host)),
            Some(Kind::File | Kind::Dir | Kind::Other) => {}
        }
        let dest_dir = self.walk_create(&dest.dir)?;
        if entry_kind(&dest_dir, &dest.name, &dest.host)? == Some(Kind::Symlink) {
            return Err(symbolic_link(&dest.host));
        }
        fcntl::renameat(
            &source_dir,
            source.name.as_os_str(),
            &dest_dir,
            dest.name.as_os_str(),
        )
        .map_err(|errno| HostFsError::Io {
            op: "renaming",
            path: format!("{} to {}", source.host.display(), dest.host.display()),
            source: errno.into(),
        })?;
        sync_fd(&dest_dir, &dest.dir)?;
        if source.dir != dest.dir {
            sync_fd(&source_dir, &source.dir)?;
        }
        Ok(())
    }

    /// Create a new file (`O_CREAT|O_EXCL|O_NOFOLLOW`, 0600) for appending output, parents
    /// created. `Ok(None)` if the file already exists (the caller picks another name).
    pub fn create_new(&self, host_path: &Path) -> Result<Option<File>, HostFsError> {
        let target = Self::split(host_path)?;
        let dir = self.walk_create(&target.dir)?;
        let flags = OFlag::O_WRONLY
            | OFlag::O_APPEND
            | OFlag::O_CREAT
            | OFlag::O_EXCL
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC;
        let fd = match fcntl::openat(
            &dir,
            target.name.as_os_str(),
            flags,
            Mode::from_bits_truncate(FILE_MODE),
        ) {
            Ok(fd) => fd,
            Err(Errno::EEXIST) => {
                // O_EXCL does not follow a link, so a planted link is reported as "exists";
                // it must not pass silently as a mere name collision.
                return match entry_kind(&dir, &target.name, &target.host)? {
                    Some(Kind::Symlink) => Err(symbolic_link(&target.host)),
                    _ => Ok(None),
                };
            }
            Err(errno) => return Err(io_error("creating", &target.host, errno)),
        };
        set_mode(&fd, FILE_MODE, &target.host)?;
        Ok(Some(File::from(fd)))
    }

    /// Open a lock file for reading and writing, creating it (0600) and its parents if
    /// missing. The file is never replaced (an advisory lock lives on its inode), so this is
    /// the one state file not written by atomic replace; a link at the path is refused.
    pub fn open_lock_file(&self, host_path: &Path) -> Result<File, HostFsError> {
        let target = Self::split(host_path)?;
        let dir = self.walk_create(&target.dir)?;
        let flags = OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = match fcntl::openat(
            &dir,
            target.name.as_os_str(),
            flags,
            Mode::from_bits_truncate(FILE_MODE),
        ) {
            Ok(fd) => fd,
            Err(Errno::ELOOP) => return Err(symbolic_link(&target.host)),
            Err(errno) => return Err(io_error("opening", &target.host, errno)),
        };
        let file = File::from(fd);
        let meta = file
            .metadata()
            .map_err(|e| io_source("inspecting", &target.host, e))?;
        if !meta.is_file() {
            return Err(not_a_regular_file(&target.host));
        }
        Ok(file)
    }

    /// Names of the entries of a directory (empty if it does not exist), sorted. Names that
    /// are not UTF-8 are left out: nothing the agent writes has one.
    pub fn list_dir(&self, host_path: &Path) -> Result<Vec<String>, HostFsError> {
        let mut names = Vec::new();
        self.visit_dir(host_path, |name| names.push(name.to_owned()))?;
        names.sort();
        Ok(names)
    }

    /// Call `visit` with the name of every entry of a directory (nothing if it does not
    /// exist), in directory order, without collecting them: for directories with many entries
    /// read once (the log index). Names that are not UTF-8 are skipped, as by
    /// [`HostFs::list_dir`].
    pub fn visit_dir(
        &self,
        host_path: &Path,
        mut visit: impl FnMut(&str),
    ) -> Result<(), HostFsError> {
        let dir_path = Self::clean(host_path)?;
        let Some(dir) = self.walk_existing(&dir_path)? else {
            return Ok(());
        };
        let mut stream =
            nix::dir::Dir::from_fd(dir).map_err(|errno| io_error("listing", &dir_path, errno))?;
        for entry in stream.iter() {
            let entry = entry.map_err(|errno| io_error("listing", &dir_path, errno))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if let Ok(name) = std::str::from_utf8(name) {
                visit(name);
            }
        }
        Ok(())
    }

    /// fsync a directory, making the entries created, renamed or removed in it durable.
    pub fn sync_dir(&self, host_path: &Path) -> Result<(), HostFsError> {
        let dir_path = Self::clean(host_path)?;
        let dir = self
            .walk_existing(&dir_path)?
            .ok_or_else(|| io_error("syncing", &dir_path, Errno::ENOENT))?;
        sync_fd(&dir, &dir_path)
    }

    /// Remove temp files left in `dir` by a [`HostFs::write_atomic`] that was killed (SPEC §5:
    /// "stray temp files are ignored and cleaned later"). Temp files younger than ten minutes
    /// are kept: agents of other packages share STATE and may be about to rename theirs.
    /// Best effort; returns how many were removed.
    pub fn clean_stale_temps(&self, dir: &Path) -> usize {
        self.clean_temps_older_than(dir, STALE_TEMP_AGE)
    }

    /// [`HostFs::clean_stale_temps`] with an explicit minimum age (`Duration::ZERO` removes
    /// every temp file). Failures are logged at debug level and skipped.
    pub fn clean_temps_older_than(&self, dir: &Path, min_age: Duration) -> usize {
        let names = match self.list_dir(dir) {
            Ok(names) => names,
            Err(err) => {
                tracing::debug!(dir = %dir.display(), error = %crate::host::errors::Chain(&err), "cannot list directory for stale temp files");
                return 0;
            }
        };
        let now = SystemTime::now();
        let mut removed = 0;
        for name in names.iter().filter(|name| is_temp_name(name)) {
            let path = dir.join(name);
            match self.modified(&path) {
                Ok(Some(modified))
                    if now.duration_since(modified).unwrap_or_default() >= min_age => {}
                Ok(_) => continue,
                Err(err) => {
                    tracing::debug!(file = %path.display(), error = %crate::host::errors::Chain(&err), "cannot inspect temp file");
                    continue;
                }
            }
            match self.remove_file(&path) {
                Ok(true) => removed += 1,
                Ok(false) => {}
                Err(err) => {
                    tracing::debug!(file = %path.display(), error = %crate::host::errors::Chain(&err), "cannot remove stale temp file");
                }
            }
        }
        removed
    }

    /// Modification time of a regular file, `None` if it is absent.
    fn modified(&self, host_path: &Path) -> Result<Option<SystemTime>, HostFsError> {
        let target = Self::split(host_path)?;
        let Some(dir) = self.walk_existing(&target.dir)? else {
            return Ok(None);
        };
        let stat = match stat::fstatat(&dir, target.name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
        {
            Ok(stat) => stat,
            Err(Errno::ENOENT) => return Ok(None),
            Err(errno) => return Err(io_error("inspecting", &target.host, errno)),
        };
        if kind_of(stat.st_mode) != Kind::File {
            return Err(not_a_regular_file(&target.host));
        }
        let secs = u64::try_from(stat.st_mtime).unwrap_or(0);
        let nanos = u32::try_from(stat.st_mtime_nsec).unwrap_or(0);
        Ok(Some(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos)))
    }

    /// Clean `host_path` and split it into parent and final name. `/` has no name: it is a
    /// directory, so it cannot be a file target.
    fn split(host_path: &Path) -> Result<Target, HostFsError> {
        let host = Self::clean(host_path)?;
        let (Some(dir), Some(name)) = (host.parent(), host.file_name()) else {
            return Err(not_a_regular_file(&host));
        };
        Ok(Target {
            dir: dir.to_path_buf(),
            name: name.to_os_string(),
            host: host.clone(),
        })
    }

    /// Open ROOT itself. ROOT is the operator's mount point and is trusted, so links in it
    /// (or above it) are followed.
    fn open_root(&self) -> Result<OwnedFd, HostFsError> {
        fcntl::open(
            &self.root,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| HostFsError::Io {
            op: "opening host root",
            path: self.root.display().to_string(),
            source: errno.into(),
        })
    }

    /// Walk a cleaned host directory path, creating what is missing.
    fn walk_create(&self, dir: &Path) -> Result<OwnedFd, HostFsError> {
        let fd = self.walk(dir, Missing::Create)?;
        Ok(fd.expect("a creating walk always ends at a directory"))
    }

    /// Walk a cleaned host directory path; `None` if some component does not exist.
    fn walk_existing(&self, dir: &Path) -> Result<Option<OwnedFd>, HostFsError> {
        self.walk(dir, Missing::Stop)
    }

    fn walk(&self, dir: &Path, missing: Missing) -> Result<Option<OwnedFd>, HostFsError> {
        let mut current = self.open_root()?;
        let mut walked = PathBuf::from("/");
        for component in dir.components() {
            let Component::Normal(name) = component else {
                continue;
            };
            walked.push(name);
            let next = match open_dir_at(&current, name, &walked)? {
                Some(fd) => fd,
                None if missing == Missing::Stop => return Ok(None),
                None => make_dir_at(&current, name, &walked)?,
            };
            current = next;
        }
        Ok(Some(current))
    }
}

/// Whether `name` is a temp file of [`HostFs::write_atomic`] (`.<name>.tmp.<pid>.<random>`).
/// Readers that list directories must skip these.
pub fn is_temp_name(name: &str) -> bool {
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
    if !is_temp_name(name) {
        return false;
    }
    let infix = name.rfind(TEMP_INFIX).expect("a temp name has the infix");
    let shown = &name[1..infix];
    // A shortened target leaves the whole name within a UTF-8 character (3 bytes) of NAME_MAX.
    shown == target || (target.starts_with(shown) && name.len() + 3 >= NAME_MAX)
}

/// Open the directory `name` inside `parent` without following a link; `None` if absent.
fn open_dir_at(
    parent: &OwnedFd,
    name: &OsStr,
    host: &Path,
) -> Result<Option<OwnedFd>, HostFsError> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match fcntl::openat(parent, name, flags, Mode::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::ENOENT) => Ok(None),
        // With O_DIRECTORY, Linux reports a link as ENOTDIR rather than ELOOP; ask lstat which
        // one it really is.
        Err(errno @ (Errno::ELOOP | Errno::ENOTDIR)) => match entry_kind(parent, name, host)? {
            Some(Kind::Symlink) => Err(symbolic_link(host)),
            Some(Kind::File | Kind::Other) => Err(not_a_directory(host)),
            // Swapped under us: report what the kernel said.
            Some(Kind::Dir) | None => Err(io_error("opening directory", host, errno)),
        },
        Err(errno) => Err(io_error("opening directory", host, errno)),
    }
}

/// Create the directory `name` inside `parent` with mode 0755 whatever the umask, fsync
/// `parent` so the new entry survives a crash, and open it.
fn make_dir_at(parent: &OwnedFd, name: &OsStr, host: &Path) -> Result<OwnedFd, HostFsError> {
    let created = match stat::mkdirat(parent, name, Mode::from_bits_truncate(DIR_MODE)) {
        Ok(()) => true,
        // A concurrent agent created it first; it is checked like any existing directory.
        Err(Errno::EEXIST) => false,
        Err(errno) => return Err(io_error("creating directory", host, errno)),
    };
    let fd = open_dir_at(parent, name, host)?
        .ok_or_else(|| io_error("opening directory", host, Errno::ENOENT))?;
    if created {
        // mkdirat applies the process umask, which the container runtime chooses.
        set_mode(&fd, DIR_MODE, host)?;
        let parent_host = host.parent().unwrap_or(Path::new("/"));
        sync_fd(parent, parent_host)?;
    }
    Ok(fd)
}

/// Create the temp file for `target` in `dir`: `.<name>.tmp.<pid>.<random>`, 0600, never an
/// existing entry.
fn create_temp(dir: &OwnedFd, target: &Target) -> Result<(OsString, File), HostFsError> {
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    loop {
        let name = temp_name(&target.name);
        match fcntl::openat(
            dir,
            name.as_os_str(),
            flags,
            Mode::from_bits_truncate(FILE_MODE),
        ) {
            Ok(fd) => {
                if let Err(err) = set_mode(&fd, FILE_MODE, &target.host) {
                    let _ = unistd::unlinkat(dir, name.as_os_str(), UnlinkatFlags::NoRemoveDir);
                    return Err(err);
                }
                return Ok((name, File::from(fd)));
            }
            Err(Errno::EEXIST) => {}
            Err(errno) => return Err(io_error("creating temporary file for", &target.host, errno)),
        }
    }
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

fn write_and_sync(mut file: File, contents: &[u8], host: &Path) -> Result<(), HostFsError> {
    file.write_all(contents)
        .map_err(|source| io_source("writing", host, source))?;
    file.sync_all()
        .map_err(|source| io_source("syncing", host, source))
}

/// The type of `name` in `dir`, without following a link; `None` if absent.
fn entry_kind(dir: &OwnedFd, name: &OsStr, host: &Path) -> Result<Option<Kind>, HostFsError> {
    match stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(kind_of(stat.st_mode))),
        Err(Errno::ENOENT) => Ok(None),
        Err(errno) => Err(io_error("inspecting", host, errno)),
    }
}

fn kind_of(mode: libc::mode_t) -> Kind {
    match SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFREG => Kind::File,
        SFlag::S_IFDIR => Kind::Dir,
        SFlag::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    }
}

fn set_mode(fd: &OwnedFd, mode: u32, host: &Path) -> Result<(), HostFsError> {
    stat::fchmod(fd, Mode::from_bits_truncate(mode))
        .map_err(|errno| io_error("setting permissions of", host, errno))
}

fn sync_fd(fd: &OwnedFd, host: &Path) -> Result<(), HostFsError> {
    unistd::fsync(fd).map_err(|errno| io_error("syncing directory", host, errno))
}

fn symbolic_link(host: &Path) -> HostFsError {
    HostFsError::SymbolicLink {
        path: host.display().to_string(),
    }
}

fn not_a_directory(host: &Path) -> HostFsError {
    HostFsError::NotADirectory {
        path: host.display().to_string(),
    }
}

fn not_a_regular_file(host: &Path) -> HostFsError {
    HostFsError::NotARegularFile {
        path: host.display().to_string(),
    }
}

fn io_error(op: &'static str, host: &Path, errno: Errno) -> HostFsError {
    io_source(op, host, errno.into())
}

fn io_source(op: &'static str, host: &Path, source: std::io::Error) -> HostFsError {
    HostFsError::Io {
        op,
        path: host.display().to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    use proptest::prelude::*;

    use super::*;

    fn host() -> (tempfile::TempDir, HostFs) {
        let dir = tempfile::tempdir().unwrap();
        let fs = HostFs::new(dir.path());
        (dir, fs)
    }

    fn mode_of(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    fn names_in(path: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(path)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// Run one `#[ignore]`d test of this binary in a child process whose `pre_exec` hook sets
    /// up process-wide state (umask, rlimits) that must not leak into the parallel tests here.
    fn run_child(test: &str, root: &Path, setup: fn() -> std::io::Result<()>) {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", test, "--ignored", "--test-threads=1"])
            .env(CHILD_ROOT_ENV, root);
        // SAFETY: `setup` only makes async-signal-safe libc calls (umask, signal, setrlimit).
        unsafe { command.pre_exec(setup) };
        let output = command.output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("1 passed"),
            "child test {test} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    const CHILD_ROOT_ENV: &str = "AGENT_CORE_HOSTFS_CHILD_ROOT";

    fn child_root() -> Option<HostFs> {
        std::env::var_os(CHILD_ROOT_ENV).map(HostFs::new)
    }

    #[test]
    fn clean_normalizes_dots_and_slashes() {
        let cases = [
            ("/", "/"),
            ("", "/"),
            (".", "/"),
            ("//", "/"),
            ("/var/lib/skyhook", "/var/lib/skyhook"),
            ("var/lib/skyhook", "/var/lib/skyhook"),
            ("./var/lib", "/var/lib"),
            ("/var//lib///skyhook/", "/var/lib/skyhook"),
            ("/var/./lib/.", "/var/lib"),
            ("/var/lib/../log", "/var/log"),
            ("/var/lib/skyhook/..", "/var/lib"),
            ("/a/b/../../c", "/c"),
            ("/a/..", "/"),
            ("a/b/../..", "/"),
            ("/etc/skyhook/flags/START", "/etc/skyhook/flags/START"),
            ("/var/lib/...", "/var/lib/..."),
            ("/var/lib/..x", "/var/lib/..x"),
        ];
        for (input, expected) in cases {
            let cleaned = HostFs::clean(Path::new(input)).unwrap();
            assert_eq!(cleaned, Path::new(expected), "clean({input:?})");
        }
    }

    #[test]
    fn clean_refuses_to_climb_above_the_host_root() {
        for input in [
            "..",
            "../..",
            "/..",
            "/../etc",
            "a/../..",
            "/var/../../etc",
            "x/y/../../../z",
        ] {
            let err = HostFs::clean(Path::new(input)).unwrap_err();
            assert!(
                matches!(err, HostFsError::Escapes { .. }),
                "clean({input:?}) = {err:?}"
            );
            assert_eq!(err.to_string(), format!("{input} escapes the host root"));
        }
    }

    proptest! {
        #[test]
        fn clean_is_absolute_idempotent_and_free_of_dots(
            parts in proptest::collection::vec(
                prop_oneof![Just(".."), Just("."), Just(""), Just("a"), Just("b.c"), Just("..d")],
                0..12,
            ),
            absolute in any::<bool>(),
        ) {
            let joined = parts.join("/");
            let input = if absolute { format!("/{joined}") } else { joined };
            if let Ok(cleaned) = HostFs::clean(Path::new(&input)) {
                prop_assert!(cleaned.is_absolute());
                prop_assert!(cleaned.components().all(|c| !matches!(c, Component::ParentDir | Component::CurDir)));
                prop_assert_eq!(HostFs::clean(&cleaned).unwrap(), cleaned);
            }
        }
    }

    #[test]
    fn resolve_joins_root_and_cleaned_path() {
        let fs = HostFs::new("/root");
        assert_eq!(
            fs.resolve(Path::new("/var/lib/../log/x")).unwrap(),
            Path::new("/root/var/log/x")
        );
        assert_eq!(
            fs.resolve(Path::new("etc/skyhook")).unwrap(),
            Path::new("/root/etc/skyhook")
        );
        assert_eq!(fs.resolve(Path::new("/")).unwrap(), Path::new("/root"));
        assert!(matches!(
            fs.resolve(Path::new("/../x")),
            Err(HostFsError::Escapes { .. })
        ));

        let fs = HostFs::new("/");
        assert_eq!(
            fs.resolve(Path::new("/var/log")).unwrap(),
            Path::new("/var/log")
        );
        assert_eq!(fs.resolve(Path::new("/")).unwrap(), Path::new("/"));
    }

    #[test]
    fn write_atomic_creates_parents_0755_and_the_file_0600() {
        let (dir, fs) = host();
        fs.write_atomic(Path::new("/var/lib/skyhook/sk1/flags/START"), b"")
            .unwrap();
        let root = dir.path();
        assert_eq!(
            std::fs::read(root.join("var/lib/skyhook/sk1/flags/START")).unwrap(),
            b""
        );
        assert_eq!(
            mode_of(&root.join("var/lib/skyhook/sk1/flags/START")),
            0o600
        );
        for created in [
            "var",
            "var/lib",
            "var/lib/skyhook",
            "var/lib/skyhook/sk1",
            "var/lib/skyhook/sk1/flags",
        ] {
            assert_eq!(mode_of(&root.join(created)), 0o755, "{created}");
        }
        assert_eq!(names_in(&root.join("var/lib/skyhook/sk1/flags")), ["START"]);
    }

    #[test]
    fn write_atomic_replaces_content_and_resets_the_mode() {
        let (dir, fs) = host();
        let file = dir.path().join("state/x");
        std::fs::create_dir(dir.path().join("state")).unwrap();
        std::fs::write(&file, "old").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        fs.write_atomic(Path::new("/state/x"), b"new").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"new");
        assert_eq!(mode_of(&file), 0o600);
        assert_eq!(names_in(&dir.path().join("state")), ["x"]);
    }

    #[test]
    fn existing_directories_keep_their_mode() {
        let (dir, fs) = host();
        std::fs::create_dir(dir.path().join("state")).unwrap();
        std::fs::set_permissions(
            dir.path().join("state"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        fs.write_atomic(Path::new("/state/x"), b"1").unwrap();
        assert_eq!(mode_of(&dir.path().join("state")), 0o700);
    }

    #[test]
    #[ignore = "run by permissions_do_not_depend_on_the_umask in a child process"]
    fn child_writes_under_umask_0777() {
        let Some(fs) = child_root() else { return };
        fs.write_atomic(Path::new("/a/b/file"), b"x").unwrap();
        fs.create_dir_all(Path::new("/c/d")).unwrap();
        let log = fs.create_new(Path::new("/e/log")).unwrap();
        assert!(log.is_some());
    }

    #[test]
    fn permissions_do_not_depend_on_the_umask() {
        let (dir, _fs) = host();
        run_child(
            "host::fs::tests::child_writes_under_umask_0777",
            dir.path(),
            || {
                // SAFETY: umask(2) cannot fail and is async-signal-safe.
                unsafe { libc::umask(0o777) };
                Ok(())
            },
        );
        let root = dir.path();
        for created in ["a", "a/b", "c", "c/d", "e"] {
            assert_eq!(mode_of(&root.join(created)), 0o755, "{created}");
        }
        assert_eq!(mode_of(&root.join("a/b/file")), 0o600);
        assert_eq!(mode_of(&root.join("e/log")), 0o600);
    }

    #[test]
    #[ignore = "run by write_atomic_keeps_old_content_when_the_write_fails in a child process"]
    fn child_writes_past_the_file_size_limit() {
        let Some(fs) = child_root() else { return };
        let err = fs
            .write_atomic(Path::new("/state/history.json"), &vec![b'x'; 1 << 20])
            .unwrap_err();
        assert!(
            matches!(err, HostFsError::Io { op: "writing", .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "writing /state/history.json",
            "the message names the host path"
        );
    }

    #[test]
    fn write_atomic_keeps_old_content_when_the_write_fails() {
        let (dir, fs) = host();
        fs.write_atomic(Path::new("/state/history.json"), b"old")
            .unwrap();
        // RLIMIT_FSIZE makes write(2) fail with EFBIG past 4 KiB, like a full disk would.
        run_child(
            "host::fs::tests::child_writes_past_the_file_size_limit",
            dir.path(),
            || {
                let limit = libc::rlimit {
                    rlim_cur: 4096,
                    rlim_max: 4096,
                };
                // SAFETY: signal(2) and setrlimit(2) are async-signal-safe; SIG_IGN survives exec,
                // so the write returns EFBIG instead of killing the child with SIGXFSZ.
                unsafe {
                    libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                    if libc::setrlimit(libc::RLIMIT_FSIZE, &raw const limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            },
        );
        assert_eq!(
            std::fs::read(dir.path().join("state/history.json")).unwrap(),
            b"old"
        );
        assert_eq!(
            names_in(&dir.path().join("state")),
            ["history.json"],
            "temp file removed"
        );
    }

    #[test]
    fn write_atomic_over_a_directory_fails_and_leaves_it_untouched() {
        let (dir, fs) = host();
        std::fs::create_dir_all(dir.path().join("state/x")).unwrap();
        std::fs::write(dir.path().join("state/x/inner"), "keep").unwrap();
        let err = fs.write_atomic(Path::new("/state/x"), b"new").unwrap_err();
        assert!(
            matches!(err, HostFsError::NotARegularFile { .. }),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "/state/x is not a regular file");
        assert_eq!(
            std::fs::read(dir.path().join("state/x/inner")).unwrap(),
            b"keep"
        );
        assert_eq!(names_in(&dir.path().join("state")), ["x"]);
    }

    #[test]
    fn write_atomic_to_the_root_itself_is_refused() {
        let (_dir, fs) = host();
        assert!(matches!(
            fs.write_atomic(Path::new("/"), b"x"),
            Err(HostFsError::NotARegularFile { .. })
        ));
    }

    #[test]
    fn write_atomic_accepts_names_close_to_name_max() {
        let (dir, fs) = host();
        let name = format!("s.sh_{}", "Wydh".repeat(62));
        assert_eq!(name.len(), 253);
        fs.write_atomic(&Path::new("/flags").join(&name), b"last_run")
            .unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("flags").join(&name)).unwrap(),
            b"last_run"
        );
        assert_eq!(names_in(&dir.path().join("flags")), [name]);
    }

    #[test]
    fn temp_names_are_recognized_and_fit_name_max() {
        for target in [
            "START",
            "",
            "é".repeat(200).as_str(),
            "x".repeat(255).as_str(),
        ] {
            let name = temp_name(OsStr::new(target)).into_string().unwrap();
            assert!(name.len() <= NAME_MAX, "{name}");
            assert!(is_temp_name(&name), "{name}");
        }
        for not_temp in [
            "START",
            ".START",
            ".START.tmp.",
            ".START.tmp.12",
            ".START.tmp.x.ab",
            "START.tmp.1.ab",
            ".a.tmp.1.zz",
        ] {
            assert!(!is_temp_name(not_temp), "{not_temp}");
        }
        assert!(is_temp_name(".history.json.tmp.1.00ff"));
    }

    #[test]
    fn temp_names_tell_their_target() {
        for target in [
            "resolv.conf",
            "é".repeat(200).as_str(),
            "x".repeat(255).as_str(),
        ] {
            let name = temp_name(OsStr::new(target)).into_string().unwrap();
            assert!(is_temp_name_of(&name, target), "{name} of {target}");
            assert!(!is_temp_name_of(&name, "passwd"), "{name}");
        }
        assert!(!is_temp_name_of(".resolv.conf.tmp.1.ab", "resolv"));
        assert!(!is_temp_name_of(".resolv.tmp.1.ab", "resolv.conf"));
        assert!(!is_temp_name_of("resolv.conf", "resolv.conf"));
    }

    #[test]
    fn symlinked_intermediate_directory_outside_root_is_refused() {
        let (dir, fs) = host();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(outside.path().join("skyhook")).unwrap();
        std::fs::write(outside.path().join("skyhook/START"), "outside").unwrap();
        std::fs::create_dir_all(dir.path().join("var")).unwrap();
        std::fs::write(dir.path().join("var/x"), "inside").unwrap();
        symlink(outside.path(), dir.path().join("var/lib")).unwrap();

        let err = fs
            .write_atomic(Path::new("/var/lib/skyhook/START"), b"x")
            .unwrap_err();
        assert!(matches!(err, HostFsError::SymbolicLink { .. }), "{err:?}");
        assert_eq!(err.to_string(), "/var/lib is a symbolic link");
        assert_eq!(
            std::fs::read(outside.path().join("skyhook/START")).unwrap(),
            b"outside"
        );
        assert_eq!(names_in(&outside.path().join("skyhook")), ["START"]);

        for result in [
            fs.create_dir_all(Path::new("/var/lib/skyhook/new"))
                .map(drop),
            fs.create_new(Path::new("/var/lib/skyhook/log")).map(drop),
            fs.remove_file(Path::new("/var/lib/skyhook/START"))
                .map(drop),
            fs.rename(Path::new("/var/lib/skyhook/START"), Path::new("/moved")),
            fs.rename(Path::new("/var/x"), Path::new("/var/lib/skyhook/START")),
            fs.read(Path::new("/var/lib/skyhook/START")).map(drop),
            fs.is_file(Path::new("/var/lib/skyhook/START")).map(drop),
            fs.list_dir(Path::new("/var/lib/skyhook")).map(drop),
        ] {
            let err = result.unwrap_err();
            assert!(err.to_string().contains("is a symbolic link"), "{err}");
        }
        assert_eq!(names_in(&outside.path().join("skyhook")), ["START"]);
        assert_eq!(
            std::fs::read(outside.path().join("skyhook/START")).unwrap(),
            b"outside"
        );
        assert_eq!(std::fs::read(dir.path().join("var/x")).unwrap(), b"inside");
    }

    #[test]
    fn relative_symlink_inside_root_is_refused_too() {
        let (dir, fs) = host();
        std::fs::create_dir_all(dir.path().join("real")).unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        symlink("../real", dir.path().join("etc/skyhook")).unwrap();
        let err = fs
            .write_atomic(Path::new("/etc/skyhook/flags/START"), b"")
            .unwrap_err();
        assert_eq!(err.to_string(), "/etc/skyhook is a symbolic link");
        assert!(names_in(&dir.path().join("real")).is_empty());
    }

    #[test]
    fn symlink_at_the_final_component_is_refused() {
        let (dir, fs) = host();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("passwd");
        std::fs::write(&victim, "root:x:0:0").unwrap();
        std::fs::create_dir_all(dir.path().join("state")).unwrap();
        symlink(&victim, dir.path().join("state/file")).unwrap();

        let err = fs
            .write_atomic(Path::new("/state/file"), b"owned")
            .unwrap_err();
        assert_eq!(err.to_string(), "/state/file is a symbolic link");
        for result in [
            fs.create_new(Path::new("/state/file")).map(drop),
            fs.remove_file(Path::new("/state/file")).map(drop),
            fs.read(Path::new("/state/file")).map(drop),
            fs.is_file(Path::new("/state/file")).map(drop),
            fs.rename(Path::new("/state/file"), Path::new("/state/other")),
        ] {
            assert!(
                matches!(result, Err(HostFsError::SymbolicLink { .. })),
                "{result:?}"
            );
        }
        std::fs::write(dir.path().join("state/src"), "src").unwrap();
        let err = fs
            .rename(Path::new("/state/src"), Path::new("/state/file"))
            .unwrap_err();
        assert_eq!(err.to_string(), "/state/file is a symbolic link");

        assert_eq!(std::fs::read(&victim).unwrap(), b"root:x:0:0");
        assert!(
            std::fs::symlink_metadata(dir.path().join("state/file"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(names_in(&dir.path().join("state")), ["file", "src"]);
    }

    #[test]
    fn a_file_in_the_middle_of_the_path_is_not_a_directory() {
        let (dir, fs) = host();
        std::fs::create_dir_all(dir.path().join("var/lib")).unwrap();
        std::fs::write(dir.path().join("var/lib/skyhook"), "file").unwrap();
        for result in [
            fs.create_dir_all(Path::new("/var/lib/skyhook/sk1")),
            fs.write_atomic(Path::new("/var/lib/skyhook/sk1/START"), b""),
            fs.read(Path::new("/var/lib/skyhook/x")).map(drop),
            fs.list_dir(Path::new("/var/lib/skyhook")).map(drop),
        ] {
            let err = result.unwrap_err();
            assert_eq!(err.to_string(), "/var/lib/skyhook is not a directory");
        }
        assert_eq!(
            std::fs::read(dir.path().join("var/lib/skyhook")).unwrap(),
            b"file"
        );
    }

    #[test]
    fn read_distinguishes_missing_empty_and_content() {
        let (dir, fs) = host();
        assert_eq!(
            fs.read(Path::new("/state/x")).unwrap(),
            None,
            "missing parent"
        );
        std::fs::create_dir(dir.path().join("state")).unwrap();
        assert_eq!(
            fs.read(Path::new("/state/x")).unwrap(),
            None,
            "missing file"
        );
        std::fs::write(dir.path().join("state/x"), "").unwrap();
        assert_eq!(fs.read(Path::new("/state/x")).unwrap(), Some(Vec::new()));
        std::fs::write(dir.path().join("state/x"), "boot-id:abc\n").unwrap();
        assert_eq!(
            fs.read(Path::new("state/./x")).unwrap(),
            Some(b"boot-id:abc\n".to_vec())
        );
        assert!(
            !dir.path().join("other").exists(),
            "reading creates nothing"
        );
    }

    #[test]
    fn read_and_is_file_refuse_directories_and_fifos() {
        let (dir, fs) = host();
        std::fs::create_dir_all(dir.path().join("state/dir")).unwrap();
        nix::unistd::mkfifo(
            &dir.path().join("state/fifo"),
            Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        for name in ["/state/dir", "/state/fifo"] {
            let err = fs.read(Path::new(name)).unwrap_err();
            assert_eq!(err.to_string(), format!("{name} is not a regular file"));
            assert!(matches!(
                fs.is_file(Path::new(name)),
                Err(HostFsError::NotARegularFile { .. })
            ));
        }
    }

    #[test]
    fn is_file_reports_marker_presence() {
        let (dir, fs) = host();
        assert!(
            !fs.is_file(Path::new("/flags/pkg/1.0.0/s.sh_W11fWzBd"))
                .unwrap()
        );
        fs.write_atomic(Path::new("/flags/pkg/1.0.0/s.sh_W11fWzBd"), b"")
            .unwrap();
        assert!(
            fs.is_file(Path::new("/flags/pkg/1.0.0/s.sh_W11fWzBd"))
                .unwrap()
        );
        assert!(!dir.path().join("flags/pkg/1.0.0/other").exists());
    }

    #[test]
    fn remove_file_reports_whether_it_removed_something() {
        let (dir, fs) = host();
        assert!(!fs.remove_file(Path::new("/flags/x")).unwrap());
        fs.write_atomic(Path::new("/flags/x"), b"").unwrap();
        assert!(fs.remove_file(Path::new("/flags/x")).unwrap());
        assert!(!dir.path().join("flags/x").exists());
        assert!(!fs.remove_file(Path::new("/flags/x")).unwrap());
        std::fs::create_dir(dir.path().join("flags/d")).unwrap();
        assert!(matches!(
            fs.remove_file(Path::new("/flags/d")),
            Err(HostFsError::NotARegularFile { .. })
        ));
        assert!(dir.path().join("flags/d").is_dir());
    }

    #[test]
    fn rename_replaces_the_destination_and_creates_its_parents() {
        let (dir, fs) = host();
        fs.write_atomic(Path::new("/h/pkg.json"), b"{").unwrap();
        fs.write_atomic(Path::new("/h/pkg.json.backup"), b"older")
            .unwrap();
        fs.rename(Path::new("/h/pkg.json"), Path::new("/h/pkg.json.backup"))
            .unwrap();
        assert_eq!(names_in(&dir.path().join("h")), ["pkg.json.backup"]);
        assert_eq!(
            std::fs::read(dir.path().join("h/pkg.json.backup")).unwrap(),
            b"{"
        );

        fs.rename(
            Path::new("/h/pkg.json.backup"),
            Path::new("/elsewhere/deep/x"),
        )
        .unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("elsewhere/deep/x")).unwrap(),
            b"{"
        );
        assert_eq!(mode_of(&dir.path().join("elsewhere/deep")), 0o755);

        let err = fs
            .rename(Path::new("/h/missing"), Path::new("/h/y"))
            .unwrap_err();
        assert!(err.to_string().starts_with("renaming /h/missing"), "{err}");
    }

    #[test]
    fn create_new_never_overwrites() {
        let (dir, fs) = host();
        let mut file = fs
            .create_new(Path::new("/log/pkg/s.sh-1.log"))
            .unwrap()
            .unwrap();
        file.write_all(b"out\n").unwrap();
        assert_eq!(mode_of(&dir.path().join("log/pkg/s.sh-1.log")), 0o600);
        assert!(
            fs.create_new(Path::new("/log/pkg/s.sh-1.log"))
                .unwrap()
                .is_none()
        );
        assert_eq!(
            std::fs::read(dir.path().join("log/pkg/s.sh-1.log")).unwrap(),
            b"out\n"
        );
    }

    #[test]
    fn list_dir_is_sorted_and_empty_when_missing() {
        let (_dir, fs) = host();
        assert!(fs.list_dir(Path::new("/logs")).unwrap().is_empty());
        for name in ["b", "a", "c"] {
            fs.write_atomic(&Path::new("/logs").join(name), b"")
                .unwrap();
        }
        fs.create_dir_all(Path::new("/logs/sub")).unwrap();
        assert_eq!(
            fs.list_dir(Path::new("/logs")).unwrap(),
            ["a", "b", "c", "sub"]
        );
    }

    #[test]
    fn clean_stale_temps_removes_only_old_temp_files() {
        let (dir, fs) = host();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let old = SystemTime::now() - Duration::from_secs(3600);
        for name in [
            ".START.tmp.1.ab12",
            ".x.tmp.7.ff",
            "START",
            ".hidden",
            "y.tmp.1.ab",
        ] {
            let file = File::create(state.join(name)).unwrap();
            file.set_modified(old).unwrap();
        }
        std::fs::write(state.join(".fresh.tmp.1.ab"), "").unwrap();
        assert_eq!(fs.clean_stale_temps(Path::new("/state")), 2);
        assert_eq!(
            names_in(&state),
            [".fresh.tmp.1.ab", ".hidden", "START", "y.tmp.1.ab"]
        );
        assert_eq!(fs.clean_stale_temps(Path::new("/missing")), 0);
        assert_eq!(
            fs.clean_temps_older_than(Path::new("/state"), Duration::ZERO),
            1
        );
        assert_eq!(names_in(&state), [".hidden", "START", "y.tmp.1.ab"]);
    }

    #[test]
    fn works_with_the_real_root_as_root() {
        // The workstation demo runs with ROOT = `/`; a canonical temp dir has no links.
        let base = std::env::temp_dir().canonicalize().unwrap();
        let dir = tempfile::tempdir_in(base).unwrap();
        let fs = HostFs::new("/");
        let file = dir.path().join("state/flags/START");
        fs.write_atomic(&file, b"x").unwrap();
        assert_eq!(fs.read(&file).unwrap(), Some(b"x".to_vec()));
        assert!(fs.is_file(&file).unwrap());
        assert_eq!(fs.list_dir(file.parent().unwrap()).unwrap(), ["START"]);
        assert!(fs.remove_file(&file).unwrap());
        assert_eq!(fs.resolve(&file).unwrap(), file);
    }

    #[test]
    fn errors_name_the_host_path_not_the_root_path() {
        let (dir, fs) = host();
        std::fs::create_dir_all(dir.path().join("state/x")).unwrap();
        let message = fs.read(Path::new("/state/x")).unwrap_err().to_string();
        assert_eq!(message, "/state/x is not a regular file");
        assert!(!message.contains(&dir.path().display().to_string()));
    }
}
