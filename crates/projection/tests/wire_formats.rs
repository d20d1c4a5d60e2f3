#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The exact bodies of both wire formats (docs/design.md#p1-wire-formats,
//! docs/design.md#p5-whole-turns, docs/design.md#p7-omission-notice). Failure class: a body the
//! provider rejects (an unpaired tool call, a system role inside Anthropic messages,
//! non-alternating roles, a field in the wrong shape) or one with fields nobody asked for.
//! Guarantee: the bodies below, byte for byte — tool calls with their results in call order, an
//! interrupted call answered "interrupted: effects unknown", notes as documented, pinned notes
//! first, the omission notice counted, and `tools` / output-limit fields only when asked for.

mod common;

use ctxlog_event::{ArtifactRef, Event, EventBody, SystemMarker, ToolStatus};
use ctxlog_projection::{
    Policy, ProjectionRequest, SizeCache, SliceHistory, Tokenizer, WireFormat, count, project,
};
use serde_json::json;

fn events() -> Vec<Event> {
    let bodies = vec![
        EventBody::Note {
            text: "old rule".into(),
            pinned: true,
            supersedes: None,
            provider_item: None,
        },
        EventBody::Note {
            text: "deploy only on Fridays".into(),
            pinned: true,
            supersedes: Some(1),
            provider_item: None,
        },
        EventBody::User {
            text: "first \"question\"".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: "first answer".into(),
            provider_item: None,
        },
        EventBody::User {
            text: "list files\nplease".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: "Checking.".into(),
            provider_item: None,
        },
        EventBody::ToolCall {
            call_id: "c1".into(),
            tool: "shell".into(),
            arguments: json!({"cmd": "ls"}),
            provider_item: None,
        },
        EventBody::ToolCall {
            call_id: "c2".into(),
            tool: "shell".into(),
            arguments: json!({"cmd": "du"}),
            provider_item: None,
        },
        EventBody::ToolCall {
            call_id: "c3".into(),
            tool: "shell".into(),
            arguments: json!({"cmd": "rm x"}),
            provider_item: None,
        },
        EventBody::Note {
            text: "user is in a hurry".into(),
            pinned: false,
            supersedes: None,
            provider_item: None,
        },
        EventBody::ToolResult {
            call_id: "c2".into(),
            tool: "shell".into(),
            status: ToolStatus::Error,
            exit_code: Some(1),
            text: "du: denied".into(),
            artifact: Some(ArtifactRef {
                name: "sha256-ab".into(),
                bytes: 10,
            }),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::ToolResult {
            call_id: "c1".into(),
            tool: "shell".into(),
            status: ToolStatus::Ok,
            exit_code: Some(0),
            text: "a.txt 😀".into(),
            artifact: None,
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::System {
            marker: SystemMarker::Import { source: "x".into() },
        },
        EventBody::Assistant {
            text: "Done.".into(),
            provider_item: None,
        },
    ];
    common::numbered(bodies)
}

fn request(format: WireFormat) -> ctxlog_projection::ProjectionRequestBuilder {
    let mut b = ProjectionRequest::builder();
    b.policy(Policy::Turns);
    b.format(format).model("m").system("sys").input("next?");
    b
}

fn body(format: WireFormat, b: &ctxlog_projection::ProjectionRequestBuilder) -> String {
    let events = events();
    let p = project(
        &SliceHistory::new(&events),
        &b.build().unwrap(),
        &mut SizeCache::new(),
    )
    .unwrap();
    assert_eq!(p.report.bytes, p.body.len() as u64);
    assert_eq!(
        p.report.tokens,
        count(&p.body, format, Tokenizer::O200k).unwrap().tokens
    );
    String::from_utf8(p.body).unwrap()
}

const OPENAI: &str = concat!(
    r#"{"model":"m","messages":["#,
    r#"{"role":"system","content":"sys"},"#,
    r#"{"role":"system","content":"Note: deploy only on Fridays"},"#,
    r#"{"role":"user","content":"first \"question\""},"#,
    r#"{"role":"assistant","content":"first answer"},"#,
    r#"{"role":"user","content":"list files\nplease"},"#,
    r#"{"role":"assistant","content":"Checking.","tool_calls":["#,
    r#"{"id":"c1","type":"function","function":{"name":"shell","arguments":"{\"cmd\":\"ls\"}"}},"#,
    r#"{"id":"c2","type":"function","function":{"name":"shell","arguments":"{\"cmd\":\"du\"}"}},"#,
    r#"{"id":"c3","type":"function","function":{"name":"shell","arguments":"{\"cmd\":\"rm x\"}"}}]},"#,
    r#"{"role":"tool","tool_call_id":"c1","content":"a.txt 😀"},"#,
    r#"{"role":"tool","tool_call_id":"c2","content":"[status=error exit_code=1 artifact=sha256-ab bytes=10]\ndu: denied"},"#,
    r#"{"role":"tool","tool_call_id":"c3","content":"interrupted: effects unknown"},"#,
    r#"{"role":"system","content":"Note: user is in a hurry"},"#,
    r#"{"role":"assistant","content":"Done."},"#,
    r#"{"role":"user","content":"next?"}]}"#,
);

const ANTHROPIC: &str = concat!(
    r#"{"model":"m","max_tokens":4096,"system":"sys","messages":["#,
    r#"{"role":"user","content":[{"type":"text","text":"Note: deploy only on Fridays"},{"type":"text","text":"first \"question\""}]},"#,
    r#"{"role":"assistant","content":[{"type":"text","text":"first answer"}]},"#,
    r#"{"role":"user","content":[{"type":"text","text":"list files\nplease"}]},"#,
    r#"{"role":"assistant","content":[{"type":"text","text":"Checking."},"#,
    r#"{"type":"tool_use","id":"c1","name":"shell","input":{"cmd":"ls"}},"#,
    r#"{"type":"tool_use","id":"c2","name":"shell","input":{"cmd":"du"}},"#,
    r#"{"type":"tool_use","id":"c3","name":"shell","input":{"cmd":"rm x"}}]},"#,
    r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"a.txt 😀"},"#,
    r#"{"type":"tool_result","tool_use_id":"c2","content":"[status=error exit_code=1 artifact=sha256-ab bytes=10]\ndu: denied","is_error":true},"#,
    r#"{"type":"tool_result","tool_use_id":"c3","content":"interrupted: effects unknown","is_error":true},"#,
    r#"{"type":"text","text":"Note: user is in a hurry"}]},"#,
    r#"{"role":"assistant","content":[{"type":"text","text":"Done."}]},"#,
    r#"{"role":"user","content":[{"type":"text","text":"next?"}]}]}"#,
);

const RESPONSES: &str = concat!(
    r#"{"model":"m","instructions":"sys","input":["#,
    r#"{"type":"message","role":"system","content":[{"type":"input_text","text":"Note: deploy only on Fridays"}]},"#,
    r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"first \"question\""}]},"#,
    r#"{"type":"message","role":"assistant","content":"first answer"},"#,
    r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"list files\nplease"}]},"#,
    r#"{"type":"message","role":"assistant","content":"Checking."},"#,
    r#"{"type":"function_call","call_id":"c1","name":"shell","arguments":"{\"cmd\":\"ls\"}"},"#,
    r#"{"type":"function_call","call_id":"c2","name":"shell","arguments":"{\"cmd\":\"du\"}"},"#,
    r#"{"type":"function_call","call_id":"c3","name":"shell","arguments":"{\"cmd\":\"rm x\"}"},"#,
    r#"{"type":"function_call_output","call_id":"c1","output":"a.txt 😀"},"#,
    r#"{"type":"function_call_output","call_id":"c2","output":"[status=error exit_code=1 artifact=sha256-ab bytes=10]\ndu: denied"},"#,
    r#"{"type":"function_call_output","call_id":"c3","output":"interrupted: effects unknown"},"#,
    r#"{"type":"message","role":"system","content":[{"type":"input_text","text":"Note: user is in a hurry"}]},"#,
    r#"{"type":"message","role":"assistant","content":"Done."},"#,
    r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"next?"}]}]}"#,
);

#[test]
fn openai_responses_body_is_exactly_the_documented_one() {
    assert_eq!(
        body(
            WireFormat::OpenAiResponses,
            &request(WireFormat::OpenAiResponses)
        ),
        RESPONSES
    );
    let tool =
        json!({"type":"function","name":"recall","parameters":{"type":"object"},"strict":false});
    let mut b = request(WireFormat::OpenAiResponses);
    b.tools(vec![tool]).reserve_output(256);
    let text = body(WireFormat::OpenAiResponses, &b);
    assert!(text.ends_with(r#"[{"type":"input_text","text":"next?"}]}],"tools":[{"type":"function","name":"recall","parameters":{"type":"object"},"strict":false}],"max_output_tokens":256}"#), "{text}");
}

#[test]
fn openai_chat_body_is_exactly_the_documented_one() {
    assert_eq!(
        body(WireFormat::OpenAiChat, &request(WireFormat::OpenAiChat)),
        OPENAI
    );
}

#[test]
fn anthropic_messages_body_is_exactly_the_documented_one() {
    assert_eq!(
        body(
            WireFormat::AnthropicMessages,
            &request(WireFormat::AnthropicMessages)
        ),
        ANTHROPIC
    );
}

#[test]
fn tools_and_output_limit_appear_only_when_asked_for_in_the_documented_order() {
    let tool = json!({"type":"function","function":{"name":"recall","parameters":{"type":"object","properties":{}}}});
    let mut b = request(WireFormat::OpenAiChat);
    b.tools(vec![tool.clone()]).reserve_output(256);
    let text = body(WireFormat::OpenAiChat, &b);
    assert!(text.ends_with(r#"{"role":"user","content":"next?"}],"tools":[{"type":"function","function":{"name":"recall","parameters":{"type":"object","properties":{}}}}],"max_completion_tokens":256}"#), "{text}");
    let mut b = request(WireFormat::AnthropicMessages);
    b.tools(vec![
        json!({"name":"recall","input_schema":{"type":"object"}}),
    ])
    .reserve_output(256);
    let text = body(WireFormat::AnthropicMessages, &b);
    assert!(
        text.starts_with(r#"{"model":"m","max_tokens":256,"system":"sys","messages":["#),
        "{text}"
    );
    assert!(
        text.ends_with(r#"],"tools":[{"name":"recall","input_schema":{"type":"object"}}]}"#),
        "{text}"
    );
}

#[test]
fn the_omission_notice_says_how_many_turns_which_seqs_and_how_to_recall() {
    let mut events = events();
    // The dropped turn must be larger than the notice that replaces it.
    events[3].body = EventBody::Assistant {
        text: "first answer, at length. ".repeat(20),
        provider_item: None,
    };
    let history = SliceHistory::new(&events);
    // The notice names the recall tool only when the request offers it
    // (docs/design.md#p13-true-words).
    let recall_tool = || vec![json!({"type":"function","function":{"name":"recall"}})];
    let full = project(
        &history,
        &request(WireFormat::OpenAiChat)
            .tools(recall_tool())
            .build()
            .unwrap(),
        &mut SizeCache::new(),
    )
    .unwrap();
    let with_notice = |budget: u64| {
        let mut b = request(WireFormat::OpenAiChat);
        b.notice(true).max_bytes(budget).tools(recall_tool());
        project(&history, &b.build().unwrap(), &mut SizeCache::new()).unwrap()
    };
    assert_eq!(
        with_notice(full.report.bytes).report.notice,
        None,
        "nothing left out"
    );
    let p = (0..full.report.bytes)
        .rev()
        .map(with_notice)
        .find(|p| p.report.turns.kept == 1)
        .unwrap();
    let text = String::from_utf8(p.body.clone()).unwrap();
    let notice = "[ctxlog] 1 earlier turn(s), seq 3-4, are not included in this request. They are stored and can be recalled with the recall tool (by query, or by seq=N).";
    assert!(text.contains(&format!(r#"{{"role":"system","content":"{notice}"}},{{"role":"user","content":"list files\nplease"}}"#)), "{text}");
    assert_eq!(p.report.notice.as_deref(), Some(notice));
    assert_eq!(p.report.turns.kept, 1);
    assert_eq!(
        p.report.dropped,
        vec![ctxlog_projection::SeqRange::new(1, 4)]
    );
    assert!(p.report.bytes < full.report.bytes);
    let tiers: Vec<_> = p.report.tiers.iter().map(|t| t.tier).collect();
    use ctxlog_projection::Tier::*;
    assert_eq!(
        tiers,
        vec![Envelope, System, Pinned, Notice, History, Input]
    );
    assert_eq!(
        p.report.tiers.iter().map(|t| t.bytes).sum::<u64>(),
        p.report.bytes
    );
    assert_eq!(
        p.report.tiers.iter().map(|t| t.tokens).sum::<u64>(),
        p.report.tokens
    );
    let json = serde_json::to_value(&p.report).unwrap();
    assert_eq!(json["notice"], notice);
    assert_eq!(json["turns"], json!({"total": 2, "kept": 1, "dropped": 1}));
}

#[test]
fn recall_unavailable_is_reported_and_pages_are_counted() {
    let events = events();
    let history = SliceHistory::new(&events);
    let mut b = request(WireFormat::OpenAiChat);
    b.recall_unavailable("index damaged: run ctxlog reindex");
    let p = project(&history, &b.build().unwrap(), &mut SizeCache::new()).unwrap();
    let json = serde_json::to_value(&p.report).unwrap();
    assert_eq!(
        json["recall"],
        json!({"k": 0, "included": [], "skipped": [], "unavailable": "index damaged: run ctxlog reindex"})
    );
}

#[test]
fn anthropic_leaves_out_whitespace_only_text_and_refuses_a_blank_input() {
    // Anthropic answers 400 "text content blocks must contain non-whitespace text" to a
    // whitespace-only text block, and rejects a blank system prompt.
    let bodies = vec![
        EventBody::User {
            text: "hi".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: " \n".into(),
            provider_item: None,
        },
        EventBody::User {
            text: "\t".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: "ok".into(),
            provider_item: None,
        },
    ];
    let events: Vec<Event> = common::numbered(bodies);
    let mut b = ProjectionRequest::builder();
    b.policy(Policy::Turns);
    b.format(WireFormat::AnthropicMessages)
        .model("m")
        .system("  ")
        .input("next?");
    let p = project(
        &SliceHistory::new(&events),
        &b.build().unwrap(),
        &mut SizeCache::new(),
    )
    .unwrap();
    assert_eq!(p.report.bytes, p.body.len() as u64);
    assert_eq!(
        String::from_utf8(p.body).unwrap(),
        concat!(
            r#"{"model":"m","max_tokens":4096,"messages":["#,
            r#"{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":"[ctxlog] (no user message)"}]},"#,
            r#"{"role":"assistant","content":[{"type":"text","text":"ok"}]},"#,
            r#"{"role":"user","content":[{"type":"text","text":"next?"}]}]}"#
        )
    );
    b.input(" \n");
    assert!(matches!(
        b.build(),
        Err(ctxlog_projection::Error::InvalidRequest { .. })
    ));
    // OpenAI accepts whitespace: it is sent as given.
    b.format(WireFormat::OpenAiChat);
    assert!(b.build().is_ok());
}

#[test]
fn a_notice_that_cannot_fit_does_not_displace_turns_that_do() {
    // Turns smaller than the notice: before the fix, every budget below the full body kept
    // zero turns and sent no notice either, though the newest turn fit.
    let bodies = vec![
        EventBody::User {
            text: "a".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: "b".into(),
            provider_item: None,
        },
        EventBody::User {
            text: "c".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: "d".into(),
            provider_item: None,
        },
    ];
    let events: Vec<Event> = common::numbered(bodies);
    let history = SliceHistory::new(&events);
    let project_at = |max: u64| {
        let mut b = ProjectionRequest::builder();
        b.policy(Policy::Turns);
        b.model("m").input("q").notice(true).max_bytes(max);
        project(&history, &b.build().unwrap(), &mut SizeCache::new()).unwrap()
    };
    let newest = r#"{"model":"m","messages":[{"role":"user","content":"c"},{"role":"assistant","content":"d"},{"role":"user","content":"q"}]}"#;
    let p = project_at(newest.len() as u64);
    assert_eq!(String::from_utf8(p.body).unwrap(), newest);
    assert_eq!(p.report.turns.kept, 1);
    assert_eq!(p.report.notice, None);
    let drops: Vec<_> = p
        .report
        .drops
        .iter()
        .map(|d| (d.tier, d.seqs, d.reason.as_str()))
        .collect();
    use ctxlog_projection::{SeqRange, Tier};
    assert_eq!(
        drops,
        vec![
            (Tier::History, SeqRange::new(1, 2), "budget"),
            (Tier::Notice, SeqRange::new(1, 2), "no_room"),
        ]
    );
    let ours = project_at(newest.len() as u64 + 3).body;
    let mut b = ProjectionRequest::builder();
    b.policy(Policy::Turns);
    b.model("m")
        .input("q")
        .notice(true)
        .max_bytes(newest.len() as u64 + 3);
    let naive = ctxlog_projection::naive::project_naive(&history, &b.build().unwrap()).unwrap();
    assert_eq!(ours, naive);
}

#[test]
fn arguments_stored_as_openai_strings_are_not_encoded_twice() {
    // OpenAI returns `arguments` as a string; an application that stores it as given must get
    // it back verbatim (not as a JSON string literal inside the string), and Anthropic must
    // get the object it encodes as `input`.
    let bodies = vec![
        EventBody::User {
            text: "ls".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::ToolCall {
            call_id: "c1".into(),
            tool: "shell".into(),
            arguments: json!("{\"cmd\":\"ls\"}"),
            provider_item: None,
        },
        EventBody::ToolResult {
            call_id: "c1".into(),
            tool: "shell".into(),
            status: ToolStatus::Ok,
            exit_code: None,
            text: "a".into(),
            artifact: None,
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::ToolCall {
            call_id: "c2".into(),
            tool: "shell".into(),
            arguments: json!("not json"),
            provider_item: None,
        },
    ];
    let events: Vec<Event> = common::numbered(bodies);
    let text = |format: WireFormat| {
        let mut b = ProjectionRequest::builder();
        b.policy(Policy::Turns);
        b.format(format).model("m").input("next?");
        let p = project(
            &SliceHistory::new(&events),
            &b.build().unwrap(),
            &mut SizeCache::new(),
        )
        .unwrap();
        assert_eq!(p.report.bytes, p.body.len() as u64);
        String::from_utf8(p.body).unwrap()
    };
    let openai = text(WireFormat::OpenAiChat);
    assert!(
        openai.contains(r#""function":{"name":"shell","arguments":"{\"cmd\":\"ls\"}"}}]}"#),
        "{openai}"
    );
    assert!(openai.contains(r#""arguments":"not json"}}]}"#), "{openai}");
    let anthropic = text(WireFormat::AnthropicMessages);
    assert!(
        anthropic.contains(r#"{"type":"tool_use","id":"c1","name":"shell","input":{"cmd":"ls"}}"#),
        "{anthropic}"
    );
    assert!(
        anthropic.contains(
            r#"{"type":"tool_use","id":"c2","name":"shell","input":{"value":"not json"}}"#
        ),
        "{anthropic}"
    );
}

#[test]
fn the_agent_context_marks_every_call_whose_result_never_arrived() {
    // Interrupted calls (docs/design.md#p5-whole-turns) in the agent context: only the latest call
    // was flagged (in the status line); an older call without a result read like one that had
    // completed.
    let events = events();
    let mut b = request(WireFormat::OpenAiChat);
    b.policy(ctxlog_projection::Policy::Agent);
    let p = project(
        &SliceHistory::new(&events),
        &b.build().unwrap(),
        &mut SizeCache::new(),
    )
    .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&p.body).unwrap();
    let context = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .find(|c| c.starts_with("[ctxlog agent context]"))
        .unwrap();
    assert!(
        context.contains(
            "[seq 9] call shell id=c3 {\"cmd\":\"rm x\"} (no result: interrupted, effects unknown)\n"
        ),
        "{context}"
    );
    assert!(
        context.contains("[seq 7] call shell id=c1 {\"cmd\":\"ls\"}\n"),
        "{context}"
    );
    assert_eq!(p.report.bytes, p.body.len() as u64);
}

#[test]
fn extreme_budget_numbers_are_refused_or_met_without_panicking() {
    // Budget arithmetic on u64 limits: no overflow, no panic; a reservation equal to the
    // token limit is a typed error, a reservation one below leaves a one-token input budget.
    let events = events();
    let history = SliceHistory::new(&events);
    for format in WireFormat::ALL {
        let mut b = request(format);
        b.max_tokens(u64::MAX).reserve_output(u64::MAX);
        assert!(matches!(
            b.build(),
            Err(ctxlog_projection::Error::InvalidBudget { .. })
        ));
        b.reserve_output(u64::MAX - 1);
        match project(&history, &b.build().unwrap(), &mut SizeCache::new()) {
            Err(ctxlog_projection::Error::MandatoryExceedsBudget {
                input_token_limit, ..
            }) => assert_eq!(input_token_limit, Some(1)),
            other => panic!("{other:?}"),
        }
        let mut b = request(format);
        b.max_bytes(u64::MAX)
            .max_tokens(u64::MAX)
            .reserve_output(u64::MAX / 2);
        let p = project(&history, &b.build().unwrap(), &mut SizeCache::new()).unwrap();
        assert_eq!(p.report.turns.kept, 2);
        assert!(
            String::from_utf8(p.body)
                .unwrap()
                .contains(&(u64::MAX / 2).to_string())
        );
    }
}

/// A result stored as an artifact names the recall tool in its header (`recall seq=Q`) only
/// when the request offers the tool: every word the model reads is true (P13), in every
/// format and both policies.
#[test]
fn a_results_header_names_the_recall_tool_only_when_it_is_offered() {
    for format in WireFormat::ALL {
        let recall = match format {
            WireFormat::OpenAiResponses => {
                json!({"type":"function","name":"recall","parameters":{"type":"object"}})
            }
            _ => json!({"type":"function","function":{"name":"recall"}}),
        };
        for policy in [Policy::Turns, Policy::Agent] {
            let mut plain = request(format);
            plain.policy(policy);
            let without = body(format, &plain);
            assert!(without.contains("artifact=sha256-ab bytes=10"), "{without}");
            assert!(
                !without.contains("recall seq="),
                "{format:?} {policy:?}: {without}"
            );
            let mut offered = request(format);
            offered.policy(policy).tools(vec![recall.clone()]);
            let with = body(format, &offered);
            assert!(
                with.contains("artifact=sha256-ab bytes=10 recall seq=11"),
                "{format:?} {policy:?}: {with}"
            );
        }
    }
}
