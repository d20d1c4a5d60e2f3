//! The tool table (`src/tools.json`) states limits that the operations layer owns: the
//! schemas must say what the operations accept, neither more nor less. Each limit a schema
//! states is called at the edge, on a real store: the last value accepted, the next refused
//! as a tool error naming the rule.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use ctxlog::ops::{CommitRequest, MAX_LOG_PAGE};
use ctxlog_mcp::{CtxlogMcp, TOOLS_JSON};
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

fn tool(name: &str) -> Value {
    let tools: Vec<Value> = serde_json::from_str(TOOLS_JSON).unwrap();
    tools.into_iter().find(|t| t["name"] == name).unwrap()
}

fn args(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

fn server() -> (tempfile::TempDir, CtxlogMcp) {
    let dir = tempfile::tempdir().unwrap();
    let store = ctxlog::Store::open(dir.path()).unwrap();
    let turn = br#"{"user":"where is the deploy key?","assistant":"in the vault"}"#;
    store
        .commit(&CommitRequest::from_json("chat1", turn, None).unwrap())
        .unwrap();
    (dir, CtxlogMcp::for_store(Arc::new(store)))
}

fn error_text(result: &CallToolResult) -> String {
    assert_eq!(result.is_error, Some(true));
    assert!(result.structured_content.is_none());
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn the_recall_limit_in_the_schema_is_the_operations_limit() {
    let (_dir, server) = server();
    let schema = tool("recall")["inputSchema"]["properties"]["limit"].clone();
    let max = schema["maximum"].as_u64().unwrap();
    let ok = server
        .call(
            "recall",
            args(json!({"conversation": "chat1", "query": "deploy", "limit": max})),
        )
        .await;
    assert_eq!(ok.is_error, Some(false));
    let refused = server
        .call(
            "recall",
            args(json!({"conversation": "chat1", "query": "deploy", "limit": max + 1})),
        )
        .await;
    assert!(error_text(&refused).starts_with("usage: "));
    assert_eq!(schema["minimum"], 1);
    let zero = server
        .call("recall", args(json!({"conversation": "chat1", "limit": 0})))
        .await;
    assert!(error_text(&zero).starts_with("usage: "));
}

#[tokio::test]
async fn the_read_cap_in_the_description_is_the_operations_cap() {
    let (_dir, server) = server();
    let description = tool("read")["description"].as_str().unwrap().to_string();
    assert!(
        description.contains(&format!("at most {MAX_LOG_PAGE}")),
        "{description}"
    );
    let widest = server
        .call(
            "read",
            args(json!({"conversation": "chat1", "from_seq": 1, "to_seq": MAX_LOG_PAGE})),
        )
        .await;
    let answer = widest.structured_content.unwrap();
    assert_eq!(answer["last_seq"], 2);
    assert_eq!(answer["events"].as_array().unwrap().len(), 2);
    let over = server
        .call(
            "read",
            args(json!({"conversation": "chat1", "from_seq": 1, "to_seq": MAX_LOG_PAGE + 1})),
        )
        .await;
    let message = error_text(&over);
    assert!(
        message.starts_with("usage: ") && message.contains("over the cap"),
        "{message}"
    );
}

#[tokio::test]
async fn an_unknown_conversation_is_a_tool_error_with_its_class() {
    let (dir, server) = server();
    let missing = server
        .call(
            "read",
            args(json!({"conversation": "nope", "from_seq": 1, "to_seq": 1})),
        )
        .await;
    let message = error_text(&missing);
    assert!(
        message.starts_with("not_found: no conversation \"nope\""),
        "{message}"
    );
    // Over stdio the store is the user's own: its path is kept in the message.
    assert!(
        message.contains(&dir.path().display().to_string()),
        "{message}"
    );
}
