//! Helpers shared by the CLI integration tests: run the real `ctxlog` binary, snapshot a
//! directory's bytes.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Output, Stdio};

/// A store directory that lives as long as the test.
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn conv_dir(&self, name: &str) -> PathBuf {
        self.root().join(name)
    }

    /// Starts `ctxlog --root <root> ARGS`, its stdin, stdout and stderr piped.
    pub fn spawn<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Child {
        Command::new(env!("CARGO_BIN_EXE_ctxlog"))
            .arg("--root")
            .arg(self.root())
            .args(args)
            .env_remove("CTXLOG_ROOT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Runs `ctxlog --root <root> ARGS` with `stdin`.
    pub fn run(&self, args: &[&str], stdin: &[u8]) -> Output {
        let mut child = self.spawn(args);
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        child.wait_with_output().unwrap()
    }

    /// Runs and asserts exit 0, returning stdout.
    pub fn ok(&self, args: &[&str], stdin: &[u8]) -> Vec<u8> {
        let out = self.run(args, stdin);
        assert!(
            out.status.success(),
            "ctxlog {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// Commits a shorthand turn.
    pub fn commit(&self, conv: &str, user: &str, assistant: &str) {
        let turn = serde_json::json!({"user": user, "assistant": assistant}).to_string();
        self.ok(&["commit", conv], turn.as_bytes());
    }
}

/// Every file under `dir` (recursively) with its bytes.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries {
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

/// The exit code, which must exist (the process was not killed).
pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap()
}

/// Stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Spawns `cmd` (a `ctxlog … serve --addr 127.0.0.1:0`) with its stderr piped and waits for its
/// "listening on" line: the child, its stderr (keep draining it so the server never blocks on a
/// full pipe) and the address it listens on.
pub fn spawn_server(mut cmd: Command) -> (Child, BufReader<ChildStderr>, String) {
    let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
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
    (child, stderr, addr)
}
