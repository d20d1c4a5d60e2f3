//! Failure class: event times that go backwards, or an import that loses its original times
//! (docs/design.md#l10-event-times).
//!
//! Guarantee: an explicit time per event is stored as given; one earlier than the event
//! before it (within the commit, or the conversation's last event) is refused and writes
//! nothing; events without a time take the clock, or the last event's time when the clock
//! is behind it, so stored times never decrease.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use ctxlog_ledger::{Ledger, LedgerRead, NewCommit, Options};

const FAR_FUTURE_MS: i64 = 4_102_444_800_000; // 2100-01-01

fn two(text: &str) -> NewCommit {
    NewCommit::new(vec![user(text), assistant("ok")])
}

#[test]
fn times_are_kept_and_never_go_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    ledger
        .commit(&two("old").with_times(vec![Some(1_000), Some(2_000)]))
        .unwrap();
    let before = snapshot_dir(dir.path());
    // Earlier than the last event: refused, nothing written.
    let err = ledger
        .commit(&two("older").with_times(vec![Some(1_999)]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("earlier than the conversation's last event"),
        "{err}"
    );
    // Earlier than the event before it in the same commit.
    let err = ledger
        .commit(&two("x").with_times(vec![Some(5_000), Some(4_999)]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("event 2") && err.contains("earlier than the event before it"),
        "{err}"
    );
    // More times than events.
    assert!(
        ledger
            .commit(&two("x").with_times(vec![Some(5_000), None, None]))
            .is_err()
    );
    assert_eq!(snapshot_dir(dir.path()), before);

    // An event without a time after a timed one takes the clock.
    ledger
        .commit(&two("mixed").with_times(vec![Some(3_000)]))
        .unwrap();
    let e = ledger.events(3..=4).unwrap();
    assert_eq!(e[0].ts_ms, 3_000);
    assert!(e[1].ts_ms > 1_600_000_000_000, "{}", e[1].ts_ms);

    // A time in the future: later live commits keep it (the clock is behind the last event).
    ledger
        .commit(&two("future").with_times(vec![Some(FAR_FUTURE_MS)]))
        .unwrap();
    ledger.commit(&two("live")).unwrap();
    let times: Vec<i64> = ledger
        .events(1..=ledger.last_seq())
        .unwrap()
        .iter()
        .map(|e| e.ts_ms)
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert_eq!(times[times.len() - 1], FAR_FUTURE_MS);

    // After reopening the last time is read back from the log.
    drop(ledger);
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    assert!(
        ledger
            .commit(&two("late").with_times(vec![Some(FAR_FUTURE_MS - 1)]))
            .is_err()
    );
    ledger.commit(&two("live again")).unwrap();
    assert_eq!(
        ledger
            .events(ledger.last_seq()..=ledger.last_seq())
            .unwrap()[0]
            .ts_ms,
        FAR_FUTURE_MS
    );
}
