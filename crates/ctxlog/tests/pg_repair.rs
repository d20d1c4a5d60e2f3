//! Failure class: damage in PostgreSQL left to hand surgery: a row altered or deleted by hand
//! makes every read of the conversation fail, a writer goes on appending onto damage it
//! read, or the only way out loses intact rows, hands seqs out again, or answers a retried
//! commit of a lost id with fresh seqs.
//!
//! Guarantee (docs/reliability.md): `repair` plans without writing (a dry run changes no row),
//! and with `accept_loss` keeps every intact row as it was, covers every lost seq with
//! loss-record rows in one transaction, saves the lost rows' bytes to the `recovered` table,
//! and gives the conversation a new ledger id; then `verify`, `log`, `project`, `recall`,
//! export → import all work, a new commit takes the next seq (never a lost one), and a
//! replay of a lost commit's id is class `lost`. A writer refuses to append when a row of
//! the open turn is missing or fails its checksum. Skipped with a message where PostgreSQL
//! is not installed; a failure under `CI`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "postgres")]

mod common;

use common::engines::{export, log};
use common::pg::PgCluster;
use ctxlog::ops::{
    CommitRequest, EraseRequest, EraseTarget, ImportRequest, ProjectRequest, RecallRequest,
    RepairRequest, VerifyRequest,
};
use ctxlog::transfer::ImportFormat;
use ctxlog::{ErrorClass, Store};

struct Pg {
    cluster: PgCluster,
    cache: tempfile::TempDir,
}

impl Pg {
    fn start() -> Option<Pg> {
        Some(Pg {
            cluster: PgCluster::start()?,
            cache: tempfile::tempdir().unwrap(),
        })
    }

    /// A store on schema `schema` (another replica each call).
    fn store(&self, schema: &str) -> Store {
        Store::open_url(&self.cluster.url(schema, self.cache.path())).unwrap()
    }

    fn fingerprint(&self, schema: &str) -> String {
        self.cluster.fingerprint(schema)
    }

    fn sql(&self, schema: &str, sql: &str) -> String {
        self.cluster
            .psql(&sql.replace("{s}", &format!("\"{schema}\"")))
    }
}

fn commit(store: &Store, json: &str, id: Option<&str>) -> ctxlog::Result<ctxlog::CommitReceipt> {
    store.commit(&CommitRequest::from_json("c", json.as_bytes(), id)?)
}

/// t1 (seqs 1-2), t2 (3-6: a tool call and its 29 KB result, an artifact), t3 (7-8), t4 (9-10).
fn four_commits(store: &Store) {
    let big = "tool output line\n".repeat(1_800);
    let turns = [
        serde_json::json!({"user": "first question", "assistant": "first answer"}),
        serde_json::json!({"events": [{"kind": "user", "text": "run the scan"},
            {"kind": "tool_call", "call_id": "k1", "tool": "scan", "arguments": {}},
            {"kind": "tool_result", "call_id": "k1", "tool": "scan", "status": "ok", "text": big},
            {"kind": "assistant", "text": "scan done"}]}),
        serde_json::json!({"user": "third question", "assistant": "the code is ZX-81"}),
        serde_json::json!({"user": "fourth question", "assistant": "fourth answer"}),
    ];
    for (i, t) in turns.iter().enumerate() {
        commit(store, &t.to_string(), Some(&format!("t{}", i + 1))).unwrap();
    }
}

fn repair(store: &Store, accept_loss: bool) -> ctxlog::Result<ctxlog::ops::RepairResponse> {
    store.repair(&RepairRequest {
        conversation: "c".into(),
        accept_loss,
    })
}

fn verify(store: &Store) -> ctxlog::Result<ctxlog::ops::VerifyResponse> {
    store.verify(&VerifyRequest {
        conversation: "c".into(),
    })
}

/// After `repair --accept-loss` of a conversation whose lost seqs are `lost` (the commit
/// `lost_id` among them): everything reads, the loss shows, nothing is handed out again.
fn everything_reads_after(store: &Store, lost: (u64, u64), lost_id: &str) {
    let v = verify(store).unwrap();
    assert_eq!(v.ledger.lost, lost.1 - lost.0 + 1, "{v:?}");
    let log = log(store, "c").unwrap();
    let text = serde_json::to_string(&log).unwrap();
    assert!(text.contains("\"loss\""), "{text}");
    let p = store
        .project(&ProjectRequest {
            conversation: "c".into(),
            input: Some("hi".into()),
            max_bytes: Some(100_000),
            ..Default::default()
        })
        .unwrap();
    let body = String::from_utf8(p.body).unwrap();
    assert!(body.contains("fourth answer"), "{body}");
    let hits = store
        .recall(&RecallRequest {
            conversation: "c".into(),
            query: "fourth".into(),
            seq: None,
            offset: 0,
            limit: 5,
        })
        .unwrap();
    assert!(!hits.hits.is_empty());
    let err = commit(store, r#"{"user":"retry"}"#, Some(lost_id)).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Lost, "{err}");
    let next = commit(store, r#"{"user":"after","assistant":"repair"}"#, None).unwrap();
    assert_eq!(next.first_seq, 11, "the seq counter never goes back");
    let out = export(store, "c");
    store
        .import(
            &ImportRequest {
                conversation: Some("copy".into()),
                format: ImportFormat::Ctxlog,
            },
            &out,
            &mut |_| {},
        )
        .unwrap();
    assert_eq!(out, export(store, "copy"), "export → import rebuilds it");
}

#[test]
fn a_deleted_row_and_an_altered_row_are_repaired_in_one_transaction() {
    let Some(pg) = Pg::start() else {
        return;
    };
    // A row deleted by hand: every read fails, naming the seq and the repair command.
    let store = pg.store("deleted");
    four_commits(&store);
    pg.sql(
        "deleted",
        "DELETE FROM {s}.events WHERE conversation = 'c' AND seq = 7",
    );
    let fresh = pg.store("deleted");
    let err = verify(&fresh).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Corrupt, "{err}");
    assert!(err.to_string().contains("seq 7"), "{err}");
    assert!(err.to_string().contains("ctxlog repair c"), "{err}");
    let err = commit(&fresh, r#"{"user":"onto damage"}"#, None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Corrupt, "{err}");
    let before = pg.fingerprint("deleted");
    let plan = repair(&fresh, false).unwrap();
    assert_eq!(
        before,
        pg.fingerprint("deleted"),
        "a dry run writes nothing"
    );
    assert!(plan.needed && !plan.applied);
    assert_eq!(plan.lost_seqs, 1);
    assert_eq!(plan.kept, [(1, 6), (8, 10)]);
    assert_eq!(plan.commits.len(), 1, "{:?}", plan.commits);
    assert_eq!(plan.commits[0].first_seq, 7);
    let done = repair(&fresh, true).unwrap();
    assert!(done.applied);
    assert_eq!((done.lost_seqs, done.kept_seqs, done.last_seq), (1, 9, 10));
    assert_eq!(
        pg.sql("deleted", "SELECT count(*) FROM {s}.recovered")
            .trim(),
        "0"
    );
    // The replica that loaded the conversation before the repair starts over (new ledger id).
    everything_reads_after(&store, (7, 7), "t3");

    // A row altered by hand: its checksum fails; its bytes are saved aside.
    let store = pg.store("altered");
    four_commits(&store);
    pg.sql(
        "altered",
        "UPDATE {s}.events SET payload = overlay(payload placing '\\x5a'::bytea from 12 for 1) \
         WHERE conversation = 'c' AND seq = 9",
    );
    let fresh = pg.store("altered");
    let err = verify(&fresh).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Corrupt, "{err}");
    assert!(err.to_string().contains("seq 9"), "{err}");
    let err = commit(&fresh, r#"{"user":"onto damage"}"#, None).unwrap_err();
    assert_eq!(
        err.class(),
        ErrorClass::Corrupt,
        "the writer reads the open turn: {err}"
    );
    let plan = repair(&fresh, false).unwrap();
    assert_eq!(plan.lost_seqs, 1);
    assert!(plan.bytes_saved > 0);
    let done = repair(&fresh, true).unwrap();
    assert_eq!(
        done.saved_aside[0].file.as_deref(),
        Some("altered.recovered")
    );
    let saved = pg.sql(
        "altered",
        "SELECT seq, length(content) FROM {s}.recovered WHERE conversation = 'c'",
    );
    assert_eq!(saved.trim(), format!("9|{}", done.bytes_saved));
    everything_reads_after(&store, (9, 9), "t4");
    // Erasing the lost seq's turn deletes what was saved aside of it.
    store
        .erase(&EraseRequest {
            conversation: "c".into(),
            target: EraseTarget::Seqs { from: 9, to: 10 },
            reason: "asked".into(),
        })
        .unwrap();
    assert_eq!(
        pg.sql("altered", "SELECT count(*) FROM {s}.recovered")
            .trim(),
        "0"
    );
}

#[test]
fn a_lost_tool_result_takes_its_call_with_it() {
    let Some(pg) = Pg::start() else {
        return;
    };
    let store = pg.store("pairs");
    four_commits(&store);
    pg.sql(
        "pairs",
        "DELETE FROM {s}.events WHERE conversation = 'c' AND seq = 5",
    );
    let done = repair(&store, true).unwrap();
    assert_eq!(
        done.kept,
        [(1, 3), (6, 10)],
        "the call at 4 no longer pairs up"
    );
    assert_eq!(done.lost.len(), 1);
    assert!(done.lost[0].reason.contains("pair up"), "{:?}", done.lost);
    assert_eq!(
        done.artifacts_saved_aside.len(),
        1,
        "the lost result's artifact is saved aside"
    );
    let saved = pg.sql(
        "pairs",
        "SELECT coalesce(seq::text, artifact) FROM {s}.recovered ORDER BY id",
    );
    assert_eq!(saved.lines().count(), 2, "{saved}");
    assert!(saved.starts_with("4\n"), "{saved}");
    verify(&store).unwrap();
}

#[test]
fn a_writer_refuses_to_append_onto_damage_it_can_see() {
    let Some(pg) = Pg::start() else {
        return;
    };
    let store = pg.store("writer");
    four_commits(&store);
    // The last row deleted under a writer that has it loaded: the open turn's rows are read
    // before each append.
    pg.sql(
        "writer",
        "DELETE FROM {s}.events WHERE conversation = 'c' AND seq = 10",
    );
    let err = commit(&store, r#"{"user":"more"}"#, None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Corrupt, "{err}");
    assert!(err.to_string().contains("seq 10"), "{err}");
    assert!(err.to_string().contains("repair"), "{err}");
    // A row before the open turn deleted under the same writer: invisible to it (it catches
    // up past its last seq only), as docs/reliability.md says; a fresh open sees it.
    let store = pg.store("middle");
    four_commits(&store);
    pg.sql(
        "middle",
        "DELETE FROM {s}.events WHERE conversation = 'c' AND seq = 2",
    );
    commit(&store, r#"{"user":"unseen","assistant":"ok"}"#, None).unwrap();
    let err = commit(&pg.store("middle"), r#"{"user":"fresh"}"#, None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Corrupt, "{err}");
    assert_eq!(verify(&store).unwrap_err().class(), ErrorClass::Corrupt);
}

/// Erasing intact seqs without repairing first: with an altered row elsewhere the erasure
/// deletes what it is asked to and leaves the damaged row as it was (rows are deleted by seq,
/// never read), and a range holding the altered row deletes it too; with a row missing no
/// writer opens, so only a whole erasure (or a repair first) is possible, and it says so with
/// the repair command.
#[test]
fn intact_seqs_of_a_damaged_conversation_can_be_erased() {
    let Some(pg) = Pg::start() else {
        return;
    };
    let store = pg.store("erase");
    four_commits(&store);
    pg.sql(
        "erase",
        "UPDATE {s}.events SET payload = overlay(payload placing '\\x5a'::bytea from 12 for 1) \
         WHERE conversation = 'c' AND seq = 8",
    );
    let damaged = "SELECT md5(payload) FROM {s}.events WHERE conversation = 'c' AND seq = 8";
    let before = pg.sql("erase", damaged);
    let erase = |store: &Store, from, to| {
        store.erase(&EraseRequest {
            conversation: "c".into(),
            target: EraseTarget::Seqs { from, to },
            reason: "asked".into(),
        })
    };
    erase(&pg.store("erase"), 1, 2).unwrap();
    assert_eq!(before, pg.sql("erase", damaged));
    let text = pg.sql(
        "erase",
        "SELECT count(*) FROM {s}.events WHERE conversation = 'c' AND convert_from(payload, 'UTF8') LIKE '%first question%'",
    );
    assert_eq!(text.trim(), "0");
    // A range holding the altered row erases it with the rest: the row is the whole damaged
    // range, so nothing of it is left to hold erased text, and the conversation is intact.
    erase(&pg.store("erase"), 7, 8).unwrap();
    let text = pg.sql(
        "erase",
        "SELECT count(*) FROM {s}.events WHERE conversation = 'c' AND position('ZX-81' in convert_from(payload, 'UTF8')) > 0",
    );
    assert_eq!(text.trim(), "0");
    verify(&pg.store("erase")).unwrap();
    pg.sql(
        "erase",
        "DELETE FROM {s}.events WHERE conversation = 'c' AND seq = 10",
    );
    let err = erase(&pg.store("erase"), 3, 6).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Corrupt, "{err}");
    assert!(err.to_string().contains("repair"), "{err}");
}

/// Media artifacts: an image whose artifact row was deleted is recorded as a lost artifact
/// (its part becomes a text part saying so, and projection reads it), while an intact image
/// of another kept row stays where it is, never saved aside as unreferenced.
#[test]
fn a_lost_image_is_recorded_and_an_intact_one_is_kept() {
    let Some(pg) = Pg::start() else {
        return;
    };
    const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAADUlEQVR42mP4zwAE/wEHAAH/PX2MSQAAAABJRU5ErkJggg==";
    const PDF_B64: &str = "JVBERi0xLjQKMSAwIG9iaiA8PC9UeXBlIC9QYWdlPj4gZW5kb2JqCg==";
    let store = pg.store("media");
    for (id, part) in [
        (
            "m1",
            format!(r#"{{"type":"image","data":"{PNG_B64}","media_type":"image/png"}}"#),
        ),
        (
            "m2",
            format!(
                r#"{{"type":"document","data":"{PDF_B64}","media_type":"application/pdf","name":"q3.pdf"}}"#
            ),
        ),
    ] {
        let turn = format!(
            r#"{{"events":[{{"kind":"user","text":"what is this?","parts":[{part}]}},{{"kind":"assistant","text":"a chart"}}]}}"#
        );
        commit(&store, &turn, Some(id)).unwrap();
    }
    let png = log(&store, "c").unwrap().events[0].body.parts()[0]
        .artifact()
        .unwrap()
        .name
        .clone();
    pg.sql(
        "media",
        &format!("DELETE FROM {{s}}.artifacts WHERE conversation = 'c' AND name = '{png}'"),
    );
    let plan = repair(&store, false).unwrap();
    assert_eq!(plan.artifacts_lost.len(), 1, "{plan:?}");
    assert!(
        plan.artifacts_lost[0].starts_with(&format!("{png}: ")),
        "{plan:?}"
    );
    assert!(plan.artifacts_saved_aside.is_empty(), "{plan:?}");
    repair(&store, true).unwrap();
    verify(&store).unwrap();
    let events = log(&store, "c").unwrap().events;
    assert!(
        matches!(&events[0].body.parts()[0], ctxlog::ledger::event::Part::Text { text }
            if text.starts_with(&format!("[artifact lost: image {png}: "))),
        "{:?}",
        events[0]
    );
    assert!(events[2].body.parts()[0].artifact().is_some());
    let body = store
        .project(&ProjectRequest {
            conversation: "c".into(),
            input: Some("and now?".into()),
            ..Default::default()
        })
        .unwrap()
        .body;
    let body = String::from_utf8(body).unwrap();
    assert!(body.contains("[artifact lost: image"), "{body}");
    assert!(body.contains("data:application/pdf;base64,"), "{body}");
}
