//! The server on a real socket (port 0), and graceful shutdown: after the signal, a commit
//! whose request was in flight is completed, durably, and answered; new connections are
//! refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use ctxlog_server::{AppState, Config, run};

/// One HTTP/1.1 request over a fresh connection; returns the status and the body.
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    read_response(&mut stream)
}

/// Reads one response head (up to the blank line), without its body.
fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap().trim_end().to_string()
}

fn read_response(stream: &mut TcpStream) -> (u16, String) {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1.to_string();
    (status, body)
}

async fn start(
    dir: &std::path::Path,
) -> (
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let state = AppState::new(&Config::new(dir)).unwrap();
    let server = tokio::spawn(run(listener, state, async move {
        let _ = stopped.await;
    }));
    (addr, stop, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_on_a_real_socket() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, server) = start(dir.path()).await;
    let (status, body) = tokio::task::spawn_blocking(move || {
        assert_eq!(
            http(addr, "GET", "/healthz", ""),
            (200, r#"{"status":"ok"}"#.to_string())
        );
        let (status, body) = http(
            addr,
            "POST",
            "/v1/conversations/s/commits",
            r#"{"user":"hello","assistant":"hi"}"#,
        );
        assert_eq!(
            (status, body.as_str()),
            (200, r#"{"first_seq":1,"last_seq":2,"replayed":false}"#)
        );
        http(
            addr,
            "POST",
            "/v1/conversations/s/projection",
            r#"{"input":"again","max_bytes":1000}"#,
        )
    })
    .await
    .unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        body,
        r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hello"},{"role":"assistant","content":"hi"},{"role":"user","content":"again"}]}"#
    );
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_a_commit_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, server) = start(dir.path()).await;
    let body = r#"{"user":"sent while the server stops","assistant":"kept"}"#;
    let client = tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        // `Expect: 100-continue`: the server answers "100 Continue" once the handler starts
        // reading the body, so the request is known to be in flight before the stop.
        write!(
            stream,
            "POST /v1/conversations/inflight/commits HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .unwrap();
        assert_eq!(read_head(&mut stream), "HTTP/1.1 100 Continue");
        stop.send(()).unwrap();
        // Shutdown has begun once the listener is gone: new connections are refused.
        while TcpStream::connect(addr).is_ok() {
            std::thread::yield_now();
        }
        stream.write_all(body.as_bytes()).unwrap();
        read_response(&mut stream)
    });
    let (status, reply) = client.await.unwrap();
    assert_eq!(
        (status, reply.as_str()),
        (200, r#"{"first_seq":1,"last_seq":2,"replayed":false}"#)
    );
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        TcpStream::connect(addr).is_err(),
        "still accepting after shutdown"
    );
    // The commit is durable: a fresh store sees it.
    let store = ctxlog::Store::open(dir.path()).unwrap();
    let log = store
        .log(&ctxlog::ops::LogRequest {
            conversation: "inflight".into(),
            from: 1,
            limit: None,
        })
        .unwrap();
    assert_eq!(log.last_seq, 2);
}
