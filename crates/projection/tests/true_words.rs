//! Words the model reads are true (docs/design.md#p13-true-words): notices, the agent context
//! and clip markers name the recall tool only when the request offers it, the agent's status
//! line is true of the open turn too, and the Anthropic output reservation, when
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
            parts: Vec::new(),
            provider_item: None,
        });
        bodies.push(EventBody::Assistant {
            text: format!("answer {i} {}", "words ".repeat(40)),
            provider_item: None,
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

/// An open turn whose one result (6000 characters) must be clipped to fit 2000 bytes.
fn clipped_body(policy: Policy, format: WireFormat, recall_tool: bool) -> String {
    let events = common::numbered(vec![
        EventBody::User {
            text: "read the log".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::ToolCall {
            call_id: "c1".into(),
            tool: "shell".into(),
            arguments: json!({"cmd": "cat log"}),
            provider_item: None,
        },
        EventBody::ToolResult {
            call_id: "c1".into(),
            tool: "shell".into(),
            status: ctxlog_event::ToolStatus::Ok,
            exit_code: None,
            text: "log line ".repeat(666),
            artifact: None,
            parts: Vec::new(),
            provider_item: None,
        },
    ]);
    let mut b = ProjectionRequest::builder();
    b.model("m").format(format).policy(policy).max_bytes(2_000);
    let p = project_offering(&events, b, recall_tool);
    assert_eq!(p.report.clips.len(), 1, "{:?}", p.report);
    String::from_utf8(p.body).unwrap()
}

/// Projects `events` with the request `b` builds, offering the recall tool if `recall_tool`.
fn project_offering(
    events: &[ctxlog_event::Event],
    mut b: ctxlog_projection::ProjectionRequestBuilder,
    recall_tool: bool,
) -> ctxlog_projection::Projection {
    if recall_tool {
        b.tools(vec![
            json!({"type":"function","name":"recall","parameters":{},"strict":false}),
        ]);
    }
    project(
        &SliceHistory::new(events),
        &b.build().unwrap(),
        &mut SizeCache::new(),
    )
    .unwrap()
}

#[test]
fn clip_markers_name_the_recall_tool_only_when_offered() {
    for policy in [Policy::Turns, Policy::Agent] {
        for format in WireFormat::ALL {
            let without = clipped_body(policy, format, false);
            assert!(without.contains(" chars clipped from seq=3]"), "{without}");
            assert!(!without.contains("recall"), "{without}");
            let with = clipped_body(policy, format, true);
            assert!(
                with.contains(" chars clipped; recall tool: seq=3]"),
                "{with}"
            );
        }
    }
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

/// An agent-loop step: the open turn's one result failed, and the context's status line (which
/// precedes the open turn in the body) must say so, not "none".
fn failed_step_body(format: WireFormat, recall_tool: bool) -> String {
    let events = common::numbered(vec![
        EventBody::User {
            text: "fix the build".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::ToolCall {
            call_id: "c1".into(),
            tool: "shell".into(),
            arguments: json!({"cmd": "cargo check"}),
            provider_item: None,
        },
        EventBody::ToolResult {
            call_id: "c1".into(),
            tool: "shell".into(),
            status: ctxlog_event::ToolStatus::Error,
            exit_code: Some(101),
            text: "error[E0308]: mismatched types".into(),
            artifact: None,
            parts: Vec::new(),
            provider_item: None,
        },
    ]);
    let mut b = ProjectionRequest::builder();
    b.model("m").format(format).policy(Policy::Agent);
    String::from_utf8(project_offering(&events, b, recall_tool).body).unwrap()
}

#[test]
fn the_agent_status_line_covers_the_open_turn() {
    for format in WireFormat::ALL {
        let without = failed_step_body(format, false);
        assert!(
            without.contains(
                "latest failure: result shell id=c1 status=error exit_code=101 (seq=3); \
                 latest possible change: seq 2 call shell id=c1"
            ),
            "{without}"
        );
        assert!(!without.contains("recall"), "{without}");
        let with = failed_step_body(format, true);
        assert!(with.contains("exit_code=101 (recall seq=3)"), "{with}");
    }
}
