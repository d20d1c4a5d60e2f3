//! Failure class: a secret pasted into a conversation reaching disk — the ledger, an artifact
//! holding a large tool output, the recall index — or redaction breaking idempotent replay.
//!
//! Guarantee (docs/design.md#e5-redaction): with the default configuration, built-in key shapes are
//! replaced by `[redacted:KIND]` before anything is written: the key is in no byte of any file
//! under the store, the marker is in the ledger, and recall still finds the text around it. A
//! replayed commit that carried a secret is compared redacted, so it replays instead of
//! conflicting. What a user types besides turns is redacted the same way: an erasure's reason
//! (given, or made by a retention policy, or carried by an imported export's tombstone) is redacted
//! before the tombstone records it. Ids cannot be redacted (they name commits for erasure, replays
//! and imports): a commit id that matches a redaction rule is refused, on commit and on erase, with
//! nothing written and without echoing it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use ctxlog::ops::{
    CommitRequest, EraseRequest, EraseTarget, ExportRequest, GcRequest, ImportRequest, LogRequest,
    RecallRequest,
};
use ctxlog::{ErrorClass, RedactionConfig, Store, StoreConfig};

const KEY: &str = "sk-proj-Zq8WfakeFAKEfake0123456789abcdefXYZ";

/// Every file under `root`, with its bytes.
fn files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn turn_with_key() -> String {
    let big = format!("build log line\n{}", "compiling crate ok\n".repeat(2200));
    let output = format!("{big}export OPENAI_API_KEY={KEY}\n{big}");
    assert!(output.len() > 40_000);
    serde_json::json!({"events": [
        {"kind": "user", "text": format!("my deploy key is {KEY} for the walrus pipeline")},
        {"kind": "tool_call", "call_id": "c1", "tool": "shell",
         "arguments": {"cmd": "deploy", "env": {"OPENAI_API_KEY": KEY}, "argv": ["--key", KEY]}},
        {"kind": "tool_result", "call_id": "c1", "tool": "shell", "status": "ok", "text": output},
        {"kind": "note", "text": format!("rotate {KEY} soon")},
        {"kind": "assistant", "text": "Deployed the walrus pipeline."}
    ]})
    .to_string()
}

fn recall(store: &Store, query: &str) -> ctxlog::RecallResult {
    store
        .recall(&RecallRequest {
            conversation: "c".into(),
            query: query.into(),
            seq: None,
            offset: 0,
            limit: 10,
        })
        .unwrap()
}

#[test]
fn a_key_in_a_message_arguments_and_a_large_output_is_in_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let json = turn_with_key();
    let request = CommitRequest::from_json("c", json.as_bytes(), Some("t1")).unwrap();
    let receipt = store.commit(&request).unwrap();
    // Replaying the same commit (same secret inside) replays: compared in redacted form.
    let again = store.commit(&request).unwrap();
    assert!(again.replayed && again.last_seq == receipt.last_seq);

    // Recall finds the text around the key (and builds the index on disk).
    let hits = recall(&store, "walrus pipeline").hits;
    assert!(
        hits.iter()
            .any(|h| h.text.contains("[redacted:openai-key]")),
        "{hits:?}"
    );
    assert!(!recall(&store, "rotate").hits.is_empty());

    let log = store
        .log(&LogRequest {
            conversation: "c".into(),
            from: 1,
            limit: None,
        })
        .unwrap();
    let logged = serde_json::to_string(&log).unwrap();
    assert!(logged.contains("my deploy key is [redacted:openai-key] for the walrus"));
    assert!(
        logged.contains(r#""argv":["--key","[redacted:openai-key]"]"#),
        "{logged}"
    );
    assert!(
        logged.contains(r#""artifact":{"name":"sha256-"#),
        "the output became an artifact"
    );

    let all = files(dir.path());
    assert!(all.iter().any(|(p, _)| p.contains("artifacts")));
    assert!(all.iter().any(|(p, _)| p.ends_with("recall.sqlite")));
    let mut marker_in_ledger = false;
    for (path, bytes) in &all {
        assert!(!contains(bytes, KEY.as_bytes()), "the key is in {path}");
        assert!(
            !contains(bytes, &KEY.as_bytes()[8..24]),
            "part of the key is in {path}"
        );
        marker_in_ledger |=
            path.ends_with("ledger.log") && contains(bytes, b"[redacted:openai-key]");
    }
    assert!(marker_in_ledger);
    let scanned: usize = all.iter().map(|(_, b)| b.len()).sum();
    eprintln!(
        "secret scan: {} files, {scanned} bytes, key found 0 times",
        all.len()
    );
    let artifact = all.iter().find(|(p, _)| p.contains("artifacts")).unwrap();
    assert!(contains(
        &artifact.1,
        b"OPENAI_API_KEY=[redacted:openai-key]"
    ));
}

#[test]
fn a_store_may_switch_the_built_in_shapes_off_and_add_its_own_patterns() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        redaction: RedactionConfig {
            builtin: false,
            patterns: vec![ctxlog::redact::PatternConfig {
                name: "ticket".into(),
                regex: "TCK-[0-9]{6}".into(),
            }],
            ..RedactionConfig::default()
        },
        ..StoreConfig::default()
    };
    let store = ctxlog::StoreBuilder::dir(dir.path())
        .config(config)
        .build()
        .unwrap();
    let json = format!(r#"{{"user":"{KEY} and TCK-123456","assistant":"ok"}}"#);
    store
        .commit(&CommitRequest::from_json("c", json.as_bytes(), None).unwrap())
        .unwrap();
    let log = store
        .log(&LogRequest {
            conversation: "c".into(),
            from: 1,
            limit: None,
        })
        .unwrap();
    let text = serde_json::to_string(&log.events[0]).unwrap();
    assert!(
        text.contains(&format!("{KEY} and [redacted:ticket]")),
        "{text}"
    );
}

#[test]
fn a_bad_pattern_is_refused_when_configuring() {
    let err = StoreConfig::from_toml(
        "[redaction]\npatterns = [{ name = \"t\", regex = \"[unclosed\" }]",
        "ctxlog.toml",
    )
    .unwrap_err();
    assert_eq!(err.class(), ctxlog::ErrorClass::Usage);
    assert!(err.to_string().contains("invalid regex"), "{err}");
}

#[test]
fn a_low_level_handle_from_the_store_redacts_too() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut conv = store.conversation("c").unwrap();
    let turn = format!(r#"{{"user":"key {KEY}","assistant":"ok"}}"#);
    conv.commit_json(turn.as_bytes(), None).unwrap();
    let text = serde_json::to_string(&conv.events(1..=1).unwrap()).unwrap();
    assert!(text.contains("key [redacted:openai-key]"), "{text}");
}

fn commit(store: &Store, name: &str, json: &str, id: Option<&str>) -> ctxlog::Result<()> {
    store
        .commit(&CommitRequest::from_json(name, json.as_bytes(), id)?)
        .map(drop)
}

fn export(store: &Store, name: &str) -> String {
    let mut out = Vec::new();
    store
        .export(
            &ExportRequest {
                conversation: name.into(),
                salvage: false,
            },
            &mut out,
        )
        .unwrap();
    String::from_utf8(out).unwrap()
}

/// No byte of any file under `root` holds the key (nor a long part of it).
fn assert_key_in_no_file(root: &Path) {
    for (path, bytes) in files(root) {
        assert!(!contains(&bytes, KEY.as_bytes()), "the key is in {path}");
        assert!(
            !contains(&bytes, &KEY.as_bytes()[8..24]),
            "part of the key is in {path}"
        );
    }
}

#[test]
fn a_key_typed_into_an_erase_reason_is_in_no_file_and_not_exported() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for i in 0..3 {
        let turn = format!(r#"{{"user":"question {i}","assistant":"answer {i}"}}"#);
        commit(&store, "c", &turn, Some(&format!("t{i}"))).unwrap();
    }
    let reasons = [
        (
            EraseTarget::Seqs { from: 1, to: 2 },
            format!("pasted {KEY} by mistake"),
        ),
        (EraseTarget::Commit { id: "t1".into() }, KEY.to_string()),
    ];
    for (target, reason) in reasons {
        store
            .erase(&EraseRequest {
                conversation: "c".into(),
                target,
                reason,
            })
            .unwrap();
    }
    let exported = export(&store, "c");
    assert!(!exported.contains(KEY), "{exported}");
    assert!(
        exported.contains(r#""reason":"pasted [redacted:openai-key] by mistake""#)
            && exported.contains(r#""reason":"[redacted:openai-key]""#),
        "{exported}"
    );
    assert_key_in_no_file(dir.path());
}

#[test]
fn a_retention_reason_is_redacted_too() {
    // The only text of a retention reason a user types is the age rule; a store whose own
    // pattern matches it shows the reason is redacted on that path as on every other.
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        redaction: RedactionConfig {
            patterns: vec![ctxlog::redact::PatternConfig {
                name: "age".into(),
                regex: "3650d".into(),
            }],
            ..RedactionConfig::default()
        },
        ..StoreConfig::default()
    };
    let store = ctxlog::StoreBuilder::dir(dir.path())
        .config(config)
        .build()
        .unwrap();
    let turn = r#"{"user":"old","assistant":"news","ts":"2001-01-01T00:00:00Z"}"#;
    commit(&store, "c", turn, None).unwrap();
    commit(&store, "c", r#"{"user":"new","assistant":"news"}"#, None).unwrap();
    let gc = store
        .gc(&GcRequest {
            conversation: Some("c".into()),
            older_than: Some("3650d".into()),
            ..GcRequest::default()
        })
        .unwrap();
    assert_eq!(gc.seqs_removed, 2, "{gc:?}");
    let exported = export(&store, "c");
    assert!(
        exported.contains(r#""reason":"retention: older than [redacted:age]""#),
        "{exported}"
    );
    for (path, bytes) in files(dir.path()) {
        assert!(!contains(&bytes, b"3650d"), "the age rule is in {path}");
    }
}

#[test]
fn an_imported_tombstone_reason_is_redacted_and_the_import_still_replays() {
    // An export made where nothing was redacted carries the key in a reason.
    let plain_dir = tempfile::tempdir().unwrap();
    let plain = ctxlog::StoreBuilder::dir(plain_dir.path())
        .config(StoreConfig {
            redaction: RedactionConfig::off(),
            ..StoreConfig::default()
        })
        .build()
        .unwrap();
    commit(&plain, "c", r#"{"user":"q","assistant":"a"}"#, None).unwrap();
    commit(&plain, "c", r#"{"user":"q2","assistant":"a2"}"#, None).unwrap();
    plain
        .erase(&EraseRequest {
            conversation: "c".into(),
            target: EraseTarget::Seqs { from: 1, to: 2 },
            reason: format!("rotated {KEY}"),
        })
        .unwrap();
    let exported = export(&plain, "c");
    assert!(exported.contains(KEY));

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let request = ImportRequest {
        conversation: Some("c".into()),
        ..ImportRequest::default()
    };
    let first = store
        .import(&request, exported.as_bytes(), &mut |_| {})
        .unwrap();
    assert_eq!(first.events_written, 3, "{first:?}");
    assert_key_in_no_file(dir.path());
    assert!(export(&store, "c").contains(r#""reason":"rotated [redacted:openai-key]""#));
    // The same input again replays: its tombstone is compared in its redacted form.
    let again = store
        .import(&request, exported.as_bytes(), &mut |_| {})
        .unwrap();
    assert_eq!(again.events_written, 0, "{again:?}");
}

#[test]
fn a_commit_id_that_looks_like_a_secret_is_refused_on_every_path() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let turn = r#"{"user":"q","assistant":"a"}"#;
    let in_json = format!(r#"{{"id":"{KEY}","user":"q","assistant":"a"}}"#);
    // A commit's id is bad input (as an id over the length cap); an erase target naming
    // such an id is a usage error (as one naming no commit).
    let refused_as = |class: ErrorClass, e: ctxlog::Error| {
        assert_eq!(e.class(), class, "{e}");
        let message = e.to_string();
        assert!(
            !message.contains(&KEY[8..24]),
            "the message echoes the id: {message}"
        );
        message
    };
    let refused = |e| refused_as(ErrorClass::BadInput, e);
    // The id given in the JSON, or beside it (--id, Idempotency-Key), into a new conversation.
    for (json, id) in [(in_json.as_str(), None), (turn, Some(KEY))] {
        let message = refused(commit(&store, "c", json, id).unwrap_err());
        assert!(
            message.contains("looks like a secret")
                && message.contains("openai-key")
                && message.contains("erase by commit id")
                && message.contains("use an id that is not a secret"),
            "{message}"
        );
        assert!(
            files(dir.path()).iter().all(|(p, _)| !p.contains("/c/")),
            "{message}"
        );
    }
    // Through a handle, alone and in a batch (where the other commit is written).
    let mut handle = store.conversation("h").unwrap();
    refused(handle.commit_json(in_json.as_bytes(), None).unwrap_err());
    let good = ctxlog::parse_commit(turn.as_bytes(), Some("fine")).unwrap();
    let bad = ctxlog::parse_commit(turn.as_bytes(), Some(KEY)).unwrap();
    let results = handle.commit_batch(&[&bad, &good]).unwrap();
    assert!(results[0].is_err() && results[1].is_ok(), "{results:?}");
    drop(handle);
    // Erasing by such an id is refused too, and nothing changes.
    commit(&store, "c", turn, Some("t1")).unwrap();
    let before = files(dir.path());
    let message = refused_as(
        ErrorClass::Usage,
        store
            .erase(&EraseRequest {
                conversation: "c".into(),
                target: EraseTarget::Commit { id: KEY.into() },
                reason: "x".into(),
            })
            .unwrap_err(),
    );
    assert!(
        message.contains("--seqs") && message.contains("openai-key"),
        "{message}"
    );
    assert_eq!(files(dir.path()), before);
    assert_key_in_no_file(dir.path());
}
