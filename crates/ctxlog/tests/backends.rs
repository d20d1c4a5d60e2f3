//! Failure class: a storage engine that keeps the ledger contract (docs/design.md#4-ledger,
//! docs/design.md#l10-event-times, docs/design.md#e1-erasure) less well than the file store:
//! different seqs, a replayed id that writes again, a cap not enforced, a refused commit that
//! leaves bytes behind, times that go backwards, an artifact stored twice or served unchecked, a
//! damaged payload served, erased text still found.
//!
//! Guarantee: one suite, two backends. Every case below runs, from this one source, against
//! the embedded file store and against PostgreSQL (a throwaway cluster started by the test;
//! skipped with a message where PostgreSQL is not installed, a failure under `CI`), through
//! the operations layer (`Store`). "Writes nothing" is checked on what each engine stores
//! (every file of the store; every row of the schema). Only the way a test reads or damages
//! stored bytes differs per engine (`common/engines.rs`). The property test of the same
//! contract is `backends_model.rs`; the ledger tests that stay file-only are listed in
//! `docs/postgres.md`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::engines::*;
use ctxlog::ledger::{Error as LedgerError, artifact_name};
use ctxlog::ops::{
    CommitRequest, EraseRequest, EraseResponse, EraseTarget, ExportRequest, ExportResponse,
    ImportRequest, ListRequest, LogRequest, RecallRequest, VerifyRequest,
};
use ctxlog::transfer::ImportFormat;
use ctxlog::{ArtifactRef, ErrorClass, EventBody, NewCommit, Store, SystemMarker, ToolStatus};

/// A salvage export of `conv` (`export --salvage`): what it reports, and its lines as JSON.
fn salvage(store: &Store, conv: &str) -> (ExportResponse, Vec<serde_json::Value>) {
    let mut out = Vec::new();
    let done = store
        .export(
            &ExportRequest {
                conversation: conv.into(),
                salvage: true,
            },
            &mut out,
        )
        .unwrap();
    let lines = out
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    (done, lines)
}

fn recall_hits(store: &Store, conv: &str, query: &str) -> usize {
    store
        .recall(&RecallRequest {
            conversation: conv.into(),
            query: query.into(),
            seq: None,
            offset: 0,
            limit: 10,
        })
        .unwrap()
        .hits
        .len()
}

fn erase(store: &Store, conv: &str, target: EraseTarget) -> ctxlog::Result<EraseResponse> {
    store.erase(&EraseRequest {
        conversation: conv.into(),
        target,
        reason: "test".into(),
    })
}

// ---- the cases -------------------------------------------------------------------------

fn commits_get_contiguous_seqs(e: &dyn Engine) {
    let store = e.store("seqs", &options());
    for i in 0..5u64 {
        let r = commit(&store, "c", &turn(&format!("question {i}"), "answer"), None).unwrap();
        assert_eq!(
            (r.first_seq, r.last_seq, r.replayed),
            (2 * i + 1, 2 * i + 2, false)
        );
    }
    let log = log(&store, "c").unwrap();
    assert_eq!(log.last_seq, 10);
    let seqs: Vec<u64> = log.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=10).collect::<Vec<_>>());
    assert!(log.events.windows(2).all(|w| w[0].ts_ms <= w[1].ts_ms));
    // A second store over the same place (another process, another replica) sees it all.
    let again = e.store("seqs", &options());
    assert_eq!(
        again
            .log(&LogRequest {
                conversation: "c".into(),
                from: 9,
                limit: None
            })
            .unwrap()
            .events
            .len(),
        2
    );
    let list = again.list(&ListRequest {}).unwrap().conversations;
    assert_eq!(list.len(), 1);
    assert_eq!((list[0].name.as_str(), list[0].events), ("c", 10));
    assert!(list[0].bytes > 0);
    let report = again
        .verify(&VerifyRequest {
            conversation: "c".into(),
        })
        .unwrap();
    assert_eq!(
        (
            report.ledger.events,
            report.ledger.last_seq,
            report.ledger.turns
        ),
        (10, 10, 5)
    );
}

fn ids_replay_or_conflict(e: &dyn Engine) {
    let store = e.store("ids", &options());
    commit(&store, "c", &turn("first", "a"), None).unwrap();
    let first = commit(&store, "c", &turn("hello", "hi"), Some("t-1")).unwrap();
    assert_eq!(
        (first.first_seq, first.last_seq, first.replayed),
        (3, 4, false)
    );
    commit(&store, "c", &turn("later", "b"), None).unwrap();
    let again = commit(&store, "c", &turn("hello", "hi"), Some("t-1")).unwrap();
    assert_eq!(
        (again.first_seq, again.last_seq, again.replayed),
        (3, 4, true)
    );
    // Another store over the same place (the file store's writer lock is per process:
    // the first store lets go first) answers the id the same way.
    drop(store);
    let store = e.store("ids", &options());
    let from_other = commit(&store, "c", &turn("hello", "hi"), Some("t-1")).unwrap();
    assert!(from_other.replayed);
    let conflict = commit(&store, "c", &turn("hello", "different"), Some("t-1")).unwrap_err();
    assert_eq!(conflict.class(), ErrorClass::Conflict, "{conflict}");
    assert_eq!(log(&store, "c").unwrap().last_seq, 6);
    // Ids are per conversation.
    let elsewhere = commit(&store, "d", &turn("hello", "different"), Some("t-1")).unwrap();
    assert_eq!((elsewhere.first_seq, elsewhere.replayed), (1, false));
}

fn invalid_commits_write_nothing(e: &dyn Engine) {
    let store = e.store("invalid", &options());
    let orphan = r#"{"events":[{"kind":"user","text":"q"},{"kind":"tool_result","call_id":"x","tool":"t","status":"ok","text":"r"}]}"#;
    let err = commit(&store, "c", orphan, None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
    // The refused first commit left no conversation behind.
    assert_eq!(log(&store, "c").unwrap_err().class(), ErrorClass::NotFound);
    assert!(
        store
            .list(&ListRequest {})
            .unwrap()
            .conversations
            .is_empty()
    );
    commit(&store, "c", &turn("q", "a"), None).unwrap();
    assert_eq!(
        commit(&store, "c", orphan, None).unwrap_err().class(),
        ErrorClass::BadInput
    );
    assert_eq!(log(&store, "c").unwrap().last_seq, 2);
}

fn caps_refuse_and_write_nothing(e: &dyn Engine) {
    let mut o = options();
    o.max_record_bytes(300)
        .max_commit_bytes(500)
        .max_ledger_bytes(1500);
    let store = e.store("caps", &o);
    commit(&store, "c", &turn("small", "ok"), None).unwrap();
    let big = "x".repeat(400);
    let err = commit(&store, "c", &turn(&big, "ok"), None).unwrap_err();
    assert!(err.to_string().contains("record too large"), "{err}");
    assert_eq!(err.class(), ErrorClass::BadInput);
    let mid = "y".repeat(190);
    let err = commit(&store, "c", &turn(&mid, &mid), None).unwrap_err();
    assert!(err.to_string().contains("commit too large"), "{err}");
    let mut seen = None;
    for i in 0..20 {
        if let Err(err) = commit(
            &store,
            "c",
            &turn(&format!("turn {i} {}", "z".repeat(150)), "ok"),
            None,
        ) {
            seen = Some(err);
            break;
        }
    }
    let err = seen.expect("the ledger cap is reached");
    assert!(err.to_string().contains("ledger too large"), "{err}");
    let last = log(&store, "c").unwrap().last_seq;
    assert_eq!(last % 2, 0, "only whole commits were written");
}

fn large_outputs_become_artifacts(e: &dyn Engine) {
    let store = e.store("artifacts", &options());
    let text = format!("head {} tail-marker", "output line\n".repeat(3000));
    let json = serde_json::json!({"events": [
        {"kind": "user", "text": "run it"},
        {"kind": "tool_call", "call_id": "c1", "tool": "shell", "arguments": {"cmd": "ls"}},
        {"kind": "tool_result", "call_id": "c1", "tool": "shell", "status": "ok", "text": text},
        {"kind": "assistant", "text": "done"},
    ]})
    .to_string();
    commit(&store, "c", &json, None).unwrap();
    let events = log(&store, "c").unwrap().events;
    let ctxlog::EventBody::ToolResult {
        artifact: Some(r),
        text: excerpt,
        ..
    } = &events[2].body
    else {
        panic!("no artifact: {:?}", events[2]);
    };
    assert!(excerpt.len() < text.len());
    assert_eq!(r.bytes, text.len() as u64);
    let snapshot = store.snapshot("c").unwrap();
    assert_eq!(
        ctxlog::ledger::LedgerRead::artifact(snapshot.ledger(), r).unwrap(),
        text.as_bytes()
    );
    assert!(
        recall_hits(&store, "c", "tail-marker") > 0,
        "artifact text is indexed"
    );
    let report = store
        .verify(&VerifyRequest {
            conversation: "c".into(),
        })
        .unwrap();
    assert_eq!(
        (
            report.ledger.artifacts,
            report.ledger.artifact_problems.len()
        ),
        (1, 0)
    );
}

fn damaged_payloads_fail_closed(e: &dyn Engine) {
    let store = e.store("corrupt", &options());
    commit(&store, "c", &turn("intact question", "fine"), None).unwrap();
    commit(&store, "c", &turn("canary-damage-me please", "fine"), None).unwrap();
    e.damage("corrupt", "c", 3, "canary-damage-me");
    let fresh = e.store("corrupt", &options());
    let err = log(&fresh, "c").unwrap_err();
    assert_eq!(err.class(), ErrorClass::Corrupt, "{err}");
    assert_eq!(err.corruption().unwrap().seq, Some(3), "{err}");
    let err = fresh
        .verify(&VerifyRequest {
            conversation: "c".into(),
        })
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Corrupt, "{err}");
}

/// A damaged payload: the salvage gives every other event in order, the damaged seq marked
/// where it lies, and changes nothing (docs/design.md#l11-repair).
fn a_salvage_gives_every_intact_event(e: &dyn Engine) {
    let store = e.store("salvage", &options());
    commit(&store, "c", &turn("intact question", "fine"), None).unwrap();
    commit(&store, "c", &turn("canary-damage-me please", "fine"), None).unwrap();
    commit(&store, "c", &turn("later question", "later answer"), None).unwrap();
    e.damage("salvage", "c", 3, "canary-damage-me");
    let before = e.fingerprint("salvage");
    let fresh = e.store("salvage", &options());
    let (done, lines) = salvage(&fresh, "c");
    assert_eq!((done.events, done.damaged), (5, 1), "{}", e.name());
    let seqs: Vec<u64> = lines.iter().filter_map(|l| l["seq"].as_u64()).collect();
    assert_eq!(seqs, [1, 2, 4, 5, 6], "{}", e.name());
    assert_eq!(
        lines[2]["damaged"]["seqs"],
        serde_json::json!([3, 3]),
        "{}",
        e.name()
    );
    assert_eq!(lines[4]["text"], "later question");
    assert_eq!(
        before,
        e.fingerprint("salvage"),
        "{}: a salvage writes nothing",
        e.name()
    );
}

/// A right-to-erasure request for intact seqs of a damaged conversation is met at once, on
/// both engines: the erased text is stored nowhere (recall caches included: recall finds
/// nothing, or refuses the damaged conversation), the damage is still named where it was,
/// and the intact events after it are untouched (docs/reliability.md, "Erasing part of a
/// damaged conversation").
fn intact_seqs_of_a_damaged_conversation_are_erased(e: &dyn Engine) {
    let case = "erase_damaged";
    let store = e.store(case, &options());
    commit(&store, "c", &turn("my secret-walrus-5521", "noted"), None).unwrap();
    commit(&store, "c", &turn("canary-damage-me please", "fine"), None).unwrap();
    commit(&store, "c", &turn("later question", "later answer"), None).unwrap();
    assert!(recall_hits(&store, "c", "walrus") > 0);
    drop(store);
    e.damage(case, "c", 3, "canary-damage-me");
    let fresh = e.store(case, &options());
    erase(&fresh, "c", EraseTarget::Seqs { from: 1, to: 2 }).unwrap();
    assert!(
        !e.fingerprint(case).contains("secret-walrus-5521"),
        "{}: erased text left behind",
        e.name()
    );
    let recall = fresh.recall(&RecallRequest {
        conversation: "c".into(),
        query: "walrus".into(),
        seq: None,
        offset: 0,
        limit: 10,
    });
    match recall {
        Ok(found) => assert!(found.hits.is_empty(), "{}: recall found it", e.name()),
        Err(err) => assert_eq!(err.class(), ErrorClass::Corrupt, "{}: {err}", e.name()),
    }
    let (done, lines) = salvage(&fresh, "c");
    assert_eq!(done.damaged, 1, "{}", e.name());
    let damaged = lines.iter().find(|l| !l["damaged"].is_null()).unwrap();
    assert_eq!(
        damaged["damaged"]["seqs"],
        serde_json::json!([3, 3]),
        "{}",
        e.name()
    );
    let texts: Vec<&str> = lines.iter().filter_map(|l| l["text"].as_str()).collect();
    assert!(
        texts.contains(&"later question") && texts.contains(&"later answer"),
        "{}: {texts:?}",
        e.name()
    );
    let err = log(&fresh, "c").unwrap_err();
    assert_eq!(
        err.corruption().unwrap().seq,
        Some(3),
        "{}: {err}",
        e.name()
    );
}

fn erasure_removes_text_everywhere(e: &dyn Engine) {
    let store = e.store("erase", &options());
    commit(&store, "c", &turn("walrus facts", "tusks"), None).unwrap();
    let big = format!("secret-narwhal-7731 {}", "log line\n".repeat(3000));
    let json = serde_json::json!({"events": [
        {"kind": "user", "text": "my secret-narwhal-7731"},
        {"kind": "tool_call", "call_id": "c1", "tool": "shell", "arguments": {}},
        {"kind": "tool_result", "call_id": "c1", "tool": "shell", "status": "ok", "text": big},
        {"kind": "assistant", "text": "noted"},
    ]})
    .to_string();
    commit(&store, "c", &json, Some("secret")).unwrap();
    commit(&store, "c", &turn("walrus again", "yes"), None).unwrap();
    assert!(recall_hits(&store, "c", "narwhal") > 0);
    // A second store (another replica) builds its own recall cache before the erasure.
    let replica = e.store("erase", &options());
    assert!(recall_hits(&replica, "c", "narwhal") > 0);

    let r = erase(&store, "c", EraseTarget::Seqs { from: 4, to: 4 }).unwrap();
    let EraseResponse::Range {
        erased,
        events,
        artifacts_deleted,
        already_erased,
        ..
    } = r
    else {
        panic!()
    };
    assert_eq!(
        (
            erased.from,
            erased.to,
            events,
            artifacts_deleted,
            already_erased
        ),
        (3, 6, 4, 1, false)
    );
    let log = log(&store, "c").unwrap();
    let seqs: Vec<u64> = log.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 7, 8]);
    assert!(
        !serde_json::to_string(&log.events)
            .unwrap()
            .contains("narwhal")
    );
    assert_eq!(recall_hits(&store, "c", "narwhal"), 0);
    assert_eq!(
        recall_hits(&replica, "c", "narwhal"),
        0,
        "the other replica's cache"
    );
    assert!(recall_hits(&replica, "c", "walrus") > 0);
    // The erased commit's id no longer replays: a retry writes again.
    let again = erase(&store, "c", EraseTarget::Seqs { from: 3, to: 6 }).unwrap();
    assert!(matches!(
        again,
        EraseResponse::Range {
            already_erased: true,
            ..
        }
    ));
    let report = store
        .verify(&VerifyRequest {
            conversation: "c".into(),
        })
        .unwrap();
    assert_eq!(report.ledger.erased, 4);
    let next = commit(&store, "c", &turn("after", "erasure"), None).unwrap();
    assert_eq!(next.first_seq, 9);

    erase(&store, "c", EraseTarget::All).unwrap();
    assert_eq!(log_class(&store, "c"), ErrorClass::NotFound);
    assert_eq!(
        log_class(&e.store("erase", &options()), "c"),
        ErrorClass::NotFound
    );
    assert!(
        store
            .list(&ListRequest {})
            .unwrap()
            .conversations
            .is_empty()
    );
}

/// docs/design.md#e6-listing-and-tombstones: an explicit range spanning an earlier tombstone leaves
/// it (and its placeholder) exactly as stored; each live run of the range gets its own tombstone;
/// erasing again changes nothing.
fn earlier_tombstones_stay_as_written(e: &dyn Engine) {
    let store = e.store("e6", &options());
    for i in 1..=4 {
        commit(&store, "c", &turn(&format!("q{i}"), &format!("a{i}")), None).unwrap();
    }
    erase(&store, "c", EraseTarget::Seqs { from: 3, to: 4 }).unwrap();
    let before = [e.stored("e6", "c", 3), e.stored("e6", "c", 4)];
    let EraseResponse::Range { erased, events, .. } =
        erase(&store, "c", EraseTarget::Seqs { from: 1, to: 8 }).unwrap()
    else {
        panic!("a range erasure answers with its report");
    };
    assert_eq!((erased.from, erased.to, events), (1, 8, 6), "{}", e.name());
    assert_eq!(
        [e.stored("e6", "c", 3), e.stored("e6", "c", 4)],
        before,
        "{}",
        e.name()
    );
    let log = log(&store, "c").unwrap();
    let tombstones: Vec<(u64, u64, String)> = log
        .events
        .iter()
        .map(|ev| match &ev.body {
            ctxlog::EventBody::System {
                marker:
                    ctxlog::SystemMarker::Tombstone {
                        from, to, reason, ..
                    },
            } => (*from, *to, reason.clone()),
            other => panic!("{other:?} survived"),
        })
        .collect();
    let want = [(1, 2, "test"), (3, 4, "test"), (5, 8, "test")];
    assert_eq!(
        tombstones,
        want.map(|(a, b, r)| (a, b, r.to_string())),
        "{}",
        e.name()
    );
    let report = store
        .verify(&VerifyRequest {
            conversation: "c".into(),
        })
        .unwrap();
    assert_eq!(report.ledger.erased, 8, "{}", e.name());
    let stored: Vec<Vec<u8>> = (1..=8).map(|s| e.stored("e6", "c", s)).collect();
    let EraseResponse::Range { already_erased, .. } =
        erase(&store, "c", EraseTarget::Seqs { from: 1, to: 8 }).unwrap()
    else {
        panic!("a range erasure answers with its report");
    };
    assert!(already_erased, "{}", e.name());
    let after: Vec<Vec<u8>> = (1..=8).map(|s| e.stored("e6", "c", s)).collect();
    assert_eq!(after, stored, "{}", e.name());
}

/// `list` gives each conversation's last activity: the time of its newest event, a tombstone
/// included (an erasure of the last turn is activity), on both engines alike.
fn list_gives_the_newest_event_time_tombstones_included(e: &dyn Engine) {
    let store = e.store("activity", &options());
    for i in 1..=3 {
        commit(&store, "c", &turn(&format!("q{i}"), &format!("a{i}")), None).unwrap();
    }
    let newest = |store: &Store| log(store, "c").unwrap().events.last().unwrap().ts_ms;
    let listed =
        |store: &Store| store.list(&ListRequest {}).unwrap().conversations[0].last_activity_ms;
    assert_eq!(listed(&store), newest(&store), "{}", e.name());
    // The erasure's tombstone is stamped after the clock has moved past the newest event.
    let before = newest(&store);
    while now_ms() <= before {
        std::thread::yield_now();
    }
    erase(&store, "c", EraseTarget::Seqs { from: 5, to: 6 }).unwrap();
    let tombstone = newest(&store);
    assert!(
        tombstone > log(&store, "c").unwrap().events[3].ts_ms,
        "{}",
        e.name()
    );
    assert_eq!(listed(&store), tombstone, "{}", e.name());
    let other = e.store("activity", &options());
    assert_eq!(listed(&other), tombstone, "{}", e.name());
    // The listed count is of live events: the erased turn's tombstone and placeholder are
    // not events of the conversation any more.
    let counted = other.list(&ListRequest {}).unwrap().conversations[0].events;
    assert_eq!(counted, 4, "{}", e.name());
}

/// An assistant reply's and a tool call's provider items are kept as given, sent verbatim in
/// their own format only, refused when they say something else than their event, and
/// survive export and import.
fn provider_items_are_kept_and_round_trip(e: &dyn Engine) {
    let store = e.store("provider", &options());
    let call = r#"{"arguments":"{\"a\":2}","call_id":"call_1","name":"add","type":"function_call","id":"fc_1","status":"completed"}"#;
    let reply = r#"{"id":"msg_1","content":[{"annotations":[],"text":"It is 2.","type":"output_text","logprobs":[]}],"role":"assistant","status":"completed","type":"message"}"#;
    let turn = format!(
        r#"{{"events":[{{"kind":"user","text":"add"}},{{"kind":"tool_call","call_id":"call_1","tool":"add","arguments":"{{\"a\":2}}","provider_item":{{"format":"openai-responses","item":{call}}}}},{{"kind":"tool_result","call_id":"call_1","tool":"add","status":"ok","text":"2"}},{{"kind":"assistant","text":"It is 2.","provider_item":{{"format":"openai-responses","item":{reply}}}}}]}}"#
    );
    commit(&store, "pi", &turn, Some("t1")).unwrap();
    let project = |format| common::projected(&store, "pi", "next?", format, ctxlog::Policy::Turns);
    let responses = project(ctxlog::WireFormat::OpenAiResponses);
    assert!(
        responses.contains(call) && responses.contains(reply),
        "{}: {responses}",
        e.name()
    );
    let chat = project(ctxlog::WireFormat::OpenAiChat);
    assert!(
        !chat.contains("msg_1") && chat.contains("It is 2."),
        "{chat}"
    );
    let first = export(&store, "pi");
    let request = ImportRequest {
        conversation: Some("pi-copy".into()),
        format: ImportFormat::Ctxlog,
    };
    store.import(&request, &first, &mut |_| {}).unwrap();
    assert_eq!(export(&store, "pi-copy"), first, "{}", e.name());
    let before = e.fingerprint("provider");
    let lying = turn.replace(r#""text":"It is 2.","type""#, r#""text":"It is 3.","type""#);
    let err = commit(&store, "pi", &lying, None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
    assert!(
        err.to_string().contains("text differs"),
        "{}: {err}",
        e.name()
    );
    assert_eq!(e.fingerprint("provider"), before, "{}", e.name());
}

/// A Responses input list imported keeps each item it reads whole as its event's provider
/// item (messages whose content is a list of parts, output messages and calls with their ids,
/// outputs with extra keys): projected again in `openai-responses` (the agent loop's call,
/// after a tool output), the items come back byte for byte as given; any other format gets
/// the events' own fields; export and import carry them.
fn responses_imports_project_back_as_given(e: &dyn Engine) {
    let store = e.store("responses-import", &options());
    let image = format!("data:image/png;base64,{}", b64(&png(64, 64)));
    let items = [
        r#"{"role":"developer","content":[{"type":"input_text","text":"Answer briefly."}]}"#.to_owned(),
        r#"{"role":"user","content":"What is on the chart?"}"#.to_owned(),
        r#"{"id":"msg_1","content":[{"annotations":[],"text":"Which chart?","type":"output_text","logprobs":[]}],"role":"assistant","status":"completed","type":"message"}"#.to_owned(),
        format!(
            r#"{{"type":"message","role":"user","content":[{{"type":"input_text","text":"This one:"}},{{"type":"input_image","image_url":"{image}","detail":"low"}},{{"type":"input_file","file_id":"file-9"}}]}}"#
        ),
        r#"{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"}"#.to_owned(),
        r#"{"arguments":"{\"axis\":\"x\"}","call_id":"call_1","name":"read_chart","type":"function_call","id":"fc_1","status":"completed"}"#.to_owned(),
        r#"{"call_id":"call_1","output":"walrus counts by year","type":"function_call_output","id":"fco_1","status":"completed"}"#.to_owned(),
    ];
    let given = format!("[{}]", items.join(","));
    let request = ImportRequest {
        conversation: Some("ri".into()),
        format: ImportFormat::OpenaiResponses,
    };
    let done = store
        .import(&request, given.as_bytes(), &mut |_| {})
        .unwrap();
    assert!(
        !done.notes.iter().any(|n| n.contains("not imported")),
        "{}: {:?}",
        e.name(),
        done.notes
    );
    let project = |conversation: &str, format| {
        let request = ctxlog::ops::ProjectRequest {
            conversation: conversation.into(),
            format,
            policy: ctxlog::Policy::Turns,
            ..Default::default()
        };
        String::from_utf8(store.project(&request).unwrap().body).unwrap()
    };
    let responses = project("ri", ctxlog::WireFormat::OpenAiResponses);
    assert!(
        responses.contains(&format!(r#""input":{given}"#)),
        "{}: {responses}",
        e.name()
    );
    // Any other format reads the events: no ids, the image as a media part.
    let chat = project("ri", ctxlog::WireFormat::OpenAiChat);
    assert!(
        !chat.contains("fc_1") && !chat.contains("fco_1") && chat.contains("This one:"),
        "{chat}"
    );
    assert!(chat.contains(r#""type":"image_url""#), "{chat}");
    let png_b64 = image.strip_prefix("data:image/png;base64,").unwrap();
    let anthropic = project("ri", ctxlog::WireFormat::AnthropicMessages);
    assert!(
        anthropic.contains(&format!(r#""data":"{png_b64}""#)),
        "{}: {anthropic}",
        e.name()
    );
    // The image is stored once: its part and its item's data: URL reference one artifact,
    // and no record or row holds its base64.
    assert_eq!(e.artifacts("responses-import", "ri"), 1, "{}", e.name());
    let stored = String::from_utf8_lossy(&e.stored("responses-import", "ri", 4)).into_owned();
    let hex: String = png_b64[..48].bytes().map(|b| format!("{b:02x}")).collect();
    assert!(
        !stored.contains(&png_b64[..48]) && !stored.contains(&hex),
        "{}: {stored}",
        e.name()
    );
    // Export and import carry the items: the copy projects the same bytes.
    let first = export(&store, "ri");
    let copy = ImportRequest {
        conversation: Some("ri-copy".into()),
        format: ImportFormat::Ctxlog,
    };
    store.import(&copy, &first, &mut |_| {}).unwrap();
    assert_eq!(export(&store, "ri-copy"), first, "{}", e.name());
    assert_eq!(
        project("ri-copy", ctxlog::WireFormat::OpenAiResponses),
        responses,
        "{}",
        e.name()
    );
    // An item that says something else than its event is refused, nothing written.
    let before = e.fingerprint("responses-import");
    let lying = r#"{"events":[{"kind":"user","text":"hello","provider_item":{"format":"openai-responses","item":{"role":"user","content":[{"type":"input_text","text":"goodbye"}]}}}]}"#;
    let err = commit(&store, "ri", lying, None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
    assert!(err.to_string().contains("text differs"), "{err}");
    let wrong_call = r#"{"events":[{"kind":"user","text":"go"},{"kind":"tool_call","call_id":"c9","tool":"t","arguments":"{}"},{"kind":"tool_result","call_id":"c9","tool":"t","status":"ok","text":"done","provider_item":{"format":"openai-responses","item":{"type":"function_call_output","call_id":"c8","output":"done"}}}]}"#;
    let err = commit(&store, "ri", wrong_call, None).unwrap_err();
    assert!(err.to_string().contains("call_id differs"), "{err}");
    // An item's inline image that is not a part of its event too is refused.
    let item_only = format!(
        r#"{{"events":[{{"kind":"user","text":"Look:","provider_item":{{"format":"openai-responses","item":{{"role":"user","content":[{{"type":"input_text","text":"Look:"}},{{"type":"input_image","image_url":"{image}"}}]}}}}}}]}}"#
    );
    let err = commit(&store, "ri", &item_only, None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
    assert!(err.to_string().contains("as an image part too"), "{err}");
    assert_eq!(e.fingerprint("responses-import"), before, "{}", e.name());
    // Erasing the image's turn erases its bytes.
    erase(&store, "ri", EraseTarget::Seqs { from: 4, to: 4 }).unwrap();
    assert_eq!(e.artifacts("responses-import", "ri"), 0, "{}", e.name());
    let shown = serde_json::to_string(&log(&store, "ri").unwrap().events).unwrap();
    assert!(!shown.contains("input_image"), "{}: {shown}", e.name());
}

/// docs/design.md#e4-export-and-import: an import of an export with erasures, interrupted before
/// its first tombstone (here: the progress callback panics after the first chunk is committed,
/// where a killed process would stop), can be re-run into the same name: it replays what was
/// written and goes on, and the copy exports byte for byte. An input whose leading commits differ
/// from what the conversation holds is still refused, with nothing written.
fn an_interrupted_import_with_erasures_re_runs_into_the_same_name(e: &dyn Engine) {
    let store = e.store("interrupted", &options());
    for i in 1..=4 {
        commit(
            &store,
            "orig",
            &turn(&format!("q{i}"), &format!("a{i}")),
            None,
        )
        .unwrap();
    }
    erase(&store, "orig", EraseTarget::Seqs { from: 5, to: 6 }).unwrap();
    commit(&store, "orig", &turn("q5", "a5"), None).unwrap();
    let data = export(&store, "orig");
    let request = ImportRequest {
        conversation: Some("copy".into()),
        format: ImportFormat::Ctxlog,
    };
    let interrupted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        store.import(&request, &data, &mut |_| panic!("interrupted"))
    }));
    assert!(interrupted.is_err());
    assert_eq!(log(&store, "copy").unwrap().last_seq, 4, "{}", e.name());
    // Another input into the interrupted copy: its leading commits are not there.
    let mut other = data.clone();
    let at = other.windows(2).position(|w| w == b"q1").unwrap();
    other[at + 1] = b'9';
    let err = store.import(&request, &other, &mut |_| {}).unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput, "{}: {err}", e.name());
    assert_eq!(log(&store, "copy").unwrap().last_seq, 4, "{}", e.name());
    // The same input again: replayed, then finished.
    let done = store.import(&request, &data, &mut |_| {}).unwrap();
    assert_eq!(done.conversations[0].commits_replayed, 1, "{}", e.name());
    assert_eq!(
        String::from_utf8_lossy(&export(&store, "copy")),
        String::from_utf8_lossy(&data),
        "{}",
        e.name()
    );
}

/// docs/design.md#e4-export-and-import: a conversation with erasures (at the start, in the middle,
/// at the end; events after them older than the erasure) exports, imports into a new conversation
/// and exports again byte for byte; re-running the import writes nothing.
fn export_import_round_trips_with_erasures(e: &dyn Engine) {
    let store = e.store("roundtrip", &options());
    let day = 86_400_000i64;
    let timed = |i: i64| {
        serde_json::json!({"user": format!("q{i}"), "assistant": format!("a{i}"),
            "ts": 1_600_000_000_000i64 + i * day})
        .to_string()
    };
    for i in 1..=5 {
        commit(&store, "orig", &timed(i), None).unwrap();
    }
    erase(&store, "orig", EraseTarget::Seqs { from: 1, to: 1 }).unwrap();
    erase(&store, "orig", EraseTarget::Seqs { from: 5, to: 6 }).unwrap();
    erase(&store, "orig", EraseTarget::Seqs { from: 10, to: 10 }).unwrap();
    for i in 6..=7 {
        commit(&store, "orig", &timed(i), None).unwrap();
    }
    erase(&store, "orig", EraseTarget::Seqs { from: 3, to: 8 }).unwrap();
    let first = export(&store, "orig");
    assert!(String::from_utf8_lossy(&first).contains("tombstone"));
    let request = ImportRequest {
        conversation: Some("copy".into()),
        format: ImportFormat::Ctxlog,
    };
    let done = store.import(&request, &first, &mut |_| {}).unwrap();
    assert_eq!(
        done.events_written,
        done.conversations[0].events,
        "{}",
        e.name()
    );
    assert_eq!(
        String::from_utf8_lossy(&export(&store, "copy")),
        String::from_utf8_lossy(&first),
        "{}",
        e.name()
    );
    let stored: Vec<Vec<u8>> = (1..=14).map(|s| e.stored("roundtrip", "copy", s)).collect();
    let again = store.import(&request, &first, &mut |_| {}).unwrap();
    assert_eq!(again.events_written, 0, "{}", e.name());
    let after: Vec<Vec<u8>> = (1..=14).map(|s| e.stored("roundtrip", "copy", s)).collect();
    assert_eq!(after, stored, "{}", e.name());
    // Into a conversation that holds other events, the seqs would move: refused, unwritten.
    commit(&store, "other", &timed(1), None).unwrap();
    let into_other = ImportRequest {
        conversation: Some("other".into()),
        format: ImportFormat::Ctxlog,
    };
    let err = store.import(&into_other, &first, &mut |_| {}).unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
    assert_eq!(
        log(&store, "other").unwrap().events.len(),
        2,
        "{}",
        e.name()
    );
    assert!(
        store
            .verify(&VerifyRequest {
                conversation: "copy".into(),
            })
            .unwrap()
            .ledger
            .erased
            > 0
    );
}

/// Opaque provider items (docs/design.md#p14-more-wire-formats): stored as given (the item's
/// keys in the order sent, in the engine's own row or record), shown by `log`, sent back
/// verbatim in their own format, indexed for recall by their readable text only, exported
/// and imported unchanged; a bad one is refused and writes nothing.
fn opaque_items_are_stored_as_given_and_round_trip(e: &dyn Engine) {
    let store = e.store("opaque", &options());
    let item = r#"{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Inspect the manifest."}],"encrypted_content":"gAAAAzqxSECRETBLOB=="}"#;
    let turn = format!(
        r#"{{"events":[{{"kind":"user","text":"build it"}},{{"kind":"opaque","format":"openai-responses","item":{item}}},{{"kind":"assistant","text":"built"}}]}}"#
    );
    commit(&store, "op", &turn, Some("t1")).unwrap();
    // The record (file store) or the row's payload (PostgreSQL, shown in hex) holds the item
    // byte for byte.
    let stored = String::from_utf8_lossy(&e.stored("opaque", "op", 2)).into_owned();
    let hex: String = item.bytes().map(|b| format!("{b:02x}")).collect();
    assert!(
        stored.contains(item) || stored.contains(&hex),
        "{}: {stored}",
        e.name()
    );
    let shown = serde_json::to_string(&log(&store, "op").unwrap().events[1]).unwrap();
    assert!(
        shown.contains(&format!(
            r#""kind":"opaque","format":"openai-responses","item":{item}"#
        )),
        "{shown}"
    );
    let project = |format| common::projected(&store, "op", "next?", format, Default::default());
    assert!(
        project(ctxlog::WireFormat::OpenAiResponses).contains(item),
        "{}",
        e.name()
    );
    assert!(!project(ctxlog::WireFormat::AnthropicMessages).contains("reasoning"));
    let hits = store
        .recall(&RecallRequest {
            conversation: "op".into(),
            query: "manifest".into(),
            seq: None,
            offset: 0,
            limit: 10,
        })
        .unwrap()
        .hits;
    assert!(
        hits.iter()
            .any(|h| h.seq == 2 && h.kind == ctxlog::EventKind::Opaque),
        "{}: {hits:?}",
        e.name()
    );
    assert_eq!(
        recall_hits(&store, "op", "gAAAAzqxSECRETBLOB"),
        0,
        "{}",
        e.name()
    );
    let first = export(&store, "op");
    let request = ImportRequest {
        conversation: Some("op-copy".into()),
        format: ImportFormat::Ctxlog,
    };
    store.import(&request, &first, &mut |_| {}).unwrap();
    assert_eq!(export(&store, "op-copy"), first, "{}", e.name());
    let before = e.fingerprint("opaque");
    for (bad, says) in [
        (
            r#"{"events":[{"kind":"user","text":"q"},{"kind":"opaque","format":"openai-chat","item":{"type":"x"}}]}"#,
            "unknown variant `openai-chat`",
        ),
        (
            r#"{"events":[{"kind":"user","text":"q"},{"kind":"opaque","format":"anthropic-messages","item":["thinking"]}]}"#,
            "must be a JSON object",
        ),
        (
            r#"{"events":[{"kind":"user","text":"q"},{"kind":"opaque","format":"anthropic-messages","item":{"type":"tool_use"}}]}"#,
            "commit it as a tool_call event",
        ),
    ] {
        let err = commit(&store, "op", bad, None).unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
        assert!(err.to_string().contains(says), "{}: {err}", e.name());
    }
    assert_eq!(e.fingerprint("opaque"), before, "{}", e.name());
}

/// A retraction (`EraseTarget::Last`) takes back exactly the newest events under one
/// tombstone, not widened to the turn; recall, log and export show the tombstone; the turn
/// stays open for the next commit; a second retraction steps over the first tombstone; too
/// many, zero, or a conversation that does not exist are refused with nothing changed.
/// `window: stable` anchors its blocks on the engine's record offsets (the file store's log
/// offsets, PostgreSQL's running sum of `record_len`): the same request gives the same body
/// from a second projection, and the window moves by blocks, far less often than the sliding
/// window's first kept turn.
fn a_stable_window_moves_by_blocks(e: &dyn Engine) {
    let store = e.store("stable", &options());
    let (mut stable_cuts, mut sliding_cuts) = (Vec::new(), Vec::new());
    for i in 0..50 {
        commit_events(
            &store,
            "s",
            vec![
                user(&format!(
                    "question {i} about the harbour walk and the weather"
                )),
                assistant(&format!(
                    "answer {i}: the harbour was calm and the sun was out"
                )),
            ],
            None,
            &[],
        )
        .unwrap();
        for (window, cuts) in [
            (ctxlog::Window::Stable, &mut stable_cuts),
            (ctxlog::Window::Sliding, &mut sliding_cuts),
        ] {
            let request = ctxlog::ops::ProjectRequest {
                conversation: "s".into(),
                input: Some("and now?".into()),
                max_bytes: Some(2_500),
                window,
                ..Default::default()
            };
            let p = store.project(&request).unwrap();
            assert_eq!(
                store.project(&request).unwrap().body,
                p.body,
                "{}",
                e.name()
            );
            assert!(p.body.len() <= 2_500);
            let first = p.report.kept.first().map_or(0, |r| r.first);
            if cuts.last() != Some(&first) {
                cuts.push(first);
            }
        }
    }
    assert!(
        stable_cuts.len() * 2 < sliding_cuts.len(),
        "{}: stable {stable_cuts:?}, sliding {sliding_cuts:?}",
        e.name()
    );
}

fn a_retraction_takes_back_exactly_the_newest_events(e: &dyn Engine) {
    let store = e.store("retract", &options());
    let events = vec![
        user("fix the build"),
        call("c1"),
        result("c1", "error: mismatched types"),
        assistant("a reply zebracorn taken back"),
    ];
    commit_events(&store, "c", events, None, &[]).unwrap();
    assert!(recall_hits(&store, "c", "zebracorn") > 0, "{}", e.name());
    let EraseResponse::Range { erased, events, .. } =
        erase(&store, "c", EraseTarget::Last { events: 1 }).unwrap()
    else {
        panic!("a retraction answers with its report");
    };
    assert_eq!((erased.from, erased.to, events), (4, 4, 1), "{}", e.name());
    assert_eq!(recall_hits(&store, "c", "zebracorn"), 0, "{}", e.name());
    let exported = String::from_utf8(export(&store, "c")).unwrap();
    assert!(!exported.contains("zebracorn"), "{}", e.name());
    assert!(exported.contains("tombstone"), "{}: {exported}", e.name());
    let kinds = |store: &Store| -> Vec<String> {
        log(store, "c")
            .unwrap()
            .events
            .iter()
            .map(|ev| ev.kind().as_str().to_string())
            .collect()
    };
    assert_eq!(
        kinds(&store),
        ["user", "tool_call", "tool_result", "system"],
        "{}",
        e.name()
    );
    // The turn is still open: the next commit continues it.
    commit_events(&store, "c", vec![assistant("the right reply")], None, &[]).unwrap();
    // Two more: the newest event and the result before the tombstone; the tombstone stays.
    let before_tombstone = e.stored("retract", "c", 4);
    let EraseResponse::Range { erased, events, .. } =
        erase(&store, "c", EraseTarget::Last { events: 2 }).unwrap()
    else {
        panic!("a retraction answers with its report");
    };
    assert_eq!((erased.from, erased.to, events), (3, 5, 2), "{}", e.name());
    assert_eq!(
        e.stored("retract", "c", 4),
        before_tombstone,
        "{}",
        e.name()
    );
    assert_eq!(
        kinds(&store),
        ["user", "tool_call", "system", "system", "system"]
    );
    // Refused, nothing changed: more than the conversation holds, zero, no conversation.
    let fingerprint = e.fingerprint("retract");
    for events in [3, 0] {
        let err = erase(&store, "c", EraseTarget::Last { events }).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Usage, "{}: {err}", e.name());
    }
    let err = erase(&store, "c", EraseTarget::Last { events: 3 }).unwrap_err();
    assert!(err.to_string().contains("holds 2"), "{err}");
    let err = erase(&store, "nobody", EraseTarget::Last { events: 1 }).unwrap_err();
    assert_eq!(err.class(), ErrorClass::NotFound, "{}: {err}", e.name());
    assert_eq!(e.fingerprint("retract"), fingerprint, "{}", e.name());
    let report = store
        .verify(&VerifyRequest {
            conversation: "c".into(),
        })
        .unwrap();
    assert!(report.ledger.is_clean(), "{}: {report:?}", e.name());
}

/// A whole PNG of `w` × `h` black pixels: a commit decodes an image once before storing it.
fn png(w: u32, h: u32) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    image::RgbImage::new(w, h)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn media_images_and_documents_are_artifacts_and_round_trip(e: &dyn Engine) {
    let store = e.store("media", &options());
    let image = png(1024, 1024);
    let pdf = b"%PDF-1.4\n1 0 obj <</Type /Pages /Count 2>> endobj\n2 0 obj <</Type /Page>> endobj\n3 0 obj <</Type/Page>> endobj\n%%EOF".to_vec();
    let turn = format!(
        r#"{{"events":[{{"kind":"user","text":"What is on this walrus chart?","parts":[{{"type":"image","data":"{}","media_type":"image/png","detail":"high"}},{{"type":"document","data":"{}","media_type":"application/pdf","name":"walrus-report.pdf"}},{{"type":"image","url":"https://example.com/tusk.png","detail":"low"}}]}},{{"kind":"assistant","text":"Tusks."}}]}}"#,
        b64(&image),
        b64(&pdf)
    );
    commit(&store, "m", &turn, Some("t1")).unwrap();
    assert_eq!(e.artifacts("media", "m"), 2, "{}", e.name());
    // The base64 is stored once, as the artifact's bytes, never in the record or row.
    let stored = String::from_utf8_lossy(&e.stored("media", "m", 1)).into_owned();
    assert!(!stored.contains(&b64(&image)), "{}", e.name());
    let name = artifact_name(&image);
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    assert!(
        stored.contains(&name) || stored.contains(&hex),
        "{}: {stored}",
        e.name()
    );
    let shown = serde_json::to_string(&log(&store, "m").unwrap().events[0]).unwrap();
    assert!(
        shown.contains(&format!(
            r#"{{"type":"image","media_type":"image/png","detail":"high","artifact":{{"name":"{}","bytes":{}}}}}"#,
            artifact_name(&image),
            image.len()
        )),
        "{shown}"
    );
    let project = |format, model: &str| {
        let request = ctxlog::ops::ProjectRequest {
            conversation: "m".into(),
            input: Some("next?".into()),
            model: Some(model.into()),
            format,
            ..Default::default()
        };
        store.project(&request).unwrap()
    };
    let data_url = format!("data:image/png;base64,{}", b64(&image));
    let chat = project(ctxlog::WireFormat::OpenAiChat, "gpt-4o");
    let body = String::from_utf8(chat.body.clone()).unwrap();
    assert!(
        body.contains(&format!(
            r#"{{"type":"image_url","image_url":{{"url":"{data_url}","detail":"high"}}}}"#
        )),
        "{body}"
    );
    assert!(body.contains(r#"{"type":"file","file":{"filename":"walrus-report.pdf","file_data":"data:application/pdf;base64,"#));
    let media = chat.report.media.clone().unwrap();
    assert_eq!(
        (media.images, media.images_estimated, media.documents),
        (2, 1, 1)
    );
    assert!(
        !chat.report.tokens_exact,
        "a URL image and a PDF are estimates"
    );
    let counted = store
        .count(&ctxlog::ops::CountRequest {
            body: chat.body.clone(),
            format: Some(ctxlog::WireFormat::OpenAiChat),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        (counted.bytes, counted.tokens),
        (chat.report.bytes, chat.report.tokens)
    );
    let responses = project(ctxlog::WireFormat::OpenAiResponses, "gpt-4o");
    let body = String::from_utf8(responses.body).unwrap();
    assert!(
        body.contains(&format!(
            r#"{{"type":"input_image","image_url":"{data_url}","detail":"high"}}"#
        )),
        "{body}"
    );
    assert!(body.contains(
        r#"{"type":"input_image","image_url":"https://example.com/tusk.png","detail":"low"}"#
    ));
    let anthropic = project(ctxlog::WireFormat::AnthropicMessages, "claude-sonnet-4-5");
    let body = String::from_utf8(anthropic.body).unwrap();
    assert!(
        body.contains(&format!(
            r#"{{"type":"image","source":{{"type":"base64","media_type":"image/png","data":"{}"}}}}"#,
            b64(&image)
        )),
        "{body}"
    );
    assert!(body.contains(r#","title":"walrus-report.pdf"}"#), "{body}");
    // Recall finds the words around the media and the document's name, never base64.
    assert_ne!(
        recall_hits(&store, "m", "walrus-report.pdf"),
        0,
        "{}",
        e.name()
    );
    assert_eq!(
        recall_hits(&store, "m", &b64(&image)[..24]),
        0,
        "{}",
        e.name()
    );
    // Export inlines the bytes; an import stores them as artifacts again.
    let first = export(&store, "m");
    assert!(String::from_utf8_lossy(&first).contains(&b64(&image)));
    let request = ImportRequest {
        conversation: Some("m-copy".into()),
        format: ImportFormat::Ctxlog,
    };
    store.import(&request, &first, &mut |_| {}).unwrap();
    assert_eq!(export(&store, "m-copy"), first, "{}", e.name());
    assert_eq!(e.artifacts("media", "m-copy"), 2, "{}", e.name());
    // Bad media is refused with a reason and writes nothing.
    let before = e.fingerprint("media");
    let bad_part =
        |part: &str| format!(r#"{{"events":[{{"kind":"user","text":"q","parts":[{part}]}}]}}"#);
    let jpeg_said = format!(
        r#"{{"type":"image","data":"{}","media_type":"image/jpeg"}}"#,
        b64(&image)
    );
    let cut = format!(
        r#"{{"type":"image","data":"{}","media_type":"image/png"}}"#,
        b64(&image[..18])
    );
    let half = format!(
        r#"{{"type":"image","data":"{}","media_type":"image/png"}}"#,
        b64(&image[..image.len() / 2])
    );
    let huge = format!(
        r#"{{"type":"image","data":"{}","media_type":"image/png"}}"#,
        b64(&png(20_000, 10))
    );
    for (part, says) in [
        (
            r#"{"type":"image","data":"not base64!","media_type":"image/png"}"#.to_owned(),
            "is not base64",
        ),
        (jpeg_said, "its media_type says image/jpeg"),
        (cut, "gives no size"),
        (half, "1024 × 1024 pixels, but its bytes do not decode"),
        (huge, "over the 8000-pixel limit"),
        (
            r#"{"type":"image","data":"AAAA","media_type":"image/tiff"}"#.to_owned(),
            "image media type \"image/tiff\" is not allowed",
        ),
        (
            r#"{"type":"document","data":"AAAA","media_type":"text/html"}"#.to_owned(),
            "document media type \"text/html\" is not allowed",
        ),
        (
            r#"{"type":"audio","data":"AAAA"}"#.to_owned(),
            "unknown variant `audio`",
        ),
    ] {
        let err = commit(&store, "m", &bad_part(&part), None).unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
        assert!(err.to_string().contains(says), "{}: {err}", e.name());
    }
    assert_eq!(e.fingerprint("media"), before, "{}", e.name());
    // Erasing the turn removes its artifacts.
    erase(&store, "m", EraseTarget::Seqs { from: 1, to: 2 }).unwrap();
    assert_eq!(e.artifacts("media", "m"), 0, "{}", e.name());
}

fn log_class(store: &Store, conv: &str) -> ErrorClass {
    log(store, conv).unwrap_err().class()
}

/// The ledger error behind `err` (the suite checks the exact refusal, not only its class).
fn cause(err: &ctxlog::Error) -> &LedgerError {
    err.ledger_cause()
        .unwrap_or_else(|| panic!("not a ledger error: {err}"))
}

fn replays_and_conflicts_write_nothing(e: &dyn Engine) {
    let store = e.store("replays", &options());
    let two = |n: u32| vec![user(&format!("q{n}")), assistant(&format!("a{n}"))];
    commit_events(&store, "c", two(1), Some("a"), &[]).unwrap();
    commit_events(&store, "c", two(2), Some("b"), &[]).unwrap();
    let before = e.fingerprint("replays");
    let again = commit_events(&store, "c", two(1), Some("a"), &[]).unwrap();
    assert_eq!(
        (again.first_seq, again.last_seq, again.replayed),
        (1, 2, true)
    );
    let err = commit_events(&store, "c", two(9), Some("a"), &[]).unwrap_err();
    assert!(
        matches!(cause(&err), LedgerError::Conflict { id } if id == "a"),
        "{err}"
    );
    assert_eq!(e.fingerprint("replays"), before);
    assert_eq!(last_seq(&store, "c"), 4);
    // The original commit answered call "x"; its replay is not validated again against the
    // turn as it is now (where "x" is already answered).
    commit_events(&store, "c", vec![user("go"), call("x")], None, &[]).unwrap();
    let first = commit_events(&store, "c", vec![result("x", "done")], Some("r"), &[]).unwrap();
    let again = commit_events(&store, "c", vec![result("x", "done")], Some("r"), &[]).unwrap();
    assert_eq!((again.first_seq, again.replayed), (first.first_seq, true));
    // Ids are bounded.
    let before = e.fingerprint("replays");
    for bad in [
        String::new(),
        "x".repeat(ctxlog::ledger::MAX_COMMIT_ID_BYTES + 1),
    ] {
        let err = commit_events(&store, "c", two(3), Some(&bad), &[]).unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
    }
    assert_eq!(e.fingerprint("replays"), before);
}

/// A commit that names the seq it must follow is written only right after it: one that
/// finds the conversation moved on is refused (class conflict) and writes nothing; a
/// repeated id is answered first.
fn a_commit_after_a_seq_is_refused_once_the_conversation_moved_on(e: &dyn Engine) {
    let store = e.store("after", &options());
    let after = |events: Vec<EventBody>, id: Option<&str>, seq: u64| {
        let mut commit = NewCommit::new(events).with_after(seq);
        commit.id = id.map(str::to_string);
        store.commit(&CommitRequest {
            conversation: "c".into(),
            commit,
        })
    };
    let first = after(vec![user("q1")], Some("one"), 0).unwrap();
    assert_eq!(first.last_seq, 1);
    let before = e.fingerprint("after");
    let err = after(vec![user("q2")], None, 0).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Conflict, "{err}");
    assert!(
        matches!(
            cause(&err),
            LedgerError::Moved {
                after: 0,
                last_seq: 1
            }
        ),
        "{err}"
    );
    assert_eq!(e.fingerprint("after"), before);
    // The same commit again is its original receipt, though the conversation moved on.
    assert!(after(vec![user("q1")], Some("one"), 0).unwrap().replayed);
    assert_eq!(after(vec![assistant("a1")], None, 1).unwrap().last_seq, 2);
    assert_eq!(last_seq(&store, "c"), 2);
}

/// A store secret is created once, by whichever of several stores over one place asks first
/// (threads racing, each with its own store: another process, another replica), and read
/// back the same by every one of them later; names are kept apart and checked.
fn a_secret_is_created_once_and_every_store_reads_it(e: &dyn Engine) {
    let secrets: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let store = e.store("secret", &options());
                scope.spawn(move || store.secret("gateway").unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(secrets.iter().all(|s| *s == secrets[0]), "{secrets:?}");
    let later = e.store("secret", &options());
    assert_eq!(later.secret("gateway").unwrap(), secrets[0]);
    assert_ne!(later.secret("other").unwrap(), secrets[0]);
    let before = e.fingerprint("secret");
    for bad in ["", "Gateway", "../x", "a/b"] {
        let err = later.secret(bad).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Usage, "{err}");
    }
    assert_eq!(e.fingerprint("secret"), before);
}

fn reordered_argument_keys_are_the_same_content(e: &dyn Engine) {
    let store = e.store("keys", &options());
    let with_args = |args: &str| {
        vec![
            user("go"),
            EventBody::ToolCall {
                call_id: "c1".into(),
                tool: "shell".into(),
                arguments: serde_json::from_str(args).unwrap(),
                provider_item: None,
            },
        ]
    };
    let first = r#"{"cmd":"ls","env":{"A":"1","B":"2"},"argv":["-l","-a"]}"#;
    let retry = r#"{"argv":["-l","-a"],"env":{"B":"2","A":"1"},"cmd":"ls"}"#;
    assert!(
        !commit_events(&store, "c", with_args(first), Some("t"), &[])
            .unwrap()
            .replayed
    );
    let before = e.fingerprint("keys");
    let again = commit_events(&store, "c", with_args(retry), Some("t"), &[]).unwrap();
    assert_eq!(
        (again.first_seq, again.last_seq, again.replayed),
        (1, 2, true)
    );
    assert_eq!(e.fingerprint("keys"), before);
    drop(store);
    let store = e.store("keys", &options());
    assert!(
        commit_events(&store, "c", with_args(retry), Some("t"), &[])
            .unwrap()
            .replayed
    );
    // Array order is content: reordering an array is a conflict.
    let other = r#"{"argv":["-a","-l"],"env":{"B":"2","A":"1"},"cmd":"ls"}"#;
    let err = commit_events(&store, "c", with_args(other), Some("t"), &[]).unwrap_err();
    assert!(matches!(cause(&err), LedgerError::Conflict { .. }), "{err}");
}

const FAR_FUTURE_MS: i64 = 4_102_444_800_000; // 2100-01-01

fn event_times_are_kept_and_never_go_backwards(e: &dyn Engine) {
    let store = e.store("times", &options());
    let two = |text: &str| vec![user(text), assistant("ok")];
    let timed = |store: &Store, text: &str, times: &[Option<i64>]| {
        commit_events(store, "c", two(text), None, times)
    };
    timed(&store, "old", &[Some(1_000), Some(2_000)]).unwrap();
    let before = e.fingerprint("times");
    let err = timed(&store, "older", &[Some(1_999)])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("earlier than the conversation's last event"),
        "{err}"
    );
    let err = timed(&store, "x", &[Some(5_000), Some(4_999)])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("event 2") && err.contains("earlier than the event before it"),
        "{err}"
    );
    assert!(timed(&store, "x", &[Some(5_000), None, None]).is_err());
    assert_eq!(e.fingerprint("times"), before);
    // An event without a time after a timed one takes the clock.
    timed(&store, "mixed", &[Some(3_000)]).unwrap();
    let events = log(&store, "c").unwrap().events;
    assert_eq!(events[2].ts_ms, 3_000);
    assert!(events[3].ts_ms > 1_600_000_000_000, "{}", events[3].ts_ms);
    // A time in the future: later live commits keep it (the clock is behind the last event).
    timed(&store, "future", &[Some(FAR_FUTURE_MS)]).unwrap();
    timed(&store, "live", &[]).unwrap();
    let times: Vec<i64> = log(&store, "c")
        .unwrap()
        .events
        .iter()
        .map(|e| e.ts_ms)
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert_eq!(times.last(), Some(&FAR_FUTURE_MS));
    // Another store reads the last time back from what is stored.
    drop(store);
    let store = e.store("times", &options());
    assert!(timed(&store, "late", &[Some(FAR_FUTURE_MS - 1)]).is_err());
    timed(&store, "live again", &[]).unwrap();
    let events = log(&store, "c").unwrap().events;
    assert_eq!(events.last().unwrap().ts_ms, FAR_FUTURE_MS);
}

fn caps_count_artifacts_and_write_nothing(e: &dyn Engine) {
    let mut o = options();
    o.max_record_bytes(1_000)
        .max_commit_bytes(3_000)
        .max_ledger_bytes(6_000)
        .artifact_threshold(500);
    let store = e.store("capsizes", &o);
    commit_events(&store, "c", vec![user("start"), call("c1")], None, &[]).unwrap();
    let before = e.fingerprint("capsizes");
    let notes = (0..4).map(|_| note(&"n".repeat(900))).collect();
    let cases = [
        ("record", vec![user(&"u".repeat(2_000))]),
        ("commit", notes),
        // The artifact (5,000 bytes) counts toward the commit cap; no artifact is stored.
        ("commit", vec![result("c1", &"r".repeat(5_000))]),
    ];
    for (what, events) in cases {
        let err = commit_events(&store, "c", events, None, &[]).unwrap_err();
        match cause(&err) {
            LedgerError::TooLarge {
                what: w,
                limit,
                actual,
            } => assert!(*w == what && actual > limit, "{err}"),
            other => panic!("{what}: {other:?}"),
        }
        assert_eq!(e.fingerprint("capsizes"), before, "{what}");
        assert_eq!(e.artifacts("capsizes", "c"), 0);
    }
    let mut refused = false;
    for i in 0..100 {
        let events = vec![note(&format!("{i} {}", "x".repeat(800)))];
        match commit_events(&store, "c", events, None, &[]) {
            Ok(_) => {}
            Err(err) => {
                assert!(
                    matches!(cause(&err), LedgerError::TooLarge { what: "ledger", limit: 6_000, actual } if *actual > 6_000),
                    "{err}"
                );
                refused = true;
                break;
            }
        }
    }
    assert!(refused, "the ledger cap is reached");
    let list = store.list(&ListRequest {}).unwrap().conversations;
    assert!(list[0].bytes <= 6_000, "{}", list[0].bytes);
}

fn big_output() -> String {
    let mut s = String::from("HEAD-MARKER ");
    for i in 0..5_000 {
        s.push_str(&format!("line {i} of the build log\n"));
    }
    s.push_str("TAIL-MARKER");
    s
}

/// The artifact reference of the tool result at `seq` of `conv`.
fn artifact_of(store: &Store, conv: &str, seq: u64) -> (String, ArtifactRef) {
    let events = store
        .log(&LogRequest {
            conversation: conv.into(),
            from: seq,
            limit: Some(1),
        })
        .unwrap()
        .events;
    match &events[0].body {
        EventBody::ToolResult {
            text,
            artifact: Some(r),
            ..
        } => (text.clone(), r.clone()),
        other => panic!("no artifact at {seq}: {other:?}"),
    }
}

fn read_artifact(store: &Store, conv: &str, r: &ArtifactRef) -> ctxlog::ledger::Result<Vec<u8>> {
    let snapshot = store.snapshot(conv).unwrap();
    ctxlog::ledger::LedgerRead::artifact(snapshot.ledger(), r)
}

fn artifacts_are_content_addressed_and_stored_once(e: &dyn Engine) {
    let store = e.store("dedup", &options());
    let text = big_output();
    let events = vec![user("build"), call("c1"), result("c1", &text)];
    commit_events(&store, "c", events, None, &[]).unwrap();
    let (kept, r) = artifact_of(&store, "c", 3);
    assert_eq!(r.name, artifact_name(text.as_bytes()));
    assert_eq!(r.bytes, text.len() as u64);
    assert!(kept.starts_with("HEAD-MARKER") && kept.ends_with("TAIL-MARKER"));
    assert!(kept.contains(&r.name) && kept.len() < 5_000);
    assert_eq!(read_artifact(&store, "c", &r).unwrap(), text.as_bytes());
    // Same output again: same artifact, stored once.
    commit_events(
        &store,
        "c",
        vec![call("c2"), result("c2", &text)],
        None,
        &[],
    )
    .unwrap();
    assert_eq!(artifact_of(&store, "c", 5).1, r);
    assert_eq!(e.artifacts("dedup", "c"), 1);
    // Names outside the artifact namespace, and names of nothing stored, are refused.
    let hex = r.name.trim_start_matches("sha256-").to_string();
    for name in [
        "../ledger.log".to_string(),
        "/etc/passwd".to_string(),
        format!("../artifacts/{}", r.name),
        format!("sha256-{}", hex.to_uppercase()),
        format!("sha256-{}", &hex[..63]),
        format!("sha512-{hex}"),
        "sha256-../../../../etc/passwd".to_string(),
        String::new(),
    ] {
        let bad = ArtifactRef {
            name: name.clone(),
            bytes: 7,
        };
        let err = read_artifact(&store, "c", &bad).unwrap_err();
        assert!(
            matches!(err, LedgerError::BadArtifactRef { .. }),
            "{name}: {err}"
        );
    }
    let missing = ArtifactRef {
        name: artifact_name(b"nothing"),
        bytes: 7,
    };
    let err = read_artifact(&store, "c", &missing).unwrap_err();
    assert!(err.to_string().contains("no such artifact"), "{err}");
    // Artifacts belong to their conversation: another one does not hold it.
    let err = read_artifact_elsewhere(&store, &r);
    assert!(matches!(err, LedgerError::ArtifactMissing { .. }), "{err}");
}

fn read_artifact_elsewhere(store: &Store, r: &ArtifactRef) -> LedgerError {
    commit(store, "other", &turn("q", "a"), None).unwrap();
    read_artifact(store, "other", r).unwrap_err()
}

fn bad_artifact_references_write_nothing(e: &dyn Engine) {
    let store = e.store("badrefs", &options());
    let text = big_output();
    let events = vec![user("go"), call("c0"), result("c0", &text), call("c1")];
    commit_events(&store, "c", events, None, &[]).unwrap();
    let (_, stored) = artifact_of(&store, "c", 3);
    let with_ref = |name: &str, bytes: u64| {
        vec![EventBody::ToolResult {
            call_id: "c1".into(),
            tool: "shell".into(),
            status: ToolStatus::Ok,
            exit_code: None,
            text: "excerpt".into(),
            artifact: Some(ArtifactRef {
                name: name.into(),
                bytes,
            }),
            parts: Vec::new(),
            provider_item: None,
        }]
    };
    let before = e.fingerprint("badrefs");
    let size = stored.bytes;
    for name in [
        "../../etc/passwd",
        "/tmp/x",
        &artifact_name(b"never stored"),
    ] {
        let err = commit_events(&store, "c", with_ref(name, size), None, &[]).unwrap_err();
        assert!(
            matches!(cause(&err), LedgerError::BadArtifactRef { .. }),
            "{name}: {err}"
        );
        assert_eq!(e.fingerprint("badrefs"), before);
    }
    // The right name with the wrong size.
    let err = commit_events(&store, "c", with_ref(&stored.name, size + 1), None, &[]).unwrap_err();
    assert!(
        matches!(cause(&err), LedgerError::InvalidCommit { .. }),
        "{err}"
    );
    assert_eq!(e.fingerprint("badrefs"), before);
    // Content changed (same size): reads fail closed, a commit referencing it is refused.
    e.flip_artifact("badrefs", "c", &stored.name);
    let err = read_artifact(&store, "c", &stored).unwrap_err();
    assert!(matches!(err, LedgerError::ArtifactMismatch { .. }), "{err}");
    let tampered = e.fingerprint("badrefs");
    let err = commit_events(&store, "c", with_ref(&stored.name, size), None, &[]).unwrap_err();
    assert!(
        matches!(cause(&err), LedgerError::InvalidCommit { .. }),
        "{err}"
    );
    assert_eq!(e.fingerprint("badrefs"), tampered);
    e.flip_artifact("badrefs", "c", &stored.name);
    let r = commit_events(&store, "c", with_ref(&stored.name, size), None, &[]).unwrap();
    assert_eq!(r.first_seq, 5);
}

fn interrupted(id: &str) -> EventBody {
    EventBody::ToolResult {
        call_id: id.into(),
        tool: "shell".into(),
        status: ToolStatus::Interrupted,
        exit_code: None,
        text: "?".into(),
        artifact: None,
        parts: Vec::new(),
        provider_item: None,
    }
}

/// Commits the ledger refuses in a conversation holding `q1 a1 | check c1(open) | note(5)`.
fn invalid_commits() -> Vec<(&'static str, Vec<EventBody>)> {
    let supersedes = |seq| EventBody::Note {
        text: "new rule".into(),
        pinned: true,
        supersedes: Some(seq),
        provider_item: None,
    };
    let other_tool = EventBody::ToolResult {
        call_id: "c1".into(),
        tool: "browser".into(),
        status: ToolStatus::Ok,
        exit_code: Some(0),
        text: "x".into(),
        artifact: None,
        parts: Vec::new(),
        provider_item: None,
    };
    let unnamed = EventBody::ToolCall {
        call_id: "c5".into(),
        tool: String::new(),
        arguments: serde_json::json!({}),
        provider_item: None,
    };
    let import = EventBody::System {
        marker: SystemMarker::Import { source: "x".into() },
    };
    vec![
        ("empty commit", vec![]),
        ("empty user text", vec![user("")]),
        ("blank user text", vec![user(" \n\t")]),
        ("empty assistant text", vec![assistant("")]),
        ("empty note", vec![note("  ")]),
        ("result without call", vec![result("nope", "x")]),
        (
            "result for an earlier turn",
            vec![user("next"), result("c1", "x")],
        ),
        (
            "two results for one call",
            vec![result("c1", "x"), result("c1", "y")],
        ),
        ("duplicate call id in the turn", vec![call("c1")]),
        ("result naming another tool", vec![other_tool]),
        (
            "duplicate call id in the commit",
            vec![call("c2"), call("c2")],
        ),
        ("interrupted from an application", vec![interrupted("c1")]),
        ("system marker from an application", vec![import]),
        ("call without a name", vec![unnamed]),
        ("supersedes a user event", vec![supersedes(1)]),
        ("supersedes the future", vec![supersedes(99)]),
        (
            "valid events then a bad one",
            vec![assistant("fine"), note("fine"), user("")],
        ),
    ]
}

fn each_invalid_commit_is_refused_and_writes_nothing(e: &dyn Engine) {
    let store = e.store("badinput", &options());
    commit(&store, "c", &turn("q1", "a1"), None).unwrap();
    commit_events(&store, "c", vec![user("check"), call("c1")], None, &[]).unwrap();
    commit_events(&store, "c", vec![note("a note")], None, &[]).unwrap();
    let before = e.fingerprint("badinput");
    for (what, events) in invalid_commits() {
        let err = commit_events(&store, "c", events, None, &[]).unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput, "{what}: {err}");
        assert!(!err.to_string().contains('\n'), "{what}: {err}");
        assert_eq!(e.fingerprint("badinput"), before, "{what}");
        assert_eq!(last_seq(&store, "c"), 5, "{what}");
    }
    let ok = EventBody::Note {
        text: "new rule".into(),
        pinned: true,
        supersedes: Some(5),
        provider_item: None,
    };
    let r = commit_events(&store, "c", vec![result("c1", "done"), ok], None, &[]).unwrap();
    assert_eq!(r.first_seq, 6);
}

fn only_notes_and_a_greeting_come_before_the_first_user_message(e: &dyn Engine) {
    let store = e.store("greeting", &options());
    for events in [vec![call("c1")], vec![result("c1", "x")]] {
        let err = commit_events(&store, "c", events, None, &[]).unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
    }
    assert_eq!(log(&store, "c").unwrap_err().class(), ErrorClass::NotFound);
    let seqs = [
        vec![note("pinned fact")],
        vec![assistant("Hi! How can I help?")],
        vec![user("q"), assistant("a")],
    ]
    .into_iter()
    .map(|events| {
        commit_events(&store, "c", events, None, &[])
            .unwrap()
            .first_seq
    });
    assert_eq!(seqs.collect::<Vec<_>>(), [1, 2, 3]);
}

fn a_turn_may_span_commits_and_stores(e: &dyn Engine) {
    let store = e.store("span", &options());
    let go = |store: &Store, events| commit_events(store, "c", events, None, &[]);
    go(&store, vec![user("deploy")]).unwrap();
    go(&store, vec![call("a"), call("b")]).unwrap();
    go(&store, vec![result("a", "ok")]).unwrap();
    drop(store);
    let store = e.store("span", &options());
    go(&store, vec![note("deploying"), result("b", "ok")]).unwrap();
    let err = go(&store, vec![result("b", "again")]).unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
    go(&store, vec![assistant("deployed")]).unwrap();
    go(&store, vec![user("and now?")]).unwrap();
    let err = go(&store, vec![result("a", "late")]).unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
    let snapshot = store.snapshot("c").unwrap();
    assert_eq!(
        ctxlog::ledger::LedgerRead::user_seqs(snapshot.ledger()),
        [1, 8]
    );
}

const CASES: &[Case] = &[
    ("commits_get_contiguous_seqs", commits_get_contiguous_seqs),
    (
        "a_secret_is_created_once_and_every_store_reads_it",
        a_secret_is_created_once_and_every_store_reads_it,
    ),
    (
        "opaque_items_are_stored_as_given_and_round_trip",
        opaque_items_are_stored_as_given_and_round_trip,
    ),
    (
        "media_images_and_documents_are_artifacts_and_round_trip",
        media_images_and_documents_are_artifacts_and_round_trip,
    ),
    (
        "a_salvage_gives_every_intact_event",
        a_salvage_gives_every_intact_event,
    ),
    ("ids_replay_or_conflict", ids_replay_or_conflict),
    (
        "a_commit_after_a_seq_is_refused_once_the_conversation_moved_on",
        a_commit_after_a_seq_is_refused_once_the_conversation_moved_on,
    ),
    (
        "replays_and_conflicts_write_nothing",
        replays_and_conflicts_write_nothing,
    ),
    (
        "reordered_argument_keys_are_the_same_content",
        reordered_argument_keys_are_the_same_content,
    ),
    (
        "event_times_are_kept_and_never_go_backwards",
        event_times_are_kept_and_never_go_backwards,
    ),
    (
        "invalid_commits_write_nothing",
        invalid_commits_write_nothing,
    ),
    (
        "each_invalid_commit_is_refused_and_writes_nothing",
        each_invalid_commit_is_refused_and_writes_nothing,
    ),
    (
        "only_notes_and_a_greeting_come_before_the_first_user_message",
        only_notes_and_a_greeting_come_before_the_first_user_message,
    ),
    (
        "a_turn_may_span_commits_and_stores",
        a_turn_may_span_commits_and_stores,
    ),
    (
        "caps_refuse_and_write_nothing",
        caps_refuse_and_write_nothing,
    ),
    (
        "caps_count_artifacts_and_write_nothing",
        caps_count_artifacts_and_write_nothing,
    ),
    (
        "large_outputs_become_artifacts",
        large_outputs_become_artifacts,
    ),
    (
        "artifacts_are_content_addressed_and_stored_once",
        artifacts_are_content_addressed_and_stored_once,
    ),
    (
        "bad_artifact_references_write_nothing",
        bad_artifact_references_write_nothing,
    ),
    ("damaged_payloads_fail_closed", damaged_payloads_fail_closed),
    (
        "intact_seqs_of_a_damaged_conversation_are_erased",
        intact_seqs_of_a_damaged_conversation_are_erased,
    ),
    (
        "erasure_removes_text_everywhere",
        erasure_removes_text_everywhere,
    ),
    (
        "earlier_tombstones_stay_as_written",
        earlier_tombstones_stay_as_written,
    ),
    (
        "export_import_round_trips_with_erasures",
        export_import_round_trips_with_erasures,
    ),
    (
        "an_interrupted_import_with_erasures_re_runs_into_the_same_name",
        an_interrupted_import_with_erasures_re_runs_into_the_same_name,
    ),
    (
        "list_gives_the_newest_event_time_tombstones_included",
        list_gives_the_newest_event_time_tombstones_included,
    ),
    (
        "a_retraction_takes_back_exactly_the_newest_events",
        a_retraction_takes_back_exactly_the_newest_events,
    ),
    (
        "provider_items_are_kept_and_round_trip",
        provider_items_are_kept_and_round_trip,
    ),
    (
        "a_stable_window_moves_by_blocks",
        a_stable_window_moves_by_blocks,
    ),
    (
        "responses_imports_project_back_as_given",
        responses_imports_project_back_as_given,
    ),
];

#[test]
fn the_contract_on_the_file_store() {
    run_cases(&Files::new(), CASES);
}

#[test]
#[cfg(feature = "postgres")]
fn the_contract_on_postgres() {
    let Some(pg) = Postgres::start() else {
        return;
    };
    run_cases(&pg, CASES);
}

#[test]
#[cfg(feature = "postgres")]
fn an_unreachable_database_is_one_clear_line() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cache = tempfile::tempdir().unwrap();
    let url = format!(
        "postgres://app:hunter2@127.0.0.1:{port}/ledger?cache_dir={}",
        cache.path().display()
    );
    let store = Store::open_url(&url).unwrap();
    let err = commit(&store, "c", &turn("q", "a"), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("postgres://app@127.0.0.1:{port}/ledger")),
        "{err}"
    );
    assert!(err.contains("cannot connect"), "{err}");
    assert!(!err.contains("hunter2") && !err.contains('\n'), "{err}");
    let bad = Store::open_url("postgres://app:hunter2@127.0.0.1:notaport/x")
        .unwrap_err()
        .to_string();
    assert!(!bad.contains("hunter2"), "{bad}");
}

/// TLS is not built in: a URL that asks for it is refused before any connection (never a
/// connection in plain text), in one line without the password.
#[test]
#[cfg(feature = "postgres")]
fn a_url_asking_for_tls_is_refused_in_one_line() {
    for mode in ["require", "verify-ca", "verify-full"] {
        let url = format!("postgres://app:hunter2@db.internal:5432/ledger?sslmode={mode}");
        let err = Store::open_url(&url).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Usage, "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("sslmode={mode} asks for TLS")),
            "{msg}"
        );
        assert!(!msg.contains("hunter2") && !msg.contains('\n'), "{msg}");
    }
    for mode in ["disable", "prefer"] {
        let url = format!("postgres://app@127.0.0.1:1/ledger?sslmode={mode}");
        Store::open_url(&url).unwrap();
    }
}

/// The wall clock in milliseconds since the Unix epoch, as event times are stamped.
fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    i64::try_from(since.unwrap().as_millis()).unwrap()
}
