//! The open turn of an agent loop (docs/design.md#p11-the-agent-loop): a request with no current
//! input continues the newest turn, which must end in tool results.
//!
//! An agent calls the model again after each tool result without a new user message. Such a
//! request carries no input; the newest turn (its user message, the assistant's tool calls and
//! the results that arrived) takes the input's place: it is mandatory, and the body ends with
//! those results (OpenAI `tool` messages; an Anthropic `user` message of `tool_result` blocks).
//! A caller that commits the user's message before calling the model (the gateway) asks for
//! the same with `stored_input`: a newest turn ending in that message then ends the body.
//!
//! A long tool loop inside one turn can outgrow the budget on its own. The open turn is never
//! left out or cut short, but the text of its tool results may be clipped ([`fit_open_turn`]):
//! when the turn as stored does not fit beside the rest of the mandatory body, every result's
//! text is cut to the clip marker (`[… N chars clipped from seq=Q]`), then the results grow
//! back newest first — each in full if it fits, else to the longest head/tail excerpt that
//! fits — so the oldest results are the ones clipped, and only as far as needed. The user
//! message, the assistant's text, every call and every result's identity (call id, tool,
//! status, exit code, artifact link) are never removed. Only when even the fully clipped turn
//! does not fit is the request refused (exit 3), with that clipped size as what is needed.

use ctxlog_event::{Event, EventBody, EventKind};

use crate::budget::{Budget, Cost};
use crate::error::{Error, Result};
use crate::expand::{excerpt, longest_fitting};
use crate::history::{History, read};
use crate::report::{Clip, Size};
use crate::request::ProjectionRequest;
use crate::wire::{Msg, turn_items};

/// Why a request without input was refused.
pub(crate) const NO_INPUT: &str = "no current input: give the user's message (--input), or \
project right after a tool result is committed (the open turn, ending in tool results, then \
ends the body)";

/// The kind of the newest event of `events` that is sent (notes, system markers and opaque
/// items aside).
fn last_sent(events: &[Event]) -> Option<EventKind> {
    events
        .iter()
        .rev()
        .find(|e| {
            !matches!(
                e.body,
                EventBody::Note { .. } | EventBody::System { .. } | EventBody::Opaque { .. }
            )
        })
        .map(Event::kind)
}

/// Whether the newest event of `events` that is sent is a tool result.
pub(crate) fn ends_in_results(events: &[Event]) -> bool {
    last_sent(events) == Some(EventKind::ToolResult)
}

/// Whether the newest event of `events` that is sent is a user message (no reply yet).
fn ends_in_user(events: &[Event]) -> bool {
    last_sent(events) == Some(EventKind::User)
}

/// The events of the open turn that stands in for the current input: `None` when the request
/// has an input.
///
/// # Errors
///
/// [`Error::InvalidRequest`] when the request has no input and the newest turn does not end
/// in tool results (there would be nothing for the model to answer).
pub(crate) fn open_turn<H: History + ?Sized>(
    history: &H,
    req: &ProjectionRequest,
    turn_count: usize,
) -> Result<Option<Vec<Event>>> {
    if req.input.is_some() {
        return Ok(None);
    }
    if let Some(newest) = turn_count.checked_sub(1) {
        let events = read(history.turn(newest))?;
        if ends_in_results(&events) || (req.stored_input && ends_in_user(&events)) {
            return Ok(Some(events));
        }
    }
    Err(Error::InvalidRequest {
        reason: NO_INPUT.to_owned(),
    })
}

/// What recalled pages should be relevant to: the input, or the open turn's user message.
pub(crate) fn recall_query(req: &ProjectionRequest, open: Option<&[Event]>) -> String {
    if let Some(input) = &req.input {
        return input.clone();
    }
    open.into_iter()
        .flatten()
        .find_map(|e| match &e.body {
            EventBody::User { text, .. } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The open turn as it is sent: its events (result texts possibly clipped), their messages,
/// their cost, and what was clipped.
pub(crate) struct OpenTurn {
    pub events: Vec<Event>,
    pub msgs: Vec<Msg>,
    pub cost: Cost,
    pub clips: Vec<Clip>,
}

/// Fits the open turn's events into the budget beside the rest of the mandatory body, whose
/// size with the turn costing `c` is `total(c)`: as stored if that fits, else with result texts
/// clipped oldest first, only as far as needed (see the module documentation).
///
/// # Errors
///
/// [`Error::MandatoryExceedsBudget`] when even every result clipped to its marker does not fit.
pub(crate) fn fit_open_turn(
    budget: &Budget<'_>,
    events: Vec<Event>,
    total: &dyn Fn(Cost) -> Size,
) -> Result<OpenTurn> {
    let (msgs, cost) = budget.render(&turn_items(&events, budget.req.offers_recall_tool()));
    if budget.fits_all(total(cost)) {
        return Ok(OpenTurn {
            events,
            msgs,
            cost,
            clips: Vec::new(),
        });
    }
    let (events, stored) = clip_results(events, budget.req.offers_recall_tool());
    let (msgs, cost) = budget.render(&turn_items(&events, budget.req.offers_recall_tool()));
    let clipped = total(cost);
    if !budget.fits_all(clipped) {
        budget.check_mandatory(clipped)?;
    }
    let mut turn = OpenTurn {
        events,
        msgs,
        cost,
        clips: Vec::new(),
    };
    // Grow back newest first: in full, else the longest head/tail excerpt that fits.
    for (i, text) in stored.iter().rev() {
        turn.grow_back(budget, total, *i, text);
    }
    turn.clips.sort_by_key(|c| c.seq);
    Ok(turn)
}

/// Cuts the text of every result longer than the bare clip marker to that marker. Returns the
/// events so clipped, and the index and whole text of each result cut.
fn clip_results(mut events: Vec<Event>, tool: bool) -> (Vec<Event>, Vec<(usize, String)>) {
    let stored: Vec<(usize, String)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.body {
            EventBody::ToolResult { text, .. } => {
                let chars = text.chars().count();
                (chars > excerpt(text, chars, 0, e.seq, tool).chars().count())
                    .then(|| (i, text.clone()))
            }
            _ => None,
        })
        .collect();
    for (i, text) in &stored {
        let seq = events[*i].seq;
        set_text(
            &mut events[*i],
            excerpt(text, text.chars().count(), 0, seq, tool),
        );
    }
    (events, stored)
}

/// The messages and cost of `events` as the open turn, if the body fits with them.
fn fitting(
    budget: &Budget<'_>,
    total: &dyn Fn(Cost) -> Size,
    events: &[Event],
) -> Option<(Vec<Msg>, Cost)> {
    let (msgs, cost) = budget.render(&turn_items(events, budget.req.offers_recall_tool()));
    budget.fits_all(total(cost)).then_some((msgs, cost))
}

impl OpenTurn {
    /// Gives the clipped result at `i` its whole `text` back if the body still fits, else the
    /// longest head/tail excerpt of it that fits (the bare marker if none does), and records
    /// that clip.
    fn grow_back(
        &mut self,
        budget: &Budget<'_>,
        total: &dyn Fn(Cost) -> Size,
        i: usize,
        text: &str,
    ) {
        let seq = self.events[i].seq;
        let chars = text.chars().count();
        let mut events = self.events.clone();
        set_text(&mut events[i], text.to_owned());
        if let Some((msgs, cost)) = fitting(budget, total, &events) {
            (self.events, self.msgs, self.cost) = (events, msgs, cost);
            return;
        }
        let try_keep = |keep: usize| {
            let mut events = self.events.clone();
            let tool = budget.req.offers_recall_tool();
            set_text(&mut events[i], excerpt(text, chars, keep, seq, tool));
            fitting(budget, total, &events).map(|(msgs, cost)| (events, msgs, cost))
        };
        // Bisect the characters kept from 2 up (`hi + 1`, the whole text, does not fit); if not
        // even 2 fit, the result keeps its bare marker (0 kept, as clipped above).
        let (lo, hi) = (2.min(chars - 1), chars - 1);
        let (kept, best) = match try_keep(lo) {
            Some(one) => longest_fitting((lo, hi), Some(one), try_keep),
            None => (0, None),
        };
        if let Some((events, msgs, cost)) = best {
            (self.events, self.msgs, self.cost) = (events, msgs, cost);
        }
        self.clips.push(Clip {
            seq,
            chars: chars as u64,
            kept_chars: kept as u64,
            recall: format!("recall seq={seq}"),
        });
    }
}

fn set_text(event: &mut Event, new: String) {
    event.body.set_result_text(new);
}
