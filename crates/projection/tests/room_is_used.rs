//! Room is used (docs/design.md#p12-room-is-used): a tool output stored as an artifact (its event
//! holds a head/tail excerpt) is sent in full when the budget allows, read through
//! `History::artifact_text`, and clipped, with the recall handle, only when its full text would not
//! fit. The body never exceeds the budget.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::convert::Infallible;

use ctxlog_event::{ArtifactRef, Event, EventBody, ToolStatus};
use ctxlog_projection::{
    History, ProjectionRequest, SeqRange, SizeCache, SliceHistory, WireFormat, count, project,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// A history whose tool results may have artifacts, held in memory.
struct WithArtifacts<'a> {
    events: SliceHistory<'a>,
    artifacts: HashMap<u64, String>,
}

impl History for WithArtifacts<'_> {
    type Error = Infallible;
    fn turn_count(&self) -> Result<usize, Infallible> {
        self.events.turn_count()
    }
    fn turn_seqs(&self, index: usize) -> Result<SeqRange, Infallible> {
        self.events.turn_seqs(index)
    }
    fn turn(&self, index: usize) -> Result<Vec<Event>, Infallible> {
        self.events.turn(index)
    }
    fn preamble(&self) -> Result<Vec<Event>, Infallible> {
        self.events.preamble()
    }
    fn artifact_text(&self, event: &Event) -> Result<Option<String>, Infallible> {
        Ok(self.artifacts.get(&event.seq).cloned())
    }
}

/// Lines of a tool output, `n` characters in all (ASCII, so the body's JSON escapes as
/// serde_json's does).
fn output(n: usize) -> String {
    let line = "drwxr-xr-x 2 root root 4096 Jan 1 00:00 some-directory-name\n";
    line.repeat(n / line.len() + 1)[..n].to_string()
}

/// The stored excerpt: like the ledger's, the first and last 1,000 characters.
fn stored(full: &str) -> String {
    format!("{}\n[…]\n{}", &full[..1000], &full[full.len() - 1000..])
}

fn conversation(size: usize) -> (Vec<Event>, String) {
    let full = output(size);
    let events = common::numbered(vec![
        EventBody::User {
            text: "What is in /srv?".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: "Looking.".into(),
            provider_item: None,
        },
        EventBody::User {
            text: "List /var too.".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::ToolCall {
            call_id: "c1".into(),
            tool: "shell".into(),
            arguments: json!({"cmd": "ls -l /var"}),
            provider_item: None,
        },
        EventBody::ToolResult {
            call_id: "c1".into(),
            tool: "shell".into(),
            status: ToolStatus::Ok,
            exit_code: Some(0),
            text: stored(&full),
            artifact: Some(ArtifactRef {
                name: "sha256-00".into(),
                bytes: size as u64,
            }),
            parts: Vec::new(),
            provider_item: None,
        },
    ]);
    (events, full)
}

/// The content string of the result in `body` (either format).
fn result_content(body: &Value) -> String {
    if let Some(items) = body["input"].as_array() {
        let last = items.last().unwrap();
        assert_eq!(last["type"], "function_call_output");
        return last["output"].as_str().unwrap().to_string();
    }
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            blocks.iter().find(|b| b["type"] == "tool_result").unwrap()["content"]
                .as_str()
                .unwrap()
                .to_string()
        }
        other => panic!("unexpected content {other}"),
    }
}

fn replace_content(body: &mut Value, content: &str) {
    if let Some(items) = body["input"].as_array_mut() {
        items.last_mut().unwrap()["output"] = json!(content);
        return;
    }
    let last = body["messages"].as_array_mut().unwrap().last_mut().unwrap();
    if last["content"].is_string() {
        last["content"] = json!(content);
    } else {
        for b in last["content"].as_array_mut().unwrap() {
            if b["type"] == "tool_result" {
                b["content"] = json!(content);
            }
        }
    }
}

fn check(size: usize, max_bytes: u64, max_tokens: Option<u64>, format: WireFormat) {
    let (events, full) = conversation(size);
    let history = WithArtifacts {
        events: SliceHistory::new(&events),
        artifacts: HashMap::from([(5, full.clone())]),
    };
    let mut b = ProjectionRequest::builder();
    b.model("m")
        .format(format)
        .max_bytes(max_bytes)
        .reserve_output(100);
    if let Some(t) = max_tokens {
        b.max_tokens(t);
    }
    let request = b.build().unwrap();
    let Ok(p) = project(&history, &request, &mut SizeCache::new()) else {
        return; // the stored excerpt alone does not fit: nothing to grow
    };
    assert!(p.body.len() as u64 <= max_bytes);
    assert_eq!(p.report.bytes, p.body.len() as u64);
    if let Some(t) = max_tokens {
        assert!(p.report.tokens <= t - 100);
    }
    let body: Value = serde_json::from_slice(&p.body).unwrap();
    let content = result_content(&body);
    // No recall tool is offered: the header names none.
    let header = "[artifact=sha256-00 bytes=".to_string() + &size.to_string() + "]\n";
    assert!(content.starts_with(&header), "{content}");
    let sent = &content[header.len()..];
    // Whether `body` would fit the budget with the result's content replaced by `content`.
    let fits = |body: &Value, content: &str| {
        let mut other = body.clone();
        replace_content(&mut other, content);
        let bytes = serde_json::to_vec(&other).unwrap();
        let tokens = count(&bytes, format, request.tokenizer()).unwrap().tokens;
        bytes.len() as u64 <= max_bytes && max_tokens.is_none_or(|t| tokens <= t - 100)
    };
    if p.report.clips.is_empty() {
        if sent == full {
            return;
        }
        // Not grown: the excerpt the ledger stored is sent as it is, because neither the full
        // text nor a projector's excerpt longer than it fits.
        let stored = stored(&full);
        assert_eq!(sent, stored, "neither the full text nor the stored excerpt");
        let longer = excerpt(&full, stored.chars().count() + 1, 5);
        assert!(
            !fits(&body, &(header.clone() + &longer)),
            "the stored excerpt sent though a longer excerpt fits"
        );
    } else {
        assert!(sent.contains("chars clipped from seq=5]"), "{content}");
        assert_eq!(p.report.clips[0].seq, 5);
    }
    // Clipped (by the projector, or by the ledger when it stored the output): with the full
    // text instead, the body would not fit.
    assert!(
        !fits(&body, &(header + &full)),
        "clipped though the full text fits"
    );
}

/// The case CI found: a 2,100-character output whose full text does not fit, and no
/// projector's excerpt longer than the 2,007 characters the ledger stored fits either; the
/// stored excerpt is sent as it is.
#[test]
fn the_stored_excerpt_is_sent_when_nothing_longer_fits() {
    check(2_100, 2_454, None, WireFormat::OpenAiChat);
}

#[test]
fn a_34_kb_output_goes_in_full_under_a_20000_token_budget() {
    for format in WireFormat::ALL {
        let (events, full) = conversation(34_000);
        let history = WithArtifacts {
            events: SliceHistory::new(&events),
            artifacts: HashMap::from([(5, full.clone())]),
        };
        let request = ProjectionRequest::builder()
            .model("m")
            .format(format)
            .max_tokens(20_000)
            .reserve_output(1_000)
            .build()
            .unwrap();
        let p = project(&history, &request, &mut SizeCache::new()).unwrap();
        assert!(p.report.clips.is_empty());
        let body: Value = serde_json::from_slice(&p.body).unwrap();
        assert!(result_content(&body).ends_with(&full));
        check(34_000, 1_000_000, Some(20_000), format);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn never_over_budget_and_clipped_only_when_the_whole_would_not_fit(
        size in 2_100usize..40_000,
        max_bytes in 2_000u64..50_000,
        max_tokens in proptest::option::of(700u64..12_000),
        format_index in 0usize..3,
    ) {
        let format = WireFormat::ALL[format_index];
        check(size, max_bytes, max_tokens, format);
    }
}

/// A tool output with distinct lines (so head and tail excerpts of it are told apart), `n`
/// characters, ASCII.
fn distinct_output(tag: &str, n: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < n {
        s.push_str(&format!(
            "{tag} line {i}: -rw-r--r-- 1 root root {i} data.bin\n"
        ));
        i += 1;
    }
    s.truncate(n);
    s
}

/// The projector's excerpt of `full` keeping `keep` characters (as documented).
fn excerpt(full: &str, keep: usize, seq: u64) -> String {
    let chars = full.chars().count();
    let head: String = full.chars().take(keep / 2).collect();
    let tail: String = full.chars().skip(chars - (keep - keep / 2)).collect();
    let marker = format!("[… {} chars clipped from seq={seq}]", chars - keep);
    if keep == 0 {
        marker
    } else {
        format!("{head}\n{marker}\n{tail}")
    }
}

/// Two turns with a tool result each, both outputs stored as artifacts (seqs 4 and 9). The
/// second turn ends in its result: projected without input it is the open turn.
fn two_results(first: usize, second: usize) -> (Vec<Event>, HashMap<u64, String>) {
    let outputs = [
        distinct_output("var", first),
        distinct_output("srv", second),
    ];
    let result = |id: &str, full: &str| EventBody::ToolResult {
        call_id: id.into(),
        tool: "shell".into(),
        status: ToolStatus::Ok,
        exit_code: Some(0),
        text: stored(full),
        artifact: Some(ArtifactRef {
            name: format!("sha256-{id}"),
            bytes: full.len() as u64,
        }),
        parts: Vec::new(),
        provider_item: None,
    };
    let events = common::numbered(vec![
        EventBody::User {
            text: "What is in /var?".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: "Listing it.".into(),
            provider_item: None,
        },
        EventBody::ToolCall {
            call_id: "c1".into(),
            tool: "shell".into(),
            arguments: json!({"cmd": "ls -l /var"}),
            provider_item: None,
        },
        result("c1", &outputs[0]),
        EventBody::Assistant {
            text: "Done: /var holds logs.".into(),
            provider_item: None,
        },
        EventBody::User {
            text: "And /srv?".into(),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: "Listing it.".into(),
            provider_item: None,
        },
        EventBody::ToolCall {
            call_id: "c2".into(),
            tool: "shell".into(),
            arguments: json!({"cmd": "ls -l /srv"}),
            provider_item: None,
        },
        result("c2", &outputs[1]),
    ]);
    let [a, b] = outputs;
    (events, HashMap::from([(4, a), (9, b)]))
}

/// Replaces, in every string of `value`, `from` by `to`; returns how many strings changed.
fn replace_in_strings(value: &mut Value, from: &str, to: &str) -> usize {
    match value {
        Value::String(s) if s.contains(from) => {
            *s = s.replace(from, to);
            1
        }
        Value::Array(items) => items
            .iter_mut()
            .map(|v| replace_in_strings(v, from, to))
            .sum(),
        Value::Object(map) => map
            .values_mut()
            .map(|v| replace_in_strings(v, from, to))
            .sum(),
        _ => 0,
    }
}

fn strings_contain(value: &Value, needle: &str) -> bool {
    match value {
        Value::String(s) => s.contains(needle),
        Value::Array(items) => items.iter().any(|v| strings_contain(v, needle)),
        Value::Object(map) => map.values().any(|v| strings_contain(v, needle)),
        _ => false,
    }
}

/// What `body` sends of the output `full` of result `seq`: `None` when it is sent in full or
/// left out; else the excerpt sent (the projector's, of any length, or the stored one).
fn sent_excerpt(body: &Value, full: &str, seq: u64) -> Option<String> {
    if strings_contain(body, full) {
        return None;
    }
    let chars = full.chars().count();
    let marker = format!(" chars clipped from seq={seq}]");
    if let Some(s) = find_string(body, &marker) {
        let end = s.find(&marker).unwrap();
        let start = s[..end].rfind("[… ").unwrap();
        let clipped: usize = s[start + "[… ".len()..end].parse().unwrap();
        let sent = excerpt(full, chars - clipped, seq);
        if s.contains(&sent) {
            return Some(sent);
        }
        // A clip of the excerpt stored in the event (an older result, its artifact not read).
        let stored = stored(full);
        let sent = excerpt(&stored, stored.chars().count() - clipped, seq);
        assert!(
            s.contains(&sent),
            "a clip of seq {seq} that is not an excerpt: {s}"
        );
        return Some(sent);
    }
    let stored = stored(full);
    strings_contain(body, &stored).then_some(stored)
}

fn find_string<'v>(value: &'v Value, needle: &str) -> Option<&'v str> {
    match value {
        Value::String(s) => s.contains(needle).then_some(s.as_str()),
        Value::Array(items) => items.iter().find_map(|v| find_string(v, needle)),
        Value::Object(map) => map.values().find_map(|v| find_string(v, needle)),
        _ => None,
    }
}

/// Both policies: the body never exceeds the budget, the newest result is served first, and
/// every result sent clipped would not fit with its whole output instead.
fn check_both_results(
    sizes: (usize, usize),
    max_bytes: u64,
    max_tokens: Option<u64>,
    format: WireFormat,
    policy: ctxlog_projection::Policy,
    input: bool,
) {
    let (events, artifacts) = two_results(sizes.0, sizes.1);
    let history = WithArtifacts {
        events: SliceHistory::new(&events),
        artifacts: artifacts.clone(),
    };
    let mut b = ProjectionRequest::builder();
    b.model("m")
        .format(format)
        .policy(policy)
        .max_bytes(max_bytes)
        .reserve_output(100);
    if let Some(t) = max_tokens {
        b.max_tokens(t);
    }
    if input {
        b.input("Which is bigger?");
    }
    let request = b.build().unwrap();
    let Ok(p) = project(&history, &request, &mut SizeCache::new()) else {
        return; // the mandatory part alone does not fit
    };
    assert_eq!(p.report.bytes, p.body.len() as u64);
    assert!(p.body.len() as u64 <= max_bytes);
    let tokens = count(&p.body, format, request.tokenizer()).unwrap().tokens;
    assert_eq!(tokens, p.report.tokens);
    if let Some(t) = max_tokens {
        assert!(tokens <= t - 100);
    }
    let body: Value = serde_json::from_slice(&p.body).unwrap();
    let mut clipped = Vec::new();
    for seq in [9, 4] {
        let full = &artifacts[&seq];
        let Some(sent) = sent_excerpt(&body, full, seq) else {
            continue;
        };
        clipped.push(seq);
        let mut whole = body.clone();
        assert!(replace_in_strings(&mut whole, &sent, full) > 0);
        let bytes = serde_json::to_vec(&whole).unwrap();
        let tokens = count(&bytes, format, request.tokenizer()).unwrap().tokens;
        assert!(
            bytes.len() as u64 > max_bytes || max_tokens.is_some_and(|t| tokens > t - 100),
            "seq {seq} clipped though its whole output fits ({policy:?}, {format:?}, input {input})"
        );
    }
    // The newest result is served first: the older one is sent whole only if the newest is.
    if clipped.contains(&9) {
        assert!(
            !strings_contain(&body, &artifacts[&4]),
            "older in full, newest clipped"
        );
    }
}

#[test]
fn both_policies_send_two_results_whole_when_they_fit_and_clip_only_when_they_do_not() {
    use ctxlog_projection::Policy;
    for policy in [Policy::Turns, Policy::Agent] {
        for format in WireFormat::ALL {
            for input in [false, true] {
                // Room for both: both whole (the stored excerpts are 2,000 characters).
                check_both_results(
                    (20_000, 30_000),
                    200_000,
                    Some(40_000),
                    format,
                    policy,
                    input,
                );
                let (events, artifacts) = two_results(20_000, 30_000);
                let history = WithArtifacts {
                    events: SliceHistory::new(&events),
                    artifacts: artifacts.clone(),
                };
                let mut b = ProjectionRequest::builder();
                b.model("m")
                    .format(format)
                    .policy(policy)
                    .max_tokens(40_000);
                if input {
                    b.input("Which is bigger?");
                }
                let p = project(&history, &b.build().unwrap(), &mut SizeCache::new()).unwrap();
                let body: Value = serde_json::from_slice(&p.body).unwrap();
                assert!(
                    strings_contain(&body, &artifacts[&9]),
                    "{policy:?} {format:?}"
                );
                assert!(
                    strings_contain(&body, &artifacts[&4]),
                    "{policy:?} {format:?}"
                );
                assert!(p.report.clips.is_empty());
                // Room for part of them: clipped only as far as needed.
                check_both_results(
                    (20_000, 30_000),
                    200_000,
                    Some(6_000),
                    format,
                    policy,
                    input,
                );
                check_both_results((20_000, 30_000), 14_000, None, format, policy, input);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn both_policies_never_exceed_the_budget_and_clip_a_result_only_when_it_would_not_fit(
        first in 2_100usize..30_000,
        second in 2_100usize..30_000,
        max_bytes in 3_000u64..80_000,
        max_tokens in proptest::option::of(900u64..16_000),
        format_index in 0usize..3,
        agent in any::<bool>(),
        input in any::<bool>(),
    ) {
        let format = WireFormat::ALL[format_index];
        let policy = if agent { ctxlog_projection::Policy::Agent } else { ctxlog_projection::Policy::Turns };
        check_both_results((first, second), max_bytes, max_tokens, format, policy, input);
    }
}
