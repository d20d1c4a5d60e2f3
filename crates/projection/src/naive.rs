//! The naive reference rule for the `turns` policy (SPEC P9), for tests and benchmarks.
//!
//! It serializes every candidate body in full and measures it: all history units (turns, then
//! the preamble) first, then dropping the oldest unit at a time; the first body that fits wins.
//! With the omission notice asked for, candidates carry it; if none of those fits, the same walk
//! is repeated without the notice.
//! Recalled pages are then tried one by one, each by serializing the whole body again. It is
//! quadratic in the history and exists only to check [`crate::project`] against, byte for byte.
//!
//! Serializing a candidate means what a caller who serializes the request once per attempt
//! does: the body is written from the messages (`wire::Msg`), every string escaped again, and
//! nothing written for one candidate is reused for the next. The history's messages (their
//! strings not yet escaped) are built once per call. `projection_bench` times this rule as the reference (SPEC P9), so
//! caching serialized bytes across candidates here would make it a cheaper rule than the one
//! the benchmark names.

use crate::budget::Budget;
use crate::error::{Error, Result};
use crate::history::{History, SeqRange, read};
use crate::pages::page_text;
use crate::report::Size;
use crate::request::ProjectionRequest;
use crate::tokens::count;
use crate::turns::{HistoryUnit, fixed_parts, notice_text, unit_msgs};
use crate::wire::{Item, Msg, Role, render};

/// The body the naive rule chooses for a `turns` request (the policy in `request` is ignored).
///
/// # Errors
///
/// [`Error::MandatoryExceedsBudget`] when the mandatory body alone does not fit, and history
/// errors.
pub fn project_naive<H: History + ?Sized>(
    history: &H,
    request: &ProjectionRequest,
) -> Result<Vec<u8>> {
    let (body, included, starved) = naive_once(history, &request.without_recall_reserve())?;
    // As `project`: with pages left out for want of room, the reserve is held back for them,
    // and that body is kept if it includes more pages (SPEC P13).
    if starved && request.recall_reserve_size() != Size::default() {
        let (reserved, more, _) = naive_once(history, request)?;
        if more > included {
            return Ok(reserved);
        }
    }
    Ok(body)
}

/// The naive body, how many pages it includes, and whether a page was left out for room
/// while fewer than `recall_k` were included.
fn naive_once<H: History + ?Sized>(
    history: &H,
    request: &ProjectionRequest,
) -> Result<(Vec<u8>, usize, bool)> {
    let budget = Budget::new(request);
    let fixed = fixed_parts(&budget, history)?;
    budget.check_mandatory(fixed.mandatory)?;
    let turn_count = fixed.history_turns;
    let mut units: Vec<(HistoryUnit, Vec<Msg>, u64)> = Vec::new();
    if !read(history.preamble())?.is_empty() {
        let first = read(history.preamble())?.first().map_or(0, |e| e.seq);
        units.push((
            HistoryUnit::Preamble,
            unit_msgs(&budget, history, HistoryUnit::Preamble)?,
            first,
        ));
    }
    for i in 0..turn_count {
        let first = read(history.turn_seqs(i))?.first;
        units.push((
            HistoryUnit::Turn(i),
            unit_msgs(&budget, history, HistoryUnit::Turn(i))?,
            first,
        ));
    }
    let build = |from: usize, notice: bool, pages: &[Msg]| -> Result<Vec<u8>> {
        let mut msgs = fixed.prefix_msgs.clone();
        let dropped_turns = units[..from]
            .iter()
            .filter(|u| matches!(u.0, HistoryUnit::Turn(_)))
            .count();
        if notice && request.notice && dropped_turns > 0 {
            let first = read(history.turn_seqs(0))?.first;
            let last = read(history.turn_seqs(dropped_turns - 1))?.last;
            let text = notice_text(
                dropped_turns,
                SeqRange::new(first, last),
                request.offers_recall_tool(),
            );
            msgs.extend(render(request.format, &[Item::text(Role::System, text)]));
        }
        let all = msgs
            .iter()
            .chain(pages)
            .chain(units[from..].iter().flat_map(|u| u.1.iter()))
            .chain(&fixed.input_msgs);
        Ok(budget.envelope.write_iter(all))
    };
    // Tokens are counted (by parsing and tokenizing the whole body) only under a token budget.
    let measure = |body: &[u8]| -> Result<Size> {
        if request.max_tokens.is_none() {
            return Ok(Size {
                bytes: body.len() as u64,
                tokens: 0,
            });
        }
        let c = count(body, request.format, request.tokenizer)?;
        Ok(Size {
            bytes: c.bytes,
            tokens: c.tokens,
        })
    };
    let mut chosen: Option<(usize, bool)> = None;
    for from in 0..=units.len() {
        if budget.fits(measure(&build(from, true, &[])?)?) {
            chosen = Some((from, true));
            break;
        }
    }
    // No body with the notice fits: the first that fits without it (the notice is left out).
    if chosen.is_none() {
        for from in 0..=units.len() {
            if budget.fits(measure(&build(from, false, &[])?)?) {
                chosen = Some((from, false));
                break;
            }
        }
    }
    let (from, notice) = match chosen {
        Some(c) => c,
        None => {
            let size = measure(&build(units.len(), false, &[])?)?;
            budget.check_mandatory(size)?;
            return Err(Error::Internal {
                reason: "the mandatory body fits but no candidate does".into(),
            });
        }
    };
    let oldest_kept = units.get(from).map(|u| u.2);
    let mut pages: Vec<Msg> = Vec::new();
    let mut included = 0;
    let mut starved = false;
    for page in &request.recalled {
        if included >= request.recall_k || oldest_kept.is_some_and(|o| page.seq >= o) {
            continue;
        }
        let mut with = pages.clone();
        with.extend(render(
            request.format,
            &[Item::text(Role::User, page_text(page))],
        ));
        if budget.fits_all(measure(&build(from, notice, &with)?)?) {
            pages = with;
            included += 1;
        } else {
            starved = true;
        }
    }
    Ok((
        build(from, notice, &pages)?,
        included,
        starved && included < request.recall_k,
    ))
}
