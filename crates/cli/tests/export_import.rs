//! Failure class: `ctxlog export` / `ctxlog import` that lose or duplicate history, or leave
//! half an import behind (docs/design.md#e4-export-and-import, docs/design.md#l10-event-times,
//! docs/design.md#i2-command-line).
//!
//! Guarantee: export → import into a new conversation → export gives the same bytes; a
//! re-run import writes nothing; a bad record exits 1 naming its line with every stored byte
//! unchanged; a dataset creates one conversation per sample with its session times; `"ts"`
//! on a commit is kept and one earlier than the last event is refused; no progress bar is
//! drawn when stderr is not a terminal; a conversation with erasures round-trips too; a
//! dataset sample whose session dates go backwards is refused alone (exit 1, a summary line,
//! the other samples imported); an import killed with SIGKILL part way re-runs into the same
//! name.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, snapshot, stderr};

#[test]
fn export_import_export_round_trips_and_reimport_writes_nothing() {
    let env = Env::new();
    env.commit("a", "My project code is ZX-81.", "Noted.");
    env.ok(
        &["commit", "a"],
        br#"{"events":[{"kind":"user","text":"Old question","ts":"2100-01-01T00:00:00Z"},{"kind":"assistant","text":"Old answer","ts":4102444800500}]}"#,
    );
    let first = env.ok(&["export", "a"], b"");
    let text = String::from_utf8(first.clone()).unwrap();
    assert!(
        text.contains(
            r#"{"seq":3,"ts":"2100-01-01T00:00:00.000Z","kind":"user","text":"Old question"}"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#""seq":4,"ts":"2100-01-01T00:00:00.500Z""#),
        "{text}"
    );

    let out = env.run(&["import", "b", "-"], &first);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).is_empty(),
        "no progress bar off a terminal: {}",
        stderr(&out)
    );
    assert_eq!(env.ok(&["export", "b"], b""), first);
    let before = snapshot(&env.conv_dir("b"));
    let again: serde_json::Value =
        serde_json::from_slice(&env.ok(&["import", "b", "-"], &first)).unwrap();
    assert_eq!(again["events_written"], 0);
    assert_eq!(snapshot(&env.conv_dir("b")), before);

    // A live commit whose explicit time is before the last event: refused, nothing written.
    let out = env.run(
        &["commit", "b"],
        br#"{"user":"late","ts":"2099-01-01T00:00:00Z"}"#,
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("earlier than the conversation's last event"),
        "{}",
        stderr(&out)
    );
    assert_eq!(snapshot(&env.conv_dir("b")), before);
}

#[test]
fn a_bad_line_is_named_and_nothing_is_written() {
    let env = Env::new();
    let input = b"{\"seq\":1,\"kind\":\"user\",\"text\":\"a\"}\n{\"seq\":2,\"kind\":\"assistant\",\"txt\":\"b\"}\n";
    let out = env.run(&["import", "c", "-"], input);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("line 2: invalid event"),
        "{}",
        stderr(&out)
    );
    assert!(!env.conv_dir("c").exists());
    let out = env.run(&["import", "c", "-", "--from", "csv"], input);
    assert!(
        stderr(&out).contains("unknown import format \"csv\""),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["import", "-", "--from", "openai-chat"], b"[]");
    assert_eq!(code(&out), 2, "{}", stderr(&out));
}

#[test]
fn a_dataset_creates_one_conversation_per_sample() {
    let env = Env::new();
    let data = br#"[{"sample_id":"s-1","conversation":{"speaker_a":"Ann","speaker_b":"Bob",
      "session_1_date_time":"1:56 pm on 8 May, 2023",
      "session_1":[{"speaker":"Ann","text":"hi"},{"speaker":"Bob","text":"hello"}]}},
      {"sample_id":"s-2","conversation":{"speaker_a":"C","speaker_b":"D",
      "session_1_date_time":"9:00 am on 1 June, 2023","session_1":[{"speaker":"D","text":"greetings"}]}}]"#;
    let out: serde_json::Value = serde_json::from_slice(&env.ok(
        &["import", "ds", "-", "--from", "conversation-dataset"],
        data,
    ))
    .unwrap();
    assert_eq!(out["conversations"][1]["conversation"], "ds-s-2");
    let export = String::from_utf8(env.ok(&["export", "ds-s-1"], b"")).unwrap();
    assert_eq!(
        export,
        "{\"seq\":1,\"ts\":\"2023-05-08T13:56:00.000Z\",\"kind\":\"user\",\"text\":\"Ann: hi\"}\n\
         {\"seq\":2,\"ts\":\"2023-05-08T13:56:00.000Z\",\"kind\":\"assistant\",\"text\":\"Bob: hello\"}\n"
    );
}

#[test]
fn a_conversation_with_erasures_round_trips() {
    let env = Env::new();
    for i in 0..4 {
        env.commit("a", &format!("question {i}"), &format!("answer {i}"));
    }
    env.ok(&["erase", "a", "--seqs", "3-4", "--reason", "asked"], b"");
    env.ok(
        &["erase", "a", "--seqs", "1-8", "--reason", "everything"],
        b"",
    );
    env.commit("a", "after", "the erasures");
    let first = env.ok(&["export", "a"], b"");
    let text = String::from_utf8(first.clone()).unwrap();
    assert_eq!(text.matches("\"tombstone\"").count(), 3, "{text}");
    env.ok(&["import", "b", "-"], &first);
    assert_eq!(env.ok(&["export", "b"], b""), first);
    let before = snapshot(&env.conv_dir("b"));
    env.ok(&["import", "b", "-"], &first);
    assert_eq!(snapshot(&env.conv_dir("b")), before);
    env.ok(&["verify", "b"], b"");
}

#[test]
fn a_sample_with_backwards_dates_fails_alone_with_a_summary() {
    let env = Env::new();
    let files = tempfile::tempdir().unwrap();
    let path = files.path().join("dataset.json");
    std::fs::write(
        &path,
        br#"[{"sample_id":"ok-1","conversation":{"speaker_a":"A","speaker_b":"B",
      "session_1_date_time":"1:56 pm on 8 May, 2023","session_1":[{"speaker":"A","text":"hi"}]}},
     {"sample_id":"back","conversation":{"speaker_a":"A","speaker_b":"B",
      "session_1_date_time":"1:56 pm on 8 May, 2023","session_1":[{"speaker":"A","text":"hi"}],
      "session_2_date_time":"8:00 am on 1 January, 2022","session_2":[{"speaker":"B","text":"yo"}]}},
     {"sample_id":"ok-2","conversation":{"speaker_a":"A","speaker_b":"B",
      "session_1_date_time":"1:56 pm on 8 May, 2023","session_1":[{"speaker":"A","text":"hey"}]}}]"#,
    )
    .unwrap();
    let args = [
        "import",
        "--from",
        "conversation-dataset",
        path.to_str().unwrap(),
    ];
    let out = env.run(&args, b"");
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let response: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(response["conversations"].as_array().unwrap().len(), 2);
    assert_eq!(response["failed"][0]["conversation"], "back");
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    for part in [
        "1 of 3 samples refused",
        "sample 1 (back)",
        "session_2_date_time \"8:00 am on 1 January, 2022\"",
        "session_1_date_time \"1:56 pm on 8 May, 2023\"",
        "the other 2 imported",
    ] {
        assert!(err.contains(part), "{part:?} not in {err}");
    }
    assert!(env.conv_dir("ok-1").exists() && env.conv_dir("ok-2").exists());
    assert!(!env.conv_dir("back").exists());
}

/// An import of an export with erasures, killed with SIGKILL part way through its commits
/// (before its tombstone), is re-run into the same name: it replays what was written and
/// finishes, and the copy exports byte for byte as the original.
#[test]
fn an_import_killed_part_way_re_runs_into_the_same_name() {
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};

    let env = Env::new();
    // A long conversation (imported: fast), its last turn erased, one turn after it.
    let turns = 10_000;
    let mut source = String::new();
    for i in 0..turns {
        source.push_str(&format!(
            "{{\"kind\":\"user\",\"text\":\"question {i} about the walrus colony\"}}\n\
             {{\"kind\":\"assistant\",\"text\":\"answer {i}: they haul out on the ice\"}}\n"
        ));
    }
    env.ok(&["import", "orig", "-"], source.as_bytes());
    let last = 2 * turns;
    env.ok(
        &[
            "erase",
            "orig",
            "--seqs",
            &format!("{}-{last}", last - 1),
            "--reason",
            "asked",
        ],
        b"",
    );
    env.commit("orig", "after", "the erasure");
    let export = env.ok(&["export", "orig"], b"");

    let mut child = env.spawn(&["import", "copy", "-"]);
    let writer = common::write_stdin(&mut child, export.clone());
    // Killed once a few chunks are in the copy's log (each chunk is 512 events).
    let log = env.conv_dir("copy").join("ledger.log");
    let start = Instant::now();
    while std::fs::metadata(&log).map_or(0, |m| m.len()) < 200_000 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the import finished first"
        );
        assert!(start.elapsed() < Duration::from_secs(120), "no progress");
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(9), "killed part way");
    writer.join().unwrap();
    let written = env.run(&["verify", "copy", "--json"], b"");
    let written: serde_json::Value = serde_json::from_slice(&written.stdout).unwrap();
    let kept = written["last_seq"].as_u64().unwrap();
    assert!(
        kept > 0 && kept < last - 1,
        "killed before the tombstone: {kept}"
    );
    eprintln!(
        "killed with seqs 1-{kept} of {} written ({} torn bytes)",
        last + 2,
        written["torn_tail_bytes"]
    );

    let out = env.run(&["import", "copy", "-"], &export);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let done: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        done["conversations"][0]["commits_replayed"]
            .as_u64()
            .unwrap()
            > 0,
        "{done}"
    );
    assert_eq!(env.ok(&["export", "copy"], b""), export);
    env.ok(&["verify", "copy"], b"");
}

/// Regression: an import whose first record is a tombstone was checked against an empty
/// ledger, so it could never continue a conversation (a tombstone filling a gap), and its
/// message named "next seq (1)". The tombstone is checked where it lands: at the
/// conversation's next seq it is written; elsewhere the message names that next seq.
#[test]
fn a_tombstone_continues_a_conversation_at_its_next_seq() {
    let env = Env::new();
    for i in 1..=3 {
        env.commit("chat", &format!("q{i}"), &format!("a{i}"));
    }
    env.ok(&["erase", "chat", "--seqs", "3-4"], b"");
    let export = String::from_utf8(env.ok(&["export", "chat"], b"")).unwrap();
    let lines: Vec<&str> = export.lines().collect();
    let file = |name: &str, picked: &[&str]| {
        let path = env.root().join(name);
        std::fs::write(&path, picked.join("\n") + "\n").unwrap();
        path.to_str().unwrap().to_string()
    };
    let head = file("head.jsonl", &lines[..2]);
    env.ok(&["import", "copy", &head], b"");
    // Out of place (the copy's next seq is 3, the tombstone is shifted to 5): refused,
    // naming the real next seq, nothing written.
    let shifted = lines[2].replace("\"from\":3,\"to\":4", "\"from\":5,\"to\":6");
    let shifted = shifted.replace("\"seq\":3", "\"seq\":5");
    let bad = file("bad.jsonl", &[&shifted]);
    let out = env.run(&["import", "copy", &bad], b"");
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("next seq (3)"), "{}", stderr(&out));
    // In place: the tombstone and the rest continue the copy, which then exports the same.
    let rest = file("rest.jsonl", &lines[2..]);
    env.ok(&["import", "copy", &rest], b"");
    assert_eq!(
        String::from_utf8(env.ok(&["export", "copy"], b"")).unwrap(),
        export
    );
}
