//! Failure class: recognition that lives in one process (a client that dropped its oldest
//! messages is not found by another process or replica over the same store, or after an
//! outside commit), or a places index that keeps the digest of an erased message.
//!
//! Guarantees: the places index is the store's (the file store's `.places.sqlite`,
//! PostgreSQL's `places` table): a conversation committed by another store handle (another
//! process; here with plain commits, no gateway call) after this one served a trimmed-history
//! call is caught up before the next lookup, and a trimmed history of it continues it. An
//! erasure removes the rows of the erased events: none of their digests is left in the index
//! (nor in the bytes of the file store's index files).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use ctxlog::call::{CallRequest, ReplyRequest};
use ctxlog::ops::{CommitRequest, EraseRequest, EraseTarget};
use ctxlog::{Store, WireFormat};
use serde_json::{Value, json};

fn commit(store: &Store, conv: &str, user: &str, assistant: &str) {
    let turn = json!({"user": user, "assistant": assistant}).to_string();
    store
        .commit(&CommitRequest::from_json(conv, turn.as_bytes(), None).unwrap())
        .unwrap();
}

/// A headerless chat call of `messages` (OpenAI chat), its reply `answer` committed: the
/// conversation it went to.
fn call(store: &Store, messages: &[Value], answer: &str) -> String {
    let body = json!({"model": "gpt-4o", "messages": messages}).to_string();
    let prepared = store
        .prepare_call(&CallRequest {
            conversation: String::new(),
            format: WireFormat::OpenAiChat,
            body: body.into_bytes(),
            window: None,
            previous: None,
            recall_tool: false,
            model_windows: Vec::new(),
        })
        .unwrap();
    store
        .commit_reply(&ReplyRequest {
            conversation: prepared.conversation.clone(),
            format: WireFormat::OpenAiChat,
            message: json!({"role": "assistant", "content": answer}),
            after: Some(prepared.last_seq),
        })
        .unwrap();
    prepared.conversation
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn assistant(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

/// Store `a` serves a chat and a trimmed resend of it (its lookup state is built); store
/// `b` (another process) then commits conversation "outside" with plain commits; a trimmed
/// resend of "outside" through `a` continues it (`b` is closed first: a file store's writer
/// stays open, and takes the conversation's lock). Returns the chat's name.
fn outside_commit_is_recognised(a: &Store, b: Store) -> String {
    let mut chat = vec![user("Where is the first chat?")];
    let name = call(a, &chat, "Here.");
    chat.extend([assistant("Here."), user("And then?")]);
    assert_eq!(call(a, &chat, "Then there."), name);
    chat.extend([assistant("Then there."), user("Trimmed now")]);
    assert_eq!(call(a, &chat[2..], "Still here."), name);

    commit(&b, "outside", "Started elsewhere", "Elsewhere indeed");
    commit(&b, "outside", "A second question", "A second answer");
    drop(b);
    let trimmed = [
        user("A second question"),
        assistant("A second answer"),
        user("Continued through the first store"),
    ];
    assert_eq!(call(a, &trimmed, "Continued."), "outside");
    let log = a
        .log(&ctxlog::ops::LogRequest {
            conversation: "outside".into(),
            from: 1,
            limit: None,
        })
        .unwrap();
    assert_eq!(log.events.len(), 6, "each message once: {:?}", log.events);
    name
}

/// Erases the second turn of "outside" and shows that the digests only it had are gone from
/// `rows` (every (digest, conversation) of the index), once a lookup caught the index up.
fn erasure_removes_the_rows(store: &Store, rows: &dyn Fn() -> BTreeSet<(Vec<u8>, String)>) {
    let before = rows();
    let of_outside = |rows: &BTreeSet<(Vec<u8>, String)>| -> BTreeSet<Vec<u8>> {
        rows.iter()
            .filter(|(_, c)| c == "outside")
            .map(|(d, _)| d.clone())
            .collect()
    };
    assert_eq!(of_outside(&before).len(), 6);
    store
        .erase(&EraseRequest {
            conversation: "outside".into(),
            target: EraseTarget::Seqs { from: 3, to: 4 },
            reason: "user asked".into(),
        })
        .unwrap();
    assert!(of_outside(&rows()).is_empty(), "forgotten at once");
    // A lookup catches the conversation up again: the erased turn is not among its rows.
    call(store, &[user("A chat of its own")], "Sure.");
    let after = of_outside(&rows());
    assert_eq!(after.len(), 4);
    let erased: Vec<Vec<u8>> = of_outside(&before).difference(&after).cloned().collect();
    assert_eq!(erased.len(), 2, "the erased question and answer");
    let everywhere: BTreeSet<Vec<u8>> = rows().into_iter().map(|(d, _)| d).collect();
    for digest in &erased {
        assert!(!everywhere.contains(digest));
    }
}

/// The file index's rows, read with SQLite.
fn file_rows(root: &Path) -> BTreeSet<(Vec<u8>, String)> {
    let conn = rusqlite::Connection::open(root.join(".places.sqlite")).unwrap();
    let mut query = conn
        .prepare("SELECT digest, conversation FROM places")
        .unwrap();
    query
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn the_file_store_recognises_a_trimmed_history_committed_by_another_process_and_erasure_removes_its_places()
 {
    let dir = tempfile::tempdir().unwrap();
    let a = Store::open(dir.path()).unwrap();
    let b = Store::open(dir.path()).unwrap();
    outside_commit_is_recognised(&a, b);
    let before: BTreeSet<Vec<u8>> = file_rows(dir.path()).into_iter().map(|r| r.0).collect();
    erasure_removes_the_rows(&a, &|| file_rows(dir.path()));
    let after: BTreeSet<Vec<u8>> = file_rows(dir.path()).into_iter().map(|r| r.0).collect();
    // Nor are the erased digests' bytes anywhere in the index's files (secure_delete, the
    // WAL checkpointed and truncated).
    for digest in before.difference(&after) {
        for suffix in ["", "-wal"] {
            let path = dir.path().join(format!(".places.sqlite{suffix}"));
            let bytes = std::fs::read(&path).unwrap_or_default();
            assert!(
                !bytes.windows(32).any(|w| w == digest.as_slice()),
                "an erased digest in {}",
                path.display()
            );
        }
    }
}

#[test]
fn a_deleted_places_file_is_rebuilt_from_the_ledgers() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    commit(&store, "kept", "An old question", "An old answer");
    commit(&store, "kept", "A newer question", "A newer answer");
    let trimmed = [
        user("A newer question"),
        assistant("A newer answer"),
        user("More"),
    ];
    assert_eq!(call(&store, &trimmed, "Yes."), "kept");
    drop(store);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.path().join(format!(".places.sqlite{suffix}")));
    }
    let store = Store::open(dir.path()).unwrap();
    let trimmed = [
        user("A newer question"),
        assistant("A newer answer"),
        user("More"),
        assistant("Yes."),
        user("Again"),
    ];
    assert_eq!(call(&store, &trimmed, "Again yes."), "kept");
    assert_eq!(file_rows(dir.path()).len(), 8);
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_replicas_share_the_places_and_erasure_removes_them() {
    let Some(cluster) = common::pg::PgCluster::start() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let url = cluster.url("places", cache.path());
    let a = Store::open_url(&url).unwrap();
    let b = Store::open_url(&url).unwrap();
    outside_commit_is_recognised(&a, b);
    let rows = || -> BTreeSet<(Vec<u8>, String)> {
        cluster
            .psql("SELECT encode(digest, 'hex') || ' ' || conversation FROM places.places")
            .lines()
            .map(|l| {
                let (d, c) = l.split_once(' ').unwrap();
                (ctxlog_backend_hex(d), c.to_owned())
            })
            .collect()
    };
    erasure_removes_the_rows(&a, &rows);
}

#[cfg(feature = "postgres")]
fn ctxlog_backend_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}
