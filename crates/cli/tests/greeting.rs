//! A conversation may open with an assistant greeting, before any user message (SPEC P11).
//! It is stored (in the preamble) and projected in both formats; Anthropic, which requires
//! the first message to be `user`, gets the documented placeholder user text
//! `[ctxlog] (no user message)` before the greeting.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Env;
use serde_json::{Value, json};

fn project(env: &Env, format: &str, input: &str) -> Value {
    let body = env.ok(
        &["project", "greet", "--format", format, "--input", input],
        b"",
    );
    serde_json::from_slice(&body).unwrap()
}

#[test]
fn a_greeting_first_is_stored_and_projected_in_both_formats() {
    let env = Env::new();
    let out = env.ok(
        &["commit", "greet"],
        br#"{"assistant":"Hi! How can I help?"}"#,
    );
    let receipt: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        (receipt["first_seq"].clone(), receipt["last_seq"].clone()),
        (json!(1), json!(1))
    );

    let openai = project(&env, "openai-chat", "What can you do?");
    assert_eq!(
        openai["messages"],
        json!([
            {"role":"assistant","content":"Hi! How can I help?"},
            {"role":"user","content":"What can you do?"}
        ])
    );
    let anthropic = project(&env, "anthropic-messages", "What can you do?");
    assert_eq!(
        anthropic["messages"],
        json!([
            {"role":"user","content":[{"type":"text","text":"[ctxlog] (no user message)"}]},
            {"role":"assistant","content":[{"type":"text","text":"Hi! How can I help?"}]},
            {"role":"user","content":[{"type":"text","text":"What can you do?"}]}
        ])
    );

    // The conversation goes on as usual; the agent policy keeps the greeting too.
    env.commit("greet", "What can you do?", "Answer questions.");
    let anthropic = project(&env, "anthropic-messages", "Thanks");
    let roles: Vec<&str> = anthropic["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    let agent = env.ok(
        &["project", "greet", "--policy", "agent", "--input", "Thanks"],
        b"",
    );
    assert!(
        String::from_utf8(agent)
            .unwrap()
            .contains("Hi! How can I help?")
    );
}
