#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Tool arguments nested deeper than `serde_json` parses (its recursion limit is 128 levels;
//! an Anthropic `tool_use` block adds three). Failure class: a message whose tokens were counted
//! by parsing its own JSON silently counted as an empty message, so a token budget could be
//! exceeded by everything inside the arguments. Guarantee: such a message is counted by its
//! whole JSON text (more than its fields' text), the body still fits the token budget, and
//! bytes stay exact.

use ctxlog_event::{Event, EventBody};
use ctxlog_projection::tokens::text_tokens;
use ctxlog_projection::{
    Policy, ProjectionRequest, SizeCache, SliceHistory, Tokenizer, WireFormat, project,
};
use serde_json::{Value, json};

#[test]
fn deeply_nested_arguments_are_counted_not_ignored() {
    let mut arguments: Value = json!("the payload word ".repeat(200));
    for _ in 0..126 {
        arguments = json!({ "a": arguments });
    }
    let events = vec![
        Event {
            seq: 1,
            ts_ms: 0,
            body: EventBody::User {
                text: "go".into(),
                parts: Vec::new(),
                provider_item: None,
            },
        },
        Event {
            seq: 2,
            ts_ms: 0,
            body: EventBody::ToolCall {
                call_id: "c1".into(),
                tool: "deep".into(),
                arguments,
                provider_item: None,
            },
        },
    ];
    let payload_tokens = text_tokens(Tokenizer::O200k, &"the payload word ".repeat(200));
    let history = SliceHistory::new(&events);
    let request = |max_tokens: Option<u64>| {
        let mut b = ProjectionRequest::builder();
        b.format(WireFormat::AnthropicMessages)
            .model("m")
            .input("next?")
            .policy(Policy::Turns)
            .reserve_output(10);
        if let Some(n) = max_tokens {
            b.max_tokens(n);
        }
        b.build().unwrap()
    };
    let full = project(&history, &request(None), &mut SizeCache::new()).unwrap();
    assert_eq!(full.report.bytes, full.body.len() as u64);
    assert_eq!(full.report.turns.kept, 1);
    assert!(
        full.report.tokens > payload_tokens,
        "{} tokens reported for a body holding {payload_tokens} tokens of payload",
        full.report.tokens
    );
    // A token budget below the payload cannot keep the turn.
    let tight = project(
        &history,
        &request(Some(payload_tokens + 10)),
        &mut SizeCache::new(),
    )
    .unwrap();
    assert_eq!(tight.report.turns.kept, 0);
}
