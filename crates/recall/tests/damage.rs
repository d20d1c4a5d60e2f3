#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Failure class: a damaged index file (docs/design.md#r2-disposable). A truncated file, garbage
//! bytes, a foreign SQLite database, another schema version, a dropped or garbled FTS5 shadow
//! table, a table redefined with other columns or a directory in the file's place is detected as
//! `Error::Damaged` when opening or searching — never a wrong answer, never a panic — and
//! `recreate` deletes and rebuilds it. A zero-byte file is an empty index.

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
    index.catch_up(&src).unwrap();
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
    index.catch_up(src).unwrap();
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

/// Regression: damage to the FTS5 shadow tables or a table redefined with other columns
/// surfaced as a generic `Error::Sqlite` ("vtable constructor failed", "no such table",
/// "invalid fts5 file format"), or — for a recreated `pages_fts` — as silently empty results.
#[test]
fn damaged_shadow_tables_and_redefined_tables_are_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        "DROP TABLE pages_fts_data",
        "DROP TABLE pages_fts_config",
        "DROP TABLE pages_fts_content",
        "DROP TABLE pages_fts_docsize",
        // Garbled blocks (`GARBLE`: the same bytes every run, so the case cannot pass or fail
        // by chance).
        "GARBLE id > 10",
        "GARBLE id = 10 LENGTH 40",
        "UPDATE pages_fts_config SET v = 99 WHERE k = 'version'",
        "DELETE FROM pages_fts_content",
        "DROP TABLE pages; CREATE TABLE pages(x)",
        "DROP TABLE pages_fts; CREATE VIRTUAL TABLE pages_fts USING fts5(body)",
        "DROP INDEX pages_seq_page",
        "DROP TABLE meta; CREATE TABLE meta(key, value)",
    ];
    for (i, sql) in cases.iter().enumerate() {
        let path = dir.path().join(format!("r{i}.sqlite"));
        let src = build(&path);
        let conn = rusqlite::Connection::open(&path).unwrap();
        match sql.strip_prefix("GARBLE ") {
            Some(rest) => garble(&conn, rest),
            None => conn.execute_batch(sql).unwrap(),
        }
        drop(conn);
        assert_damaged(&path);
        repair(&path, &src);
    }
}

/// Overwrites the FTS5 data blocks `WHERE` selects (`"WHERE [LENGTH n]"`) with bytes from a
/// fixed-seed generator (xorshift): each block's own length, or `n` bytes.
fn garble(conn: &rusqlite::Connection, spec: &str) {
    let (filter, len) = match spec.split_once(" LENGTH ") {
        Some((f, n)) => (f, Some(n.parse::<usize>().unwrap())),
        None => (spec, None),
    };
    let blocks: Vec<(i64, usize)> = conn
        .prepare(&format!(
            "SELECT id, length(block) FROM pages_fts_data WHERE {filter}"
        ))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as usize)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(!blocks.is_empty(), "no block matches {filter}");
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for (id, own) in blocks {
        let bytes: Vec<u8> = (0..len.unwrap_or(own))
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        conn.execute(
            "UPDATE pages_fts_data SET block = ?1 WHERE id = ?2",
            rusqlite::params![bytes, id],
        )
        .unwrap();
    }
}

/// A zero-byte file is an empty index (SQLite's view too); a directory in the file's place is
/// damage, and `recreate` replaces an empty directory (never one with content).
#[test]
fn a_zero_byte_file_and_a_directory_are_handled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zero.sqlite");
    std::fs::write(&path, b"").unwrap();
    let index = RecallIndex::open(&path, "L").unwrap();
    assert!(
        index
            .search("durian", &SearchOptions::default())
            .unwrap()
            .hits
            .is_empty()
    );
    index.verify().unwrap();
    drop(index);

    let path = dir.path().join("dir.sqlite");
    std::fs::create_dir(&path).unwrap();
    assert!(RecallIndex::open(&path, "L").unwrap_err().is_damaged());
    let src = MemorySource {
        ledger_id: "L".into(),
        events: vec![note(1, "durian")],
        ..MemorySource::default()
    };
    let mut index = RecallIndex::recreate(&path, "L", IndexConfig::default()).unwrap();
    index.catch_up(&src).unwrap();
    assert_eq!(
        index
            .search("durian", &SearchOptions::default())
            .unwrap()
            .hits
            .len(),
        1
    );
    drop(index);

    let full = dir.path().join("full.sqlite");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep.txt"), b"not ours").unwrap();
    assert!(RecallIndex::recreate(&full, "L", IndexConfig::default()).is_err());
    assert!(full.join("keep.txt").exists());
}

/// Regression: meta rows deleted under an open handle made `catch_up` fail with a generic SQLite
/// error ("query returned no rows") instead of naming the damage.
#[test]
fn meta_rows_lost_under_an_open_handle_are_damage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let src = build(&path);
    let mut index = RecallIndex::open(&path, "L").unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("DELETE FROM meta", []).unwrap();
    drop(conn);
    let err = index.catch_up(&src).unwrap_err();
    assert!(err.is_damaged(), "{err}");
    drop(index);
    repair(&path, &src);
}
