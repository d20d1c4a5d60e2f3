//! Recall reads only the conversation's own ledger and artifacts (docs/design.md#r7-scope,
//! docs/design.md#l6-artifacts). The full text of a large tool output (an artifact) is searchable,
//! including a word that straddles a page boundary; but an artifact file replaced by a symlink that
//! escapes the conversation is never read: its bytes never reach the index, and the event's inline
//! excerpt is indexed instead.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ctxlog::Store;
use ctxlog::ledger::{EventBody, NewCommit, ToolStatus};
use ctxlog::recall::SearchOptions;

/// A tool output of ~60 KB (over the 16 KiB artifact threshold) whose middle holds `word`
/// across the 1,920-character page stride.
fn big_output(word: &str) -> String {
    let filler = "lorem ipsum dolor sit amet ".repeat(4000);
    let mut text: String = filler
        .chars()
        .take(1920 * 10 - word.len() / 2 - 1)
        .collect();
    text.push(' ');
    text.push_str(word);
    text.push(' ');
    text.push_str(&filler[..40_000]);
    text
}

fn tool_turn(output: String) -> NewCommit {
    NewCommit::new(vec![
        EventBody::User {
            text: "run the scan".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::ToolCall {
            call_id: "c1".into(),
            tool: "scan".into(),
            arguments: serde_json::json!({}),
            provider_item: None,
        },
        EventBody::ToolResult {
            call_id: "c1".into(),
            tool: "scan".into(),
            status: ToolStatus::Ok,
            exit_code: Some(0),
            text: output,
            artifact: None,
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: "Scan done.".into(),
            provider_item: None,
        },
    ])
}

#[test]
fn artifact_text_is_searchable_across_a_page_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut conv = store.conversation("scan").unwrap();
    conv.commit(&tool_turn(big_output("xylophonequartz")))
        .unwrap();
    let event = conv.events(3..=3).unwrap().remove(0);
    let EventBody::ToolResult { artifact, text, .. } = &event.body else {
        panic!()
    };
    assert!(artifact.is_some(), "the output became an artifact");
    assert!(
        !text.contains("xylophonequartz"),
        "the word is only in the artifact"
    );

    let result = conv
        .recall("xylophonequartz", &SearchOptions::default())
        .unwrap();
    assert_eq!(result.hits.first().map(|h| h.seq), Some(3), "{result:?}");

    // Paging through the event returns its pages in order, with next_offset.
    let mut offset = 0;
    let mut pages = Vec::new();
    loop {
        let opts = SearchOptions {
            seq: Some(3),
            offset,
            limit: 10,
            ..Default::default()
        };
        let result = conv.recall("", &opts).unwrap();
        pages.extend(result.hits.iter().map(|h| h.page));
        match result.next_offset {
            Some(next) => offset = next,
            None => break,
        }
    }
    assert!(pages.len() > 20);
    assert_eq!(pages, (0..pages.len() as u32).collect::<Vec<_>>());
}

#[test]
fn an_artifact_symlinked_outside_the_conversation_is_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut conv = store.conversation("scan").unwrap();
    conv.commit(&tool_turn(big_output("harmlessword"))).unwrap();
    let event = conv.events(3..=3).unwrap().remove(0);
    let EventBody::ToolResult {
        artifact: Some(artifact),
        ..
    } = &event.body
    else {
        panic!()
    };

    // Swap the artifact for a symlink to a file outside the conversation.
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "topsecretpassphrase ".repeat(2000)).unwrap();
    let path = dir
        .path()
        .join("scan")
        .join("artifacts")
        .join(&artifact.name);
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(&secret, &path).unwrap();
    assert!(
        conv.ledger().artifact(artifact).is_err(),
        "the ledger refuses to follow it"
    );

    let stats = conv.reindex(&mut |_| {}).unwrap();
    assert_eq!(stats.artifact_failures, 1);
    let hits = conv
        .recall("topsecretpassphrase", &SearchOptions::default())
        .unwrap()
        .hits;
    assert!(hits.is_empty(), "outside bytes reached the index: {hits:?}");
    let index = std::fs::read(dir.path().join("scan").join("recall.sqlite")).unwrap();
    assert!(!index.windows(19).any(|w| w == b"topsecretpassphrase"));
}
