#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Failure class: symbolic links planted at the index's side files (the symlink and path catalogue
//! in `docs/reliability.md`). SQLite opens the index itself with `SQLITE_OPEN_NOFOLLOW`, but it
//! names its rollback journal after the index (`recall.sqlite-journal`) and creates it with
//! `O_CREAT` alone; the index's temporary (`recall.sqlite.tmp-<pid>-<n>`) is created with `O_EXCL`.
//! A link planted at either must never make a write land outside the directory.

#![cfg(unix)]

mod common;

use std::path::Path;

use common::*;
use ctxlog_recall::{MemorySource, RecallIndex, SearchOptions};

fn source(n: u64) -> MemorySource {
    MemorySource {
        ledger_id: "L".into(),
        events: (1..=n)
            .map(|seq| {
                note(
                    seq,
                    &format!("the lighthouse keeper logs tide number {seq}"),
                )
            })
            .collect(),
        ..MemorySource::default()
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A dangling link at the journal's name: the next write transaction must not create (and
/// fill with page images) the file it points at.
#[test]
fn a_symlink_at_the_journal_is_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let path = dir.path().join("recall.sqlite");
    let mut index = RecallIndex::open(&path, "L").unwrap();
    index.catch_up(&source(2)).unwrap();

    let target = outside.path().join("planted-journal");
    std::os::unix::fs::symlink(&target, dir.path().join("recall.sqlite-journal")).unwrap();
    let result = index.catch_up(&source(40));
    assert!(
        !target.exists(),
        "the journal was written through the link ({result:?}): {:?}",
        std::fs::read(&target).map(|b| b.len())
    );
    match &result {
        // The write went through SQLite's journal (a real write transaction): the new
        // pages are searchable.
        Ok(_) => {
            let hits = index.search(
                "tide",
                &SearchOptions {
                    limit: 50,
                    ..Default::default()
                },
            );
            assert!(hits.unwrap().hits.len() > 2, "the catch-up wrote nothing");
        }
        Err(e) => assert!(!e.to_string().contains('\n'), "{e}"),
    }
    eprintln!("catch-up with a planted journal link: {result:?}");
    drop(index);
    // However the write went, a fresh open answers from ledger text or says the index is
    // damaged; the file outside stays absent.
    if let Ok(index) = RecallIndex::open(&path, "L") {
        let _ = index.search("tide", &SearchOptions::default());
    }
    assert!(!target.exists());
}

/// A link to an existing file at the journal's name is not taken for a hot journal to roll
/// back (reading it would be harmless; truncating or deleting its target would not).
#[test]
fn a_symlink_at_the_journal_leaves_its_target_alone() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let path = dir.path().join("recall.sqlite");
    let mut index = RecallIndex::open(&path, "L").unwrap();
    index.catch_up(&source(2)).unwrap();
    drop(index);

    let target = outside.path().join("precious");
    std::fs::write(&target, b"precious bytes, not a journal").unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("recall.sqlite-journal")).unwrap();
    if let Ok(mut index) = RecallIndex::open(&path, "L") {
        let _ = index.catch_up(&source(40));
        let _ = index.search("tide", &SearchOptions::default());
    }
    assert_eq!(
        std::fs::read(&target).unwrap(),
        b"precious bytes, not a journal"
    );
    assert_eq!(files_in(outside.path()), vec!["precious".to_string()]);
}
