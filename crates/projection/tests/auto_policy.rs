#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The default policy, `auto` (docs/design.md#p6-agent-tiers). Failure class: an agent
//! conversation projected with the chat policy (at `max_tokens` 4000 with 8 KB tool results,
//! the follow-up went out with no history at all), or a chat projected differently from
//! before. Guarantee: with a tool call or result among the newest turns a window could hold,
//! `auto` builds exactly the `agent` body; without, exactly the `turns` body; it looks at no
//! more than `AUTO_TURNS` turns and no further back than the window; when the agent context's
//! mandatory part does not fit, it falls back to `turns`; the report's `policy` names the
//! choice and its `policy_reason` says why.

mod common;

use ctxlog_event::{Event, EventBody, ToolStatus};
use ctxlog_projection::{
    AUTO_TURNS, Policy, ProjectionRequest, ProjectionRequestBuilder, SizeCache, SliceHistory,
    project,
};
use serde_json::json;

fn chat_turn(i: usize) -> Vec<EventBody> {
    vec![
        EventBody::User {
            text: format!("question {i}"),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: format!("answer {i}"),
            provider_item: None,
        },
    ]
}

fn tool_turn(i: usize, output_bytes: usize) -> Vec<EventBody> {
    let id = format!("c{i}");
    vec![
        EventBody::User {
            text: format!("inspect log {i}"),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::ToolCall {
            call_id: id.clone(),
            tool: "shell".into(),
            arguments: json!({"cmd": format!("cat log{i}")}),
            provider_item: None,
        },
        EventBody::ToolResult {
            call_id: id,
            tool: "shell".into(),
            status: ToolStatus::Ok,
            exit_code: Some(0),
            text: format!("line {i} ").repeat(output_bytes / 7),
            artifact: None,
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: format!("log {i} is fine"),
            provider_item: None,
        },
    ]
}

fn events(turns: Vec<Vec<EventBody>>) -> Vec<Event> {
    common::numbered(turns.into_iter().flatten())
}

fn builder() -> ProjectionRequestBuilder {
    let mut b = ProjectionRequest::builder();
    b.model("gpt-4o").input("What did the last log say?");
    b
}

fn body(events: &[Event], b: &ProjectionRequestBuilder) -> (Vec<u8>, ctxlog_projection::Report) {
    let p = project(
        &SliceHistory::new(events),
        &b.build().unwrap(),
        &mut SizeCache::new(),
    )
    .unwrap();
    (p.body, p.report)
}

/// `auto`'s body and report beside the body of the policy it should choose.
fn check_chooses(events: &[Event], b: &ProjectionRequestBuilder, expected: Policy) {
    let (auto_body, auto_report) = body(events, b);
    let mut explicit = b.clone();
    explicit.policy(expected);
    let (expected_body, _) = body(events, &explicit);
    assert_eq!(auto_report.policy, expected);
    assert_eq!(
        String::from_utf8(auto_body).unwrap(),
        String::from_utf8(expected_body).unwrap()
    );
    let why = auto_report.policy_reason.unwrap();
    assert!(
        why.starts_with(&format!("policy auto chose {}", expected.as_str())),
        "{why}"
    );
}

#[test]
fn auto_is_the_default() {
    assert_eq!(builder().build().unwrap().policy(), Policy::Auto);
}

#[test]
fn a_chat_gets_the_turns_policy_and_an_agent_the_agent_policy() {
    let chat = events((0..6).map(chat_turn).collect());
    let mut b = builder();
    b.max_bytes(600);
    check_chooses(&chat, &b, Policy::Turns);

    let agent = events((0..5).map(|i| tool_turn(i, 8_000)).collect());
    let mut b = builder();
    b.max_tokens(4_000);
    check_chooses(&agent, &b, Policy::Agent);
    // The agent context names every request of the conversation, not only the newest turn.
    let (auto_body, _) = body(&agent, &b);
    let text = String::from_utf8(auto_body).unwrap();
    for i in 0..5 {
        assert!(text.contains(&format!("inspect log {i}")), "{i}");
    }
}

#[test]
fn the_agent_loop_with_no_input_gets_the_agent_policy() {
    let mut turns: Vec<Vec<EventBody>> = (0..3).map(chat_turn).collect();
    let mut open = tool_turn(3, 100);
    open.pop(); // the model has not answered yet: the turn ends with the result
    turns.push(open);
    let events = events(turns);
    let mut b = ProjectionRequest::builder();
    b.model("gpt-4o").max_bytes(4_000);
    check_chooses(&events, &b, Policy::Agent);
}

#[test]
fn the_check_is_bounded_by_the_window_and_by_auto_turns() {
    // A tool turn followed by more chat turns than AUTO_TURNS: not looked at.
    let mut turns = vec![tool_turn(0, 100)];
    turns.extend((1..=AUTO_TURNS).map(chat_turn));
    let events_far = events(turns);
    check_chooses(&events_far, &builder(), Policy::Turns);

    // Within AUTO_TURNS but beyond what the window could hold: not looked at either.
    let mut turns = vec![tool_turn(0, 100)];
    turns.extend((1..=4).map(|i| {
        let mut t = chat_turn(i);
        t[1] = EventBody::Assistant {
            text: "long answer ".repeat(40),
            provider_item: None,
        };
        t
    }));
    let events_beyond = events(turns);
    let mut b = builder();
    b.max_bytes(1_000);
    check_chooses(&events_beyond, &b, Policy::Turns);
    // A window wide enough to reach it: agent.
    b.max_bytes(100_000);
    check_chooses(&events_beyond, &b, Policy::Agent);
}

#[test]
fn when_the_agent_context_cannot_fit_auto_uses_turns() {
    // Many tool turns pin many user requests in the agent context; one small turn fits.
    let mut turns: Vec<Vec<EventBody>> = (0..20).map(|i| tool_turn(i, 50)).collect();
    turns.push(chat_turn(20));
    let events = events(turns);
    let mut b = builder();
    b.max_bytes(420);
    let mut agent = b.clone();
    agent.policy(Policy::Agent);
    assert!(
        project(
            &SliceHistory::new(&events),
            &agent.build().unwrap(),
            &mut SizeCache::new()
        )
        .is_err()
    );
    let (auto_body, report) = body(&events, &b);
    let mut turns = b.clone();
    turns.policy(Policy::Turns);
    assert_eq!(auto_body, body(&events, &turns).0);
    assert_eq!(report.policy, Policy::Turns);
    assert!(
        report
            .policy_reason
            .unwrap()
            .ends_with("does not fit the budget: policy auto used turns")
    );
}
