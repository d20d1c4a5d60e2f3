//! What a projection is asked to build: [`ProjectionRequest`] and its builder.

use ctxlog_event::EventKind;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::options::{Policy, Tokenizer, Window, WireFormat};
use crate::wire::is_blank;

/// The `max_tokens` written into an `anthropic-messages` body when the request gives no
/// output reservation. Anthropic requires the field; this default is also what is subtracted
/// from a token budget.
pub const DEFAULT_ANTHROPIC_MAX_TOKENS: u64 = 4096;

/// The name of ctxlog's recall tool. Notices and context text point the model at it only when
/// the request's tools offer a tool of this name (docs/design.md#p13-true-words).
pub const RECALL_TOOL_NAME: &str = "recall";

/// The share of a budget a request with recalled pages holds back for them when the caller
/// does not say ([`ProjectionRequestBuilder::recall_reserve`]): a quarter.
pub const DEFAULT_RECALL_RESERVE: f64 = 0.25;

/// The share of the budget a [`Window::Stable`] body drops to when its window moves: a block is
/// `1 - low_water` of the budget ([`ProjectionRequestBuilder::low_water`]).
pub const DEFAULT_LOW_WATER: f64 = 0.8;

/// Room held back for recalled pages (docs/design.md#p13-true-words), so that recent history cannot
/// take the whole budget and starve recall. When a page was left out for want of room, the body is
/// built again with history (and growing tool results) fitted to the budget less the reserve, and
/// recalled pages free to use all of it; that body is kept if it includes more pages.
///
/// Parsed (`FromStr`) from `25%` or `0.25` (a fraction) or `N` (N bytes of a byte budget and
/// N tokens of a token budget).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecallReserve {
    /// This share (0 to 1) of `max_bytes` and of the input token limit.
    Fraction(f64),
    /// This many bytes (under a byte budget) and tokens (under a token budget).
    Amount(u64),
}

impl std::str::FromStr for RecallReserve {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let bad = || format!("expected a share like 25% or 0.25, or a whole number, got {s:?}");
        if let Some(pct) = s.strip_suffix('%') {
            let v: f64 = pct.trim().parse().map_err(|_| bad())?;
            return RecallReserve::fraction(v / 100.0).ok_or_else(bad);
        }
        if s.contains('.') {
            let v: f64 = s.trim().parse().map_err(|_| bad())?;
            return RecallReserve::fraction(v).ok_or_else(bad);
        }
        s.trim()
            .parse()
            .map(RecallReserve::Amount)
            .map_err(|_| bad())
    }
}

impl RecallReserve {
    fn fraction(v: f64) -> Option<RecallReserve> {
        (0.0..=1.0)
            .contains(&v)
            .then_some(RecallReserve::Fraction(v))
    }
}

/// A page of old content offered for inclusion, as the recall index returned it
/// (docs/design.md#r6-auto-include).
///
/// The caller ranks the candidates (best first) against the current input; the projector
/// includes up to `recall_k` of them whose seq is older than everything the body keeps in
/// detail, as the first optional content to go when space is short.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecalledPage {
    /// The seq of the event the page was cut from.
    pub seq: u64,
    /// The page number within that event (0-based, as the index numbers them).
    pub page: u32,
    /// The kind of the source event.
    pub kind: EventKind,
    /// First character (Unicode scalar) of the page within the event's text.
    pub char_start: u64,
    /// One past the last character of the page.
    pub char_end: u64,
    /// The page text.
    pub text: String,
}

/// Everything one projection needs besides the history: build it with
/// [`ProjectionRequest::builder`].
///
/// A built request is valid: it has a model, an input that is non-empty when given, and a
/// budget satisfiable in principle (no zero limit, the output reservation below the token
/// limit). A request without input continues the open turn of an agent loop
/// (docs/design.md#p11-the-agent-loop): projecting it fails unless the newest turn ends in tool
/// results.
#[derive(Clone, Debug)]
pub struct ProjectionRequest {
    pub(crate) format: WireFormat,
    pub(crate) model: String,
    pub(crate) system: Option<String>,
    pub(crate) input: Option<String>,
    pub(crate) max_bytes: Option<u64>,
    pub(crate) max_tokens: Option<u64>,
    pub(crate) tokenizer: Tokenizer,
    pub(crate) reserve_output: Option<u64>,
    pub(crate) policy: Policy,
    pub(crate) notice: bool,
    pub(crate) recall_k: usize,
    /// `recall_k` as given (`None`: the policy's default).
    pub(crate) recall_k_given: Option<usize>,
    pub(crate) recalled: Vec<RecalledPage>,
    pub(crate) tools: Vec<serde_json::Value>,
    pub(crate) fields: serde_json::Map<String, serde_json::Value>,
    pub(crate) stored_input: bool,
    pub(crate) recall_unavailable: Option<String>,
    pub(crate) recall_reserve: Option<RecallReserve>,
    pub(crate) token_figures: bool,
    pub(crate) window: Window,
    pub(crate) low_water: f64,
    pub(crate) cache_hints: bool,
    pub(crate) cache_key: Option<String>,
}

impl ProjectionRequest {
    /// A builder with every default (see each setter).
    pub fn builder() -> ProjectionRequestBuilder {
        ProjectionRequestBuilder::default()
    }

    /// The wire format.
    pub fn format(&self) -> WireFormat {
        self.format
    }
    /// Other top-level fields written into the body as given, after the projector's own.
    pub fn fields(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.fields
    }
    /// The model name, written into the body as given.
    pub fn model(&self) -> &str {
        &self.model
    }
    /// The system prompt, if any.
    pub fn system(&self) -> Option<&str> {
        self.system.as_deref()
    }
    /// The current user input; `None` continues the open turn (docs/design.md#p11-the-agent-loop).
    pub fn input(&self) -> Option<&str> {
        self.input.as_deref()
    }
    /// The byte budget, if any.
    pub fn max_bytes(&self) -> Option<u64> {
        self.max_bytes
    }
    /// The token budget (input + reserved output), if any.
    pub fn max_tokens(&self) -> Option<u64> {
        self.max_tokens
    }
    /// The tokenizer tokens are counted with.
    pub fn tokenizer(&self) -> Tokenizer {
        self.tokenizer
    }
    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }
    /// Whether an omission notice is added when history is left out.
    pub fn notice(&self) -> bool {
        self.notice
    }
    /// How many recalled pages may be included.
    pub fn recall_k(&self) -> usize {
        self.recall_k
    }
    /// The recall candidates given with the request, best first (used by
    /// [`project`](crate::project), not by [`project_with_pages`](crate::project_with_pages)).
    pub fn recalled(&self) -> &[RecalledPage] {
        &self.recalled
    }
    /// The tool definitions written into the body.
    pub fn tools(&self) -> &[serde_json::Value] {
        &self.tools
    }
    /// Why the recall index was unavailable, if the caller said so.
    pub fn recall_unavailable(&self) -> Option<&str> {
        self.recall_unavailable.as_deref()
    }
    /// Where the kept history starts.
    pub fn window(&self) -> Window {
        self.window
    }
    /// The share of the budget a [`Window::Stable`] body drops to when its window moves.
    pub fn low_water(&self) -> f64 {
        self.low_water
    }
    /// Whether provider cache hints are written (docs/projection.md, "Cache hints").
    pub fn cache_hints(&self) -> bool {
        self.cache_hints
    }
    /// The conversation's cache key written as OpenAI's `prompt_cache_key` with cache hints.
    pub fn cache_key(&self) -> Option<&str> {
        self.cache_key.as_deref()
    }

    /// The room held back for recalled pages as given (`None`: the default, a
    /// [`DEFAULT_RECALL_RESERVE`] share when `recall_k > 0`, else none).
    pub fn recall_reserve(&self) -> Option<RecallReserve> {
        self.recall_reserve
    }

    /// The bytes and tokens held back for recalled pages: zero when `recall_k` is 0.
    pub fn recall_reserve_size(&self) -> crate::Size {
        if self.recall_k == 0 {
            return crate::Size::default();
        }
        match self
            .recall_reserve
            .unwrap_or(RecallReserve::Fraction(DEFAULT_RECALL_RESERVE))
        {
            RecallReserve::Fraction(f) => crate::Size {
                bytes: self.max_bytes.map_or(0, |b| (b as f64 * f) as u64),
                tokens: self
                    .input_token_limit()
                    .map_or(0, |t| (t as f64 * f) as u64),
            },
            RecallReserve::Amount(n) => crate::Size {
                bytes: if self.max_bytes.is_some() { n } else { 0 },
                tokens: if self.max_tokens.is_some() { n } else { 0 },
            },
        }
    }

    /// Whether the report's token figures are counted when no token budget needs them.
    pub fn token_figures(&self) -> bool {
        self.token_figures
    }

    /// This request with its token figures counted.
    pub(crate) fn with_token_figures(&self) -> ProjectionRequest {
        let mut r = self.clone();
        r.token_figures = true;
        r
    }

    /// This request with `policy` (a concrete one) in place of [`Policy::Auto`], and that
    /// policy's default `recall_k` unless one was given.
    /// The same request with `key` as the conversation's cache key
    /// ([`ProjectionRequestBuilder::cache_key`]).
    pub fn with_cache_key(&self, key: impl Into<String>) -> ProjectionRequest {
        ProjectionRequest {
            cache_key: Some(key.into()),
            ..self.clone()
        }
    }

    pub(crate) fn with_policy(&self, policy: Policy) -> ProjectionRequest {
        let mut r = self.clone();
        r.policy = policy;
        r.recall_k = self.recall_k_given.unwrap_or(policy.default_recall_k());
        r
    }

    /// This request with no room held back for recalled pages.
    pub(crate) fn without_recall_reserve(&self) -> ProjectionRequest {
        let mut r = self.clone();
        r.recall_reserve = Some(RecallReserve::Amount(0));
        r
    }

    /// The output reservation as given (`None`: not asked for).
    pub fn reserve_output(&self) -> Option<u64> {
        self.reserve_output
    }

    /// The output limit actually applied: the reservation subtracted from the token budget
    /// and written as the format's output-limit field. For `anthropic-messages` it defaults
    /// to [`default_anthropic_max_tokens`] (a quarter of a token budget, at most
    /// [`DEFAULT_ANTHROPIC_MAX_TOKENS`]); for `openai-chat` and `openai-responses` it is the
    /// reservation if given (written as `max_completion_tokens` / `max_output_tokens`), else
    /// nothing is reserved or written.
    pub fn output_limit(&self) -> Option<u64> {
        match self.format {
            WireFormat::OpenAiChat | WireFormat::OpenAiResponses => self.reserve_output,
            WireFormat::AnthropicMessages => Some(
                self.reserve_output
                    .unwrap_or(default_anthropic_max_tokens(self.max_tokens)),
            ),
        }
    }

    /// Whether the request's tools offer ctxlog's recall tool ([`RECALL_TOOL_NAME`], in
    /// either format's tool shape).
    pub fn offers_recall_tool(&self) -> bool {
        self.tools.iter().any(|t| {
            t.get("name")
                .or_else(|| t.get("function").and_then(|f| f.get("name")))
                == Some(&serde_json::Value::from(RECALL_TOOL_NAME))
        })
    }

    /// What the input may use of the token budget: `max_tokens - output_limit`.
    pub fn input_token_limit(&self) -> Option<u64> {
        let max = self.max_tokens?;
        Some(max.saturating_sub(self.output_limit().unwrap_or(0)))
    }
}

/// The `max_tokens` an `anthropic-messages` body carries when the request reserves no output:
/// [`DEFAULT_ANTHROPIC_MAX_TOKENS`] without a token budget; under one, a quarter of it (at
/// least 1), capped at that default, so that a plausible budget (`max_tokens` 1500 reserves
/// 375) never fails for want of input room.
pub fn default_anthropic_max_tokens(max_tokens: Option<u64>) -> u64 {
    match max_tokens {
        None => DEFAULT_ANTHROPIC_MAX_TOKENS,
        Some(max) => (max / 4).clamp(1, DEFAULT_ANTHROPIC_MAX_TOKENS),
    }
}

/// Builds a [`ProjectionRequest`]. Setters take `&mut self` and can be chained;
/// [`build`](Self::build) validates and can be called again after changes.
///
/// ```
/// use ctxlog_projection::{Policy, ProjectionRequest, WireFormat};
/// let request = ProjectionRequest::builder()
///     .model("gpt-4o-mini")
///     .input("What did we decide?")
///     .max_bytes(4096)
///     .policy(Policy::Turns)
///     .build()?;
/// assert_eq!(request.format(), WireFormat::OpenAiChat);
/// # Ok::<(), ctxlog_projection::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct ProjectionRequestBuilder {
    format: WireFormat,
    model: Option<String>,
    system: Option<String>,
    input: Option<String>,
    max_bytes: Option<u64>,
    max_tokens: Option<u64>,
    tokenizer: Tokenizer,
    reserve_output: Option<u64>,
    policy: Policy,
    notice: bool,
    recall_k: Option<usize>,
    recalled: Vec<RecalledPage>,
    tools: Vec<serde_json::Value>,
    fields: serde_json::Map<String, serde_json::Value>,
    stored_input: bool,
    recall_unavailable: Option<String>,
    recall_reserve: Option<RecallReserve>,
    token_figures: Option<bool>,
    window: Window,
    low_water: Option<f64>,
    cache_hints: bool,
    cache_key: Option<String>,
}

impl ProjectionRequestBuilder {
    /// Where the kept history starts. Default: [`Window::Sliding`].
    pub fn window(&mut self, window: Window) -> &mut Self {
        self.window = window;
        self
    }

    /// The share of the budget (strictly between 0 and 1) a [`Window::Stable`] body drops to
    /// when its window moves; a block is the rest. Default: [`DEFAULT_LOW_WATER`].
    pub fn low_water(&mut self, share: f64) -> &mut Self {
        self.low_water = Some(share);
        self
    }

    /// Writes provider cache hints where the prefix is stable: Anthropic `cache_control`
    /// breakpoints, OpenAI's `prompt_cache_key` (with [`cache_key`](Self::cache_key)).
    /// Default: off.
    pub fn cache_hints(&mut self, hints: bool) -> &mut Self {
        self.cache_hints = hints;
        self
    }

    /// A stable, non-secret key of the conversation, written as OpenAI's `prompt_cache_key`
    /// when cache hints are on. Default: none (no key written).
    pub fn cache_key(&mut self, key: impl Into<String>) -> &mut Self {
        self.cache_key = Some(key.into());
        self
    }

    /// The wire format. Default: [`WireFormat::OpenAiChat`].
    pub fn format(&mut self, format: WireFormat) -> &mut Self {
        self.format = format;
        self
    }
    /// The model name, written as given. Required: both formats need a `model` field, and a
    /// field added after fitting would break the byte guarantee (docs/design.md#p2-exact-bytes).
    pub fn model(&mut self, model: impl Into<String>) -> &mut Self {
        self.model = Some(model.into());
        self
    }
    /// The system prompt (mandatory content). Default: none, and no system message is sent.
    pub fn system(&mut self, system: impl Into<String>) -> &mut Self {
        self.system = Some(system.into());
        self
    }
    /// The current user input (mandatory content), non-empty. Default: none, and the
    /// projection continues the open turn, which must end in tool results
    /// (docs/design.md#p11-the-agent-loop): that turn is then mandatory and the body ends with its
    /// results.
    pub fn input(&mut self, input: impl Into<String>) -> &mut Self {
        self.input = Some(input.into());
        self
    }
    /// The byte budget: the body's length in bytes will not exceed it. Default: none.
    pub fn max_bytes(&mut self, max_bytes: u64) -> &mut Self {
        self.max_bytes = Some(max_bytes);
        self
    }
    /// The token budget (input plus reserved output) counted with the
    /// [tokenizer](Self::tokenizer). Default: none.
    pub fn max_tokens(&mut self, max_tokens: u64) -> &mut Self {
        self.max_tokens = Some(max_tokens);
        self
    }
    /// The tokenizer. Default: [`Tokenizer::O200k`].
    pub fn tokenizer(&mut self, tokenizer: Tokenizer) -> &mut Self {
        self.tokenizer = tokenizer;
        self
    }
    /// Tokens reserved for the reply: subtracted from the token budget and written as the
    /// output-limit field (`max_completion_tokens` / `max_tokens`). Default: none; for
    /// `anthropic-messages`, which requires the field, [`DEFAULT_ANTHROPIC_MAX_TOKENS`].
    pub fn reserve_output(&mut self, tokens: u64) -> &mut Self {
        self.reserve_output = Some(tokens);
        self
    }
    /// The policy. Default: [`Policy::Auto`].
    pub fn policy(&mut self, policy: Policy) -> &mut Self {
        self.policy = policy;
        self
    }
    /// Whether to add an omission notice when history is left out
    /// (docs/design.md#p7-omission-notice). Default: false.
    pub fn notice(&mut self, notice: bool) -> &mut Self {
        self.notice = notice;
        self
    }
    /// How many recalled pages may be included. Default: the policy's
    /// ([`Policy::default_recall_k`]: 0 for turns, 2 for agent; with auto, the chosen one's).
    pub fn recall_k(&mut self, k: usize) -> &mut Self {
        self.recall_k = Some(k);
        self
    }
    /// The recall candidates, best first, for [`project`](crate::project). Default: none.
    ///
    /// Superseded by [`project_with_pages`](crate::project_with_pages), which asks a
    /// [`PageSource`](crate::PageSource) once the body's detail is settled (one projection
    /// instead of two) and ignores this list. Kept for callers that still project twice.
    pub fn recalled(&mut self, pages: Vec<RecalledPage>) -> &mut Self {
        self.recalled = pages;
        self
    }
    /// Tool definitions written into the body (mandatory content), in the format's own shape.
    /// Default: none, and no `tools` field is written.
    pub fn tools(&mut self, tools: Vec<serde_json::Value>) -> &mut Self {
        self.tools = tools;
        self
    }
    /// Other top-level fields of the body (`temperature`, `tool_choice`, `stream`, …),
    /// written as given (compact, in their order) after the projector's own fields and counted
    /// in the budget: their bytes exactly, their tokens as the tokens of each field's compact
    /// `"key":value` text, an upper bound. Default: none. A field the projector writes itself
    /// (`model`, `messages`, `system`, `tools`, the output limit, …) is refused by
    /// [`build`](Self::build).
    pub fn fields(&mut self, fields: serde_json::Map<String, serde_json::Value>) -> &mut Self {
        self.fields = fields;
        self
    }
    /// Without an input, a newest turn that ends in the user's message (committed before the
    /// call, no reply yet) is continued like an agent loop's open turn: the message ends the
    /// body. Default: false (only a turn ending in tool results is continued).
    pub fn stored_input(&mut self, stored: bool) -> &mut Self {
        self.stored_input = stored;
        self
    }
    /// Tells the projector the recall index could not be used and why; the report says so.
    /// Default: none.
    ///
    /// Superseded by [`project_with_pages`](crate::project_with_pages), which reports a
    /// failing [`PageSource`](crate::PageSource) itself and ignores this. Kept for callers
    /// that still project twice.
    pub fn recall_unavailable(&mut self, reason: impl Into<String>) -> &mut Self {
        self.recall_unavailable = Some(reason.into());
        self
    }

    /// Room held back for recalled pages (docs/design.md#p13-true-words): when a page was left out
    /// for want of room, the body is built again with history fitted to the budget less this (pages
    /// may use all of it), and kept if it includes more pages. Default: [`DEFAULT_RECALL_RESERVE`]
    /// (a quarter of the budget) whenever pages may be included (`recall_k > 0`, so by default with
    /// the agent policy), none otherwise.
    pub fn recall_reserve(&mut self, reserve: RecallReserve) -> &mut Self {
        self.recall_reserve = Some(reserve);
        self
    }

    /// Whether the report carries token figures when no token budget needs them. Default:
    /// true. With false and no [`max_tokens`](Self::max_tokens), nothing is tokenized (a
    /// fresh process builds no tokenizer): the report's counted token figures (`tokens`,
    /// `mandatory.tokens`, each tier's `tokens`) are 0, and the body and every other figure
    /// are what they would be with true. A [`Error::MandatoryExceedsBudget`] still names
    /// the mandatory part's tokens (counted for the error). For a caller that sends the
    /// body and does not read those figures.
    pub fn token_figures(&mut self, counted: bool) -> &mut Self {
        self.token_figures = Some(counted);
        self
    }

    /// Validates and returns the request.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] without a model or with an empty input given (for
    /// `anthropic-messages`, also a whitespace-only input, which Anthropic rejects);
    /// [`Error::InvalidBudget`] for a zero limit or reservation, or a reservation that leaves
    /// no input tokens.
    pub fn build(&self) -> Result<ProjectionRequest> {
        let model = self
            .model
            .clone()
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                invalid_request("a model name is required (both wire formats carry a model field)")
            })?;
        let input = self.input.clone();
        if input.as_deref() == Some("") {
            return Err(invalid_request(
                "the current input must not be empty when given (leave it out to continue \
                 the open turn after a tool result)",
            ));
        }
        if self.format == WireFormat::AnthropicMessages && input.as_deref().is_some_and(is_blank) {
            return Err(invalid_request(
                "the current input is whitespace only, which anthropic-messages rejects \
                 (text content blocks must contain non-whitespace text)",
            ));
        }
        if let Some(key) = self.fields.keys().find(|k| is_body_key(self.format, k)) {
            return Err(invalid_request(&format!(
                "the passed-through field {key:?} is one the projector writes itself: give it \
                 through its own option (model, system, tools, the output reservation)"
            )));
        }
        let low_water = self.low_water.unwrap_or(DEFAULT_LOW_WATER);
        if !(low_water > 0.0 && low_water < 1.0) {
            return Err(invalid_request(&format!(
                "low_water must be a share strictly between 0 and 1 (like 0.8), got {low_water}"
            )));
        }
        let request = ProjectionRequest {
            format: self.format,
            model,
            system: self.system.clone(),
            input,
            max_bytes: self.max_bytes,
            max_tokens: self.max_tokens,
            tokenizer: self.tokenizer,
            reserve_output: self.reserve_output,
            policy: self.policy,
            notice: self.notice,
            recall_k: self.recall_k.unwrap_or(self.policy.default_recall_k()),
            recall_k_given: self.recall_k,
            recalled: self.recalled.clone(),
            tools: self.tools.clone(),
            fields: self.fields.clone(),
            stored_input: self.stored_input,
            recall_unavailable: self.recall_unavailable.clone(),
            recall_reserve: self.recall_reserve,
            token_figures: self.token_figures.unwrap_or(true),
            window: self.window,
            low_water,
            cache_hints: self.cache_hints,
            cache_key: self.cache_key.clone(),
        };
        check_budget(&request)?;
        Ok(request)
    }
}

fn invalid_request(reason: &str) -> Error {
    Error::InvalidRequest {
        reason: reason.to_owned(),
    }
}

fn check_budget(request: &ProjectionRequest) -> Result<()> {
    let invalid = |reason: String| Err(Error::InvalidBudget { reason });
    if request.max_bytes == Some(0) {
        return invalid("max_bytes must be at least 1".into());
    }
    if request.max_tokens == Some(0) {
        return invalid("max_tokens must be at least 1".into());
    }
    if request.reserve_output == Some(0) {
        return invalid("reserve_output must be at least 1 when given".into());
    }
    if let (Some(max), Some(reserve)) = (request.max_tokens, request.output_limit())
        && reserve >= max
    {
        let default_note = if request.reserve_output.is_none() {
            " (the anthropic-messages default; set reserve_output)"
        } else {
            ""
        };
        return invalid(format!(
            "reserve_output {reserve}{default_note} leaves no input tokens within max_tokens {max}"
        ));
    }
    Ok(())
}

/// Whether `key` is a top-level field the projector writes itself in `format` (or one another
/// format's projector writes, which would confuse a reader of the body).
pub fn is_body_key(format: WireFormat, key: &str) -> bool {
    let own: &[&str] = match format {
        WireFormat::OpenAiChat => &["messages", "max_completion_tokens"],
        WireFormat::AnthropicMessages => &["messages", "max_tokens", "system"],
        WireFormat::OpenAiResponses => &["input", "instructions", "max_output_tokens"],
    };
    key == "model" || key == "tools" || own.contains(&key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones() {
        let r = ProjectionRequest::builder()
            .model("m")
            .input("q")
            .build()
            .unwrap();
        assert_eq!(r.format(), WireFormat::OpenAiChat);
        assert_eq!(r.tokenizer(), Tokenizer::O200k);
        assert_eq!(r.policy(), Policy::Auto);
        assert_eq!(r.recall_k(), 0);
        assert!(!r.notice());
        assert_eq!(r.output_limit(), None);
        let a = ProjectionRequest::builder()
            .model("m")
            .input("q")
            .format(WireFormat::AnthropicMessages)
            .policy(Policy::Agent)
            .build()
            .unwrap();
        assert_eq!(a.output_limit(), Some(DEFAULT_ANTHROPIC_MAX_TOKENS));
        assert_eq!(a.recall_k(), 2);
    }

    #[test]
    fn bad_requests_and_budgets_are_refused() {
        let mut b = ProjectionRequest::builder();
        assert!(matches!(
            b.input("q").build(),
            Err(Error::InvalidRequest { .. })
        ));
        b.model("m");
        assert!(b.build().is_ok());
        b.input("");
        assert!(matches!(b.build(), Err(Error::InvalidRequest { .. })));
        b.input("q").max_bytes(0);
        assert!(matches!(b.build(), Err(Error::InvalidBudget { .. })));
        b.max_bytes(10).max_tokens(100).reserve_output(100);
        let err = b.build().unwrap_err().to_string();
        assert!(err.contains("reserve_output 100"), "{err}");
        b.reserve_output(99);
        assert_eq!(b.build().unwrap().input_token_limit(), Some(1));
        b.format(WireFormat::AnthropicMessages);
        assert!(b.build().is_ok());
    }
}
