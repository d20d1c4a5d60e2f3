//! OpenAI chat message arrays → events (see [`super::ImportFormat::OpenaiChat`]), read with
//! [`ctxlog_projection::read::openai`]'s types.

use ctxlog_ledger::EventBody;
use ctxlog_projection::read::openai::{
    self, Assistant, Content, Message, Part, Plain, ToolMessage,
};
use serde_json::Value;

use super::Incoming;
use super::chat::{self, Events};
use crate::Result;

pub(crate) fn parse(value: Value) -> Result<(Vec<Incoming>, Vec<String>)> {
    let envelope = chat::envelope(value, "an OpenAI chat message array")?;
    let mut events = Events::default();
    if envelope.system.is_some() {
        events
            .notes
            .push("the top-level \"system\" (an Anthropic field) was not imported".into());
    }
    for (i, m) in envelope.messages.into_iter().enumerate() {
        let stamped = chat::message::<Message>(m, i)?;
        message(&mut events, i, stamped.message, stamped.ts).map_err(|r| chat::at(i, r))?;
    }
    Ok(events.finish("non-text content part(s) skipped"))
}

fn message(
    events: &mut Events,
    i: usize,
    message: Message,
    ts: Option<i64>,
) -> std::result::Result<(), String> {
    match message {
        Message::System(m) => system(events, i, "system", m, ts),
        Message::Developer(m) => system(events, i, "developer", m, ts),
        Message::User(m) => {
            events.unused(&m.extra);
            let body = chat::user_event(parts(events, m.content));
            if body.readable_text().trim().is_empty() {
                return Err("empty user message".into());
            }
            events.push(body, ts);
        }
        Message::Assistant(m) => assistant(events, i, m, ts)?,
        Message::Tool(m) => tool(events, m, ts)?,
    }
    Ok(())
}

/// A system or developer message becomes a pinned note (reported).
fn system(events: &mut Events, i: usize, role: &str, m: Plain, ts: Option<i64>) {
    events.unused(&m.extra);
    let text = text(events, m.content);
    if text.trim().is_empty() {
        events
            .notes
            .push(format!("message {i} ({role}) is empty: skipped"));
        return;
    }
    events
        .notes
        .push(format!("message {i} ({role}) became a pinned note"));
    events.pinned(text, ts);
}

/// An assistant message: its text, then one tool call per `tool_calls` entry.
fn assistant(
    events: &mut Events,
    i: usize,
    m: Assistant,
    ts: Option<i64>,
) -> std::result::Result<(), String> {
    if m.function_call.is_some() {
        return Err(
            "\"function_call\" (the legacy function-calling API) is not imported: give the \
             call as \"tool_calls\""
                .into(),
        );
    }
    events.unused(&m.extra);
    let text = text(events, m.content);
    let calls = m.tool_calls.unwrap_or_default();
    if !text.trim().is_empty() {
        events.push(
            EventBody::Assistant {
                text,
                provider_item: None,
            },
            ts,
        );
    } else if calls.is_empty() {
        events.notes.push(format!(
            "message {i} (assistant) has no text and no tool calls: skipped"
        ));
    }
    for call in calls {
        events.unused(&call.extra);
        events.unused(&call.function.extra);
        let arguments = match call.function.arguments {
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(Value::String(s)) => openai::arguments(s),
            Some(v) => v,
        };
        events.call(call.id, call.function.name, arguments, ts);
    }
    Ok(())
}

/// A `tool` message: the result of an earlier call (named by the message's `name` when the
/// call is not in the input).
fn tool(events: &mut Events, m: ToolMessage, ts: Option<i64>) -> std::result::Result<(), String> {
    events.unused(&m.extra);
    let id = m.tool_call_id;
    let tool = events
        .calls
        .get(&id)
        .cloned()
        .or(m.name)
        .ok_or_else(|| format!("tool_call_id {id:?} answers no earlier tool call"))?;
    let content = text(events, m.content);
    events.result(id, tool, &content, None, ts);
    Ok(())
}

/// A user content's parts: its text, images (`image_url`) and inline files (`file`) in order;
/// other parts (and files by upload id) are counted as skipped.
fn parts(events: &mut Events, content: Option<Content>) -> Vec<ctxlog_event::Part> {
    let parts = match content {
        None => return Vec::new(),
        Some(Content::Text(text)) => return vec![ctxlog_event::Part::Text { text }],
        Some(Content::Parts(parts)) => parts,
    };
    let mut out = Vec::new();
    for part in parts {
        match part {
            Part::Text { text, extra } => {
                events.unused(&extra);
                out.push(ctxlog_event::Part::Text { text });
            }
            Part::ImageUrl { image_url, extra } => {
                events.unused(&extra);
                events.unused(&image_url.extra);
                out.push(chat::image_from_url(
                    image_url.url,
                    image_url.detail.as_deref(),
                ));
            }
            Part::File { file, extra } => {
                events.unused(&extra);
                match chat::document_from_data_url(file.file_data.as_deref(), file.filename) {
                    Some(part) => out.push(part),
                    None => events.skipped += 1,
                }
            }
            Part::Other => events.skipped += 1,
        }
    }
    out
}

/// The text of a content: a string, or its text parts joined by newlines (other parts are
/// counted as skipped).
fn text(events: &mut Events, content: Option<Content>) -> String {
    match content {
        None => String::new(),
        Some(Content::Text(text)) => text,
        Some(Content::Parts(parts)) => {
            let mut texts = Vec::new();
            for part in parts {
                match part {
                    Part::Text { text, extra } => {
                        events.unused(&extra);
                        texts.push(text);
                    }
                    _ => events.skipped += 1,
                }
            }
            texts.join("\n")
        }
    }
}
