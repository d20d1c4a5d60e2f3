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
//!   Events that do not continue the stored ones (an edited message, a regenerated reply)
//!   never rewrite or merge into them: the call goes to a fork (below), for a named
//!   conversation too (its forks' names also hash the name). The gateway's own recall steps
//!   ([`RECALL_CALL_PREFIX`]) are skipped: the client never saw them.
//! * **Without a name.** A call that names no conversation is recognised by its
//!   transcript: the fingerprint of the client's first event names the conversation it
//!   starts ([`root_name`]); when its events leave that conversation at event `k` (an edited
//!   message, or a regenerated reply: the client resends less than is stored), the call
//!   continues in the first fork of that point (named by the fingerprint of the client's
//!   events before `k`, [`fork_name`]) that its events continue, or creates the next one,
//!   holding the client's events. Names are a function of the events, so a restarted
//!   gateway and every replica find the same conversation; two chats that share no first
//!   event never meet, and two that share a start split at their first difference.
//! * **The budget.** The window is the model table's context window
//!   ([`ctxlog_projection::media::MODELS`]) or the caller's override, in tokens, input plus
//!   output. Where ctxlog's token count is not the provider's ([`WireFormat::tokens_exact`]:
//!   Anthropic), only [`INEXACT_WINDOW_SHARE`] of it is used. The client's output reservation
//!   is taken off it. A model in no row, without an override, is projected without a budget.

use ctxlog_ledger::{ArtifactRef, Event, EventBody, artifact_name};
use ctxlog_projection::WireFormat;
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use crate::{Error, Result};

/// The share (in percent) of a model's window a projection uses when ctxlog's token count is
/// not the provider's own (Anthropic publishes no offline tokenizer): a margin for the
/// difference between o200k and the provider's count.
pub const INEXACT_WINDOW_SHARE: u64 = 80;

/// One model call a client asked the gateway for.
#[derive(Clone, Debug, PartialEq)]
pub struct CallRequest {
    /// The conversation (named by the client's `X-Ctxlog-Conversation`); empty: the one the
    /// client's transcript continues (see the module's rules).
    pub conversation: String,
    /// The route's wire format.
    pub format: WireFormat,
    /// The client's request body, as sent.
    pub body: Vec<u8>,
    /// The window to fit, in tokens (input plus output), instead of the model table's
    /// [default: the model's row; none for a model in no row].
    pub window: Option<u64>,
    /// For a Responses call with `previous_response_id`: the seq of the input the named
    /// response answered (the gateway maps the id back to it). The client's items then
    /// continue the conversation right after that response, and are all new
    /// [default: none: the client sends its whole history].
    pub previous: Option<u64>,
    /// Offer ctxlog's recall tool ([`RECALL_TOOL_NAME`]) to the model after the client's
    /// tools, on every call of the conversation (so the cached prefix never changes); its
    /// calls are answered by [`crate::Store::answer_recall`]. A client tool of the same
    /// name is then refused [default: false].
    pub recall_tool: bool,
    /// Context windows by model-name prefix, laid over the model table's (the longest
    /// prefix of the request's model wins; [`CallRequest::window`] over both)
    /// [default: none].
    pub model_windows: Vec<(String, u64)>,
}

impl CallRequest {
    /// The window given for `model`: [`CallRequest::window`], else the longest of
    /// [`CallRequest::model_windows`]' prefixes of `model` (else the model table's, in
    /// [`budget`]).
    fn given_window(&self, model: &str) -> Option<u64> {
        self.window.or_else(|| {
            self.model_windows
                .iter()
                .filter(|(prefix, _)| model.starts_with(prefix.as_str()))
                .max_by_key(|(prefix, _)| prefix.len())
                .map(|(_, window)| *window)
        })
    }
}

/// The name of ctxlog's recall tool, as the model calls it.
pub const RECALL_TOOL_NAME: &str = ctxlog_recall::TOOL_NAME;

/// How the call ids of the recall steps a gateway answers itself start: a recall step is
/// stored as the gateway's own events (a call of [`RECALL_TOOL_NAME`] and its result, under
/// the id `ctxlog-recall-SEQ-K`), which the client never saw and recognition skips.
pub const RECALL_CALL_PREFIX: &str = "ctxlog-recall-";

/// A model reply that only calls the recall tool, answered by the gateway
/// ([`crate::Store::answer_recall`]).
#[derive(Clone, Debug, PartialEq)]
pub struct RecallStepRequest {
    /// The call the reply answers, its conversation resolved ([`PreparedCall::conversation`]).
    pub call: CallRequest,
    /// The conversation's last seq before the reply (the call's [`PreparedCall::last_seq`],
    /// or the previous recall step's).
    pub after: u64,
    /// The reply, as [`ReplyRequest::message`].
    pub reply: Value,
    /// The most recall calls this step may answer; a reply with more is not a step.
    pub max_calls: usize,
}

/// A recall step answered: its events committed and the continuation projected.
#[derive(Clone, Debug, PartialEq)]
pub struct RecallStep {
    /// The recall calls answered.
    pub answered: usize,
    /// The body to send upstream next, the step included; `last_seq` is the step's end.
    pub prepared: PreparedCall,
}

/// What [`crate::Store::prepare_call`] did, and the body to send upstream.
#[derive(Clone, Debug, PartialEq)]
pub struct PreparedCall {
    /// The conversation: the request's, or the one its transcript was recognised in.
    pub conversation: String,
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
    /// The seq the reply must follow: the call's [`PreparedCall::last_seq`]. When the
    /// conversation has moved on since (another call on it committed first), the reply is
    /// refused (class conflict) and nothing is written [default: none, no check].
    pub after: Option<u64>,
}

/// How the refusal of a `previous_response_id` that names no stored response starts: a
/// gateway answers it with the provider's own "not found".
pub const NO_STORED_RESPONSE: &str = "previous_response_id names no stored response";

/// The id a refusal of [`crate::Store::prepare_relayed`] names as unknown (its reason holds
/// [`NO_STORED_RESPONSE`], then the id quoted), if it is one.
pub fn unknown_response_id(reason: &str) -> Option<&str> {
    let at = reason.find(NO_STORED_RESPONSE)? + NO_STORED_RESPONSE.len();
    let rest = reason[at..].strip_prefix(" '")?;
    rest.rsplit_once("': ").map(|(id, _)| id)
}

/// A client's request body, split.
#[derive(Clone, Debug)]
pub(crate) struct ClientCall {
    /// A Responses body's `previous_response_id` (never sent upstream).
    pub previous_id: Option<String>,
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
#[cfg(test)]
pub(crate) fn read_call(
    format: WireFormat,
    body: &[u8],
    calls: &[(String, String)],
) -> Result<ClientCall> {
    let (call, messages) = read_head(format, body)?;
    with_events(format, &call, &messages, calls)
}

/// The call `head` ([`read_head`]) with its `messages` read as events.
pub(crate) fn with_events(
    format: WireFormat,
    head: &ClientCall,
    messages: &Value,
    calls: &[(String, String)],
) -> Result<ClientCall> {
    Ok(ClientCall {
        events: crate::transfer::message_events(format, messages.clone(), calls)?,
        ..head.clone()
    })
}

/// [`read_call`] but for the messages: the call without events, and its messages.
pub(crate) fn read_head(format: WireFormat, body: &[u8]) -> Result<(ClientCall, Value)> {
    let mut object: Map<String, Value> = crate::json::from_slice(body)
        .map_err(|e| bad(format!("the request body is not a JSON object: {e}")))?;
    let mut previous_id = None;
    if format == WireFormat::OpenAiResponses {
        // Served from the ledger: never sent upstream.
        previous_id = match object.remove("previous_response_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => Some(id),
            Some(_) => return Err(bad("\"previous_response_id\" must be a string")),
        };
        let input = match object.remove("input") {
            Some(Value::String(text)) => {
                Value::Array(vec![serde_json::json!({"role": "user", "content": text})])
            }
            Some(items @ Value::Array(_)) => items,
            _ => {
                return Err(bad(
                    "the request body needs \"input\" (a string or an array of items)",
                ));
            }
        };
        object.insert("messages".into(), input);
    }
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
        WireFormat::OpenAiResponses => {
            let instructions = object.remove("instructions").map(|s| text_of(&s));
            let leading = leading_system(&mut messages)?;
            match (instructions, leading) {
                (Some(a), Some(b)) => Some(format!("{a}\n\n{b}")),
                (a, b) => a.or(b),
            }
        }
        _ => leading_system(&mut messages)?,
    };
    let reserve = match format {
        WireFormat::AnthropicMessages => object.remove("max_tokens"),
        WireFormat::OpenAiResponses => object.remove("max_output_tokens"),
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
    if messages.is_empty() {
        return Err(bad(
            "the request holds no message besides the system prompt",
        ));
    }
    let call = ClientCall {
        previous_id,
        model,
        system,
        events: Vec::new(),
        tools,
        reserve,
        fields: object,
        stream,
    };
    Ok((call, Value::Array(messages)))
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

/// The fingerprint of each prefix of a client's events, from the digests of the events as
/// sent: `chain[i]` = SHA-256(`chain[i-1]` ‖ `sent[i]`), `chain[0]` = SHA-256(`sent[0]`).
pub(crate) fn fingerprints(sent: &[Digest]) -> Vec<Digest> {
    let mut out: Vec<Digest> = Vec::with_capacity(sent.len());
    for digest in sent {
        let mut h = Sha256::new();
        if let Some(previous) = out.last() {
            h.update(previous);
        }
        h.update(digest);
        out.push(h.finalize().into());
    }
    out
}

/// The conversation a transcript starting with the fingerprint `first` is recognised in:
/// `auto-` and 24 hex digits of it.
pub(crate) fn root_name(first: &Digest) -> String {
    format!("auto-{}", hex24(first))
}

/// The `n`th fork (from 0) of a transcript whose common part ends with fingerprint
/// `common`: `auto-` and 24 hex digits of SHA-256(`common` ‖ "fork" ‖ n), and ‖ `base`
/// for a fork of the conversation the client named `base` (so forks of two named
/// conversations never meet).
pub(crate) fn fork_name(common: &Digest, base: &str, n: u64) -> String {
    let mut h = Sha256::new();
    h.update(common);
    h.update(b"fork");
    h.update(n.to_le_bytes());
    if !base.is_empty() {
        h.update(base.as_bytes());
    }
    format!("auto-{}", hex24(&h.finalize().into()))
}

fn hex24(digest: &Digest) -> String {
    ctxlog_backend::to_hex(&digest[..12])
}

/// A digest of one event, as recognition compares events (SHA-256).
pub(crate) type Digest = [u8; 32];

/// The events recognition compares: what a client sends back (notes, system markers and
/// the gateway's recall steps are ctxlog's own).
pub(crate) fn comparable(body: &EventBody) -> bool {
    !matches!(body, EventBody::Note { .. } | EventBody::System { .. }) && !recall_step(body)
}

/// The events of `events` (whole commits, in order) a client sends back: the
/// [`comparable`] ones, less what the model wrote in the gateway's recall steps (its text,
/// reasoning and other output before a recall call: the events of a reply that come right
/// before a step's calls, which follow the input they answer).
pub(crate) fn sent_back(events: &[Event]) -> Vec<&Event> {
    let mut out = Vec::with_capacity(events.len());
    let mut in_step = false;
    for event in events.iter().rev() {
        let body = &event.body;
        let model_output = matches!(body, EventBody::Assistant { .. } | EventBody::Opaque { .. });
        if recall_step(body) {
            in_step = true;
        } else if comparable(body) && !(in_step && model_output) {
            in_step = false;
            out.push(event);
        }
    }
    out.reverse();
    out
}

/// Whether `body` is part of a recall step the gateway answered itself
/// ([`RECALL_CALL_PREFIX`]).
fn recall_step(body: &EventBody) -> bool {
    match body {
        EventBody::ToolCall { call_id, tool, .. } | EventBody::ToolResult { call_id, tool, .. } => {
            tool == RECALL_TOOL_NAME && call_id.starts_with(RECALL_CALL_PREFIX)
        }
        _ => false,
    }
}

/// The arguments of a reply's recall calls, when the reply's only calls are calls of the
/// recall tool (at least one): a recall step. Its text (a model's "let me look") goes with
/// it: the client never sees the step.
pub(crate) fn recall_arguments(reply: &[EventBody]) -> Option<Vec<Value>> {
    let mut arguments = Vec::new();
    for event in reply {
        match event {
            EventBody::ToolCall {
                tool, arguments: a, ..
            } if tool == RECALL_TOOL_NAME => arguments.push(a.clone()),
            EventBody::ToolCall { .. } => return None,
            _ => {}
        }
    }
    (!arguments.is_empty()).then_some(arguments)
}

/// The digest of an event as the ledger stores it, the same for the client's event once
/// redacted and its media given as stored ([`parts_as_stored`]): a tool result's output is
/// taken by its artifact name (a stored output that became an artifact matches the client's
/// full output by its SHA-256).
pub(crate) fn stored_digest(body: &EventBody) -> Digest {
    match body {
        EventBody::ToolResult { text, artifact, .. } => {
            let name = match artifact {
                Some(artifact) => artifact.name.clone(),
                None => artifact_name(text.as_bytes()),
            };
            let mut body = body.clone();
            if let EventBody::ToolResult { text, artifact, .. } = &mut body {
                *text = name;
                *artifact = None;
            }
            digest_of(&body)
        }
        _ => digest_of(body),
    }
}

/// The digest of an event as a client sent it (before redaction and media checks): how a
/// resent event is recognised without reading it again.
pub(crate) fn sent_digest(body: &EventBody) -> Digest {
    digest_of(body)
}

/// The digest of what an event says, the same however a client re-serialises it: a reply's
/// provider item is left out (a client resends the message, not the provider's item), and an
/// opaque item is taken with its keys sorted and its null values left out (an SDK's model of
/// a thinking block or reasoning item writes the same fields in its own order).
fn digest_of(body: &EventBody) -> Digest {
    let mut digest = Sha256::new();
    let bytes = match body {
        EventBody::Assistant { text, .. } => serde_json::to_vec(&EventBody::assistant(text)),
        EventBody::ToolCall {
            call_id,
            tool,
            arguments,
            ..
        } => serde_json::to_vec(&EventBody::ToolCall {
            call_id: call_id.clone(),
            tool: tool.clone(),
            arguments: arguments.clone(),
            provider_item: None,
        }),
        EventBody::Opaque { format, item } => serde_json::to_vec(&EventBody::Opaque {
            format: *format,
            item: canonical(item),
        }),
        body => serde_json::to_vec(body),
    };
    digest.update(bytes.unwrap_or_default());
    digest.finalize().into()
}

/// `item` with its keys sorted and its null values left out, at every depth.
fn canonical(item: &Map<String, Value>) -> Map<String, Value> {
    fn value(v: &Value) -> Value {
        match v {
            Value::Object(map) => Value::Object(canonical(map)),
            Value::Array(items) => Value::Array(items.iter().map(value).collect()),
            v => v.clone(),
        }
    }
    let mut keys: Vec<&String> = item
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, _)| k)
        .collect();
    keys.sort();
    keys.into_iter()
        .map(|k| (k.clone(), value(&item[k])))
        .collect()
}

/// How many of a client's `sent` events the `stored` ones (of which `stored` holds the
/// count) already hold: all of them when the client resends the whole history (the stored
/// events are a prefix of its); else, for a client that dropped its oldest messages (its
/// first differs from the stored first), the longest suffix of the stored events that the
/// client's start with. 0 for no stored events. `same(s, c)` says whether stored event `s`
/// is the client's event `c`. Returns the count and where in `stored` the match starts.
///
/// # Errors
/// [`Error::Diverged`]: the client's events do not continue the stored ones.
pub(crate) fn recognised(
    stored: usize,
    sent: usize,
    mut same: impl FnMut(usize, usize) -> bool,
) -> Result<(usize, usize)> {
    let starts_at = |start: usize, same: &mut dyn FnMut(usize, usize) -> bool| {
        stored - start <= sent && (start..stored).all(|s| same(s, s - start))
    };
    if starts_at(0, &mut same) {
        return Ok((stored, 0));
    }
    if stored > 0 && sent > 0 && same(0, 0) {
        return Err(diverged(stored, sent, &mut same));
    }
    (1..stored)
        .find(|&start| same(start, 0) && starts_at(start, &mut same))
        .map(|start| (stored - start, start))
        .ok_or_else(|| diverged(stored, sent, &mut same))
}

fn diverged(stored: usize, sent: usize, same: &mut dyn FnMut(usize, usize) -> bool) -> Error {
    let at = (0..stored.min(sent))
        .position(|i| !same(i, i))
        .unwrap_or(stored.min(sent));
    Error::Diverged {
        reason: format!(
            "the messages sent do not continue the stored conversation ({stored} stored events, \
             {sent} sent, first difference at message event {at}): the gateway never rewrites \
             history. Send the whole history as the gateway returned it, or name a new \
             conversation in X-Ctxlog-Conversation"
        ),
    }
}

/// `event` with each media part given as bytes replaced by the reference the ledger stores
/// for it (the artifact's name and size), as a commit stores it: how a resent image compares
/// with the stored one, by its bytes alone (an image is decoded only when committed: bytes
/// stored once were whole then). A part whose data is not base64 is left as it is.
pub(crate) fn parts_as_stored(mut event: EventBody) -> EventBody {
    for part in event.parts_mut().into_iter().flatten() {
        if let Some(bytes) = part.data_bytes() {
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
    request: &CallRequest,
    model: &str,
    reserve: Option<u64>,
) -> Result<Option<u64>> {
    let format = request.format;
    let Some(window) = request.given_window(model).or_else(|| model_window(model)) else {
        return Ok(None);
    };
    let window = if format.tokens_exact() {
        window
    } else {
        window * INEXACT_WINDOW_SHARE / 100
    };
    let reserved = match format {
        // Anthropic's max_tokens and Responses' max_output_tokens are the projector's own
        // fields: it subtracts them itself.
        WireFormat::AnthropicMessages | WireFormat::OpenAiResponses => 0,
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

    /// Recognition of `client` against `stored` by their digests as stored.
    fn recognised(stored: &[EventBody], client: &[EventBody]) -> Result<usize> {
        let (s, c): (Vec<_>, Vec<_>) = (
            stored.iter().map(stored_digest).collect(),
            client.iter().map(stored_digest).collect(),
        );
        super::recognised(s.len(), c.len(), |i, j| s[i] == c[j]).map(|(n, _)| n)
    }

    fn user(text: &str) -> EventBody {
        EventBody::User {
            text: text.into(),
            parts: Vec::new(),
            provider_item: None,
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
            provider_item: None,
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
    fn an_unknown_response_id_is_read_back_from_the_refusal() {
        let reason = format!("{NO_STORED_RESPONSE} 'resp_a'b': the call it names failed");
        assert_eq!(unknown_response_id(&reason), Some("resp_a'b"));
        assert_eq!(unknown_response_id("another refusal"), None);
    }

    #[test]
    fn a_recall_steps_text_is_skipped_with_its_calls() {
        let recall = |kind: &str| {
            let call_id = format!("{RECALL_CALL_PREFIX}1-0");
            match kind {
                "call" => EventBody::ToolCall {
                    call_id,
                    tool: RECALL_TOOL_NAME.into(),
                    arguments: serde_json::json!({"query": "q"}),
                    provider_item: None,
                },
                _ => EventBody::ToolResult {
                    call_id,
                    tool: RECALL_TOOL_NAME.into(),
                    status: ToolStatus::Ok,
                    exit_code: None,
                    text: "{}".into(),
                    artifact: None,
                    parts: Vec::new(),
                    provider_item: None,
                },
            }
        };
        let bodies = [
            user("a"),
            EventBody::assistant("Let me look."),
            recall("call"),
            recall("result"),
            EventBody::assistant("Found it."),
            user("b"),
            EventBody::assistant("Plain."),
        ];
        let events: Vec<Event> = (1..)
            .zip(bodies)
            .map(|(seq, body)| Event {
                seq,
                ts_ms: 0,
                body,
            })
            .collect();
        let kept: Vec<u64> = sent_back(&events).iter().map(|e| e.seq).collect();
        assert_eq!(kept, [1, 5, 6, 7]);
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
            provider_item: None,
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
        let request = |format, window| CallRequest {
            conversation: String::new(),
            format,
            body: Vec::new(),
            window,
            previous: None,
            recall_tool: false,
            model_windows: vec![("gpt-4o-mini".into(), 16_000), ("my-".into(), 32_000)],
        };
        let budget =
            |format, model: &str, window, reserve| budget(&request(format, window), model, reserve);
        let chat = WireFormat::OpenAiChat;
        // Configured windows: the longest prefix, over the model table's; the header's over
        // both.
        assert_eq!(
            budget(chat, "gpt-4o-mini-2024", None, None).unwrap(),
            Some(16_000)
        );
        assert_eq!(
            budget(chat, "my-model", None, Some(2000)).unwrap(),
            Some(30_000)
        );
        assert_eq!(
            budget(chat, "gpt-4o-mini", Some(500), None).unwrap(),
            Some(500)
        );
        assert_eq!(
            budget(chat, "gpt-4o", None, Some(1000)).unwrap(),
            Some(127_000)
        );
        assert_eq!(
            budget(chat, "gpt-4o-2024-08-06", Some(9000), None).unwrap(),
            Some(9000)
        );
        assert_eq!(budget(chat, "a-local-model", None, None).unwrap(), None);
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
        let call = read_call(WireFormat::OpenAiChat, body, &[]).unwrap();
        assert_eq!(call.system.as_deref(), Some("S\n\nD"));
        assert_eq!(call.events, [user("hi")]);
        assert_eq!(call.fields.keys().collect::<Vec<_>>(), ["temperature"]);
        let late = br#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"system","content":"S"}]}"#;
        let err = read_call(WireFormat::OpenAiChat, late, &[]).unwrap_err();
        assert!(err.to_string().contains("message 1"), "{err}");
    }
}
