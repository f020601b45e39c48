//! A root bound to its path (case R43): opened at the registered path each time, never followed
//! to a folder's new name or through a symlink put in its place.

use spaces_sdk::ErrorCode;

use super::super::Root;
use crate::error::Error;

/// `<tmp>/ws` with `a.txt`, canonical (the daemon registers canonical paths).
fn registered() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::TempDir::new().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "old\n").unwrap();
    (dir, ws)
}

#[test]
fn a_folder_replaced_at_its_path_is_the_new_one_and_the_renamed_one_is_left_alone() {
    let (_dir, ws) = registered();
    let before = Root::open_bound(&ws).unwrap();
    assert_eq!(before.read("a.txt", None, None).unwrap().content, "old\n");
    let old = ws.with_file_name("ws-old");
    std::fs::rename(&ws, &old).unwrap();
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "new\n").unwrap();
    // The root opened before still is the renamed folder (a descriptor follows its directory):
    // that is why the service opens one per call.
    assert_eq!(before.read("a.txt", None, None).unwrap().content, "old\n");
    let now = Root::open_bound(&ws).unwrap();
    assert_eq!((now.path(), now.read("a.txt", None, None).unwrap().content.as_str()), (ws.as_path(), "new\n"));
}

#[test]
fn a_folder_gone_or_replaced_by_a_symlink_or_a_file_is_refused_naming_the_change() {
    let (dir, ws) = registered();
    let old = ws.with_file_name("ws-old");
    std::fs::rename(&ws, &old).unwrap();
    let gone = Root::open_bound(&ws).unwrap_err();
    assert!(matches!(&gone, Error::RootGone { root } if root == &ws), "{gone:?}");
    assert_eq!(gone.code(), ErrorCode::WorkspaceNotFound);
    assert!(gone.to_string().contains("gone") && gone.to_string().contains(&ws.display().to_string()), "{gone}");

    // A symlink at the path to the renamed folder (or anywhere else) is never followed.
    std::os::unix::fs::symlink(&old, &ws).unwrap();
    let linked = Root::open_bound(&ws).unwrap_err();
    assert!(matches!(&linked, Error::RootRedirected { now: Some(n), .. } if n == &old), "{linked:?}");
    assert_eq!(linked.code(), ErrorCode::SymlinkRejected);
    assert!(linked.to_string().contains("symlink") && linked.to_string().contains(&old.display().to_string()), "{linked}");

    // A symlink on the way: the registered folder lies beneath a parent that is now a link.
    let parent = std::fs::canonicalize(dir.path()).unwrap().join("p");
    std::fs::create_dir_all(parent.join("ws")).unwrap();
    let under = parent.join("ws");
    Root::open_bound(&under).unwrap();
    std::fs::rename(&parent, parent.with_file_name("p-old")).unwrap();
    std::os::unix::fs::symlink(parent.with_file_name("p-old"), &parent).unwrap();
    assert!(matches!(Root::open_bound(&under), Err(Error::RootRedirected { .. })));

    // A file in the folder's place.
    std::fs::remove_file(&ws).unwrap();
    std::fs::write(&ws, "not a folder").unwrap();
    assert_eq!(Root::open_bound(&ws).unwrap_err().code(), ErrorCode::PathNotDirectory);
}
