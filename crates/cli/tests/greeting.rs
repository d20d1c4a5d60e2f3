//! A conversation may open with an assistant greeting, before any user message
//! (docs/design.md#p11-the-agent-loop). It is stored (in the preamble) and projected in both
//! formats; Anthropic, which requires the first message to be `user`, gets the documented
//! placeholder user text `[ctxlog] (no user message)` before the greeting.

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

/// A `system` event is not something to commit: the error says what to do instead (the system
/// prompt is per request; a standing instruction is a note), nothing is stored, and the
/// commit help documents notes.
#[test]
fn committing_a_system_event_says_what_to_do_and_the_help_documents_notes() {
    let env = Env::new();
    env.commit("greet", "Hello", "Hi!");
    let before = common::snapshot(&env.conv_dir("greet"));
    let out = env.run(
        &["commit", "greet"],
        br#"{"events":[{"kind":"user","text":"q"},{"kind":"system","text":"be terse"}]}"#,
    );
    assert_eq!(common::code(&out), 1, "bad input: {}", common::stderr(&out));
    let err = common::stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("--system") && err.contains(r#""kind":"note""#),
        "{err}"
    );
    assert_eq!(common::snapshot(&env.conv_dir("greet")), before);

    let help = String::from_utf8(env.ok(&["commit", "--help"], b"")).unwrap();
    assert!(
        help.contains(r#"{"kind":"note","text":"…","pinned":true}"#),
        "{help}"
    );
    assert!(help.contains("supersedes"), "{help}");
}
