//! A long tool loop inside one turn (docs/design.md#p11-the-agent-loop,
//! docs/design.md#p6-agent-tiers): the open turn is mandatory and ends the body with its results,
//! but when it outgrows the budget its results' texts are clipped, oldest first and only as far as
//! needed — every call, result identity and the newest results stay. The request is refused only
//! when even the clipped turn does not fit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use ctxlog_event::{EventBody, ToolStatus};
use ctxlog_projection::{
    Error, Policy, ProjectionRequest, SizeCache, SliceHistory, WireFormat, count, project,
};
use serde_json::{Value, json};

const STEPS: usize = 20;

fn output(step: usize) -> String {
    (0..60)
        .map(|i| format!("step {step} line {i}: /dev/sda{i} 92% used\n"))
        .collect()
}

/// One user request, then `STEPS` tool steps in the same turn; result seqs are 3, 5, 7, ….
fn long_turn() -> Vec<ctxlog_event::Event> {
    let mut bodies = vec![EventBody::User {
        text: "Check every disk on the fleet.".into(),
        parts: Vec::new(),
        provider_item: None,
    }];
    for step in 0..STEPS {
        bodies.push(EventBody::ToolCall {
            call_id: format!("c{step}"),
            tool: "shell".into(),
            arguments: json!({"cmd": format!("df -h # host {step}")}),
            provider_item: None,
        });
        bodies.push(EventBody::ToolResult {
            call_id: format!("c{step}"),
            tool: "shell".into(),
            status: ToolStatus::Ok,
            exit_code: Some(0),
            text: output(step),
            artifact: None,
            parts: Vec::new(),
            provider_item: None,
        });
    }
    common::numbered(bodies)
}

fn request(format: WireFormat, policy: Policy, max_tokens: u64) -> ProjectionRequest {
    ProjectionRequest::builder()
        .model("m")
        .format(format)
        .policy(policy)
        .system("You are an ops agent.")
        .max_tokens(max_tokens)
        .reserve_output(500)
        .build()
        .unwrap()
}

/// The tool-result texts of the body, in order, with their call ids; the body ends with the
/// last one.
fn results(body: &Value, format: WireFormat) -> Vec<(String, String)> {
    if format == WireFormat::OpenAiResponses {
        let items = body["input"].as_array().unwrap();
        assert_eq!(items.last().unwrap()["type"], "function_call_output");
        return items
            .iter()
            .filter(|i| i["type"] == "function_call_output")
            .map(|i| {
                let id = i["call_id"].as_str().unwrap().to_string();
                (id, i["output"].as_str().unwrap().to_string())
            })
            .collect();
    }
    let msgs = body["messages"].as_array().unwrap();
    match format {
        WireFormat::OpenAiChat => {
            assert_eq!(msgs.last().unwrap()["role"], "tool");
            msgs.iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| {
                    let id = m["tool_call_id"].as_str().unwrap().to_string();
                    (id, m["content"].as_str().unwrap().to_string())
                })
                .collect()
        }
        WireFormat::AnthropicMessages => {
            let last = msgs.last().unwrap();
            assert_eq!(last["role"], "user");
            assert_eq!(
                last["content"].as_array().unwrap().last().unwrap()["type"],
                "tool_result"
            );
            msgs.iter()
                .filter_map(|m| m["content"].as_array())
                .flatten()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| {
                    let id = b["tool_use_id"].as_str().unwrap().to_string();
                    (id, b["content"].as_str().unwrap().to_string())
                })
                .collect()
        }
        WireFormat::OpenAiResponses => unreachable!("read above"),
    }
}

#[test]
fn twenty_big_steps_in_one_turn_clip_the_oldest_results_instead_of_failing() {
    let events = long_turn();
    let history = SliceHistory::new(&events);
    let whole: usize = (0..STEPS).map(|s| output(s).len()).sum();
    for policy in [Policy::Turns, Policy::Agent] {
        for format in WireFormat::ALL {
            let req = request(format, policy, 4_000);
            let p = project(&history, &req, &mut SizeCache::new()).unwrap();
            assert!(whole > 2 * p.body.len(), "the turn as stored cannot fit");
            let tokens = count(&p.body, format, req.tokenizer()).unwrap().tokens;
            assert_eq!(tokens, p.report.tokens);
            assert!(tokens <= 3_500, "{tokens}");
            let body: Value = serde_json::from_slice(&p.body).unwrap();
            let sent = results(&body, format);
            // Every call is answered, in order; the body ends with the newest result.
            let ids: Vec<String> = (0..STEPS).map(|s| format!("c{s}")).collect();
            assert_eq!(sent.iter().map(|r| r.0.clone()).collect::<Vec<_>>(), ids);
            // The clipped ones are the oldest; the newest is whole.
            let clipped: Vec<u64> = p.report.clips.iter().map(|c| c.seq).collect();
            assert!(!clipped.is_empty());
            let result_seqs: Vec<u64> = (0..STEPS).map(|s| 3 + 2 * s as u64).collect();
            assert_eq!(
                clipped,
                result_seqs[..clipped.len()],
                "{policy:?} {format:?}"
            );
            assert!(clipped.len() < STEPS);
            assert_eq!(sent[STEPS - 1].1, output(STEPS - 1));
            for (i, (_, text)) in sent.iter().enumerate() {
                let seq = result_seqs[i];
                if clipped.contains(&seq) {
                    assert!(text.contains(&format!("chars clipped from seq={seq}]")));
                } else {
                    assert_eq!(*text, output(i));
                }
            }
            // Clipped only as far as needed: the newest clipped result, whole, would not fit.
            let newest_clipped = clipped.len() - 1;
            let mut bigger = body.clone();
            let field = match format {
                WireFormat::OpenAiResponses => "input",
                _ => "messages",
            };
            let msgs = bigger[field].as_array_mut().unwrap();
            let full = output(newest_clipped);
            let clipped_text = &sent[newest_clipped].1;
            let replaced = serde_json::to_string(msgs).unwrap().replace(
                &serde_json::to_string(clipped_text).unwrap(),
                &serde_json::to_string(&full).unwrap(),
            );
            bigger[field] = serde_json::from_str(&replaced).unwrap();
            let bytes = serde_json::to_vec(&bigger).unwrap();
            assert!(count(&bytes, format, req.tokenizer()).unwrap().tokens > 3_500);
        }
    }
}

#[test]
fn the_request_is_refused_only_when_even_the_clipped_turn_does_not_fit() {
    let events = long_turn();
    let history = SliceHistory::new(&events);
    for policy in [Policy::Turns, Policy::Agent] {
        for format in WireFormat::ALL {
            // 20 calls and 20 clipped results need more than 300 tokens.
            let err = project(
                &history,
                &request(format, policy, 800),
                &mut SizeCache::new(),
            )
            .unwrap_err();
            let Error::MandatoryExceedsBudget { needed_tokens, .. } = err else {
                panic!("{err:?}");
            };
            assert!(needed_tokens > 300, "{needed_tokens}");
            // With exactly that room it fits, every result clipped to its marker.
            let req = request(format, policy, needed_tokens + 500);
            let p = project(&history, &req, &mut SizeCache::new()).unwrap();
            assert_eq!(p.report.clips.len(), STEPS, "{policy:?} {format:?}");
            assert!(p.report.tokens <= needed_tokens);
        }
    }
}
