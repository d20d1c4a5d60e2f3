//! Failure class: erasure through the facade leaving erased text in the recall index, or a
//! cache (index, size cache) answering from the old ledger.
//!
//! Guarantee: `Conversation::erase` deletes the recall index and the next recall rebuilds it
//! from the rewritten ledger (new ledger id), so erased text is never found again and the
//! rest still is; `Store::erase_all` removes the directory, refuses while another writer holds
//! it, and reports a missing conversation as `NotFound`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ctxlog::ledger::LedgerRead;
use ctxlog::recall::SearchOptions;
use ctxlog::{Erase, ErrorClass, Store};

#[test]
fn erase_purges_the_recall_index_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path());
    let mut conv = store.conversation("c").unwrap();
    conv.commit_json(br#"{"user":"walrus facts","assistant":"tusks"}"#, None)
        .unwrap();
    conv.commit_json(
        br#"{"user":"secret narwhal-9931","assistant":"ok"}"#,
        Some("s"),
    )
    .unwrap();
    let opts = SearchOptions::default();
    assert!(!conv.recall("narwhal", &opts).unwrap().hits.is_empty());
    let old_id = conv.ledger().ledger_id().to_string();

    let report = conv.erase(Erase::Turn("s".into()), "asked").unwrap();
    assert_eq!((report.from, report.to), (3, 4));
    assert!(!conv.dir().join("recall.sqlite").exists());
    assert_ne!(report.ledger_id, old_id);
    assert!(conv.recall("narwhal", &opts).unwrap().hits.is_empty());
    assert!(!conv.recall("walrus", &opts).unwrap().hits.is_empty());
    assert_eq!(conv.events(1..=4).unwrap().len(), 3);

    let bad = conv.erase(Erase::Seqs(4, 9), "x").unwrap_err();
    assert_eq!(bad.class(), ErrorClass::Usage);
    assert!(
        conv.dir().join("recall.sqlite").exists(),
        "a bad range touches nothing"
    );
}

#[test]
fn erase_all_removes_the_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path());
    store
        .conversation("c")
        .unwrap()
        .commit_json(br#"{"user":"u","assistant":"a"}"#, None)
        .unwrap();
    let held = store.conversation("c").unwrap();
    assert_eq!(
        store.erase_all("c").unwrap_err().class(),
        ErrorClass::Locked
    );
    drop(held);
    store.erase_all("c").unwrap();
    assert!(!dir.path().join("c").exists());
    assert_eq!(
        store.erase_all("c").unwrap_err().class(),
        ErrorClass::NotFound
    );
}

#[test]
fn erase_all_goes_through_trash_and_sweeps_what_a_crash_left() {
    let dir = tempfile::tempdir().unwrap();
    let store = ctxlog::Store::open(dir.path());
    for name in ["a", "b"] {
        let mut conv = store.conversation(name).unwrap();
        conv.commit_json(br#"{"user":"secret-marker-77","assistant":"ok"}"#, None)
            .unwrap();
    }
    // An erasure of "b" that a crash interrupted after its rename.
    std::fs::rename(dir.path().join("b"), dir.path().join(".erasing-b-1")).unwrap();
    assert_eq!(store.list().unwrap(), vec!["a".to_string()]);

    store.erase_all("a").unwrap();
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "nothing may remain: {left:?}");
}
