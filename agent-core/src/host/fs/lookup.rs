//! The one lookup of host paths below ROOT (SPEC §5, §6): every host path the agent opens,
//! creates, replaces or changes is reached from a descriptor of ROOT, one component at a time
//! with `O_NOFOLLOW`, never through a path string that the kernel would resolve again.
//!
//! What a symbolic link on the way means depends on the path ([`Links`]): state paths refuse
//! it; host files pre-flight writes (resolv.conf, the `root_dir` overlay) and step files run on
//! the host follow it as the host would, with ROOT as `/`; paths the agent goes on using
//! through its own view of ROOT follow only relative links. A link is read with `readlinkat`
//! and followed by this walk, from the descriptors it holds, so a directory swapped for a link
//! between a check and a use is seen at the use: there is no check apart from the use.
//!
//! Where no link is on the way (the common case), `openat2(2)` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS` opens the directory in one call; any failure (a link, a missing
//! directory to create, a kernel without `openat2`) falls back to the walk, which alone
//! follows links. Not `RESOLVE_IN_ROOT`: it clamps a `..` that climbs above ROOT at ROOT, but
//! SPEC §6.3 refuses such a link (it was not written for this root, and the file it meant is
//! not the one the clamp finds), and the messages name the link.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::fcntl::{self, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{self, Mode};

use super::{
    DIR_MODE, HostFs, HostFsError, Kind, entry_kind, io_error, not_a_directory, open_regular_at,
    set_mode, symbolic_link, sync_fd,
};

/// What a symbolic link below ROOT means on a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Agent state and logs (SPEC §5): a link anywhere below ROOT is refused (`is a symbolic
    /// link`).
    Refuse,
    /// Host files as the host sees them (SPEC §6: resolv.conf, the `root_dir` overlay; step
    /// files run on the host): a link is followed with ROOT as `/`. An absolute target starts
    /// again at ROOT; a `..` that would climb above ROOT is refused (`resolves outside the
    /// host root`).
    InRoot,
    /// Paths the agent goes on using through its own view of ROOT (COPY_DIR, read by path
    /// later; step files run in the agent's container): relative links are followed as for
    /// `InRoot`, but an absolute one is refused, since in the agent's view it leads out of
    /// ROOT (unless ROOT is `/`, where both views agree).
    Relative,
}

/// What a directory walk does about a component that does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missing {
    /// Create it (0755), as `mkdir -p` does, and make the new entry durable.
    Create,
    /// The same without making the new entry durable (directories of diagnostics).
    CreateUnsynced,
    /// Stop and report that the directory is absent.
    Stop,
}

/// Where a host path leads: the directory that holds its final entry, open, and what is there.
#[derive(Debug)]
pub(crate) struct Located {
    /// The directory holding the final entry.
    pub(crate) dir: OwnedFd,
    /// Its host path, links resolved (for messages).
    pub(crate) dir_host: PathBuf,
    /// The final entry's name; `None` when the path leads to ROOT itself.
    pub(crate) name: Option<OsString>,
    /// What the final entry is (a link there followed, unless [`Links::Refuse`]); `None` if
    /// it does not exist.
    pub(crate) kind: Option<Kind>,
}

impl Located {
    /// The entry `name` of the open directory `dir` (host path `dir_host`), as it is now.
    pub(crate) fn entry(dir: &OwnedFd, dir_host: &Path, name: &OsStr) -> Result<Self, HostFsError> {
        let host = dir_host.join(name);
        Ok(Self {
            dir: clone_dir(dir, dir_host)?,
            dir_host: dir_host.to_path_buf(),
            name: Some(name.to_owned()),
            kind: entry_kind(dir, name, &host)?,
        })
    }

    /// The entry `name` next to this one, in the same directory.
    pub(crate) fn sibling(&self, name: &OsStr) -> Result<Self, HostFsError> {
        Self::entry(&self.dir, &self.dir_host, name)
    }

    /// The host path the lookup led to.
    pub(crate) fn host(&self) -> PathBuf {
        match &self.name {
            Some(name) => self.dir_host.join(name),
            None => self.dir_host.clone(),
        }
    }

    /// Whether the entry is a directory.
    pub(crate) fn is_dir(&self) -> bool {
        self.kind == Some(Kind::Dir)
    }

    /// Whether the entry is a regular file.
    pub(crate) fn is_file(&self) -> bool {
        self.kind == Some(Kind::File)
    }

    /// What the entry is, for messages ("a fifo", ...); `None` if it does not exist.
    pub(crate) fn kind_name(&self) -> Option<&'static str> {
        self.kind.map(Kind::name)
    }

    /// Open the entry, a regular file, for reading (never a fifo or device); `None` if it
    /// does not exist.
    pub(crate) fn open_file(&self) -> Result<Option<File>, HostFsError> {
        let Some(name) = &self.name else {
            return Err(super::not_a_regular_file(&self.host(), Kind::Dir));
        };
        open_regular_at(&self.dir, name, &self.host())
    }

    /// Open the entry, a directory (itself when the path is ROOT).
    pub(crate) fn open_dir(&self) -> Result<OwnedFd, HostFsError> {
        let host = self.host();
        match &self.name {
            None => clone_dir(&self.dir, &host),
            Some(name) => open_dir_at(&self.dir, name, &host),
        }
    }

    /// Create the entry as a directory with `mode` whatever the umask, and open it.
    pub(crate) fn create_dir(&self, mode: u32) -> Result<OwnedFd, HostFsError> {
        let host = self.host();
        let Some(name) = &self.name else {
            return Err(io_error("creating directory", &host, Errno::EEXIST));
        };
        stat::mkdirat(&self.dir, name.as_os_str(), Mode::from_bits_truncate(mode))
            .map_err(|errno| io_error("creating directory", &host, errno))?;
        let fd = open_dir_at(&self.dir, name, &host)?;
        set_mode(&fd, mode, &host)?;
        Ok(fd)
    }
}

/// What a lookup is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Goal {
    /// The whole path is a directory to open.
    Dir,
    /// The final component is an entry to look at (its parent is opened).
    Entry,
}

/// Linux's `MAXSYMLINKS`: following more links than this is a cycle.
const MAX_LINKS: u32 = 40;

/// How often one lookup looks again at entries that changed under it before giving up.
const MAX_RETRIES: u32 = 40;

/// Set once `openat2(2)` turned out to be missing (an old kernel, a seccomp filter).
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

impl HostFs {
    /// Look up `host_path` below ROOT, following links as `links` says: the open directory
    /// holding its final entry, and what that entry is. Missing directories on the way are
    /// created or stop the lookup (`Ok(None)`) as `missing` says.
    pub(crate) fn locate(
        &self,
        host_path: &Path,
        links: Links,
        missing: Missing,
    ) -> Result<Option<Located>, HostFsError> {
        let path = Self::clean(host_path)?;
        self.lookup_from_root(&path, links, missing, Goal::Entry)
    }

    /// Read a host file of at most `bound` bytes as the host sees it ([`Links::InRoot`]):
    /// `Ok(None)` if it does not exist; `TooLarge` if it holds more (SPEC §5).
    pub(crate) fn read_host_file(
        &self,
        host_path: &Path,
        bound: u64,
    ) -> Result<Option<Vec<u8>>, HostFsError> {
        let Some(located) = self.locate(host_path, Links::InRoot, Missing::Stop)? else {
            return Ok(None);
        };
        let host = located.host();
        located
            .open_file()?
            .map(|file| super::read_bounded(file, bound, &host))
            .transpose()
    }

    /// Open the directory at a cleaned host path, refusing links; `None` if a component is
    /// missing and `missing` is [`Missing::Stop`].
    pub(super) fn walk(
        &self,
        dir: &Path,
        missing: Missing,
    ) -> Result<Option<OwnedFd>, HostFsError> {
        let located = self.lookup_from_root(dir, Links::Refuse, missing, Goal::Dir)?;
        Ok(located.map(|l| l.dir))
    }

    /// [`lookup`] from ROOT: the common case from the ROOT directory opened once, the walk
    /// from a directory of its own.
    fn lookup_from_root(
        &self,
        path: &Path,
        links: Links,
        missing: Missing,
        goal: Goal,
    ) -> Result<Option<Located>, HostFsError> {
        if let Some(located) = fast_lookup(self.root_dir()?, Path::new("/"), path, goal)? {
            return Ok(Some(located));
        }
        lookup(
            self.open_root()?,
            Path::new("/"),
            path,
            links,
            missing,
            goal,
        )
    }
}

/// Open the directory `rel` below the open directory `base` (host path `base_host`), refusing
/// links (a tree the agent is building, such as a package copy); `None` if a component is
/// missing.
pub(crate) fn open_dir_below(
    base: &OwnedFd,
    base_host: &Path,
    rel: &Path,
) -> Result<Option<OwnedFd>, HostFsError> {
    let located = lookup(
        clone_dir(base, base_host)?,
        base_host,
        rel,
        Links::Refuse,
        Missing::Stop,
        Goal::Dir,
    )?;
    Ok(located.map(|l| l.dir))
}

/// A component still to walk: a name, or a `..` met in a link's target.
enum Part {
    Parent,
    Name(OsString),
}

/// What the walk does with the component it looked at.
enum Step {
    /// A directory, open: go into it.
    Enter(OwnedFd),
    /// A link to follow.
    Follow,
    /// It changed while the walk looked at it: look again.
    Retry,
}

/// The walk itself, from `base` (ROOT, or a directory below it) whose host path is
/// `base_host`. `path`'s `..` components were removed by [`HostFs::clean`]; only link
/// targets bring new ones, and those never climb above `base`.
fn lookup(
    base: OwnedFd,
    base_host: &Path,
    path: &Path,
    links: Links,
    missing: Missing,
    goal: Goal,
) -> Result<Option<Located>, HostFsError> {
    if let Some(located) = fast_lookup(&base, base_host, path, goal)? {
        return Ok(Some(located));
    }
    let mut pending: VecDeque<Part> = normal_components(path)
        .map(|name| Part::Name(name.to_owned()))
        .collect();
    // The directories entered below `base`, with their names: `..` goes back to the one
    // before, never to whatever the kernel finds as the parent now.
    let mut stack: Vec<(OwnedFd, OsString)> = Vec::new();
    let mut followed = 0;
    let mut retries = 0;
    let mut last_link: Option<PathBuf> = None;
    let host_of = |stack: &[(OwnedFd, OsString)]| {
        let mut host = base_host.to_path_buf();
        host.extend(stack.iter().map(|(_, name)| name));
        host
    };
    while let Some(part) = pending.pop_front() {
        let name = match part {
            Part::Parent => {
                if stack.pop().is_none() {
                    let link = last_link.clone().unwrap_or_else(|| path.to_path_buf());
                    return Err(HostFsError::LinkOutsideRoot {
                        link: link.display().to_string(),
                    });
                }
                continue;
            }
            Part::Name(name) => name,
        };
        let current = stack.last().map_or(&base, |(fd, _)| fd);
        let here = host_of(&stack).join(&name);
        let step = if goal == Goal::Entry && pending.is_empty() {
            match entry_kind(current, &name, &here)? {
                Some(Kind::Symlink) if links != Links::Refuse => Step::Follow,
                kind => {
                    return Ok(Some(Located {
                        dir: clone_dir(current, &here)?,
                        dir_host: host_of(&stack),
                        name: Some(name),
                        kind,
                    }));
                }
            }
        } else {
            let entry = match dir_at(current, &name, &here)? {
                DirAt::Absent => {
                    let durable = match missing {
                        Missing::Stop => return Ok(None),
                        Missing::Create => true,
                        Missing::CreateUnsynced => false,
                    };
                    make_dir_at(current, &name, &here, durable)?
                }
                entry => entry,
            };
            match entry {
                DirAt::Open(fd) => Step::Enter(fd),
                DirAt::Link if links == Links::Refuse => return Err(symbolic_link(&here)),
                DirAt::Link => Step::Follow,
                DirAt::Absent | DirAt::Swapped(_) => Step::Retry,
            }
        };
        let target = match step {
            Step::Enter(fd) => {
                stack.push((fd, name));
                continue;
            }
            Step::Follow => match fcntl::readlinkat(current, name.as_os_str()) {
                Ok(target) => Some(PathBuf::from(target)),
                // No longer a link: look again.
                Err(Errno::EINVAL | Errno::ENOENT) => None,
                Err(errno) => return Err(io_error("reading symbolic link", &here, errno)),
            },
            Step::Retry => None,
        };
        let Some(target) = target else {
            // The entry changed between two looks at it (another process renaming, or a
            // directory and a link swapped); look at it again, a bounded number of times.
            retries += 1;
            if retries > MAX_RETRIES {
                return Err(io_error("opening directory", &here, Errno::EAGAIN));
            }
            pending.push_front(Part::Name(name));
            continue;
        };
        followed += 1;
        if followed > MAX_LINKS {
            return Err(HostFsError::SymlinkCycle {
                path: here.display().to_string(),
            });
        }
        if target.is_absolute() {
            if links == Links::Relative && !is_process_root(&base) {
                return Err(HostFsError::AbsoluteLink {
                    link: here.display().to_string(),
                    target: target.display().to_string(),
                });
            }
            stack.clear();
        }
        for component in target.components().rev() {
            match component {
                Component::Normal(name) => pending.push_front(Part::Name(name.to_owned())),
                Component::ParentDir => pending.push_front(Part::Parent),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
        last_link = Some(here);
    }
    // Every component was a directory entered (or the path was `base` itself).
    let mut dir_host = host_of(&stack);
    let (dir, name) = match (goal, stack.pop()) {
        (Goal::Dir, Some((fd, _))) => (fd, None),
        (Goal::Entry, Some((_, name))) => {
            // A link led to a directory: its parent is the one entered before it.
            dir_host.pop();
            (stack.pop().map_or(base, |(fd, _)| fd), Some(name))
        }
        (_, None) => (base, None),
    };
    Ok(Some(Located {
        dir,
        dir_host,
        name,
        kind: Some(Kind::Dir),
    }))
}

/// The common case in one call: no link on the way, every directory there. `openat2` with
/// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` opens the directory (the whole path, or the parent
/// of its final entry); `None` sends the caller to the walk, which names a link, creates what
/// is missing, or follows links as asked.
fn fast_lookup(
    base: &OwnedFd,
    base_host: &Path,
    path: &Path,
    goal: Goal,
) -> Result<Option<Located>, HostFsError> {
    let names: Vec<&OsStr> = normal_components(path).collect();
    let (dir_names, name) = match (goal, names.split_last()) {
        (Goal::Entry, Some((name, dirs))) => (dirs, Some(*name)),
        // ROOT itself, or a directory: nothing to gain over the walk for ROOT.
        (_, None) => return Ok(None),
        (Goal::Dir, Some(_)) => (names.as_slice(), None),
    };
    if NO_OPENAT2.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let mut rel = PathBuf::from(".");
    rel.extend(dir_names);
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
    let dir = match fcntl::openat2(base, rel.as_path(), how) {
        Ok(fd) => fd,
        Err(Errno::ENOSYS | Errno::EPERM | Errno::EINVAL | Errno::E2BIG) => {
            NO_OPENAT2.store(true, Ordering::Relaxed);
            return Ok(None);
        }
        Err(_) => return Ok(None),
    };
    let mut dir_host = base_host.to_path_buf();
    dir_host.extend(dir_names);
    let kind = match name {
        Some(name) => entry_kind(&dir, name, &dir_host.join(name))?,
        None => Some(Kind::Dir),
    };
    if kind == Some(Kind::Symlink) {
        // Refused or followed: the walk decides, and names it.
        return Ok(None);
    }
    Ok(Some(Located {
        dir,
        dir_host,
        name: name.map(OsStr::to_owned),
        kind,
    }))
}

fn normal_components(path: &Path) -> impl Iterator<Item = &OsStr> {
    path.components().filter_map(|c| match c {
        Component::Normal(name) => Some(name),
        _ => None,
    })
}

/// Whether `dir` is this process's `/`: then the agent's view and the host's view of an
/// absolute link agree.
fn is_process_root(dir: &OwnedFd) -> bool {
    match (stat::fstat(dir), stat::stat("/")) {
        (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
        _ => false,
    }
}

/// What is at a name where the walk wants a directory.
enum DirAt {
    /// A directory, opened without following a link.
    Open(OwnedFd),
    Absent,
    Link,
    /// It changed between the open and the look at what failed it (errno of the open).
    Swapped(Errno),
}

/// Open the directory `name` inside `parent` without following a link; a link, a missing
/// entry or one that changed meanwhile is reported, a file or device is not a directory.
fn dir_at(parent: &OwnedFd, name: &OsStr, host: &Path) -> Result<DirAt, HostFsError> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match fcntl::openat(parent, name, flags, Mode::empty()) {
        Ok(fd) => Ok(DirAt::Open(fd)),
        Err(Errno::ENOENT) => Ok(DirAt::Absent),
        // With O_DIRECTORY, Linux reports a link as ENOTDIR rather than ELOOP; ask lstat which
        // one it really is.
        Err(errno @ (Errno::ELOOP | Errno::ENOTDIR)) => match entry_kind(parent, name, host)? {
            Some(Kind::Symlink) => Ok(DirAt::Link),
            Some(Kind::File | Kind::Other(_)) => Err(not_a_directory(host)),
            Some(Kind::Dir) | None => Ok(DirAt::Swapped(errno)),
        },
        Err(errno) => Err(io_error("opening directory", host, errno)),
    }
}

/// A descriptor of its own for the open directory `dir` (host path `host`).
fn clone_dir(dir: &OwnedFd, host: &Path) -> Result<OwnedFd, HostFsError> {
    dir.try_clone()
        .map_err(|e| super::io_source("opening directory", host, e))
}

/// Open the directory `name` inside `parent` without following a link; an absent one is an
/// error (`ENOENT`, "opening directory").
fn open_dir_at(parent: &OwnedFd, name: &OsStr, host: &Path) -> Result<OwnedFd, HostFsError> {
    match dir_at(parent, name, host)? {
        DirAt::Open(fd) => Ok(fd),
        DirAt::Absent => Err(io_error("opening directory", host, Errno::ENOENT)),
        DirAt::Link => Err(symbolic_link(host)),
        // Report what the kernel said.
        DirAt::Swapped(errno) => Err(io_error("opening directory", host, errno)),
    }
}

/// Create the directory `name` inside `parent` with mode 0755 whatever the umask, fsync
/// `parent` so the new entry survives a crash (when `durable`), and open it. What is there
/// when it is opened (a concurrent agent's directory, or a link put there meanwhile) is
/// reported as [`dir_at`] sees it.
fn make_dir_at(
    parent: &OwnedFd,
    name: &OsStr,
    host: &Path,
    durable: bool,
) -> Result<DirAt, HostFsError> {
    let created = match stat::mkdirat(parent, name, Mode::from_bits_truncate(DIR_MODE)) {
        Ok(()) => true,
        // A concurrent agent created it first; it is checked like any existing directory.
        Err(Errno::EEXIST) => false,
        Err(errno) => return Err(io_error("creating directory", host, errno)),
    };
    let entry = dir_at(parent, name, host)?;
    if let (true, DirAt::Open(fd)) = (created, &entry) {
        // mkdirat applies the process umask, which the container runtime chooses.
        set_mode(fd, DIR_MODE, host)?;
        if durable {
            let parent_host = host.parent().unwrap_or(Path::new("/"));
            sync_fd(parent, parent_host)?;
        }
    }
    Ok(entry)
}

#[cfg(test)]
mod tests;
