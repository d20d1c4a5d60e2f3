//! Failure class: a right-to-erasure request for intact seqs of a conversation whose log holds
//! a damaged record (docs/ledger-format.md, "Erasure on a damaged log").
//!
//! Guarantee: the erasure works without repairing first; the damaged bytes are carried into
//! the rewritten log byte for byte (`verify` and salvage still name them, with the same
//! reason and seqs, moved only by what the rewrite moved), the writer and readers still open
//! in bounded time, and `repair` still salvages around them afterwards; the erased text is in
//! no file, and an artifact only the damaged bytes name is kept for the repair. An erasure
//! that reaches the damage (holds a damaged seq, or shares a commit with one) is refused,
//! naming `repair --accept-loss`, with every byte as it was. A crash at any write of the
//! erasure leaves the old log or the new one, and the next writer open works on either.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{assistant, call, commit, record_offsets, result, snapshot_dir, user};
use ctxlog_ledger::format::names;
use ctxlog_ledger::{
    DamagedRange, DirStorage, Error, EventKind, FaultPlan, FaultyStorage, Ledger, LedgerRead,
    MemStorage, Options, Reader, Salvaged, Storage, repair_with, salvage_with,
};

const SECRET: &str = "ZQX-ERASE-ME-4412";

fn options() -> Options {
    let mut o = Options::default();
    o.artifact_threshold(64);
    o
}

/// t1 (1-2) holds the secret; t2 (3-6) a tool result stored as an artifact; t3 (7-8);
/// t4 (9-12) another artifact; t5 (13-14).
fn build(storage: Arc<dyn Storage>) {
    let (mut l, _) = Ledger::open_with(storage, &options()).unwrap();
    let big = |tag: &str| format!("{tag} tool output line\n").repeat(20);
    let commits = [
        vec![user(&format!("my code is {SECRET}")), assistant("noted")],
        vec![
            user("q2"),
            call("c1"),
            result("c1", &big("first")),
            assistant("a2"),
        ],
        vec![user("q3"), assistant("a3")],
        vec![
            user("q4"),
            call("c2"),
            result("c2", &big("second")),
            assistant("a4"),
        ],
        vec![user("q5"), assistant("a5")],
    ];
    for (i, events) in commits.into_iter().enumerate() {
        l.commit(&commit(events).with_id(format!("t{}", i + 1)))
            .unwrap();
    }
}

/// Flips one byte inside the payload of `seq`'s record in the log image `log`.
fn flip(log: &mut [u8], seq: u64) {
    let (at, _) = record_offsets(log)
        .into_iter()
        .find(|(_, s)| *s == seq)
        .unwrap();
    log[at as usize + 45] ^= 0x20;
}

fn damaged_dir(seq: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    build(Arc::new(DirStorage::new(dir.path())));
    let path = dir.path().join("ledger.log");
    let mut log = std::fs::read(&path).unwrap();
    flip(&mut log, seq);
    std::fs::write(&path, log).unwrap();
    dir
}

/// The salvage of a conversation: its intact events `(seq, kind)` and its damaged ranges.
fn salvage(storage: Arc<dyn Storage>) -> (Vec<(u64, EventKind)>, Vec<DamagedRange>) {
    let mut events = Vec::new();
    let report = salvage_with(storage, &mut |item| {
        if let Salvaged::Event { event, .. } = item {
            events.push((event.seq, event.kind()));
        }
        Ok(())
    })
    .unwrap();
    (events, report.damaged)
}

fn files_with(dir: &Path, needle: &str) -> Vec<String> {
    snapshot_dir(dir)
        .into_iter()
        .filter(|(_, b)| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        .map(|(n, _)| n)
        .collect()
}

fn artifacts(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("artifacts"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn intact_seqs_on_both_sides_of_the_damage_are_erased_and_the_damage_is_carried_verbatim() {
    let dir = damaged_dir(7);
    let st = || -> Arc<dyn Storage> { Arc::new(DirStorage::new(dir.path())) };
    let old_log = std::fs::read(dir.path().join("ledger.log")).unwrap();
    let (_, before) = salvage(st());
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(before[0].seqs, Some((7, 7)));
    let old_bytes = &old_log[before[0].offset as usize..][..before[0].bytes as usize];

    let (mut l, _) = Ledger::open(dir.path(), &options()).unwrap();
    let report = l.erase(1..=2, "asked").unwrap();
    assert_eq!((report.from, report.to, report.events), (1, 2, 2));
    assert_eq!(files_with(dir.path(), SECRET), Vec::<String>::new());
    // The writer goes on in the same process, and reads around the damage as before.
    assert_eq!(l.events(3..=6).unwrap().len(), 4);
    assert!(matches!(l.events(7..=7), Err(Error::Corrupt { .. })));
    drop(l);

    let new_log = std::fs::read(dir.path().join("ledger.log")).unwrap();
    let (_, after) = salvage(st());
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(
        (after[0].seqs, &after[0].reason, after[0].bytes),
        (before[0].seqs, &before[0].reason, before[0].bytes)
    );
    let shift = new_log.len() as i64 - old_log.len() as i64;
    assert_eq!(after[0].offset as i64, before[0].offset as i64 + shift);
    assert_eq!(
        &new_log[after[0].offset as usize..][..after[0].bytes as usize],
        old_bytes,
        "the damaged bytes changed"
    );
    match ctxlog_ledger::verify(dir.path()) {
        Err(Error::Corrupt { offset, seq, .. }) => {
            assert_eq!((offset, seq), (after[0].offset, Some(7)))
        }
        other => panic!("verify must still name the damage: {other:?}"),
    }

    // A fresh writer and a reader open (bounded: the sidecars were rebuilt around the damage),
    // and an erasure after the damage works too, deleting its artifact and no other.
    let r = Reader::open(dir.path()).unwrap();
    assert_eq!(r.last_seq(), 14);
    assert_eq!(r.events(9..=14).unwrap().len(), 6);
    drop(r);
    let kept_artifacts = artifacts(dir.path());
    assert_eq!(kept_artifacts.len(), 2);
    let (mut l, _) = Ledger::open(dir.path(), &options()).unwrap();
    l.erase(9..=12, "asked").unwrap();
    assert_eq!(artifacts(dir.path()).len(), 1);
    let t5 = commit(vec![user("q5"), assistant("a5")]).with_id("t5");
    assert!(
        l.commit(&t5).unwrap().replayed,
        "an intact commit's id still replays"
    );
    drop(l);

    // The repair still salvages around the damage: it loses seq 7 only (seq 8 keeps its
    // place), keeps both tombstones, and a replay of t3 is `lost`.
    let report = repair_with(st(), true, &options()).unwrap();
    assert_eq!(report.lost_seqs, 1, "{report:?}");
    assert_eq!((report.lost[0].from, report.lost[0].to), (7, 7));
    let v = ctxlog_ledger::verify(dir.path()).unwrap();
    assert!(v.is_clean(), "{v:?}");
    assert_eq!((v.erased, v.lost, v.last_seq), (6, 1, 14));
    let (mut l, _) = Ledger::open(dir.path(), &options()).unwrap();
    let t3 = commit(vec![user("q3"), assistant("a3")]).with_id("t3");
    assert!(matches!(l.commit(&t3), Err(Error::Lost { .. })));
}

#[test]
fn an_erasure_that_reaches_the_damage_is_refused_and_changes_nothing() {
    let dir = damaged_dir(7);
    let (mut l, _) = Ledger::open(dir.path(), &options()).unwrap();
    let before = snapshot_dir(dir.path());
    // 7 is damaged; 8 shares its commit; 3-8 and 5-14 hold it.
    for range in [7..=7, 8..=8, 3..=8, 5..=14] {
        let err = l.erase(range.clone(), "asked").unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, Error::Corrupt { seq: Some(7), .. })
                && text.contains("could not be proven erased"),
            "{range:?}: {text}"
        );
        assert_eq!(
            snapshot_dir(dir.path()),
            before,
            "{range:?} wrote something"
        );
        assert!(!l.is_poisoned());
    }
    // Right next to the damage, on either side, is fine.
    l.erase(3..=6, "asked").unwrap();
    l.erase(9..=12, "asked").unwrap();
    assert_eq!(l.events(1..=2).unwrap().len(), 2);
}

#[test]
fn an_artifact_only_the_damaged_bytes_name_is_kept_for_the_repair() {
    // The tool result of t2 (seq 5) is damaged: its artifact is referenced by no intact
    // record, only named in the damaged bytes.
    let dir = damaged_dir(5);
    let named = artifacts(dir.path());
    let (mut l, _) = Ledger::open(dir.path(), &options()).unwrap();
    l.erase(1..=2, "asked").unwrap();
    drop(l);
    assert_eq!(artifacts(dir.path()), named, "an artifact was deleted");
    let report = repair_with(Arc::new(DirStorage::new(dir.path())), true, &options()).unwrap();
    assert_eq!(report.artifacts_saved_aside.len(), 1, "{report:?}");
    let aside = dir.path().join(format!(
        "recovered/artifact-{}",
        report.artifacts_saved_aside[0]
    ));
    assert!(aside.is_file());
    assert!(ctxlog_ledger::verify(dir.path()).unwrap().is_clean());
}

/// Damage in a record's header (its length or seq cannot be believed) is carried the same way:
/// the damaged range runs to the next intact record, whatever the header claimed.
#[test]
fn a_damaged_record_header_is_carried_too() {
    for at in [8usize, 16, 24, 32] {
        let dir = tempfile::tempdir().unwrap();
        build(Arc::new(DirStorage::new(dir.path())));
        let path = dir.path().join("ledger.log");
        let mut log = std::fs::read(&path).unwrap();
        let (offset, _) = record_offsets(&log)
            .into_iter()
            .find(|(_, s)| *s == 7)
            .unwrap();
        log[offset as usize + at] ^= 0x41;
        std::fs::write(&path, log).unwrap();
        let st = || -> Arc<dyn Storage> { Arc::new(DirStorage::new(dir.path())) };
        let (_, before) = salvage(st());
        assert_eq!(before.len(), 1, "header byte {at}: {before:?}");
        let (mut l, _) = Ledger::open(dir.path(), &options()).unwrap();
        l.erase(1..=2, "asked").unwrap();
        drop(l);
        let (events, after) = salvage(st());
        let seqs = |d: &[DamagedRange]| d.iter().map(|r| (r.seqs, r.bytes)).collect::<Vec<_>>();
        assert_eq!(seqs(&after), seqs(&before), "header byte {at}");
        assert_eq!(events.last().map(|e| e.0), Some(14), "header byte {at}");
        assert_eq!(files_with(dir.path(), SECRET), Vec::<String>::new());
        let (l, _) = Ledger::open(dir.path(), &options()).unwrap();
        assert_eq!(l.events(9..=14).unwrap().len(), 6, "header byte {at}");
    }
}

/// A damaged in-memory conversation that tracks durability (the flip is synced).
fn damaged_mem() -> MemStorage {
    let base = MemStorage::with_crash_tracking();
    build(Arc::new(base.clone()));
    let mut log = base.file_bytes("ledger.log").unwrap();
    flip(&mut log, 7);
    base.set_file_bytes("ledger.log", log);
    // The sidecars too: a power loss that took them would leave no bounded open on either
    // log (a damaged log cannot be indexed by a scan), whatever the erasure did.
    for name in names::LEDGER_FILES {
        let mut f = base
            .open(name, ctxlog_ledger::storage::OpenMode::Write)
            .unwrap()
            .unwrap();
        f.sync().unwrap();
    }
    base
}

fn mem_has(m: &MemStorage, needle: &str) -> bool {
    let mut files: Vec<String> = names::LEDGER_FILES.map(String::from).into();
    files.push(names::ERASE_PENDING.into());
    for dir in [names::ARTIFACTS, names::RECOVERED] {
        if let Ok(list) = m.list(dir) {
            files.extend(list.into_iter().map(|n| format!("{dir}/{n}")));
        }
    }
    files.iter().any(|n| {
        m.file_bytes(n)
            .is_some_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
    })
}

#[test]
fn a_power_loss_at_any_write_of_the_erasure_leaves_the_old_log_or_the_new_one() {
    let base = damaged_mem();
    let old = salvage(Arc::new(base.deep_clone()));
    let new = {
        let copy = base.deep_clone();
        let (mut l, _) = Ledger::open_with(Arc::new(copy.clone()), &options()).unwrap();
        l.erase(1..=2, "x").unwrap();
        drop(l);
        salvage(Arc::new(copy))
    };
    assert_ne!(old.0, new.0);
    let same = |a: &(Vec<(u64, EventKind)>, Vec<DamagedRange>),
                b: &(Vec<(u64, EventKind)>, Vec<DamagedRange>)| {
        let seqs = |d: &[DamagedRange]| d.iter().map(|r| r.seqs).collect::<Vec<_>>();
        a.0 == b.0 && seqs(&a.1) == seqs(&b.1)
    };
    let (mut saw_new, mut saw_stopped_after_rename) = (false, false);
    for k in 0..24u64 {
        for (fail_sync, keep) in [(false, 0usize), (false, 1), (false, 2), (true, 2)] {
            let copy = base.deep_clone();
            let faulty = FaultyStorage::new(copy.clone());
            let (mut l, _) = Ledger::open_with(Arc::new(faulty.clone()), &options()).unwrap();
            faulty.set_plan(FaultPlan {
                fail_write: (!fail_sync).then_some(k),
                fail_sync: fail_sync.then_some(k),
                ..FaultPlan::default()
            });
            let erased = l.erase(1..=2, "x");
            drop(l);
            let image = copy.crash_image(&mut |_, n| n * keep / 2);
            // The next writer open works on either log, finishing what the erasure left.
            let opened = Ledger::open_with(Arc::new(image.clone()), &options());
            let (l, _) = opened.unwrap_or_else(|e| panic!("k={k} keep={keep}: {e}"));
            assert_eq!(l.last_seq(), 14, "k={k} keep={keep}");
            drop(l);
            let after = salvage(Arc::new(image.clone()));
            let is_new = same(&after, &new);
            assert!(is_new || same(&after, &old), "k={k} keep={keep}: {after:?}");
            if is_new {
                saw_new = true;
                saw_stopped_after_rename |= erased.is_err();
                assert!(!mem_has(&image, SECRET), "k={k} keep={keep}: {erased:?}");
                assert!(!image.exists("erase.pending").unwrap());
            }
            let r = Reader::open_with(Arc::new(image)).unwrap();
            assert_eq!(r.events(9..=14).unwrap().len(), 6, "k={k} keep={keep}");
        }
    }
    assert!(saw_new, "the erasure completed in some round");
    assert!(
        saw_stopped_after_rename,
        "some failure hit after the rename"
    );
}
