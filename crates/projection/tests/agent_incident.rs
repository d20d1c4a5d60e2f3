#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Regression test for the incident of SPEC §1: an agent session stopped after 55 tool results
//! with "context accounting reserve exhausted", because a count field was added after the
//! context was trimmed. Failure class: a projection that "fit" before bookkeeping and exceeds
//! the budget on the wire. Guarantee: for an agent conversation of 60 tool results and every
//! byte budget from one below the mandatory size to the full size, the `agent` projection
//! either fits (`body.len() <= budget`, `report.bytes == body.len()`) or returns
//! `MandatoryExceedsBudget`; pinned tiers are always present, and optional tiers go in the
//! SPEC P6 order (pages, clipping, activity rows, duplicate snapshots, older results).

use ctxlog_ledger::event::{ArtifactRef, Event, EventBody, EventKind, ToolStatus};
use ctxlog_projection::{
    Error, Policy, ProjectionRequest, RecalledPage, SizeCache, SliceHistory, Tier, WireFormat,
    count, project,
};
use serde_json::json;

fn fixture() -> Vec<Event> {
    let mut bodies = vec![
        EventBody::User {
            text: "Set up the project; never push to \"main\".".into(),
        },
        EventBody::Assistant {
            text: "Done: the project is set up.".into(),
        },
        EventBody::User {
            text: "Fix the failing build 构建 and report 😀".into(),
        },
    ];
    for i in 0..60 {
        let cmd = if i % 7 == 0 {
            "cat Cargo.toml".to_owned()
        } else {
            format!("cargo check -p c{i}")
        };
        bodies.push(EventBody::ToolCall {
            call_id: format!("call_{i}"),
            tool: "shell".into(),
            arguments: json!({"cmd": cmd}),
        });
        let long = i % 10 == 3;
        let text = if long {
            format!("line {i}: warning: unused \"x\"\n").repeat(60)
        } else {
            format!("step {i} output: 3 crates checked, 中文 ok\n")
        };
        let failed = i % 13 == 5;
        bodies.push(EventBody::ToolResult {
            call_id: format!("call_{i}"),
            tool: "shell".into(),
            status: if failed {
                ToolStatus::Error
            } else {
                ToolStatus::Ok
            },
            exit_code: Some(if failed { 101 } else { 0 }),
            text,
            artifact: long.then(|| ArtifactRef {
                name: format!("sha256-{:064x}", i),
                bytes: 99_000,
            }),
        });
    }
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| Event {
            seq: i as u64 + 1,
            ts_ms: 0,
            body,
        })
        .collect()
}

fn request(format: WireFormat, max_bytes: Option<u64>) -> ProjectionRequest {
    let mut b = ProjectionRequest::builder();
    b.format(format)
        .model("gpt-4o-mini")
        .system("You are a careful build agent.")
        .input("Continue.")
        .policy(Policy::Agent)
        .recalled(vec![RecalledPage {
            seq: 2,
            page: 0,
            kind: EventKind::Assistant,
            char_start: 0,
            char_end: 28,
            text: "Done: the project is set up.".into(),
        }]);
    if let Some(n) = max_bytes {
        b.max_bytes(n);
    }
    b.build().unwrap()
}

#[test]
fn every_byte_budget_fits_or_is_refused_and_tiers_drop_in_order() {
    let events = fixture();
    let history = SliceHistory::new(&events);
    for format in [WireFormat::OpenAiChat, WireFormat::AnthropicMessages] {
        let full = project(&history, &request(format, None), &mut SizeCache::new()).unwrap();
        let mandatory = full.report.mandatory.bytes;
        println!(
            "{format}: full {} bytes, mandatory {} bytes",
            full.report.bytes, mandatory
        );
        assert!(full.report.drops.is_empty() && full.report.clips.is_empty());
        assert_eq!(
            full.report.recall.included.len(),
            0,
            "seq 2 is kept in detail at full size"
        );
        let mut cache = SizeCache::new();
        let mut previous_bytes = 0;
        // Every budget for openai-chat; every 5th (and both ends) for anthropic-messages.
        let step = if format == WireFormat::OpenAiChat {
            1
        } else {
            5
        };
        let budgets = (mandatory - 1..=full.report.bytes)
            .step_by(step)
            .chain([full.report.bytes]);
        for budget in budgets {
            match project(&history, &request(format, Some(budget)), &mut cache) {
                Ok(p) => {
                    assert!(p.body.len() as u64 <= budget, "budget {budget}");
                    assert_eq!(p.report.bytes, p.body.len() as u64);
                    assert!(
                        p.report.bytes >= previous_bytes,
                        "more room never yields less"
                    );
                    previous_bytes = p.report.bytes;
                    check_pinned_and_order(&p.body, &p.report);
                }
                Err(Error::MandatoryExceedsBudget { needed_bytes, .. }) => {
                    assert_eq!(budget, mandatory - 1);
                    assert_eq!(needed_bytes, mandatory);
                }
                Err(e) => panic!("budget {budget}: {e}"),
            }
        }
    }
}

fn check_pinned_and_order(body: &[u8], report: &ctxlog_projection::Report) {
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(
        text.contains("never push to \\\"main\\\""),
        "earlier request verbatim"
    );
    assert!(text.contains("Fix the failing build 构建 and report 😀"));
    assert!(text.contains("previous assistant reply (conversation, not evidence): Done"));
    assert!(
        text.contains("[seq 123] result shell id=call_59 status=ok exit_code=0"),
        "latest result identity"
    );
    assert!(
        text.contains(
            "[status] latest failure: result shell id=call_57 status=error exit_code=101"
        )
    );
    let has = |tier: Tier| report.tiers.iter().any(|t| t.tier == tier);
    let dropped = |tier: Tier| report.drops.iter().any(|d| d.tier == tier);
    if dropped(Tier::Activity) {
        assert_eq!(
            report.clips.len() + clippable_dropped(report),
            6,
            "all long results clipped first"
        );
    }
    if dropped(Tier::Details) {
        assert!(
            !has(Tier::Activity),
            "activity rows go before detailed results"
        );
    }
    let duplicates = report.drops.iter().position(|d| d.reason == "duplicate");
    let older = report
        .drops
        .iter()
        .position(|d| d.tier == Tier::Details && d.reason == "budget");
    if let (Some(o), Some(d)) = (older, duplicates) {
        assert!(d < o, "duplicate snapshots go before other older results");
    }
    if older.is_some() {
        assert_eq!(
            report
                .drops
                .iter()
                .filter(|d| d.reason == "duplicate")
                .count(),
            8
        );
    }
}

fn clippable_dropped(report: &ctxlog_projection::Report) -> usize {
    // Long results are at i % 10 == 3, seq 5 + 2i.
    report
        .drops
        .iter()
        .filter(|d| d.tier == Tier::Details && (d.seqs.first - 5) % 20 == 6)
        .count()
}

#[test]
fn recalled_pages_are_included_when_their_seq_is_older_than_the_detail() {
    let events = fixture();
    let history = SliceHistory::new(&events);
    let full = project(
        &history,
        &request(WireFormat::OpenAiChat, None),
        &mut SizeCache::new(),
    )
    .unwrap();
    // Drop enough for the activity rows and the previous reply's seq to lie beyond the detail:
    // the page for seq 2 is still not older than the previous reply (seq 2), so it is skipped.
    let tight = project(
        &history,
        &request(
            WireFormat::OpenAiChat,
            Some(full.report.mandatory.bytes + 400),
        ),
        &mut SizeCache::new(),
    )
    .unwrap();
    assert_eq!(tight.report.recall.included.len(), 0);
    assert_eq!(tight.report.recall.skipped[0].reason, "kept_in_detail");
    let c = count(&tight.body, WireFormat::OpenAiChat, tight.report.tokenizer).unwrap();
    assert_eq!(c.tokens, tight.report.tokens);
}
