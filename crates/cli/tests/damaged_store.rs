//! One damaged conversation never takes down the store, damage gets the right class wherever
//! it surfaces, and every damage error says what to run next (docs/design.md#l11-repair).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, snapshot, stderr};
use serde_json::Value;

/// Flips one byte inside the record holding `needle` in `conv`'s log.
fn flip(env: &Env, conv: &str, needle: &[u8]) {
    env.flip_in_log(conv, needle, 0x01);
}

/// `healthy`, `flipped` (its last record damaged) and `empty` (a 0-byte `ledger.log`).
fn store_with_damage() -> Env {
    let env = Env::new();
    for conv in ["healthy", "flipped", "empty"] {
        env.commit(conv, "first question", "first answer");
        env.commit(conv, "second question", "second answer");
    }
    flip(&env, "flipped", b"second answer");
    std::fs::write(env.conv_dir("empty").join("ledger.log"), b"").unwrap();
    env
}

fn json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

#[test]
fn list_shows_the_healthy_conversations_and_marks_the_damaged_ones() {
    let env = store_with_damage();
    let list = json(&env.ok(&["list", "--json"], b""));
    let by_name = |name: &str| {
        list["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} missing from {list}"))
    };
    let healthy = by_name("healthy");
    assert_eq!(healthy["events"], 4);
    assert!(healthy.get("damage").is_none(), "{healthy}");
    let flipped = by_name("flipped");
    let damage = flipped["damage"].as_str().unwrap();
    assert!(damage.contains("seq 4"), "{damage}");
    assert!(
        !damage.contains(env.root().to_str().unwrap()),
        "no path: {damage}"
    );
    assert!(by_name("empty")["damage"].is_string(), "{list}");

    let text = String::from_utf8(env.ok(&["list"], b"")).unwrap();
    assert!(text.contains("healthy"), "{text}");
    assert!(
        text.contains("flipped") && text.contains("damaged"),
        "{text}"
    );
}

#[test]
fn store_wide_retention_passes_over_a_damaged_conversation() {
    let env = store_with_damage();
    for dry_run in [true, false] {
        let before = snapshot(&env.conv_dir("flipped"));
        let mut args = vec!["gc", "--all", "--keep-turns", "1"];
        if dry_run {
            args.push("--dry-run");
        }
        let out = json(&env.ok(&args, b""));
        let entries = out["conversations"].as_array().unwrap();
        let entry = |name: &str| entries.iter().find(|c| c["conversation"] == name).unwrap();
        assert_eq!(entry("healthy")["seqs_removed"], 2, "{out}");
        assert!(entry("healthy").get("damage").is_none(), "{out}");
        assert!(entry("flipped")["damage"].is_string(), "{out}");
        assert!(entry("empty")["damage"].is_string(), "{out}");
        assert_eq!(before, snapshot(&env.conv_dir("flipped")), "untouched");
    }
    let log = String::from_utf8(env.ok(&["log", "healthy"], b"")).unwrap();
    assert!(!log.contains("first question"), "{log}");
    assert!(log.contains("second question"), "{log}");
}

/// Regression: a damaged last record made `commit` say `I/O error on : ledger corrupt …`
/// (an empty path, exit 1): it is corruption, exit 5, naming the seq and what to run.
#[test]
fn a_commit_onto_a_damaged_last_record_is_corrupt() {
    let env = store_with_damage();
    let before = snapshot(&env.conv_dir("flipped"));
    let turn = br#"{"user":"third","assistant":"three"}"#;
    let out = env.run(&["commit", "flipped"], turn);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    let msg = stderr(&out);
    assert!(!msg.contains("I/O error on :"), "{msg}");
    assert!(msg.contains("seq 4"), "{msg}");
    assert!(msg.contains("`ctxlog verify flipped`"), "{msg}");
    assert_eq!(before, snapshot(&env.conv_dir("flipped")));

    let out = env.run(&["--json", "commit", "flipped"], turn);
    let err: Value = serde_json::from_str(stderr(&out).trim()).unwrap();
    assert_eq!(err["error"], "corrupt", "{err}");
    assert_eq!(err["code"], 5, "{err}");
}

#[test]
fn every_reader_of_a_damaged_record_names_the_next_command() {
    let env = store_with_damage();
    for args in [
        &["log", "flipped"][..],
        &["verify", "flipped"],
        &["export", "flipped"],
        &[
            "project",
            "flipped",
            "--input",
            "hi",
            "--max-bytes",
            "100000",
        ],
    ] {
        let out = env.run(args, b"");
        assert_eq!(code(&out), 5, "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("`ctxlog verify flipped`"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// Regression: a missing artifact was `bad_input` (exit 1): the event referencing it is in
/// the ledger, so the artifact was lost: corruption, exit 5.
#[test]
fn a_missing_artifact_is_corrupt_for_every_reader() {
    let env = Env::new();
    let big = "x".repeat(40_000);
    let turn = serde_json::json!({"events":[
        {"kind":"user","text":"scan"},
        {"kind":"tool_call","call_id":"c1","tool":"scan","arguments":{}},
        {"kind":"tool_result","call_id":"c1","tool":"scan","status":"ok","text":big}]});
    env.ok(&["commit", "chat"], turn.to_string().as_bytes());
    for entry in std::fs::read_dir(env.conv_dir("chat").join("artifacts")).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let out = env.run(&["--json", "export", "chat"], b"");
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    let err: Value = serde_json::from_str(stderr(&out).trim()).unwrap();
    assert_eq!(err["error"], "corrupt", "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("missing"),
        "{err}"
    );
    let verify = env.run(&["--json", "verify", "chat"], b"");
    assert_eq!(code(&verify), 5, "{}", stderr(&verify));
    assert_eq!(json(&verify.stdout)["verdict"], "damaged");
}

#[test]
fn verify_gives_a_verdict_and_exit_8_for_a_torn_tail() {
    let env = Env::new();
    env.commit("chat", "one", "two");
    let verify = json(&env.ok(&["verify", "chat", "--json"], b""));
    assert_eq!(verify["verdict"], "ok", "{verify}");

    let log = env.conv_dir("chat").join("ledger.log");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.extend_from_slice(&[0x5a; 20]);
    std::fs::write(&log, &bytes).unwrap();
    let out = env.run(&["verify", "chat", "--json"], b"");
    assert_eq!(code(&out), 8, "{}", stderr(&out));
    assert_eq!(json(&out.stdout)["verdict"], "attention");
    assert!(stderr(&out).contains("torn tail"), "{}", stderr(&out));
    let text = env.run(&["verify", "chat"], b"");
    assert_eq!(code(&text), 8);
    assert!(String::from_utf8_lossy(&text.stdout).starts_with("needs attention"));
}

/// `check_on_open` in `ctxlog.toml`: a writer checks every record when it opens, so a commit
/// onto a log damaged anywhere is refused; without it the append check sees only the tail.
#[test]
fn check_on_open_in_the_configuration_refuses_a_commit_onto_middle_damage() {
    let env = Env::new();
    for i in 0..3 {
        env.commit("chat", &format!("question {i}"), &format!("answer {i}"));
    }
    flip(&env, "chat", b"question 1");
    let turn = br#"{"user":"more","assistant":"reply"}"#;
    std::fs::write(
        env.root().join("ctxlog.toml"),
        "[ledger]\ncheck_on_open = true\n",
    )
    .unwrap();
    let before = snapshot(&env.conv_dir("chat"));
    let out = env.run(&["commit", "chat"], turn);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(stderr(&out).contains("seq 3"), "{}", stderr(&out));
    assert_eq!(before, snapshot(&env.conv_dir("chat")), "nothing written");

    std::fs::remove_file(env.root().join("ctxlog.toml")).unwrap();
    let out = env.run(&["commit", "chat"], turn);
    assert_eq!(code(&out), 0, "the tail alone checks out: {}", stderr(&out));
}

/// Regression: an `erase.pending` marker (an interrupted erasure: artifacts may still hold
/// erased text) or a stale temporary file stayed until some writer opened the conversation,
/// and `verify` said `ok`. It is a leftover needing attention (exit 8); the next writer open
/// clears it.
#[test]
fn verify_reports_what_an_interrupted_operation_left() {
    let env = Env::new();
    env.commit("chat", "one", "two");
    let dir = env.conv_dir("chat");
    std::fs::write(dir.join("erase.pending"), b"").unwrap();
    std::fs::write(dir.join("ledger.log.tmp"), b"half a rewrite").unwrap();
    let out = env.run(&["verify", "chat", "--json"], b"");
    assert_eq!(code(&out), 8, "{}", stderr(&out));
    let report = json(&out.stdout);
    assert_eq!(report["verdict"], "attention");
    assert_eq!(
        report["leftovers"],
        serde_json::json!(["erase.pending", "ledger.log.tmp"])
    );
    assert!(stderr(&out).contains("erase.pending: an erasure was interrupted"));
    env.commit("chat", "three", "four");
    let report = json(&env.ok(&["verify", "chat", "--json"], b""));
    assert_eq!(report["verdict"], "ok", "{report}");
    assert_eq!(report["leftovers"], serde_json::json!([]));
}

/// Regression: a conversation whose log was cut inside acknowledged commits could not be
/// erased at all (`erase --all` exit 5: no writer opens on it). It is erased whole, every file
/// with it.
#[test]
fn a_conversation_too_damaged_to_open_can_be_erased_whole() {
    let env = Env::new();
    for i in 0..3 {
        env.commit("chat", &format!("question {i}"), &format!("answer {i}"));
    }
    env.commit("other", "keep me", "kept");
    let log = env.conv_dir("chat").join("ledger.log");
    let bytes = std::fs::read(&log).unwrap();
    let at = bytes.windows(8).position(|w| w == b"answer 2").unwrap();
    std::fs::write(&log, &bytes[..at]).unwrap();
    assert_eq!(code(&env.run(&["log", "chat"], b"")), 5);
    env.ok(&["erase", "chat", "--all"], b"");
    assert!(!env.conv_dir("chat").exists());
    let list = json(&env.ok(&["list", "--json"], b""));
    assert_eq!(list["conversations"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["conversations"][0]["name"], "other");
}

/// Regression: a 0-byte `ledger.log` beside sidecars that record acknowledged commits got two
/// verdicts: readers said "the next writer open recreates it", the writer refused. Every
/// command now says the same: the acknowledged seqs were lost.
#[test]
fn an_emptied_log_with_acknowledged_commits_gets_one_verdict() {
    let env = Env::new();
    env.commit("chat", "one", "two");
    env.commit("chat", "three", "four");
    std::fs::write(env.conv_dir("chat").join("ledger.log"), b"").unwrap();
    let before = snapshot(&env.conv_dir("chat"));
    for args in [
        &["log", "chat"][..],
        &["verify", "chat"],
        &["commit", "chat"],
    ] {
        let out = env.run(args, br#"{"user":"more","assistant":"reply"}"#);
        assert_eq!(code(&out), 5, "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("seqs 1-4 were acknowledged"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert_eq!(before, snapshot(&env.conv_dir("chat")), "nothing recreated");
}
