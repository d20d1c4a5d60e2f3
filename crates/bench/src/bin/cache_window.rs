//! How much of each request body a provider's prompt cache can reuse: every LoCoMo
//! conversation replayed call by call (one call per message of speaker A, the user: the
//! history before it, the message as the input) through `ctxlog_projection::project`, at 8k
//! and 32k tokens (o200k, `openai-chat`, the `turns` policy), with the sliding window and
//! `window: stable` at low-water 0.6, 0.7, 0.8 and 0.9.
//!
//! ```text
//! cargo run --release -p ctxlog-bench --bin cache_window [-- --locomo PATH]
//! ```
//!
//! Per policy and budget, over the calls once the sliding window is full (it leaves history
//! out), summed over the ten conversations:
//!
//! * **prefix**: the share of each body's bytes that is a byte prefix of the previous body;
//! * **kept**: turns kept per call, and that against the sliding window's;
//! * **cost**: the modelled input cost of all those calls against the sliding window's.
//!   OpenAI: a body's prefix shared with the previous body is read from the cache, in
//!   128-token steps from 1,024 tokens, at 10 % and at 50 % of the input price. Anthropic: a
//!   breakpoint at the end of the history (the stable prefix; for the sliding window, before
//!   the input) and one on the system prompt; a call reads the previous call's cached prefix
//!   at 0.1× when its body starts with it (else only the system prompt), writes the rest of
//!   its own at 1.25×, and pays 1× for what follows. Token figures of a part of a body are the
//!   body's tokens apportioned by bytes.
//! * **evidence**: for every LoCoMo question whose evidence messages all precede a call, the
//!   share of (call, question) pairs whose evidence is all inside the body's kept history.

use std::path::PathBuf;

use anyhow::{Context, Result};
use ctxlog_ledger::event::{Event, EventBody, ToolStatus};
use ctxlog_projection::{Policy, ProjectionRequest, SizeCache, SliceHistory, Window, project};
use serde_json::Value;

const SYSTEM: &str = "You are a helpful assistant. Answer from the conversation.";

/// One LoCoMo conversation: its events, each message's `dia_id`, and its questions' evidence.
struct Sample {
    events: Vec<Event>,
    dia: Vec<String>,
    evidence: Vec<Vec<String>>,
}

/// An agent loop: `turns` tasks, each a user request, two tool calls with outputs of 300 to
/// 2,300 bytes (a seeded generator) and a reply. No questions: evidence is not measured.
fn agent_loop(turns: usize) -> Sample {
    let mut seed: u64 = 0x5eed_cace_2026;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let mut events: Vec<Event> = Vec::new();
    let push = |events: &mut Vec<Event>, body| {
        let seq = events.len() as u64 + 1;
        events.push(Event {
            seq,
            ts_ms: 0,
            body,
        });
    };
    for t in 0..turns {
        push(
            &mut events,
            EventBody::User {
                text: format!("Task {t}: check service {} and fix what fails.", next(40)),
                parts: Vec::new(),
                provider_item: None,
            },
        );
        for c in 0..2 {
            let id = format!("call_{t}_{c}");
            push(
                &mut events,
                EventBody::ToolCall {
                    call_id: id.clone(),
                    tool: "shell".into(),
                    arguments: serde_json::json!({"cmd": format!("systemctl status svc-{}", next(40))}),
                    provider_item: None,
                },
            );
            let line = "May 02 10:11:12 host svc[812]: request handled in 12 ms, status ok\n";
            let size = 300 + next(2_000) as usize;
            push(
                &mut events,
                EventBody::ToolResult {
                    call_id: id,
                    tool: "shell".into(),
                    status: ToolStatus::Ok,
                    exit_code: Some(0),
                    text: line.repeat(size / line.len() + 1)[..size].to_owned(),
                    artifact: None,
                    parts: Vec::new(),
                    provider_item: None,
                },
            );
        }
        push(
            &mut events,
            EventBody::Assistant {
                text: format!("Service checked; {} warnings handled.", next(5)),
                provider_item: None,
            },
        );
    }
    Sample {
        dia: vec![String::new(); events.len()],
        events,
        evidence: Vec::new(),
    }
}

fn sample(v: &Value) -> Sample {
    let (events, dia) = ctxlog_bench::locomo_events(v).into_iter().unzip();
    let evidence = v["qa"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|q| {
            q["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e.as_str().map(str::to_owned))
                .collect()
        })
        .filter(|e: &Vec<String>| !e.is_empty())
        .collect();
    Sample {
        events,
        dia,
        evidence,
    }
}

/// One call's figures.
#[derive(Clone)]
struct Call {
    body: Vec<u8>,
    tokens: u64,
    /// Bytes up to the end of the history (the stable prefix; before the input for sliding).
    cached_end: u64,
    turns_kept: u64,
    first_kept: u64,
    full: bool,
}

#[derive(Default, Clone, Copy)]
struct Totals {
    calls: u64,
    bytes: u64,
    shared_bytes: u64,
    turns: u64,
    tokens: f64,
    openai_cached: f64,
    anthropic: f64,
    evidence_asked: u64,
    evidence_in: u64,
}

fn request(budget: u64, window: Window, low: f64, input: &str) -> Result<ProjectionRequest> {
    let mut b = ProjectionRequest::builder();
    b.model("gpt-4o")
        .system(SYSTEM)
        .input(input)
        .policy(Policy::Turns)
        .max_tokens(budget)
        .reserve_output(1_000)
        .window(window)
        .low_water(low);
    Ok(b.build()?)
}

fn replay(s: &Sample, budget: u64, window: Window, low: f64) -> Result<Vec<(usize, Call)>> {
    let mut cache = SizeCache::new();
    let mut calls = Vec::new();
    for (t, e) in s.events.iter().enumerate() {
        let EventBody::User { text, .. } = &e.body else {
            continue;
        };
        if t == 0 {
            continue;
        }
        let history = SliceHistory::new(&s.events[..t]);
        let p = project(&history, &request(budget, window, low, text)?, &mut cache)?;
        let cached_end = match p.report.stable_prefix {
            Some(sp) => sp.bytes,
            // Before the input message: `,{"role":"user","content":"…"}]}`.
            None => {
                let input = serde_json::to_string(text)?.len() as u64;
                p.body.len() as u64 - input - 29
            }
        };
        calls.push((
            t,
            Call {
                tokens: p.report.tokens,
                cached_end,
                turns_kept: p.report.turns.kept as u64,
                first_kept: p.report.kept.first().map_or(u64::MAX, |r| r.first),
                full: !p.report.dropped.is_empty(),
                body: p.body,
            },
        ));
    }
    Ok(calls)
}

fn shared(a: &[u8], b: &[u8]) -> u64 {
    a.iter().zip(b).take_while(|(x, y)| x == y).count() as u64
}

/// Adds one conversation's calls (those from `from` on: the sliding window is full) to `t`.
fn add(t: &mut Totals, s: &Sample, calls: &[(usize, Call)], from: usize, system_bytes: u64) {
    for i in from.max(1)..calls.len() {
        let (at, c) = &calls[i];
        let prev = &calls[i - 1].1;
        let per_byte = c.tokens as f64 / c.body.len() as f64;
        let common = shared(&prev.body, &c.body);
        t.calls += 1;
        t.bytes += c.body.len() as u64;
        t.shared_bytes += common;
        t.turns += c.turns_kept;
        t.tokens += c.tokens as f64;
        let tok = common as f64 * per_byte;
        t.openai_cached += if tok >= 1024.0 {
            (tok / 128.0).floor() * 128.0
        } else {
            0.0
        };
        let read = match c.body.starts_with(&prev.body[..prev.cached_end as usize]) {
            true => prev.cached_end,
            false => system_bytes,
        };
        let write = c.cached_end.saturating_sub(read);
        let rest = c.body.len() as u64 - read - write;
        t.anthropic += per_byte * (0.1 * read as f64 + 1.25 * write as f64 + rest as f64);
        // Evidence: the questions whose evidence all precedes this call.
        for ev in &s.evidence {
            let seqs: Option<Vec<u64>> = ev
                .iter()
                .map(|d| s.dia.iter().position(|x| x == d).map(|p| p as u64 + 1))
                .collect();
            let Some(seqs) = seqs else { continue };
            if seqs.iter().any(|&q| q as usize > *at) {
                continue;
            }
            t.evidence_asked += 1;
            if seqs.iter().all(|&q| q >= c.first_kept) {
                t.evidence_in += 1;
            }
        }
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = match args.iter().position(|a| a == "--locomo") {
        Some(i) => PathBuf::from(args.get(i + 1).context("--locomo needs a path")?),
        None => ctxlog_bench::default_locomo_path(),
    };
    let data: Value = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
    )?;
    let samples: Vec<Sample> = data
        .as_array()
        .context("LoCoMo is not an array")?
        .iter()
        .map(sample)
        .collect();
    let system_bytes = br#"{"model":"gpt-4o","messages":[{"role":"system","content":""#.len()
        as u64
        + SYSTEM.len() as u64
        + 2;
    let mut policies: Vec<(String, Window, f64)> = vec![("sliding".into(), Window::Sliding, 0.8)];
    for l in [0.6, 0.7, 0.8, 0.9] {
        policies.push((format!("stable@{l}"), Window::Stable, l));
    }
    println!(
        "cache_window: {} LoCoMo conversations, {} messages, one call per user message; openai-chat, o200k, turns policy, 1,000 tokens reserved for output",
        samples.len(),
        samples.iter().map(|s| s.events.len()).sum::<usize>()
    );
    let agent = [agent_loop(400)];
    for (set, samples) in [("LoCoMo", &samples[..]), ("agent loop", &agent[..])] {
        for budget in [8_000u64, 32_000] {
            let mut totals = vec![Totals::default(); policies.len()];
            for s in samples {
                let sliding = replay(s, budget, Window::Sliding, 0.8)?;
                // Steady state: from the first call whose sliding window leaves history out.
                let from = sliding
                    .iter()
                    .position(|(_, c)| c.full)
                    .unwrap_or(sliding.len());
                for (i, (_, window, low)) in policies.iter().enumerate() {
                    let calls = match i {
                        0 => sliding.iter().map(|(t, c)| (*t, c.clone())).collect(),
                        _ => replay(s, budget, *window, *low)?,
                    };
                    add(&mut totals[i], s, &calls, from, system_bytes);
                }
            }
            let base = totals[0];
            println!();
            println!(
                "{set}, budget {budget} tokens: {} steady-state calls",
                base.calls
            );
            println!(
                "| policy | prefix share | turns kept / call | kept vs sliding | cost @10 % cached | cost @50 % cached | cost Anthropic 0.1×/1.25× | evidence in window |"
            );
            println!("|---|---:|---:|---:|---:|---:|---:|---:|");
            let openai = |t: &Totals, p: f64| t.tokens - t.openai_cached * (1.0 - p);
            for ((name, _, _), t) in policies.iter().zip(&totals) {
                if t.calls == 0 {
                    println!("| {name} | - | - | - | - | - | - | - |");
                    continue;
                }
                println!(
                    "| {name} | {:.3} | {:.1} | {:.2}× | {:.2}× | {:.2}× | {:.2}× | {} |",
                    t.shared_bytes as f64 / t.bytes as f64,
                    t.turns as f64 / t.calls as f64,
                    t.turns as f64 / base.turns as f64,
                    openai(t, 0.1) / openai(&base, 0.1),
                    openai(t, 0.5) / openai(&base, 0.5),
                    t.anthropic / base.anthropic,
                    match t.evidence_asked {
                        0 => "-".to_owned(),
                        n => format!("{:.3}", t.evidence_in as f64 / n as f64),
                    },
                );
            }
        }
    }
    Ok(())
}
