//! Cache-stable windows (`window: stable`): a provider caches a repeated request prefix, and a
//! window that drops one old turn per call changes the prefix on every call. Replaying random
//! conversations turn by turn, in every format, under byte and token budgets, with the notice
//! and a recalled page:
//!
//! * the cut is deterministic: the same history and request give the same body from a fresh
//!   size cache;
//! * appending a turn that still fits (the sliding rule would keep every turn from the
//!   previous cut) never moves the cut, and the previous body's stable prefix is then a byte
//!   prefix of the next body;
//! * the body never exceeds its budget, and its report's sizes are the body's;
//! * what varies per call (the notice, recalled pages, the input) never precedes the stable
//!   prefix.
//!
//! The default (sliding) window's bodies are pinned by every other test file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ctxlog_event::{Event, EventBody, EventKind};
use ctxlog_projection::{
    Error, History, Policy, Projection, ProjectionRequest, RecallReserve, RecalledPage, SizeCache,
    SliceHistory, Window, WireFormat, count, project,
};
use proptest::prelude::*;

/// A conversation of `sizes.len()` turns: a user message and an assistant reply of the given
/// lengths (multi-byte text included, so escaping and UTF-8 count).
fn conversation(sizes: &[(usize, usize)]) -> Vec<Event> {
    let mut events = Vec::new();
    for (i, &(u, a)) in sizes.iter().enumerate() {
        let text = |n: usize, who: &str| format!("{who}{i} {}", "word é \"q\" ".repeat(n / 12 + 1));
        for body in [
            EventBody::User {
                text: text(u, "u"),
                parts: Vec::new(),
                provider_item: None,
            },
            EventBody::Assistant {
                text: text(a, "a"),
                provider_item: None,
            },
        ] {
            let seq = events.len() as u64 + 1;
            events.push(Event {
                seq,
                ts_ms: 0,
                body,
            });
        }
    }
    events
}

const INPUT: &str = "VARYING-INPUT the question now";
const PAGE: &str = "VARYING-PAGE recalled text";

fn request(format: WireFormat, budget: Budget, window: Window, low: f64) -> ProjectionRequest {
    let mut b = ProjectionRequest::builder();
    b.format(format)
        .model("m")
        .system("Be brief.")
        .input(INPUT)
        .policy(Policy::Turns)
        .notice(true)
        .recall_k(1)
        // No room held back for the page, so that the sliding window the cut is compared
        // with fits history to the same budget.
        .recall_reserve(RecallReserve::Amount(0))
        .recalled(vec![RecalledPage {
            seq: 1,
            page: 0,
            kind: EventKind::User,
            char_start: 0,
            char_end: PAGE.len() as u64,
            text: PAGE.into(),
        }])
        .window(window)
        .low_water(low);
    match budget {
        Budget::Bytes(n) => b.max_bytes(n),
        Budget::Tokens(n) => b.max_tokens(n).reserve_output(100),
    };
    b.build().unwrap()
}

#[derive(Clone, Copy, Debug)]
enum Budget {
    Bytes(u64),
    Tokens(u64),
}

fn budgets() -> impl Strategy<Value = Budget> {
    prop_oneof![
        (3_000u64..12_000).prop_map(Budget::Bytes),
        (900u64..3_000).prop_map(Budget::Tokens),
    ]
}

fn formats() -> impl Strategy<Value = WireFormat> {
    prop::sample::select(WireFormat::ALL.to_vec())
}

/// Whether the turn starting at seq `first` (turns are two events here) is the start of
/// `block`: the first turn whose stored offset is at or after `block` blocks. It is not when
/// the whole window is smaller than a block (the block after the sliding start has no turn
/// yet): the window then starts where the sliding rule does, and moves to the next block's
/// first turn once one is appended.
fn at_block_start(
    history: &SliceHistory<'_>,
    req: &ProjectionRequest,
    first: u64,
    block: u64,
) -> bool {
    let window = match (req.max_bytes(), req.input_token_limit()) {
        (Some(b), _) => b,
        (None, Some(t)) => t * 4,
        (None, None) => return true,
    };
    let step = (((1.0 - req.low_water()) * window as f64) as u64).max(1);
    let turn = ((first - 1) / 2) as usize;
    let at = history.turn_offset(turn).unwrap();
    let before = match turn {
        0 => 0,
        _ => history.turn_offset(turn - 1).unwrap(),
    };
    at >= block * step && (turn == 0 || before < block * step)
}

/// The first seq the body keeps (0 when it keeps no history).
fn cut(p: &ctxlog_projection::Projection) -> u64 {
    p.report.kept.first().map_or(0, |r| r.first)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn stable_window_holds_its_promises(
        sizes in prop::collection::vec((10usize..300, 10usize..500), 20..45),
        budget in budgets(),
        format in formats(),
        low in prop::sample::select(vec![0.6, 0.7, 0.8, 0.9]),
    ) {
        let events = conversation(&sizes);
        let stable = request(format, budget, Window::Stable, low);
        let sliding = request(format, budget, Window::Sliding, low);
        let mut cache = SizeCache::new();
        let mut previous: Option<(Vec<u8>, u64, u64, u64)> = None;
        for turns in 1..=sizes.len() {
            let history = SliceHistory::new(&events[..turns * 2]);
            let p = match project(&history, &stable, &mut cache) {
                Err(Error::MandatoryExceedsBudget { .. }) => return Ok(()),
                r => r.unwrap(),
            };
            // Deterministic: a fresh cache builds the same body.
            let again = project(&history, &stable, &mut SizeCache::new()).unwrap();
            prop_assert_eq!(&again.body, &p.body);
            // Never over budget; the report is the body's.
            prop_assert_eq!(p.report.bytes, p.body.len() as u64);
            let counted = count(&p.body, format, stable.tokenizer()).unwrap();
            prop_assert_eq!(p.report.tokens, counted.tokens);
            match budget {
                Budget::Bytes(n) => prop_assert!(p.report.bytes <= n),
                Budget::Tokens(_) => {
                    prop_assert!(p.report.tokens <= stable.input_token_limit().unwrap())
                }
            }
            // What varies goes last.
            let sp = p.report.stable_prefix.expect("a stable body reports its prefix");
            let text = String::from_utf8(p.body.clone()).unwrap();
            let head = &text[..sp.bytes as usize];
            prop_assert!(!head.contains("VARYING-") && !head.contains("[ctxlog]"), "{}", text);
            prop_assert!(text[sp.bytes as usize..].contains("VARYING-INPUT"));
            // Appending a turn that still fits never moves the cut.
            let slid = project(&history, &sliding, &mut cache).unwrap();
            if let Some((body, prefix, first, block)) = &previous {
                let fits = *first > 0 && cut(&slid) > 0 && cut(&slid) <= *first;
                if fits && at_block_start(&history, &stable, *first, *block) {
                    prop_assert_eq!(cut(&p), *first, "the cut moved though the window fit");
                    prop_assert_eq!(&p.body[..*prefix as usize], &body[..*prefix as usize]);
                }
            }
            previous = Some((p.body.clone(), sp.bytes, cut(&p), sp.block));
        }
    }
}

/// Once a window fills up, the stable window's bodies share almost all of their bytes with the
/// previous body, where the sliding window's share little more than the system prompt.
#[test]
fn stable_bodies_share_their_prefix_where_sliding_ones_do_not() {
    let sizes: Vec<(usize, usize)> = (0..120)
        .map(|i| (20 + i % 7 * 5, 30 + i % 5 * 10))
        .collect();
    let events = conversation(&sizes);
    let share = |window: Window| {
        let req = request(WireFormat::OpenAiChat, Budget::Bytes(8_000), window, 0.8);
        let mut cache = SizeCache::new();
        let (mut shared, mut total, mut prev): (u64, u64, Vec<u8>) = (0, 0, Vec::new());
        for turns in 60..=120 {
            let body = project(&SliceHistory::new(&events[..turns * 2]), &req, &mut cache)
                .unwrap()
                .body;
            shared += prev.iter().zip(&body).take_while(|(a, b)| a == b).count() as u64;
            total += body.len() as u64;
            prev = body;
        }
        shared as f64 / total as f64
    };
    let (stable, sliding) = (share(Window::Stable), share(Window::Sliding));
    assert!(stable > 0.8, "stable share {stable}");
    assert!(sliding < 0.3, "sliding share {sliding}");
}

/// A low-water mark outside (0, 1) is refused with what to give instead.
#[test]
fn low_water_outside_zero_one_is_refused() {
    for bad in [0.0, 1.0, -0.5, 1.5, f64::NAN] {
        let err = ProjectionRequest::builder()
            .model("m")
            .low_water(bad)
            .build()
            .unwrap_err()
            .to_string();
        assert!(err.contains("strictly between 0 and 1"), "{err}");
    }
    let err = "fixed".parse::<Window>().unwrap_err().to_string();
    assert!(err.contains("sliding, stable"), "{err}");
}

/// `history` projected with cache hints (and a notice) in `format` for `model` under `window`
/// within `max` bytes, checked to hold its budget and to report the tokens `count` finds;
/// `None` when the mandatory part alone is over `max`.
fn hinted(
    history: &SliceHistory<'_>,
    format: WireFormat,
    model: &str,
    window: Window,
    max: u64,
) -> Option<Projection> {
    let mut b = ProjectionRequest::builder();
    b.format(format)
        .model(model)
        .system("Be brief.")
        .input(INPUT)
        .policy(Policy::Turns)
        .notice(true)
        .window(window)
        .cache_hints(true)
        .cache_key("ctxlog-k")
        .max_bytes(max);
    let req = b.build().unwrap();
    let p = match project(history, &req, &mut SizeCache::new()) {
        Err(Error::MandatoryExceedsBudget { .. }) => return None,
        r => r.unwrap(),
    };
    assert!(p.report.bytes <= max && p.report.bytes == p.body.len() as u64);
    let counted = count(&p.body, format, req.tokenizer()).unwrap();
    assert_eq!(p.report.tokens, counted.tokens);
    Some(p)
}

/// Cache hints: Anthropic breakpoints on the system prompt and at the end of the stable
/// prefix (at most 4), OpenAI's `prompt_cache_key`; both inside the budget, which every byte
/// budget from the mandatory part up holds exactly.
#[test]
fn cache_hints_mark_the_stable_prefix_within_the_budget() {
    let sizes: Vec<(usize, usize)> = (0..40).map(|i| (20 + i % 7 * 5, 30 + i % 5 * 10)).collect();
    let events = conversation(&sizes);
    let history = SliceHistory::new(&events);
    let marker = r#""cache_control":{"type":"ephemeral"}"#;
    for format in WireFormat::ALL {
        for max in (1_000..6_000).step_by(250) {
            let Some(p) = hinted(&history, format, "m", Window::Stable, max) else {
                continue;
            };
            let text = String::from_utf8(p.body.clone()).unwrap();
            let sp = p.report.stable_prefix.unwrap();
            match format {
                WireFormat::AnthropicMessages => {
                    assert_eq!(text.matches(marker).count(), 2, "{text}");
                    assert!(text.starts_with(
                        r#"{"model":"m","max_tokens":4096,"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}]"#
                    ));
                    let head = &text[..sp.bytes as usize];
                    // The breakpoint closes the stable prefix's last block (then its message).
                    let end = head.rfind(marker).map(|at| &head[at + marker.len()..]);
                    assert_eq!(end, Some("}]}"), "{text}");
                }
                _ => {
                    assert!(
                        text.ends_with(r#","prompt_cache_key":"ctxlog-k"}"#),
                        "{text}"
                    );
                    assert!(!text.contains("cache_control"));
                }
            }
        }
    }
}

/// Which hints a body carries comes from the model table: Anthropic's `cache_control` for
/// the Claude rows, `prompt_cache_key` for OpenAI's, and with it explicit
/// `prompt_cache_breakpoint`s for the rows that take them (`gpt-5.6`): on the Chat
/// Completions system prompt and at the end of the stable prefix, inside every byte budget.
/// A model in no row, or in a row whose hints the format cannot carry, gets the format's
/// default, and the report says which and why.
#[test]
fn cache_hints_come_from_the_model_table() {
    use ctxlog_projection::media::CacheHints;
    let sizes: Vec<(usize, usize)> = (0..40).map(|i| (20 + i % 7 * 5, 30 + i % 5 * 10)).collect();
    let events = conversation(&sizes);
    let history = SliceHistory::new(&events);
    let bp = r#""prompt_cache_breakpoint":{"mode":"explicit"}"#;
    let cases = [
        (
            WireFormat::AnthropicMessages,
            "claude-sonnet-4-5",
            CacheHints::CacheControl,
            "model table row \"claude-sonnet-4\"",
        ),
        (
            WireFormat::AnthropicMessages,
            "m",
            CacheHints::CacheControl,
            "no row for model \"m\"",
        ),
        (
            WireFormat::AnthropicMessages,
            "gpt-5.6-sol",
            CacheHints::CacheControl,
            "cannot carry",
        ),
        (
            WireFormat::OpenAiChat,
            "gpt-4o",
            CacheHints::PromptCacheKey,
            "model table row \"gpt-4o\"",
        ),
        (
            WireFormat::OpenAiChat,
            "m",
            CacheHints::PromptCacheKey,
            "the openai-chat default",
        ),
        (
            WireFormat::OpenAiChat,
            "claude-sonnet-4",
            CacheHints::PromptCacheKey,
            "cannot carry",
        ),
        (
            WireFormat::OpenAiChat,
            "gpt-5.6-sol",
            CacheHints::PromptCacheBreakpoints,
            "model table row \"gpt-5.6\"",
        ),
        (
            WireFormat::OpenAiResponses,
            "gpt-5.6-terra",
            CacheHints::PromptCacheBreakpoints,
            "model table row \"gpt-5.6\"",
        ),
        (
            WireFormat::OpenAiResponses,
            "gpt-5",
            CacheHints::PromptCacheKey,
            "model table row \"gpt-5\"",
        ),
    ];
    for (format, model, kind, source) in cases {
        for window in Window::ALL {
            for max in (1_000..6_000).step_by(500) {
                let Some(p) = hinted(&history, format, model, window, max) else {
                    continue;
                };
                let hints = p.report.cache_hints.clone().unwrap();
                assert_eq!(hints.kind, kind, "{model} in {format:?}");
                assert!(hints.source.contains(source), "{}", hints.source);
                let text = String::from_utf8(p.body.clone()).unwrap();
                let breakpoints = text.matches(bp).count() as u64;
                assert!(hints.breakpoints <= 4, "{text}");
                assert_eq!(
                    text.contains("prompt_cache_key"),
                    kind != CacheHints::CacheControl,
                    "{text}"
                );
                if kind != CacheHints::PromptCacheBreakpoints {
                    assert_eq!(breakpoints, 0, "{text}");
                    continue;
                }
                assert_eq!(breakpoints, hints.breakpoints, "{text}");
                // Chat: the system prompt's, and with the stable window the history's, which
                // closes the stable prefix (or, with nothing there to carry it, the input's).
                let system = u64::from(format == WireFormat::OpenAiChat);
                let history_mark = u64::from(window == Window::Stable);
                assert_eq!(breakpoints, system + history_mark, "{text}");
                if format == WireFormat::OpenAiChat {
                    assert!(text.contains(&format!(
                        r#"{{"role":"system","content":[{{"type":"text","text":"Be brief.",{bp}}}]}}"#
                    )), "{text}");
                }
                if window == Window::Stable && p.report.turns.kept > 0 {
                    let head = &text[..p.report.stable_prefix.unwrap().bytes as usize];
                    assert!(head.matches(bp).count() as u64 == breakpoints, "{text}");
                }
            }
        }
    }
    // Without cache hints the report says nothing of them.
    let mut b = ProjectionRequest::builder();
    b.format(WireFormat::OpenAiChat)
        .model("gpt-5.6")
        .input(INPUT);
    let p = project(&history, &b.build().unwrap(), &mut SizeCache::new()).unwrap();
    assert!(p.report.cache_hints.is_none());
    assert!(!String::from_utf8(p.body).unwrap().contains("prompt_cache"));
}
