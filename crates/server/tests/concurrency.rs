//! Commits to one conversation queue inside the server instead of failing
//! (docs/design.md#i3-http-server): 16 clients × 50 commits give exactly 800 turns with contiguous
//! seqs, while projections run in parallel. Past the writer wait a queued commit is answered 503 +
//! Retry-After, and writes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{get, open_app, post};
use ctxlog_server::{AppState, Config, app};

const CLIENTS: usize = 16;
const COMMITS: usize = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_clients_commit_800_turns_while_projections_run() {
    let (_dir, app) = open_app();
    let mut writers = Vec::new();
    for client in 0..CLIENTS {
        let app = app.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..COMMITS {
                let body = serde_json::json!({"user": format!("client {client} turn {i}"), "assistant": "ok"});
                let reply = post(&app, "/v1/conversations/busy/commits", &body.to_string()).await;
                assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
            }
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..4 {
        let app = app.clone();
        readers.push(tokio::spawn(async move {
            let mut served = 0;
            for _ in 0..40 {
                let reply = post(
                    &app,
                    "/v1/conversations/busy/projection?report=true",
                    r#"{"input":"next?","max_bytes":8192}"#,
                )
                .await;
                assert!(
                    reply.status == 200,
                    "{}",
                    String::from_utf8_lossy(&reply.body)
                );
                served += 1;
            }
            served
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    for r in readers {
        assert_eq!(r.await.unwrap(), 40);
    }
    let mut seqs = Vec::new();
    let mut users = 0;
    let mut from = 1;
    loop {
        let page = get(
            &app,
            &format!("/v1/conversations/busy/events?from={from}&limit=1000"),
        )
        .await
        .json();
        let events = page["events"].as_array().unwrap();
        if events.is_empty() {
            break;
        }
        for e in events {
            seqs.push(e["seq"].as_u64().unwrap());
            users += usize::from(e["kind"] == "user");
        }
        from = seqs.last().unwrap() + 1;
    }
    assert_eq!(users, CLIENTS * COMMITS);
    assert_eq!(
        seqs,
        (1..=(2 * CLIENTS * COMMITS) as u64).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn commits_past_the_writer_wait_are_503_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new(dir.path());
    config.writer_wait = Duration::from_micros(1);
    let app = app(AppState::new(&config).unwrap());
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let body = serde_json::json!({"user": format!("client {client}"), "assistant": "ok"});
            post(&app, "/v1/conversations/q/commits", &body.to_string()).await
        }));
    }
    let mut ok = 0;
    for t in tasks {
        let reply = t.await.unwrap();
        match reply.status.as_u16() {
            200 => ok += 1,
            503 => {
                assert_eq!(reply.class(), "busy");
                assert_eq!(reply.headers["retry-after"], "1");
            }
            other => panic!(
                "unexpected {other}: {}",
                String::from_utf8_lossy(&reply.body)
            ),
        }
    }
    assert!(ok >= 1);
    let log = get(&app, "/v1/conversations/q/events").await.json();
    assert_eq!(log["last_seq"], 2 * ok);
}
