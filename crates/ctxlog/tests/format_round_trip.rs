//! Failure class: a provider format that the projector writes one way and the import reads
//! another, so that history brought in from a request body is not the history that body was
//! made from (a tool call's arguments rewritten, a failed result read as a success, two
//! replies run together, an interrupted call given an invented result).
//!
//! Guarantee: for conversations of user and assistant turns with tool calls (arguments as
//! objects, other values or OpenAI's strings; results ok or failed, with exit codes, some calls
//! never answered) in any Unicode text, the body `Store::project` writes in `openai-chat` and
//! in `anthropic-messages` and in `openai-responses`, imported into a fresh conversation with the matching `--from`
//! format, projects again to the same bytes. The current input, which is not history, is
//! taken out of the body before the import.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ctxlog::ops::{CommitRequest, ImportRequest, ProjectRequest};
use ctxlog::transfer::ImportFormat;
use ctxlog::{EventBody, NewCommit, Store, ToolStatus, WireFormat};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Cases of the property (each commits, projects twice, imports twice and projects twice).
const CASES: u32 = 96;

/// The current input of every projection.
const INPUT: &str = "And now?";

/// One turn: the user's text, then what the assistant did.
#[derive(Clone, Debug)]
struct Turn {
    user: String,
    steps: Vec<Step>,
}

#[derive(Clone, Debug)]
enum Step {
    /// An assistant reply (two in a row are two events).
    Say(String),
    /// A run of tool calls, then the results of those that got one (in call order, or
    /// reversed).
    Calls {
        calls: Vec<(String, Value, Option<Outcome>)>,
        reversed: bool,
    },
}

#[derive(Clone, Debug)]
struct Outcome {
    status: ToolStatus,
    exit_code: Option<i64>,
    text: String,
}

/// Text with quotes, backslashes, control characters, CJK, combining marks, emoji, RTL.
fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 é请📦\u{301}\u{202e}\"\\\\\n\t\r\u{1}\u{7f}]{0,30}"
}

fn non_blank() -> impl Strategy<Value = String> {
    text().prop_filter("not blank", |s| !s.trim().is_empty())
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Any finite float: its shortest decimal text parses back to the same value (the
        // workspace's serde_json parses floats correctly rounded), in the ledger's own JSON as
        // in a body.
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        text().prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((text(), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Tool arguments: an object (the usual), any other value, or OpenAI's string form (compact
/// JSON text, pretty-printed JSON text, or not JSON at all).
fn arguments() -> impl Strategy<Value = Value> {
    fn object() -> impl Strategy<Value = Value> {
        proptest::collection::vec((text(), json_value()), 0..4)
            .prop_map(|kv| Value::Object(kv.into_iter().collect()))
    }
    prop_oneof![
        4 => object(),
        1 => json_value(),
        1 => object().prop_map(|v| Value::String(v.to_string())),
        1 => object().prop_map(|v| Value::String(serde_json::to_string_pretty(&v).unwrap())),
        1 => text().prop_map(Value::String),
    ]
}

fn outcome() -> impl Strategy<Value = Outcome> {
    let text = prop_oneof![
        4 => text(),
        1 => Just("[status=error]\nlooks like a header".to_string()),
        1 => Just("interrupted: effects unknown".to_string()),
    ];
    (
        prop_oneof![3 => Just(ToolStatus::Ok), 1 => Just(ToolStatus::Error)],
        prop_oneof![Just(None), Just(Some(0)), (-3i64..300).prop_map(Some)],
        text,
    )
        .prop_map(|(status, exit_code, text)| Outcome {
            status,
            exit_code,
            text,
        })
}

fn step() -> impl Strategy<Value = Step> {
    let tool = prop_oneof![Just("shell".to_string()), Just("读取".to_string())];
    let call = (tool, arguments(), prop::option::weighted(0.85, outcome()));
    prop_oneof![
        non_blank().prop_map(Step::Say),
        (proptest::collection::vec(call, 1..4), any::<bool>())
            .prop_map(|(calls, reversed)| Step::Calls { calls, reversed }),
    ]
}

fn turn() -> impl Strategy<Value = Turn> {
    (non_blank(), proptest::collection::vec(step(), 0..5))
        .prop_map(|(user, steps)| Turn { user, steps })
}

/// The events of a turn; call ids count on from `next_call`.
fn events(turn: &Turn, next_call: &mut usize) -> Vec<EventBody> {
    let mut events = vec![EventBody::User {
        text: turn.user.clone(),
        parts: Vec::new(),
        provider_item: None,
    }];
    for step in &turn.steps {
        match step {
            Step::Say(text) => events.push(EventBody::Assistant {
                text: text.clone(),
                provider_item: None,
            }),
            Step::Calls { calls, reversed } => {
                let mut results = Vec::new();
                for (tool, arguments, outcome) in calls {
                    *next_call += 1;
                    let call_id = format!("call_{next_call}");
                    events.push(EventBody::ToolCall {
                        call_id: call_id.clone(),
                        tool: tool.clone(),
                        arguments: arguments.clone(),
                        provider_item: None,
                    });
                    if let Some(o) = outcome {
                        results.push(EventBody::ToolResult {
                            call_id,
                            tool: tool.clone(),
                            status: o.status,
                            exit_code: o.exit_code,
                            text: o.text.clone(),
                            artifact: None,
                            parts: Vec::new(),
                            provider_item: None,
                        });
                    }
                }
                if *reversed {
                    results.reverse();
                }
                events.extend(results);
            }
        }
    }
    events
}

fn commit(store: &Store, name: &str, events: Vec<EventBody>) {
    store
        .commit(&CommitRequest {
            conversation: name.into(),
            commit: NewCommit::new(events),
        })
        .unwrap();
}

fn project(store: &Store, name: &str, format: WireFormat) -> Vec<u8> {
    let request = ProjectRequest {
        conversation: name.into(),
        input: Some(INPUT.into()),
        format,
        ..ProjectRequest::default()
    };
    store.project(&request).unwrap().body
}

/// The body without its current input: OpenAI's last message, Anthropic's last block (in a
/// message of its own, or after the tool results that close the last turn).
fn without_input(format: WireFormat, body: &[u8]) -> Vec<u8> {
    let mut body: Value = serde_json::from_slice(body).unwrap();
    if format == WireFormat::OpenAiResponses {
        let input = body["input"].as_array_mut().unwrap().pop().unwrap();
        let part = json!({"type": "input_text", "text": INPUT});
        assert_eq!(
            input,
            json!({"type": "message", "role": "user", "content": [part]})
        );
        return serde_json::to_vec(&body).unwrap();
    }
    let messages = body["messages"].as_array_mut().unwrap();
    match format {
        WireFormat::OpenAiChat => {
            let input = messages.pop().unwrap();
            assert_eq!(input, json!({"role": "user", "content": INPUT}));
        }
        WireFormat::AnthropicMessages => {
            let last = messages.last_mut().unwrap();
            let blocks = last["content"].as_array_mut().unwrap();
            let input = blocks.pop().unwrap();
            assert_eq!(input, json!({"type": "text", "text": INPUT}));
            if blocks.is_empty() {
                messages.pop();
            }
        }
        WireFormat::OpenAiResponses => unreachable!("taken out above"),
    }
    serde_json::to_vec(&body).unwrap()
}

fn import(store: &Store, name: &str, format: WireFormat, data: &[u8]) {
    let format = match format {
        WireFormat::OpenAiChat => ImportFormat::OpenaiChat,
        WireFormat::AnthropicMessages => ImportFormat::AnthropicMessages,
        WireFormat::OpenAiResponses => ImportFormat::OpenaiResponses,
    };
    let request = ImportRequest {
        conversation: Some(name.into()),
        format,
    };
    let done = store.import(&request, data, &mut |_| {}).unwrap();
    assert!(
        done.notes
            .iter()
            .all(|n| n.contains("imported without a result")),
        "{:?}",
        done.notes
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    #[test]
    fn a_projected_body_imports_into_history_that_projects_to_the_same_bytes(
        greeting in proptest::option::of(non_blank()),
        turns in proptest::collection::vec(turn(), 1..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        if let Some(text) = greeting {
            commit(&store, "orig", vec![EventBody::Assistant { text, provider_item: None }]);
        }
        let mut next_call = 0;
        for turn in &turns {
            commit(&store, "orig", events(turn, &mut next_call));
        }
        for (format, copy) in [
            (WireFormat::OpenAiChat, "copy-openai"),
            (WireFormat::AnthropicMessages, "copy-anthropic"),
            (WireFormat::OpenAiResponses, "copy-responses"),
        ] {
            let body = project(&store, "orig", format);
            import(&store, copy, format, &without_input(format, &body));
            let again = project(&store, copy, format);
            prop_assert_eq!(
                String::from_utf8(body).unwrap(),
                String::from_utf8(again).unwrap(),
                "{:?}",
                format
            );
        }
    }
}
