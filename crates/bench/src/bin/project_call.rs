//! The Rust side of the Python overhead benchmark (`crates/python/bench/project_overhead.py`
//! runs it on the store it built): the median time of one `Store::project` call on an
//! existing conversation, repeated on a warm store.
//!
//! Usage: `project_call ROOT CONVERSATION ITERATIONS MAX_BYTES INPUT`; prints one JSON line
//! `{"median_us","p90_us","bytes","iterations"}`.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ctxlog::ops::ProjectRequest;

/// Calls made (and discarded) before timing, so caches are as warm as in a long-lived app.
const WARMUP: usize = 50;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [root, conversation, iterations, max_bytes, input] = args.as_slice() else {
        anyhow::bail!("usage: project_call ROOT CONVERSATION ITERATIONS MAX_BYTES INPUT");
    };
    let iterations: usize = iterations.parse().context("ITERATIONS")?;
    let store = ctxlog::Store::open(root)?;
    let request = ProjectRequest {
        conversation: conversation.clone(),
        input: Some(input.clone()),
        max_bytes: Some(max_bytes.parse().context("MAX_BYTES")?),
        ..Default::default()
    };
    let mut bytes = 0;
    for _ in 0..WARMUP {
        bytes = store.project(&request)?.body.len();
    }
    let mut times: Vec<Duration> = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        let projection = store.project(&request)?;
        times.push(start.elapsed());
        bytes = projection.body.len();
    }
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    println!(
        "{}",
        serde_json::json!({
            "median_us": at(0.5),
            "p90_us": at(0.9),
            "bytes": bytes,
            "iterations": iterations,
        })
    );
    Ok(())
}
