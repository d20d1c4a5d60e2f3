//! Anthropic message arrays → events (see [`super::ImportFormat::AnthropicMessages`]), read
//! with [`ctxlog_projection::read::anthropic`]'s types.

use ctxlog_ledger::event::ProviderItem;
use ctxlog_ledger::{EventBody, OpaqueFormat};
use ctxlog_projection::read::anthropic::{Block, Content, Message, Role};
use serde_json::{Map, Value};

use super::Incoming;
use super::chat::{self, Events};
use crate::Result;

pub(crate) fn parse(value: Value) -> Result<(Vec<Incoming>, Vec<String>)> {
    parse_with(value, Events::default())
}

/// [`parse`] into `events` ([`Events::reply`] for a provider's reply).
pub(crate) fn parse_with(value: Value, mut events: Events) -> Result<(Vec<Incoming>, Vec<String>)> {
    let envelope = chat::envelope(value, "an Anthropic message array")?;
    let system = envelope.system.map(|s| text(&mut events, s));
    if let Some(system) = system.filter(|s| !s.trim().is_empty()) {
        events
            .notes
            .push("the system prompt became a pinned note".into());
        events.pinned(system, None);
    }
    for (i, m) in envelope.messages.into_iter().enumerate() {
        // The blocks as given: one ctxlog does not read is stored as it came.
        let raw = match m.get("content") {
            Some(Value::Array(blocks)) => blocks.clone(),
            _ => Vec::new(),
        };
        let stamped = chat::message::<Message>(m, i)?;
        message(&mut events, stamped.message, stamped.ts, raw).map_err(|r| chat::at(i, r))?;
    }
    if events.reply {
        // A reply's blocks were kept whole: no key of theirs is left out.
        events.kept_whole();
    }
    Ok(events.finish("content block(s) of other types skipped (images, documents, …)"))
}

/// One message, block by block. Each text block is its own event: the projector merges
/// consecutive same-role messages into one, so that is what they were. A user message's tool
/// results come before its text: they close the open turn, its text opens the next.
/// `raw` holds the message's blocks as given (empty for a string content). An assistant's
/// block of a type ctxlog does not read (`thinking`, `redacted_thinking`, `server_tool_use`
/// and its result, …) becomes an opaque event in its place.
fn message(
    events: &mut Events,
    m: Message,
    ts: Option<i64>,
    mut raw: Vec<Value>,
) -> std::result::Result<(), String> {
    events.unused(&m.extra);
    let blocks = match m.content {
        Content::Text(text) => vec![Block::Text {
            text,
            extra: Map::new(),
        }],
        Content::Parts(blocks) => blocks,
    };
    let mut texts = Vec::new();
    let mut media = false;
    for (j, b) in blocks.into_iter().enumerate() {
        if m.role == Role::Assistant && matches!(b, Block::Other) && j < raw.len() {
            let item = std::mem::take(&mut raw[j]);
            events.opaque(OpaqueFormat::AnthropicMessages, item, ts);
            continue;
        }
        let before = events.out.len();
        block(events, m.role, b, ts, &mut texts, &mut media)
            .map_err(|r| format!("content[{j}]: {r}"))?;
        // A reply's text and tool use blocks keep their block as given (its citations, its
        // id, any key ctxlog does not read): the next call sends them back as they came.
        if events.reply
            && let (Some(Value::Object(item)), Some(event)) = (
                raw.get_mut(j).map(std::mem::take),
                events.out.get_mut(before),
            )
        {
            event.body.set_provider_item(Some(ProviderItem::new(
                OpaqueFormat::AnthropicMessages,
                item,
            )));
        }
    }
    if media {
        // Images and documents keep their place among the texts, in one user event.
        events.push(chat::user_event(texts), ts);
        return Ok(());
    }
    for part in texts {
        if let ctxlog_event::Part::Text { text } = part {
            events.push(
                EventBody::User {
                    text,
                    parts: Vec::new(),
                    provider_item: None,
                },
                ts,
            );
        }
    }
    Ok(())
}

/// One block of a message from `role`; a user's texts, images and documents are gathered
/// in `texts` (`media` set when there is an image or document).
fn block(
    events: &mut Events,
    role: Role,
    block: Block,
    ts: Option<i64>,
    texts: &mut Vec<ctxlog_event::Part>,
    media: &mut bool,
) -> std::result::Result<(), String> {
    match (role, block) {
        (_, Block::Text { text, .. }) if text.trim().is_empty() => {}
        (Role::User, Block::Text { text, extra }) => {
            events.unused(&extra);
            texts.push(ctxlog_event::Part::Text { text });
        }
        (Role::User, Block::Image { source, extra }) => {
            events.unused(&extra);
            events.unused(&source.extra);
            match source_part(source, None, false) {
                Some(part) => {
                    *media = true;
                    texts.push(part);
                }
                None => events.skipped += 1,
            }
        }
        (
            Role::User,
            Block::Document {
                source,
                title,
                extra,
            },
        ) => {
            events.unused(&extra);
            events.unused(&source.extra);
            match source_part(source, title, true) {
                Some(part) => {
                    *media = true;
                    texts.push(part);
                }
                None => events.skipped += 1,
            }
        }
        (Role::Assistant, Block::Image { .. } | Block::Document { .. }) => events.skipped += 1,
        (Role::Assistant, Block::Text { text, extra }) => {
            events.unused(&extra);
            events.push(
                EventBody::Assistant {
                    text,
                    provider_item: None,
                },
                ts,
            );
        }
        (
            Role::Assistant,
            Block::ToolUse {
                id,
                name,
                input,
                extra,
            },
        ) => {
            events.unused(&extra);
            let input = input.unwrap_or_else(|| Value::Object(Map::new()));
            events.call(id, name, input, ts);
        }
        (
            Role::User,
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
                extra,
            },
        ) => {
            events.unused(&extra);
            let tool = events.calls.get(&tool_use_id).cloned().ok_or_else(|| {
                format!("tool_use_id {tool_use_id:?} answers no earlier tool_use")
            })?;
            let content = content.map(|c| text(events, c)).unwrap_or_default();
            events.result(tool_use_id, tool, &content, Some(is_error), ts);
        }
        (Role::User, Block::ToolUse { .. }) => {
            return Err("a tool_use block belongs in an assistant message".into());
        }
        (Role::Assistant, Block::ToolResult { .. }) => {
            return Err("a tool_result block belongs in a user message".into());
        }
        (_, Block::Other) => events.skipped += 1,
    }
    Ok(())
}

/// An image's or document's part from its `source` (`base64`, or `url` for an image); `None`
/// for a source ctxlog cannot store (a document by URL, a file id).
fn source_part(
    source: ctxlog_projection::read::anthropic::Source,
    title: Option<String>,
    document: bool,
) -> Option<ctxlog_event::Part> {
    match (source.kind.as_str(), document) {
        ("base64", false) => Some(ctxlog_event::Part::Image {
            url: None,
            data: source.data,
            media_type: source.media_type,
            detail: None,
            artifact: None,
        }),
        ("url", false) => Some(ctxlog_event::Part::Image {
            url: source.url,
            data: None,
            media_type: None,
            detail: None,
            artifact: None,
        }),
        ("base64", true) => Some(ctxlog_event::Part::Document {
            data: source.data,
            media_type: source.media_type.unwrap_or_default(),
            name: title,
            artifact: None,
        }),
        _ => None,
    }
}

/// The text of a system prompt or a tool result's content: a string, or its text blocks
/// joined by newlines (other blocks are counted as skipped).
fn text(events: &mut Events, content: Content) -> String {
    match content {
        Content::Text(text) => text,
        Content::Parts(blocks) => {
            let mut texts = Vec::new();
            for b in blocks {
                match b {
                    Block::Text { text, extra } => {
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
