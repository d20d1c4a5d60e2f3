//! PostgreSQL backend vs the file store, side by side in one run: commits per second (one
//! writer; 16 writers on one conversation; 16 writers on 16 conversations) with durable
//! commits on both (fsync per commit; `synchronous_commit = on`), and the latency of a
//! projection of a 1,000-turn conversation (first on a fresh store, then warm).
//!
//! ```sh
//! cargo run --release -p ctxlog-bench --bin pg_bench -- postgres://postgres@127.0.0.1:5432/postgres [COMMITS]
//! ```
//!
//! The database must be reachable (docs/postgres.md shows a throwaway cluster); a fresh
//! schema `bench_<pid>` is used and left behind. The file store runs in a temporary
//! directory that is deleted at the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use ctxlog::ops::{CommitRequest, ProjectRequest};
use ctxlog::{Options, Store, StoreLocation, SyncMode};

const WRITERS: usize = 16;
const TURNS: usize = 1000;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .context("usage: pg_bench postgres://user@host:port/db [COMMITS]")?;
    let commits: usize = args.next().map_or(Ok(400), |n| n.parse())?;
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ctxlog-pg-bench-{pid}"));
    let sep = if url.contains('?') { '&' } else { '?' };
    let pg = format!(
        "{url}{sep}schema=bench_{pid}&cache_dir={}",
        dir.join("pg-cache").display()
    );
    let engines = [
        ("file store", StoreLocation::dir(dir.join("files"))),
        ("postgres", StoreLocation::parse(&pg)?),
    ];
    // Load the tokenizer tables once, outside every measurement.
    let warm_up = ProjectRequest {
        conversation: "none".into(),
        input: Some("warm up".into()),
        max_bytes: Some(4096),
        ..Default::default()
    };
    open(&engines[0].1, &Options::default())?.project(&warm_up)?;
    println!(
        "commits: {commits} per scenario, {WRITERS} writers where concurrent; durable commits on both"
    );
    println!(
        "| engine | 1 writer commits/s | {WRITERS} writers, 1 conversation | {WRITERS} writers, {WRITERS} conversations | project 1,000 turns: first | warm (median of 20) |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, location) in &engines {
        let durable = Arc::new(open(location, &Options::default())?);
        let single = rate(commits, || one_writer(&durable, "single", commits))?;
        let same = rate(commits, || {
            many_writers(&durable, commits, |_| "same".to_string())
        })?;
        let spread = rate(commits, || {
            many_writers(&durable, commits, |w| format!("w{w}"))
        })?;
        let (first, warm) = projection(location)?;
        println!(
            "| {name} | {single:.0} | {same:.0} | {spread:.0} | {:.1} ms | {:.2} ms |",
            ms(first),
            ms(warm)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The store at `location` with `options`.
fn open(location: &StoreLocation, options: &Options) -> anyhow::Result<Store> {
    Ok(ctxlog::StoreBuilder::new(location.clone())
        .options(options.clone())
        .build()?)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn rate(n: usize, f: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    let start = Instant::now();
    f()?;
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

fn turn(conversation: &str, i: usize) -> anyhow::Result<CommitRequest> {
    let json = format!(
        r#"{{"user":"question {i}: what did we decide about item {i}?","assistant":"We decided to keep item {i} as it is, for now."}}"#
    );
    Ok(CommitRequest::from_json(
        conversation,
        json.as_bytes(),
        None,
    )?)
}

fn one_writer(store: &Store, conversation: &str, n: usize) -> anyhow::Result<()> {
    for i in 0..n {
        store.commit(&turn(conversation, i)?)?;
    }
    Ok(())
}

fn many_writers(
    store: &Arc<Store>,
    n: usize,
    conversation: impl Fn(usize) -> String,
) -> anyhow::Result<()> {
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.clone();
            let conversation = conversation(w);
            std::thread::spawn(move || one_writer(&store, &conversation, n / WRITERS))
        })
        .collect();
    for t in threads {
        t.join()
            .map_err(|_| anyhow::anyhow!("a writer panicked"))??;
    }
    Ok(())
}

/// A 1,000-turn conversation (committed without sync, to build it fast), then the projection
/// of its tail under a 16 KB budget: once on a fresh store, then 20 times warm.
fn projection(location: &StoreLocation) -> anyhow::Result<(Duration, Duration)> {
    let mut fast = Options::default();
    fast.sync(SyncMode::Never);
    let store = open(location, &fast)?;
    for i in 0..TURNS {
        store.commit(&turn("long", i)?)?;
    }
    drop(store);
    let request = ProjectRequest {
        conversation: "long".into(),
        input: Some("what did we decide about item 3?".into()),
        max_bytes: Some(16 << 10),
        ..Default::default()
    };
    let store = open(location, &fast)?;
    let start = Instant::now();
    let first = store.project(&request)?;
    let first_time = start.elapsed();
    anyhow::ensure!(first.report.turns.kept > 0, "the projection kept no turn");
    let mut times: Vec<Duration> = (0..20)
        .map(|_| {
            let start = Instant::now();
            store.project(&request).map(|_| start.elapsed())
        })
        .collect::<Result<_, _>>()?;
    times.sort();
    Ok((first_time, times[times.len() / 2]))
}
