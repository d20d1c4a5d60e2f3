//! Failure class: a client retries a commit (timeout, crash before it saw the receipt).
//!
//! Guarantee (docs/design.md#l4-idempotent-commits): the same id with the same content returns the
//! original receipt (`replayed: true`) and writes zero bytes, also after a reopen (the id table is
//! persisted and rebuilt from the log if lost); the same id with different content is `Conflict`
//! and writes zero bytes. Checked by hashing every file of the directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use ctxlog_ledger::{CommitReceipt, Error, Ledger, LedgerRead, NewCommit, Options};

fn with_id(id: &str, mut c: NewCommit) -> NewCommit {
    c.id = Some(id.into());
    c
}

#[test]
fn same_id_same_content_replays_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    let first = ledger.commit(&with_id("a", turn(1))).unwrap();
    assert_eq!(
        first,
        CommitReceipt {
            first_seq: 1,
            last_seq: 2,
            replayed: false
        }
    );
    ledger.commit(&with_id("b", turn(2))).unwrap();
    let before = snapshot_dir(tmp.path());
    let again = ledger.commit(&with_id("a", turn(1))).unwrap();
    assert_eq!(
        again,
        CommitReceipt {
            first_seq: 1,
            last_seq: 2,
            replayed: true
        }
    );
    assert_eq!(snapshot_dir(tmp.path()), before);
    assert_eq!(ledger.last_seq(), 4);
}

#[test]
fn same_id_other_content_conflicts_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    ledger.commit(&with_id("a", turn(1))).unwrap();
    let before = snapshot_dir(tmp.path());
    let err = ledger.commit(&with_id("a", turn(9))).unwrap_err();
    assert!(
        matches!(&err, Error::Conflict { id } if id == "a"),
        "{err:?}"
    );
    assert_eq!(snapshot_dir(tmp.path()), before);
    assert_eq!(ledger.last_seq(), 2);
}

#[test]
fn ids_survive_reopen_and_the_loss_of_the_sidecars() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
        ledger.commit(&with_id("a", turn(1))).unwrap();
        ledger.commit(&turn(2)).unwrap();
        ledger
            .commit(&with_id(
                "c",
                commit(vec![user("go"), call("x"), result("x", "y")]),
            ))
            .unwrap();
    }
    for round in 0..2 {
        if round == 1 {
            for side in ["ledger.idx", "turns.idx", "notes.idx", "commits.idx"] {
                std::fs::remove_file(tmp.path().join(side)).unwrap();
            }
        }
        let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
        let log_before = std::fs::read(tmp.path().join("ledger.log")).unwrap();
        let r = ledger
            .commit(&with_id(
                "c",
                commit(vec![user("go"), call("x"), result("x", "y")]),
            ))
            .unwrap();
        assert_eq!(
            r,
            CommitReceipt {
                first_seq: 5,
                last_seq: 7,
                replayed: true
            }
        );
        assert!(matches!(
            ledger.commit(&with_id("a", turn(2))),
            Err(Error::Conflict { .. })
        ));
        assert_eq!(
            std::fs::read(tmp.path().join("ledger.log")).unwrap(),
            log_before
        );
    }
}

#[test]
fn a_replay_is_answered_even_when_the_turn_has_moved_on() {
    // The original commit answered call "x"; replaying it later must not be re-validated
    // against the current turn (where "x" is already answered).
    let (_m, s) = mem();
    let (mut ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
    ledger.commit(&commit(vec![user("go"), call("x")])).unwrap();
    let c = with_id("r", commit(vec![result("x", "done")]));
    let first = ledger.commit(&c).unwrap();
    let again = ledger.commit(&c).unwrap();
    assert_eq!((again.first_seq, again.replayed), (first.first_seq, true));
}

#[test]
fn commit_ids_are_bounded() {
    let (_m, s) = mem();
    let (mut ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
    for bad in [
        String::new(),
        "x".repeat(ctxlog_ledger::MAX_COMMIT_ID_BYTES + 1),
    ] {
        assert!(matches!(
            ledger.commit(&with_id(&bad, turn(1))),
            Err(Error::InvalidCommit { .. })
        ));
    }
    assert_eq!(ledger.last_seq(), 0);
}

/// Regression: a bit flip in a `commits.idx` entry (a cache) used to fail every later
/// id-carrying commit with `Corrupt` until the user deleted the sidecars by hand, because
/// open checks only that file's length. The writer now rebuilds the table from the log.
#[test]
fn a_damaged_commit_index_entry_is_rebuilt_from_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
        ledger.commit(&with_id("a", turn(1))).unwrap();
        ledger.commit(&turn(2)).unwrap();
        ledger.commit(&with_id("b", turn(3))).unwrap();
    }
    let path = tmp.path().join("commits.idx");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[32 + 5] ^= 0x10; // inside the first entry (id "a")
    std::fs::write(&path, &bytes).unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    let replay = ledger.commit(&with_id("a", turn(1))).unwrap();
    assert_eq!(
        (replay.first_seq, replay.last_seq, replay.replayed),
        (1, 2, true)
    );
    assert!(matches!(
        ledger.commit(&with_id("b", turn(9))),
        Err(Error::Conflict { .. })
    ));
    let fresh = ledger.commit(&with_id("c", turn(4))).unwrap();
    assert_eq!((fresh.first_seq, fresh.replayed), (7, false));
    drop(ledger);
    let report = ctxlog_ledger::verify(tmp.path()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.commits_with_id, 3);
}

/// Regression: the digest hashed serde_json's output as is, and the workspace enables
/// `preserve_order`, so the same tool arguments built with their keys in another order
/// counted as other content: a retry was refused with `Conflict`. The digest is now taken
/// over canonical JSON (object keys sorted recursively).
#[test]
fn reordered_argument_keys_are_the_same_content() {
    let with_args = |args: &str| {
        with_id(
            "t",
            commit(vec![
                user("go"),
                ctxlog_ledger::EventBody::ToolCall {
                    call_id: "c1".into(),
                    tool: "shell".into(),
                    arguments: serde_json::from_str(args).unwrap(),
                    provider_item: None,
                },
            ]),
        )
    };
    let first = with_args(r#"{"cmd":"ls","env":{"A":"1","B":"2"},"argv":["-l","-a"]}"#);
    let retry = with_args(r#"{"argv":["-l","-a"],"env":{"B":"2","A":"1"},"cmd":"ls"}"#);
    // The test means something only if the two really serialize differently.
    assert_ne!(
        serde_json::to_string(&first.events).unwrap(),
        serde_json::to_string(&retry.events).unwrap()
    );
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    assert!(!ledger.commit(&first).unwrap().replayed);
    let before = snapshot_dir(tmp.path());
    let again = ledger.commit(&retry).unwrap();
    assert_eq!(
        (again.first_seq, again.last_seq, again.replayed),
        (1, 2, true)
    );
    assert_eq!(snapshot_dir(tmp.path()), before);
    // Also after a reopen without the sidecars (the table comes from the log's metadata).
    drop(ledger);
    for side in ["ledger.idx", "turns.idx", "notes.idx", "commits.idx"] {
        std::fs::remove_file(tmp.path().join(side)).unwrap();
    }
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    assert!(ledger.commit(&retry).unwrap().replayed);
    // Array order is content: reordering an array is a conflict.
    let other = with_args(r#"{"argv":["-a","-l"],"env":{"B":"2","A":"1"},"cmd":"ls"}"#);
    assert!(matches!(
        ledger.commit(&other).unwrap_err(),
        Error::Conflict { .. }
    ));
}
