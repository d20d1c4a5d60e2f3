//! Every endpoint through the router (`oneshot`): the success shape of each operation, and
//! the status and class of each error a client can cause (docs/design.md#i3-http-server). The
//! server adds no rule: these check that each operation's answer and error class reach the client
//! intact.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{call, commit_turn, get, open_app, post};
use serde_json::json;

#[tokio::test]
async fn health_openapi_and_inspector_are_served() {
    let (_dir, app) = open_app();
    assert_eq!(get(&app, "/healthz").await.json(), json!({"status": "ok"}));
    let doc = get(&app, "/openapi.json").await;
    assert_eq!(doc.headers["content-type"], "application/json");
    assert_eq!(doc.json()["openapi"], "3.0.3");
    let page = get(&app, "/").await;
    assert_eq!(page.status, 200);
    assert!(
        page.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(String::from_utf8_lossy(&page.body).contains("inspector.js"));
    for asset in ["/inspector.js", "/inspector.css"] {
        let reply = get(&app, asset).await;
        assert_eq!(reply.status, 200, "{asset}");
        assert!(!reply.body.is_empty(), "{asset}");
    }
}

#[tokio::test]
async fn commit_then_list_and_events() {
    let (_dir, app) = open_app();
    let receipt = commit_turn(&app, "chat1", "My code is ZX-81", "Noted.").await;
    assert_eq!(
        receipt,
        json!({"first_seq": 1, "last_seq": 2, "replayed": false})
    );
    let full = json!({"events": [
        {"kind": "user", "text": "run ls"},
        {"kind": "tool_call", "call_id": "c1", "tool": "shell", "arguments": {"cmd": "ls"}},
        {"kind": "tool_result", "call_id": "c1", "tool": "shell", "status": "ok", "text": "a b"},
        {"kind": "assistant", "text": "two files"}
    ]});
    let reply = post(&app, "/v1/conversations/chat1/commits", &full.to_string()).await;
    assert_eq!(
        reply.json(),
        json!({"first_seq": 3, "last_seq": 6, "replayed": false})
    );

    let list = get(&app, "/v1/conversations").await.json();
    assert_eq!(list["conversations"][0]["name"], "chat1");
    assert_eq!(list["conversations"][0]["events"], 6);

    let log = get(&app, "/v1/conversations/chat1/events").await.json();
    assert_eq!(log["last_seq"], 6);
    assert_eq!(log["events"].as_array().unwrap().len(), 6);
    assert_eq!(log["events"][3]["kind"], "tool_call");
    let page = get(&app, "/v1/conversations/chat1/events?from=2&limit=2")
        .await
        .json();
    let seqs: Vec<u64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![2, 3]);
    let bad = get(&app, "/v1/conversations/chat1/events?limit=0").await;
    assert_eq!((bad.status.as_u16(), bad.class().as_str()), (400, "usage"));
    let bad = get(&app, "/v1/conversations/chat1/events?from=x").await;
    assert_eq!(bad.status, 400);
}

#[tokio::test]
async fn idempotency_key_replays_and_conflicts() {
    let (_dir, app) = open_app();
    let uri = "/v1/conversations/c/commits";
    let h = [("idempotency-key", "turn-1")];
    let first = call(&app, "POST", uri, &h, r#"{"user":"a","assistant":"b"}"#).await;
    assert_eq!(first.json()["replayed"], false);
    let again = call(&app, "POST", uri, &h, r#"{"user":"a","assistant":"b"}"#).await;
    assert_eq!(
        again.json(),
        json!({"first_seq": 1, "last_seq": 2, "replayed": true})
    );
    let other = call(&app, "POST", uri, &h, r#"{"user":"a","assistant":"c"}"#).await;
    assert_eq!(
        (other.status.as_u16(), other.class().as_str()),
        (409, "conflict")
    );
    assert!(
        other.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("turn-1")
    );
}

#[tokio::test]
async fn bad_commits_are_400_and_create_nothing() {
    let (_dir, app) = open_app();
    for body in [
        "",
        "not json",
        r#"{"events":[{"kind":"mystery"}]}"#,
        r#"{"events":[]}"#,
        "[1,2]",
    ] {
        let reply = post(&app, "/v1/conversations/c/commits", body).await;
        assert_eq!(
            reply.status,
            400,
            "{body}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.class(), "bad_input", "{body}");
    }
    let reply = call(
        &app,
        "POST",
        "/v1/conversations/c/commits",
        &[],
        vec![0xff, 0xfe],
    )
    .await;
    assert_eq!(reply.status, 400);
    for name in ["a%2Fb", "..", "a%00b", &"x".repeat(65)] {
        let reply = post(
            &app,
            &format!("/v1/conversations/{name}/commits"),
            r#"{"user":"a"}"#,
        )
        .await;
        assert_eq!(reply.status, 400, "{name}");
        assert_eq!(reply.class(), "usage", "{name}");
    }
    assert_eq!(
        get(&app, "/v1/conversations").await.json(),
        json!({"conversations": []})
    );
}

#[tokio::test]
async fn projection_returns_exact_body_bytes_and_report_sibling() {
    let (_dir, app) = open_app();
    commit_turn(&app, "p", "My project code is ZX-81.", "Noted.").await;
    commit_turn(&app, "p", "Weather?", "Sunny.").await;
    let request = json!({"input": "What is my project code?", "max_bytes": 4096});
    let plain = post(&app, "/v1/conversations/p/projection", &request.to_string()).await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.headers["content-type"], "application/json");
    let body: serde_json::Value = plain.json();
    assert_eq!(body["model"], "gpt-4o");
    assert_eq!(body["messages"].as_array().unwrap().len(), 5);

    let with = post(
        &app,
        "/v1/conversations/p/projection?report=true",
        &request.to_string(),
    )
    .await;
    let both = with.json();
    // The sibling form carries the very same bytes.
    let embedded = &with.body[b"{\"body\":".len()..b"{\"body\":".len() + plain.body.len()];
    assert_eq!(embedded, &plain.body[..]);
    assert_eq!(both["report"]["bytes"], plain.body.len() as u64);
    assert_eq!(both["report"]["turns"]["kept"], 2);

    let narrow = json!({"input": "What is my project code?", "max_bytes": 120});
    let small = post(
        &app,
        "/v1/conversations/p/projection?report=true",
        &narrow.to_string(),
    )
    .await;
    assert_eq!(small.json()["report"]["turns"]["kept"], 0);

    let anthropic = json!({"input": "hi", "format": "anthropic-messages", "system": "Be brief.", "max_tokens": 8000, "tokenizer": "cl100k"});
    let a = post(
        &app,
        "/v1/conversations/p/projection",
        &anthropic.to_string(),
    )
    .await;
    assert_eq!(a.json()["system"], "Be brief.");

    // A conversation with no commits projects the mandatory input alone.
    let fresh = post(
        &app,
        "/v1/conversations/new-chat/projection",
        r#"{"input":"hello"}"#,
    )
    .await;
    assert_eq!(fresh.json()["messages"].as_array().unwrap().len(), 1);
    assert_eq!(
        get(&app, "/v1/conversations").await.json()["conversations"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn projection_errors_name_their_class() {
    let (_dir, app) = open_app();
    commit_turn(&app, "p", "hello", "hi").await;
    let over = post(
        &app,
        "/v1/conversations/p/projection",
        r#"{"input":"a long enough question","max_bytes":10}"#,
    )
    .await;
    assert_eq!(over.status, 422);
    let e = &over.json()["error"];
    assert_eq!(e["class"], "over_budget");
    assert!(e["needed_bytes"].as_u64().unwrap() > 10);
    assert!(e["needed_tokens"].as_u64().unwrap() > 0);
    assert_eq!(e["max_bytes"], 10);
    for (body, class) in [
        (r#"{"input":"x","max_bytes":0}"#, "usage"),
        (r#"{"input":"x","format":"xml"}"#, "usage"),
        (r#"{"input":"x","tokenizer":"p50k"}"#, "usage"),
        (r#"{"input":"x","colour":"red"}"#, "usage"),
        (r#"{"input":"x","recall":51}"#, "usage"),
        (r#"{"input":"x","conversation":"other"}"#, "bad_input"),
        (r#"{"input":"x","tools":[1]}"#, "bad_input"),
        ("[]", "bad_input"),
    ] {
        let reply = post(&app, "/v1/conversations/p/projection", body).await;
        assert_eq!(
            reply.status,
            400,
            "{body}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.class(), class, "{body}");
    }
    let bad_query = post(
        &app,
        "/v1/conversations/p/projection?report=maybe",
        r#"{"input":"x"}"#,
    )
    .await;
    assert_eq!(bad_query.status, 400);
}

#[tokio::test]
async fn recall_finds_old_turns_with_provenance() {
    let (_dir, app) = open_app();
    commit_turn(&app, "r", "My project code is ZX-81.", "Noted.").await;
    commit_turn(&app, "r", "Weather?", "Sunny.").await;
    let found = post(
        &app,
        "/v1/conversations/r/recall",
        r#"{"query":"project code","limit":3}"#,
    )
    .await
    .json();
    assert_eq!(found["hits"][0]["seq"], 1);
    assert_eq!(found["hits"][0]["kind"], "user");
    assert!(found["note"].as_str().unwrap().len() > 10);
    let newest = post(&app, "/v1/conversations/r/recall", "").await.json();
    assert_eq!(newest["query"], "");
    let bad = post(&app, "/v1/conversations/r/recall", r#"{"limit":0}"#).await;
    assert_eq!((bad.status.as_u16(), bad.class().as_str()), (400, "usage"));
    let missing = post(&app, "/v1/conversations/nope/recall", r#"{"query":"x"}"#).await;
    assert_eq!(
        (missing.status.as_u16(), missing.class().as_str()),
        (404, "not_found")
    );
}

#[tokio::test]
async fn verify_reindex_and_erase() {
    let (dir, app) = open_app();
    commit_turn(&app, "e", "secret plan alpha", "ok").await;
    commit_turn(&app, "e", "second", "ok").await;
    let report = post(&app, "/v1/conversations/e/verify", "").await;
    assert_eq!(report.status, 200);
    assert_eq!(report.json()["events"], 4);
    let stats = post(&app, "/v1/conversations/e/reindex", "{}").await.json();
    assert_eq!(stats["indexed_through"], 4);
    let report = post(&app, "/v1/conversations/e/verify", "").await.json();
    assert_eq!(report["recall_index"], json!({"state": "ok", "pages": 4}));

    let erased = post(
        &app,
        "/v1/conversations/e/erase",
        r#"{"target":{"seqs":{"from":1,"to":1}},"reason":"user asked"}"#,
    )
    .await;
    assert_eq!(
        erased.status,
        200,
        "{}",
        String::from_utf8_lossy(&erased.body)
    );
    assert_eq!(erased.json()["erased"], json!({"from": 1, "to": 2}));
    let found = post(
        &app,
        "/v1/conversations/e/recall",
        r#"{"query":"secret plan"}"#,
    )
    .await
    .json();
    assert!(
        found["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["seq"] != 1)
    );
    let bad = post(
        &app,
        "/v1/conversations/e/erase",
        r#"{"target":{"seqs":{"from":9,"to":9}}}"#,
    )
    .await;
    assert_eq!(bad.status, 400);
    let bad = post(&app, "/v1/conversations/e/erase", r#"{"target":"some"}"#).await;
    assert_eq!(bad.status, 400);
    let all = post(&app, "/v1/conversations/e/erase", r#"{"target":"all"}"#).await;
    assert_eq!(all.json(), json!({"erased": "all", "conversation": "e"}));
    for op in ["verify", "reindex", "erase"] {
        let body = if op == "erase" {
            r#"{"target":"all"}"#
        } else {
            ""
        };
        let reply = post(&app, &format!("/v1/conversations/e/{op}"), body).await;
        assert_eq!(reply.status, 404, "{op}");
        // The 404 never names the server's directory.
        let text = String::from_utf8_lossy(&reply.body).to_string();
        assert!(!text.contains(dir.path().to_str().unwrap()), "{text}");
    }
}

#[tokio::test]
async fn count_measures_a_body() {
    let (_dir, app) = open_app();
    let body = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}"#;
    let count = post(&app, "/v1/count?tokenizer=cl100k", body).await.json();
    assert_eq!(count["bytes"], body.len() as u64);
    assert_eq!(count["tokenizer"], "cl100k");
    assert!(count["tokens"].as_u64().unwrap() > 0);
    let bad = post(&app, "/v1/count", "not json").await;
    assert_eq!(bad.status, 400, "{}", String::from_utf8_lossy(&bad.body));
    let bad = post(&app, "/v1/count?format=xml", body).await;
    assert_eq!(bad.status, 400);
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json() {
    let (_dir, app) = open_app();
    let reply = get(&app, "/v2/nothing").await;
    assert_eq!(
        (reply.status.as_u16(), reply.class().as_str()),
        (404, "not_found")
    );
    let reply = call(
        &app,
        "DELETE",
        "/v1/conversations",
        &[],
        axum::body::Body::empty(),
    )
    .await;
    assert_eq!(
        (reply.status.as_u16(), reply.class().as_str()),
        (405, "method_not_allowed")
    );
}

#[tokio::test]
async fn corruption_is_500_with_offset_and_seq_and_no_path() {
    let (dir, app) = open_app();
    for i in 0..3 {
        commit_turn(&app, "bad", &format!("question {i}"), "answer").await;
    }
    // Flip a byte inside the first record's payload: valid records follow, so it is
    // corruption, not a torn tail.
    let conv_dir = dir.path().join("bad");
    let log = std::fs::read_dir(&conv_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(&log).unwrap();
    let at = bytes.windows(10).position(|w| w == b"question 0").unwrap();
    bytes[at] ^= 0x20;
    std::fs::write(&log, bytes).unwrap();
    let reply = post(&app, "/v1/conversations/bad/verify", "").await;
    assert_eq!(
        reply.status,
        500,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let e = &reply.json()["error"];
    assert_eq!(e["class"], "corrupt");
    assert!(e["offset"].as_u64().is_some(), "{e}");
    assert!(e.get("seq").is_some(), "{e}");
    assert!(
        !e["message"]
            .as_str()
            .unwrap()
            .contains(dir.path().to_str().unwrap())
    );
}

#[tokio::test]
async fn a_writer_in_another_process_is_423_with_retry_after() {
    let (dir, app) = open_app();
    // Another store on the same directory stands for another process: it creates the
    // conversation and keeps its writer (and the OS lock) open.
    let other = ctxlog::Store::open(dir.path()).unwrap();
    let mut holder = other.conversation("held").unwrap();
    let turn = ctxlog::parse_commit(br#"{"user":"hello","assistant":"hi"}"#, None).unwrap();
    holder.commit(&turn).unwrap();
    let reply = post(
        &app,
        "/v1/conversations/held/commits",
        r#"{"user":"blocked"}"#,
    )
    .await;
    assert_eq!(
        (reply.status.as_u16(), reply.class().as_str()),
        (423, "locked")
    );
    assert_eq!(reply.headers["retry-after"], "1");
    // Reads never wait for the writer.
    let log = get(&app, "/v1/conversations/held/events").await;
    assert_eq!(log.json()["last_seq"], 2);
    drop(holder);
    let reply = post(&app, "/v1/conversations/held/commits", r#"{"user":"now"}"#).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
}

#[tokio::test]
async fn a_damaged_recall_index_is_named_and_reindex_repairs_it() {
    let (dir, app) = open_app();
    commit_turn(&app, "idx", "the deployment window is Tuesday", "noted").await;
    // No read has opened the index yet: put garbage where it goes.
    std::fs::write(dir.path().join("idx/recall.sqlite"), vec![0x5a; 8192]).unwrap();
    let damaged = post(
        &app,
        "/v1/conversations/idx/recall",
        r#"{"query":"deployment"}"#,
    )
    .await;
    let text = String::from_utf8_lossy(&damaged.body).to_string();
    assert_eq!(
        (damaged.status.as_u16(), damaged.class().as_str()),
        (500, "index_damaged"),
        "{text}"
    );
    assert!(
        text.contains("reindex") && !text.contains(dir.path().to_str().unwrap()),
        "{text}"
    );
    let repaired = post(&app, "/v1/conversations/idx/reindex", "").await;
    assert_eq!(
        repaired.status,
        200,
        "{}",
        String::from_utf8_lossy(&repaired.body)
    );
    let found = post(
        &app,
        "/v1/conversations/idx/recall",
        r#"{"query":"deployment"}"#,
    )
    .await;
    assert_eq!(found.json()["hits"][0]["seq"], 1);
}

/// JSON that cannot be kept exactly (a key given twice, an integer beyond 64 bits) and an
/// idempotency key that looks like a secret are refused as bad input, and nothing is stored.
#[tokio::test]
async fn inexact_json_and_secret_like_ids_are_refused_and_store_nothing() {
    let (dir, app) = open_app();
    commit_turn(&app, "exact", "first", "ok").await;
    let before = common::snapshot(dir.path());
    // (route, body, headers, a word the message must contain)
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case<'_>; 4] = [
        ("/commits", r#"{"user":"a","user":"b"}"#, &[], "twice"),
        (
            "/commits",
            r#"{"events":[{"kind":"user","text":"q"},{"kind":"tool_call","call_id":"c","tool":"t","arguments":{"n":123456789012345678901234567890}}]}"#,
            &[],
            "64 bits",
        ),
        (
            "/commits",
            r#"{"user":"q"}"#,
            &[(
                "idempotency-key",
                "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx12345678",
            )],
            "secret",
        ),
        ("/projection", r#"{"input":"x","input":"y"}"#, &[], "twice"),
    ];
    for (route, body, headers, said) in cases {
        let uri = format!("/v1/conversations/exact{route}");
        let reply = call(&app, "POST", &uri, headers, body).await;
        let text = String::from_utf8_lossy(&reply.body).to_string();
        assert_eq!(
            (reply.status.as_u16(), reply.class().as_str()),
            (400, "bad_input"),
            "{route} {body}: {text}"
        );
        assert!(text.contains(said), "{route} {body}: {text}");
        assert!(!text.contains("sk-proj-"), "the key is not echoed: {text}");
    }
    assert_eq!(common::snapshot(dir.path()), before, "nothing was stored");
}
