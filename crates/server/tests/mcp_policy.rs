//! Failure class: a web page, or a client without the token, reaching the archive through the
//! MCP endpoint (`/mcp`, docs/design.md#i7-mcp). The endpoint is under the same HTTP policy
//! and authentication as the JSON API: without tokens a foreign `Host` (DNS rebinding) or
//! `Origin` is 403 before the protocol sees the request, a POST that is not JSON is 415; with
//! tokens a missing or wrong token is 401 and only allowed origins pass. Only then does the
//! MCP server answer, with the tenant's store and nothing of another tenant's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::Router;
use axum::body::Body;
use common::{ALICE, BOB, Reply, call, call_exact, open_app, tenant_app};
use serde_json::{Value, json};

const ACCEPT: (&str, &str) = ("accept", "application/json, text/event-stream");

fn initialize() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}})
    .to_string()
}

/// The JSON-RPC messages of a streamable HTTP answer (an event stream or one JSON body).
fn messages(reply: &Reply) -> Vec<Value> {
    let text = String::from_utf8_lossy(&reply.body);
    if reply.headers["content-type"] == "application/json" {
        return vec![serde_json::from_str(&text).unwrap()];
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

/// A POST to `/mcp` as an MCP client sends it: `Accept` both answer types, a `Host` (every
/// HTTP/1.1 client sends one; loopback unless `headers` name another).
async fn mcp(app: &Router, headers: &[(&str, &str)], body: String) -> Reply {
    let mut headers = headers.to_vec();
    headers.push(ACCEPT);
    if !headers.iter().any(|(k, _)| *k == "host") {
        headers.push(("host", "127.0.0.1:7474"));
    }
    call(app, "POST", "/mcp", &headers, body).await
}

#[tokio::test]
async fn without_tokens_only_loopback_hosts_and_origins_reach_the_protocol() {
    let (_dir, app) = open_app();
    for allowed in [
        vec![("host", "[::1]:7474")],
        vec![("host", "127.0.0.1:7474")],
        vec![
            ("host", "localhost:7474"),
            ("origin", "http://localhost:3000"),
        ],
    ] {
        let reply = mcp(&app, &allowed, initialize()).await;
        assert_eq!(reply.status, 200, "{allowed:?}");
        assert_eq!(
            messages(&reply)[0]["result"]["serverInfo"]["name"],
            "ctxlog"
        );
    }
    for refused in [
        vec![("host", "evil.example")],
        vec![("host", "evil.example:7474")],
        vec![("origin", "https://attacker.example")],
        vec![("origin", "null")],
    ] {
        let reply = mcp(&app, &refused, initialize()).await;
        assert_eq!(
            (reply.status.as_u16(), reply.class()),
            (403, "forbidden".into())
        );
        let stream = call(&app, "GET", "/mcp", &[refused[0], ACCEPT], Body::empty()).await;
        assert_eq!(stream.status, 403, "GET {refused:?}");
    }
    for content_type in ["text/plain", "application/x-www-form-urlencoded"] {
        let reply = mcp(&app, &[("content-type", content_type)], initialize()).await;
        assert_eq!(
            (reply.status.as_u16(), reply.class()),
            (415, "unsupported_media_type".into())
        );
    }
    // Ending a session is a DELETE without a body: the policy lets it through to the
    // protocol, which answers for the (here unknown) session.
    let end = call_exact(
        &app,
        "DELETE",
        "/mcp",
        &[("mcp-session-id", "x"), ("host", "localhost")],
        "",
    )
    .await;
    assert_ne!(end.status, 415);
    assert_ne!(end.status, 403);
    // A DELETE that carries a body is typed like any other unsafe request.
    let with_body = call_exact(
        &app,
        "DELETE",
        "/mcp",
        &[("host", "localhost"), ("content-length", "2")],
        "{}",
    )
    .await;
    assert_eq!(with_body.status, 415);
}

#[tokio::test]
async fn with_tokens_each_tenant_reads_its_own_store_only() {
    let (_dir, app) = tenant_app();
    let alice = format!("Bearer {ALICE}");
    let bob = format!("Bearer {BOB}");
    let turn = json!({"user": "alice's secret plan", "assistant": "noted"}).to_string();
    let reply = call(
        &app,
        "POST",
        "/v1/conversations/plans/commits",
        &[("authorization", &alice)],
        turn,
    )
    .await;
    assert_eq!(reply.status, 200);
    for headers in [
        vec![],
        vec![("authorization", "Bearer not-a-token-of-ours")],
    ] {
        let reply = mcp(&app, &headers, initialize()).await;
        assert_eq!(
            (reply.status.as_u16(), reply.class()),
            (401, "unauthorized".into())
        );
    }
    let foreign = [
        ("authorization", alice.as_str()),
        ("origin", "https://attacker.example"),
    ];
    assert_eq!(mcp(&app, &foreign, initialize()).await.status, 403);
    // With tokens any host name may serve, and a page from the server's own origin may call.
    let own = [
        ("authorization", alice.as_str()),
        ("host", "ctxlog.example.com"),
        ("origin", "http://ctxlog.example.com"),
    ];
    assert_eq!(mcp(&app, &own, initialize()).await.status, 200);

    let read = |name: &str| {
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": name, "arguments": {"conversation": "plans", "from_seq": 1, "to_seq": 2}}})
        .to_string()
    };
    let authorized = |token: &str| {
        vec![
            ("authorization", token.to_string()),
            ("mcp-protocol-version", "2025-11-25".to_string()),
        ]
    };
    for (token, secret_seen) in [(&alice, true), (&bob, false)] {
        let headers = authorized(token);
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let session = mcp(&app, &headers, initialize()).await;
        let id = session.headers["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let mut with_session = headers.clone();
        with_session.push(("mcp-session-id", &id));
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let ack = mcp(&app, &with_session, initialized.to_string()).await;
        assert_eq!(ack.status, 202);
        let reply = mcp(&app, &with_session, read("read")).await;
        let result = &messages(&reply)[0]["result"];
        let text = result["content"][0]["text"].as_str().unwrap();
        assert_eq!(text.contains("alice's secret plan"), secret_seen, "{text}");
        assert_eq!(result["isError"], !secret_seen, "{text}");
        if !secret_seen {
            assert!(text.starts_with("not_found: "), "{text}");
            assert!(!text.contains(".tenants"), "{text}");
        }
    }
}
