//! How much of each request body a provider's prompt cache can reuse: every LoCoMo
//! conversation replayed call by call (one call per message of speaker A, the user: the
//! history before it, the message as the input) through `ctxlog_projection::project`, at 8k
//! and 32k tokens (o200k, `openai-chat`, the `turns` policy), with the sliding window and
//! `window: stable` at low-water 0.6, 0.7, 0.8 and 0.9, and (with `--langchain FILE`, the
//! output of `crates/bench/python/trim_cache_window.py`) LangChain's `trim_messages` on the same
//! calls: each call's body holds the history messages it kept, written as ctxlog writes them.
//!
//! ```text
//! cargo run --release -p ctxlog-bench --bin cache_window [-- --locomo PATH] [--langchain FILE]
//!     [--recall K] [--plot OUT.png]
//! scripts/bench-cache-window    # all of them: LangChain's side first, then this program
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
//!   share of (call, question) pairs whose evidence is all inside the body's kept history;
//!   with `--recall K`, also the share whose evidence is inside the kept history or among the
//!   K recalled pages older than it (the question as the query: the recall index's ranking of
//!   the whole conversation, its first 50 hits, is filtered to the pages older than the
//!   window, as `project --recall K` asks the index for pages older than what it keeps).
//!
//! With `--plot OUT.png`, a PNG of prefix share against modelled cost (10 % price) per policy.
//! Its labels use DejaVu Sans ([`ctxlog_bench::plot_font`]).

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};
use ctxlog_ledger::event::{Event, EventBody, ToolStatus};
use ctxlog_projection::{
    Policy, Projection, ProjectionRequest, SizeCache, SliceHistory, Window, project,
};
use ctxlog_recall::{MemorySource, RecallIndex, SearchOptions};
use plotters::prelude::*;
use serde_json::Value;

const SYSTEM: &str = "You are a helpful assistant. Answer from the conversation.";

/// One LoCoMo conversation: its id, events, each message's `dia_id`, and its questions (with
/// evidence) and their evidence.
struct Sample {
    id: String,
    events: Vec<Event>,
    dia: Vec<String>,
    questions: Vec<String>,
    evidence: Vec<Vec<String>>,
    /// Per question, the seqs of the recall index's first hits for it (with `--recall`).
    hits: Vec<Vec<u64>>,
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
        id: "agent loop".into(),
        dia: vec![String::new(); events.len()],
        events,
        questions: Vec::new(),
        evidence: Vec::new(),
        hits: Vec::new(),
    }
}

fn sample(v: &Value) -> Sample {
    let (events, dia) = ctxlog_bench::locomo_events(v).into_iter().unzip();
    let (questions, evidence) = v["qa"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|q| {
            let evidence: Vec<String> = q["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e.as_str().map(str::to_owned))
                .collect();
            (
                q["question"].as_str().unwrap_or_default().to_owned(),
                evidence,
            )
        })
        .filter(|(_, e)| !e.is_empty())
        .unzip();
    Sample {
        id: v["sample_id"].as_str().unwrap_or_default().to_owned(),
        events,
        dia,
        questions,
        evidence,
        hits: Vec::new(),
    }
}

/// Fills `s.hits`: each question's first hits (seqs) in a recall index of the whole
/// conversation, built in a scratch file.
fn search_questions(s: &mut Sample, scratch: &std::path::Path) -> Result<()> {
    let path = scratch.join(format!("{}.recall.sqlite", s.id));
    let _ = std::fs::remove_file(&path);
    let mut index = RecallIndex::open(&path, &s.id)?;
    let source = MemorySource {
        ledger_id: s.id.clone(),
        events: s.events.clone(),
        artifacts: HashMap::new(),
    };
    index.catch_up(&source)?;
    let opts = SearchOptions {
        limit: ctxlog_recall::MAX_LIMIT,
        ..SearchOptions::default()
    };
    s.hits = s
        .questions
        .iter()
        .map(|q| Ok(index.search(q, &opts)?.hits.iter().map(|h| h.seq).collect()))
        .collect::<Result<_>>()?;
    drop(index);
    let _ = std::fs::remove_file(&path);
    Ok(())
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
    /// Evidence inside the window or among the recalled pages.
    evidence_recalled: u64,
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
    replay_with(s, &mut |t, text| {
        let history = SliceHistory::new(&s.events[..t]);
        Ok(project(
            &history,
            &request(budget, window, low, text)?,
            &mut cache,
        )?)
    })
}

/// LangChain's calls: at each call, the history messages `trim_messages` kept (`kept`, by the
/// call's message index), in a body without a budget, written as ctxlog writes it.
fn replay_kept(s: &Sample, kept: &HashMap<usize, usize>) -> Result<Vec<(usize, Call)>> {
    let mut cache = SizeCache::new();
    replay_with(s, &mut |t, text| {
        let k = *kept
            .get(&t)
            .with_context(|| format!("{}: no LangChain result for call {t}", s.id))?;
        let history = SliceHistory::new(&s.events[t - k.min(t)..t]);
        let mut b = ProjectionRequest::builder();
        b.model("gpt-4o")
            .system(SYSTEM)
            .input(text)
            .policy(Policy::Turns)
            .token_figures(true);
        Ok(project(&history, &b.build()?, &mut cache)?)
    })
}

/// One call per message of the first speaker after the first message: `call(t, text)`
/// projects the call whose input is message `t`.
fn replay_with(
    s: &Sample,
    call: &mut dyn FnMut(usize, &str) -> Result<Projection>,
) -> Result<Vec<(usize, Call)>> {
    let mut calls = Vec::new();
    for (t, e) in s.events.iter().enumerate() {
        let EventBody::User { text, .. } = &e.body else {
            continue;
        };
        if t == 0 {
            continue;
        }
        let p = call(t, text)?;
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
fn add(
    t: &mut Totals,
    s: &Sample,
    calls: &[(usize, Call)],
    from: usize,
    system_bytes: u64,
    recall: usize,
) {
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
        for (q, ev) in s.evidence.iter().enumerate() {
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
            // The first `recall` hits older than the window are the pages recalled.
            let hits = s.hits.get(q).map_or(&[][..], Vec::as_slice);
            let recalled: Vec<u64> = hits
                .iter()
                .copied()
                .filter(|&h| h < c.first_kept)
                .take(recall)
                .collect();
            if seqs
                .iter()
                .all(|&q| q >= c.first_kept || recalled.contains(&q))
            {
                t.evidence_recalled += 1;
            }
        }
    }
}

/// The command line.
struct Args {
    locomo: PathBuf,
    langchain: Option<PathBuf>,
    recall: usize,
    plot: Option<PathBuf>,
}

fn args() -> Result<Args> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| -> Result<Option<&String>> {
        match args.iter().position(|a| a == flag) {
            Some(i) => Ok(Some(
                args.get(i + 1)
                    .with_context(|| format!("{flag} needs a value"))?,
            )),
            None => Ok(None),
        }
    };
    Ok(Args {
        locomo: value("--locomo")?.map_or_else(ctxlog_bench::default_locomo_path, PathBuf::from),
        langchain: value("--langchain")?.map(PathBuf::from),
        recall: value("--recall")?.map_or(Ok(0), |k| {
            k.parse().context("--recall needs a number of pages")
        })?,
        plot: value("--plot")?.map(PathBuf::from),
    })
}

/// LangChain's kept history messages per (conversation, budget) and call, from the JSON lines
/// of `trim_cache_window.py`.
type Kept = HashMap<(String, u64), HashMap<usize, usize>>;

fn langchain_kept(path: &std::path::Path) -> Result<Kept> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut kept = Kept::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).with_context(|| format!("line {line:?}"))?;
        let field = |k: &str| v[k].as_u64().with_context(|| format!("no {k} in {line:?}"));
        let conversation = v["conversation"].as_str().unwrap_or_default().to_owned();
        kept.entry((conversation, field("budget")?))
            .or_default()
            .insert(field("call")? as usize, field("kept_messages")? as usize);
    }
    Ok(kept)
}

/// One policy's point of the plot: its name, prefix share and cost at the 10 % price.
type Point = (String, f64, f64);

/// Prints one set's table at one budget and returns its plot points.
fn print_table(title: &str, names: &[String], totals: &[Totals], recall: usize) -> Vec<Point> {
    let base = totals[0];
    println!();
    println!("{title}: {} steady-state calls", base.calls);
    let recall_column = match recall {
        0 => String::new(),
        k => format!(" evidence with --recall {k} |"),
    };
    println!(
        "| policy | prefix share | turns kept / call | kept vs sliding | cost @10 % cached | cost @50 % cached | cost Anthropic 0.1×/1.25× | evidence in window |{recall_column}"
    );
    println!(
        "|---|---:|---:|---:|---:|---:|---:|---:|{}",
        if recall > 0 { "---:|" } else { "" }
    );
    let openai = |t: &Totals, p: f64| t.tokens - t.openai_cached * (1.0 - p);
    let share = |n: u64| match totals
        .iter()
        .find(|t| t.calls > 0)
        .map(|t| t.evidence_asked)
    {
        Some(0) | None => "-".to_owned(),
        Some(asked) => format!("{:.3}", n as f64 / asked as f64),
    };
    let mut points = Vec::new();
    for (name, t) in names.iter().zip(totals) {
        if t.calls == 0 {
            println!(
                "| {name} | - | - | - | - | - | - | - |{}",
                if recall > 0 { " - |" } else { "" }
            );
            continue;
        }
        let prefix = t.shared_bytes as f64 / t.bytes as f64;
        let cost = openai(t, 0.1) / openai(&base, 0.1);
        let recalled = match recall {
            0 => String::new(),
            _ => format!(" {} |", share(t.evidence_recalled)),
        };
        println!(
            "| {name} | {prefix:.3} | {:.1} | {:.2}× | {cost:.2}× | {:.2}× | {:.2}× | {} |{recalled}",
            t.turns as f64 / t.calls as f64,
            t.turns as f64 / base.turns as f64,
            openai(t, 0.5) / openai(&base, 0.5),
            t.anthropic / base.anthropic,
            share(t.evidence_in),
        );
        points.push((name.clone(), prefix, cost));
    }
    points
}

fn main() -> Result<()> {
    let args = args()?;
    let data: Value = serde_json::from_slice(
        &std::fs::read(&args.locomo)
            .with_context(|| format!("reading {}", args.locomo.display()))?,
    )?;
    let mut samples: Vec<Sample> = data
        .as_array()
        .context("LoCoMo is not an array")?
        .iter()
        .map(sample)
        .collect();
    if args.recall > 0 {
        let scratch =
            std::env::temp_dir().join(format!("ctxlog-cache-window-{}", std::process::id()));
        std::fs::create_dir_all(&scratch)?;
        for s in &mut samples {
            search_questions(s, &scratch)?;
        }
        let _ = std::fs::remove_dir_all(&scratch);
    }
    let langchain = args.langchain.as_deref().map(langchain_kept).transpose()?;
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
    let mut plotted: Vec<(String, Vec<Point>)> = Vec::new();
    for (set, samples) in [("LoCoMo", &samples[..]), ("agent loop", &agent[..])] {
        let trimmed = langchain.as_ref().filter(|_| set == "LoCoMo");
        for budget in [8_000u64, 32_000] {
            let mut names: Vec<String> = policies.iter().map(|p| p.0.clone()).collect();
            if trimmed.is_some() {
                names.push("LangChain trim_messages".into());
            }
            let mut totals = vec![Totals::default(); names.len()];
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
                    add(&mut totals[i], s, &calls, from, system_bytes, args.recall);
                }
                if let Some(kept) = trimmed {
                    let kept = kept.get(&(s.id.clone(), budget)).with_context(|| {
                        format!("no LangChain results for {} at {budget}", s.id)
                    })?;
                    let calls = replay_kept(s, kept)?;
                    let last = totals.len() - 1;
                    add(
                        &mut totals[last],
                        s,
                        &calls,
                        from,
                        system_bytes,
                        args.recall,
                    );
                }
            }
            let title = format!("{set}, budget {budget} tokens");
            let points = print_table(&title, &names, &totals, args.recall);
            if totals[0].calls == 0 {
                println!(
                    "(no {set} conversation outgrows a {}k window: every policy keeps everything)",
                    budget / 1000
                );
            } else {
                plotted.push((title, points));
            }
        }
    }
    if let Some(path) = &args.plot {
        draw(path, &plotted)?;
        println!();
        println!("plot: {}", path.display());
    }
    Ok(())
}

/// One panel per set and budget: per policy, a bar of its prefix share and one of its
/// modelled cost at the 10 % price (against the sliding window's).
fn draw(path: &std::path::Path, sets: &[(String, Vec<Point>)]) -> Result<()> {
    let text = ctxlog_bench::plot_font()?;
    let err = |e: &dyn std::fmt::Display| anyhow!("{e}");
    let height = 60 + 260 * sets.len().max(1) as u32;
    let root = BitMapBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = match text {
        true => root
            .titled(
                "Cache-stable windows: prefix share (blue) and modelled cost at the 10 % price (red), vs sliding",
                ("sans-serif", 20),
            )
            .map_err(|e| err(&e))?,
        false => root,
    };
    for ((title, points), area) in sets.iter().zip(root.split_evenly((sets.len().max(1), 1))) {
        let mut chart = ChartBuilder::on(&area);
        chart.margin(12);
        if text {
            chart
                .caption(title.as_str(), ("sans-serif", 16))
                .x_label_area_size(0)
                .y_label_area_size(40);
        }
        let groups = points.len() as f64;
        // Below 0: room for the policies' names.
        let mut chart = chart
            .build_cartesian_2d(0f64..groups, -0.15f64..1.15f64)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(7)
            .draw()
            .map_err(|e| err(&e))?;
        if text {
            chart
                .draw_series(points.iter().enumerate().map(|(i, (name, _, _))| {
                    Text::new(name.clone(), (i as f64 + 0.12, -0.06), ("sans-serif", 13))
                }))
                .map_err(|e| err(&e))?;
        }
        for (i, (_, prefix, cost)) in points.iter().enumerate() {
            let x = i as f64;
            for (offset, value, color) in [(0.15, *prefix, BLUE), (0.5, *cost, RED)] {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x + offset, 0.0), (x + offset + 0.35, value.min(1.1))],
                        color.mix(0.8).filled(),
                    )))
                    .map_err(|e| err(&e))?;
                if text {
                    chart
                        .draw_series(std::iter::once(Text::new(
                            format!("{value:.2}"),
                            (x + offset + 0.02, value.min(1.02) + 0.07),
                            ("sans-serif", 12),
                        )))
                        .map_err(|e| err(&e))?;
                }
            }
        }
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
