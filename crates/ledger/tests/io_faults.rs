//! Failure class: the disk fails a write or a sync (full disk, I/O error), or tears a write.
//!
//! Guarantee (docs/design.md#l8-failed-io): the commit returns the error; the log is truncated back
//! so its bytes are unchanged; the writer's in-memory state (seqs, turns, the open turn's tool
//! calls) is unchanged; after a failed write the writer keeps working; after a failed sync (of the
//! log, of an artifact or of the artifacts directory) it refuses every commit with `Poisoned` until
//! reopened, and the reopened ledger is consistent. A failed sidecar write does not fail the commit
//! (the sidecars are caches) and the next open catches up. Runs on disk and in memory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use ctxlog_ledger::{
    DirStorage, Error, FaultPlan, FaultyStorage, Ledger, LedgerRead, MemStorage, NewCommit,
    Options, Storage,
};

/// A faulty wrapper over a fresh directory and over fresh memory (the temp dir lives as long
/// as the returned guard).
fn backends() -> Vec<(FaultyStorage<Arc<dyn Storage>>, tempfile::TempDir)> {
    let tmp = tempfile::tempdir().unwrap();
    let disk: Arc<dyn Storage> = Arc::new(DirStorage::new(&tmp.path().join("c")));
    let memory: Arc<dyn Storage> = Arc::new(MemStorage::new());
    vec![
        (FaultyStorage::new(disk), tmp),
        (FaultyStorage::new(memory), tempfile::tempdir().unwrap()),
    ]
}

fn log_bytes(s: &dyn Storage) -> Vec<u8> {
    let f = s
        .open("ledger.log", ctxlog_ledger::storage::OpenMode::Read)
        .unwrap()
        .unwrap();
    let mut b = vec![0u8; f.len().unwrap() as usize];
    f.read_at(0, &mut b).unwrap();
    b
}

fn plan(f: impl FnOnce(&mut FaultPlan)) -> FaultPlan {
    let mut p = FaultPlan::default();
    f(&mut p);
    p
}

fn open(s: &Arc<dyn Storage>) -> Ledger {
    Ledger::open_with(s.clone(), &Options::default()).unwrap().0
}

/// A commit that opens a tool call, so a wrongly kept state would accept its result later.
fn calling() -> NewCommit {
    commit(vec![user("list files"), call("c9")])
}

#[test]
fn a_failed_or_torn_log_write_changes_nothing_and_the_writer_continues() {
    for tear in [None, Some(1usize), Some(45), Some(100)] {
        for (faulty, _keep) in backends() {
            let s: Arc<dyn Storage> = Arc::new(faulty.clone());
            let mut ledger = open(&s);
            ledger.commit(&turn(1)).unwrap();
            let log = log_bytes(s.as_ref());
            faulty.set_plan(plan(|p| {
                p.only_files = Some("ledger.log".into());
                match tear {
                    None => p.fail_write = Some(0),
                    Some(k) => p.tear_write = Some((0, k)),
                }
            }));
            let err = ledger.commit(&calling()).unwrap_err();
            assert!(matches!(err, Error::Io { .. }), "{err:?}");
            assert_eq!(faulty.plan().fired, 1);
            assert_eq!(ledger.last_seq(), 2);
            assert_eq!(ledger.user_seqs(), &[1]);
            assert_eq!(log_bytes(s.as_ref()), log, "log truncated back");
            assert!(!ledger.is_poisoned());
            // The failed commit's tool call did not enter the open turn.
            let orphan = ledger.commit(&commit(vec![result("c9", "x")])).unwrap_err();
            assert!(matches!(orphan, Error::InvalidCommit { .. }), "{orphan:?}");
            faulty.set_plan(FaultPlan::default());
            let r = ledger.commit(&calling()).unwrap();
            assert_eq!((r.first_seq, r.last_seq), (3, 4));
            drop(ledger);
            let ledger = open(&s);
            assert_eq!(ledger.last_seq(), 4);
        }
    }
}

#[test]
fn a_failed_log_sync_poisons_the_writer_until_reopened() {
    for (faulty, _keep) in backends() {
        let s: Arc<dyn Storage> = Arc::new(faulty.clone());
        let mut ledger = open(&s);
        ledger.commit(&turn(1)).unwrap();
        let log = log_bytes(s.as_ref());
        faulty.set_plan(plan(|p| {
            p.only_files = Some("ledger.log".into());
            p.fail_sync = Some(0);
        }));
        assert!(matches!(ledger.commit(&calling()), Err(Error::Io { .. })));
        assert!(ledger.is_poisoned());
        assert_eq!(ledger.last_seq(), 2);
        assert_eq!(
            log_bytes(s.as_ref()),
            log,
            "truncated back after the failed sync"
        );
        faulty.set_plan(FaultPlan::default());
        assert!(matches!(ledger.commit(&turn(2)), Err(Error::Poisoned)));
        assert!(matches!(ledger.put_artifact(b"x"), Err(Error::Poisoned)));
        assert_eq!(
            log_bytes(s.as_ref()),
            log,
            "a poisoned writer writes nothing"
        );
        drop(ledger);
        let mut ledger = open(&s);
        assert_eq!(ledger.last_seq(), 2);
        assert_eq!(ledger.commit(&turn(2)).unwrap().first_seq, 3);
    }
}

#[test]
fn a_failed_artifact_write_or_sync_leaves_the_log_alone() {
    // (sync?, which sync): artifact file sync is sync 0, the artifacts directory sync is 1.
    for (fail_sync, fail_write) in [(None, Some(0)), (Some(0), None), (Some(1), None)] {
        for (faulty, _keep) in backends() {
            let s: Arc<dyn Storage> = Arc::new(faulty.clone());
            let mut ledger = open(&s);
            ledger
                .commit(&commit(vec![user("build"), call("c1")]))
                .unwrap();
            let log = log_bytes(s.as_ref());
            faulty.set_plan(plan(|p| {
                p.only_files = Some("artifacts".into());
                p.fail_sync = fail_sync;
                p.fail_write = fail_write;
            }));
            let big = "y".repeat(100_000);
            let err = ledger
                .commit(&commit(vec![result("c1", &big)]))
                .unwrap_err();
            assert!(matches!(err, Error::Io { .. }), "{err:?}");
            assert_eq!(faulty.plan().fired, 1);
            assert_eq!(log_bytes(s.as_ref()), log);
            assert_eq!(ledger.last_seq(), 2);
            assert_eq!(ledger.is_poisoned(), fail_sync.is_some());
            faulty.set_plan(FaultPlan::default());
            if ledger.is_poisoned() {
                drop(ledger);
                ledger = open(&s);
            }
            let r = ledger.commit(&commit(vec![result("c1", &big)])).unwrap();
            let ev = ledger.event(r.first_seq).unwrap();
            let ctxlog_ledger::EventBody::ToolResult {
                artifact: Some(a), ..
            } = ev.body
            else {
                panic!()
            };
            assert_eq!(ledger.artifact(&a).unwrap(), big.as_bytes());
        }
    }
}

#[test]
fn a_failed_sidecar_write_does_not_fail_the_commit() {
    for (faulty, _keep) in backends() {
        let s: Arc<dyn Storage> = Arc::new(faulty.clone());
        let mut ledger = open(&s);
        faulty.set_plan(plan(|p| {
            p.only_files = Some(".idx".into());
            p.fail_write = Some(0);
        }));
        ledger.commit(&turn(1)).unwrap();
        ledger.commit(&turn(2)).unwrap();
        assert_eq!(faulty.plan().fired, 1);
        assert_eq!(ledger.user_seqs(), &[1, 3]);
        assert_eq!(ledger.event(3).unwrap().body, user("question 2"));
        drop(ledger);
        let report = ctxlog_ledger::verify_with(s.clone()).unwrap();
        assert!(report.sidecar_ok, "{report:?}");
        let ledger = open(&s);
        assert_eq!(ledger.user_seqs(), &[1, 3]);
    }
}

#[test]
fn a_failure_while_saving_a_torn_tail_leaves_the_log_uncut() {
    let m = MemStorage::new();
    {
        let (mut ledger, _) = Ledger::open_with(Arc::new(m.clone()), &Options::default()).unwrap();
        ledger.commit(&turn(1)).unwrap();
    }
    let mut log = m.file_bytes("ledger.log").unwrap();
    log.extend_from_slice(b"\x01\x02\x03 half a record");
    m.set_file_bytes("ledger.log", log.clone());
    let faulty = FaultyStorage::new(m.clone());
    faulty.set_plan(plan(|p| {
        p.only_files = Some("recovered".into());
        p.fail_write = Some(0);
    }));
    assert!(Ledger::open_with(Arc::new(faulty), &Options::default()).is_err());
    assert_eq!(m.file_bytes("ledger.log").unwrap(), log);
    let (ledger, report) = Ledger::open_with(Arc::new(m), &Options::default()).unwrap();
    assert_eq!(report.bytes_cut, 17);
    assert_eq!(ledger.last_seq(), 2);
}
