//! Room is used (docs/design.md#p12-room-is-used): tool results stored as artifacts go in full when
//! the budget allows, newest first, clipped to a head/tail excerpt with the recall handle only as
//! far as needed.
//!
//! The ledger keeps a head/tail excerpt of a large output in the event and the whole output
//! in an artifact. Once a `turns` body is settled (which turns it keeps), the room left under
//! the budget is spent on the kept results whose artifact holds more than their event: the
//! newest first (the open turn's, then the newest kept turn's, …), each replaced by the
//! artifact's text, or by the longest head/tail excerpt of it that fits, marked
//! `[… N chars clipped; recall tool: seq=Q]` (`[… N chars clipped from seq=Q]` when the
//! request does not offer the recall tool).

use ctxlog_event::{Event, EventBody};

use crate::budget::{Budget, Cost};
use crate::error::Result;
use crate::history::{History, read};
use crate::report::Clip;
use crate::wire::{Msg, turn_items};

/// One body piece whose results may grow: its events, rendered messages and cost.
pub(crate) struct Piece {
    pub events: Vec<Event>,
    pub msgs: Vec<Msg>,
    pub cost: Cost,
}

/// The marker standing for `clipped` characters cut from the text of event `seq`. It names the
/// recall tool only when the request offers it (docs/design.md#p13-true-words):
/// `[… N chars clipped; recall tool: seq=Q]`, else `[… N chars clipped from seq=Q]`.
pub(crate) fn clip_marker(clipped: usize, seq: u64, recall_tool: bool) -> String {
    if recall_tool {
        format!("[… {clipped} chars clipped; recall tool: seq={seq}]")
    } else {
        format!("[… {clipped} chars clipped from seq={seq}]")
    }
}

/// `text` cut to its first and last `keep / 2` characters (of `chars`) around the marker
/// (the marker alone when `keep` is 0).
pub(crate) fn excerpt(text: &str, chars: usize, keep: usize, seq: u64, tool: bool) -> String {
    let head: String = text.chars().take(keep / 2).collect();
    let tail: String = text.chars().skip(chars - (keep - keep / 2)).collect();
    let marker = clip_marker(chars - keep, seq, tool);
    if keep == 0 {
        return marker;
    }
    format!("{head}\n{marker}\n{tail}")
}

/// The most characters an excerpt may keep, by bisection: the largest `keep` in `lo..=hi` for
/// which `fits(keep)` answers, given `best`, the answer for `lo` (`None` when `lo` is not known
/// to fit; it is not tried). Returns that `keep` (`lo` when nothing above it fits) and its
/// answer.
pub(crate) fn longest_fitting<T>(
    (mut lo, mut hi): (usize, usize),
    mut best: Option<T>,
    mut fits: impl FnMut(usize) -> Option<T>,
) -> (usize, Option<T>) {
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        match fits(mid) {
            Some(found) => {
                lo = mid;
                best = Some(found);
            }
            None => hi = mid - 1,
        }
    }
    (lo, best)
}

/// Grows the results of `pieces` (body order; the newest last) while the body fits:
/// `total(cost of pieces)` is the body's size for given piece costs. Returns what was clipped.
pub(crate) fn expand_results<H: History + ?Sized>(
    budget: &Budget<'_>,
    history: &H,
    pieces: &mut [Piece],
    total: &dyn Fn(&[Cost]) -> crate::report::Size,
) -> Result<Vec<Clip>> {
    let mut clips = Vec::new();
    for p in (0..pieces.len()).rev() {
        for e in (0..pieces[p].events.len()).rev() {
            let Some(full) = read(history.artifact_text(&pieces[p].events[e]))? else {
                continue;
            };
            let EventBody::ToolResult { text, .. } = &pieces[p].events[e].body else {
                continue;
            };
            if full.chars().count() <= text.chars().count() || full == *text {
                continue;
            }
            let seq = pieces[p].events[e].seq;
            let chars = full.chars().count();
            let try_text =
                |pieces: &[Piece], candidate: &str| -> (Vec<Event>, Vec<Msg>, Cost, bool) {
                    let mut events = pieces[p].events.clone();
                    events[e].body.set_result_text(candidate.to_owned());
                    let (msgs, cost) =
                        budget.render(&turn_items(&events, budget.req.offers_recall_tool()));
                    let mut costs: Vec<Cost> = pieces.iter().map(|q| q.cost).collect();
                    costs[p] = cost;
                    let fits = budget.fits(total(&costs));
                    (events, msgs, cost, fits)
                };
            let whole = try_text(pieces, &full);
            if whole.3 {
                set(&mut pieces[p], whole);
                continue;
            }
            // The longest excerpt that fits, if it is longer than the stored one.
            let (kept, best) = longest_fitting((0, chars), None, |keep| {
                let tried = try_text(
                    pieces,
                    &excerpt(&full, chars, keep, seq, budget.req.offers_recall_tool()),
                );
                tried.3.then_some(tried)
            });
            let stored = text.chars().count();
            if let Some(tried) = best.filter(|_| kept > stored) {
                set(&mut pieces[p], tried);
                clips.push(Clip {
                    seq,
                    chars: chars as u64,
                    kept_chars: kept as u64,
                    recall: format!("recall seq={seq}"),
                });
            }
        }
    }
    Ok(clips)
}

fn set(piece: &mut Piece, (events, msgs, cost, _): (Vec<Event>, Vec<Msg>, Cost, bool)) {
    piece.events = events;
    piece.msgs = msgs;
    piece.cost = cost;
}
