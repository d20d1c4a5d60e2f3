//! The event model: what a conversation is made of.
//!
//! An [`Event`] is one record of a conversation: a user message, an assistant reply, a tool
//! call, a tool result, a note, or a system marker. Events are appended in commits (see
//! [`NewCommit`]) and numbered by `seq`, 1-based and contiguous.
//!
//! A **turn** is a user event and everything after it up to the next user event. Events before
//! the first user event (notes, imports) belong to no turn; see [`turn_starts`].
//!
//! A conversation is named by a [`ConversationName`]: it becomes a directory of the file
//! store and a row key in a database, so every engine checks it the same way.
//!
//! # JSON form
//!
//! [`EventBody`] serializes as an internally tagged object, the same form the CLI accepts:
//!
//! ```json
//! {"kind":"user","text":"hello"}
//! {"kind":"user","text":"What is this?","parts":[{"type":"image","url":"https://example.com/a.png"}]}
//! {"kind":"tool_call","call_id":"c1","tool":"shell","arguments":{"cmd":"ls"}}
//! {"kind":"tool_result","call_id":"c1","tool":"shell","status":"ok","exit_code":0,"text":"a b"}
//! {"kind":"assistant","text":"done"}
//! {"kind":"assistant","text":"done","provider_item":{"format":"openai-responses","item":{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"done","annotations":[]}]}}}
//! {"kind":"note","text":"never push to main","pinned":true}
//! {"kind":"opaque","format":"openai-responses","item":{"type":"reasoning","encrypted_content":"…"}}
//! ```

pub mod media;
mod name;

use serde::{Deserialize, Serialize};

pub use media::Part;
pub use name::{ConversationName, InvalidName, MAX_NAME_LEN};

/// One stored event: its position, when it was committed, and what it says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// 1-based position in the conversation, contiguous and never reused.
    pub seq: u64,
    /// Commit time, milliseconds since the Unix epoch (UTC).
    pub ts_ms: i64,
    /// What the event says.
    #[serde(flatten)]
    pub body: EventBody,
}

impl Event {
    /// The event's kind.
    pub fn kind(&self) -> EventKind {
        self.body.kind()
    }
}

/// The kinds of event, as stored in each record's header (one byte, see `docs/ledger-format.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum EventKind {
    /// A user message; it opens a turn.
    User = 1,
    /// An assistant reply.
    Assistant = 2,
    /// A tool call made by the assistant.
    ToolCall = 3,
    /// The result of a tool call.
    ToolResult = 4,
    /// An application-supplied requirement or fact.
    Note = 5,
    /// A system marker (erasure tombstone, retention, import).
    System = 6,
    /// A provider item ctxlog stores as given and does not interpret (format version 2).
    Opaque = 7,
}

impl EventKind {
    /// All kinds, in header-byte order.
    pub const ALL: [EventKind; 7] = [
        EventKind::User,
        EventKind::Assistant,
        EventKind::ToolCall,
        EventKind::ToolResult,
        EventKind::Note,
        EventKind::System,
        EventKind::Opaque,
    ];

    /// The header byte of this kind.
    pub fn as_byte(self) -> u8 {
        self as u8
    }

    /// The kind for a header byte, if it names one.
    pub fn from_byte(byte: u8) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_byte() == byte)
    }

    /// The name used in JSON (`"user"`, `"tool_result"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::User => "user",
            EventKind::Assistant => "assistant",
            EventKind::ToolCall => "tool_call",
            EventKind::ToolResult => "tool_result",
            EventKind::Note => "note",
            EventKind::System => "system",
            EventKind::Opaque => "opaque",
        }
    }
}

/// What an event says. Serialized with a `"kind"` tag; see the module docs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum EventBody {
    /// A user message.
    User {
        /// The message text, sent before its parts (required; `""` when the message is only
        /// its parts).
        text: String,
        /// Images, documents and more text, in order, after `text` ([`Part`]; format
        /// version 2).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        parts: Vec<Part>,
        /// The provider's own item for this message, as given (format version 2; see
        /// [`ProviderItem`]): a Responses `message` whose content is a list of parts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_item: Option<ProviderItem>,
    },
    /// An assistant reply.
    Assistant {
        /// The reply text.
        text: String,
        /// The provider's own item for this reply, as given (format version 2; see
        /// [`ProviderItem`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_item: Option<ProviderItem>,
    },
    /// A tool call. Its result, if any, is a later `ToolResult` with the same `call_id` in the
    /// same turn.
    ToolCall {
        /// The provider's call id; unique within the turn.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// The call's arguments, as the model produced them.
        #[serde(default = "empty_object")]
        arguments: serde_json::Value,
        /// The provider's own item for this call, as given (format version 2; see
        /// [`ProviderItem`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_item: Option<ProviderItem>,
    },
    /// The result of a tool call.
    ToolResult {
        /// The `call_id` of the call this answers (in the same turn).
        call_id: String,
        /// The tool's name.
        tool: String,
        /// How the call ended.
        status: ToolStatus,
        /// The process exit code, when the tool has one.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "exit_code"
        )]
        exit_code: Option<i64>,
        /// The result text. When the full output was stored as an artifact, this is a
        /// head/tail excerpt of it.
        text: String,
        /// The full output, when it was too large to keep inline.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        artifact: Option<ArtifactRef>,
        /// Images, documents and more text the tool returned, after `text` ([`Part`]; format
        /// version 2).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        parts: Vec<Part>,
        /// The provider's own item for this result, as given (format version 2; see
        /// [`ProviderItem`]): a Responses `function_call_output` with its `id`, `status` or
        /// any other key.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_item: Option<ProviderItem>,
    },
    /// An application-supplied requirement or fact.
    Note {
        /// The note text.
        text: String,
        /// A pinned note is mandatory in every projection (docs/design.md#p4-mandatory-input,
        /// docs/design.md#p6-agent-tiers).
        #[serde(default, skip_serializing_if = "is_false")]
        pinned: bool,
        /// The seq of an earlier note this one explicitly replaces (docs/design.md#p6-agent-tiers).
        /// Never guessed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        supersedes: Option<u64>,
        /// The provider's own item for this note, as given (format version 2; see
        /// [`ProviderItem`]): a Responses `system` or `developer` message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_item: Option<ProviderItem>,
    },
    /// A system marker. These are written by ctxlog itself, not by applications.
    System {
        /// What the marker records.
        marker: SystemMarker,
    },
    /// A provider item ctxlog does not interpret (an OpenAI Responses `reasoning` item with
    /// its `encrypted_content`, an Anthropic `thinking` block with its signature, …), stored
    /// exactly as given and sent back only in its own format, in its place in its turn
    /// (docs/design.md#p14-more-wire-formats).
    Opaque {
        /// The wire format the item belongs to; it is never sent in another.
        format: OpaqueFormat,
        /// The item, keys in the order given.
        #[serde(deserialize_with = "opaque_item")]
        item: serde_json::Map<String, serde_json::Value>,
    },
}

/// The keys whose string values are an opaque item's readable text, at any depth: a
/// reasoning summary's or content part's `text`, a thinking block's `thinking`. Nothing else
/// is read (never `encrypted_content`, `signature` or a redacted block's `data`).
pub const OPAQUE_TEXT_KEYS: [&str; 2] = ["text", "thinking"];

/// The readable text of an opaque item (see [`OPAQUE_TEXT_KEYS`]), pieces joined by newlines
/// in the item's order; empty when it has none.
pub fn opaque_text(item: &serde_json::Map<String, serde_json::Value>) -> String {
    fn walk(v: &serde_json::Value, key: Option<&str>, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s)
                if key.is_some_and(|k| OPAQUE_TEXT_KEYS.contains(&k)) && !s.trim().is_empty() =>
            {
                out.push(s.clone());
            }
            serde_json::Value::Array(items) => items.iter().for_each(|i| walk(i, None, out)),
            serde_json::Value::Object(map) => {
                map.iter().for_each(|(k, v)| walk(v, Some(k), out));
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    item.iter().for_each(|(k, v)| walk(v, Some(k), &mut out));
    out.join("\n")
}

/// A provider's own item for an assistant reply or a tool call, kept beside what ctxlog reads
/// from it: an OpenAI Responses output `message` or `function_call` item with its `id`,
/// `status`, `annotations` and any other key, or an Anthropic `text` or `tool_use` block. It
/// is sent verbatim, in the event's place, in its own format only; every other format, recall
/// and the notices read the event's own fields, which must agree with it (the ledger checks
/// the type, the call's id, name and arguments, and the text).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderItem {
    /// The wire format the item belongs to; it is never sent in another.
    pub format: OpaqueFormat,
    /// The item, keys in the order given.
    #[serde(deserialize_with = "opaque_item")]
    pub item: serde_json::Map<String, serde_json::Value>,
    /// The item's `data:` URLs whose bytes are stored as artifacts (format version 2): each
    /// such string of the item holds only its head, `data:MEDIA_TYPE;base64,`, and gets the
    /// base64 of its artifact back when read ([`ProviderItem::inline`]). Written by the
    /// ledger when it stores the item; empty in a commit as given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offloaded: Vec<OffloadedUrl>,
}

/// A `data:` URL of a provider item whose bytes are stored as an artifact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OffloadedUrl {
    /// Where the URL is in the item: a JSON pointer to its string (`/content/1/image_url`).
    pub at: String,
    /// The URL's bytes (what its base64 decodes to).
    pub artifact: ArtifactRef,
}

/// One medium a provider item holds as a `data:` URL ([`ProviderItem::media`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemMedium<'a> {
    /// Still inline: its media type and base64.
    Inline {
        /// The URL's media type.
        media_type: &'a str,
        /// The URL's base64.
        data: &'a str,
    },
    /// Stored as an artifact ([`ProviderItem::offloaded`]).
    Stored(&'a ArtifactRef),
}

/// Where a medium is in a provider item, what it is, and how it is held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemMediumAt<'a> {
    /// A JSON pointer to the URL's string.
    pub at: String,
    /// An image (`input_image`), else a file (`input_file`).
    pub image: bool,
    /// The medium.
    pub medium: ItemMedium<'a>,
}

impl ProviderItem {
    /// `item` of `format`, as given (nothing offloaded).
    pub fn new(format: OpaqueFormat, item: serde_json::Map<String, serde_json::Value>) -> Self {
        ProviderItem {
            format,
            item,
            offloaded: Vec::new(),
        }
    }

    /// The media the item holds as `data:` URLs, in the item's order: each `input_image`
    /// part's `image_url` and `input_file` part's `file_data` of a Responses item's
    /// `content` (a message) or `output` (a `function_call_output`) list, inline or stored.
    /// URLs of other schemes and uploaded files are not media the item holds.
    pub fn media(&self) -> Vec<ItemMediumAt<'_>> {
        let mut out = Vec::new();
        if self.format != OpaqueFormat::OpenaiResponses {
            return out;
        }
        for key in ["content", "output"] {
            let Some(serde_json::Value::Array(parts)) = self.item.get(key) else {
                continue;
            };
            for (i, part) in parts.iter().enumerate() {
                let (slot, image) = match part.get("type").and_then(serde_json::Value::as_str) {
                    Some("input_image") => ("image_url", true),
                    Some("input_file") => ("file_data", false),
                    _ => continue,
                };
                let at = format!("/{key}/{i}/{slot}");
                let medium = match self.offloaded.iter().find(|o| o.at == at) {
                    Some(o) => ItemMedium::Stored(&o.artifact),
                    None => match part
                        .get(slot)
                        .and_then(serde_json::Value::as_str)
                        .and_then(media::split_data_url)
                    {
                        Some((media_type, data)) => ItemMedium::Inline { media_type, data },
                        None => continue,
                    },
                };
                out.push(ItemMediumAt { at, image, medium });
            }
        }
        out
    }

    /// Stores the `data:` URL at `at` as `artifact`: the string keeps only its head
    /// (`data:MEDIA_TYPE;base64,`). False, and nothing changed, when `at` holds no `data:` URL.
    pub fn offload(&mut self, at: &str, artifact: ArtifactRef) -> bool {
        let Some(url) = string_at(&mut self.item, at) else {
            return false;
        };
        let Some(head) = url.find(";base64,").filter(|_| url.starts_with("data:")) else {
            return false;
        };
        url.truncate(head + ";base64,".len());
        self.offloaded.push(OffloadedUrl {
            at: at.to_owned(),
            artifact,
        });
        true
    }

    /// True when every offloaded URL's string is the head of a `data:` URL and nothing more
    /// (what [`ProviderItem::offload`] leaves), so that reading it back gives the URL.
    pub fn offloaded_are_heads(&self) -> bool {
        let mut item = self.item.clone();
        self.offloaded.iter().all(|o| {
            string_at(&mut item, &o.at)
                .is_some_and(|s| s.starts_with("data:") && s.ends_with(";base64,"))
        })
    }

    /// Puts each offloaded URL's bytes back (base64 after its head), reading each artifact
    /// with `read`: the item as given.
    ///
    /// # Errors
    /// The first error of `read`.
    pub fn inline<E>(
        &mut self,
        mut read: impl FnMut(&ArtifactRef) -> Result<Vec<u8>, E>,
    ) -> Result<(), E> {
        for o in std::mem::take(&mut self.offloaded) {
            let bytes = read(&o.artifact)?;
            if let Some(url) = string_at(&mut self.item, &o.at) {
                use base64::Engine as _;
                url.push_str(&base64::engine::general_purpose::STANDARD.encode(bytes));
            }
        }
        Ok(())
    }
}

/// The string a JSON pointer names in `item`, if it names one.
fn string_at<'a>(
    item: &'a mut serde_json::Map<String, serde_json::Value>,
    at: &str,
) -> Option<&'a mut String> {
    let rest = at.strip_prefix('/')?;
    let (key, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let key = key.replace("~1", "/").replace("~0", "~");
    let value = item.get_mut(&key)?;
    let value = if tail.is_empty() {
        value
    } else {
        value.pointer_mut(&format!("/{tail}"))?
    };
    match value {
        serde_json::Value::String(s) => Some(s),
        _ => None,
    }
}

/// The wire formats an opaque item can belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OpaqueFormat {
    /// An item of an OpenAI Responses `input` list.
    #[serde(rename = "openai-responses")]
    OpenaiResponses,
    /// A content block of an Anthropic Messages assistant message.
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
}

impl OpaqueFormat {
    /// The format's name, as in JSON and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            OpaqueFormat::OpenaiResponses => "openai-responses",
            OpaqueFormat::AnthropicMessages => "anthropic-messages",
        }
    }
}

impl EventBody {
    /// A user message of plain text (no media parts).
    pub fn user(text: impl Into<String>) -> EventBody {
        EventBody::User {
            text: text.into(),
            parts: Vec::new(),
            provider_item: None,
        }
    }

    /// An assistant reply of plain text (no provider item).
    pub fn assistant(text: impl Into<String>) -> EventBody {
        EventBody::Assistant {
            text: text.into(),
            provider_item: None,
        }
    }

    /// The body's kind.
    pub fn kind(&self) -> EventKind {
        match self {
            EventBody::User { .. } => EventKind::User,
            EventBody::Assistant { .. } => EventKind::Assistant,
            EventBody::ToolCall { .. } => EventKind::ToolCall,
            EventBody::ToolResult { .. } => EventKind::ToolResult,
            EventBody::Note { .. } => EventKind::Note,
            EventBody::System { .. } => EventKind::System,
            EventBody::Opaque { .. } => EventKind::Opaque,
        }
    }

    /// The human-readable text of the event, if it has one (tool calls have arguments instead,
    /// system markers and opaque items have none).
    pub fn text(&self) -> Option<&str> {
        match self {
            EventBody::User { text, .. }
            | EventBody::Assistant { text, .. }
            | EventBody::ToolResult { text, .. }
            | EventBody::Note { text, .. } => Some(text),
            EventBody::ToolCall { .. } | EventBody::System { .. } | EventBody::Opaque { .. } => {
                None
            }
        }
    }

    /// What a reader may see of the event as text: [`EventBody::text`] followed by its parts'
    /// text and media markers ([`Part::readable_text`], never base64), or for an opaque item
    /// its readable text ([`opaque_text`], never its encrypted parts); empty otherwise.
    pub fn readable_text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            EventBody::Opaque { item, .. } => std::borrow::Cow::Owned(opaque_text(item)),
            body if !body.parts().is_empty() => {
                let text = body.text().unwrap_or_default();
                let pieces = std::iter::once(text.to_owned())
                    .filter(|t| !t.is_empty())
                    .chain(body.parts().iter().map(Part::readable_text));
                std::borrow::Cow::Owned(pieces.collect::<Vec<_>>().join("\n"))
            }
            body => std::borrow::Cow::Borrowed(body.text().unwrap_or_default()),
        }
    }

    /// The provider's own item of the event, when one was given.
    pub fn provider_item(&self) -> Option<&ProviderItem> {
        match self {
            EventBody::User { provider_item, .. }
            | EventBody::Assistant { provider_item, .. }
            | EventBody::ToolCall { provider_item, .. }
            | EventBody::ToolResult { provider_item, .. }
            | EventBody::Note { provider_item, .. } => provider_item.as_ref(),
            EventBody::System { .. } | EventBody::Opaque { .. } => None,
        }
    }

    /// The provider's own item, to change (`None` when there is none).
    pub fn provider_item_mut(&mut self) -> Option<&mut ProviderItem> {
        match self {
            EventBody::User { provider_item, .. }
            | EventBody::Assistant { provider_item, .. }
            | EventBody::ToolCall { provider_item, .. }
            | EventBody::ToolResult { provider_item, .. }
            | EventBody::Note { provider_item, .. } => provider_item.as_mut(),
            EventBody::System { .. } | EventBody::Opaque { .. } => None,
        }
    }

    /// Sets the provider's own item (system markers and opaque items take none: unchanged).
    pub fn set_provider_item(&mut self, given: Option<ProviderItem>) {
        match self {
            EventBody::User { provider_item, .. }
            | EventBody::Assistant { provider_item, .. }
            | EventBody::ToolCall { provider_item, .. }
            | EventBody::ToolResult { provider_item, .. }
            | EventBody::Note { provider_item, .. } => *provider_item = given,
            EventBody::System { .. } | EventBody::Opaque { .. } => {}
        }
    }

    /// Replaces a tool result's text with `new` (a clip of it, or its whole output read back
    /// for a projection; any other event is unchanged). Its provider item stays only while it
    /// still says `new` (a string output ending with it): otherwise the result is sent as
    /// its own fields say.
    pub fn set_result_text(&mut self, new: String) {
        if let EventBody::ToolResult {
            text,
            provider_item,
            ..
        } = self
        {
            let says = |p: &ProviderItem| {
                *text == new
                    || p.item
                        .get("output")
                        .and_then(serde_json::Value::as_str)
                        .is_some_and(|o| o.ends_with(new.as_str()))
            };
            if provider_item.as_ref().is_some_and(|p| !says(p)) {
                *provider_item = None;
            }
            *text = new;
        }
    }

    /// The parts of a user message or tool result (empty for any other event).
    pub fn parts(&self) -> &[Part] {
        match self {
            EventBody::User { parts, .. } | EventBody::ToolResult { parts, .. } => parts,
            _ => &[],
        }
    }

    /// The parts, to change (`None` for an event that has none).
    pub fn parts_mut(&mut self) -> Option<&mut Vec<Part>> {
        match self {
            EventBody::User { parts, .. } | EventBody::ToolResult { parts, .. } => Some(parts),
            _ => None,
        }
    }

    /// Puts each part's bytes back as base64 `data` ([`Part::with_data`]) and each of its
    /// provider item's offloaded `data:` URLs back whole ([`ProviderItem::inline`]), reading
    /// each referenced artifact with `read`: the event as a projection sends it and an export
    /// writes it.
    ///
    /// # Errors
    /// The first error of `read`.
    pub fn inline_parts<E>(
        &mut self,
        mut read: impl FnMut(&ArtifactRef) -> Result<Vec<u8>, E>,
    ) -> Result<(), E> {
        if let Some(parts) = self.parts_mut() {
            for part in parts.iter_mut() {
                if let Some(r) = part.artifact() {
                    *part = part.with_data(&read(r)?);
                }
            }
        }
        if let Some(given) = self.provider_item_mut() {
            given.inline(read)?;
        }
        Ok(())
    }

    /// Every artifact the event references: a tool result's full output, then its parts'
    /// bytes, then its provider item's offloaded `data:` URLs. Erasure, repair and verify
    /// keep exactly these.
    pub fn artifact_refs(&self) -> Vec<&ArtifactRef> {
        let output = match self {
            EventBody::ToolResult {
                artifact: Some(r), ..
            } => Some(r),
            _ => None,
        };
        output
            .into_iter()
            .chain(self.parts().iter().filter_map(Part::artifact))
            .chain(
                self.provider_item()
                    .into_iter()
                    .flat_map(|p| p.offloaded.iter().map(|o| &o.artifact)),
            )
            .collect()
    }
}

/// How a tool call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The tool ran and succeeded.
    Ok,
    /// The tool ran and failed (or could not run).
    Error,
    /// The process died before the result arrived: effects unknown. Written by ctxlog when it
    /// closes an interrupted call, never expected from applications.
    Interrupted,
}

impl ToolStatus {
    /// The JSON name (`"ok"`, `"error"`, `"interrupted"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ok => "ok",
            ToolStatus::Error => "error",
            ToolStatus::Interrupted => "interrupted",
        }
    }
}

/// A reference to a content-addressed artifact stored beside the ledger.
///
/// `name` is relative to the conversation's `artifacts/` directory and is exactly
/// `sha256-<64 lowercase hex>`; anything else is refused when read (docs/design.md#l6-artifacts,
/// docs/design.md#r7-scope).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactRef {
    /// The artifact's file name: `sha256-<hex of its content>`.
    pub name: String,
    /// Its length in bytes.
    pub bytes: u64,
}

/// A system marker's content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum SystemMarker {
    /// Records that a seq range was erased: what, when and why, never the content
    /// (docs/design.md#e1-erasure).
    Tombstone {
        /// First erased seq.
        from: u64,
        /// Last erased seq (inclusive).
        to: u64,
        /// When, in milliseconds since the Unix epoch.
        at_ms: i64,
        /// Why, as the caller said.
        reason: String,
    },
    /// Records that a seq range was lost to damage and given up by `ctxlog repair
    /// --accept-loss` (docs/design.md#l11-repair): which seqs, when, where in the log the
    /// damage lay and what it was. Laid out like a tombstone: seq `from` holds this marker,
    /// every seq in `from+1..=to` a covered placeholder (the same marker, empty reason), so
    /// the seq counter never goes back.
    Loss {
        /// First lost seq.
        from: u64,
        /// Last lost seq (inclusive).
        to: u64,
        /// When the loss was accepted, in milliseconds since the Unix epoch.
        at_ms: i64,
        /// Byte offset in the damaged log where the damage began.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// Records that a retention policy removed a range (docs/design.md#e2-retention).
    Retention {
        /// First removed seq.
        from: u64,
        /// Last removed seq (inclusive).
        to: u64,
        /// The policy, as text.
        policy: String,
    },
    /// Records an import (docs/design.md#e4-export-and-import).
    Import {
        /// Where the events came from.
        source: String,
    },
}

/// A batch of events to append atomically (docs/design.md#l1-durable-append,
/// docs/design.md#l4-idempotent-commits).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewCommit {
    /// An optional idempotency id: re-committing the same id with the same events writes
    /// nothing and returns the original receipt; different events are a conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The events, in order.
    pub events: Vec<EventBody>,
    /// The original time of each event, in milliseconds since the Unix epoch, in event order:
    /// `times[i]` is event `i`'s, and an event without one (`None`, or past the end) takes
    /// the clock at commit time. Empty for a live commit; kept for an imported or replayed
    /// history. An explicit time earlier than the event before it is refused, so time never
    /// goes backwards within a conversation.
    ///
    /// Not part of this type's own serde form: in the JSON commit shapes each event carries
    /// its time as `"ts"`, and the facade's parser moves it here.
    #[serde(skip)]
    pub times: Vec<Option<i64>>,
    /// The seq this commit must follow: when set, the commit is written only if the
    /// conversation's last seq is exactly this one (0: an empty conversation), and is
    /// refused otherwise with nothing written (an optimistic check, for a writer that read
    /// the conversation and decided what to add from what it read). A repeated idempotency
    /// id is answered before the check. Not part of the serde form.
    #[serde(skip)]
    pub after: Option<u64>,
}

impl NewCommit {
    /// A commit of `events` without an id, every event timed by the clock.
    pub fn new(events: Vec<EventBody>) -> NewCommit {
        NewCommit {
            events,
            ..NewCommit::default()
        }
    }

    /// This commit with idempotency id `id`.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> NewCommit {
        self.id = Some(id.into());
        self
    }

    /// This commit with original event times (see [`NewCommit::times`]).
    #[must_use]
    pub fn with_times(mut self, times: Vec<Option<i64>>) -> NewCommit {
        self.times = times;
        self
    }

    /// This commit, to be written only right after seq `seq` (see [`NewCommit::after`]).
    #[must_use]
    pub fn with_after(mut self, seq: u64) -> NewCommit {
        self.after = Some(seq);
        self
    }
}

/// The indices in `events` at which turns start (each a user event). Events before the first
/// index belong to no turn.
pub fn turn_starts(events: &[Event]) -> Vec<usize> {
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind() == EventKind::User)
        .map(|(i, _)| i)
        .collect()
}

/// An exit code is a whole number that fits in 64 bits; anything else is refused with the
/// number as written (not as the float a JSON parser turns an overlong integer into).
fn exit_code<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let Some(number) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    number.as_i64().map(Some).ok_or_else(|| {
        let shown = match number.as_f64() {
            Some(f) if number.as_u64().is_none() && f.fract() == 0.0 => format!("{f:.0}"),
            _ => number.to_string(),
        };
        serde::de::Error::custom(format!(
            "exit_code {shown} is not a whole number from -9223372036854775808 to 9223372036854775807"
        ))
    })
}

/// An opaque item is a JSON object; anything else is refused saying so.
fn opaque_item<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<serde_json::Map<String, serde_json::Value>, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Object(map) => Ok(map),
        other => Err(serde::de::Error::custom(format!(
            "an opaque event's item must be a JSON object (the provider's item as it sent it), not {}",
            json_type(&other)
        ))),
    }
}

fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_code_out_of_range_is_refused_as_written() {
        for (json, shown) in [
            (
                "100000000000000000000",
                "exit_code 100000000000000000000 is not",
            ),
            (
                "18446744073709551615",
                "exit_code 18446744073709551615 is not",
            ),
            ("1.5", "exit_code 1.5 is not"),
        ] {
            let text = format!(
                r#"{{"kind":"tool_result","call_id":"c","tool":"t","status":"ok","exit_code":{json},"text":""}}"#
            );
            let err = serde_json::from_str::<EventBody>(&text)
                .unwrap_err()
                .to_string();
            assert!(err.contains(shown), "{json}: {err}");
        }
        let ok = r#"{"kind":"tool_result","call_id":"c","tool":"t","status":"ok","exit_code":-9223372036854775808,"text":""}"#;
        assert!(serde_json::from_str::<EventBody>(ok).is_ok());
    }

    #[test]
    fn kinds_round_trip_through_their_byte() {
        for kind in EventKind::ALL {
            assert_eq!(EventKind::from_byte(kind.as_byte()), Some(kind));
        }
        assert_eq!(EventKind::from_byte(0), None);
        assert_eq!(EventKind::from_byte(8), None);
    }

    #[test]
    fn bodies_use_the_documented_json_form() {
        let body: EventBody = serde_json::from_str(
            r#"{"kind":"tool_result","call_id":"c1","tool":"shell","status":"ok","exit_code":0,"text":"a b"}"#,
        )
        .unwrap();
        assert_eq!(body.kind(), EventKind::ToolResult);
        assert_eq!(body.text(), Some("a b"));
        let err = serde_json::from_str::<EventBody>(r#"{"kind":"shout","text":"x"}"#);
        assert!(err.is_err());
    }

    #[test]
    fn opaque_items_keep_their_keys_in_order_and_refuse_what_is_not_one() {
        let text = r#"{"kind":"opaque","format":"openai-responses","item":{"type":"reasoning","summary":[],"encrypted_content":"gAAA","id":"rs_1"}}"#;
        let body: EventBody = serde_json::from_str(text).unwrap();
        assert_eq!(body.kind(), EventKind::Opaque);
        assert_eq!(body.text(), None);
        assert_eq!(serde_json::to_string(&body).unwrap(), text);
        let err = serde_json::from_str::<EventBody>(
            r#"{"kind":"opaque","format":"openai-responses","item":"reasoning"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("must be a JSON object") && err.contains("not a string"),
            "{err}"
        );
        let err = serde_json::from_str::<EventBody>(
            r#"{"kind":"opaque","format":"openai-chat","item":{}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("openai-chat") && err.contains("anthropic-messages"),
            "{err}"
        );
    }

    #[test]
    fn an_opaque_items_readable_text_leaves_encrypted_parts_out() {
        let item = |json: &str| match serde_json::from_str(json).unwrap() {
            serde_json::Value::Object(map) => map,
            _ => unreachable!(),
        };
        let reasoning = item(
            r#"{"type":"reasoning","summary":[{"type":"summary_text","text":"Checked the logs."}],"encrypted_content":"gAAAA"}"#,
        );
        assert_eq!(opaque_text(&reasoning), "Checked the logs.");
        let thinking = item(r#"{"type":"thinking","thinking":"Look at x.","signature":"EqQB"}"#);
        assert_eq!(opaque_text(&thinking), "Look at x.");
        let redacted = item(r#"{"type":"redacted_thinking","data":"EmwKAhgB"}"#);
        assert_eq!(opaque_text(&redacted), "");
    }
}
