#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `openai-responses` bodies against OpenAI's published schema for the Responses create
//! request (docs/design.md#p1-wire-formats). Failure class: a body the provider rejects (an
//! item in a shape the API does not take, a tool without a field it requires, a part type
//! that is valid only in the API's own output). Guarantee: every body of the corpus (plain
//! chat, tools with calls and results, an interrupted call, notes, the agent loop with no new
//! input, the omission notice, an output reservation, token budgets, both policies, reasoning
//! items sent back and an Anthropic block left out) and every
//! body of random conversations under random budgets validates against
//! `tests/fixtures/openai-responses/create-response.schema.json`, and bodies the API rejects do
//! not. Bodies with images and documents validate likewise in `openai-chat`, against
//! `tests/fixtures/openai-chat/create-chat-completion.schema.json` (the same published
//! document's Chat Completions create request), and a reply or call sent as its provider item
//! (with its id, status and annotations) validates in `openai-responses`.

mod common;

use ctxlog_event::{Event, EventBody, ToolStatus};
use ctxlog_projection::{
    Policy, ProjectionRequest, ProjectionRequestBuilder, SizeCache, SliceHistory, Window,
    WireFormat, project,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn validator() -> jsonschema::Validator {
    schema_validator(include_str!(
        "fixtures/openai-responses/create-response.schema.json"
    ))
}

/// The Chat Completions create request's schema, from the same published document.
fn chat_validator() -> jsonschema::Validator {
    schema_validator(include_str!(
        "fixtures/openai-chat/create-chat-completion.schema.json"
    ))
}

fn schema_validator(text: &str) -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(text).unwrap();
    jsonschema::draft202012::new(&schema).unwrap()
}

fn check(validator: &jsonschema::Validator, body: &[u8]) {
    let value: Value = serde_json::from_slice(body).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .take(3)
        .collect();
    assert!(
        errors.is_empty(),
        "{errors:?}\n{}",
        String::from_utf8_lossy(body)
    );
}

/// Projects each request and checks its body against the schema. The open turn's media alone
/// may be over a small token budget: such a request is refused, as it must be; at least half
/// of them must make a body.
fn check_projections(
    validator: &jsonschema::Validator,
    history: &SliceHistory<'_>,
    requests: impl Iterator<Item = ProjectionRequest>,
) {
    let (mut made, mut asked) = (0, 0);
    for request in requests {
        asked += 1;
        match project(history, &request, &mut SizeCache::new()) {
            Ok(p) => {
                check(validator, &p.body);
                made += 1;
            }
            Err(ctxlog_projection::Error::MandatoryExceedsBudget { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(made >= asked / 2, "{made} of {asked}");
}

fn call(id: &str, arguments: Value) -> EventBody {
    EventBody::ToolCall {
        call_id: id.into(),
        tool: "shell".into(),
        arguments,
        provider_item: None,
    }
}

fn result(id: &str, status: ToolStatus, text: &str) -> EventBody {
    EventBody::ToolResult {
        call_id: id.into(),
        tool: "shell".into(),
        status,
        exit_code: (status != ToolStatus::Ok).then_some(2),
        text: text.into(),
        artifact: None,
        parts: Vec::new(),
        provider_item: None,
    }
}

/// Notes, a plain turn, a turn with calls (one failed, one never answered), and an open turn
/// ending in a result (the agent loop).
fn events() -> Vec<Event> {
    common::numbered(vec![
        EventBody::Note {
            text: "deploy only on Fridays".into(),
            pinned: true,
            supersedes: None,
            provider_item: None,
        },
        EventBody::User {
            text: "first \"question\"".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: "first answer ".repeat(40),
            provider_item: None,
        },
        EventBody::User {
            text: "list files".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        reasoning("rs_1"),
        EventBody::Assistant {
            text: "Checking.".into(),
            provider_item: None,
        },
        call("c1", json!({"cmd": "ls"})),
        call("c2", json!("{\"cmd\":\"du\"}")),
        call("c3", json!([1, 2])),
        result("c1", ToolStatus::Ok, "a.txt 😀"),
        result("c2", ToolStatus::Error, "du: denied"),
        EventBody::Note {
            text: "user is in a hurry".into(),
            pinned: false,
            supersedes: None,
            provider_item: None,
        },
        EventBody::Assistant {
            text: "Done.".into(),
            provider_item: None,
        },
        EventBody::User {
            text: "build it".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        reasoning("rs_2"),
        thinking(),
        call("c4", json!({"cmd": "make"})),
        result("c4", ToolStatus::Ok, &"compiling\n".repeat(300)),
    ])
}

/// A reasoning item as the API returns it with `include: ["reasoning.encrypted_content"]`.
fn reasoning(id: &str) -> EventBody {
    serde_json::from_value(json!({"kind":"opaque","format":"openai-responses","item":{
        "type":"reasoning","id":id,"summary":[{"type":"summary_text","text":"Look first."}],
        "encrypted_content":"gAAAAABo…=="}}))
    .unwrap()
}

/// An Anthropic block: never in a Responses body.
fn thinking() -> EventBody {
    serde_json::from_value(
        json!({"kind":"opaque","format":"anthropic-messages","item":{
        "type":"thinking","thinking":"Hmm.","signature":"EqQB"}}),
    )
    .unwrap()
}

fn recall_tool() -> Value {
    json!({"type":"function","name":"recall","description":"Search the history.",
           "parameters":{"type":"object","properties":{"query":{"type":"string"}}},
           "strict":false})
}

/// The corpus's requests: each a builder over [`events`].
fn corpus() -> Vec<ProjectionRequestBuilder> {
    let mut out = Vec::new();
    for policy in [Policy::Turns, Policy::Agent] {
        for (input, system) in [(Some("next?"), Some("sys")), (None, None)] {
            let mut b = ProjectionRequest::builder();
            b.format(WireFormat::OpenAiResponses)
                .model("gpt-4o")
                .policy(policy);
            if let Some(input) = input {
                b.input(input);
            }
            if let Some(system) = system {
                b.system(system);
            }
            out.push(b.clone());
            b.tools(vec![recall_tool()])
                .notice(true)
                .reserve_output(512)
                .max_tokens(1_500);
            out.push(b.clone());
            b.max_bytes(2_600);
            out.push(b.clone());
            // A cache-stable window with cache hints: what varies goes last, and the
            // conversation's `prompt_cache_key` is written.
            b.window(Window::Stable)
                .cache_hints(true)
                .cache_key("ctxlog-0123456789abcdef");
            out.push(b.clone());
            // A model whose row takes OpenAI's explicit `prompt_cache_breakpoint`s.
            b.model("gpt-5.6-sol");
            out.push(b.clone());
            b.window(Window::Sliding);
            out.push(b);
        }
    }
    out
}

#[test]
fn every_body_of_the_corpus_validates_against_the_published_schema() {
    let validator = validator();
    let events = events();
    let history = SliceHistory::new(&events);
    for b in corpus() {
        let request = b.build().unwrap();
        let p = project(&history, &request, &mut SizeCache::new()).unwrap();
        check(&validator, &p.body);
    }
}

/// Explicit cache breakpoints sit where the published schemas take them: on a Chat
/// Completions text part (the system prompt's and the stable prefix's last message) and on a
/// Responses `input_text` part, as `{"mode":"explicit"}`; another mode is refused.
#[test]
fn explicit_cache_breakpoints_validate_in_both_openai_formats() {
    let events = events();
    let history = SliceHistory::new(&events);
    for (format, validator) in [
        (WireFormat::OpenAiResponses, validator()),
        (WireFormat::OpenAiChat, chat_validator()),
    ] {
        let mut b = ProjectionRequest::builder();
        b.format(format)
            .model("gpt-5.6-sol")
            .system("sys")
            .input("next?")
            .policy(Policy::Turns)
            .window(Window::Stable)
            .cache_hints(true)
            .cache_key("ctxlog-0123456789abcdef");
        let p = project(&history, &b.build().unwrap(), &mut SizeCache::new()).unwrap();
        let text = String::from_utf8(p.body.clone()).unwrap();
        assert!(
            text.contains(r#""prompt_cache_breakpoint":{"mode":"explicit"}"#),
            "{text}"
        );
        check(&validator, &p.body);
        let bad = text.replace(r#"{"mode":"explicit"}"#, r#"{"mode":"implicit"}"#);
        assert!(
            !validator.is_valid(&serde_json::from_str(&bad).unwrap()),
            "{bad}"
        );
    }
}

#[test]
fn bodies_the_api_rejects_do_not_validate() {
    let validator = validator();
    let ok = json!({"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]});
    assert!(validator.is_valid(&ok));
    for bad in [
        // A call without its id.
        json!({"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]}),
        // Arguments that are not a string.
        json!({"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":{}}]}),
        // An output_text part outside an output message with the API's id and status.
        json!({"model":"m","input":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x"}]}]}),
        // A function tool without `strict` and `parameters`.
        json!({"model":"m","input":"hi","tools":[{"type":"function","name":"f"}]}),
        // The chat tool shape.
        json!({"model":"m","input":"hi","tools":[{"type":"function","function":{"name":"f"}}]}),
        // An image part with a detail the API does not take, and the chat image shape.
        json!({"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_image","image_url":"x","detail":"medium"}]}]}),
        json!({"model":"m","input":[{"type":"message","role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}),
    ] {
        assert!(!validator.is_valid(&bad), "{bad}");
    }
}

/// A conversation with images (by bytes and by URL) and documents in user messages and in a
/// tool result.
fn media_events() -> Vec<Event> {
    let mut with_media = result("c1", ToolStatus::Ok, "screenshot taken");
    if let EventBody::ToolResult { parts, .. } = &mut with_media {
        *parts = common::media_parts(800, 600);
    }
    common::numbered(vec![
        EventBody::User {
            text: "What is on these?".into(),
            parts: common::media_parts(1024, 1024),
            provider_item: None,
        },
        EventBody::Assistant {
            text: "A cat.".into(),
            provider_item: None,
        },
        EventBody::User {
            text: String::new(),
            parts: common::media_parts(4000, 3000),
            provider_item: None,
        },
        call("c1", json!({"cmd": "screenshot"})),
        with_media,
    ])
}

#[test]
fn bodies_with_images_and_documents_validate() {
    let validator = validator();
    let events = media_events();
    let history = SliceHistory::new(&events);
    check_projections(
        &validator,
        &history,
        corpus().iter().map(|b| b.build().unwrap()),
    );
    let request = ProjectionRequest::builder()
        .format(WireFormat::OpenAiResponses)
        .model("gpt-4o")
        .build()
        .unwrap();
    let p = project(&history, &request, &mut SizeCache::new()).unwrap();
    let body = String::from_utf8(p.body.clone()).unwrap();
    assert!(
        body.contains(r#""output":[{"type":"input_text","text":"screenshot taken"},"#),
        "{body}"
    );
    assert!(
        body.contains(
            r#"{"type":"input_file","filename":"q3.pdf","file_data":"data:application/pdf;base64,"#
        ),
        "{body}"
    );
    check(&validator, &p.body);
}

fn text() -> impl Strategy<Value = String> {
    "[a-z é😀\"\\\\\n]{1,40}"
}

fn turn() -> impl Strategy<Value = Vec<EventBody>> {
    (
        text(),
        0usize..3,
        any::<bool>(),
        text(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(user, calls, fail, reply, reasons, media)| {
            let parts = if media {
                common::media_parts(1024, 768)
            } else {
                Vec::new()
            };
            let mut out = vec![EventBody::User {
                text: user,
                parts,
                provider_item: None,
            }];
            if reasons {
                out.push(reasoning("rs_k"));
            }
            for i in 0..calls {
                out.push(call(&format!("k{i}"), json!({"i": i})));
            }
            for i in 0..calls {
                let status = if fail {
                    ToolStatus::Error
                } else {
                    ToolStatus::Ok
                };
                out.push(result(&format!("k{i}"), status, &reply.repeat(i + 1)));
            }
            out.push(EventBody::Assistant {
                text: reply,
                provider_item: None,
            });
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_conversations_under_random_budgets_validate(
        turns in proptest::collection::vec(turn(), 1..6),
        max_bytes in 2_500u64..8_000,
        agent in any::<bool>(),
        tools in any::<bool>(),
    ) {
        let validator = validator();
        let events = common::numbered(turns.into_iter().flatten());
        let mut b = ProjectionRequest::builder();
        b.format(WireFormat::OpenAiResponses)
            .model("gpt-4o")
            .input("now?")
            .notice(true)
            .max_bytes(max_bytes)
            .policy(if agent { Policy::Agent } else { Policy::Turns });
        if tools {
            b.tools(vec![recall_tool()]);
        }
        let request = b.build().unwrap();
        // The mandatory part (model, input, tools, the agent policy's pinned tiers) fits
        // every budget drawn.
        let p = project(&SliceHistory::new(&events), &request, &mut SizeCache::new()).unwrap();
        prop_assert!(p.body.len() as u64 <= max_bytes);
        check(&validator, &p.body);
    }
}

#[test]
fn chat_bodies_with_images_and_documents_validate_against_the_published_chat_schema() {
    let validator = chat_validator();
    let events = media_events();
    let history = SliceHistory::new(&events);
    let recall = json!({"type":"function","function":{"name":"recall","description":"Recall.","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}});
    check_projections(
        &validator,
        &history,
        corpus().iter().map(|b| {
            let mut b = b.clone();
            b.format(WireFormat::OpenAiChat);
            if b.clone().build().unwrap().offers_recall_tool() {
                b.tools(vec![recall.clone()]);
            }
            b.build().unwrap()
        }),
    );
    let request = ProjectionRequest::builder()
        .format(WireFormat::OpenAiChat)
        .model("gpt-4o")
        .policy(Policy::Turns)
        .build()
        .unwrap();
    let p = project(&history, &request, &mut SizeCache::new()).unwrap();
    let body = String::from_utf8(p.body.clone()).unwrap();
    assert!(
        body.contains(r#"{"type":"image_url","image_url":{"url":"data:image/png;base64,"#),
        "{body}"
    );
    assert!(body.contains(r#"{"type":"file","file":{"#), "{body}");
    check(&validator, &p.body);
    // The schema constrains what matters: the Responses part shapes are not chat parts.
    let ok = json!({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"low"}}]}]});
    assert!(validator.is_valid(&ok));
    for bad in [
        json!({"model":"m","messages":[{"role":"user","content":[{"type":"input_image","image_url":"https://example.com/a.png"}]}]}),
        json!({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x","detail":"medium"}}]}]}),
    ] {
        assert!(!validator.is_valid(&bad), "{bad}");
    }
}

#[test]
fn a_reply_and_a_call_sent_as_their_provider_items_validate() {
    let validator = validator();
    let given = |item: Value| {
        Some(serde_json::from_value(json!({"format":"openai-responses","item":item})).unwrap())
    };
    let events = common::numbered(vec![
        EventBody::User {
            text: "add 2 and 3".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::ToolCall {
            call_id: "call_1".into(),
            tool: "add".into(),
            arguments: json!("{\"a\":2,\"b\":3}"),
            provider_item: given(
                json!({"arguments":"{\"a\":2,\"b\":3}","call_id":"call_1","name":"add","type":"function_call","id":"fc_1","status":"completed"}),
            ),
        },
        result("call_1", ToolStatus::Ok, "5"),
        EventBody::Assistant {
            text: "2 + 3 = 5".into(),
            provider_item: given(
                json!({"id":"msg_1","content":[{"annotations":[],"text":"2 + 3 = 5","type":"output_text","logprobs":[]}],"role":"assistant","status":"completed","type":"message"}),
            ),
        },
    ]);
    let history = SliceHistory::new(&events);
    let mut sent = 0;
    for b in corpus() {
        let request = b.build().unwrap();
        if request.input().is_none() {
            continue; // the turn is closed: a body needs a new input
        }
        let p = project(&history, &request, &mut SizeCache::new()).unwrap();
        check(&validator, &p.body);
        let body = String::from_utf8(p.body).unwrap();
        sent += usize::from(body.contains(r#""id":"msg_1""#) && body.contains(r#""id":"fc_1""#));
    }
    assert!(sent > 0, "no body carried the provider items");
}
