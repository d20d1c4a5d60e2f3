//! Failure class: `verify` racing a writer. `verify` reported a torn tail
//! in 4 of 41 runs while 3 MB commits were being written: it read the log's length while a
//! commit was half appended and took the half for a torn write.
//!
//! Guarantee: `verify` checks the log up to what was committed when it started. Bytes past
//! the last complete commit that grow (or change) while it runs are a commit in progress,
//! reported as `in_progress_bytes`, not as a torn tail; the report stays clean.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::*;
use ctxlog_ledger::{Ledger, Options};

#[test]
fn verify_during_large_commits_reports_no_torn_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let (mut ledger, _) = Ledger::open(&dir, &Options::default()).unwrap();
    ledger.commit(&turn(0)).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let done = done.clone();
        std::thread::spawn(move || {
            let big = "x".repeat(1_500_000);
            for i in 0..12 {
                ledger
                    .commit(&commit(vec![user(&format!("{i}{big}")), assistant(&big)]))
                    .unwrap();
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let mut runs = 0;
    let mut in_progress = 0;
    while !done.load(Ordering::SeqCst) {
        let report = ctxlog_ledger::verify(&dir).unwrap();
        assert_eq!(
            report.torn_tail_bytes, 0,
            "run {runs}: a commit in progress reported as torn: {:?}",
            report.torn_tail_reason
        );
        in_progress += u64::from(report.in_progress_bytes > 0);
        runs += 1;
    }
    writer.join().unwrap();
    assert!(runs > 0);
    eprintln!("{runs} verify runs, {in_progress} saw a commit in progress");
    assert!(ctxlog_ledger::verify(&dir).unwrap().is_clean());
}

/// Deterministically: a half-appended commit while the writer is open (it holds the lock, and
/// its open cut any torn tail) is a commit in progress; the same bytes with no writer open
/// are a torn tail that the next open cuts.
#[test]
fn an_incomplete_tail_is_in_progress_while_a_writer_holds_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    ledger.commit(&turn(1)).unwrap();
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(tmp.path().join("ledger.log"))
        .unwrap();
    std::io::Write::write_all(&mut log, b"ctxR half of a record").unwrap();
    drop(log);
    let report = ctxlog_ledger::verify(tmp.path()).unwrap();
    assert_eq!((report.torn_tail_bytes, report.in_progress_bytes), (0, 21));
    assert!(report.is_clean(), "{report:?}");
    drop(ledger);
    let report = ctxlog_ledger::verify(tmp.path()).unwrap();
    assert_eq!((report.torn_tail_bytes, report.in_progress_bytes), (21, 0));
}
