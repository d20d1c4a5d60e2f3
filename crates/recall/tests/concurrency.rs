#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Failure class: several handles (processes, here threads with their own connections) using
//! one conversation's index at once (docs/design.md#r2-disposable,
//! docs/design.md#9-bad-input-and-faults). Creating the file, catching it up, searching it and
//! deleting it (erasure, `reindex`) all race. Creation builds the schema in a private temporary
//! file and links it into place, every write transaction takes the write lock at once under a busy
//! timeout, deletion takes SQLite's exclusive lock first, and a handle whose file was deleted or
//! replaced reopens the path. Every call succeeds with the same answer; an error, when there is
//! one, is one line.

mod common;

use std::path::Path;
use std::sync::{Arc, Barrier};

use common::*;
use ctxlog_recall::{Error, MemorySource, RecallIndex, SearchOptions};

const THREADS: usize = 6;
const ROUNDS: usize = 20;

fn source() -> MemorySource {
    MemorySource {
        ledger_id: "L".into(),
        events: (1..=60)
            .map(|i| {
                if i % 3 == 0 {
                    note(i, &format!("note {i}: the walnut grove needs water"))
                } else {
                    user(i, &format!("message {i} about lanterns and rope"))
                }
            })
            .collect(),
        ..MemorySource::default()
    }
}

/// Opens, catches up and searches; the seqs found for "walnut". A search that finds its file
/// deleted since the catch-up (`Error::Replaced`, documented as "catch up and retry") is
/// retried that way.
fn open_catch_up_search(path: &Path, src: &MemorySource) -> Result<Vec<u64>, String> {
    let mut index = RecallIndex::open(path, "L").map_err(one_line)?;
    let opts = SearchOptions {
        limit: 50,
        ..SearchOptions::default()
    };
    let mut attempts = 0;
    let r = loop {
        attempts += 1;
        index.catch_up(src).map_err(one_line)?;
        match index.search("walnut", &opts) {
            Err(Error::Replaced { .. }) if attempts < 10 => {}
            other => break other.map_err(one_line)?,
        }
    };
    let mut seqs: Vec<u64> = r.hits.iter().map(|h| h.seq).collect();
    seqs.sort_unstable();
    Ok(seqs)
}

fn one_line(e: Error) -> String {
    let message = e.to_string();
    assert!(
        !message.contains('\n'),
        "error message spans lines: {message}"
    );
    message
}

fn expected(src: &MemorySource) -> Vec<u64> {
    let dir = tempfile::tempdir().unwrap();
    open_catch_up_search(&dir.path().join("recall.sqlite"), src).unwrap()
}

/// Regression: handles opening a new index at once failed with "table meta already exists"
/// followed by twenty lines of schema SQL.
#[test]
fn handles_creating_and_catching_up_one_index_at_once_all_succeed() {
    let src = Arc::new(source());
    let want = expected(&src);
    assert!(want.len() >= 20, "{want:?}");
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        let path = Arc::new(dir.path().join("recall.sqlite"));
        let start = Arc::new(Barrier::new(THREADS));
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let (path, src, start) = (path.clone(), src.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    open_catch_up_search(&path, &src)
                })
            })
            .collect();
        for w in workers {
            let got = w.join().unwrap();
            assert_eq!(got.as_ref(), Ok(&want), "round {round}");
        }
        RecallIndex::open(&*path, "L").unwrap().verify().unwrap();
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort_unstable();
        assert_eq!(
            names,
            ["recall.sqlite"],
            "no temporary or lock files are left"
        );
    }
}

/// Regression: searching while another process deleted the index (erasure) failed with "disk
/// I/O error" or "database is locked". Readers racing `delete_files` now always answer.
#[test]
fn readers_racing_delete_files_all_succeed() {
    let src = Arc::new(source());
    let want = expected(&src);
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        let path = Arc::new(dir.path().join("recall.sqlite"));
        open_catch_up_search(&path, &src).unwrap();
        let start = Arc::new(Barrier::new(THREADS));
        let readers: Vec<_> = (0..THREADS - 1)
            .map(|_| {
                let (path, src, start) = (path.clone(), src.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    (0..3)
                        .map(|_| open_catch_up_search(&path, &src))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let deleter = {
            let (path, start) = (path.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for _ in 0..3 {
                    RecallIndex::delete_files(&*path).map_err(one_line)?;
                    std::thread::yield_now();
                }
                Ok::<(), String>(())
            })
        };
        for r in readers {
            for got in r.join().unwrap() {
                assert_eq!(got.as_ref(), Ok(&want), "round {round}");
            }
        }
        deleter.join().unwrap().unwrap();
    }
}

/// A handle kept open across a deletion reopens the new file before it writes: what it
/// indexes lands in the file at the path, not in the deleted one.
#[test]
fn a_handle_open_across_a_deletion_writes_to_the_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recall.sqlite");
    let mut src = source();
    let mut index = RecallIndex::open(&path, "L").unwrap();
    index.catch_up(&src).unwrap();
    RecallIndex::delete_files(&path).unwrap();
    assert!(!path.exists());
    src.events.push(note(61, "the walnut harvest is in"));
    let stats = index.catch_up(&src).unwrap();
    assert_eq!(stats.indexed_through, 61);
    assert!(path.exists());
    let fresh = RecallIndex::open(&path, "L").unwrap();
    assert_eq!(fresh.indexed_through(), 61);
    let r = fresh.search("harvest", &SearchOptions::default()).unwrap();
    assert_eq!(r.hits[0].seq, 61);
}
