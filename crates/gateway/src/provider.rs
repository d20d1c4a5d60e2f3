//! The providers' own shapes: where each route goes upstream, how a provider says an error,
//! and how a reply is read back as one message, from a whole response or from the stream
//! events the client received.
//!
//! # Format: errors
//!
//! The gateway's own errors are written as the provider of the route writes them, so an SDK
//! raises its usual exception with the gateway's message:
//!
//! * OpenAI: `{"error":{"message":M,"type":T,"param":null,"code":C}}`
//! * Anthropic: `{"type":"error","error":{"type":T,"message":M}}`
//!
//! # Reassembly
//!
//! A reply is committed as the message a client sends back on its next call: OpenAI chat's
//! `{"role":"assistant","content":S|null,"tool_calls":[…]}`, Anthropic's
//! `{"role":"assistant","content":[BLOCK,…]}`, Responses' `output` items. From a stream: OpenAI's `delta.content` pieces
//! joined, each `delta.tool_calls[i]` by its `index` (id, name, the `arguments` pieces
//! joined), complete at `data: [DONE]`; Anthropic's `content_block_start` blocks with their
//! deltas applied (`text_delta`, `input_json_delta`'s `partial_json` joined and parsed as the
//! `input`, `thinking_delta`, `signature_delta`, `citations_delta`), complete at
//! `message_stop`; Responses' `response.completed` event, whose `response.output` is the
//! reply. A stream that ends before that is not a reply.

use ctxlog::WireFormat;
use serde_json::{Map, Value, json};

/// A provider route of the gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// `POST /v1/chat/completions`, to `<openai upstream>/chat/completions`.
    OpenAiChat,
    /// `POST /v1/messages`, to `<anthropic upstream>/v1/messages`.
    Anthropic,
    /// `POST /v1/responses`, to `<openai upstream>/responses`.
    OpenAiResponses,
}

impl Provider {
    /// The route's wire format.
    pub fn format(self) -> WireFormat {
        match self {
            Provider::OpenAiChat => WireFormat::OpenAiChat,
            Provider::Anthropic => WireFormat::AnthropicMessages,
            Provider::OpenAiResponses => WireFormat::OpenAiResponses,
        }
    }

    /// The path appended to the upstream base URL.
    pub fn upstream_path(self) -> &'static str {
        match self {
            Provider::OpenAiChat => "/chat/completions",
            Provider::Anthropic => "/v1/messages",
            Provider::OpenAiResponses => "/responses",
        }
    }

    /// An error body in the provider's shape.
    pub fn error_body(self, status: u16, message: &str) -> Value {
        let kind = error_type(self, status);
        match self {
            Provider::OpenAiChat | Provider::OpenAiResponses => json!({"error": {
                "message": message, "type": kind, "param": null, "code": null
            }}),
            Provider::Anthropic => json!({"type": "error", "error": {
                "type": kind, "message": message
            }}),
        }
    }

    /// A new assembler for this provider's stream.
    pub fn assembler(self) -> Assembler {
        Assembler {
            provider: self,
            pending: Vec::new(),
            text: None,
            calls: Vec::new(),
            blocks: Vec::new(),
            partial_json: Vec::new(),
            output: None,
            complete: false,
            recall_first: None,
        }
    }

    /// The reply message of a whole (non-streamed) response body, if it holds one.
    pub fn reply_of(self, body: &[u8]) -> Option<Value> {
        let body: Value = serde_json::from_slice(body).ok()?;
        match self {
            Provider::OpenAiChat => {
                let message = body["choices"][0]["message"].as_object()?;
                let mut reply = Map::new();
                reply.insert("role".into(), "assistant".into());
                for key in ["content", "tool_calls"] {
                    if let Some(value) = message.get(key).filter(|v| !v.is_null()) {
                        reply.insert(key.into(), value.clone());
                    }
                }
                Some(Value::Object(reply))
            }
            Provider::Anthropic => {
                let content = body.get("content").filter(|c| c.is_array())?;
                Some(json!({"role": "assistant", "content": content}))
            }
            Provider::OpenAiResponses => response_output(&body),
        }
    }
}

/// The provider's error type name for a status.
fn error_type(provider: Provider, status: u16) -> &'static str {
    match (provider, status) {
        (Provider::Anthropic, 401) => "authentication_error",
        (Provider::Anthropic, 403) => "permission_error",
        (Provider::Anthropic, 404) => "not_found_error",
        (Provider::Anthropic, 413) => "request_too_large",
        (Provider::Anthropic, 429) => "rate_limit_error",
        (Provider::Anthropic, 503) => "overloaded_error",
        (Provider::Anthropic, 400..=499) => "invalid_request_error",
        (Provider::Anthropic, _) => "api_error",
        (_, 401) => "authentication_error",
        (_, 403) => "permission_error",
        (_, 404) => "not_found_error",
        (_, 429) => "rate_limit_error",
        (_, 400..=499) => "invalid_request_error",
        (_, _) => "server_error",
    }
}

/// A completed Responses response's reply: its `output` items (none for a response that
/// did not complete).
fn response_output(response: &Value) -> Option<Value> {
    let completed = response["status"].as_str().is_none_or(|s| s == "completed");
    response
        .get("output")
        .filter(|o| completed && o.as_array().is_some_and(|o| !o.is_empty()))
        .cloned()
}

/// One OpenAI tool call being assembled.
#[derive(Debug, Default)]
struct CallParts {
    id: String,
    name: String,
    arguments: String,
}

/// Reads a provider's SSE stream as it passes, and rebuilds the reply from it.
#[derive(Debug)]
pub struct Assembler {
    provider: Provider,
    /// Bytes of an event not yet ended by a blank line.
    pending: Vec<u8>,
    text: Option<String>,
    calls: Vec<CallParts>,
    blocks: Vec<Value>,
    /// Per Anthropic block: the `input_json_delta` pieces.
    partial_json: Vec<String>,
    /// A Responses stream's output items, from its `response.completed` event.
    output: Option<Value>,
    complete: bool,
    /// Whether the reply's first text or tool call is a call of the recall tool (`None`
    /// until one of them starts; reasoning and thinking come before and decide nothing, nor
    /// does an Anthropic text block: its first tool use or the reply's end decides).
    recall_first: Option<bool>,
}

impl Assembler {
    /// Reads `chunk` (any cut of the stream's bytes).
    pub fn feed(&mut self, chunk: &[u8]) {
        self.pending.extend_from_slice(chunk);
        while let Some((end, len)) = event_end(&self.pending) {
            let event: Vec<u8> = self.pending.drain(..end + len).collect();
            self.event(&event[..end]);
        }
    }

    /// Whether the stream's end marker has been read.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Whether the reply starts (its first text or tool call) with a call of ctxlog's recall
    /// tool; `None` until one of them has started.
    pub fn recall_first(&self) -> Option<bool> {
        self.recall_first
    }

    /// Records the first text or tool call of the reply: `tool`, the name of a call.
    fn started(&mut self, tool: Option<&str>) {
        if self.recall_first.is_none() {
            self.recall_first = Some(tool == Some(ctxlog::call::RECALL_TOOL_NAME));
        }
    }

    /// The reply message, once complete.
    pub fn message(&self) -> Option<Value> {
        if !self.complete {
            return None;
        }
        Some(match self.provider {
            Provider::OpenAiChat => {
                let mut reply = Map::new();
                reply.insert("role".into(), "assistant".into());
                reply.insert(
                    "content".into(),
                    self.text.clone().map_or(Value::Null, Value::String),
                );
                if !self.calls.is_empty() {
                    let calls = self.calls.iter().map(|c| {
                        json!({"id": c.id, "type": "function",
                               "function": {"name": c.name, "arguments": c.arguments}})
                    });
                    reply.insert("tool_calls".into(), calls.collect());
                }
                Value::Object(reply)
            }
            Provider::Anthropic => json!({"role": "assistant", "content": self.blocks}),
            Provider::OpenAiResponses => self.output.clone()?,
        })
    }

    /// One event: its `data:` lines joined.
    fn event(&mut self, event: &[u8]) {
        let text = String::from_utf8_lossy(event);
        let data: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            return;
        }
        let data = data.join("\n");
        if self.provider == Provider::OpenAiChat && data.trim() == "[DONE]" {
            self.complete = true;
            return;
        }
        let Ok(value) = serde_json::from_str::<Value>(&data) else {
            return;
        };
        match self.provider {
            Provider::OpenAiChat => self.openai_chunk(&value),
            Provider::Anthropic => self.anthropic_event(&value),
            Provider::OpenAiResponses => {
                let item = &value["item"];
                if value["type"] == "response.output_item.added" {
                    match item["type"].as_str() {
                        Some("reasoning") | None => {}
                        Some("function_call") => self.started(item["name"].as_str()),
                        Some(_) => self.started(None),
                    }
                }
                if value["type"] == "response.completed" {
                    self.output = response_output(&value["response"]);
                    self.complete = self.output.is_some();
                }
            }
        }
    }

    fn openai_chunk(&mut self, chunk: &Value) {
        let delta = &chunk["choices"][0]["delta"];
        if let Some(piece) = delta["content"].as_str() {
            if !piece.is_empty() {
                self.started(None);
            }
            self.text.get_or_insert_with(String::new).push_str(piece);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().unwrap_or(0) as usize;
            while self.calls.len() <= index {
                self.calls.push(CallParts::default());
            }
            let parts = &mut self.calls[index];
            if let Some(id) = call["id"].as_str() {
                parts.id.push_str(id);
            }
            let named = call["function"]["name"].as_str();
            if let Some(name) = named {
                parts.name.push_str(name);
            }
            if let Some(arguments) = call["function"]["arguments"].as_str() {
                parts.arguments.push_str(arguments);
            }
            if named.is_some() {
                let name = self.calls[index].name.clone();
                self.started(Some(&name));
            }
        }
    }

    fn anthropic_event(&mut self, event: &Value) {
        let index = event["index"].as_u64().unwrap_or(0) as usize;
        match event["type"].as_str() {
            Some("content_block_start") => {
                while self.blocks.len() <= index {
                    self.blocks.push(Value::Null);
                    self.partial_json.push(String::new());
                }
                let block = &event["content_block"];
                match block["type"].as_str() {
                    // Text decides nothing either: a model often writes a line before its
                    // call ("Let me look that up").
                    Some("thinking" | "redacted_thinking" | "text") | None => {}
                    Some("tool_use") => self.started(block["name"].as_str()),
                    Some(_) => self.started(None),
                }
                self.blocks[index] = block.clone();
            }
            Some("content_block_delta") => self.anthropic_delta(index, &event["delta"]),
            Some("content_block_stop") => self.finish_block(index),
            Some("message_stop") => self.complete = !self.blocks.iter().any(Value::is_null),
            _ => {}
        }
    }

    fn anthropic_delta(&mut self, index: usize, delta: &Value) {
        let Some(block) = self.blocks.get_mut(index).and_then(Value::as_object_mut) else {
            return;
        };
        let append = |block: &mut Map<String, Value>, key: &str, piece: &Value| {
            let mut text = block
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            text.push_str(piece.as_str().unwrap_or_default());
            block.insert(key.to_owned(), Value::String(text));
        };
        match delta["type"].as_str() {
            Some("text_delta") => append(block, "text", &delta["text"]),
            Some("thinking_delta") => append(block, "thinking", &delta["thinking"]),
            Some("signature_delta") => append(block, "signature", &delta["signature"]),
            Some("input_json_delta") => {
                if let Some(piece) = delta["partial_json"].as_str() {
                    self.partial_json[index].push_str(piece);
                }
            }
            Some("citations_delta") => {
                let citations = block
                    .entry("citations")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Some(list) = citations.as_array_mut() {
                    list.push(delta["citation"].clone());
                }
            }
            _ => {}
        }
    }

    /// A block's end: a tool use's input is its JSON pieces parsed (none: as it started).
    fn finish_block(&mut self, index: usize) {
        let Some(json) = self.partial_json.get(index).filter(|j| !j.is_empty()) else {
            return;
        };
        let input = serde_json::from_str::<Value>(json).unwrap_or(Value::String(json.clone()));
        if let Some(block) = self.blocks.get_mut(index).and_then(Value::as_object_mut) {
            block.insert("input".into(), input);
        }
    }
}

/// Where the first event in `bytes` ends: the blank line's offset and length.
pub(crate) fn event_end(bytes: &[u8]) -> Option<(usize, usize)> {
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn openai_deltas_cut_anywhere_make_one_message() {
        let stream = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"He\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"llo\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"sh\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n"
        );
        for cut in [1, 7, 50, stream.len()] {
            let mut a = Provider::OpenAiChat.assembler();
            for piece in stream.as_bytes().chunks(cut) {
                assert!(a.message().is_none() || a.is_complete());
                a.feed(piece);
            }
            assert_eq!(
                a.message().unwrap(),
                json!({"role":"assistant","content":"Hello","tool_calls":[
                    {"id":"c1","type":"function","function":{"name":"sh","arguments":"{\"a\":1}"}}]})
            );
        }
    }

    #[test]
    fn anthropic_input_json_deltas_become_the_input() {
        let events = [
            json!({"type":"message_start","message":{"id":"m","content":[]}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me look."}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"sh","input":{}}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"cmd\":"}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"ls\"}"}}),
            json!({"type":"content_block_stop","index":1}),
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use"}}),
        ];
        let mut a = Provider::Anthropic.assembler();
        for e in &events {
            a.feed(
                format!(
                    "event: {}\r\ndata: {e}\r\n\r\n",
                    e["type"].as_str().unwrap()
                )
                .as_bytes(),
            );
        }
        assert!(a.message().is_none(), "no message_stop yet: not a reply");
        a.feed(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
        assert_eq!(
            a.message().unwrap(),
            json!({"role":"assistant","content":[
                {"type":"text","text":"Let me look."},
                {"type":"tool_use","id":"t1","name":"sh","input":{"cmd":"ls"}}]})
        );
    }
}
