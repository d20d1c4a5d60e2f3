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

    /// `ctxlog --root <root> ARGS`, not yet started, its stdin, stdout and stderr piped (add
    /// environment variables or other settings before [`feed`] or `spawn`).
    pub fn command<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ctxlog"));
        command
            .arg("--root")
            .arg(self.root())
            .args(args)
            .env_remove("CTXLOG_ROOT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Starts `ctxlog --root <root> ARGS`, its stdin, stdout and stderr piped.
    pub fn spawn<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Child {
        self.command(args).spawn().unwrap()
    }

    /// Runs `ctxlog --root <root> ARGS` with `stdin`.
    pub fn run(&self, args: &[&str], stdin: &[u8]) -> Output {
        feed(self.command(args), stdin)
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

/// Runs `command` (stdio piped) to completion with `stdin` as its input.
///
/// The input is written from a thread of its own while the output is read, so neither side
/// can block the other on a full pipe; and a child that exits without reading all of it (a
/// command refused before it reads its input) is not a failure of the harness: the broken
/// pipe is ignored, and what the child printed and its exit status are what the test checks.
pub fn feed(mut command: Command, stdin: &[u8]) -> Output {
    let mut child = command.spawn().unwrap();
    let writer = write_stdin(&mut child, stdin.to_vec());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// Writes `input` to the child's stdin from a new thread and closes it. A broken pipe (the
/// child stopped reading, or exited) is not an error; any other write error is.
pub fn write_stdin(child: &mut Child, input: Vec<u8>) -> std::thread::JoinHandle<()> {
    let mut stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || match stdin.write_all(&input) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("writing stdin: {e}"),
        _ => {}
    })
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

impl Env {
    /// A new store holding the damage tests' conversation `conv` ([`five_commits`]).
    pub fn with_five_commits(conv: &str) -> Env {
        let env = Env::new();
        for (id, turn) in five_commits() {
            env.ok(&["commit", conv, "--id", &id], turn.as_bytes());
        }
        env
    }

    /// `conv`'s log bytes and where `needle` first occurs in them (it must).
    fn log_with(&self, conv: &str, needle: &[u8]) -> (PathBuf, Vec<u8>, usize) {
        let log = self.conv_dir(conv).join("ledger.log");
        let bytes = std::fs::read(&log).unwrap();
        let at = bytes
            .windows(needle.len())
            .position(|w| w == needle)
            .unwrap_or_else(|| panic!("{} is not in the log", String::from_utf8_lossy(needle)));
        (log, bytes, at)
    }

    /// Damages `conv`'s log in place: `mask` XORed into the byte where `needle` starts.
    pub fn flip_in_log(&self, conv: &str, needle: &[u8], mask: u8) {
        let (log, mut bytes, at) = self.log_with(conv, needle);
        bytes[at] ^= mask;
        std::fs::write(&log, &bytes).unwrap();
    }

    /// Cuts `conv`'s log where `needle` starts (inside its record).
    pub fn cut_log_at(&self, conv: &str, needle: &[u8]) {
        let (log, bytes, at) = self.log_with(conv, needle);
        std::fs::write(&log, &bytes[..at]).unwrap();
    }
}

/// The damage tests' conversation, as (commit id, commit JSON): five commits with ids t1
/// (seqs 1-2), t2 (3-6, a 29 KB tool result stored as an artifact at seq 5), t3 (7-9, a
/// pinned note), t4 (10-11), t5 (12-13).
pub fn five_commits() -> Vec<(String, String)> {
    let big = "tool output line\n".repeat(1_800);
    let turns = [
        serde_json::json!({"events":[{"kind":"user","text":"first question"},
            {"kind":"assistant","text":"first answer"}]}),
        serde_json::json!({"events":[{"kind":"user","text":"run the scan"},
            {"kind":"tool_call","call_id":"c1","tool":"scan","arguments":{}},
            {"kind":"tool_result","call_id":"c1","tool":"scan","status":"ok","text":big},
            {"kind":"assistant","text":"scan done"}]}),
        serde_json::json!({"events":[{"kind":"user","text":"remember the code"},
            {"kind":"note","text":"the code is ZX-81","pinned":true},
            {"kind":"assistant","text":"noted the code"}]}),
        serde_json::json!({"events":[{"kind":"user","text":"fourth question"},
            {"kind":"assistant","text":"fourth answer"}]}),
        serde_json::json!({"events":[{"kind":"user","text":"fifth question"},
            {"kind":"assistant","text":"fifth answer"}]}),
    ];
    turns
        .iter()
        .enumerate()
        .map(|(i, turn)| (format!("t{}", i + 1), turn.to_string()))
        .collect()
}
