//! `ctxlog repair CONV` (docs/design.md#l11-repair): a dry run prints the plan and changes
//! nothing; `--accept-loss` keeps every intact record, covers the lost seqs with a loss
//! record, and afterwards every command reads: `log` and `export` show the loss in place,
//! `verify` passes, a replayed id of the lost commit exits 7, new commits take fresh seqs,
//! `project` and `recall` work, and export → import rebuilds the loss record exactly.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, code, snapshot, stderr};
use serde_json::{Value, json};

const CONV: &str = "chat";

/// The five-commit conversation with one byte flipped in seq 8 (t3's pinned note).
fn damaged() -> Env {
    let env = Env::with_five_commits(CONV);
    env.flip_in_log(CONV, b"the code is ZX-81", 0x20);
    env
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

/// `log --json`'s lines.
fn log_lines(env: &Env, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["--json", "log", CONV];
    args.extend_from_slice(extra);
    env.ok(&args, b"")
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(json_of)
        .collect()
}

#[test]
fn the_dry_run_prints_the_plan_and_changes_nothing() {
    let env = damaged();
    let before = snapshot(env.root());
    let text = String::from_utf8(env.ok(&["repair", CONV], b"")).unwrap();
    assert!(
        text.contains("repair plan (dry run, nothing changed)"),
        "{text}"
    );
    assert!(text.contains("seqs 8-8: damage at byte offset"), "{text}");
    assert!(
        text.contains("run `ctxlog repair chat --accept-loss`"),
        "{text}"
    );
    let plan = json_of(&env.ok(&["--json", "repair", CONV], b""));
    assert_eq!(plan["applied"], json!(false));
    assert_eq!(plan["lost_seqs"], json!(1));
    assert_eq!(plan["kept"], json!([[1, 7], [9, 13]]));
    let t3 = plan["commits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["first_seq"] == json!(7))
        .unwrap();
    assert_eq!(t3["id"], json!("t3"), "{plan}");
    assert_eq!(before, snapshot(env.root()), "a dry run wrote something");
    // The error every reader gives names the repair.
    let out = env.run(&["log", CONV], b"");
    assert_eq!(code(&out), 5);
    assert!(
        stderr(&out).contains("ctxlog repair chat"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn after_accepting_the_loss_everything_reads_and_no_seq_is_reused() {
    let env = damaged();
    let before = log_lines(&env, &["--limit", "7"]);
    let report = json_of(&env.ok(&["--json", "repair", CONV, "--accept-loss"], b""));
    assert_eq!(report["applied"], json!(true), "{report}");
    let saved = report["saved_aside"][0]["file"].as_str().unwrap();
    assert!(env.conv_dir(CONV).join(saved).is_file(), "{saved}");
    assert_eq!(code(&env.run(&["verify", CONV], b"")), 0);

    // The intact records read as before; seq 8 reads as its loss record.
    assert_eq!(before, log_lines(&env, &["--limit", "7"]));
    let all = log_lines(&env, &[]);
    let loss = all.iter().find(|e| e["seq"] == json!(8)).unwrap();
    assert_eq!(loss["marker"]["type"], json!("loss"), "{loss}");
    assert_eq!(loss["marker"]["from"], json!(8));
    let text = String::from_utf8(env.ok(&["log", CONV], b"")).unwrap();
    assert!(text.contains("loss"), "{text}");

    // The lost commit's id answers `lost` (exit 7), never fresh seqs; an intact one replays.
    let t3 = json!({"events":[{"kind":"user","text":"remember the code"},
        {"kind":"note","text":"the code is ZX-81","pinned":true},
        {"kind":"assistant","text":"noted the code"}]});
    let out = env.run(&["commit", CONV, "--id", "t3"], t3.to_string().as_bytes());
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    assert!(stderr(&out).contains("was lost"), "{}", stderr(&out));
    let next = json!({"events":[{"kind":"user","text":"sixth question"}]});
    let receipt = json_of(&env.ok(&["commit", CONV], next.to_string().as_bytes()));
    assert_eq!(receipt["first_seq"], json!(14));

    // Projection and recall read the intact history.
    env.ok(
        &["project", CONV, "--input", "hi", "--max-bytes", "100000"],
        b"",
    );
    let hits = json_of(&env.ok(&["recall", CONV, "fourth"], b""));
    assert!(!hits["hits"].as_array().unwrap().is_empty(), "{hits}");
}

#[test]
fn projection_reports_a_lost_range_as_lost_not_erased() {
    let env = damaged();
    env.ok(&["repair", CONV, "--accept-loss"], b"");
    env.ok(
        &["erase", CONV, "--seqs", "12-13", "--reason", "asked"],
        b"",
    );
    let path = env.root().join("report.json");
    let out = env.run(
        &[
            "project",
            CONV,
            "--input",
            "hi",
            "--max-bytes",
            "100000",
            "--report",
            path.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("note: seq 8 of the history kept was lost to damage"),
        "{}",
        stderr(&out)
    );
    let report = json_of(&std::fs::read(&path).unwrap());
    assert_eq!(report["lost"], json!([{"first": 8, "last": 8}]), "{report}");
    assert_eq!(
        report["erased"],
        json!([{"first": 12, "last": 13}]),
        "{report}"
    );
    // A conversation without loss or erasure: neither field, no note.
    let fresh = Env::with_five_commits(CONV);
    let out = fresh.run(
        &[
            "project",
            CONV,
            "--input",
            "hi",
            "--report",
            path.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!stderr(&out).contains("lost"), "{}", stderr(&out));
    let report = json_of(&std::fs::read(&path).unwrap());
    assert!(
        report.get("lost").is_none() && report.get("erased").is_none(),
        "{report}"
    );
}

/// Intact seqs of the damaged conversation (seq 8 of t3 is damaged) are erased at once, before
/// and after the damage, which `verify` still names; an erasure that reaches the damage (one
/// of t3's seqs) exits 5, changes nothing and names the repair, after which it works; retention
/// passes over the damaged turn and removes the others.
#[test]
fn intact_seqs_of_a_damaged_log_are_erased_at_once_and_the_damage_names_the_repair() {
    let env = damaged();
    env.ok(&["erase", CONV, "--turn", "t1"], b"");
    env.ok(&["erase", CONV, "--seqs", "12-13"], b"");
    let dir = env.conv_dir(CONV);
    let files = snapshot(&dir);
    assert!(
        !files
            .values()
            .any(|b| b.windows(14).any(|w| w == b"first question")),
        "erased text left in a file"
    );
    let verify = env.run(&["verify", CONV], b"");
    assert_eq!(code(&verify), 5, "{}", stderr(&verify));
    assert!(stderr(&verify).contains("(seq 8)"), "{}", stderr(&verify));
    for args in [
        &["erase", CONV, "--seqs", "8-8"][..],
        &["erase", CONV, "--turn", "t3"][..],
        &["erase", CONV, "--seqs", "5-10"][..],
    ] {
        let before = snapshot(env.root());
        let out = env.run(args, b"");
        assert_eq!(code(&out), 5, "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("could not be proven erased")
                && err.contains("cannot work around it: run `ctxlog repair chat --accept-loss`")
                && err.contains("then the erasure again; `ctxlog erase chat --all` erases"),
            "{args:?}: {err}"
        );
        assert_eq!(before, snapshot(env.root()), "{args:?} wrote something");
    }
    // Retention passes over the damaged turn (t3) and removes the others it selects.
    let gc = json_of(&env.ok(&["--json", "gc", CONV, "--keep-turns", "1"], b""));
    assert_eq!(gc["seqs_removed"], json!(4), "{gc}");
    env.ok(&["repair", CONV, "--accept-loss"], b"");
    env.ok(&["erase", CONV, "--turn", "t3"], b"");
    assert_eq!(code(&env.run(&["verify", CONV], b"")), 0);
}

/// An erasure refused because it reaches the damage leaves every file as it was: the recall
/// index built before the damage among them (it is dropped only once an erasure can no longer
/// be refused, just before the log is replaced).
#[test]
fn an_erasure_refused_for_damage_leaves_the_recall_index() {
    let env = Env::with_five_commits(CONV);
    env.ok(&["recall", CONV, "code"], b"");
    env.flip_in_log(CONV, b"the code is ZX-81", 0x20);
    let index = env.conv_dir(CONV).join("recall.sqlite");
    assert!(index.exists(), "the recall index was built");
    let before = snapshot(env.root());
    let out = env.run(&["erase", CONV, "--seqs", "8-8"], b"");
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(
        index.exists(),
        "the refused erasure deleted the recall index"
    );
    assert!(
        before == snapshot(env.root()),
        "the refused erasure changed a file"
    );
}

#[test]
fn export_then_import_rebuilds_the_loss_record_exactly() {
    let env = damaged();
    env.ok(&["repair", CONV, "--accept-loss"], b"");
    let export = env.ok(&["export", CONV], b"");
    let file = env.root().join("chat.jsonl");
    std::fs::write(&file, &export).unwrap();
    env.ok(&["import", "copy", file.to_str().unwrap()], b"");
    let again = env.ok(&["export", "copy"], b"");
    assert_eq!(
        String::from_utf8(export).unwrap(),
        String::from_utf8(again).unwrap()
    );
    assert_eq!(code(&env.run(&["verify", "copy"], b"")), 0);
}

#[test]
fn a_log_cut_inside_acknowledged_commits_is_one_command_away_from_reading_again() {
    let env = Env::with_five_commits(CONV);
    env.cut_log_at(CONV, b"fourth question");
    assert_eq!(code(&env.run(&["log", CONV], b"")), 5);
    let report = json_of(&env.ok(&["--json", "repair", CONV, "--accept-loss"], b""));
    assert_eq!(report["lost"][0]["from"], json!(10), "{report}");
    assert_eq!(report["lost"][0]["to"], json!(13), "{report}");
    assert_eq!(code(&env.run(&["verify", CONV], b"")), 0);
    let t5 = json!({"events":[{"kind":"user","text":"fifth question"},
        {"kind":"assistant","text":"fifth answer"}]});
    let out = env.run(&["commit", CONV, "--id", "t5"], t5.to_string().as_bytes());
    assert_eq!(code(&out), 7, "{}", stderr(&out));
}
