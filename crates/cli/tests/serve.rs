//! `ctxlog serve` as a process: it refuses to listen beyond loopback without tokens (and
//! refuses allowed origins without them), listens on a free port given as an address or a
//! host name, and stops cleanly (exit 0) on SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Command;

mod common;

fn ctxlog() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ctxlog"));
    cmd.env_remove("CTXLOG_TOKENS");
    cmd
}

#[test]
fn refuses_to_listen_beyond_loopback_without_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let out = ctxlog()
        .arg("--root")
        .arg(dir.path())
        .args(["serve", "--addr", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0") && stderr.contains("--tokens"),
        "{stderr}"
    );
    // A tokens file that is not one makes it refuse too, without echoing the file's content.
    let tokens = dir.path().join("tokens.txt");
    std::fs::write(&tokens, "secret-but-short alice extra\n").unwrap();
    let out = ctxlog()
        .arg("--root")
        .arg(dir.path())
        .args(["serve", "--addr", "127.0.0.1:0", "--tokens"])
        .arg(&tokens)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("secret-but-short"));
}

#[test]
fn refuses_origins_without_tokens_and_addresses_it_cannot_resolve() {
    let dir = tempfile::tempdir().unwrap();
    for (args, expected) in [
        (
            &["--allow-origin", "https://app.example.com"][..],
            "allowed origins (https://app.example.com) need tokens",
        ),
        (
            &["--allow-origin", "app.example.com"],
            "invalid value 'app.example.com'",
        ),
        (&["--addr", "localhost"], "give HOST:PORT"),
    ] {
        let out = ctxlog()
            .arg("--root")
            .arg(dir.path())
            .arg("serve")
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(expected),
            "{args:?}: {stderr}"
        );
    }
}

#[cfg(unix)]
#[test]
fn listens_on_a_host_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = ctxlog();
    cmd.arg("--root")
        .arg(dir.path())
        .args(["serve", "--addr", "localhost:0"]);
    let (mut child, _stderr, addr) = common::spawn_server(cmd);
    let reply = get(&addr, "/healthz", None);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Starts `ctxlog serve` on a free loopback port; returns the child, its stderr and address.
fn start(
    root: &std::path::Path,
    tokens: Option<&str>,
) -> (
    std::process::Child,
    BufReader<std::process::ChildStderr>,
    String,
) {
    let mut cmd = ctxlog();
    if let Some(tokens) = tokens {
        cmd.env("CTXLOG_TOKENS", tokens);
    }
    cmd.arg("--root")
        .arg(root)
        .args(["serve", "--addr", "127.0.0.1:0"]);
    common::spawn_server(cmd)
}

/// One GET over a fresh connection; the whole reply.
fn get(addr: &str, path: &str, token: Option<&str>) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply
}

#[cfg(unix)]
#[test]
fn tokens_from_the_environment_are_required() {
    let dir = tempfile::tempdir().unwrap();
    let token = "env-token-0123456789abcdef";
    let (mut child, _stderr, addr) = start(dir.path(), Some(&format!("{token} team-a")));
    assert!(get(&addr, "/v1/conversations", None).starts_with("HTTP/1.1 401"));
    let wrong = get(
        &addr,
        "/v1/conversations",
        Some("env-token-0123456789abcdeX"),
    );
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    let ok = get(&addr, "/v1/conversations", Some(token));
    assert!(
        ok.starts_with("HTTP/1.1 200") && ok.ends_with(r#"{"conversations":[]}"#),
        "{ok}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[cfg(unix)]
#[test]
fn serves_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut stderr, addr) = start(dir.path(), None);
    let reply = get(&addr, "/healthz", None);
    assert!(
        reply.starts_with("HTTP/1.1 200") && reply.ends_with(r#"{"status":"ok"}"#),
        "{reply}"
    );
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{status}: {rest}");
    assert!(rest.contains("stopped"), "{rest}");
}
