//! Rooted host I/O (SPEC §5): every write of agent state and logs goes through [`HostFs`].
//!
//! The host's `/` is mounted at ROOT and its content is not ours: package steps and other host
//! software can leave symbolic links in a path like `<R>/var/lib/skyhook` that would redirect
//! our writes outside ROOT (into the agent container) or onto another host file. Resolving the whole path with
//! `open(2)` would follow them. Instead every operation opens ROOT once and walks the path one
//! component at a time with `openat(O_DIRECTORY | O_NOFOLLOW)`, so a link anywhere below ROOT
//! is seen and refused, and a component swapped between a check and a use cannot redirect us.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{self, AtFlags, OFlag};
use nix::sys::stat::{self, Mode, SFlag};
use nix::unistd::{self, UnlinkatFlags};

use crate::host::errors::Chain;
use crate::host::identity::NAME_MAX;

/// Errors of rooted host I/O. Messages name the host path (ROOT-relative, as `/var/lib/...`).
#[derive(Debug, thiserror::Error)]
pub enum HostFsError {
    #[error("{path} escapes the host root")]
    Escapes { path: String },
    #[error("{path} is a symbolic link")]
    SymbolicLink { path: String },
    /// A link whose target climbs above ROOT with `..` (SPEC §6.3: not followed).
    #[error("{link} is a symbolic link that resolves outside the host root")]
    LinkOutsideRoot { link: String },
    /// A link to an absolute path where the agent would follow it in its own view of the
    /// host ([`Links::Relative`]), which is not the host's.
    #[error(
        "{link} is a symbolic link to the absolute path {target}: in the agent's view that \
         resolves outside the host root"
    )]
    AbsoluteLink { link: String, target: String },
    /// Following links at `path` never ends.
    #[error("symbolic link cycle at {path}")]
    SymlinkCycle { path: String },
    #[error("{path} is not a directory")]
    NotADirectory { path: String },
    /// Something other than a regular file is at the path (`kind`: "a directory", "a fifo",
    /// ...). A fifo, socket or device is refused before it is opened (SPEC §5).
    #[error("{path} is {kind}, not a regular file")]
    NotARegularFile { path: String, kind: &'static str },
    /// SPEC §5: a state file larger than the bound of its kind is corrupt; it is not read.
    #[error("{path} is corrupt: larger than {}", show_bytes(*.bound))]
    TooLarge { path: String, bound: u64 },
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

/// A host state error with what was being done when it happened (`writing
/// /var/lib/skyhook/.../START`): the state variant of the stage, plan and interrupt errors.
#[derive(Debug, thiserror::Error)]
#[error("{context}")]
pub struct StateFailure {
    pub context: String,
    #[source]
    pub source: HostFsError,
}

/// `map_err(state_err("writing START"))?`: the host state error, with its context.
pub(crate) fn state_err(context: impl Into<String>) -> impl FnOnce(HostFsError) -> StateFailure {
    let context = context.into();
    move |source| StateFailure { context, source }
}

/// SPEC §5: the most a completion, pending or attempts marker may hold; a larger one is corrupt.
pub(crate) const MARKER_BOUND: u64 = 4 << 10;
/// SPEC §5: the most a history file, results record, check results or lock file may hold.
pub(crate) const RECORD_BOUND: u64 = 16 << 20;

/// SPEC §5: state files are 0600.
const FILE_MODE: u32 = 0o600;
/// SPEC §5: directories we create are 0755.
pub(crate) const DIR_MODE: u32 = 0o755;
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
    /// ROOT, open, for the common case of a lookup (see `lookup.rs`): opened once rather
    /// than for every file a run touches. Shared by the clones of one `HostFs`.
    root_dir: std::sync::Arc<std::sync::OnceLock<OwnedFd>>,
}

/// The type of a directory entry, as `lstat(2)` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
    /// A fifo, socket or device, named as [`kind_name`] names it.
    Other(&'static str),
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::File => "a regular file",
            Self::Dir => "a directory",
            Self::Symlink => "a symbolic link",
            Self::Other(name) => name,
        }
    }
}

/// A host path split into its parent directory and final name, both cleaned.
struct Target {
    /// Host path of the parent directory.
    dir: PathBuf,
    name: OsString,
    /// Host path of the target itself, for error messages.
    host: PathBuf,
}

impl Target {
    /// `openat` of the target in its open directory `dir`, creating it 0600 if `flags` say so.
    fn open_in(&self, dir: &OwnedFd, flags: OFlag) -> nix::Result<OwnedFd> {
        fcntl::openat(
            dir,
            self.name.as_os_str(),
            flags,
            Mode::from_bits_truncate(FILE_MODE),
        )
    }
}

impl HostFs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            root_dir: std::sync::Arc::default(),
        }
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
    pub(crate) fn check_dir_path(&self, host_path: &Path) -> Result<(), HostFsError> {
        let dir = Self::clean(host_path)?;
        self.walk_existing(&dir).map(drop)
    }

    /// Atomic replace (temp file in the same directory, fsync, rename, directory fsync),
    /// mode 0600, parents created as by [`HostFs::create_dir_all`].
    pub(crate) fn write_atomic(
        &self,
        host_path: &Path,
        contents: &[u8],
    ) -> Result<(), HostFsError> {
        let target = Self::split(host_path)?;
        let dir = self.walk_create(&target.dir)?;
        Self::replace(&dir, &target, FILE_MODE, DirSync::Required, |file| {
            file.write_all(contents)
        })
    }

    /// Replace `target` in its open directory `dir` with what `write` writes, through the one
    /// atomic replace. `renameat` would replace a link rather than follow it, but SPEC §5 wants
    /// a link at the destination reported, and a directory there cannot be replaced by a file.
    fn replace(
        dir: &OwnedFd,
        target: &Target,
        mode: u32,
        sync: DirSync,
        write: impl FnOnce(&mut File) -> std::io::Result<()>,
    ) -> Result<(), HostFsError> {
        is_regular_at(dir, &target.name, &target.host)?;
        replace_in(dir, &target.dir, &target.name, mode, sync, write)
    }

    /// Atomic replace without durability, for diagnostics (results records, metrics; SPEC
    /// §8.12): a temp file in the same directory renamed over the target, so a reader never
    /// sees half a file, but no fsync of the file, of its directory or of directories it
    /// creates. After a crash the previous content, or none, may come back. `mode` is the
    /// file's permission bits (0600 for state; 0644 for files other programs read). Missing
    /// parents are created when `create_dirs`, else the write fails (`No such file or
    /// directory`, naming the file).
    #[cfg(test)]
    pub(crate) fn write_diagnostic(
        &self,
        host_path: &Path,
        contents: &[u8],
        mode: u32,
        create_dirs: bool,
    ) -> Result<(), HostFsError> {
        self.write_diagnostic_with(host_path, mode, create_dirs, |file| {
            file.write_all(contents)
        })
    }

    /// [`write_diagnostic`](Self::write_diagnostic) of what `write` writes into the temp
    /// file, for contents produced as they are written rather than held whole.
    pub(crate) fn write_diagnostic_with(
        &self,
        host_path: &Path,
        mode: u32,
        create_dirs: bool,
        write: impl FnOnce(&mut File) -> std::io::Result<()>,
    ) -> Result<(), HostFsError> {
        let target = Self::split(host_path)?;
        let missing = if create_dirs {
            Missing::CreateUnsynced
        } else {
            Missing::Stop
        };
        let dir = self
            .walk(&target.dir, missing)?
            .ok_or_else(|| io_error("writing", &target.host, Errno::ENOENT))?;
        Self::replace(&dir, &target, mode, DirSync::Never, write)
    }

    /// Read a state file of at most `bound` bytes (`MARKER_BOUND`, `RECORD_BOUND`):
    /// `Ok(None)` if it does not exist; `SymbolicLink` / `NotARegularFile` if something else
    /// is there; `TooLarge` if it holds more than `bound` bytes (SPEC §5: corrupt). At most
    /// `bound + 1` bytes are ever read, whatever the file's size.
    pub fn read(&self, host_path: &Path, bound: u64) -> Result<Option<Vec<u8>>, HostFsError> {
        let target = Self::split(host_path)?;
        self.open_file(host_path)?
            .map(|file| read_bounded(file, bound, &target.host))
            .transpose()
    }

    /// [`HostFs::read`] for a caller that parses the file as it reads it (a large state file
    /// need not be held whole): the open file, at most `bound` bytes of it; `TooLarge` when it
    /// is larger already.
    pub(crate) fn open_bounded(
        &self,
        host_path: &Path,
        bound: u64,
    ) -> Result<Option<std::io::Take<File>>, HostFsError> {
        let target = Self::split(host_path)?;
        let Some(file) = self.open_file(host_path)? else {
            return Ok(None);
        };
        check_bound(&file, bound, &target.host)?;
        Ok(Some(file.take(bound)))
    }

    /// Open an existing state file for reading: `Ok(None)` if it does not exist;
    /// `SymbolicLink` / `NotARegularFile` if something else is there. A fifo, socket or device
    /// is refused from its type, never opened (opening a fifo blocks, opening a device can
    /// have side effects).
    pub fn open_file(&self, host_path: &Path) -> Result<Option<File>, HostFsError> {
        let target = Self::split(host_path)?;
        let Some(dir) = self.walk_existing(&target.dir)? else {
            return Ok(None);
        };
        open_regular_at(&dir, &target.name, &target.host)
    }

    /// `Ok(true)` iff a regular file exists at the path (marker semantics), `Ok(false)` if
    /// nothing is there, `SymbolicLink` / `NotARegularFile` for anything else.
    pub fn is_file(&self, host_path: &Path) -> Result<bool, HostFsError> {
        let target = Self::split(host_path)?;
        let Some(dir) = self.walk_existing(&target.dir)? else {
            return Ok(false);
        };
        is_regular_at(&dir, &target.name, &target.host)
    }

    /// Remove a file if present; `Ok(false)` if it did not exist. A symbolic link or a
    /// directory at the path is refused and left in place. The directory is fsynced so a
    /// removed marker stays removed after a crash.
    pub fn remove_file(&self, host_path: &Path) -> Result<bool, HostFsError> {
        self.remove(host_path, true)
    }

    /// [`HostFs::remove_file`] without the directory fsync, for files whose return after a
    /// crash is harmless (old logs: the next retention removes them again).
    pub(crate) fn remove_file_unsynced(&self, host_path: &Path) -> Result<bool, HostFsError> {
        self.remove(host_path, false)
    }

    fn remove(&self, host_path: &Path, durable: bool) -> Result<bool, HostFsError> {
        let target = Self::split(host_path)?;
        let Some(dir) = self.walk_existing(&target.dir)? else {
            return Ok(false);
        };
        match entry_kind(&dir, &target.name, &target.host)? {
            None => return Ok(false),
            Some(Kind::File | Kind::Other(_)) => {}
            Some(Kind::Symlink) => return Err(symbolic_link(&target.host)),
            Some(Kind::Dir) => return Err(not_a_regular_file(&target.host, Kind::Dir)),
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
            Some(Kind::File | Kind::Dir | Kind::Other(_)) => {}
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
        let fd = match target.open_in(&dir, flags) {
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
    pub(crate) fn open_lock_file(&self, host_path: &Path) -> Result<File, HostFsError> {
        let target = Self::split(host_path)?;
        let dir = self.walk_create(&target.dir)?;
        // As for a read: a fifo or a device is refused from its type, never opened.
        is_regular_at(&dir, &target.name, &target.host)?;
        let flags = OFlag::O_RDWR
            | OFlag::O_CREAT
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_CLOEXEC;
        let fd = match target.open_in(&dir, flags) {
            Ok(fd) => fd,
            Err(Errno::ELOOP) => return Err(symbolic_link(&target.host)),
            Err(errno) => return Err(io_error("opening", &target.host, errno)),
        };
        check_regular(&fd, &target.host)?;
        Ok(File::from(fd))
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
    pub(crate) fn visit_dir(
        &self,
        host_path: &Path,
        visit: impl FnMut(&str),
    ) -> Result<(), HostFsError> {
        let dir_path = Self::clean(host_path)?;
        let Some(dir) = self.walk_existing(&dir_path)? else {
            return Ok(());
        };
        atomic::list_fd(&dir, visit).map_err(|errno| io_error("listing", &dir_path, errno))
    }

    /// Remove temp files left in `dir` by a [`HostFs::write_atomic`] that was killed (SPEC §5:
    /// "stray temp files are ignored and cleaned later"). Temp files younger than ten minutes
    /// are kept: agents of other packages share STATE and may be about to rename theirs.
    /// Best effort; returns how many were removed.
    pub(crate) fn clean_stale_temps(&self, dir: &Path) -> usize {
        self.clean_temps_older_than(dir, STALE_TEMP_AGE)
    }

    /// [`HostFs::clean_stale_temps`] with an explicit minimum age (`Duration::ZERO` removes
    /// every temp file). Failures are logged at debug level and skipped.
    pub(crate) fn clean_temps_older_than(&self, dir: &Path, min_age: Duration) -> usize {
        let opened = Self::clean(dir).and_then(|dir| self.walk_existing(&dir));
        match opened {
            Ok(Some(fd)) => remove_stale_temps(&fd, dir, is_temp_name, min_age),
            Ok(None) => 0,
            Err(err) => {
                tracing::debug!(dir = %dir.display(), error = %Chain(&err), "cannot list directory for stale temp files");
                0
            }
        }
    }

    /// Clean `host_path` and split it into parent and final name. `/` has no name: it is a
    /// directory, so it cannot be a file target.
    fn split(host_path: &Path) -> Result<Target, HostFsError> {
        let host = Self::clean(host_path)?;
        let (Some(dir), Some(name)) = (host.parent(), host.file_name()) else {
            return Err(not_a_regular_file(&host, Kind::Dir));
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

    /// ROOT, open once for the lifetime of this `HostFs` (and its clones).
    fn root_dir(&self) -> Result<&OwnedFd, HostFsError> {
        if let Some(fd) = self.root_dir.get() {
            return Ok(fd);
        }
        let fd = self.open_root()?;
        // Another thread may have opened it meanwhile: one of the two is kept.
        let _ = self.root_dir.set(fd);
        Ok(self.root_dir.get().expect("set above"))
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
        _ => Kind::Other(kind_name(mode)),
    }
}

/// What a file of mode `mode` (`st_mode`) is, for messages: "a regular file", "a directory",
/// "a symbolic link", "a fifo", "a socket", "a character device", "a block device".
pub(crate) fn kind_name(mode: u32) -> &'static str {
    match SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFREG => "a regular file",
        SFlag::S_IFDIR => "a directory",
        SFlag::S_IFLNK => "a symbolic link",
        SFlag::S_IFIFO => "a fifo",
        SFlag::S_IFSOCK => "a socket",
        SFlag::S_IFCHR => "a character device",
        SFlag::S_IFBLK => "a block device",
        _ => "not a regular file",
    }
}

/// Whether `name` in `dir` is a regular file (`false`: nothing is there); a symbolic link or
/// anything else there is refused (`SymbolicLink`, `NotARegularFile`).
fn is_regular_at(dir: &OwnedFd, name: &OsStr, host: &Path) -> Result<bool, HostFsError> {
    match entry_kind(dir, name, host)? {
        None => Ok(false),
        Some(Kind::File) => Ok(true),
        Some(Kind::Symlink) => Err(symbolic_link(host)),
        Some(kind) => Err(not_a_regular_file(host, kind)),
    }
}

/// Open the regular file `name` in `dir` for reading; `None` if absent. Its type is checked
/// before it is opened (a fifo would block the open, a device may act on it) and again on
/// the descriptor (it may have been swapped in between).
fn open_regular_at(dir: &OwnedFd, name: &OsStr, host: &Path) -> Result<Option<File>, HostFsError> {
    if !is_regular_at(dir, name, host)? {
        return Ok(None);
    }
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = match fcntl::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(None),
        Err(Errno::ELOOP) => return Err(symbolic_link(host)),
        Err(errno) => return Err(io_error("opening", host, errno)),
    };
    check_regular(&fd, host)?;
    Ok(Some(File::from(fd)))
}

/// `NotARegularFile` unless the open descriptor is a regular file.
fn check_regular(fd: &OwnedFd, host: &Path) -> Result<(), HostFsError> {
    let stat = stat::fstat(fd).map_err(|errno| io_error("inspecting", host, errno))?;
    match kind_of(stat.st_mode) {
        Kind::File => Ok(()),
        kind => Err(not_a_regular_file(host, kind)),
    }
}

/// SPEC §5: the content of an open state file of at most `bound` bytes. The size is checked
/// before reading and at most `bound + 1` bytes are read (the file may grow meanwhile, and
/// files of `/proc` report no size), so memory never grows with the file.
/// `TooLarge` when `file` holds more than `bound` bytes; its size.
fn check_bound(file: &File, bound: u64, host: &Path) -> Result<u64, HostFsError> {
    let size = file
        .metadata()
        .map_err(|source| io_source("inspecting", host, source))?
        .len();
    if size > bound {
        return Err(HostFsError::TooLarge {
            path: host.display().to_string(),
            bound,
        });
    }
    Ok(size)
}

fn read_bounded(file: File, bound: u64, host: &Path) -> Result<Vec<u8>, HostFsError> {
    let too_large = || HostFsError::TooLarge {
        path: host.display().to_string(),
        bound,
    };
    let size = check_bound(&file, bound, host)?;
    let mut contents = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(bound.saturating_add(1))
        .read_to_end(&mut contents)
        .map_err(|source| io_source("reading", host, source))?;
    if contents.len() as u64 > bound {
        return Err(too_large());
    }
    Ok(contents)
}

/// `4 KiB`, `16 MiB`, or a number of bytes.
fn show_bytes(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
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

fn not_a_regular_file(host: &Path, kind: Kind) -> HostFsError {
    HostFsError::NotARegularFile {
        path: host.display().to_string(),
        kind: kind.name(),
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

mod atomic;
mod lookup;

pub use atomic::is_temp_name;
pub(crate) use atomic::{
    DirSync, is_earlier_temp_name, is_temp_name_of, remove_stale_temps, remove_tree_at, replace_in,
    temp_name,
};
pub use lookup::Links;
pub(crate) use lookup::{Located, Missing, open_dir_below};

#[cfg(test)]
mod tests;
