//! ctxlog against LangChain's `trim_messages` on the LoCoMo conversations: token budgets
//! 2,000 and 8,000, o200k and OpenAI's per-message rule on both sides (speaker A as `user`,
//! speaker B as `assistant`, a system prompt and a current user input). Run by
//! `scripts/bench-langchain`, which runs `crates/bench/python/trim_bench.py` first and
//! passes its JSON lines here; prints both sides per conversation and budget.
//!
//! ```text
//! langchain_compare LOCOMO_JSON LANGCHAIN_RESULTS_JSONL
//! ```

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use ctxlog_ledger::event::Event;
use ctxlog_projection::{ProjectionRequest, SizeCache, SliceHistory, project};
use serde_json::Value;

const SYSTEM: &str = "You are a helpful assistant.";
const INPUT: &str = "What do you remember about our earlier conversations?";
const REPS: usize = 20;

fn events(sample: &Value) -> Vec<Event> {
    ctxlog_bench::locomo_events(sample)
        .into_iter()
        .map(|(event, _)| event)
        .collect()
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v.get(v.len() / 2)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [locomo, theirs] = args.as_slice() else {
        bail!("usage: langchain_compare LOCOMO_JSON LANGCHAIN_RESULTS_JSONL");
    };
    let samples: Value = serde_json::from_slice(&std::fs::read(locomo)?)?;
    let mut lc: HashMap<(String, u64), Value> = HashMap::new();
    for line in std::fs::read_to_string(theirs)?.lines() {
        let v: Value = serde_json::from_str(line)?;
        let key = (
            v["conversation"].as_str().unwrap_or_default().to_owned(),
            v["budget"].as_u64().unwrap_or_default(),
        );
        lc.insert(key, v);
    }
    println!(
        "| conversation | budget | messages | LangChain kept | ctxlog kept | LangChain tokens | ctxlog tokens | LangChain ms | ctxlog ms (cold) | ctxlog ms (warm) | cold speed-up | warm speed-up |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let (mut lc_total, mut cold_total, mut warm_total, mut same) = (0.0, 0.0, 0.0, 0);
    let mut lc_rss = f64::NAN;
    let mut rows = 0;
    for sample in samples.as_array().context("LoCoMo is not an array")? {
        let name = sample["sample_id"].as_str().unwrap_or_default().to_owned();
        let events = events(sample);
        let history = SliceHistory::new(&events);
        let mut warm_cache = SizeCache::new();
        for budget in [2_000u64, 8_000] {
            let Some(theirs) = lc.get(&(name.clone(), budget)) else {
                continue;
            };
            let mut b = ProjectionRequest::builder();
            b.model("gpt-4o")
                .system(SYSTEM)
                .input(INPUT)
                .max_tokens(budget);
            let req = b.build()?;
            let ours = project(&history, &req, &mut warm_cache)?;
            let cold: Vec<Duration> = (0..5)
                .map(|_| {
                    let t = Instant::now();
                    project(&history, &req, &mut SizeCache::new()).map(|_| t.elapsed())
                })
                .collect::<Result<_, _>>()?;
            let warm: Vec<Duration> = (0..REPS)
                .map(|_| {
                    let t = Instant::now();
                    project(&history, &req, &mut warm_cache).map(|_| t.elapsed())
                })
                .collect::<Result<_, _>>()?;
            let body: Value = serde_json::from_slice(&ours.body)?;
            let kept = body["messages"]
                .as_array()
                .map_or(0, |m| m.len().saturating_sub(2));
            let (cold, warm) = (median(cold), median(warm));
            let lc_ms = theirs["median_ms"].as_f64().unwrap_or(f64::NAN);
            let lc_kept = theirs["kept_messages"].as_u64().unwrap_or_default() as usize;
            if lc_kept == kept {
                same += 1;
            }
            rows += 1;
            lc_total += lc_ms;
            lc_rss = lc_rss.max(theirs["peak_rss_mib"].as_f64().unwrap_or(f64::NAN));
            cold_total += cold;
            warm_total += warm;
            println!(
                "| {name} | {budget} | {} | {lc_kept} | {kept} | {} | {} | {lc_ms:.3} | {cold:.3} | {warm:.3} | {:.0}× | {:.0}× |",
                events.len(),
                theirs["tokens"],
                ours.report.tokens,
                lc_ms / cold,
                lc_ms / warm,
            );
        }
    }
    println!();
    println!(
        "{rows} calls: same number of kept messages in {same}; mean per call LangChain {:.3} ms, \
         ctxlog cold {:.3} ms ({:.0}×), warm {:.3} ms ({:.0}×)",
        lc_total / rows as f64,
        cold_total / rows as f64,
        lc_total / cold_total,
        warm_total / rows as f64,
        lc_total / warm_total,
    );
    println!(
        "peak RSS: LangChain's Python process {lc_rss:.1} MiB, ctxlog's (this process) {:.1} MiB",
        ctxlog_bench::peak_rss_mib()
    );
    Ok(())
}
