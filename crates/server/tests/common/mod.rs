//! Helpers shared by the server's tests: a router over a temporary store, and one call.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Request, StatusCode};
use ctxlog_server::{AppState, Config, Tokens, app};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

pub const ALICE: &str = "alice-token-0123456789";
pub const BOB: &str = "bob-token-0123456789ab";

/// A router over a fresh store without tokens (the loopback default).
pub fn open_app() -> (tempfile::TempDir, Router) {
    let dir = tempfile::tempdir().unwrap();
    let router = app(AppState::new(&Config::new(dir.path())).unwrap());
    (dir, router)
}

/// A router with two tenants, alice and bob.
pub fn tenant_app() -> (tempfile::TempDir, Router) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new(dir.path());
    config.tokens = Some(Tokens::parse(&format!("{ALICE} alice\n{BOB} bob\n")).unwrap());
    (dir, app(AppState::new(&config).unwrap()))
}

/// A response: status, headers, body.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The error class of an error response.
    pub fn class(&self) -> String {
        self.json()["error"]["class"].as_str().unwrap().to_string()
    }
}

/// Sends one request through the router, as a JSON client does: an unsafe method (POST,
/// DELETE, …) says `Content-Type: application/json` unless `headers` give a content type.
pub async fn call(
    app: &Router,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: impl Into<Body>,
) -> Reply {
    let typed = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
    let mut headers = headers.to_vec();
    if !["GET", "HEAD", "OPTIONS", "TRACE"].contains(&method) && !typed {
        headers.push(("content-type", "application/json"));
    }
    call_exact(app, method, uri, &headers, body).await
}

/// Sends one request through the router with exactly `headers`.
pub async fn call_exact(
    app: &Router,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: impl Into<Body>,
) -> Reply {
    let mut request = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = app
        .clone()
        .oneshot(request.body(body.into()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        headers,
        body,
    }
}

/// POST of a JSON body without authentication.
pub async fn post(app: &Router, uri: &str, body: &str) -> Reply {
    call(app, "POST", uri, &[], body.to_string()).await
}

/// GET without authentication.
pub async fn get(app: &Router, uri: &str) -> Reply {
    call(app, "GET", uri, &[], Body::empty()).await
}

/// Commits the shorthand turn `(user, assistant)` to `conv`.
pub async fn commit_turn(app: &Router, conv: &str, user: &str, assistant: &str) -> Value {
    let body = serde_json::json!({"user": user, "assistant": assistant}).to_string();
    let reply = post(app, &format!("/v1/conversations/{conv}/commits"), &body).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.json()
}
