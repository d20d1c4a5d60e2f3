//! The recall tool as a model sees it (docs/design.md#r5-recall-tool): definitions in every
//! wire format's tool shape (the Responses one, in a body with the notice, valid by OpenAI's
//! published schema), a handler that answers the model's arguments with provenance and
//! `next_offset`, bad arguments answered with a readable tool error (never a panic, never a crash
//! of the application), and a damaged index answered as `index_damaged`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ctxlog::Store;
use serde_json::json;

fn conversation(dir: &std::path::Path) -> ctxlog::Conversation {
    let store = Store::open(dir).unwrap();
    let mut conv = store.conversation("agent").unwrap();
    conv.commit_json(
        br#"{"user":"The deploy key lives in vault path secret/deploy.","assistant":"Noted."}"#,
        None,
    )
    .unwrap();
    for i in 0..8 {
        let turn = json!({"user": format!("deploy log line {i}"), "assistant": "ok"}).to_string();
        conv.commit_json(turn.as_bytes(), None).unwrap();
    }
    conv
}

#[test]
fn definitions_name_the_same_tool_in_both_formats() {
    let openai = ctxlog::recall::openai_tool();
    let anthropic = ctxlog::recall::anthropic_tool();
    assert_eq!(openai["type"], "function");
    assert_eq!(openai["function"]["name"], anthropic["name"]);
    assert_eq!(openai["function"]["parameters"], anthropic["input_schema"]);
    assert!(anthropic["input_schema"]["properties"]["query"].is_object());
}

#[test]
fn the_responses_definition_is_flat_and_its_body_meets_the_published_schema() {
    let responses = ctxlog::recall::responses_tool();
    let openai = ctxlog::recall::openai_tool();
    assert_eq!(responses["name"], openai["function"]["name"]);
    assert_eq!(responses["parameters"], openai["function"]["parameters"]);
    assert_eq!(responses["strict"], false);

    let dir = tempfile::tempdir().unwrap();
    drop(conversation(dir.path()));
    let store = Store::open(dir.path()).unwrap();
    let request = ctxlog::ops::ProjectRequest {
        conversation: "agent".into(),
        input: Some("Where is the deploy key?".into()),
        format: ctxlog::WireFormat::OpenAiResponses,
        max_bytes: Some(1_600),
        notice: true,
        recall_tool: true,
        ..Default::default()
    };
    let projection = store.project(&request).unwrap();
    let body: serde_json::Value = serde_json::from_slice(&projection.body).unwrap();
    assert_eq!(body["tools"][0], responses);
    let notice = projection
        .report
        .notice
        .clone()
        .unwrap_or_else(|| panic!("{:?}", projection.report));
    assert!(notice.contains("recall"), "{notice}");

    let schema: serde_json::Value = serde_json::from_str(include_str!(
        "../../projection/tests/fixtures/openai-responses/create-response.schema.json"
    ))
    .unwrap();
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&body)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}\n{body}");
}

#[test]
fn the_handler_answers_with_provenance_and_pages_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut conv = conversation(dir.path());
    let out = conv.recall_tool(&json!({"query": "vault path"}));
    assert!(!out.is_error, "{}", out.json);
    assert_eq!(out.json["hits"][0]["seq"], 1);
    assert!(
        out.json["note"]
            .as_str()
            .unwrap()
            .contains("does not prove")
    );

    let first = conv.recall_tool(&json!({"query": "deploy", "limit": 2}));
    let next = first.json["next_offset"].as_u64().expect("more hits");
    let second = conv.recall_tool(&json!({"query": "deploy", "limit": 2, "offset": next}));
    assert_ne!(first.json["hits"][0]["seq"], second.json["hits"][0]["seq"]);

    for bad in [
        json!("just a string"),
        json!({"query": 5}),
        json!({"query": "x", "limit": -1}),
        json!({"seq": "one"}),
    ] {
        let out = conv.recall_tool(&bad);
        assert!(out.is_error, "{bad} → {}", out.json);
        assert!(out.json["error"]["message"].is_string());
    }
}

#[test]
fn a_damaged_index_is_a_tool_error_naming_reindex() {
    let dir = tempfile::tempdir().unwrap();
    let mut conv = conversation(dir.path());
    drop(conv.recall_tool(&json!({"query": "vault"})));
    drop(conv);
    std::fs::write(
        dir.path().join("agent").join("recall.sqlite"),
        b"not a database at all",
    )
    .unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut conv = store.conversation("agent").unwrap();
    let out = conv.recall_tool(&json!({"query": "vault"}));
    assert!(out.is_error);
    assert_eq!(out.json["error"]["code"], "index_damaged", "{}", out.json);
    assert!(
        out.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ctxlog reindex")
    );
    conv.reindex(&mut |_| {}).unwrap();
    assert!(!conv.recall_tool(&json!({"query": "vault"})).is_error);
}
