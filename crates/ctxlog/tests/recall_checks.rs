//! Recall never serves what the ledger no longer says (docs/design.md#r2-disposable): every
//! hit is checked against its event before it is returned. A hit whose record is damaged fails
//! closed, as every read of that record does — through the search and the recall tool alike —
//! instead of being served from the index; an index that disagrees with the ledger (its
//! recorded kind or time of an event differs) is rebuilt and searched again. The pages a
//! projection recalls on its own (`recall` K) are checked the same way.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use ctxlog::ledger::format::LogHeader;
use ctxlog::ledger::{EventBody, NewCommit};
use ctxlog::recall::SearchOptions;
use ctxlog::{ErrorClass, Store};

fn seed(root: &Path) {
    let store = Store::open(root).unwrap();
    let mut conv = store.conversation("chat").unwrap();
    for (user, assistant) in [
        ("the zebra code is ZX-81", "Noted."),
        ("lunch is at noon", "Fine."),
        ("the build runs nightly", "Good."),
    ] {
        conv.commit_json(
            serde_json::json!({"user": user, "assistant": assistant})
                .to_string()
                .as_bytes(),
            None,
        )
        .unwrap();
    }
    // The index is built and holds seq 1.
    let hits = conv
        .recall("zebra", &SearchOptions::default())
        .unwrap()
        .hits;
    assert_eq!(hits[0].seq, 1);
}

#[test]
fn a_hit_whose_record_is_damaged_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let log = dir.path().join("chat/ledger.log");
    let mut bytes = std::fs::read(&log).unwrap();
    let at = bytes.windows(5).position(|w| w == b"zebra").unwrap();
    bytes[at] ^= 0x20;
    std::fs::write(&log, bytes).unwrap();

    let store = Store::open(dir.path()).unwrap();
    let mut conv = store.conversation("chat").unwrap();
    let err = conv.recall("zebra", &SearchOptions::default()).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Corrupt, "{err}");
    let tool = conv.recall_tool(&serde_json::json!({"query": "zebra"}));
    assert!(tool.is_error, "{}", tool.json);
    assert_eq!(
        tool.json["error"]["code"], "conversation_damaged",
        "{}",
        tool.json
    );
    // Hits elsewhere in the conversation still come back.
    let hits = conv
        .recall("nightly", &SearchOptions::default())
        .unwrap()
        .hits;
    assert_eq!(hits[0].seq, 5);
}

/// A conversation whose first turn says `first` at time `t`, then two turns the same in every
/// store (times included); its recall index built.
fn written(root: &Path, first: &str, t: i64) {
    let store = Store::open(root).unwrap();
    let mut conv = store.conversation("chat").unwrap();
    let turn = |user: &str, at: i64| {
        NewCommit::new(vec![
            EventBody::User {
                text: user.into(),
                parts: Vec::new(),
                provider_item: None,
            },
            EventBody::Assistant {
                text: "Noted.".into(),
                provider_item: None,
            },
        ])
        .with_times(vec![Some(at), Some(at)])
    };
    conv.commit(&turn(first, t)).unwrap();
    conv.commit(&turn("lunch is at noon", 50_000)).unwrap();
    conv.commit(&turn("the build runs nightly", 60_000))
        .unwrap();
    conv.recall("zebra", &SearchOptions::default()).unwrap();
}

/// An index that checks out by itself (checksums, ledger id, its last event) but was built
/// from other content at seq 1 — what reusing acknowledged seqs by hand would leave — is
/// rebuilt, never served.
#[test]
fn an_index_that_disagrees_with_the_ledger_is_rebuilt() {
    let (_old, new) = swapped_index();
    let store = Store::open(new.path()).unwrap();
    let mut conv = store.conversation("chat").unwrap();
    let hits = conv
        .recall("zebra", &SearchOptions::default())
        .unwrap()
        .hits;
    assert_eq!((hits[0].seq, hits[0].ts_ms), (1, 20_000));
    assert!(hits[0].text.contains("QQ-99"), "{}", hits[0].text);
    assert!(hits.iter().all(|h| !h.text.contains("ZX-81")));
}

/// `old`'s conversation (first turn `the zebra code is ZX-81`) given to `new`'s (first turn
/// `… QQ-99`, same ledger id): the same disagreement as above, as a projection sees it.
fn swapped_index() -> (tempfile::TempDir, tempfile::TempDir) {
    let (old, new) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    written(old.path(), "the zebra code is ZX-81", 10_000);
    written(new.path(), "the zebra code is QQ-99", 20_000);
    let header = |root: &Path| {
        let log = std::fs::read(root.join("chat/ledger.log")).unwrap();
        LogHeader::decode(&log[..64]).unwrap()
    };
    let id = header(old.path()).ledger_id;
    let log_path = new.path().join("chat/ledger.log");
    let mut log = std::fs::read(&log_path).unwrap();
    let created = header(new.path()).created_ms;
    log[..64].copy_from_slice(&LogHeader::new(id, created).encode());
    std::fs::write(&log_path, log).unwrap();
    std::fs::copy(
        old.path().join("chat/recall.sqlite"),
        new.path().join("chat/recall.sqlite"),
    )
    .unwrap();
    (old, new)
}

/// A projection of the newest turn with 2 recalled pages, under a budget too small for the
/// whole history (so the pages come from the first turn).
fn project_with_pages(root: &Path) -> ctxlog::Result<String> {
    let store = Store::open(root).unwrap();
    let p = store.project(&ctxlog::ops::ProjectRequest {
        conversation: "chat".into(),
        input: Some("what is the zebra code?".into()),
        max_bytes: Some(BUDGET),
        recall: Some(2),
        ..Default::default()
    })?;
    Ok(String::from_utf8(p.body).unwrap())
}

const BUDGET: u64 = 280;

/// The pages a projection recalls on its own are checked against the ledger as recall's hits
/// are: an index that disagrees is rebuilt, never served.
#[test]
fn a_projection_never_includes_a_page_the_ledger_contradicts() {
    let (_old, new) = swapped_index();
    let body = project_with_pages(new.path()).unwrap();
    assert!(body.contains("QQ-99"), "{body}");
    assert!(!body.contains("ZX-81"), "{body}");
}

/// A recalled page whose record is damaged fails the projection closed (class corrupt), as
/// every read of that record does.
#[test]
fn a_projection_recalling_a_damaged_record_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    {
        // Later turns, so the history the budget holds stops well before seq 1.
        let store = Store::open(dir.path()).unwrap();
        let mut conv = store.conversation("chat").unwrap();
        for i in 0..4 {
            let turn = serde_json::json!({"user": format!("filler {i}"), "assistant": "ok"});
            conv.commit_json(turn.to_string().as_bytes(), None).unwrap();
        }
    }
    let log = dir.path().join("chat/ledger.log");
    let mut bytes = std::fs::read(&log).unwrap();
    let at = bytes.windows(5).position(|w| w == b"zebra").unwrap();
    bytes[at + 1] ^= 0x20;
    std::fs::write(&log, bytes).unwrap();
    let err = project_with_pages(dir.path()).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Corrupt, "{err}");
}
