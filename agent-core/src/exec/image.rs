//! How a process is started (SPEC §8.4): `execve(2)` semantics, never `/bin/sh` for a file
//! the kernel refuses, a PATH search of its own inside the chroot, and what a failed exec
//! means.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use super::{ExecError, ProcessSpec, sys};

/// Everything `execve(2)` needs, built before the clone: the child shares the agent's memory
/// and only makes direct system calls (see `spawn`), so it allocates nothing.
///
/// SPEC §8.4: the program runs with `execve` semantics. glibc's `execvp` (what the standard
/// library calls after a fork) runs a file the kernel refuses with `ENOEXEC` through
/// `/bin/sh`, so a step without a `#!` line, or built for another machine, would run as a
/// shell script; here `ENOEXEC` fails the spawn.
pub(super) struct ExecImage {
    chroot: Option<CString>,
    cwd: CString,
    /// The files to try in order: the program itself when it names a path, else the program
    /// in each PATH directory (PATH of the child's environment, resolved inside the chroot).
    candidates: Vec<CString>,
    _argv: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    envp: Vec<*const libc::c_char>,
}

/// glibc's search path when PATH is unset (`confstr(_CS_PATH)`).
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

impl ExecImage {
    pub(super) fn new(spec: &ProcessSpec) -> io::Result<Self> {
        let c = |bytes: &[u8]| {
            CString::new(bytes)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "contains a NUL byte"))
        };
        let program = spec.program.as_os_str().as_bytes();
        let candidates = if program.contains(&b'/') {
            vec![c(program)?]
        } else if program.is_empty() {
            Vec::new()
        } else {
            let path = spec
                .env
                .iter()
                .rev()
                .find(|(k, _)| k == "PATH")
                .map_or(DEFAULT_PATH, |(_, v)| v.as_bytes());
            path.split(|b| *b == b':')
                .map(|dir| {
                    // An empty entry is the current directory, as for execvp.
                    let dir = if dir.is_empty() { b".".as_slice() } else { dir };
                    let slash = if dir.ends_with(b"/") { "" } else { "/" };
                    c(&[dir, slash.as_bytes(), program].concat())
                })
                .collect::<io::Result<_>>()?
        };
        let argv_strings: Vec<CString> = std::iter::once(Ok(c(program)?))
            .chain(spec.args.iter().map(|a| c(a.as_bytes())))
            .collect::<io::Result<_>>()?;
        let envp_strings: Vec<CString> = spec
            .env
            .iter()
            .map(|(k, v)| c(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
            .collect::<io::Result<_>>()?;
        let pointers = |strings: &[CString]| {
            strings
                .iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        Ok(Self {
            chroot: spec
                .chroot
                .as_deref()
                .map(|r| c(r.as_os_str().as_bytes()))
                .transpose()?,
            cwd: c(OsStr::as_bytes(spec.cwd.as_os_str()))?,
            candidates,
            argv: pointers(&argv_strings),
            _argv: argv_strings,
            envp: pointers(&envp_strings),
            _envp: envp_strings,
        })
    }

    /// The files [`ExecImage::exec`] tries, as the process sees them (inside the chroot).
    pub(super) fn candidate_paths(&self) -> Vec<PathBuf> {
        self.candidates
            .iter()
            .map(|c| PathBuf::from(OsStr::from_bytes(c.as_bytes())))
            .collect()
    }

    /// In the child: chroot (when there is one), then chdir.
    pub(super) fn enter(&self) -> Result<(), sys::Errno> {
        if let Some(root) = &self.chroot {
            sys::chroot(root)?;
        }
        sys::chdir(&self.cwd)
    }

    /// In the child: exec each candidate in turn. Returns only on failure, with the error
    /// number to report.
    pub(super) fn exec(&self) -> sys::Errno {
        // execvp's search rules, minus its shell fallback: skip directories where the file
        // is missing, remember a permission error, stop at any other error.
        let mut denied = false;
        for file in &self.candidates {
            // SAFETY: `argv`/`envp` are NULL-terminated arrays of pointers into
            // NUL-terminated strings, all owned by `self` and alive until the call returns
            // (it returns only on failure).
            let err = unsafe { sys::execve(file, self.argv.as_ptr(), self.envp.as_ptr()) };
            match err {
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT
                    if self.candidates.len() > 1 => {}
                _ => return err,
            }
        }
        if denied { libc::EACCES } else { libc::ENOENT }
    }
}

/// Exec failed with `ENOENT`: when the file it tried exists, what is missing is the
/// interpreter its `#!` line names. `None` when that is not the case (the file is missing, or
/// has no `#!` line, or its interpreter exists).
pub(super) fn missing_interpreter(spec: &ProcessSpec, candidates: &[PathBuf]) -> Option<ExecError> {
    // Where a path the process sees (inside the chroot, relative to its cwd) is for the agent.
    let for_agent = |path: &Path| {
        let path = spec.cwd.join(path);
        match &spec.chroot {
            Some(root) => root.join(path.strip_prefix("/").unwrap_or(&path)),
            None => path,
        }
    };
    let file = candidates.iter().find(|c| for_agent(c).is_file())?;
    let mut head = [0u8; 256];
    let n = io::Read::read(&mut File::open(for_agent(file)).ok()?, &mut head).ok()?;
    // The kernel's parsing (fs/binfmt_script.c): after `#!`, blanks, then the interpreter up
    // to the next blank or the end of the line.
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next().unwrap_or(line);
    let interpreter = line
        .split(|b| *b == b' ' || *b == b'\t')
        .find(|word| !word.is_empty())?;
    let interpreter = Path::new(OsStr::from_bytes(interpreter));
    if for_agent(interpreter).exists() {
        return None;
    }
    Some(ExecError::Interpreter {
        file: file.display().to_string(),
        interpreter: interpreter.display().to_string(),
    })
}
