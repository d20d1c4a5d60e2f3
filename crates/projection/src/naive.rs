//! The naive reference rule for the `turns` policy (docs/design.md#p9-cost), for tests and
//! benchmarks.
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
//! strings not yet escaped) are built once per call. `projection_bench` times this rule as the
//! reference (docs/design.md#p9-cost), so caching serialized bytes across candidates here would
//! make it a cheaper rule than the one the benchmark names.

use crate::budget::Budget;
use crate::error::{Error, Result};
use crate::history::{History, SeqRange, read};
use crate::pages::page_text;
use crate::report::Size;
use crate::request::ProjectionRequest;
use crate::tokens::count;
use crate::turns::{FixedParts, HistoryUnit, fixed_parts, notice_text, unit_msgs};
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
    // and that body is kept if it includes more pages (docs/design.md#p13-true-words).
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
    let units = history_units(&budget, history, fixed.history_turns)?;
    let naive = Naive {
        history,
        request,
        budget,
        fixed,
        units,
    };
    let (from, notice) = naive.choose()?;
    let (pages, included, starved) = naive.add_pages(from, notice)?;
    Ok((
        naive.build(from, notice, &pages)?,
        included,
        starved && included < request.recall_k,
    ))
}

/// A history unit as the naive rule holds it: which unit, its messages, its first seq.
type Unit = (HistoryUnit, Vec<Msg>, u64);

/// Every history unit, oldest first (the preamble, then the turns), with its messages built
/// once.
fn history_units<H: History + ?Sized>(
    budget: &Budget<'_>,
    history: &H,
    turn_count: usize,
) -> Result<Vec<Unit>> {
    let mut units: Vec<Unit> = Vec::new();
    if !read(history.preamble())?.is_empty() {
        let first = read(history.preamble())?.first().map_or(0, |e| e.seq);
        units.push((
            HistoryUnit::Preamble,
            unit_msgs(budget, history, HistoryUnit::Preamble)?,
            first,
        ));
    }
    for i in 0..turn_count {
        let first = read(history.turn_seqs(i))?.first;
        units.push((
            HistoryUnit::Turn(i),
            unit_msgs(budget, history, HistoryUnit::Turn(i))?,
            first,
        ));
    }
    Ok(units)
}

/// One naive projection: the history's units and the mandatory parts every candidate holds.
struct Naive<'a, H: ?Sized> {
    history: &'a H,
    request: &'a ProjectionRequest,
    budget: Budget<'a>,
    fixed: FixedParts,
    units: Vec<Unit>,
}

impl<H: History + ?Sized> Naive<'_, H> {
    /// The candidate body keeping the units from `from` on, with `pages` before them, and the
    /// notice when `notice` is set, the request asks for it and turns are left out.
    fn build(&self, from: usize, notice: bool, pages: &[Msg]) -> Result<Vec<u8>> {
        let mut msgs = self.fixed.prefix_msgs.clone();
        let dropped_turns = self.units[..from]
            .iter()
            .filter(|u| matches!(u.0, HistoryUnit::Turn(_)))
            .count();
        if notice && self.request.notice && dropped_turns > 0 {
            let first = read(self.history.turn_seqs(0))?.first;
            let last = read(self.history.turn_seqs(dropped_turns - 1))?.last;
            let text = notice_text(
                dropped_turns,
                SeqRange::new(first, last),
                self.request.offers_recall_tool(),
            );
            msgs.extend(render(
                self.request.format,
                &[Item::text(Role::System, text)],
            ));
        }
        let all = msgs
            .iter()
            .chain(pages)
            .chain(self.units[from..].iter().flat_map(|u| u.1.iter()))
            .chain(&self.fixed.input_msgs);
        Ok(self.budget.envelope.write_iter(all))
    }

    /// The size of a candidate body. Tokens are counted (by parsing and tokenizing the whole
    /// body) only under a token budget.
    fn measure(&self, body: &[u8]) -> Result<Size> {
        if self.request.max_tokens.is_none() {
            return Ok(Size {
                bytes: body.len() as u64,
                tokens: 0,
            });
        }
        let c = count(body, self.request.format, self.request.tokenizer)?;
        Ok(Size {
            bytes: c.bytes,
            tokens: c.tokens,
        })
    }

    /// The first candidate that fits, as the units it keeps from and whether it has the
    /// notice: all units first, then dropping the oldest one at a time, with the notice; if
    /// none of those fits, the same walk without it (the notice is left out).
    fn choose(&self) -> Result<(usize, bool)> {
        for notice in [true, false] {
            for from in 0..=self.units.len() {
                if self
                    .budget
                    .fits(self.measure(&self.build(from, notice, &[])?)?)
                {
                    return Ok((from, notice));
                }
            }
        }
        let size = self.measure(&self.build(self.units.len(), false, &[])?)?;
        self.budget.check_mandatory(size)?;
        Err(Error::Internal {
            reason: "the mandatory body fits but no candidate does".into(),
        })
    }

    /// Tries the recalled pages one by one, each by serializing the whole body again; only
    /// pages older than the oldest unit kept, up to `recall_k`. Returns the pages that fit,
    /// how many, and whether one was left out for room.
    fn add_pages(&self, from: usize, notice: bool) -> Result<(Vec<Msg>, usize, bool)> {
        let request = self.request;
        let oldest_kept = self.units.get(from).map(|u| u.2);
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
            if self
                .budget
                .fits_all(self.measure(&self.build(from, notice, &with)?)?)
            {
                pages = with;
                included += 1;
            } else {
                starved = true;
            }
        }
        Ok((pages, included, starved))
    }
}
