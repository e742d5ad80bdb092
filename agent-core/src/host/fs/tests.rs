use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::process::Command;

use proptest::prelude::*;

use super::*;
use std::time::SystemTime;

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
            // umask(2) cannot fail and is async-signal-safe.
            nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o777));
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
            // SAFETY: signal(2) and setrlimit(2) are async-signal-safe, and SIG_IGN runs no
            // code of ours; SIG_IGN survives exec, so the write returns EFBIG instead of killing
            // the child with SIGXFSZ.
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
    assert_eq!(
        err.to_string(),
        "/state/x is a directory, not a regular file"
    );
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
        ".skyhook-tmp-x-0",
        ".skyhook-partial-1-",
        "skyhook-tmp-1-0",
    ] {
        assert!(!is_temp_name(not_temp), "{not_temp}");
    }
    assert!(is_temp_name(".history.json.tmp.1.00ff"));
    // Earlier releases' pre-flight: one scheme, so every reader and cleaner knows them.
    assert!(is_temp_name(".skyhook-tmp-7-0"));
    assert!(is_temp_name(".skyhook-partial-7-12"));
}

#[test]
fn stale_temp_files_and_partial_copies_are_removed_young_ones_and_links_kept() {
    let (dir, fs) = host();
    let flags = dir.path().join("flags");
    std::fs::create_dir_all(flags.join(".skyhook-partial-1-0/sub")).unwrap();
    std::fs::write(flags.join(".skyhook-partial-1-0/sub/f"), "x").unwrap();
    std::fs::write(flags.join(".START.tmp.1.ab"), "half").unwrap();
    std::fs::write(flags.join("START"), "").unwrap();
    std::os::unix::fs::symlink("/nowhere", flags.join(".m.tmp.2.cd")).unwrap();
    assert_eq!(fs.clean_stale_temps(Path::new("/flags")), 0, "all young");
    assert_eq!(
        fs.clean_temps_older_than(Path::new("/flags"), Duration::ZERO),
        2
    );
    let mut left: Vec<_> = std::fs::read_dir(&flags)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [".m.tmp.2.cd", "START"],
        "a link is never one of ours"
    );
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
        fs.read(Path::new("/var/lib/skyhook/START"), RECORD_BOUND)
            .map(drop),
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
        fs.read(Path::new("/state/file"), RECORD_BOUND).map(drop),
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
        fs.read(Path::new("/var/lib/skyhook/x"), RECORD_BOUND)
            .map(drop),
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
        fs.read(Path::new("/state/x"), RECORD_BOUND).unwrap(),
        None,
        "missing parent"
    );
    std::fs::create_dir(dir.path().join("state")).unwrap();
    assert_eq!(
        fs.read(Path::new("/state/x"), RECORD_BOUND).unwrap(),
        None,
        "missing file"
    );
    std::fs::write(dir.path().join("state/x"), "").unwrap();
    assert_eq!(
        fs.read(Path::new("/state/x"), RECORD_BOUND).unwrap(),
        Some(Vec::new())
    );
    std::fs::write(dir.path().join("state/x"), "boot-id:abc\n").unwrap();
    assert_eq!(
        fs.read(Path::new("state/./x"), RECORD_BOUND).unwrap(),
        Some(b"boot-id:abc\n".to_vec())
    );
    assert!(
        !dir.path().join("other").exists(),
        "reading creates nothing"
    );
}

#[test]
fn read_and_is_file_refuse_directories_fifos_and_sockets_naming_their_type() {
    let (dir, fs) = host();
    std::fs::create_dir_all(dir.path().join("state/dir")).unwrap();
    nix::unistd::mkfifo(
        &dir.path().join("state/fifo"),
        Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(dir.path().join("state/socket")).unwrap();
    for (name, kind) in [
        ("/state/dir", "a directory"),
        ("/state/fifo", "a fifo"),
        ("/state/socket", "a socket"),
    ] {
        let err = fs.read(Path::new(name), RECORD_BOUND).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{name} is {kind}, not a regular file")
        );
        assert!(matches!(
            fs.is_file(Path::new(name)),
            Err(HostFsError::NotARegularFile { .. })
        ));
    }
    // A lock file is opened for writing too, and refused alike.
    let err = fs.open_lock_file(Path::new("/state/fifo")).unwrap_err();
    assert_eq!(err.to_string(), "/state/fifo is a fifo, not a regular file");
}

#[test]
fn read_refuses_a_character_device_without_opening_it() {
    // /dev/zero read would never end; it is refused from its type. Reading writes nothing, so
    // this machine's /dev can serve as the root.
    let fs = HostFs::new("/dev");
    let err = fs.read(Path::new("/zero"), RECORD_BOUND).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/zero is a character device, not a regular file"
    );
}

#[test]
fn read_is_bounded_and_a_larger_file_is_too_large() {
    let (dir, fs) = host();
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    std::fs::write(dir.path().join("state/exact"), [b'x'; 4096]).unwrap();
    assert_eq!(
        fs.read(Path::new("/state/exact"), MARKER_BOUND)
            .unwrap()
            .unwrap()
            .len(),
        4096
    );
    std::fs::write(dir.path().join("state/over"), [b'x'; 4097]).unwrap();
    let err = fs.read(Path::new("/state/over"), MARKER_BOUND).unwrap_err();
    assert!(
        matches!(err, HostFsError::TooLarge { bound: 4096, .. }),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "/state/over is corrupt: larger than 4 KiB");
    // Sparse: 2 GiB that cost no disk, refused from its size.
    let sparse = std::fs::File::create(dir.path().join("state/sparse")).unwrap();
    sparse.set_len(2 << 30).unwrap();
    let err = fs
        .read(Path::new("/state/sparse"), RECORD_BOUND)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "/state/sparse is corrupt: larger than 16 MiB"
    );
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
    assert_eq!(fs.read(&file, RECORD_BOUND).unwrap(), Some(b"x".to_vec()));
    assert!(fs.is_file(&file).unwrap());
    assert_eq!(fs.list_dir(file.parent().unwrap()).unwrap(), ["START"]);
    assert!(fs.remove_file(&file).unwrap());
    assert_eq!(fs.resolve(&file).unwrap(), file);
}

#[test]
fn errors_name_the_host_path_not_the_root_path() {
    let (dir, fs) = host();
    std::fs::create_dir_all(dir.path().join("state/x")).unwrap();
    let message = fs
        .read(Path::new("/state/x"), RECORD_BOUND)
        .unwrap_err()
        .to_string();
    assert_eq!(message, "/state/x is a directory, not a regular file");
    assert!(!message.contains(&dir.path().display().to_string()));
}

#[test]
fn write_diagnostic_replaces_atomically_with_the_given_mode_and_refuses_links() {
    let (dir, fs) = host();
    let file = Path::new("/state/metrics/pkg.prom");
    fs.write_diagnostic(file, b"one\n", 0o644, true).unwrap();
    let real = dir.path().join("state/metrics/pkg.prom");
    assert_eq!(std::fs::read(&real).unwrap(), b"one\n");
    assert_eq!(mode_of(&real), 0o644);
    assert_eq!(mode_of(&dir.path().join("state/metrics")), 0o755);
    fs.write_diagnostic(file, b"two\n", 0o600, true).unwrap();
    assert_eq!(std::fs::read(&real).unwrap(), b"two\n");
    assert_eq!(mode_of(&real), 0o600);
    // Only the file itself is left: the temp file was renamed.
    assert_eq!(names_in(&dir.path().join("state/metrics")), ["pkg.prom"]);

    // A link anywhere on the path is refused and its target left alone.
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path(), dir.path().join("state/linked")).unwrap();
    let err = fs
        .write_diagnostic(Path::new("/state/linked/pkg.prom"), b"x", 0o644, true)
        .unwrap_err();
    assert!(err.to_string().contains("is a symbolic link"), "{err}");
    assert!(names_in(outside.path()).is_empty());
    symlink(&real, dir.path().join("state/metrics/other.prom")).unwrap();
    let err = fs
        .write_diagnostic(Path::new("/state/metrics/other.prom"), b"x", 0o644, true)
        .unwrap_err();
    assert!(err.to_string().contains("is a symbolic link"), "{err}");
    assert_eq!(std::fs::read(&real).unwrap(), b"two\n");

    // Without `create_dirs`, a missing directory is an error and nothing is created.
    let err = fs
        .write_diagnostic(Path::new("/textfile/pkg.prom"), b"x", 0o644, false)
        .unwrap_err();
    assert!(err.to_string().contains("/textfile/pkg.prom"), "{err}");
    assert!(!dir.path().join("textfile").exists());
}
