//! Failure class: erasure through the facade leaving erased text in the recall index, or a
//! cache (index, size cache) answering from the old ledger.
//!
//! Guarantee: `Conversation::erase` deletes the recall index and the next recall rebuilds it
//! from the rewritten ledger (new ledger id), so erased text is never found again and the
//! rest still is; `Store::erase` of `EraseTarget::All` removes the directory, refuses while another writer holds
//! it, and reports a missing conversation as `NotFound`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ctxlog::ops::{EraseRequest, EraseTarget, ListRequest};
use ctxlog::recall::SearchOptions;
use ctxlog::{ErrorClass, Store};

fn erase_all(store: &Store, name: &str) -> ctxlog::Result<ctxlog::ops::EraseResponse> {
    store.erase(&EraseRequest {
        conversation: name.into(),
        target: EraseTarget::All,
        reason: String::new(),
    })
}

#[test]
fn erase_purges_the_recall_index_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
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

    let report = conv
        .erase(&EraseTarget::Commit { id: "s".into() }, "asked")
        .unwrap();
    assert_eq!((report.from, report.to), (3, 4));
    assert!(!conv.recall_path().exists());
    assert_ne!(report.ledger_id, old_id);
    assert!(conv.recall("narwhal", &opts).unwrap().hits.is_empty());
    assert!(!conv.recall("walrus", &opts).unwrap().hits.is_empty());
    assert_eq!(conv.events(1..=4).unwrap().len(), 3);

    let bad = conv
        .erase(&EraseTarget::Seqs { from: 4, to: 9 }, "x")
        .unwrap_err();
    assert_eq!(bad.class(), ErrorClass::Usage);
    assert!(conv.recall_path().exists(), "a bad range touches nothing");
}

#[test]
fn erase_all_removes_the_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store
        .conversation("c")
        .unwrap()
        .commit_json(br#"{"user":"u","assistant":"a"}"#, None)
        .unwrap();
    let held = store.conversation("c").unwrap();
    assert_eq!(
        erase_all(&store, "c").unwrap_err().class(),
        ErrorClass::Locked
    );
    drop(held);
    erase_all(&store, "c").unwrap();
    assert!(!dir.path().join("c").exists());
    assert_eq!(
        erase_all(&store, "c").unwrap_err().class(),
        ErrorClass::NotFound
    );
}

#[test]
fn erase_all_goes_through_trash_and_sweeps_what_a_crash_left() {
    let dir = tempfile::tempdir().unwrap();
    let store = ctxlog::Store::open(dir.path()).unwrap();
    for name in ["a", "b"] {
        let mut conv = store.conversation(name).unwrap();
        conv.commit_json(br#"{"user":"secret-marker-77","assistant":"ok"}"#, None)
            .unwrap();
    }
    // An erasure of "b" that a crash interrupted after its rename.
    std::fs::rename(dir.path().join("b"), dir.path().join(".erasing-b-1")).unwrap();
    let names: Vec<String> = store
        .list(&ListRequest {})
        .unwrap()
        .conversations
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, vec!["a".to_string()]);

    erase_all(&store, "a").unwrap();
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "nothing may remain: {left:?}");
}

/// Regression: with the conversation directory a symlink to a
/// directory elsewhere, `erase --all` removed the link, reported success and left the ledger
/// in the target. A conversation directory that is a symlink is refused for writing (commit
/// and erase fail with a clear error), and the target is left byte for byte as it was.
#[test]
fn a_symlinked_conversation_directory_is_refused_for_writing_and_erasure() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    {
        let other = Store::open(elsewhere.path()).unwrap();
        let mut conv = other.conversation("c").unwrap();
        conv.commit_json(br#"{"user":"secret walrus","assistant":"ok"}"#, None)
            .unwrap();
    }
    let target = elsewhere.path().join("c");
    let log_before = std::fs::read(target.join("ledger.log")).unwrap();
    std::fs::create_dir_all(dir.path()).unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("c")).unwrap();
    let store = Store::open(dir.path()).unwrap();

    let err = erase_all(&store, "c").expect_err("erasing through a symlink must fail");
    assert!(err.to_string().contains("symlink"), "{err}");
    let err = store
        .conversation("c")
        .and_then(|mut c| c.commit_json(br#"{"user":"more","assistant":"x"}"#, None))
        .expect_err("committing through a symlink must fail");
    assert!(err.to_string().contains("symlink"), "{err}");
    assert!(std::fs::read(target.join("ledger.log")).unwrap() == log_before);
    assert!(
        std::fs::symlink_metadata(dir.path().join("c"))
            .unwrap()
            .is_symlink()
    );
}
