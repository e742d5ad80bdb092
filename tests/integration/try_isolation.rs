//! `agent try` runs untrusted packages (SPEC §1.6): whatever a step does as root in the sandbox,
//! it writes neither LOWER, nor the `--keep` directory's parent, nor any other file of this
//! machine, and the report's "not written" is a measurement.
//!
//! The hostile step is a small static C program built here with `gcc -static`: it tries every
//! way out it can name (remounts through `/proc/<pid>/root`, `mount_setattr`, bind clones, a
//! chroot escape) and records each attempt. Writes are only aimed at the fake root, the keep
//! directory and a canary directory bound over `/usr/games` in a mount namespace of the test's
//! own; this machine's `/etc` and `/usr` are only asked whether they are writable.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::try_safety::package;
use crate::util::{FakeHost, Package, Snapshot, Step, cannot_run};

/// The hostile step. Prints `BREACH <what> <path>` for every attempt that worked, `refused
/// <what> <path>: <error>` for the others, then `attempts N breaches M`.
const PROBE_C: &str = r#"
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif

struct attr { uint64_t set, clr, propagation, userns_fd; };

static int attempts, breaches;

static void note(int ok, const char *what, const char *path) {
    attempts++;
    if (ok) {
        breaches++;
        printf("BREACH %s %s\n", what, path);
    } else {
        printf("refused %s %s: %s\n", what, path, strerror(errno));
    }
}

/* Make the mount at path writable: the old way and mount_setattr(2). */
static void remount(const char *path) {
    note(mount(NULL, path, NULL, MS_REMOUNT | MS_BIND, NULL) == 0, "remount-rw", path);
    struct attr a = { 0, 1 /* MOUNT_ATTR_RDONLY */, 0, 0 };
    note(syscall(SYS_mount_setattr, AT_FDCWD, path, 0, &a, sizeof a) == 0, "setattr-rw", path);
}

/* Create dir/name, or with must_exist only overwrite an existing one. */
static void write_file(const char *dir, const char *name, int must_exist) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_TRUNC | O_NOFOLLOW | (must_exist ? 0 : O_CREAT), 0644);
    int ok = fd >= 0 && write(fd, "written by a step\n", 18) == 18;
    if (fd >= 0)
        close(fd);
    note(ok, "write", p);
}

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x1000
#endif

/* The mount a path is on. */
static uint64_t mount_of(const char *path) {
    struct statx stx;
    if (statx(AT_FDCWD, path, 0, STATX_MNT_ID, &stx) != 0 || !(stx.stx_mask & STATX_MNT_ID))
        return 0;
    return stx.stx_mnt_id;
}

static uint64_t overlay; /* the step's own root: the sandbox's overlay, writable by design */

/* Whether path could be written; writes nothing. */
static void writable(const char *path) {
    uint64_t m = mount_of(path);
    if (m != 0 && m == overlay) {
        printf("skipped writable %s: in the overlay\n", path);
        return;
    }
    note(access(path, W_OK) == 0, "writable", path);
}

/* A bind clone of path, made writable and written. */
static void clone_and_write(const char *path) {
    mkdir("/tmp/clone", 0700);
    if (mount(path, "/tmp/clone", NULL, MS_BIND, NULL) != 0) {
        note(0, "bind-clone", path);
        return;
    }
    remount("/tmp/clone");
    write_file("/tmp/clone", "written-through-a-clone", 0);
    umount2("/tmp/clone", MNT_DETACH);
}

static void attack(const char *root) {
    char p[4096];
#define AT(sub) (snprintf(p, sizeof p, "%s%s", root, sub), p)
    remount(AT("/.try/lower"));
    write_file(AT("/.try/lower"), "written-into-lower", 0);
    clone_and_write(AT("/.try/lower"));
    remount(AT("/.try/out"));
    write_file(AT("/.try/out"), "written-into-keep", 0);
    remount(AT("/usr/games"));
    write_file(AT("/usr/games"), "canary", 1);
    clone_and_write(AT("/usr/games"));
    remount(AT("/etc"));
    writable(AT("/etc"));
    remount(AT("/usr"));
    writable(AT("/usr"));
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    overlay = mount_of("/");
    attack("/proc/1/root");
    attack("/proc/self/root");
    DIR *d = opendir("/proc");
    struct dirent *e;
    char root[512];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(root, sizeof root, "/proc/%s/root", e->d_name);
        attack(root);
        snprintf(root, sizeof root, "/proc/%s/exe", e->d_name);
        writable(root);
    }
    /* A chroot escape: out of the overlay into whatever root the step's namespace has. */
    mkdir("/tmp/escape", 0700);
    if (chroot("/tmp/escape") == 0) {
        for (int i = 0; i < 64; i++)
            chdir("..");
        if (chroot(".") == 0) {
            printf("escaped the chroot\n");
            attack("");
        }
    }
    printf("attempts %d breaches %d\n", attempts, breaches);
    return 0;
}
"#;

/// Build the probe with `gcc -static` into `dir/probe`.
fn build_probe(dir: &Path) -> PathBuf {
    let src = dir.join("probe.c");
    let bin = dir.join("probe");
    std::fs::write(&src, PROBE_C).unwrap();
    let out = Command::new("gcc")
        .args(["-static", "-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| cannot_run(&format!("it builds a static C helper with gcc: {e}")));
    assert!(
        out.status.success(),
        "gcc -static failed (the test needs gcc and the static libc, libc6-dev):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// A package whose apply step is the probe.
fn probe_package(host: &FakeHost) -> PathBuf {
    let pkg = host.outside().join("pkg");
    Package::named("hostile", "1.0.0")
        .step("apply", Step::new("probe"))
        .without_script("probe")
        .step(
            "apply-check",
            Step::new("apply_check.sh").script("#!/bin/sh\nexit 0\n"),
        )
        .write_into(&pkg, host.root());
    let built = build_probe(host.outside());
    std::fs::copy(&built, pkg.join("skyhook_dir/probe")).unwrap();
    pkg
}

#[test]
fn try_a_step_remounting_what_it_can_reach_writes_nothing_outside_the_sandbox() {
    require_root!();
    if !Path::new("/usr/games").is_dir() {
        cannot_run("the canary is bound over /usr/games, which this machine does not have");
    }
    let host = FakeHost::new();
    host.write("etc/hostname", "node-1\n");
    let pkg = probe_package(&host);
    // The canary: a directory of the test's, seen by the sandbox as the host's /usr/games.
    let canary_dir = host.outside().join("canary");
    std::fs::create_dir(&canary_dir).unwrap();
    std::fs::write(canary_dir.join("canary"), "canary\n").unwrap();
    let keep_parent = host.outside().join("keep-parent");
    std::fs::create_dir(&keep_parent).unwrap();
    let keep = keep_parent.join("kept");

    let lower_before = host.snapshot();
    let canary_before = Snapshot::of(&canary_dir);
    let run = host
        .agent()
        .in_mount_namespace(&format!(
            "mount --bind '{}' /usr/games",
            canary_dir.display()
        ))
        .arg("try")
        .arg(&pkg)
        .args(["--root", &host.root_str(), "--stages", "apply", "--json"])
        .arg("--keep")
        .arg(&keep)
        .run();
    run.assert_success();

    let log = std::fs::read_to_string(keep.join("01-apply.log")).expect("the stage's output");
    let breaches: Vec<&str> = log.lines().filter(|l| l.starts_with("BREACH")).collect();
    assert!(
        breaches.is_empty(),
        "the step got out:\n{}",
        breaches.join("\n")
    );
    // The probe ran its attempts, among them the remount the report names.
    assert!(
        log.contains("refused remount-rw /proc/1/root/.try/lower: ")
            && log.contains("refused remount-rw /proc/self/root/.try/lower: ")
            && log.contains("\nattempts ")
            && log.contains(" breaches 0\n"),
        "{log}"
    );

    lower_before.assert_unchanged(&host.snapshot(), "LOWER, after a remounting step");
    canary_before.assert_unchanged(&Snapshot::of(&canary_dir), "the canary outside");
    assert_eq!(
        std::fs::read_to_string(canary_dir.join("canary")).unwrap(),
        "canary\n"
    );
    // The keep directory's parent holds the keep directory and nothing else; nothing of the
    // step's landed in the keep directory outside its upper layer copy.
    let parent: Vec<String> = std::fs::read_dir(&keep_parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(parent, ["kept"]);
    assert!(!keep.join("written-into-keep").exists());

    // The report's claim is a measurement, and it is true.
    let report: Value = serde_json::from_slice(&run.stdout).expect("one JSON document");
    assert_eq!(report["isolation"]["verified"], true, "{report}");
    let text = std::fs::read_to_string(keep.join("report.txt")).unwrap();
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("result: succeeded; the lower root was not written (verified:"),
        "{last}"
    );
}

#[test]
fn try_keep_strips_setuid_and_setgid_bits_and_is_private() {
    require_root!();
    let host = FakeHost::new();
    let pkg = package(
        &host,
        "#!/bin/sh\nset -e\ncp /bin/busybox /etc/suid-root\nchmod 4755 /etc/suid-root\n\
         mkdir /etc/shared\nchmod 2775 /etc/shared\n\
         cp /bin/busybox /etc/shared/both\nchmod 6711 /etc/shared/both\n",
    );
    for existing in [false, true] {
        let keep = host.outside().join(format!("kept-{existing}"));
        if existing {
            std::fs::create_dir(&keep).unwrap();
            std::fs::set_permissions(&keep, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let run = host
            .agent()
            .arg("try")
            .arg(&pkg)
            .args(["--root", &host.root_str(), "--stages", "apply", "--keep"])
            .arg(&keep)
            .run();
        run.assert_success();
        let mode = |rel: &str| {
            std::fs::symlink_metadata(keep.join(rel))
                .unwrap_or_else(|e| panic!("{rel}: {e}"))
                .permissions()
                .mode()
                & 0o7777
        };
        assert_eq!(mode(""), 0o700, "the keep directory (existing: {existing})");
        assert_eq!(mode("upper/etc/suid-root"), 0o755);
        assert_eq!(mode("upper/etc/shared"), 0o775);
        assert_eq!(mode("upper/etc/shared/both"), 0o711);
        for entry in std::fs::read_dir(&keep).unwrap() {
            let entry = entry.unwrap();
            assert_eq!(
                entry.metadata().unwrap().permissions().mode() & 0o6000,
                0,
                "{}",
                entry.path().display()
            );
        }
    }
}

#[test]
fn try_keep_through_a_bind_mount_alias_of_the_lower_root_is_refused() {
    require_root!();
    let host = FakeHost::new();
    host.mkdir("var/lib");
    let pkg = package(&host, "#!/bin/sh\nexit 0\n");
    let alias = host.outside().join("alias");
    let sub_alias = host.outside().join("sub-alias");
    std::fs::create_dir(&alias).unwrap();
    std::fs::create_dir(&sub_alias).unwrap();
    let before = host.snapshot();
    for keep in [
        alias.join("kept"),
        sub_alias.join("lib/kept"),
        alias.clone(),
    ] {
        let run = host
            .agent()
            .in_mount_namespace(&format!(
                "mount --bind '{root}' '{alias}'\nmount --bind '{root}/var' '{sub}'",
                root = host.root().display(),
                alias = alias.display(),
                sub = sub_alias.display()
            ))
            .arg("try")
            .arg(&pkg)
            .args(["--root", &host.root_str(), "--stages", "apply", "--keep"])
            .arg(&keep)
            .run();
        run.assert_code(1)
            .assert_stderr_contains(&format!("--keep {}: inside the lower root", keep.display()));
        before.assert_unchanged(&host.snapshot(), &format!("--keep {}", keep.display()));
    }
}
