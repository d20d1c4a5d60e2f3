#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Failure class: a recall cache whose rows were altered on disk (docs/design.md#r2-disposable,
//! docs/design.md#9-bad-input-and-faults). SQLite has no checksums of its own, so a page whose text
//! was overwritten in place, or a flipped bit in its provenance, reads back as a valid row. Every
//! page row carries a CRC32C of its text and provenance (seq, page, pages, kind, tool, status,
//! character range, time), checked on every read of a hit, an auto-include candidate or a tool
//! result: a mismatch is `Error::Damaged` (explicit recall names `ctxlog reindex`; auto-include
//! falls back to no pages), never altered text served as if it were the ledger's. An index of the
//! previous schema version (no checksums) is rebuilt on open.

mod common;

use std::path::Path;

use common::*;
use ctxlog_recall::{
    IndexConfig, MemorySource, RecallIndex, ResetReason, SCHEMA_VERSION, SearchOptions,
};

const SECRET: &str = "the vault combination is alpha bravo charlie";

fn build(path: &Path) -> MemorySource {
    let src = MemorySource {
        ledger_id: "L".into(),
        events: vec![
            user(1, "what is the vault combination?"),
            note(2, SECRET),
            assistant(3, "noted, the orchard gate stays locked"),
            user(4, "thanks"),
        ],
        ..MemorySource::default()
    };
    let mut index = RecallIndex::open(path, "L").unwrap();
    index.catch_up(&src).unwrap();
    src
}

/// Replaces every occurrence of `from` in the file's bytes with `to` (same length).
fn overwrite_bytes(path: &Path, from: &[u8], to: &[u8]) -> usize {
    assert_eq!(from.len(), to.len());
    let mut bytes = std::fs::read(path).unwrap();
    let mut n = 0;
    let mut i = 0;
    while i + from.len() <= bytes.len() {
        if &bytes[i..i + from.len()] == from {
            bytes[i..i + from.len()].copy_from_slice(to);
            n += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    std::fs::write(path, bytes).unwrap();
    n
}

/// Search, candidates and the tool all refuse the altered index; repair brings the text back.
/// `altered_seq` is the seq the altered page now claims.
fn assert_refused_then_repaired(path: &Path, src: &MemorySource, altered_seq: u64) {
    let index = RecallIndex::open(path, "L").unwrap();
    let err = index
        .search("vault combination", &SearchOptions::default())
        .unwrap_err();
    assert!(err.is_damaged(), "{err}");
    assert!(err.to_string().contains("ctxlog reindex"), "{err}");
    assert!(!err.to_string().contains('\n'), "{err}");
    let err = index.candidates("vault combination", 100, 2).unwrap_err();
    assert!(err.is_damaged(), "{err}");
    let out = index.handle_tool_call(&serde_json::json!({"query": "vault combination"}));
    assert!(out.is_error);
    assert_eq!(out.json["error"]["code"], "index_damaged", "{}", out.json);
    let listing = index.search("", &SearchOptions::default()).unwrap_err();
    assert!(listing.is_damaged(), "{listing}");
    let paged = SearchOptions {
        seq: Some(altered_seq),
        ..SearchOptions::default()
    };
    assert!(index.search("", &paged).unwrap_err().is_damaged());
    drop(index);

    let mut index = RecallIndex::recreate(path, "L", IndexConfig::default()).unwrap();
    index.catch_up(src).unwrap();
    let r = index
        .search("vault combination", &SearchOptions::default())
        .unwrap();
    assert!(r.hits.iter().any(|h| h.text == SECRET), "{r:?}");
}

/// Regression: a page's text overwritten in recall.sqlite was returned by `recall` (and put
/// into request bodies by auto-include) as if the ledger said it.
#[test]
fn an_overwritten_page_text_is_damage_not_an_answer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recall.sqlite");
    let src = build(&path);
    let n = overwrite_bytes(&path, b"alpha bravo charlie", b"delta bravo charlie");
    assert!(n >= 1, "the page text is stored in the file");
    assert_refused_then_repaired(&path, &src, 2);
}

/// Regression: one flipped bit in a page's text was served as ledger text.
#[test]
fn a_flipped_bit_in_page_text_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recall.sqlite");
    let src = build(&path);
    // 'a' (0x61) with its lowest bit flipped is '`'.
    let n = overwrite_bytes(&path, b"alpha bravo", b"`lpha bravo");
    assert!(n >= 1);
    assert_refused_then_repaired(&path, &src, 2);
}

/// Provenance is covered too: a page claiming another character range or seq is damage.
#[test]
fn altered_provenance_is_damage() {
    for column in ["char_start = char_start + 1", "seq = 9", "kind = 'user'"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("recall.sqlite");
        let src = build(&path);
        let conn = rusqlite::Connection::open(&path).unwrap();
        let sql = format!("UPDATE pages SET {column} WHERE seq = 2");
        assert_eq!(conn.execute(&sql, []).unwrap(), 1);
        drop(conn);
        let index = RecallIndex::open(&path, "L").unwrap();
        let err = index
            .search("vault combination", &SearchOptions::default())
            .unwrap_err();
        assert!(err.is_damaged(), "{column}: {err}");
        drop(index);
        let altered_seq = if column.starts_with("seq") { 9 } else { 2 };
        assert_refused_then_repaired(&path, &src, altered_seq);
    }
}

/// An index of the schema before checksums is deleted and built anew on open, not served
/// without checks and not reported as damage.
#[test]
fn an_index_of_the_previous_schema_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recall.sqlite");
    let src = build(&path);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION - 1)
        .unwrap();
    drop(conn);
    let mut index = RecallIndex::open(&path, "L").unwrap();
    assert_eq!(
        index.reset_reason(),
        Some(&ResetReason::SchemaChanged {
            was: i64::from(SCHEMA_VERSION - 1)
        })
    );
    assert_eq!(index.indexed_through(), 0);
    let stats = index.catch_up(&src).unwrap();
    assert_eq!(stats.indexed_through, 4);
    let r = index
        .search("vault combination", &SearchOptions::default())
        .unwrap();
    assert!(r.hits.iter().any(|h| h.text == SECRET));
    index.verify().unwrap();
}

/// What no per-row checksum covers: FTS5's term data (and the context column). One bit of
/// every stored copy of a word is flipped in turn — in the page text, a neighbour's context
/// and the term data alike; `check_file` finds every one as damage and changes nothing, and
/// finds an intact file clean (`ctxlog verify` relies on it).
#[test]
fn check_file_finds_every_flip_inside_a_stored_word() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    build(&path);
    drop(RecallIndex::open(&path, "L").unwrap());
    let clean = std::fs::read(&path).unwrap();
    assert_eq!(RecallIndex::check_file(&path).unwrap(), 4);
    assert_eq!(std::fs::read(&path).unwrap(), clean, "check_file wrote");
    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    assert_eq!(
        RecallIndex::check_file(&empty).unwrap(),
        0,
        "a zero-byte file is empty"
    );
    let word = b"orchard";
    let at: Vec<usize> = clean
        .windows(word.len())
        .enumerate()
        .filter(|(_, w)| *w == word)
        .map(|(o, _)| o + 1)
        .collect();
    // The page text, the previous and next pages' context, and the term itself.
    assert!(at.len() >= 3, "{} copies of the word", at.len());
    for offset in at {
        let mut bytes = clean.clone();
        bytes[offset] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let result = RecallIndex::check_file(&path);
        assert!(
            result.as_ref().is_err_and(|e| e.is_damaged()),
            "flip at byte {offset}: {result:?}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "check_file wrote");
    }
}
