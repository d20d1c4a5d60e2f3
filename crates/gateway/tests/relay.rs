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

/// The stand-in provider `upstream` and a gateway in front of it (its OpenAI upstream), both
/// serving on loopback; the gateway's store directory and its base URL.
async fn gateway_before(upstream: axum::Router) -> (tempfile::TempDir, String) {
    let (listener, upstream_url) = listen().await;
    tokio::spawn(async move { axum::serve(listener, upstream).await });
    let dir = tempfile::tempdir().unwrap();
    let mut config = ctxlog_gateway::Config::new(ctxlog::StoreLocation::dir(dir.path()));
    config.openai_upstream = format!("{upstream_url}/v1");
    let app = ctxlog_gateway::app(ctxlog_gateway::Gateway::new(config).unwrap());
    let (listener, gateway_url) = listen().await;
    tokio::spawn(async move { axum::serve(listener, app).await });
    (dir, gateway_url)
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
    let (dir, gateway_url) = gateway_before(upstream).await;

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

/// A stand-in Responses provider: a tool call to the first request, then text; plain or
/// streamed as the request asks. Every body it receives is kept.
fn responses_standin(seen: Arc<Mutex<Vec<Value>>>) -> axum::Router {
    axum::Router::new().route(
        "/v1/responses",
        post(move |Json(body): Json<Value>| {
            let n = {
                let mut seen = seen.lock().unwrap();
                seen.push(body.clone());
                seen.len()
            };
            async move {
                let output = if n == 1 {
                    json!([{"type":"function_call","id":"fc_1","call_id":"call_1",
                        "name":"lookup","arguments":"{\"q\":\"colour\"}","status":"completed"}])
                } else {
                    json!([{"type":"message","id":"msg_1","status":"completed","role":"assistant",
                        "content":[{"type":"output_text","text":format!("answer {n}"),"annotations":[]}]}])
                };
                let response = json!({"id": format!("resp_upstream_{n}"), "object": "response",
                    "status": "completed", "model": "gpt-4o", "output": output});
                if body["stream"] == true {
                    let created = json!({"type":"response.created","sequence_number":0,
                        "response":{"id": format!("resp_upstream_{n}"),"status":"in_progress","output":[]}});
                    let done = json!({"type":"response.completed","sequence_number":1,"response":response});
                    let text = format!(
                        "event: response.created\ndata: {created}\n\nevent: response.completed\ndata: {done}\n\n"
                    );
                    axum::response::Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(axum::body::Body::from(text))
                        .unwrap()
                } else {
                    axum::response::IntoResponse::into_response(Json(response))
                }
            }
        }),
    )
}

/// Responses calls chained by `previous_response_id` are served from the ledger: the gateway
/// answers with its own response ids, sends the provider the whole chain (never
/// `previous_response_id`), stores each input and reply once, and answers an id it did not
/// give with OpenAI's own 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responses_chain_is_served_from_the_ledger() {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let (dir, gateway_url) = gateway_before(responses_standin(seen.clone())).await;
    let client = reqwest::Client::new();
    let call = |body: Value, conversation: Option<&'static str>| {
        let mut request = client
            .post(format!("{gateway_url}/v1/responses"))
            .header("authorization", "Bearer sk-responses")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap());
        if let Some(name) = conversation {
            request = request.header("x-ctxlog-conversation", name);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            (status, headers, response.bytes().await.unwrap())
        }
    };

    // 1: a tool call, plain.
    let (status, headers, body) = call(
        json!({"model":"gpt-4o","instructions":"Be brief.","input":"Favourite colour?",
               "store":false,"max_output_tokens":100}),
        Some("resp-chain"),
    )
    .await;
    assert_eq!(status, 200, "{body:?}");
    assert_eq!(headers["x-ctxlog-seq"], "2");
    let first: Value = serde_json::from_slice(&body).unwrap();
    let id = first["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("resp_ctxlog.resp-chain.1."), "{id}");

    // 2: its output, by previous_response_id (no header), streamed.
    let (status, headers, body) = call(
        json!({"model":"gpt-4o","previous_response_id": id, "stream": true,
               "input":[{"type":"function_call_output","call_id":"call_1","output":"blue"}]}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body:?}");
    assert_eq!(headers["x-ctxlog-conversation"], "resp-chain");
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(!text.contains("resp_upstream"), "{text}");
    assert!(
        text.contains("\"id\":\"resp_ctxlog.resp-chain.3."),
        "{text}"
    );
    assert!(text.contains(": x-ctxlog-seq 4\n"), "{text}");
    let second = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .find(|e| e["type"] == "response.completed")
        .unwrap();
    let second_id = second["response"]["id"].as_str().unwrap().to_owned();

    // 3: a new question after it.
    let (status, _, body) = call(
        json!({"model":"gpt-4o","previous_response_id": second_id, "input":"Why?"}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body:?}");

    // The provider got the whole chain each time, never previous_response_id.
    let sent = seen.lock().unwrap().clone();
    assert_eq!(sent.len(), 3);
    assert!(sent.iter().all(|b| b.get("previous_response_id").is_none()));
    assert_eq!(sent[0]["instructions"], "Be brief.");
    assert_eq!(sent[0]["max_output_tokens"], 100);
    assert_eq!(sent[0]["store"], false);
    let types = |b: &Value| -> Vec<String> {
        b["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap_or("message").to_owned())
            .collect()
    };
    assert_eq!(
        types(&sent[2]),
        [
            "message",
            "function_call",
            "function_call_output",
            "message",
            "message"
        ]
    );

    // An id this gateway did not give: OpenAI's own 400, nothing stored.
    for unknown in ["resp_123", &id.replace(".1.", ".9.")] {
        let (status, _, body) = call(
            json!({"model":"gpt-4o","previous_response_id": unknown, "input":"Hello?"}),
            None,
        )
        .await;
        assert_eq!(status, 400);
        let error: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            error["error"]["code"], "previous_response_not_found",
            "{error}"
        );
        assert_eq!(error["error"]["param"], "previous_response_id");
    }
    assert_eq!(seen.lock().unwrap().len(), 3);

    let tenants: Vec<_> = std::fs::read_dir(dir.path().join(ctxlog::TENANTS_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let store = ctxlog::Store::open(&tenants[0]).unwrap();
    let log = store
        .log(&LogRequest::page("resp-chain".into(), None, None).unwrap())
        .unwrap();
    let kinds: Vec<_> = log.events.iter().map(|e| e.kind().as_str()).collect();
    assert_eq!(
        kinds,
        [
            "user",
            "tool_call",
            "tool_result",
            "assistant",
            "user",
            "assistant"
        ]
    );
}
