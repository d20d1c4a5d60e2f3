//! Store-level operations ([`Storage::is_dir`], [`Storage::remove_all`], [`Storage::scoped`])
//! on every backend.

use std::sync::Arc;

use super::*;

fn write(st: &dyn Storage, name: &str, bytes: &[u8]) {
    let mut f = st.open(name, OpenMode::Create).unwrap().unwrap();
    f.write_at(0, bytes).unwrap();
}

fn read(st: &dyn Storage, name: &str) -> Option<Vec<u8>> {
    let f = st.open(name, OpenMode::Read).unwrap()?;
    let mut b = vec![0u8; f.len().unwrap() as usize];
    f.read_at(0, &mut b).unwrap();
    Some(b)
}

/// The same checks on any backend: a scoped storage writes under `dir/` of its parent,
/// `is_dir` sees it, `remove_all` removes the tree (and a missing one is fine).
fn scoped_tree_roundtrip(root: &dyn Storage) {
    let conv = root.scoped("conv");
    assert!(!root.is_dir("conv").unwrap());
    conv.create_dir("").unwrap();
    conv.create_dir("artifacts").unwrap();
    write(conv.as_ref(), "ledger.log", b"log");
    write(conv.as_ref(), "artifacts/a", b"art");
    assert!(root.is_dir("conv").unwrap());
    assert!(conv.is_dir("artifacts").unwrap());
    assert!(!conv.is_dir("ledger.log").unwrap());
    assert!(!conv.is_dir("missing").unwrap());
    assert_eq!(read(root, "conv/ledger.log").as_deref(), Some(&b"log"[..]));
    assert_eq!(read(root, "conv/artifacts/a").as_deref(), Some(&b"art"[..]));
    assert_eq!(root.list("").unwrap(), ["conv"]);
    assert_eq!(conv.list("artifacts").unwrap(), ["a"]);
    assert!(conv.location().ends_with("conv"));
    // A lock on the scoped directory does not block a lock on another one.
    let held = conv.try_lock(None).unwrap().expect("first lock");
    assert!(conv.try_lock(None).unwrap().is_none());
    let other = root.scoped("other");
    other.create_dir("").unwrap();
    assert!(other.try_lock(None).unwrap().is_some());
    root.remove_all("other").unwrap();
    drop(held);
    root.remove_all("conv").unwrap();
    assert!(!root.is_dir("conv").unwrap());
    assert!(!root.exists("conv/ledger.log").unwrap());
    assert!(!conv.exists("artifacts/a").unwrap());
    root.remove_all("conv").unwrap(); // missing is Ok
}

#[test]
fn scoped_tree_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let root = DirStorage::new(dir.path());
    scoped_tree_roundtrip(&root);
}

#[test]
fn scoped_tree_in_memory() {
    scoped_tree_roundtrip(&MemStorage::new());
}

#[test]
fn scoped_tree_through_faults() {
    scoped_tree_roundtrip(&FaultyStorage::new(MemStorage::new()));
}

#[test]
fn remove_all_on_disk_does_not_follow_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep"), b"keep").unwrap();
    let root = DirStorage::new(dir.path());
    root.create_dir("conv").unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("conv/link")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("alias")).unwrap();
    assert!(
        !root.is_dir("alias").unwrap(),
        "a symlink is not a directory"
    );
    root.remove_all("conv").unwrap();
    root.remove_all("alias").unwrap();
    assert!(!dir.path().join("conv").exists());
    assert!(std::fs::symlink_metadata(dir.path().join("alias")).is_err());
    assert_eq!(std::fs::read(outside.path().join("keep")).unwrap(), b"keep");
}

#[test]
fn memory_crash_images_cover_scoped_files() {
    let root = MemStorage::with_crash_tracking();
    let conv = root.scoped("conv");
    conv.create_dir("").unwrap();
    let mut f = conv.open("ledger.log", OpenMode::Create).unwrap().unwrap();
    f.write_at(0, b"synced").unwrap();
    f.sync().unwrap();
    f.write_at(6, b"-lost").unwrap();
    let image = root.crash_image(&mut |_, _| 0);
    assert_eq!(image.file_bytes("conv/ledger.log").unwrap(), b"synced");
    assert_eq!(root.file_bytes("conv/ledger.log").unwrap(), b"synced-lost");
}

#[test]
fn scoped_faulty_storage_shares_the_fault_plan() {
    let root = FaultyStorage::new(MemStorage::new());
    let conv = root.scoped("conv");
    conv.create_dir("").unwrap();
    root.set_plan(FaultPlan {
        fail_write: Some(1),
        ..FaultPlan::default()
    });
    let mut f = conv.open("ledger.log", OpenMode::Create).unwrap().unwrap();
    f.write_at(0, b"one").unwrap();
    assert!(f.write_at(3, b"two").is_err());
    let plan = root.plan();
    assert_eq!((plan.writes, plan.fired), (2, 1));
}

#[test]
fn arc_storage_delegates_the_store_operations() {
    let shared: Arc<dyn Storage> = Arc::new(MemStorage::new());
    scoped_tree_roundtrip(&shared);
}
