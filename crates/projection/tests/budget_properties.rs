#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Property tests of the budget guarantees (docs/design.md#p2-exact-bytes,
//! docs/design.md#p3-tokens, docs/design.md#p4-mandatory-input, docs/design.md#p5-whole-turns,
//! docs/design.md#p9-cost). Failure class: a body over budget (the provider's 400), a reported size
//! that is not the body's, a split turn or an unpaired tool call, or a fast selector that disagrees
//! with the obvious rule. Guarantees, for random conversations (tool calls with and without
//! results, notes, pinned and superseding notes, a preamble, markers, opaque provider items of
//! both formats; text with quotes,
//! backslashes, newlines, control characters, Chinese and emoji), both formats and both tokenizers,
//! and every byte budget from below the mandatory size to above the full size:
//! * the projection fits, or fails with `MandatoryExceedsBudget` exactly when the mandatory
//!   part does not fit;
//! * `report.bytes == body.len()` and `report.tokens == count(body).tokens`;
//! * the body equals, byte for byte, the naive rule's (serialize every candidate suffix);
//! * the body is valid JSON in the provider's shape (tool calls answered in order; Anthropic
//!   roles alternate);
//! * a warm `SizeCache` gives the same bodies without rendering any unit again.
//!
//! Media keep these seconds, not minutes: the images are a few pixels (what costs is their
//! base64 and their tokens, not pixels), the 40-case properties carry images only, and the
//! properties with a document (3000 tokens a page, so thousands of token budgets) run 5 cases,
//! comparing with the naive rule wherever the body changes and at every 53rd budget; each
//! distinct body is counted once.

use ctxlog_event::{Event, EventBody, EventKind, SystemMarker, ToolStatus};
mod common;

use ctxlog_projection::naive::project_naive;
use ctxlog_projection::{
    Error, Policy, ProjectionRequest, ProjectionRequestBuilder, RecalledPage, Report, SizeCache,
    SliceHistory, Tokenizer, WireFormat, count, project,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};

#[derive(Clone, Debug)]
enum Step {
    Reply(String),
    Calls {
        text: Option<String>,
        answered: Vec<bool>,
        out: String,
        error: bool,
    },
    Note {
        text: String,
        pinned: bool,
        supersede: bool,
    },
    Orphan(String),
    Marker,
    /// An opaque provider item: a Responses reasoning item, or an Anthropic thinking block.
    Opaque {
        anthropic: bool,
        text: String,
    },
}

fn text() -> impl Strategy<Value = String> {
    "[a-z \"\\\\\n\t中文😀\u{1}]{0,16}"
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => text().prop_map(Step::Reply),
        3 => (proptest::option::of(text()), proptest::collection::vec(any::<bool>(), 1..3), text(), any::<bool>())
            .prop_map(|(text, answered, out, error)| Step::Calls { text, answered, out, error }),
        1 => (text(), any::<bool>(), any::<bool>()).prop_map(|(text, pinned, supersede)| Step::Note { text, pinned, supersede }),
        1 => text().prop_map(Step::Orphan),
        1 => Just(Step::Marker),
        2 => (any::<bool>(), text()).prop_map(|(anthropic, text)| Step::Opaque { anthropic, text }),
    ]
}

type Turn = (String, Vec<Step>);

fn conversation() -> impl Strategy<Value = (Vec<Step>, Vec<Turn>)> {
    (
        proptest::collection::vec(step(), 0..2),
        proptest::collection::vec((text(), proptest::collection::vec(step(), 0..4)), 0..5),
    )
}

struct Builder {
    events: Vec<Event>,
    notes: Vec<u64>,
}

impl Builder {
    fn push(&mut self, body: EventBody) -> u64 {
        let seq = self.events.len() as u64 + 1;
        self.events.push(Event {
            seq,
            ts_ms: 0,
            body,
        });
        seq
    }

    fn step(&mut self, step: &Step) {
        match step {
            Step::Reply(t) => {
                self.push(EventBody::Assistant {
                    text: t.clone(),
                    provider_item: None,
                });
            }
            Step::Calls {
                text,
                answered,
                out,
                error,
            } => {
                if let Some(t) = text {
                    self.push(EventBody::Assistant {
                        text: t.clone(),
                        provider_item: None,
                    });
                }
                let base = self.events.len();
                for (i, _) in answered.iter().enumerate() {
                    self.push(EventBody::ToolCall {
                        call_id: format!("c{base}_{i}"),
                        tool: "shell".into(),
                        arguments: json!({"cmd": out, "n": i}),
                        provider_item: None,
                    });
                }
                for (i, a) in answered.iter().enumerate().rev() {
                    if *a {
                        self.push(EventBody::ToolResult {
                            call_id: format!("c{base}_{i}"),
                            tool: "shell".into(),
                            status: if *error {
                                ToolStatus::Error
                            } else {
                                ToolStatus::Ok
                            },
                            exit_code: error.then_some(2),
                            text: out.clone(),
                            artifact: None,
                            parts: Vec::new(),
                            provider_item: None,
                        });
                    }
                }
            }
            Step::Note {
                text,
                pinned,
                supersede,
            } => {
                let supersedes = if *supersede {
                    self.notes.last().copied()
                } else {
                    None
                };
                let seq = self.push(EventBody::Note {
                    text: text.clone(),
                    pinned: *pinned,
                    supersedes,
                    provider_item: None,
                });
                self.notes.push(seq);
            }
            Step::Orphan(t) => {
                self.push(EventBody::ToolResult {
                    call_id: "orphan".into(),
                    tool: "shell".into(),
                    status: ToolStatus::Ok,
                    exit_code: None,
                    text: t.clone(),
                    artifact: None,
                    parts: Vec::new(),
                    provider_item: None,
                });
            }
            Step::Marker => {
                self.push(EventBody::System {
                    marker: SystemMarker::Import {
                        source: "test".into(),
                    },
                });
            }
            Step::Opaque { anthropic, text } => {
                let event = if *anthropic {
                    json!({"kind":"opaque","format":"anthropic-messages","item":
                        {"type":"thinking","thinking":text,"signature":"EqQB"}})
                } else {
                    json!({"kind":"opaque","format":"openai-responses","item":
                        {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":text}],
                         "encrypted_content":"gAAAA"}})
                };
                self.push(serde_json::from_value(event).unwrap());
            }
        }
    }
}

/// A PDF of one page, as far as ctxlog reads one.
const ONE_PAGE_PDF: &[u8] = b"%PDF-1.4\n1 0 obj <</Type /Page>> endobj\n";

/// Which media the turns carry (a third of them, chosen by the text's length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Media {
    /// Images (by bytes and by URL) and a one-page PDF: a document is charged 3000 tokens a
    /// page, so the token budgets across such a turn are thousands of projections. The
    /// byte-budget properties use it, and the media-heavy token properties with fewer cases.
    Heavy,
    /// Images only, a few pixels each (tokens by the formats' rules; what makes an image
    /// costly in bytes is its base64, not its pixels).
    Light,
}

fn build_events(preamble: &[Step], turns: &[Turn], media: Media) -> Vec<Event> {
    let mut b = Builder {
        events: Vec::new(),
        notes: Vec::new(),
    };
    for s in preamble {
        b.step(s);
    }
    for (user, steps) in turns {
        // A third of the turns carry media (an image by bytes and by URL, a PDF), chosen by
        // the text's length so every strategy keeps its shape.
        let parts = match media {
            _ if user.len() % 3 != 1 => Vec::new(),
            Media::Heavy => common::media_parts(64 + user.len() as u32, 48)
                .into_iter()
                .map(|p| match p {
                    // One page: 3000 tokens, not 6000 (the page count has tests of its own).
                    ctxlog_event::Part::Document { .. } => p.with_data(ONE_PAGE_PDF),
                    p => p,
                })
                .collect(),
            Media::Light => common::media_parts(64 + user.len() as u32, 48)
                .into_iter()
                .filter(|p| !matches!(p, ctxlog_event::Part::Document { .. }))
                .collect(),
        };
        b.push(EventBody::User {
            text: user.clone(),
            parts,
            provider_item: None,
        });
        for s in steps {
            b.step(s);
        }
    }
    b.events
}

#[derive(Clone, Debug)]
struct Shape {
    format: WireFormat,
    tokenizer: Tokenizer,
    system: Option<String>,
    notice: bool,
    tools: bool,
    pages: usize,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        proptest::sample::select(WireFormat::ALL.to_vec()),
        prop_oneof![Just(Tokenizer::O200k), Just(Tokenizer::Cl100k)],
        proptest::option::of(text()),
        any::<bool>(),
        any::<bool>(),
        0usize..3,
    )
        .prop_map(|(format, tokenizer, system, notice, tools, pages)| Shape {
            format,
            tokenizer,
            system,
            notice,
            tools,
            pages,
        })
}

fn request(
    shape: &Shape,
    events: &[Event],
    max_bytes: Option<u64>,
    max_tokens: Option<u64>,
) -> ProjectionRequest {
    builder(shape, events, max_bytes, max_tokens)
        .build()
        .unwrap()
}

fn builder(
    shape: &Shape,
    events: &[Event],
    max_bytes: Option<u64>,
    max_tokens: Option<u64>,
) -> ProjectionRequestBuilder {
    let mut b = ProjectionRequest::builder();
    b.format(shape.format)
        .tokenizer(shape.tokenizer)
        .model("m-\"1\"")
        .input("now? 😀")
        // The naive rule is the turns policy's (auto would choose agent for tool turns).
        .policy(Policy::Turns)
        .notice(shape.notice)
        .reserve_output(7)
        .recall_k(shape.pages);
    if let Some(s) = &shape.system {
        b.system(s.clone());
    }
    if shape.tools {
        let parameters =
            json!({"type":"object","properties":{"query":{"type":"string","description":"q"}}});
        b.tools(vec![match shape.format {
            WireFormat::OpenAiResponses => {
                json!({"type":"function","name":"recall","description":"Recall.","parameters":parameters,"strict":false})
            }
            _ => {
                json!({"type":"function","function":{"name":"recall","description":"Recall.","parameters":parameters}})
            }
        }]);
    }
    let pages = events
        .iter()
        .filter(|e| e.kind() != EventKind::ToolCall)
        .take(4)
        .map(|e| RecalledPage {
            seq: e.seq,
            page: 0,
            kind: e.kind(),
            char_start: 0,
            char_end: 3,
            text: "old \"page\"".into(),
        })
        .collect();
    b.recalled(pages);
    if let Some(n) = max_bytes {
        b.max_bytes(n);
    }
    if let Some(n) = max_tokens {
        b.max_tokens(n + 7);
    }
    b
}

/// `report` with the figures a projection without token figures leaves at 0.
fn without_token_figures(report: &Report) -> Report {
    let mut report = report.clone();
    report.tokens = 0;
    report.mandatory.tokens = 0;
    for tier in &mut report.tiers {
        tier.tokens = 0;
    }
    report
}

/// Checks that the report's tiers add up to its totals (docs/design.md#p8-report).
fn check_tier_sums(report: &ctxlog_projection::Report) {
    assert_eq!(
        report.tiers.iter().map(|t| t.bytes).sum::<u64>(),
        report.bytes
    );
    assert_eq!(
        report.tiers.iter().map(|t| t.tokens).sum::<u64>(),
        report.tokens
    );
}

/// Checks the provider's structural rules on a body.
fn check_shape(format: WireFormat, body: &[u8]) {
    let v: Value = serde_json::from_slice(body).unwrap();
    if format == WireFormat::OpenAiResponses {
        return check_responses_shape(&v);
    }
    let messages = v["messages"].as_array().unwrap();
    match format {
        WireFormat::OpenAiChat => {
            let mut i = 0;
            while i < messages.len() {
                if let Some(calls) = messages[i]["tool_calls"].as_array() {
                    for (j, call) in calls.iter().enumerate() {
                        let answer = &messages[i + 1 + j];
                        assert_eq!(answer["role"], "tool");
                        assert_eq!(answer["tool_call_id"], call["id"]);
                        assert!(call["function"]["arguments"].is_string());
                    }
                    i += calls.len();
                } else {
                    assert_ne!(messages[i]["role"], "tool", "tool message without a call");
                }
                i += 1;
            }
        }
        WireFormat::OpenAiResponses => unreachable!("checked above"),
        WireFormat::AnthropicMessages => {
            assert_eq!(messages[0]["role"], "user");
            for w in messages.windows(2) {
                assert_ne!(w[0]["role"], w[1]["role"], "roles must alternate");
                let uses: Vec<&Value> = w[0]["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|b| b["type"] == "tool_use")
                    .collect();
                let next = w[1]["content"].as_array().unwrap();
                for (j, u) in uses.iter().enumerate() {
                    assert_eq!(next[j]["type"], "tool_result");
                    assert_eq!(next[j]["tool_use_id"], u["id"]);
                }
            }
            for m in messages {
                for b in m["content"].as_array().unwrap() {
                    if b["type"] == "text" {
                        let text = b["text"].as_str().unwrap();
                        assert!(!text.trim().is_empty(), "blank text block {text:?}");
                    }
                }
            }
        }
    }
}

/// Every `function_call` is followed, after the calls of its run, by its output, and every
/// output answers a call before it.
fn check_responses_shape(body: &Value) {
    let items = body["input"].as_array().unwrap();
    let mut open: Vec<&Value> = Vec::new();
    for item in items {
        match item["type"].as_str().unwrap() {
            "function_call" => {
                assert!(item["arguments"].is_string());
                open.push(&item["call_id"]);
            }
            "function_call_output" => {
                assert_eq!(
                    open.first(),
                    Some(&&item["call_id"]),
                    "output without its call"
                );
                open.remove(0);
            }
            "message" | "reasoning" => assert!(open.is_empty(), "a call left unanswered"),
            other => panic!("unexpected item type {other}"),
        }
    }
    assert!(open.is_empty(), "a call left unanswered");
}

/// Every token budget from just below the mandatory size to just above the full size: the
/// projection fits (its reported tokens are the body's count) and equals the naive rule's, or
/// is refused exactly when the mandatory part does not fit. The naive rule is compared at
/// every `stride`-th budget and at every budget where the body changes and the one below it
/// (`stride` 1: at every budget).
fn check_every_token_budget(
    events: &[Event],
    shape: &Shape,
    stride: u64,
) -> Result<(), TestCaseError> {
    let history = SliceHistory::new(events);
    let full = project(
        &history,
        &request(shape, events, None, None),
        &mut SizeCache::new(),
    )
    .unwrap();
    let mandatory = full.report.mandatory.tokens;
    let mut cache = SizeCache::new();
    // The body's count, kept while consecutive budgets give the same body (most do: a turn
    // with media spans thousands of tokens), so each distinct body is counted once.
    let mut counted: Option<(Vec<u8>, u64)> = None;
    for budget in mandatory.saturating_sub(2).max(1)..=full.report.tokens + 2 {
        let req = request(shape, events, None, Some(budget));
        match project(&history, &req, &mut cache) {
            Ok(p) => {
                let (tokens, changed) = match &counted {
                    Some((body, tokens)) if *body == p.body => (*tokens, false),
                    _ => (
                        count(&p.body, shape.format, shape.tokenizer)
                            .unwrap()
                            .tokens,
                        true,
                    ),
                };
                prop_assert_eq!(p.report.tokens, tokens);
                prop_assert!(tokens <= budget);
                if let Some((before, _)) = counted.as_ref().filter(|_| changed && stride > 1) {
                    let below = request(shape, events, None, Some(budget - 1));
                    prop_assert_eq!(before, &project_naive(&history, &below).unwrap());
                }
                if changed || budget % stride == 0 {
                    let naive = project_naive(&history, &req).unwrap();
                    prop_assert_eq!(&p.body, &naive);
                }
                counted = Some((p.body, tokens));
            }
            Err(Error::MandatoryExceedsBudget { needed_tokens, .. }) => {
                prop_assert!(budget < mandatory);
                prop_assert_eq!(needed_tokens, mandatory);
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
    Ok(())
}

/// The agent policy at every byte and every token budget: it fits, reports what it sends,
/// keeps the provider's shape, or is refused exactly when its mandatory part does not fit.
fn check_agent_budgets(events: &[Event], shape: &Shape) -> Result<(), TestCaseError> {
    let history = SliceHistory::new(events);
    let mut req = request(shape, events, None, None);
    let agent = |req: &ProjectionRequest, max: Option<u64>| {
        let mut b = ProjectionRequest::builder();
        b.format(req.format())
            .tokenizer(req.tokenizer())
            .model(req.model())
            .input(req.input().unwrap())
            .policy(Policy::Agent)
            .recalled(req.recalled().to_vec())
            .recall_k(2)
            .notice(shape.notice);
        if let Some(m) = max {
            b.max_bytes(m);
        }
        b.build().unwrap()
    };
    req = agent(&req, None);
    let full = project(&history, &req, &mut SizeCache::new()).unwrap();
    let mandatory = full.report.mandatory.bytes;
    for budget in mandatory.saturating_sub(2).max(1)..=full.report.bytes + 2 {
        match project(&history, &agent(&req, Some(budget)), &mut SizeCache::new()) {
            Ok(p) => {
                prop_assert!(p.body.len() as u64 <= budget);
                prop_assert_eq!(p.report.bytes, p.body.len() as u64);
                let c = count(&p.body, shape.format, shape.tokenizer).unwrap();
                prop_assert_eq!(p.report.tokens, c.tokens);
                check_shape(shape.format, &p.body);
                check_tier_sums(&p.report);
            }
            Err(Error::MandatoryExceedsBudget { needed_bytes, .. }) => {
                prop_assert!(budget < mandatory);
                prop_assert_eq!(needed_bytes, mandatory);
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
    // Token budgets (input tokens, with a reservation of 7 on top).
    let mandatory_tokens = full.report.mandatory.tokens;
    let mut cache = SizeCache::new();
    for budget in mandatory_tokens.saturating_sub(2).max(1)..=full.report.tokens + 2 {
        let mut b = ProjectionRequest::builder();
        b.format(req.format())
            .tokenizer(req.tokenizer())
            .model(req.model())
            .input(req.input().unwrap())
            .policy(Policy::Agent)
            .max_tokens(budget + 7)
            .reserve_output(7)
            .notice(shape.notice);
        match project(&history, &b.build().unwrap(), &mut cache) {
            Ok(p) => {
                let c = count(&p.body, shape.format, shape.tokenizer).unwrap();
                prop_assert_eq!(p.report.tokens, c.tokens);
                prop_assert!(c.tokens <= budget);
            }
            Err(Error::MandatoryExceedsBudget { needed_tokens, .. }) => {
                prop_assert!(budget < mandatory_tokens);
                prop_assert_eq!(needed_tokens, mandatory_tokens);
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn every_byte_budget_fits_or_is_refused_and_equals_the_naive_rule(
        (preamble, turns) in conversation(),
        shape in shape(),
        stride in 7u64..60,
    ) {
        let events = build_events(&preamble, &turns, Media::Heavy);
        let history = SliceHistory::new(&events);
        let full = project(&history, &request(&shape, &events, None, None), &mut SizeCache::new()).unwrap();
        let mandatory = full.report.mandatory.bytes;
        let mut cache = SizeCache::new();
        let mut last_bytes: Option<u64> = None;
        for budget in mandatory.saturating_sub(2).max(1)..=full.report.bytes + 2 {
            let req = request(&shape, &events, Some(budget), None);
            match project(&history, &req, &mut cache) {
                Ok(p) => {
                    prop_assert!(p.body.len() as u64 <= budget);
                    prop_assert_eq!(p.report.bytes, p.body.len() as u64);
                    prop_assert!(budget >= mandatory);
                    // Sampled, plus every budget at which the selection changes and the one
                    // just below it.
                    let changed = last_bytes.is_some_and(|b| b != p.report.bytes);
                    let below = budget - 1;
                    last_bytes = Some(p.report.bytes);
                    if changed && below >= mandatory {
                        let req = request(&shape, &events, Some(below), None);
                        let ours = project(&history, &req, &mut cache).unwrap();
                        prop_assert_eq!(ours.body, project_naive(&history, &req).unwrap());
                    }
                    if changed || budget % stride == 0 || budget == mandatory || budget >= full.report.bytes {
                        let c = count(&p.body, shape.format, shape.tokenizer).unwrap();
                        prop_assert_eq!(p.report.tokens, c.tokens);
                        check_shape(shape.format, &p.body);
                        check_tier_sums(&p.report);
                        let naive = project_naive(&history, &req).unwrap();
                        prop_assert_eq!(String::from_utf8(p.body).unwrap(), String::from_utf8(naive).unwrap());
                    }
                }
                Err(Error::MandatoryExceedsBudget { needed_bytes, .. }) => {
                    prop_assert!(budget < mandatory);
                    prop_assert_eq!(needed_bytes, mandatory);
                    let naive_refuses = matches!(project_naive(&history, &req), Err(Error::MandatoryExceedsBudget { .. }));
                    prop_assert!(naive_refuses);
                }
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
        }
        // A warm cache renders nothing new.
        let misses = cache.misses();
        let again = project(&history, &request(&shape, &events, Some(full.report.bytes), None), &mut cache).unwrap();
        prop_assert_eq!(cache.misses(), misses);
        prop_assert_eq!(again.body, full.body);
    }

    #[test]
    fn every_token_budget_fits_or_is_refused_and_equals_the_naive_rule(
        (preamble, turns) in conversation(),
        shape in shape(),
    ) {
        check_every_token_budget(&build_events(&preamble, &turns, Media::Light), &shape, 1)?;
    }

    #[test]
    fn the_agent_policy_fits_every_byte_and_token_budget(
        (preamble, turns) in conversation(),
        shape in shape(),
    ) {
        check_agent_budgets(&build_events(&preamble, &turns, Media::Light), &shape)?;
    }

    /// A caller that does not read token figures (`token_figures(false)`: the CLI without
    /// `--report`) gets the same body, the same error and the same report but for the counted
    /// token figures, which are 0 — unless a token budget needs them, then everything is the
    /// same. With one cache shared by both kinds of calls, neither sees the other's sizes.
    #[test]
    fn without_token_figures_only_the_counted_tokens_differ(
        (preamble, turns) in conversation(),
        shape in shape(),
        agent in any::<bool>(),
        stride in 3u64..40,
    ) {
        let events = build_events(&preamble, &turns, Media::Heavy);
        let history = SliceHistory::new(&events);
        let policy = if agent { Policy::Agent } else { Policy::Turns };
        let full = project(&history, &request(&shape, &events, None, None), &mut SizeCache::new()).unwrap();
        let mut shared = SizeCache::new();
        let mut budgets: Vec<(Option<u64>, Option<u64>)> = vec![(None, None)];
        let bytes = full.report.mandatory.bytes.saturating_sub(3).max(1)..=full.report.bytes + 2;
        budgets.extend(bytes.step_by(stride as usize).map(|b| (Some(b), None)));
        budgets.push((Some(full.report.mandatory.bytes.saturating_sub(1).max(1)), None));
        budgets.push((None, Some(full.report.mandatory.tokens.saturating_sub(1).max(1))));
        budgets.push((None, Some(full.report.tokens)));
        for (max_bytes, max_tokens) in budgets {
            let mut b = builder(&shape, &events, max_bytes, max_tokens);
            b.policy(policy);
            let counted = b.build().unwrap();
            let uncounted = b.token_figures(false).build().unwrap();
            prop_assert!(counted.token_figures() && !uncounted.token_figures());
            let expected = project(&history, &counted, &mut SizeCache::new());
            for cache in [&mut SizeCache::new(), &mut shared] {
                let ours = project(&history, &uncounted, cache);
                match (&expected, &ours) {
                    (Ok(e), Ok(o)) => {
                        prop_assert_eq!(&o.body, &e.body);
                        if max_tokens.is_some() {
                            prop_assert_eq!(&o.report, &e.report);
                        } else {
                            prop_assert_eq!(&o.report, &without_token_figures(&e.report));
                            prop_assert!(e.report.tokens > 0);
                        }
                    }
                    (Err(e), Err(o)) => prop_assert_eq!(e.to_string(), o.to_string()),
                    _ => prop_assert!(false, "{:?} against {:?}", expected, ours),
                }
                // The counted projection after the uncounted one (same cache) is unchanged.
                let again = project(&history, &counted, cache);
                prop_assert_eq!(format!("{again:?}"), format!("{expected:?}"));
            }
        }
    }
}

/// A conversation with at least one turn, the first of which carries media.
fn conversation_with_media() -> impl Strategy<Value = (Vec<Step>, Vec<Turn>)> {
    (
        proptest::collection::vec(step(), 0..2),
        proptest::collection::vec((text(), proptest::collection::vec(step(), 0..4)), 1..4),
    )
        .prop_map(|(preamble, mut turns)| {
            // A text of length 1 mod 3 carries media (see `build_events`).
            while turns[0].0.len() % 3 != 1 {
                turns[0].0.push('x');
            }
            (preamble, turns)
        })
}

// The same guarantees with documents (3000 tokens a page): every token budget across such a
// turn is a projection, so these run fewer cases, each sure to carry media, and compare with
// the naive rule where the body changes (and at every 53rd budget) rather than everywhere.
proptest! {
    #![proptest_config(ProptestConfig { cases: 5, ..ProptestConfig::default() })]

    #[test]
    fn with_documents_every_token_budget_fits_or_is_refused_and_equals_the_naive_rule(
        (preamble, turns) in conversation_with_media(),
        shape in shape(),
    ) {
        check_every_token_budget(&build_events(&preamble, &turns, Media::Heavy), &shape, 53)?;
    }

    #[test]
    fn with_documents_the_agent_policy_fits_every_byte_and_token_budget(
        (preamble, turns) in conversation_with_media(),
        shape in shape(),
    ) {
        check_agent_budgets(&build_events(&preamble, &turns, Media::Heavy), &shape)?;
    }
}
