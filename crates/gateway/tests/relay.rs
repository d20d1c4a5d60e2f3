#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The relay over real sockets on loopback, without an SDK. Failure class: a gateway that
//! stores what it did not receive, loses the reply, or changes what the client asked the
//! provider for. Guarantee: a call's input is committed before the provider sees it, the
//! provider gets the projected history with the client's other fields as given, the reply is
//! committed, and the response names the conversation and the reply's seq.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::routing::post;
use ctxlog::ops::LogRequest;
use serde_json::{Value, json};

async fn listen() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (listener, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_committed_projected_and_answered() {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let record = seen.clone();
    let upstream = axum::Router::new().route(
        "/v1/chat/completions",
        post(move |Json(body): Json<Value>| {
            record.lock().unwrap().push(body);
            async {
                Json(
                    json!({"id":"c","object":"chat.completion","created":1,"model":"gpt-4o",
                    "choices":[{"index":0,"finish_reason":"stop",
                        "message":{"role":"assistant","content":"Blue."}}]}),
                )
            }
        }),
    );
    let (listener, upstream_url) = listen().await;
    tokio::spawn(async move { axum::serve(listener, upstream).await });

    let dir = tempfile::tempdir().unwrap();
    let mut config = ctxlog_gateway::Config::new(ctxlog::StoreLocation::dir(dir.path()));
    config.openai_upstream = format!("{upstream_url}/v1");
    let app = ctxlog_gateway::app(ctxlog_gateway::Gateway::new(config).unwrap());
    let (listener, gateway_url) = listen().await;
    tokio::spawn(async move { axum::serve(listener, app).await });

    let body = json!({"model":"gpt-4o","temperature":0.5,"user":"u-1","messages":[
        {"role":"system","content":"Be brief."},
        {"role":"user","content":"Favourite colour?"}]});
    let response = reqwest::Client::new()
        .post(format!("{gateway_url}/v1/chat/completions"))
        .header("authorization", "Bearer sk-relay-test")
        .header("x-ctxlog-conversation", "colours")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-ctxlog-conversation"], "colours");
    assert_eq!(response.headers()["x-ctxlog-seq"], "2");
    let answer: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "Blue.");

    let sent = seen.lock().unwrap().clone();
    assert_eq!(
        sent,
        [json!({"model":"gpt-4o","messages":[
            {"role":"system","content":"Be brief."},
            {"role":"user","content":"Favourite colour?"}],
            "temperature":0.5,"user":"u-1"})]
    );
    let tenants: Vec<_> = std::fs::read_dir(dir.path().join(ctxlog::TENANTS_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(tenants.len(), 1);
    let store = ctxlog::Store::open(&tenants[0]).unwrap();
    let log = store
        .log(&LogRequest::page("colours".into(), None, None).unwrap())
        .unwrap();
    let texts: Vec<_> = log.events.iter().map(|e| e.body.text()).collect();
    assert_eq!(texts, [Some("Favourite colour?"), Some("Blue.")]);
}
