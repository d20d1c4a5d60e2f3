//! What the imports of the two chat formats share: the message list, the `"ts"` a message may
//! carry, tool results read back, and the notes on what was not imported as such. The formats'
//! own shapes are [`ctxlog_projection::read`]'s types.

use std::collections::{BTreeMap, HashMap};

use ctxlog_event::Part;
use ctxlog_event::media::Detail;
use ctxlog_ledger::{EventBody, OpaqueFormat, ToolStatus};
use ctxlog_projection::INTERRUPTED_RESULT;
use ctxlog_projection::read::{self, Envelope};
use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer};
use serde_json::{Map, Value};

use super::Incoming;
use crate::{Error, Result};

/// An image part from a URL (`data:` URLs become base64 `data` with its media type, stored as
/// an artifact when committed) and an OpenAI `detail`.
pub(crate) fn image_from_url(url: String, detail: Option<&str>) -> Part {
    let detail = detail.and_then(Detail::parse);
    match split_data_url(&url) {
        Some((media_type, data)) => Part::Image {
            url: None,
            data: Some(data),
            media_type: Some(media_type),
            detail,
            artifact: None,
        },
        None => Part::Image {
            url: Some(url),
            data: None,
            media_type: None,
            detail,
            artifact: None,
        },
    }
}

/// A document part from an OpenAI file's `data:` URL and name; `None` when the file is not
/// inline (an uploaded `file_id`, which ctxlog cannot read).
pub(crate) fn document_from_data_url(url: Option<&str>, name: Option<String>) -> Option<Part> {
    let (media_type, data) = split_data_url(url?)?;
    Some(Part::Document {
        data: Some(data),
        media_type,
        name,
        artifact: None,
    })
}

fn split_data_url(url: &str) -> Option<(String, String)> {
    let (media_type, data) = ctxlog_event::media::split_data_url(url)?;
    Some((media_type.to_owned(), data.to_owned()))
}

/// A user message's content as an event: its text parts joined by newlines when it has no
/// media (as before media were kept), else every part in order (text included) as `parts`.
pub(crate) fn user_event(parts: Vec<Part>) -> EventBody {
    if parts.iter().all(|p| matches!(p, Part::Text { .. })) {
        let texts: Vec<String> = parts
            .into_iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text),
                _ => None,
            })
            .collect();
        return EventBody::User {
            text: texts.join("\n"),
            parts: Vec::new(),
            provider_item: None,
        };
    }
    EventBody::User {
        text: String::new(),
        parts,
        provider_item: None,
    }
}

/// One message of an input, with the time it may carry (`"ts"`, ctxlog's own field).
#[derive(Deserialize)]
#[serde(expecting = "a message object")]
pub(crate) struct Stamped<M> {
    #[serde(default, deserialize_with = "ts")]
    pub ts: Option<i64>,
    #[serde(flatten)]
    pub message: M,
}

/// A `"ts"` field: RFC 3339 or milliseconds since the epoch ([`super::parse_ts`]).
pub(crate) fn ts<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<i64>, D::Error> {
    let value = Value::deserialize(d)?;
    super::parse_ts(&value).map(Some).map_err(de::Error::custom)
}

/// The messages of an input: a JSON array of them, or a request body (`{"messages":[…],…}`;
/// its other fields describe a call, not history, and are not imported).
pub(crate) fn envelope(value: Value, what: &str) -> Result<Envelope> {
    let expected = format!("expected {what}: a JSON array of messages (or {{\"messages\":[…]}})");
    match value {
        Value::Array(messages) => Ok(Envelope {
            messages,
            ..Envelope::default()
        }),
        Value::Object(_) => serde_json::from_value(value).map_err(|e| Error::BadInput {
            reason: format!("{expected}: {e}"),
        }),
        _ => Err(Error::BadInput { reason: expected }),
    }
}

/// Reads message `i` of an input as `M`.
pub(crate) fn message<M: DeserializeOwned>(value: Value, i: usize) -> Result<Stamped<M>> {
    serde_json::from_value(value).map_err(|e| at(i, e))
}

/// A bad message, named by its index.
pub(crate) fn at(i: usize, reason: impl std::fmt::Display) -> Error {
    Error::BadInput {
        reason: format!("message {i}: {reason}"),
    }
}

/// The events an input becomes, and what it says about them along the way.
#[derive(Default)]
pub(crate) struct Events {
    pub out: Vec<Incoming>,
    pub notes: Vec<String>,
    /// The tool of each call made so far, by call id.
    pub calls: HashMap<String, String>,
    /// Parts or blocks of types the ledger has no event for.
    pub skipped: usize,
    /// Fields the ledger has no place for, by name: how many times each was seen.
    unused: BTreeMap<String, usize>,
    /// Calls answered with the projector's stand-in for a result that never came.
    unanswered: usize,
    /// Provider items kept as opaque events, and those left out for coming before any user
    /// message (an opaque event belongs to a turn).
    opaque: usize,
    opaque_before_turn: usize,
    /// Reading a provider's reply to a stored turn ([`Events::reply`]).
    pub reply: bool,
}

impl Events {
    /// The events of a provider's reply to a stored turn: its items (a reasoning item, a
    /// thinking block) belong to that turn, and a Responses message or call keeps its item as
    /// its provider item, so the reply is sent back whole.
    pub fn reply() -> Events {
        Events {
            reply: true,
            ..Events::default()
        }
    }

    pub fn push(&mut self, body: EventBody, ts: Option<i64>) {
        self.out.push(Incoming { body, ts });
    }

    /// Counts the fields of `extra`, which no event keeps.
    pub fn unused(&mut self, extra: &Map<String, Value>) {
        for key in extra.keys() {
            *self.unused.entry(key.clone()).or_default() += 1;
        }
    }

    /// Whether a user message was read: what comes now belongs to its turn.
    pub fn in_turn(&self) -> bool {
        self.out
            .iter()
            .any(|e| matches!(e.body, EventBody::User { .. }))
    }

    /// A system prompt, which becomes a pinned note.
    pub fn pinned(&mut self, text: String, ts: Option<i64>) {
        let body = EventBody::Note {
            text,
            pinned: true,
            supersedes: None,
            provider_item: None,
        };
        self.push(body, ts);
    }

    /// A provider item ctxlog does not interpret (a Responses reasoning item, an Anthropic
    /// thinking block, …), kept as an opaque event as given; before any user message it has
    /// no turn to belong to, and is counted as left out instead.
    pub fn opaque(&mut self, format: OpaqueFormat, item: Value, ts: Option<i64>) {
        let in_turn = self.reply || self.in_turn();
        match item {
            Value::Object(item) if in_turn => {
                self.opaque += 1;
                self.push(EventBody::Opaque { format, item }, ts);
            }
            _ => self.opaque_before_turn += 1,
        }
    }

    /// A tool call; a later result names it by `call_id`.
    pub fn call(&mut self, call_id: String, tool: String, arguments: Value, ts: Option<i64>) {
        self.calls.insert(call_id.clone(), tool.clone());
        let body = EventBody::ToolCall {
            call_id,
            tool,
            arguments,
            provider_item: None,
        };
        self.push(body, ts);
    }

    /// The result `content` of call `call_id` to `tool`; `is_error` is Anthropic's flag (OpenAI
    /// has none). The header line the projector writes before a result's text (status, exit
    /// code) is read back into the result's fields, so projecting the result again writes the
    /// same content. Anthropic's answer to a call that never got a result (the projector's
    /// stand-in, with `is_error`) is no result: the call stays unanswered, as it was, since no
    /// stored result projects to that block. OpenAI's stand-in is an ordinary `tool` message,
    /// imported as the result it reads as (leaving it out would join the runs of calls around
    /// it).
    pub fn result(
        &mut self,
        call_id: String,
        tool: String,
        content: &str,
        is_error: Option<bool>,
        ts: Option<i64>,
    ) {
        if content == INTERRUPTED_RESULT && is_error == Some(true) {
            self.unanswered += 1;
            return;
        }
        let read = read::tool_result(content);
        // The ledger takes no `interrupted` status from an application; and Anthropic's flag
        // must say what the header says, or the header is just text.
        let header = read.status != ToolStatus::Interrupted
            && is_error.is_none_or(|e| e == (read.status != ToolStatus::Ok));
        let (status, exit_code, text) = match (header, is_error) {
            (true, _) => (read.status, read.exit_code, read.text),
            (false, Some(true)) => (ToolStatus::Error, None, content),
            (false, _) => (ToolStatus::Ok, None, content),
        };
        let body = EventBody::ToolResult {
            call_id,
            tool,
            status,
            exit_code,
            text: text.to_owned(),
            artifact: None,
            parts: Vec::new(),
            provider_item: None,
        };
        self.push(body, ts);
    }

    /// Every item was kept whole as its event's provider item: no field is left out.
    pub fn kept_whole(&mut self) {
        self.unused.clear();
    }

    /// The events and the notes, with the counts gathered on the way.
    pub fn finish(mut self, skipped: &str) -> (Vec<Incoming>, Vec<String>) {
        if self.skipped > 0 {
            self.notes.push(format!("{} {skipped}", self.skipped));
        }
        if self.opaque > 0 {
            self.notes.push(format!(
                "{} provider item(s) ctxlog does not interpret kept as opaque events, sent back \
                 only in their own format",
                self.opaque
            ));
        }
        if self.opaque_before_turn > 0 {
            self.notes.push(format!(
                "{} provider item(s) before any user message not imported (an opaque event \
                 belongs to a turn)",
                self.opaque_before_turn
            ));
        }
        if self.unanswered > 0 {
            self.notes.push(format!(
                "{} tool call(s) answered {INTERRUPTED_RESULT:?} (they never got a result) \
                 imported without a result",
                self.unanswered
            ));
        }
        if !self.unused.is_empty() {
            let fields: Vec<String> = self
                .unused
                .iter()
                .map(|(name, n)| format!("{name:?} ×{n}"))
                .collect();
            self.notes.push(format!(
                "fields with no place in the ledger, not imported: {}",
                fields.join(", ")
            ));
        }
        (self.out, self.notes)
    }
}
