//! Failure class: slow clients starving `ctxlog serve`. Under a 256-file limit, 1,000
//! connections that say nothing, send half a request, drip their headers a byte at a time or
//! drip their body used to hold every file descriptor and every connection, so that valid
//! clients timed out (`accept error: Too many open files`). The server guarantees: its
//! connection cap keeps within the file limit (a cap asked for above half the limit is
//! lowered, with a warning), slow connections are closed by the header timeout (a dripped
//! body is answered 408), and meanwhile 16 clients committing all get their answers, none
//! lost; it keeps running and stops cleanly.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

const SLOW: usize = 1000;
const CLIENTS: usize = 16;
const COMMITS: usize = 4;
/// How long a client waits for an answer, and the dripping for the server to close every
/// slow connection, before the test fails: a guard against hanging, not a measurement.
const GUARD: Duration = Duration::from_secs(180);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Connects and sends nothing.
    Idle,
    /// Sends half a request's headers, then nothing.
    Half,
    /// Sends a request's headers a byte at a time.
    HeaderDrip,
    /// Sends whole headers, then the body a byte at a time.
    BodyDrip,
}

struct Slow {
    kind: Kind,
    stream: TcpStream,
    received: Vec<u8>,
    closed: bool,
}

impl Slow {
    fn open(addr: &str, kind: Kind) -> Slow {
        let mut stream = TcpStream::connect(addr).unwrap();
        let start = match kind {
            Kind::Idle => String::new(),
            Kind::Half => {
                "POST /v1/conversations/load/commits HTTP/1.1\r\nHost: 127.0.0.1\r\n".into()
            }
            Kind::HeaderDrip => "POST /v1/conversations/load/commits HTTP/1.1\r\nX-Drip: ".into(),
            Kind::BodyDrip => format!(
                "POST /v1/conversations/load/commits HTTP/1.1\r\nHost: {addr}\r\nContent-Type: \
                 application/json\r\nContent-Length: 100000\r\n\r\n{{\"user\":\""
            ),
        };
        stream.write_all(start.as_bytes()).unwrap();
        stream.set_nonblocking(true).unwrap();
        Slow {
            kind,
            stream,
            received: Vec::new(),
            closed: false,
        }
    }

    /// Reads what has arrived; notes a close (end of stream or reset).
    fn read(&mut self) {
        let mut buf = [0u8; 1024];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => break self.closed = true,
                Ok(n) => self.received.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => break self.closed = true,
            }
        }
    }

    /// One more byte, for the drippers.
    fn drip(&mut self) {
        let byte: &[u8] = match self.kind {
            Kind::HeaderDrip => b"a",
            Kind::BodyDrip => b" ",
            Kind::Idle | Kind::Half => return,
        };
        match self.stream.write(byte) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            // The server closed it: what it sent before is still to be read.
            Err(_) => self.read(),
        }
    }
}

/// The server, killed if the test fails before it stops it.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Lets this process hold the slow connections, whatever its own soft limit.
fn allow_open_files(n: u64) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|c| c < n) {
        let raised = limit.maximum.map_or(n, |max| max.min(n));
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(raised),
                maximum: limit.maximum,
            },
        )
        .unwrap();
        assert!(raised >= n, "this test needs `ulimit -n` of at least {n}");
    }
}

/// One commit over a fresh connection; its status.
fn commit(addr: &str, client: usize, turn: usize) -> u16 {
    let body =
        serde_json::json!({"user": format!("client {client} turn {turn}"), "assistant": "ok"});
    let body = body.to_string();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(GUARD)).unwrap();
    write!(
        stream,
        "POST /v1/conversations/load/commits HTTP/1.1\r\nHost: {addr}\r\nContent-Type: \
         application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// One GET over a fresh connection; the body.
fn get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(GUARD)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    reply.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// Drips (one byte every 100 ms: the drip itself) until the server has closed every slow
/// connection.
fn drip_until_closed(slow: &mut [Slow]) {
    let start = Instant::now();
    while slow.iter().any(|s| !s.closed) {
        let open: Vec<Kind> = slow.iter().filter(|s| !s.closed).map(|s| s.kind).collect();
        assert!(
            start.elapsed() < GUARD,
            "{} slow connections never closed: {open:?}",
            open.len()
        );
        std::thread::sleep(Duration::from_millis(100));
        for s in slow.iter_mut().filter(|s| !s.closed) {
            s.read();
            if !s.closed {
                s.drip();
            }
        }
    }
}

#[test]
fn a_thousand_slow_connections_do_not_starve_sixteen_committers() {
    allow_open_files(SLOW as u64 + 256);
    let env = common::Env::new();
    // The real binary under a 256-file limit, with 1 s timeouts; the cap asked for is more
    // than that limit allows.
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"ulimit -n 256 && exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_ctxlog"))
        .arg("--root")
        .arg(env.root())
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--header-timeout-secs",
            "1",
        ])
        .args(["--body-timeout-secs", "1", "--max-connections", "1000"])
        .env_remove("CTXLOG_TOKENS");
    let (child, mut stderr, addr) = common::spawn_server(cmd);
    let mut server = Running(child);
    let log = std::thread::spawn(move || {
        let mut log = String::new();
        while stderr.read_line(&mut log).unwrap() > 0 {}
        log
    });

    let kinds = [Kind::Idle, Kind::Half, Kind::HeaderDrip, Kind::BodyDrip];
    let mut slow: Vec<Slow> = (0..SLOW).map(|i| Slow::open(&addr, kinds[i % 4])).collect();
    // The committers queue behind every slow connection.
    let committers: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                (0..COMMITS)
                    .map(|turn| commit(&addr, client, turn))
                    .collect::<Vec<u16>>()
            })
        })
        .collect();
    drip_until_closed(&mut slow);
    for committer in committers {
        assert_eq!(committer.join().unwrap(), vec![200; COMMITS]);
    }

    // Nothing lost: every turn is in the log, once.
    let log_json: serde_json::Value =
        serde_json::from_str(&get(&addr, "/v1/conversations/load/events?limit=1000")).unwrap();
    assert_eq!(log_json["last_seq"], 2 * CLIENTS * COMMITS);
    let mut users: Vec<&str> = log_json["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "user")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    users.sort_unstable();
    users.dedup();
    assert_eq!(users.len(), CLIENTS * COMMITS);
    // Cut without an answer, except the dripped bodies: 408.
    for s in &slow {
        let text = String::from_utf8_lossy(&s.received);
        match s.kind {
            Kind::BodyDrip => assert!(text.starts_with("HTTP/1.1 408"), "{text}"),
            _ => assert_eq!(text, "", "{:?}", s.kind),
        }
    }

    // Still serving, and a clean stop.
    assert_eq!(get(&addr, "/healthz"), r#"{"status":"ok"}"#);
    assert!(
        Command::new("kill")
            .args(["-TERM", &server.0.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let status = server.0.wait().unwrap();
    let log = log.join().unwrap();
    assert!(status.success(), "{status}: {log}");
    assert!(
        log.contains("at most 128 connections at once, not 1000"),
        "{log}"
    );
    assert!(!log.contains("Too many open files"), "{log}");
}
