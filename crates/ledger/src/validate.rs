//! Commit validation (docs/design.md#9-bad-input-and-faults): what a commit may contain, given the
//! turn it continues.

use std::collections::{HashMap, HashSet};

use crate::error::{Error, Result};
use crate::event::{EventBody, EventKind, OpaqueFormat, ToolStatus};

/// The longest commit id accepted, in bytes.
pub const MAX_COMMIT_ID_BYTES: usize = 256;

/// The open turn at the end of the ledger: the tool calls made since the last user event and
/// which of them have results. A turn may span several commits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TurnState {
    /// True once any user event exists.
    pub in_turn: bool,
    /// The open calls' ids, each with its tool's name.
    pub calls: HashMap<String, String>,
    pub answered: HashSet<String>,
}

/// Who is committing: applications may not write system markers or `interrupted` results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    Application,
    Internal,
}

impl TurnState {
    /// Applies one stored event (used to rebuild the state from the last turn).
    pub(crate) fn apply(&mut self, body: &EventBody) {
        match body {
            EventBody::User { .. } => {
                *self = TurnState {
                    in_turn: true,
                    ..TurnState::default()
                };
            }
            EventBody::ToolCall { call_id, tool, .. } => {
                self.calls.insert(call_id.clone(), tool.clone());
            }
            EventBody::ToolResult { call_id, .. } => {
                self.answered.insert(call_id.clone());
            }
            _ => {}
        }
    }
}

/// Checks a commit id.
pub(crate) fn check_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_COMMIT_ID_BYTES {
        return Err(Error::invalid(format!(
            "commit id must be 1 to {MAX_COMMIT_ID_BYTES} bytes, got {}",
            id.len()
        )));
    }
    Ok(())
}

/// Checks `events` against the open turn `state` and returns the state after them. `kind_of`
/// answers the kind of an already stored seq (for `supersedes`); `next_seq` is the seq the
/// first event will get.
pub(crate) fn check_events(
    events: &[EventBody],
    state: &TurnState,
    next_seq: u64,
    origin: Origin,
    kind_of: &dyn Fn(u64) -> Option<EventKind>,
) -> Result<TurnState> {
    if events.is_empty() {
        return Err(Error::invalid("a commit needs at least one event"));
    }
    let mut state = state.clone();
    for (i, body) in events.iter().enumerate() {
        let seq = next_seq + i as u64;
        let at = |msg: String| {
            Error::invalid(format!("event {} ({}): {msg}", i + 1, body.kind().as_str()))
        };
        check_one(body, &state, origin).map_err(at)?;
        if let EventBody::Note {
            supersedes: Some(old),
            ..
        } = body
        {
            let old_kind = if *old >= next_seq && *old < seq {
                Some(events[(*old - next_seq) as usize].kind())
            } else if *old < next_seq {
                kind_of(*old)
            } else {
                None
            };
            if old_kind != Some(EventKind::Note) {
                return Err(at(format!(
                    "supersedes seq {old}, which is not an earlier note"
                )));
            }
        }
        state.apply(body);
    }
    Ok(state)
}

fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

fn check_one(
    body: &EventBody,
    state: &TurnState,
    origin: Origin,
) -> std::result::Result<(), String> {
    let needs_turn = || {
        if state.in_turn {
            Ok(())
        } else {
            Err("comes before any user message".to_string())
        }
    };
    match body {
        EventBody::User {
            text,
            parts,
            provider_item: None,
        } if blank(text) && parts.is_empty() => Err("empty user text".into()),
        EventBody::User { .. } => check_provider_item(body),
        // An assistant message may open a conversation (a greeting,
        // docs/design.md#p11-the-agent-loop): it is stored in the preamble, and bodies that need a
        // user message first supply one.
        EventBody::Assistant { text, .. } => {
            if blank(text) {
                Err("empty assistant text".into())
            } else {
                check_provider_item(body)
            }
        }
        EventBody::ToolCall { call_id, tool, .. } => {
            needs_turn()?;
            if call_id.is_empty() || tool.is_empty() {
                return Err("tool call needs a call_id and a tool name".into());
            }
            if state.calls.contains_key(call_id) {
                return Err(format!("duplicate call_id {call_id:?} in this turn"));
            }
            check_provider_item(body)
        }
        EventBody::ToolResult {
            call_id,
            tool,
            status,
            ..
        } => {
            needs_turn()?;
            if *status == ToolStatus::Interrupted && origin == Origin::Application {
                return Err("status \"interrupted\" is written by ctxlog only".into());
            }
            let Some(called) = state.calls.get(call_id) else {
                return Err(format!("no tool call {call_id:?} in the current turn"));
            };
            if called != tool {
                return Err(format!(
                    "tool call {call_id:?} was made to tool {called:?}, not {tool:?}"
                ));
            }
            if state.answered.contains(call_id) {
                return Err(format!("tool call {call_id:?} already has a result"));
            }
            check_provider_item(body)
        }
        EventBody::Note { text, .. } if blank(text) => Err("empty note text".into()),
        EventBody::Note { .. } => check_provider_item(body),
        EventBody::System { .. } if origin == Origin::Application => {
            Err("system markers are written by ctxlog only".into())
        }
        EventBody::System { .. } => Ok(()),
        EventBody::Opaque { format, item } => {
            needs_turn()?;
            check_opaque(*format, item)
        }
    }
}

/// The item types each format's own events already express: an opaque item of one of these
/// would be sent without ctxlog knowing what it is (a second copy of a message, a call
/// without its result), so it is refused with the event to use instead.
const INTERPRETED: &[(OpaqueFormat, &str, &str)] = &[
    (
        OpaqueFormat::OpenaiResponses,
        "message",
        "a user or assistant event",
    ),
    (
        OpaqueFormat::OpenaiResponses,
        "function_call",
        "a tool_call event",
    ),
    (
        OpaqueFormat::OpenaiResponses,
        "function_call_output",
        "a tool_result event",
    ),
    (
        OpaqueFormat::AnthropicMessages,
        "text",
        "a user or assistant event",
    ),
    (
        OpaqueFormat::AnthropicMessages,
        "tool_use",
        "a tool_call event",
    ),
    (
        OpaqueFormat::AnthropicMessages,
        "tool_result",
        "a tool_result event",
    ),
];

fn check_opaque(
    format: OpaqueFormat,
    item: &serde_json::Map<String, serde_json::Value>,
) -> std::result::Result<(), String> {
    let Some(kind) = item
        .get("type")
        .and_then(|t| t.as_str())
        .filter(|t| !t.is_empty())
    else {
        return Err(format!(
            "an opaque item needs a \"type\" string, as every {} item has",
            format.as_str()
        ));
    };
    match INTERPRETED
        .iter()
        .find(|(f, t, _)| *f == format && *t == kind)
    {
        Some((_, _, instead)) => Err(format!(
            "a {} item of type {kind:?} is one ctxlog reads: commit it as {instead}",
            format.as_str()
        )),
        None => Ok(()),
    }
}

/// An event's provider item must be the item of that event in its format, saying what the
/// event says: the model reads the item in its own format and the event's fields in every
/// other (and recall and the notices read the fields). So the type and role, the text (a
/// Responses message's text parts joined by newlines, or its string content; an Anthropic
/// text block's `text`), a call's id, name and arguments (the same string, or the JSON it
/// holds) and a result's call id and output must agree. A user message's or note's item is a
/// Responses `message` of its role whose text parts are the event's text and text parts; its
/// other parts (images, files, …) are the item's own. A tool result's is a
/// Responses `function_call_output` (an Anthropic `tool_result` lives inside a user message:
/// it has no item of its own).
fn check_provider_item(body: &EventBody) -> std::result::Result<(), String> {
    use serde_json::Value;
    let Some(given) = body.provider_item() else {
        return Ok(());
    };
    let item = &given.item;
    let format = given.format.as_str();
    let field = |key: &str| item.get(key).unwrap_or(&Value::Null);
    let kind = body.kind().as_str();
    let responses = given.format == OpaqueFormat::OpenaiResponses;
    let want_type = match (given.format, body) {
        (OpaqueFormat::OpenaiResponses, EventBody::ToolCall { .. }) => "function_call",
        (OpaqueFormat::OpenaiResponses, EventBody::ToolResult { .. }) => "function_call_output",
        (OpaqueFormat::OpenaiResponses, _) => "message",
        (OpaqueFormat::AnthropicMessages, EventBody::Assistant { .. }) => "text",
        (OpaqueFormat::AnthropicMessages, EventBody::ToolCall { .. }) => "tool_use",
        (OpaqueFormat::AnthropicMessages, _) => {
            return Err(format!(
                "a {kind} event takes no {format} provider_item (only assistant and tool_call \
                 events do): leave it out"
            ));
        }
    };
    // A Responses message may leave its type out (an "easy" input message).
    let typed = match field("type") {
        Value::Null if want_type == "message" => Some("message"),
        t => t.as_str(),
    };
    if typed != Some(want_type) {
        return Err(format!(
            "a {kind} event's {format} provider_item must be a {want_type:?} item, not {}",
            field("type")
        ));
    }
    if !given.offloaded_are_heads() {
        return Err(format!(
            "a {kind} event's provider_item names an offloaded URL that is not the head of a \
             data: URL in its item: leave \"offloaded\" out (ctxlog writes it) and send the \
             item as the provider gave it"
        ));
    }
    let differs = |what: &str| {
        Err(format!(
            "the provider_item's {what} differs from the event's: store the item the provider \
             sent for this {kind} event, unchanged"
        ))
    };
    let roles: &[&str] = match body {
        EventBody::Assistant { .. } => &["assistant"],
        EventBody::User { .. } => &["user"],
        EventBody::Note { .. } => &["system", "developer"],
        _ => &[],
    };
    if responses && !roles.is_empty() && !roles.contains(&field("role").as_str().unwrap_or("")) {
        return Err(format!(
            "a {kind} event's {format} provider_item must have \"role\": {}",
            roles
                .iter()
                .map(|r| format!("\"{r}\""))
                .collect::<Vec<_>>()
                .join(" or ")
        ));
    }
    let same_json = |a: &Value, b: &Value| {
        a == b
            || matches!(a, Value::String(s) if serde_json::from_str::<Value>(s).is_ok_and(|v| v == *b))
            || matches!(b, Value::String(s) if serde_json::from_str::<Value>(s).is_ok_and(|v| v == *a))
    };
    match body {
        EventBody::Assistant { text, .. } => {
            let said = match given.format {
                OpaqueFormat::OpenaiResponses => responses_message_text(field("content")),
                OpaqueFormat::AnthropicMessages => field("text").as_str().map(str::to_owned),
            };
            if said.as_deref() != Some(text.as_str()) {
                return differs("text");
            }
        }
        EventBody::User { text, parts, .. } => {
            let texts = parts.iter().filter_map(|p| match p {
                crate::event::Part::Text { text } => Some(text.as_str()),
                _ => None,
            });
            let ours = std::iter::once(text.as_str())
                .filter(|t| !t.is_empty())
                .chain(texts)
                .collect::<Vec<_>>()
                .join("\n");
            if responses_message_text(field("content")).as_deref() != Some(&ours) {
                return differs("text");
            }
        }
        EventBody::Note { text, .. } => {
            if responses_message_text(field("content")).as_deref() != Some(text.as_str()) {
                return differs("text");
            }
        }
        EventBody::ToolCall {
            call_id,
            tool,
            arguments,
            ..
        } => {
            let (id_key, args_key) = match given.format {
                OpaqueFormat::OpenaiResponses => ("call_id", "arguments"),
                OpaqueFormat::AnthropicMessages => ("id", "input"),
            };
            if field(id_key).as_str() != Some(call_id.as_str()) {
                return differs(id_key);
            }
            if field("name").as_str() != Some(tool.as_str()) {
                return differs("name");
            }
            if !same_json(field(args_key), arguments) {
                return differs(args_key);
            }
        }
        EventBody::ToolResult { call_id, text, .. } => {
            if field("call_id").as_str() != Some(call_id.as_str()) {
                return differs("call_id");
            }
            // A string output is the result's text, perhaps after the header line a
            // projection writes (status, exit code); a list of parts says its text parts.
            let said = match field("output") {
                Value::String(s) => s.ends_with(text.as_str()),
                output => {
                    responses_message_text(output).as_deref() == Some(text.as_str())
                        || same_json(output, &Value::String(text.clone()))
                }
            };
            if !said {
                return differs("output");
            }
        }
        EventBody::System { .. } | EventBody::Opaque { .. } => {}
    }
    Ok(())
}

/// A Responses message's text as ctxlog reads it: a string content, or its text parts
/// (`input_text` and `output_text` parts' `text`, `refusal` parts' `refusal`), joined by
/// newlines.
fn responses_message_text(content: &serde_json::Value) -> Option<String> {
    match content {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| match p.get("type").and_then(|t| t.as_str()) {
                    Some("input_text" | "output_text") => p.get("text").and_then(|t| t.as_str()),
                    Some("refusal") => p.get("refusal").and_then(|t| t.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}
