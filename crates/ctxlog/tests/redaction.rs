//! Failure class: a secret pasted into a conversation reaching disk — the ledger, an artifact
//! holding a large tool output, the recall index — or redaction breaking idempotent replay.
//!
//! Guarantee (SPEC E5): with the default configuration, built-in key shapes are replaced by
//! `[redacted:KIND]` before anything is written: the key is in no byte of any file under the
//! store, the marker is in the ledger, and recall still finds the text around it. A replayed
//! commit that carried a secret is compared redacted, so it replays instead of conflicting.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use ctxlog::ops::{CommitRequest, LogRequest, RecallRequest};
use ctxlog::{RedactionConfig, Store, StoreConfig};

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
