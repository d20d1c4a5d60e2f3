//! [`Report`]: what a projection kept, left out, clipped, and why (docs/design.md#p8-report).

use serde::Serialize;

use crate::history::SeqRange;
use crate::options::{Policy, Tokenizer, WireFormat};

/// A projection: the body to send, and the report of how it was built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Projection {
    /// The exact request body (compact JSON, UTF-8).
    pub body: Vec<u8>,
    /// What was kept, left out and clipped, with sizes per tier.
    pub report: Report,
}

/// The report of one projection, serializable to JSON.
///
/// # Format
///
/// ```json
/// {"format":"openai-chat","tokenizer":"o200k","policy":"turns",
///  "bytes":308,"tokens":71,"tokens_exact":true,
///  "budget":{"max_bytes":308,"max_tokens":null,"reserve_output":null,
///            "output_limit":null,"input_token_limit":null,
///            "recall_reserve":{"bytes":0,"tokens":0}},
///  "mandatory":{"bytes":140,"tokens":30},
///  "turns":{"total":2,"kept":2,"dropped":0},
///  "kept":[{"first":1,"last":4}],"dropped":[],"pinned":[],"detail_start":1,
///  "tiers":[{"tier":"envelope","bytes":40,"tokens":3,"items":1}, …],
///  "clips":[],"drops":[],"notice":null,
///  "recall":{"k":0,"included":[],"skipped":[],"unavailable":null},"notes":[]}
/// ```
///
/// * `bytes` is the body's length; `tokens` follows [`crate::tokens`]' rule for the format
///   (`tokens_exact` is false for `anthropic-messages`, whose figures are estimates).
/// * `tiers` lists every tier present, in body order; their `bytes` and `tokens` sum to the
///   totals (the `envelope` tier holds the JSON around the messages, commas, reply priming and
///   tool definitions).
/// * `kept`/`dropped` are seq ranges of history (pinned notes are listed in `pinned`).
/// * `drops` names each left-out piece with its tier and reason; `clips` each clipped result.
/// * `erased` and `lost` (present only when not empty) are the seq ranges erased and lost to
///   damage in the history from the oldest kept seq on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The wire format of the body.
    pub format: WireFormat,
    /// The tokenizer tokens were counted with.
    pub tokenizer: Tokenizer,
    /// The policy applied (with `auto`, the one it chose).
    pub policy: Policy,
    /// Why the `auto` policy chose `policy`, one sentence; absent when the request named the
    /// policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_reason: Option<String>,
    /// The body's length in bytes: exactly `body.len()`.
    pub bytes: u64,
    /// The body's tokens by the format's rule.
    pub tokens: u64,
    /// Whether `tokens` is exact for the provider (false: an estimate).
    pub tokens_exact: bool,
    /// The budget the body was fitted to.
    pub budget: BudgetReport,
    /// The size of the mandatory content alone.
    pub mandatory: Size,
    /// How many history turns there were, were kept (in any form) and left out entirely.
    pub turns: TurnCounts,
    /// History seq ranges present in the body (in full or in part).
    pub kept: Vec<SeqRange>,
    /// History seq ranges left out entirely.
    pub dropped: Vec<SeqRange>,
    /// Seqs of the pinned notes sent.
    pub pinned: Vec<u64>,
    /// The seq of the oldest history event kept in detail (turns: the oldest kept turn; agent:
    /// the oldest optional entry, previous reply or latest result kept), if any. Recalled
    /// pages are only useful, and only included, from before it.
    pub detail_start: Option<u64>,
    /// Bytes and tokens per tier, in body order.
    pub tiers: Vec<TierSize>,
    /// Tool results whose text was clipped to a head/tail excerpt.
    pub clips: Vec<Clip>,
    /// Every optional piece left out, with its tier and reason.
    pub drops: Vec<Drop>,
    /// The omission notice sent, if any.
    pub notice: Option<String>,
    /// Recalled pages: included, skipped, or why recall was unavailable.
    pub recall: RecallReport,
    /// Things the caller should know that are not errors, one sentence each (the facade adds
    /// e.g. that the conversation has no commits yet, which a typo in its name looks like).
    pub notes: Vec<String>,
    /// The opaque provider items of the history kept: sent, or left out and why (absent when
    /// there were none).
    #[serde(default, skip_serializing_if = "OpaqueCounts::is_empty")]
    pub opaque: OpaqueCounts,
    /// Seq ranges erased (one per tombstone) in the history from the oldest kept seq on;
    /// absent when there were none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub erased: Vec<SeqRange>,
    /// Seq ranges lost to damage and given up by a repair (one per loss record) in the history
    /// from the oldest kept seq on; left out of the body like erased ones, but reported as
    /// lost, with a note. Absent when there were none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<SeqRange>,
    /// The images and documents the body carries and the rule their tokens were counted by
    /// (absent when it carries none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<MediaReport>,
    /// With `window: stable`, where the part of the body that stays the same from call to call
    /// ends, and the block the window starts at; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_prefix: Option<StablePrefix>,
    /// With `cache_hints`, which provider cache hints the body carries and where they were
    /// chosen from; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_hints: Option<CacheHintsReport>,
}

/// The provider cache hints of a body (docs/projection.md, "Cache hints").
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CacheHintsReport {
    /// Which hints: `cache_control` (Anthropic breakpoints), `prompt_cache_key` (OpenAI's
    /// automatic caching) or `prompt_cache_breakpoints` (the key and explicit breakpoints).
    pub kind: crate::media::CacheHints,
    /// How many breakpoints the body carries (`cache_control` or `prompt_cache_breakpoint`
    /// fields, the caller's own included).
    pub breakpoints: u64,
    /// Where `kind` came from: the model's row of the model table, or the format's default
    /// (no row, or a row whose hints the format cannot carry).
    pub source: String,
}

/// The stable prefix of a `window: stable` body (docs/projection.md, "Windows").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StablePrefix {
    /// The body's first `bytes` bytes are the stable prefix: the envelope's head, the system
    /// prompt, pinned notes and the kept history; what follows varies per call.
    pub bytes: u64,
    /// The tokens of a body holding the stable prefix's messages alone.
    pub tokens: u64,
    /// The block the window starts at: the kept history starts at the first turn whose
    /// stored offset is at or after `block` × the block size (0 when it starts at the first).
    pub block: u64,
}

/// The images and documents of a body (docs/projection.md, "Images and documents").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MediaReport {
    /// Image parts sent.
    pub images: u64,
    /// Of those, images whose size ctxlog could not read (a URL): charged the most the rule
    /// allows, an estimate.
    pub images_estimated: u64,
    /// Document parts sent, charged per page: an estimate.
    pub documents: u64,
    /// The image token rule used, and where it came from: the model's row of the model
    /// table, or the format's default when the model has none.
    pub rule: String,
}

/// What became of the opaque provider items (docs/design.md#p14-more-wire-formats) in the
/// history a body kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OpaqueCounts {
    /// Sent verbatim, in their place.
    pub sent: u64,
    /// Left out: items of another wire format than the body's.
    pub left_out_other_format: u64,
    /// Left out: items of history the agent context summarises as text.
    pub left_out_summarised: u64,
}

impl OpaqueCounts {
    /// True when the history kept had no opaque item.
    pub fn is_empty(&self) -> bool {
        *self == OpaqueCounts::default()
    }
}

/// A budget as applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BudgetReport {
    /// The byte limit, if any.
    pub max_bytes: Option<u64>,
    /// The token limit as given, if any.
    pub max_tokens: Option<u64>,
    /// The output reservation as given, if any.
    pub reserve_output: Option<u64>,
    /// The output limit written into the body, if any.
    pub output_limit: Option<u64>,
    /// `max_tokens - output_limit`: the tokens the body may use, if a token limit was given.
    pub input_token_limit: Option<u64>,
    /// The room held back for recalled pages (docs/design.md#p13-true-words): history used at most
    /// the budget less this. Zero when it was not needed: no page may be included, or no page was
    /// left out for room without it, or holding it back did not bring in more pages.
    pub recall_reserve: Size,
}

/// A size in bytes and tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Size {
    /// Bytes on the wire.
    pub bytes: u64,
    /// Tokens by the format's rule.
    pub tokens: u64,
}

/// Turn counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TurnCounts {
    /// Turns in the history.
    pub total: usize,
    /// Turns with content in the body.
    pub kept: usize,
    /// Turns left out entirely.
    pub dropped: usize,
}

/// A class of content with its own place in the drop order (docs/design.md#p6-agent-tiers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// JSON around the messages, commas, model, output limit, tools, reply priming.
    Envelope,
    /// The system prompt (mandatory).
    System,
    /// Pinned notes (mandatory).
    Pinned,
    /// The omission notice (optional, opt-in).
    Notice,
    /// Recalled pages (optional, dropped first).
    Recalled,
    /// Whole history turns (turns policy).
    History,
    /// Earlier user requests, verbatim (agent, mandatory).
    UserRequests,
    /// The previous assistant reply (agent, mandatory).
    PreviousReply,
    /// The latest tool result (agent, mandatory; its text may be clipped).
    LatestResult,
    /// Latest failure and latest possible change (agent, mandatory).
    Status,
    /// One-line activity rows (agent, optional).
    Activity,
    /// Detailed tool results other than the latest (agent, optional).
    Details,
    /// The current input (mandatory).
    Input,
}

/// One tier's share of the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TierSize {
    /// The tier.
    pub tier: Tier,
    /// Its bytes.
    pub bytes: u64,
    /// Its tokens.
    pub tokens: u64,
    /// How many pieces (messages, rows, results, pages) it holds.
    pub items: usize,
}

/// A tool result whose text was clipped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Clip {
    /// The tool result's seq.
    pub seq: u64,
    /// Characters of the full text.
    pub chars: u64,
    /// Characters kept (head plus tail).
    pub kept_chars: u64,
    /// How to get the rest: `recall seq=N`.
    pub recall: String,
}

/// An optional piece left out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Drop {
    /// Its tier.
    pub tier: Tier,
    /// The seqs it covers.
    pub seqs: SeqRange,
    /// Why: `budget`, `duplicate`, `kept_in_detail`, `beyond_recall_k`, `no_room`.
    pub reason: String,
}

/// What happened to recall.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RecallReport {
    /// The most pages that could be included.
    pub k: usize,
    /// Pages included, in body order.
    pub included: Vec<PageRef>,
    /// Candidates not included, with the reason.
    pub skipped: Vec<SkippedPage>,
    /// Why no recall was possible, as the caller said (for example a damaged index).
    pub unavailable: Option<String>,
}

impl RecallReport {
    /// Whether a page was left out for want of room while fewer than `k` were included.
    pub fn starved(&self) -> bool {
        self.included.len() < self.k && self.skipped.iter().any(|s| s.reason == "budget")
    }
}

/// A recalled page's identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PageRef {
    /// The source event's seq.
    pub seq: u64,
    /// The page number.
    pub page: u32,
}

/// A recall candidate not included.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkippedPage {
    /// The source event's seq.
    pub seq: u64,
    /// The page number.
    pub page: u32,
    /// `kept_in_detail` (not older than the detailed history), `budget`, or `beyond_recall_k`.
    pub reason: String,
}
