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

/// A server on a real loopback socket (port 0), over a fresh store.
pub struct Served {
    pub addr: std::net::SocketAddr,
    pub dir: tempfile::TempDir,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Starts `ctxlog_server::run` on 127.0.0.1:0 with the configuration `set` makes of the
/// defaults.
pub async fn serve(set: impl FnOnce(&mut Config)) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new(dir.path());
    set(&mut config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let state = AppState::new(&config).unwrap();
    let task = tokio::spawn(ctxlog_server::run(listener, state, async move {
        let _ = stopped.await;
    }));
    Served {
        addr,
        dir,
        stop,
        task,
    }
}

impl Served {
    /// Stops the server and waits for it to finish.
    pub async fn stop(self) {
        self.stop.send(()).unwrap();
        self.task.await.unwrap().unwrap();
    }

    /// A request to this server: `Host` is its address unless `headers` give one;
    /// `Content-Length` and `Connection: close` are added.
    pub fn request(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Vec<u8> {
        let mut out = format!("{method} {target} HTTP/1.1\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            out.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for (k, v) in headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ));
        out.into_bytes()
    }

    /// Sends `request` on a new connection and reads the reply to the end.
    pub async fn exchange(&self, request: &[u8]) -> Reply {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        stream.write_all(request).await.unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.unwrap();
        parse_reply(&raw)
    }

    /// `exchange(request(…))`.
    pub async fn send(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Reply {
        self.exchange(&self.request(method, target, headers, body))
            .await
    }
}

/// An HTTP/1.1 response with a `Content-Length` body.
pub fn parse_reply(raw: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP response: {text:?}"));
    let mut lines = head.lines();
    let status = lines.next().unwrap()[9..12].parse::<u16>().unwrap();
    let mut headers = HeaderMap::new();
    for line in lines {
        let (k, v) = line.split_once(": ").unwrap();
        headers.append(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    Reply {
        status: StatusCode::from_u16(status).unwrap(),
        headers,
        body: Bytes::from(body.as_bytes().to_vec()),
    }
}

/// Every file under `dir` with its bytes.
pub fn snapshot(dir: &std::path::Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}
