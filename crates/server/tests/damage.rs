//! Damage over HTTP, on a real loopback server (docs/design.md#l11-repair): one damaged
//! conversation never takes down the list, damage is 500 `corrupt` naming the verify route
//! (never a server path), a missing artifact too, and verify gives its verdict.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Served, serve};
use serde_json::Value;

const JSON: (&str, &str) = ("content-type", "application/json");

async fn commit(s: &Served, conv: &str, body: &str) {
    let r = s
        .send(
            "POST",
            &format!("/v1/conversations/{conv}/commits"),
            &[JSON],
            body,
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

fn flip(dir: &std::path::Path, needle: &[u8]) {
    let log = dir.join("ledger.log");
    let mut bytes = std::fs::read(&log).unwrap();
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap();
    bytes[at] ^= 0x01;
    std::fs::write(&log, &bytes).unwrap();
}

#[tokio::test]
async fn the_list_marks_a_damaged_conversation_and_reads_name_the_verify_route() {
    let s = serve(|_| {}).await;
    for conv in ["healthy", "flipped", "empty"] {
        commit(
            &s,
            conv,
            r#"{"user":"first question","assistant":"first answer"}"#,
        )
        .await;
    }
    flip(&s.dir.path().join("flipped"), b"first answer");
    std::fs::write(s.dir.path().join("empty").join("ledger.log"), b"").unwrap();

    let r = s.send("GET", "/v1/conversations", &[], "").await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let list = r.json();
    let all = list["conversations"].as_array().unwrap();
    let find = |name: &str| all.iter().find(|c| c["name"] == name).unwrap().clone();
    assert_eq!(find("healthy")["events"], 2);
    assert!(find("healthy").get("damage").is_none());
    let damage = find("flipped")["damage"].as_str().unwrap().to_string();
    assert!(damage.contains("seq 2"), "{damage}");
    assert!(find("empty")["damage"].is_string(), "{list}");
    let root = s.dir.path().to_str().unwrap().to_string();
    assert!(!String::from_utf8_lossy(&r.body).contains(&root));

    let r = s
        .send("GET", "/v1/conversations/flipped/events", &[], "")
        .await;
    assert_eq!(r.status, 500);
    assert_eq!(r.class(), "corrupt");
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("POST /v1/conversations/flipped/verify"),
        "{message}"
    );
    assert!(!message.contains(&root), "{message}");

    let r = s
        .send(
            "POST",
            "/v1/gc",
            &[JSON],
            r#"{"keep_turns":1,"dry_run":true}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    s.stop().await;
}

/// Regression: a missing artifact was 400 `bad_input`; the docs promise 500 `corrupt`.
#[tokio::test]
async fn a_missing_artifact_is_500_corrupt() {
    let s = serve(|_| {}).await;
    let big = "x".repeat(40_000);
    let turn = serde_json::json!({"events":[
        {"kind":"user","text":"scan"},
        {"kind":"tool_call","call_id":"c1","tool":"scan","arguments":{}},
        {"kind":"tool_result","call_id":"c1","tool":"scan","status":"ok","text":big}]});
    commit(&s, "chat", &turn.to_string()).await;
    for entry in std::fs::read_dir(s.dir.path().join("chat").join("artifacts")).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let r = s
        .send("GET", "/v1/conversations/chat/export", &[], "")
        .await;
    assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.class(), "corrupt");
    let r = s
        .send("POST", "/v1/conversations/chat/verify", &[JSON], "{}")
        .await;
    assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.class(), "corrupt");
    s.stop().await;
}

#[tokio::test]
async fn verify_gives_its_verdict() {
    let s = serve(|_| {}).await;
    commit(&s, "chat", r#"{"user":"q","assistant":"a"}"#).await;
    let r = s
        .send("POST", "/v1/conversations/chat/verify", &[JSON], "{}")
        .await;
    assert_eq!(r.status, 200);
    let report: Value = r.json();
    assert_eq!(report["verdict"], "ok", "{report}");
    s.stop().await;
}

#[tokio::test]
async fn a_salvage_over_http_gives_the_intact_records_and_changes_nothing() {
    let s = serve(|_| {}).await;
    for i in 1..=3 {
        let body = format!(r#"{{"user":"question {i}","assistant":"answer {i}"}}"#);
        commit(&s, "chat", &body).await;
    }
    let dir = s.dir.path().join("chat");
    flip(&dir, b"answer 2");
    let before = common::snapshot(&dir);
    let r = s
        .send("GET", "/v1/conversations/chat/export", &[], "")
        .await;
    assert_eq!(r.status, 500);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("GET /v1/conversations/chat/export?salvage=true"),
        "{message}"
    );
    let r = s
        .send("GET", "/v1/conversations/chat/export?salvage=true", &[], "")
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let lines: Vec<Value> = r
        .body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let seqs: Vec<u64> = lines.iter().filter_map(|l| l["seq"].as_u64()).collect();
    assert_eq!(seqs, [1, 2, 3, 5, 6]);
    assert_eq!(lines[3]["damaged"]["seqs"], serde_json::json!([4, 4]));
    assert_eq!(before, common::snapshot(&dir), "a salvage changes nothing");
    let r = s
        .send(
            "GET",
            "/v1/conversations/chat/export?salvage=maybe",
            &[],
            "",
        )
        .await;
    assert_eq!(r.status, 400);
    s.stop().await;
}

/// Regression: a log cut under a running server took the next commit at an offset past its
/// end (a zero-filled hole, HTTP 200). The writer checks the log's length first: 500
/// `corrupt`, nothing written.
#[tokio::test]
async fn a_log_cut_under_a_running_server_refuses_the_next_commit() {
    let s = serve(|_| {}).await;
    for i in 1..=3 {
        let body = format!(r#"{{"user":"question {i}","assistant":"answer {i}"}}"#);
        commit(&s, "chat", &body).await;
    }
    let log = s.dir.path().join("chat").join("ledger.log");
    let len = std::fs::metadata(&log).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(len - 40)
        .unwrap();
    let r = s
        .send(
            "POST",
            "/v1/conversations/chat/commits",
            &[JSON],
            r#"{"user":"fourth","assistant":"four"}"#,
        )
        .await;
    assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.class(), "corrupt");
    assert_eq!(std::fs::metadata(&log).unwrap().len(), len - 40, "no hole");
    s.stop().await;
}

/// `POST …/repair` is a dry run unless `{"accept_loss": true}`; after it the conversation
/// reads, and a replayed id of the lost commit is 410 `lost`.
#[tokio::test]
async fn a_repair_over_http_plans_then_accepts_the_loss_and_a_lost_id_is_410() {
    let s = serve(|_| {}).await;
    for i in 1..=3 {
        let body = format!(r#"{{"user":"question {i}","assistant":"answer {i}"}}"#);
        let r = s
            .send(
                "POST",
                "/v1/conversations/chat/commits",
                &[JSON, ("idempotency-key", &format!("k{i}"))],
                &body,
            )
            .await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    let dir = s.dir.path().join("chat");
    flip(&dir, b"answer 2");
    let r = s
        .send("GET", "/v1/conversations/chat/events", &[], "")
        .await;
    assert_eq!(r.status, 500);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("POST /v1/conversations/chat/repair"),
        "{message}"
    );
    let before = common::snapshot(&dir);
    let r = s
        .send("POST", "/v1/conversations/chat/repair", &[JSON], "{}")
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["applied"], false);
    assert_eq!(r.json()["lost"][0]["from"], 4);
    assert_eq!(before, common::snapshot(&dir), "a dry run changes nothing");
    let r = s
        .send(
            "POST",
            "/v1/conversations/chat/repair",
            &[JSON],
            r#"{"accept_loss":true}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["applied"], true);
    let r = s
        .send("GET", "/v1/conversations/chat/events", &[], "")
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let r = s
        .send(
            "POST",
            "/v1/conversations/chat/commits",
            &[JSON, ("idempotency-key", "k2")],
            r#"{"user":"question 2","assistant":"answer 2"}"#,
        )
        .await;
    assert_eq!(r.status, 410, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["error"]["class"], "lost");
    let r = s
        .send(
            "POST",
            "/v1/conversations/chat/repair",
            &[JSON],
            r#"{"accept_loss":"yes"}"#,
        )
        .await;
    assert_eq!(r.status, 400);
    s.stop().await;
}

/// Regression: a conversation erased whole by another process while the server had it open
/// answered 500 `internal` (its pooled read handle failed), and the server kept the unlinked
/// files open. It is 404, and the handles are dropped.
#[tokio::test]
async fn a_conversation_erased_by_another_process_is_404() {
    let s = serve(|_| {}).await;
    commit(
        &s,
        "chat",
        r#"{"user":"question 1","assistant":"answer 1"}"#,
    )
    .await;
    let r = s
        .send("GET", "/v1/conversations/chat/events", &[], "")
        .await;
    assert_eq!(r.status, 200);
    // What another process's `ctxlog erase chat --all` does: rename to trash, remove.
    let trash = s.dir.path().join(".erasing-chat-1");
    std::fs::rename(s.dir.path().join("chat"), &trash).unwrap();
    std::fs::remove_dir_all(&trash).unwrap();
    for _ in 0..2 {
        let r = s
            .send("GET", "/v1/conversations/chat/events", &[], "")
            .await;
        assert_eq!(r.status, 404, "{}", String::from_utf8_lossy(&r.body));
        let r = s
            .send(
                "POST",
                "/v1/conversations/chat/projection",
                &[JSON],
                r#"{"input":"hi"}"#,
            )
            .await;
        assert_ne!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
    }
    s.stop().await;
}

/// Erasing some seqs of a damaged conversation is 500 `corrupt`, changes nothing, and names
/// the repair route (with `accept_loss`) to run before the erasure, and the whole erasure.
#[tokio::test]
async fn erasing_some_seqs_of_a_damaged_conversation_names_the_repair_route() {
    let s = serve(|_| {}).await;
    commit(
        &s,
        "chat",
        r#"{"user":"first question","assistant":"first answer"}"#,
    )
    .await;
    commit(
        &s,
        "chat",
        r#"{"user":"second question","assistant":"second answer"}"#,
    )
    .await;
    let dir = s.dir.path().join("chat");
    flip(&dir, b"second answer");
    let before = std::fs::read(dir.join("ledger.log")).unwrap();
    let r = s
        .send(
            "POST",
            "/v1/conversations/chat/erase",
            &[JSON],
            r#"{"target":{"seqs":{"from":1,"to":2}}}"#,
        )
        .await;
    assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.class(), "corrupt");
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains(
            "POST /v1/conversations/chat/repair with {\"accept_loss\": true} (it keeps every \
             intact record"
        ) && message.contains("then the erasure again"),
        "{message}"
    );
    assert!(
        !message.contains(s.dir.path().to_str().unwrap()),
        "{message}"
    );
    assert_eq!(before, std::fs::read(dir.join("ledger.log")).unwrap());
    s.stop().await;
}
