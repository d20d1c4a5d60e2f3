#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Regression test for the incident described in docs/design.md#1-the-problem: an agent session
//! stopped after 55 tool results with "context accounting reserve exhausted", because a count field
//! was added after the context was trimmed. Failure class: a projection that "fit" before
//! bookkeeping and exceeds the budget on the wire. Guarantee: for an agent conversation of 60 tool
//! results and every byte budget from one below the mandatory size to the full size (every distinct
//! result is visited, and sampled budgets between them give the same body), the `agent` projection
//! either fits (`body.len() <= budget`, `report.bytes == body.len()`) or returns
//! `MandatoryExceedsBudget`; pinned tiers are always present, and optional tiers go in the drop
//! order of docs/design.md#p6-agent-tiers (pages, clipping, activity rows, duplicate snapshots,
//! older results).

mod common;

use ctxlog_event::{ArtifactRef, Event, EventBody, EventKind, ToolStatus};
use ctxlog_projection::{
    Error, Policy, Projection, ProjectionRequest, RecalledPage, SizeCache, SliceHistory, Tier,
    WireFormat, count, project,
};
use serde_json::json;

fn fixture() -> Vec<Event> {
    let mut bodies = vec![
        EventBody::User {
            text: "Set up the project; never push to \"main\".".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: "Done: the project is set up.".into(),
            provider_item: None,
        },
        EventBody::User {
            text: "Fix the failing build 构建 and report 😀".into(),
            parts: Vec::new(),
            provider_item: None,
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
            provider_item: None,
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
            parts: Vec::new(),
            provider_item: None,
        });
    }
    common::numbered(bodies)
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
        let mut at = |budget: u64| project(&history, &request(format, Some(budget)), &mut cache);
        // Every distinct result: from the full size down, the next budget to try is one byte
        // below the body just returned (any budget from that body's size up to the budget that
        // produced it yields the same body, which the samples below check).
        let mut steps: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut budget = full.report.bytes;
        while budget >= mandatory {
            let p = at(budget).unwrap_or_else(|e| panic!("budget {budget}: {e}"));
            assert!(p.body.len() as u64 <= budget, "budget {budget}");
            assert_eq!(p.report.bytes, p.body.len() as u64);
            check_pinned_and_order(&p.body, &p.report);
            budget = p.report.bytes - 1;
            steps.push((p.report.bytes, p.body));
        }
        assert_eq!(
            steps.last().unwrap().0,
            mandatory,
            "all optional content gone"
        );
        match at(mandatory - 1) {
            Err(Error::MandatoryExceedsBudget { needed_bytes, .. }) => {
                assert_eq!(needed_bytes, mandatory)
            }
            other => panic!("mandatory - 1: {other:?}"),
        }
        // Sampled budgets between the steps give the body of the step at or below them.
        for budget in (mandatory..=full.report.bytes).step_by(41) {
            let p = at(budget).unwrap();
            let (_, body) = steps.iter().find(|(size, _)| *size <= budget).unwrap();
            assert_eq!(&p.body, body, "budget {budget}");
        }
        println!("{format}: {} distinct bodies", steps.len());
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
        // All long results were clipped first; room a later drop freed beyond what was needed
        // is then spent on them, newest first (docs/design.md#p12-room-is-used), so some may be
        // sent whole again.
        assert!(
            report.clips.len() + clippable_dropped(report) <= 6,
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

#[test]
fn a_token_budget_drops_no_more_than_it_needs() {
    // Entries were fitted by summing per-entry token counts (+1 per newline), which
    // overestimates the joined text: at many budgets two or three more rows than needed were
    // dropped (40-66 tokens left unused with rows of about 20 tokens).
    let mut bodies = vec![EventBody::User {
        text: "Fix it: never push.".into(),
        parts: Vec::new(),
        provider_item: None,
    }];
    for i in 0..30 {
        bodies.push(EventBody::ToolCall {
            call_id: format!("c{i}"),
            tool: "shell".into(),
            arguments: json!({"cmd": format!("ls {}", i % 4)}),
            provider_item: None,
        });
        bodies.push(EventBody::ToolResult {
            call_id: format!("c{i}"),
            tool: "shell".into(),
            status: ToolStatus::Ok,
            exit_code: Some(0),
            text: format!("out:\n{i} files.\n"),
            artifact: None,
            parts: Vec::new(),
            provider_item: None,
        });
        bodies.push(EventBody::Assistant {
            text: format!("step {i}:\n"),
            provider_item: None,
        });
    }
    let events: Vec<Event> = common::numbered(bodies);
    let history = SliceHistory::new(&events);
    let request = |max_tokens: Option<u64>| {
        let mut b = ProjectionRequest::builder();
        b.model("m").input("q").policy(Policy::Agent);
        if let Some(n) = max_tokens {
            b.max_tokens(n + 1000).reserve_output(1000);
        }
        b.build().unwrap()
    };
    let full = project(&history, &request(None), &mut SizeCache::new()).unwrap();
    let mut cache = SizeCache::new();
    let mut widest_gap = 0;
    for budget in (full.report.mandatory.tokens..full.report.tokens).step_by(3) {
        let p = project(&history, &request(Some(budget)), &mut cache).unwrap();
        let c = count(&p.body, WireFormat::OpenAiChat, p.report.tokenizer).unwrap();
        assert_eq!(c.tokens, p.report.tokens);
        assert!(c.tokens <= budget);
        let gap = budget - c.tokens;
        widest_gap = widest_gap.max(gap);
        assert!(
            gap <= 30,
            "budget {budget}: {} tokens used, {} steps taken",
            c.tokens,
            p.report.drops.len()
        );
    }
    println!("widest unused gap: {widest_gap} tokens");
}

/// The agent projection of `history` with the omission notice asked for, under `budget` bytes
/// (none: no limit).
fn with_notice(history: &SliceHistory<'_>, budget: Option<u64>) -> Projection {
    let mut b = ProjectionRequest::builder();
    b.model("gpt-4o-mini")
        .system("You are a careful build agent.")
        .input("Continue.")
        .policy(Policy::Agent)
        .notice(true)
        // The notice names the recall tool only when the request offers it.
        .tools(vec![
            json!({"type":"function","function":{"name":"recall"}}),
        ]);
    if let Some(n) = budget {
        b.max_bytes(n);
    }
    project(history, &b.build().unwrap(), &mut SizeCache::new()).unwrap()
}

#[test]
fn the_agent_context_carries_an_omission_notice_counted_in_the_budget() {
    // The omission notice (docs/design.md#p7-omission-notice) for the agent policy: when entries
    // are left out and the notice was asked for, the context says how many, which seqs, and how to
    // recall them; its bytes are counted before fitting, and when even the mandatory context leaves
    // no room for it, it is left out and reported.
    let events = fixture();
    let history = SliceHistory::new(&events);
    let full = with_notice(&history, None);
    assert_eq!(full.report.notice, None, "nothing left out");
    let mandatory = full.report.mandatory.bytes;
    let mut budget = full.report.bytes - 1;
    let mut with = 0;
    while budget >= mandatory {
        let p = with_notice(&history, Some(budget));
        assert!(p.body.len() as u64 <= budget);
        assert_eq!(p.report.bytes, p.body.len() as u64);
        assert_eq!(
            p.report.tiers.iter().map(|t| t.bytes).sum::<u64>(),
            p.report.bytes
        );
        let left: Vec<u64> = p
            .report
            .drops
            .iter()
            .filter(|d| d.tier != Tier::Notice)
            .map(|d| d.seqs.first)
            .collect();
        let text = String::from_utf8(p.body.clone()).unwrap();
        match &p.report.notice {
            Some(notice) => {
                with += 1;
                let (lo, hi) = (left.iter().min().unwrap(), left.iter().max().unwrap());
                assert_eq!(
                    notice,
                    &format!(
                        "[ctxlog] {} earlier event(s) between seq {lo} and {hi} are left out of \
                         this context. They are stored and can be recalled with the recall tool \
                         (by query, or by seq=N).",
                        left.len()
                    )
                );
                assert!(text.contains(notice.as_str()));
                let notice_tier = p.report.tiers.iter().find(|t| t.tier == Tier::Notice);
                assert_eq!(notice_tier.unwrap().bytes, notice.len() as u64 + 2);
            }
            None => {
                assert!(!text.contains("are left out of this context"));
                let reported = p
                    .report
                    .drops
                    .iter()
                    .any(|d| d.tier == Tier::Notice && d.reason == "no_room");
                assert_eq!(
                    reported,
                    !left.is_empty(),
                    "budget {budget}: a notice left out is reported, only then"
                );
            }
        }
        budget = p.report.bytes - 1;
    }
    assert!(with > 10, "the notice is sent at most budgets");
    // At the mandatory size there is no room for it.
    let p = with_notice(&history, Some(mandatory));
    assert_eq!(p.report.notice, None);
    assert_eq!(p.report.bytes, mandatory);
}

#[test]
fn a_call_answered_after_a_projection_is_counted_with_its_new_row() {
    // Agent entry token counts are cached by seq; a call row's text changes when its result
    // arrives (it loses its "interrupted" mark), so a warm cache must not reuse the old count.
    let mut events = fixture();
    events.truncate(4); // two user requests, a reply, one call without its result yet
    let request = || {
        ProjectionRequest::builder()
            .model("m")
            .input("Continue.")
            .policy(Policy::Agent)
            .max_tokens(100_000)
            .build()
            .unwrap()
    };
    let mut cache = SizeCache::new();
    let before = project(&SliceHistory::new(&events), &request(), &mut cache).unwrap();
    assert!(
        String::from_utf8(before.body)
            .unwrap()
            .contains("(no result: interrupted, effects unknown)")
    );
    let all = fixture();
    events.push(all[4].clone()); // the call's result
    let warm = project(&SliceHistory::new(&events), &request(), &mut cache).unwrap();
    let cold = project(
        &SliceHistory::new(&events),
        &request(),
        &mut SizeCache::new(),
    )
    .unwrap();
    assert_eq!(warm.body, cold.body);
    assert_eq!(warm.report, cold.report, "tier figures from a warm cache");
}
