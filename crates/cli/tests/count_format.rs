//! `count` knows the format: a body with Anthropic's shape is counted by Anthropic's rule
//! without `--format`, an OpenAI one by OpenAI's, and a body that could be either is refused
//! (exit 2) until `--format` says which. A projection's report counts its body as `count`
//! does, whether or not the report was asked for when the body was chosen.

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

/// Without `--report` a byte-budget projection counts no tokens (no tokenizer is built); the
/// body is the same as with it, and the report's token figures are those `count` finds.
#[test]
fn a_byte_budget_body_is_the_same_with_or_without_the_report() {
    let env = Env::new();
    for i in 0..6 {
        env.commit(
            "c",
            &format!("Question {i}: what broke?"),
            "The build, twice.",
        );
    }
    let report = env.root().join("report.json");
    let report_arg = report.to_str().unwrap();
    for format in ["openai-chat", "anthropic-messages"] {
        let args = [
            "project",
            "c",
            "--format",
            format,
            "--input",
            "And now?",
            "--max-bytes",
            "400",
        ];
        let plain = env.ok(&args, b"");
        let mut with_report = args.to_vec();
        with_report.extend_from_slice(&["--report", report_arg]);
        assert_eq!(env.ok(&with_report, b""), plain, "{format}");
        let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        let counted = count(&env, &["--format", format], &plain);
        assert_eq!(report["bytes"], counted["bytes"], "{format}");
        assert_eq!(report["tokens"], counted["tokens"], "{format}");
        assert!(counted["tokens"].as_u64().unwrap() > 0, "{format}");
        assert!(
            report["turns"]["dropped"].as_u64().unwrap() > 0,
            "{format}: {report}"
        );
    }
}
