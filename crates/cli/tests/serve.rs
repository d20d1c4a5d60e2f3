//! `ctxlog serve` as a process: it refuses to listen beyond loopback without tokens, serves on
//! a free port, and stops cleanly (exit 0) on SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

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

#[cfg(unix)]
#[test]
fn serves_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = ctxlog()
        .arg("--root")
        .arg(dir.path())
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "serve exited early"
        );
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    let mut stream = TcpStream::connect(&addr).unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
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
