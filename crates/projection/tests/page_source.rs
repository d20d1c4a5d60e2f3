#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Recalled pages from a [`PageSource`] in one call (docs/design.md#r6-auto-include,
//! docs/design.md#r2-disposable). Failure class: a facade that projects twice (once to learn what
//! is kept in detail, once with the pages it then fetched) can drift from the projector's rules,
//! and costs two projections. Guarantees:
//! * `project_with_pages` gives, byte for byte and report for report, what that two-pass flow
//!   gave, for both policies, both formats and every byte budget;
//! * the source is asked once, for `recall_k * CANDIDATES_PER_PAGE` pages from before the
//!   first seq kept in detail, and never when `recall_k` is 0;
//! * pages already in the body (pinned notes, kept history) are never offered again;
//! * a failing source leaves the body as it is without pages and says why in the report.

mod common;

use ctxlog_event::{Event, EventBody, EventKind, ToolStatus};
use ctxlog_projection::{
    CANDIDATES_PER_PAGE, PageSource, PageSourceError, Policy, Projection, ProjectionRequest,
    ProjectionRequestBuilder, RecalledPage, SizeCache, SliceHistory, StaticPages, WireFormat,
    project, project_with_pages,
};

fn events() -> Vec<Event> {
    let mut bodies = vec![EventBody::Note {
        text: "The deploy region is eu-west-3.".into(),
        pinned: true,
        supersedes: None,
        provider_item: None,
    }];
    for i in 0..6 {
        bodies.push(EventBody::User {
            text: format!("Step {i}: what about the \"cache\" size?"),
            parts: Vec::new(),
            provider_item: None,
        });
        bodies.push(EventBody::ToolCall {
            call_id: format!("c{i}"),
            tool: "shell".into(),
            arguments: serde_json::json!({ "cmd": format!("du -sh /cache/{i}") }),
            provider_item: None,
        });
        bodies.push(EventBody::ToolResult {
            call_id: format!("c{i}"),
            tool: "shell".into(),
            status: ToolStatus::Ok,
            exit_code: Some(0),
            text: format!("{}M\t/cache/{i}", 10 * i),
            artifact: None,
            parts: Vec::new(),
            provider_item: None,
        });
        bodies.push(EventBody::Assistant {
            text: format!("The cache {i} holds {}M.", 10 * i),
            provider_item: None,
        });
    }
    common::numbered(bodies)
}

/// One page per event, newest first, as an index might rank them.
fn all_pages(events: &[Event]) -> Vec<RecalledPage> {
    events
        .iter()
        .rev()
        .filter(|e| e.kind() != EventKind::ToolCall)
        .map(|e| RecalledPage {
            seq: e.seq,
            page: 0,
            kind: e.kind(),
            char_start: 0,
            char_end: 9,
            text: format!("page of {}", e.seq),
        })
        .collect()
}

fn builder(policy: Policy, format: WireFormat, max_bytes: u64) -> ProjectionRequestBuilder {
    let mut b = ProjectionRequest::builder();
    b.format(format)
        .model("m")
        .system("Be brief.")
        .input("How big is the cache?")
        .policy(policy)
        .recall_k(2)
        // The two-pass emulation below predates the recall reserve (docs/design.md#p13-true-words).
        .recall_reserve(ctxlog_projection::RecallReserve::Amount(0))
        .notice(true)
        .max_bytes(max_bytes);
    b
}

/// What the facade did before `project_with_pages`: project, ask the source for pages older
/// than the detail, leave out those in the body, and project again with them.
fn two_passes(
    events: &[Event],
    source: &mut dyn PageSource,
    request: &ProjectionRequestBuilder,
) -> Projection {
    let history = SliceHistory::new(events);
    let plain = request.build().unwrap();
    let first = project(&history, &plain, &mut SizeCache::new()).unwrap();
    let detail_start = first.report.detail_start.unwrap_or(u64::MAX);
    if plain.recall_k() == 0 || detail_start <= 1 {
        return first;
    }
    let in_body = |seq: u64| {
        first.report.pinned.contains(&seq) || first.report.kept.iter().any(|r| r.contains(seq))
    };
    let mut with_pages = request.clone();
    let limit = plain.recall_k() * CANDIDATES_PER_PAGE;
    match source.pages(plain.input().unwrap_or_default(), detail_start, limit) {
        Ok(pages) => {
            let pages: Vec<_> = pages.into_iter().filter(|p| !in_body(p.seq)).collect();
            if pages.is_empty() {
                return first;
            }
            with_pages.recalled(pages)
        }
        Err(e) => with_pages.recall_unavailable(e.to_string()),
    };
    project(
        &history,
        &with_pages.build().unwrap(),
        &mut SizeCache::new(),
    )
    .unwrap()
}

fn full_size(events: &[Event], policy: Policy, format: WireFormat) -> u64 {
    let request = builder(policy, format, u64::MAX).build().unwrap();
    let history = SliceHistory::new(events);
    project(&history, &request, &mut SizeCache::new())
        .unwrap()
        .report
        .bytes
}

#[test]
fn one_call_gives_what_two_passes_gave_at_every_budget() {
    let events = events();
    let history = SliceHistory::new(&events);
    let mut compared = 0;
    for policy in [Policy::Turns, Policy::Agent] {
        for format in [WireFormat::OpenAiChat, WireFormat::AnthropicMessages] {
            let full = full_size(&events, policy, format);
            for max_bytes in (200..full + 400).step_by(7) {
                let request = builder(policy, format, max_bytes);
                let Ok(built) = request.build() else { continue };
                let mut source = StaticPages(all_pages(&events));
                let one = project_with_pages(&history, &mut source, &built, &mut SizeCache::new());
                let Ok(one) = one else { continue };
                let two = two_passes(&events, &mut StaticPages(all_pages(&events)), &request);
                assert_eq!(
                    String::from_utf8_lossy(&one.body),
                    String::from_utf8_lossy(&two.body),
                    "{policy:?} {format:?} {max_bytes}"
                );
                assert_eq!(one.report, two.report, "{policy:?} {format:?} {max_bytes}");
                compared += 1;
            }
        }
    }
    assert!(compared > 100, "{compared}");
}

/// Records what it was asked, and answers from a fixed list.
struct Recording {
    pages: StaticPages,
    asked: Vec<(String, u64, usize)>,
}

impl PageSource for Recording {
    fn pages(
        &mut self,
        query: &str,
        before: u64,
        limit: usize,
    ) -> Result<Vec<RecalledPage>, PageSourceError> {
        self.asked.push((query.to_owned(), before, limit));
        self.pages.pages(query, before, limit)
    }
}

#[test]
fn the_source_is_asked_once_from_before_the_detail_and_pages_in_the_body_are_left_out() {
    let events = events();
    let history = SliceHistory::new(&events);
    // Room for a few recent turns only, and a page of the pinned note offered first.
    let full = full_size(&events, Policy::Turns, WireFormat::OpenAiChat);
    let request = builder(Policy::Turns, WireFormat::OpenAiChat, full - 250)
        .build()
        .unwrap();
    let mut pages = all_pages(&events);
    pages.rotate_right(1);
    assert_eq!(pages[0].seq, 1, "the pinned note's page comes first");
    let mut source = Recording {
        pages: StaticPages(pages),
        asked: Vec::new(),
    };
    let p = project_with_pages(&history, &mut source, &request, &mut SizeCache::new()).unwrap();
    let detail_start = p.report.detail_start.unwrap();
    assert!(detail_start > 2, "{:?}", p.report);
    assert_eq!(
        source.asked,
        [(
            "How big is the cache?".to_owned(),
            detail_start,
            2 * CANDIDATES_PER_PAGE
        )]
    );
    assert_eq!(p.report.pinned, [1]);
    assert!(
        !p.report.recall.included.is_empty(),
        "{:?}",
        p.report.recall
    );
    for page in p.report.recall.included.iter() {
        assert!(page.seq < detail_start && page.seq != 1, "{page:?}");
    }
    assert!(p.report.recall.skipped.iter().all(|s| s.seq != 1));

    let mut none = Recording {
        pages: StaticPages(all_pages(&events)),
        asked: Vec::new(),
    };
    let mut b = builder(Policy::Turns, WireFormat::OpenAiChat, full - 250);
    let request = b.recall_k(0).build().unwrap();
    let p = project_with_pages(&history, &mut none, &request, &mut SizeCache::new()).unwrap();
    assert!(none.asked.is_empty());
    assert!(p.report.recall.included.is_empty());
}

struct Damaged;

impl PageSource for Damaged {
    fn pages(&mut self, _: &str, _: u64, _: usize) -> Result<Vec<RecalledPage>, PageSourceError> {
        Err("recall index damaged: run ctxlog reindex".into())
    }
}

#[test]
fn a_failing_source_is_reported_and_the_body_goes_without_pages() {
    let events = events();
    let history = SliceHistory::new(&events);
    for policy in [Policy::Turns, Policy::Agent] {
        let full = full_size(&events, policy, WireFormat::AnthropicMessages);
        let request = builder(policy, WireFormat::AnthropicMessages, full - 200)
            .build()
            .unwrap();
        let plain = project(&history, &request, &mut SizeCache::new()).unwrap();
        let p =
            project_with_pages(&history, &mut Damaged, &request, &mut SizeCache::new()).unwrap();
        assert_eq!(p.body, plain.body);
        assert_eq!(
            p.report.recall.unavailable.as_deref(),
            Some("recall index damaged: run ctxlog reindex")
        );
        assert!(p.report.recall.included.is_empty());
    }
}
