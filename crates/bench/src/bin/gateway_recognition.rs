//! What a relayed call costs as its conversation grows: the gateway's
//! `Store::prepare_call` with the client resending its whole history, at several history
//! lengths, beside a read of the whole log (what recognising a call cost before the store
//! kept each conversation's event digests).
//!
//! For each length the conversation is committed directly (user and assistant turns, an
//! OpenAI chat client's history), then: the first call on a fresh store (it reads the log
//! once to learn the digests), and the median of the calls after it (each adds a user
//! message and commits a reply, as a chat does). The model is `gpt-4o` (a 128k window: the
//! projection cuts long histories). Durability: the store's default (fsync per commit).
//!
//! Usage: `cargo run --release -p ctxlog-bench --bin gateway_recognition [TURNS…]`
//! (default 250 1000 4000); prints a table.

use std::time::{Duration, Instant};

use anyhow::Result;
use ctxlog::call::{CallRequest, ReplyRequest};
use ctxlog::ops::{CommitRequest, LogRequest};
use ctxlog::{EventBody, NewCommit, WireFormat};
use serde_json::{Value, json};

/// Calls timed after the first, per length.
const CALLS: usize = 20;

fn user_text(i: usize) -> String {
    format!(
        "Question {i}: what did the deploy log say about shard {i}? {}",
        "x".repeat(80)
    )
}

fn reply_text(i: usize) -> String {
    format!(
        "Answer {i}: shard {i} restarted cleanly. {}",
        "y".repeat(240)
    )
}

fn main() -> Result<()> {
    let lengths: Vec<usize> = match std::env::args().skip(1).map(|a| a.parse()).collect() {
        Ok(v) if !Vec::<usize>::is_empty(&v) => v,
        Ok(_) => vec![250, 1000, 4000],
        Err(e) => anyhow::bail!("TURNS must be numbers: {e}"),
    };
    println!(
        "| turns (events) | whole-log read | first call (reads the log) | later calls, median | later calls, max |"
    );
    println!("|---|---|---|---|---|");
    for turns in lengths {
        let row = measure(turns)?;
        println!(
            "| {turns} ({}) | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms |",
            turns * 2,
            ms(row.0),
            ms(row.1),
            ms(row.2),
            ms(row.3)
        );
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// (whole-log read, first call, later calls' median, later calls' max) at `turns` turns.
fn measure(turns: usize) -> Result<(Duration, Duration, Duration, Duration)> {
    let dir = tempfile_dir()?;
    let mut messages: Vec<Value> = Vec::new();
    {
        let store = ctxlog::Store::open(&dir)?;
        for chunk in (0..turns).collect::<Vec<_>>().chunks(100) {
            let mut events = Vec::new();
            for &i in chunk {
                events.push(EventBody::User {
                    text: user_text(i),
                    parts: Vec::new(),
                    provider_item: None,
                });
                events.push(EventBody::Assistant {
                    text: reply_text(i),
                    provider_item: None,
                });
                messages.push(json!({"role": "user", "content": user_text(i)}));
                messages.push(json!({"role": "assistant", "content": reply_text(i)}));
            }
            store.commit(&CommitRequest {
                conversation: "long".into(),
                commit: NewCommit::new(events),
            })?;
        }
    }
    let store = ctxlog::Store::open(&dir)?;
    let start = Instant::now();
    store.log(&LogRequest {
        conversation: "long".into(),
        from: 1,
        limit: None,
    })?;
    let read = start.elapsed();
    let mut times = Vec::with_capacity(CALLS + 1);
    for i in turns..turns + CALLS + 1 {
        messages.push(json!({"role": "user", "content": user_text(i)}));
        let body = serde_json::to_vec(&json!({"model": "gpt-4o", "messages": messages}))?;
        let start = Instant::now();
        let prepared = store.prepare_call(&CallRequest {
            conversation: "long".into(),
            format: WireFormat::OpenAiChat,
            body,
            window: None,
            previous: None,
            recall_tool: false,
            model_windows: Vec::new(),
        })?;
        times.push(start.elapsed());
        anyhow::ensure!(
            prepared.committed == 1,
            "call {i}: {} committed",
            prepared.committed
        );
        let reply = json!({"role": "assistant", "content": reply_text(i)});
        store.commit_reply(&ReplyRequest {
            conversation: "long".into(),
            format: WireFormat::OpenAiChat,
            message: reply.clone(),
            after: Some(prepared.last_seq),
        })?;
        messages.push(reply);
    }
    let first = times[0];
    let mut later = times[1..].to_vec();
    later.sort();
    std::fs::remove_dir_all(&dir).ok();
    Ok((read, first, later[later.len() / 2], later[later.len() - 1]))
}

/// A fresh directory under the system's temporary directory.
fn tempfile_dir() -> Result<std::path::PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    let dir = std::env::temp_dir().join(format!("ctxlog-gw-recognition-{nanos}"));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
