//! The three wire formats: how events become the exact bytes a provider receives
//! (docs/design.md#p1-wire-formats).
//!
//! Bodies are compact JSON (no whitespace), keys in the order documented below, strings as
//! raw UTF-8 with only `"`, `\` and control characters escaped. No field is written that the
//! request did not ask for.
//!
//! # Format: `openai-chat`
//!
//! ```text
//! {"model":M,"messages":[MSG,…][,"tools":[TOOL,…]][,"max_completion_tokens":N]}
//! ```
//!
//! * `tools` only when tool definitions were given (written as given, compact);
//!   `max_completion_tokens` only when an output reservation was given.
//! * Messages, keys in this order:
//!   * `{"role":"system","content":S}`: the system prompt; notes (`"Note: …"`, pinned notes
//!     first, unpinned notes where they occur in history); the omission notice.
//!   * `{"role":"user","content":S}`: user messages; recalled pages; the current input.
//!   * `{"role":"assistant","content":S}`: assistant replies.
//!   * `{"role":"assistant"[,"content":S],"tool_calls":[{"id":ID,"type":"function",
//!     "function":{"name":NAME,"arguments":JSON-STRING}},…]}`: consecutive tool calls of a
//!     turn (with the assistant text just before them, if any), then one
//!     `{"role":"tool","tool_call_id":ID,"content":S}` per call, in call order. Arguments
//!     stored as a string (as OpenAI returns them) are sent verbatim; any other value as its
//!     compact JSON text.
//!
//! # Format: `anthropic-messages`
//!
//! ```text
//! {"model":M,"max_tokens":N[,"system":S],"messages":[MSG,…][,"tools":[TOOL,…]]}
//! ```
//!
//! * `max_tokens` is always written (Anthropic requires it): the output reservation, or
//!   [`DEFAULT_ANTHROPIC_MAX_TOKENS`](crate::DEFAULT_ANTHROPIC_MAX_TOKENS).
//! * Every message is `{"role":"user"|"assistant","content":[BLOCK,…]}`; blocks are
//!   `{"type":"text","text":S}`, `{"type":"tool_use","id":ID,"name":NAME,"input":OBJ}` and
//!   `{"type":"tool_result","tool_use_id":ID,"content":S[,"is_error":true]}`.
//! * There is no system role inside `messages`: notes, the notice and recalled pages are user
//!   text blocks. A history unit (turn or preamble) that would start with an assistant message
//!   (its user text is blank, and blank text blocks are left out) is opened with the user text
//!   [`NO_USER_MESSAGE`]. Consecutive messages of the same role are merged into one message (blocks
//!   concatenated in order) so roles alternate; tool results therefore always open their user
//!   message. Text blocks that are empty or whitespace only, which Anthropic rejects ("text
//!   content blocks must contain non-whitespace text"), are left out; so is a whitespace-only
//!   system prompt, and a whitespace-only current input is refused when the request is built.
//! * Tool arguments are sent as `input` when they are a JSON object, or a string holding a JSON
//!   object (OpenAI's form); anything else is sent as `{"value":ARGS}` (`input` must be an
//!   object).
//!
//! # Format: `openai-responses`
//!
//! ```text
//! {"model":M[,"instructions":S],"input":[ITEM,…][,"tools":[TOOL,…]][,"max_output_tokens":N]}
//! ```
//!
//! * `instructions` is the system prompt, when one is given; `tools` only when tool
//!   definitions were given (written as given: the Responses tool shape is
//!   `{"type":"function","name",…}`); `max_output_tokens` only when an output reservation was
//!   given.
//! * Input items, keys in this order:
//!   * `{"type":"message","role":"system"|"user","content":[{"type":"input_text","text":S}]}`:
//!     notes, the omission notice (`system`); user messages, recalled pages, the current input
//!     (`user`).
//!   * `{"type":"message","role":"assistant","content":S}`: assistant replies. The text is a
//!     plain string: an `output_text` part is valid only inside an output message carrying the
//!     `id` and `status` the API assigned, which a reply stored as text does not have.
//!   * `{"type":"function_call","call_id":ID,"name":NAME,"arguments":JSON-STRING}` per tool
//!     call (after the assistant text just before them, if any, as a message), then one
//!     `{"type":"function_call_output","call_id":ID,"output":S}` per call, in call order.
//!     Arguments are sent as for `openai-chat`.
//!
//! # Opaque provider items
//!
//! An `opaque` event (a Responses `reasoning` item, an Anthropic `thinking` block, …) is
//! written exactly as stored (compact, keys in their stored order) in its own format only: as
//! an `input` item in its place for `openai-responses`; as a content block of the assistant
//! message around it, in its place, for `anthropic-messages`. Any other format leaves it out
//! and the report counts it (`opaque_left_out`).
//!
//! An event carrying a `provider_item` (the provider's own output `message` or
//! `function_call` item, or `text` or `tool_use` block, with its `id`, `status` and any other
//! key; a user message's or note's Responses `message` with its content parts; a tool
//! result's `function_call_output`) is written the same way in the item's format, in place of
//! the item ctxlog would build from the event; every other format gets the event as above.
//!
//! # Tool results and interrupted calls (every format)
//!
//! A result's content is its text, preceded by one line
//! `[status=S exit_code=N artifact=NAME bytes=B recall seq=Q]` listing what applies when the
//! status is not `ok`, the exit code is not 0, or the output is stored as an artifact
//! (`recall seq=Q` only when the request offers the recall tool). A tool
//! call with no result in its turn is answered with the content `interrupted: effects unknown`
//! (and `is_error` for Anthropic): a call is never sent unpaired (docs/design.md#p5-whole-turns). A
//! result whose call is not in its turn is sent as user text `[tool result without a call in this
//! turn] …`. System markers (tombstones, retention, imports) are not sent.

use ctxlog_event::{ArtifactRef, Event, EventBody, OpaqueFormat, Part, ProviderItem, ToolStatus};
use serde_json::Value;

use crate::json::{value_to_string, write_str, write_u64, write_value};
use crate::options::WireFormat;

/// The content sent for a tool call whose result never arrived.
pub const INTERRUPTED_RESULT: &str = "interrupted: effects unknown";

/// What an Anthropic cache breakpoint adds inside the block it marks (before its closing
/// brace): the 5-minute `ephemeral` cache.
pub(crate) const CACHE_CONTROL: &[u8] = br#","cache_control":{"type":"ephemeral"}"#;

/// OpenAI's explicit cache breakpoint, as written on a content part (its default mode
/// keeps the implicit breakpoint, so no `prompt_cache_options` is needed).
pub(crate) const PROMPT_CACHE_BREAKPOINT: &[u8] =
    br#","prompt_cache_breakpoint":{"mode":"explicit"}"#;

/// The speaker of a format-neutral text item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// Application-side text (notes, notices): OpenAI `system`, Anthropic `user`.
    System,
    User,
    Assistant,
}

impl Role {
    /// The role's name in an OpenAI message.
    pub fn openai_name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub id: String,
    pub name: String,
    pub arguments: Value,
    /// The provider's own item for the call, sent instead in its format.
    pub provider_item: Option<ProviderItem>,
}

#[derive(Clone, Debug)]
pub(crate) struct Answer {
    pub call_id: String,
    pub content: String,
    pub is_error: bool,
    /// The result's parts (images, documents, more text), sent after `content` where the
    /// format allows them.
    pub parts: Vec<Part>,
    /// The provider's own item for the result, sent instead in its format.
    pub provider_item: Option<ProviderItem>,
}

/// A format-neutral piece of a body.
#[derive(Clone, Debug)]
pub(crate) enum Item {
    Text {
        role: Role,
        text: String,
    },
    Calls {
        text: Option<String>,
        /// The provider's own item for `text`, sent instead in its format.
        reply: Option<ProviderItem>,
        calls: Vec<Call>,
    },
    /// An assistant reply carrying the provider's own item: the item in its format, the text
    /// in any other.
    Reply {
        text: String,
        provider_item: ProviderItem,
    },
    Answers(Vec<Answer>),
    /// A user message with parts: its text (when not empty), then each part.
    Parts {
        role: Role,
        text: String,
        parts: Vec<Part>,
    },
    /// A user message or note carrying the provider's own item: the item in its format,
    /// `fallback` (the event's own rendering) in any other.
    Own {
        provider_item: ProviderItem,
        fallback: Box<Item>,
    },
    /// A provider item stored as given: sent verbatim in its own format, left out of any
    /// other.
    Opaque {
        format: OpaqueFormat,
        item: Value,
    },
}

impl Item {
    pub fn text(role: Role, text: impl Into<String>) -> Item {
        Item::Text {
            role,
            text: text.into(),
        }
    }

    /// `self`, or the provider's own item in its format when the event has one.
    pub fn or_own(self, given: Option<&ProviderItem>) -> Item {
        match given {
            Some(given) => Item::Own {
                provider_item: given.clone(),
                fallback: Box::new(self),
            },
            None => self,
        }
    }
}

/// The text a note is sent as.
pub(crate) fn note_text(text: &str) -> String {
    format!("Note: {text}")
}

/// Turns the events of one turn (or the preamble) into items. Pinned notes are skipped: they
/// are sent in the pinned block of every projection. System markers are skipped.
/// `recall_tool`: whether the request offers the recall tool, which a result's header then
/// names (docs/design.md#p13-true-words).
pub(crate) fn turn_items(events: &[Event], recall_tool: bool) -> Vec<Item> {
    let mut items = Vec::new();
    let mut answered = vec![false; events.len()];
    let mut i = 0;
    while i < events.len() {
        match &events[i].body {
            EventBody::User {
                text,
                parts,
                provider_item,
            } => items.push(
                if parts.is_empty() {
                    Item::text(Role::User, text.clone())
                } else {
                    Item::Parts {
                        role: Role::User,
                        text: text.clone(),
                        parts: parts.clone(),
                    }
                }
                .or_own(provider_item.as_ref()),
            ),
            EventBody::Assistant {
                text,
                provider_item,
            } => {
                if matches!(
                    events.get(i + 1).map(|e| &e.body),
                    Some(EventBody::ToolCall { .. })
                ) {
                    let reply = (Some(text.clone()), provider_item.clone());
                    i = push_calls(events, i + 1, reply, recall_tool, &mut answered, &mut items);
                    continue;
                }
                items.push(match provider_item {
                    Some(given) => Item::Reply {
                        text: text.clone(),
                        provider_item: given.clone(),
                    },
                    None => Item::text(Role::Assistant, text.clone()),
                });
            }
            EventBody::ToolCall { .. } => {
                i = push_calls(
                    events,
                    i,
                    (None, None),
                    recall_tool,
                    &mut answered,
                    &mut items,
                );
                continue;
            }
            EventBody::ToolResult { .. } if answered[i] => {}
            EventBody::ToolResult { .. } => {
                let text = format!(
                    "[tool result without a call in this turn] {}",
                    result_content(&events[i], recall_tool)
                );
                items.push(Item::text(Role::User, text));
            }
            EventBody::Note {
                text,
                pinned: false,
                provider_item,
                ..
            } => {
                items
                    .push(Item::text(Role::System, note_text(text)).or_own(provider_item.as_ref()));
            }
            EventBody::Opaque { format, item } => items.push(Item::Opaque {
                format: *format,
                item: Value::Object(item.clone()),
            }),
            EventBody::Note { .. } | EventBody::System { .. } => {}
        }
        i += 1;
    }
    items
}

/// Pushes the run of consecutive tool calls starting at `start` and their answers; returns the
/// index after the run.
fn push_calls(
    events: &[Event],
    start: usize,
    (text, reply): (Option<String>, Option<ProviderItem>),
    recall_tool: bool,
    answered: &mut [bool],
    items: &mut Vec<Item>,
) -> usize {
    let mut calls = Vec::new();
    let mut end = start;
    while let Some(EventBody::ToolCall {
        call_id,
        tool,
        arguments,
        provider_item,
    }) = events.get(end).map(|e| &e.body)
    {
        calls.push(Call {
            id: call_id.clone(),
            name: tool.clone(),
            arguments: arguments.clone(),
            provider_item: provider_item.clone(),
        });
        end += 1;
    }
    let answers = calls
        .iter()
        .map(|call| answer_for(events, end, &call.id, recall_tool, answered))
        .collect();
    items.push(Item::Calls { text, reply, calls });
    items.push(Item::Answers(answers));
    end
}

fn answer_for(
    events: &[Event],
    from: usize,
    call_id: &str,
    recall_tool: bool,
    answered: &mut [bool],
) -> Answer {
    let found = (from..events.len()).find(|&j| {
        !answered[j]
            && matches!(&events[j].body, EventBody::ToolResult { call_id: c, .. } if c == call_id)
    });
    match found {
        Some(j) => {
            answered[j] = true;
            let is_error = matches!(
                events[j].body,
                EventBody::ToolResult { status, .. } if status != ToolStatus::Ok
            );
            Answer {
                call_id: call_id.to_owned(),
                content: result_content(&events[j], recall_tool),
                is_error,
                parts: events[j].body.parts().to_vec(),
                provider_item: events[j].body.provider_item().cloned(),
            }
        }
        None => Answer {
            call_id: call_id.to_owned(),
            content: INTERRUPTED_RESULT.to_owned(),
            is_error: true,
            parts: Vec::new(),
            provider_item: None,
        },
    }
}

/// The content a tool result is sent with: its text, after a header line when the status is
/// not `ok`, the exit code is not 0, or there is an artifact (whose seq the header gives as
/// the recall tool's argument only when the request offers the tool).
pub(crate) fn result_content(event: &Event, recall_tool: bool) -> String {
    let EventBody::ToolResult {
        status,
        exit_code,
        text,
        artifact,
        ..
    } = &event.body
    else {
        return String::new();
    };
    match result_header(
        event.seq,
        *status,
        *exit_code,
        artifact.as_ref(),
        recall_tool,
    ) {
        Some(header) => format!("{header}\n{text}"),
        None => text.clone(),
    }
}

fn result_header(
    seq: u64,
    status: ToolStatus,
    exit_code: Option<i64>,
    artifact: Option<&ArtifactRef>,
    recall_tool: bool,
) -> Option<String> {
    let mut parts = Vec::new();
    if status != ToolStatus::Ok {
        parts.push(format!("status={}", status.as_str()));
    }
    if let Some(code) = exit_code.filter(|c| *c != 0) {
        parts.push(format!("exit_code={code}"));
    }
    if let Some(a) = artifact {
        parts.push(artifact_note(a, seq, recall_tool));
    }
    (!parts.is_empty()).then(|| format!("[{}]", parts.join(" ")))
}

/// How a result's header names its stored output: `artifact=NAME bytes=B`, then `recall
/// seq=Q` (the recall tool's argument) when the request offers the tool. Without the tool
/// nothing in the body tells the model to call one.
pub(crate) fn artifact_note(a: &ArtifactRef, seq: u64, recall_tool: bool) -> String {
    if recall_tool {
        format!("artifact={} bytes={} recall seq={seq}", a.name, a.bytes)
    } else {
        format!("artifact={} bytes={}", a.name, a.bytes)
    }
}

/// Which neighbours a message merges with: OpenAI messages never merge; an Anthropic message
/// merges with a neighbour of the same role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MergesWith {
    Nothing,
    User,
    Assistant,
}

/// The role of an Anthropic message (there is no system role inside `messages`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Speaker {
    User,
    Assistant,
}

impl Speaker {
    pub fn as_str(self) -> &'static str {
        match self {
            Speaker::User => "user",
            Speaker::Assistant => "assistant",
        }
    }
}

/// A tool call as OpenAI receives it: `arguments` is already the string sent.
#[derive(Clone, Debug)]
pub(crate) struct OpenAiCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One OpenAI message.
#[derive(Clone, Debug)]
pub(crate) enum OpenAiMsg {
    Text {
        role: Role,
        text: String,
    },
    /// A message whose `content` is a list of parts: its text (when not empty), then each
    /// part.
    Parts {
        role: Role,
        text: String,
        parts: Vec<Part>,
    },
    /// An assistant message with tool calls (and the text just before them, if any).
    Calls {
        text: Option<String>,
        calls: Vec<OpenAiCall>,
    },
    /// A `tool` message answering one call.
    ToolResult(Answer),
    /// A text message ending a reusable prefix: its text as one `text` part carrying
    /// `prompt_cache_breakpoint` ([`with_breakpoint`]).
    Breakpoint {
        role: Role,
        text: String,
    },
}

/// One item of a Responses `input` array.
#[derive(Clone, Debug)]
pub(crate) enum ResponsesItem {
    /// A `message` item.
    Message { role: Role, text: String },
    /// A `message` item whose content holds parts after its text.
    Parts {
        role: Role,
        text: String,
        parts: Vec<Part>,
    },
    /// A `function_call` item.
    Call(OpenAiCall),
    /// A `function_call_output` item.
    Output(Answer),
    /// An opaque item, written as stored.
    Opaque(Value),
    /// A `message` item (not the assistant's) ending a reusable prefix: its `input_text`
    /// part carries `prompt_cache_breakpoint` ([`with_breakpoint`]).
    Breakpoint { role: Role, text: String },
}

/// `msg` marked as the end of a reusable prefix with OpenAI's explicit breakpoint, if it can
/// carry one: a Chat Completions text message, or a Responses text message that is not the
/// assistant's (an assistant's `output_text` has no breakpoint in the published schema).
pub(crate) fn with_breakpoint(msg: &Msg) -> Option<Msg> {
    match msg {
        Msg::OpenAi(OpenAiMsg::Text { role, text }) => Some(Msg::OpenAi(OpenAiMsg::Breakpoint {
            role: *role,
            text: text.clone(),
        })),
        Msg::Responses(ResponsesItem::Message { role, text }) if *role != Role::Assistant => {
            Some(Msg::Responses(ResponsesItem::Breakpoint {
                role: *role,
                text: text.clone(),
            }))
        }
        _ => None,
    }
}

/// One content block of an Anthropic message.
#[derive(Clone, Debug)]
pub(crate) enum Block {
    Text(String),
    /// `input` is the object sent (see [`anthropic_input`]).
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult(Answer),
    /// An image or document (a text part is a [`Block::Text`]).
    Media(Part),
    /// An opaque block, written as stored.
    Opaque(Value),
    /// An Anthropic cache breakpoint on the block before it: written as that block's
    /// `cache_control` field, never as a block of its own.
    CacheBreak,
}

/// One rendered message: what is sent, in the shape of its format. Its bytes are written by
/// [`Msg::write`] (and inside a body by [`Envelope::write`]); the cost model counts its tokens
/// from these values.
#[derive(Clone, Debug)]
pub(crate) enum Msg {
    OpenAi(OpenAiMsg),
    Responses(ResponsesItem),
    Anthropic {
        speaker: Speaker,
        blocks: Vec<Block>,
    },
}

impl Msg {
    pub fn merges_with(&self) -> MergesWith {
        match self {
            Msg::OpenAi(_) | Msg::Responses(_) => MergesWith::Nothing,
            Msg::Anthropic {
                speaker: Speaker::User,
                ..
            } => MergesWith::User,
            Msg::Anthropic {
                speaker: Speaker::Assistant,
                ..
            } => MergesWith::Assistant,
        }
    }

    /// Appends the message, complete.
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            Msg::OpenAi(msg) => write_openai(out, msg),
            Msg::Responses(item) => write_responses(out, item),
            Msg::Anthropic { speaker, blocks } => {
                open_anthropic(out, *speaker);
                write_blocks(out, blocks, true);
                out.extend_from_slice(b"]}");
            }
        }
    }

    /// The message's bytes, complete.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }
}

/// How many bytes merging an Anthropic message into a same-role predecessor saves against
/// writing both whole with a comma between: its opening and the predecessor's closing `]}`,
/// less the comma between their blocks.
pub(crate) fn merge_saving(speaker: Speaker) -> i64 {
    let empty = Msg::Anthropic {
        speaker,
        blocks: Vec::new(),
    };
    // `{"role":R,"content":[` + `]}` is the opening and the closing; the comma remains.
    empty.to_bytes().len() as i64 - 1
}

/// Renders items as the messages of `format`, merging same-role Anthropic neighbours.
pub(crate) fn render(format: WireFormat, items: &[Item]) -> Vec<Msg> {
    let mut msgs = Vec::new();
    for item in items {
        match format {
            WireFormat::OpenAiChat => openai_item(item, &mut msgs),
            WireFormat::AnthropicMessages => anthropic_item(item, &mut msgs),
            WireFormat::OpenAiResponses => responses_item(item, &mut msgs),
        }
    }
    if matches!(
        msgs.first(),
        Some(Msg::Anthropic {
            speaker: Speaker::Assistant,
            ..
        })
    ) {
        let blocks = vec![Block::Text(NO_USER_MESSAGE.to_owned())];
        msgs.insert(
            0,
            Msg::Anthropic {
                speaker: Speaker::User,
                blocks,
            },
        );
    }
    merge_adjacent(msgs)
}

/// The user text Anthropic bodies put before an assistant message that would otherwise open a
/// history unit (a turn whose user text is empty, or a preamble with assistant content):
/// Anthropic requires the first message to be a user message.
pub const NO_USER_MESSAGE: &str = "[ctxlog] (no user message)";

/// Merges adjacent Anthropic messages of the same role.
fn merge_adjacent(msgs: Vec<Msg>) -> Vec<Msg> {
    let mut out: Vec<Msg> = Vec::with_capacity(msgs.len());
    for msg in msgs {
        if let (
            Some(Msg::Anthropic {
                speaker: last,
                blocks: into,
            }),
            Msg::Anthropic { speaker, blocks },
        ) = (out.last_mut(), &msg)
            && *last == *speaker
        {
            into.extend(blocks.iter().cloned());
            continue;
        }
        out.push(msg);
    }
    out
}

/// A provider item, when it belongs to `format`: what is sent there instead of the event's
/// own rendering.
fn own_item(given: Option<&ProviderItem>, format: OpaqueFormat) -> Option<Value> {
    given
        .filter(|g| g.format == format)
        .map(|g| Value::Object(g.item.clone()))
}

/// Calls as OpenAI sends them (arguments as a string).
fn openai_calls(calls: &[Call]) -> Vec<OpenAiCall> {
    calls
        .iter()
        .map(|call| OpenAiCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: openai_arguments(&call.arguments),
        })
        .collect()
}

fn openai_item(item: &Item, msgs: &mut Vec<Msg>) {
    match item {
        Item::Text { role, text } => msgs.push(Msg::OpenAi(OpenAiMsg::Text {
            role: *role,
            text: text.clone(),
        })),
        Item::Reply { text, .. } => msgs.push(Msg::OpenAi(OpenAiMsg::Text {
            role: Role::Assistant,
            text: text.clone(),
        })),
        Item::Calls { text, calls, .. } => {
            msgs.push(Msg::OpenAi(OpenAiMsg::Calls {
                text: text.clone(),
                calls: openai_calls(calls),
            }));
        }
        Item::Answers(answers) => msgs.extend(
            answers
                .iter()
                .map(|a| Msg::OpenAi(OpenAiMsg::ToolResult(a.clone()))),
        ),
        Item::Parts { role, text, parts } => msgs.push(Msg::OpenAi(OpenAiMsg::Parts {
            role: *role,
            text: text.clone(),
            parts: parts.clone(),
        })),
        Item::Own { fallback, .. } => openai_item(fallback, msgs),
        // Chat Completions has no place for another API's items.
        Item::Opaque { .. } => {}
    }
}

fn write_openai(m: &mut Vec<u8>, msg: &OpenAiMsg) {
    match msg {
        OpenAiMsg::Text { role, text } => {
            m.extend_from_slice(br#"{"role":"#);
            write_str(m, role.openai_name());
            m.extend_from_slice(br#","content":"#);
            write_str(m, text);
            m.push(b'}');
        }
        OpenAiMsg::Parts { role, text, parts } => {
            m.extend_from_slice(br#"{"role":"#);
            write_str(m, role.openai_name());
            m.extend_from_slice(br#","content":["#);
            write_parts(m, WireFormat::OpenAiChat, text, parts);
            m.extend_from_slice(b"]}");
        }
        OpenAiMsg::Calls { text, calls } => write_openai_calls(m, text.as_deref(), calls),
        OpenAiMsg::Breakpoint { role, text } => {
            m.extend_from_slice(br#"{"role":"#);
            write_str(m, role.openai_name());
            m.extend_from_slice(br#","content":[{"type":"text","text":"#);
            write_str(m, text);
            m.extend_from_slice(PROMPT_CACHE_BREAKPOINT);
            m.extend_from_slice(b"}]}");
        }
        OpenAiMsg::ToolResult(a) => {
            m.extend_from_slice(br#"{"role":"tool","tool_call_id":"#);
            write_str(m, &a.call_id);
            m.extend_from_slice(br#","content":"#);
            // A Chat Completions tool message carries text only: parts as their readable
            // text (`[image]`, `[document NAME]`).
            if a.parts.is_empty() {
                write_str(m, &a.content);
            } else {
                let marked = std::iter::once(a.content.clone())
                    .chain(a.parts.iter().map(Part::readable_text))
                    .collect::<Vec<_>>()
                    .join("\n");
                write_str(m, &marked);
            }
            m.push(b'}');
        }
    }
}

fn responses_item(item: &Item, msgs: &mut Vec<Msg>) {
    match item {
        Item::Text { role, text } => msgs.push(Msg::Responses(ResponsesItem::Message {
            role: *role,
            text: text.clone(),
        })),
        Item::Reply {
            text,
            provider_item,
        } => msgs.push(Msg::Responses(
            match own_item(Some(provider_item), OpaqueFormat::OpenaiResponses) {
                Some(item) => ResponsesItem::Opaque(item),
                None => ResponsesItem::Message {
                    role: Role::Assistant,
                    text: text.clone(),
                },
            },
        )),
        Item::Calls { text, reply, calls } => {
            if let Some(item) = own_item(reply.as_ref(), OpaqueFormat::OpenaiResponses) {
                msgs.push(Msg::Responses(ResponsesItem::Opaque(item)));
            } else if let Some(text) = text.as_ref().filter(|t| !t.is_empty()) {
                msgs.push(Msg::Responses(ResponsesItem::Message {
                    role: Role::Assistant,
                    text: text.clone(),
                }));
            }
            msgs.extend(calls.iter().zip(openai_calls(calls)).map(|(call, sent)| {
                Msg::Responses(
                    match own_item(call.provider_item.as_ref(), OpaqueFormat::OpenaiResponses) {
                        Some(item) => ResponsesItem::Opaque(item),
                        None => ResponsesItem::Call(sent),
                    },
                )
            }));
        }
        Item::Answers(answers) => msgs.extend(answers.iter().map(|a| {
            Msg::Responses(
                match own_item(a.provider_item.as_ref(), OpaqueFormat::OpenaiResponses) {
                    Some(item) => ResponsesItem::Opaque(item),
                    None => ResponsesItem::Output(a.clone()),
                },
            )
        })),
        Item::Own {
            provider_item,
            fallback,
        } => match own_item(Some(provider_item), OpaqueFormat::OpenaiResponses) {
            Some(item) => msgs.push(Msg::Responses(ResponsesItem::Opaque(item))),
            None => responses_item(fallback, msgs),
        },
        Item::Parts { role, text, parts } => msgs.push(Msg::Responses(ResponsesItem::Parts {
            role: *role,
            text: text.clone(),
            parts: parts.clone(),
        })),
        Item::Opaque {
            format: OpaqueFormat::OpenaiResponses,
            item,
        } => msgs.push(Msg::Responses(ResponsesItem::Opaque(item.clone()))),
        Item::Opaque { .. } => {}
    }
}

fn write_responses(m: &mut Vec<u8>, item: &ResponsesItem) {
    match item {
        ResponsesItem::Message {
            role: Role::Assistant,
            text,
        } => {
            m.extend_from_slice(br#"{"type":"message","role":"assistant","content":"#);
            write_str(m, text);
        }
        ResponsesItem::Message { role, text } => {
            m.extend_from_slice(br#"{"type":"message","role":"#);
            write_str(m, role.openai_name());
            m.extend_from_slice(br#","content":[{"type":"input_text","text":"#);
            write_str(m, text);
            m.extend_from_slice(b"}]");
        }
        ResponsesItem::Breakpoint { role, text } => {
            m.extend_from_slice(br#"{"type":"message","role":"#);
            write_str(m, role.openai_name());
            m.extend_from_slice(br#","content":[{"type":"input_text","text":"#);
            write_str(m, text);
            m.extend_from_slice(PROMPT_CACHE_BREAKPOINT);
            m.extend_from_slice(b"}]");
        }
        ResponsesItem::Parts { role, text, parts } => {
            m.extend_from_slice(br#"{"type":"message","role":"#);
            write_str(m, role.openai_name());
            m.extend_from_slice(br#","content":["#);
            write_parts(m, WireFormat::OpenAiResponses, text, parts);
            m.push(b']');
        }
        ResponsesItem::Call(call) => {
            m.extend_from_slice(br#"{"type":"function_call","call_id":"#);
            write_str(m, &call.id);
            m.extend_from_slice(br#","name":"#);
            write_str(m, &call.name);
            m.extend_from_slice(br#","arguments":"#);
            write_str(m, &call.arguments);
        }
        ResponsesItem::Output(answer) => {
            m.extend_from_slice(br#"{"type":"function_call_output","call_id":"#);
            write_str(m, &answer.call_id);
            m.extend_from_slice(br#","output":"#);
            if answer.parts.is_empty() {
                write_str(m, &answer.content);
            } else {
                m.push(b'[');
                write_parts(
                    m,
                    WireFormat::OpenAiResponses,
                    &answer.content,
                    &answer.parts,
                );
                m.push(b']');
            }
        }
        ResponsesItem::Opaque(item) => return write_value(m, item),
    }
    m.push(b'}');
}

fn write_openai_calls(m: &mut Vec<u8>, text: Option<&str>, calls: &[OpenAiCall]) {
    m.extend_from_slice(br#"{"role":"assistant""#);
    if let Some(text) = text {
        m.extend_from_slice(br#","content":"#);
        write_str(m, text);
    }
    m.extend_from_slice(br#","tool_calls":["#);
    for (i, call) in calls.iter().enumerate() {
        if i > 0 {
            m.push(b',');
        }
        m.extend_from_slice(br#"{"id":"#);
        write_str(m, &call.id);
        m.extend_from_slice(br#","type":"function","function":{"name":"#);
        write_str(m, &call.name);
        m.extend_from_slice(br#","arguments":"#);
        write_str(m, &call.arguments);
        m.extend_from_slice(b"}}");
    }
    m.extend_from_slice(b"]}");
}

fn anthropic_item(item: &Item, msgs: &mut Vec<Msg>) {
    match item {
        Item::Text { text, .. } if is_blank(text) => {}
        Item::Text { role, text } => {
            let speaker = if *role == Role::Assistant {
                Speaker::Assistant
            } else {
                Speaker::User
            };
            msgs.push(Msg::Anthropic {
                speaker,
                blocks: vec![Block::Text(text.clone())],
            });
        }
        Item::Reply {
            text,
            provider_item,
        } => match own_item(Some(provider_item), OpaqueFormat::AnthropicMessages) {
            Some(item) => msgs.push(Msg::Anthropic {
                speaker: Speaker::Assistant,
                blocks: vec![Block::Opaque(item)],
            }),
            None => anthropic_item(&Item::text(Role::Assistant, text.clone()), msgs),
        },
        Item::Calls { text, reply, calls } => {
            let mut blocks: Vec<Block> =
                match own_item(reply.as_ref(), OpaqueFormat::AnthropicMessages) {
                    Some(item) => vec![Block::Opaque(item)],
                    None => text
                        .iter()
                        .filter(|t| !is_blank(t))
                        .map(|t| Block::Text(t.clone()))
                        .collect(),
                };
            blocks.extend(calls.iter().map(|call| {
                match own_item(call.provider_item.as_ref(), OpaqueFormat::AnthropicMessages) {
                    Some(item) => Block::Opaque(item),
                    None => Block::ToolUse {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        input: anthropic_input(&call.arguments),
                    },
                }
            }));
            msgs.push(Msg::Anthropic {
                speaker: Speaker::Assistant,
                blocks,
            });
        }
        Item::Answers(answers) => {
            let blocks = answers.iter().cloned().map(Block::ToolResult).collect();
            msgs.push(Msg::Anthropic {
                speaker: Speaker::User,
                blocks,
            });
        }
        Item::Parts { role, text, parts } => {
            let speaker = if *role == Role::Assistant {
                Speaker::Assistant
            } else {
                Speaker::User
            };
            let blocks = anthropic_blocks(text, parts);
            if !blocks.is_empty() {
                msgs.push(Msg::Anthropic { speaker, blocks });
            }
        }
        // A user message's or note's own item is never an Anthropic one (the ledger allows
        // none): the event's own rendering.
        Item::Own { fallback, .. } => anthropic_item(fallback, msgs),
        // An assistant block (thinking, server tool use and its result): it merges into the
        // assistant message around it, in its place.
        Item::Opaque {
            format: OpaqueFormat::AnthropicMessages,
            item,
        } => msgs.push(Msg::Anthropic {
            speaker: Speaker::Assistant,
            blocks: vec![Block::Opaque(item.clone())],
        }),
        Item::Opaque { .. } => {}
    }
}

/// Whether Anthropic would reject `text` as a text block: empty or whitespace only
/// ("text content blocks must contain non-whitespace text").
pub(crate) fn is_blank(text: &str) -> bool {
    text.trim().is_empty()
}

/// Appends `{"role":R,"content":[`.
fn open_anthropic(out: &mut Vec<u8>, speaker: Speaker) {
    out.extend_from_slice(br#"{"role":"#);
    write_str(out, speaker.as_str());
    out.extend_from_slice(br#","content":["#);
}

/// Appends blocks separated by commas (and one before the first unless `first`).
fn write_blocks(out: &mut Vec<u8>, blocks: &[Block], first: bool) {
    for (i, block) in blocks.iter().enumerate() {
        if matches!(block, Block::CacheBreak) {
            // The previous block's closing brace moves after its `cache_control`.
            if out.last() == Some(&b'}') {
                out.pop();
                out.extend_from_slice(CACHE_CONTROL);
                out.push(b'}');
            }
            continue;
        }
        if i > 0 || !first {
            out.push(b',');
        }
        write_block(out, block);
    }
}

pub(crate) fn write_block(b: &mut Vec<u8>, block: &Block) {
    match block {
        Block::Text(text) => {
            b.extend_from_slice(br#"{"type":"text","text":"#);
            write_str(b, text);
        }
        Block::ToolUse { id, name, input } => {
            b.extend_from_slice(br#"{"type":"tool_use","id":"#);
            write_str(b, id);
            b.extend_from_slice(br#","name":"#);
            write_str(b, name);
            b.extend_from_slice(br#","input":"#);
            write_value(b, input);
        }
        Block::ToolResult(answer) => {
            b.extend_from_slice(br#"{"type":"tool_result","tool_use_id":"#);
            write_str(b, &answer.call_id);
            b.extend_from_slice(br#","content":"#);
            if answer.parts.is_empty() {
                write_str(b, &answer.content);
            } else {
                b.push(b'[');
                let blocks = anthropic_blocks(&answer.content, &answer.parts);
                write_blocks(b, &blocks, true);
                b.push(b']');
            }
            if answer.is_error {
                b.extend_from_slice(br#","is_error":true"#);
            }
        }
        Block::Media(part) => return write_part(b, WireFormat::AnthropicMessages, part),
        Block::Opaque(item) => return write_value(b, item),
        Block::CacheBreak => return,
    }
    b.push(b'}');
}

/// The Anthropic blocks of a text and its parts: text blocks (blank ones left out, as
/// Anthropic rejects them) and image or document blocks.
fn anthropic_blocks(text: &str, parts: &[Part]) -> Vec<Block> {
    let text = (!is_blank(text)).then(|| Block::Text(text.to_owned()));
    let parts = parts.iter().filter_map(|p| match p {
        Part::Text { text } if is_blank(text) => None,
        Part::Text { text } => Some(Block::Text(text.clone())),
        media => Some(Block::Media(media.clone())),
    });
    text.into_iter().chain(parts).collect()
}

/// Appends a content list's parts for an OpenAI format, comma-separated: `text` as the first
/// text part (when not empty), then each part.
fn write_parts(m: &mut Vec<u8>, format: WireFormat, text: &str, parts: &[Part]) {
    let text_type = match format {
        WireFormat::OpenAiResponses => "input_text",
        _ => "text",
    };
    let mut first = true;
    let mut comma = |m: &mut Vec<u8>| {
        if !std::mem::take(&mut first) {
            m.push(b',');
        }
    };
    if !text.is_empty() {
        comma(m);
        write_text_part(m, text_type, text);
    }
    for part in parts {
        comma(m);
        match part {
            Part::Text { text } => write_text_part(m, text_type, text),
            media => write_part(m, format, media),
        }
    }
}

fn write_text_part(m: &mut Vec<u8>, text_type: &str, text: &str) {
    m.extend_from_slice(br#"{"type":"#);
    write_str(m, text_type);
    m.extend_from_slice(br#","text":"#);
    write_str(m, text);
    m.push(b'}');
}

/// Where a media part's bytes come from, as sent.
enum Source<'p> {
    Url(&'p str),
    Base64 {
        media_type: &'p str,
        data: &'p str,
    },
    /// Neither a URL nor bytes: a part whose artifact was not read back (a history that reads
    /// no artifacts). Sent as the text of its marker.
    Missing,
}

fn source(part: &Part) -> Source<'_> {
    match part {
        Part::Image { url: Some(url), .. } => match ctxlog_event::media::split_data_url(url) {
            Some((media_type, data)) => Source::Base64 { media_type, data },
            None => Source::Url(url),
        },
        Part::Image {
            data: Some(data),
            media_type: Some(media_type),
            ..
        }
        | Part::Document {
            data: Some(data),
            media_type,
            ..
        } => Source::Base64 { media_type, data },
        _ => Source::Missing,
    }
}

/// Writes `data:MEDIA_TYPE;base64,DATA` as a JSON string.
fn write_data_url(m: &mut Vec<u8>, media_type: &str, data: &str) {
    write_str(m, &format!("data:{media_type};base64,{data}"));
}

/// Appends one image or document part in `format`'s shape (a text part is written by the
/// caller).
fn write_part(m: &mut Vec<u8>, format: WireFormat, part: &Part) {
    let src = source(part);
    if matches!(src, Source::Missing) || matches!(part, Part::Text { .. }) {
        let text_type = match format {
            WireFormat::OpenAiResponses => "input_text",
            _ => "text",
        };
        return write_text_part(m, text_type, &part.readable_text());
    }
    match (format, part) {
        (WireFormat::OpenAiChat, Part::Image { detail, .. }) => {
            m.extend_from_slice(br#"{"type":"image_url","image_url":{"url":"#);
            match src {
                Source::Url(url) => write_str(m, url),
                Source::Base64 { media_type, data } => write_data_url(m, media_type, data),
                Source::Missing => {}
            }
            if let Some(detail) = detail {
                m.extend_from_slice(br#","detail":"#);
                write_str(m, detail.as_str());
            }
            m.extend_from_slice(b"}}");
        }
        (WireFormat::OpenAiResponses, Part::Image { detail, .. }) => {
            m.extend_from_slice(br#"{"type":"input_image","image_url":"#);
            match src {
                Source::Url(url) => write_str(m, url),
                Source::Base64 { media_type, data } => write_data_url(m, media_type, data),
                Source::Missing => {}
            }
            m.extend_from_slice(br#","detail":"#);
            write_str(m, detail.unwrap_or_default().as_str());
            m.push(b'}');
        }
        (WireFormat::AnthropicMessages, Part::Image { .. }) => {
            m.extend_from_slice(br#"{"type":"image","source":"#);
            write_anthropic_source(m, &src);
            m.push(b'}');
        }
        (WireFormat::OpenAiChat, Part::Document { name, .. }) => {
            m.extend_from_slice(br#"{"type":"file","file":{"filename":"#);
            write_str(m, &document_name(name.as_deref()));
            m.extend_from_slice(br#","file_data":"#);
            if let Source::Base64 { media_type, data } = src {
                write_data_url(m, media_type, data);
            }
            m.extend_from_slice(b"}}");
        }
        (WireFormat::OpenAiResponses, Part::Document { name, .. }) => {
            m.extend_from_slice(br#"{"type":"input_file","filename":"#);
            write_str(m, &document_name(name.as_deref()));
            m.extend_from_slice(br#","file_data":"#);
            if let Source::Base64 { media_type, data } = src {
                write_data_url(m, media_type, data);
            }
            m.push(b'}');
        }
        (WireFormat::AnthropicMessages, Part::Document { name, .. }) => {
            m.extend_from_slice(br#"{"type":"document","source":"#);
            write_anthropic_source(m, &src);
            if let Some(name) = name {
                m.extend_from_slice(br#","title":"#);
                write_str(m, name);
            }
            m.push(b'}');
        }
        (_, Part::Text { .. }) => {}
    }
}

/// The file name an OpenAI file part is sent with: the part's `name`, else `document.pdf`.
fn document_name(name: Option<&str>) -> String {
    name.unwrap_or("document.pdf").to_owned()
}

fn write_anthropic_source(m: &mut Vec<u8>, src: &Source<'_>) {
    match src {
        Source::Url(url) => {
            m.extend_from_slice(br#"{"type":"url","url":"#);
            write_str(m, url);
        }
        Source::Base64 { media_type, data } => {
            m.extend_from_slice(br#"{"type":"base64","media_type":"#);
            write_str(m, media_type);
            m.extend_from_slice(br#","data":"#);
            write_str(m, data);
        }
        Source::Missing => m.push(b'{'),
    }
    m.push(b'}');
}

/// OpenAI's `arguments` string: a string is taken to be that string already (as OpenAI's API
/// returns it) and sent verbatim; any other value is sent as its compact JSON text.
pub(crate) fn openai_arguments(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        other => value_to_string(other),
    }
}

/// Anthropic's `input` object: the arguments if they are an object, or the object a string of
/// arguments encodes (OpenAI's form); anything else as `{"value":ARGS}`.
fn anthropic_input(arguments: &Value) -> Value {
    let object = match arguments {
        Value::Object(_) => Some(arguments.clone()),
        Value::String(text) => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object),
        _ => None,
    };
    object.unwrap_or_else(|| {
        let mut wrapper = serde_json::Map::new();
        wrapper.insert("value".to_owned(), arguments.clone());
        Value::Object(wrapper)
    })
}

/// Everything around the messages array: model, output limit, Anthropic system or Responses
/// instructions, tools.
#[derive(Clone, Debug)]
pub(crate) struct Envelope {
    pub format: WireFormat,
    pub model: String,
    /// The output limit field's value; always set for Anthropic, which requires the field
    /// (the request supplies its default).
    pub output_limit: Option<u64>,
    /// The top-level system prompt: Anthropic's `system`, Responses' `instructions` (OpenAI
    /// chat sends it as a message).
    pub system: Option<String>,
    pub tools: Vec<Value>,
    /// Other top-level fields, written as given after the projector's own.
    pub fields: serde_json::Map<String, Value>,
    /// Anthropic's `system` written as one text block with a cache breakpoint.
    pub cache_system: bool,
}

impl Envelope {
    fn open(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(br#"{"model":"#);
        write_str(out, &self.model);
        if self.format == WireFormat::OpenAiResponses {
            if let Some(system) = &self.system {
                out.extend_from_slice(br#","instructions":"#);
                write_str(out, system);
            }
            out.extend_from_slice(br#","input":["#);
            return;
        }
        if self.format == WireFormat::AnthropicMessages {
            if let Some(n) = self.output_limit {
                out.extend_from_slice(br#","max_tokens":"#);
                write_u64(out, n);
            }
            if let Some(system) = &self.system {
                out.extend_from_slice(br#","system":"#);
                if self.cache_system {
                    out.extend_from_slice(br#"[{"type":"text","text":"#);
                    write_str(out, system);
                    out.extend_from_slice(CACHE_CONTROL);
                    out.extend_from_slice(b"}]");
                } else {
                    write_str(out, system);
                }
            }
        }
        out.extend_from_slice(br#","messages":["#);
    }

    fn close(&self, out: &mut Vec<u8>) {
        out.push(b']');
        if !self.tools.is_empty() {
            out.extend_from_slice(br#","tools":["#);
            for (i, tool) in self.tools.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, tool);
            }
            out.push(b']');
        }
        match (self.format, self.output_limit) {
            (WireFormat::OpenAiChat, Some(n)) => {
                out.extend_from_slice(br#","max_completion_tokens":"#);
                write_u64(out, n);
            }
            (WireFormat::OpenAiResponses, Some(n)) => {
                out.extend_from_slice(br#","max_output_tokens":"#);
                write_u64(out, n);
            }
            _ => {}
        }
        for (key, value) in &self.fields {
            out.push(b',');
            write_str(out, key);
            out.push(b':');
            write_value(out, value);
        }
        out.push(b'}');
    }

    /// Writes the whole body: the envelope around `msgs`, merging same-role Anthropic
    /// neighbours as it goes.
    pub fn write(&self, msgs: Vec<Msg>) -> Vec<u8> {
        self.write_iter(msgs.iter())
    }

    /// [`write`](Self::write) over borrowed messages.
    pub fn write_iter<'m>(&self, msgs: impl Iterator<Item = &'m Msg>) -> Vec<u8> {
        let mut out = Vec::new();
        self.open(&mut out);
        let mut open: Option<Speaker> = None;
        let mut first = true;
        for msg in msgs {
            match msg {
                Msg::Anthropic { speaker, blocks } if open == Some(*speaker) => {
                    write_blocks(&mut out, blocks, false);
                }
                Msg::Anthropic { speaker, blocks } => {
                    close_message(&mut out, open.take());
                    if !std::mem::take(&mut first) {
                        out.push(b',');
                    }
                    open_anthropic(&mut out, *speaker);
                    write_blocks(&mut out, blocks, true);
                    open = Some(*speaker);
                }
                Msg::OpenAi(_) | Msg::Responses(_) => {
                    close_message(&mut out, open.take());
                    if !std::mem::take(&mut first) {
                        out.push(b',');
                    }
                    msg.write(&mut out);
                }
            }
        }
        close_message(&mut out, open);
        self.close(&mut out);
        out
    }
}

/// Closes an open Anthropic message (`]}`), if one is open.
fn close_message(out: &mut Vec<u8>, open: Option<Speaker>) {
    if open.is_some() {
        out.extend_from_slice(b"]}");
    }
}
