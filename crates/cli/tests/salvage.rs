//! `ctxlog export CONV --salvage` (docs/design.md#l11-repair): every intact record of a
//! damaged conversation, in order, each damaged range marked where it lies, and nothing in
//! the store changes. Damage kinds: a flipped byte in a middle record, the log cut inside
//! acknowledged commits, a flipped bit in the log header, a missing artifact, junk appended.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, snapshot, stderr};
use serde_json::{Value, json};

const CONV: &str = "chat";

fn log_path(env: &Env) -> std::path::PathBuf {
    env.conv_dir(CONV).join("ledger.log")
}

/// The salvage's lines: (seqs of the events, damaged lines).
fn salvage(env: &Env) -> (Vec<u64>, Vec<Value>, Vec<Value>) {
    let before = snapshot(env.root());
    let out = env.run(&["export", CONV, "--salvage"], b"");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(before, snapshot(env.root()), "a salvage writes nothing");
    let lines: Vec<Value> = out
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let seqs = lines.iter().filter_map(|l| l["seq"].as_u64()).collect();
    let damaged = lines
        .iter()
        .filter_map(|l| l.get("damaged").cloned())
        .collect();
    (seqs, damaged, lines)
}

#[test]
fn a_clean_conversation_salvages_to_its_export() {
    let env = Env::with_five_commits(CONV);
    let export = env.ok(&["export", CONV], b"");
    let out = env.ok(&["export", CONV, "--salvage"], b"");
    assert_eq!(export, out, "nothing damaged: the salvage is the export");
}

#[test]
fn a_flipped_byte_in_a_middle_record_loses_that_record_only() {
    let env = Env::with_five_commits(CONV);
    env.flip_in_log(CONV, b"the code is ZX-81", 0x20);
    // Every reader refuses; the salvage gets every other record out.
    assert_eq!(code(&env.run(&["export", CONV], b"")), 5);
    let (seqs, damaged, lines) = salvage(&env);
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13]);
    assert_eq!(damaged.len(), 1, "{damaged:?}");
    assert_eq!(damaged[0]["seqs"], json!([8, 8]), "{damaged:?}");
    assert_eq!(damaged[0]["reason"], "record checksum mismatch");
    // In place: between seq 7 and seq 9.
    let at = lines
        .iter()
        .position(|l| l.get("damaged").is_some())
        .unwrap();
    assert_eq!(lines[at - 1]["seq"], 7);
    assert_eq!(lines[at + 1]["seq"], 9);
    // The artifact is inlined, as an export does.
    let result = lines.iter().find(|l| l["seq"] == 5).unwrap();
    assert_eq!(result["text"].as_str().unwrap().len(), 17 * 1_800);
}

#[test]
fn a_damaged_header_length_is_never_trusted() {
    let env = Env::with_five_commits(CONV);
    let log = log_path(&env);
    let mut bytes = std::fs::read(&log).unwrap();
    // seq 10's record header: its body_len (bytes 32..36 of the record) made huge.
    let at = bytes
        .windows(15)
        .position(|w| w == b"fourth question")
        .unwrap();
    let record = bytes[..at].windows(4).rposition(|w| w == b"ctxR").unwrap() - 4;
    bytes[record + 35] = 0x7f;
    std::fs::write(&log, &bytes).unwrap();
    let (seqs, damaged, _) = salvage(&env);
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13]);
    assert_eq!(damaged[0]["seqs"], json!([10, 10]), "{damaged:?}");
}

#[test]
fn a_log_cut_inside_acknowledged_commits_salvages_the_prefix_and_names_the_lost_seqs() {
    let env = Env::with_five_commits(CONV);
    env.cut_log_at(CONV, b"fourth answer");
    assert_eq!(code(&env.run(&["log", CONV, "--limit", "3"], b"")), 5);
    let (seqs, damaged, _) = salvage(&env);
    assert_eq!(seqs, (1..=10).collect::<Vec<_>>(), "seq 10 is intact");
    assert_eq!(damaged.len(), 1, "{damaged:?}");
    // The sidecars prove seqs up to 13 were acknowledged.
    assert_eq!(damaged[0]["seqs"], json!([11, 13]), "{damaged:?}");
}

#[test]
fn a_flipped_bit_in_the_log_header_locks_out_nothing() {
    let env = Env::with_five_commits(CONV);
    let log = log_path(&env);
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[20] ^= 0x04;
    std::fs::write(&log, &bytes).unwrap();
    assert_eq!(code(&env.run(&["log", CONV], b"")), 5);
    let (seqs, damaged, lines) = salvage(&env);
    assert_eq!(seqs, (1..=13).collect::<Vec<_>>());
    assert_eq!(damaged.len(), 1, "{damaged:?}");
    assert_eq!(damaged[0]["offset"], 0);
    assert_eq!(damaged[0]["bytes"], 64);
    assert_eq!(damaged[0]["seqs"], Value::Null, "the header holds no event");
    assert!(lines[0].get("damaged").is_some(), "marked where it lies");
}

#[test]
fn a_missing_artifact_keeps_its_event_with_the_excerpt() {
    let env = Env::with_five_commits(CONV);
    for entry in std::fs::read_dir(env.conv_dir(CONV).join("artifacts")).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let (seqs, damaged, lines) = salvage(&env);
    assert_eq!(seqs, (1..=13).collect::<Vec<_>>());
    assert_eq!(damaged.len(), 1, "{damaged:?}");
    assert_eq!(damaged[0]["seq"], 5);
    assert!(
        damaged[0]["artifact"]
            .as_str()
            .unwrap()
            .starts_with("sha256-")
    );
    let result = lines.iter().find(|l| l["seq"] == 5).unwrap();
    assert!(
        result["artifact"].is_object(),
        "the excerpt and its reference: {result}"
    );
}

#[test]
fn junk_appended_is_marked_and_loses_nothing() {
    let env = Env::with_five_commits(CONV);
    let log = log_path(&env);
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.extend_from_slice(b"junk junk ctxR junk");
    std::fs::write(&log, &bytes).unwrap();
    let (seqs, damaged, _) = salvage(&env);
    assert_eq!(seqs, (1..=13).collect::<Vec<_>>());
    assert_eq!(damaged.len(), 1, "{damaged:?}");
    assert_eq!(damaged[0]["seqs"], Value::Null, "no acknowledged seq in it");
    assert_eq!(damaged[0]["bytes"], 19);
}

#[test]
fn the_damage_error_names_the_salvage() {
    let env = Env::with_five_commits(CONV);
    env.flip_in_log(CONV, b"first answer", 0x01);
    let out = env.run(&["export", CONV], b"");
    assert_eq!(code(&out), 5);
    assert!(
        stderr(&out).contains("`ctxlog export chat --salvage`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn import_refuses_a_damaged_line_and_names_it() {
    let env = Env::with_five_commits(CONV);
    env.flip_in_log(CONV, b"fourth answer", 0x01);
    let out = env.ok(&["export", CONV, "--salvage"], b"");
    let file = env.root().join("salvage.jsonl");
    std::fs::write(&file, &out).unwrap();
    let refused = env.run(&["import", "copy", file.to_str().unwrap()], b"");
    assert_eq!(code(&refused), 1, "{}", stderr(&refused));
    let msg = stderr(&refused);
    assert!(
        msg.contains("line 11: a damaged range of a salvage"),
        "{msg}"
    );
    assert!(!env.conv_dir("copy").exists(), "nothing written");
}
