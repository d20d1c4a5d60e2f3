//! Words the model reads are true (docs/design.md#p13-true-words): notices and the agent context
//! name the recall tool only when the request offers it, and the Anthropic output reservation, when
//! the request gives none, scales with the token budget so that a plausible budget never fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use ctxlog_event::EventBody;
use ctxlog_projection::{
    DEFAULT_ANTHROPIC_MAX_TOKENS, Policy, ProjectionRequest, SizeCache, SliceHistory, WireFormat,
    default_anthropic_max_tokens, project,
};
use serde_json::json;

fn events() -> Vec<ctxlog_event::Event> {
    let mut bodies = Vec::new();
    for i in 0..6 {
        bodies.push(EventBody::User {
            text: format!("question {i}"),
        });
        bodies.push(EventBody::Assistant {
            text: format!("answer {i} {}", "words ".repeat(40)),
        });
    }
    common::numbered(bodies)
}

fn body(policy: Policy, recall_tool: bool) -> String {
    let events = events();
    let mut b = ProjectionRequest::builder();
    b.model("m")
        .input("next?")
        .policy(policy)
        .notice(true)
        .max_bytes(1200);
    if recall_tool {
        b.tools(vec![
            json!({"type":"function","function":{"name":"recall"}}),
        ]);
    }
    let p = project(
        &SliceHistory::new(&events),
        &b.build().unwrap(),
        &mut SizeCache::new(),
    )
    .unwrap();
    assert!(p.report.notice.is_some(), "something is left out");
    String::from_utf8(p.body).unwrap()
}

#[test]
fn the_recall_tool_is_named_only_when_offered() {
    for policy in [Policy::Turns, Policy::Agent] {
        let without = body(policy, false);
        assert!(!without.contains("recall tool"), "{without}");
        assert!(
            without.contains("are not included in this request")
                || without.contains("left out of this context")
        );
        let with = body(policy, true);
        assert!(with.contains("recalled with the recall tool"), "{with}");
    }
}

#[test]
fn the_anthropic_default_output_reservation_scales_with_the_token_budget() {
    assert_eq!(
        default_anthropic_max_tokens(None),
        DEFAULT_ANTHROPIC_MAX_TOKENS
    );
    assert_eq!(default_anthropic_max_tokens(Some(1500)), 375);
    assert_eq!(
        default_anthropic_max_tokens(Some(200_000)),
        DEFAULT_ANTHROPIC_MAX_TOKENS
    );
    let events = events();
    let request = ProjectionRequest::builder()
        .model("m")
        .format(WireFormat::AnthropicMessages)
        .input("next?")
        .max_tokens(1500)
        .build()
        .unwrap();
    assert_eq!(request.output_limit(), Some(375));
    let p = project(&SliceHistory::new(&events), &request, &mut SizeCache::new()).unwrap();
    assert!(p.report.tokens <= 1500 - 375);
    assert!(
        String::from_utf8(p.body)
            .unwrap()
            .starts_with(r#"{"model":"m","max_tokens":375,"#)
    );
}
