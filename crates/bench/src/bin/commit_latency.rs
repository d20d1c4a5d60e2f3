//! Commit latency: `Ledger::commit` of a small turn (user + assistant, about 200 bytes of
//! text) with a per-commit fsync, beside a plain loop that appends the same number of bytes
//! to a file and fsyncs it (`write` + `fdatasync`), measured in one run, interleaved
//! operation by operation so both see the same disk. Also shown: both without any sync.
//!
//! ```text
//! cargo run --release -p ctxlog-bench --bin commit_latency [-- N]
//! ```
//!
//! N (default 2000) commits per method. Files go to a fresh directory under the system
//! temporary directory (`$TMPDIR`), removed at the end.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ctxlog_ledger::{EventBody, Ledger, NewCommit, Options, SyncMode};

fn turn(i: usize) -> NewCommit {
    let user = format!(
        "Question {i:06}: what did we decide about the deployment window for the api gateway?"
    );
    let assistant = format!(
        "Answer {i:06}: the window is Tuesday 02:00-04:00 UTC, with rollback by 04:30 at the latest."
    );
    NewCommit {
        id: None,
        events: vec![
            EventBody::User { text: user },
            EventBody::Assistant { text: assistant },
        ],
    }
}

struct Method {
    name: &'static str,
    samples: Vec<Duration>,
    bytes: u64,
}

impl Method {
    fn new(name: &'static str, n: usize) -> Method {
        Method {
            name,
            samples: Vec::with_capacity(n),
            bytes: 0,
        }
    }

    fn percentile(&self, p: f64) -> Duration {
        let mut s = self.samples.clone();
        s.sort();
        let i = ((s.len() as f64 - 1.0) * p).round() as usize;
        s.get(i).copied().unwrap_or_default()
    }
}

/// A plain append-only file: write the bytes, then optionally `fdatasync`.
struct PlainLog {
    file: File,
    sync: bool,
}

impl PlainLog {
    fn create(path: &Path, sync: bool) -> Result<PlainLog> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("creating {}", path.display()))?;
        Ok(PlainLog { file, sync })
    }

    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.file.write_all(data)?;
        if self.sync {
            self.file.sync_data()?;
        }
        Ok(())
    }
}

fn ledger_size(dir: &Path) -> Result<u64> {
    Ok(std::fs::metadata(dir.join("ledger.log"))?.len())
}

/// Runs `n` interleaved operations of a ledger and a plain log with the given sync policy.
fn run_pair(root: &Path, n: usize, sync: bool) -> Result<(Method, Method)> {
    let tag = if sync { "sync" } else { "nosync" };
    let dir = root.join(format!("ledger-{tag}"));
    let mut opts = Options::default();
    opts.sync(if sync {
        SyncMode::PerCommit
    } else {
        SyncMode::Never
    });
    let (mut ledger, _) = Ledger::open(&dir, &opts).context("opening the ledger")?;
    let mut plain = PlainLog::create(&root.join(format!("plain-{tag}.log")), sync)?;
    let (ledger_name, plain_name) = if sync {
        ("ledger commit, fsync per commit", "plain write + fdatasync")
    } else {
        ("ledger commit, SyncMode::Never", "plain write, no sync")
    };
    let mut l = Method::new(ledger_name, n);
    let mut p = Method::new(plain_name, n);
    let mut size = ledger_size(&dir)?;
    for i in 0..n {
        let c = turn(i);
        let t = Instant::now();
        ledger.commit(&c)?;
        l.samples.push(t.elapsed());
        let new_size = ledger_size(&dir)?;
        let appended = (new_size - size) as usize;
        size = new_size;
        l.bytes += appended as u64;
        // The plain loop appends exactly as many bytes as the ledger did for this commit.
        let payload = vec![b'x'; appended];
        let t = Instant::now();
        plain.append(&payload)?;
        p.samples.push(t.elapsed());
        p.bytes += appended as u64;
    }
    Ok((l, p))
}

fn micros(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

fn print_table(n: usize, rows: &[(Method, Method)]) {
    println!("commit latency, {n} operations per method, interleaved (µs)");
    println!();
    println!("| method | bytes/op | median | p90 | p99 | median ratio vs plain |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (ledger, plain) in rows {
        let base = plain.percentile(0.5).as_secs_f64();
        for m in [plain, ledger] {
            let ratio = m.percentile(0.5).as_secs_f64() / base;
            println!(
                "| {} | {} | {} | {} | {} | {:.2}× |",
                m.name,
                m.bytes / m.samples.len().max(1) as u64,
                micros(m.percentile(0.5)),
                micros(m.percentile(0.9)),
                micros(m.percentile(0.99)),
                ratio
            );
        }
    }
}

fn scratch_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("ctxlog-commit-latency-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn main() -> Result<()> {
    let n: usize = match std::env::args().nth(1) {
        Some(a) => a.parse().context("N must be a positive integer")?,
        None => 2000,
    };
    let root = scratch_dir()?;
    let result = (|| -> Result<Vec<(Method, Method)>> {
        Ok(vec![run_pair(&root, n, true)?, run_pair(&root, n, false)?])
    })();
    let cleanup = std::fs::remove_dir_all(&root);
    let rows = result?;
    cleanup.with_context(|| format!("removing {}", root.display()))?;
    print_table(n, &rows);
    println!();
    println!(
        "(scratch directory: {}; the ledger number includes validation, JSON encoding,",
        root.display()
    );
    println!(" CRC32C, one pwrite, fdatasync and the unsynced sidecar index appends)");
    Ok(())
}
