//! The `turns` policy: whole turns, newest first, as a contiguous suffix
//! (docs/design.md#p5-whole-turns, docs/design.md#p7-omission-notice, docs/design.md#p9-cost).
//!
//! Selection uses per-unit sizes from the [`SizeCache`] and never serializes a candidate
//! body: the size of "mandatory + notice + the newest k units" is computed from cached unit
//! sizes and the constant cost of joining neighbours. The walk goes newest first and stops
//! once even the notice-free body with k units exceeds the budget (no larger k can fit); the
//! largest k that fits wins. That is exactly the naive rule's answer ([`crate::naive`]).

use ctxlog_event::Event;

use crate::budget::{Budget, Cost, TierSums, history_breakpoint, mark_breakpoint};
use crate::cache::SizeCache;
use crate::error::Result;
use crate::expand::{Piece, expand_results};
use crate::history::{History, SeqRange, read};
use crate::open_turn::{fit_open_turn, open_turn, recall_query};
use crate::options::Window;
use crate::pages::{Offered, PageSource, Settled, offered, page_text};
use crate::parts::{input_items, pinned_items, pinned_notes, system_items};
use crate::report::{
    Clip, Drop, PageRef, Projection, RecallReport, Report, Size, SkippedPage, StablePrefix, Tier,
    TurnCounts,
};
use crate::request::ProjectionRequest;
use crate::stable;
use crate::tokens::Counter;
use crate::wire::{Item, Msg, Role, render, turn_items};

/// A history unit: a turn, or the preamble (events before the first user event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HistoryUnit {
    Turn(usize),
    Preamble,
}

struct MeasuredUnit {
    unit: HistoryUnit,
    seqs: SeqRange,
    cost: Cost,
    msgs: Option<Vec<Msg>>,
}

/// The text of the omission notice for `turns` dropped turns covering `seqs`; it names the
/// recall tool only when the request offers it (docs/design.md#p13-true-words).
pub(crate) fn notice_text(turns: usize, seqs: SeqRange, recall_tool: bool) -> String {
    let how = if recall_tool {
        " They are stored and can be recalled with the recall tool (by query, or by seq=N)."
    } else {
        " They are stored by the application."
    };
    format!(
        "[ctxlog] {turns} earlier turn(s), seq {}-{}, are not included in this request.{how}",
        seqs.first, seqs.last
    )
}

/// Mandatory parts and fixed costs of a turns projection.
pub(crate) struct FixedParts {
    pub pinned: Vec<Event>,
    pub prefix_msgs: Vec<Msg>,
    pub prefix: Cost,
    pub pinned_cost: Cost,
    pub system_cost: Cost,
    pub input_msgs: Vec<Msg>,
    pub input: Cost,
    pub mandatory: Size,
    /// The seqs of the open turn standing in for the input (docs/design.md#p11-the-agent-loop), if
    /// the request has none.
    pub open: Option<SeqRange>,
    /// The open turn's events as sent (taken when the body is assembled).
    pub open_events: Option<Vec<Event>>,
    /// The open turn's results clipped to fit the budget.
    pub open_clips: Vec<Clip>,
    /// The turns the history walk may keep: all, or all but the open turn.
    pub history_turns: usize,
    /// What recalled pages should be relevant to.
    pub query: String,
}

pub(crate) fn fixed_parts<H: History + ?Sized>(
    budget: &Budget<'_>,
    history: &H,
) -> Result<FixedParts> {
    let pinned = pinned_notes(history)?;
    let (system_msgs, system_cost) = budget.render_system(&system_items(budget.req));
    let (pinned_msgs, pinned_cost) = budget.render(&pinned_items(&pinned));
    let mut prefix_msgs = system_msgs;
    prefix_msgs.extend(pinned_msgs);
    let prefix = budget.cost(&prefix_msgs);
    let turn_count = read(history.turn_count())?;
    let open_events = open_turn(history, budget.req, turn_count)?;
    let open = open_events.as_deref().and_then(SeqRange::of);
    let history_turns = turn_count - usize::from(open_events.is_some());
    let query = recall_query(budget.req, open_events.as_deref());
    // The open turn stands in for the input; its results are clipped if it does not fit.
    let (open_events, input_msgs, input, open_clips) = match open_events {
        Some(events) => {
            let tok = budget.counter;
            let turn = fit_open_turn(budget, events, &|c| budget.total(prefix.then(c, tok)))?;
            (Some(turn.events), turn.msgs, turn.cost, turn.clips)
        }
        None => {
            let (msgs, cost) = budget.render(&input_items(budget.req, None));
            (None, msgs, cost, Vec::new())
        }
    };
    let mandatory = budget.total(prefix.then(input, budget.counter));
    Ok(FixedParts {
        pinned,
        prefix_msgs,
        prefix,
        pinned_cost,
        system_cost,
        input_msgs,
        input,
        mandatory,
        open,
        open_events,
        open_clips,
        history_turns,
        query,
    })
}

/// Runs the `turns` policy.
pub(crate) fn project<H: History + ?Sized>(
    history: &H,
    req: &ProjectionRequest,
    cache: &mut SizeCache,
    pages: Option<&mut dyn PageSource>,
) -> Result<Projection> {
    let budget = Budget::new(req);
    let fixed = fixed_parts(&budget, history)?;
    budget.check_mandatory(fixed.mandatory)?;
    let turn_count = fixed.history_turns;
    let walk = walk(&budget, history, cache, &fixed, turn_count)?;
    assemble(&budget, history, fixed, walk, turn_count, pages)
}

struct Walk {
    /// Units looked at, newest first; the first `kept` are kept.
    units: Vec<MeasuredUnit>,
    kept: usize,
    /// With `window: stable`, the block the window starts at.
    block: u64,
    notice: Option<(String, Vec<Msg>, Cost)>,
    notice_dropped: Option<SeqRange>,
}

fn walk<H: History + ?Sized>(
    budget: &Budget<'_>,
    history: &H,
    cache: &mut SizeCache,
    fixed: &FixedParts,
    turn_count: usize,
) -> Result<Walk> {
    let tok = budget.counter;
    let mut units: Vec<MeasuredUnit> = Vec::new();
    // suffixes[k]: the newest k units joined. Grown while the notice-free body still fits:
    // that size only grows with k, so no larger k can fit once it does not.
    let mut suffixes = vec![Cost::default()];
    loop {
        let k = units.len();
        let lower = budget.total(fixed.prefix.then(suffixes[k], tok).then(fixed.input, tok));
        if !budget.fits(lower) {
            suffixes.pop();
            break;
        }
        let Some(unit) = next_unit(budget, history, cache, k, turn_count)? else {
            break;
        };
        suffixes.push(unit.cost.then(suffixes[k], tok));
        units.push(unit);
    }
    let mut fits = |k: usize| -> Result<bool> {
        let size = candidate_size(budget, history, fixed, suffixes[k], k, turn_count)?;
        Ok(budget.fits(size))
    };
    // The largest k whose body, notice included, fits (usually the first one tried).
    let mut best = None;
    for k in (0..suffixes.len()).rev() {
        if fits(k)? {
            best = Some(k);
            break;
        }
    }
    let mut block = 0;
    if budget.req.window() == Window::Stable {
        (best, block) = stable::cut(history, budget.req, turn_count, best, &mut fits)?;
    }
    // When no body with the notice fits, the notice is left out (reported as `no_room`) and the
    // turns that fit without it are kept: a notice never displaces history it cannot replace.
    let kept = best.unwrap_or(suffixes.len().saturating_sub(1));
    let notice = notice_for(budget, history, kept, turn_count)?;
    let (notice, notice_dropped) = match (best, notice) {
        (Some(_), n) => (n, None),
        (None, Some(_)) => {
            let kept_turns = kept.min(turn_count);
            (
                None,
                Some(dropped_turn_range(history, kept_turns, turn_count)?),
            )
        }
        (None, None) => (None, None),
    };
    Ok(Walk {
        units,
        kept,
        block,
        notice,
        notice_dropped,
    })
}

/// The seqs of the oldest `turn_count - kept_turns` turns (`kept_turns < turn_count`).
fn dropped_turn_range<H: History + ?Sized>(
    history: &H,
    kept_turns: usize,
    turn_count: usize,
) -> Result<SeqRange> {
    let last_dropped = turn_count - kept_turns - 1;
    Ok(SeqRange::new(
        read(history.turn_seqs(0))?.first,
        read(history.turn_seqs(last_dropped))?.last,
    ))
}

/// The notice for keeping `kept` units, if one is asked for and turns are left out.
fn notice_for<H: History + ?Sized>(
    budget: &Budget<'_>,
    history: &H,
    kept: usize,
    turn_count: usize,
) -> Result<Option<(String, Vec<Msg>, Cost)>> {
    let kept_turns = kept.min(turn_count);
    if !budget.req.notice || kept_turns >= turn_count {
        return Ok(None);
    }
    let seqs = dropped_turn_range(history, kept_turns, turn_count)?;
    let text = notice_text(
        turn_count - kept_turns,
        seqs,
        budget.req.offers_recall_tool(),
    );
    let (msgs, cost) = budget.render(&[Item::text(Role::System, text.clone())]);
    Ok(Some((text, msgs, cost)))
}

fn candidate_size<H: History + ?Sized>(
    budget: &Budget<'_>,
    history: &H,
    fixed: &FixedParts,
    history_cost: Cost,
    k: usize,
    turn_count: usize,
) -> Result<Size> {
    let tok = budget.counter;
    let notice = notice_for(budget, history, k, turn_count)?
        .map(|n| n.2)
        .unwrap_or_default();
    let (before, after) = around_pages(budget, fixed.prefix, notice, history_cost);
    Ok(budget.total(before.then(after, tok).then(fixed.input, tok)))
}

/// The body's messages before the recalled pages and after them (up to the input), in the
/// window's order: `system, pinned notes, notice | pages | kept turns` by default, and with
/// `window: stable`, what varies per call last: `system, pinned notes, kept turns, notice |
/// pages |` (the input follows either way).
fn around_pages(budget: &Budget<'_>, prefix: Cost, notice: Cost, kept: Cost) -> (Cost, Cost) {
    let tok = budget.counter;
    match budget.req.window() {
        Window::Sliding => (prefix.then(notice, tok), kept),
        Window::Stable => (prefix.then(kept, tok).then(notice, tok), Cost::default()),
    }
}

/// The unit after the `k` newest: turn `turn_count - 1 - k`, then the preamble, then none.
fn next_unit<H: History + ?Sized>(
    budget: &Budget<'_>,
    history: &H,
    cache: &mut SizeCache,
    k: usize,
    turn_count: usize,
) -> Result<Option<MeasuredUnit>> {
    if k < turn_count {
        let unit = HistoryUnit::Turn(turn_count - 1 - k);
        let seqs = read(history.turn_seqs(turn_count - 1 - k))?;
        if let Some(cost) = cache.get(
            seqs,
            budget.format,
            budget.counter,
            budget.req.offers_recall_tool(),
        ) {
            return Ok(Some(MeasuredUnit {
                unit,
                seqs,
                cost,
                msgs: None,
            }));
        }
        let events = read(history.turn(turn_count - 1 - k))?;
        return Ok(Some(measure(budget, cache, unit, &events)));
    }
    if k > turn_count {
        return Ok(None);
    }
    let events = read(history.preamble())?;
    if events.is_empty() {
        return Ok(None);
    }
    Ok(Some(measure(budget, cache, HistoryUnit::Preamble, &events)))
}

fn measure(
    budget: &Budget<'_>,
    cache: &mut SizeCache,
    unit: HistoryUnit,
    events: &[Event],
) -> MeasuredUnit {
    let seqs = SeqRange::of(events).unwrap_or(SeqRange::new(0, 0));
    let (msgs, cost) = budget.render(&turn_items(events, budget.req.offers_recall_tool()));
    let tool = budget.req.offers_recall_tool();
    cache.insert(seqs, budget.format, budget.counter, tool, cost);
    MeasuredUnit {
        unit,
        seqs,
        cost,
        msgs: Some(msgs),
    }
}

/// The events of a unit.
fn unit_events<H: History + ?Sized>(history: &H, unit: HistoryUnit) -> Result<Vec<Event>> {
    match unit {
        HistoryUnit::Turn(i) => read(history.turn(i)),
        HistoryUnit::Preamble => read(history.preamble()),
    }
}

/// Loads (if needed) and renders the events of a unit.
pub(crate) fn unit_msgs<H: History + ?Sized>(
    budget: &Budget<'_>,
    history: &H,
    unit: HistoryUnit,
) -> Result<Vec<Msg>> {
    let events = match unit {
        HistoryUnit::Turn(i) => read(history.turn(i))?,
        HistoryUnit::Preamble => read(history.preamble())?,
    };
    Ok(render(
        budget.format,
        &turn_items(&events, budget.req.offers_recall_tool()),
    ))
}

/// Turns a settled walk into the body and its report: the kept units' results (and the open
/// turn's) grow into the room left, recalled pages are added, and the body is written.
fn assemble<H: History + ?Sized>(
    budget: &Budget<'_>,
    history: &H,
    mut fixed: FixedParts,
    mut walk: Walk,
    turn_count: usize,
    source: Option<&mut dyn PageSource>,
) -> Result<Projection> {
    let tok = budget.counter;
    walk.units.truncate(walk.kept);
    walk.units.reverse();
    let notice_cost = walk.notice.as_ref().map(|n| n.2).unwrap_or_default();
    let kept = grow_kept(budget, history, &mut fixed, &mut walk.units, notice_cost)?;
    let (oldest_kept, kept_range) = kept_window(&walk.units, fixed.open);
    let pinned: Vec<u64> = fixed.pinned.iter().map(|e| e.seq).collect();
    let settled = Settled {
        query: &fixed.query,
        detail_start: oldest_kept,
        pinned: &pinned,
        kept: &kept_range,
    };
    let offered = offered(budget.req, source, &settled);
    let (before, after) = around_pages(budget, fixed.prefix, notice_cost, kept.cost);
    let after = after.then(fixed.input, tok);
    let pages = choose_pages(budget, before, after, oldest_kept, &offered);
    let sums = fixed.tier_sums(tok, budget.req.window(), notice_cost, &pages, &kept);
    let stable_tokens = budget.total(fixed.prefix.then(kept.cost, tok)).tokens;

    let mut msgs = std::mem::take(&mut fixed.prefix_msgs);
    let (notice_text, notice_msgs) = walk.notice.map(|(text, m, _)| (text, m)).unzip();
    let mut stable_head = None;
    let notice_msgs = notice_msgs.into_iter().flatten();
    let input_msgs = std::mem::take(&mut fixed.input_msgs);
    let mut total = budget.total(pages.chain);
    match budget.req.window() {
        Window::Sliding => {
            msgs.extend(notice_msgs);
            msgs.extend(pages.msgs);
            msgs.extend(kept.msgs);
            msgs.extend(input_msgs);
        }
        Window::Stable => {
            msgs.extend(kept.msgs);
            let mut tail: Vec<Msg> = notice_msgs.chain(pages.msgs).chain(input_msgs).collect();
            if let Some(counted) = history_breakpoint(budget.req) {
                let added = mark_breakpoint(&mut msgs, &mut tail);
                total.bytes -= (counted - added).max(0) as u64;
            }
            stable_head = Some(budget.envelope.write_iter(msgs.iter()));
            msgs.extend(tail);
        }
    }
    let body = budget.write_checked(msgs, total, "assembled")?;
    let stable_prefix = stable_head.map(|head| StablePrefix {
        bytes: common_prefix(&head, &body),
        tokens: stable_tokens,
        block: walk.block,
    });
    let (dropped, drops) = history_drops(history, &walk.units, turn_count, walk.notice_dropped)?;
    let report = Report {
        turns: turn_counts(&walk.units, turn_count, fixed.open.is_some()),
        kept: kept_range,
        dropped: dropped.into_iter().collect(),
        pinned,
        detail_start: oldest_kept,
        tiers: sums.finish(total),
        clips: kept.clips,
        drops,
        notice: notice_text,
        recall: pages.report,
        stable_prefix,
        ..budget.report(total, fixed.mandatory)
    };
    Ok(Projection { body, report })
}

/// How many leading bytes `a` and `b` share.
fn common_prefix(a: &[u8], b: &[u8]) -> u64 {
    a.iter().zip(b).take_while(|(x, y)| x == y).count() as u64
}

/// The kept history as sent, once results have grown into the room left.
struct KeptHistory {
    msgs: Vec<Msg>,
    cost: Cost,
    /// How many units it holds.
    units: usize,
    /// Every result clipped: the kept units' and the open turn's.
    clips: Vec<Clip>,
}

/// Grows the results of the kept units (oldest first) and of the open turn into the room
/// left beside the prefix and the notice, newest first; the open turn's grown messages and
/// cost replace the input's in `fixed`. With `window: stable` only the open turn grows: the
/// kept turns are sent as stored, so they render the same bytes on every call.
fn grow_kept<H: History + ?Sized>(
    budget: &Budget<'_>,
    history: &H,
    fixed: &mut FixedParts,
    units: &mut [MeasuredUnit],
    notice: Cost,
) -> Result<KeptHistory> {
    let tok = budget.counter;
    let open = fixed.open_events.is_some();
    let stable = budget.req.window() == Window::Stable;
    let mut pieces = kept_pieces(budget, history, fixed, units)?;
    let (input_cost, prefix) = (fixed.input, fixed.prefix);
    let (frozen, growing) = pieces.split_at_mut(if stable { units.len() } else { 0 });
    let frozen_cost = frozen
        .iter()
        .fold(Cost::default(), |c, p| c.then(p.cost, tok));
    let grown = expand_results(budget, history, growing, &|costs: &[Cost]| {
        let grown = costs
            .iter()
            .fold(Cost::default(), |c, next| c.then(*next, tok));
        let (kept, tail) = match stable {
            true => (frozen_cost, grown),
            false => (grown, Cost::default()),
        };
        let (before, after) = around_pages(budget, prefix, notice, kept);
        let mut chain = before.then(after, tok).then(tail, tok);
        if !open {
            chain = chain.then(input_cost, tok);
        }
        budget.total(chain)
    })?;
    let clips = merge_clips(std::mem::take(&mut fixed.open_clips), grown);
    if open && let Some(piece) = pieces.pop() {
        fixed.input = piece.cost;
        fixed.input_msgs = piece.msgs;
    }
    let mut kept = KeptHistory {
        msgs: Vec::new(),
        cost: Cost::default(),
        units: units.len(),
        clips,
    };
    for piece in pieces {
        kept.cost = kept.cost.then(piece.cost, tok);
        kept.msgs.extend(piece.msgs);
    }
    Ok(kept)
}

/// The kept units as pieces whose results may grow, oldest first, then the open turn (its
/// events and messages taken from `fixed`).
fn kept_pieces<H: History + ?Sized>(
    budget: &Budget<'_>,
    history: &H,
    fixed: &mut FixedParts,
    units: &mut [MeasuredUnit],
) -> Result<Vec<Piece>> {
    let mut pieces = Vec::with_capacity(units.len() + 1);
    for measured in units {
        let events = unit_events(history, measured.unit)?;
        let msgs = match measured.msgs.take() {
            Some(m) => m,
            None => render(
                budget.format,
                &turn_items(&events, budget.req.offers_recall_tool()),
            ),
        };
        pieces.push(Piece {
            events,
            msgs,
            cost: measured.cost,
        });
    }
    if let Some(events) = fixed.open_events.take() {
        pieces.push(Piece {
            events,
            msgs: std::mem::take(&mut fixed.input_msgs),
            cost: fixed.input,
        });
    }
    Ok(pieces)
}

/// The seq of the oldest event kept in detail, and the kept seq range: from the oldest kept
/// unit (else the open turn) to the open turn's end (else the newest kept unit).
fn kept_window(units: &[MeasuredUnit], open: Option<SeqRange>) -> (Option<u64>, Vec<SeqRange>) {
    let oldest_kept = units
        .first()
        .map(|u| u.seqs.first)
        .or(open.map(|o| o.first));
    let newest_kept = open.map(|o| o.last).or(units.last().map(|u| u.seqs.last));
    let kept_range = match (oldest_kept, newest_kept) {
        (Some(a), Some(b)) => vec![SeqRange::new(a, b)],
        _ => Vec::new(),
    };
    (oldest_kept, kept_range)
}

impl FixedParts {
    /// Bytes and tokens per tier, in body order.
    fn tier_sums(
        &self,
        tok: Counter,
        window: Window,
        notice: Cost,
        pages: &ChosenPages,
        kept: &KeptHistory,
    ) -> TierSums {
        let mut sums = TierSums::new(tok);
        sums.push(Tier::System, self.system_cost, 1);
        sums.push(Tier::Pinned, self.pinned_cost, self.pinned.len());
        if window == Window::Stable {
            sums.push(Tier::History, kept.cost, kept.units);
        }
        sums.push(Tier::Notice, notice, 1);
        sums.push(Tier::Recalled, pages.cost, pages.report.included.len());
        if window == Window::Sliding {
            sums.push(Tier::History, kept.cost, kept.units);
        }
        sums.push(Tier::Input, self.input, 1);
        sums
    }
}

/// The turns in the history (the open turn included), kept (in any form) and left out.
fn turn_counts(kept: &[MeasuredUnit], turn_count: usize, open: bool) -> TurnCounts {
    let kept_turns = kept
        .iter()
        .filter(|u| matches!(u.unit, HistoryUnit::Turn(_)))
        .count();
    let open_turns = usize::from(open);
    TurnCounts {
        total: turn_count + open_turns,
        kept: kept_turns + open_turns,
        dropped: turn_count - kept_turns,
    }
}

/// The history left out, and the drops to report: that history (for the budget), and the
/// turns the notice would have named when it had no room.
fn history_drops<H: History + ?Sized>(
    history: &H,
    kept: &[MeasuredUnit],
    turn_count: usize,
    notice_dropped: Option<SeqRange>,
) -> Result<(Option<SeqRange>, Vec<Drop>)> {
    let mut drops = Vec::new();
    let dropped = dropped_history(history, kept, turn_count)?;
    if let Some(range) = dropped {
        drops.push(Drop {
            tier: Tier::History,
            seqs: range,
            reason: "budget".into(),
        });
    }
    if let Some(range) = notice_dropped {
        drops.push(Drop {
            tier: Tier::Notice,
            seqs: range,
            reason: "no_room".into(),
        });
    }
    Ok((dropped, drops))
}

/// The seq range of history left out: everything before the oldest kept unit.
fn dropped_history<H: History + ?Sized>(
    history: &H,
    kept: &[MeasuredUnit],
    turn_count: usize,
) -> Result<Option<SeqRange>> {
    let kept_turns = kept
        .iter()
        .filter(|u| matches!(u.unit, HistoryUnit::Turn(_)))
        .count();
    if kept_turns < turn_count {
        let range = dropped_turn_range(history, kept_turns, turn_count)?;
        let preamble = read(history.preamble())?;
        let first = preamble
            .first()
            .map_or(range.first, |e| e.seq.min(range.first));
        return Ok(Some(SeqRange::new(first, range.last)));
    }
    if kept.iter().any(|u| u.unit == HistoryUnit::Preamble) {
        return Ok(None);
    }
    Ok(SeqRange::of(&read(history.preamble())?))
}

pub(crate) struct ChosenPages {
    pub msgs: Vec<Msg>,
    pub cost: Cost,
    /// The whole messages chain with the pages in place.
    pub chain: Cost,
    pub report: RecallReport,
}

/// Adds recalled pages, best first, between `before` and `after` while they fit: up to
/// `recall_k`, only pages older than `oldest_kept` (everything, if nothing is kept in detail).
pub(crate) fn choose_pages(
    budget: &Budget<'_>,
    before: Cost,
    after: Cost,
    oldest_kept: Option<u64>,
    offered: &Offered,
) -> ChosenPages {
    let tok = budget.counter;
    let k = budget.req.recall_k;
    let mut report = RecallReport {
        k,
        unavailable: offered.unavailable.clone(),
        ..Default::default()
    };
    let mut msgs = Vec::new();
    let mut cost = Cost::default();
    for page in &offered.pages {
        let skip = |reason: &str| SkippedPage {
            seq: page.seq,
            page: page.page,
            reason: reason.into(),
        };
        if report.included.len() >= k {
            report.skipped.push(skip("beyond_recall_k"));
            continue;
        }
        if oldest_kept.is_some_and(|oldest| page.seq >= oldest) {
            report.skipped.push(skip("kept_in_detail"));
            continue;
        }
        let (m, c) = budget.render(&[Item::text(Role::User, page_text(page))]);
        let with = cost.then(c, tok);
        if !budget.fits_all(budget.total(before.then(with, tok).then(after, tok))) {
            report.skipped.push(skip("budget"));
            continue;
        }
        cost = with;
        msgs.extend(m);
        report.included.push(PageRef {
            seq: page.seq,
            page: page.page,
        });
    }
    let chain = before.then(cost, tok).then(after, tok);
    ChosenPages {
        msgs,
        cost,
        chain,
        report,
    }
}

/// The clips of the open turn's fitting, replaced by later ones of the same result, by seq.
pub(crate) fn merge_clips(mut clips: Vec<Clip>, later: Vec<Clip>) -> Vec<Clip> {
    clips.retain(|c| later.iter().all(|l| l.seq != c.seq));
    clips.extend(later);
    clips.sort_by_key(|c| c.seq);
    clips
}
