//! Failure class: retention (docs/design.md#e2-retention) removing the wrong things — half a turn,
//! a pinned note, an earlier tombstone rewritten (docs/design.md#e6-listing-and-tombstones), or
//! bytes written by a dry run.
//!
//! Guarantee: `Store::gc` erases whole turns only, through the erasure path, one tombstone
//! per contiguous run with the reason `retention: <rules>`; turns holding a pinned note stay
//! unless the policy includes them; earlier tombstones keep their reason and time; a dry run
//! reports the same ranges and changes no byte of the store; a request with no rule or a bad
//! rule changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

use ctxlog::ops::{CommitRequest, GcRequest, LogRequest, RecallRequest, RetentionPolicy};
use ctxlog::{ErrorClass, EventBody, Store, SystemMarker};

fn commit(store: &Store, conv: &str, json: &str) {
    store
        .commit(&CommitRequest::from_json(conv, json.as_bytes(), None).unwrap())
        .unwrap();
}

/// Turn i: user, a tool call and its result, the reply (4 events).
fn agent_turn(store: &Store, conv: &str, i: usize) {
    let json = format!(
        r#"{{"events":[{{"kind":"user","text":"question {i} about topic{i}"}},
        {{"kind":"tool_call","call_id":"c{i}","tool":"shell","arguments":{{"cmd":"ls {i}"}}}},
        {{"kind":"tool_result","call_id":"c{i}","tool":"shell","status":"ok","text":"{}"}},
        {{"kind":"assistant","text":"answer {i}"}}]}}"#,
        format!("output{i} ").repeat(200)
    );
    commit(store, conv, &json);
}

fn gc(
    store: &Store,
    conv: Option<&str>,
    policy: RetentionPolicy,
    dry_run: bool,
) -> ctxlog::Result<ctxlog::ops::GcResponse> {
    store.gc(&GcRequest {
        conversation: conv.map(str::to_string),
        older_than: policy.older_than,
        keep_turns: policy.keep_turns,
        max_bytes: policy.max_bytes,
        include_pinned: policy.include_pinned,
        dry_run,
    })
}

fn keep(n: u64) -> RetentionPolicy {
    RetentionPolicy {
        keep_turns: Some(n),
        ..Default::default()
    }
}

/// Every file under `root` with its bytes.
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.insert(path.display().to_string(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

fn tombstones(store: &Store, conv: &str) -> Vec<(u64, u64, i64, String)> {
    let log = store
        .log(&LogRequest {
            conversation: conv.into(),
            from: 1,
            limit: None,
        })
        .unwrap();
    log.events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::System {
                marker:
                    SystemMarker::Tombstone {
                        from,
                        to,
                        at_ms,
                        reason,
                    },
            } => Some((*from, *to, *at_ms, reason.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn keep_turns_erases_whole_old_turns_under_one_retention_tombstone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for i in 1..=10 {
        agent_turn(&store, "c", i);
    }
    let response = gc(&store, Some("c"), keep(3), false).unwrap();
    let report = &response.conversations[0];
    assert_eq!(report.removed.len(), 1);
    let run = &report.removed[0];
    assert_eq!((run.from, run.to, run.turns), (1, 28, 7));
    assert_eq!(run.reason, "retention: keep newest 3 turns");
    assert_eq!((report.seqs_removed, report.turns_removed), (28, 7));
    assert!(report.bytes_freed > 0 && report.bytes_after < report.bytes_before);
    let on_disk = std::fs::metadata(dir.path().join("c/ledger.log"))
        .unwrap()
        .len();
    assert_eq!(
        report.bytes_after, on_disk,
        "bytes_after is the ledger's size"
    );
    assert_eq!(
        tombstones(&store, "c"),
        vec![(1, 28, tombstones(&store, "c")[0].2, run.reason.clone())]
    );
    // Erased text is gone from every file; the kept turns are still recalled.
    for bytes in snapshot(dir.path()).values() {
        assert!(!bytes.windows(7).any(|w| w == b"output3"));
    }
    let recall = |q: &str| {
        store
            .recall(&RecallRequest {
                conversation: "c".into(),
                query: q.into(),
                seq: None,
                offset: 0,
                limit: 5,
            })
            .unwrap()
            .hits
            .len()
    };
    assert_eq!(recall("topic3"), 0);
    assert!(recall("topic9") > 0);
    // Applying the same policy again removes nothing and rewrites nothing.
    let before = snapshot(dir.path());
    let again = gc(&store, Some("c"), keep(3), false).unwrap();
    assert!(again.conversations[0].removed.is_empty());
    assert_eq!(
        before,
        snapshot(dir.path()),
        "a second pass rewrote something"
    );
}

#[test]
fn pinned_notes_are_exempt_unless_included_and_earlier_tombstones_stay_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    commit(
        &store,
        "c",
        r#"{"events":[{"kind":"note","text":"house rule","pinned":true}]}"#,
    );
    for i in 1..=5 {
        let json = if i == 2 {
            r#"{"events":[{"kind":"user","text":"remember this"},{"kind":"note","text":"budget is 5k","pinned":true},{"kind":"assistant","text":"noted"}]}"#.to_string()
        } else {
            format!(r#"{{"user":"q{i}","assistant":"a{i}"}}"#)
        };
        commit(&store, "c", &json);
    }
    // seqs: 1 note; turn1 2-3; turn2 4-6 (pinned); turn3 7-8; turn4 9-10; turn5 11-12.
    let report = gc(&store, Some("c"), keep(1), false)
        .unwrap()
        .conversations
        .remove(0);
    let ranges: Vec<_> = report.removed.iter().map(|r| (r.from, r.to)).collect();
    assert_eq!(ranges, vec![(2, 3), (7, 10)]);
    assert_eq!(report.pinned_kept, 2);
    let first = tombstones(&store, "c");
    assert_eq!(first.len(), 2);

    // Naming pinned notes removes them too, each under its own new tombstone; the earlier
    // tombstones are neither absorbed nor rewritten (docs/design.md#e6-listing-and-tombstones).
    let policy = RetentionPolicy {
        include_pinned: true,
        ..keep(1)
    };
    let report = gc(&store, Some("c"), policy, false)
        .unwrap()
        .conversations
        .remove(0);
    let ranges: Vec<_> = report.removed.iter().map(|r| (r.from, r.to)).collect();
    assert_eq!(ranges, vec![(1, 1), (4, 6)]);
    let second = tombstones(&store, "c");
    assert_eq!(second.len(), 4);
    for old in &first {
        assert!(second.contains(old), "{old:?} was rewritten: {second:?}");
    }
}

#[test]
fn max_bytes_removes_the_oldest_turns_until_the_ledger_fits() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for i in 1..=20 {
        agent_turn(&store, "c", i);
    }
    let size = std::fs::metadata(dir.path().join("c/ledger.log"))
        .unwrap()
        .len();
    let max = size / 2;
    let policy = RetentionPolicy {
        max_bytes: Some(max),
        ..Default::default()
    };
    let dry = gc(&store, Some("c"), policy.clone(), true).unwrap();
    let real = gc(&store, Some("c"), policy, false).unwrap();
    let (d, r) = (&dry.conversations[0], &real.conversations[0]);
    assert_eq!(
        d.removed, r.removed,
        "a dry run plans what the real run does"
    );
    assert_eq!(
        r.removed[0].reason,
        format!("retention: ledger over {max} bytes")
    );
    let after = std::fs::metadata(dir.path().join("c/ledger.log"))
        .unwrap()
        .len();
    assert!(after <= max, "{after} > {max}");
    assert_eq!(r.bytes_after, after);
    assert_eq!(
        d.bytes_after, after,
        "a dry run sizes the tombstones as the erasure writes them"
    );
    assert!(r.note.is_none());
}

#[test]
fn a_dry_run_changes_no_byte_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for i in 1..=6 {
        agent_turn(&store, "a", i);
        agent_turn(&store, "b", i);
    }
    // The recall index exists too: a dry run must not touch it either.
    store
        .recall(&RecallRequest {
            conversation: "a".into(),
            query: "topic1".into(),
            seq: None,
            offset: 0,
            limit: 5,
        })
        .unwrap();
    drop(store);
    let before = snapshot(dir.path());
    let store = Store::open(dir.path()).unwrap();
    let dry = gc(&store, None, keep(2), true).unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.conversations.len(), 2);
    assert_eq!(dry.seqs_removed, 2 * 16);
    assert!(dry.bytes_freed > 0, "{dry:?}");
    drop(store);
    assert_eq!(before, snapshot(dir.path()), "a dry run wrote something");
}

#[test]
fn a_gc_request_refuses_unknown_fields() {
    let err = serde_json::from_str::<GcRequest>(r#"{"keep_turn":3}"#).unwrap_err();
    assert!(
        err.to_string().contains("unknown field `keep_turn`"),
        "{err}"
    );
    let ok: GcRequest = serde_json::from_str(r#"{"keep_turns":3,"dry_run":true}"#).unwrap();
    assert_eq!((ok.keep_turns, ok.dry_run), (Some(3), true));
}

#[test]
fn bad_requests_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for i in 1..=3 {
        agent_turn(&store, "c", i);
    }
    let before = snapshot(dir.path());
    let no_rule = gc(&store, Some("c"), RetentionPolicy::default(), false).unwrap_err();
    assert_eq!(no_rule.class(), ErrorClass::Usage);
    assert!(
        no_rule.to_string().contains("no retention rule"),
        "{no_rule}"
    );
    for bad in ["soon", "0s", ""] {
        let policy = RetentionPolicy {
            older_than: Some(bad.into()),
            ..Default::default()
        };
        let err = gc(&store, Some("c"), policy, false).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Usage, "{bad}: {err}");
    }
    let zero = RetentionPolicy {
        max_bytes: Some(0),
        ..Default::default()
    };
    assert_eq!(
        gc(&store, Some("c"), zero, false).unwrap_err().class(),
        ErrorClass::Usage
    );
    let missing = gc(&store, Some("nope"), keep(1), false).unwrap_err();
    assert_eq!(missing.class(), ErrorClass::NotFound);
    let bad_name = gc(&store, Some("../x"), keep(1), false).unwrap_err();
    assert_eq!(bad_name.class(), ErrorClass::Usage);
    assert_eq!(before, snapshot(dir.path()));
}

#[test]
fn the_configured_policy_applies_and_a_request_rule_overrides_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = ctxlog::StoreConfig::from_toml("[retention]\nkeep_turns = 4\n", "t").unwrap();
    let store = ctxlog::StoreBuilder::dir(dir.path())
        .config(config)
        .build()
        .unwrap();
    for i in 1..=6 {
        agent_turn(&store, "c", i);
    }
    let r = gc(&store, Some("c"), RetentionPolicy::default(), true).unwrap();
    assert_eq!(r.policy.keep_turns, Some(4));
    assert_eq!(r.conversations[0].turns_removed, 2);
    let r = gc(&store, Some("c"), keep(5), true).unwrap();
    assert_eq!(r.conversations[0].turns_removed, 1);
}

#[test]
fn retention_on_open_applies_when_a_store_first_writes_a_conversation() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).unwrap();
        for i in 1..=5 {
            agent_turn(&store, "c", i);
        }
    }
    let config =
        ctxlog::StoreConfig::from_toml("[retention]\nkeep_turns = 2\non_open = true\n", "t")
            .unwrap();
    let store = ctxlog::StoreBuilder::dir(dir.path())
        .config(config)
        .build()
        .unwrap();
    agent_turn(&store, "c", 6);
    // Opened for the commit: turns 1-3 went, then turn 6 was added.
    let stones = tombstones(&store, "c");
    assert_eq!(stones.len(), 1);
    assert_eq!((stones[0].0, stones[0].1), (1, 12));
    assert_eq!(stones[0].3, "retention: keep newest 2 turns");
}

#[test]
fn max_bytes_never_removes_turns_smaller_than_their_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for i in 0..5 {
        commit(
            &store,
            "c",
            &format!(r#"{{"user":"q{i}","assistant":"a{i}"}}"#),
        );
    }
    let policy = RetentionPolicy {
        max_bytes: Some(100),
        ..Default::default()
    };
    let report = gc(&store, Some("c"), policy, false)
        .unwrap()
        .conversations
        .remove(0);
    assert!(report.removed.is_empty(), "{report:?}");
    assert_eq!(report.bytes_freed, 0);
    assert!(
        report
            .note
            .as_deref()
            .unwrap()
            .contains("stays over max_bytes"),
        "{report:?}"
    );
    // Small turns removed by another rule may grow the ledger: the report says so.
    let report = gc(&store, Some("c"), keep(1), false)
        .unwrap()
        .conversations
        .remove(0);
    assert!(report.bytes_freed < 0, "{report:?}");
}
