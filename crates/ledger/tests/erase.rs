//! Failure class: data that must be gone (docs/design.md#e1-erasure) — erased text surviving in the
//! log, a sidecar, an artifact or a recovered tail; seqs reused or left uncovered; a crash or an
//! I/O failure in the middle of the rewrite.
//!
//! Guarantee: after `Ledger::erase` no byte of any file in the directory holds the erased
//! text; seqs are preserved (the erased range is a tombstone plus covered placeholders that
//! readers skip); `verify` is clean, accepts a covered range and rejects an uncovered one; a
//! failure at any write or sync leaves either the old ledger or the new one, never a mix.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use ctxlog_ledger::format::{self, LogHeader};
use ctxlog_ledger::{
    Error, EventBody, EventKind, FaultPlan, FaultyStorage, Ledger, LedgerRead, MemStorage,
    NewCommit, Options, Reader, Storage, SystemMarker,
};

const SECRET: &str = "ZQX-SECRET-7781";

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn files_with(dir: &Path, needle: &str) -> Vec<String> {
    snapshot_dir(dir)
        .into_iter()
        .filter(|(_, bytes)| contains(bytes, needle.as_bytes()))
        .map(|(name, _)| name)
        .collect()
}

/// Turn 1 (1-2) plain; turn 2 (3-6) holds the secret, also in a large tool output that
/// becomes an artifact; turn 3 (7-8) plain.
fn build(ledger: &mut Ledger) {
    ledger.commit(&turn(1)).unwrap();
    let big = format!("{}{SECRET}{}", "x".repeat(20_000), "y".repeat(20_000));
    let secret_turn = NewCommit {
        id: Some("secret-turn".into()),
        events: vec![
            user(&format!("my code is {SECRET}")),
            call("c1"),
            result("c1", &big),
            assistant(&format!("noted {SECRET}")),
        ],
        ..Default::default()
    };
    ledger.commit(&secret_turn).unwrap();
    ledger.commit(&turn(3)).unwrap();
}

fn secret_turn() -> NewCommit {
    NewCommit {
        id: Some("secret-turn".into()),
        events: vec![
            user(&format!("my code is {SECRET}")),
            call("c1"),
            result(
                "c1",
                &format!("{}{SECRET}{}", "x".repeat(20_000), "y".repeat(20_000)),
            ),
            assistant(&format!("noted {SECRET}")),
        ],
        ..Default::default()
    }
}

#[test]
fn erased_text_is_in_no_file_and_seqs_are_preserved() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    build(&mut ledger);
    std::fs::create_dir_all(dir.path().join("recovered")).unwrap();
    std::fs::write(dir.path().join("recovered/tail-9-1.bin"), SECRET).unwrap();
    assert!(!files_with(dir.path(), SECRET).is_empty());
    let old_id = ledger.ledger_id().to_string();

    // Seq 5 alone is asked for: widened to the whole turn 3..=6.
    let report = ledger.erase(5..=5, "user asked").unwrap();
    assert_eq!((report.from, report.to), (3, 6));
    assert_eq!(report.requested, (5, 5));
    assert_eq!(report.events, 4);
    assert_eq!(report.artifacts_deleted, 1);
    assert_eq!(report.recovered_deleted, 1);
    assert_ne!(report.ledger_id, old_id);
    assert_eq!(ledger.ledger_id(), report.ledger_id);

    assert_eq!(files_with(dir.path(), SECRET), Vec::<String>::new());
    assert_eq!(ledger.last_seq(), 8);
    let events = ledger.events(1..=8).unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3, 7, 8], "placeholders 4..=6 are skipped");
    match &events[2].body {
        EventBody::System {
            marker: SystemMarker::Tombstone {
                from, to, reason, ..
            },
        } => assert_eq!((*from, *to, reason.as_str()), (3, 6, "user asked")),
        other => panic!("expected the tombstone, got {other:?}"),
    }
    assert!(ledger.event(5).is_err(), "an erased seq reads as absent");
    assert_eq!(ledger.user_seqs(), &[1, 7]);
    assert_eq!(ledger.kind(5), Some(EventKind::System));

    // The erased commit's id no longer replays: a retry writes it again, at new seqs.
    let again = ledger.commit(&secret_turn()).unwrap();
    assert!(!again.replayed);
    assert_eq!((again.first_seq, again.last_seq), (9, 12));
    ledger.commit(&turn(4)).unwrap();
    drop(ledger);

    let report = ctxlog_ledger::verify(dir.path()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.erased, 4);
    assert_eq!(report.last_seq, 14);

    // Reopen works (writer and reader) and sees the same.
    let (ledger, recovery) = Ledger::open(dir.path(), &Options::default()).unwrap();
    assert!(recovery.is_clean());
    assert_eq!(ledger.user_seqs(), &[1, 7, 9, 13]);
    let reader = Reader::open(dir.path()).unwrap();
    assert_eq!(reader.events(1..=14).unwrap().len(), 11);
}

#[test]
fn erasing_over_an_earlier_tombstone_keeps_it_and_erases_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    build(&mut ledger);
    ledger.erase(3..=3, "first").unwrap();
    // 4..=7 overlaps the tombstone 3..=6 and turn 3 (7..=8): 3..=8 is erased, turn 3 under
    // a tombstone of its own.
    let report = ledger.erase(4..=7, "second").unwrap();
    assert_eq!((report.from, report.to), (3, 8));
    assert_eq!(report.events, 2, "only turn 3's events still had content");
    assert_eq!(ledger.events(1..=8).unwrap().len(), 4);
    // The log ends with the tombstone: commits go on after it.
    let r = ledger.commit(&turn(9)).unwrap();
    assert_eq!(r.first_seq, 9);
    drop(ledger);
    assert!(ctxlog_ledger::verify(dir.path()).unwrap().is_clean());
}

#[test]
fn a_commit_cut_by_the_range_is_reframed() {
    // One commit holding the end of turn 1 and the whole of turn 2: erasing turn 2 cuts it.
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    ledger.commit(&commit(vec![user("a")])).unwrap();
    let mixed = NewCommit {
        id: Some("mixed".into()),
        events: vec![assistant("b"), user(SECRET), assistant("c")],
        ..Default::default()
    };
    ledger.commit(&mixed).unwrap();
    ledger
        .commit(&commit(vec![user("d"), assistant("e")]))
        .unwrap();
    let report = ledger.erase(3..=3, "cut").unwrap();
    assert_eq!((report.from, report.to), (3, 4));
    drop(ledger);
    assert!(ctxlog_ledger::verify(dir.path()).unwrap().is_clean());
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    assert_eq!(ledger.events(1..=6).unwrap().len(), 5);
    // The cut commit lost its id.
    assert_eq!(ledger.commit_seqs("mixed").unwrap(), None);
    assert_eq!(files_with(dir.path(), SECRET), Vec::<String>::new());
}

#[test]
fn bad_ranges_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    build(&mut ledger);
    let before = snapshot_dir(dir.path());
    for ((from, to), reason) in [
        ((0, 2), "r".to_string()),
        ((5, 4), "r".to_string()),
        ((7, 9), "r".to_string()),
        ((1, 1), "r".repeat(2000)),
    ] {
        match ledger.erase(from..=to, &reason) {
            Err(Error::BadRange { .. }) => {}
            other => panic!("{from}-{to}: expected BadRange, got {other:?}"),
        }
    }
    assert_eq!(snapshot_dir(dir.path()), before);
    assert_eq!(ledger.commit_seqs("secret-turn").unwrap(), Some((3, 6)));
}

#[test]
fn erasing_everything_leaves_a_usable_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    build(&mut ledger);
    let report = ledger.erase(1..=8, "all of it").unwrap();
    assert_eq!((report.from, report.to, report.events), (1, 8, 8));
    assert_eq!(ledger.user_seqs(), &[] as &[u64]);
    assert_eq!(ledger.events(1..=8).unwrap().len(), 1);
    assert_eq!(files_with(dir.path(), SECRET), Vec::<String>::new());
    ledger.commit(&turn(1)).unwrap();
    drop(ledger);
    assert!(ctxlog_ledger::verify(dir.path()).unwrap().is_clean());
}

/// Builds a log by hand: `bodies[i]` at seq i+1, one record per commit.
fn handmade(bodies: &[EventBody]) -> MemStorage {
    let mut log = LogHeader::new([7; 16], 1).encode().to_vec();
    for (i, body) in bodies.iter().enumerate() {
        let json = serde_json::to_vec(body).unwrap();
        format::encode_record(
            &mut log,
            body.kind(),
            format::FLAG_END_OF_COMMIT,
            0,
            i as u64 + 1,
            1,
            &json,
            &[],
        );
    }
    let m = MemStorage::new();
    m.set_file_bytes("ledger.log", log);
    m
}

fn tomb(from: u64, to: u64, reason: &str) -> EventBody {
    EventBody::System {
        marker: SystemMarker::Tombstone {
            from,
            to,
            at_ms: 5,
            reason: reason.into(),
        },
    }
}

#[test]
fn verify_accepts_a_covered_range_and_rejects_an_uncovered_one() {
    let verify = |m: MemStorage| ctxlog_ledger::verify_with(Arc::new(m));
    let covered = handmade(&[user("a"), tomb(2, 3, "why"), tomb(2, 3, ""), user("b")]);
    let report = verify(covered).unwrap();
    assert_eq!(report.erased, 2);
    let cases = [
        // a seq inside the range that is not a placeholder
        vec![user("a"), tomb(2, 3, "why"), user("b")],
        // a placeholder without its tombstone
        vec![user("a"), tomb(1, 2, "")],
        // a tombstone covering seqs the log does not have
        vec![user("a"), tomb(2, 4, "why"), tomb(2, 4, "")],
        // a placeholder carrying text (readers skip it: the text would be hidden, not gone)
        vec![user("a"), tomb(2, 3, "why"), tomb(2, 3, "hidden text")],
    ];
    for bodies in cases {
        match verify(handmade(&bodies)) {
            Err(Error::Corrupt { .. }) => {}
            other => panic!("{bodies:?}: expected Corrupt, got {other:?}"),
        }
    }
}

/// Events as `(seq, kind)`; the content of the secret turn is recognisable by its kind mix.
fn state(storage: &MemStorage) -> Vec<(u64, EventKind)> {
    let s: Arc<dyn Storage> = Arc::new(storage.clone());
    let (ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
    let last = ledger.last_seq();
    ledger
        .events(1..=last)
        .unwrap()
        .iter()
        .map(|e| (e.seq, e.kind()))
        .collect()
}

#[test]
fn a_failure_at_any_write_or_sync_leaves_the_old_ledger_or_the_new_one() {
    let base = MemStorage::new();
    {
        let s: Arc<dyn Storage> = Arc::new(base.clone());
        let (mut ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
        build(&mut ledger);
    }
    let old = state(&base);
    let new = {
        let copy = base.deep_clone();
        let s: Arc<dyn Storage> = Arc::new(copy.clone());
        let (mut ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
        ledger.erase(3..=6, "x").unwrap();
        drop(ledger);
        state(&copy)
    };
    assert_ne!(old, new);
    let mut saw = (false, false);
    for k in 0..12u64 {
        for fail_sync in [false, true] {
            let copy = base.deep_clone();
            let faulty = FaultyStorage::new(copy.clone());
            let s: Arc<dyn Storage> = Arc::new(faulty.clone());
            let (mut ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
            faulty.set_plan(FaultPlan {
                fail_write: (!fail_sync).then_some(k),
                fail_sync: fail_sync.then_some(k),
                ..FaultPlan::default()
            });
            let result = ledger.erase(3..=6, "x");
            drop(ledger);
            let after = state(&copy);
            assert!(
                after == old || after == new,
                "k={k} sync={fail_sync}: {after:?}"
            );
            if result.is_err() {
                saw.0 |= after == old;
                saw.1 |= after == new;
            }
            let verified = ctxlog_ledger::verify_with(Arc::new(copy.clone())).unwrap();
            assert!(verified.torn_tail_bytes == 0, "k={k}: {verified:?}");
        }
    }
    assert!(saw.0, "some injected failure hit before the rename");
}

#[test]
fn a_power_loss_at_any_point_of_the_erasure_leaves_the_old_ledger_or_the_new_one() {
    let base = MemStorage::with_crash_tracking();
    {
        let s: Arc<dyn Storage> = Arc::new(base.clone());
        let (mut ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
        build(&mut ledger);
    }
    let old = state(&base.crash_image(&mut |_, n| n));
    let new = {
        let copy = base.deep_clone();
        let s: Arc<dyn Storage> = Arc::new(copy.clone());
        let (mut ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
        ledger.erase(3..=6, "x").unwrap();
        drop(ledger);
        state(&copy.crash_image(&mut |_, _| 0))
    };
    assert_ne!(old, new);
    let mut saw_new = false;
    // The erasure is stopped at its k-th write (k large enough: it completes), then the
    // power goes, keeping none, half or all of every unsynced byte.
    for k in 0..16u64 {
        for keep in [0usize, 1, 2] {
            let copy = base.deep_clone();
            let faulty = FaultyStorage::new(copy.clone());
            let s: Arc<dyn Storage> = Arc::new(faulty.clone());
            let (mut ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
            faulty.set_plan(FaultPlan {
                fail_write: Some(k),
                ..FaultPlan::default()
            });
            let _ = ledger.erase(3..=6, "x");
            drop(ledger);
            let image = copy.crash_image(&mut |_, n| n * keep / 2);
            let after = state(&image);
            assert!(after == old || after == new, "k={k} keep={keep}: {after:?}");
            saw_new |= after == new;
        }
    }
    assert!(saw_new, "the erasure completed in some round");
}

/// Defect found in review: `commit_marker` accepted a `Tombstone`, so a public call could
/// hide an event from readers or claim seqs past the end of the log; erasing over such a
/// tombstone then failed *after* the rename, poisoned the writer, and the next open cut the
/// rewritten run as a torn tail.
#[test]
fn commit_marker_refuses_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    ledger.commit(&turn(1)).unwrap();
    let before = snapshot_dir(dir.path());
    for (from, to) in [(3, 5), (1, 3), (3, 3)] {
        let r = ledger.commit_marker(SystemMarker::Tombstone {
            from,
            to,
            at_ms: 0,
            reason: String::new(),
        });
        assert!(matches!(r, Err(Error::InvalidCommit { .. })), "{r:?}");
    }
    assert_eq!(snapshot_dir(dir.path()), before);
    assert!(!ledger.is_poisoned());
}

/// A log (crafted, or written before the fix above) whose tombstone claims seqs past its end
/// is refused by erase before anything is written, and the writer stays usable.
#[test]
fn erase_refuses_a_tombstone_past_the_end_before_writing() {
    let storage = handmade(&[user("a"), assistant("b"), tomb(3, 9, "why"), user("c")]);
    let s: Arc<dyn Storage> = Arc::new(storage.clone());
    let (mut ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
    let log_before = storage.file_bytes("ledger.log");
    let r = ledger.erase(4..=4, "again");
    assert!(
        matches!(r, Err(Error::Corrupt { seq: Some(3), .. })),
        "{r:?}"
    );
    assert!(!ledger.is_poisoned());
    assert_eq!(storage.file_bytes("ledger.log"), log_before);
    assert_eq!(storage.file_bytes("ledger.log.tmp"), None);
}

#[test]
fn a_tool_result_for_a_call_in_the_erased_last_turn_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    ledger.commit(&turn(1)).unwrap();
    ledger
        .commit(&commit(vec![user(SECRET), call("c9")]))
        .unwrap();
    let rep = ledger.erase(4..=4, "x").unwrap();
    assert_eq!((rep.from, rep.to), (3, 4));
    let r = ledger.commit(&commit(vec![result("c9", "late")]));
    assert!(matches!(r, Err(Error::InvalidCommit { .. })), "{r:?}");
    drop(ledger);
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    let r = ledger.commit(&commit(vec![result("c9", "late")]));
    assert!(matches!(r, Err(Error::InvalidCommit { .. })), "{r:?}");
}

#[test]
fn crafted_ranges_are_refused_without_panic_and_repeats_are_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    for (a, b) in [(0, 0), (1, 1), (u64::MAX, u64::MAX), (0, u64::MAX), (5, 3)] {
        assert!(matches!(
            ledger.erase(a..=b, ""),
            Err(Error::BadRange { .. })
        ));
    }
    build(&mut ledger);
    for (a, b) in [
        (0, 0),
        (u64::MAX, u64::MAX),
        (1, u64::MAX),
        (9, 9),
        (u64::MAX, 1),
    ] {
        assert!(matches!(
            ledger.erase(a..=b, ""),
            Err(Error::BadRange { .. })
        ));
    }
    #[allow(clippy::reversed_empty_ranges)]
    let r = ledger.erase(8..=8, "");
    assert!(r.is_ok());
    let r = ledger.erase(8..=8, "");
    eprintln!("again: {r:?}");
    let r = ledger.erase(1..=8, "");
    eprintln!("all: {r:?}");
    let r = ledger.erase(1..=1, "");
    eprintln!("all again: {r:?}");
    assert!(!ledger.is_poisoned());
}

#[test]
fn kept_ids_replay_at_their_seqs_and_erased_ids_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    let keep = NewCommit {
        id: Some("keep".into()),
        events: vec![user("k"), assistant("k")],
        ..Default::default()
    };
    ledger.commit(&keep).unwrap();
    ledger.commit(&secret_turn()).unwrap();
    let later = NewCommit {
        id: Some("later".into()),
        events: vec![user("l"), assistant("l")],
        ..Default::default()
    };
    ledger.commit(&later).unwrap();
    ledger.erase(3..=3, "x").unwrap();
    let r = ledger.commit(&keep).unwrap();
    assert!(r.replayed && (r.first_seq, r.last_seq) == (1, 2), "{r:?}");
    let r = ledger.commit(&later).unwrap();
    assert!(r.replayed && (r.first_seq, r.last_seq) == (7, 8), "{r:?}");
    drop(ledger);
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    let r = ledger.commit(&later).unwrap();
    assert!(r.replayed && (r.first_seq, r.last_seq) == (7, 8), "{r:?}");
    assert_eq!(ledger.commit_seqs("secret-turn").unwrap(), None);
    assert!(!contains(
        &std::fs::read(dir.path().join("commits.idx")).unwrap(),
        b"secret"
    ));
}

#[test]
fn seq_lists_and_reads_skip_erased_seqs() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    ledger.commit(&commit(vec![note("pre")])).unwrap();
    ledger.commit(&turn(1)).unwrap();
    ledger
        .commit(&commit(vec![user(SECRET), note(SECRET), assistant("a")]))
        .unwrap();
    ledger.commit(&turn(3)).unwrap();
    ledger.erase(5..=5, "x").unwrap();
    assert_eq!(ledger.user_seqs(), &[2, 7]);
    assert_eq!(ledger.note_seqs(), &[1]);
    let seqs: Vec<u64> = ledger
        .last_turns(1)
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [7, 8]);
    // The erased turn reads as its tombstone alone.
    let seqs: Vec<u64> = ledger
        .events(2..=8)
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [2, 3, 4, 7, 8]);
    assert!(matches!(ledger.event(5), Err(Error::NoSuchSeq { .. })));
    assert_eq!(ledger.event(4).unwrap().body.kind(), EventKind::System);
    let reader = Reader::open(dir.path()).unwrap();
    assert_eq!(reader.user_seqs(), &[2, 7]);
    assert_eq!(reader.note_seqs(), &[1]);
}

/// Defect found in review: an erasure that failed after its rename (a directory sync, an
/// artifact deletion) poisoned the writer but left it reading the replaced log through its
/// open handle, so `events` still returned the erased text (and a cache rebuilt from that
/// handle, such as the recall index, would have written it back into the directory).
#[test]
fn a_writer_whose_erasure_failed_after_the_rename_does_not_serve_erased_content() {
    let mut failed_after_rename = 0;
    for k in 0..8u64 {
        let base = MemStorage::new();
        let faulty = FaultyStorage::new(base.clone());
        let s: Arc<dyn Storage> = Arc::new(faulty.clone());
        let (mut ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
        build(&mut ledger);
        let big = ledger.event(5).unwrap();
        faulty.set_plan(FaultPlan {
            fail_sync: Some(k),
            ..FaultPlan::default()
        });
        let erased = ledger.erase(3..=6, "x");
        if erased.is_err() && ledger.is_poisoned() {
            failed_after_rename += 1;
            let read = ledger.events(1..=8);
            assert!(matches!(read, Err(Error::Poisoned)), "k={k}: {read:?}");
            assert!(matches!(ledger.event(3), Err(Error::Poisoned)));
            assert!(matches!(ledger.last_turns(3), Err(Error::Poisoned)));
            if let EventBody::ToolResult {
                artifact: Some(r), ..
            } = &big.body
            {
                assert!(matches!(ledger.artifact(r), Err(Error::Poisoned)));
            }
        }
        // Whatever happened, no read through this writer shows the erased text.
        if let Ok(events) = ledger.events(1..=8) {
            let erased_ok = erased.is_ok();
            for e in events {
                let json = serde_json::to_string(&e.body).unwrap();
                assert!(!(erased_ok && json.contains(SECRET)), "k={k}: {json}");
            }
        }
        drop(ledger);
        // Reopening reads the new ledger.
        let s: Arc<dyn Storage> = Arc::new(base.clone());
        let (ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
        let _ = ledger.events(1..=ledger.last_seq()).unwrap();
    }
    assert!(
        failed_after_rename >= 2,
        "no injected failure hit after the rename"
    );
}

/// Names of the files of `m` (log, sidecars, temporaries, artifacts, recovered tails)
/// holding `needle`.
fn mem_files_with(m: &MemStorage, needle: &str) -> Vec<String> {
    let mut names: Vec<String> = [
        "ledger.log",
        "ledger.log.tmp",
        "ledger.idx",
        "turns.idx",
        "notes.idx",
        "commits.idx",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for dir in ["artifacts", "recovered"] {
        for name in m.list(dir).unwrap() {
            names.push(format!("{dir}/{name}"));
        }
    }
    names
        .into_iter()
        .filter(|n| {
            m.file_bytes(n)
                .is_some_and(|b| contains(&b, needle.as_bytes()))
        })
        .collect()
}

/// Defect found in review: an erasure stopped after its rename (a crash, or a failed sync
/// or deletion) left the erased tool output in `artifacts/` for good: nothing removed it
/// unless the caller happened to erase again. Now `erase.pending` marks the window and the
/// next writer open finishes the deletions.
#[test]
fn an_erasure_stopped_after_the_rename_is_finished_by_the_next_open() {
    let mut saw_stopped_after_rename = false;
    for k in 0..10u64 {
        for (fail_sync, keep) in [(true, 2usize), (false, 2), (false, 0), (false, 1)] {
            let base = MemStorage::with_crash_tracking();
            {
                let s: Arc<dyn Storage> = Arc::new(base.clone());
                let (mut ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
                build(&mut ledger);
            }
            let faulty = FaultyStorage::new(base.clone());
            let s: Arc<dyn Storage> = Arc::new(faulty.clone());
            let (mut ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
            faulty.set_plan(FaultPlan {
                fail_write: (!fail_sync).then_some(k),
                fail_sync: fail_sync.then_some(k),
                ..FaultPlan::default()
            });
            let erased = ledger.erase(3..=6, "x");
            drop(ledger);
            let image = base.crash_image(&mut |_, n| n * keep / 2);
            let s: Arc<dyn Storage> = Arc::new(image.clone());
            let (ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
            let kinds: Vec<EventKind> = ledger
                .events(1..=ledger.last_seq())
                .unwrap()
                .iter()
                .map(|e| e.kind())
                .collect();
            drop(ledger);
            let is_new = kinds.len() == 5;
            if is_new {
                saw_stopped_after_rename |= erased.is_err();
                assert_eq!(
                    mem_files_with(&image, SECRET),
                    Vec::<String>::new(),
                    "k={k} sync={fail_sync} keep={keep}: {erased:?}"
                );
                assert!(!image.exists("erase.pending").unwrap());
            } else {
                assert_eq!(kinds.len(), 8, "k={k}: {kinds:?}");
            }
            assert!(
                ctxlog_ledger::verify_with(Arc::new(image))
                    .unwrap()
                    .torn_tail_bytes
                    == 0
            );
        }
    }
    assert!(saw_stopped_after_rename);
}

/// One commit holding three turns: erasing the middle one cuts it on both sides; the kept
/// parts become two commits, and reopening (a full scan without sidecars) and `verify`
/// accept the result.
#[test]
fn a_commit_cut_on_both_sides_is_reframed_into_two() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    let one = NewCommit {
        id: Some("one".into()),
        events: vec![
            user("a"),
            assistant("b"),
            user(SECRET),
            call("c1"),
            result("c1", SECRET),
            user("d"),
            assistant("e"),
        ],
        ..Default::default()
    };
    ledger.commit(&one).unwrap();
    let report = ledger.erase(4..=4, "middle").unwrap();
    assert_eq!((report.from, report.to, report.events), (3, 5, 3));
    ledger.commit(&turn(8)).unwrap();
    drop(ledger);
    for idx in ["ledger.idx", "turns.idx", "notes.idx", "commits.idx"] {
        std::fs::remove_file(dir.path().join(idx)).unwrap();
    }
    let report = ctxlog_ledger::verify(dir.path()).unwrap();
    assert_eq!((report.last_seq, report.erased), (9, 3));
    let (ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    let seqs: Vec<u64> = ledger
        .events(1..=9)
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [1, 2, 3, 6, 7, 8, 9]);
    assert_eq!(ledger.user_seqs(), &[1, 6, 8]);
    drop(ledger);
    assert_eq!(files_with(dir.path(), SECRET), Vec::<String>::new());
}

/// Defect found in review: with `artifacts/` or `recovered/` a symlink to a directory
/// elsewhere, erasure deleted every file there ("unreferenced" artifacts, "recovered"
/// tails). Now it refuses before writing anything, and deletes nothing outside.
#[test]
fn erase_never_deletes_files_outside_the_directory_through_a_symlink() {
    for linked in ["artifacts", "recovered"] {
        let dir = tempfile::tempdir().unwrap();
        let victim = tempfile::tempdir().unwrap();
        std::fs::write(victim.path().join("precious.txt"), "keep me").unwrap();
        let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
        ledger.commit(&turn(1)).unwrap();
        ledger.commit(&turn(2)).unwrap();
        std::os::unix::fs::symlink(victim.path(), dir.path().join(linked)).unwrap();
        let before = std::fs::read(dir.path().join("ledger.log")).unwrap();
        let r = ledger.erase(3..=3, "x");
        assert!(matches!(r, Err(Error::Io { .. })), "{linked}: {r:?}");
        assert!(!ledger.is_poisoned());
        assert!(victim.path().join("precious.txt").exists(), "{linked}");
        assert_eq!(
            std::fs::read(dir.path().join("ledger.log")).unwrap(),
            before
        );
        // The same holds for an erasure finished by the next open.
        drop(ledger);
        std::fs::write(dir.path().join("erase.pending"), b"").unwrap();
        assert!(Ledger::open(dir.path(), &Options::default()).is_err());
        assert!(victim.path().join("precious.txt").exists(), "{linked}");
    }
}

/// Regression: erasing an already-erased range rewrote the tombstone's reason and time. A
/// tombstone is an audit record (docs/design.md#e6-listing-and-tombstones): erasing a range that
/// earlier erasures already cover changes no byte of the directory, and the report says so
/// (`already_erased`, no events erased, the ledger id unchanged).
#[test]
fn erasing_an_erased_range_changes_nothing_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    for i in 0..4 {
        ledger.commit(&turn(i)).unwrap();
    }
    let first = ledger.erase(3..=4, "GDPR ticket 42").unwrap();
    assert!(!first.already_erased);
    let before = snapshot_dir(dir.path());
    for (range, reason) in [(3..=4, ""), (4..=4, "again"), (3..=3, "GDPR ticket 43")] {
        let again = ledger.erase(range.clone(), reason).unwrap();
        assert!(
            snapshot_dir(dir.path()) == before,
            "{range:?} changed the directory"
        );
        assert!(again.already_erased, "{range:?}");
        assert_eq!((again.from, again.to, again.events), (3, 4, 0));
        assert_eq!(again.ledger_id, first.ledger_id);
    }
    // A range reaching past the erased one is a new erasure.
    let wider = ledger.erase(3..=6, "more").unwrap();
    assert!(!wider.already_erased);
    assert_eq!(wider.events, 2);
}

/// The raw bytes of every record of the log in `dir`, in seq order.
fn records(dir: &Path) -> Vec<Vec<u8>> {
    let log = std::fs::read(dir.join("ledger.log")).unwrap();
    let mut out = Vec::new();
    let mut pos = format::LOG_HEADER_LEN;
    while pos < log.len() {
        let len = format::RecordHeader::parse(&log[pos..])
            .unwrap()
            .record_len() as usize;
        out.push(log[pos..pos + len].to_vec());
        pos += len;
    }
    out
}

fn tombstone_of(body: &EventBody) -> Option<(u64, u64, String)> {
    match body {
        EventBody::System {
            marker: SystemMarker::Tombstone {
                from, to, reason, ..
            },
        } => Some((*from, *to, reason.clone())),
        _ => None,
    }
}

/// Regression: an explicit range spanning an earlier tombstone rewrote it into the new one. The
/// earlier tombstone and its placeholder keep every byte
/// (docs/design.md#e6-listing-and-tombstones); each run of live seqs gets its own tombstone;
/// erasing the same range again changes nothing.
#[test]
fn an_explicit_range_over_an_earlier_tombstone_leaves_its_bytes_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    for i in 0..4 {
        ledger.commit(&turn(i)).unwrap();
    }
    ledger.erase(3..=4, "first").unwrap();
    let before = records(dir.path());
    let report = ledger.erase(1..=8, "second").unwrap();
    assert_eq!((report.from, report.to, report.events), (1, 8, 6));
    let after = records(dir.path());
    assert_eq!(after[2..4], before[2..4], "the tombstone 3-4 was rewritten");
    let leads: Vec<_> = ledger
        .events(1..=8)
        .unwrap()
        .iter()
        .map(|e| tombstone_of(&e.body).unwrap())
        .collect();
    assert_eq!(
        leads,
        [
            (1, 2, "second".to_string()),
            (3, 4, "first".to_string()),
            (5, 8, "second".to_string())
        ]
    );
    let again = ledger.erase(1..=8, "third").unwrap();
    assert!(again.already_erased);
    assert_eq!(records(dir.path()), after);
    drop(ledger);
    let report = ctxlog_ledger::verify(dir.path()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.erased, 8);
}

/// Cases of the erasure-sequence property.
const ERASURE_SEQUENCE_CASES: u32 = 256;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: ERASURE_SEQUENCE_CASES,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Random sequences of erasures (any start, any length) over turns of varied length:
    /// after every erasure each tombstone written before keeps all its bytes (and those of
    /// its placeholders), and the log verifies (every erased seq covered).
    #[test]
    fn earlier_tombstones_keep_their_bytes_through_any_erasures(
        lens in proptest::collection::vec(1usize..4, 2..8),
        erasures in proptest::collection::vec((0u64..1000, 0u64..8), 1..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut options = Options::default();
        options.sync(ctxlog_ledger::SyncMode::Never);
        let (mut ledger, _) = Ledger::open(dir.path(), &options).unwrap();
        for (i, n) in lens.iter().enumerate() {
            let mut events = vec![user(&format!("u{i}"))];
            events.extend((1..*n).map(|j| assistant(&format!("a{i}.{j}"))));
            ledger.commit(&commit(events)).unwrap();
        }
        let last = ledger.last_seq();
        // seq → its record bytes, for every seq an earlier erasure covered
        let mut written: std::collections::BTreeMap<u64, Vec<u8>> = Default::default();
        for (k, (at, len)) in erasures.iter().enumerate() {
            let from = 1 + at * last / 1000;
            let to = (from + len).min(last);
            ledger.erase(from..=to, &format!("erasure {k}")).unwrap();
            let now = records(dir.path());
            for (seq, bytes) in &written {
                proptest::prop_assert_eq!(&now[*seq as usize - 1], bytes, "seq {} rewritten", seq);
            }
            for (i, bytes) in now.iter().enumerate() {
                let seq = i as u64 + 1;
                let body = &ledger.events(seq..=seq).unwrap();
                let erased = body.first().is_none_or(|e| tombstone_of(&e.body).is_some());
                if erased {
                    written.entry(seq).or_insert_with(|| bytes.clone());
                }
            }
            let report = ctxlog_ledger::verify(dir.path()).unwrap();
            proptest::prop_assert!(report.is_clean(), "{:?}", report);
            proptest::prop_assert_eq!(report.erased, written.len() as u64);
        }
    }
}
