//! The exit codes scripts rely on (docs/design.md#i2-command-line), each produced by the real
//! binary: 2 usage, 3 mandatory input over budget, 4 locked by another writer, 5 corruption, 6 id
//! conflict. Every failure prints one line on stderr (or one JSON object with `--json`) and leaves
//! the stored bytes as they were.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, snapshot, stderr};

#[test]
fn usage_errors_exit_2() {
    let env = Env::new();
    for args in [
        &["commit"][..],
        &["project", "c", "--input", "x", "--max-bytes", "0"],
        &["project", "c", "--input", "x", "--max-bytes", "-5"],
        &["project", "c", "--input", "x", "--format", "xml"],
        &["project", "c", "--input", "x", "--tokenizer", "p50k"],
        &["recall", "c", "--limit", "0"],
        &[
            "project",
            "c",
            "--input",
            "x",
            "--recall",
            "4611686018427387904",
        ],
        &["project", "c"],
        &["no-such-command"],
    ] {
        let out = env.run(args, b"");
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_second_writer_gets_exit_4_at_once() {
    let env = Env::new();
    env.commit("chat", "hello", "hi");
    let store = ctxlog::Store::open(env.root()).unwrap();
    let held = store.conversation("chat").unwrap();
    let before = snapshot(env.root());
    let out = env.run(&["commit", "chat"], br#"{"user":"second writer"}"#);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(stderr(&out).contains("lock"), "{}", stderr(&out));
    assert_eq!(before, snapshot(env.root()));
    // Readers are never blocked by the writer.
    let log = env.ok(&["log", "chat"], b"");
    assert!(String::from_utf8(log).unwrap().contains("hello"));
    drop(held);
    // The lock is let go when the writer is dropped, at once: even while other tests of this
    // binary are spawning children that share our descriptors until they exec.
    let out = env.run(&["commit", "chat"], br#"{"user":"now it works"}"#);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn same_id_same_content_replays_and_other_content_exits_6() {
    let env = Env::new();
    let first = env.ok(
        &["commit", "chat", "--id", "t1"],
        br#"{"user":"a","assistant":"b"}"#,
    );
    let before = snapshot(env.root());
    let again = env.ok(
        &["commit", "chat", "--id", "t1"],
        br#"{"user":"a","assistant":"b"}"#,
    );
    let (first, again): (serde_json::Value, serde_json::Value) = (
        serde_json::from_slice(&first).unwrap(),
        serde_json::from_slice(&again).unwrap(),
    );
    assert_eq!(first["first_seq"], again["first_seq"]);
    assert_eq!(first["last_seq"], again["last_seq"]);
    assert_eq!(again["replayed"], true);
    assert_eq!(before, snapshot(env.root()), "a replay writes nothing");

    let out = env.run(&["commit", "chat", "--id", "t1"], br#"{"user":"other"}"#);
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    assert_eq!(before, snapshot(env.root()), "a conflict writes nothing");
}

#[test]
fn a_flipped_bit_exits_5_naming_offset_and_seq() {
    let env = Env::new();
    for i in 0..5 {
        env.commit("chat", &format!("question {i}"), &format!("answer {i}"));
    }
    let log = env.conv_dir("chat").join("ledger.log");
    let mut bytes = std::fs::read(&log).unwrap();
    // A byte inside the second record's payload: well before the tail.
    let at = bytes.len() / 4;
    bytes[at] ^= 0x10;
    std::fs::write(&log, &bytes).unwrap();
    let before = snapshot(env.root());

    let out = env.run(&["verify", "chat"], b"");
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    let msg = stderr(&out);
    assert!(msg.contains("offset"), "{msg}");
    assert!(msg.contains("seq"), "{msg}");
    assert_eq!(msg.lines().count(), 1, "one line: {msg}");

    // Reading the damaged record fails closed too (open checks only the tail, so that it
    // costs in proportion to what is read; every read checks its record's checksum), and
    // nothing is repaired behind the user's back.
    let out = env.run(&["log", "chat"], b"");
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert_eq!(before, snapshot(env.root()));
}

#[test]
fn usage_errors_are_one_line_or_one_json_object() {
    let env = Env::new();
    let out = env.run(&["project", "c", "--max-bytes", "ten"], b"");
    assert_eq!(code(&out), 2);
    let msg = stderr(&out);
    assert_eq!(msg.trim_end().lines().count(), 1, "{msg}");
    assert!(
        msg.contains("--max-bytes") && msg.contains("--help"),
        "{msg}"
    );

    let out = env.run(
        &["--json", "project", "c", "--input", "x", "--format", "xml"],
        b"",
    );
    assert_eq!(code(&out), 2);
    let err: serde_json::Value = serde_json::from_str(stderr(&out).trim()).unwrap();
    assert_eq!(err["error"], "usage");

    let help = env.run(&["project", "--help"], b"");
    assert_eq!(code(&help), 0);
    assert!(String::from_utf8_lossy(&help.stdout).contains("--max-tokens"));
}

#[test]
fn a_missing_artifact_makes_verify_exit_5() {
    let env = Env::new();
    let big = "x".repeat(40_000);
    let turn = serde_json::json!({"events":[
        {"kind":"user","text":"scan"},
        {"kind":"tool_call","call_id":"c1","tool":"scan","arguments":{}},
        {"kind":"tool_result","call_id":"c1","tool":"scan","status":"ok","text":big}]});
    env.ok(&["commit", "chat"], turn.to_string().as_bytes());
    env.ok(&["verify", "chat"], b"");
    let artifacts = env.conv_dir("chat").join("artifacts");
    for entry in std::fs::read_dir(&artifacts).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let out = env.run(&["verify", "chat"], b"");
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(stderr(&out).contains("artifact"), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("found problems"));
}

#[test]
fn a_closed_stdout_is_success_and_stops_early() {
    let env = Env::new();
    for i in 0..300 {
        env.ok(
            &["commit", "chat"],
            format!(r#"{{"user":"line {i}"}}"#).as_bytes(),
        );
    }
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; \"{}\" --root \"{}\" log chat | head -n 1",
            env!("CARGO_BIN_EXE_ctxlog"),
            env.root().display()
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn over_budget_exits_3_and_json_errors_are_one_object() {
    let env = Env::new();
    env.commit("chat", "hello", "hi");
    let out = env.run(
        &[
            "--json",
            "project",
            "chat",
            "--input",
            "a long question",
            "--max-bytes",
            "10",
        ],
        b"",
    );
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let err: serde_json::Value = serde_json::from_str(stderr(&out).trim()).unwrap();
    assert_eq!(err["code"], 3);
    let message = err["message"].as_str().unwrap();
    assert!(message.contains("needs"), "{err}");
    // A byte budget without --report counts no tokens, except for this error, which names them.
    assert!(message.contains(" o200k tokens"), "{err}");
    assert!(!message.contains(" 0 o200k tokens"), "{err}");
    assert!(out.stdout.is_empty(), "no body on failure");
}
