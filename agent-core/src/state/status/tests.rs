use super::*;

#[test]
fn operations_sort_by_type_then_numeric_index() {
    let mut stems = ["kind_10", "kind_2", "no_op", "a_1"].map(operation_order);
    stems.sort();
    let names: Vec<&str> = stems.iter().map(|(_, _, s)| s.as_str()).collect();
    assert_eq!(names, ["a_1", "kind_2", "kind_10", "no_op"]);
}

#[test]
fn an_error_anywhere_wins_then_a_failure_then_running() {
    use Verdict::{Done, Error, Failed, NotStarted, RebootPending, Reset, Running, Stopped};
    assert_eq!(Verdict::combine([Done, Running, Error]), Error);
    assert_eq!(Verdict::combine([Failed, Running, Error]), Error);
    assert_eq!(Verdict::combine([Reset, Running, Failed]), Failed);
    assert_eq!(Verdict::combine([Stopped, Running, Reset]), Reset);
    assert_eq!(Verdict::combine([Stopped, RebootPending]), RebootPending);
    assert_eq!(Verdict::combine([Done, Stopped]), Stopped);
    assert!(Error.is_failure() && Failed.is_failure() && Reset.is_failure());
    assert!(!Stopped.is_failure() && !Running.is_failure() && !RebootPending.is_failure());
    assert_eq!(
        Verdict::ALL.map(Verdict::as_str),
        [
            "not-started",
            "done",
            "stopped",
            "reboot-pending",
            "running",
            "reset",
            "failed",
            "error"
        ]
    );
    assert_eq!(Verdict::combine([Done, RebootPending, Running]), Running);
    assert_eq!(Verdict::combine([Done, RebootPending]), RebootPending);
    assert_eq!(Verdict::combine([Done]), Done);
    assert_eq!(Verdict::combine([]), NotStarted);
    assert_eq!(
        serde_json::to_string(&RebootPending).unwrap(),
        r#""reboot-pending""#
    );
}

#[test]
fn the_last_lines_of_an_output_tail() {
    assert_eq!(last_lines("a\nb\nc\n", 2), ["b", "c"]);
    assert_eq!(last_lines("a\r\nb", 5), ["a", "b"]);
    assert_eq!(last_lines("a\n\n", 5), ["a", ""]);
    assert!(last_lines("", 5).is_empty());
    assert!(last_lines("\n", 5).is_empty());
}

#[test]
fn boot_ids_are_shortened_for_reading() {
    assert_eq!(short_id("3f9c1d52-0b7e-4c1a"), "3f9c1d52…");
    assert_eq!(short_id("old-boot"), "old-boot");
}

#[test]
fn discovery_finds_the_operators_state_directories() {
    let root = tempfile::tempdir().unwrap();
    let fs = HostFs::new(root.path());
    let legacy = (Path::new("/etc/skyhook"), Path::new("/var/log/skyhook"));
    assert_eq!(
        discover(&fs, legacy.0, legacy.1),
        [(legacy.0.to_path_buf(), legacy.1.to_path_buf())],
        "nothing found: the legacy default"
    );
    for dir in [
        "var/lib/skyhook/sk1/flags",
        "var/lib/skyhook/sk2/history",
        "var/lib/skyhook/pkg-only/skyhook_dir",
    ] {
        std::fs::create_dir_all(root.path().join(dir)).unwrap();
    }
    assert_eq!(
        discover(&fs, legacy.0, legacy.1),
        [
            (
                PathBuf::from("/var/lib/skyhook/sk1"),
                PathBuf::from("/var/log/skyhook/sk1")
            ),
            (
                PathBuf::from("/var/lib/skyhook/sk2"),
                PathBuf::from("/var/log/skyhook/sk2")
            ),
        ]
    );
    std::fs::create_dir_all(root.path().join("etc/skyhook/results")).unwrap();
    assert_eq!(discover(&fs, legacy.0, legacy.1).len(), 3);
}

#[test]
fn times_sort_as_instants() {
    assert!(sort_time("2026-11-30T10:00:00Z") > sort_time("2026-11-30T09:59:59.5Z"));
    assert!(sort_time("2026-11-30T10:00:00.5Z") > sort_time("2026-11-30T10:00:00Z"));
}

/// The metrics' verdict is judged from the run just finished, not from the records on disk: a
/// record a failed write left behind (here, an earlier failure) does not decide it.
#[test]
fn a_finished_run_stands_by_its_own_record() {
    let root = tempfile::tempdir().unwrap();
    let fs = HostFs::new(root.path());
    let rt = Runtime::from_lookup(|_| None).unwrap();
    let mut earlier = ResultsRecord::running(
        ("v", "sha"),
        "apply",
        "pkg_1.0.0",
        ("pkg", "1.0.0"),
        "2026-12-01T10:00:00Z",
    );
    earlier.result = Some(RecordedResult::Failed);
    earlier.finished = "2026-12-01T10:00:01Z".into();
    let file = results::path(&rt.state_dir, "pkg", "1.0.0", "apply");
    results::write(&fs, &file, &earlier).unwrap();
    assert_eq!(standing(&fs, &rt, &earlier).verdict, Verdict::Failed);

    let mut finished = earlier.clone();
    finished.result = Some(RecordedResult::Succeeded);
    finished.exit_code = 0;
    finished.error = None;
    finished.finished = "2026-12-01T10:05:00Z".into();
    let standing = standing(&fs, &rt, &finished);
    assert_eq!(standing.verdict, Verdict::Done);
    assert!(!standing.reboot_pending);
    finished.result = Some(RecordedResult::Stopped);
    assert_eq!(
        super::standing(&fs, &rt, &finished).verdict,
        Verdict::Stopped
    );
}
