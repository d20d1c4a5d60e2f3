//! The two wire formats: how events become the exact bytes a provider receives (SPEC P1).
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
//! # Tool results and interrupted calls (both formats)
//!
//! A result's content is its text, preceded by one line
//! `[status=S exit_code=N artifact=NAME bytes=B recall seq=Q]` listing what applies when the
//! status is not `ok`, the exit code is not 0, or the output is stored as an artifact. A tool
//! call with no result in its turn is answered with the content `interrupted: effects unknown`
//! (and `is_error` for Anthropic): a call is never sent unpaired (SPEC P5). A result whose call
//! is not in its turn is sent as user text `[tool result without a call in this turn] …`.
//! System markers (tombstones, retention, imports) are not sent.

use ctxlog_event::{ArtifactRef, Event, EventBody, ToolStatus};
use serde_json::Value;

use crate::json::{value_to_string, write_str, write_u64, write_value};
use crate::options::{Tokenizer, WireFormat};
use crate::tokens::{message_tokens, text_tokens, tools_tokens};

/// The content sent for a tool call whose result never arrived.
pub const INTERRUPTED_RESULT: &str = "interrupted: effects unknown";

/// The speaker of a format-neutral text item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// Application-side text (notes, notices): OpenAI `system`, Anthropic `user`.
    System,
    User,
    Assistant,
}

#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

#[derive(Clone, Debug)]
pub(crate) struct Answer {
    pub call_id: String,
    pub content: String,
    pub is_error: bool,
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
        calls: Vec<Call>,
    },
    Answers(Vec<Answer>),
}

impl Item {
    pub fn text(role: Role, text: impl Into<String>) -> Item {
        Item::Text {
            role,
            text: text.into(),
        }
    }
}

/// The text a note is sent as.
pub(crate) fn note_text(text: &str) -> String {
    format!("Note: {text}")
}

/// Turns the events of one turn (or the preamble) into items. Pinned notes are skipped: they
/// are sent in the pinned block of every projection. System markers are skipped.
pub(crate) fn turn_items(events: &[Event]) -> Vec<Item> {
    let mut items = Vec::new();
    let mut answered = vec![false; events.len()];
    let mut i = 0;
    while i < events.len() {
        match &events[i].body {
            EventBody::User { text } => items.push(Item::text(Role::User, text.clone())),
            EventBody::Assistant { text } => {
                if matches!(
                    events.get(i + 1).map(|e| &e.body),
                    Some(EventBody::ToolCall { .. })
                ) {
                    i = push_calls(events, i + 1, Some(text.clone()), &mut answered, &mut items);
                    continue;
                }
                items.push(Item::text(Role::Assistant, text.clone()));
            }
            EventBody::ToolCall { .. } => {
                i = push_calls(events, i, None, &mut answered, &mut items);
                continue;
            }
            EventBody::ToolResult { .. } if answered[i] => {}
            EventBody::ToolResult { .. } => {
                let text = format!(
                    "[tool result without a call in this turn] {}",
                    result_content(&events[i])
                );
                items.push(Item::text(Role::User, text));
            }
            EventBody::Note {
                text,
                pinned: false,
                ..
            } => {
                items.push(Item::text(Role::System, note_text(text)));
            }
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
    text: Option<String>,
    answered: &mut [bool],
    items: &mut Vec<Item>,
) -> usize {
    let mut calls = Vec::new();
    let mut end = start;
    while let Some(EventBody::ToolCall {
        call_id,
        tool,
        arguments,
    }) = events.get(end).map(|e| &e.body)
    {
        calls.push(Call {
            id: call_id.clone(),
            name: tool.clone(),
            arguments: arguments.clone(),
        });
        end += 1;
    }
    let answers = calls
        .iter()
        .map(|call| answer_for(events, end, &call.id, answered))
        .collect();
    items.push(Item::Calls { text, calls });
    items.push(Item::Answers(answers));
    end
}

fn answer_for(events: &[Event], from: usize, call_id: &str, answered: &mut [bool]) -> Answer {
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
                content: result_content(&events[j]),
                is_error,
            }
        }
        None => Answer {
            call_id: call_id.to_owned(),
            content: INTERRUPTED_RESULT.to_owned(),
            is_error: true,
        },
    }
}

/// The content a tool result is sent with: its text, after a header line when the status is
/// not `ok`, the exit code is not 0, or there is an artifact.
pub(crate) fn result_content(event: &Event) -> String {
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
    match result_header(event.seq, *status, *exit_code, artifact.as_ref()) {
        Some(header) => format!("{header}\n{text}"),
        None => text.clone(),
    }
}

fn result_header(
    seq: u64,
    status: ToolStatus,
    exit_code: Option<i64>,
    artifact: Option<&ArtifactRef>,
) -> Option<String> {
    let mut parts = Vec::new();
    if status != ToolStatus::Ok {
        parts.push(format!("status={}", status.as_str()));
    }
    if let Some(code) = exit_code.filter(|c| *c != 0) {
        parts.push(format!("exit_code={code}"));
    }
    if let Some(a) = artifact {
        parts.push(format!(
            "artifact={} bytes={} recall seq={seq}",
            a.name, a.bytes
        ));
    }
    (!parts.is_empty()).then(|| format!("[{}]", parts.join(" ")))
}

/// How a message's ends join its neighbours: OpenAI messages never merge; Anthropic messages
/// merge with a neighbour of the same role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Edge {
    Solid,
    User,
    Assistant,
}

impl Edge {
    fn role(self) -> &'static str {
        match self {
            Edge::Assistant => "assistant",
            Edge::User | Edge::Solid => "user",
        }
    }
}

/// One rendered message.
#[derive(Clone, Debug)]
pub(crate) enum Msg {
    /// An OpenAI message, complete.
    Whole(Vec<u8>),
    /// An Anthropic message: its role and content blocks, each complete.
    Blocks { edge: Edge, blocks: Vec<Vec<u8>> },
}

impl Msg {
    fn edge(&self) -> Edge {
        match self {
            Msg::Whole(_) => Edge::Solid,
            Msg::Blocks { edge, .. } => *edge,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Msg::Whole(bytes) => out.extend_from_slice(bytes),
            Msg::Blocks { edge, blocks } => {
                out.extend_from_slice(br#"{"role":"#);
                write_str(out, edge.role());
                out.extend_from_slice(br#","content":["#);
                for (i, block) in blocks.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(block);
                }
                out.extend_from_slice(b"]}");
            }
        }
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }
}

/// Renders items as the messages of `format`, merging same-role Anthropic neighbours.
pub(crate) fn render(format: WireFormat, items: &[Item]) -> Vec<Msg> {
    let mut msgs = Vec::new();
    for item in items {
        match format {
            WireFormat::OpenAiChat => openai_item(item, &mut msgs),
            WireFormat::AnthropicMessages => anthropic_item(item, &mut msgs),
        }
    }
    if matches!(
        msgs.first(),
        Some(Msg::Blocks {
            edge: Edge::Assistant,
            ..
        })
    ) {
        let blocks = vec![text_block(NO_USER_MESSAGE)];
        msgs.insert(
            0,
            Msg::Blocks {
                edge: Edge::User,
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
pub(crate) fn merge_adjacent(msgs: Vec<Msg>) -> Vec<Msg> {
    let mut out: Vec<Msg> = Vec::with_capacity(msgs.len());
    for msg in msgs {
        if let (
            Some(Msg::Blocks {
                edge: last,
                blocks: into,
            }),
            Msg::Blocks { edge, blocks },
        ) = (out.last_mut(), &msg)
            && *last == *edge
        {
            into.extend(blocks.iter().cloned());
            continue;
        }
        out.push(msg);
    }
    out
}

fn openai_role(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn openai_item(item: &Item, msgs: &mut Vec<Msg>) {
    match item {
        Item::Text { role, text } => {
            let mut m = Vec::new();
            m.extend_from_slice(br#"{"role":"#);
            write_str(&mut m, openai_role(*role));
            m.extend_from_slice(br#","content":"#);
            write_str(&mut m, text);
            m.push(b'}');
            msgs.push(Msg::Whole(m));
        }
        Item::Calls { text, calls } => msgs.push(Msg::Whole(openai_calls(text.as_deref(), calls))),
        Item::Answers(answers) => {
            for a in answers {
                let mut m = Vec::new();
                m.extend_from_slice(br#"{"role":"tool","tool_call_id":"#);
                write_str(&mut m, &a.call_id);
                m.extend_from_slice(br#","content":"#);
                write_str(&mut m, &a.content);
                m.push(b'}');
                msgs.push(Msg::Whole(m));
            }
        }
    }
}

fn openai_calls(text: Option<&str>, calls: &[Call]) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(br#"{"role":"assistant""#);
    if let Some(text) = text {
        m.extend_from_slice(br#","content":"#);
        write_str(&mut m, text);
    }
    m.extend_from_slice(br#","tool_calls":["#);
    for (i, call) in calls.iter().enumerate() {
        if i > 0 {
            m.push(b',');
        }
        m.extend_from_slice(br#"{"id":"#);
        write_str(&mut m, &call.id);
        m.extend_from_slice(br#","type":"function","function":{"name":"#);
        write_str(&mut m, &call.name);
        m.extend_from_slice(br#","arguments":"#);
        write_str(&mut m, &openai_arguments(&call.arguments));
        m.extend_from_slice(b"}}");
    }
    m.extend_from_slice(b"]}");
    m
}

fn text_block(text: &str) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(br#"{"type":"text","text":"#);
    write_str(&mut b, text);
    b.push(b'}');
    b
}

fn anthropic_item(item: &Item, msgs: &mut Vec<Msg>) {
    match item {
        Item::Text { text, .. } if is_blank(text) => {}
        Item::Text { role, text } => {
            let edge = if *role == Role::Assistant {
                Edge::Assistant
            } else {
                Edge::User
            };
            msgs.push(Msg::Blocks {
                edge,
                blocks: vec![text_block(text)],
            });
        }
        Item::Calls { text, calls } => {
            let mut blocks: Vec<Vec<u8>> = text
                .iter()
                .filter(|t| !is_blank(t))
                .map(|t| text_block(t))
                .collect();
            blocks.extend(calls.iter().map(tool_use_block));
            msgs.push(Msg::Blocks {
                edge: Edge::Assistant,
                blocks,
            });
        }
        Item::Answers(answers) => {
            let blocks = answers.iter().map(tool_result_block).collect();
            msgs.push(Msg::Blocks {
                edge: Edge::User,
                blocks,
            });
        }
    }
}

/// Whether Anthropic would reject `text` as a text block: empty or whitespace only
/// ("text content blocks must contain non-whitespace text").
pub(crate) fn is_blank(text: &str) -> bool {
    text.trim().is_empty()
}

fn tool_use_block(call: &Call) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(br#"{"type":"tool_use","id":"#);
    write_str(&mut b, &call.id);
    b.extend_from_slice(br#","name":"#);
    write_str(&mut b, &call.name);
    b.extend_from_slice(br#","input":"#);
    match anthropic_input(&call.arguments) {
        Some(object) => write_value(&mut b, &object),
        None => {
            b.extend_from_slice(br#"{"value":"#);
            write_value(&mut b, &call.arguments);
            b.push(b'}');
        }
    }
    b.push(b'}');
    b
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
/// arguments encodes (OpenAI's form); `None` when there is no object to send.
fn anthropic_input(arguments: &Value) -> Option<Value> {
    match arguments {
        Value::Object(_) => Some(arguments.clone()),
        Value::String(text) => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object),
        _ => None,
    }
}

fn tool_result_block(answer: &Answer) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(br#"{"type":"tool_result","tool_use_id":"#);
    write_str(&mut b, &answer.call_id);
    b.extend_from_slice(br#","content":"#);
    write_str(&mut b, &answer.content);
    if answer.is_error {
        b.extend_from_slice(br#","is_error":true"#);
    }
    b.push(b'}');
    b
}

/// The size of a run of messages, and how its ends join neighbours.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cost {
    pub bytes: i64,
    pub tokens: i64,
    /// The first and last message's edges; `None` for an empty run.
    pub ends: Option<(Edge, Edge)>,
}

impl Cost {
    /// The cost of `msgs` written one after another (already merged).
    pub fn of(format: WireFormat, tokenizer: Tokenizer, msgs: &[Msg]) -> Cost {
        let mut cost = Cost::default();
        for msg in msgs {
            let bytes = msg.to_bytes();
            let tokens = match serde_json::from_slice::<Value>(&bytes) {
                Ok(value) => message_tokens(format, tokenizer, &value),
                // Only a value nested deeper than serde_json parses (tool arguments ~125
                // levels deep) gets here: count the message's whole JSON text, which is more
                // than its fields' text, so a token budget still holds.
                Err(_) => {
                    crate::tokens::TOKENS_PER_MESSAGE
                        + text_tokens(tokenizer, &String::from_utf8_lossy(&bytes))
                }
            };
            let single = Cost {
                bytes: bytes.len() as i64,
                tokens: tokens as i64,
                ends: Some((msg.edge(), msg.edge())),
            };
            cost = cost.then(single, tokenizer);
        }
        cost
    }

    /// The cost of `self` followed by `next` in one messages array: a comma between them, or,
    /// for same-role Anthropic neighbours, one merged message.
    pub fn then(self, next: Cost, tokenizer: Tokenizer) -> Cost {
        let (Some((first, last)), Some((next_first, next_last))) = (self.ends, next.ends) else {
            return if self.ends.is_some() { self } else { next };
        };
        let (join_bytes, join_tokens) = join(last, next_first, tokenizer);
        Cost {
            bytes: self.bytes + next.bytes + join_bytes,
            tokens: self.tokens + next.tokens + join_tokens,
            ends: Some((first, next_last)),
        }
    }
}

/// What joining two messages adds: a comma, or (merging `…]},{"role":R,"content":[…` into
/// `…,…`) minus the second message's opening and the first's closing.
fn join(last: Edge, first: Edge, tokenizer: Tokenizer) -> (i64, i64) {
    if last == Edge::Solid || last != first {
        return (1, 0);
    }
    let opening = format!(r#"{{"role":"{}","content":["#, first.role()).len() as i64;
    let tokens =
        crate::tokens::TOKENS_PER_MESSAGE as i64 + text_tokens(tokenizer, first.role()) as i64;
    (-(opening + 1), -tokens)
}

/// Everything around the messages array: model, output limit, Anthropic system, tools.
#[derive(Clone, Debug)]
pub(crate) struct Envelope {
    pub format: WireFormat,
    pub model: String,
    pub output_limit: Option<u64>,
    /// Anthropic's top-level system prompt (OpenAI sends it as a message).
    pub system: Option<String>,
    pub tools: Vec<Value>,
}

impl Envelope {
    fn open(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(br#"{"model":"#);
        write_str(out, &self.model);
        if self.format == WireFormat::AnthropicMessages {
            out.extend_from_slice(br#","max_tokens":"#);
            write_u64(
                out,
                self.output_limit
                    .unwrap_or(crate::DEFAULT_ANTHROPIC_MAX_TOKENS),
            );
            if let Some(system) = &self.system {
                out.extend_from_slice(br#","system":"#);
                write_str(out, system);
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
        if let (WireFormat::OpenAiChat, Some(n)) = (self.format, self.output_limit) {
            out.extend_from_slice(br#","max_completion_tokens":"#);
            write_u64(out, n);
        }
        out.push(b'}');
    }

    /// Bytes and tokens of the envelope alone (an empty messages array), including reply
    /// priming, the Anthropic system prompt and the tool definitions.
    pub fn cost(&self, tokenizer: Tokenizer) -> (i64, i64) {
        let mut out = Vec::new();
        self.open(&mut out);
        self.close(&mut out);
        let mut tokens =
            crate::tokens::REPLY_PRIMING + tools_tokens(self.format, tokenizer, &self.tools);
        if let (WireFormat::AnthropicMessages, Some(system)) = (self.format, &self.system) {
            tokens += crate::tokens::TOKENS_PER_MESSAGE
                + text_tokens(tokenizer, "system")
                + text_tokens(tokenizer, system);
        }
        (out.len() as i64, tokens as i64)
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
        let mut open: Option<Edge> = None;
        let mut first = true;
        for msg in msgs {
            match msg {
                Msg::Blocks { edge, blocks } if open == Some(*edge) => {
                    for block in blocks {
                        out.push(b',');
                        out.extend_from_slice(block);
                    }
                }
                Msg::Blocks { edge, .. } => {
                    close_message(&mut out, open.take());
                    if !std::mem::take(&mut first) {
                        out.push(b',');
                    }
                    let mut whole = msg.to_bytes();
                    whole.truncate(whole.len() - 2);
                    out.extend_from_slice(&whole);
                    open = Some(*edge);
                }
                Msg::Whole(bytes) => {
                    close_message(&mut out, open.take());
                    if !std::mem::take(&mut first) {
                        out.push(b',');
                    }
                    out.extend_from_slice(bytes);
                }
            }
        }
        close_message(&mut out, open);
        self.close(&mut out);
        out
    }
}

/// Closes an open Anthropic message (`]}`), if one is open.
fn close_message(out: &mut Vec<u8>, open: Option<Edge>) {
    if open.is_some() {
        out.extend_from_slice(b"]}");
    }
}
