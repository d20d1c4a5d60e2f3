//! OpenAI Responses input item lists → events (see [`super::ImportFormat::OpenaiResponses`]),
//! read with [`ctxlog_projection::read::responses`]' types.

use ctxlog_ledger::event::ProviderItem;
use ctxlog_ledger::{EventBody, OpaqueFormat};
use ctxlog_projection::read::openai::arguments;
use ctxlog_projection::read::responses::{self, Content, FunctionCallOutput, Message, Part};
use serde_json::{Map, Value};

use super::Incoming;
use super::chat::Events;
use crate::{Error, Result};

const WHAT: &str = "an OpenAI Responses input item list: a JSON array of items (or \
                    {\"input\":[…]})";

/// The events of an input list (an import), each message, `function_call` and
/// `function_call_output` item kept whole as its event's provider item, so that the history
/// projects back to the items as given.
pub(crate) fn parse(value: Value) -> Result<(Vec<Incoming>, Vec<String>)> {
    parse_items(value, Events::default(), true)
}

/// The events of what the gateway reads, into `events`: its `calls` are the stored tool calls
/// (call id, tool) the `function_call_output` items may answer. A client's input keeps no
/// provider items (the gateway recognises what a client resends by the events' own fields); a
/// provider's reply ([`Events::reply`]) keeps each message and function call whole as its
/// provider item, so the reply is sent back as the provider gave it.
pub(crate) fn parse_with(value: Value, events: Events) -> Result<(Vec<Incoming>, Vec<String>)> {
    let keep = events.reply;
    parse_items(value, events, keep)
}

/// [`parse`] and [`parse_with`]; `keep`: whether an item ctxlog reads is kept as its event's
/// provider item.
fn parse_items(
    value: Value,
    mut events: Events,
    keep: bool,
) -> Result<(Vec<Incoming>, Vec<String>)> {
    let (instructions, items) = envelope(value)?;
    if let Some(text) = instructions.filter(|t| !t.trim().is_empty()) {
        events
            .notes
            .push("\"instructions\" became a pinned note".into());
        events.pinned(text, None);
    }
    for (i, mut value) in items.into_iter().enumerate() {
        let ts = match value.as_object_mut().and_then(|o| o.remove("ts")) {
            Some(ts) => Some(crate::time::parse_ts(&ts).map_err(|r| at(i, r))?),
            None => None,
        };
        // An item of a type ctxlog does not read is kept as given, and with `keep` every other
        // one as its event's provider item: keep a copy to store.
        let read = matches!(
            value.get("type").and_then(Value::as_str),
            Some("message" | "function_call" | "function_call_output") | None
        );
        let raw = (keep || !read).then(|| value.clone());
        let before = events.out.len();
        match responses::item(value).map_err(|e| at(i, e))? {
            responses::Item::Message(m) => message(&mut events, i, m, ts).map_err(|r| at(i, r))?,
            responses::Item::FunctionCall(call) => {
                events.unused(&call.extra);
                events.call(call.call_id, call.name, arguments(call.arguments), ts);
            }
            responses::Item::FunctionCallOutput(out) => {
                output(&mut events, out, ts).map_err(|r| at(i, r))?
            }
            responses::Item::Other => {
                let item = raw.unwrap_or_default();
                events.opaque(OpaqueFormat::OpenaiResponses, item, ts);
                continue;
            }
        }
        if let (Some(Value::Object(item)), Some(event)) = (raw, events.out.get_mut(before)) {
            event
                .body
                .set_provider_item(Some(ProviderItem::new(OpaqueFormat::OpenaiResponses, item)));
        }
    }
    if keep {
        events.kept_whole();
    }
    Ok(events.finish("non-text content part(s) skipped"))
}

/// The instructions and the items of an input: a list of items, or a request body
/// (`{"input":[…]|"text","instructions":…,…}`; its other fields describe a call, not history).
fn envelope(value: Value) -> Result<(Option<String>, Vec<Value>)> {
    let bad = |detail: &str| Error::BadInput {
        reason: format!("expected {WHAT}{detail}"),
    };
    let mut object: Map<String, Value> = match value {
        Value::Array(items) => return Ok((None, items)),
        Value::Object(object) => object,
        _ => return Err(bad("")),
    };
    let instructions = match object.remove("instructions") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text),
        Some(_) => return Err(bad(": \"instructions\" is not a string")),
    };
    let items = match object.remove("input") {
        Some(Value::Array(items)) => items,
        Some(Value::String(text)) => {
            vec![serde_json::json!({"type": "message", "role": "user", "content": text})]
        }
        _ => return Err(bad(": the body has no \"input\" list")),
    };
    Ok((instructions, items))
}

/// A bad item, named by its index.
fn at(i: usize, reason: impl std::fmt::Display) -> Error {
    Error::BadInput {
        reason: format!("item {i}: {reason}"),
    }
}

fn message(
    events: &mut Events,
    i: usize,
    m: Message,
    ts: Option<i64>,
) -> std::result::Result<(), String> {
    events.unused(&m.extra);
    if m.role == "user" {
        let body = super::chat::user_event(parts(events, m.content));
        if body.readable_text().trim().is_empty() {
            return Err("empty user message".into());
        }
        events.push(body, ts);
        return Ok(());
    }
    let text = text(events, m.content);
    match m.role.as_str() {
        "assistant" if text.is_empty() => events
            .notes
            .push(format!("item {i} (assistant message) has no text: skipped")),
        "assistant" => events.push(
            EventBody::Assistant {
                text,
                provider_item: None,
            },
            ts,
        ),
        "system" | "developer" if text.trim().is_empty() => events
            .notes
            .push(format!("item {i} ({} message) is empty: skipped", m.role)),
        // A leading system message is the conversation's standing instruction: pinned, sent
        // at the top of every projection. One in the middle of the list is kept in its place
        // in its turn, as the list sends it.
        "system" | "developer" if events.in_turn() => {
            events.notes.push(format!(
                "item {i} ({} message) after the first user message kept in its place as a note",
                m.role
            ));
            let body = EventBody::Note {
                text,
                pinned: false,
                supersedes: None,
                provider_item: None,
            };
            events.push(body, ts);
        }
        "system" | "developer" => {
            events.notes.push(format!(
                "item {i} ({} message) became a pinned note",
                m.role
            ));
            events.pinned(text, ts);
        }
        other => {
            return Err(format!(
                "unknown message role {other:?} (expected user, assistant, system or developer)"
            ));
        }
    }
    Ok(())
}

/// A `function_call_output`: the result of an earlier `function_call` of the input.
fn output(
    events: &mut Events,
    out: FunctionCallOutput,
    ts: Option<i64>,
) -> std::result::Result<(), String> {
    events.unused(&out.extra);
    let id = out.call_id;
    let tool = events
        .calls
        .get(&id)
        .cloned()
        .ok_or_else(|| format!("call_id {id:?} answers no earlier function_call item"))?;
    let content = text(events, out.output);
    events.result(id, tool, &content, None, ts);
    Ok(())
}

/// A user content's parts: its text, images (`input_image`) and inline files (`input_file`)
/// in order; other parts (and uploads by `file_id`) are counted as skipped.
fn parts(events: &mut Events, content: Content) -> Vec<ctxlog_event::Part> {
    let parts = match content {
        Content::Text(text) => return vec![ctxlog_event::Part::Text { text }],
        Content::Parts(parts) => parts,
    };
    let mut out = Vec::new();
    for part in parts {
        let part = match part.into_text() {
            Ok((text, extra)) => {
                events.unused(&extra);
                out.push(ctxlog_event::Part::Text { text });
                continue;
            }
            Err(part) => part,
        };
        match part {
            Part::InputImage {
                image_url: Some(url),
                detail,
                extra,
            } => {
                events.unused(&extra);
                out.push(super::chat::image_from_url(url, detail.as_deref()));
            }
            Part::InputFile {
                file_data,
                filename,
                extra,
            } => {
                events.unused(&extra);
                match super::chat::document_from_data_url(file_data.as_deref(), filename) {
                    Some(part) => out.push(part),
                    None => events.skipped += 1,
                }
            }
            _ => events.skipped += 1,
        }
    }
    out
}

/// The text of a content: a string, or its text parts joined by newlines (other parts are
/// counted as skipped).
fn text(events: &mut Events, content: Content) -> String {
    match content {
        Content::Text(text) => text,
        Content::Parts(parts) => {
            let mut texts = Vec::new();
            for part in parts {
                match part.into_text() {
                    Ok((text, extra)) => {
                        events.unused(&extra);
                        texts.push(text);
                    }
                    Err(_) => events.skipped += 1,
                }
            }
            texts.join("\n")
        }
    }
}
