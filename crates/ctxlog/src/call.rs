//! Relayed model calls (docs/design.md#i6-gateway): what the gateway does with a provider
//! request body before and after the provider sees it, as two operations of the store
//! ([`crate::Store::prepare_call`], [`crate::Store::commit_reply`]). This module is the pure
//! part: a client's body split into what ctxlog projects and what it passes through, the
//! client's messages read as events (by the import parsers, [`crate::transfer`]), and the
//! alignment of those events with the conversation's stored ones.
//!
//! # The rules
//!
//! * **What is projected.** The client's messages become the conversation's events; leading
//!   `system`/`developer` messages (OpenAI chat) or the top-level `system` (Anthropic) are the
//!   system prompt, sent with every call and not stored. `model`, `tools` and the output
//!   reservation (`max_tokens`, `max_completion_tokens`, `max_output_tokens`) are read; every
//!   other top-level field (`temperature`, `tool_choice`, `stream`, `metadata`, …) is passed
//!   through as given and counted in the budget.
//! * **Recognition.** A client resends its whole history on every call. The events it sends
//!   are aligned with the stored ones (notes and system markers aside): when they start with
//!   all of them, the rest is new; a client that dropped its oldest messages (its first
//!   differs from the stored first) continues after the longest suffix of the stored events
//!   its own start with. A stored tool result whose output became an artifact matches the
//!   client's full output by its SHA-256; stored text is compared after the store's redaction.
//!   Events that do not continue the stored ones (an edited message, a regenerated reply) are
//!   refused as a conflict: nothing is rewritten or merged.
//! * **The budget.** The window is the model table's context window
//!   ([`ctxlog_projection::media::MODELS`]) or the caller's override, in tokens, input plus
//!   output. Where ctxlog's token count is not the provider's ([`WireFormat::tokens_exact`]:
//!   Anthropic), only [`INEXACT_WINDOW_SHARE`] of it is used. The client's output reservation
//!   is taken off it. A model in no row, without an override, is projected without a budget.

use ctxlog_ledger::{ArtifactRef, Event, EventBody, artifact_name};
use ctxlog_projection::WireFormat;
use serde_json::{Map, Value};

use crate::{Error, Result};

/// The share (in percent) of a model's window a projection uses when ctxlog's token count is
/// not the provider's own (Anthropic publishes no offline tokenizer): a margin for the
/// difference between o200k and the provider's count.
pub const INEXACT_WINDOW_SHARE: u64 = 80;

/// One model call a client asked the gateway for.
#[derive(Clone, Debug, PartialEq)]
pub struct CallRequest {
    /// The conversation (named by the client's `X-Ctxlog-Conversation`).
    pub conversation: String,
    /// The route's wire format.
    pub format: WireFormat,
    /// The client's request body, as sent.
    pub body: Vec<u8>,
    /// The window to fit, in tokens (input plus output), instead of the model table's
    /// [default: the model's row; none for a model in no row].
    pub window: Option<u64>,
}

/// What [`crate::Store::prepare_call`] did, and the body to send upstream.
#[derive(Clone, Debug, PartialEq)]
pub struct PreparedCall {
    /// The upstream body: the projection of the conversation, the passed-through fields
    /// written after the projector's own.
    pub body: Vec<u8>,
    /// Whether the client asked for a stream (`"stream": true`).
    pub stream: bool,
    /// The client's events the ledger already held.
    pub recognised: u64,
    /// The client's events committed by this call.
    pub committed: u64,
    /// The last seq of the conversation once the input is committed.
    pub last_seq: u64,
    /// The token budget the body was fitted to (none: the model is in no row and no window
    /// was given).
    pub budget: Option<u64>,
    /// The body's tokens by ctxlog's count.
    pub tokens: u64,
}

/// The reply a provider gave to a relayed call, to commit.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplyRequest {
    /// The conversation.
    pub conversation: String,
    /// The route's wire format.
    pub format: WireFormat,
    /// The reply as a message of the request shape: OpenAI chat's assistant message
    /// (`{"role":"assistant","content":…,"tool_calls":[…]}`), Anthropic's
    /// `{"role":"assistant","content":[blocks…]}`.
    pub message: Value,
}

/// A client's request body, split.
#[derive(Debug)]
pub(crate) struct ClientCall {
    pub model: String,
    pub system: Option<String>,
    pub events: Vec<EventBody>,
    pub tools: Vec<Value>,
    /// The client's output reservation.
    pub reserve: Option<u64>,
    pub fields: Map<String, Value>,
    pub stream: bool,
}

fn bad(reason: impl Into<String>) -> Error {
    Error::BadInput {
        reason: reason.into(),
    }
}

/// Splits a client's body of `format` (see the module's rules).
///
/// # Errors
/// [`Error::BadInput`] for a body that is not a JSON object with a `model` and a non-empty
/// `messages` array, a system message after the first other message, a message the import
/// parser refuses.
pub(crate) fn read_call(format: WireFormat, body: &[u8]) -> Result<ClientCall> {
    if format == WireFormat::OpenAiResponses {
        return Err(Error::InvalidRequest {
            reason: "the gateway relays openai-chat and anthropic-messages calls".into(),
        });
    }
    let mut object: Map<String, Value> = crate::json::from_slice(body)
        .map_err(|e| bad(format!("the request body is not a JSON object: {e}")))?;
    let model = match object.remove("model") {
        Some(Value::String(m)) if !m.is_empty() => m,
        _ => {
            return Err(bad(
                "the request body needs a \"model\" (a non-empty string)",
            ));
        }
    };
    let mut messages = match object.remove("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        _ => {
            return Err(bad(
                "the request body needs \"messages\" (a non-empty array)",
            ));
        }
    };
    let system = match format {
        WireFormat::AnthropicMessages => object.remove("system").map(|s| text_of(&s)),
        _ => leading_system(&mut messages)?,
    };
    let reserve = match format {
        WireFormat::AnthropicMessages => object.remove("max_tokens"),
        _ => object
            .get("max_completion_tokens")
            .or_else(|| object.get("max_tokens"))
            .cloned(),
    };
    let reserve = reserve
        .map(|v| {
            v.as_u64()
                .filter(|n| *n > 0)
                .ok_or_else(|| bad("the output limit must be a positive integer"))
        })
        .transpose()?;
    let tools = match object.remove("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools,
        Some(_) => return Err(bad("\"tools\" must be an array of tool definitions")),
    };
    let stream = object.get("stream").and_then(Value::as_bool) == Some(true);
    let events = crate::transfer::message_events(format, Value::Array(messages))?;
    Ok(ClientCall {
        model,
        system,
        events,
        tools,
        reserve,
        fields: object,
        stream,
    })
}

/// Takes the leading `system`/`developer` messages of an OpenAI chat array as the system
/// prompt (their texts joined by a blank line).
fn leading_system(messages: &mut Vec<Value>) -> Result<Option<String>> {
    let is_system = |m: &Value| matches!(m["role"].as_str(), Some("system" | "developer"));
    let n = messages.iter().take_while(|m| is_system(m)).count();
    if let Some(i) = messages.iter().skip(n).position(is_system) {
        return Err(bad(format!(
            "message {}: a system or developer message after the conversation started; the \
             gateway takes them only at the start (the system prompt)",
            n + i
        )));
    }
    let texts: Vec<String> = messages
        .drain(..n)
        .map(|m| text_of(&m["content"]))
        .collect();
    Ok((!texts.is_empty()).then(|| texts.join("\n\n")))
}

/// The text of a system prompt: a string, or the `text` of its parts joined.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The stored events recognition compares: what a client sends back (notes and system
/// markers are ctxlog's own).
pub(crate) fn comparable(events: Vec<Event>) -> Vec<EventBody> {
    events
        .into_iter()
        .map(|e| e.body)
        .filter(|b| !matches!(b, EventBody::Note { .. } | EventBody::System { .. }))
        .collect()
}

/// How many of `client`'s events the stored ones already hold: all of them when the client
/// resends the whole history (the stored events are a prefix of its); else, for a client that
/// dropped its oldest messages (its first differs from the stored first), the longest suffix
/// of `stored` that `client` starts with. 0 for an empty `stored`.
///
/// # Errors
/// [`Error::Diverged`]: the client's events do not continue the stored ones.
pub(crate) fn recognised(stored: &[EventBody], client: &[EventBody]) -> Result<usize> {
    let starts_with = |tail: &[EventBody]| {
        tail.len() <= client.len() && tail.iter().zip(client).all(|(s, c)| same(s, c))
    };
    if starts_with(stored) {
        return Ok(stored.len());
    }
    if client
        .first()
        .zip(stored.first())
        .is_some_and(|(c, s)| same(s, c))
    {
        return Err(diverged(stored, client));
    }
    (1..stored.len())
        .map(|start| &stored[start..])
        .find(|tail| starts_with(tail))
        .map(<[EventBody]>::len)
        .ok_or_else(|| diverged(stored, client))
}

fn diverged(stored: &[EventBody], client: &[EventBody]) -> Error {
    let at = stored
        .iter()
        .zip(client)
        .position(|(s, c)| !same(s, c))
        .unwrap_or(stored.len().min(client.len()));
    Error::Diverged {
        reason: format!(
            "the messages sent do not continue the stored conversation ({} stored events, \
             {} sent, first difference at message event {at}): the gateway never rewrites \
             history. Send the whole history as the gateway returned it, or name a new \
             conversation in X-Ctxlog-Conversation",
            stored.len(),
            client.len()
        ),
    }
}

/// Whether a stored event is the client's event: equal, but a tool result stored as an
/// artifact matches the client's full output by its digest (its media parts compare as
/// stored, [`parts_as_stored`]).
fn same(stored: &EventBody, client: &EventBody) -> bool {
    match (stored, client) {
        (
            EventBody::ToolResult {
                call_id,
                tool,
                status,
                exit_code,
                artifact: Some(artifact),
                parts,
                ..
            },
            EventBody::ToolResult {
                call_id: c_id,
                tool: c_tool,
                status: c_status,
                exit_code: c_exit,
                text,
                artifact: None,
                parts: c_parts,
            },
        ) => {
            call_id == c_id
                && tool == c_tool
                && status == c_status
                && exit_code == c_exit
                && parts == c_parts
                && artifact.name == artifact_name(text.as_bytes())
        }
        _ => stored == client,
    }
}

/// `event` with each media part given as bytes replaced by the reference the ledger stores
/// for it (the artifact's name and size), as a commit stores it: how a resent image compares
/// with the stored one. A part that does not check is left as it is (and then differs).
pub(crate) fn parts_as_stored(mut event: EventBody) -> EventBody {
    for part in event.parts_mut().into_iter().flatten() {
        if let Ok(Some(bytes)) = part.check() {
            *part = part.stored_as(ArtifactRef {
                name: artifact_name(&bytes),
                bytes: bytes.len() as u64,
            });
        }
    }
    event
}

/// The budget of a call: the window (given, or the model's row, scaled by
/// [`INEXACT_WINDOW_SHARE`] where the count is not the provider's), for formats without a
/// required output field less the client's reservation. `None` without a window.
///
/// # Errors
/// [`Error::InvalidRequest`] when the reservation leaves nothing of the window.
pub(crate) fn budget(
    format: WireFormat,
    model: &str,
    window: Option<u64>,
    reserve: Option<u64>,
) -> Result<Option<u64>> {
    let Some(window) = window.or_else(|| model_window(model)) else {
        return Ok(None);
    };
    let window = if format.tokens_exact() {
        window
    } else {
        window * INEXACT_WINDOW_SHARE / 100
    };
    let reserved = match format {
        // Anthropic's max_tokens is the projector's own field: it subtracts it itself.
        WireFormat::AnthropicMessages => 0,
        _ => reserve.unwrap_or(0),
    };
    match window.checked_sub(reserved).filter(|n| *n > 0) {
        Some(n) => Ok(Some(n)),
        None => Err(Error::InvalidRequest {
            reason: format!(
                "the output limit ({reserved} tokens) leaves nothing of the window ({window} \
                 tokens) for the input: lower it, or give a larger window (X-Ctxlog-Max-Tokens)"
            ),
        }),
    }
}

/// The context window of `model` in the model table, in tokens.
pub fn model_window(model: &str) -> Option<u64> {
    ctxlog_projection::media::family(model).map(|f| f.context_window)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use ctxlog_ledger::{ArtifactRef, ToolStatus};

    use super::*;

    fn user(text: &str) -> EventBody {
        EventBody::User {
            text: text.into(),
            parts: Vec::new(),
        }
    }

    fn result(text: &str, artifact: Option<ArtifactRef>) -> EventBody {
        EventBody::ToolResult {
            call_id: "c1".into(),
            tool: "sh".into(),
            status: ToolStatus::Ok,
            exit_code: None,
            text: text.into(),
            artifact,
            parts: Vec::new(),
        }
    }

    #[test]
    fn the_longest_stored_suffix_the_client_starts_with_is_known() {
        let stored = [user("a"), user("b"), user("a")];
        assert_eq!(recognised(&[], &[user("a")]).unwrap(), 0);
        assert_eq!(recognised(&stored, &stored).unwrap(), 3);
        let longer = [user("a"), user("b"), user("a"), user("c")];
        assert_eq!(recognised(&stored, &longer).unwrap(), 3);
        // A client that dropped its oldest messages continues.
        assert_eq!(
            recognised(&stored, &[user("b"), user("a"), user("c")]).unwrap(),
            2
        );
        // An edited message is refused, naming what to do.
        let err = recognised(&stored, &[user("a"), user("x"), user("a")]).unwrap_err();
        assert!(matches!(err, Error::Diverged { .. }));
        assert!(err.to_string().contains("X-Ctxlog-Conversation"), "{err}");
    }

    #[test]
    fn an_output_stored_as_an_artifact_matches_by_its_digest() {
        let full = "x".repeat(100);
        let artifact = |text: &str| ArtifactRef {
            name: artifact_name(text.as_bytes()),
            bytes: text.len() as u64,
        };
        let stored = [result("[excerpt]", Some(artifact(&full)))];
        assert_eq!(recognised(&stored, &[result(&full, None)]).unwrap(), 1);
        assert!(recognised(&stored, &[result("other", None)]).is_err());
    }

    #[test]
    fn a_resent_image_matches_the_stored_one_by_its_bytes() {
        use ctxlog_ledger::event::Part;
        let png = |w: u32| {
            let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
            png.extend_from_slice(&w.to_be_bytes());
            png.extend_from_slice(&w.to_be_bytes());
            png.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
            png
        };
        let image = |w: u32| {
            Part::Image {
                url: None,
                data: None,
                media_type: Some("image/png".into()),
                detail: None,
                artifact: None,
            }
            .with_data(&png(w))
        };
        let with = |part: Part| EventBody::User {
            text: "what is this?".into(),
            parts: vec![part],
        };
        // As the ledger stores it: the bytes as an artifact reference.
        let stored = [parts_as_stored(with(image(64)))];
        assert!(matches!(
            &stored[0],
            EventBody::User { parts, .. } if matches!(&parts[0], Part::Image { data: None, artifact: Some(_), .. })
        ));
        let resent = |w| [parts_as_stored(with(image(w))), user("and now?")];
        assert_eq!(recognised(&stored, &resent(64)).unwrap(), 1);
        assert!(recognised(&stored, &resent(65)).is_err());
    }

    #[test]
    fn the_budget_is_the_window_less_the_reservation() {
        let chat = WireFormat::OpenAiChat;
        assert_eq!(
            budget(chat, "gpt-4o", None, Some(1000)).unwrap(),
            Some(127_000)
        );
        assert_eq!(
            budget(chat, "gpt-4o-2024-08-06", Some(9000), None).unwrap(),
            Some(9000)
        );
        assert_eq!(budget(chat, "my-local-model", None, None).unwrap(), None);
        assert!(budget(chat, "gpt-4o", Some(100), Some(100)).is_err());
        let claude = WireFormat::AnthropicMessages;
        assert_eq!(
            budget(claude, "claude-sonnet-4-5", None, Some(1024)).unwrap(),
            Some(160_000)
        );
    }

    #[test]
    fn leading_system_messages_are_the_prompt_and_later_ones_are_refused() {
        let body = br#"{"model":"m","temperature":0,"messages":[{"role":"system","content":"S"},{"role":"developer","content":[{"type":"text","text":"D"}]},{"role":"user","content":"hi"}]}"#;
        let call = read_call(WireFormat::OpenAiChat, body).unwrap();
        assert_eq!(call.system.as_deref(), Some("S\n\nD"));
        assert_eq!(call.events, [user("hi")]);
        assert_eq!(call.fields.keys().collect::<Vec<_>>(), ["temperature"]);
        let late = br#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"system","content":"S"}]}"#;
        let err = read_call(WireFormat::OpenAiChat, late).unwrap_err();
        assert!(err.to_string().contains("message 1"), "{err}");
    }
}
