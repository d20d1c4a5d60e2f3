//! Failure class: a batch of commits (group commit) where some commits are refused, ids
//! repeat or conflict within the batch, or the batch's write or sync fails, or the thread
//! writing it dies.
//!
//! Guarantee (durable append, recovery, one writer, failed I/O: docs/ledger-format.md): a batch is one append and one sync of the log; each commit of
//! it is checked as a single commit would be, against the conversation as the batch's earlier
//! commits leave it, and gets its own receipt, seqs contiguous in batch order; a refused one
//! gets its own error and nothing of it is written, while its neighbours are; a repeated id
//! replays, a reused id with other content conflicts; a failed write or sync fails the whole
//! batch and leaves the log and the writer's state as before it (no commit of it
//! acknowledged); a thread that dies inside the batch's write leaves nothing of it for the
//! next open. This is the ledger half of the facade's group commit (`Store` queues the
//! commits of many threads and hands them to `Ledger::commit_batch`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use ctxlog_ledger::{
    Error, FaultPlan, FaultyStorage, Ledger, LedgerRead, MemStorage, NewCommit, Options, Storage,
};

fn with_id(id: &str, c: NewCommit) -> NewCommit {
    NewCommit {
        id: Some(id.into()),
        ..c
    }
}

fn texts(ledger: &Ledger) -> Vec<String> {
    ledger
        .events(1..=ledger.last_seq())
        .unwrap()
        .into_iter()
        .map(|e| format!("{:?}", e.body))
        .collect()
}

#[test]
fn a_refused_commit_fails_alone_and_its_neighbours_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    ledger.commit(&with_id("a", turn(0))).unwrap();
    let batch = [
        turn(1),
        commit(vec![]),                    // no events
        commit(vec![result("nope", "x")]), // a result without its call
        with_id("a", turn(9)),             // id reused with other content
        with_id("a", turn(0)),             // id repeated: replays
        with_id("b", commit(vec![user("q2"), call("c1")])),
        commit(vec![result("c1", "ok"), assistant("done")]), // closes the batch's own call
        with_id("b", commit(vec![user("q2"), call("c1")])),  // repeated within the batch
    ];
    let results = ledger.commit_batch(&batch).unwrap();
    let ok: Vec<Option<(u64, u64, bool)>> = results
        .iter()
        .map(|r| {
            r.as_ref()
                .ok()
                .map(|r| (r.first_seq, r.last_seq, r.replayed))
        })
        .collect();
    assert_eq!(
        ok,
        [
            Some((3, 4, false)),
            None,
            None,
            None,
            Some((1, 2, true)),
            Some((5, 6, false)),
            Some((7, 8, false)),
            Some((5, 6, true)),
        ]
    );
    assert!(matches!(results[1], Err(Error::InvalidCommit { .. })));
    assert!(matches!(results[2], Err(Error::InvalidCommit { .. })));
    assert!(matches!(results[3], Err(Error::Conflict { .. })));
    assert_eq!(ledger.last_seq(), 8);
    let before = texts(&ledger);
    drop(ledger);
    let (mut ledger, report) = Ledger::open(dir.path(), &Options::default()).unwrap();
    assert!(report.is_clean());
    assert_eq!(texts(&ledger), before, "the batch survives a reopen");
    assert_eq!(ledger.commit_seqs("b").unwrap(), Some((5, 6)));
    assert!(ctxlog_ledger::verify(dir.path()).unwrap().is_clean());
    // A batch of refusals only writes nothing.
    let log = std::fs::read(dir.path().join("ledger.log")).unwrap();
    let results = ledger.commit_batch(&[commit(vec![])]).unwrap();
    assert!(results[0].is_err());
    assert_eq!(std::fs::read(dir.path().join("ledger.log")).unwrap(), log);
}

#[test]
fn a_failed_batch_write_or_sync_acknowledges_nothing_and_changes_nothing() {
    for sync in [false, true] {
        let faulty = FaultyStorage::new(Arc::new(MemStorage::new()) as Arc<dyn Storage>);
        let s: Arc<dyn Storage> = Arc::new(faulty.clone());
        let (mut ledger, _) = Ledger::open_with(s.clone(), &Options::default()).unwrap();
        ledger.commit(&turn(0)).unwrap();
        let mut plan = FaultPlan {
            only_files: Some("ledger.log".into()),
            ..FaultPlan::default()
        };
        if sync {
            plan.fail_sync = Some(0);
        } else {
            plan.fail_write = Some(0);
        }
        faulty.set_plan(plan);
        let batch = [with_id("x", commit(vec![user("q"), call("c7")])), turn(2)];
        let err = ledger.commit_batch(&batch).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err:?}");
        assert_eq!(ledger.last_seq(), 2, "state rolled back");
        assert_eq!(ledger.user_seqs(), &[1]);
        assert_eq!(ledger.is_poisoned(), sync);
        faulty.set_plan(FaultPlan::default());
        if sync {
            assert!(matches!(ledger.commit(&turn(3)), Err(Error::Poisoned)));
            drop(ledger);
            let (reopened, _) = Ledger::open_with(s.clone(), &Options::default()).unwrap();
            ledger = reopened;
        }
        // Nothing of the batch is known: its id is free, its open call is not.
        assert_eq!(ledger.commit_seqs("x").unwrap(), None);
        let orphan = ledger.commit(&commit(vec![result("c7", "x")])).unwrap_err();
        assert!(matches!(orphan, Error::InvalidCommit { .. }), "{orphan:?}");
        let results = ledger.commit_batch(&batch).unwrap();
        assert_eq!(results[0].as_ref().unwrap().first_seq, 3);
        assert_eq!(results[1].as_ref().unwrap().last_seq, 6);
    }
}

fn log_storage() -> (FaultyStorage<Arc<dyn Storage>>, Arc<dyn Storage>) {
    let faulty = FaultyStorage::new(Arc::new(MemStorage::new()) as Arc<dyn Storage>);
    let s: Arc<dyn Storage> = Arc::new(faulty.clone());
    (faulty, s)
}

#[test]
fn a_batch_is_one_append_and_one_sync_of_the_log() {
    let (faulty, s) = log_storage();
    let (mut ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
    ledger.commit(&turn(0)).unwrap();
    faulty.set_plan(FaultPlan {
        only_files: Some("ledger.log".into()),
        ..FaultPlan::default()
    });
    let mut batch: Vec<NewCommit> = (1..=24)
        .map(|i| with_id(&format!("b{i}"), turn(i)))
        .collect();
    batch.push(commit(vec![])); // refused: costs no write of its own
    let results = ledger.commit_batch(&batch).unwrap();
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 24);
    let plan = faulty.plan();
    assert_eq!((plan.writes, plan.syncs), (1, 1), "{plan:?}");
    assert_eq!(ledger.last_seq(), 50);
}

/// Eight batches of 25, as eight threads of 25 commits each would queue them: every receipt
/// is its own commit's, in batch order, distinct and contiguous, and stays so after reopen.
#[test]
fn each_commit_of_a_batch_gets_its_own_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    let mut receipts: Vec<(u64, u64, String)> = Vec::new();
    for b in 0..8u64 {
        let ids: Vec<String> = (0..25u64).map(|t| format!("t{t}-{b}")).collect();
        let batch: Vec<NewCommit> = ids
            .iter()
            .zip(0..)
            .map(|(id, t)| with_id(id, turn(t * 100 + b)))
            .collect();
        let results = ledger.commit_batch(&batch).unwrap();
        for (id, r) in ids.into_iter().zip(results) {
            let r = r.unwrap();
            assert!(!r.replayed);
            receipts.push((r.first_seq, r.last_seq, id));
        }
    }
    let seqs: Vec<(u64, u64)> = receipts.iter().map(|r| (r.0, r.1)).collect();
    let want: Vec<(u64, u64)> = (0..200).map(|i| (2 * i + 1, 2 * i + 2)).collect();
    assert_eq!(
        seqs, want,
        "every receipt distinct, seqs contiguous in batch order"
    );
    for (first, last, id) in &receipts {
        assert_eq!(ledger.commit_seqs(id).unwrap(), Some((*first, *last)));
    }
    drop(ledger);
    let (mut ledger, report) = Ledger::open(dir.path(), &Options::default()).unwrap();
    assert!(report.is_clean());
    assert_eq!(ledger.last_seq(), 400);
    for (first, last, id) in &receipts {
        assert_eq!(ledger.commit_seqs(id).unwrap(), Some((*first, *last)));
    }
    assert!(ctxlog_ledger::verify(dir.path()).unwrap().is_clean());
}

/// A thread that dies inside a batch's write (the facade then drops the writer, as after a
/// crash) acknowledged nothing of it: the next open finds exactly the commits before it,
/// the batch's ids free and its open tool call unknown.
#[test]
fn a_thread_dying_inside_a_batch_leaves_nothing_of_it() {
    let (faulty, s) = log_storage();
    let (mut ledger, _) = Ledger::open_with(s.clone(), &Options::default()).unwrap();
    ledger.commit(&turn(0)).unwrap();
    faulty.set_plan(FaultPlan {
        only_files: Some("ledger.log".into()),
        panic_write: Some(0),
        ..FaultPlan::default()
    });
    let batch = [with_id("x", commit(vec![user("q"), call("c7")])), turn(2)];
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let mut held = ledger;
        held.commit_batch(&batch)
    }));
    assert!(died.is_err(), "the thread died inside the batch");
    assert_eq!(faulty.plan().fired, 1);
    faulty.set_plan(FaultPlan::default());
    let (mut ledger, report) = Ledger::open_with(s.clone(), &Options::default()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(ledger.last_seq(), 2, "only the commit before the death");
    assert_eq!(ledger.commit_seqs("x").unwrap(), None);
    let orphan = ledger.commit(&commit(vec![result("c7", "x")])).unwrap_err();
    assert!(matches!(orphan, Error::InvalidCommit { .. }), "{orphan:?}");
    assert!(ctxlog_ledger::verify_with(s).unwrap().is_clean());
}

/// A batch keeps each commit's original times, checked against the batch's
/// earlier commits: a time before the event before it is refused alone.
#[test]
fn a_timed_batch_keeps_each_commits_times_and_refuses_a_backwards_one_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    let t0 = 1_683_554_160_000;
    let results = ledger
        .commit_batch(&[
            turn(1).with_times(vec![Some(t0), Some(t0 + 1)]),
            turn(2).with_times(vec![Some(t0 - 5)]), // before the batch's previous commit
            turn(3).with_times(vec![Some(t0 + 10)]),
        ])
        .unwrap();
    assert_eq!(results[0].as_ref().unwrap().first_seq, 1);
    assert!(matches!(results[1], Err(Error::InvalidCommit { .. })));
    assert_eq!(results[2].as_ref().unwrap().first_seq, 3);
    let times: Vec<i64> = ledger
        .events(1..=ledger.last_seq())
        .unwrap()
        .iter()
        .map(|e| e.ts_ms)
        .collect();
    assert_eq!(times[..3], [t0, t0 + 1, t0 + 10]);
    assert!(
        times[3] >= t0 + 10,
        "an event without a time takes the clock, never earlier"
    );
}
