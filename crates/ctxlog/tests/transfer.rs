//! Failure class: history that cannot move in or out of ctxlog intact — an export that an
//! import does not rebuild exactly, an import that loses original times, writes twice when
//! re-run, or leaves half a conversation behind after a bad record
//! (docs/design.md#e4-export-and-import, docs/design.md#l10-event-times).
//!
//! Guarantees: export → import → export is byte-identical (property test over conversations
//! with notes, tool calls, artifacts, explicit times and erasures); every format's bad record is named
//! and nothing is written; re-running an import writes nothing; imported times drive recall's
//! date metadata ("May 2023" finds the May 2023 turns).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use ctxlog::ops::{
    CommitRequest, EraseRequest, EraseTarget, ExportRequest, ImportRequest, LogRequest,
    RecallRequest,
};
use ctxlog::transfer::ImportFormat;
use ctxlog::{EventBody, NewCommit, Store, ToolStatus};
use proptest::prelude::*;

fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn export(store: &Store, name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    store
        .export(
            &ExportRequest {
                conversation: name.into(),
                salvage: false,
            },
            &mut out,
        )
        .unwrap();
    out
}

fn import(
    store: &Store,
    name: Option<&str>,
    format: ImportFormat,
    data: &[u8],
) -> ctxlog::Result<ctxlog::ops::ImportResponse> {
    store.import(
        &ImportRequest {
            conversation: name.map(str::to_owned),
            format,
        },
        data,
        &mut |_| {},
    )
}

/// One generated turn: a user message, maybe a tool call with a (maybe large) result, a
/// reply; maybe a note first.
#[derive(Clone, Debug)]
struct Turn {
    note: Option<(String, bool)>,
    user: String,
    tool: Option<(String, usize)>,
    reply: String,
    gap_ms: i64,
}

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 é请🚀\"\\\\\n]{1,40}".prop_filter("not blank", |s| !s.trim().is_empty())
}

fn turn() -> impl Strategy<Value = Turn> {
    (
        proptest::option::of((text(), any::<bool>())),
        text(),
        proptest::option::of((text(), prop_oneof![Just(10usize), Just(40_000usize)])),
        text(),
        0i64..100_000_000,
    )
        .prop_map(|(note, user, tool, reply, gap_ms)| Turn {
            note,
            user,
            tool,
            reply,
            gap_ms,
        })
}

fn commit_turns(store: &Store, name: &str, turns: &[Turn]) {
    commit_turns_from(store, name, turns, 1_600_000_000_000, 0);
}

/// Commits `turns` at times from `ts` on; call ids count from `first`.
fn commit_turns_from(store: &Store, name: &str, turns: &[Turn], mut ts: i64, first: usize) {
    for (i, t) in turns.iter().enumerate() {
        let i = first + i;
        let mut events = Vec::new();
        if let Some((note, pinned)) = &t.note {
            events.push(EventBody::Note {
                text: note.clone(),
                pinned: *pinned,
                supersedes: None,
                provider_item: None,
            });
        }
        events.push(EventBody::User {
            text: t.user.clone(),
            parts: Vec::new(),
            provider_item: None,
        });
        if let Some((out, size)) = &t.tool {
            let call_id = format!("c{i}");
            events.push(EventBody::ToolCall {
                call_id: call_id.clone(),
                tool: "shell".into(),
                arguments: serde_json::json!({"cmd": out, "n": i}),
                provider_item: None,
            });
            events.push(EventBody::ToolResult {
                call_id,
                tool: "shell".into(),
                status: ToolStatus::Ok,
                exit_code: Some(0),
                text: out.repeat(size / out.len() + 1),
                artifact: None,
                parts: Vec::new(),
                provider_item: None,
            });
        }
        events.push(EventBody::Assistant {
            text: t.reply.clone(),
            provider_item: None,
        });
        ts += t.gap_ms;
        let times = events.iter().map(|_| Some(ts)).collect();
        store
            .commit(&CommitRequest {
                conversation: name.into(),
                commit: NewCommit::new(events).with_times(times),
            })
            .unwrap();
    }
}

/// Cases of the round-trip property (each commits, erases, exports, imports and exports
/// again).
const ROUND_TRIP_CASES: u32 = 128;

/// Where a generated erasure starts: the first seq, the last, or anywhere (a fraction of
/// the log); it runs over `len` more seqs (widened to whole turns by the ledger).
#[derive(Clone, Debug)]
enum At {
    Start,
    End,
    Anywhere(u64),
}

fn erasure() -> impl Strategy<Value = (At, u64)> {
    (
        prop_oneof![
            Just(At::Start),
            Just(At::End),
            (0u64..1000).prop_map(At::Anywhere)
        ],
        prop_oneof![Just(0u64), 0u64..3, 0u64..12],
    )
}

/// Applies the generated erasures to `name` (ranges clamped to the log).
fn erase_some(store: &Store, name: &str, erasures: &[(At, u64)]) {
    for (i, (at, len)) in erasures.iter().enumerate() {
        let last = store
            .log(&LogRequest {
                conversation: name.into(),
                from: 1,
                limit: Some(1),
            })
            .unwrap()
            .last_seq;
        let from = match at {
            At::Start => 1,
            At::End => last.saturating_sub(*len).max(1),
            At::Anywhere(f) => 1 + f * last / 1000,
        };
        let to = (from + len).min(last);
        store
            .erase(&EraseRequest {
                conversation: name.into(),
                target: EraseTarget::Seqs { from, to },
                reason: format!("erasure {i}: \"why\" é"),
            })
            .unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: ROUND_TRIP_CASES, ..ProptestConfig::default() })]

    #[test]
    fn export_import_export_is_byte_identical(
        turns in proptest::collection::vec(turn(), 1..8),
        later in proptest::collection::vec(turn(), 0..4),
        erasures in proptest::collection::vec(erasure(), 0..4),
        more in proptest::collection::vec(erasure(), 0..3),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // Turns, erasures, turns committed after them (older than the erasures: their
        // times are 2020's), erasures again: tombstones at the start, the end, side by side,
        // spanning earlier ones, with events after them.
        commit_turns(&store, "orig", &turns);
        erase_some(&store, "orig", &erasures);
        commit_turns_from(&store, "orig", &later, 1_650_000_000_000, turns.len());
        erase_some(&store, "orig", &more);
        let first = export(&store, "orig");
        let done = import(&store, Some("copy"), ImportFormat::Ctxlog, &first).unwrap();
        prop_assert_eq!(done.events_written, done.conversations[0].events);
        let second = export(&store, "copy");
        prop_assert_eq!(String::from_utf8_lossy(&first), String::from_utf8_lossy(&second));
        // Idempotent: the same import again writes nothing.
        let before = files(&dir.path().join("copy"));
        let again = import(&store, Some("copy"), ImportFormat::Ctxlog, &first).unwrap();
        prop_assert_eq!(again.events_written, 0);
        prop_assert_eq!(files(&dir.path().join("copy")), before);
    }
}

#[test]
fn a_bad_record_is_named_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let cases: [(ImportFormat, &str, &str); 10] = [
        (
            ImportFormat::Ctxlog,
            "{\"seq\":1,\"kind\":\"user\",\"text\":\"a\"}\n{\"seq\":2,\"kind\":\"system\",\"marker\":{\"type\":\"tombstone\",\"from\":3,\"to\":4,\"at_ms\":5,\"reason\":\"r\"}}\n",
            "line 2: the tombstone of seqs 3-4 stands at seq 2",
        ),
        (
            ImportFormat::Ctxlog,
            "{\"seq\":1,\"kind\":\"system\",\"marker\":{\"type\":\"tombstone\",\"from\":1,\"to\":2,\"at_ms\":5,\"reason\":\"\"}}\n",
            "record 1: invalid commit: tombstone of seqs 1-2: the reason is empty",
        ),
        (
            ImportFormat::Ctxlog,
            "{\"kind\":\"user\",\"text\":\"a\"}\n{\"kind\":\"system\",\"marker\":{\"type\":\"tombstone\",\"from\":5,\"to\":6,\"at_ms\":5,\"reason\":\"r\"}}\n",
            "record 2: invalid commit: tombstone of seqs 5-6: it must start at the conversation's next seq (2)",
        ),
        (
            ImportFormat::Ctxlog,
            "{\"seq\":1,\"kind\":\"user\",\"text\":\"a\"}\n{\"seq\":2,\"kind\":\"shout\",\"text\":\"b\"}\n",
            "line 2",
        ),
        (
            ImportFormat::Ctxlog,
            "{\"seq\":1,\"kind\":\"user\",\"text\":\"a\"}\n{\"seq\":3,\"kind\":\"assistant\",\"text\":\"b\"}\n",
            "line 2: seq 3 follows seq 1",
        ),
        (
            ImportFormat::Ctxlog,
            "{\"seq\":1,\"ts\":\"2023-05-08\",\"kind\":\"user\",\"text\":\"a\"}\n",
            "line 1: \"ts\"",
        ),
        (
            ImportFormat::Ctxlog,
            "{\"kind\":\"user\",\"text\":\"a\",\"ts\":5}\n{\"kind\":\"assistant\",\"text\":\"b\",\"ts\":4}\n",
            "record 2",
        ),
        (
            ImportFormat::OpenaiChat,
            r#"[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"x","content":"r"}]"#,
            "message 1",
        ),
        (
            ImportFormat::AnthropicMessages,
            r#"[{"role":"user","content":"hi"},{"role":"robot","content":"x"}]"#,
            "message 1",
        ),
        (
            ImportFormat::ConversationDataset,
            r#"[{"sample_id":"s1","conversation":{"speaker_a":"A","speaker_b":"B","session_1_date_time":"1:56 pm on 8 May, 2023","session_1":[{"speaker":"A","text":"hi"},{"speaker":"C","text":"?"}]}}]"#,
            "sample 0: session_1[1]",
        ),
    ];
    for (format, data, named) in cases {
        let err = import(&store, Some("t"), format, data.as_bytes()).unwrap_err();
        assert!(matches!(err.class(), ctxlog::ErrorClass::BadInput), "{err}");
        assert!(err.to_string().contains(named), "{named}: {err}");
        assert!(
            !dir.path().join("t").exists() && !dir.path().join("t-s1").exists(),
            "{err}"
        );
    }
    // An explicit time earlier than the existing conversation's last event: nothing written.
    store
        .commit(
            &CommitRequest::from_json(
                "t",
                br#"{"user":"now","assistant":"ok","ts":"2024-01-01T00:00:00Z"}"#,
                None,
            )
            .unwrap(),
        )
        .unwrap();
    let before = files(&dir.path().join("t"));
    let old = r#"[{"role":"user","content":"old","ts":"2023-05-08T13:56:00Z"}]"#;
    let err = import(&store, Some("t"), ImportFormat::OpenaiChat, old.as_bytes()).unwrap_err();
    assert!(
        err.to_string()
            .contains("earlier than the conversation's last event"),
        "{err}"
    );
    assert_eq!(files(&dir.path().join("t")), before);
}

/// Input that would not be stored as written — a key given twice (a parser keeps one), an
/// integer beyond 64 bits (it would become a float) — is refused in every format, named by
/// line or JSON path, and nothing is written.
#[test]
fn json_that_cannot_be_kept_exactly_is_refused_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let big = "123456789012345678901234567890";
    let cases = [
        (
            ImportFormat::Ctxlog,
            "{\"seq\":1,\"kind\":\"user\",\"text\":\"a\"}\n{\"seq\":2,\"kind\":\"assistant\",\"text\":\"b\",\"text\":\"c\"}\n".to_string(),
            "line 2: invalid JSON: key \"text\" appears twice in the object at $ (byte 39)".to_string(),
        ),
        (
            ImportFormat::Ctxlog,
            format!(
                "{{\"seq\":1,\"kind\":\"user\",\"text\":\"a\"}}\n{{\"seq\":2,\"kind\":\"tool_call\",\"call_id\":\"c\",\"tool\":\"t\",\"arguments\":{{\"n\":{big}}}}}\n"
            ),
            format!("line 2: invalid JSON: the integer {big} at $.arguments.n"),
        ),
        (
            ImportFormat::OpenaiChat,
            r#"[{"role":"user","content":"hi","content":"there"}]"#.to_string(),
            "invalid JSON: key \"content\" appears twice in the object at $[0]".to_string(),
        ),
        (
            ImportFormat::AnthropicMessages,
            format!(
                r#"[{{"role":"user","content":"go"}},{{"role":"assistant","content":[{{"type":"tool_use","id":"t1","name":"calc","input":{{"x":{big}}}}}]}}]"#
            ),
            format!("invalid JSON: the integer {big} at $[1].content[0].input.x"),
        ),
        (
            ImportFormat::ConversationDataset,
            r#"[{"sample_id":"s1","conversation":{"speaker_a":"A","speaker_b":"B","session_1_date_time":"1:56 pm on 8 May, 2023","session_1":[{"speaker":"A","text":"hi"},{"speaker":"B","text":"yo","speaker":"A"}]}}]"#.to_string(),
            "invalid JSON: key \"speaker\" appears twice in the object at $[0].conversation.session_1[1]".to_string(),
        ),
        (
            ImportFormat::ConversationDataset,
            format!(
                r#"[{{"sample_id":"s1","conversation":{{"speaker_a":"A","speaker_b":"B","session_1_date_time":"1:56 pm on 8 May, 2023","session_1":[{{"speaker":"A","text":"hi","dia_id":{big}}}]}}}}]"#
            ),
            format!("invalid JSON: the integer {big} at $[0].conversation.session_1[0].dia_id"),
        ),
    ];
    for (format, data, named) in cases {
        let err = import(&store, Some("t"), format, data.as_bytes()).unwrap_err();
        assert_eq!(err.class(), ctxlog::ErrorClass::BadInput, "{err}");
        assert!(err.to_string().starts_with(&named), "{named}\n{err}");
        assert!(
            files(dir.path()).iter().all(|(p, _)| !p.contains("/t")),
            "{err}"
        );
    }
}

#[test]
fn openai_chat_arrays_group_tool_calls_and_keep_a_greeting() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let chat = br#"{"messages":[
        {"role":"assistant","content":"Hello! How can I help?"},
        {"role":"system","content":"Answer in French."},
        {"role":"user","content":[{"type":"text","text":"List files"},{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]},
        {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"shell","arguments":"{\"cmd\":\"ls\"}"}}]},
        {"role":"tool","tool_call_id":"call_1","content":"a.txt b.txt"},
        {"role":"assistant","content":"Two files."}]}"#;
    let done = import(&store, Some("oa"), ImportFormat::OpenaiChat, chat).unwrap();
    assert!(
        done.notes
            .iter()
            .any(|n| n.contains("message 1 (system) became a pinned note")),
        "{:?}",
        done.notes
    );
    assert!(
        done.notes
            .iter()
            .any(|n| n.contains("1 non-text content part")),
        "{:?}",
        done.notes
    );
    let log = store
        .log(&LogRequest {
            conversation: "oa".into(),
            from: 1,
            limit: None,
        })
        .unwrap();
    let kinds: Vec<&str> = log.events.iter().map(|e| e.kind().as_str()).collect();
    assert_eq!(
        kinds,
        [
            "assistant",
            "note",
            "user",
            "tool_call",
            "tool_result",
            "assistant"
        ]
    );
    assert_eq!(
        log.events[3].body,
        EventBody::ToolCall {
            call_id: "call_1".into(),
            tool: "shell".into(),
            arguments: serde_json::json!({"cmd":"ls"}),
            provider_item: None,
        }
    );
}

#[test]
fn anthropic_messages_turn_tool_use_blocks_into_calls_and_results() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let chat = br#"{"system":"Be terse.","messages":[
        {"role":"user","content":"Weather in Paris?","ts":1683554160000},
        {"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"tu1","name":"weather","input":{"city":"Paris"}}]},
        {"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":[{"type":"text","text":"18C"}],"is_error":false}]},
        {"role":"assistant","content":"18C and sunny."}]}"#;
    let done = import(&store, Some("an"), ImportFormat::AnthropicMessages, chat).unwrap();
    assert_eq!(done.conversations[0].events, 6);
    let log = store
        .log(&LogRequest {
            conversation: "an".into(),
            from: 1,
            limit: None,
        })
        .unwrap();
    let kinds: Vec<&str> = log.events.iter().map(|e| e.kind().as_str()).collect();
    assert_eq!(
        kinds,
        [
            "note",
            "user",
            "assistant",
            "tool_call",
            "tool_result",
            "assistant"
        ]
    );
    assert_eq!(log.events[1].ts_ms, 1_683_554_160_000);
    assert!(
        matches!(&log.events[4].body, EventBody::ToolResult { text, tool, .. } if text == "18C" && tool == "weather")
    );
}

/// A small dataset in the LoCoMo layout: two sessions, May and July 2023.
const DATASET: &str = r#"[{"sample_id":"conv-1","conversation":{"speaker_a":"Ann","speaker_b":"Bob",
  "session_1_date_time":"1:56 pm on 8 May, 2023",
  "session_1":[{"speaker":"Ann","dia_id":"D1:1","text":"We decided to paint the shed green."},
               {"speaker":"Bob","dia_id":"D1:2","text":"Green it is, I will buy the paint."}],
  "session_2_date_time":"10:00 am on 3 July, 2023",
  "session_2":[{"speaker":"Bob","dia_id":"D2:1","text":"The shed looks great now."},
               {"speaker":"Ann","dia_id":"D2:2","text":"Next we repaint the fence.","blip_caption":"a fence"}]}},
 {"sample_id":"conv 2","conversation":{"speaker_a":"X","speaker_b":"Y",
  "session_1_date_time":"9:00 am on 1 June, 2023","session_1":[{"speaker":"X","text":"hello"}]}}]"#;

/// Three samples; the second's session 2 is dated before its session 1.
const BACKWARDS: &str = r#"[
 {"sample_id":"s-a","conversation":{"speaker_a":"A","speaker_b":"B",
  "session_1_date_time":"1:56 pm on 8 May, 2023","session_1":[{"speaker":"A","text":"one"}],
  "session_2_date_time":"2:00 pm on 9 May, 2023","session_2":[{"speaker":"B","text":"two"}]}},
 {"sample_id":"s-b","conversation":{"speaker_a":"A","speaker_b":"B",
  "session_1_date_time":"1:56 pm on 8 May, 2023","session_1":[{"speaker":"A","text":"one"}],
  "session_2_date_time":"9:15 am on 2 April, 2023","session_2":[{"speaker":"B","text":"two"}]}},
 {"sample_id":"s-c","conversation":{"speaker_a":"A","speaker_b":"B",
  "session_1_date_time":"1:56 pm on 8 June, 2023","session_1":[{"speaker":"A","text":"three"}]}}]"#;

/// Times never go backwards, checked per sample: a sample whose session dates go backwards is
/// refused with its sample, session keys and both dates named, nothing of it written; the file's
/// other samples are imported, and a re-run imports nothing more and refuses the same sample again.
#[test]
fn a_sample_with_backwards_session_dates_is_refused_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let format = ImportFormat::ConversationDataset;
    let done = import(&store, None, format, BACKWARDS.as_bytes()).unwrap();
    let names: Vec<&str> = done
        .conversations
        .iter()
        .map(|c| c.conversation.as_str())
        .collect();
    assert_eq!(names, ["s-a", "s-c"]);
    assert_eq!(done.events_written, 3);
    assert_eq!(done.failed.len(), 1);
    assert_eq!(done.failed[0].conversation, "s-b");
    let error = &done.failed[0].error;
    for part in [
        "sample 1 (s-b)",
        "session_2_date_time \"9:15 am on 2 April, 2023\"",
        "session_1_date_time \"1:56 pm on 8 May, 2023\"",
    ] {
        assert!(error.contains(part), "{part:?} not in {error}");
    }
    assert!(!dir.path().join("s-b").exists());
    let listed = store.list(&ctxlog::ops::ListRequest::default()).unwrap();
    assert_eq!(listed.conversations.len(), 2);
    let again = import(&store, None, format, BACKWARDS.as_bytes()).unwrap();
    assert_eq!((again.events_written, again.failed.len()), (0, 1));
    // A sample dated before what its conversation already holds is refused alone too.
    store
        .commit(&CommitRequest {
            conversation: "y-s-c".into(),
            commit: NewCommit::new(vec![EventBody::User {
                text: "new".into(),
                parts: Vec::new(),
                provider_item: None,
            }])
            .with_times(vec![Some(1_900_000_000_000)]),
        })
        .unwrap();
    let y = import(&store, Some("y"), format, BACKWARDS.as_bytes()).unwrap();
    let failed: Vec<&str> = y.failed.iter().map(|f| f.conversation.as_str()).collect();
    assert_eq!(failed, ["y-s-b", "y-s-c"]);
    assert!(
        y.failed[1].error.contains("earlier than"),
        "{}",
        y.failed[1].error
    );
    assert_eq!(
        store
            .log(&LogRequest {
                conversation: "y-s-c".into(),
                from: 1,
                limit: None,
            })
            .unwrap()
            .events
            .len(),
        1
    );
}

#[test]
fn a_dataset_imports_one_conversation_per_sample_with_session_times() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let done = import(
        &store,
        None,
        ImportFormat::ConversationDataset,
        DATASET.as_bytes(),
    )
    .unwrap();
    let names: Vec<&str> = done
        .conversations
        .iter()
        .map(|c| c.conversation.as_str())
        .collect();
    assert_eq!(names, ["conv-1", "conv-2"]);
    let prefixed = import(
        &store,
        Some("locomo"),
        ImportFormat::ConversationDataset,
        DATASET.as_bytes(),
    )
    .unwrap();
    assert_eq!(prefixed.conversations[0].conversation, "locomo-conv-1");
    let log = store
        .log(&LogRequest {
            conversation: "conv-1".into(),
            from: 1,
            limit: None,
        })
        .unwrap();
    assert_eq!(log.events[0].ts_ms, 1_683_554_160_000);
    assert_eq!(
        log.events[0].body,
        EventBody::User {
            text: "Ann: We decided to paint the shed green.".into(),
            parts: Vec::new(),
            provider_item: None
        }
    );
    assert_eq!(
        log.events[2].body,
        EventBody::Assistant {
            text: "Bob: The shed looks great now.".into(),
            provider_item: None,
        }
    );
    assert_eq!(
        log.events[3].body,
        EventBody::User {
            text: "Ann: Next we repaint the fence. [image: a fence]".into(),
            parts: Vec::new(),
            provider_item: None
        }
    );
    // Idempotent.
    let again = import(
        &store,
        None,
        ImportFormat::ConversationDataset,
        DATASET.as_bytes(),
    )
    .unwrap();
    assert_eq!(again.events_written, 0);

    // Recall's date metadata uses the stored times: "May 2023" finds the May turns first.
    let found = store
        .recall(&RecallRequest {
            conversation: "conv-1".into(),
            query: "what happened in May 2023".into(),
            seq: None,
            offset: 0,
            limit: 10,
        })
        .unwrap();
    let mut top: Vec<u64> = found.hits.iter().map(|h| h.seq).take(2).collect();
    top.sort_unstable();
    assert_eq!(top, [1, 2], "{:?}", found.hits);
    let found = store
        .recall(&RecallRequest {
            conversation: "conv-1".into(),
            query: "July 2023".into(),
            seq: None,
            offset: 0,
            limit: 10,
        })
        .unwrap();
    let mut top: Vec<u64> = found.hits.iter().map(|h| h.seq).take(2).collect();
    top.sort_unstable();
    assert_eq!(top, [3, 4], "{:?}", found.hits);
}

#[test]
fn live_commits_take_the_clock_and_never_go_back_before_an_imported_future_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let future = r#"{"seq":1,"ts":"2100-01-01T00:00:00Z","kind":"user","text":"from the future"}"#;
    import(&store, Some("f"), ImportFormat::Ctxlog, future.as_bytes()).unwrap();
    store
        .commit(&CommitRequest::from_json("f", br#"{"assistant":"live"}"#, None).unwrap())
        .unwrap();
    let log = store
        .log(&LogRequest {
            conversation: "f".into(),
            from: 1,
            limit: None,
        })
        .unwrap();
    assert_eq!(log.events[1].ts_ms, log.events[0].ts_ms);
}

#[test]
fn openai_responses_items_become_events_and_bad_items_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let body = br#"{"model":"gpt-4o","instructions":"Answer in French.","input":[
        {"role":"user","content":"List files"},
        {"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"},
        {"type":"function_call","id":"fc_1","call_id":"call_1","name":"shell","arguments":"{\"cmd\":\"ls\"}"},
        {"type":"function_call_output","call_id":"call_1","output":"a.txt b.txt"},
        {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Two files.","annotations":[]}]}]}"#;
    let done = import(&store, Some("re"), ImportFormat::OpenaiResponses, body).unwrap();
    for expected in [
        "\"instructions\" became a pinned note",
        "1 provider item(s) ctxlog does not interpret kept as opaque events",
    ] {
        assert!(
            done.notes.iter().any(|n| n.contains(expected)),
            "{expected}: {:?}",
            done.notes
        );
    }
    let log = store
        .log(&LogRequest {
            conversation: "re".into(),
            from: 1,
            limit: None,
        })
        .unwrap();
    let kinds: Vec<&str> = log.events.iter().map(|e| e.kind().as_str()).collect();
    assert_eq!(
        kinds,
        [
            "note",
            "user",
            "opaque",
            "tool_call",
            "tool_result",
            "assistant"
        ]
    );
    assert_eq!(
        serde_json::to_string(&log.events[2].body).unwrap(),
        r#"{"kind":"opaque","format":"openai-responses","item":{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"}}"#
    );
    // An item ctxlog reads is kept whole beside its event (here with its id).
    assert_eq!(
        serde_json::to_string(&log.events[3].body).unwrap(),
        r#"{"kind":"tool_call","call_id":"call_1","tool":"shell","arguments":{"cmd":"ls"},"provider_item":{"format":"openai-responses","item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"shell","arguments":"{\"cmd\":\"ls\"}"}}}"#
    );
    // An output whose call is not in the input, and a message of no known role: refused,
    // named by index, nothing written.
    for (bad, says) in [
        (
            r#"[{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"nope","output":"x"}]"#,
            "item 1: call_id \"nope\" answers no earlier function_call item",
        ),
        (
            r#"[{"role":"critic","content":"hi"}]"#,
            "item 0: unknown message role \"critic\"",
        ),
        (r#"{"model":"m"}"#, "the body has no \"input\" list"),
    ] {
        let err = import(
            &store,
            Some("bad"),
            ImportFormat::OpenaiResponses,
            bad.as_bytes(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(says), "{err}");
    }
    let names: Vec<String> = store
        .list(&ctxlog::ops::ListRequest::default())
        .unwrap()
        .conversations
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["re"]);
}

/// A system or developer message before the first user message is the conversation's
/// standing instruction (a pinned note, sent at the top of every projection); one in the
/// middle of the list stays in its place, in its turn, as the list sends it: projected back
/// to Responses it is where it was, in Chat Completions a system message in the same place.
#[test]
fn a_system_message_in_the_middle_of_a_responses_list_stays_in_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lead = r#"{"role":"developer","content":"Be brief."}"#;
    let middle = r#"{"role":"system","content":[{"type":"input_text","text":"From now on, answer in French."}]}"#;
    let rest = [
        r#"{"role":"user","content":"Hi"}"#,
        r#"{"role":"assistant","content":"Hello."}"#,
        middle,
        r#"{"role":"user","content":"How are you?"}"#,
        r#"{"role":"assistant","content":"Bien."}"#,
    ];
    let list = format!("[{lead},{}]", rest.join(","));
    let done = import(
        &store,
        Some("sys"),
        ImportFormat::OpenaiResponses,
        list.as_bytes(),
    )
    .unwrap();
    assert!(
        done.notes.iter().any(|n| n
            .contains("item 3 (system message) after the first user message kept in its place")),
        "{:?}",
        done.notes
    );
    let project =
        |format| common::projected(&store, "sys", "And you?", format, ctxlog::Policy::Turns);
    let responses = project(ctxlog::WireFormat::OpenAiResponses);
    assert!(
        responses.contains(&format!(r#"{lead},{}"#, rest.join(","))),
        "{responses}"
    );
    let chat = project(ctxlog::WireFormat::OpenAiChat);
    let at = |needle: &str| {
        chat.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {chat}"))
    };
    assert!(at("Be brief.") < at("Hi"), "{chat}");
    assert!(
        at("Hello.") < at("answer in French") && at("answer in French") < at("How are you?"),
        "{chat}"
    );
}

/// An Anthropic conversation with thinking blocks imports them as opaque events in their
/// place, and projecting it back to Anthropic gives each block back inside its assistant
/// message, verbatim (docs/design.md#p14-more-wire-formats).
#[test]
fn anthropic_thinking_blocks_import_as_opaque_events_and_project_back_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let thinking = r#"{"type":"thinking","thinking":"List first.","signature":"EqQBCgIYAh"}"#;
    let redacted = r#"{"type":"redacted_thinking","data":"EmwKAhgBEgy3va"}"#;
    let body = format!(
        r#"{{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[
        {{"role":"user","content":"List files"}},
        {{"role":"assistant","content":[{thinking},{redacted},{{"type":"tool_use","id":"tu_1","name":"shell","input":{{"cmd":"ls"}}}}]}},
        {{"role":"user","content":[{{"type":"tool_result","tool_use_id":"tu_1","content":"a.txt"}}]}}]}}"#
    );
    let done = import(
        &store,
        Some("th"),
        ImportFormat::AnthropicMessages,
        body.as_bytes(),
    )
    .unwrap();
    assert!(
        done.notes.iter().any(|n| n.contains("2 provider item(s)")),
        "{:?}",
        done.notes
    );
    let projected = store
        .project(&ctxlog::ops::ProjectRequest {
            conversation: "th".into(),
            format: ctxlog::WireFormat::AnthropicMessages,
            policy: ctxlog::Policy::Turns,
            ..Default::default()
        })
        .unwrap();
    let sent = String::from_utf8(projected.body).unwrap();
    let assistant = format!(
        r#"{{"role":"assistant","content":[{thinking},{redacted},{{"type":"tool_use","id":"tu_1","name":"shell","input":{{"cmd":"ls"}}}}]}}"#
    );
    assert!(sent.contains(&assistant), "{sent}");
    let chat = store
        .project(&ctxlog::ops::ProjectRequest {
            conversation: "th".into(),
            format: ctxlog::WireFormat::OpenAiChat,
            policy: ctxlog::Policy::Turns,
            ..Default::default()
        })
        .unwrap();
    assert!(!String::from_utf8_lossy(&chat.body).contains("thinking"));
    assert_eq!(chat.report.opaque.left_out_other_format, 2);
}

#[test]
fn a_responses_body_is_counted_as_one_without_being_told() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let body = br#"{"model":"gpt-4o","instructions":"Be brief.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}"#;
    let counted = store
        .count(&ctxlog::ops::CountRequest {
            body: body.to_vec(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(counted.format, ctxlog::WireFormat::OpenAiResponses);
    assert_eq!(counted.bytes, body.len() as u64);
    assert!(!counted.tokens_exact);
    // 3 priming; instructions 3 + "system" + "Be brief."; the item 3 + "message" + "user" +
    // "hi".
    assert_eq!(counted.tokens, 3 + (3 + 1 + 3) + (3 + 1 + 1 + 1));
}

/// A 2 × 1 PNG, base64.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAADUlEQVR42mP4zwAE/wEHAAH/PX2MSQAAAABJRU5ErkJggg==";

#[test]
fn an_import_keeps_images_and_documents_and_projects_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let turn = format!(
        r#"{{"events":[{{"kind":"user","text":"Compare these.","parts":[{{"type":"image","data":"{PNG_B64}","media_type":"image/png","detail":"low"}},{{"type":"image","url":"https://example.com/b.png"}},{{"type":"text","text":"And the report:"}},{{"type":"document","data":"JVBERi0xLjQK","media_type":"application/pdf","name":"q3.pdf"}}]}},{{"kind":"assistant","text":"Done."}}]}}"#
    );
    store
        .commit(&CommitRequest::from_json("src", turn.as_bytes(), None).unwrap())
        .unwrap();
    for (format, from, model) in [
        (
            ctxlog::WireFormat::OpenAiChat,
            ImportFormat::OpenaiChat,
            "gpt-4o",
        ),
        (
            ctxlog::WireFormat::OpenAiResponses,
            ImportFormat::OpenaiResponses,
            "gpt-4o",
        ),
        (
            ctxlog::WireFormat::AnthropicMessages,
            ImportFormat::AnthropicMessages,
            "claude-sonnet-4-5",
        ),
    ] {
        let project = |conversation: &str| {
            let request = ctxlog::ops::ProjectRequest {
                conversation: conversation.into(),
                input: Some("Which is larger?".into()),
                model: Some(model.into()),
                format,
                ..Default::default()
            };
            store.project(&request).unwrap().body
        };
        let body = project("src");
        let copy = format!("copy-{}", format.as_str());
        let request = ImportRequest {
            conversation: Some(copy.clone()),
            format: from,
        };
        store.import(&request, &body, &mut |_| {}).unwrap();
        let log = store
            .log(&LogRequest {
                conversation: copy.clone(),
                from: 1,
                limit: None,
            })
            .unwrap();
        let parts = log
            .events
            .iter()
            .find_map(|e| match &e.body {
                EventBody::User { parts, .. } if !parts.is_empty() => Some(parts.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{format:?}: no media imported"));
        assert!(
            parts.iter().filter(|p| p.artifact().is_some()).count() == 2,
            "{format:?}: {parts:?}"
        );
        // The imported history holds the image again, as the bytes it was sent as.
        let again = String::from_utf8(project(&copy)).unwrap();
        assert!(again.contains(PNG_B64), "{format:?}: {again}");
        assert!(again.contains("JVBERi0xLjQK"), "{format:?}: {again}");
    }
}
