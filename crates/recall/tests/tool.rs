#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Failure class: a model calling the recall tool with bad arguments
//! (docs/design.md#r5-recall-tool). Definitions are valid in both providers' formats; any argument
//! value gets either a result with provenance and the absence note, or a clear error JSON — never a
//! panic.

mod common;

use common::*;
use ctxlog_recall::{NoArtifacts, RecallIndex, ToolArgs, anthropic_tool, openai_tool};
use serde_json::json;

#[test]
fn definitions_have_the_provider_shapes() {
    let o = openai_tool();
    assert_eq!(o["type"], "function");
    assert_eq!(o["function"]["name"], "recall");
    assert_eq!(o["function"]["parameters"]["type"], "object");
    let a = anthropic_tool();
    assert_eq!(a["name"], "recall");
    assert!(a["description"].as_str().unwrap().contains("missing hit"));
    assert_eq!(a["input_schema"], o["function"]["parameters"]);
}

#[test]
fn the_handler_answers_with_provenance() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    index
        .update(
            [user(1, "the gate code is 4417"), assistant(2, "noted")],
            &NoArtifacts,
        )
        .unwrap();
    let out = index.handle_tool_call(&json!({"query": "gate code", "limit": 1}));
    assert!(!out.is_error);
    let hit = &out.json["hits"][0];
    assert_eq!(hit["seq"], 1);
    assert_eq!(hit["kind"], "user");
    assert_eq!(hit["page"], 0);
    assert_eq!(hit["char_start"], 0);
    assert_eq!(hit["char_end"], 21);
    assert!(hit["score"].as_f64().unwrap() > 0.0);
    assert_eq!(out.json["next_offset"], 1);
    assert!(
        out.json["note"]
            .as_str()
            .unwrap()
            .contains("does not prove")
    );
    // OpenAI sends arguments as a JSON string.
    let out = index.handle_tool_call(&json!("{\"seq\": 2}"));
    assert_eq!(out.json["hits"][0]["seq"], 2);
    assert_eq!(out.json["next_offset"], serde_json::Value::Null);
}

#[test]
fn bad_arguments_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    let cases = [
        (json!([1, 2]), "object"),
        (json!({"query": 5}), "query"),
        (json!({"seq": 0}), "seq"),
        (json!({"seq": -1}), "seq"),
        (json!({"seq": "3"}), "seq"),
        (json!({"offset": 1.5}), "offset"),
        (json!({"limit": 0}), "limit"),
        (json!({"limit": 1000}), "limit"),
        (json!({"qeury": "x"}), "qeury"),
        (json!("not json {"), "not JSON"),
    ];
    for (args, needle) in cases {
        let out = index.handle_tool_call(&args);
        assert!(out.is_error, "{args}");
        assert_eq!(out.json["error"]["code"], "invalid_arguments");
        let msg = out.json["error"]["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{args}: {msg}");
    }
    assert!(!index.handle_tool_call(&serde_json::Value::Null).is_error);
    // Regression: JSON Schema's `integer` admits `2.0`; a model sending it was refused.
    let args = ToolArgs::from_json(&json!({"seq": 3.0, "offset": 2.0, "limit": 5.0})).unwrap();
    assert_eq!(
        (args.options.seq, args.options.offset, args.options.limit),
        (Some(3), 2, 5)
    );
    for bad in [
        json!({"offset": -2.0}),
        json!({"limit": 1e300}),
        json!({"seq": 1.0e20}),
        json!({"offset": 0.5}),
    ] {
        assert!(ToolArgs::from_json(&bad).is_err(), "{bad}");
    }
    assert!(ToolArgs::from_json(&json!({})).is_ok());
}

#[test]
fn a_damaged_index_names_reindex() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let index = RecallIndex::open(&path, "L").unwrap();
    std::fs::write(&path, b"garbage".repeat(1000)).unwrap();
    let out = index.handle_tool_call(&json!({"query": "x"}));
    assert!(out.is_error);
    assert_eq!(out.json["error"]["code"], "index_damaged");
    assert!(
        out.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ctxlog reindex")
    );
}

/// Regression: a pasted 16 KB query came back whole in the tool result, costing the model's
/// context twice. The echo is cut at `TOOL_QUERY_ECHO_CHARS`; the search used every word.
#[test]
fn a_huge_query_is_not_echoed_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    index
        .update([note(1, "the walrus sleeps")], &NoArtifacts)
        .unwrap();
    let query = format!("{}walrus", "项目 ".repeat(6000));
    let out = index.handle_tool_call(&json!({ "query": query }));
    assert!(!out.is_error);
    let echoed = out.json["query"].as_str().unwrap();
    assert_eq!(
        echoed.chars().count(),
        ctxlog_recall::TOOL_QUERY_ECHO_CHARS + 1
    );
    assert!(echoed.ends_with('…'));
    let out = index.handle_tool_call(&json!({ "query": "walrus" }));
    assert_eq!(out.json["query"], "walrus");
    assert_eq!(out.json["hits"][0]["seq"], 1);
}
