#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Fields passed through a projection (the gateway's `temperature`, `tool_choice`,
//! `response_format`, …). Failure class: a field added to the body after fitting, which makes
//! the body larger than the budget it was fitted to, or a field that replaces one the
//! projector writes. Guarantee: passed fields are written after the projector's own, as
//! given; their bytes are in the report's `bytes` and their tokens in `tokens` (equal to what
//! `count` says of the body); a budget that holds them never sends more; a field the
//! projector writes itself is refused.

mod common;

use ctxlog_event::EventBody;
use ctxlog_projection::{
    Policy, ProjectionRequest, SizeCache, SliceHistory, Tokenizer, WireFormat, count, project,
};
use serde_json::{Map, Value, json};

fn fields() -> Map<String, Value> {
    let Value::Object(map) = json!({
        "temperature": 0.2,
        "tool_choice": "auto",
        "response_format": {"type": "json_schema", "json_schema": {"name": "answer",
            "schema": {"type": "object", "properties": {"text": {"type": "string"}}}}},
        "stream": true
    }) else {
        unreachable!()
    };
    map
}

fn history() -> Vec<ctxlog_event::Event> {
    common::numbered((0..40).flat_map(|i| {
        [
            EventBody::User {
                text: format!("question {i}: {}", "words ".repeat(20)),
                parts: Vec::new(),
                provider_item: None,
            },
            EventBody::Assistant {
                text: format!("answer {i}"),
                provider_item: None,
            },
        ]
    }))
}

fn request(format: WireFormat, max_tokens: u64, fields: Map<String, Value>) -> ProjectionRequest {
    ProjectionRequest::builder()
        .format(format)
        .model("gpt-4o")
        .input("and now?")
        .max_tokens(max_tokens)
        .policy(Policy::Turns)
        .fields(fields)
        .build()
        .unwrap()
}

#[test]
fn passed_fields_are_written_last_and_counted() {
    let events = history();
    for format in [WireFormat::OpenAiChat, WireFormat::AnthropicMessages] {
        let req = request(format, 600, fields());
        let out = project(&SliceHistory::new(&events), &req, &mut SizeCache::new()).unwrap();
        let body: Value = serde_json::from_slice(&out.body).unwrap();
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(
            keys[keys.len() - 4..],
            ["temperature", "tool_choice", "response_format", "stream"]
        );
        assert_eq!(body["response_format"], fields()["response_format"]);
        assert_eq!(out.report.bytes, out.body.len() as u64);
        let counted = count(&out.body, format, Tokenizer::O200k).unwrap();
        assert_eq!(counted.tokens, out.report.tokens, "{format:?}");
        assert!(out.report.tokens <= 600 - req.output_limit().unwrap_or(0));
        // Without the fields the same budget keeps more history: they took room.
        let plain = request(format, 600, Map::new());
        let more = project(&SliceHistory::new(&events), &plain, &mut SizeCache::new()).unwrap();
        assert!(more.report.turns.kept > out.report.turns.kept, "{format:?}");
    }
}

#[test]
fn a_field_the_projector_writes_is_refused() {
    for (format, key) in [
        (WireFormat::OpenAiChat, "messages"),
        (WireFormat::OpenAiChat, "max_completion_tokens"),
        (WireFormat::AnthropicMessages, "system"),
        (WireFormat::AnthropicMessages, "max_tokens"),
        (WireFormat::OpenAiResponses, "instructions"),
        (WireFormat::OpenAiResponses, "model"),
    ] {
        let mut map = Map::new();
        map.insert(key.into(), json!(1));
        let err = ProjectionRequest::builder()
            .format(format)
            .model("gpt-4o")
            .input("hi")
            .fields(map)
            .build()
            .unwrap_err();
        assert!(err.to_string().contains(key), "{err}");
    }
}
