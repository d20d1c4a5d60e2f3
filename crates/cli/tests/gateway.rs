//! `ctxlog gateway` as a process, with stand-in providers on loopback that misbehave. Failure
//! class: a gateway that loses a client's input, stores a partial or unanswered reply, lets a
//! request without its token reach a store, or answers a stalled provider in a shape the
//! SDK cannot read. Guarantees: a provider that never answers is a 504 in the route's own
//! error shape after `--upstream-timeout`, with the input committed and no reply; with
//! tokens every request needs `X-Ctxlog-Token` (missing or unknown: 401, not one stored byte
//! changes) and each token's tenant has its own conversations; a gateway killed (SIGKILL)
//! while relaying a stream keeps the committed input, commits none of the partial reply, and
//! after a restart the client's retry continues the conversation. Two gateways over one
//! PostgreSQL store (replicas), and one restarted, serve the same conversations: a chat
//! (headerless or named) started through one continues through the other, a Responses id
//! minted by one is accepted by the other, and every message is stored once. Recognition of
//! a client that dropped its oldest messages is the store's (its places index): a chat
//! started through one gateway after the other served a trimmed history is recognised by
//! that other one from a trimmed resend, over PostgreSQL and over one store directory.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[path = "../../ctxlog/tests/common/pg.rs"]
mod pg;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use common::{Env, snapshot};
use serde_json::{Value, json};

/// How long a test waits on a socket before it fails: a guard against hanging on a
/// regression, not a measurement.
const GUARD: Duration = Duration::from_secs(60);

const ANSWER: &str = "Blue.";
const PARTIAL: &str = "Half an ans";

/// What a stand-in provider does with a connection.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Behaviour {
    /// Reads the request and never answers.
    Silent,
    /// Answers the first SSE event of a stream and then stalls.
    StreamThenStall,
    /// Answers a whole OpenAI chat completion.
    Answer,
    /// Answers `re: ` and the last message's text.
    Echo,
    /// Waits until four requests have arrived, then echoes.
    EchoAfterFour,
}

/// Where [`Behaviour::EchoAfterFour`] connections wait for each other.
static FOUR: std::sync::Barrier = std::sync::Barrier::new(4);

/// A stand-in provider on loopback: its base URL and the bodies it received. Connection `n`
/// (from 0) gets `behaviour(n)`; stalled connections stay open until the process ends.
fn standin(behaviour: fn(usize) -> Behaviour) -> (String, mpsc::Receiver<Value>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    let count = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let n = count.fetch_add(1, Ordering::SeqCst);
            let tx = tx.clone();
            std::thread::spawn(move || provide(stream, behaviour(n), &tx));
        }
    });
    (url, rx)
}

/// The text of the last user message of a Chat Completions or Responses request.
fn last_user_text(request: &Value) -> String {
    let messages = request["messages"]
        .as_array()
        .or_else(|| request["input"].as_array());
    let last = messages.and_then(|m| m.iter().rev().find(|m| m["role"] == "user"));
    match last.map(|m| &m["content"]) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

fn provide(mut stream: TcpStream, behaviour: Behaviour, received: &mpsc::Sender<Value>) {
    let Some((head, body)) = read_message(&mut stream) else {
        return;
    };
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let _ = received.send(request.clone());
    match behaviour {
        Behaviour::Silent => std::thread::sleep(Duration::from_secs(3600)),
        Behaviour::StreamThenStall => {
            let event = json!({"id":"c","object":"chat.completion.chunk","created":1,
                "model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":PARTIAL}}]});
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
                 data: {event}\n\n"
            );
            let _ = stream.flush();
            std::thread::sleep(Duration::from_secs(3600));
        }
        Behaviour::Answer | Behaviour::Echo | Behaviour::EchoAfterFour => {
            if behaviour == Behaviour::EchoAfterFour {
                FOUR.wait();
            }
            let text = match behaviour {
                Behaviour::Echo | Behaviour::EchoAfterFour => {
                    format!("re: {}", last_user_text(&request))
                }
                _ => ANSWER.to_owned(),
            };
            let body = if head.starts_with("post /v1/responses ") {
                json!({"id":"resp_upstream","object":"response","status":"completed",
                    "model":"gpt-4o","output":[{"type":"message","id":"msg_1",
                    "status":"completed","role":"assistant",
                    "content":[{"type":"output_text","text":text,"annotations":[]}]}]})
            } else {
                json!({"id":"c","object":"chat.completion","created":1,"model":"gpt-4o",
                    "choices":[{"index":0,"finish_reason":"stop",
                        "message":{"role":"assistant","content":text}}]})
            }
            .to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    }
}

/// Reads one HTTP message with a `content-length` body: its head (lower-cased) and body.
fn read_message(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    stream.set_read_timeout(Some(GUARD)).unwrap();
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        head.push_str(&line.to_ascii_lowercase());
        if line == "\r\n" {
            break;
        }
    }
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |n| n.trim().parse().unwrap());
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((head, body))
}

/// A running `ctxlog gateway` on a free loopback port.
struct Gateway {
    child: Child,
    _stderr: ChildStderr,
    stdout: Option<std::process::ChildStdout>,
    addr: String,
}

impl Gateway {
    fn start(env: &Env, upstream: &str, extra: &[&str], tokens: Option<&str>) -> Gateway {
        let mut cmd = env.command(&gateway_args(upstream, extra));
        cmd.env_remove("CTXLOG_TOKENS");
        if let Some(tokens) = tokens {
            cmd.env("CTXLOG_TOKENS", tokens);
        }
        Gateway::spawn(cmd)
    }

    /// `ctxlog --store STORE gateway …` (a PostgreSQL store URL).
    fn start_on(store: &str, upstream: &str) -> Gateway {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ctxlog"));
        cmd.arg("--store")
            .arg(store)
            .args(gateway_args(upstream, &[]))
            .env_remove("CTXLOG_ROOT")
            .env_remove("CTXLOG_TOKENS");
        Gateway::spawn(cmd)
    }

    fn spawn(mut cmd: std::process::Command) -> Gateway {
        cmd.stdout(std::process::Stdio::piped());
        let (mut child, stderr, addr) = common::spawn_server(cmd);
        Gateway {
            stdout: child.stdout.take(),
            child,
            _stderr: stderr.into_inner(),
            addr,
        }
    }

    /// Sends a POST and returns the connection with the request written.
    fn send(&self, path: &str, headers: &[(&str, &str)], body: &Value) -> TcpStream {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(GUARD)).unwrap();
        let body = body.to_string();
        let mut head = format!(
            "POST {path} HTTP/1.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n",
            body.len()
        );
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("host: {}\r\n", self.addr));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        write!(stream, "{head}\r\n{body}").unwrap();
        stream
    }

    /// A POST answered whole: the status, the head (lower-cased) and the body as JSON.
    fn post(&self, path: &str, headers: &[(&str, &str)], body: &Value) -> (u16, String, Value) {
        let mut stream = self.send(path, headers, body);
        let (head, body) = read_message(&mut stream).expect("an answer");
        let status = head[9..12].parse().unwrap();
        (status, head, serde_json::from_slice(&body).unwrap())
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// `GET path`: the status and the body as text.
    fn get(&self, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(GUARD)).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\r\n",
            self.addr
        )
        .unwrap();
        let (head, body) = read_message(&mut stream).expect("an answer");
        (
            head[9..12].parse().unwrap(),
            String::from_utf8(body).unwrap(),
        )
    }

    /// Stops the gateway and returns what it wrote on stdout.
    fn stop(mut self) -> String {
        let mut stdout = self.stdout.take().unwrap();
        self.kill();
        let mut out = String::new();
        stdout.read_to_string(&mut out).unwrap();
        out
    }
}

/// `gateway --addr 127.0.0.1:0` with both upstreams at `upstream`, then `extra`.
fn gateway_args(upstream: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "gateway".to_owned(),
        "--addr".into(),
        "127.0.0.1:0".into(),
        "--openai-upstream".into(),
        format!("{upstream}/v1"),
        "--anthropic-upstream".into(),
        upstream.into(),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args
}

/// The tenant stores under the gateway's root.
fn tenants(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root.join(".tenants")) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    dirs.sort();
    dirs
}

/// Chat messages as `log` lists them: (role, text) in order.
fn as_sent(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .map(|m| {
            let text = m["content"].as_str().unwrap().to_owned();
            (m["role"].as_str().unwrap().to_owned(), text)
        })
        .collect()
}

/// `ctxlog --root TENANT log CONVERSATION --json` (one event a line): each event's kind and text.
fn log(tenant: &Path, conversation: &str) -> Vec<(String, String)> {
    log_in(("--root", tenant.as_os_str()), conversation)
}

/// `ctxlog FLAG STORE log CONVERSATION --json`: each event's kind and text.
fn log_in(store: (&str, &std::ffi::OsStr), conversation: &str) -> Vec<(String, String)> {
    let out = common::feed(
        {
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ctxlog"));
            cmd.arg(store.0)
                .arg(store.1)
                .args(["log", conversation, "--json"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            cmd
        },
        b"",
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line).unwrap();
            let field = |name: &str| event[name].as_str().unwrap_or_default().to_owned();
            (field("kind"), field("text"))
        })
        .collect()
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

#[test]
fn a_provider_that_never_answers_is_a_504_in_each_providers_shape() {
    let env = Env::new();
    let (upstream, received) = standin(|_| Behaviour::Silent);
    let gateway = Gateway::start(&env, &upstream, &["--upstream-timeout", "1"], None);
    let key = [
        ("authorization", "Bearer sk-timeout"),
        ("x-api-key", "sk-timeout"),
    ];

    let (status, _, body) = gateway.post(
        "/v1/chat/completions",
        &[key[0], ("x-ctxlog-conversation", "oa")],
        &json!({"model": "gpt-4o", "messages": [user("Still there?")]}),
    );
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["type"], "server_error", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("--upstream-timeout") && message.contains("input is stored"),
        "{message}"
    );

    let (status, _, body) = gateway.post(
        "/v1/messages",
        &[key[1], ("x-ctxlog-conversation", "an")],
        &json!({"model": "claude-sonnet-4-5", "max_tokens": 100,
                "messages": [user("Anyone home?")]}),
    );
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], "api_error", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--upstream-timeout")
    );
    // Both calls reached the provider, so their input was committed first.
    assert_eq!(received.try_iter().count(), 2);
    gateway.kill();

    let tenants = tenants(env.root());
    assert_eq!(tenants.len(), 1, "one API key, one tenant");
    let texts = |conv| -> Vec<String> { log(&tenants[0], conv).into_iter().map(|e| e.1).collect() };
    assert_eq!(texts("oa"), ["Still there?"]);
    assert_eq!(texts("an"), ["Anyone home?"]);
}

#[test]
fn with_tokens_every_request_needs_its_token_and_each_token_has_its_tenant() {
    let env = Env::new();
    let (upstream, _received) = standin(|_| Behaviour::Answer);
    let alice = "gw-token-alice-0123456789abcdef";
    let bob = "gw-token-bob-0123456789abcdef01";
    let gateway = Gateway::start(
        &env,
        &upstream,
        &[],
        Some(&format!("{alice} alice\n{bob} bob\n")),
    );
    let call = |token: Option<&str>, text: &str| {
        // A host beyond loopback, as a client through a load balancer sends it.
        let mut headers = vec![
            ("host", "gateway.example.com"),
            ("authorization", "Bearer sk-shared"),
            ("x-ctxlog-conversation", "team"),
        ];
        if let Some(token) = token {
            headers.push(("x-ctxlog-token", token));
        }
        gateway.post(
            "/v1/chat/completions",
            &headers,
            &json!({"model": "gpt-4o", "messages": [user(text)]}),
        )
    };

    let before = snapshot(env.root());
    for (token, what) in [
        (None, "missing X-Ctxlog-Token"),
        (
            Some("gw-token-alice-0123456789abcdeX"),
            "unknown X-Ctxlog-Token",
        ),
    ] {
        let (status, _, body) = call(token, "planted");
        assert_eq!(status, 401, "{body}");
        assert_eq!(body["error"]["type"], "authentication_error", "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(what),
            "{body}"
        );
    }
    assert_eq!(
        snapshot(env.root()),
        before,
        "a refused request stored nothing"
    );

    let (status, head, body) = call(Some(alice), "Alice here");
    assert_eq!(status, 200, "{body}");
    assert!(head.contains("x-ctxlog-seq: 2\r\n"), "{head}");
    let (status, _, body) = call(Some(bob), "Bob here");
    assert_eq!(status, 200, "{body}");
    gateway.kill();

    // The same API key under two tokens: two tenants, each with only its own messages.
    let tenants = tenants(env.root());
    assert_eq!(tenants.len(), 2, "{tenants:?}");
    let mut texts: Vec<Vec<String>> = tenants
        .iter()
        .map(|t| log(t, "team").into_iter().map(|e| e.1).collect())
        .collect();
    texts.sort();
    assert_eq!(
        texts,
        [
            vec!["Alice here".to_owned(), ANSWER.into()],
            vec!["Bob here".to_owned(), ANSWER.into()]
        ]
    );
}

#[test]
fn a_gateway_killed_mid_stream_keeps_the_input_and_no_partial_reply() {
    let env = Env::new();
    let (upstream, received) = standin(|n| {
        if n == 0 {
            Behaviour::StreamThenStall
        } else {
            Behaviour::Answer
        }
    });
    let headers = [
        ("authorization", "Bearer sk-kill"),
        ("x-ctxlog-conversation", "crash"),
    ];
    let first = json!({"model": "gpt-4o", "stream": true, "messages": [
        {"role": "system", "content": "Be brief."}, user("Favourite colour?")]});

    let gateway = Gateway::start(&env, &upstream, &[], None);
    let mut stream = gateway.send("/v1/chat/completions", &headers, &first);
    // Read until the partial reply's first event has reached the client.
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains(PARTIAL) {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"));
    gateway.kill();
    // The client's connection ends without the stream's end.
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    assert!(!String::from_utf8_lossy(&rest).contains("[DONE]"));

    let tenants = tenants(env.root());
    assert_eq!(tenants.len(), 1);
    assert_eq!(
        log(&tenants[0], "crash"),
        [("user".to_owned(), "Favourite colour?".to_owned())],
        "the input is committed, nothing of the partial reply is"
    );

    // After a restart the client retries the same call (not streamed this time).
    let gateway = Gateway::start(&env, &upstream, &[], None);
    let mut retry = first.clone();
    retry["stream"] = json!(false);
    let (status, head, body) = gateway.post("/v1/chat/completions", &headers, &retry);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], ANSWER);
    assert!(head.contains("x-ctxlog-seq: 2\r\n"), "{head}");
    // The next call continues the conversation: its new message after the stored reply.
    let next = json!({"model": "gpt-4o", "messages": [
        {"role": "system", "content": "Be brief."}, user("Favourite colour?"),
        {"role": "assistant", "content": ANSWER}, user("Why?")]});
    let (status, head, body) = gateway.post("/v1/chat/completions", &headers, &next);
    assert_eq!(status, 200, "{body}");
    assert!(head.contains("x-ctxlog-seq: 4\r\n"), "{head}");
    gateway.kill();

    let sent: Vec<Value> = received.try_iter().collect();
    assert_eq!(sent.len(), 3);
    assert_eq!(
        sent[2]["messages"], next["messages"],
        "the provider saw the whole history"
    );
    let texts: Vec<String> = log(&tenants[0], "crash").into_iter().map(|e| e.1).collect();
    assert_eq!(texts, ["Favourite colour?", ANSWER, "Why?", ANSWER]);
}

/// 64 clients at once on 16 conversations (four on each), each sending up to three turns
/// with the whole history it has. What is promised: calls on one conversation are
/// serialised by the store (each commit follows the seq its call read), so the first call
/// to commit continues the conversation, and a call whose history the conversation has
/// moved past goes to a fork of it (named in the response) holding its own history, never
/// merged into the other. Every conversation then holds each message exactly once, each
/// followed by its own reply; every accepted message is in the conversation its answer
/// named, after the client's earlier ones; no refused message is stored anywhere.
#[test]
fn concurrent_clients_store_every_message_once_in_order() {
    let env = Env::new();
    let (upstream, _received) = standin(|_| Behaviour::Echo);
    let gateway = Gateway::start(&env, &upstream, &[], None);
    type Outcome = (Vec<(String, String)>, Vec<String>);
    let outcomes: Vec<Outcome> = std::thread::scope(|scope| {
        let gateway = &gateway;
        let handles: Vec<_> = (0..64)
            .map(|i| {
                scope.spawn(move || {
                    let conversation = format!("conv-{}", i % 16);
                    let (mut messages, mut accepted, mut refused) =
                        (Vec::new(), Vec::new(), Vec::new());
                    for turn in 0..3 {
                        let text = format!("client {i} turn {turn}");
                        messages.push(user(&text));
                        let (status, head, body) = gateway.post(
                            "/v1/chat/completions",
                            &[
                                ("authorization", "Bearer sk-many"),
                                ("x-ctxlog-conversation", &conversation),
                            ],
                            &json!({"model": "gpt-4o", "messages": messages}),
                        );
                        assert!(status == 200 || status == 409, "{status}: {body}");
                        if status == 409 {
                            refused.push(text);
                            break;
                        }
                        assert_eq!(
                            body["choices"][0]["message"]["content"],
                            format!("re: {text}")
                        );
                        let named = head
                            .lines()
                            .find_map(|l| l.strip_prefix("x-ctxlog-conversation: "))
                            .expect("the conversation named")
                            .trim()
                            .to_owned();
                        messages.push(body["choices"][0]["message"].clone());
                        accepted.push((named, text));
                    }
                    (accepted, refused)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    gateway.kill();

    let tenants = tenants(env.root());
    assert_eq!(tenants.len(), 1);
    let mut names: Vec<&String> = outcomes
        .iter()
        .flat_map(|o| o.0.iter().map(|a| &a.0))
        .collect();
    names.sort();
    names.dedup();
    for c in 0..16 {
        assert!(names.contains(&&format!("conv-{c}")), "{names:?}");
    }
    let mut logs = std::collections::HashMap::new();
    for conversation in names {
        let events = log(&tenants[0], conversation);
        // Each message once, followed by its own reply, nothing else.
        assert_eq!(events.len() % 2, 0, "{events:?}");
        for pair in events.chunks(2) {
            assert_eq!(pair[0].0, "user", "{events:?}");
            assert_eq!(
                pair[1],
                ("assistant".to_owned(), format!("re: {}", pair[0].1))
            );
        }
        let stored: Vec<String> = events.iter().step_by(2).map(|e| e.1.clone()).collect();
        let mut unique = stored.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), stored.len(), "{events:?}");
        logs.insert(conversation.clone(), stored);
    }
    for (accepted, refused) in &outcomes {
        let mut last: Option<(&String, usize)> = None;
        for (conversation, text) in accepted {
            let stored = &logs[conversation];
            let at = stored.iter().position(|s| s == text);
            let at = at.unwrap_or_else(|| panic!("{text} not in {conversation}: {stored:?}"));
            // A client's messages keep their order in the conversation that holds them.
            if let Some((previous, before)) = last
                && previous == conversation
            {
                assert!(before < at, "{accepted:?} in {stored:?}");
            }
            last = Some((conversation, at));
        }
        for t in refused {
            assert!(
                logs.values().all(|stored| !stored.contains(t)),
                "{t} refused but stored"
            );
        }
    }
}

/// The same call sent four times at once (a client retrying while its first call waits: the
/// provider answers none before all four reached it) stores its input once and one reply:
/// each call is answered, and the replies after the first find the conversation moved on
/// and are relayed without being stored.
#[test]
fn the_same_call_sent_at_once_stores_its_input_once() {
    let env = Env::new();
    let (upstream, _received) = standin(|_| Behaviour::EchoAfterFour);
    let gateway = Gateway::start(&env, &upstream, &[], None);
    let body = json!({"model": "gpt-4o", "messages": [user("Once only")]});
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                let (status, _, answer) = gateway.post(
                    "/v1/chat/completions",
                    &[
                        ("authorization", "Bearer sk-same"),
                        ("x-ctxlog-conversation", "same"),
                    ],
                    &body,
                );
                assert_eq!(status, 200, "{answer}");
                assert_eq!(answer["choices"][0]["message"]["content"], "re: Once only");
            });
        }
    });
    gateway.kill();
    let events = log(&tenants(env.root())[0], "same");
    let users: Vec<_> = events.iter().filter(|e| e.0 == "user").collect();
    assert_eq!(users.len(), 1, "{events:?}");
    assert_eq!(
        events,
        [
            ("user".to_owned(), "Once only".to_owned()),
            ("assistant".to_owned(), "re: Once only".to_owned())
        ]
    );
}

/// Conversations are independent: a client per conversation, all at once, each sending its
/// turns in order (each call with the whole history it has), stores every message and reply
/// exactly once, in order.
#[test]
fn one_client_per_conversation_at_once_stores_every_turn_in_order() {
    let env = Env::new();
    let (upstream, _received) = standin(|_| Behaviour::Echo);
    let gateway = Gateway::start(&env, &upstream, &[], None);
    std::thread::scope(|scope| {
        for c in 0..4 {
            let gateway = &gateway;
            scope.spawn(move || {
                let conversation = format!("own-{c}");
                let mut messages = Vec::new();
                for turn in 0..4 {
                    messages.push(user(&format!("c{c} turn {turn}")));
                    let (status, head, body) = gateway.post(
                        "/v1/chat/completions",
                        &[
                            ("authorization", "Bearer sk-own"),
                            ("x-ctxlog-conversation", &conversation),
                        ],
                        &json!({"model": "gpt-4o", "messages": messages}),
                    );
                    assert_eq!(status, 200, "{body}");
                    assert!(head.contains(&format!("x-ctxlog-seq: {}\r\n", 2 * turn + 2)));
                    messages.push(body["choices"][0]["message"].clone());
                }
            });
        }
    });
    gateway.kill();
    let tenants = tenants(env.root());
    for c in 0..4 {
        let texts: Vec<String> = log(&tenants[0], &format!("own-{c}"))
            .into_iter()
            .map(|e| e.1)
            .collect();
        let expected: Vec<String> = (0..4)
            .flat_map(|t| [format!("c{c} turn {t}"), format!("re: c{c} turn {t}")])
            .collect();
        assert_eq!(texts, expected);
    }
}

/// `GET /metrics` counts the calls in the Prometheus text format, and `--log-format json`
/// writes one access line per request on stdout: route, status, conversation and seq, never
/// the messages or the key.
#[test]
fn metrics_and_the_json_access_log_count_calls_without_content_or_keys() {
    let env = Env::new();
    let (upstream, _received) = standin(|_| Behaviour::Echo);
    let gateway = Gateway::start(&env, &upstream, &["--log-format", "json"], None);
    let key = ("authorization", "Bearer sk-metrics-secret");
    let (status, _, _) = gateway.post(
        "/v1/chat/completions",
        &[key, ("x-ctxlog-conversation", "counted")],
        &json!({"model": "gpt-4o", "messages": [user("a private question")]}),
    );
    assert_eq!(status, 200);
    // A system message after the conversation started: refused by the gateway itself.
    let late = json!({"role": "system", "content": "late"});
    let (status, _, _) = gateway.post(
        "/v1/chat/completions",
        &[key, ("x-ctxlog-conversation", "counted")],
        &json!({"model": "gpt-4o", "messages": [user("another start"), late]}),
    );
    assert_eq!(status, 400);
    let (status, metrics) = gateway.get("/metrics");
    assert_eq!(status, 200);
    for line in [
        "ctxlog_gateway_requests_total{route=\"chat\",status=\"200\"} 1",
        "ctxlog_gateway_requests_total{route=\"chat\",status=\"400\"} 1",
        "ctxlog_gateway_refused_total{route=\"chat\"} 1",
        "ctxlog_gateway_added_seconds_count{route=\"chat\"} 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} not in\n{metrics}"
        );
    }
    let sent = metrics
        .lines()
        .find_map(|l| l.strip_prefix("ctxlog_gateway_upstream_input_tokens_total{route=\"chat\"} "))
        .unwrap();
    assert!(sent.parse::<u64>().unwrap() > 0, "{metrics}");
    let log = gateway.stop();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert_eq!(lines[0]["route"], "/v1/chat/completions");
    assert_eq!(lines[0]["status"], 200);
    assert_eq!(lines[0]["conversation"], "counted");
    assert_eq!(lines[0]["seq"], 2);
    assert_eq!(lines[1]["status"], 400);
    assert!(
        !log.contains("private") && !log.contains("sk-metrics"),
        "{log}"
    );
}

/// A headerless chat call through `g` that leaves out the client's first `skip` messages
/// (a client that trims its own history): `text` and the reply are added to `messages`;
/// the conversation it went to.
fn trimmed(g: &Gateway, messages: &mut Vec<Value>, skip: usize, text: &str) -> String {
    messages.push(user(text));
    let request = json!({"model": "gpt-4o", "messages": messages[skip..]});
    let key = ("authorization", "Bearer sk-replicas");
    let (status, head, body) = g.post("/v1/chat/completions", &[key], &request);
    assert_eq!(status, 200, "{body}");
    messages.push(body["choices"][0]["message"].clone());
    header(&head, "x-ctxlog-conversation").to_owned()
}

/// Two gateway processes over one store directory: A serves a chat and a trimmed resend of
/// it (its lookup state is built); a chat started through B after that (B then stopped: a
/// file store's writer stays open and holds the conversation's lock) is continued through A
/// from a trimmed resend, found in the store's places index that B wrote; each message is
/// stored once.
#[test]
fn gateway_processes_over_one_store_directory_recognise_each_others_trimmed_chats() {
    let env = Env::new();
    let (upstream, _received) = standin(|_| Behaviour::Echo);
    let a = Gateway::start(&env, &upstream, &[], None);
    let b = Gateway::start(&env, &upstream, &[], None);
    let (mut first, mut later) = (Vec::new(), Vec::new());
    let first_name = trimmed(&a, &mut first, 0, "First on A");
    assert_eq!(trimmed(&a, &mut first, 0, "Second on A"), first_name);
    assert_eq!(trimmed(&a, &mut first, 2, "A, trimmed"), first_name);
    let later_name = trimmed(&b, &mut later, 0, "Started on B");
    assert_ne!(later_name, first_name);
    assert_eq!(trimmed(&b, &mut later, 0, "B's second"), later_name);
    b.kill();
    assert_eq!(
        trimmed(&a, &mut later, 2, "B's chat, trimmed, on A"),
        later_name
    );
    a.kill();
    let tenant = tenants(env.root()).pop().unwrap();
    assert_eq!(log(&tenant, &first_name), as_sent(&first));
    assert_eq!(log(&tenant, &later_name), as_sent(&later));
}

/// The value of response header `name` (lower-case) in `head`.
fn header<'a>(head: &'a str, name: &str) -> &'a str {
    head.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no {name} in {head}"))
        .trim()
}

/// Two gateways on different ports over one PostgreSQL store, and one of them restarted:
/// the store's secret (created once, by whichever started first) and recognition live in the
/// database, so a chat started through one replica continues through the other, with or
/// without the conversation header, a Responses id minted by one is accepted by the other,
/// and `ctxlog log` on the store holds each message and reply once, as the client sent and
/// received them.
#[test]
fn gateway_replicas_over_postgres_serve_one_conversation() {
    let Some(cluster) = pg::PgCluster::start() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let url = cluster.url("gw", cache.path());
    let (upstream, received) = standin(|_| Behaviour::Echo);
    let a = Gateway::start_on(&url, &upstream);
    let b = Gateway::start_on(&url, &upstream);
    let key = ("authorization", "Bearer sk-replicas");
    let chat = |g: &Gateway, name: Option<&str>, messages: &mut Vec<Value>, text: &str| {
        messages.push(user(text));
        let mut headers = vec![key];
        headers.extend(name.map(|n| ("x-ctxlog-conversation", n)));
        let request = json!({"model": "gpt-4o", "messages": messages});
        let (status, head, body) = g.post("/v1/chat/completions", &headers, &request);
        assert_eq!(status, 200, "{body}");
        messages.push(body["choices"][0]["message"].clone());
        header(&head, "x-ctxlog-conversation").to_owned()
    };
    let respond = |g: &Gateway, previous: Option<&str>, text: &str| {
        let mut request = json!({"model": "gpt-4o", "input": text});
        if let Some(previous) = previous {
            request["previous_response_id"] = json!(previous);
        }
        let (status, head, body) = g.post("/v1/responses", &[key], &request);
        assert_eq!(status, 200, "{body}");
        let id = body["id"].as_str().unwrap().to_owned();
        (header(&head, "x-ctxlog-conversation").to_owned(), id)
    };

    // Started through one replica, continued through the other.
    let (mut unnamed, mut named) = (Vec::new(), Vec::new());
    let chat_name = chat(&a, None, &mut unnamed, "Hello from replica A");
    assert_eq!(chat(&b, None, &mut unnamed, "And now from B"), chat_name);
    assert_eq!(chat(&b, Some("named"), &mut named, "Named on B"), "named");
    assert_eq!(chat(&a, Some("named"), &mut named, "Named on A"), "named");
    let (chain, first_id) = respond(&a, None, "Responses on A");
    let (in_b, second_id) = respond(&b, Some(&first_id), "Responses on B");
    assert_eq!(in_b, chain);

    // A serves a trimmed history (its lookup state is built); a chat started on B after
    // that, resent trimmed through A, continues on A.
    assert_eq!(trimmed(&a, &mut unnamed, 2, "A, trimmed"), chat_name);
    let mut later = Vec::new();
    let later_name = chat(&b, None, &mut later, "Started on B later");
    assert_eq!(chat(&b, None, &mut later, "B's second"), later_name);
    assert_eq!(
        trimmed(&a, &mut later, 2, "B's chat, trimmed, on A"),
        later_name
    );

    // A replica restarted finds all three.
    a.kill();
    let a = Gateway::start_on(&url, &upstream);
    assert_eq!(chat(&a, None, &mut unnamed, "A again"), chat_name);
    assert_eq!(
        chat(&a, Some("named"), &mut named, "Named on A again"),
        "named"
    );
    assert_eq!(
        respond(&a, Some(&second_id), "Responses on A again").0,
        chain
    );
    a.kill();
    b.kill();

    let sent: Vec<Value> = received.try_iter().collect();
    assert_eq!(sent.len(), 13);
    assert!(sent.iter().all(|s| s.get("previous_response_id").is_none()));
    let last = sent.last().unwrap().to_string();
    for text in [
        "Responses on A",
        "re: Responses on B",
        "Responses on A again",
    ] {
        assert!(last.contains(text), "the whole chain upstream: {last}");
    }

    // One API key: one tenant schema, holding each message once, in order.
    let schemas = cluster.psql(
        "SELECT schema_name FROM information_schema.schemata \
         WHERE schema_name LIKE 'gw\\_gw-%'",
    );
    let schemas: Vec<&str> = schemas.lines().collect();
    assert_eq!(schemas.len(), 1, "{schemas:?}");
    let tenant = cluster.url(schemas[0], cache.path());
    let stored =
        |conversation: &str| log_in(("--store", std::ffi::OsStr::new(&tenant)), conversation);
    assert_eq!(stored(&chat_name), as_sent(&unnamed));
    assert_eq!(stored(&later_name), as_sent(&later));
    assert_eq!(stored("named"), as_sent(&named));
    let texts: Vec<String> = stored(&chain).into_iter().map(|e| e.1).collect();
    let expected: Vec<String> = ["Responses on A", "Responses on B", "Responses on A again"]
        .iter()
        .flat_map(|t| [(*t).to_owned(), format!("re: {t}")])
        .collect();
    assert_eq!(texts, expected);
}
