//! Failure class: a later version of the code that can no longer read ledgers written today.
//!
//! Guarantee (STYLE practice 5): the small ledger checked into `tests/golden/v1/` (format
//! version 1: a multi-event commit with an id, a tool call and result, an artifact, a note, a
//! system marker) is read back event for event, verifies clean, keeps its ledger id, and
//! accepts new commits. Never regenerate it for a format change: add `v2/` beside it.
//! (It was regenerated once before the first release, for sidecar version 2 and the
//! canonical commit digest; the earlier files, written without `notes.idx`, are kept in
//! `v1-before-notes-idx/` and must still open: their sidecars are rebuilt.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use ctxlog_ledger::{
    ArtifactRef, EventBody, Ledger, LedgerRead, NewCommit, Options, Reader, SystemMarker,
    ToolStatus,
};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/v1")
}

const LEDGER_ID_FILE: &str = "ledger-id.txt";

fn artifact_text() -> String {
    (0..200).map(|i| format!("build line {i}\n")).collect()
}

fn commits() -> Vec<NewCommit> {
    vec![
        NewCommit::new(vec![note("The project code is ZX-81.")]),
        NewCommit {
            id: Some("turn-1".into()),
            events: vec![
                user("Build it, 请 — \"quoted\"\nnewline 🚀"),
                call("c1"),
                result("c1", &artifact_text()),
                assistant("Built."),
            ],
            ..Default::default()
        },
    ]
}

fn expected_bodies() -> Vec<EventBody> {
    let text = artifact_text();
    let name = ctxlog_ledger::artifact_name(text.as_bytes());
    let excerpt = ctxlog_ledger::excerpt(&text, 1024, &name);
    let mut all: Vec<EventBody> = commits().into_iter().flat_map(|c| c.events).collect();
    all[3] = EventBody::ToolResult {
        call_id: "c1".into(),
        tool: "shell".into(),
        status: ToolStatus::Ok,
        exit_code: Some(0),
        text: excerpt,
        artifact: Some(ArtifactRef {
            name,
            bytes: text.len() as u64,
        }),
        parts: Vec::new(),
        provider_item: None,
    };
    all.push(EventBody::System {
        marker: SystemMarker::Import {
            source: "golden".into(),
        },
    });
    all
}

fn options() -> Options {
    let mut o = Options::default();
    o.artifact_threshold(1024);
    o
}

/// Writes the golden ledger. Run once, deliberately:
/// `CTXLOG_WRITE_GOLDEN=1 cargo test -p ctxlog-ledger --test golden -- --ignored`.
#[test]
#[ignore]
fn write_golden() {
    if std::env::var("CTXLOG_WRITE_GOLDEN").is_err() {
        return;
    }
    let dir = golden_dir();
    assert!(
        !dir.join("ledger.log").exists(),
        "golden files are frozen; add a new version instead"
    );
    let (mut ledger, _) = Ledger::open(&dir, &options()).unwrap();
    for c in commits() {
        ledger.commit(&c).unwrap();
    }
    ledger
        .commit_marker(SystemMarker::Import {
            source: "golden".into(),
        })
        .unwrap();
    std::fs::write(dir.join(LEDGER_ID_FILE), ledger.ledger_id()).unwrap();
    drop(ledger);
    std::fs::remove_file(dir.join("lock")).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn the_v1_golden_ledger_reads_back() {
    let dir = golden_dir();
    let before = snapshot_dir(&dir);
    let reader = Reader::open(&dir).unwrap();
    assert_eq!(
        reader.ledger_id(),
        std::fs::read_to_string(dir.join(LEDGER_ID_FILE)).unwrap()
    );
    let want = expected_bodies();
    assert_eq!(reader.last_seq(), want.len() as u64);
    let got: Vec<EventBody> = reader
        .events(1..=reader.last_seq())
        .unwrap()
        .into_iter()
        .map(|e| e.body)
        .collect();
    assert_eq!(got, want);
    assert_eq!(reader.user_seqs(), &[2]);
    assert_eq!(reader.note_seqs(), &[1]);
    let EventBody::ToolResult {
        artifact: Some(r), ..
    } = &want[3]
    else {
        panic!()
    };
    assert_eq!(reader.artifact(r).unwrap(), artifact_text().as_bytes());
    let report = ctxlog_ledger::verify(&dir).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(
        (report.events, report.artifacts, report.commits_with_id),
        (6, 1, 1)
    );
    assert_eq!(snapshot_dir(&dir), before, "reading wrote nothing");
}

#[test]
fn the_v1_golden_ledger_accepts_commits_and_replays_its_id() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&golden_dir(), tmp.path());
    // Also without its sidecars: they are rebuilt from the log.
    for strip in [false, true] {
        if strip {
            for side in ["ledger.idx", "turns.idx", "notes.idx", "commits.idx"] {
                let _ = std::fs::remove_file(tmp.path().join(side));
            }
        }
        let (mut ledger, report) = Ledger::open(tmp.path(), &options()).unwrap();
        assert!(report.is_clean());
        assert_eq!(report.index_rebuilt, strip);
        let replay = ledger.commit(&commits()[1]).unwrap();
        assert_eq!(
            (replay.first_seq, replay.last_seq, replay.replayed),
            (2, 5, true)
        );
    }
    let (mut ledger, _) = Ledger::open(tmp.path(), &options()).unwrap();
    assert_eq!(ledger.commit(&turn(2)).unwrap().first_seq, 7);
}

/// A ledger written before `notes.idx` existed (sidecar version 1: 36-byte `ledger.idx`
/// entries, no `notes.idx`). Its log is the same format; only the caches differ, so it
/// opens: readers scan the log, the first writer open rebuilds all four sidecars.
#[test]
fn a_ledger_written_without_notes_idx_still_opens() {
    let old = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/v1-before-notes-idx");
    assert!(old.join("ledger.idx").exists() && !old.join("notes.idx").exists());
    let before = snapshot_dir(&old);
    let reader = Reader::open(&old).unwrap();
    assert_eq!(reader.last_seq(), 6);
    assert_eq!(reader.note_seqs(), &[1]);
    assert_eq!(reader.user_seqs(), &[2]);
    let got: Vec<EventBody> = reader
        .events(1..=6)
        .unwrap()
        .into_iter()
        .map(|e| e.body)
        .collect();
    assert_eq!(got, expected_bodies());
    let report = ctxlog_ledger::verify(&old).unwrap();
    assert_eq!((report.events, report.torn_tail_bytes), (6, 0));
    assert!(!report.sidecar_ok, "old sidecars are reported stale");
    assert_eq!(snapshot_dir(&old), before, "reading wrote nothing");

    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&old, tmp.path());
    let (mut ledger, report) = Ledger::open(tmp.path(), &options()).unwrap();
    assert!(report.is_clean() && report.index_rebuilt);
    assert_eq!(ledger.note_seqs(), &[1]);
    assert_eq!(ledger.commit(&commits()[0]).unwrap().first_seq, 7);
    assert_eq!(ledger.note_seqs(), &[1, 7]);
    drop(ledger);
    assert!(tmp.path().join("notes.idx").exists());
    assert!(ctxlog_ledger::verify(tmp.path()).unwrap().is_clean());
    let (ledger, report) = Ledger::open(tmp.path(), &options()).unwrap();
    assert!(!report.index_rebuilt);
    assert_eq!(ledger.note_seqs(), &[1, 7]);
}

/// The ledger in `tests/golden/v1-event-times/`: an id-carrying commit with a time per event
/// (an import keeps each message's time, docs/design.md#l10-event-times), then a live commit. Same
/// format version: only the `ts_ms` values differ within a commit.
fn timed_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/v1-event-times")
}

/// 1:56 pm on 8 May 2023, UTC.
const MAY_2023_MS: i64 = 1_683_554_160_000;

fn timed_commit() -> NewCommit {
    NewCommit::new(vec![
        user("Hey Mel! Good to see you!"),
        assistant("Hey Caroline! Good to see you too."),
    ])
    .with_id("import-1")
    .with_times(vec![Some(MAY_2023_MS), Some(MAY_2023_MS + 30_000)])
}

/// Writes the timed golden ledger, like [`write_golden`]:
/// `CTXLOG_WRITE_GOLDEN=1 cargo test -p ctxlog-ledger --test golden -- --ignored`.
#[test]
#[ignore]
fn write_timed_golden() {
    if std::env::var("CTXLOG_WRITE_GOLDEN").is_err() {
        return;
    }
    let dir = timed_dir();
    assert!(
        !dir.join("ledger.log").exists(),
        "golden files are frozen; add a new version instead"
    );
    let (mut ledger, _) = Ledger::open(&dir, &options()).unwrap();
    ledger.commit(&timed_commit()).unwrap();
    ledger.commit(&turn(1)).unwrap();
    std::fs::write(dir.join(LEDGER_ID_FILE), ledger.ledger_id()).unwrap();
    drop(ledger);
    std::fs::remove_file(dir.join("lock")).unwrap();
}

#[test]
fn the_timed_golden_ledger_keeps_each_events_time_and_replays_its_id() {
    let dir = timed_dir();
    let before = snapshot_dir(&dir);
    let reader = Reader::open(&dir).unwrap();
    let events = reader.events(1..=reader.last_seq()).unwrap();
    assert_eq!(events.len(), 4);
    assert_eq!(events[0].ts_ms, MAY_2023_MS);
    assert_eq!(events[1].ts_ms, MAY_2023_MS + 30_000);
    // The live commit took the clock (it was written long after May 2023), one time for both.
    assert!(events[2].ts_ms > MAY_2023_MS + 30_000);
    assert_eq!(events[2].ts_ms, events[3].ts_ms);
    assert!(ctxlog_ledger::verify(&dir).unwrap().is_clean());
    assert_eq!(snapshot_dir(&dir), before, "reading wrote nothing");

    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&dir, tmp.path());
    let (mut ledger, _) = Ledger::open(tmp.path(), &options()).unwrap();
    let commit = timed_commit();
    assert!(ledger.commit(&commit).unwrap().replayed);
    // The same id with other times is another content.
    let other = vec![Some(MAY_2023_MS), Some(MAY_2023_MS + 1)];
    assert!(matches!(
        ledger.commit(&commit.clone().with_times(other)),
        Err(ctxlog_ledger::Error::Conflict { .. })
    ));
    // Without times the digest is the one commits had before times existed: also another.
    assert!(ledger.commit(&commit.with_times(vec![])).is_err());
}

/// The v1 golden (written before explicit times) still replays its id when every event's
/// time is `None`: no-time digests did not change.
#[test]
fn a_commit_without_times_digests_as_before() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&golden_dir(), tmp.path());
    let (mut ledger, _) = Ledger::open(tmp.path(), &options()).unwrap();
    let replay = ledger
        .commit(&commits()[1].clone().with_times(vec![None, None]))
        .unwrap();
    assert!(replay.replayed);
}

/// The ledger in `tests/golden/v2-repaired/`: three id-carrying commits (r1 seqs 1-2, r2 3-4,
/// r3 5-6) of which r2's user event was damaged (one byte flipped) and given up by
/// `repair --accept-loss`: seq 3 is a loss record (docs/design.md#l11-repair), seq 4 the rest
/// of r2, re-framed as a commit of its own. The loss record is the version-2 addition.
fn repaired_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/v2-repaired")
}

fn repaired_commits() -> Vec<NewCommit> {
    (1..=3)
        .map(|i| {
            NewCommit::new(vec![
                user(&format!("question {i}")),
                assistant(&format!("answer {i}")),
            ])
            .with_id(format!("r{i}"))
        })
        .collect()
}

/// Writes the repaired golden ledger, like [`write_golden`]:
/// `CTXLOG_WRITE_GOLDEN=1 cargo test -p ctxlog-ledger --test golden -- --ignored`.
#[test]
#[ignore]
fn write_repaired_golden() {
    if std::env::var("CTXLOG_WRITE_GOLDEN").is_err() {
        return;
    }
    let dir = repaired_dir();
    assert!(
        !dir.join("ledger.log").exists(),
        "golden files are frozen; add a new version instead"
    );
    let (mut ledger, _) = Ledger::open(&dir, &options()).unwrap();
    for c in repaired_commits() {
        ledger.commit(&c).unwrap();
    }
    drop(ledger);
    let log = dir.join("ledger.log");
    let mut bytes = std::fs::read(&log).unwrap();
    let at = bytes.windows(10).position(|w| w == b"question 2").unwrap();
    bytes[at] ^= 0x20;
    std::fs::write(&log, bytes).unwrap();
    let st = std::sync::Arc::new(ctxlog_ledger::DirStorage::new(&dir));
    let report = ctxlog_ledger::repair_with(st, true, &options()).unwrap();
    assert!(report.applied);
    let reader = Reader::open(&dir).unwrap();
    std::fs::write(dir.join(LEDGER_ID_FILE), reader.ledger_id()).unwrap();
    std::fs::remove_file(dir.join("lock")).unwrap();
}

#[test]
fn the_repaired_golden_ledger_reads_its_loss_record_and_refuses_the_lost_id() {
    let dir = repaired_dir();
    let before = snapshot_dir(&dir);
    // Repair writes a whole new log at version 2 (the records it copies keep their own
    // version bytes; these were written at version 2 too).
    assert_eq!(header_version(&dir), 2);
    assert_eq!(record_versions(&dir), [2; 6]);
    let reader = Reader::open(&dir).unwrap();
    assert_eq!(
        reader.ledger_id(),
        std::fs::read_to_string(dir.join(LEDGER_ID_FILE)).unwrap()
    );
    let events = reader.events(1..=reader.last_seq()).unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
    match &events[2].body {
        EventBody::System {
            marker: SystemMarker::Loss {
                from, to, reason, ..
            },
        } => assert_eq!(
            (*from, *to, reason.as_str()),
            (3, 3, "record checksum mismatch")
        ),
        other => panic!("seq 3 is not a loss record: {other:?}"),
    }
    assert_eq!(events[3].body, assistant("answer 2"));
    let report = ctxlog_ledger::verify(&dir).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.lost, 1);
    assert_eq!(snapshot_dir(&dir), before, "reading wrote nothing");

    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&dir, tmp.path());
    let (mut ledger, _) = Ledger::open(tmp.path(), &options()).unwrap();
    let commits = repaired_commits();
    assert!(ledger.commit(&commits[0]).unwrap().replayed);
    assert!(matches!(
        ledger.commit(&commits[1]),
        Err(ctxlog_ledger::Error::Lost { from: 3, to: 3, .. })
    ));
    assert_eq!(ledger.commit(&turn(9)).unwrap().first_seq, 7);
}

// ---- version 2 --------------------------------------------------------------------------

/// The ledger in `tests/golden/v2/`: format version 2, whose one addition is event kind 7
/// (`opaque`, a provider item stored as given): a turn carrying an OpenAI Responses reasoning
/// item and an Anthropic thinking block beside a tool call with an artifact.
fn v2_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/v2")
}

fn opaque(json: &str) -> EventBody {
    serde_json::from_str(json).unwrap()
}

const REASONING: &str = r#"{"kind":"opaque","format":"openai-responses","item":{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAAB…=="}}"#;
const THINKING: &str = r#"{"kind":"opaque","format":"anthropic-messages","item":{"type":"thinking","thinking":"Check the build first.","signature":"EqQBCgIYAh…"}}"#;

fn v2_commits() -> Vec<NewCommit> {
    vec![NewCommit {
        id: Some("turn-1".into()),
        events: vec![
            user("Build it"),
            opaque(REASONING),
            opaque(THINKING),
            call("c1"),
            result("c1", &artifact_text()),
            assistant("Built."),
        ],
        ..Default::default()
    }]
}

/// Writes the version-2 golden ledger, like [`write_golden`].
#[test]
#[ignore]
fn write_v2_golden() {
    if std::env::var("CTXLOG_WRITE_GOLDEN").is_err() {
        return;
    }
    let dir = v2_dir();
    assert!(
        !dir.join("ledger.log").exists(),
        "golden files are frozen; add a new version instead"
    );
    let (mut ledger, _) = Ledger::open(&dir, &options()).unwrap();
    for c in v2_commits() {
        ledger.commit(&c).unwrap();
    }
    std::fs::write(dir.join(LEDGER_ID_FILE), ledger.ledger_id()).unwrap();
    drop(ledger);
    std::fs::remove_file(dir.join("lock")).unwrap();
}

fn header_version(dir: &Path) -> u16 {
    let log = std::fs::read(dir.join("ledger.log")).unwrap();
    ctxlog_ledger::format::LogHeader::decode(&log[..64])
        .unwrap()
        .version
}

/// Each record's version field, in log order.
fn record_versions(dir: &Path) -> Vec<u16> {
    let log = std::fs::read(dir.join("ledger.log")).unwrap();
    record_offsets(&log)
        .into_iter()
        .map(|(at, _)| u16::from_le_bytes([log[at as usize + 8], log[at as usize + 9]]))
        .collect()
}

#[test]
fn the_v2_golden_ledger_reads_back_with_its_opaque_items() {
    let dir = v2_dir();
    let before = snapshot_dir(&dir);
    assert_eq!(header_version(&dir), 2);
    assert_eq!(record_versions(&dir), vec![2; 6]);
    let reader = Reader::open(&dir).unwrap();
    assert_eq!(
        reader.ledger_id(),
        std::fs::read_to_string(dir.join(LEDGER_ID_FILE)).unwrap()
    );
    let got = reader.events(1..=6).unwrap();
    assert_eq!(got[1].body, opaque(REASONING));
    assert_eq!(got[2].body, opaque(THINKING));
    // Stored as given: the item's keys in the order they were sent.
    assert_eq!(
        serde_json::to_string(&got[1].body).unwrap(),
        REASONING,
        "an opaque item is kept byte for byte"
    );
    assert!(matches!(
        &got[4].body,
        EventBody::ToolResult {
            artifact: Some(_),
            ..
        }
    ));
    let report = ctxlog_ledger::verify(&dir).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!((report.events, report.artifacts), (6, 1));
    assert_eq!(snapshot_dir(&dir), before, "reading wrote nothing");

    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&dir, tmp.path());
    let (mut ledger, report) = Ledger::open(tmp.path(), &options()).unwrap();
    assert!(report.is_clean());
    assert!(ledger.commit(&v2_commits()[0]).unwrap().replayed);
    assert_eq!(ledger.commit(&turn(2)).unwrap().first_seq, 7);
}

// ---- version 2 with media parts -----------------------------------------------------------

/// The ledger in `tests/golden/v2-media/`: version 2's media parts (a user event whose image
/// and document became artifacts, an image by URL, a tool result with an image). Written by
/// [`write_v2_media_golden`]; the base64 below is what was committed, and never in the log.
fn v2_media_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/v2-media")
}

/// A whole 2 × 1 PNG (one red, one blue pixel), base64.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAADUlEQVR42mP4zwAE/wEHAAH/PX2MSQAAAABJRU5ErkJggg==";
/// `%PDF-1.4` and a page object, base64.
const PDF_B64: &str = "JVBERi0xLjQKMSAwIG9iaiA8PC9UeXBlIC9QYWdlPj4gZW5kb2JqCg==";

fn v2_media_commits() -> Vec<NewCommit> {
    let user_turn = format!(
        r#"{{"kind":"user","text":"What do these show?","parts":[{{"type":"image","data":"{PNG_B64}","media_type":"image/png","detail":"high"}},{{"type":"image","url":"https://example.com/a.png"}},{{"type":"document","data":"{PDF_B64}","media_type":"application/pdf","name":"q3.pdf"}}]}}"#
    );
    let shot = format!(
        r#"{{"kind":"tool_result","call_id":"c1","tool":"shell","status":"ok","text":"shot","parts":[{{"type":"image","data":"{PNG_B64}","media_type":"image/png"}}]}}"#
    );
    vec![NewCommit {
        id: Some("media-1".into()),
        events: vec![
            opaque(&user_turn),
            call("c1"),
            opaque(&shot),
            assistant("A chart and a report."),
        ],
        ..Default::default()
    }]
}

/// Writes the media golden ledger, like [`write_golden`].
#[test]
#[ignore]
fn write_v2_media_golden() {
    if std::env::var("CTXLOG_WRITE_GOLDEN").is_err() {
        return;
    }
    let dir = v2_media_dir();
    assert!(
        !dir.join("ledger.log").exists(),
        "golden files are frozen; add a new version instead"
    );
    std::fs::create_dir_all(&dir).unwrap();
    let (mut ledger, _) = Ledger::open(&dir, &options()).unwrap();
    for c in v2_media_commits() {
        ledger.commit(&c).unwrap();
    }
    std::fs::write(dir.join(LEDGER_ID_FILE), ledger.ledger_id()).unwrap();
    drop(ledger);
    std::fs::remove_file(dir.join("lock")).unwrap();
}

#[test]
fn the_v2_media_golden_ledger_reads_back_its_parts_as_artifacts() {
    let dir = v2_media_dir();
    let before = snapshot_dir(&dir);
    assert_eq!(header_version(&dir), 2);
    assert_eq!(record_versions(&dir), vec![2; 4]);
    let log = std::fs::read(dir.join("ledger.log")).unwrap();
    let log_text = String::from_utf8_lossy(&log);
    assert!(!log_text.contains(PNG_B64) && !log_text.contains(PDF_B64));
    let reader = Reader::open(&dir).unwrap();
    let got = reader.events(1..=4).unwrap();
    assert_eq!(
        serde_json::to_string(&got[0].body).unwrap(),
        r#"{"kind":"user","text":"What do these show?","parts":[{"type":"image","media_type":"image/png","detail":"high","artifact":{"name":"sha256-7c12c1f9323964065d6b659ec1fe67544707644bf1ce287b9b1c195250adfdfe","bytes":70}},{"type":"image","url":"https://example.com/a.png"},{"type":"document","media_type":"application/pdf","name":"q3.pdf","artifact":{"name":"sha256-7cf1d65d28e7e111bf1cadb46479e71a64d004456deb3fb168d6a3ff437efd8d","bytes":40}}]}"#
    );
    // The image and the document; the tool result's image is the same bytes, stored once.
    let report = ctxlog_ledger::verify(&dir).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!((report.events, report.artifacts), (4, 2));
    assert_eq!(snapshot_dir(&dir), before, "reading wrote nothing");
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&dir, tmp.path());
    let (mut ledger, report) = Ledger::open(tmp.path(), &options()).unwrap();
    assert!(report.is_clean());
    assert!(ledger.commit(&v2_media_commits()[0]).unwrap().replayed);
}

// ---- version 2 with provider items --------------------------------------------------------

/// The ledger in `tests/golden/v2-provider-items/`: version 2's provider items (an assistant
/// reply and a tool call carrying the provider's own Responses items, with their ids, status
/// and annotations; then a developer note, a user message of parts and a tool result with
/// theirs), written by [`write_v2_provider_golden`].
fn v2_provider_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/v2-provider-items")
}

const PROVIDER_CALL: &str = r#"{"kind":"tool_call","call_id":"call_1","tool":"add","arguments":"{\"a\":2,\"b\":3}","provider_item":{"format":"openai-responses","item":{"arguments":"{\"a\":2,\"b\":3}","call_id":"call_1","name":"add","type":"function_call","id":"fc_1","status":"completed"}}}"#;
const PROVIDER_REPLY: &str = r#"{"kind":"assistant","text":"2 + 3 = 5","provider_item":{"format":"openai-responses","item":{"id":"msg_1","content":[{"annotations":[],"text":"2 + 3 = 5","type":"output_text","logprobs":[]}],"role":"assistant","status":"completed","type":"message"}}}"#;

const PROVIDER_NOTE: &str = r#"{"kind":"note","text":"Answer briefly.","provider_item":{"format":"openai-responses","item":{"role":"developer","content":[{"type":"input_text","text":"Answer briefly."}]}}}"#;
const PROVIDER_USER: &str = r#"{"kind":"user","text":"What is in this picture?","provider_item":{"format":"openai-responses","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"What is in this picture?"},{"type":"input_image","image_url":"https://example.com/cat.png","detail":"low"}]}}}"#;
const PROVIDER_RESULT: &str = r#"{"kind":"tool_result","call_id":"call_2","tool":"look","status":"ok","text":"a cat","provider_item":{"format":"openai-responses","item":{"call_id":"call_2","output":"a cat","type":"function_call_output","id":"fco_2","status":"completed"}}}"#;

/// A user message whose Responses item holds an image as a `data:` URL, given as an image
/// part too (the image of [`PNG_B64`]): stored once, as one artifact both reference.
fn provider_image_user() -> String {
    format!(
        r#"{{"kind":"user","text":"","parts":[{{"type":"text","text":"And this one?"}},{{"type":"image","data":"{PNG_B64}","media_type":"image/png","detail":"auto"}}],"provider_item":{{"format":"openai-responses","item":{{"role":"user","content":[{{"type":"input_text","text":"And this one?"}},{{"type":"input_image","image_url":"data:image/png;base64,{PNG_B64}","detail":"auto"}}]}}}}}}"#
    )
}

/// [`provider_image_user`] as stored: the part and the item's URL reference one artifact,
/// the URL keeps only its head.
const PROVIDER_IMAGE_STORED: &str = r#"{"kind":"user","text":"","parts":[{"type":"text","text":"And this one?"},{"type":"image","media_type":"image/png","detail":"auto","artifact":{"name":"sha256-7c12c1f9323964065d6b659ec1fe67544707644bf1ce287b9b1c195250adfdfe","bytes":70}}],"provider_item":{"format":"openai-responses","item":{"role":"user","content":[{"type":"input_text","text":"And this one?"},{"type":"input_image","image_url":"data:image/png;base64,","detail":"auto"}]},"offloaded":[{"at":"/content/1/image_url","artifact":{"name":"sha256-7c12c1f9323964065d6b659ec1fe67544707644bf1ce287b9b1c195250adfdfe","bytes":70}}]}}"#;

fn v2_provider_commits() -> Vec<NewCommit> {
    let third = NewCommit {
        id: Some("provider-3".into()),
        events: vec![
            opaque(&provider_image_user()),
            assistant("A red and a blue pixel."),
        ],
        ..Default::default()
    };
    let second = NewCommit {
        id: Some("provider-2".into()),
        events: vec![
            opaque(PROVIDER_NOTE),
            opaque(PROVIDER_USER),
            opaque(r#"{"kind":"tool_call","call_id":"call_2","tool":"look","arguments":"{}"}"#),
            opaque(PROVIDER_RESULT),
        ],
        ..Default::default()
    };
    let first = NewCommit {
        id: Some("provider-1".into()),
        events: vec![
            user("What is 2 + 3?"),
            opaque(PROVIDER_CALL),
            EventBody::ToolResult {
                call_id: "call_1".into(),
                tool: "add".into(),
                status: ToolStatus::Ok,
                exit_code: None,
                text: "5".into(),
                artifact: None,
                parts: Vec::new(),
                provider_item: None,
            },
            opaque(PROVIDER_REPLY),
        ],
        ..Default::default()
    };
    vec![first, second, third]
}

/// Writes the provider-item golden ledger, like [`write_golden`]. Version 2 is not released:
/// a provider item added to it extends this ledger, its earlier commits replayed by their
/// ids (their records stay byte for byte) and the new ones appended.
#[test]
#[ignore]
fn write_v2_provider_golden() {
    if std::env::var("CTXLOG_WRITE_GOLDEN").is_err() {
        return;
    }
    let dir = v2_provider_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let (mut ledger, _) = Ledger::open(&dir, &options()).unwrap();
    for c in v2_provider_commits() {
        ledger.commit(&c).unwrap();
    }
    std::fs::write(dir.join(LEDGER_ID_FILE), ledger.ledger_id()).unwrap();
    drop(ledger);
    std::fs::remove_file(dir.join("lock")).unwrap();
}

#[test]
fn the_v2_provider_items_golden_ledger_reads_back_its_items_byte_for_byte() {
    let dir = v2_provider_dir();
    let before = snapshot_dir(&dir);
    assert_eq!(header_version(&dir), 2);
    assert_eq!(record_versions(&dir), vec![2; 10]);
    let log = std::fs::read(dir.join("ledger.log")).unwrap();
    assert!(
        !String::from_utf8_lossy(&log).contains(PNG_B64),
        "no base64 in the log"
    );
    let reader = Reader::open(&dir).unwrap();
    let got = reader.events(1..=10).unwrap();
    let json = |i: usize| serde_json::to_string(&got[i].body).unwrap();
    assert_eq!(json(1), PROVIDER_CALL);
    assert_eq!(json(3), PROVIDER_REPLY);
    assert_eq!(json(4), PROVIDER_NOTE);
    assert_eq!(json(5), PROVIDER_USER);
    assert_eq!(json(7), PROVIDER_RESULT);
    assert_eq!(json(8), PROVIDER_IMAGE_STORED);
    // Read back whole, the event is the commit as given: the item's URL byte for byte.
    let mut whole = got[8].body.clone();
    whole.inline_parts(|r| reader.artifact(r)).unwrap();
    assert_eq!(
        serde_json::to_string(&whole).unwrap(),
        provider_image_user()
    );
    let report = ctxlog_ledger::verify(&dir).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.artifacts, 1, "the image is stored once");
    assert_eq!(snapshot_dir(&dir), before, "reading wrote nothing");
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&dir, tmp.path());
    let (mut ledger, report) = Ledger::open(tmp.path(), &options()).unwrap();
    assert!(report.is_clean());
    for c in v2_provider_commits() {
        assert!(ledger.commit(&c).unwrap().replayed);
    }
}

#[test]
fn a_provider_item_that_says_something_else_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &options()).unwrap();
    ledger.commit(&commit(vec![user("hi")])).unwrap();
    let before = snapshot_dir(tmp.path());
    for (bad, says) in [
        (
            PROVIDER_REPLY.replace(
                r#""text":"2 + 3 = 5","type""#,
                r#""text":"2 + 3 = 6","type""#,
            ),
            "text differs",
        ),
        (
            PROVIDER_REPLY.replace(r#""type":"message""#, r#""type":"reasoning""#),
            "must be a \"message\" item",
        ),
        (
            PROVIDER_REPLY.replace(r#""role":"assistant""#, r#""role":"user""#),
            "\"role\": \"assistant\"",
        ),
        (
            PROVIDER_CALL.replace(r#""name":"add""#, r#""name":"sub""#),
            "name differs",
        ),
        (
            PROVIDER_CALL.replace(
                r#""call_id":"call_1","name""#,
                r#""call_id":"call_2","name""#,
            ),
            "call_id differs",
        ),
        (
            PROVIDER_CALL.replace(r#"{\"a\":2,\"b\":3}","call_id""#, r#"{\"a\":2}","call_id""#),
            "arguments differs",
        ),
    ] {
        let err = ledger
            .commit(&commit(vec![opaque(&bad)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{bad}: {err}");
    }
    let call = opaque(r#"{"kind":"tool_call","call_id":"call_2","tool":"look","arguments":"{}"}"#);
    for (bad, says) in [
        (
            PROVIDER_USER.replace(r#""text":"What is in this picture?"}"#, r#""text":"Who?"}"#),
            "text differs",
        ),
        (
            PROVIDER_USER.replace(r#""role":"user""#, r#""role":"assistant""#),
            "\"role\": \"user\"",
        ),
        (
            PROVIDER_NOTE.replace(r#""role":"developer""#, r#""role":"user""#),
            "\"role\": \"system\" or \"developer\"",
        ),
        (
            PROVIDER_RESULT.replace(r#""output":"a cat""#, r#""output":"a dog""#),
            "output differs",
        ),
        (
            PROVIDER_RESULT.replace(r#""type":"function_call_output""#, r#""type":"message""#),
            "must be a \"function_call_output\" item",
        ),
        (
            PROVIDER_USER.replace("openai-responses", "anthropic-messages"),
            "takes no anthropic-messages provider_item",
        ),
    ] {
        let events = if bad.contains("tool_result") {
            vec![call.clone(), opaque(&bad)]
        } else {
            vec![opaque(&bad)]
        };
        let err = ledger.commit(&commit(events)).unwrap_err().to_string();
        assert!(err.contains(says), "{bad}: {err}");
    }
    assert_eq!(snapshot_dir(tmp.path()), before);
}

/// An image a user message's provider item holds as a `data:` URL must be an image part of
/// the event too, the same bytes: else every other format would leave it out. And the URL
/// is checked as a part is (base64, the caps). Nothing is written for a refusal.
#[test]
fn a_provider_items_inline_image_must_be_a_part_of_its_event() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &options()).unwrap();
    ledger.commit(&commit(vec![user("hi")])).unwrap();
    let before = snapshot_dir(tmp.path());
    let given = provider_image_user();
    let part = format!(
        r#",{{"type":"image","data":"{PNG_B64}","media_type":"image/png","detail":"auto"}}"#
    );
    let other_png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNg+M8AAAICAQB7CYF4AAAAAElFTkSuQmCC";
    for (bad, says) in [
        (given.replace(&part, ""), "holds 1 image(s) as data: URLs"),
        (
            given.replacen(PNG_B64, other_png, 1),
            "not its 1 image part(s) given as bytes",
        ),
        (
            given.replace(
                &format!("base64,{PNG_B64}"),
                &format!("base64,{}", &PNG_B64[1..]),
            ),
            "provider_item /content/1/image_url: the image's \"data\" is not base64",
        ),
    ] {
        let err = ledger
            .commit(&commit(vec![opaque(&bad)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{bad}: {err}");
    }
    assert_eq!(snapshot_dir(tmp.path()), before);
}

/// Upgrade path: a version-1 log keeps its header and records until something is appended;
/// the first append raises the header to version 2 (in place, synced first) and appends
/// version-2 records after the version-1 ones, all of which still read and verify.
#[test]
fn the_first_append_to_a_v1_log_raises_its_header_and_keeps_its_records() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&golden_dir(), tmp.path());
    let (mut ledger, _) = Ledger::open(tmp.path(), &options()).unwrap();
    assert_eq!(header_version(tmp.path()), 1, "opening writes nothing");
    assert!(ledger.commit(&commits()[1]).unwrap().replayed);
    assert_eq!(header_version(tmp.path()), 1, "a replay appends nothing");
    let mut turn_with_item = commit(vec![user("again"), opaque(REASONING), assistant("ok")]);
    turn_with_item.id = Some("turn-2".into());
    assert_eq!(ledger.commit(&turn_with_item).unwrap().first_seq, 7);
    assert_eq!(header_version(tmp.path()), 2);
    let mut want = vec![1; 6];
    want.extend([2, 2, 2]);
    assert_eq!(record_versions(tmp.path()), want);
    drop(ledger);
    let reader = Reader::open(tmp.path()).unwrap();
    let events = reader.events(1..=9).unwrap();
    let bodies: Vec<EventBody> = events.into_iter().map(|e| e.body).collect();
    assert_eq!(bodies[..6], expected_bodies()[..]);
    assert_eq!(bodies[7], opaque(REASONING));
    assert!(ctxlog_ledger::verify(tmp.path()).unwrap().is_clean());
    let (mut ledger, report) = Ledger::open(tmp.path(), &options()).unwrap();
    assert!(report.is_clean());
    assert!(ledger.commit(&turn_with_item).unwrap().replayed);
}

/// A machine that stopped while the header was being raised left the version bytes new and
/// the checksum part old: the log reads as version 1, verifies clean, and the next append
/// raises it again.
#[test]
fn a_header_upgrade_cut_short_reads_as_version_1_and_is_redone() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&golden_dir(), tmp.path());
    let path = tmp.path().join("ledger.log");
    let mut log = std::fs::read(&path).unwrap();
    let id = <[u8; 16]>::try_from(&log[16..32]).unwrap();
    let created = i64::from_le_bytes(log[32..40].try_into().unwrap());
    let new = ctxlog_ledger::format::LogHeader::new(id, created).encode();
    log[..62].copy_from_slice(&new[..62]);
    std::fs::write(&path, &log).unwrap();
    assert_eq!(header_version(tmp.path()), 1);
    let reader = Reader::open(tmp.path()).unwrap();
    assert_eq!(reader.last_seq(), 6);
    assert!(ctxlog_ledger::verify(tmp.path()).unwrap().is_clean());
    let (mut ledger, _) = Ledger::open(tmp.path(), &options()).unwrap();
    assert_eq!(ledger.commit(&turn(2)).unwrap().first_seq, 7);
    assert_eq!(std::fs::read(&path).unwrap()[..64], new[..]);
}

#[test]
fn an_opaque_item_that_is_not_one_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &options()).unwrap();
    ledger.commit(&turn(1)).unwrap();
    let before = snapshot_dir(tmp.path());
    for (event, says) in [
        (
            r#"{"kind":"opaque","format":"openai-responses","item":{"type":"message","role":"user","content":"x"}}"#,
            "event 2 (opaque): a openai-responses item of type \"message\" is one ctxlog reads: commit it as a user or assistant event",
        ),
        (
            r#"{"kind":"opaque","format":"anthropic-messages","item":{"signature":"x"}}"#,
            "event 2 (opaque): an opaque item needs a \"type\" string",
        ),
    ] {
        let err = ledger
            .commit(&commit(vec![user("q"), opaque(event)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{err}");
    }
    assert_eq!(snapshot_dir(tmp.path()), before);
    let fresh = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(fresh.path(), &options()).unwrap();
    let err = ledger
        .commit(&commit(vec![opaque(REASONING)]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("event 1 (opaque): comes before any user message"),
        "{err}"
    );
}

/// A repair that finds a provider item's offloaded bytes lost drops the item (the event is
/// then sent as its own fields say) and names the loss, as it does for a part's.
#[test]
fn a_provider_item_whose_offloaded_bytes_are_lost_is_dropped_by_a_repair() {
    let stored = opaque(PROVIDER_IMAGE_STORED);
    let (kept, notes) =
        ctxlog_ledger::rules::artifacts_lost(&stored, |_| Some("missing".into())).unwrap();
    assert!(kept.provider_item().is_none(), "{kept:?}");
    assert!(kept.artifact_refs().is_empty(), "{kept:?}");
    assert_eq!(notes.len(), 2, "the part's and the item's: {notes:?}");
    assert!(ctxlog_ledger::rules::artifacts_lost(&stored, |_| None).is_none());
}
