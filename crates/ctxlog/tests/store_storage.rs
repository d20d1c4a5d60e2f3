//! Failure class: store-level file work (creating, listing and erasing conversations, undoing
//! a refused first commit) done outside the storage trait, where crash and fault tests cannot
//! reach it.
//!
//! Guarantee: a `Store` over an in-memory `Storage` does all of it: every ledger byte lives
//! in the storage, and the only files on disk are the recall caches.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use ctxlog::backend::FileBackend;
use ctxlog::ledger::MemStorage;
use ctxlog::ops::{CommitRequest, EraseRequest, EraseTarget, ListRequest, RecallRequest};
use ctxlog::{ErrorClass, Options, Store};

fn names(store: &Store) -> Vec<String> {
    let mut names: Vec<String> = store
        .list(&ListRequest {})
        .unwrap()
        .conversations
        .into_iter()
        .map(|c| c.name)
        .collect();
    names.sort();
    names
}

fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            out.extend(files_under(&entry.path()));
        } else {
            out.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    out
}

#[test]
fn a_store_in_memory_keeps_every_ledger_byte_in_its_storage() {
    let caches = tempfile::tempdir().unwrap();
    let mem = MemStorage::new();
    let backend =
        FileBackend::with_storage(Arc::new(mem.clone()), caches.path(), Options::default());
    let store = Store::with_backend(Arc::new(backend)).unwrap();
    let commit = |name: &str, json: &[u8]| {
        store.commit(&CommitRequest::from_json(name, json, None).unwrap())
    };

    commit("a", br#"{"user":"walrus","assistant":"tusks"}"#).unwrap();
    commit("b", br#"{"user":"narwhal","assistant":"horn"}"#).unwrap();
    assert!(mem.file_bytes("a/ledger.log").is_some());
    assert_eq!(names(&store), ["a", "b"]);

    // A refused first commit leaves nothing behind, in the storage too.
    let refused = commit("c", br#"{"events":[{"kind":"assistant","text":" "}]}"#).unwrap_err();
    assert_eq!(refused.class(), ErrorClass::BadInput);
    assert_eq!(names(&store), ["a", "b"]);
    assert!(mem.file_bytes("c/ledger.log").is_none());

    let hits = store
        .recall(&RecallRequest {
            conversation: "a".into(),
            query: "walrus".into(),
            seq: None,
            offset: 0,
            limit: 5,
        })
        .unwrap();
    assert_eq!(hits.hits[0].seq, 1);

    store
        .erase(&EraseRequest {
            conversation: "a".into(),
            target: EraseTarget::All,
            reason: String::new(),
        })
        .unwrap();
    assert_eq!(names(&store), ["b"]);
    assert!(mem.file_bytes("a/ledger.log").is_none());
    // On disk: recall caches only (a's went with it).
    let on_disk = files_under(caches.path());
    assert!(
        on_disk.iter().all(|f| f.starts_with("recall.sqlite")),
        "{on_disk:?}"
    );
}
