//! The two wire formats read back: serde types for a request body's envelope, its messages
//! and their parts, the read side of [`crate::wire`] (whose module docs hold each format's
//! `# Format`). Whoever reads a body (an import, telling the formats apart) reads it with
//! these, so each format's shapes are written down in this crate only.
//!
//! The types accept what the providers accept, not only what the projector writes: content as
//! a string or a list, `null` content, parts and blocks of other types
//! ([`openai::Part::Other`], [`anthropic::Block::Other`]). Both formats keep growing fields, so
//! fields these types do not name are kept in each type's `extra`; what to do with them is the
//! reader's choice. A list's bad element is named by its index, a field of several shapes by
//! its name: ``content[2]: missing field `id` ``, ``"tool_calls": invalid type: …``. Read a
//! message from a [`Value`] (as [`Envelope`] leaves it) for errors without `serde_json`'s
//! text positions, which name a line and column of the body, not a message.
//!
//! ```
//! use ctxlog_projection::read::{Envelope, openai};
//!
//! let body = br#"{"model":"m","messages":[{"role":"user","content":"hi","name":"ann"}]}"#;
//! let envelope: Envelope = serde_json::from_slice(body)?;
//! let message: openai::Message = serde_json::from_value(envelope.messages[0].clone())?;
//! let openai::Message::User(user) = message else { panic!() };
//! assert_eq!(user.content, Some(openai::Content::Text("hi".into())));
//! assert_eq!(user.extra["name"], "ann");
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::fmt;
use std::marker::PhantomData;

use ctxlog_event::{Event, EventBody, ToolStatus};
use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A request body's top level, in either format: the fields that tell the formats apart, the
/// messages (each left as JSON, to be read as a message of its format and named by its index
/// when it is not one), and the rest (`model`, …).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(expecting = "a request body: a JSON object with a \"messages\" array")]
pub struct Envelope {
    /// The messages.
    pub messages: Vec<Value>,
    /// Anthropic's system prompt (OpenAI sends it as a message).
    #[serde(default, deserialize_with = "system")]
    pub system: Option<anthropic::Content>,
    /// Anthropic's output limit (required there).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// OpenAI's output limit.
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    /// Tool definitions.
    #[serde(default)]
    pub tools: Vec<Tool>,
    /// Every other field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool definition, read as far as telling the formats apart.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Tool {
    /// OpenAI's function definition (`{"type":"function","function":{…}}`); Anthropic's tools
    /// have none.
    #[serde(default)]
    pub function: Option<Value>,
    /// Every other field (`type`, `name`, `input_schema`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A message's content: a string, or a list of parts (OpenAI) or blocks (Anthropic).
#[derive(Clone, Debug, PartialEq)]
pub enum Content<T> {
    /// A plain string (what the projector writes for OpenAI).
    Text(String),
    /// A list (what the projector writes for Anthropic).
    Parts(Vec<T>),
}

pub mod openai {
    //! `openai-chat`: chat messages by `role`.

    use super::*;

    /// A message's content: a string or a list of parts.
    pub type Content = super::Content<Part>;

    /// One chat message, by its `role`.
    #[derive(Clone, Debug, PartialEq, Deserialize)]
    #[serde(tag = "role", rename_all = "snake_case")]
    pub enum Message {
        /// The system prompt, or (from the projector) a note or the omission notice.
        System(Plain),
        /// The developer prompt (newer models' system prompt).
        Developer(Plain),
        /// A user message.
        User(Plain),
        /// An assistant reply, maybe with tool calls.
        Assistant(Assistant),
        /// The result of one tool call.
        Tool(ToolMessage),
    }

    impl Message {
        /// Whether only OpenAI has a message like this: Anthropic has no system, developer
        /// or tool role and no `tool_calls`.
        pub fn only_openai(&self) -> bool {
            !matches!(
                self,
                Message::User(_)
                    | Message::Assistant(Assistant {
                        tool_calls: None,
                        ..
                    })
            )
        }
    }

    /// A system, developer or user message.
    #[derive(Clone, Debug, Default, PartialEq, Deserialize)]
    pub struct Plain {
        /// Its content (`null` or left out: none).
        #[serde(default, deserialize_with = "content")]
        pub content: Option<Content>,
        /// Every other field (`name`, …).
        #[serde(flatten)]
        pub extra: Map<String, Value>,
    }

    /// An assistant message.
    #[derive(Clone, Debug, Default, PartialEq, Deserialize)]
    pub struct Assistant {
        /// Its text (`null` or left out when it only calls tools).
        #[serde(default, deserialize_with = "content")]
        pub content: Option<Content>,
        /// Its tool calls, in order.
        #[serde(default, deserialize_with = "tool_calls")]
        pub tool_calls: Option<Vec<ToolCall>>,
        /// The call of the legacy function-calling API (before `tool_calls`).
        #[serde(default)]
        pub function_call: Option<Value>,
        /// Every other field (`refusal`, `audio`, `name`, …).
        #[serde(flatten)]
        pub extra: Map<String, Value>,
    }

    /// A `tool` message: the result of the call `tool_call_id`.
    #[derive(Clone, Debug, Default, PartialEq, Deserialize)]
    pub struct ToolMessage {
        /// The call it answers.
        pub tool_call_id: String,
        /// The result.
        #[serde(default, deserialize_with = "content")]
        pub content: Option<Content>,
        /// The tool's name (older clients send it).
        #[serde(default)]
        pub name: Option<String>,
        /// Every other field.
        #[serde(flatten)]
        pub extra: Map<String, Value>,
    }

    /// One entry of `tool_calls`.
    #[derive(Clone, Debug, PartialEq, Deserialize)]
    pub struct ToolCall {
        /// The call's id.
        pub id: String,
        /// Its `type` (left out: `function`; other types are refused).
        #[serde(default, rename = "type")]
        pub kind: CallKind,
        /// The function called.
        pub function: Function,
        /// Every other field.
        #[serde(flatten)]
        pub extra: Map<String, Value>,
    }

    /// The `type` of a tool call.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum CallKind {
        /// A function call, the only type the projector writes.
        #[default]
        Function,
    }

    /// The function of a tool call.
    #[derive(Clone, Debug, PartialEq, Deserialize)]
    pub struct Function {
        /// The tool's name.
        pub name: String,
        /// Its arguments: a string of JSON on the wire.
        #[serde(default)]
        pub arguments: Option<Value>,
        /// Every other field.
        #[serde(flatten)]
        pub extra: Map<String, Value>,
    }

    /// A tool call's `arguments` string read back into the value the projector writes as that
    /// same string: the JSON it holds, when that JSON's compact text is the string (OpenAI's
    /// usual form); else the string itself, which the projector sends verbatim.
    pub fn arguments(text: String) -> Value {
        match serde_json::from_str::<Value>(&text) {
            Ok(value) if crate::wire::openai_arguments(&value) == text => value,
            _ => Value::String(text),
        }
    }

    /// One part of a list content.
    #[derive(Clone, Debug, PartialEq, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    pub enum Part {
        /// Text.
        Text {
            /// The text.
            text: String,
            /// Every other field.
            #[serde(flatten)]
            extra: Map<String, Value>,
        },
        /// An image, by URL (an `https:` or `data:` URL).
        ImageUrl {
            /// The image's URL and detail.
            image_url: ImageUrl,
            /// Every other field.
            #[serde(flatten)]
            extra: Map<String, Value>,
        },
        /// A file (a PDF), inline as a `data:` URL or by uploaded id.
        File {
            /// The file's data, name or id.
            file: File,
            /// Every other field.
            #[serde(flatten)]
            extra: Map<String, Value>,
        },
        /// Any other type (`input_audio`, `refusal`, …).
        #[serde(other)]
        Other,
    }

    /// The `image_url` object of an image part.
    #[derive(Clone, Debug, PartialEq, Deserialize)]
    pub struct ImageUrl {
        /// The URL.
        pub url: String,
        /// `low`, `high` or `auto`.
        #[serde(default)]
        pub detail: Option<String>,
        /// Every other field.
        #[serde(flatten)]
        pub extra: Map<String, Value>,
    }

    /// The `file` object of a file part.
    #[derive(Clone, Debug, PartialEq, Deserialize)]
    pub struct File {
        /// The file as a `data:` URL.
        #[serde(default)]
        pub file_data: Option<String>,
        /// Its name.
        #[serde(default)]
        pub filename: Option<String>,
        /// Every other field (`file_id`: an upload ctxlog cannot read).
        #[serde(flatten)]
        pub extra: Map<String, Value>,
    }
}

pub mod responses {
    //! `openai-responses`: input items by `type` (a message may leave its `type` out).

    use super::*;

    /// A message item's content: a string or a list of parts.
    pub type Content = super::Content<Part>;

    /// One input item, by its `type`.
    #[derive(Clone, Debug, PartialEq, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    pub enum Item {
        /// A message (`user`, `assistant`, `system` or `developer`).
        Message(Message),
        /// A function call the model made.
        FunctionCall(FunctionCall),
        /// The output of a function call.
        FunctionCallOutput(FunctionCallOutput),
        /// Any other type (`reasoning`, `web_search_call`, `item_reference`, …).
        #[serde(other)]
        Other,
    }

    /// Reads one input item: an object with no `type` but a `role` is a message (the
    /// Responses API's short form).
    ///
    /// # Errors
    ///
    /// What is wrong with the item, as `serde_json` says it.
    pub fn item(mut value: Value) -> Result<Item, serde_json::Error> {
        if let Some(object) = value.as_object_mut()
            && !object.contains_key("type")
            && object.contains_key("role")
        {
            object.insert("type".into(), Value::from("message"));
        }
        serde_json::from_value(value)
    }

    /// A message item.
    #[derive(Clone, Debug, PartialEq, Deserialize)]
    pub struct Message {
        /// Who speaks: `user`, `assistant`, `system` or `developer`.
        pub role: String,
        /// Its content.
        #[serde(deserialize_with = "content")]
        pub content: Content,
        /// Every other field (`id`, `status`, …).
        #[serde(flatten)]
        pub extra: Map<String, Value>,
    }

    /// A `function_call` item.
    #[derive(Clone, Debug, PartialEq, Deserialize)]
    pub struct FunctionCall {
        /// The id its output names.
        pub call_id: String,
        /// The function called.
        pub name: String,
        /// Its arguments: a string of JSON.
        pub arguments: String,
        /// Every other field (`id`, `status`, …).
        #[serde(flatten)]
        pub extra: Map<String, Value>,
    }

    /// A `function_call_output` item.
    #[derive(Clone, Debug, PartialEq, Deserialize)]
    pub struct FunctionCallOutput {
        /// The call it answers.
        pub call_id: String,
        /// The output: a string, or a list of parts.
        #[serde(deserialize_with = "content")]
        pub output: Content,
        /// Every other field (`id`, `status`, …).
        #[serde(flatten)]
        pub extra: Map<String, Value>,
    }

    /// One part of a list content.
    #[derive(Clone, Debug, PartialEq, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    pub enum Part {
        /// Text the application sent.
        InputText {
            /// The text.
            text: String,
            /// Every other field.
            #[serde(flatten)]
            extra: Map<String, Value>,
        },
        /// Text the model wrote.
        OutputText {
            /// The text.
            text: String,
            /// Every other field (`annotations`, `logprobs`).
            #[serde(flatten)]
            extra: Map<String, Value>,
        },
        /// An image, by URL (an `https:` or `data:` URL).
        InputImage {
            /// The URL (absent for an uploaded `file_id`).
            #[serde(default)]
            image_url: Option<String>,
            /// `low`, `high` or `auto`.
            #[serde(default)]
            detail: Option<String>,
            /// Every other field.
            #[serde(flatten)]
            extra: Map<String, Value>,
        },
        /// A file (a PDF), inline as a `data:` URL or by uploaded id.
        InputFile {
            /// The file as a `data:` URL.
            #[serde(default)]
            file_data: Option<String>,
            /// Its name.
            #[serde(default)]
            filename: Option<String>,
            /// Every other field.
            #[serde(flatten)]
            extra: Map<String, Value>,
        },
        /// A refusal the model wrote.
        Refusal {
            /// Its text.
            refusal: String,
            /// Every other field.
            #[serde(flatten)]
            extra: Map<String, Value>,
        },
        /// Any other type.
        #[serde(other)]
        Other,
    }

    impl Part {
        /// A text part's text and other fields (`input_text`, `output_text`, and a `refusal`,
        /// which is the model's text too); any other part given back as it is.
        ///
        /// # Errors
        /// The part itself, when it is not one of those three.
        pub fn into_text(self) -> Result<(String, Map<String, Value>), Part> {
            match self {
                Part::InputText { text, extra }
                | Part::OutputText { text, extra }
                | Part::Refusal {
                    refusal: text,
                    extra,
                } => Ok((text, extra)),
                other => Err(other),
            }
        }
    }
}

pub mod anthropic {
    //! `anthropic-messages`: messages of content blocks by `type`.

    use super::*;

    /// A message's content (or the system prompt): a string or a list of blocks.
    pub type Content = super::Content<Block>;

    /// One message.
    #[derive(Clone, Debug, PartialEq, Deserialize)]
    pub struct Message {
        /// Who speaks.
        pub role: Role,
        /// What is said.
        #[serde(deserialize_with = "content")]
        pub content: Content,
        /// Every other field.
        #[serde(flatten)]
        pub extra: Map<String, Value>,
    }

    impl Message {
        /// Whether only Anthropic has a message like this: `tool_use` and `tool_result` blocks.
        pub fn only_anthropic(&self) -> bool {
            match &self.content {
                Content::Text(_) => false,
                Content::Parts(blocks) => blocks
                    .iter()
                    .any(|b| matches!(b, Block::ToolUse { .. } | Block::ToolResult { .. })),
            }
        }
    }

    /// The role of a message: there is no system role inside `messages`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Role {
        /// The user (also tool results, notes and notices from the projector).
        User,
        /// The assistant (also its tool calls).
        Assistant,
    }

    /// One content block, by its `type`.
    #[derive(Clone, Debug, PartialEq, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    pub enum Block {
        /// Text.
        Text {
            /// The text.
            text: String,
            /// Every other field (`cache_control`, `citations`, …).
            #[serde(flatten)]
            extra: Map<String, Value>,
        },
        /// A tool call (in an assistant message).
        ToolUse {
            /// The call's id.
            id: String,
            /// The tool's name.
            name: String,
            /// The arguments, an object.
            #[serde(default)]
            input: Option<Value>,
            /// Every other field.
            #[serde(flatten)]
            extra: Map<String, Value>,
        },
        /// The result of a call (in a user message).
        ToolResult {
            /// The call it answers.
            tool_use_id: String,
            /// The result: a string or blocks (left out: empty).
            #[serde(default, deserialize_with = "content")]
            content: Option<Content>,
            /// Whether the call failed.
            #[serde(default)]
            is_error: bool,
            /// Every other field.
            #[serde(flatten)]
            extra: Map<String, Value>,
        },
        /// An image.
        Image {
            /// Where its bytes are.
            source: Source,
            /// Every other field.
            #[serde(flatten)]
            extra: Map<String, Value>,
        },
        /// A document (a PDF).
        Document {
            /// Where its bytes are.
            source: Source,
            /// Its title.
            #[serde(default)]
            title: Option<String>,
            /// Every other field.
            #[serde(flatten)]
            extra: Map<String, Value>,
        },
        /// Any other type (`thinking`, `redacted_thinking`, …).
        #[serde(other)]
        Other,
    }

    /// An image's or document's `source`: `base64` (`media_type`, `data`) or `url`.
    #[derive(Clone, Debug, PartialEq, Deserialize)]
    pub struct Source {
        /// `base64`, `url`, …
        #[serde(rename = "type")]
        pub kind: String,
        /// The media type, for `base64`.
        #[serde(default)]
        pub media_type: Option<String>,
        /// The bytes, base64, for `base64`.
        #[serde(default)]
        pub data: Option<String>,
        /// The URL, for `url`.
        #[serde(default)]
        pub url: Option<String>,
        /// Every other field.
        #[serde(flatten)]
        pub extra: Map<String, Value>,
    }
}

/// A tool result's content read back into what [`crate::wire`] wrote it from: the status and
/// exit code its header line states (`[status=S exit_code=N]`, written before the text when
/// the status is not `ok` or the exit code not 0), and the text after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolResultText<'a> {
    /// The status the header states (`ok` without one).
    pub status: ToolStatus,
    /// The exit code the header states.
    pub exit_code: Option<i64>,
    /// The text after the header (all of the content without one).
    pub text: &'a str,
}

/// Reads a tool result's content. Only a header the writer writes for the values it states
/// counts as one (so the writer writes the same content again from them); any other content,
/// an artifact's header included, is all text with status `ok`.
pub fn tool_result(content: &str) -> ToolResultText<'_> {
    result_header(content).unwrap_or(ToolResultText {
        status: ToolStatus::Ok,
        exit_code: None,
        text: content,
    })
}

fn result_header(content: &str) -> Option<ToolResultText<'_>> {
    let (line, text) = content.split_once('\n')?;
    let inner = line.strip_prefix('[')?.strip_suffix(']')?;
    let mut read = ToolResultText {
        status: ToolStatus::Ok,
        exit_code: None,
        text,
    };
    for part in inner.split(' ') {
        match part.split_once('=')? {
            ("status", "error") => read.status = ToolStatus::Error,
            ("status", "interrupted") => read.status = ToolStatus::Interrupted,
            ("exit_code", n) => read.exit_code = Some(n.parse().ok()?),
            _ => return None,
        }
    }
    let written = crate::wire::result_content(
        &Event {
            seq: 0,
            ts_ms: 0,
            body: EventBody::ToolResult {
                call_id: String::new(),
                tool: String::new(),
                status: read.status,
                exit_code: read.exit_code,
                text: text.to_owned(),
                artifact: None,
                parts: Vec::new(),
                provider_item: None,
            },
        },
        false,
    );
    (written == content).then_some(read)
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Content<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Either<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Either<T> {
            type Value = Content<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Content<T>, E> {
                Ok(Content::Text(s.to_owned()))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Content<T>, E> {
                Ok(Content::Text(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Content<T>, A::Error> {
                elements(seq).map(Content::Parts)
            }
        }
        deserializer.deserialize_any(Either(PhantomData))
    }
}

/// A list whose bad element is named by its index (`[2]: …`).
struct Listed<T>(Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Listed<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct List<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for List<T> {
            type Value = Listed<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Listed<T>, A::Error> {
                elements(seq).map(Listed)
            }
        }
        deserializer.deserialize_seq(List(PhantomData))
    }
}

fn elements<'de, A: SeqAccess<'de>, T: Deserialize<'de>>(mut seq: A) -> Result<Vec<T>, A::Error> {
    let mut items = Vec::new();
    loop {
        match seq.next_element() {
            Ok(Some(item)) => items.push(item),
            Ok(None) => return Ok(items),
            Err(e) => return Err(de::Error::custom(format_args!("[{}]: {e}", items.len()))),
        }
    }
}

/// Reads a field's value, naming the field in the error: `content[2]: …`, `"system": …`.
fn named<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
    field: &str,
) -> Result<T, D::Error> {
    T::deserialize(deserializer).map_err(|e| {
        let e = e.to_string();
        if e.starts_with('[') {
            de::Error::custom(format_args!("{field}{e}"))
        } else {
            de::Error::custom(format_args!("\"{field}\": {e}"))
        }
    })
}

fn content<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    named(d, "content")
}

fn system<'de, D: Deserializer<'de>>(d: D) -> Result<Option<anthropic::Content>, D::Error> {
    named(d, "system")
}

/// `tool_calls`: a list, or `null` for none.
fn tool_calls<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<openai::ToolCall>>, D::Error> {
    let listed: Option<Listed<openai::ToolCall>> = named(d, "tool_calls")?;
    Ok(listed.map(|l| l.0))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn openai(json: &str) -> Result<openai::Message, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    fn anthropic(json: &str) -> Result<anthropic::Message, String> {
        serde_json::from_value(serde_json::from_str(json).unwrap()).map_err(|e| e.to_string())
    }

    #[test]
    fn openai_messages_read_by_role_with_their_extra_fields() {
        let m = openai(
            r#"{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}"#,
        )
        .unwrap();
        let openai::Message::Assistant(a) = &m else {
            panic!("{m:?}")
        };
        assert_eq!(a.content, None);
        assert_eq!(a.tool_calls.as_ref().unwrap()[0].function.name, "f");
        assert!(a.extra.contains_key("refusal"));
        assert!(m.only_openai());
        let user = openai(r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}"#).unwrap();
        assert!(!user.only_openai());
        let openai::Message::User(u) = user else {
            panic!()
        };
        assert!(
            matches!(&u.content, Some(Content::Parts(p)) if matches!(&p[1], openai::Part::ImageUrl { image_url, .. } if image_url.url == "x"))
        );
    }

    #[test]
    fn a_bad_element_is_named_by_its_index() {
        let tool_calls = r#"{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f"}},{"function":{"name":"g"}}]}"#;
        let e =
            serde_json::from_value::<openai::Message>(serde_json::from_str(tool_calls).unwrap())
                .unwrap_err();
        assert_eq!(e.to_string(), "tool_calls[1]: missing field `id`");
        let e = anthropic(
            r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result"}]}"#,
        )
        .unwrap_err();
        assert_eq!(e, "content[1]: missing field `tool_use_id`");
        let e = anthropic(r#"{"role":"user","content":5}"#).unwrap_err();
        assert_eq!(
            e,
            "\"content\": invalid type: integer `5`, expected a string or an array"
        );
        assert!(
            anthropic(r#"{"role":"robot","content":"x"}"#)
                .unwrap_err()
                .contains("unknown variant `robot`")
        );
        let e = openai(r#"{"role":"assistant","tool_calls":[{"id":"c","type":"custom","function":{"name":"f"}}]}"#)
            .unwrap_err();
        assert!(
            e.starts_with("tool_calls[0]: unknown variant `custom`"),
            "{e}"
        );
    }

    #[test]
    fn anthropic_blocks_read_by_type() {
        let m = anthropic(
            r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"18C"}],"is_error":true,"cache_control":{}},{"type":"image","source":{"type":"url","url":"x"}}]}"#,
        )
        .unwrap();
        assert!(m.only_anthropic());
        let Content::Parts(blocks) = &m.content else {
            panic!()
        };
        assert!(matches!(
            &blocks[0],
            anthropic::Block::ToolResult { is_error: true, extra, .. } if extra.contains_key("cache_control")
        ));
        assert!(
            matches!(&blocks[1], anthropic::Block::Image { source, .. } if source.kind == "url")
        );
    }

    #[test]
    fn arguments_read_back_to_what_is_written_as_the_same_string() {
        for text in [
            r#"{"cmd":"ls","n":[1,2.5,{"é":null}]}"#,
            r#"{"b":1,"a":2}"#,
            r#"{"cmd": "ls"}"#,
            r#""quoted""#,
            "ls -la",
            "7",
            "",
        ] {
            let value = openai::arguments(text.to_owned());
            assert_eq!(crate::wire::openai_arguments(&value), text);
        }
        assert!(openai::arguments(r#"{"b":1,"a":2}"#.into()).is_object());
        assert!(openai::arguments(r#"{"cmd": "ls"}"#.into()).is_string());
    }

    #[test]
    fn a_result_header_reads_back_only_as_the_writer_writes_it() {
        let read = tool_result("[status=error exit_code=2]\nboom");
        assert_eq!(
            (read.status, read.exit_code, read.text),
            (ToolStatus::Error, Some(2), "boom")
        );
        let read = tool_result("[exit_code=-1]\n");
        assert_eq!(
            (read.status, read.exit_code, read.text),
            (ToolStatus::Ok, Some(-1), "")
        );
        for plain in [
            "[exit_code=0]\nx",
            "[exit_code=2 status=error]\nx",
            "[status=ok]\nx",
            "[status=error artifact=sha256-00 bytes=9 recall seq=3]\nx",
            "[]\nx",
            "[status=error]",
            "plain",
        ] {
            let read = tool_result(plain);
            assert_eq!(
                (read.status, read.exit_code, read.text),
                (ToolStatus::Ok, None, plain)
            );
        }
    }
}
