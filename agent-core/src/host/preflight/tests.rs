use super::*;
use std::fs::{File, Permissions};
use std::os::unix::fs::PermissionsExt as _;
use std::time::{Duration, SystemTime};

use std::os::unix::fs::symlink;

use nix::sys::stat::Mode as NixMode;
use nix::unistd::mkfifo;

const COPY_DIR: &str = "/var/lib/skyhook/sk1/pkg-1.0.0-uid1-1";

/// A scratch area: `root` is ROOT, `outside` is a sibling that must never be touched.
struct Scratch {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    container: PathBuf,
}

fn scratch() -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    let container = dir.path().join("container");
    for d in [&root, &outside, &container] {
        fs::create_dir(d).unwrap();
    }
    Scratch {
        _dir: dir,
        root,
        outside,
        container,
    }
}

fn write(path: &Path, content: &str, mode: u32) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
    fs::set_permissions(path, Permissions::from_mode(mode)).unwrap();
}

fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

fn package(s: &Scratch) -> PathBuf {
    s.root.join(COPY_DIR.trim_start_matches('/'))
}

fn err_text(e: &PreflightError) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

// copy_resolv

#[test]
fn resolv_is_copied_following_source_links() {
    let s = scratch();
    fs::create_dir(s.root.join("etc")).unwrap();
    write(
        &s.container.join("real-resolv.conf"),
        "nameserver 10.0.0.1\n",
        0o644,
    );
    symlink(
        s.container.join("real-resolv.conf"),
        s.container.join("resolv.conf"),
    )
    .unwrap();
    copy_resolv(&s.root, &s.container.join("resolv.conf")).unwrap();
    let dest = s.root.join("etc/resolv.conf");
    assert!(fs::symlink_metadata(&dest).unwrap().is_file());
    assert_eq!(fs::read_to_string(&dest).unwrap(), "nameserver 10.0.0.1\n");
    assert_eq!(mode_of(&dest), 0o644);
}

#[test]
fn resolv_needs_the_host_etc_and_creates_nothing_without_it() {
    let s = scratch();
    write(
        &s.container.join("resolv.conf"),
        "nameserver 1.1.1.1\n",
        0o644,
    );
    let expected = format!(
        "cannot copy resolv.conf: {}/etc is not a directory; is the host's root mounted at {}?",
        s.root.display(),
        s.root.display()
    );
    let err = copy_resolv(&s.root, &s.container.join("resolv.conf")).unwrap_err();
    assert_eq!(err.to_string(), expected);
    assert_eq!(fs::read_dir(&s.root).unwrap().count(), 0);
    write(&s.root.join("etc"), "a file", 0o644);
    let err = copy_resolv(&s.root, &s.container.join("resolv.conf")).unwrap_err();
    assert_eq!(err.to_string(), expected);
    // A link to a directory inside ROOT is the host's /etc.
    fs::remove_file(s.root.join("etc")).unwrap();
    fs::create_dir_all(s.root.join("usr/etc")).unwrap();
    symlink("usr/etc", s.root.join("etc")).unwrap();
    copy_resolv(&s.root, &s.container.join("resolv.conf")).unwrap();
    assert_eq!(
        fs::read_to_string(s.root.join("usr/etc/resolv.conf")).unwrap(),
        "nameserver 1.1.1.1\n"
    );
}

#[test]
fn resolv_replaces_an_existing_file() {
    let s = scratch();
    write(&s.root.join("etc/resolv.conf"), "old\n", 0o600);
    write(&s.container.join("resolv.conf"), "new\n", 0o644);
    copy_resolv(&s.root, &s.container.join("resolv.conf")).unwrap();
    assert_eq!(
        fs::read_to_string(s.root.join("etc/resolv.conf")).unwrap(),
        "new\n"
    );
    assert_eq!(mode_of(&s.root.join("etc/resolv.conf")), 0o644);
}

#[test]
fn resolv_follows_a_relative_destination_link_inside_root() {
    let s = scratch();
    write(
        &s.root.join("run/systemd/resolve/stub-resolv.conf"),
        "stub\n",
        0o644,
    );
    fs::create_dir(s.root.join("etc")).unwrap();
    symlink(
        "../run/systemd/resolve/stub-resolv.conf",
        s.root.join("etc/resolv.conf"),
    )
    .unwrap();
    write(&s.container.join("resolv.conf"), "new\n", 0o644);
    copy_resolv(&s.root, &s.container.join("resolv.conf")).unwrap();
    assert!(
        fs::symlink_metadata(s.root.join("etc/resolv.conf"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        fs::read_to_string(s.root.join("run/systemd/resolve/stub-resolv.conf")).unwrap(),
        "new\n"
    );
}

#[test]
fn resolv_interprets_an_absolute_destination_link_under_root() {
    let s = scratch();
    fs::create_dir_all(s.root.join("run/resolve")).unwrap();
    fs::create_dir(s.root.join("etc")).unwrap();
    // As the host sees it: /run/resolve/resolv.conf, i.e. <root>/run/resolve/resolv.conf.
    symlink("/run/resolve/resolv.conf", s.root.join("etc/resolv.conf")).unwrap();
    write(&s.container.join("resolv.conf"), "new\n", 0o644);
    copy_resolv(&s.root, &s.container.join("resolv.conf")).unwrap();
    assert_eq!(
        fs::read_to_string(s.root.join("run/resolve/resolv.conf")).unwrap(),
        "new\n"
    );
}

#[test]
fn resolv_refuses_a_destination_link_leaving_root() {
    let s = scratch();
    write(&s.outside.join("resolv.conf"), "outside\n", 0o644);
    fs::create_dir(s.root.join("etc")).unwrap();
    symlink("../../outside/resolv.conf", s.root.join("etc/resolv.conf")).unwrap();
    write(&s.container.join("resolv.conf"), "new\n", 0o644);
    let err = copy_resolv(&s.root, &s.container.join("resolv.conf")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/etc/resolv.conf is a symbolic link that resolves outside the host root"
    );
    assert_eq!(
        fs::read_to_string(s.outside.join("resolv.conf")).unwrap(),
        "outside\n"
    );
}

#[test]
fn resolv_refuses_a_destination_link_cycle() {
    let s = scratch();
    fs::create_dir(s.root.join("etc")).unwrap();
    symlink("resolv.conf", s.root.join("etc/resolv.conf")).unwrap();
    write(&s.container.join("resolv.conf"), "new\n", 0o644);
    let err = copy_resolv(&s.root, &s.container.join("resolv.conf")).unwrap_err();
    assert_eq!(err.to_string(), "symbolic link cycle at /etc/resolv.conf");
}

#[test]
fn resolv_refuses_a_directory_destination() {
    let s = scratch();
    fs::create_dir_all(s.root.join("etc/resolv.conf")).unwrap();
    write(&s.container.join("resolv.conf"), "new\n", 0o644);
    let err = copy_resolv(&s.root, &s.container.join("resolv.conf")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/etc/resolv.conf is a directory, not a regular file"
    );
}

#[test]
fn resolv_cleans_old_temp_files_of_its_own_only() {
    let s = scratch();
    fs::create_dir(s.root.join("etc")).unwrap();
    write(&s.container.join("resolv.conf"), "new\n", 0o644);
    let old = SystemTime::now() - Duration::from_secs(3600);
    let names = [
        (".resolv.conf.tmp.7.00000000000000ab", true, false),
        (".skyhook-tmp-7-0", true, false),
        (".resolv.conf.tmp.8.00000000000000cd", false, true),
        (".hosts.tmp.7.00000000000000ab", true, true),
        (".skyhook-tmp-x-0", true, true),
    ];
    for (name, aged, _) in names {
        let path = s.root.join("etc").join(name);
        write(&path, "half", 0o600);
        if aged {
            File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
    }
    copy_resolv(&s.root, &s.container.join("resolv.conf")).unwrap();
    for (name, _, kept) in names {
        assert_eq!(s.root.join("etc").join(name).exists(), kept, "{name}");
    }
    assert_eq!(
        fs::read_to_string(s.root.join("etc/resolv.conf")).unwrap(),
        "new\n"
    );
}

#[test]
fn resolv_names_a_missing_source() {
    let s = scratch();
    fs::create_dir(s.root.join("etc")).unwrap();
    let source = s.container.join("resolv.conf");
    let err = copy_resolv(&s.root, &source).unwrap_err();
    assert_eq!(
        err_text(&err),
        format!(
            "reading {}: No such file or directory (os error 2)",
            source.display()
        )
    );
}

// ensure_package_data

fn data_dir(s: &Scratch) -> PathBuf {
    let data = s.container.join("skyhook-package");
    write(&data.join("config.json"), "{}", 0o644);
    write(&data.join("skyhook_dir/s1.sh"), "#!/bin/sh\n", 0o755);
    write(
        &data.join("root_dir/etc/pkg/pkg.conf"),
        "from root_dir\n",
        0o640,
    );
    fs::create_dir(data.join("configmaps")).unwrap();
    data
}

fn no_node_files(s: &Scratch) -> PathBuf {
    s.container.join("node-files")
}

#[test]
fn package_data_is_copied_when_the_copy_dir_is_missing() {
    let s = scratch();
    let data = data_dir(&s);
    ensure_package_data(&s.root, Path::new(COPY_DIR), &data, &no_node_files(&s)).unwrap();
    let pkg = package(&s);
    assert_eq!(fs::read_to_string(pkg.join("config.json")).unwrap(), "{}");
    assert_eq!(mode_of(&pkg.join("skyhook_dir/s1.sh")), 0o755);
    assert_eq!(mode_of(&pkg.join("root_dir/etc/pkg/pkg.conf")), 0o640);
    assert!(pkg.join("configmaps").is_dir());
    assert_eq!(mode_of(&s.root.join("var/lib/skyhook/sk1")), 0o755);
    // Nothing but the package itself is left in its parent.
    let siblings: Vec<_> = fs::read_dir(pkg.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(siblings, [OsString::from("pkg-1.0.0-uid1-1")]);
}

#[test]
fn existing_copy_dir_is_used_as_is() {
    let s = scratch();
    let data = data_dir(&s);
    let pkg = package(&s);
    write(&pkg.join("config.json"), "operator's", 0o600);
    ensure_package_data(&s.root, Path::new(COPY_DIR), &data, &no_node_files(&s)).unwrap();
    assert_eq!(
        fs::read_to_string(pkg.join("config.json")).unwrap(),
        "operator's"
    );
    assert!(!pkg.join("skyhook_dir").exists());
}

#[test]
fn copy_dir_that_is_a_file_is_an_error() {
    let s = scratch();
    let data = data_dir(&s);
    write(&package(&s), "", 0o644);
    let err =
        ensure_package_data(&s.root, Path::new(COPY_DIR), &data, &no_node_files(&s)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("package directory {COPY_DIR} exists and is a regular file, not a directory")
    );
}

#[test]
fn missing_package_data_is_an_error() {
    let s = scratch();
    let data = s.container.join("skyhook-package");
    let err =
        ensure_package_data(&s.root, Path::new(COPY_DIR), &data, &no_node_files(&s)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "package directory {}{COPY_DIR} (ROOT_MOUNT + COPY_DIR) does not exist, and \
             SKYHOOK_DATA_DIR {:?} to copy it from does not exist either: check ROOT_MOUNT \
             and COPY_DIR, or set SKYHOOK_DATA_DIR to the package's directory in this \
             container",
            s.root.display(),
            data.display().to_string()
        )
    );
    assert!(!s.root.join("var").exists());
}

#[test]
fn node_files_are_merged_over_package_data() {
    let s = scratch();
    let data = data_dir(&s);
    let node = s.container.join("node-files");
    write(&node.join("config.json"), "{\"node\": true}", 0o600);
    write(&node.join("configmaps/node.conf"), "node\n", 0o644);
    write(&node.join("extra/x"), "x", 0o644);
    ensure_package_data(&s.root, Path::new(COPY_DIR), &data, &node).unwrap();
    let pkg = package(&s);
    assert_eq!(
        fs::read_to_string(pkg.join("config.json")).unwrap(),
        "{\"node\": true}"
    );
    assert_eq!(mode_of(&pkg.join("config.json")), 0o600);
    assert_eq!(
        fs::read_to_string(pkg.join("configmaps/node.conf")).unwrap(),
        "node\n"
    );
    assert_eq!(fs::read_to_string(pkg.join("extra/x")).unwrap(), "x");
    assert_eq!(
        fs::read_to_string(pkg.join("skyhook_dir/s1.sh")).unwrap(),
        "#!/bin/sh\n"
    );
}

#[test]
fn source_links_are_followed() {
    let s = scratch();
    let data = data_dir(&s);
    write(&s.container.join("shared/lib.sh"), "lib", 0o644);
    symlink(s.container.join("shared"), data.join("shared")).unwrap();
    symlink("s1.sh", data.join("skyhook_dir/s1_check.sh")).unwrap();
    ensure_package_data(&s.root, Path::new(COPY_DIR), &data, &no_node_files(&s)).unwrap();
    let pkg = package(&s);
    assert!(fs::symlink_metadata(pkg.join("shared")).unwrap().is_dir());
    assert_eq!(
        fs::read_to_string(pkg.join("shared/lib.sh")).unwrap(),
        "lib"
    );
    assert!(
        fs::symlink_metadata(pkg.join("skyhook_dir/s1_check.sh"))
            .unwrap()
            .is_file()
    );
}

#[test]
fn symlink_cycle_in_package_data_is_an_error() {
    let s = scratch();
    let data = data_dir(&s);
    symlink("..", data.join("skyhook_dir/loop")).unwrap();
    let err =
        ensure_package_data(&s.root, Path::new(COPY_DIR), &data, &no_node_files(&s)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "symbolic link cycle at {}",
            data.join("skyhook_dir/loop").display()
        )
    );
    assert!(!package(&s).exists());
    let parent = package(&s).parent().unwrap().to_path_buf();
    assert!(!parent.exists() || fs::read_dir(parent).unwrap().next().is_none());
}

#[test]
fn self_referencing_link_in_package_data_is_an_error() {
    let s = scratch();
    let data = data_dir(&s);
    symlink("me", data.join("me")).unwrap();
    let err =
        ensure_package_data(&s.root, Path::new(COPY_DIR), &data, &no_node_files(&s)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("symbolic link cycle at {}", data.join("me").display())
    );
}

#[test]
fn fifo_in_package_data_is_an_error() {
    let s = scratch();
    let data = data_dir(&s);
    mkfifo(
        &data.join("skyhook_dir/pipe"),
        NixMode::from_bits_truncate(0o644),
    )
    .unwrap();
    let err =
        ensure_package_data(&s.root, Path::new(COPY_DIR), &data, &no_node_files(&s)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{} is a fifo; only regular files and directories can be copied",
            data.join("skyhook_dir/pipe").display()
        )
    );
    assert!(!package(&s).exists());
}

#[test]
fn dangling_link_in_package_data_is_an_error() {
    let s = scratch();
    let data = data_dir(&s);
    symlink("gone", data.join("dangling")).unwrap();
    let err =
        ensure_package_data(&s.root, Path::new(COPY_DIR), &data, &no_node_files(&s)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{} is a dangling symbolic link",
            data.join("dangling").display()
        )
    );
}

#[test]
fn failed_merge_leaves_no_package_dir() {
    let s = scratch();
    let data = data_dir(&s);
    let node = s.container.join("node-files");
    // A file where the package data has a directory.
    write(&node.join("skyhook_dir"), "not a dir", 0o644);
    let err = ensure_package_data(&s.root, Path::new(COPY_DIR), &data, &node).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "cannot merge {} into {COPY_DIR}/skyhook_dir: it is a directory",
            node.join("skyhook_dir").display()
        )
    );
    assert!(!package(&s).exists());
    assert_eq!(
        fs::read_dir(package(&s).parent().unwrap()).unwrap().count(),
        0
    );
}

#[test]
fn copies_drop_special_bits() {
    let s = scratch();
    let data = data_dir(&s);
    write(&data.join("skyhook_dir/suid.sh"), "x", 0o4755);
    write(&data.join("skyhook_dir/sgid.sh"), "x", 0o2750);
    fs::create_dir(data.join("sticky")).unwrap();
    fs::set_permissions(data.join("sticky"), Permissions::from_mode(0o1777)).unwrap();
    fs::set_permissions(data.join("skyhook_dir"), Permissions::from_mode(0o2755)).unwrap();
    ensure_package_data(&s.root, Path::new(COPY_DIR), &data, &no_node_files(&s)).unwrap();
    let pkg = package(&s);
    assert_eq!(mode_of(&pkg.join("skyhook_dir/suid.sh")), 0o755);
    assert_eq!(mode_of(&pkg.join("skyhook_dir/sgid.sh")), 0o750);
    assert_eq!(mode_of(&pkg.join("sticky")), 0o777);
    assert_eq!(mode_of(&pkg.join("skyhook_dir")), 0o755);
}

#[test]
fn directories_keep_source_modes_even_read_only() {
    let s = scratch();
    let data = data_dir(&s);
    fs::set_permissions(data.join("skyhook_dir"), Permissions::from_mode(0o555)).unwrap();
    ensure_package_data(&s.root, Path::new(COPY_DIR), &data, &no_node_files(&s)).unwrap();
    assert_eq!(mode_of(&package(&s).join("skyhook_dir")), 0o555);
    assert_eq!(
        fs::read_to_string(package(&s).join("skyhook_dir/s1.sh")).unwrap(),
        "#!/bin/sh\n"
    );
}

#[test]
fn copy_dir_may_not_escape_root() {
    let s = scratch();
    let data = data_dir(&s);
    let err = ensure_package_data(
        &s.root,
        Path::new("/../outside/pkg"),
        &data,
        &no_node_files(&s),
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "/../outside/pkg escapes the host root");
}

// overlay_root_dir

#[test]
fn missing_root_dir_is_a_no_op() {
    let s = scratch();
    fs::create_dir_all(package(&s)).unwrap();
    overlay_root_dir(&s.root, Path::new(COPY_DIR)).unwrap();
    assert_eq!(fs::read_dir(&s.root).unwrap().count(), 1);
}

#[test]
fn overlay_creates_nested_directories_and_files() {
    let s = scratch();
    let root_dir = package(&s).join("root_dir");
    write(
        &root_dir.join("etc/pkg/conf.d/pkg.conf"),
        "from root_dir\n",
        0o640,
    );
    write(&root_dir.join("usr/local/bin/tool"), "#!/bin/sh\n", 0o755);
    fs::set_permissions(root_dir.join("etc/pkg"), Permissions::from_mode(0o750)).unwrap();
    fs::create_dir(s.root.join("etc")).unwrap();
    fs::set_permissions(s.root.join("etc"), Permissions::from_mode(0o711)).unwrap();
    let root_mode = mode_of(&s.root);
    overlay_root_dir(&s.root, Path::new(COPY_DIR)).unwrap();
    assert_eq!(
        fs::read_to_string(s.root.join("etc/pkg/conf.d/pkg.conf")).unwrap(),
        "from root_dir\n"
    );
    assert_eq!(mode_of(&s.root.join("etc/pkg/conf.d/pkg.conf")), 0o640);
    assert_eq!(mode_of(&s.root.join("etc/pkg")), 0o750);
    assert_eq!(mode_of(&s.root.join("usr/local/bin/tool")), 0o755);
    // Existing directories, and ROOT itself, keep their modes.
    assert_eq!(mode_of(&s.root.join("etc")), 0o711);
    assert_eq!(mode_of(&s.root), root_mode);
}

#[test]
fn overlay_replaces_existing_files() {
    let s = scratch();
    write(&package(&s).join("root_dir/etc/pkg.conf"), "new\n", 0o644);
    write(&s.root.join("etc/pkg.conf"), "old\n", 0o600);
    overlay_root_dir(&s.root, Path::new(COPY_DIR)).unwrap();
    assert_eq!(
        fs::read_to_string(s.root.join("etc/pkg.conf")).unwrap(),
        "new\n"
    );
    assert_eq!(mode_of(&s.root.join("etc/pkg.conf")), 0o644);
    // Run again (every non-uninstall stage overlays): same result.
    overlay_root_dir(&s.root, Path::new(COPY_DIR)).unwrap();
    assert_eq!(
        fs::read_to_string(s.root.join("etc/pkg.conf")).unwrap(),
        "new\n"
    );
}

#[test]
fn overlay_follows_destination_links_inside_root() {
    let s = scratch();
    write(
        &package(&s).join("root_dir/etc/app/app.conf"),
        "new\n",
        0o644,
    );
    write(
        &package(&s).join("root_dir/etc/app.conf"),
        "linked\n",
        0o644,
    );
    fs::create_dir_all(s.root.join("opt/app")).unwrap();
    fs::create_dir_all(s.root.join("data")).unwrap();
    fs::create_dir(s.root.join("etc")).unwrap();
    symlink("/opt/app", s.root.join("etc/app")).unwrap();
    symlink("../data/app.conf", s.root.join("etc/app.conf")).unwrap();
    overlay_root_dir(&s.root, Path::new(COPY_DIR)).unwrap();
    assert_eq!(
        fs::read_to_string(s.root.join("opt/app/app.conf")).unwrap(),
        "new\n"
    );
    assert!(
        fs::symlink_metadata(s.root.join("etc/app"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        fs::read_to_string(s.root.join("data/app.conf")).unwrap(),
        "linked\n"
    );
    assert!(
        fs::symlink_metadata(s.root.join("etc/app.conf"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn overlay_refuses_a_destination_link_pointing_outside_root() {
    let s = scratch();
    write(
        &package(&s).join("root_dir/etc/evil/x.conf"),
        "new\n",
        0o644,
    );
    write(&package(&s).join("root_dir/etc/passwd"), "new\n", 0o644);
    fs::create_dir(s.root.join("etc")).unwrap();
    symlink("../../outside", s.root.join("etc/evil")).unwrap();
    let err = overlay_root_dir(&s.root, Path::new(COPY_DIR)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/etc/evil is a symbolic link that resolves outside the host root"
    );
    assert_eq!(fs::read_dir(&s.outside).unwrap().count(), 0);

    fs::remove_file(s.root.join("etc/evil")).unwrap();
    fs::remove_dir_all(package(&s).join("root_dir/etc/evil")).unwrap();
    write(&s.outside.join("passwd"), "outside\n", 0o644);
    symlink("../../../outside/passwd", s.root.join("etc/passwd")).unwrap();
    let err = overlay_root_dir(&s.root, Path::new(COPY_DIR)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/etc/passwd is a symbolic link that resolves outside the host root"
    );
    assert_eq!(
        fs::read_to_string(s.outside.join("passwd")).unwrap(),
        "outside\n"
    );
}

#[test]
fn overlay_interprets_absolute_links_under_root() {
    let s = scratch();
    write(&package(&s).join("root_dir/etc/x.conf"), "new\n", 0o644);
    write(&s.outside.join("x.conf"), "outside\n", 0o644);
    fs::create_dir(s.root.join("etc")).unwrap();
    // The container-side absolute path of `outside`: on the host it means <root><that path>.
    symlink(s.outside.join("x.conf"), s.root.join("etc/x.conf")).unwrap();
    overlay_root_dir(&s.root, Path::new(COPY_DIR)).unwrap();
    assert_eq!(
        fs::read_to_string(s.outside.join("x.conf")).unwrap(),
        "outside\n"
    );
    let under_root = s
        .root
        .join(s.outside.join("x.conf").strip_prefix("/").unwrap());
    assert_eq!(fs::read_to_string(under_root).unwrap(), "new\n");
}

#[test]
fn overlay_source_cycle_is_an_error_and_writes_nothing() {
    let s = scratch();
    let root_dir = package(&s).join("root_dir");
    write(&root_dir.join("etc/a.conf"), "a", 0o644);
    symlink("..", root_dir.join("etc/loop")).unwrap();
    let err = overlay_root_dir(&s.root, Path::new(COPY_DIR)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "symbolic link cycle at {}",
            root_dir.join("etc/loop").display()
        )
    );
    assert!(!s.root.join("etc").exists());
}

#[test]
fn overlay_fifo_is_an_error() {
    let s = scratch();
    let root_dir = package(&s).join("root_dir");
    fs::create_dir_all(root_dir.join("run")).unwrap();
    mkfifo(
        &root_dir.join("run/pipe"),
        NixMode::from_bits_truncate(0o644),
    )
    .unwrap();
    let err = overlay_root_dir(&s.root, Path::new(COPY_DIR)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{} is a fifo; only regular files and directories can be copied",
            root_dir.join("run/pipe").display()
        )
    );
}

#[test]
fn overlay_drops_special_bits() {
    let s = scratch();
    let root_dir = package(&s).join("root_dir");
    write(&root_dir.join("usr/bin/tool"), "x", 0o6755);
    fs::create_dir(root_dir.join("shared")).unwrap();
    fs::set_permissions(root_dir.join("shared"), Permissions::from_mode(0o1777)).unwrap();
    overlay_root_dir(&s.root, Path::new(COPY_DIR)).unwrap();
    assert_eq!(mode_of(&s.root.join("usr/bin/tool")), 0o755);
    assert_eq!(mode_of(&s.root.join("shared")), 0o777);
}

#[test]
fn overlay_file_onto_a_directory_is_an_error() {
    let s = scratch();
    let root_dir = package(&s).join("root_dir");
    write(&root_dir.join("etc"), "x", 0o644);
    fs::create_dir(s.root.join("etc")).unwrap();
    let err = overlay_root_dir(&s.root, Path::new(COPY_DIR)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "cannot overlay {} onto /etc: it is a directory",
            root_dir.join("etc").display()
        )
    );
}

#[test]
fn overlay_directory_onto_a_file_is_an_error() {
    let s = scratch();
    let root_dir = package(&s).join("root_dir");
    write(&root_dir.join("etc/x"), "x", 0o644);
    write(&s.root.join("etc"), "a file", 0o644);
    let err = overlay_root_dir(&s.root, Path::new(COPY_DIR)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "cannot overlay {} onto /etc: it is a regular file",
            root_dir.join("etc").display()
        )
    );
}

// check_expected_config_files

fn configmaps(s: &Scratch) -> PathBuf {
    let dir = package(s).join("configmaps");
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn expected_config_files_present() {
    let s = scratch();
    let dir = configmaps(&s);
    write(&dir.join("a.conf"), "", 0o644);
    write(&dir.join("..data/b.conf"), "", 0o644);
    // Kubernetes ConfigMap volumes: the entry is a link into a timestamped directory.
    symlink("..data/b.conf", dir.join("b.conf")).unwrap();
    write(&dir.join("sub/c.conf"), "", 0o644);
    let files = ["a.conf", "b.conf", "sub/c.conf", "./a.conf"].map(String::from);
    check_expected_config_files(&s.root, Path::new(COPY_DIR), &files).unwrap();
    check_expected_config_files(&s.root, Path::new(COPY_DIR), &[]).unwrap();
}

#[test]
fn expected_config_file_missing() {
    let s = scratch();
    configmaps(&s);
    let err =
        check_expected_config_files(&s.root, Path::new(COPY_DIR), &["x.conf".into()]).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"expected config file "x.conf" was not found in the configmaps directory"#
    );
    let err = check_expected_config_files(&s.root, Path::new(COPY_DIR), &["a/x.conf".into()])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"expected config file "a/x.conf" was not found in the configmaps directory"#
    );
}

#[test]
fn expected_config_file_missing_configmaps_dir() {
    let s = scratch();
    fs::create_dir_all(package(&s)).unwrap();
    let err =
        check_expected_config_files(&s.root, Path::new(COPY_DIR), &["x.conf".into()]).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"expected config file "x.conf" was not found in the configmaps directory"#
    );
}

#[test]
fn expected_config_file_that_is_a_directory() {
    let s = scratch();
    fs::create_dir(configmaps(&s).join("x.conf")).unwrap();
    let err =
        check_expected_config_files(&s.root, Path::new(COPY_DIR), &["x.conf".into()]).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"expected config file "x.conf" was not found in the configmaps directory (found a directory)"#
    );
}

#[test]
fn expected_config_file_with_dotdot_or_absolute() {
    let s = scratch();
    let dir = configmaps(&s);
    // Exists, but outside the configmaps directory.
    write(&dir.parent().unwrap().join("config.json"), "{}", 0o644);
    for entry in ["../config.json", "a/../../config.json", "/etc/passwd", ""] {
        let err =
            check_expected_config_files(&s.root, Path::new(COPY_DIR), &[entry.into()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                r#"expected config file {entry:?} must be a non-empty relative path without ".." components"#
            )
        );
    }
}

#[test]
fn expected_config_files_first_failure_is_reported() {
    let s = scratch();
    write(&configmaps(&s).join("a.conf"), "", 0o644);
    let files = ["a.conf", "b.conf", "c.conf"].map(String::from);
    let err = check_expected_config_files(&s.root, Path::new(COPY_DIR), &files).unwrap_err();
    assert!(matches!(err, PreflightError::MissingConfigFile(ref f) if f == "b.conf"));
}

#[test]
fn missing_root_is_an_error() {
    let s = scratch();
    let root = s.root.join("not-mounted");
    write(&s.container.join("resolv.conf"), "x", 0o644);
    let err = copy_resolv(&root, &s.container.join("resolv.conf")).unwrap_err();
    assert_eq!(
        err_text(&err),
        format!(
            "inspecting host root {}: No such file or directory (os error 2)",
            root.display()
        )
    );
    let data = data_dir(&s);
    assert!(ensure_package_data(&root, Path::new(COPY_DIR), &data, &no_node_files(&s)).is_err());
    assert!(overlay_root_dir(&root, Path::new(COPY_DIR)).is_err());
    assert!(!root.exists());
}

mod link_tests {
    use super::*;

    #[test]
    fn package_copy_refuses_a_link_out_of_root_on_the_way() {
        let base = tempfile::tempdir().unwrap();
        let (root, outside, data) = (
            base.path().join("root"),
            base.path().join("outside"),
            base.path().join("data"),
        );
        for d in [&root.join("var/lib"), &outside, &data] {
            fs::create_dir_all(d).unwrap();
        }
        fs::write(data.join("config.json"), "{}").unwrap();
        // Relative, climbing above ROOT.
        std::os::unix::fs::symlink("../../../outside", root.join("var/lib/skyhook")).unwrap();
        let copy = |root: &Path| {
            ensure_package_data(
                root,
                Path::new("/var/lib/skyhook/sk1/pkg"),
                &data,
                &base.path().join("no-node-files"),
            )
        };
        assert_eq!(
            copy(&root).unwrap_err().to_string(),
            "/var/lib/skyhook is a symbolic link that resolves outside the host root"
        );
        // Absolute: on the host it means <ROOT><outside>, but the run reads the package
        // through its path in the agent's view, where it means `outside` itself.
        fs::remove_file(root.join("var/lib/skyhook")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("var/lib/skyhook")).unwrap();
        assert_eq!(
            copy(&root).unwrap_err().to_string(),
            format!(
                "/var/lib/skyhook is a symbolic link to the absolute path {}: in the agent's \
                 view that resolves outside the host root",
                outside.display()
            )
        );
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    }

    #[test]
    fn package_dir_behind_a_link_inside_root_is_used() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("root");
        fs::create_dir_all(root.join("data/skyhook/pkg")).unwrap();
        fs::create_dir_all(root.join("var/lib")).unwrap();
        std::os::unix::fs::symlink("../../data/skyhook", root.join("var/lib/skyhook")).unwrap();
        ensure_package_data(
            &root,
            Path::new("/var/lib/skyhook/pkg"),
            &base.path().join("no-data"),
            &base.path().join("no-node-files"),
        )
        .unwrap();
    }
}
