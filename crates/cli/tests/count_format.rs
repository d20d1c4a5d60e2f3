//! `count` knows the format: a body with Anthropic's shape is counted by Anthropic's rule
//! without `--format`, an OpenAI one by OpenAI's, and a body that could be either is refused
//! (exit 2) until `--format` says which.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, stderr};
use serde_json::Value;

fn count(env: &Env, args: &[&str], body: &[u8]) -> Value {
    let mut all = vec!["count"];
    all.extend_from_slice(args);
    serde_json::from_slice(&env.ok(&all, body)).unwrap()
}

#[test]
fn count_tells_the_format_from_the_body_and_asks_when_it_cannot() {
    let env = Env::new();
    env.commit(
        "c",
        "What is in the build log?",
        "Three warnings and one error.",
    );
    for format in ["anthropic-messages", "openai-chat"] {
        let body = env.ok(
            &[
                "project",
                "c",
                "--format",
                format,
                "--system",
                "Be brief.",
                "--input",
                "Which error?",
            ],
            b"",
        );
        let detected = count(&env, &[], &body);
        let given = count(&env, &["--format", format], &body);
        assert_eq!(detected, given);
        assert_eq!(detected["format"], format);
    }
    // Valid for both providers: refused without --format.
    let ambiguous =
        br#"{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}"#;
    let out = env.run(&["count"], ambiguous);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("--format"), "{}", stderr(&out));
    assert_eq!(
        count(&env, &["--format", "anthropic-messages"], ambiguous)["format"],
        "anthropic-messages"
    );
}
