//! `project --window stable` is a pure function of the ledger and the request: separate
//! processes choose the same cut and print the same bytes; each new turn that fits keeps the
//! previous body's stable prefix; bad window values are refused (exit 2) and change nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, snapshot, stderr};
use serde_json::Value;

fn project(env: &Env, extra: &[&str]) -> (Vec<u8>, Value) {
    let report = env.root().join("report.json");
    let mut args = vec![
        "project",
        "chat",
        "--system",
        "Be brief.",
        "--input",
        "And now?",
        "--max-bytes",
        "3000",
        "--window",
        "stable",
        "--report",
        report.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let body = env.ok(&args, b"");
    let report = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    (body, report)
}

#[test]
fn two_processes_choose_the_same_cut_and_appends_keep_the_prefix() {
    let env = Env::new();
    let mut previous: Option<(Vec<u8>, Value)> = None;
    for i in 0..40 {
        env.commit(
            "chat",
            &format!("message {i}: the weather was fine and we walked to the harbour"),
            &format!("reply {i}: that sounds lovely, tell me more about the harbour"),
        );
        let (body, report) = project(&env, &[]);
        let (again, _) = project(&env, &[]);
        assert_eq!(body, again, "a second process built other bytes");
        assert!(body.len() <= 3000);
        let sp = &report["stable_prefix"];
        let text = String::from_utf8(body.clone()).unwrap();
        let end = sp["bytes"].as_u64().unwrap() as usize;
        assert!(text[end..].contains("And now?") && !text[..end].contains("And now?"));
        if let Some((prev, prev_report)) = &previous
            && prev_report["stable_prefix"]["block"] == sp["block"]
            && prev_report["kept"][0]["first"] == report["kept"][0]["first"]
        {
            let prev_end = prev_report["stable_prefix"]["bytes"].as_u64().unwrap() as usize;
            assert_eq!(&body[..prev_end], &prev[..prev_end]);
        }
        previous = Some((body, report));
    }
    let (_, last) = previous.unwrap();
    assert!(
        last["dropped"].as_array().is_some_and(|d| !d.is_empty()),
        "{last}"
    );
}

#[test]
fn bad_window_values_are_refused_and_change_nothing() {
    let env = Env::new();
    env.commit("chat", "hello", "hi");
    let before = snapshot(&env.conv_dir("chat"));
    for window in [
        &["fixed"][..],
        &["stable", "--low-water", "1.2"],
        &["stable", "--low-water", "0"],
    ] {
        let mut args = vec!["project", "chat", "--input", "x", "--window"];
        args.extend_from_slice(window);
        let out = env.run(&args, b"");
        assert_eq!(code(&out), 2, "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("sliding, stable") || err.contains("strictly between 0 and 1"),
            "{err}"
        );
    }
    assert_eq!(snapshot(&env.conv_dir("chat")), before);
}

/// `--cache-hints` writes the hints the model table gives the model: OpenAI's explicit
/// breakpoints (system prompt, end of the stable prefix) and the conversation's
/// `prompt_cache_key` for `gpt-5.6`, the key alone for a model in no row (the format's
/// default), and the report says which and why.
#[test]
fn cache_hints_follow_the_model_table() {
    let env = Env::new();
    for i in 0..12 {
        env.commit(
            "chat",
            &format!("message {i}: the weather was fine and we walked to the harbour"),
            &format!("reply {i}: that sounds lovely, tell me more about the harbour"),
        );
    }
    let marker = r#""prompt_cache_breakpoint":{"mode":"explicit"}"#;
    let (body, report) = project(&env, &["--cache-hints", "--model", "gpt-5.6-sol"]);
    let text = String::from_utf8(body).unwrap();
    let hints = &report["cache_hints"];
    assert_eq!(hints["kind"], "prompt_cache_breakpoints", "{report}");
    assert_eq!(hints["breakpoints"], 2, "{report}");
    assert!(
        hints["source"].as_str().unwrap().contains("gpt-5.6"),
        "{report}"
    );
    assert_eq!(text.matches(marker).count(), 2, "{text}");
    assert!(text.contains(r#","prompt_cache_key":"ctxlog-"#), "{text}");
    assert!(text.len() <= 3000);
    let (body, report) = project(&env, &["--cache-hints", "--model", "my-local-model"]);
    let text = String::from_utf8(body).unwrap();
    assert_eq!(
        report["cache_hints"]["kind"], "prompt_cache_key",
        "{report}"
    );
    let source = report["cache_hints"]["source"].as_str().unwrap();
    assert!(source.contains("no row for model"), "{source}");
    assert!(!text.contains("prompt_cache_breakpoint"), "{text}");
    let (_, report) = project(&env, &[]);
    assert!(report.get("cache_hints").is_none(), "{report}");
}
