#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Opaque provider items (docs/design.md#p14-more-wire-formats). Failure class: a reasoning
//! item or thinking block lost, reordered, rewritten, sent to the wrong provider, or not
//! counted. Guarantee: each is sent byte for byte in its own format and place (a Responses
//! `input` item before the call it led to; an Anthropic block inside its assistant message,
//! before the `tool_use`), never in another format (the report counts what was left out and
//! says why), dropped with its turn, and counted: `report.tokens` equals `count` of the body
//! and no body is over its budget.

mod common;

use ctxlog_event::{Event, EventBody, ToolStatus};
use ctxlog_projection::{
    Policy, ProjectionRequest, SizeCache, SliceHistory, Tokenizer, WireFormat, count, project,
};
use serde_json::json;

const REASONING: &str = r#"{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Check the tree first."}],"encrypted_content":"gAAAAABoX1…=="}"#;
const THINKING: &str =
    r#"{"type":"thinking","thinking":"List the files, then answer.","signature":"EqQBCgIYAhIM…"}"#;

fn opaque(format: &str, item: &str) -> EventBody {
    serde_json::from_str(&format!(
        r#"{{"kind":"opaque","format":"{format}","item":{item}}}"#
    ))
    .unwrap()
}

fn events(big: usize) -> Vec<Event> {
    common::numbered(vec![
        EventBody::User {
            text: "old question ".repeat(big),
            parts: Vec::new(),
            provider_item: None,
        },
        opaque("openai-responses", REASONING),
        EventBody::Assistant {
            text: "old answer".into(),
            provider_item: None,
        },
        EventBody::User {
            text: "list files".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        opaque("openai-responses", REASONING),
        opaque("anthropic-messages", THINKING),
        EventBody::ToolCall {
            call_id: "c1".into(),
            tool: "shell".into(),
            arguments: json!({"cmd": "ls"}),
            provider_item: None,
        },
        EventBody::ToolResult {
            call_id: "c1".into(),
            tool: "shell".into(),
            status: ToolStatus::Ok,
            exit_code: Some(0),
            text: "a.txt".into(),
            artifact: None,
            parts: Vec::new(),
            provider_item: None,
        },
    ])
}

fn request(format: WireFormat, policy: Policy, input: Option<&str>) -> ProjectionRequest {
    let mut b = ProjectionRequest::builder();
    b.format(format)
        .model("m")
        .policy(policy)
        .max_tokens(100_000);
    if let Some(input) = input {
        b.input(input);
    }
    b.build().unwrap()
}

fn body_of(
    format: WireFormat,
    policy: Policy,
    input: Option<&str>,
) -> (String, ctxlog_projection::Report) {
    let events = events(1);
    let p = project(
        &SliceHistory::new(&events),
        &request(format, policy, input),
        &mut SizeCache::new(),
    )
    .unwrap();
    let c = count(&p.body, format, Tokenizer::O200k).unwrap();
    assert_eq!(
        (c.bytes, c.tokens),
        (p.report.bytes, p.report.tokens),
        "counted as sent"
    );
    (String::from_utf8(p.body).unwrap(), p.report)
}

#[test]
fn a_responses_body_sends_its_reasoning_items_verbatim_before_their_calls() {
    let (body, report) = body_of(WireFormat::OpenAiResponses, Policy::Turns, Some("next?"));
    let first_turn = format!(
        r#"{{"type":"message","role":"user","content":[{{"type":"input_text","text":"list files"}}]}},{REASONING},{{"type":"function_call","call_id":"c1""#
    );
    assert!(body.contains(&first_turn), "{body}");
    assert_eq!(body.matches(REASONING).count(), 2, "{body}");
    assert!(!body.contains("thinking"), "{body}");
    assert_eq!(
        (report.opaque.sent, report.opaque.left_out_other_format),
        (2, 1)
    );
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("1 belong to another wire format")),
        "{:?}",
        report.notes
    );
}

#[test]
fn an_anthropic_body_sends_its_thinking_block_first_in_the_assistant_message() {
    let (body, report) = body_of(WireFormat::AnthropicMessages, Policy::Turns, Some("next?"));
    let assistant =
        format!(r#"{{"role":"assistant","content":[{THINKING},{{"type":"tool_use","id":"c1""#);
    assert!(body.contains(&assistant), "{body}");
    assert!(!body.contains("reasoning"), "{body}");
    assert_eq!(
        (report.opaque.sent, report.opaque.left_out_other_format),
        (1, 2)
    );
}

#[test]
fn a_chat_body_carries_no_provider_item_and_says_so() {
    let (body, report) = body_of(WireFormat::OpenAiChat, Policy::Turns, Some("next?"));
    assert!(
        !body.contains("reasoning") && !body.contains("thinking"),
        "{body}"
    );
    assert_eq!(
        (report.opaque.sent, report.opaque.left_out_other_format),
        (0, 3)
    );
}

#[test]
fn the_agent_loop_sends_the_open_turns_items_and_summarises_older_ones() {
    let (body, report) = body_of(WireFormat::OpenAiResponses, Policy::Agent, None);
    assert_eq!(body.matches(REASONING).count(), 1, "{body}");
    assert!(
        body.ends_with(r#"{"type":"function_call_output","call_id":"c1","output":"a.txt"}]}"#),
        "{body}"
    );
    assert_eq!(report.opaque.sent, 1);
    assert_eq!(report.opaque.left_out_summarised, 1, "{report:?}");
}

#[test]
fn an_item_is_dropped_with_its_turn_and_counted_in_the_budget() {
    let events = events(400);
    let history = SliceHistory::new(&events);
    let mut b = ProjectionRequest::builder();
    b.format(WireFormat::OpenAiResponses)
        .model("m")
        .policy(Policy::Turns)
        .input("next?");
    let whole = project(&history, &b.clone().build().unwrap(), &mut SizeCache::new()).unwrap();
    // A budget one byte short of both turns keeps only the newest.
    let request = b.max_bytes(whole.report.bytes - 1).build().unwrap();
    let p = project(&history, &request, &mut SizeCache::new()).unwrap();
    let body = String::from_utf8(p.body.clone()).unwrap();
    assert_eq!(p.report.turns.kept, 1);
    assert_eq!(body.matches(REASONING).count(), 1, "{body}");
    assert!(p.report.bytes < whole.report.bytes);
    assert_eq!(p.report.opaque.sent, 1);
    // Without the newest turn's reasoning item the whole body is smaller by the item and a
    // comma, and by some tokens: it was counted.
    let without = common::numbered(events.iter().filter(|e| e.seq != 5).map(|e| e.body.clone()));
    let all = b.clone().max_bytes(1 << 20).build().unwrap();
    let smaller = project(&SliceHistory::new(&without), &all, &mut SizeCache::new()).unwrap();
    let whole = project(&history, &all, &mut SizeCache::new()).unwrap();
    assert_eq!(
        whole.report.bytes - smaller.report.bytes,
        REASONING.len() as u64 + 1
    );
    assert!(whole.report.tokens > smaller.report.tokens);
}

const OUTPUT_MESSAGE: &str = r#"{"id":"msg_1","content":[{"annotations":[],"text":"Listing.","type":"output_text","logprobs":[]}],"role":"assistant","status":"completed","type":"message"}"#;
const FUNCTION_CALL: &str = r#"{"arguments":"{\"cmd\":\"ls\"}","call_id":"c1","name":"shell","type":"function_call","id":"fc_1","status":"completed"}"#;
const TOOL_USE: &str = r#"{"type":"tool_use","id":"c2","name":"shell","input":{"cmd":"pwd"},"caller":{"type":"direct"}}"#;

/// A turn whose reply and calls carry the provider's own items: a Responses output message
/// and function call, and an Anthropic `tool_use` block.
fn with_provider_items() -> Vec<Event> {
    let given = |format: &str, item: &str| {
        serde_json::from_str(&format!(r#"{{"format":"{format}","item":{item}}}"#)).unwrap()
    };
    let result = |call_id: &str, text: &str| EventBody::ToolResult {
        call_id: call_id.into(),
        tool: "shell".into(),
        status: ToolStatus::Ok,
        exit_code: None,
        text: text.into(),
        artifact: None,
        parts: Vec::new(),
        provider_item: None,
    };
    common::numbered(vec![
        EventBody::User {
            text: "list files".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: "Listing.".into(),
            provider_item: Some(given("openai-responses", OUTPUT_MESSAGE)),
        },
        EventBody::ToolCall {
            call_id: "c1".into(),
            tool: "shell".into(),
            arguments: json!("{\"cmd\":\"ls\"}"),
            provider_item: Some(given("openai-responses", FUNCTION_CALL)),
        },
        result("c1", "a.txt"),
        EventBody::ToolCall {
            call_id: "c2".into(),
            tool: "shell".into(),
            arguments: json!({"cmd": "pwd"}),
            provider_item: Some(given("anthropic-messages", TOOL_USE)),
        },
        result("c2", "/w"),
        EventBody::Assistant {
            text: "Listing.".into(),
            provider_item: Some(given("openai-responses", OUTPUT_MESSAGE)),
        },
    ])
}

#[test]
fn a_reply_or_call_with_a_provider_item_is_sent_as_that_item_in_its_own_format_only() {
    let events = with_provider_items();
    let sent = |format: WireFormat, policy: Policy| {
        let p = project(
            &SliceHistory::new(&events),
            &request(format, policy, Some("next?")),
            &mut SizeCache::new(),
        )
        .unwrap();
        let c = count(&p.body, format, Tokenizer::O200k).unwrap();
        assert_eq!((c.bytes, c.tokens), (p.report.bytes, p.report.tokens));
        String::from_utf8(p.body).unwrap()
    };
    let responses = sent(WireFormat::OpenAiResponses, Policy::Turns);
    let want = format!(
        r#"{OUTPUT_MESSAGE},{FUNCTION_CALL},{{"type":"function_call_output","call_id":"c1","output":"a.txt"}},{{"type":"function_call","call_id":"c2","name":"shell","arguments":"{{\"cmd\":\"pwd\"}}"}},{{"type":"function_call_output","call_id":"c2","output":"/w"}},{OUTPUT_MESSAGE}"#
    );
    assert!(responses.contains(&want), "{responses}");
    assert!(!responses.contains("tool_use"), "{responses}");
    let anthropic = sent(WireFormat::AnthropicMessages, Policy::Turns);
    assert!(
        anthropic.contains(&format!(
            r#"{{"type":"tool_result","tool_use_id":"c1","content":"a.txt"}}]}},{{"role":"assistant","content":[{TOOL_USE}]}}"#
        )),
        "{anthropic}"
    );
    assert!(
        !anthropic.contains("msg_1") && !anthropic.contains("fc_1"),
        "{anthropic}"
    );
    let chat = sent(WireFormat::OpenAiChat, Policy::Turns);
    assert!(
        !chat.contains("msg_1") && !chat.contains("fc_1") && !chat.contains("caller"),
        "{chat}"
    );
    assert!(
        chat.contains(r#"{"role":"assistant","content":"Listing.","tool_calls":[{"id":"c1""#),
        "{chat}"
    );
}
