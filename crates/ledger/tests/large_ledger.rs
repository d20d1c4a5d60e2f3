//! Failure class: a large ledger that is slow to open (docs/design.md#l7-bounded-memory: a 1 GiB
//! ledger must open and project its tail in milliseconds).
//!
//! This is a measurement, not a timed assertion: it builds a ledger of `CTXLOG_LARGE_MB`
//! megabytes (default 300) on disk and prints how long opening it (writer and reader) and
//! reading its last 3 turns take. Run it on purpose:
//! `CTXLOG_LARGE_MB=1024 cargo test --release -p ctxlog-ledger --test large_ledger -- --ignored --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Instant;

use common::*;
use ctxlog_ledger::{Ledger, LedgerRead, Options, Reader, SyncMode};

#[test]
#[ignore]
fn open_and_read_the_tail_of_a_large_ledger() {
    let mb: u64 = std::env::var("CTXLOG_LARGE_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut opts = Options::default();
    opts.sync(SyncMode::Never);
    let filler = "f".repeat(3_800);
    let t = Instant::now();
    let (mut ledger, _) = Ledger::open(tmp.path(), &opts).unwrap();
    let mut i = 0u64;
    while std::fs::metadata(tmp.path().join("ledger.log"))
        .unwrap()
        .len()
        < mb << 20
    {
        for _ in 0..1_000 {
            let id = format!("c{i}");
            ledger
                .commit(&commit(vec![
                    user(&format!("q{i}")),
                    call(&id),
                    result(&id, &filler),
                    assistant("ok"),
                ]))
                .unwrap();
            i += 1;
        }
    }
    let events = ledger.last_seq();
    drop(ledger);
    let size = std::fs::metadata(tmp.path().join("ledger.log"))
        .unwrap()
        .len();
    eprintln!(
        "built {size} bytes, {events} events, {i} turns in {:?}",
        t.elapsed()
    );

    // Three rounds: the first runs while the kernel is still writing the fresh log back.
    for round in 1..=3 {
        let t = Instant::now();
        let (ledger, report) = Ledger::open(tmp.path(), &Options::default()).unwrap();
        let open_writer = t.elapsed();
        let t = Instant::now();
        let tail = ledger.last_turns(3).unwrap();
        let tail_writer = t.elapsed();
        assert!(report.is_clean() && tail.len() == 12);
        drop(ledger);
        let t = Instant::now();
        let reader = Reader::open(tmp.path()).unwrap();
        let open_reader = t.elapsed();
        let t = Instant::now();
        let tail = reader.last_turns(3).unwrap();
        let tail_reader = t.elapsed();
        assert_eq!(tail.len(), 12);
        if round == 1 {
            eprintln!(
                "| round | ledger bytes | events | writer open | writer last 3 turns | reader open | reader last 3 turns |"
            );
            eprintln!("|---|---|---|---|---|---|---|");
        }
        eprintln!(
            "| {round} | {size} | {events} | {open_writer:?} | {tail_writer:?} | {open_reader:?} | {tail_reader:?} |"
        );
    }
}
