//! The recall tool offered to the model: its definition and its handler
//! (docs/design.md#r5-recall-tool).

use serde_json::{Value, json};

use crate::config::TOOL_NAME;
use crate::error::Result;
use crate::hit::RecallResult;
use crate::search::{MAX_LIMIT, SearchOptions};

/// The tool's description, shown to the model.
pub const TOOL_DESCRIPTION: &str = "Search this conversation's earlier messages, notes and tool \
outputs (including full outputs that were cut short) that are no longer in context. Returns \
pages with provenance (seq, kind, tool, page, character range). Use `seq` to read one event \
page by page. A missing hit does not prove absence: try other words.";

/// Default hits per tool call.
pub const TOOL_DEFAULT_LIMIT: usize = 4;

/// The JSON Schema of the tool's arguments.
pub fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "Words to look for (plain text; no operators). Empty lists the newest pages."
            },
            "seq": {
                "type": "integer",
                "minimum": 1,
                "description": "Read this one event page by page instead of searching."
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "Skip this many hits (or pages, with seq); use next_offset from the previous result."
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "description": "How many hits to return (default 4)."
            }
        },
        "additionalProperties": false
    })
}

/// The tool definition in OpenAI's format:
/// `{"type":"function","function":{"name","description","parameters"}}`.
pub fn openai_tool() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": TOOL_DESCRIPTION,
            "parameters": input_schema()
        }
    })
}

/// The tool definition in the OpenAI Responses API's format:
/// `{"type":"function","name","description","parameters","strict":false}` (the flat shape;
/// `strict` is required there, and false: the arguments are optional).
pub fn responses_tool() -> Value {
    json!({
        "type": "function",
        "name": TOOL_NAME,
        "description": TOOL_DESCRIPTION,
        "parameters": input_schema(),
        "strict": false
    })
}

/// The tool definition in Anthropic's format: `{"name","description","input_schema"}`.
pub fn anthropic_tool() -> Value {
    json!({
        "name": TOOL_NAME,
        "description": TOOL_DESCRIPTION,
        "input_schema": input_schema()
    })
}

/// Validated tool arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolArgs {
    /// The query (may be empty).
    pub query: String,
    /// The search options derived from `seq`, `offset` and `limit`.
    pub options: SearchOptions,
}

/// Why tool arguments were refused. Its message is meant for the model.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid recall arguments: {0}")]
pub struct ArgsError(pub String);

impl ToolArgs {
    /// Validates the model's arguments. A JSON string holding an object is accepted too
    /// (OpenAI sends arguments as a string).
    ///
    /// # Errors
    /// [`ArgsError`] naming the offending field.
    pub fn from_json(args: &Value) -> Result<ToolArgs, ArgsError> {
        let parsed;
        let args = match args {
            Value::String(s) => {
                parsed = serde_json::from_str::<Value>(s)
                    .map_err(|e| ArgsError(format!("arguments are not JSON: {e}")))?;
                &parsed
            }
            Value::Null => &Value::Null,
            other => other,
        };
        let empty = serde_json::Map::new();
        let obj = match args {
            Value::Object(o) => o,
            Value::Null => &empty,
            _ => return Err(ArgsError("arguments must be a JSON object".into())),
        };
        if let Some(k) = obj
            .keys()
            .find(|k| !matches!(k.as_str(), "query" | "seq" | "offset" | "limit"))
        {
            return Err(ArgsError(format!(
                "unknown field `{k}` (expected query, seq, offset, limit)"
            )));
        }
        let query = match obj.get("query") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(ArgsError("`query` must be a string".into())),
        };
        let seq = uint(obj, "seq", 1, u64::MAX)?;
        let offset = uint(obj, "offset", 0, u64::from(u32::MAX))?.unwrap_or(0);
        let limit =
            uint(obj, "limit", 1, MAX_LIMIT as u64)?.map_or(TOOL_DEFAULT_LIMIT, |l| l as usize);
        Ok(ToolArgs {
            query,
            options: SearchOptions {
                seq,
                offset: offset as usize,
                limit,
                ..SearchOptions::default()
            },
        })
    }
}

fn uint(
    obj: &serde_json::Map<String, Value>,
    key: &str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, ArgsError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64().or_else(|| whole_number(v)) {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(ArgsError(format!(
                "`{key}` must be an integer from {min} to {max}, got {v}"
            ))),
        },
    }
}

/// A JSON number with no fractional part written as a float (`2.0`): JSON Schema's
/// `integer` accepts it, so the handler must too. Negative or too large values are `None`.
fn whole_number(v: &Value) -> Option<u64> {
    let f = v.as_f64()?;
    (f.fract() == 0.0 && (0.0..u64::MAX as f64).contains(&f)).then_some(f as u64)
}

/// The outcome of one tool call: the JSON to send back as the tool result, and whether it is
/// an error (Anthropic's `is_error`).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    /// The result JSON: a [`RecallResult`], or `{"error":{"code","message"}}`.
    pub json: Value,
    /// True for bad arguments or an unusable index.
    pub is_error: bool,
}

/// Handles one call of the recall tool with `search` (see
/// [`RecallIndex::handle_tool_call`](crate::RecallIndex::handle_tool_call)).
pub(crate) fn respond(
    args: &Value,
    search: impl FnOnce(&str, &SearchOptions) -> Result<RecallResult>,
) -> ToolOutput {
    let args = match ToolArgs::from_json(args) {
        Ok(a) => a,
        Err(e) => return tool_error("invalid_arguments", &e.to_string()),
    };
    match search(&args.query, &args.options) {
        Ok(mut result) => {
            result.query = echo(&result.query);
            ToolOutput {
                json: serde_json::to_value(&result).unwrap_or(Value::Null),
                is_error: false,
            }
        }
        Err(e) if e.is_damaged() => tool_error(
            "index_damaged",
            &format!("{e}. Recall is unavailable until `ctxlog reindex` is run."),
        ),
        Err(e) => tool_error("recall_failed", &e.to_string()),
    }
}

/// Longest query, in characters, echoed back to the model in a tool result.
pub const TOOL_QUERY_ECHO_CHARS: usize = 200;

/// The query as echoed in a tool result: a pasted 16 KB query must not come back whole and
/// cost the model's context twice. Longer queries are cut and end with `…`.
fn echo(query: &str) -> String {
    match query.char_indices().nth(TOOL_QUERY_ECHO_CHARS) {
        Some((cut, _)) => format!("{}…", &query[..cut]),
        None => query.to_owned(),
    }
}

/// An error tool result.
pub fn tool_error(code: &str, message: &str) -> ToolOutput {
    ToolOutput {
        json: json!({"error": {"code": code, "message": message}}),
        is_error: true,
    }
}
