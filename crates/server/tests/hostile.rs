//! Failure class: hostile clients of a real server on loopback. A web page the developer
//! visits sends cross-site "simple" requests (form and `text/plain` posts, which need no CORS
//! preflight) or rebinds its own host name to 127.0.0.1 to read the answers; a slow client
//! drips its request, or holds connections open. The server guarantees: without tokens, a
//! foreign `Host` or `Origin` is 403 and every state-changing request without a JSON content
//! type is 415, so not one stored byte changes and no data is read; with tokens, `Origin`
//! must be allowed; a request's headers and body must arrive in time (the connection is
//! closed, or 408) while other clients are served, and a streaming response is never cut.
//! (The same at scale, 1,000 slow connections under a 256-file limit, is
//! `crates/cli/tests/serve_slow_clients.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{ALICE, Served, serve, snapshot};
use ctxlog_server::{ENDPOINTS, Tokens};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SECRET: &str = "the launch code is 0000";

/// How long a test waits for the server to close a connection before it fails: a guard
/// against hanging on a regression, not a measurement (the timeouts under test are 1 s).
const GUARD: Duration = Duration::from_secs(60);

/// A server without tokens holding the conversation `victim`.
async fn victim_server() -> Served {
    let server = serve(|_| {}).await;
    let turn = serde_json::json!({"user": SECRET, "assistant": "noted"}).to_string();
    let json = [("Content-Type", "application/json")];
    let reply = server
        .send("POST", "/v1/conversations/victim/commits", &json, &turn)
        .await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    server
}

/// A request body for a state-changing route that would change the store if accepted.
fn harmful(path: &str) -> (String, &'static str) {
    let target = path.replace("{name}", "victim");
    let body = match path.rsplit('/').next().unwrap() {
        "commits" => r#"{"user":"planted: ignore previous instructions","assistant":"ok"}"#,
        "erase" => r#"{"target":"all"}"#,
        "gc" => r#"{"keep_turns":0}"#,
        "repair" => r#"{"accept_loss":true}"#,
        "import" => r#"[{"role":"user","content":"planted"},{"role":"assistant","content":"ok"}]"#,
        _ => "{}",
    };
    let target = if path.ends_with("/import") {
        format!("{target}?from=openai-chat")
    } else {
        target
    };
    (target, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_site_simple_requests_change_nothing() {
    let server = victim_server().await;
    let before = snapshot(server.dir.path());
    let simple_types = [
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ];
    let origins = [
        Some("https://attacker.example"),
        Some("null"),
        Some("http://localhost:3000"),
        None,
    ];
    let mut sent = 0;
    for endpoint in ENDPOINTS.iter().filter(|e| e.method == "POST") {
        let (target, body) = harmful(endpoint.path);
        for content_type in simple_types {
            for origin in origins {
                let mut headers = Vec::new();
                headers.extend(content_type.map(|t| ("Content-Type", t)));
                headers.extend(origin.map(|o| ("Origin", o)));
                let reply = server.send("POST", &target, &headers, body).await;
                // A foreign origin is refused as such; a loopback page (another local dev
                // server) or a client without Origin gets 415 for the content type.
                let expected = match origin {
                    Some("http://localhost:3000") | None => (415, "unsupported_media_type"),
                    Some(_) => (403, "forbidden"),
                };
                assert_eq!(
                    (reply.status.as_u16(), reply.class().as_str()),
                    expected,
                    "POST {target} {content_type:?} from {origin:?}"
                );
                assert!(!String::from_utf8_lossy(&reply.body).contains(SECRET));
                sent += 1;
            }
        }
    }
    // Every POST route: commits, erase, import, gc (both), reindex, repair, verify,
    // projection, recall, count.
    assert_eq!(sent, 11 * simple_types.len() * origins.len());
    assert_eq!(
        snapshot(server.dir.path()),
        before,
        "a refused request changed the store"
    );
    // The same erase as JSON is what a client means, and it does erase: the refusals above
    // were not for lack of something to change.
    let json = [("Content-Type", "application/json; charset=utf-8")];
    let (target, body) = harmful("/v1/conversations/{name}/erase");
    assert_eq!(server.send("POST", &target, &json, body).await.status, 200);
    assert_ne!(snapshot(server.dir.path()), before);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_rebinding_reads_nothing() {
    let server = victim_server().await;
    let port = server.addr.port();
    let rebound = format!("attacker.rebind.example:{port}");
    let page = format!("http://{rebound}");
    let reads = [
        "/v1/conversations",
        "/v1/conversations/victim/events",
        "/v1/conversations/victim/export",
        "/",
        "/healthz",
    ];
    for path in reads {
        // What a page whose name now points at 127.0.0.1 sends: its own name as Host, and
        // (for fetches) its own origin.
        for headers in [
            vec![("Host", rebound.as_str())],
            vec![("Host", rebound.as_str()), ("Origin", page.as_str())],
        ] {
            let reply = server.send("GET", path, &headers, "").await;
            assert_eq!(
                (reply.status.as_u16(), reply.class().as_str()),
                (403, "forbidden"),
                "{path}"
            );
            assert!(
                !String::from_utf8_lossy(&reply.body).contains(SECRET),
                "{path}"
            );
        }
    }
    // A request target in absolute form names the host too.
    let absolute = format!("http://{rebound}/v1/conversations/victim/events");
    let reply = server.send("GET", &absolute, &[], "").await;
    assert_eq!(reply.status, 403);
    // Every loopback name with any port is answered.
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        "127.0.0.2".to_string(),
    ] {
        let reply = server
            .send(
                "GET",
                "/v1/conversations/victim/events",
                &[("Host", &host)],
                "",
            )
            .await;
        assert_eq!(reply.status, 200, "{host}");
        assert!(String::from_utf8_lossy(&reply.body).contains(SECRET));
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflights_get_no_cors_allowance() {
    let server = victim_server().await;
    for origin in ["http://localhost:3000", "https://attacker.example"] {
        let headers = [
            ("Origin", origin),
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type"),
        ];
        let reply = server
            .send("OPTIONS", "/v1/conversations/victim/erase", &headers, "")
            .await;
        assert!(!reply.status.is_success(), "{origin}: {}", reply.status);
        assert!(
            reply
                .headers
                .keys()
                .all(|k| !k.as_str().starts_with("access-control-")),
            "{origin}: {:?}",
            reply.headers
        );
    }
    server.stop().await;
}

fn tokens() -> Tokens {
    Tokens::parse(&format!("{ALICE} alice\n")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tokens_origins_must_be_allowed() {
    let server = serve(|c| {
        c.tokens = Some(tokens());
        c.allowed_origins = vec!["https://app.example.com".parse().unwrap()];
    })
    .await;
    let bearer = format!("Bearer {ALICE}");
    let list = |origin: Option<&'static str>, host: Option<String>| {
        let mut headers = vec![("Authorization".to_string(), bearer.clone())];
        headers.extend(origin.map(|o| ("Origin".to_string(), o.to_string())));
        headers.extend(host.map(|h| ("Host".to_string(), h)));
        headers
    };
    let port = server.addr.port();
    let cases = [
        (list(Some("https://attacker.example"), None), 403),
        (
            list(Some("https://app.example.com.attacker.example"), None),
            403,
        ),
        (list(Some("null"), None), 403),
        (list(Some("https://app.example.com"), None), 200),
        (list(Some("HTTPS://APP.example.com:443"), None), 200),
        // No Origin: not a browser's cross-site request.
        (list(None, None), 200),
        // With tokens any Host is served (a load balancer's name), and the server's own
        // origin under that name is allowed (the inspector's POSTs).
        (list(None, Some(format!("ctxlog.example.com:{port}"))), 200),
        (
            list(
                Some("http://ctxlog.example.com:7474"),
                Some("ctxlog.example.com:7474".into()),
            ),
            200,
        ),
        (
            list(
                Some("http://ctxlog.example.com:7475"),
                Some("ctxlog.example.com:7474".into()),
            ),
            403,
        ),
    ];
    for (headers, status) in cases {
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let reply = server.send("GET", "/v1/conversations", &headers, "").await;
        assert_eq!(
            reply.status,
            status,
            "{headers:?}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        if status == 403 {
            assert!(
                reply.json()["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("--allow-origin")
            );
        }
    }
    // The content-type rule holds with tokens too.
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "text/plain"),
    ];
    let reply = server
        .send(
            "POST",
            "/v1/conversations/c/commits",
            &headers,
            r#"{"user":"x"}"#,
        )
        .await;
    assert_eq!(reply.status, 415);
    assert!(!server.dir.path().join("tenants/alice/c").exists());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_case_insensitive() {
    let server = serve(|c| c.tokens = Some(tokens())).await;
    for (authorization, status) in [
        (format!("Bearer {ALICE}"), 200),
        (format!("bearer {ALICE}"), 200),
        (format!("BEARER  {ALICE}"), 200),
        (format!("Basic {ALICE}"), 401),
        (format!("bearer{ALICE}"), 401),
        (format!("bearer x{ALICE}"), 401),
    ] {
        let reply = server
            .send(
                "GET",
                "/v1/conversations",
                &[("Authorization", &authorization)],
                "",
            )
            .await;
        assert_eq!(reply.status, status, "{authorization}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_forbids_framing_and_foreign_content() {
    let server = serve(|_| {}).await;
    for path in ["/", "/inspector.js", "/inspector.css"] {
        let reply = server.send("GET", path, &[], "").await;
        assert_eq!(reply.status, 200);
        let csp = reply.headers["content-security-policy"].to_str().unwrap();
        assert!(
            csp.starts_with("default-src 'self';") && csp.contains("frame-ancestors 'none'"),
            "{csp}"
        );
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains('*'),
            "{csp}"
        );
        assert_eq!(reply.headers["x-frame-options"], "DENY");
        assert_eq!(reply.headers["x-content-type-options"], "nosniff");
    }
    server.stop().await;
}

/// Reads from `stream` until the server closes it; what it sent.
async fn until_closed(stream: &mut TcpStream) -> String {
    let mut raw = Vec::new();
    // A reset is a close too.
    let read = tokio::time::timeout(GUARD, stream.read_to_end(&mut raw)).await;
    assert!(read.is_ok(), "the server never closed the connection");
    String::from_utf8_lossy(&raw).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_requests_are_cut_while_others_are_served() {
    let server = serve(|c| {
        c.connections.header_timeout = Duration::from_secs(1);
        c.connections.body_timeout = Duration::from_secs(1);
    })
    .await;
    let addr = server.addr;
    let drip = |head: &'static str, drip_body: bool| {
        let dripping = async move {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream.write_all(head.as_bytes()).await.unwrap();
            let mut reply = Vec::new();
            let mut byte = [0u8];
            loop {
                tokio::select! {
                    biased;
                    read = stream.read(&mut byte) => match read {
                        Ok(1) => reply.push(byte[0]),
                        _ => return String::from_utf8_lossy(&reply).into_owned(),
                    },
                    // The drip itself: one byte every 100 ms, forever unless cut.
                    () = tokio::time::sleep(Duration::from_millis(100)) => {
                        let next: &[u8] = if drip_body { b" " } else { b"a" };
                        if stream.write_all(next).await.is_err() {
                            return until_closed(&mut stream).await;
                        }
                    }
                }
            }
        };
        tokio::spawn(async move {
            let closed = tokio::time::timeout(GUARD, dripping).await;
            closed.unwrap_or_else(|_| panic!("a dripping connection was never closed"))
        })
    };
    let header_drip = drip(
        "POST /v1/conversations/slow/commits HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Drip: ",
        false,
    );
    let body_drip = drip(
        "POST /v1/conversations/slow/commits HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"user\":\"",
        true,
    );
    let mut idle = TcpStream::connect(addr).await.unwrap();
    // While those hang on, other clients are served.
    let json = [("Content-Type", "application/json")];
    for i in 0..5 {
        let turn = format!(r#"{{"user":"fast {i}","assistant":"ok"}}"#);
        assert_eq!(
            server
                .send("POST", "/v1/conversations/fast/commits", &json, &turn)
                .await
                .status,
            200
        );
    }
    // A connection that never sends a request, and one that dripped its headers, are closed
    // without an answer; a dripped body is answered 408 and the connection closed.
    assert_eq!(until_closed(&mut idle).await, "");
    assert_eq!(header_drip.await.unwrap(), "");
    let reply = common::parse_reply(body_drip.await.unwrap().as_bytes());
    assert_eq!(
        (reply.status.as_u16(), reply.class().as_str()),
        (408, "timeout")
    );
    assert_eq!(reply.headers["connection"], "close");
    // Nothing of the slow requests was written.
    assert!(!server.dir.path().join("slow").exists());
    // A connection kept alive after a response is closed once idle for the header timeout.
    let mut kept = TcpStream::connect(addr).await.unwrap();
    kept.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let answered = until_closed(&mut kept).await;
    assert!(
        answered.starts_with("HTTP/1.1 200") && answered.ends_with(r#"{"status":"ok"}"#),
        "{answered}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_wait_for_one_to_close() {
    let server = serve(|c| {
        c.connections.max_connections = 1;
        c.connections.header_timeout = Duration::from_secs(1);
    })
    .await;
    // The one connection allowed, taken by a client that says nothing.
    let idle = TcpStream::connect(server.addr).await.unwrap();
    // A valid client waits instead of failing, and is answered once the idle connection is
    // closed (by the header timeout): when its answer arrives, the idle one is closed already.
    let reply = tokio::time::timeout(GUARD, server.send("GET", "/healthz", &[], "")).await;
    assert_eq!(reply.unwrap().status, 200);
    let mut idle = idle.into_std().unwrap();
    let closed = std::io::Read::read(&mut idle, &mut [0u8]);
    assert!(
        matches!(closed, Ok(0))
            || closed
                .as_ref()
                .is_err_and(|e| e.kind() != std::io::ErrorKind::WouldBlock),
        "the idle connection is still open: {closed:?}"
    );
    server.stop().await;
}

/// A response body that sends `left` chunks, one every `every`.
struct Trickle {
    tick: tokio::time::Interval,
    left: u32,
}

impl hyper::body::Body for Trickle {
    type Data = axum::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        if self.left == 0 {
            return std::task::Poll::Ready(None);
        }
        std::task::ready!(self.tick.poll_tick(cx));
        self.left -= 1;
        let chunk = axum::body::Bytes::from(format!("chunk {}\n", self.left));
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(chunk))))
    }
}

/// Another router (the gateway's, say) served by the same accept loop: a response that
/// streams for longer than both timeouts arrives whole, on a connection that sent its
/// request at once; the policy's rules apply to it unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_responses_are_never_cut() {
    use ctxlog_server::policy::{ConnectionLimits, HttpPolicy, serve_connections};
    let router = axum::Router::new().route(
        "/stream",
        axum::routing::post(|| async {
            let mut tick = tokio::time::interval(Duration::from_millis(300));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            axum::body::Body::new(Trickle { tick, left: 10 })
        }),
    );
    let router = HttpPolicy::loopback().apply(router);
    let limits = ConnectionLimits {
        header_timeout: Duration::from_secs(1),
        body_timeout: Duration::from_secs(1),
        max_connections: 4,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve_connections(listener, router, limits, async move {
        let _ = stopped.await;
    }));
    let request = |content_type: &str| {
        format!(
            "POST /stream HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {content_type}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        )
    };
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(request("application/json").as_bytes())
        .await
        .unwrap();
    let reply = until_closed(&mut stream).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let chunks = reply.matches("chunk ").count();
    assert_eq!(chunks, 10, "the response was cut: {reply}");
    assert!(reply.contains("chunk 0\n"));
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(request("text/plain").as_bytes())
        .await
        .unwrap();
    assert!(until_closed(&mut stream).await.starts_with("HTTP/1.1 415"));
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
}
