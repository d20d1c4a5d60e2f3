//! Commit throughput under concurrency: 1, 4 and 16 conversations committing at once (one
//! thread and one ledger each, fsync per commit), commits/s and latency percentiles, beside a
//! plain `write` + `fdatasync` loop with the same threads and bytes (one file per thread).
//! Also prints the process's peak RSS.
//!
//! ```text
//! cargo run --release -p ctxlog-bench --bin commit_concurrency [-- COMMITS_PER_THREAD]
//! ```

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use ctxlog_bench::peak_rss_mib;
use ctxlog_ledger::{EventBody, Ledger, NewCommit, Options};

fn turn(i: usize) -> NewCommit {
    NewCommit {
        id: None,
        events: vec![
            EventBody::User {
                text: format!("Question {i}: what did we decide about the deployment window?"),
            },
            EventBody::Assistant {
                text: format!(
                    "Answer {i}: Tuesday 02:00-04:00 UTC, rollback by 04:30 at the latest."
                ),
            },
        ],
    }
}

/// Runs `threads` workers, each calling `work(thread, dir)`, which returns its latencies.
fn run(
    root: &Path,
    threads: usize,
    work: impl Fn(usize, &Path) -> Result<Vec<Duration>> + Sync,
) -> Result<(f64, Vec<Duration>)> {
    let start = Instant::now();
    let results: Vec<Result<Vec<Duration>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let dir = root.join(format!("c{t}"));
                let work = &work;
                s.spawn(move || {
                    std::fs::create_dir_all(&dir)?;
                    work(t, &dir)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("worker panicked"))?)
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let mut all = Vec::new();
    for r in results {
        all.extend(r?);
    }
    all.sort();
    Ok((all.len() as f64 / elapsed, all))
}

fn pct(sorted: &[Duration], q: f64) -> f64 {
    sorted
        .get(((sorted.len().saturating_sub(1)) as f64 * q) as usize)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
}

fn main() -> Result<()> {
    let per_thread: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(300);
    let root =
        std::env::temp_dir().join(format!("ctxlog-commit-concurrency-{}", std::process::id()));
    let bytes = serde_json::to_vec(&turn(0).events)?.len();
    println!(
        "commit concurrency: {per_thread} commits per thread, fsync per commit, one conversation (or file) per thread (ms)"
    );
    println!();
    println!("| threads | method | commits/s | p50 | p99 | ratio of commits/s vs plain |");
    println!("|---:|---|---:|---:|---:|---:|");
    for threads in [1, 4, 16] {
        let _ = std::fs::remove_dir_all(&root);
        let (plain, plain_lat) = run(&root, threads, |_, dir| {
            let mut file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("plain.log"))?;
            let payload = vec![b'x'; bytes];
            let mut lat = Vec::with_capacity(per_thread);
            for _ in 0..per_thread {
                let t = Instant::now();
                file.write_all(&payload)?;
                file.sync_data()?;
                lat.push(t.elapsed());
            }
            Ok(lat)
        })?;
        let _ = std::fs::remove_dir_all(&root);
        let (ours, ours_lat) = run(&root, threads, |_, dir| {
            let (mut ledger, _) = Ledger::open(dir, &Options::default())?;
            let mut lat = Vec::with_capacity(per_thread);
            for i in 0..per_thread {
                let c = turn(i);
                let t = Instant::now();
                ledger.commit(&c)?;
                lat.push(t.elapsed());
            }
            Ok(lat)
        })?;
        for (name, rate, lat) in [
            ("plain write + fdatasync", plain, &plain_lat),
            ("ledger commit, fsync per commit", ours, &ours_lat),
        ] {
            println!(
                "| {threads} | {name} | {rate:.0} | {:.2} | {:.2} | {:.2}× |",
                pct(lat, 0.5),
                pct(lat, 0.99),
                rate / plain
            );
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    println!();
    println!("peak RSS of this process: {:.1} MiB", peak_rss_mib());
    Ok(())
}
