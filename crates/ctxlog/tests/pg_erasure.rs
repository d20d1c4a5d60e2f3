//! Failure class: erasure in PostgreSQL that deletes rows but leaves the erased text in the
//! cluster's files: dead row versions in heap or TOAST pages (a plain `VACUUM` keeps the
//! freed bytes of a page), index pages, WAL segments; or in a replica's local recall cache.
//!
//! Guarantee (measured here, stated in `docs/postgres.md`): after an erasure returns and a
//! `CHECKPOINT`, no file of the cluster's data directory outside `pg_wal/` holds the erased
//! text (the backend runs `VACUUM (FULL)` on the affected tables, which writes new files and
//! drops the old ones), nor does any file of the recall cache directory. The WAL still holds
//! it until its segments are removed; with `wal_recycle = off`, two WAL switches and
//! checkpoints remove them, and then no file of the data directory holds it.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// The engine under test is compiled only with the `postgres` feature (the default).
#![cfg(feature = "postgres")]

mod common;

use common::pg::{PgCluster, files_containing};
use ctxlog::Store;
use ctxlog::ops::{CommitRequest, EraseRequest, EraseTarget, RecallRequest};

fn commit(store: &Store, conv: &str, json: &str, id: Option<&str>) {
    store
        .commit(&CommitRequest::from_json(conv, json.as_bytes(), id).unwrap())
        .unwrap();
}

fn erase(store: &Store, conv: &str, target: EraseTarget) {
    store
        .erase(&EraseRequest {
            conversation: conv.into(),
            target,
            reason: "user asked".into(),
        })
        .unwrap();
}

/// Where the canary is, outside and inside `pg_wal/`.
fn scan(cluster: &PgCluster, canary: &str) -> (Vec<String>, Vec<String>) {
    cluster.psql("CHECKPOINT");
    let found = files_containing(&cluster.data_dir(), canary.as_bytes());
    found.into_iter().partition(|f| !f.starts_with("pg_wal"))
}

#[test]
fn erased_text_is_gone_from_the_data_files_after_a_checkpoint() {
    let Some(cluster) = PgCluster::start() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let store = Store::open_url(&cluster.url("ctxlog", cache.path())).unwrap();
    let (small, large, whole) = (
        "CANARY-okapi-5521",
        "CANARY-quokka-8830",
        "CANARY-tapir-1207",
    );
    for i in 0..50 {
        let t = format!(r#"{{"user":"filler question {i}","assistant":"filler answer {i}"}}"#);
        commit(&store, "keep", &t, None);
    }
    commit(&store, "c", r#"{"user":"first","assistant":"kept"}"#, None);
    let output = format!("{large} {}", "tool output line\n".repeat(2000));
    let turn = serde_json::json!({"id": "secret", "events": [
        {"kind": "user", "text": format!("my code is {small}")},
        {"kind": "tool_call", "call_id": "c1", "tool": "shell", "arguments": {"cmd": "cat"}},
        {"kind": "tool_result", "call_id": "c1", "tool": "shell", "status": "ok", "text": output},
        {"kind": "assistant", "text": format!("noted {small}")},
    ]});
    commit(&store, "c", &turn.to_string(), None);
    commit(
        &store,
        "c",
        r#"{"user":"later","assistant":"kept too"}"#,
        None,
    );
    commit(
        &store,
        "gone",
        &format!(r#"{{"user":"{whole}","assistant":"x"}}"#),
        None,
    );
    for i in 0..50 {
        let t = format!(r#"{{"user":"more filler {i}","assistant":"more {i}"}}"#);
        commit(&store, "keep", &t, None);
    }
    let recall = |conv: &str, q: &str| {
        store
            .recall(&RecallRequest {
                conversation: conv.into(),
                query: q.into(),
                seq: None,
                offset: 0,
                limit: 5,
            })
            .unwrap()
            .hits
            .len()
    };
    assert!(recall("c", "okapi") > 0);
    assert!(recall("gone", whole) > 0);
    let (data, _) = scan(&cluster, small);
    assert!(
        !data.is_empty(),
        "the canary is in the data files before erasure"
    );
    assert!(!scan(&cluster, large).0.is_empty());

    erase(&store, "c", EraseTarget::Seqs { from: 4, to: 4 });
    erase(&store, "gone", EraseTarget::All);
    assert_eq!(recall("c", "okapi"), 0);
    assert_eq!(recall("c", "quokka"), 0);

    let mut wal_report = Vec::new();
    for canary in [small, large, whole] {
        let (data, wal) = scan(&cluster, canary);
        assert!(data.is_empty(), "{canary} still in {data:?}");
        let cached = files_containing(cache.path(), canary.as_bytes());
        assert!(
            cached.is_empty(),
            "{canary} still in the recall cache {cached:?}"
        );
        wal_report.push(format!("{canary}: {} WAL segment(s)", wal.len()));
    }
    eprintln!("after erasure + CHECKPOINT, outside pg_wal: none; in pg_wal: {wal_report:?}");

    // What an operator can do about the WAL: stop recycling segments, switch twice and
    // checkpoint; the segments holding the erased text are then removed.
    cluster.psql("ALTER SYSTEM SET wal_recycle = off");
    cluster.psql("SELECT pg_reload_conf()");
    for _ in 0..2 {
        cluster.psql("SELECT pg_switch_wal()");
        cluster.psql("CHECKPOINT");
    }
    for canary in [small, large, whole] {
        let (data, wal) = scan(&cluster, canary);
        assert!(
            data.is_empty() && wal.is_empty(),
            "{canary}: {data:?} {wal:?}"
        );
    }
    eprintln!(
        "after wal_recycle=off, 2x pg_switch_wal + CHECKPOINT: no file of the data directory holds any canary"
    );
    // The rest is intact.
    assert!(recall("keep", "filler") > 0);
}
