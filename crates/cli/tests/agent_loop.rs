//! The agent loop (docs/design.md#p11-the-agent-loop): after each tool result an agent asks for the
//! next body with no new user message. `project CONV` without `--input` continues the open turn: it
//! is mandatory, and the body ends with the pending tool results in the provider's shape. The body
//! must be one the provider accepts (roles alternate for Anthropic, every call answered, nothing
//! after the results) and fit the budget, after every commit of a 20-step loop.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashSet;

use common::{Env, code, stderr};
use serde_json::{Value, json};

const MAX_BYTES: u64 = 9000;
const MAX_TOKENS: u64 = 4000;

fn commit(env: &Env, conv: &str, events: Value) {
    env.ok(
        &["commit", conv],
        json!({ "events": events }).to_string().as_bytes(),
    );
}

/// Projects without input; returns the body and the report.
fn project(env: &Env, conv: &str, format: &str, policy: &str) -> (Value, Value) {
    let report = env.root().join(format!("report-{format}-{policy}.json"));
    let body = env.ok(
        &[
            "project",
            conv,
            "--format",
            format,
            "--policy",
            policy,
            "--system",
            "You are an ops agent.",
            "--max-bytes",
            &MAX_BYTES.to_string(),
            "--max-tokens",
            &MAX_TOKENS.to_string(),
            "--reserve-output",
            "500",
            "--report",
            report.to_str().unwrap(),
        ],
        b"",
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["bytes"], body.len() as u64);
    assert!(body.len() as u64 <= MAX_BYTES);
    assert!(report["tokens"].as_u64().unwrap() <= MAX_TOKENS - 500);
    let counted: Value =
        serde_json::from_slice(&env.ok(&["count", "--format", format, "-"], &body)).unwrap();
    assert_eq!(counted["tokens"], report["tokens"]);
    (serde_json::from_slice(&body).unwrap(), report)
}

/// What OpenAI accepts: each assistant `tool_calls` message is followed by one `tool`
/// message per call (and `tool` messages only there); the body ends with `pending`'s results.
fn check_openai(body: &Value, pending: &[String]) {
    let msgs = body["messages"].as_array().unwrap();
    let mut open: Vec<String> = Vec::new();
    for m in msgs {
        match m["role"].as_str().unwrap() {
            "tool" => {
                let id = m["tool_call_id"].as_str().unwrap().to_string();
                assert_eq!(open.first(), Some(&id), "unexpected tool message {m}");
                open.remove(0);
            }
            role => {
                assert!(
                    open.is_empty(),
                    "calls {open:?} unanswered before a {role} message"
                );
                if let Some(calls) = m["tool_calls"].as_array() {
                    open = calls
                        .iter()
                        .map(|c| c["id"].as_str().unwrap().to_string())
                        .collect();
                }
            }
        }
    }
    assert!(open.is_empty(), "calls {open:?} unanswered at the end");
    let tail: Vec<String> = msgs[msgs.len() - pending.len()..]
        .iter()
        .map(|m| {
            assert_eq!(m["role"], "tool", "the body must end with the results: {m}");
            m["tool_call_id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(tail, pending);
}

/// What Anthropic accepts: user first, roles alternate, no blank text, every `tool_use`
/// answered by a `tool_result` at the start of the next user message; the body ends with a
/// user message holding `pending`'s results and nothing after them.
fn check_anthropic(body: &Value, pending: &[String]) {
    let msgs = body["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["role"], "user");
    let mut expected: Vec<String> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m["role"].as_str().unwrap();
        assert_eq!(
            role,
            if i % 2 == 0 { "user" } else { "assistant" },
            "{body}"
        );
        let blocks = m["content"].as_array().unwrap();
        let results: Vec<String> = blocks
            .iter()
            .take_while(|b| b["type"] == "tool_result")
            .map(|b| b["tool_use_id"].as_str().unwrap().to_string())
            .collect();
        if role == "user" {
            let want: HashSet<&String> = expected.iter().collect();
            let got: HashSet<&String> = results.iter().collect();
            assert_eq!(got, want, "tool_use not answered in message {i}: {body}");
            assert!(
                blocks[results.len()..]
                    .iter()
                    .all(|b| b["type"] != "tool_result"),
                "tool_result after text in message {i}"
            );
            expected.clear();
        } else {
            expected = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| b["id"].as_str().unwrap().to_string())
                .collect();
        }
        for b in blocks.iter().filter(|b| b["type"] == "text") {
            assert!(!b["text"].as_str().unwrap().trim().is_empty());
        }
    }
    assert!(
        expected.is_empty(),
        "calls {expected:?} unanswered at the end"
    );
    let last = msgs.last().unwrap();
    assert_eq!(last["role"], "user");
    let blocks = last["content"].as_array().unwrap();
    let tail: Vec<String> = blocks[blocks.len() - pending.len()..]
        .iter()
        .map(|b| {
            assert_eq!(
                b["type"], "tool_result",
                "nothing may follow the results: {b}"
            );
            b["tool_use_id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(tail, pending);
}

/// Checks both formats with the `turns` policy, and with the `agent` policy too when `agent`.
fn check(env: &Env, conv: &str, pending: &[String], agent: bool) {
    let policies: &[&str] = if agent {
        &["turns", "agent"]
    } else {
        &["turns"]
    };
    for &policy in policies {
        let (body, report) = project(env, conv, "openai-chat", policy);
        check_openai(&body, pending);
        assert_eq!(report["policy"], policy);
        let (body, _) = project(env, conv, "anthropic-messages", policy);
        check_anthropic(&body, pending);
    }
}

/// Projecting without input when the newest turn does not end in tool results is a usage
/// error that says what to do.
fn check_refused(env: &Env, conv: &str) {
    {
        let out = env.run(&["project", conv, "--format", "anthropic-messages"], b"");
        assert_eq!(code(&out), 2, "{}", stderr(&out));
        assert!(stderr(&out).contains("--input"), "{}", stderr(&out));
    }
}

#[test]
fn a_twenty_step_agent_loop_projects_without_input_after_every_result() {
    let env = Env::new();
    let conv = "loop";
    let mut step = 0;
    for task in 0..3 {
        commit(
            &env,
            conv,
            json!([{"kind":"user","text":format!("Task {task}: check the disks on host {task}.")}]),
        );
        check_refused(&env, conv);
        for _ in 0..7 {
            if step == 20 {
                break;
            }
            step += 1;
            // Every third step calls two tools at once.
            let ids: Vec<String> = if step % 3 == 0 {
                vec![format!("c{step}a"), format!("c{step}b")]
            } else {
                vec![format!("c{step}")]
            };
            let calls: Vec<Value> = ids
                .iter()
                .map(|id| json!({"kind":"tool_call","call_id":id,"tool":"shell","arguments":{"cmd":format!("df -h # {id}")}}))
                .collect();
            commit(&env, conv, Value::Array(calls));
            check_refused(&env, conv);
            for id in &ids {
                let text = format!("{id}: ") + &"/dev/sda1 92% used\n".repeat(3 + step);
                commit(
                    &env,
                    conv,
                    json!([{"kind":"tool_result","call_id":id,"tool":"shell","status":"ok","exit_code":0,"text":text}]),
                );
            }
            check(&env, conv, &ids, step % 5 == 0);
        }
        commit(
            &env,
            conv,
            json!([{"kind":"assistant","text":format!("Host {task} checked.")}]),
        );
        check_refused(&env, conv);
    }
    assert_eq!(step, 20);
}

#[test]
fn a_blank_input_continues_the_open_turn_for_anthropic() {
    let env = Env::new();
    commit(
        &env,
        "blank",
        json!([{"kind":"user","text":"Uptime?"},{"kind":"tool_call","call_id":"u1","tool":"shell","arguments":{"cmd":"uptime"}},
               {"kind":"tool_result","call_id":"u1","tool":"shell","status":"ok","text":"up 3 days"}]),
    );
    let body = env.ok(
        &[
            "project",
            "blank",
            "--format",
            "anthropic-messages",
            "--input",
            " ",
        ],
        b"",
    );
    let body: Value = serde_json::from_slice(&body).unwrap();
    check_anthropic(&body, &["u1".to_string()]);
}

/// Recall is not starved (docs/design.md#p13-true-words): with pages asked for, a share of the
/// budget is held back for them, so the page that answers is included although recent turns could
/// fill it all.
#[test]
fn with_recall_2_and_1500_tokens_the_answering_page_is_included() {
    let env = Env::new();
    env.commit(
        "starve",
        "Remember this: the deploy password is hunter7-blue.",
        "Noted, I will remember the deploy password.",
    );
    for i in 0..30 {
        env.commit(
            "starve",
            &format!("Status of build {i}? {}", "Please be thorough. ".repeat(8)),
            &format!(
                "Build {i} is green. {}",
                "All checks passed on every target. ".repeat(6)
            ),
        );
    }
    let report = env.root().join("starve.json");
    let body = env.ok(
        &[
            "project",
            "starve",
            "--input",
            "What is the deploy password?",
            "--recall",
            "2",
            "--max-tokens",
            "1500",
            "--report",
            report.to_str().unwrap(),
        ],
        b"",
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert!(
        String::from_utf8(body).unwrap().contains("hunter7-blue"),
        "{report}"
    );
    assert!(!report["recall"]["included"].as_array().unwrap().is_empty());
    assert_eq!(
        report["budget"]["recall_reserve"]["tokens"], 375,
        "{report}"
    );
    assert!(report["turns"]["kept"].as_u64().unwrap() > 0);
}

/// A long tool loop inside one turn (docs/design.md#p11-the-agent-loop): 20 steps with big outputs
/// outgrow the budget on their own. The open turn stays whole in shape — every call answered, the
/// body ending with the newest result — and the oldest results' texts are clipped, as the report
/// says; exit 3 only when even the clipped turn cannot fit.
#[test]
fn twenty_big_steps_in_one_turn_fit_by_clipping_the_oldest_results() {
    let env = Env::new();
    let conv = "long";
    commit(
        &env,
        conv,
        json!([{"kind":"user","text":"Check the disks on every host of the fleet."}]),
    );
    let output = |step: usize| -> String {
        (0..40)
            .map(|i| format!("host {step} /dev/sd{i} 92% used /var/lib/data{i}\n"))
            .collect()
    };
    let mut stored = 0;
    for step in 1..=20 {
        let id = format!("d{step}");
        commit(
            &env,
            conv,
            json!([{"kind":"tool_call","call_id":id,"tool":"shell","arguments":{"cmd":format!("df -h # host {step}")}}]),
        );
        commit(
            &env,
            conv,
            json!([{"kind":"tool_result","call_id":id,"tool":"shell","status":"ok","exit_code":0,"text":output(step)}]),
        );
        stored += output(step).len() as u64;
        // Every fourth step (each projection runs a debug binary; the 20-step test above
        // checks after every commit).
        if step % 4 == 0 {
            check(&env, conv, std::slice::from_ref(&id), true);
        }
    }
    assert!(
        stored > 2 * MAX_BYTES,
        "the turn as stored is far over the budget"
    );
    for (format, policy) in [("openai-chat", "turns"), ("anthropic-messages", "agent")] {
        let (body, report) = project(&env, conv, format, policy);
        let clips: Vec<u64> = report["clips"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["seq"].as_u64().unwrap())
            .collect();
        // Results are seqs 3, 5, …, 41: the clipped ones are the oldest, the newest is whole.
        let results: Vec<u64> = (0..20).map(|i| 3 + 2 * i).collect();
        assert!(!clips.is_empty() && clips.len() < 20, "{report}");
        assert_eq!(clips, results[..clips.len()], "{report}");
        assert!(
            body.to_string()
                .contains(&serde_json::to_string(&output(20)).unwrap()[1..])
        );
        for c in &clips {
            assert!(
                body.to_string()
                    .contains(&format!("chars clipped from seq={c}]"))
            );
        }
    }
    // Too small even for the clipped turn: exit 3, saying what it needs.
    let out = env.run(
        &[
            "project",
            conv,
            "--max-tokens",
            "600",
            "--reserve-output",
            "100",
        ],
        b"",
    );
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).contains("tokens"), "{}", stderr(&out));
}
