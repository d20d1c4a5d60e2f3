//! A snapshot reads without the writer's lock while a writer commits: it is stable until
//! refreshed, then sees the new commits, and projects and recalls from them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ctxlog::Store;

#[test]
fn a_snapshot_sees_new_commits_after_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path());
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
    snapshot.refresh().unwrap();
    assert_eq!(snapshot.last_seq(), 4);
    let hits = snapshot
        .recall("staging host", &Default::default())
        .unwrap()
        .hits;
    assert_eq!(hits[0].seq, 3);
    let mut request = ctxlog::projection::ProjectionRequest::builder();
    request.model("m").input("Which host?").max_bytes(1000);
    let body = snapshot.project(&request).unwrap().body;
    assert!(String::from_utf8(body).unwrap().contains("beta-7"));
}
