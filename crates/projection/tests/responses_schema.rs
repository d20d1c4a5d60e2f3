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
//! not.

mod common;

use ctxlog_event::{Event, EventBody, ToolStatus};
use ctxlog_projection::{
    Policy, ProjectionRequest, ProjectionRequestBuilder, SizeCache, SliceHistory, Window,
    WireFormat, project,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn validator() -> jsonschema::Validator {
    let text = include_str!("fixtures/openai-responses/create-response.schema.json");
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

fn call(id: &str, arguments: Value) -> EventBody {
    EventBody::ToolCall {
        call_id: id.into(),
        tool: "shell".into(),
        arguments,
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
        },
        EventBody::User {
            text: "first \"question\"".into(),
            parts: Vec::new(),
        },
        EventBody::Assistant {
            text: "first answer ".repeat(40),
        },
        EventBody::User {
            text: "list files".into(),
            parts: Vec::new(),
        },
        reasoning("rs_1"),
        EventBody::Assistant {
            text: "Checking.".into(),
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
        },
        EventBody::Assistant {
            text: "Done.".into(),
        },
        EventBody::User {
            text: "build it".into(),
            parts: Vec::new(),
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

#[test]
fn bodies_with_images_and_documents_validate() {
    let validator = validator();
    let mut with_media = result("c1", ToolStatus::Ok, "screenshot taken");
    if let EventBody::ToolResult { parts, .. } = &mut with_media {
        *parts = common::media_parts(800, 600);
    }
    let events = common::numbered(vec![
        EventBody::User {
            text: "What is on these?".into(),
            parts: common::media_parts(1024, 1024),
        },
        EventBody::Assistant {
            text: "A cat.".into(),
        },
        EventBody::User {
            text: String::new(),
            parts: common::media_parts(4000, 3000),
        },
        call("c1", json!({"cmd": "screenshot"})),
        with_media,
    ]);
    let history = SliceHistory::new(&events);
    let mut validated = 0;
    for b in corpus() {
        let request = b.build().unwrap();
        // The open turn's media alone may be over a small token budget: refused, as it must be.
        match project(&history, &request, &mut SizeCache::new()) {
            Ok(p) => {
                check(&validator, &p.body);
                validated += 1;
            }
            Err(ctxlog_projection::Error::MandatoryExceedsBudget { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(validated >= corpus().len() / 2, "{validated}");
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
            let mut out = vec![EventBody::User { text: user, parts }];
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
            out.push(EventBody::Assistant { text: reply });
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
