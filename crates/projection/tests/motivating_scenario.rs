#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The motivating scenario (the journal study's table, docs/design.md#1-the-problem), on our own
//! fixture with Chinese, English, double quotes, a newline and an emoji. Failure class: a byte
//! budget met by estimate, a turn split, or the question silently dropped when the mandatory part
//! does not fit. Guarantee: at budgets equal to the mandatory size, the size with the newest turn,
//! the size with both, both + 100, and mandatory − 1, the projector keeps 0 / 1 / 2 / 2 turns with
//! exactly those byte sizes, and refuses the last with the typed error, naming the bytes the
//! mandatory part needs. The expected bodies are built independently with `serde_json`.

mod common;

use ctxlog_event::{Event, EventBody};
use ctxlog_projection::{Error, ProjectionRequest, SizeCache, SliceHistory, WireFormat, project};
use serde_json::json;

const SYSTEM: &str = "You are a helpful assistant. 用中文或English回答。";
const U1: &str = "我们的项目代号是 \"蓝鲸-7\"。Remember it.\nThanks 🐳";
const A1: &str = "好的，记住了：\"蓝鲸-7\" 👍";
const U2: &str = "What's the weather like?";
const A2: &str = "我不知道天气 — no live data 🌧️.";
const INPUT: &str = "项目代号是什么？What is the project code?";

fn events() -> Vec<Event> {
    let bodies = [
        EventBody::User {
            text: U1.into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: A1.into(),
            provider_item: None,
        },
        EventBody::User {
            text: U2.into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: A2.into(),
            provider_item: None,
        },
    ];
    common::numbered(bodies)
}

fn expected(turns: &[(&str, &str)]) -> String {
    let mut messages = vec![json!({"role": "system", "content": SYSTEM})];
    for (u, a) in turns {
        messages.push(json!({"role": "user", "content": u}));
        messages.push(json!({"role": "assistant", "content": a}));
    }
    messages.push(json!({"role": "user", "content": INPUT}));
    json!({"model": "gpt-4o-mini", "messages": messages}).to_string()
}

fn request(max_bytes: u64) -> ProjectionRequest {
    ProjectionRequest::builder()
        .model("gpt-4o-mini")
        .system(SYSTEM)
        .input(INPUT)
        .max_bytes(max_bytes)
        .build()
        .unwrap()
}

#[test]
fn the_table_of_the_java_lab_on_our_fixture() {
    let events = events();
    let history = SliceHistory::new(&events);
    let mandatory = expected(&[]);
    let newest = expected(&[(U2, A2)]);
    let both = expected(&[(U1, A1), (U2, A2)]);
    let (m, s1, s2) = (
        mandatory.len() as u64,
        newest.len() as u64,
        both.len() as u64,
    );
    let rows = [
        (m, Some((0, &mandatory))),
        (s1, Some((1, &newest))),
        (s2, Some((2, &both))),
        (s2 + 100, Some((2, &both))),
        (m - 1, None),
    ];
    let mut cache = SizeCache::new();
    println!("budget | kept | bytes");
    for (budget, want) in rows {
        let result = project(&history, &request(budget), &mut cache);
        match (want, result) {
            (Some((kept, body)), Ok(p)) => {
                println!("{budget} | {} | {}", p.report.turns.kept, p.body.len());
                assert_eq!(p.report.turns.kept, kept, "budget {budget}");
                assert_eq!(String::from_utf8(p.body.clone()).unwrap(), *body);
                assert_eq!(p.report.bytes, p.body.len() as u64);
                assert_eq!(p.report.mandatory.bytes, m);
            }
            (
                None,
                Err(Error::MandatoryExceedsBudget {
                    needed_bytes,
                    max_bytes,
                    ..
                }),
            ) => {
                println!("{budget} | rejected: mandatory needs {needed_bytes} bytes");
                assert_eq!(needed_bytes, m);
                assert_eq!(max_bytes, Some(m - 1));
            }
            (want, got) => panic!("budget {budget}: wanted {want:?}, got {got:?}"),
        }
    }
    // One byte short of each step keeps one turn fewer: whole turns, never a split.
    assert_eq!(
        project(&history, &request(s1 - 1), &mut cache)
            .unwrap()
            .report
            .turns
            .kept,
        0
    );
    assert_eq!(
        project(&history, &request(s2 - 1), &mut cache)
            .unwrap()
            .report
            .turns
            .kept,
        1
    );
}

#[test]
fn a_narrow_request_lacks_the_project_code_and_a_wider_one_has_it_back() {
    let events = events();
    let history = SliceHistory::new(&events);
    let mut cache = SizeCache::new();
    let narrow = project(
        &history,
        &request(expected(&[(U2, A2)]).len() as u64),
        &mut cache,
    )
    .unwrap();
    assert!(!String::from_utf8(narrow.body).unwrap().contains("蓝鲸-7"));
    let wide = project(&history, &request(10_000), &mut cache).unwrap();
    assert!(
        String::from_utf8(wide.body)
            .unwrap()
            .contains(r#"\"蓝鲸-7\""#)
    );
    assert_eq!(
        history.events(),
        events.as_slice(),
        "projection never mutates the ledger"
    );
}

#[test]
fn the_same_table_holds_for_anthropic_messages() {
    let events = events();
    let history = SliceHistory::new(&events);
    let mut cache = SizeCache::new();
    let build = |max: u64| {
        ProjectionRequest::builder()
            .format(WireFormat::AnthropicMessages)
            .model("claude-sonnet-4-5")
            .system(SYSTEM)
            .input(INPUT)
            .max_bytes(max)
            .reserve_output(512)
            .build()
            .unwrap()
    };
    let full = project(&history, &build(100_000), &mut cache).unwrap();
    let m = full.report.mandatory.bytes;
    let zero = project(&history, &build(m), &mut cache).unwrap();
    assert_eq!((zero.report.turns.kept, zero.report.bytes), (0, m));
    let text = String::from_utf8(zero.body).unwrap();
    assert_eq!(
        text,
        format!(
            "{{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":512,\"system\":{},\"messages\":[{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":{}}}]}}]}}",
            json!(SYSTEM),
            json!(INPUT)
        )
    );
    assert_eq!(full.report.turns.kept, 2);
    assert_eq!(full.report.bytes, full.body.len() as u64);
    assert!(matches!(
        project(&history, &build(m - 1), &mut cache),
        Err(Error::MandatoryExceedsBudget { .. })
    ));
}
