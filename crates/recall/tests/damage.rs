#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Failure class: a damaged index file (SPEC R2). A truncated file, garbage bytes, a foreign
//! SQLite database or another schema version is detected as `Error::Damaged` when opening or
//! searching — never a wrong answer, never a panic — and `recreate` deletes and rebuilds it.

mod common;

use std::path::Path;

use common::*;
use ctxlog_recall::{IndexConfig, MemorySource, RecallIndex, SearchOptions};

fn build(path: &Path) -> MemorySource {
    let src = MemorySource {
        ledger_id: "L".into(),
        events: (1..=400)
            .map(|i| {
                note(
                    i,
                    &format!(
                        "record {i} about the durian orchard and more words {}",
                        "pad ".repeat(40)
                    ),
                )
            })
            .collect(),
        ..MemorySource::default()
    };
    let mut index = RecallIndex::open(path, "L").unwrap();
    index.sync(&src).unwrap();
    src
}

/// Opening and then searching must report damage (either step may notice it).
fn assert_damaged(path: &Path) {
    match RecallIndex::open(path, "L") {
        Err(e) => assert!(e.is_damaged(), "open: {e}"),
        Ok(index) => {
            let r = index.search("durian", &SearchOptions::default());
            let v = index.verify();
            assert!(
                r.as_ref().err().is_some_and(|e| e.is_damaged())
                    || v.as_ref().err().is_some_and(|e| e.is_damaged()),
                "search {r:?}, verify {v:?}"
            );
        }
    }
}

fn repair(path: &Path, src: &MemorySource) {
    let mut index = RecallIndex::recreate(path, "L", IndexConfig::default()).unwrap();
    index.sync(src).unwrap();
    let r = index.search("durian", &SearchOptions::default()).unwrap();
    assert_eq!(r.hits.len(), 5);
    index.verify().unwrap();
}

#[test]
fn a_truncated_file_is_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let src = build(&path);
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    assert_damaged(&path);
    repair(&path, &src);
}

#[test]
fn garbage_bytes_are_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let src = build(&path);
    std::fs::write(
        &path,
        b"this is not a database at all, just garbage bytes".repeat(100),
    )
    .unwrap();
    assert_damaged(&path);
    repair(&path, &src);
}

#[test]
fn overwritten_pages_are_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let src = build(&path);
    let mut bytes = std::fs::read(&path).unwrap();
    let len = bytes.len();
    for b in &mut bytes[4096..len - 4096] {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();
    assert_damaged(&path);
    repair(&path, &src);
}

#[test]
fn another_schema_version_is_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let src = build(&path);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let err = RecallIndex::open(&path, "L").unwrap_err();
    assert!(err.is_damaged());
    assert!(err.to_string().contains("ctxlog reindex"), "{err}");
    repair(&path, &src);
}

#[test]
fn a_foreign_database_is_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        .unwrap();
    drop(conn);
    assert!(RecallIndex::open(&path, "L").unwrap_err().is_damaged());
}
