#![allow(clippy::unwrap_used, clippy::expect_used)]
//! scratch
use ctxlog_ledger::event::{Event, EventBody, ToolStatus};
use ctxlog_projection::*;
use serde_json::json;

fn evs(bodies: Vec<EventBody>) -> Vec<Event> {
    bodies.into_iter().enumerate().map(|(i, body)| Event { seq: i as u64 + 1, ts_ms: 0, body }).collect()
}

#[test]
fn probe_whitespace() {
    let events = evs(vec![
        EventBody::User { text: "hi".into() },
        EventBody::Assistant { text: " \n".into() },
        EventBody::User { text: "\t".into() },
        EventBody::Assistant { text: "ok".into() },
    ]);
    let r = ProjectionRequest::builder().format(WireFormat::AnthropicMessages).model("m").system("  ").input(" ").build().unwrap();
    let p = project(&SliceHistory::new(&events), &r, &mut SizeCache::new()).unwrap();
    println!("{}", String::from_utf8(p.body).unwrap());
}

#[test]
fn probe_notice_displaces_turns() {
    let events = evs(vec![
        EventBody::User { text: "a".into() },
        EventBody::Assistant { text: "b".into() },
        EventBody::User { text: "c".into() },
        EventBody::Assistant { text: "d".into() },
    ]);
    let h = SliceHistory::new(&events);
    let base = ProjectionRequest::builder().model("m").input("q").build().unwrap();
    let full = project(&h, &base, &mut SizeCache::new()).unwrap();
    for b in full.report.mandatory.bytes..=full.report.bytes {
        let r = ProjectionRequest::builder().model("m").input("q").notice(true).max_bytes(b).build().unwrap();
        let p = project(&h, &r, &mut SizeCache::new()).unwrap();
        println!("{b}: kept {} bytes {} notice {:?} drops {:?}", p.report.turns.kept, p.report.bytes, p.report.notice.is_some(), p.report.drops);
    }
}

#[test]
fn probe_agent_tiers_tokens() {
    let mut bodies = vec![EventBody::User { text: "Fix it: never push.".into() }];
    for i in 0..30 {
        bodies.push(EventBody::ToolCall { call_id: format!("c{i}"), tool: "shell".into(), arguments: json!({"cmd": format!("ls {}", i % 4)}) });
        bodies.push(EventBody::ToolResult { call_id: format!("c{i}"), tool: "shell".into(), status: ToolStatus::Ok, exit_code: Some(0), text: format!("out:\n{i} files.\n"), artifact: None });
        bodies.push(EventBody::Assistant { text: format!("step {i}:\n").into() });
    }
    let events = evs(bodies);
    let h = SliceHistory::new(&events);
    for f in [WireFormat::OpenAiChat, WireFormat::AnthropicMessages] {
        let r = ProjectionRequest::builder().format(f).model("m").input("q").policy(Policy::Agent).build().unwrap();
        let full = project(&h, &r, &mut SizeCache::new()).unwrap();
        let sum: u64 = full.report.tiers.iter().map(|t| t.tokens).sum();
        println!("{f}: tokens {} tier sum {} tiers {:?}", full.report.tokens, sum, full.report.tiers);
        // token budgets: minimal drops?
        let t0 = std::time::Instant::now();
        let mut over = 0;
        for b in (full.report.mandatory.tokens..full.report.tokens).step_by(7) {
            let r = ProjectionRequest::builder().format(f).model("m").input("q").policy(Policy::Agent).max_tokens(b + 5000).reserve_output(5000).build().unwrap();
            let p = project(&h, &r, &mut SizeCache::new()).unwrap();
            let sum: u64 = p.report.tiers.iter().map(|t| t.tokens).sum();
            if sum != p.report.tokens { over += 1; }
            if b - p.report.tokens > 40 { println!("budget {b} used {} drops {}", p.report.tokens, p.report.drops.len()); }
        }
        println!("mismatched sums {over} in {:?}", t0.elapsed());
    }
}
