use std::fs;
use std::os::unix::fs::symlink;

use super::*;

/// ROOT, and `outside`: a sibling of ROOT that no lookup may reach.
fn scratch() -> (tempfile::TempDir, HostFs, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(&outside).unwrap();
    (dir, HostFs::new(root), outside)
}

fn locate(fs: &HostFs, path: &str, links: Links) -> Result<Option<Located>, HostFsError> {
    fs.locate(Path::new(path), links, Missing::Stop)
}

fn host_of(located: &Located) -> String {
    located.host().display().to_string()
}

#[test]
fn the_root_itself_and_missing_tails() {
    let (_dir, fs, _) = scratch();
    let root = locate(&fs, "/", Links::InRoot).unwrap().unwrap();
    assert!(root.name.is_none() && root.is_dir());
    assert_eq!(host_of(&root), "/");
    let missing = locate(&fs, "/a", Links::InRoot).unwrap().unwrap();
    assert_eq!((host_of(&missing), missing.kind), ("/a".to_owned(), None));
    assert!(
        locate(&fs, "/a/b", Links::InRoot).unwrap().is_none(),
        "a missing directory on the way stops the lookup"
    );
    let created = fs
        .locate(Path::new("/a/b"), Links::InRoot, Missing::Create)
        .unwrap()
        .unwrap();
    assert_eq!((host_of(&created), created.kind), ("/a/b".to_owned(), None));
    assert!(fs.root().join("a").is_dir());
    assert!(
        !fs.root().join("a/b").exists(),
        "only the directories on the way"
    );
}

#[test]
fn a_file_on_the_way_is_not_a_directory() {
    let (_dir, fs, _) = scratch();
    fs::write(fs.root().join("etc"), "").unwrap();
    for links in [Links::Refuse, Links::InRoot, Links::Relative] {
        let err = locate(&fs, "/etc/x", links).unwrap_err();
        assert_eq!(err.to_string(), "/etc is not a directory");
    }
}

#[test]
fn in_root_links_are_followed_as_the_host_follows_them() {
    let (_dir, fs, outside) = scratch();
    let root = fs.root().to_path_buf();
    fs::create_dir_all(root.join("opt/app")).unwrap();
    fs::create_dir_all(root.join("etc")).unwrap();
    fs::write(root.join("opt/app/app.conf"), "x").unwrap();
    fs::write(outside.join("app.conf"), "outside").unwrap();
    // Absolute: the host's /opt/app, i.e. <ROOT>/opt/app, whatever the agent's /opt holds.
    symlink("/opt/app", root.join("etc/app")).unwrap();
    let found = locate(&fs, "/etc/app/app.conf", Links::InRoot)
        .unwrap()
        .unwrap();
    assert_eq!(host_of(&found), "/opt/app/app.conf");
    assert!(found.is_file());
    // Relative, and a final link: followed to its target.
    symlink("app/app.conf", root.join("etc/app.conf")).unwrap();
    let found = locate(&fs, "/etc/app.conf", Links::InRoot)
        .unwrap()
        .unwrap();
    assert_eq!(host_of(&found), "/opt/app/app.conf");
    // A link to a directory, as the final entry: the directory, in its parent.
    let found = locate(&fs, "/etc/app", Links::InRoot).unwrap().unwrap();
    assert_eq!(host_of(&found), "/opt/app");
    assert!(found.is_dir());
    // The agent's own absolute path of `outside` means <ROOT><that path> on the host.
    symlink(outside.join("app.conf"), root.join("etc/out.conf")).unwrap();
    assert!(
        locate(&fs, "/etc/out.conf", Links::InRoot)
            .unwrap()
            .is_none(),
        "its directories do not exist under ROOT"
    );
    let found = fs
        .locate(Path::new("/etc/out.conf"), Links::InRoot, Missing::Create)
        .unwrap()
        .unwrap();
    assert_eq!(
        found.host(),
        Path::new("/").join(outside.join("app.conf").strip_prefix("/").unwrap())
    );
    assert_eq!(found.kind, None, "nothing there under ROOT");
    assert!(root.join(outside.strip_prefix("/").unwrap()).is_dir());
    assert_eq!(
        fs::read_to_string(outside.join("app.conf")).unwrap(),
        "outside"
    );
}

#[test]
fn a_link_climbing_above_root_is_refused_naming_it() {
    let (_dir, fs, _) = scratch();
    fs::create_dir_all(fs.root().join("etc")).unwrap();
    symlink("../../outside", fs.root().join("etc/evil")).unwrap();
    for links in [Links::InRoot, Links::Relative] {
        let err = locate(&fs, "/etc/evil/x.conf", links).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/etc/evil is a symbolic link that resolves outside the host root"
        );
    }
    // Inside ROOT, `..` is fine.
    fs::create_dir_all(fs.root().join("data")).unwrap();
    symlink("../data", fs.root().join("etc/data")).unwrap();
    let found = locate(&fs, "/etc/data/x", Links::Relative)
        .unwrap()
        .unwrap();
    assert_eq!(host_of(&found), "/data/x");
}

#[test]
fn relative_lookups_refuse_absolute_links_and_state_lookups_every_link() {
    let (_dir, fs, _) = scratch();
    fs::create_dir_all(fs.root().join("var/lib/real")).unwrap();
    symlink("/var/lib/real", fs.root().join("var/lib/skyhook")).unwrap();
    let err = locate(&fs, "/var/lib/skyhook/pkg", Links::Relative).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/var/lib/skyhook is a symbolic link to the absolute path /var/lib/real: in the \
         agent's view that resolves outside the host root"
    );
    let err = locate(&fs, "/var/lib/skyhook/pkg", Links::Refuse).unwrap_err();
    assert_eq!(err.to_string(), "/var/lib/skyhook is a symbolic link");
    let found = locate(&fs, "/var/lib/skyhook/pkg", Links::InRoot)
        .unwrap()
        .unwrap();
    assert_eq!(host_of(&found), "/var/lib/real/pkg");
}

#[test]
fn link_cycles_end() {
    let (_dir, fs, _) = scratch();
    fs::create_dir_all(fs.root().join("etc")).unwrap();
    symlink("resolv.conf", fs.root().join("etc/resolv.conf")).unwrap();
    let err = locate(&fs, "/etc/resolv.conf", Links::InRoot).unwrap_err();
    assert_eq!(err.to_string(), "symbolic link cycle at /etc/resolv.conf");
    symlink("b", fs.root().join("etc/a")).unwrap();
    symlink("a", fs.root().join("etc/b")).unwrap();
    assert!(matches!(
        locate(&fs, "/etc/a/x", Links::InRoot),
        Err(HostFsError::SymlinkCycle { .. })
    ));
}

#[test]
fn a_directory_swapped_for_a_link_after_the_lookup_is_not_followed() {
    // The lookup holds the directory itself: what is written through it lands there, not
    // where a link put at its path since points.
    let (_dir, fs, outside) = scratch();
    fs::create_dir_all(fs.root().join("etc/app")).unwrap();
    let found = locate(&fs, "/etc/app/app.conf", Links::InRoot)
        .unwrap()
        .unwrap();
    fs::rename(fs.root().join("etc/app"), fs.root().join("etc/app.old")).unwrap();
    symlink(&outside, fs.root().join("etc/app")).unwrap();
    crate::host::fs::replace_in(
        &found.dir,
        &found.dir_host,
        found.name.as_deref().unwrap(),
        0o644,
        crate::host::fs::DirSync::Never,
        |f| std::io::Write::write_all(f, b"new"),
    )
    .unwrap();
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    assert_eq!(
        fs::read_to_string(fs.root().join("etc/app.old/app.conf")).unwrap(),
        "new"
    );
}

#[test]
fn the_walk_and_openat2_agree() {
    let (_dir, fs, _) = scratch();
    fs::create_dir_all(fs.root().join("var/lib/skyhook")).unwrap();
    fs::write(fs.root().join("var/lib/skyhook/START"), "").unwrap();
    let root = fs.open_root().unwrap();
    let fast = fast_lookup(&root, Path::new("/"), Path::new("/var/lib/skyhook/START"), Goal::Entry)
        .unwrap()
        .expect("openat2(2) opens a path without links here (Linux 5.6 or later, no seccomp filter refusing it)");
    assert_eq!(
        (host_of(&fast), fast.kind),
        ("/var/lib/skyhook/START".to_owned(), Some(Kind::File))
    );
    // With a link on the way, openat2 declines and the walk decides.
    symlink("skyhook", fs.root().join("var/lib/link")).unwrap();
    assert!(
        fast_lookup(
            &root,
            Path::new("/"),
            Path::new("/var/lib/link/START"),
            Goal::Entry
        )
        .unwrap()
        .is_none()
    );
    let walked = locate(&fs, "/var/lib/link/START", Links::InRoot)
        .unwrap()
        .unwrap();
    assert_eq!(host_of(&walked), "/var/lib/skyhook/START");
    assert!(matches!(
        locate(&fs, "/var/lib/link/START", Links::Refuse),
        Err(HostFsError::SymbolicLink { .. })
    ));
}
