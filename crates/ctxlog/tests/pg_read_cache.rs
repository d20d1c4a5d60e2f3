//! Failure class: a PostgreSQL replica that serves erased text from what it keeps between
//! requests (its decoded-event read cache, its pooled read handles, its local recall index)
//! after another replica erased a range or the whole conversation.
//!
//! Guarantee: every read path catches up first and compares the conversation's ledger id;
//! an erasure anywhere gives a new id (or removes the row), so the next read on any replica
//! drops what it kept. Two `Store`s over one database with their own recall cache
//! directories (two machines), each warmed up by projections, logs and recalls before the
//! other erases: afterwards neither serves the canary, a whole erasure answers not found at
//! once (not an empty conversation; an erasure through the other machine's kept writer
//! too), and the other machine's recall cache file is deleted at its first request.
//! Retention through a kept writer counts the turns the other machine committed since.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// The engine under test is compiled only with the `postgres` feature (the default).
#![cfg(feature = "postgres")]

mod common;

use common::engines::{commit, log, turn};
use common::pg::{PgCluster, files_containing};
use ctxlog::ops::{EraseRequest, EraseTarget, ProjectRequest, RecallRequest};
use ctxlog::{ErrorClass, Store};

const CANARY: &str = "CANARY-pangolin-4471";

fn project(store: &Store) -> String {
    let p = store
        .project(&ProjectRequest {
            conversation: "c".into(),
            input: Some("what did I say?".into()),
            max_bytes: Some(64_000),
            ..Default::default()
        })
        .unwrap();
    String::from_utf8(p.body).unwrap()
}

fn recall(store: &Store, query: &str) -> ctxlog::Result<usize> {
    store
        .recall(&RecallRequest {
            conversation: "c".into(),
            query: query.into(),
            seq: None,
            offset: 0,
            limit: 10,
        })
        .map(|r| r.hits.len())
}

fn try_erase(store: &Store, target: EraseTarget) -> ctxlog::Result<ctxlog::ops::EraseResponse> {
    store.erase(&EraseRequest {
        conversation: "c".into(),
        target,
        reason: "user asked".into(),
    })
}

fn erase(store: &Store, target: EraseTarget) {
    try_erase(store, target).unwrap();
}

/// Two machines over one database: each its own recall cache directory.
struct Replicas {
    _cluster: PgCluster,
    caches: [tempfile::TempDir; 2],
    stores: [Store; 2],
}

fn replicas() -> Option<Replicas> {
    let cluster = PgCluster::start()?;
    let caches = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let open = |i: usize| Store::open_url(&cluster.url("ctxlog", caches[i].path())).unwrap();
    let stores = [open(0), open(1)];
    Some(Replicas {
        _cluster: cluster,
        caches,
        stores,
    })
}

/// Commits a conversation with the canary in turn 2, and warms every cache of both stores.
fn warm(r: &Replicas) {
    let [a, b] = &r.stores;
    commit(a, "c", &turn("walrus facts", "tusks"), None).unwrap();
    commit(
        a,
        "c",
        &turn(&format!("my secret is {CANARY}"), "noted"),
        None,
    )
    .unwrap();
    commit(a, "c", &turn("walrus again", "yes"), None).unwrap();
    for store in [a, b] {
        for _ in 0..2 {
            assert!(project(store).contains(CANARY));
            assert!(
                serde_json::to_string(&log(store, "c").unwrap().events)
                    .unwrap()
                    .contains(CANARY)
            );
            assert!(recall(store, "pangolin").unwrap() > 0);
        }
    }
    for cache in &r.caches {
        assert!(!files_containing(cache.path(), CANARY.as_bytes()).is_empty());
    }
}

#[test]
fn a_range_erasure_on_one_replica_empties_the_others_caches() {
    let Some(r) = replicas() else {
        return;
    };
    warm(&r);
    let [a, b] = &r.stores;
    erase(a, EraseTarget::Seqs { from: 3, to: 4 });
    for store in [b, a] {
        assert!(!project(store).contains(CANARY));
        let events = log(store, "c").unwrap().events;
        assert!(!serde_json::to_string(&events).unwrap().contains(CANARY));
        assert_eq!(recall(store, "pangolin").unwrap(), 0);
        assert!(recall(store, "walrus").unwrap() > 0);
        assert!(project(store).contains("walrus again"));
    }
    for cache in &r.caches {
        assert_eq!(
            files_containing(cache.path(), CANARY.as_bytes()),
            [] as [String; 0]
        );
    }
}

#[test]
fn a_whole_erasure_on_one_replica_is_not_found_on_the_other_at_once() {
    let Some(r) = replicas() else {
        return;
    };
    warm(&r);
    let [a, b] = &r.stores;
    erase(a, EraseTarget::All);
    // The other replica's pooled handles knew the conversation: its first read after the
    // erasure answers as for a conversation that never existed, and its recall cache goes.
    assert_eq!(log(b, "c").unwrap_err().class(), ErrorClass::NotFound);
    assert_eq!(
        files_containing(r.caches[1].path(), CANARY.as_bytes()),
        [] as [String; 0]
    );
    assert_eq!(
        recall(b, "pangolin").unwrap_err().class(),
        ErrorClass::NotFound
    );
    assert!(!project(b).contains(CANARY));
    // A new conversation of the same name starts from seq 1 on both.
    commit(b, "c", &turn("fresh start", "ok"), None).unwrap();
    for store in [a, b] {
        assert_eq!(log(store, "c").unwrap().last_seq, 2);
        assert_eq!(recall(store, "pangolin").unwrap(), 0);
        assert!(!project(store).contains(CANARY));
    }
}

#[test]
fn an_erasure_through_a_writer_that_knew_the_conversation_is_not_found_after_a_whole_erasure_elsewhere()
 {
    let Some(r) = replicas() else {
        return;
    };
    warm(&r);
    let [a, b] = &r.stores;
    // Both replicas keep a writer of "c" between requests.
    commit(b, "c", &turn("from b", "ok"), None).unwrap();
    commit(a, "c", &turn("from a", "ok"), None).unwrap();
    erase(a, EraseTarget::All);
    for target in [EraseTarget::Seqs { from: 1, to: 2 }, EraseTarget::All] {
        let err = try_erase(b, target.clone()).unwrap_err();
        assert_eq!(err.class(), ErrorClass::NotFound, "{target:?}: {err}");
        // Nothing was written: the conversation is still not there.
        assert_eq!(log(a, "c").unwrap_err().class(), ErrorClass::NotFound);
    }
    // A commit through that writer starts the conversation anew.
    let receipt = commit(b, "c", &turn("anew", "ok"), None).unwrap();
    assert_eq!(receipt.first_seq, 1);
    assert_eq!(log(a, "c").unwrap().last_seq, 2);
}

/// Retention through a writer a replica kept from an earlier commit plans on what the
/// database holds now, not on what that writer saw: turns the other replica committed since
/// count.
#[test]
fn retention_through_a_kept_writer_counts_the_other_replicas_turns() {
    let Some(r) = replicas() else {
        return;
    };
    let [a, b] = &r.stores;
    commit(b, "c", &turn("first, from b", "ok"), None).unwrap();
    for i in 2..=4 {
        commit(a, "c", &turn(&format!("turn {i}, from a"), "ok"), None).unwrap();
    }
    let report = b
        .gc(&ctxlog::ops::GcRequest {
            conversation: Some("c".into()),
            keep_turns: Some(1),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(report.seqs_removed, 6, "{report:?}");
    for store in [a, b] {
        let events = log(store, "c").unwrap().events;
        let text = serde_json::to_string(&events).unwrap();
        assert!(
            !text.contains("from b") && !text.contains("turn 3"),
            "{text}"
        );
        assert!(text.contains("turn 4, from a"), "{text}");
    }
}

/// A row deleted by hand after a replica loaded the conversation: that replica's `verify`
/// reads every row and finds the gap (class `corrupt`, naming the missing seq), as a fresh
/// process does when it loads the conversation.
#[test]
fn verify_on_a_replica_finds_a_row_deleted_since_it_loaded() {
    let Some(r) = replicas() else {
        return;
    };
    warm(&r);
    let [a, b] = &r.stores;
    let verify = |store: &Store| {
        store.verify(&ctxlog::ops::VerifyRequest {
            conversation: "c".into(),
        })
    };
    verify(b).unwrap();
    r._cluster
        .psql("DELETE FROM ctxlog.events WHERE conversation = 'c' AND seq = 3");
    for store in [b, a] {
        let err = verify(store).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Corrupt, "{err}");
        assert!(err.to_string().contains("seq 3"), "{err}");
    }
}
