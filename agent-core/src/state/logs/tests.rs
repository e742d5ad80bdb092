use std::io::Write;
use std::os::unix::fs::{MetadataExt, symlink};
use std::time::{Duration, UNIX_EPOCH};

use super::*;

const LOG_DIR: &str = "/var/log/skyhook/sk1/pkg/1.0.0";

/// 2026-11-30T10:27:28.136997Z
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::new(1_796_034_448, 136_997_000)
}

fn host() -> (tempfile::TempDir, HostFs) {
    let dir = tempfile::tempdir().unwrap();
    let fs = HostFs::new(dir.path());
    (dir, fs)
}

/// The first log of `rel` in a run: an index of its own.
fn create(fs: &HostFs, dir: &Path, rel: &str, now: SystemTime) -> Result<LogFile, HostFsError> {
    LogIndex::new(dir, [rel]).create(fs, rel, now)
}

/// Retention of `rel` in a run that created no log of it yet: an index of its own.
fn retain(fs: &HostFs, dir: &Path, rel: &str, keep: usize) -> Result<(), HostFsError> {
    LogIndex::new(dir, [rel]).retain(fs, rel, keep)
}

fn names_in(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn touch(root: &Path, names: &[&str]) {
    let dir = root.join(LOG_DIR.trim_start_matches('/'));
    std::fs::create_dir_all(&dir).unwrap();
    for name in names {
        std::fs::write(dir.join(name), name).unwrap();
    }
}

#[test]
fn create_names_the_file_after_the_step_and_the_stamp() {
    let (dir, fs) = host();
    let mut log = create(&fs, Path::new(LOG_DIR), "s1.sh", now()).unwrap();
    assert_eq!(
        log.host_path,
        Path::new("/var/log/skyhook/sk1/pkg/1.0.0/s1.sh-2026-11-30-102728.136997000.log")
    );
    log.file.write_all(b"out\nerr\n").unwrap();
    let real = fs.resolve(&log.host_path).unwrap();
    assert_eq!(std::fs::read(&real).unwrap(), b"out\nerr\n");
    assert_eq!(std::fs::metadata(&real).unwrap().mode() & 0o777, 0o600);
    assert!(real.starts_with(dir.path()));
}

#[test]
fn create_puts_subdirectory_steps_in_subdirectories() {
    let (_dir, fs) = host();
    let log = create(&fs, Path::new(LOG_DIR), "sub/dir/s.sh", now()).unwrap();
    assert_eq!(
        log.host_path,
        Path::new("/var/log/skyhook/sk1/pkg/1.0.0/sub/dir/s.sh-2026-11-30-102728.136997000.log")
    );
    let log = create(&fs, Path::new(LOG_DIR), "interrupts/service_restart", now()).unwrap();
    assert_eq!(
        log.host_path,
        Path::new(
            "/var/log/skyhook/sk1/pkg/1.0.0/interrupts/service_restart-2026-11-30-102728.136997000.log"
        )
    );
}

#[test]
fn create_numbers_collisions_from_one() {
    let (_dir, fs) = host();
    let names: Vec<String> = (0..4)
        .map(|_| {
            let log = create(&fs, Path::new(LOG_DIR), "s1.sh", now()).unwrap();
            log.host_path
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        names,
        [
            "s1.sh-2026-11-30-102728.136997000.log",
            "s1.sh-2026-11-30-102728.136997000-1.log",
            "s1.sh-2026-11-30-102728.136997000-2.log",
            "s1.sh-2026-11-30-102728.136997000-3.log",
        ]
    );
}

#[test]
fn create_never_reuses_an_index() {
    let (dir, fs) = host();
    // Retention removed the unsuffixed log and -1; -2 is the newest of this stamp.
    touch(
        dir.path(),
        &[
            "s1.sh-2026-11-30-102728.136997000-2.log",
            "s1.sh-2026-11-30-102728.136997000-10.log",
        ],
    );
    let log = create(&fs, Path::new(LOG_DIR), "s1.sh", now()).unwrap();
    assert_eq!(
        log.host_path.file_name().unwrap(),
        "s1.sh-2026-11-30-102728.136997000-11.log"
    );
}

#[test]
fn create_ignores_other_stamps_and_other_steps() {
    let (dir, fs) = host();
    touch(
        dir.path(),
        &[
            "s1.sh-2026-11-30-102728.136997001-4.log",
            "s1.sh-2026-11-30-102728-7.log",
            "s1.sh-x-2026-11-30-102728.136997000.log",
        ],
    );
    let log = create(&fs, Path::new(LOG_DIR), "s1.sh", now()).unwrap();
    assert_eq!(
        log.host_path.file_name().unwrap(),
        "s1.sh-2026-11-30-102728.136997000.log"
    );
}

#[test]
fn create_and_retain_refuse_paths_leaving_the_log_directory() {
    let (dir, fs) = host();
    for rel in ["", "/etc/passwd", "../x", "sub/../../x", "."] {
        let err = create(&fs, Path::new(LOG_DIR), rel, now()).unwrap_err();
        assert!(
            matches!(err, HostFsError::NotRelative { .. }),
            "{rel:?}: {err:?}"
        );
        assert!(retain(&fs, Path::new(LOG_DIR), rel, 5).is_err());
    }
    assert_eq!(
        HostFsError::NotRelative {
            path: "../x".into()
        }
        .to_string(),
        "../x is not a relative path below its directory"
    );
    assert!(names_in(dir.path()).is_empty());
}

#[test]
fn retain_keeps_the_newest_across_legacy_and_new_stamps() {
    let (dir, fs) = host();
    touch(
        dir.path(),
        &[
            "x-2026-11-30-102859.log",
            "x-2026-11-30-102901.log",
            "x-2026-11-30-102903.log",
            "x-2026-11-30-102903.000000001.log",
            "x-2026-11-30-102905.500000000.log",
            "x-2026-11-30-102906.log",
            "x-2026-11-30-102908.250000000.log",
        ],
    );
    retain(&fs, Path::new(LOG_DIR), "x", RETAINED_LOGS).unwrap();
    assert_eq!(
        names_in(&dir.path().join(LOG_DIR.trim_start_matches('/'))),
        [
            "x-2026-11-30-102903.000000001.log",
            "x-2026-11-30-102903.log",
            "x-2026-11-30-102905.500000000.log",
            "x-2026-11-30-102906.log",
            "x-2026-11-30-102908.250000000.log",
        ]
    );
}

#[test]
fn retain_orders_collisions_after_their_stamp() {
    let (dir, fs) = host();
    touch(
        dir.path(),
        &[
            "x-2026-11-30-102900.000000000-1.log",
            "x-2026-11-30-102900.000000000-2.log",
            "x-2026-11-30-102900.000000000-10.log",
            "x-2026-11-30-102900.000000000.log",
            "x-2026-11-30-102859.999999999-9.log",
        ],
    );
    retain(&fs, Path::new(LOG_DIR), "x", 2).unwrap();
    assert_eq!(
        names_in(&dir.path().join(LOG_DIR.trim_start_matches('/'))),
        [
            "x-2026-11-30-102900.000000000-10.log",
            "x-2026-11-30-102900.000000000-2.log"
        ]
    );
}

#[test]
fn retain_leaves_other_steps_with_the_same_prefix_alone() {
    let (dir, fs) = host();
    // Transcript 27: step `x` and step `x-y` share a log directory.
    let other_step = [
        "x-y-2026-11-30-102900.log.err",
        "x-y-2026-11-30-102909.log",
        "x-y-2026-11-30-102912.log",
        "x-y-2026-11-30-102914.log",
        "x-y-2026-11-30-102915.000000000.log",
        "x-y-2026-11-30-102916.000000000-1.log",
    ];
    touch(dir.path(), &other_step);
    touch(
        dir.path(),
        &["x-2026-11-30-102908.log", "x-2026-11-30-102911.log"],
    );
    retain(&fs, Path::new(LOG_DIR), "x", 1).unwrap();
    let mut expected: Vec<&str> = other_step.to_vec();
    expected.push("x-2026-11-30-102911.log");
    expected.sort_unstable();
    assert_eq!(
        names_in(&dir.path().join(LOG_DIR.trim_start_matches('/'))),
        expected
    );
}

#[test]
fn retain_ignores_legacy_err_files_and_unrelated_names() {
    let (dir, fs) = host();
    let ignored = [
        "x-2026-11-30-102859.log.err",
        "x-2026-11-30-102901.log.err",
        "x-2026-11-30-102901.log.1",
        "x-2026-11-30-102901-01.log",
        "x-2026-11-30-102901--1.log",
        "x-2026-11-30-102901-.log",
        "x-2026-11-30.log",
        ".x-2026-11-30-102901.log.tmp.1.ab",
        "x-2026-11-30-102901.12.log",
        "x.log",
        "notes.txt",
    ];
    touch(dir.path(), &ignored);
    touch(
        dir.path(),
        &["x-2026-11-30-102908.log", "x-2026-11-30-102911.log"],
    );
    retain(&fs, Path::new(LOG_DIR), "x", 0).unwrap();
    let mut expected = ignored.to_vec();
    expected.sort_unstable();
    assert_eq!(
        names_in(&dir.path().join(LOG_DIR.trim_start_matches('/'))),
        expected
    );
}

#[test]
fn retain_works_in_subdirectories_and_on_missing_directories() {
    let (dir, fs) = host();
    retain(&fs, Path::new(LOG_DIR), "sub/s.sh", 5).unwrap();
    for second in 0..8 {
        let t = now() + Duration::from_secs(second);
        create(&fs, Path::new(LOG_DIR), "sub/s.sh", t).unwrap();
    }
    create(&fs, Path::new(LOG_DIR), "s.sh", now()).unwrap();
    retain(&fs, Path::new(LOG_DIR), "sub/s.sh", RETAINED_LOGS).unwrap();
    let log_dir = dir.path().join(LOG_DIR.trim_start_matches('/'));
    assert_eq!(
        names_in(&log_dir.join("sub")),
        [
            "s.sh-2026-11-30-102731.136997000.log",
            "s.sh-2026-11-30-102732.136997000.log",
            "s.sh-2026-11-30-102733.136997000.log",
            "s.sh-2026-11-30-102734.136997000.log",
            "s.sh-2026-11-30-102735.136997000.log",
        ]
    );
    assert_eq!(
        names_in(&log_dir),
        ["s.sh-2026-11-30-102728.136997000.log", "sub"]
    );
}

#[test]
fn retain_refuses_to_delete_through_a_symbolic_link() {
    let (dir, fs) = host();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("victim"), "keep").unwrap();
    touch(dir.path(), &["x-2026-11-30-102911.log"]);
    let log_dir = dir.path().join(LOG_DIR.trim_start_matches('/'));
    symlink(
        outside.path().join("victim"),
        log_dir.join("x-2026-11-30-102859.log"),
    )
    .unwrap();
    let err = retain(&fs, Path::new(LOG_DIR), "x", 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/var/log/skyhook/sk1/pkg/1.0.0/x-2026-11-30-102859.log is a symbolic link"
    );
    assert_eq!(
        std::fs::read(outside.path().join("victim")).unwrap(),
        b"keep"
    );
    assert_eq!(
        names_in(&log_dir),
        ["x-2026-11-30-102859.log", "x-2026-11-30-102911.log"]
    );
}

/// Every file under `path`, relative, sorted.
fn tree(path: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                let rel = entry.path().strip_prefix(path).unwrap().to_owned();
                out.push(rel.display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_run_long_index_names_and_prunes_as_a_listing_per_operation_would() {
    // The same operations, once through one index for the whole run and once listing the
    // directory for every operation (an index per call), give the same files.
    let rels = ["x", "x-y", "sub/s.sh", "x.sh"];
    let seeded = [
        "x-2026-11-30-102727.log",
        "x-2026-11-30-102727.log.err",
        "x-2026-11-30-102728.136997000-4.log",
        "x-y-2026-11-30-102700.log",
        "x.sh-2026-11-30-102728.000000000.log",
        "x.sh-2026-11-30-102728.log",
        "notes.txt",
    ];
    let run = |per_call: bool| {
        let (dir, fs) = host();
        touch(dir.path(), &seeded);
        let mut index = LogIndex::new(Path::new(LOG_DIR), rels);
        for round in 0..9u64 {
            for (i, rel) in rels.iter().enumerate() {
                // Rounds 0-2 share one stamp (collisions); later rounds move on.
                let t = now() + Duration::from_secs(round.saturating_sub(2) * 10 + i as u64);
                let keep = if round == 4 { 2 } else { RETAINED_LOGS };
                if per_call {
                    create(&fs, Path::new(LOG_DIR), rel, t).unwrap();
                    retain(&fs, Path::new(LOG_DIR), rel, keep).unwrap();
                } else {
                    index.create(&fs, rel, t).unwrap();
                    index.retain(&fs, rel, keep).unwrap();
                }
            }
        }
        tree(&dir.path().join(LOG_DIR.trim_start_matches('/')))
    };
    let listed = run(true);
    assert_eq!(run(false), listed);
    // Five of each step, the untouched files, and the legacy `.log.err`.
    assert_eq!(listed.len(), 4 * 5 + 2, "{listed:?}");
    assert!(listed.contains(&"notes.txt".to_owned()));
    assert!(listed.contains(&"x-2026-11-30-102727.log.err".to_owned()));
}

#[test]
fn a_legacy_and_a_new_stamp_of_the_same_second_are_ordered_by_name() {
    for (names, kept) in [
        (
            [
                "x-2026-11-30-102903.log",
                "x-2026-11-30-102903.000000000.log",
            ],
            "x-2026-11-30-102903.log",
        ),
        (
            [
                "x-2026-11-30-102903-3.log",
                "x-2026-11-30-102903.000000000-3.log",
            ],
            "x-2026-11-30-102903.000000000-3.log",
        ),
    ] {
        let (dir, fs) = host();
        touch(dir.path(), &names);
        retain(&fs, Path::new(LOG_DIR), "x", 1).unwrap();
        assert_eq!(
            names_in(&dir.path().join(LOG_DIR.trim_start_matches('/'))),
            [kept]
        );
    }
}

#[test]
fn an_index_reads_each_directory_once_per_run() {
    let (dir, fs) = host();
    let mut index = LogIndex::new(Path::new(LOG_DIR), ["x", "y"]);
    index.create(&fs, "x", now()).unwrap();
    // Written behind the index's back after its one listing: not seen by retention ...
    touch(
        dir.path(),
        &["y-2020-01-01-000000.log", "x-2020-01-01-000000.log"],
    );
    index.create(&fs, "y", now()).unwrap();
    index.retain(&fs, "x", 1).unwrap();
    index.retain(&fs, "y", 1).unwrap();
    let log_dir = dir.path().join(LOG_DIR.trim_start_matches('/'));
    assert!(log_dir.join("y-2020-01-01-000000.log").exists());
    assert!(log_dir.join("x-2020-01-01-000000.log").exists());
    // ... and a name taken behind its back is still never overwritten.
    touch(dir.path(), &["x-2026-11-30-102728.136997000-1.log"]);
    let log = index.create(&fs, "x", now()).unwrap();
    assert_eq!(
        log.host_path.file_name().unwrap(),
        "x-2026-11-30-102728.136997000-2.log"
    );
    assert_eq!(
        std::fs::read(log_dir.join("x-2026-11-30-102728.136997000-1.log")).unwrap(),
        b"x-2026-11-30-102728.136997000-1.log"
    );
}

#[test]
fn an_index_reads_again_for_a_step_it_was_not_told_about() {
    let (dir, fs) = host();
    touch(
        dir.path(),
        &["z-2020-01-01-000000.log", "z-2020-01-01-000001.log"],
    );
    let mut index = LogIndex::new(Path::new(LOG_DIR), ["x"]);
    index.create(&fs, "x", now()).unwrap();
    index.retain(&fs, "z", 1).unwrap();
    assert_eq!(
        names_in(&dir.path().join(LOG_DIR.trim_start_matches('/'))),
        [
            "x-2026-11-30-102728.136997000.log",
            "z-2020-01-01-000001.log"
        ]
    );
}

#[test]
fn candidate_bases_find_every_step_a_name_can_belong_to() {
    assert_eq!(
        candidate_bases("x-y-2026-11-30-102903.log"),
        [Some("x-y"), None, None, None]
    );
    assert_eq!(
        candidate_bases("a-2026-11-30-102903.000000001-12.log"),
        [Some("a"), None, None, None]
    );
    assert_eq!(candidate_bases("x.log.err"), [None; 4]);
    assert_eq!(candidate_bases("-2026-11-30-102903.log")[0], Some(""));
    // Multi-byte names near the cut do not panic.
    assert_eq!(candidate_bases("ééééééééééééééééééé.log"), [None; 4]);
}

#[test]
fn log_trouble_is_a_log_not_written_and_a_refusal_an_error() {
    let (dir, fs) = host();
    // LOGS/<pkg> is a file: the directory cannot be created.
    std::fs::create_dir_all(dir.path().join("var/log/skyhook/sk1")).unwrap();
    std::fs::write(dir.path().join("var/log/skyhook/sk1/pkg"), "").unwrap();
    let mut logs = InvocationLogs::new(true, Path::new(LOG_DIR), ["s.sh"]);
    let log = logs.open(&fs, "s.sh", now()).unwrap();
    let OperationLog::NotWritten { cause } = &log else {
        panic!("{log:?}");
    };
    assert_eq!(cause, "/var/log/skyhook/sk1/pkg is not a directory");
    assert_eq!(
        logs.close("s.sh", &log, None).as_deref(),
        Some("not written (/var/log/skyhook/sk1/pkg is not a directory)")
    );
    // Nothing was created, so nothing is pruned (and nothing fails).
    logs.prune(&fs, "s.sh").unwrap();

    // A link in the log path stays a refusal (SPEC §5).
    let (dir, fs) = host();
    std::fs::create_dir_all(dir.path().join("var/log/skyhook")).unwrap();
    symlink("/tmp", dir.path().join("var/log/skyhook/sk1")).unwrap();
    let mut logs = InvocationLogs::new(true, Path::new(LOG_DIR), ["s.sh"]);
    let err = logs.open(&fs, "s.sh", now()).unwrap_err();
    assert_eq!(err.to_string(), "/var/log/skyhook/sk1 is a symbolic link");
}

#[test]
fn a_log_that_failed_to_write_is_recorded_as_not_written() {
    let (_dir, fs) = host();
    let mut logs = InvocationLogs::new(true, Path::new(LOG_DIR), ["s.sh"]);
    let log = logs.open(&fs, "s.sh", now()).unwrap();
    assert!(matches!(log, OperationLog::Open(_)));
    assert_eq!(
        logs.close("s.sh", &log, Some("No space left on device (os error 28)"))
            .as_deref(),
        Some(
            "not written (writing /var/log/skyhook/sk1/pkg/1.0.0/\
             s.sh-2026-11-30-102728.136997000.log: No space left on device (os error 28))"
        )
    );
    let fine = logs.open(&fs, "s.sh", now()).unwrap();
    assert_eq!(
        logs.close("s.sh", &fine, None).as_deref(),
        Some("/var/log/skyhook/sk1/pkg/1.0.0/s.sh-2026-11-30-102728.136997000-1.log")
    );
    let mut off = InvocationLogs::new(false, Path::new(LOG_DIR), ["s.sh"]);
    let log = off.open(&fs, "s.sh", now()).unwrap();
    assert!(matches!(log, OperationLog::Off));
    assert_eq!(off.close("s.sh", &log, None), None);
}

#[test]
fn the_logs_of_a_step_are_listed_newest_first_as_retention_orders_them() {
    let (dir, fs) = host();
    touch(
        dir.path(),
        &[
            "s1.sh-2026-11-30-102728.000000001.log",
            "s1.sh-2026-11-30-102728.000000001-2.log",
            "s1.sh-2026-11-30-102729.log",
            "s1.sh-2026-11-29-235959.999999999.log",
            "s1.sh-x-2026-11-30-102730.000000000.log",
            "s1.sh-2026-11-30-102731.000000000.log.err",
        ],
    );
    let names: Vec<String> = logs_of(&fs, Path::new(LOG_DIR), "s1.sh")
        .unwrap()
        .iter()
        .map(|p| p.strip_prefix(LOG_DIR).unwrap().display().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "s1.sh-2026-11-30-102729.log",
            "s1.sh-2026-11-30-102728.000000001-2.log",
            "s1.sh-2026-11-30-102728.000000001.log",
            "s1.sh-2026-11-29-235959.999999999.log",
        ]
    );
    assert!(
        logs_of(&fs, Path::new(LOG_DIR), "nope.sh")
            .unwrap()
            .is_empty()
    );
    assert!(
        logs_of(&fs, Path::new("/var/log/none"), "s1.sh")
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        logs_of(&fs, Path::new(LOG_DIR), "../s1.sh"),
        Err(HostFsError::NotRelative { .. })
    ));
}
