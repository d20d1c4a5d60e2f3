//! HTTP load: requests per second and latency percentiles of `ctxlog serve` under 16 concurrent
//! loopback clients (server load: docs/design.md#10-evidence).
//!
//! The server runs in this process on `127.0.0.1:0` over a fresh store; each client is a
//! thread with one keep-alive HTTP/1.1 connection. Measured, one after the other:
//!
//! - commit, all clients to **one** conversation (commits queue for its writer: one fsync
//!   each, serialized);
//! - commit, each client to **its own** conversation (writers in parallel);
//! - project a 1,000-turn conversation with an 8 KiB byte budget (reads in parallel).
//!
//! ```text
//! cargo run --release -p ctxlog-bench --bin http_load [-- REQUESTS_PER_CLIENT]
//! ```
//!
//! REQUESTS_PER_CLIENT defaults to 50 for commits and 4× that for projections. Files go to a
//! fresh directory under `$TMPDIR`, removed at the end. Only loopback is ever contacted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ctxlog_bench::http::Client;
use ctxlog_bench::with_peak_rss;

const CLIENTS: usize = 16;
const HISTORY_TURNS: usize = 1_000;
const BUDGET_BYTES: u64 = 8 * 1024;

fn turn(client: usize, i: usize) -> String {
    serde_json::json!({
        "user": format!("Client {client} question {i:06}: what did we decide about the deployment window for the api gateway?"),
        "assistant": format!("Answer {i:06}: the window is Tuesday 02:00-04:00 UTC, with rollback by 04:30 at the latest."),
    })
    .to_string()
}

/// Runs `per_client` requests on each of [`CLIENTS`] threads; returns every latency and the
/// wall time.
fn load(
    addr: SocketAddr,
    per_client: usize,
    request: impl Fn(usize, usize) -> (String, String) + Sync,
) -> Result<(Vec<Duration>, Duration)> {
    let start = Instant::now();
    let results: Vec<Result<Vec<Duration>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let request = &request;
                s.spawn(move || -> Result<Vec<Duration>> {
                    let mut client = Client::connect(addr)?;
                    let mut samples = Vec::with_capacity(per_client);
                    for i in 0..per_client {
                        let (path, body) = request(c, i);
                        samples.push(client.post(&path, &body)?.whole);
                    }
                    Ok(samples)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("client panicked")))
            })
            .collect()
    });
    let wall = start.elapsed();
    let mut all = Vec::new();
    for r in results {
        all.extend(r?);
    }
    Ok((all, wall))
}

fn row(name: &str, mut samples: Vec<Duration>, wall: Duration, rss_mib: f64) -> String {
    samples.sort_unstable();
    let pct = |p: f64| {
        let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
        samples[i].as_secs_f64() * 1e3
    };
    format!(
        "| {name} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {rss_mib:.1} MiB |",
        samples.len(),
        samples.len() as f64 / wall.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        samples.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
    )
}

fn main() -> Result<()> {
    let per_client: usize = match std::env::args().nth(1) {
        Some(n) => n.parse().context("REQUESTS_PER_CLIENT")?,
        None => 50,
    };
    let root = std::env::temp_dir().join(format!("ctxlog-http-load-{}", std::process::id()));
    let result = run(&root, per_client);
    let _ = std::fs::remove_dir_all(&root);
    result
}

fn run(root: &PathBuf, per_client: usize) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let state = ctxlog_server::AppState::new(&ctxlog_server::Config::new(root))?;
    let server = runtime.spawn(ctxlog_server::run(listener, state, async move {
        let _ = stopped.await;
    }));

    println!(
        "http load: {CLIENTS} concurrent keep-alive clients on {addr}, in-process server (ms)\n"
    );
    println!("| operation | requests | requests/s | p50 | p99 | max | peak RSS |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let (r, rss) = with_peak_rss(|| {
        load(addr, per_client, |c, i| {
            ("/v1/conversations/shared/commits".into(), turn(c, i))
        })
    });
    let (s, w) = r?;
    println!("{}", row("commit, one conversation (queued)", s, w, rss));
    let (r, rss) = with_peak_rss(|| {
        load(addr, per_client, |c, i| {
            (format!("/v1/conversations/own-{c}/commits"), turn(c, i))
        })
    });
    let (s, w) = r?;
    println!("{}", row("commit, one conversation per client", s, w, rss));

    let mut setup = Client::connect(addr)?;
    for i in 0..HISTORY_TURNS {
        setup.post("/v1/conversations/long/commits", &turn(99, i))?;
    }
    let project = serde_json::json!({"input": "What did we decide about rollback?", "max_bytes": BUDGET_BYTES}).to_string();
    let answer = setup.post("/v1/conversations/long/projection?report=true", &project)?;
    let report: serde_json::Value = serde_json::from_slice(&answer.body)?;
    let (r, rss) = with_peak_rss(|| {
        load(addr, per_client * 4, |_, _| {
            ("/v1/conversations/long/projection".into(), project.clone())
        })
    });
    let (s, w) = r?;
    println!(
        "{}",
        row(
            &format!(
                "project, {HISTORY_TURNS}-turn conversation, {BUDGET_BYTES}-byte budget ({} turns kept)",
                report["report"]["turns"]["kept"]
            ),
            s,
            w,
            rss
        )
    );
    println!(
        "\npeak RSS: the whole process (server and the {CLIENTS} client threads) during each load, \
         reset before it"
    );
    let _ = stop.send(());
    runtime.block_on(server)??;
    Ok(())
}
