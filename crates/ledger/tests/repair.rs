//! `repair_with` (docs/design.md#l11-repair): a dry run changes nothing; `accept_loss` keeps
//! every intact record byte for byte, covers every lost seq with one loss record, never hands
//! a seq out twice, and answers a replayed id of a lost commit with `Error::Lost`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{assistant, call, commit, record_offsets, result, snapshot_dir, user};
use ctxlog_ledger::{
    DirStorage, Error, Event, EventBody, Ledger, LedgerRead, Options, Reader, SystemMarker,
    repair_with,
};

/// Five commits with ids t1..t5: seqs 1-2, 3-6 (a tool call and its result), 7-8, 9-10,
/// 11-12.
fn five_commits(dir: &Path) {
    let (mut l, _) = Ledger::open(dir, &Options::default()).unwrap();
    let commits = [
        vec![user("q1"), assistant("a1")],
        vec![user("q2"), call("c1"), result("c1", "out"), assistant("a2")],
        vec![user("q3"), assistant("a3")],
        vec![user("q4"), assistant("a4")],
        vec![user("q5"), assistant("a5")],
    ];
    for (i, events) in commits.into_iter().enumerate() {
        l.commit(&commit(events).with_id(format!("t{}", i + 1)))
            .unwrap();
    }
}

fn storage(dir: &Path) -> Arc<dyn ctxlog_ledger::Storage> {
    Arc::new(DirStorage::new(dir))
}

fn log_bytes(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("ledger.log")).unwrap()
}

/// Flips one byte inside the payload of the record of `seq`.
fn flip_in(dir: &Path, seq: u64) {
    let mut log = log_bytes(dir);
    let (at, _) = record_offsets(&log)
        .into_iter()
        .find(|(_, s)| *s == seq)
        .unwrap();
    log[at as usize + 45] ^= 0x20;
    std::fs::write(dir.join("ledger.log"), log).unwrap();
}

/// Every event as a reader gives it, keyed by seq.
fn events(dir: &Path) -> Vec<Event> {
    let r = Reader::open(dir).unwrap();
    r.events(1..=r.last_seq()).unwrap()
}

fn loss_ranges(evs: &[Event]) -> Vec<(u64, u64)> {
    evs.iter()
        .filter_map(|e| match &e.body {
            EventBody::System {
                marker: SystemMarker::Loss { from, to, .. },
            } => Some((*from, *to)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_dry_run_plans_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    five_commits(dir.path());
    flip_in(dir.path(), 7);
    let before = snapshot_dir(dir.path());
    let plan = repair_with(storage(dir.path()), false, &Options::default()).unwrap();
    assert!(plan.needed && !plan.applied, "{plan:?}");
    assert_eq!(plan.lost_seqs, 1, "{plan:?}");
    assert_eq!((plan.lost[0].from, plan.lost[0].to), (7, 7));
    assert_eq!(plan.kept, [(1, 6), (8, 12)]);
    assert_eq!(plan.last_seq, 12);
    assert!(plan.bytes_saved > 0);
    assert!(plan.commits.iter().any(|c| c.first_seq == 7), "{plan:?}");
    assert_eq!(
        snapshot_dir(dir.path()),
        before,
        "a dry run wrote something"
    );
}

#[test]
fn accepting_the_loss_keeps_every_intact_record_and_never_reuses_a_seq() {
    let dir = tempfile::tempdir().unwrap();
    five_commits(dir.path());
    let intact = events(dir.path());
    flip_in(dir.path(), 7);
    let report = repair_with(storage(dir.path()), true, &Options::default()).unwrap();
    assert!(report.applied, "{report:?}");
    let saved = report.saved_aside[0].file.clone().unwrap();
    assert!(dir.path().join(&saved).exists(), "{saved}");
    assert!(ctxlog_ledger::verify(dir.path()).unwrap().is_clean());
    let after = events(dir.path());
    // seq 7 is the loss record; seq 8 (the rest of t3) lost its commit's head: kept, alone.
    assert_eq!(loss_ranges(&after), [(7, 7)]);
    for e in &intact {
        if e.seq != 7 {
            assert!(after.contains(e), "seq {} changed or went missing", e.seq);
        }
    }
    let (mut l, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    // The replayed id of the lost commit is `lost`, never fresh seqs.
    let replay = commit(vec![user("q3"), assistant("a3")]).with_id("t3");
    match l.commit(&replay) {
        Err(Error::Lost { id, from, to }) => assert_eq!((id.as_str(), from, to), ("t3", 7, 7)),
        other => panic!("expected Lost, got {other:?}"),
    }
    // An intact commit's id still replays; a new commit takes the next seq.
    let t4 = commit(vec![user("q4"), assistant("a4")]).with_id("t4");
    assert!(l.commit(&t4).unwrap().replayed);
    let next = l.commit(&commit(vec![user("q6")])).unwrap();
    assert_eq!(next.first_seq, 13);
}

#[test]
fn a_log_cut_inside_acknowledged_commits_loses_exactly_the_cut_seqs() {
    let dir = tempfile::tempdir().unwrap();
    five_commits(dir.path());
    let log = log_bytes(dir.path());
    let (at, _) = record_offsets(&log)
        .into_iter()
        .find(|(_, s)| *s == 10)
        .unwrap();
    std::fs::write(dir.path().join("ledger.log"), &log[..at as usize + 10]).unwrap();
    let report = repair_with(storage(dir.path()), true, &Options::default()).unwrap();
    assert_eq!(report.last_seq, 12, "{report:?}");
    let after = events(dir.path());
    // Seq 9 (t4's head) cannot pair with a lost 10: it is a user event, no tool pair, so kept.
    assert_eq!(loss_ranges(&after), [(10, 12)], "{report:?}");
    assert!(ctxlog_ledger::verify(dir.path()).unwrap().is_clean());
    let (mut l, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    assert_eq!(l.last_seq(), 12);
    let t5 = commit(vec![user("q5"), assistant("a5")]).with_id("t5");
    assert!(matches!(l.commit(&t5), Err(Error::Lost { .. })));
    let t4 = commit(vec![user("q4"), assistant("a4")]).with_id("t4");
    assert!(matches!(l.commit(&t4), Err(Error::Lost { .. })));
    assert_eq!(l.commit(&commit(vec![user("q6")])).unwrap().first_seq, 13);
}

#[test]
fn a_cut_commit_whose_tool_pair_is_broken_loses_its_intact_records_too() {
    let dir = tempfile::tempdir().unwrap();
    five_commits(dir.path());
    // seq 5 is t2's tool result: its call (seq 4) is left without it.
    flip_in(dir.path(), 5);
    let plan = repair_with(storage(dir.path()), false, &Options::default()).unwrap();
    let t2 = plan.commits.iter().find(|c| c.first_seq == 3).unwrap();
    assert!(t2.outcome.contains("lost too"), "{t2:?}");
    repair_with(storage(dir.path()), true, &Options::default()).unwrap();
    assert_eq!(loss_ranges(&events(dir.path())), [(3, 6)]);
    assert!(ctxlog_ledger::verify(dir.path()).unwrap().is_clean());
}

#[test]
fn a_damaged_log_header_locks_nothing_out_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    five_commits(dir.path());
    let intact = events(dir.path());
    let mut log = log_bytes(dir.path());
    log[20] ^= 1;
    std::fs::write(dir.path().join("ledger.log"), log).unwrap();
    let report = repair_with(storage(dir.path()), true, &Options::default()).unwrap();
    assert!(
        report.header_problem.is_some() && report.lost.is_empty(),
        "{report:?}"
    );
    assert_eq!(events(dir.path()), intact);
}

#[test]
fn an_intact_conversation_only_gets_its_sidecars_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    five_commits(dir.path());
    let log = log_bytes(dir.path());
    std::fs::write(dir.path().join("ledger.idx"), b"junk").unwrap();
    let report = repair_with(storage(dir.path()), true, &Options::default()).unwrap();
    assert!(!report.needed && !report.applied && report.sidecars_rebuilt);
    assert_eq!(log_bytes(dir.path()), log);
    let v = ctxlog_ledger::verify(dir.path()).unwrap();
    assert!(v.is_clean() && v.sidecar_ok, "{v:?}");
}

#[test]
fn a_writer_holding_the_conversation_blocks_accepting_but_not_planning() {
    let dir = tempfile::tempdir().unwrap();
    five_commits(dir.path());
    let (_writer, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    assert!(repair_with(storage(dir.path()), false, &Options::default()).is_ok());
    let e = repair_with(storage(dir.path()), true, &Options::default()).unwrap_err();
    assert!(matches!(e, Error::Locked { .. }), "{e}");
}

#[test]
fn seqs_that_only_turns_idx_still_witnesses_are_covered_by_the_loss_record() {
    let dir = tempfile::tempdir().unwrap();
    five_commits(dir.path());
    let log = log_bytes(dir.path());
    let cut = log.windows(2).position(|w| w == b"q4").unwrap();
    std::fs::write(dir.path().join("ledger.log"), &log[..cut]).unwrap();
    for side in ["ledger.idx", "commits.idx"] {
        std::fs::write(dir.path().join(side), vec![0u8; 200]).unwrap();
    }
    let report = repair_with(storage(dir.path()), true, &Options::default()).unwrap();
    // turns.idx lists seq 11 (t5's user event): seqs 9-11 are lost and never handed out
    // again. (Seq 12, t5's last, is witnessed by no surviving file: nothing can know it.)
    assert_eq!(report.last_seq, 11, "{report:?}");
    assert_eq!(loss_ranges(&events(dir.path())), [(9, 11)]);
    let (mut l, _) = Ledger::open(dir.path(), &Options::default()).unwrap();
    assert!(l.commit(&commit(vec![user("q6")])).unwrap().first_seq > 11);
}

#[test]
fn an_artifact_only_a_lost_record_referenced_is_moved_aside_and_verify_passes() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::default();
    o.artifact_threshold(64);
    let (mut l, _) = Ledger::open(dir.path(), &o).unwrap();
    let big = "tool output line\n".repeat(20);
    l.commit(&commit(vec![user("q1"), assistant("a1")]))
        .unwrap();
    l.commit(&commit(vec![
        user("q2"),
        call("c1"),
        result("c1", &big),
        assistant("a2"),
    ]))
    .unwrap();
    drop(l);
    // The tool result's excerpt lies in seq 5's record: flipping it loses seq 5, and seq 4's
    // call no longer pairs up: seqs 3-6 are lost, the artifact is referenced by nothing.
    flip_in(dir.path(), 5);
    let plan = repair_with(storage(dir.path()), false, &o).unwrap();
    assert_eq!(plan.artifacts_saved_aside.len(), 1, "{plan:?}");
    let v = ctxlog_ledger::verify(dir.path());
    assert!(v.is_err(), "damaged before the repair");
    repair_with(storage(dir.path()), true, &o).unwrap();
    let v = ctxlog_ledger::verify(dir.path()).unwrap();
    assert!(v.is_clean() && v.orphaned_artifacts.is_empty(), "{v:?}");
    let aside = format!("recovered/artifact-{}", plan.artifacts_saved_aside[0]);
    assert!(dir.path().join(aside).is_file());
}

#[test]
fn verify_names_an_artifact_no_event_references() {
    let dir = tempfile::tempdir().unwrap();
    five_commits(dir.path());
    let name = format!("sha256-{}", "0".repeat(64));
    std::fs::create_dir_all(dir.path().join("artifacts")).unwrap();
    std::fs::write(dir.path().join("artifacts").join(&name), b"stray").unwrap();
    let v = ctxlog_ledger::verify(dir.path()).unwrap();
    assert_eq!(v.orphaned_artifacts, [format!("artifacts/{name}")]);
    assert!(!v.is_clean());
    let plan = repair_with(storage(dir.path()), true, &Options::default()).unwrap();
    assert_eq!(plan.artifacts_saved_aside, [name]);
    assert!(ctxlog_ledger::verify(dir.path()).unwrap().is_clean());
}

#[test]
fn a_missing_artifact_is_recorded_as_lost_and_its_event_keeps_its_excerpt() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::default();
    o.artifact_threshold(64);
    let (mut l, _) = Ledger::open(dir.path(), &o).unwrap();
    let big = "tool output line\n".repeat(20);
    let t1 = commit(vec![
        user("q2"),
        call("c1"),
        result("c1", &big),
        assistant("a2"),
    ])
    .with_id("t1");
    l.commit(&t1).unwrap();
    drop(l);
    for e in std::fs::read_dir(dir.path().join("artifacts")).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    assert!(
        ctxlog_ledger::verify(dir.path())
            .unwrap()
            .artifact_problems
            .len()
            == 1
    );
    let plan = repair_with(storage(dir.path()), false, &o).unwrap();
    assert!(plan.needed && plan.lost.is_empty(), "{plan:?}");
    assert_eq!(plan.artifacts_lost.len(), 1, "{plan:?}");
    repair_with(storage(dir.path()), true, &o).unwrap();
    assert!(ctxlog_ledger::verify(dir.path()).unwrap().is_clean());
    let after = events(dir.path());
    match &after[2].body {
        EventBody::ToolResult { text, artifact, .. } => {
            assert!(
                artifact.is_none() && text.contains("[artifact lost: "),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
    let (mut l, _) = Ledger::open(dir.path(), &o).unwrap();
    assert!(
        l.commit(&t1).unwrap().replayed,
        "the commit is whole: its id replays"
    );
}

/// A user message's image whose artifact is missing, and a tool result's image whose artifact
/// was altered: verify names both, the repair records both as lost artifacts, each part
/// becomes a text part saying so, and everything reads and verifies after.
#[test]
fn a_lost_media_artifact_is_recorded_and_its_part_says_so() {
    const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAADUlEQVR42mP4zwAE/wEHAAH/PX2MSQAAAABJRU5ErkJggg==";
    const PDF_B64: &str = "JVBERi0xLjQKMSAwIG9iaiA8PC9UeXBlIC9QYWdlPj4gZW5kb2JqCg==";
    let dir = tempfile::tempdir().unwrap();
    let o = Options::default();
    let (mut l, _) = Ledger::open(dir.path(), &o).unwrap();
    let body = |json: String| -> EventBody { serde_json::from_str(&json).unwrap() };
    let t1 = commit(vec![
        body(format!(
            r#"{{"kind":"user","text":"what is this?","parts":[{{"type":"image","data":"{PNG_B64}","media_type":"image/png"}}]}}"#
        )),
        call("c1"),
        body(format!(
            r#"{{"kind":"tool_result","call_id":"c1","tool":"shell","status":"ok","text":"the report","parts":[{{"type":"document","data":"{PDF_B64}","media_type":"application/pdf","name":"q3.pdf"}}]}}"#
        )),
        assistant("a chart"),
    ])
    .with_id("t1");
    l.commit(&t1).unwrap();
    drop(l);
    let stored = events(dir.path());
    let (png, pdf) = (
        stored[0].body.parts()[0].artifact().unwrap().name.clone(),
        stored[2].body.parts()[0].artifact().unwrap().name.clone(),
    );
    let artifacts = dir.path().join("artifacts");
    std::fs::remove_file(artifacts.join(&png)).unwrap();
    std::fs::write(artifacts.join(&pdf), b"%PDF-1.4 altered").unwrap();
    assert_eq!(
        ctxlog_ledger::verify(dir.path())
            .unwrap()
            .artifact_problems
            .len(),
        2
    );
    let plan = repair_with(storage(dir.path()), false, &o).unwrap();
    assert!(plan.needed && plan.lost.is_empty(), "{plan:?}");
    assert_eq!(plan.artifacts_lost.len(), 2, "{plan:?}");
    assert!(
        plan.artifacts_lost[0].starts_with(&format!("{png}: ")),
        "{plan:?}"
    );
    repair_with(storage(dir.path()), true, &o).unwrap();
    assert!(ctxlog_ledger::verify(dir.path()).unwrap().is_clean());
    let after = events(dir.path());
    let lost_text = |e: &ctxlog_ledger::Event| match &e.body.parts()[0] {
        ctxlog_ledger::event::Part::Text { text } => text.clone(),
        other => panic!("{other:?}"),
    };
    assert!(
        lost_text(&after[0]).starts_with(&format!("[artifact lost: image {png}: ")),
        "{:?}",
        after[0]
    );
    assert!(
        lost_text(&after[2]).starts_with(&format!("[artifact lost: document {pdf}: ")),
        "{:?}",
        after[2]
    );
    assert!(after.iter().all(|e| e.body.artifact_refs().is_empty()));
}
