//! Anthropic message arrays → events (see [`super::ImportFormat::AnthropicMessages`]).

use ctxlog_ledger::{EventBody, ToolStatus};
use serde_json::Value;

use super::openai::{message_role, message_ts, messages};
use super::{Incoming, shown};
use crate::{Error, Result};

/// The text of a `system` value or a `tool_result`'s `content`: a string, or its text blocks
/// joined by newlines.
fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

pub(crate) fn parse(value: &Value) -> Result<(Vec<Incoming>, Vec<String>)> {
    let list = messages(value, "an Anthropic message array")?;
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let system = text_of(value.get("system"));
    if !system.trim().is_empty() {
        notes.push("the system prompt became a pinned note".to_string());
        out.push(Incoming {
            body: EventBody::Note {
                text: system,
                pinned: true,
                supersedes: None,
            },
            ts: None,
        });
    }
    let mut calls: std::collections::HashMap<String, String> = Default::default();
    let mut skipped = 0;
    for (i, m) in list.iter().enumerate() {
        let at = |reason: String| Error::BadInput {
            reason: format!("message {i}: {reason}"),
        };
        let role = message_role(m, i)?;
        if role != "user" && role != "assistant" {
            return Err(at(format!(
                "unknown role {role:?} (expected user or assistant)"
            )));
        }
        let ts = message_ts(m, i)?;
        let blocks: Vec<Value> = match m.get("content") {
            Some(Value::String(s)) => vec![serde_json::json!({"type":"text","text":s})],
            Some(Value::Array(b)) => b.clone(),
            other => {
                return Err(at(format!(
                    "\"content\" must be a string or an array of blocks, not {}",
                    other.map_or("nothing".into(), shown)
                )));
            }
        };
        // A user message's tool results belong to the open turn: they come before its text.
        let mut texts = Vec::new();
        for (j, b) in blocks.iter().enumerate() {
            let at = |reason: &str| Error::BadInput {
                reason: format!("message {i}, content[{j}]: {reason}"),
            };
            let kind = b
                .get("type")
                .and_then(Value::as_str)
                .ok_or_else(|| at("no \"type\""))?;
            let id = |key: &str| {
                b.get(key)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| at(&format!("no \"{key}\"")))
            };
            match (role, kind) {
                (_, "text") => texts.push(
                    b.get("text")
                        .and_then(Value::as_str)
                        .ok_or_else(|| at("no \"text\""))?
                        .to_owned(),
                ),
                ("assistant", "tool_use") => {
                    let (call_id, tool) = (id("id")?, id("name")?);
                    calls.insert(call_id.clone(), tool.clone());
                    flush(&mut texts, role, ts, &mut out);
                    out.push(Incoming {
                        body: EventBody::ToolCall {
                            call_id,
                            tool,
                            arguments: b
                                .get("input")
                                .cloned()
                                .unwrap_or_else(|| Value::Object(Default::default())),
                        },
                        ts,
                    });
                }
                ("user", "tool_result") => {
                    let call_id = id("tool_use_id")?;
                    let tool = calls.get(&call_id).cloned().ok_or_else(|| {
                        at(&format!(
                            "tool_use_id {call_id:?} answers no earlier tool_use"
                        ))
                    })?;
                    let error = b.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                    out.push(Incoming {
                        body: EventBody::ToolResult {
                            call_id,
                            tool,
                            status: if error {
                                ToolStatus::Error
                            } else {
                                ToolStatus::Ok
                            },
                            exit_code: None,
                            text: text_of(b.get("content")),
                            artifact: None,
                        },
                        ts,
                    });
                }
                _ => skipped += 1,
            }
        }
        flush(&mut texts, role, ts, &mut out);
    }
    if skipped > 0 {
        notes.push(format!(
            "{skipped} content block(s) of other types skipped (images, thinking, …)"
        ));
    }
    Ok((out, notes))
}

/// The texts gathered so far become one user or assistant event.
fn flush(texts: &mut Vec<String>, role: &str, ts: Option<i64>, out: &mut Vec<Incoming>) {
    let text = texts.join("\n");
    texts.clear();
    if text.trim().is_empty() {
        return;
    }
    let body = if role == "user" {
        EventBody::User { text }
    } else {
        EventBody::Assistant { text }
    };
    out.push(Incoming { body, ts });
}
