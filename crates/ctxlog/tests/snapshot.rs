//! A snapshot reads without the writer's lock while a writer commits. Projecting, recalling
//! and reindexing first catch it up with the ledger on disk, so a snapshot never serves, nor
//! writes into the recall index, anything the ledger no longer holds (erased text), and a
//! stale snapshot never resets an index a newer handle built.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ctxlog::Store;

#[test]
fn a_snapshot_sees_new_commits_after_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut conv = store.conversation("chat").unwrap();
    conv.commit_json(br#"{"user":"hello","assistant":"hi"}"#, None)
        .unwrap();
    let mut snapshot = store.snapshot("chat").unwrap();
    conv.commit_json(
        br#"{"user":"The new staging host is beta-7.","assistant":"Noted."}"#,
        None,
    )
    .unwrap();
    assert_eq!(
        snapshot.last_seq(),
        2,
        "a snapshot is stable until refreshed"
    );
    snapshot.catch_up().unwrap();
    assert_eq!(snapshot.last_seq(), 4);
    let hits = snapshot
        .recall("staging host", &Default::default())
        .unwrap()
        .hits;
    assert_eq!(hits[0].seq, 3);
    let mut request = ctxlog::projection::ProjectionRequest::builder();
    request.model("m").input("Which host?").max_bytes(1000);
    let body = snapshot.project(&request.build().unwrap()).unwrap().body;
    assert!(String::from_utf8(body).unwrap().contains("beta-7"));
}

#[test]
fn a_snapshot_opened_before_an_erase_never_brings_erased_text_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut conv = store.conversation("c").unwrap();
    conv.commit_json(
        br#"{"user":"The secret code is ZEBRA-42.","assistant":"Noted."}"#,
        None,
    )
    .unwrap();
    for i in 0..3 {
        let turn = serde_json::json!({"user": format!("filler {i}"), "assistant": "ok"});
        conv.commit_json(turn.to_string().as_bytes(), None).unwrap();
    }
    let mut early = store.snapshot("c").unwrap();
    let mut indexed = store.snapshot("c").unwrap();
    assert_eq!(
        indexed.recall("zebra", &Default::default()).unwrap().hits[0].seq,
        1
    );

    conv.erase(
        &ctxlog::ops::EraseTarget::Seqs { from: 1, to: 2 },
        "user request",
    )
    .unwrap();

    for snap in [&mut early, &mut indexed] {
        assert!(
            snap.recall("zebra", &Default::default())
                .unwrap()
                .hits
                .is_empty()
        );
        let mut request = ctxlog::projection::ProjectionRequest::builder();
        request
            .model("m")
            .input("What is the secret code?")
            .recall_k(2);
        let body = snap.project(&request.build().unwrap()).unwrap().body;
        assert!(!String::from_utf8(body).unwrap().contains("ZEBRA"));
    }
    for entry in walk(dir.path()) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !bytes.windows(8).any(|w| w == b"ZEBRA-42"),
            "{} holds erased text",
            entry.display()
        );
    }
}

#[test]
fn a_stale_snapshot_does_not_reset_a_newer_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut conv = store.conversation("c").unwrap();
    conv.commit_json(br#"{"user":"first","assistant":"ok"}"#, None)
        .unwrap();
    let mut snap = store.snapshot("c").unwrap();
    for i in 0..5 {
        let turn = serde_json::json!({"user": format!("later {i}"), "assistant": "ok"});
        conv.commit_json(turn.to_string().as_bytes(), None).unwrap();
    }
    conv.recall("later", &Default::default()).unwrap();
    let hits = snap.recall("later", &Default::default()).unwrap().hits;
    assert_eq!(hits.len(), 5, "the snapshot caught up before searching");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
