//! The `agent` policy: a tiered context for tool-using agents (docs/design.md#p6-agent-tiers,
//! docs/design.md#r6-auto-include).
//!
//! The body is `[system] [pinned notes] CONTEXT INPUT`, where CONTEXT is one user message whose
//! text lists the conversation oldest first, one entry per event, separated by newlines:
//!
//! | entry | tier | mandatory |
//! |---|---|---|
//! | `[seq N] user request: …` (verbatim) | `user_requests` | yes |
//! | `[seq N] previous assistant reply (conversation, not evidence): …` | `previous_reply` | yes |
//! | latest `[seq N] result TOOL id=ID status=S [exit_code=C] [artifact=A bytes=B]:` + text | `latest_result` | yes; its text may be clipped |
//! | `[status] latest failure: …; latest possible change: …` | `status` | yes |
//! | `[ctxlog recall: seq N (kind), page P, chars A-B]` + page text | `recalled` | no: first to go |
//! | other results, same shape as the latest | `details` | no |
//! | `[seq N] call TOOL id=ID ARGS` (+ ` (no result: interrupted, effects unknown)` when no result followed), older assistant replies, notes, markers (one line each) | `activity` | no |
//!
//! With the omission notice asked for ([`notice`](crate::ProjectionRequestBuilder::notice)),
//! a line right after the context's header says how many entries are left out, between which
//! seqs, and how to recall them: `[ctxlog] N earlier event(s) between seq A and B are left out
//! of this context. They are stored and can be recalled with the recall tool (by query, or by
//! seq=N).` It is counted while fitting (dropping the first entry may take a few more to pay
//! for it); if it does not fit even when every optional entry is gone, it is left out and
//! reported as a `no_room` drop.
//!
//! A clipped text keeps its first and last [`EXCERPT_CHARS`] characters around
//! `[… N chars clipped from seq=N]` (naming the recall tool when it is offered); the result's identity line is never removed.
//! When the body is over budget, optional content goes in this order, and every step is
//! reported: recalled pages; clipping of detailed results (oldest first, the latest last);
//! activity rows, oldest first; duplicate snapshots (an older result of the same tool with
//! the same arguments as a newer kept one), oldest first; older detailed results, oldest first.
//! "Latest possible change" is the latest tool call of any tool: the projector does not guess
//! which tools are read-only.
//!
//! Without input the open turn ends the body as messages (docs/design.md#p11-the-agent-loop); if it
//! does not fit beside the pinned context, its results are clipped oldest first
//! ([`fit_open_turn`]). Once the context is fitted, the room left goes to results newest first
//! (docs/design.md#p12-room-is-used): the open turn's, grown from their artifacts, then the
//! context's ([`grow`]): each whole if it fits, else the longest head/tail excerpt that fits.
//!
//! Cost: this policy reads every event of the history (all user requests are mandatory), and
//! counts tokens of the final body exactly. Under a token budget it first estimates with each
//! entry tokenized once (cached), then settles on the fewest steps whose exact count fits with
//! a few exact counts (galloping down from the estimate, then bisecting): no more is dropped
//! than the budget requires.

mod context;
mod entries;
mod fit;
mod grow;
mod report;

use ctxlog_event::Event;

use crate::budget::{Budget, Cost};
use crate::cache::SizeCache;
use crate::error::{Error, Result};
use crate::expand::{Piece, expand_results};
use crate::history::{History, SeqRange, read};
use crate::open_turn::{OpenTurn, fit_open_turn, open_turn, recall_query};
use crate::pages::{PageSource, Settled, offered};
use crate::parts::{input_items, pinned_items, pinned_notes, system_items};
use crate::report::{Clip, Projection, Size, Tier};
use crate::request::ProjectionRequest;
use crate::turns::merge_clips;
use crate::wire::Msg;

pub use entries::{EXCERPT_CHARS, ROW_CHARS};

use context::{AgentLayout, add_pages, oldest_detail};
use entries::{Entry, Form, build_entries};
use fit::{Action, drop_order, fit};
use grow::grow_results;
use report::{Outcome, seq_ranges};

/// Runs the `agent` policy.
pub(crate) fn project<H: History + ?Sized>(
    history: &H,
    req: &ProjectionRequest,
    cache: &mut SizeCache,
    source: Option<&mut dyn PageSource>,
) -> Result<Projection> {
    let budget = Budget::new(req);
    let pinned = pinned_notes(history)?;
    let (system_msgs, system_cost) = budget.render_system(&system_items(budget.req));
    let (pinned_msgs, pinned_cost) = budget.render(&pinned_items(&pinned));
    let turn_count = read(history.turn_count())?;
    // Without input, the open turn ends the body as messages and stays out of the context.
    let open = open_turn(history, req, turn_count)?;
    let context_turns = turn_count - usize::from(open.is_some());
    let tool = req.offers_recall_tool();
    let open_events = open.as_deref().unwrap_or_default();
    let (events, mut entries) = context_entries(history, context_turns, open_events, tool)?;
    let mut layout = AgentLayout {
        budget: &budget,
        system_cost,
        pinned_cost,
        input_cost: Cost::default(),
        notice: false,
    };
    let (open, input_msgs, mandatory) = fit_mandatory(&mut layout, &entries, open)?;
    let (applied, notice_dropped) = fit_context(&mut layout, &mut entries, cache)?;
    // Room is used: the room left goes to the newest results first — the open turn's (from
    // their artifacts), then the context's.
    let (input_msgs, open_clips) = match &open {
        Some(turn) => grow_open_turn(&mut layout, history, &entries, turn, input_msgs)?,
        None => (input_msgs, Vec::new()),
    };
    grow_results(&layout, history, &events, &mut entries)?;
    let open_events = open.map(|turn| turn.events);
    let (mut kept, dropped) = seq_ranges(&entries);
    kept.extend(open_events.as_deref().and_then(SeqRange::of));
    let pinned_seqs: Vec<u64> = pinned.iter().map(|e| e.seq).collect();
    let query = recall_query(req, open_events.as_deref());
    let settled = Settled {
        query: &query,
        detail_start: oldest_detail(&entries),
        pinned: &pinned_seqs,
        kept: &kept,
    };
    let offered = offered(req, source, &settled);
    let (pages, recall) = add_pages(&layout, &entries, &offered);
    let total = layout.exact(&entries, &pages);
    let mut msgs: Vec<Msg> = system_msgs;
    msgs.extend(pinned_msgs);
    msgs.extend(layout.context_msgs(&entries, &pages));
    msgs.extend(input_msgs);
    let body = budget.write_checked(msgs, total, "agent body")?;
    let report = layout.report(
        cache,
        Outcome {
            entries: &entries,
            applied: &applied,
            pages: &pages,
            recall,
            pinned: pinned_seqs,
            kept,
            dropped,
            turn_count,
            mandatory,
            total,
            notice_dropped,
            open_clips,
        },
    );
    Ok(Projection { body, report })
}

/// The context's events (every turn but the open one) and their entries; the status line
/// also covers the open turn's events.
fn context_entries<H: History + ?Sized>(
    history: &H,
    context_turns: usize,
    open_events: &[Event],
    recall_tool: bool,
) -> Result<(Vec<Event>, Vec<Entry>)> {
    let open = !open_events.is_empty();
    let mut events = all_events(history, context_turns)?;
    // With an open turn, its results are the newest: the context's latest result is grown
    // from its artifact only after them, like every other result.
    if !open {
        latest_result_in_full(history, &mut events)?;
    }
    let mut entries = build_entries(&events, open_events, recall_tool);
    if open {
        for e in entries.iter_mut().filter(|e| e.tier == Tier::LatestResult) {
            e.uncached = true;
        }
    }
    Ok((events, entries))
}

/// Fits the mandatory body: everything pinned, the latest result clipped, and the input or the
/// open turn (its results clipped only if it does not fit beside the rest). Sets the layout's
/// input cost; returns the open turn as fitted, the messages of the input (or of the open
/// turn) and the mandatory size.
///
/// # Errors
///
/// [`Error::MandatoryExceedsBudget`] when the mandatory body does not fit.
fn fit_mandatory(
    layout: &mut AgentLayout<'_, '_>,
    entries: &[Entry],
    open: Option<Vec<Event>>,
) -> Result<(Option<OpenTurn>, Vec<Msg>, Size)> {
    let budget = layout.budget;
    let tok = budget.counter;
    let mut minimal = entries.to_vec();
    for e in &mut minimal {
        if !e.mandatory() {
            e.form = Form::Dropped;
        } else if e.clipped.is_some() {
            e.form = Form::Clipped;
        }
    }
    let minimal_context = budget.cost(&layout.context_msgs(&minimal, &[]));
    let before_input = layout.system_cost.then(layout.pinned_cost, tok);
    let open = match open {
        Some(events) => Some(fit_open_turn(budget, events, &|c| {
            budget.total(before_input.then(minimal_context, tok).then(c, tok))
        })?),
        None => None,
    };
    let (input_msgs, input_cost) = match &open {
        Some(turn) => (turn.msgs.clone(), turn.cost),
        None => budget.render(&input_items(budget.req, None)),
    };
    layout.input_cost = input_cost;
    let mandatory = layout.exact(&minimal, &[]);
    budget.check_mandatory(mandatory)?;
    Ok((open, input_msgs, mandatory))
}

/// Applies the drop order until the body fits. With the omission notice asked for, fits with
/// it; if even dropping everything optional leaves no room for it, fits without it (reported
/// as a `no_room` drop). Returns the steps applied and whether the notice was left out.
fn fit_context(
    layout: &mut AgentLayout<'_, '_>,
    entries: &mut [Entry],
    cache: &mut SizeCache,
) -> Result<(Vec<Action>, bool)> {
    let actions = drop_order(entries);
    layout.notice = layout.budget.req.notice;
    let mut applied = fit(layout, entries, &actions, cache)?;
    let mut notice_dropped = false;
    if applied.is_none() && layout.notice {
        layout.notice = false;
        notice_dropped = true;
        applied = fit(layout, entries, &actions, cache)?;
    }
    let applied = applied.ok_or_else(|| Error::Internal {
        reason: "agent context does not fit after every drop".into(),
    })?;
    Ok((applied, notice_dropped))
}

/// Grows the open turn's results from their artifacts into the room the fitted context
/// leaves. Sets the layout's input cost; returns the open turn's messages and its clips (those
/// of its fitting, replaced by later ones of the same result).
fn grow_open_turn<H: History + ?Sized>(
    layout: &mut AgentLayout<'_, '_>,
    history: &H,
    entries: &[Entry],
    turn: &OpenTurn,
    msgs: Vec<Msg>,
) -> Result<(Vec<Msg>, Vec<Clip>)> {
    let budget = layout.budget;
    let tok = budget.counter;
    let before_input = layout.system_cost.then(layout.pinned_cost, tok);
    let mut piece = [Piece {
        events: turn.events.clone(),
        msgs,
        cost: layout.input_cost,
    }];
    let context = budget.cost(&layout.context_msgs(entries, &[]));
    let grown = expand_results(budget, history, &mut piece, &|costs: &[Cost]| {
        budget.total(before_input.then(context, tok).then(costs[0], tok))
    })?;
    let [piece] = piece;
    layout.input_cost = piece.cost;
    Ok((piece.msgs, merge_clips(turn.clips.clone(), grown)))
}

/// The latest result's whole text from its artifact, if it has one
/// (docs/design.md#p12-room-is-used): it is sent in full when the budget allows, else clipped like
/// any result.
fn latest_result_in_full<H: History + ?Sized>(history: &H, events: &mut [Event]) -> Result<()> {
    let Some(latest) = events
        .iter()
        .rposition(|e| e.kind() == ctxlog_event::EventKind::ToolResult)
    else {
        return Ok(());
    };
    if let Some(full) = read(history.artifact_text(&events[latest]))? {
        events[latest].body.set_result_text(full);
    }
    Ok(())
}

fn all_events<H: History + ?Sized>(history: &H, turn_count: usize) -> Result<Vec<Event>> {
    let mut events = read(history.preamble())?;
    for i in 0..turn_count {
        events.extend(read(history.turn(i))?);
    }
    Ok(events)
}
