//! OpenAI chat message arrays → events (see [`super::ImportFormat::OpenaiChat`]).

use std::collections::HashMap;

use ctxlog_ledger::{EventBody, ToolStatus};
use serde_json::Value;

use super::{Incoming, shown};
use crate::{Error, Result};

/// The messages of `value`: an array, or an object with a `"messages"` array.
pub(crate) fn messages<'a>(value: &'a Value, what: &str) -> Result<&'a [Value]> {
    value
        .as_array()
        .or_else(|| value.get("messages").and_then(Value::as_array))
        .map(Vec::as_slice)
        .ok_or_else(|| Error::BadInput {
            reason: format!("expected {what}: a JSON array of messages (or {{\"messages\":[…]}})"),
        })
}

/// The optional `"ts"` of message `i`.
pub(crate) fn message_ts(m: &Value, i: usize) -> Result<Option<i64>> {
    m.get("ts")
        .map(|v| {
            super::parse_ts(v).map_err(|reason| Error::BadInput {
                reason: format!("message {i}: {reason}"),
            })
        })
        .transpose()
}

/// The `"role"` of message `i` (required).
pub(crate) fn message_role(m: &Value, i: usize) -> Result<&str> {
    m.get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::BadInput {
            reason: format!("message {i}: no \"role\""),
        })
}

/// The text of an OpenAI `content`: a string, or the `text` parts of an array joined by
/// newlines (other parts are counted in `skipped`).
fn content_text(
    content: Option<&Value>,
    skipped: &mut usize,
) -> std::result::Result<String, String> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for p in parts {
                match p.get("text").and_then(Value::as_str) {
                    Some(t) if p.get("type").and_then(Value::as_str) == Some("text") => {
                        texts.push(t)
                    }
                    _ => *skipped += 1,
                }
            }
            Ok(texts.join("\n"))
        }
        Some(other) => Err(format!(
            "\"content\" must be a string or an array of parts, not {}",
            shown(other)
        )),
    }
}

pub(crate) fn parse(value: &Value) -> Result<(Vec<Incoming>, Vec<String>)> {
    let messages = messages(value, "an OpenAI chat message array")?;
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let mut tools: HashMap<String, String> = HashMap::new();
    let mut skipped_parts = 0;
    for (i, m) in messages.iter().enumerate() {
        let at = |reason: String| Error::BadInput {
            reason: format!("message {i}: {reason}"),
        };
        let role = message_role(m, i)?;
        let ts = message_ts(m, i)?;
        let text = content_text(m.get("content"), &mut skipped_parts).map_err(at)?;
        let mut push = |body: EventBody| out.push(Incoming { body, ts });
        match role {
            "system" | "developer" => {
                if text.trim().is_empty() {
                    notes.push(format!("message {i} ({role}) is empty: skipped"));
                    continue;
                }
                notes.push(format!("message {i} ({role}) became a pinned note"));
                push(EventBody::Note {
                    text,
                    pinned: true,
                    supersedes: None,
                });
            }
            "user" => {
                if text.trim().is_empty() {
                    return Err(at("empty user message".into()));
                }
                push(EventBody::User { text });
            }
            "assistant" => {
                let calls = match m.get("tool_calls") {
                    None | Some(Value::Null) => &[][..],
                    Some(Value::Array(calls)) => calls.as_slice(),
                    Some(other) => {
                        return Err(at(format!(
                            "\"tool_calls\" must be an array, not {}",
                            shown(other)
                        )));
                    }
                };
                if !text.trim().is_empty() {
                    push(EventBody::Assistant { text });
                } else if calls.is_empty() {
                    notes.push(format!(
                        "message {i} (assistant) has no text and no tool calls: skipped"
                    ));
                }
                for (j, call) in calls.iter().enumerate() {
                    let at = |reason: &str| Error::BadInput {
                        reason: format!("message {i}, tool_calls[{j}]: {reason}"),
                    };
                    let id = call
                        .get("id")
                        .and_then(Value::as_str)
                        .ok_or_else(|| at("no \"id\""))?;
                    let f = call.get("function").ok_or_else(|| at("no \"function\""))?;
                    let name = f
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| at("no function \"name\""))?;
                    let arguments = match f.get("arguments") {
                        None | Some(Value::Null) => Value::Object(Default::default()),
                        // The wire form is a JSON string; keep it as a string if it is not JSON.
                        Some(Value::String(s)) => {
                            serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
                        }
                        Some(v) => v.clone(),
                    };
                    tools.insert(id.to_string(), name.to_string());
                    push(EventBody::ToolCall {
                        call_id: id.to_string(),
                        tool: name.to_string(),
                        arguments,
                    });
                }
            }
            "tool" => {
                let id = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| at("a tool message needs \"tool_call_id\"".into()))?;
                let tool = tools
                    .get(id)
                    .cloned()
                    .or_else(|| m.get("name").and_then(Value::as_str).map(str::to_owned))
                    .ok_or_else(|| {
                        at(format!("tool_call_id {id:?} answers no earlier tool call"))
                    })?;
                push(EventBody::ToolResult {
                    call_id: id.to_string(),
                    tool,
                    status: ToolStatus::Ok,
                    exit_code: None,
                    text,
                    artifact: None,
                });
            }
            other => return Err(at(format!("unknown role {other:?}"))),
        }
    }
    if skipped_parts > 0 {
        notes.push(format!("{skipped_parts} non-text content part(s) skipped"));
    }
    Ok((out, notes))
}
