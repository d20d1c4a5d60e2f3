//! Projection time on a 10,000-turn conversation held in memory: `ctxlog_projection::project`
//! (`turns` policy) with a warm `SizeCache` and with a cold one, beside the naive rule
//! (`ctxlog_projection::naive::project_naive`: serialize every candidate suffix, oldest dropped
//! first, first that fits wins), at several byte budgets, measured in one run. Every naive
//! body is checked to equal ours byte for byte. Token budgets are shown for our projector only:
//! the naive rule would tokenize every candidate body.
//!
//! The naive rule writes each candidate body in full from the messages (every string escaped
//! again), as a caller serializing the request once per attempt would; at a small window that
//! is every suffix of the history, so one call writes ~turns²/2 turns' worth of JSON. Below
//! the table, the same walk written against `serde_json` at the smallest byte budget shows what
//! that work costs a caller who does not use our writer.
//!
//! ```text
//! cargo run --release -p ctxlog-bench --bin projection_bench [-- TURNS]
//! ```

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use ctxlog_bench::{conversation, with_peak_rss};
use ctxlog_projection::naive::project_naive;
use ctxlog_projection::{Projection, ProjectionRequest, SizeCache, SliceHistory, project};

fn request(max_bytes: Option<u64>, max_tokens: Option<u64>) -> Result<ProjectionRequest> {
    let mut b = ProjectionRequest::builder();
    b.model("gpt-4o-mini")
        .system("You are a helpful assistant.")
        .input("What is the deployment window now?")
        .notice(true);
    if let Some(n) = max_bytes {
        b.max_bytes(n);
    }
    if let Some(n) = max_tokens {
        b.max_tokens(n);
    }
    Ok(b.build()?)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time<T>(reps: usize, mut f: impl FnMut() -> Result<T>) -> Result<(Duration, T)> {
    let mut samples = Vec::with_capacity(reps);
    let mut last = None;
    for _ in 0..reps {
        let start = Instant::now();
        last = Some(f()?);
        samples.push(start.elapsed());
    }
    let last = last.ok_or_else(|| anyhow::anyhow!("no repetitions"))?;
    Ok((median(samples), last))
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn main() -> Result<()> {
    let turns: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10_000);
    let events = conversation(turns);
    let history = SliceHistory::new(&events);
    let everything = project(&history, &request(None, None)?, &mut SizeCache::new())?;
    println!(
        "projection_bench: {turns} turns, full body {} bytes / {} o200k tokens, openai-chat, turns policy, notice on",
        everything.report.bytes, everything.report.tokens
    );
    println!(
        "{:>14} | {:>6} | {:>9} | {:>11} | {:>11} | {:>12} | {:>10} | {:>10} | equal | {:>10}",
        "budget", "kept", "bytes", "warm", "cold", "naive", "naive/warm", "naive/cold", "peak RSS"
    );
    let mut warm_cache = SizeCache::new();
    project(&history, &request(None, None)?, &mut warm_cache)?;
    for budget in [8 * 1024, 64 * 1024, 512 * 1024, everything.report.bytes] {
        let req = request(Some(budget), None)?;
        let ((warm, ours, cold), rss) = ours(&history, &req, &mut warm_cache)?;
        let (naive, naive_body) = time(1, || Ok(project_naive(&history, &req)?))?;
        let equal = naive_body == ours.body;
        ensure!(equal, "naive and projector differ at budget {budget}");
        row(
            &format!("{budget} B"),
            &ours,
            warm,
            cold,
            Some(naive),
            equal,
            rss,
        );
    }
    for tokens in [2_000, 16_000, 128_000] {
        let req = request(None, Some(tokens))?;
        let ((warm, ours, cold), rss) = ours(&history, &req, &mut warm_cache)?;
        row(&format!("{tokens} tok"), &ours, warm, cold, None, true, rss);
    }
    println!(
        "peak RSS: the process's, reset before our warm and cold runs of each row (not the naive run)"
    );
    println!(
        "naive: one call per row; every candidate body written in full from the messages (each string escaped again)"
    );
    let (serde_time, (candidates, kept)) =
        time(1, || serde_walk(&everything.body, SERDE_WALK_BUDGET))?;
    println!(
        "the same walk as a caller writes it with serde_json (messages parsed once, each candidate written by serde_json, no notice), {SERDE_WALK_BUDGET} B: {candidates} candidates, {kept} turns kept, {}",
        ms(serde_time)
    );
    println!(
        "warm cache: {} entries, {} hits, {} misses",
        warm_cache.len(),
        warm_cache.hits(),
        warm_cache.misses()
    );
    Ok(())
}

/// The budget of the serde_json walk: the smallest byte budget of the table.
const SERDE_WALK_BUDGET: u64 = 8 * 1024;

/// The naive walk written against serde_json instead of our writer, to show what the naive
/// rule costs a caller: the full body parsed once, then every candidate (system message, the
/// history from its oldest kept turn, the input) written by `serde_json` until one
/// fits `budget`. No omission notice, so it may keep one turn more than the rule; the work per
/// candidate is the same. Returns the candidates written and the turns kept.
fn serde_walk(body: &[u8], budget: u64) -> Result<(usize, usize)> {
    let request: serde_json::Value = serde_json::from_slice(body)?;
    let field = |name: &str| {
        request
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("the body has no {name}"))
    };
    let (model, messages) = (field("model")?, field("messages")?);
    let Some([system, history @ .., input]) = messages.as_array().map(Vec::as_slice) else {
        anyhow::bail!("the body's messages are not [system, history.., input]");
    };
    // A turn is a user message and the assistant's answer.
    ensure!(history.len() % 2 == 0, "the history is not whole turns");
    let turns = history.len() / 2;
    for from in 0..=turns {
        let mut candidate: Vec<&serde_json::Value> = vec![system];
        candidate.extend(&history[2 * from..]);
        candidate.push(input);
        let mut written = br#"{"model":"#.to_vec();
        serde_json::to_writer(&mut written, model)?;
        written.extend_from_slice(br#","messages":"#);
        serde_json::to_writer(&mut written, &candidate)?;
        written.push(b'}');
        // The whole history written this way is our body, byte for byte: both measure alike.
        ensure!(
            from > 0 || written == body,
            "serde_json writes the body differently"
        );
        if written.len() as u64 <= budget {
            return Ok((from + 1, turns - from));
        }
    }
    anyhow::bail!("no candidate fits {budget} B")
}

/// Our projector on `req`: median warm time (50 calls on `warm_cache`), the last projection,
/// median cold time (5 calls, fresh cache each), and the peak RSS (MiB) while they ran.
fn ours(
    history: &SliceHistory<'_>,
    req: &ProjectionRequest,
    warm_cache: &mut SizeCache,
) -> Result<((Duration, Projection, Duration), f64)> {
    let (r, rss) = with_peak_rss(|| -> Result<_> {
        let (warm, ours) = time(50, || Ok(project(history, req, warm_cache)?))?;
        let (cold, _) = time(5, || Ok(project(history, req, &mut SizeCache::new())?))?;
        Ok((warm, ours, cold))
    });
    Ok((r?, rss))
}

fn row(
    label: &str,
    p: &Projection,
    warm: Duration,
    cold: Duration,
    naive: Option<Duration>,
    equal: bool,
    rss_mib: f64,
) {
    let (naive_s, rw, rc) = match naive {
        Some(n) => (
            ms(n),
            format!("{:.1}x", n.as_secs_f64() / warm.as_secs_f64()),
            format!("{:.1}x", n.as_secs_f64() / cold.as_secs_f64()),
        ),
        None => ("n/a".into(), "-".into(), "-".into()),
    };
    println!(
        "{label:>14} | {:>6} | {:>9} | {:>11} | {:>11} | {naive_s:>12} | {rw:>10} | {rc:>10} | {:>5} | {:>6.1} MiB",
        p.report.turns.kept,
        p.report.bytes,
        ms(warm),
        ms(cold),
        if naive.is_some() {
            if equal { "yes" } else { "NO" }
        } else {
            "-"
        },
        rss_mib
    );
}
