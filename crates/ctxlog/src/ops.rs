//! The operations layer (docs/design.md#i0-one-operations-layer): every operation is one typed
//! request and one typed response, called on a long-lived [`Store`](crate::Store). The CLI, the
//! HTTP server and the Python package are adapters over these: they parse their input into a
//! request, call the operation, and print or send the response. Rules (defaults, what a missing
//! conversation means, which errors count as corruption) live here, once.
//!
//! # Format
//!
//! Requests and responses are serde types; their JSON is what the server speaks and the CLI
//! prints. Fields left out of a request take the default its docs state.
//!
//! | operation | request | response |
//! |---|---|---|
//! | commit | [`CommitRequest`] | [`CommitReceipt`]: `{"first_seq","last_seq","replayed"}` |
//! | log | [`LogRequest`] | [`LogResponse`]: `{"last_seq","events":[Event…]}` |
//! | verify | [`VerifyRequest`] | [`VerifyResponse`]: `verdict`, the ledger's [`VerifyReport`] and `recall_index` |
//! | repair | [`RepairRequest`] | [`RepairResponse`]: the plan (`kept`, `lost`, `commits`, `saved_aside`, …) and whether it was `applied` |
//! | project | [`ProjectRequest`] | [`Projection`]: the exact body bytes and the report |
//! | count | [`CountRequest`] | [`Count`]: `{"bytes","tokens","tokenizer",…}` |
//! | recall | [`RecallRequest`] | [`RecallResult`]: `{"query","hits","next_offset","note"}` |
//! | reindex | [`ReindexRequest`] | [`ReindexResponse`] |
//! | erase | [`EraseRequest`] | [`EraseResponse`] |
//! | list | [`ListRequest`] | [`ListResponse`]: `{"conversations":[ConversationInfo…]}` |
//! | gc | [`GcRequest`] | [`GcResponse`]: `{"dry_run","conversations":[GcConversation…],…}` |
//! | export | [`ExportRequest`] | the JSON Lines (written to a sink), and [`ExportResponse`] |
//! | import | [`ImportRequest`] (and the input's bytes) | [`ImportResponse`] |

use ctxlog_ledger::{CommitReceipt, DEFAULT_ERASE_REASON, ErasureReport, Event, NewCommit};
use ctxlog_projection::{
    Count, Policy, Projection, ProjectionRequest, RecallReserve, Tokenizer, Window, WireFormat,
};
use ctxlog_recall::RecallResult;
use serde::{Deserialize, Serialize};

pub use crate::backend::ConversationInfo;
pub use crate::retention::{Removal, RetentionPolicy};
pub use ctxlog_ledger::VerifyReport;

use crate::{Error, Result};

/// The model written into a body when the request names none, per wire format.
pub fn default_model(format: WireFormat) -> &'static str {
    match format {
        WireFormat::AnthropicMessages => "claude-sonnet-4-5",
        _ => "gpt-4o",
    }
}

/// The output reservation a body carries when the request names none, per wire format:
/// Anthropic requires its `max_tokens` field; the others have none.
pub fn default_reserve_output(format: WireFormat) -> Option<u64> {
    match format {
        WireFormat::AnthropicMessages => Some(ctxlog_projection::DEFAULT_ANTHROPIC_MAX_TOKENS),
        _ => None,
    }
}

/// The definition of ctxlog's recall tool in `format`'s own tool shape.
pub fn recall_tool_definition(format: WireFormat) -> serde_json::Value {
    match format {
        WireFormat::AnthropicMessages => ctxlog_recall::anthropic_tool(),
        WireFormat::OpenAiResponses => ctxlog_recall::responses_tool(),
        WireFormat::OpenAiChat => ctxlog_recall::openai_tool(),
    }
}

/// The most one commit's turn JSON, or one body to count, may be: 64 MiB, four times the
/// ledger's default commit cap, so that the ledger, not the reader, names the cap a turn
/// exceeds. Front ends read no more than this, and the operations refuse more.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// The most one import's input may be: 1 GiB. An export inlines its artifacts, so it may be
/// far larger than any one commit; the input is parsed and checked whole before anything is
/// written.
pub const MAX_IMPORT_BYTES: u64 = 1 << 30;

/// Refuses an input of `len` bytes over `cap`; `what` names it in the message.
///
/// # Errors
/// [`Error::BadInput`] saying the cap.
pub fn check_input_size(len: u64, cap: u64, what: &str) -> Result<()> {
    if len <= cap {
        return Ok(());
    }
    Err(Error::BadInput {
        reason: format!(
            "{what} is larger than {} MiB; nothing was written",
            cap >> 20
        ),
    })
}

/// Reads all of `reader` (a file, standard input), refusing more than `cap` bytes without
/// reading past it; `what` names the input in messages.
///
/// # Errors
/// [`Error::BadInput`] over the cap; [`Error::Io`] when it cannot be read.
pub fn read_input(reader: impl std::io::Read, cap: u64, what: &str) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(reader, cap + 1), &mut bytes).map_err(
        |source| Error::Io {
            path: what.into(),
            source,
        },
    )?;
    check_input_size(bytes.len() as u64, cap, what)?;
    Ok(bytes)
}

/// An operation's request from its JSON fields (an HTTP request body, Python's keyword
/// arguments), for the conversation named outside them (`None`: a store-wide request, such
/// as [`GcRequest`] over every conversation): fields left out take the request's
/// defaults, and a field that is unknown, of the wrong type or not one of its names is
/// refused (class usage), so a misspelt option never silently does nothing. `tools` that are
/// not a list are bad input, as tools that are not tool definitions are.
///
/// # Errors
/// [`Error::InvalidRequest`] naming what was expected; [`Error::BadInput`] for `tools`.
pub fn request_from_fields<T: serde::de::DeserializeOwned>(
    conversation: Option<&str>,
    mut fields: serde_json::Map<String, serde_json::Value>,
) -> Result<T> {
    if fields.get("tools").is_some_and(|t| !t.is_array()) {
        return Err(Error::BadInput {
            reason: "tools: expected a list of tool definition objects".into(),
        });
    }
    if let Some(conversation) = conversation {
        fields.insert("conversation".into(), conversation.into());
    }
    serde_json::from_value(serde_json::Value::Object(fields)).map_err(|e| Error::InvalidRequest {
        reason: format!("request: {e}"),
    })
}

/// Commit one turn (or part of one) to a conversation, creating it on first commit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommitRequest {
    /// The conversation's name.
    pub conversation: String,
    /// The events, an optional idempotency id, and the events' original times (in the JSON
    /// form, each event's `"ts"`: see [`crate::parse_commit`]).
    #[serde(flatten)]
    pub commit: NewCommit,
}

impl CommitRequest {
    /// Parses the commit JSON every front end accepts ([`crate::parse_commit`]: the shorthand
    /// or the full form); `id`, when given, overrides an id inside the JSON.
    ///
    /// # Errors
    /// [`Error::BadInput`] for input that is not such a turn, or is over
    /// [`MAX_INPUT_BYTES`].
    pub fn from_json(conversation: &str, json: &[u8], id: Option<&str>) -> Result<CommitRequest> {
        check_input_size(json.len() as u64, MAX_INPUT_BYTES, "the turn JSON")?;
        Ok(CommitRequest {
            conversation: conversation.to_string(),
            commit: crate::parse_commit(json, id)?,
        })
    }
}

/// Read a conversation's events.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRequest {
    /// The conversation's name.
    pub conversation: String,
    /// The first seq to return [default: 1].
    #[serde(default = "one")]
    pub from: u64,
    /// At most this many seqs from `from` [default: all].
    #[serde(default)]
    pub limit: Option<u64>,
}

fn one() -> u64 {
    1
}

/// The most events one page of the log holds ([`LogRequest::page`]).
pub const MAX_LOG_PAGE: u64 = 10_000;
/// A page's size when the client names none.
pub const DEFAULT_LOG_PAGE: u64 = 1_000;

impl LogRequest {
    /// One page of the log, for clients that read it page by page (the server's events
    /// route): from `from` [default: 1], at most `limit` events [default:
    /// [`DEFAULT_LOG_PAGE`], at most [`MAX_LOG_PAGE`]]. The next page starts after the last
    /// seq returned.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for a limit outside 1 to [`MAX_LOG_PAGE`].
    pub fn page(conversation: String, from: Option<u64>, limit: Option<u64>) -> Result<Self> {
        let limit = limit.unwrap_or(DEFAULT_LOG_PAGE);
        if !(1..=MAX_LOG_PAGE).contains(&limit) {
            return Err(Error::InvalidRequest {
                reason: format!("limit must be from 1 to {MAX_LOG_PAGE}, not {limit}"),
            });
        }
        Ok(LogRequest {
            conversation,
            from: from.unwrap_or_else(one),
            limit: Some(limit),
        })
    }

    /// The events `from` to `to`, both included, for clients that name a range (the MCP
    /// `read` tool): at most [`MAX_LOG_PAGE`] of them. Seqs past the conversation's last are
    /// not an error; the response holds the events that exist.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for `to` before `from` or a range over [`MAX_LOG_PAGE`]
    /// events; `from` 0 is refused by the log operation itself, in the words every front end
    /// gives.
    pub fn range(conversation: String, from: u64, to: u64) -> Result<Self> {
        let invalid = |reason: String| Err(Error::InvalidRequest { reason });
        if to < from {
            return invalid(format!(
                "to_seq ({to}) is before from_seq ({from}): give from_seq <= to_seq"
            ));
        }
        let count = (to - from).saturating_add(1);
        if count > MAX_LOG_PAGE {
            return invalid(format!(
                "the range {from}-{to} holds {count} events, over the cap of {MAX_LOG_PAGE} per \
                 read: read it in ranges of at most {MAX_LOG_PAGE}"
            ));
        }
        Self::page(conversation, Some(from), Some(count))
    }
}

/// A conversation's events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogResponse {
    /// The seq of the conversation's newest event.
    pub last_seq: u64,
    /// The events asked for, in seq order (an erased range reads as its tombstone).
    pub events: Vec<Event>,
}

/// Check every record and artifact of a conversation; writes nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    /// The conversation's name.
    pub conversation: String,
}

/// Repair a damaged conversation (docs/design.md#l11-repair): a dry run that plans and changes
/// nothing unless `accept_loss`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RepairRequest {
    /// The conversation's name.
    pub conversation: String,
    /// Carry the plan out: keep every intact record, cover every lost seq with a loss record,
    /// save the damaged bytes under `recovered/`, rebuild the sidecars and the recall index
    /// [default: false, a dry run].
    pub accept_loss: bool,
}

/// What a repair found and did, or in a dry run would do.
pub use ctxlog_ledger::RepairReport as RepairResponse;
/// Parts of a [`RepairResponse`]: a lost run, a saved range, and where a repair saves what it
/// gives up (which also says what an offset counts: a byte of the log, or a seq).
pub use ctxlog_ledger::{AffectedCommit, LostRun, SavedAside, SavedTo};

/// Build the exact request body for one model call (docs/design.md#5-projection).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProjectRequest {
    /// The conversation's name. A conversation with no commits yet projects the mandatory
    /// input alone (the first model call of a new chat) and creates nothing.
    pub conversation: String,
    /// The current user input (mandatory) [default: none]. Without it (or with an empty one,
    /// or for `anthropic-messages` a whitespace-only one), the projection continues the open
    /// turn of an agent loop: the newest turn must end in tool results, and the body ends
    /// with them (docs/design.md#p11-the-agent-loop); otherwise the request is refused (class
    /// usage).
    pub input: Option<String>,
    /// The system prompt (mandatory) [default: none].
    pub system: Option<String>,
    /// The model name, written as given [default: [`default_model`] of the format].
    pub model: Option<String>,
    /// The wire format [default: `openai-chat`].
    pub format: WireFormat,
    /// Byte budget [default: none].
    pub max_bytes: Option<u64>,
    /// Token budget, input plus reserved output [default: none].
    pub max_tokens: Option<u64>,
    /// Tokenizer for token budgets and the report [default: `o200k`].
    pub tokenizer: Tokenizer,
    /// Tokens reserved for the reply [default: none; the projector's default for formats
    /// that require the field].
    pub reserve_output: Option<u64>,
    /// `auto`, `turns` or `agent` [default: `auto`: `agent` when the newest turns a window
    /// could hold contain a tool call or result, else `turns`; the report names the choice].
    pub policy: Policy,
    /// Relevant older pages to include, at most [`ctxlog_recall::MAX_LIMIT`]
    /// [default: 0 for `turns`, 2 for `agent`, that of the chosen policy for `auto`].
    pub recall: Option<usize>,
    /// Room held back for recalled pages, so recent turns cannot starve recall
    /// (docs/design.md#p13-true-words) [default: [`ctxlog_projection::DEFAULT_RECALL_RESERVE`], a
    /// quarter of the budget, whenever pages may be included (`recall` > 0, the agent policy's
    /// default); none otherwise; held back only when a page would otherwise be left out for room].
    /// JSON: `{"fraction":0.25}` or `{"amount":N}` (N bytes of a byte budget, N tokens of a token
    /// budget).
    pub recall_reserve: Option<RecallReserve>,
    /// Add a notice saying which turns were left out and how to recall them [default: false].
    pub notice: bool,
    /// Where the kept history starts: `sliding` (the newest turns that fit) or `stable` (the
    /// first kept turn stays fixed while the suffix from it fits, then moves forward by a
    /// block, so consecutive bodies share their prefix for a provider's prompt cache; what
    /// varies per call goes last) [default: `sliding`].
    pub window: Window,
    /// With `window: stable`, the share of the budget, strictly between 0 and 1, the body
    /// drops to when the window moves; a block is the rest [default:
    /// [`ctxlog_projection::DEFAULT_LOW_WATER`], 0.8].
    pub low_water: Option<f64>,
    /// Write provider cache hints where the prefix is stable, the kind the model table gives
    /// the model (else the format's default; the report's `cache_hints` says which):
    /// Anthropic `cache_control` breakpoints, OpenAI's `prompt_cache_key` (a hash of the
    /// conversation's ledger id) with explicit `prompt_cache_breakpoint` parts for the models
    /// that take them, all counted in the budget [default: false].
    pub cache_hints: bool,
    /// Tool definitions to send, in the format's own shape, counted in the budget.
    pub tools: Vec<serde_json::Value>,
    /// Also offer ctxlog's recall tool ([`recall_tool_definition`]) [default: false].
    pub recall_tool: bool,
    /// Other top-level fields of the body (`temperature`, `tool_choice`, …), written as given
    /// after the projector's own and counted in the budget [default: none]. A field the
    /// projector writes itself (`model`, `messages`, `tools`, the output limit, …) is refused
    /// (class usage). Library callers only (the gateway): not a field of the JSON request.
    #[serde(skip)]
    pub fields: serde_json::Map<String, serde_json::Value>,
    /// Without an input, continue a newest turn that ends in the user's message (committed
    /// before the call, not answered yet) as the open turn: the message ends the body
    /// [default: false: only a turn ending in tool results is continued]. Library callers
    /// only (the gateway): not a field of the JSON request.
    #[serde(skip)]
    pub stored_input: bool,
}

impl ProjectRequest {
    /// The projector's request, with the defaults above applied.
    ///
    /// # Errors
    /// [`ctxlog_projection::Error::InvalidRequest`]/`InvalidBudget` for a request the
    /// projector refuses (class usage).
    pub fn to_projection(&self) -> Result<ProjectionRequest> {
        self.to_projection_with(true)
    }

    /// [`to_projection`](Self::to_projection), with the report's token figures counted
    /// when no token budget needs them, or not
    /// ([`ctxlog_projection::ProjectionRequestBuilder::token_figures`]).
    pub(crate) fn to_projection_with(&self, token_figures: bool) -> Result<ProjectionRequest> {
        let mut request = ProjectionRequest::builder();
        request
            .token_figures(token_figures)
            .format(self.format)
            .model(self.model.as_deref().unwrap_or(default_model(self.format)))
            .tokenizer(self.tokenizer)
            .policy(self.policy)
            .notice(self.notice)
            .window(self.window)
            .cache_hints(self.cache_hints);
        if let Some(share) = self.low_water {
            request.low_water(share);
        }
        if let Some(input) = self.given_input() {
            request.input(input);
        }
        if let Some(system) = &self.system {
            request.system(system.clone());
        }
        if let Some(n) = self.max_bytes {
            request.max_bytes(n);
        }
        if let Some(n) = self.max_tokens {
            request.max_tokens(n);
        }
        if let Some(n) = self.reserve_output {
            request.reserve_output(n);
        }
        if let Some(k) = self.recall {
            if k > ctxlog_recall::MAX_LIMIT {
                return Err(Error::InvalidRequest {
                    reason: format!(
                        "recall must be from 0 to {} pages, not {k}",
                        ctxlog_recall::MAX_LIMIT
                    ),
                });
            }
            request.recall_k(k);
        }
        if let Some(reserve) = self.recall_reserve {
            request.recall_reserve(reserve);
        }
        let mut tools = self.tools.clone();
        if let Some(i) = tools.iter().position(|t| !t.is_object()) {
            return Err(Error::BadInput {
                reason: format!("tools: element {i} is not a tool definition object"),
            });
        }
        if self.recall_tool {
            tools.push(recall_tool_definition(self.format));
        }
        if !tools.is_empty() {
            request.tools(tools);
        }
        if !self.fields.is_empty() {
            request.fields(self.fields.clone());
        }
        request.stored_input(self.stored_input);
        Ok(request.build()?)
    }
}

impl ProjectRequest {
    /// The input the body carries: none when it is left out, empty, or (for
    /// `anthropic-messages`, which rejects blank text) whitespace only.
    fn given_input(&self) -> Option<&str> {
        let input = self.input.as_deref()?;
        let blank = match self.format {
            WireFormat::AnthropicMessages => input.trim().is_empty(),
            _ => input.is_empty(),
        };
        (!blank).then_some(input)
    }
}

/// Count the bytes and tokens of a request body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountRequest {
    /// The body, as sent.
    pub body: Vec<u8>,
    /// Its wire format [default: detected from the body's shape ([`detect_format`]); a chat
    /// body that could be either chat format is refused (class usage) and needs the format].
    #[serde(default)]
    pub format: Option<WireFormat>,
    /// The tokenizer [default: `o200k`].
    #[serde(default)]
    pub tokenizer: Tokenizer,
}

/// True when `body` is a JSON object with a `messages` array (the shape both chat formats
/// share) or, with no `messages`, an `input` list or string (a Responses body).
pub(crate) fn looks_like_a_request(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .is_some_and(|v| {
            v.get("messages").is_some_and(serde_json::Value::is_array) || is_responses(&v)
        })
}

/// Whether a body is shaped as an `openai-responses` request: an `input` list or string and
/// no `messages`.
fn is_responses(body: &serde_json::Value) -> bool {
    body.get("messages").is_none()
        && body
            .get("input")
            .is_some_and(|i| i.is_array() || i.is_string())
}

/// The wire format a request body has, told from its shape, or `None` when it could be
/// either (or is not a request body).
///
/// * A body with an `input` list (or string) and no `messages` is `openai-responses`.
/// * Anthropic requires `max_tokens`: a body without it is `openai-chat`.
/// * `openai-chat` only: a `system`, `developer` or `tool` message, `tool_calls`,
///   `max_completion_tokens`, or a tool of `"type":"function"`.
/// * `anthropic-messages` only: a top-level `system`, or a `tool_use`/`tool_result` block.
///
/// A body with `max_tokens` and marks of one format only is that format; with marks of both,
/// or of neither (a plain `{"model","max_tokens","messages":[…user/assistant…]}` is valid for
/// both), it is ambiguous.
pub fn detect_format(body: &[u8]) -> Option<WireFormat> {
    use ctxlog_projection::read::{Envelope, anthropic, openai};
    use serde::Deserialize as _;
    if serde_json::from_slice::<serde_json::Value>(body).is_ok_and(|v| is_responses(&v)) {
        return Some(WireFormat::OpenAiResponses);
    }
    let body: Envelope = serde_json::from_slice(body).ok()?;
    if body.max_tokens.is_none() {
        return Some(WireFormat::OpenAiChat);
    }
    let openai = body.max_completion_tokens.is_some()
        || body.tools.iter().any(|t| t.function.is_some())
        || body
            .messages
            .iter()
            .any(|m| openai::Message::deserialize(m).is_ok_and(|m| m.only_openai()));
    let anthropic = body.system.is_some()
        || body
            .messages
            .iter()
            .any(|m| anthropic::Message::deserialize(m).is_ok_and(|m| m.only_anthropic()));
    match (openai, anthropic) {
        (true, false) => Some(WireFormat::OpenAiChat),
        (false, true) => Some(WireFormat::AnthropicMessages),
        _ => None,
    }
}

/// Search a conversation's history (docs/design.md#6-recall).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallRequest {
    /// The conversation's name.
    pub conversation: String,
    /// Plain words, taken literally [default: empty, which lists newest first].
    #[serde(default)]
    pub query: String,
    /// Page through this one event instead of searching [default: none].
    #[serde(default)]
    pub seq: Option<u64>,
    /// Skip this many results (the previous result's `next_offset`) [default: 0].
    #[serde(default)]
    pub offset: usize,
    /// At most this many results, 1 to [`ctxlog_recall::MAX_LIMIT`]
    /// [default: [`ctxlog_recall::DEFAULT_LIMIT`]].
    #[serde(default = "default_limit")]
    pub limit: usize,
}

fn default_limit() -> usize {
    ctxlog_recall::DEFAULT_LIMIT
}

/// Delete and rebuild a conversation's recall index from its ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReindexRequest {
    /// The conversation's name.
    pub conversation: String,
}

/// What a rebuild of the recall index did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReindexResponse {
    /// Events read from the ledger.
    pub events_indexed: u64,
    /// Pages written to the index.
    pub pages_written: u64,
    /// The newest seq the index covers.
    pub indexed_through: u64,
    /// Artifacts whose text could not be read (their excerpt is indexed instead).
    pub artifact_failures: u64,
}

/// What to erase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EraseTarget {
    /// The turn(s) written by the commit that carried this idempotency id.
    Commit {
        /// The commit's id.
        id: String,
    },
    /// Seqs `from..=to`, widened to whole turns.
    Seqs {
        /// First seq.
        from: u64,
        /// Last seq (inclusive).
        to: u64,
    },
    /// A *retraction*: the conversation's newest `events` events (earlier tombstones and
    /// other system markers not counted), exactly: not widened to whole turns, one
    /// tombstone covering just them. For an application taking back what it just stored
    /// (a framework's "pop the last item"); the turn they were part of stays open.
    Last {
        /// How many of the newest events (at least 1).
        events: u64,
    },
    /// The whole conversation.
    All,
}

impl EraseTarget {
    /// The target a front end's separate options name: `seqs` (first, last), a commit id,
    /// the newest `last` events, or the whole conversation; exactly one of them.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] when none or more than one is given.
    pub fn choose(
        seqs: Option<(u64, u64)>,
        commit: Option<String>,
        last: Option<u64>,
        all: bool,
    ) -> Result<Self> {
        match (seqs, commit, last, all) {
            (Some((from, to)), None, None, false) => Ok(EraseTarget::Seqs { from, to }),
            (None, Some(id), None, false) => Ok(EraseTarget::Commit { id }),
            (None, None, Some(events), false) => Ok(EraseTarget::Last { events }),
            (None, None, None, true) => Ok(EraseTarget::All),
            _ => Err(Error::InvalidRequest {
                reason: "erase needs exactly one target: a seq range, a commit id, the last N \
                         events, or all"
                    .into(),
            }),
        }
    }
}

/// Erase data for real (docs/design.md#e1-erasure).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EraseRequest {
    /// The conversation's name (never created by an erasure).
    pub conversation: String,
    /// What to erase.
    pub target: EraseTarget,
    /// Why, recorded in the tombstone (at most [`ctxlog_ledger::MAX_ERASE_REASON_BYTES`]
    /// bytes) [default: [`DEFAULT_ERASE_REASON`]].
    #[serde(default = "default_reason")]
    pub reason: String,
}

fn default_reason() -> String {
    DEFAULT_ERASE_REASON.to_string()
}

impl EraseRequest {
    /// Checks what can be checked before the conversation is opened: a seq range starts at
    /// 1 and is not empty, and the reason fits (the ledger's own rule, with no last seq yet).
    ///
    /// # Errors
    /// A [`ctxlog_ledger::Error::BadRange`] (class usage).
    pub fn check(&self) -> Result<()> {
        let range = match self.target {
            EraseTarget::Seqs { from, to } => from..=to,
            EraseTarget::Last { events: 0 } => {
                return Err(ctxlog_ledger::Error::BadRange {
                    reason: "a retraction takes back at least 1 event (--last 0 retracts nothing)"
                        .into(),
                }
                .into());
            }
            _ => 1..=1,
        };
        Ok(ctxlog_ledger::rules::check_erase(
            &range,
            u64::MAX,
            &self.reason,
        )?)
    }
}

/// A seq range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqSpan {
    /// First seq.
    pub from: u64,
    /// Last seq (inclusive).
    pub to: u64,
}

/// What an erasure removed.
///
/// # Format
/// A range: `{"erased":{"from","to"},"requested":{"from","to"},"events","artifacts_deleted",
/// "recovered_deleted","ledger_id","already_erased"}`; a whole conversation: `{"erased":"all","conversation"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EraseResponse {
    /// A range of one conversation.
    Range {
        /// The range erased (widened to whole turns). Earlier tombstones inside it stay as
        /// written (docs/design.md#e6-listing-and-tombstones); each run of live seqs around them
        /// got its own tombstone.
        erased: SeqSpan,
        /// The range asked for.
        requested: SeqSpan,
        /// Events whose content was removed.
        events: u64,
        /// Artifacts deleted because nothing references them any more.
        artifacts_deleted: u64,
        /// Torn tails deleted from `recovered/`.
        recovered_deleted: u64,
        /// The ledger's new id (unchanged when `already_erased`).
        ledger_id: String,
        /// True when earlier erasures already covered the range: nothing changed, and their
        /// tombstones keep their reason and time (docs/design.md#e6-listing-and-tombstones). Absent
        /// in older output: false.
        #[serde(default)]
        already_erased: bool,
    },
    /// A whole conversation.
    All {
        /// Always `"all"`.
        erased: AllMarker,
        /// The conversation erased.
        conversation: String,
    },
}

/// The literal `"all"` of [`EraseResponse::All`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllMarker {
    /// `"all"`.
    All,
}

impl From<ErasureReport> for EraseResponse {
    fn from(r: ErasureReport) -> Self {
        EraseResponse::Range {
            erased: SeqSpan {
                from: r.from,
                to: r.to,
            },
            requested: SeqSpan {
                from: r.requested.0,
                to: r.requested.1,
            },
            events: r.events,
            artifacts_deleted: r.artifacts_deleted,
            recovered_deleted: r.recovered_deleted,
            ledger_id: r.ledger_id,
            already_erased: r.already_erased,
        }
    }
}

/// List the store's conversations.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRequest {}

/// The store's conversations, newest activity first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListResponse {
    /// One entry per conversation.
    pub conversations: Vec<ConversationInfo>,
}

/// Apply a retention policy (docs/design.md#e2-retention): whole turns it selects are erased, each
/// run under a tombstone whose reason starts with `retention:`.
///
/// # Format
/// `{"conversation":"chat1","older_than":"90d","keep_turns":10,"max_bytes":N,
/// "include_pinned":false,"dry_run":true}`; every field is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GcRequest {
    /// The conversation [default: none: every conversation of the store].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// Remove turns whose newest event is older than this, e.g. `90d`, `12h`
    /// ([`RetentionPolicy::older_than`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub older_than: Option<String>,
    /// Keep only the newest N turns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_turns: Option<u64>,
    /// Remove the oldest turns until the ledger file is at most N bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Remove turns holding pinned notes too [default: false].
    pub include_pinned: bool,
    /// Report what would be removed and write nothing [default: false].
    pub dry_run: bool,
}

impl GcRequest {
    /// The request's rules. Each rule given replaces the store's configured one
    /// ([`crate::StoreConfig`]'s `[retention]`); at least one rule must result.
    pub fn policy(&self) -> RetentionPolicy {
        RetentionPolicy {
            older_than: self.older_than.clone(),
            keep_turns: self.keep_turns,
            max_bytes: self.max_bytes,
            include_pinned: self.include_pinned,
        }
    }
}

/// What a retention policy removed (or, in a dry run, would remove).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcResponse {
    /// True when nothing was written.
    pub dry_run: bool,
    /// The policy applied (the request's rules over the configured ones).
    pub policy: RetentionPolicy,
    /// One entry per conversation looked at, by name.
    pub conversations: Vec<GcConversation>,
    /// Seqs removed in all of them.
    pub seqs_removed: u64,
    /// Bytes of ledger freed in all of them (see [`GcConversation::bytes_freed`]).
    pub bytes_freed: i64,
}

/// What a retention policy removed from one conversation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcConversation {
    /// The conversation's name.
    pub conversation: String,
    /// The ranges erased, each under one tombstone, oldest first.
    pub removed: Vec<Removal>,
    /// Seqs removed (covered by the new tombstones).
    pub seqs_removed: u64,
    /// Turns removed.
    pub turns_removed: u64,
    /// Turns (or leading notes) kept because they hold a pinned note.
    pub pinned_kept: u64,
    /// The ledger's size before, in bytes.
    pub bytes_before: u64,
    /// Its size after (estimated from record sizes in a dry run).
    pub bytes_after: u64,
    /// `bytes_before - bytes_after`. Negative when the removed events were smaller than the
    /// tombstone records that keep their seqs (one per seq, about 120 bytes each).
    pub bytes_freed: i64,
    /// Set when `max_bytes` could not be met without removing exempt or newest content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Set when a store-wide run passed over this conversation because it is damaged: what
    /// is wrong (nothing of it was removed; `ctxlog verify` says more). The run goes on with
    /// the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
}

/// What the response of [`CommitRequest`] is.
pub type CommitResponse = CommitReceipt;
/// What the response of [`ProjectRequest`] is.
pub type ProjectResponse = Projection;
/// What the response of [`CountRequest`] is.
pub type CountResponse = Count;
/// What the response of [`RecallRequest`] is.
pub type RecallResponse = RecallResult;
/// What verify found: the ledger's report (its fields at the top level of the JSON), the
/// state of the conversation's recall index, and the overall verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerifyResponse {
    /// The overall verdict ([`Verdict`]): `ok`, `attention` or `damaged`.
    pub verdict: Verdict,
    /// Every record, the sidecar index and the artifacts.
    #[serde(flatten)]
    pub ledger: VerifyReport,
    /// The recall index, a cache of the ledger (docs/design.md#r2-disposable), checked through and
    /// through.
    pub recall_index: RecallIndexCheck,
}

impl VerifyResponse {
    /// The response for `ledger` and `recall_index`, with its verdict.
    pub fn new(ledger: VerifyReport, recall_index: RecallIndexCheck) -> VerifyResponse {
        let verdict = if !ledger.artifact_problems.is_empty() {
            Verdict::Damaged
        } else if ledger.is_clean() && !matches!(recall_index, RecallIndexCheck::Damaged { .. }) {
            Verdict::Ok
        } else {
            Verdict::Attention
        };
        VerifyResponse {
            verdict,
            ledger,
            recall_index,
        }
    }

    /// True when the ledger is clean and the recall index is not damaged.
    pub fn is_clean(&self) -> bool {
        self.verdict == Verdict::Ok
    }

    /// What needs attention, one line each, when the verdict is [`Verdict::Attention`]: the
    /// ledger's records are intact, but a torn tail, the sidecar index or the recall index
    /// is to be dealt with (each line says how).
    pub fn attention(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let report = &self.ledger;
        if report.torn_tail_bytes > 0 {
            lines.push(format!(
                "a torn tail of {} bytes after the last complete commit: the next writer cuts it \
                 and saves it under recovered/",
                report.torn_tail_bytes
            ));
        }
        if let Some(problem) = &report.sidecar_problem {
            lines.push(format!(
                "the sidecar index: {problem} (a cache: the next writer rebuilds it from the log)"
            ));
        }
        for leftover in &report.leftovers {
            lines.push(if leftover == "erase.pending" {
                "erase.pending: an erasure was interrupted, and artifacts/ or recovered/ may \
                 still hold erased text; the next writer open (the next commit) finishes it"
                    .to_string()
            } else {
                format!("{leftover}: a temporary file an interrupted write left; the next writer open removes it")
            });
        }
        for orphan in &report.orphaned_artifacts {
            lines.push(format!(
                "{orphan}: an artifact no event references (left by an interrupted commit or \
                 erasure); the next erasure deletes it"
            ));
        }
        if let RecallIndexCheck::Damaged { problem } = &self.recall_index {
            lines.push(format!(
                "the recall index: {problem} (a cache: `ctxlog reindex CONV` rebuilds it)"
            ));
        }
        lines
    }
}

/// The overall verdict of a verify (docs/design.md#l11-repair). A ledger whose records do not
/// check out is not a verdict but an error of class [`crate::ErrorClass::Corrupt`] naming the
/// offset and seq.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Everything checks out (CLI exit 0).
    Ok,
    /// The ledger is intact, but a cache (the sidecar index, the recall index) or a leftover
    /// (a torn tail, an interrupted erasure's marker, a temporary file) needs attention; each
    /// finding says what clears it (CLI exit 8).
    Attention,
    /// Content the records reference (artifacts) is missing or altered (CLI exit 5).
    Damaged,
}

/// What verify found of a conversation's recall index: `{"state": "ok", "pages": N}` and so on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RecallIndexCheck {
    /// No index file yet: the first recall or projection with recalled pages builds it.
    Absent,
    /// SQLite's and FTS5's own checks passed and every page matches its checksum.
    Ok {
        /// Pages in the index (0 for an index of an older version, recreated on next use).
        pages: u64,
    },
    /// The index is damaged. The ledger is not: `ctxlog reindex` rebuilds the index from it.
    /// Until then explicit recall fails, and damage that no read can see (FTS5's term data)
    /// may make searches miss or misrank pages — never serve text that is not the ledger's.
    Damaged {
        /// What was found wrong.
        problem: String,
    },
    /// The check could not run (for example a read-only file: FTS5's check needs to open it
    /// for writing, though it writes nothing).
    Unchecked {
        /// Why.
        reason: String,
    },
}

impl RecallIndexCheck {
    /// Checks the index file at `path` (a full read; writes nothing).
    pub fn of(path: &std::path::Path) -> RecallIndexCheck {
        if std::fs::symlink_metadata(path).is_err() {
            return RecallIndexCheck::Absent;
        }
        match ctxlog_recall::RecallIndex::check_file(path) {
            Ok(pages) => RecallIndexCheck::Ok { pages },
            Err(e) if e.is_damaged() => RecallIndexCheck::Damaged {
                problem: e.to_string(),
            },
            Err(e) => RecallIndexCheck::Unchecked {
                reason: e.to_string(),
            },
        }
    }
}

pub use crate::error::{damage_hint, damage_hint_http, erase_damage_hint, erase_damage_hint_http};

/// Corruption that a [`VerifyResponse`] found beyond the records themselves (referenced
/// artifacts missing or altered), as an error of class [`crate::ErrorClass::Corrupt`]. A
/// damaged recall index is not corruption: it is a cache, and `reindex` rebuilds it.
pub fn verify_problem(report: &VerifyResponse) -> Option<Error> {
    if report.ledger.artifact_problems.is_empty() {
        return None;
    }
    Some(Error::ArtifactsDamaged {
        problems: report.ledger.artifact_problems.clone(),
    })
}

/// Write a conversation as JSON Lines (docs/design.md#e4-export-and-import; the format is in
/// [`crate::transfer`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportRequest {
    /// The conversation's name.
    pub conversation: String,
    /// Salvage a damaged conversation [default: false]: every intact record in order, each
    /// damaged range as a `{"damaged":{…}}` line where it lies, nothing written to the store
    /// (docs/export-import.md, "Salvage").
    #[serde(default)]
    pub salvage: bool,
}

/// What an export wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportResponse {
    /// The conversation's name.
    pub conversation: String,
    /// Lines (events) written.
    pub events: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Damaged ranges marked (a salvage; 0 otherwise).
    #[serde(default)]
    pub damaged: u64,
}

/// Bring history in (docs/design.md#e4-export-and-import): the input's bytes are passed beside this
/// request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImportRequest {
    /// The conversation to import into (created if missing); for
    /// [`crate::transfer::ImportFormat::ConversationDataset`] the prefix of the names
    /// (`<conversation>-<sample id>`), and optional [default: none].
    pub conversation: Option<String>,
    /// What the input is [default: `ctxlog`, an export].
    pub format: crate::transfer::ImportFormat,
}

/// One conversation an import wrote (or found already imported).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportedConversation {
    /// The conversation's name.
    pub conversation: String,
    /// Events the input holds for it.
    pub events: u64,
    /// Chunks committed now.
    pub commits_written: u64,
    /// Chunks already imported earlier (replayed: nothing written).
    pub commits_replayed: u64,
    /// Seqs of the imported events (first, last).
    pub first_seq: u64,
    /// See `first_seq`.
    pub last_seq: u64,
}

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportResponse {
    /// One entry per conversation, in input order.
    pub conversations: Vec<ImportedConversation>,
    /// Events written now (0 when the input was imported before).
    pub events_written: u64,
    /// What was not imported as such (system messages made notes, skipped parts).
    pub notes: Vec<String>,
    /// The samples of a dataset that were refused (nothing of each written) while the
    /// others were imported; empty otherwise.
    pub failed: Vec<ImportFailure>,
}

/// A dataset's sample that an import refused: nothing of it was written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportFailure {
    /// The conversation it would have become.
    pub conversation: String,
    /// Why, naming the sample (and, for dates going backwards, the session keys and dates).
    pub error: String,
}

/// Progress of an import, reported after each committed chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImportProgress {
    /// Events committed (or replayed) so far, over all conversations.
    pub done: u64,
    /// Events the input holds.
    pub total: u64,
}
