//! An agent commits a turn piece by piece (the user message, each tool call, each result,
//! the reply), as it produces them; `log --json` lists every event with its seq, kind and
//! text; `project` keeps the call with its result, and answers a call whose result never
//! arrived with an explicit "interrupted" result; `count` agrees with the report.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, stderr};
use serde_json::{Value, json};

fn commit(env: &Env, event: Value) -> Value {
    let out = env.ok(
        &["commit", "agent"],
        json!({"events": [event]}).to_string().as_bytes(),
    );
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn a_turn_committed_piece_by_piece_projects_whole() {
    let env = Env::new();
    commit(&env, json!({"kind":"user","text":"How big is /srv?"}));
    commit(
        &env,
        json!({"kind":"tool_call","call_id":"c1","tool":"shell","arguments":{"cmd":"du -sh /srv"}}),
    );
    let receipt = commit(
        &env,
        json!({"kind":"tool_result","call_id":"c1","tool":"shell","status":"ok","exit_code":0,"text":"12G\t/srv"}),
    );
    assert_eq!(receipt["first_seq"], 3);
    commit(&env, json!({"kind":"assistant","text":"/srv holds 12 GB."}));

    // A result for a call that is not in the open turn is refused.
    let out = env.run(
        &["commit", "agent"],
        json!({"events":[{"kind":"tool_result","call_id":"c9","tool":"shell","status":"ok","text":"?"}]})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));

    let log = String::from_utf8(env.ok(&["log", "agent", "--json"], b"")).unwrap();
    let events: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["user", "tool_call", "tool_result", "assistant"]);
    assert_eq!(events[2]["seq"], 3);
    assert_eq!(events[2]["text"], "12G\t/srv");

    // The next turn's call dies with the process: no result was ever committed.
    commit(&env, json!({"kind":"user","text":"Delete the old logs"}));
    commit(
        &env,
        json!({"kind":"tool_call","call_id":"c2","tool":"shell","arguments":{"cmd":"rm -rf /srv/logs/old"}}),
    );

    for format in ["openai-chat", "anthropic-messages"] {
        let body = env.ok(
            &[
                "project",
                "agent",
                "--input",
                "Did it work?",
                "--format",
                format,
                "--max-bytes",
                "4000",
                // Whole turns (auto would choose the agent context for this tool turn).
                "--policy",
                "turns",
            ],
            b"",
        );
        let text = String::from_utf8(body.clone()).unwrap();
        assert!(text.contains("12G"), "{format}: {text}");
        assert!(
            text.contains("interrupted: effects unknown"),
            "{format}: {text}"
        );
        let count: Value =
            serde_json::from_slice(&env.ok(&["count", "--format", format], &body)).unwrap();
        assert_eq!(count["bytes"].as_u64().unwrap(), body.len() as u64);
        assert!(count["tokens"].as_u64().unwrap() > 10);
    }
}

#[test]
fn tool_definitions_are_sent_and_counted() {
    let env = Env::new();
    commit(&env, json!({"kind":"user","text":"hello"}));
    let tools = env.root().join("tools.json");
    std::fs::write(
        &tools,
        json!([{"type":"function","function":{"name":"shell","parameters":{"type":"object"}}}])
            .to_string(),
    )
    .unwrap();
    let report = env.root().join("report.json");
    let body = env.ok(
        &[
            "project",
            "agent",
            "--input",
            "hi",
            "--max-bytes",
            "2000",
            "--recall-tool",
            "--tools",
            tools.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
        b"",
    );
    let body: Value = serde_json::from_slice(&body).unwrap();
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["shell", "recall"]);
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(
        report["bytes"].as_u64().unwrap(),
        body.to_string().len() as u64
    );

    std::fs::write(&tools, b"{not json").unwrap();
    let out = env.run(
        &[
            "project",
            "agent",
            "--input",
            "hi",
            "--tools",
            tools.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("--tools"), "{}", stderr(&out));
}
