//! Commit latency: `Ledger::commit` of a small turn (user + assistant, about 200 bytes of
//! text) with a per-commit fsync, beside two reference rules measured in the same run,
//! interleaved operation by operation so all see the same disk:
//!
//! - a plain loop that appends the same number of bytes to a file and syncs it
//!   (`write` + `fdatasync`);
//! - SQLite (bundled, via `rusqlite`) in `journal_mode=WAL` with `synchronous=FULL`, one
//!   transaction per turn inserting the same user and assistant texts as two rows of a simple
//!   table: durable per commit, the fair comparison to an fsync per commit.
//!
//! Also shown, in a second interleaved group: all three without a sync per commit (the plain
//! loop without `fdatasync`, the ledger with `SyncMode::Never`, SQLite WAL with
//! `synchronous=NORMAL`, its common setting, which syncs only at checkpoints and so is not
//! durable per commit). Ratios are medians against the plain loop of the same group.
//!
//! ```text
//! cargo run --release -p ctxlog-bench --bin commit_latency [-- N]
//! ```
//!
//! N (default 2000) commits per method. Files go to a fresh directory under the system
//! temporary directory (`$TMPDIR`), removed at the end. For SQLite, bytes/op is what the
//! process handed to `write`-family calls during the commit (`wchar` in `/proc/self/io`,
//! Linux only; 0 elsewhere): whole WAL frames, not the row bytes.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ctxlog_bench::with_peak_rss;
use ctxlog_ledger::{EventBody, Ledger, NewCommit, Options, SyncMode};

fn turn(i: usize) -> NewCommit {
    let user = format!(
        "Question {i:06}: what did we decide about the deployment window for the api gateway?"
    );
    let assistant = format!(
        "Answer {i:06}: the window is Tuesday 02:00-04:00 UTC, with rollback by 04:30 at the latest."
    );
    NewCommit::new(vec![
        EventBody::User {
            text: user,
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: assistant,
            provider_item: None,
        },
    ])
}

struct Method {
    name: &'static str,
    samples: Vec<Duration>,
    bytes: u64,
    /// Peak RSS (MiB) of a separate, untimed pass of this method alone; `None` when not
    /// measured (the references).
    peak_rss: Option<f64>,
}

impl Method {
    fn new(name: &'static str, n: usize) -> Method {
        Method {
            name,
            samples: Vec::with_capacity(n),
            bytes: 0,
            peak_rss: None,
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

/// SQLite in WAL mode with a simple event table; one transaction per turn.
struct SqliteWal {
    conn: rusqlite::Connection,
}

impl SqliteWal {
    /// Opens a fresh database with `journal_mode=WAL` and the given `synchronous` level
    /// (`FULL` or `NORMAL`), and fails if SQLite did not switch to WAL.
    fn create(path: &Path, synchronous: &str) -> Result<SqliteWal> {
        let conn = rusqlite::Connection::open(path)
            .with_context(|| format!("creating {}", path.display()))?;
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        anyhow::ensure!(mode.eq_ignore_ascii_case("wal"), "journal_mode is {mode}");
        conn.execute_batch(&format!(
            "PRAGMA synchronous={synchronous};
             CREATE TABLE events (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, text TEXT NOT NULL);"
        ))?;
        Ok(SqliteWal { conn })
    }

    /// Inserts the turn's events as rows in one transaction and commits it.
    fn commit(&mut self, c: &NewCommit) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut ins = tx.prepare_cached("INSERT INTO events (kind, text) VALUES (?1, ?2)")?;
            for e in &c.events {
                let (kind, text) = match e {
                    EventBody::User { text, .. } => ("user", text.as_str()),
                    EventBody::Assistant { text, .. } => ("assistant", text.as_str()),
                    _ => anyhow::bail!("the benchmark turn holds only user and assistant events"),
                };
                ins.execute(rusqlite::params![kind, text])?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

/// Bytes this process has passed to `write`-family calls so far (`wchar` in `/proc/self/io`);
/// 0 where that file is missing or unreadable.
fn written_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("wchar:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

fn ledger_size(dir: &Path) -> Result<u64> {
    Ok(std::fs::metadata(dir.join("ledger.log"))?.len())
}

/// Runs `n` interleaved operations of a plain log, a ledger and SQLite WAL with the given
/// sync policy. The plain loop comes first in the result: it is the ratio baseline.
fn run_group(root: &Path, n: usize, sync: bool) -> Result<Vec<Method>> {
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
    let synchronous = if sync { "FULL" } else { "NORMAL" };
    let mut sqlite = SqliteWal::create(&root.join(format!("sqlite-{tag}.db")), synchronous)?;
    let (ledger_name, plain_name, sqlite_name) = if sync {
        (
            "ledger commit, fsync per commit",
            "plain write + fdatasync",
            "SQLite WAL, synchronous=FULL",
        )
    } else {
        (
            "ledger commit, SyncMode::Never",
            "plain write, no sync",
            "SQLite WAL, synchronous=NORMAL (not durable per commit)",
        )
    };
    let mut l = Method::new(ledger_name, n);
    let mut p = Method::new(plain_name, n);
    let mut q = Method::new(sqlite_name, n);
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
        // SQLite inserts the same turn; count what it wrote, outside the timed span.
        let before = written_bytes();
        let t = Instant::now();
        sqlite.commit(&c)?;
        q.samples.push(t.elapsed());
        q.bytes += written_bytes().saturating_sub(before);
    }
    drop(ledger);
    l.peak_rss = Some(ledger_peak_rss(&root.join(format!("rss-{tag}")), &opts, n)?);
    Ok(vec![p, l, q])
}

/// The process's peak RSS (MiB) while a fresh ledger alone takes `n` commits (untimed; the
/// interleaved pass mixes in the references' memory).
fn ledger_peak_rss(dir: &Path, opts: &Options, n: usize) -> Result<f64> {
    let (result, mib) = with_peak_rss(|| -> Result<()> {
        let (mut ledger, _) = Ledger::open(dir, opts).context("opening the ledger")?;
        for i in 0..n {
            ledger.commit(&turn(i))?;
        }
        Ok(())
    });
    result?;
    Ok(mib)
}

fn micros(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

fn print_table(n: usize, groups: &[Vec<Method>]) {
    println!("commit latency, {n} operations per method, interleaved (µs)");
    println!();
    println!("| method | bytes/op | median | p90 | p99 | median ratio vs plain | peak RSS |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for group in groups {
        let Some(plain) = group.first() else {
            continue;
        };
        let base = plain.percentile(0.5).as_secs_f64();
        for m in group {
            let ratio = m.percentile(0.5).as_secs_f64() / base;
            let rss = m
                .peak_rss
                .map_or_else(|| "-".to_string(), |r| format!("{r:.1} MiB"));
            println!(
                "| {} | {} | {} | {} | {} | {:.2}× | {rss} |",
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
    let result = (|| -> Result<Vec<Vec<Method>>> {
        Ok(vec![
            run_group(&root, n, true)?,
            run_group(&root, n, false)?,
        ])
    })();
    let cleanup = std::fs::remove_dir_all(&root);
    let groups = result?;
    cleanup.with_context(|| format!("removing {}", root.display()))?;
    print_table(n, &groups);
    println!();
    println!(
        "(scratch directory: {}; the ledger number includes validation, JSON encoding,",
        root.display()
    );
    println!(" CRC32C, one pwrite, fdatasync and the unsynced sidecar index appends;");
    println!(" SQLite bytes/op is what it passed to write calls: WAL frames, not row bytes;");
    println!(" ratios compare medians with the plain loop of the same group;");
    println!(
        " peak RSS: the whole process while a fresh ledger alone takes the same commits, untimed)"
    );
    Ok(())
}
