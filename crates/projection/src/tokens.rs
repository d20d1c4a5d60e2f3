//! Token counting: real offline tokenizers and each wire format's per-message rule
//! (docs/design.md#p3-tokens).
//!
//! # The rule for `openai-chat` (exact where OpenAI publishes one)
//!
//! OpenAI's cookbook *How to count tokens with tiktoken* publishes this rule, which it checks
//! against the API's `usage.prompt_tokens`:
//!
//! * every message costs 3 tokens, plus the tokens of each of its string fields (`role`,
//!   `content`, `name`, `tool_call_id`, …), plus 1 more if it has a `name`;
//! * every reply is primed with 3 tokens;
//! * tool definitions cost, per function, 7 (o200k) or 10 (cl100k) plus the tokens of
//!   `name:description` (one trailing `.` removed), plus 3 if it has properties and, per
//!   property, 3 plus the tokens of `key:type:description` (one trailing `.` removed) and, if
//!   it has an `enum`, −3 plus 3 and the item's tokens per item; and 12 once for all functions.
//!
//! OpenAI publishes nothing for the `tool_calls` of an assistant message; we count, per call,
//! the tokens of the function name and of the arguments string, plus 1 (the rule `tiktoken-rs`
//! uses). Text parts of array-valued `content` count their `text`.
//!
//! # The estimate for `openai-responses`
//!
//! OpenAI publishes no offline rule for the Responses API's input items. Figures for this
//! format are **estimates** made with the real tokenizer and the chat rule's shape: every
//! item costs 3 plus the tokens of each of its string fields (its `type` too: `message`,
//! `function_call`, …), plus 1 more if it has a `name`; a `content` list counts each
//! `input_text`/`output_text` part's `text`; other parts and nested values (a reasoning item's
//! `summary` list) count their compact JSON text. `instructions` costs 3 plus `system` and its text; reply priming 3; tool
//! definitions follow the cookbook's function rule above with the flat Responses tool
//! (`{"type":"function","name",…}`) as the function. A string `input` counts as one user
//! message.
//!
//! # Images and documents (every format)
//!
//! An image part (`image_url` in chat, `input_image` in Responses, `image` in Anthropic) is
//! charged by the image rule of the body's `model` ([`crate::media`]: OpenAI's tiles or
//! patches, Anthropic's pixel area), its size read from the header of its inline base64
//! (PNG, JPEG, GIF, WebP), never by the text of that base64. An image ctxlog cannot read (a
//! URL) is charged the most its rule allows, and `tokens_exact` is then false.
//!
//! A document part (`file` in chat, `input_file` in Responses, `document` in Anthropic) is
//! charged [`DOCUMENT_PAGE_TOKENS`] per page of its PDF (pages counted from the PDF's page
//! objects, at least 1), always an estimate: providers turn each page into text and an
//! image and publish no offline rule. Parts inside a Responses `function_call_output`'s
//! `output` list and an Anthropic `tool_result`'s `content` list count the same way.
//!
//! # The estimate for `anthropic-messages`
//!
//! Anthropic publishes no offline tokenizer. Token figures for this format are **estimates**
//! made with the chosen OpenAI tokenizer and the same shape of rule: 3 per message plus its
//! role and the tokens of each block (text; tool_use id, name and compact input; tool_result
//! id and content), 3 for the system prompt plus `system` and its text, the compact JSON of
//! each tool definition, and 3 for reply priming. Byte budgets are exact for every format; a
//! token budget with this format bounds the estimate (reports say `tokens_exact: false`).
//!
//! Text is encoded as ordinary text: special-token spellings such as `<|endoftext|>` inside
//! user content count as the plain characters they are.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use base64::Engine as _;

use crate::error::{Error, Result};
use crate::json::value_to_string;
use crate::media::{Detail, ImageRule};
use crate::options::{Tokenizer, WireFormat};

/// Tokens charged per page of a document: the top of Anthropic's published range for a PDF
/// page ("each page typically uses 1,500-3,000 tokens"), so a budget holds.
pub const DOCUMENT_PAGE_TOKENS: u64 = 3000;

/// Tokens added once per message by OpenAI's published rule.
pub const TOKENS_PER_MESSAGE: u64 = 3;
/// Tokens added for a message's `name` field by OpenAI's published rule.
pub const TOKENS_PER_NAME: u64 = 1;
/// Tokens priming the reply (`<|start|>assistant<|message|>`), once per request.
pub const REPLY_PRIMING: u64 = 3;

/// The number of tokens of `text`, encoded as ordinary text with `tokenizer`. A longer text
/// counted before in this process is not encoded again: its count is remembered (within a
/// bound on the entries held) by the text's SHA-256, so no text is kept.
pub fn text_tokens(tokenizer: Tokenizer, text: &str) -> u64 {
    if text.is_empty() {
        return 0;
    }
    crate::counted::TextCounts::get_or_count(
        crate::counted::shared(),
        tokenizer,
        text,
        crate::bpe::count,
    )
}

/// What a projection counts its token figures with: the request's tokenizer, or nothing
/// when no figure is needed (no token budget, and the caller does not read the report's
/// token figures: [`crate::ProjectionRequestBuilder::token_figures`]). Counting nothing
/// builds no tokenizer: every figure it gives is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Counter {
    /// The tokenizer the figures are (or would be) counted with.
    pub tokenizer: Tokenizer,
    /// The image token rule of the request's model ([`crate::media::rule_for`]).
    pub image: ImageRule,
    counting: bool,
}

impl Counter {
    /// The counter `request` needs: its tokenizer, unless it has no token budget and does
    /// not want token figures.
    pub fn of(request: &crate::ProjectionRequest) -> Counter {
        Counter {
            tokenizer: request.tokenizer,
            image: crate::media::rule_for(request.format, &request.model).0,
            counting: request.token_figures || request.max_tokens.is_some(),
        }
    }

    /// `tokens(tokenizer)` when counting, else 0 (and `tokens` is not called).
    pub fn count(self, tokens: impl FnOnce(Tokenizer) -> u64) -> u64 {
        if self.counting {
            tokens(self.tokenizer)
        } else {
            0
        }
    }

    /// The tokens of `text` ([`text_tokens`]) when counting, else 0.
    pub fn text(self, text: &str) -> u64 {
        self.count(|tokenizer| text_tokens(tokenizer, text))
    }
}

/// The result of [`count`]: a request body's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    /// Length of the body in bytes.
    pub bytes: u64,
    /// Tokens by the format's rule (see the module docs).
    pub tokens: u64,
    /// The tokenizer used.
    pub tokenizer: Tokenizer,
    /// The format whose rule was applied.
    pub format: WireFormat,
    /// Whether `tokens` follows a published rule for this provider (false: an estimate).
    pub tokens_exact: bool,
    /// Image parts charged by the image rule of the body's model ([`crate::media`]), not by
    /// the text of their base64.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub images: u64,
    /// Of those, the images whose size ctxlog could not read (a URL, an unknown header):
    /// charged the most the rule allows, an estimate.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub images_estimated: u64,
    /// Document parts, charged [`DOCUMENT_PAGE_TOKENS`] per page: an estimate.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub documents: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Counts the bytes and tokens of a request body of `format` (the CLI's `ctxlog count`).
///
/// For a body returned by [`crate::project`] with the same format and tokenizer, the result
/// equals the projection report's `bytes` and `tokens` (unless the body holds tool arguments
/// nested deeper than `serde_json` parses, about 125 levels: then this fails, and the
/// projector counted that message by its whole JSON text, an upper bound).
///
/// # Errors
///
/// [`Error::InvalidBody`] if `body` is not JSON, or not an object with a `messages` array
/// (for `openai-responses`, an `input` array or string).
pub fn count(body: &[u8], format: WireFormat, tokenizer: Tokenizer) -> Result<Count> {
    let value: Value = serde_json::from_slice(body).map_err(|e| Error::InvalidBody {
        reason: format!("not JSON: {e}"),
    })?;
    let object = value
        .as_object()
        .ok_or_else(|| invalid_body("the body is not a JSON object"))?;
    let model = object.get("model").and_then(Value::as_str).unwrap_or("");
    let image = crate::media::rule_for(format, model).0;
    let mut tokens = REPLY_PRIMING + messages_tokens(format, tokenizer, image, object)?;
    let system_field = match format {
        WireFormat::AnthropicMessages => "system",
        WireFormat::OpenAiResponses => "instructions",
        WireFormat::OpenAiChat => "",
    };
    if let Some(system) = object.get(system_field) {
        tokens += system_tokens(tokenizer, image, system);
    }
    let media = media_counts(format, object);
    if let Some(tools) = object.get("tools").and_then(Value::as_array) {
        tokens += tools_tokens(format, tokenizer, tools);
    }
    let others = object
        .iter()
        .filter(|(key, _)| !crate::request::is_body_key(format, key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    tokens += fields_tokens(tokenizer, &others);
    Ok(Count {
        bytes: body.len() as u64,
        tokens,
        tokenizer,
        format,
        tokens_exact: format.tokens_exact() && media.is_exact(),
        images: media.images,
        images_estimated: media.images_estimated,
        documents: media.documents,
    })
}

/// An image part of `format` (`image_url` for chat, `input_image` for Responses, `image` for
/// Anthropic): its detail and its bytes' size if they are inline and readable, the outer
/// `None` when `block` is no image part.
pub(crate) fn image_part(
    format: WireFormat,
    block: &Value,
) -> Option<(Detail, Option<(u32, u32)>)> {
    let detail = |v: &Value| v.as_str().and_then(Detail::parse).unwrap_or_default();
    let (detail, data) = match (format, block["type"].as_str()) {
        (WireFormat::OpenAiChat, Some("image_url")) => (
            detail(&block["image_url"]["detail"]),
            data_url(block["image_url"]["url"].as_str().unwrap_or_default()),
        ),
        (WireFormat::OpenAiResponses, Some("input_image")) => (
            detail(&block["detail"]),
            data_url(block["image_url"].as_str().unwrap_or_default()),
        ),
        (WireFormat::AnthropicMessages, Some("image")) => (
            Detail::Auto,
            (block["source"]["type"] == "base64")
                .then(|| block["source"]["data"].as_str())
                .flatten()
                .map(str::to_owned),
        ),
        _ => return None,
    };
    let size = data
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .and_then(|bytes| crate::media::dimensions(&bytes))
        .map(|(_, w, h)| (w, h));
    Some((detail, size))
}

/// A document part of `format` (`file` for chat, `input_file` for Responses, `document` for
/// Anthropic): its bytes if they are inline and decode, the outer `None` when `block` is no
/// document part.
pub(crate) fn document_part(format: WireFormat, block: &Value) -> Option<Option<Vec<u8>>> {
    let data = match (format, block["type"].as_str()) {
        (WireFormat::OpenAiChat, Some("file")) => {
            data_url(block["file"]["file_data"].as_str().unwrap_or_default())
        }
        (WireFormat::OpenAiResponses, Some("input_file")) => {
            data_url(block["file_data"].as_str().unwrap_or_default())
        }
        (WireFormat::AnthropicMessages, Some("document")) => (block["source"]["type"] == "base64")
            .then(|| block["source"]["data"].as_str())
            .flatten()
            .map(str::to_owned),
        _ => return None,
    };
    Some(data.and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok()))
}

/// A document's tokens: [`DOCUMENT_PAGE_TOKENS`] per page of its PDF ([`pdf_pages`]; one page
/// when its bytes are unknown).
pub fn document_tokens(bytes: Option<&[u8]>) -> u64 {
    DOCUMENT_PAGE_TOKENS * bytes.map_or(1, pdf_pages)
}

/// A PDF's page count as its page objects say (`/Type /Page`, not `/Pages`), at least 1: a
/// count, not a parse, and so an estimate.
pub fn pdf_pages(bytes: &[u8]) -> u64 {
    let mut pages = 0;
    let mut at = 0;
    while let Some(found) = find(&bytes[at..], b"/Type") {
        at += found + 5;
        let rest = &bytes[at..];
        let skip = rest.iter().take_while(|b| b.is_ascii_whitespace()).count();
        let rest = &rest[skip..];
        if rest.starts_with(b"/Page") && !rest[5..].first().is_some_and(u8::is_ascii_alphanumeric) {
            pages += 1;
        }
    }
    pages.max(1)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The base64 of a `data:` URL, if `url` is one.
fn data_url(url: &str) -> Option<String> {
    ctxlog_event::media::split_data_url(url).map(|(_, b64)| b64.to_owned())
}

/// The media parts of a body: images (and how many had no readable size) and documents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MediaCounts {
    pub images: u64,
    pub images_estimated: u64,
    pub documents: u64,
}

impl MediaCounts {
    /// Whether the media's tokens follow a rule exactly (no URL image, no document).
    pub fn is_exact(&self) -> bool {
        self.images_estimated == 0 && self.documents == 0
    }
}

/// The media parts of the body's messages (`messages`, or `input` for Responses), in message
/// content lists and in the content of tool results inside them.
pub(crate) fn media_counts(
    format: WireFormat,
    object: &serde_json::Map<String, Value>,
) -> MediaCounts {
    let field = if format == WireFormat::OpenAiResponses {
        "input"
    } else {
        "messages"
    };
    let mut counts = MediaCounts::default();
    let messages = object.get(field).and_then(Value::as_array);
    for message in messages.into_iter().flatten() {
        let parts = message["content"]
            .as_array()
            .into_iter()
            .chain(message["output"].as_array())
            .flatten();
        let nested = parts
            .clone()
            .filter_map(|p| p["content"].as_array())
            .flatten();
        for part in parts.chain(nested) {
            if let Some((_, size)) = image_part(format, part) {
                counts.images += 1;
                counts.images_estimated += u64::from(size.is_none());
            }
            counts.documents += u64::from(document_part(format, part).is_some());
        }
    }
    counts
}

/// Tokens of the body's messages (`messages`), or of its input items (`input`, for
/// `openai-responses`).
fn messages_tokens(
    format: WireFormat,
    tokenizer: Tokenizer,
    image: ImageRule,
    object: &serde_json::Map<String, Value>,
) -> Result<u64> {
    let field = match format {
        WireFormat::OpenAiResponses => "input",
        _ => "messages",
    };
    let messages = match object.get(field) {
        Some(Value::Array(messages)) => messages,
        Some(Value::String(text)) if format == WireFormat::OpenAiResponses => {
            return Ok(TOKENS_PER_MESSAGE
                + text_tokens(tokenizer, "user")
                + text_tokens(tokenizer, text));
        }
        _ if format == WireFormat::OpenAiResponses => {
            return Err(invalid_body(
                "the body has no \"input\" array (an openai-responses body)",
            ));
        }
        _ => return Err(invalid_body("the body has no \"messages\" array")),
    };
    Ok(messages
        .iter()
        .map(|message| message_tokens(format, tokenizer, image, message))
        .sum())
}

fn invalid_body(reason: &str) -> Error {
    Error::InvalidBody {
        reason: reason.to_owned(),
    }
}

/// Tokens of one message (a JSON object of the format's message shape); the projector counts
/// an opaque Responses item by this same rule.
pub(crate) fn message_tokens(
    format: WireFormat,
    tokenizer: Tokenizer,
    image: ImageRule,
    message: &Value,
) -> u64 {
    let Some(fields) = message.as_object() else {
        return TOKENS_PER_MESSAGE;
    };
    let mut tokens = TOKENS_PER_MESSAGE;
    for (key, value) in fields {
        tokens += match (format, key.as_str(), value) {
            (_, "name", Value::String(s)) => text_tokens(tokenizer, s) + TOKENS_PER_NAME,
            (_, _, Value::String(s)) => text_tokens(tokenizer, s),
            (WireFormat::OpenAiChat, "tool_calls", Value::Array(calls)) => {
                calls.iter().map(|c| openai_call_tokens(tokenizer, c)).sum()
            }
            (_, "content", Value::Array(parts))
            | (WireFormat::OpenAiResponses, "output", Value::Array(parts)) => parts
                .iter()
                .map(|p| block_tokens(format, tokenizer, image, p))
                .sum(),
            // Any other value of an input item (a reasoning item's `summary`, …).
            (WireFormat::OpenAiResponses, _, Value::Array(_) | Value::Object(_)) => {
                value_tokens(tokenizer, value)
            }
            _ => 0,
        };
    }
    tokens
}

fn openai_call_tokens(tokenizer: Tokenizer, call: &Value) -> u64 {
    let function = &call["function"];
    let name = function["name"].as_str().unwrap_or_default();
    let arguments = function["arguments"].as_str().unwrap_or_default();
    call_tokens(tokenizer, name, arguments)
}

/// Tokens of one entry of an OpenAI `tool_calls` array: its function name and arguments
/// string, plus 1.
pub(crate) fn call_tokens(tokenizer: Tokenizer, name: &str, arguments: &str) -> u64 {
    text_tokens(tokenizer, name) + text_tokens(tokenizer, arguments) + 1
}

/// Tokens of an Anthropic `tool_use` block: id, name and the compact JSON text of `input`.
pub(crate) fn tool_use_tokens(tokenizer: Tokenizer, id: &str, name: &str, input: &Value) -> u64 {
    text_tokens(tokenizer, id) + text_tokens(tokenizer, name) + value_tokens(tokenizer, input)
}

/// Tokens of top-level fields other than the format's own (`temperature`, `tool_choice`,
/// `response_format`, …): each field's compact `"key":value` text, an upper bound (a provider
/// bills most such fields nothing, a schema as text).
pub(crate) fn fields_tokens(tokenizer: Tokenizer, fields: &serde_json::Map<String, Value>) -> u64 {
    fields
        .iter()
        .map(|(key, value)| {
            let text = format!("{}:{}", Value::String(key.clone()), value_to_string(value));
            text_tokens(tokenizer, &text)
        })
        .sum()
}

fn value_tokens(tokenizer: Tokenizer, value: &Value) -> u64 {
    text_tokens(tokenizer, &value_to_string(value))
}

/// Tokens of one content block; the projector counts an opaque Anthropic block by this same
/// rule (its compact JSON text).
pub(crate) fn block_tokens(
    format: WireFormat,
    tokenizer: Tokenizer,
    image: ImageRule,
    block: &Value,
) -> u64 {
    let str_of = |key: &str| text_tokens(tokenizer, block[key].as_str().unwrap_or_default());
    if let Some((detail, size)) = image_part(format, block) {
        return crate::media::image_tokens(image, detail, size).0;
    }
    if let Some(bytes) = document_part(format, block) {
        return document_tokens(bytes.as_deref());
    }
    match block["type"].as_str() {
        Some("text") => str_of("text"),
        Some("input_text" | "output_text") if format == WireFormat::OpenAiResponses => {
            str_of("text")
        }
        Some("tool_use") if format == WireFormat::AnthropicMessages => tool_use_tokens(
            tokenizer,
            block["id"].as_str().unwrap_or_default(),
            block["name"].as_str().unwrap_or_default(),
            &block["input"],
        ),
        Some("tool_result") if format == WireFormat::AnthropicMessages => {
            let content = match &block["content"] {
                Value::String(s) => text_tokens(tokenizer, s),
                Value::Array(parts) => parts
                    .iter()
                    .map(|p| block_tokens(format, tokenizer, image, p))
                    .sum(),
                _ => 0,
            };
            str_of("tool_use_id") + content
        }
        _ => value_tokens(tokenizer, block),
    }
}

fn system_tokens(tokenizer: Tokenizer, image: ImageRule, system: &Value) -> u64 {
    let text = match system {
        Value::String(s) => text_tokens(tokenizer, s),
        Value::Array(parts) => parts
            .iter()
            .map(|p| block_tokens(WireFormat::AnthropicMessages, tokenizer, image, p))
            .sum(),
        _ => 0,
    };
    system_tokens_with(tokenizer, text)
}

/// Tokens of Anthropic's top-level `system` prompt `text` (counted like a message).
pub(crate) fn system_prompt_tokens(tokenizer: Tokenizer, text: &str) -> u64 {
    system_tokens_with(tokenizer, text_tokens(tokenizer, text))
}

fn system_tokens_with(tokenizer: Tokenizer, text_tokens_of_prompt: u64) -> u64 {
    TOKENS_PER_MESSAGE + text_tokens(tokenizer, "system") + text_tokens_of_prompt
}

/// Tokens of the tool definitions of a request.
pub(crate) fn tools_tokens(format: WireFormat, tokenizer: Tokenizer, tools: &[Value]) -> u64 {
    match format {
        WireFormat::OpenAiChat | WireFormat::OpenAiResponses => {
            openai_tools_tokens(format, tokenizer, tools)
        }
        WireFormat::AnthropicMessages => tools.iter().map(|t| value_tokens(tokenizer, t)).sum(),
    }
}

/// The cookbook's constants, by model family (o200k: gpt-4o; cl100k: gpt-4, gpt-3.5-turbo).
struct ToolRule {
    func_init: u64,
    prop_init: u64,
    prop_key: u64,
    enum_init: i64,
    enum_item: u64,
    func_end: u64,
}

fn tool_rule(tokenizer: Tokenizer) -> ToolRule {
    let func_init = match tokenizer {
        Tokenizer::O200k => 7,
        Tokenizer::Cl100k => 10,
    };
    ToolRule {
        func_init,
        prop_init: 3,
        prop_key: 3,
        enum_init: -3,
        enum_item: 3,
        func_end: 12,
    }
}

/// The cookbook's rule over OpenAI tools: chat's `{"type":"function","function":{…}}`, or
/// the Responses API's flat `{"type":"function","name",…}` (the tool itself is the function).
fn openai_tools_tokens(format: WireFormat, tokenizer: Tokenizer, tools: &[Value]) -> u64 {
    if tools.is_empty() {
        return 0;
    }
    let rule = tool_rule(tokenizer);
    let per_function: u64 = tools
        .iter()
        .map(|tool| {
            let function = match (format, tool.get("function")) {
                (WireFormat::OpenAiResponses, None) => tool,
                _ => &tool["function"],
            };
            openai_function_tokens(tokenizer, &rule, function)
        })
        .sum();
    per_function + rule.func_end
}

fn openai_function_tokens(tokenizer: Tokenizer, rule: &ToolRule, function: &Value) -> u64 {
    let name = function["name"].as_str().unwrap_or_default();
    let description = strip_dot(function["description"].as_str().unwrap_or_default());
    let mut tokens = rule.func_init + text_tokens(tokenizer, &format!("{name}:{description}"));
    let Some(properties) = function["parameters"]["properties"].as_object() else {
        return tokens;
    };
    if properties.is_empty() {
        return tokens;
    }
    tokens += rule.prop_init;
    for (key, property) in properties {
        tokens += rule.prop_key;
        if let Some(items) = property["enum"].as_array() {
            let items_tokens: u64 = items
                .iter()
                .map(|item| rule.enum_item + text_tokens(tokenizer, &plain_text(item)))
                .sum();
            tokens = tokens.saturating_add_signed(rule.enum_init) + items_tokens;
        }
        let kind = plain_text(&property["type"]);
        let description = strip_dot(property["description"].as_str().unwrap_or_default());
        tokens += text_tokens(tokenizer, &format!("{key}:{kind}:{description}"));
    }
    tokens
}

fn strip_dot(text: &str) -> &str {
    text.strip_suffix('.').unwrap_or(text)
}

fn plain_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => value_to_string(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_tokens_use_the_named_encoding() {
        assert_eq!(text_tokens(Tokenizer::O200k, ""), 0);
        assert_eq!(text_tokens(Tokenizer::Cl100k, "tiktoken is great!"), 6);
        assert_eq!(text_tokens(Tokenizer::O200k, "tiktoken is great!"), 6);
    }

    #[test]
    fn count_rejects_what_is_not_a_body() {
        assert!(matches!(
            count(b"{", WireFormat::OpenAiChat, Tokenizer::O200k),
            Err(Error::InvalidBody { .. })
        ));
        assert!(matches!(
            count(b"[]", WireFormat::OpenAiChat, Tokenizer::O200k),
            Err(Error::InvalidBody { .. })
        ));
        let c = count(
            br#"{"messages":[]}"#,
            WireFormat::OpenAiChat,
            Tokenizer::O200k,
        )
        .unwrap();
        assert_eq!((c.bytes, c.tokens), (15, REPLY_PRIMING));
    }
}
