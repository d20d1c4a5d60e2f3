#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Failure class: the index file's surroundings (docs/design.md#r2-disposable,
//! docs/design.md#r7-scope, docs/design.md#9-bad-input-and-faults). A store that is read-only (a
//! mounted backup, a shared directory) still answers recall when its index is current: catching up
//! writes only when something is new, and a file or directory that does not allow writing is opened
//! read-only. A symbolic link planted at the index path is never followed: opening refuses it
//! (`Error::Symlink`), SQLite is never asked to create the file, and repair removes the link, never
//! what it points at.

#![cfg(unix)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::*;
use ctxlog_recall::{Error, IndexConfig, MemorySource, RecallIndex, SearchOptions};

fn source() -> MemorySource {
    MemorySource {
        ledger_id: "L".into(),
        events: vec![
            note(1, "the lighthouse keeper logs the tide"),
            note(2, "the tide table moved to the shed"),
        ],
        ..MemorySource::default()
    }
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Whether permissions bind this process (they do not for root).
fn permissions_apply(dir: &Path) -> bool {
    let probe = dir.join("probe");
    std::fs::create_dir(&probe).unwrap();
    set_mode(&probe, 0o555);
    let applies = std::fs::write(probe.join("x"), b"x").is_err();
    set_mode(&probe, 0o755);
    applies
}

fn assert_answers(index: &mut RecallIndex, src: &MemorySource) {
    let stats = index.catch_up(src).unwrap();
    assert_eq!((stats.events_indexed, stats.indexed_through), (0, 2));
    let r = index.search("tide", &SearchOptions::default()).unwrap();
    let mut seqs: Vec<u64> = r.hits.iter().map(|h| h.seq).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, [1, 2]);
    let out = index.handle_tool_call(&serde_json::json!({"query": "lighthouse"}));
    assert!(!out.is_error, "{}", out.json);
}

/// Regression: recall on a read-only store failed ("attempt to write a readonly database")
/// even though its index was current: catching up always opened a write transaction.
#[test]
fn a_current_index_in_a_read_only_directory_answers() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("conv");
    std::fs::create_dir(&store).unwrap();
    let path = store.join("recall.sqlite");
    let src = source();
    RecallIndex::open(&path, "L")
        .unwrap()
        .catch_up(&src)
        .unwrap();
    set_mode(&path, 0o444);
    set_mode(&store, 0o555);
    let result = std::panic::catch_unwind(|| {
        let mut index = RecallIndex::open(&path, "L").unwrap();
        assert!(index.is_read_only());
        assert_answers(&mut index, &src);
    });
    set_mode(&store, 0o755);
    set_mode(&path, 0o644);
    result.unwrap();
}

/// The same with the index opened read-only explicitly (`SQLITE_OPEN_READ_ONLY`), which binds
/// root too: a current index answers; one with something new fails with a one-line error and
/// stays as it was.
#[test]
fn a_current_index_opened_read_only_answers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recall.sqlite");
    let mut src = source();
    RecallIndex::open(&path, "L")
        .unwrap()
        .catch_up(&src)
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    let mut index = RecallIndex::open_read_only(&path, "L").unwrap();
    assert!(index.is_read_only());
    assert_answers(&mut index, &src);
    src.events.push(note(3, "new tide"));
    let err = index.catch_up(&src).unwrap_err();
    assert!(!err.to_string().contains('\n'), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    if permissions_apply(dir.path()) {
        return;
    }
    // As root, an immutable file (when the file system supports it) is what read-only means.
    let immutable = std::process::Command::new("chattr")
        .arg("+i")
        .arg(&path)
        .status()
        .is_ok_and(|s| s.success());
    if immutable {
        src.events.pop();
        let opened = RecallIndex::open(&path, "L");
        let result = opened.map(|mut index| {
            let read_only = index.is_read_only();
            let stats = index.catch_up(&src).map(|s| s.indexed_through);
            let hits = index
                .search("tide", &SearchOptions::default())
                .map(|r| r.hits.len());
            (read_only, stats, hits)
        });
        std::process::Command::new("chattr")
            .arg("-i")
            .arg(&path)
            .status()
            .unwrap();
        let (read_only, stats, hits) = result.unwrap();
        assert!(read_only);
        assert_eq!(stats.unwrap(), 2);
        assert_eq!(hits.unwrap(), 2);
    }
}

/// Regression: a symbolic link planted at recall.sqlite was followed: opening created (or
/// wrote) the file it points at, outside the conversation.
#[test]
fn a_symlink_at_the_index_path_is_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let path = dir.path().join("recall.sqlite");
    let src = source();

    // A dangling link: opening must not create its target.
    let target = outside.path().join("planted.sqlite");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let err = RecallIndex::open(&path, "L").unwrap_err();
    assert!(matches!(err, Error::Symlink { .. }), "{err}");
    assert!(!err.to_string().contains('\n'));
    assert!(!target.exists(), "the link's target was created");

    // A link to an existing file: it is neither read as an index nor written.
    std::fs::write(&target, b"precious bytes").unwrap();
    assert!(matches!(
        RecallIndex::open(&path, "L").unwrap_err(),
        Error::Symlink { .. }
    ));
    assert!(matches!(
        RecallIndex::open_read_only(&path, "L").unwrap_err(),
        Error::Symlink { .. }
    ));
    assert_eq!(std::fs::read(&target).unwrap(), b"precious bytes");

    // Repair removes the link (not its target) and builds a real file.
    let mut index = RecallIndex::recreate(&path, "L", IndexConfig::default()).unwrap();
    index.catch_up(&src).unwrap();
    assert!(
        !std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"precious bytes");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
}

/// A link planted under an open handle (the file deleted and replaced by a link) is refused
/// when the handle next writes, not followed.
#[test]
fn a_symlink_planted_under_an_open_handle_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let path = dir.path().join("recall.sqlite");
    let mut src = source();
    let mut index = RecallIndex::open(&path, "L").unwrap();
    index.catch_up(&src).unwrap();
    RecallIndex::delete_files(&path).unwrap();
    let target = outside.path().join("planted.sqlite");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    src.events.push(note(3, "more tide"));
    let err = index.catch_up(&src).unwrap_err();
    assert!(matches!(err, Error::Symlink { .. }), "{err}");
    assert!(!target.exists());
}
