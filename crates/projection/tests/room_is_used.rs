//! Room is used (SPEC P12): a tool output stored as an artifact (its event holds a head/tail
//! excerpt) is sent in full when the budget allows, read through `History::artifact_text`,
//! and clipped, with the recall handle, only when its full text would not fit. The body never
//! exceeds the budget.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::convert::Infallible;

use ctxlog_event::{ArtifactRef, Event, EventBody, ToolStatus};
use ctxlog_projection::{
    History, ProjectionRequest, SeqRange, SizeCache, SliceHistory, WireFormat, count, project,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// A history whose tool results may have artifacts, held in memory.
struct WithArtifacts<'a> {
    events: SliceHistory<'a>,
    artifacts: HashMap<u64, String>,
}

impl History for WithArtifacts<'_> {
    type Error = Infallible;
    fn turn_count(&self) -> Result<usize, Infallible> {
        self.events.turn_count()
    }
    fn turn_seqs(&self, index: usize) -> Result<SeqRange, Infallible> {
        self.events.turn_seqs(index)
    }
    fn turn(&self, index: usize) -> Result<Vec<Event>, Infallible> {
        self.events.turn(index)
    }
    fn preamble(&self) -> Result<Vec<Event>, Infallible> {
        self.events.preamble()
    }
    fn artifact_text(&self, event: &Event) -> Result<Option<String>, Infallible> {
        Ok(self.artifacts.get(&event.seq).cloned())
    }
}

/// Lines of a tool output, `n` characters in all (ASCII, so the body's JSON escapes as
/// serde_json's does).
fn output(n: usize) -> String {
    let line = "drwxr-xr-x 2 root root 4096 Jan 1 00:00 some-directory-name\n";
    line.repeat(n / line.len() + 1)[..n].to_string()
}

/// The stored excerpt: like the ledger's, the first and last 1,000 characters.
fn stored(full: &str) -> String {
    format!("{}\n[…]\n{}", &full[..1000], &full[full.len() - 1000..])
}

fn conversation(size: usize) -> (Vec<Event>, String) {
    let full = output(size);
    let events = common::numbered(vec![
        EventBody::User {
            text: "What is in /srv?".into(),
        },
        EventBody::Assistant {
            text: "Looking.".into(),
        },
        EventBody::User {
            text: "List /var too.".into(),
        },
        EventBody::ToolCall {
            call_id: "c1".into(),
            tool: "shell".into(),
            arguments: json!({"cmd": "ls -l /var"}),
        },
        EventBody::ToolResult {
            call_id: "c1".into(),
            tool: "shell".into(),
            status: ToolStatus::Ok,
            exit_code: Some(0),
            text: stored(&full),
            artifact: Some(ArtifactRef {
                name: "sha256-00".into(),
                bytes: size as u64,
            }),
        },
    ]);
    (events, full)
}

/// The content string of the result in `body` (either format).
fn result_content(body: &Value) -> String {
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            blocks.iter().find(|b| b["type"] == "tool_result").unwrap()["content"]
                .as_str()
                .unwrap()
                .to_string()
        }
        other => panic!("unexpected content {other}"),
    }
}

fn replace_content(body: &mut Value, content: &str) {
    let last = body["messages"].as_array_mut().unwrap().last_mut().unwrap();
    if last["content"].is_string() {
        last["content"] = json!(content);
    } else {
        for b in last["content"].as_array_mut().unwrap() {
            if b["type"] == "tool_result" {
                b["content"] = json!(content);
            }
        }
    }
}

fn check(size: usize, max_bytes: u64, max_tokens: Option<u64>, format: WireFormat) {
    let (events, full) = conversation(size);
    let history = WithArtifacts {
        events: SliceHistory::new(&events),
        artifacts: HashMap::from([(5, full.clone())]),
    };
    let mut b = ProjectionRequest::builder();
    b.model("m")
        .format(format)
        .max_bytes(max_bytes)
        .reserve_output(100);
    if let Some(t) = max_tokens {
        b.max_tokens(t);
    }
    let request = b.build().unwrap();
    let Ok(p) = project(&history, &request, &mut SizeCache::new()) else {
        return; // the stored excerpt alone does not fit: nothing to grow
    };
    assert!(p.body.len() as u64 <= max_bytes);
    assert_eq!(p.report.bytes, p.body.len() as u64);
    if let Some(t) = max_tokens {
        assert!(p.report.tokens <= t - 100);
    }
    let body: Value = serde_json::from_slice(&p.body).unwrap();
    let content = result_content(&body);
    let header = "[artifact=sha256-00 bytes=".to_string() + &size.to_string() + " recall seq=5]\n";
    assert!(content.starts_with(&header), "{content}");
    if p.report.clips.is_empty() {
        assert_eq!(
            &content[header.len()..],
            full,
            "sent in full when not clipped"
        );
        return;
    }
    // Clipped: with the full text instead, the body would not fit.
    assert!(
        content.contains("chars clipped; recall seq=5]"),
        "{content}"
    );
    assert_eq!(p.report.clips[0].seq, 5);
    let mut whole = body.clone();
    replace_content(&mut whole, &(header + &full));
    let bytes = serde_json::to_vec(&whole).unwrap();
    let tokens = count(&bytes, format, request.tokenizer()).unwrap().tokens;
    assert!(
        bytes.len() as u64 > max_bytes || max_tokens.is_some_and(|t| tokens > t - 100),
        "clipped though the full text fits"
    );
}

#[test]
fn a_34_kb_output_goes_in_full_under_a_20000_token_budget() {
    for format in [WireFormat::OpenAiChat, WireFormat::AnthropicMessages] {
        let (events, full) = conversation(34_000);
        let history = WithArtifacts {
            events: SliceHistory::new(&events),
            artifacts: HashMap::from([(5, full.clone())]),
        };
        let request = ProjectionRequest::builder()
            .model("m")
            .format(format)
            .max_tokens(20_000)
            .reserve_output(1_000)
            .build()
            .unwrap();
        let p = project(&history, &request, &mut SizeCache::new()).unwrap();
        assert!(p.report.clips.is_empty());
        let body: Value = serde_json::from_slice(&p.body).unwrap();
        assert!(result_content(&body).ends_with(&full));
        check(34_000, 1_000_000, Some(20_000), format);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn never_over_budget_and_clipped_only_when_the_whole_would_not_fit(
        size in 2_100usize..40_000,
        max_bytes in 2_000u64..50_000,
        max_tokens in proptest::option::of(700u64..12_000),
        anthropic in any::<bool>(),
    ) {
        let format = if anthropic { WireFormat::AnthropicMessages } else { WireFormat::OpenAiChat };
        check(size, max_bytes, max_tokens, format);
    }
}
