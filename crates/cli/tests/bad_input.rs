//! Bad input (docs/design.md#9-bad-input-and-faults): every rejected command prints one clear line
//! on stderr, exits non-zero, and leaves every stored byte exactly as it was.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, snapshot, stderr};

fn catalogue() -> Vec<(&'static str, Vec<u8>)> {
    let tool_turn = |result: &str| {
        format!(
            r#"{{"events":[{{"kind":"user","text":"go"}},{{"kind":"tool_call","call_id":"c1","tool":"sh","arguments":{{}}}},{result}]}}"#
        )
        .into_bytes()
    };
    vec![
        ("malformed JSON", b"{\"user\":".to_vec()),
        ("not an object", b"[1,2]".to_vec()),
        ("invalid UTF-8", b"{\"user\":\"caf\xe9\"}".to_vec()),
        ("unknown kind", br#"{"events":[{"kind":"shout","text":"x"}]}"#.to_vec()),
        ("unknown key", br#"{"usr":"typo"}"#.to_vec()),
        ("empty turn", br#"{"events":[]}"#.to_vec()),
        ("empty user text", br#"{"user":""}"#.to_vec()),
        ("empty input", b"".to_vec()),
        (
            "result without its call",
            br#"{"events":[{"kind":"user","text":"go"},{"kind":"tool_result","call_id":"zz","tool":"sh","status":"ok","text":"x"}]}"#.to_vec(),
        ),
        (
            "artifact ref with ..",
            tool_turn(r#"{"kind":"tool_result","call_id":"c1","tool":"sh","status":"ok","text":"x","artifact":{"name":"../../etc/passwd","bytes":1}}"#),
        ),
        (
            "absolute artifact ref",
            tool_turn(r#"{"kind":"tool_result","call_id":"c1","tool":"sh","status":"ok","text":"x","artifact":{"name":"/etc/passwd","bytes":1}}"#),
        ),
        (
            "system marker from an application",
            br#"{"events":[{"kind":"system","marker":{"type":"import","source":"x"}}]}"#.to_vec(),
        ),
    ]
}

#[test]
fn every_bad_turn_is_refused_with_one_line_and_no_bytes_changed() {
    let env = Env::new();
    env.commit("chat", "first", "reply");
    let before = snapshot(env.root());
    for (what, input) in catalogue() {
        let out = env.run(&["commit", "chat"], &input);
        assert_eq!(code(&out), 1, "{what}: {}", stderr(&out));
        let msg = stderr(&out);
        assert_eq!(msg.trim_end().lines().count(), 1, "{what}: one line: {msg}");
        assert!(msg.starts_with("ctxlog: "), "{what}: {msg}");
        assert_eq!(before, snapshot(env.root()), "{what}: stored bytes changed");
    }
    // The conversation still works after all that.
    env.commit("chat", "second", "reply");
}

#[test]
fn a_refused_first_commit_leaves_no_conversation_behind() {
    let env = Env::new();
    let root = env.root().join("fresh-root");
    for (what, input) in catalogue() {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ctxlog"))
            .arg("--root")
            .arg(&root)
            .args(["commit", "newconv", "/dev/stdin"])
            .stdin(std::fs::File::open(write_temp(&env, &input)).unwrap())
            .output()
            .unwrap();
        assert_eq!(code(&out), 1, "{what}: {}", stderr(&out));
        assert!(
            !root.exists(),
            "{what}: a rejected commit created {}",
            root.display()
        );
    }
    // Read-only commands create nothing either.
    for args in [
        &["log", "newconv"][..],
        &["recall", "newconv", "x"],
        &["verify", "newconv"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ctxlog"))
            .arg("--root")
            .arg(&root)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(code(&out), 1, "{args:?}");
        assert!(!root.exists(), "{args:?} created the root");
    }
}

fn write_temp(env: &Env, bytes: &[u8]) -> std::path::PathBuf {
    let path = env.root().join("input.json");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn bad_conversation_names_are_refused_before_any_file_is_touched() {
    let env = Env::new();
    let long = "x".repeat(65);
    for name in [
        "a/b",
        "..",
        "../escape",
        "a\u{1}b",
        "with space",
        long.as_str(),
        "",
    ] {
        let out = env.run(&["commit", name], br#"{"user":"hi"}"#);
        assert_eq!(code(&out), 2, "{name:?}: a bad name is a usage error");
        assert!(
            stderr(&out).contains("invalid conversation name"),
            "{name:?}: {}",
            stderr(&out)
        );
    }
    assert!(
        snapshot(env.root()).is_empty(),
        "nothing was written anywhere"
    );
}

#[test]
fn reading_a_missing_conversation_is_a_clear_error_and_projecting_one_needs_no_history() {
    let env = Env::new();
    for args in [
        &["log", "nope"][..],
        &["verify", "nope"],
        &["recall", "nope", "x"],
    ] {
        let out = env.run(args, b"");
        assert_eq!(code(&out), 1, "{args:?}");
        assert!(
            stderr(&out).contains("no conversation \"nope\""),
            "{}",
            stderr(&out)
        );
    }
    // Projecting for a conversation with no history yet is the first call of a new chat: the
    // body holds the mandatory input alone, and nothing is created.
    let body = env.ok(
        &["project", "nope", "--input", "hi", "--system", "Be brief."],
        b"",
    );
    assert_eq!(
        String::from_utf8(body).unwrap(),
        r#"{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]}"#
    );
    assert!(snapshot(env.root()).is_empty());
}

#[test]
fn a_refused_first_commit_removes_every_directory_it_created() {
    let env = Env::new();
    let root = env.root().join("a").join("b").join("store");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ctxlog"))
        .arg("--root")
        .arg(&root)
        .args(["commit", "c1", "/dev/null"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        !env.root().join("a").exists(),
        "created ancestors were left behind"
    );
}

#[test]
fn erase_never_creates_or_deletes_what_is_not_a_conversation() {
    let env = Env::new();
    std::fs::create_dir_all(env.root().join("notaconv")).unwrap();
    std::fs::write(env.root().join("notaconv").join("keep.txt"), b"mine").unwrap();
    let before = snapshot(env.root());
    for args in [
        &["erase", "notaconv", "--seqs", "1"][..],
        &["erase", "notaconv", "--all"],
    ] {
        let out = env.run(args, b"");
        assert_eq!(code(&out), 1, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("no conversation"), "{}", stderr(&out));
    }
    assert_eq!(before, snapshot(env.root()));
}
