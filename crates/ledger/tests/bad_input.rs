//! Failure class: bad input from an application (docs/design.md#9-bad-input-and-faults,
//! docs/design.md#l5-caps).
//!
//! Guarantee: every rejected commit gets a clear typed error (`InvalidCommit` or `TooLarge`)
//! and leaves every file of the conversation directory byte-identical (checked by reading the
//! whole directory before and after), including the artifacts directory and the sidecars;
//! the writer's state is unchanged, so a valid commit afterwards gets the next seq.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use ctxlog_ledger::{
    Error, EventBody, Ledger, LedgerRead, NewCommit, Options, SystemMarker, ToolStatus,
};

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

fn invalid_commits() -> Vec<(&'static str, NewCommit)> {
    let supersedes = |seq| EventBody::Note {
        text: "new rule".into(),
        pinned: true,
        supersedes: Some(seq),
        provider_item: None,
    };
    vec![
        ("empty commit", commit(vec![])),
        ("empty user text", commit(vec![user("")])),
        ("blank user text", commit(vec![user(" \n\t")])),
        ("empty assistant text", commit(vec![assistant("")])),
        ("empty note", commit(vec![note("  ")])),
        ("result without call", commit(vec![result("nope", "x")])),
        (
            "result for a call of an earlier turn",
            commit(vec![user("next"), result("c1", "x")]),
        ),
        (
            "two results for one call",
            commit(vec![result("c1", "x"), result("c1", "y")]),
        ),
        ("duplicate call id in the turn", commit(vec![call("c1")])),
        (
            "result naming another tool than its call",
            commit(vec![EventBody::ToolResult {
                call_id: "c1".into(),
                tool: "browser".into(),
                status: ToolStatus::Ok,
                exit_code: Some(0),
                text: "x".into(),
                artifact: None,
                parts: Vec::new(),
                provider_item: None,
            }]),
        ),
        (
            "duplicate call id in the commit",
            commit(vec![call("c2"), call("c2")]),
        ),
        (
            "interrupted from an application",
            commit(vec![interrupted("c1")]),
        ),
        (
            "system marker from an application",
            commit(vec![EventBody::System {
                marker: SystemMarker::Import { source: "x".into() },
            }]),
        ),
        (
            "call without a name",
            commit(vec![EventBody::ToolCall {
                call_id: "c5".into(),
                tool: String::new(),
                arguments: serde_json::json!({}),
                provider_item: None,
            }]),
        ),
        ("supersedes a user event", commit(vec![supersedes(1)])),
        ("supersedes the future", commit(vec![supersedes(99)])),
        (
            "valid events then a bad one",
            commit(vec![assistant("fine"), note("fine"), user("")]),
        ),
    ]
}

#[test]
fn each_invalid_commit_is_refused_and_changes_no_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    ledger.commit(&turn(1)).unwrap();
    ledger
        .commit(&commit(vec![user("check"), call("c1")]))
        .unwrap();
    ledger.commit(&commit(vec![note("a note")])).unwrap();
    let before = snapshot_dir(tmp.path());
    for (what, c) in invalid_commits() {
        let err = ledger.commit(&c).unwrap_err();
        assert!(
            matches!(err, Error::InvalidCommit { .. }),
            "{what}: {err:?}"
        );
        assert!(!err.to_string().is_empty());
        assert_eq!(snapshot_dir(tmp.path()), before, "{what}");
        assert_eq!(ledger.last_seq(), 5, "{what}");
    }
    // Supersedes an earlier note: fine.
    let ok = EventBody::Note {
        text: "new rule".into(),
        pinned: true,
        supersedes: Some(5),
        provider_item: None,
    };
    assert_eq!(
        ledger
            .commit(&commit(vec![result("c1", "done"), ok]))
            .unwrap()
            .first_seq,
        6
    );
}

/// Before the first user message only notes and an assistant greeting
/// (docs/design.md#p11-the-agent-loop) may come: tool calls and results need a turn.
#[test]
fn only_notes_and_a_greeting_may_come_before_the_first_user_message() {
    let (_m, s) = mem();
    let (mut ledger, _) = Ledger::open_with(s, &Options::default()).unwrap();
    for c in [commit(vec![call("c1")]), commit(vec![result("c1", "x")])] {
        assert!(matches!(
            ledger.commit(&c),
            Err(Error::InvalidCommit { .. })
        ));
    }
    assert_eq!(ledger.last_seq(), 0);
    assert_eq!(
        ledger
            .commit(&commit(vec![note("pinned fact")]))
            .unwrap()
            .first_seq,
        1
    );
    assert_eq!(
        ledger
            .commit(&commit(vec![assistant("Hi! How can I help?")]))
            .unwrap()
            .first_seq,
        2
    );
    assert_eq!(ledger.commit(&turn(1)).unwrap().first_seq, 3);
}

#[test]
fn a_turn_may_span_commits_and_reopens() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
        ledger.commit(&commit(vec![user("deploy")])).unwrap();
        ledger.commit(&commit(vec![call("a"), call("b")])).unwrap();
        ledger.commit(&commit(vec![result("a", "ok")])).unwrap();
    }
    let (mut ledger, _) = Ledger::open(tmp.path(), &Options::default()).unwrap();
    ledger
        .commit(&commit(vec![note("deploying"), result("b", "ok")]))
        .unwrap();
    assert!(matches!(
        ledger.commit(&commit(vec![result("b", "again")])),
        Err(Error::InvalidCommit { .. })
    ));
    ledger.commit(&commit(vec![assistant("deployed")])).unwrap();
    ledger.commit(&commit(vec![user("and now?")])).unwrap();
    assert!(matches!(
        ledger.commit(&commit(vec![result("a", "late")])),
        Err(Error::InvalidCommit { .. })
    ));
    assert_eq!(ledger.user_seqs(), &[1, 8]);
}

#[test]
fn caps_refuse_with_sizes_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = Options::default();
    opts.max_record_bytes(1_000)
        .max_commit_bytes(3_000)
        .max_ledger_bytes(6_000)
        .artifact_threshold(500);
    let (mut ledger, _) = Ledger::open(tmp.path(), &opts).unwrap();
    ledger
        .commit(&commit(vec![user("start"), call("c1")]))
        .unwrap();
    let before = snapshot_dir(tmp.path());
    let cases: Vec<(&str, NewCommit)> = vec![
        ("record", commit(vec![user(&"u".repeat(2_000))])),
        (
            "commit",
            commit(vec![
                note(&"n".repeat(900)),
                note(&"n".repeat(900)),
                note(&"n".repeat(900)),
                note(&"n".repeat(900)),
            ]),
        ),
        // The artifact (5,000 bytes) counts toward the commit cap; no artifact file appears.
        ("commit", commit(vec![result("c1", &"r".repeat(5_000))])),
    ];
    for (what, c) in cases {
        match ledger.commit(&c).unwrap_err() {
            Error::TooLarge {
                what: w,
                limit,
                actual,
            } => {
                assert_eq!(w, what);
                assert!(actual > limit);
            }
            other => panic!("{what}: {other:?}"),
        }
        assert_eq!(snapshot_dir(tmp.path()), before, "{what}");
    }
    for i in 0..100 {
        match ledger.commit(&commit(vec![note(&format!("{i} {}", "x".repeat(800)))])) {
            Ok(_) => {}
            Err(Error::TooLarge {
                what: "ledger",
                limit: 6_000,
                actual,
            }) => {
                assert!(actual > 6_000);
                break;
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    let len = std::fs::metadata(tmp.path().join("ledger.log"))
        .unwrap()
        .len();
    assert!(len <= 6_000);
}

#[test]
fn unknown_kinds_and_fields_do_not_parse() {
    for bad in [
        r#"{"events":[{"kind":"shout","text":"x"}]}"#,
        r#"{"events":[{"kind":"user","text":"x","extra":1}]}"#,
        r#"{"events":[{"kind":"user"}]}"#,
        r#"{"evnts":[]}"#,
    ] {
        assert!(serde_json::from_str::<NewCommit>(bad).is_err(), "{bad}");
    }
}
