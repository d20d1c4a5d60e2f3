//! Commit throughput under concurrency, fsync per commit, commits/s and latency percentiles,
//! with 1, 4 and 16 threads:
//!
//! - each thread its own conversation (its own ledger), beside a plain `write` + `fdatasync`
//!   loop with the same threads and bytes (one file per thread), with `Ledger::commit` and
//!   through `Store::commit` (the facade's queue; batches of one: its cost, no gain expected);
//! - all threads one conversation, beside the plain loop on one shared file (a mutex around
//!   `write` + `fdatasync`): a `Mutex<Ledger>` (one sync per commit, serialized) and
//!   `Store::commit` (group commit: what queued meanwhile is written with one sync).
//!
//! Also prints the process's peak RSS.
//!
//! ```text
//! cargo run --release -p ctxlog-bench --bin commit_concurrency [-- COMMITS_PER_THREAD]
//! ```

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use ctxlog::Store;
use ctxlog::ops::CommitRequest;
use ctxlog_bench::peak_rss_mib;
use ctxlog_ledger::{EventBody, Ledger, NewCommit, Options};

fn turn(i: usize) -> NewCommit {
    NewCommit::new(vec![
        EventBody::User {
            text: format!("Question {i}: what did we decide about the deployment window?"),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: format!("Answer {i}: Tuesday 02:00-04:00 UTC, rollback by 04:30 at the latest."),
            provider_item: None,
        },
    ])
}

/// A commit of `commit` to `conversation` through the facade.
fn request(conversation: &str, commit: NewCommit) -> CommitRequest {
    CommitRequest {
        conversation: conversation.into(),
        commit,
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

/// Times `n` calls of `op(i)`.
fn timed(n: usize, mut op: impl FnMut(usize) -> Result<()>) -> Result<Vec<Duration>> {
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        op(i)?;
        lat.push(t.elapsed());
    }
    Ok(lat)
}

/// Prints one table row per method; the first is the plain baseline of the ratios.
fn print_rows(threads: usize, conversations: &str, rows: &[(&str, (f64, Vec<Duration>))]) {
    let plain = rows.first().map_or(f64::NAN, |r| r.1.0);
    for (name, (rate, lat)) in rows {
        println!(
            "| {threads} | {conversations} | {name} | {rate:.0} | {:.2} | {:.2} | {:.2}× |",
            pct(lat, 0.5),
            pct(lat, 0.99),
            rate / plain
        );
    }
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
    println!("commit concurrency: {per_thread} commits per thread, fsync per commit (ms)");
    println!();
    println!(
        "| threads | conversations | method | commits/s | p50 | p99 | ratio of commits/s vs plain |"
    );
    println!("|---:|---|---|---:|---:|---:|---:|");
    let payload = vec![b'x'; bytes];
    for threads in [1, 4, 16] {
        let mut rows = Vec::new();
        // One conversation (or file) per thread.
        let _ = std::fs::remove_dir_all(&root);
        rows.push((
            "plain write + fdatasync, one file per thread",
            run(&root, threads, |_, dir| {
                let mut file = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join("plain.log"))?;
                timed(per_thread, |_| {
                    file.write_all(&payload)?;
                    Ok(file.sync_data()?)
                })
            })?,
        ));
        let _ = std::fs::remove_dir_all(&root);
        rows.push((
            "ledger commit",
            run(&root, threads, |_, dir| {
                let (mut ledger, _) = Ledger::open(dir, &Options::default())?;
                timed(per_thread, |i| Ok(ledger.commit(&turn(i)).map(drop)?))
            })?,
        ));
        let _ = std::fs::remove_dir_all(&root);
        let store = Store::open(&root)?;
        rows.push((
            "Store (group commit, batches of one)",
            run(&root, threads, |t, _| {
                let conversation = format!("c{t}");
                timed(per_thread, |i| {
                    Ok(store.commit(&request(&conversation, turn(i))).map(drop)?)
                })
            })?,
        ));
        drop(store);
        print_rows(threads, "one per thread", &rows);

        // One conversation (or file) for all threads.
        let mut rows = Vec::new();
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root)?;
        let file = Mutex::new(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(root.join("shared.log"))?,
        );
        rows.push((
            "plain write + fdatasync, one shared file (mutex)",
            run(&root, threads, |_, _| {
                timed(per_thread, |_| {
                    let mut f = file.lock().map_err(|_| anyhow!("poisoned"))?;
                    f.write_all(&payload)?;
                    Ok(f.sync_data()?)
                })
            })?,
        ));
        drop(file);
        let _ = std::fs::remove_dir_all(&root);
        let (ledger, _) = Ledger::open(&root.join("shared"), &Options::default())?;
        let ledger = Mutex::new(ledger);
        rows.push((
            "Mutex<Ledger>, commit",
            run(&root, threads, |t, _| {
                timed(per_thread, |i| {
                    let mut l = ledger.lock().map_err(|_| anyhow!("poisoned"))?;
                    Ok(l.commit(&turn(t * per_thread + i)).map(drop)?)
                })
            })?,
        ));
        drop(ledger);
        let _ = std::fs::remove_dir_all(&root);
        let store = Store::open(&root)?;
        rows.push((
            "Store (group commit)",
            run(&root, threads, |t, _| {
                timed(per_thread, |i| {
                    let commit = turn(t * per_thread + i);
                    Ok(store.commit(&request("shared", commit)).map(drop)?)
                })
            })?,
        ));
        drop(store);
        print_rows(threads, "one for all", &rows);
    }
    let _ = std::fs::remove_dir_all(&root);
    println!();
    println!("peak RSS of this process: {:.1} MiB", peak_rss_mib());
    Ok(())
}
