//! ctxlog's projector: for each model call, the exact request body a provider receives,
//! guaranteed to fit a byte and/or token budget (docs/design.md#5-projection).
//!
//! ```
//! use ctxlog_event::{Event, EventBody};
//! use ctxlog_projection::{ProjectionRequest, SizeCache, SliceHistory, project};
//!
//! let events = vec![
//!     Event { seq: 1, ts_ms: 0, body: EventBody::User { text: "The code is K-7.".into(), parts: vec![], provider_item: None } },
//!     Event { seq: 2, ts_ms: 0, body: EventBody::Assistant { text: "Noted.".into(), provider_item: None } },
//! ];
//! let request = ProjectionRequest::builder()
//!     .model("gpt-4o-mini")
//!     .system("Be brief.")
//!     .input("What is the code?")
//!     .max_bytes(4096)
//!     .build()?;
//! let mut cache = SizeCache::new();
//! let projection = project(&SliceHistory::new(&events), &request, &mut cache)?;
//! assert_eq!(
//!     String::from_utf8(projection.body.clone()).unwrap(),
//!     r#"{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"The code is K-7."},{"role":"assistant","content":"Noted."},{"role":"user","content":"What is the code?"}]}"#
//! );
//! assert_eq!(projection.report.bytes, projection.body.len() as u64);
//! assert_eq!(projection.report.turns.kept, 1);
//! # Ok::<(), ctxlog_projection::Error>(())
//! ```
//!
//! What is guaranteed (each id names its requirement in `docs/design.md`):
//!
//! * **Exact bytes (P2).** `report.bytes == body.len()`, and `body.len() <= max_bytes`; every
//!   byte (omission notice, output limit, tools) is counted before fitting.
//! * **Tokens (P3).** `report.tokens` is what [`count`] returns for the body: OpenAI's
//!   published rule with a real offline tokenizer (`o200k_base`, `cl100k_base`); an estimate
//!   for `anthropic-messages` ([`tokens`]). `report.tokens <= max_tokens - reserve_output`.
//! * **Mandatory input (P4).** System prompt, current input, pinned notes (and with the agent
//!   policy its pinned tiers) are never dropped: if they alone exceed the budget,
//!   [`Error::MandatoryExceedsBudget`] says how much they need.
//! * **A policy for the conversation** by default (`auto`): the `agent` policy when the newest
//!   turns a window could hold contain a tool call or result, `turns` otherwise (also when
//!   the agent context's mandatory part does not fit); the report's `policy` is the one chosen
//!   and its `policy_reason` says why.
//! * **Whole turns, contiguous suffix (P5)** with the `turns` policy; tool calls travel with
//!   their results, and a call without one is answered `interrupted: effects unknown`.
//! * **Tiers (P6)** with the `agent` policy ([`agent`] module docs).
//! * **Recalled pages (R6)** in one call with [`project_with_pages`]: the policy settles what
//!   it keeps in detail, then asks a [`PageSource`] (the recall index) once for older pages
//!   and adds those not already in the body while they fit; a failing source is reported in
//!   `report.recall.unavailable`, not raised.
//! * **Cost (P9).** Per-unit sizes live in the caller's [`SizeCache`]; with the `turns` policy
//!   the result equals [`naive::project_naive`] byte for byte.
//! * **No mutation (P10).** The projector takes `&H: History` and writes nothing anywhere.
//!
//! The long guide is `docs/projection.md`.

pub mod agent;
mod auto;
mod bpe;
mod budget;
mod cache;
mod counted;
mod error;
mod expand;
mod history;
mod json;
pub mod media;
pub mod naive;
mod opaque;
mod open_turn;
mod options;
mod pages;
mod parts;
pub mod read;
mod report;
mod request;
mod stable;
pub mod tokens;
mod turns;
pub mod wire;

pub use agent::{EXCERPT_CHARS, ROW_CHARS};
pub use auto::AUTO_TURNS;
pub use cache::SizeCache;
pub use error::{Error, Result};
pub use history::{History, SeqRange, SliceHistory};
pub use options::{Policy, Tokenizer, UnknownName, Window, WireFormat};
pub use pages::{CANDIDATES_PER_PAGE, PageSource, PageSourceError, StaticPages};
pub use report::{
    BudgetReport, CacheHintsReport, Clip, Drop, MediaReport, OpaqueCounts, PageRef, Projection,
    RecallReport, Report, Size, SkippedPage, StablePrefix, Tier, TierSize, TurnCounts,
};
pub use request::{
    DEFAULT_ANTHROPIC_MAX_TOKENS, DEFAULT_LOW_WATER, DEFAULT_RECALL_RESERVE, ProjectionRequest,
    ProjectionRequestBuilder, RECALL_TOOL_NAME, RecallReserve, RecalledPage,
    default_anthropic_max_tokens,
};
pub use tokens::{Count, count};
pub use wire::INTERRUPTED_RESULT;

/// Builds the request body for `request` from `history`, within the request's budget.
///
/// `cache` carries per-unit sizes between projections of the same conversation; a fresh
/// [`SizeCache`] works too (it is filled as a side effect). Nothing else is written. The
/// request's own recalled pages, if any ([`ProjectionRequestBuilder::recalled`]), are offered
/// as given; [`project_with_pages`] asks a [`PageSource`] instead.
///
/// # Errors
///
/// * [`Error::MandatoryExceedsBudget`] when the mandatory content alone does not fit;
/// * [`Error::History`] when `history` fails;
/// * [`Error::Internal`] if an internal invariant fails (the body is never returned over budget).
pub fn project<H: History + ?Sized>(
    history: &H,
    request: &ProjectionRequest,
    cache: &mut SizeCache,
) -> Result<Projection> {
    project_by_policy(history, request, cache, None)
}

/// [`project`], with recalled pages (docs/design.md#r6-auto-include) from `pages`, in one pass.
///
/// Once the policy has settled what the body keeps in detail, it asks `pages` once for up to
/// `recall_k *` [`CANDIDATES_PER_PAGE`] pages relevant to the request's input from before the
/// first seq kept in detail (`report.detail_start`; any seq when nothing is), leaves out
/// those already in the body (pinned notes, kept history), and adds up to `recall_k` of the
/// rest, best first, while they fit. The source is not asked when `recall_k` is 0 or no
/// older seq can exist. If it fails, the projection goes ahead without pages and
/// `report.recall.unavailable` holds the error's text (docs/design.md#r2-disposable). The request's
/// own `recalled` pages and `recall_unavailable` are not used.
///
/// # Errors
///
/// As [`project`]; a failing page source is not an error.
pub fn project_with_pages<H: History + ?Sized>(
    history: &H,
    pages: &mut dyn PageSource,
    request: &ProjectionRequest,
    cache: &mut SizeCache,
) -> Result<Projection> {
    project_by_policy(history, request, cache, Some(pages))
}

fn project_by_policy<H: History + ?Sized>(
    history: &H,
    request: &ProjectionRequest,
    cache: &mut SizeCache,
    pages: Option<&mut dyn PageSource>,
) -> Result<Projection> {
    let mut projection = project_chosen(history, request, cache, pages)?;
    opaque::count(history, request, &mut projection.report)?;
    projection.report.media = media::report(&projection.body, request);
    projection.report.cache_hints = media::hints_report(&projection.body, request);
    if projection
        .report
        .media
        .as_ref()
        .is_some_and(|m| m.images_estimated > 0 || m.documents > 0)
    {
        projection.report.tokens_exact = false;
    }
    Ok(projection)
}

fn project_chosen<H: History + ?Sized>(
    history: &H,
    request: &ProjectionRequest,
    cache: &mut SizeCache,
    pages: Option<&mut dyn PageSource>,
) -> Result<Projection> {
    if request.policy() != Policy::Auto {
        return project_resolved(history, request, cache, pages);
    }
    let (policy, why) = auto::choose(history, request)?;
    let mut pages = pages;
    let again: Option<&mut dyn PageSource> = match &mut pages {
        Some(p) => Some(&mut **p),
        None => None,
    };
    let (mut projection, why) =
        match project_resolved(history, &request.with_policy(policy), cache, again) {
            // The agent context pins more than whole turns do: when its mandatory part does
            // not fit, the turns policy may still serve the request.
            Err(Error::MandatoryExceedsBudget { .. }) if policy == Policy::Agent => {
                let turns = request.with_policy(Policy::Turns);
                let why = format!(
                    "{why}, but its mandatory part does not fit the budget: policy auto used \
                     turns"
                );
                (project_resolved(history, &turns, cache, pages)?, why)
            }
            result => (result?, why),
        };
    projection.report.policy_reason = Some(why);
    Ok(projection)
}

fn project_resolved<H: History + ?Sized>(
    history: &H,
    request: &ProjectionRequest,
    cache: &mut SizeCache,
    mut pages: Option<&mut dyn PageSource>,
) -> Result<Projection> {
    let first: Option<&mut dyn PageSource> = match &mut pages {
        Some(p) => Some(&mut **p),
        None => None,
    };
    match project_reserved(history, request, cache, first) {
        // The error names the mandatory part's tokens: count them, even if the caller wanted
        // no token figures (the mandatory part is settled before any page is asked for).
        Err(Error::MandatoryExceedsBudget { .. }) if !request.token_figures() => {
            project_reserved(history, &request.with_token_figures(), cache, pages)
        }
        result => result,
    }
}

/// One projection, then, if recalled pages were left out for room, one with the recall
/// reserve held back (docs/design.md#p13-true-words).
fn project_reserved<H: History + ?Sized>(
    history: &H,
    request: &ProjectionRequest,
    cache: &mut SizeCache,
    mut pages: Option<&mut dyn PageSource>,
) -> Result<Projection> {
    let first: Option<&mut dyn PageSource> = match &mut pages {
        Some(p) => Some(&mut **p),
        None => None,
    };
    // A stable window fits history to the budget less the reserve on every call: choosing
    // between the two bodies call by call would move its cut back and forth.
    if request.window() == Window::Stable {
        return project_once(history, request, cache, first);
    }
    let plain = project_once(history, &request.without_recall_reserve(), cache, first)?;
    // Pages left out for want of room while history took it all: hold the reserve back for
    // them (docs/design.md#p13-true-words), and keep that body if it does include more pages.
    if request.recall_reserve_size() == Size::default() || !plain.report.recall.starved() {
        return Ok(plain);
    }
    let reserved = project_once(history, request, cache, pages)?;
    if reserved.report.recall.included.len() > plain.report.recall.included.len() {
        return Ok(reserved);
    }
    Ok(plain)
}

fn project_once<H: History + ?Sized>(
    history: &H,
    request: &ProjectionRequest,
    cache: &mut SizeCache,
    pages: Option<&mut dyn PageSource>,
) -> Result<Projection> {
    match request.policy() {
        Policy::Turns => turns::project(history, request, cache, pages),
        Policy::Agent => agent::project(history, request, cache, pages),
        Policy::Auto => Err(Error::Internal {
            reason: "policy auto reached a projection unresolved".into(),
        }),
    }
}
