//! Cold open (docs/design.md#l7-bounded-memory): ledgers of 10 MB, 100 MB and 1 GiB, evicted from
//! the page cache (`fsync`, then `posix_fadvise(POSIX_FADV_DONTNEED)` on every file of the
//! conversation), then a fresh process opens the store and projects the last 3 turns
//! (`Store::project`, 12 KiB byte budget; each turn is ~3.9 KB). Prints, per size and round, the
//! child's own time for open + projection, the whole child process's wall time, and the child's
//! peak RSS (`VmHWM`).
//!
//! ```text
//! cargo run --release -p ctxlog-bench --bin cold_open [-- MB ...]
//! ```
//!
//! Scratch ledgers are written under `target/cold-open/` and removed afterwards.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use ctxlog::ops::ProjectRequest;
use ctxlog_bench::peak_rss_kib;
use ctxlog_ledger::event::{EventBody, NewCommit, ToolStatus};
use ctxlog_ledger::{Ledger, Options, SyncMode};

const CONVERSATION: &str = "big";
const BUDGET: u64 = 12 * 1024;

fn turn(i: u64, filler: &str) -> NewCommit {
    let id = format!("c{i}");
    NewCommit::new(vec![
        EventBody::User {
            text: format!("question {i}"),
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::ToolCall {
            call_id: id.clone(),
            tool: "shell".into(),
            arguments: serde_json::json!({"cmd": "ls"}),
            provider_item: None,
        },
        EventBody::ToolResult {
            call_id: id,
            tool: "shell".into(),
            status: ToolStatus::Ok,
            exit_code: Some(0),
            text: filler.into(),
            artifact: None,
            parts: Vec::new(),
            provider_item: None,
        },
        EventBody::Assistant {
            text: "ok".into(),
            provider_item: None,
        },
    ])
}

fn build(dir: &Path, mb: u64) -> Result<(u64, u64)> {
    let mut opts = Options::default();
    opts.sync(SyncMode::Never);
    let (mut ledger, _) = Ledger::open(dir, &opts)?;
    let filler = "f".repeat(3_800);
    let log = dir.join("ledger.log");
    let mut i = 0;
    while std::fs::metadata(&log)?.len() < mb << 20 {
        for _ in 0..1_000 {
            ledger.commit(&turn(i, &filler))?;
            i += 1;
        }
    }
    drop(ledger);
    Ok((std::fs::metadata(&log)?.len(), i))
}

/// Writes back and drops every file under `dir` from the page cache.
fn evict(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            evict(&path)?;
        } else {
            let file = std::fs::File::open(&path)?;
            file.sync_all()?;
            rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed)
                .with_context(|| format!("fadvise {}", path.display()))?;
        }
    }
    Ok(())
}

fn child(root: &str) -> Result<()> {
    let start = Instant::now();
    let store = ctxlog::Store::open(root)?;
    let projection = store.project(&ProjectRequest {
        conversation: CONVERSATION.into(),
        input: Some("what happened last?".into()),
        max_bytes: Some(BUDGET),
        ..Default::default()
    })?;
    let took = start.elapsed();
    println!(
        "{}",
        serde_json::json!({
            "ms": took.as_secs_f64() * 1e3,
            "kept": projection.report.turns.kept,
            "bytes": projection.body.len(),
            "rss_kib": peak_rss_kib(),
        })
    );
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        let Some(root) = args.get(1) else {
            bail!("usage: cold_open --child ROOT");
        };
        return child(root);
    }
    let sizes: Vec<u64> = if args.is_empty() {
        vec![10, 100, 1024]
    } else {
        args.iter()
            .map(|a| a.parse().context("sizes are MiB"))
            .collect::<Result<_>>()?
    };
    let exe = std::env::current_exe()?;
    let root = PathBuf::from("target/cold-open");
    println!(
        "cold open: page cache evicted (fsync + POSIX_FADV_DONTNEED on every file), then a fresh \
         process opens the store and projects with a {BUDGET}-byte budget (last 3 turns)"
    );
    println!();
    println!(
        "| ledger MiB (bytes) | turns | round | open + project (in child) | child process wall | kept turns | peak RSS |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for mb in sizes {
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join(CONVERSATION);
        std::fs::create_dir_all(&dir)?;
        let (bytes, turns) = build(&dir, mb)?;
        for round in 1..=3 {
            evict(&root)?;
            let start = Instant::now();
            let out = Command::new(&exe).arg("--child").arg(&root).output()?;
            let wall = start.elapsed();
            if !out.status.success() {
                bail!("child failed: {}", String::from_utf8_lossy(&out.stderr));
            }
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
            println!(
                "| {mb} ({bytes}) | {turns} | {round} | {:.2} ms | {:.2} ms | {} | {:.1} MiB |",
                v["ms"].as_f64().unwrap_or(f64::NAN),
                wall.as_secs_f64() * 1e3,
                v["kept"],
                v["rss_kib"].as_f64().unwrap_or(f64::NAN) / 1024.0,
            );
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}
