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
    /// The same without making the new entry durable (directories of diagnostics).
    CreateUnsynced,
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
        Self::replace(&dir, &target, FILE_MODE, DirSync::Required, contents)
    }

    /// Replace `target` in its open directory `dir` with `contents` through the one atomic
    /// replace. `renameat` would replace a link rather than follow it, but SPEC §5 wants a
    /// link at the destination reported, and a directory there cannot be replaced by a file.
    fn replace(
        dir: &OwnedFd,
        target: &Target,
        mode: u32,
        sync: DirSync,
        contents: &[u8],
    ) -> Result<(), HostFsError> {
        Self::replace_with(dir, target, mode, sync, |file| file.write_all(contents))
    }

    /// [`replace`](Self::replace) with contents written by `write`.
    fn replace_with(
        dir: &OwnedFd,
        target: &Target,
        mode: u32,
        sync: DirSync,
        write: impl FnOnce(&mut File) -> std::io::Result<()>,
    ) -> Result<(), HostFsError> {
        match entry_kind(dir, &target.name, &target.host)? {
            None | Some(Kind::File) => {}
            Some(Kind::Symlink) => return Err(symbolic_link(&target.host)),
            Some(Kind::Dir | Kind::Other) => return Err(not_a_regular_file(&target.host)),
        }
        replace_in(dir, &target.dir, &target.name, mode, sync, write)
    }

    /// Atomic replace without durability, for diagnostics (results records, metrics; SPEC
    /// §8.12): a temp file in the same directory renamed over the target, so a reader never
    /// sees half a file, but no fsync of the file, of its directory or of directories it
    /// creates. After a crash the previous content, or none, may come back. `mode` is the
    /// file's permission bits (0600 for state; 0644 for files other programs read). Missing
    /// parents are created when `create_dirs`, else the write fails (`No such file or
    /// directory`, naming the file).
    pub fn write_diagnostic(
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
    pub fn write_diagnostic_with(
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
        Self::replace_with(&dir, &target, mode, DirSync::Never, write)
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
    pub fn visit_dir(&self, host_path: &Path, visit: impl FnMut(&str)) -> Result<(), HostFsError> {
        let dir_path = Self::clean(host_path)?;
        let Some(dir) = self.walk_existing(&dir_path)? else {
            return Ok(());
        };
        atomic::list_fd(&dir, visit).map_err(|errno| io_error("listing", &dir_path, errno))
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
        let opened = Self::clean(dir).and_then(|dir| self.walk_existing(&dir));
        match opened {
            Ok(Some(fd)) => remove_stale_temps(&fd, dir, is_temp_name, min_age),
            Ok(None) => 0,
            Err(err) => {
                tracing::debug!(dir = %dir.display(), error = %crate::host::errors::Chain(&err), "cannot list directory for stale temp files");
                0
            }
        }
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
                None => make_dir_at(&current, name, &walked, missing == Missing::Create)?,
            };
            current = next;
        }
        Ok(Some(current))
    }
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
fn make_dir_at(
    parent: &OwnedFd,
    name: &OsStr,
    host: &Path,
    durable: bool,
) -> Result<OwnedFd, HostFsError> {
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
        if durable {
            let parent_host = host.parent().unwrap_or(Path::new("/"));
            sync_fd(parent, parent_host)?;
        }
    }
    Ok(fd)
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

mod atomic;

pub use atomic::is_temp_name;
pub(crate) use atomic::{
    DirSync, is_earlier_temp_name, is_temp_name_of, remove_stale_temps, replace_in, temp_name,
};

#[cfg(test)]
mod tests;
