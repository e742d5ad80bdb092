//! Every host path through one descriptor-based lookup (SPEC §5, §6): a directory swapped for
//! a link to a canary outside ROOT while the agent works never redirects what it writes or
//! changes there. The agent either follows the link as the host would (with ROOT as `/`,
//! where the canary's path means something under ROOT) or refuses it; the canary is never
//! touched.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use nix::fcntl::{RenameFlags, renameat2};

use crate::util::{FakeHost, PKG_DIR, Package, Step, tree_stamp};

/// Files in the overlaid directory: each is one window between a check and a use.
const OVERLAY_FILES: usize = 400;

/// Swaps two entries of a directory (`RENAME_EXCHANGE`, atomic) in a loop until dropped.
struct Flipper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Flipper {
    fn start(a: &Path, b: &Path) -> Self {
        assert_eq!(a.parent(), b.parent(), "two entries of one directory");
        let dir = fs::File::open(a.parent().unwrap()).unwrap();
        let (a, b) = (
            a.file_name().unwrap().to_owned(),
            b.file_name().unwrap().to_owned(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, swaps) = (stop.clone(), swaps.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    renameat2(
                        &dir,
                        a.as_os_str(),
                        &dir,
                        b.as_os_str(),
                        RenameFlags::RENAME_EXCHANGE,
                    )
                    .expect("renameat2(RENAME_EXCHANGE)");
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        Self {
            stop,
            swaps,
            thread: Some(thread),
        }
    }

    /// Stop swapping; how many swaps there were.
    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the flipper thread");
        }
        self.swaps.load(Ordering::Relaxed)
    }
}

impl Drop for Flipper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// An empty canary directory outside ROOT, and the same path under ROOT (what the host sees
/// at it).
fn canary(host: &FakeHost) -> (PathBuf, PathBuf) {
    let canary = host.outside().join("canary");
    fs::create_dir_all(&canary).unwrap();
    let under_root = host.path(canary.to_str().unwrap());
    (canary, under_root)
}

#[test]
fn an_overlay_directory_swapped_for_a_link_out_of_root_never_writes_through_it() {
    let host = FakeHost::new();
    let (canary, _) = canary(&host);
    let mut pkg = Package::simple();
    for i in 0..OVERLAY_FILES {
        pkg = pkg.root_file(&format!("etc/app/f{i:03}.conf"), b"from root_dir\n", 0o644);
    }
    host.install(&pkg);
    // The host's /etc/app, and beside it a link to the canary (by its path in the agent's
    // view, absolute): the flipper swaps the two names while the overlay writes.
    host.mkdir("etc/app");
    host.symlink("etc/app.swap", &canary);
    let before = tree_stamp(host.outside());
    let flipper = Flipper::start(&host.path("etc/app"), &host.path("etc/app.swap"));
    let run = host.stage("apply");
    let swaps = flipper.stop();
    assert!(swaps > 100, "the directory was swapped only {swaps} times");
    before.assert_unchanged(&tree_stamp(host.outside()), "outside ROOT");
    assert_eq!(fs::read_dir(&canary).unwrap().count(), 0, "{run:?}");
    run.assert_success();
    // Every file landed under ROOT: in the host's directory (whichever name it had at the
    // time) or, through the link as the host sees it, at the canary's path under ROOT.
    let under_root = host.path(canary.to_str().unwrap());
    let landed = |i: usize| {
        let name = format!("f{i:03}.conf");
        [
            host.path("etc/app"),
            host.path("etc/app.swap"),
            under_root.clone(),
        ]
        .iter()
        .any(|dir| dir.join(&name).is_file())
    };
    assert!((0..OVERLAY_FILES).all(landed), "{run:?}");
}

#[test]
fn a_step_that_swaps_the_next_steps_directory_for_a_link_out_of_root_never_gets_it_changed() {
    // Step 1 replaces `skyhook_dir/tools`, where step 2's file is, with a link to a canary
    // outside ROOT holding a file of the same name. The agent adds the execute bits of step
    // 2's file just before running it: a step run on the host finds it as the host does, at
    // the canary's path under ROOT; one run in the agent's view is refused (the absolute
    // link means the canary there). The canary itself is never changed.
    for on_host in [true, false] {
        let host = FakeHost::new();
        let (canary, under_root) = canary(&host);
        for (dir, view) in [(&canary, "canary"), (&under_root, "host-view")] {
            fs::create_dir_all(dir).unwrap();
            fs::write(dir.join("s2.sh"), format!("#!/bin/sh\necho {view}\n")).unwrap();
            fs::set_permissions(dir.join("s2.sh"), fs::Permissions::from_mode(0o644)).unwrap();
        }
        let tools = format!("{}/skyhook_dir/tools", PKG_DIR.trim_start_matches('/'));
        let swap = format!(
            "#!/bin/sh\nrm -rf \"$STEP_ROOT/tools\" && ln -s {} \"$STEP_ROOT/tools\"\n",
            canary.display()
        );
        let pkg = Package::new()
            .step("apply", Step::new("s1.sh").on_host(on_host).script(&swap))
            .step("apply", Step::new("tools/s2.sh").on_host(on_host))
            .step("apply-check", Step::new("s1_check.sh").on_host(on_host));
        host.install(&pkg);
        let before = tree_stamp(host.outside());
        let run = host.stage("apply");
        assert!(
            fs::symlink_metadata(host.path(&tools))
                .unwrap()
                .file_type()
                .is_symlink(),
            "step 1 did not swap the directory\n{run:?}"
        );
        before.assert_unchanged(&tree_stamp(host.outside()), &format!("on_host {on_host}"));
        assert!(!run.out().contains("canary"), "the canary ran\n{run:?}");
        if on_host {
            run.assert_success();
            run.assert_stdout_contains("host-view");
            assert_eq!(
                fs::metadata(under_root.join("s2.sh"))
                    .unwrap()
                    .permissions()
                    .mode()
                    & 0o777,
                0o755
            );
        } else {
            run.assert_code(1);
            run.assert_stderr_line_contains(&[
                "running step \"tools/s2.sh\"",
                "is a symbolic link to the absolute path",
            ]);
        }
    }
}

#[test]
fn a_package_directory_behind_an_absolute_link_is_refused_a_relative_one_followed() {
    // SPEC §6.1: the run reads the package through `<ROOT>COPY_DIR` in the agent's view; an
    // absolute link on the way means another place there than on the host.
    let host = FakeHost::new();
    let (canary, under_root) = canary(&host);
    Package::simple().write_into(&under_root.join("sk1/pkg-1.0.0-uid1-1"), host.root());
    host.symlink("var/lib/skyhook", &canary);
    // STATE elsewhere: state paths refuse every link.
    let apply = || host.run("apply", &[("SKYHOOK_ROOT_DIR", "/var/lib/state")]);
    let before = tree_stamp(host.outside());
    let run = apply();
    run.assert_code(1);
    run.assert_stderr_contains("/var/lib/skyhook is a symbolic link to the absolute path");
    before.assert_unchanged(&tree_stamp(host.outside()), "outside ROOT");
    assert!(host.ran().is_empty());
    // The same place through a relative link: used.
    fs::remove_file(host.path("var/lib/skyhook")).unwrap();
    let relative = format!("../..{}", canary.display());
    host.symlink("var/lib/skyhook", &relative);
    apply().assert_success();
    before.assert_unchanged(&tree_stamp(host.outside()), "outside ROOT");
    assert_eq!(host.ran_count("s1.sh"), 1);
}
