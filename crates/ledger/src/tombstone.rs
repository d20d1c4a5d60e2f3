//! Erased ranges as they appear in the log (docs/design.md#e1-erasure): seq `from` of an erased
//! range holds the *tombstone* (a `system` record whose marker is [`SystemMarker::Tombstone`]
//! `{from, to, at_ms, reason}`) and every seq in `from+1..=to` a *covered placeholder* (the same
//! marker with an empty reason). Readers skip placeholders ([`is_placeholder`]), `verify` checks
//! coverage ([`Coverage`]), erasure widens a requested range ([`reach`]) and erases only its live
//! runs ([`live_runs`]): a tombstone once written is never rewritten
//! (docs/design.md#e6-listing-and-tombstones). [`run_body`] is the one place a run's records are
//! made, for the file store's rewrite, an import's rebuilt tombstones and a database engine alike.

use crate::error::{Error, Result};
use crate::event::{Event, EventBody, SystemMarker};

/// The longest `reason` an erasure accepts, in bytes.
pub const MAX_ERASE_REASON_BYTES: usize = 1024;

/// The reason recorded when the caller gives none.
pub const DEFAULT_ERASE_REASON: &str = "erased on request";

/// The reason a tombstone records: `reason`, or [`DEFAULT_ERASE_REASON`] when it is empty
/// (an empty reason marks a covered placeholder, and a tombstone must say why).
pub(crate) fn erase_reason(reason: &str) -> &str {
    if reason.is_empty() {
        DEFAULT_ERASE_REASON
    } else {
        reason
    }
}

/// The body of seq `seq` of the erased run `from..=to`: the tombstone (with `reason`) at
/// `from`, a covered placeholder (same range and time, empty reason) after it.
pub(crate) fn run_body(seq: u64, from: u64, to: u64, at_ms: i64, reason: &str) -> EventBody {
    let reason = if seq == from { reason } else { "" };
    EventBody::System {
        marker: SystemMarker::Tombstone {
            from,
            to,
            at_ms,
            reason: reason.to_string(),
        },
    }
}

/// The covered range a record stands in when `body` is a marker that covers seqs: an erasure's
/// tombstone or a repair's loss record (`SystemMarker::Loss`, laid out the same way:
/// docs/design.md#l11-repair). Returns `(from, to, at_ms, reason, is_loss)`; an empty reason
/// marks a covered placeholder.
pub(crate) fn cover(body: &EventBody) -> Option<(u64, u64, i64, &str, bool)> {
    match body {
        EventBody::System {
            marker:
                SystemMarker::Tombstone {
                    from,
                    to,
                    at_ms,
                    reason,
                },
        } => Some((*from, *to, *at_ms, reason.as_str(), false)),
        EventBody::System {
            marker:
                SystemMarker::Loss {
                    from,
                    to,
                    at_ms,
                    reason,
                    ..
                },
        } => Some((*from, *to, *at_ms, reason.as_str(), true)),
        _ => None,
    }
}

/// The body of seq `seq` of the lost run `from..=to`: the loss record (with `reason` and the
/// damaged `offset`) at `from`, a covered placeholder (same range, time and offset, empty
/// reason) after it.
pub(crate) fn loss_body(
    seq: u64,
    from: u64,
    to: u64,
    at_ms: i64,
    offset: u64,
    reason: &str,
) -> EventBody {
    let reason = if seq == from { reason } else { "" };
    EventBody::System {
        marker: SystemMarker::Loss {
            from,
            to,
            at_ms,
            offset,
            reason: reason.to_string(),
        },
    }
}

/// The runs of `from..=to` that no earlier tombstone covers (`leads`: the `(from, to)` of
/// each, in seq order), in seq order: an erasure writes one tombstone per run and leaves
/// the earlier ones as written.
pub(crate) fn live_runs(from: u64, to: u64, leads: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut runs = Vec::new();
    let mut next = from;
    for &(a, b) in leads {
        if b < next || a > to {
            continue;
        }
        if a > next {
            runs.push((next, a - 1));
        }
        next = next.max(b.saturating_add(1));
    }
    if next <= to {
        runs.push((next, to));
    }
    runs
}

/// True when `body` at `seq` is a covered placeholder of an erased seq: a tombstone marker
/// with `from < seq <= to`. Readers skip such records.
pub(crate) fn is_placeholder(seq: u64, body: &EventBody) -> bool {
    matches!(cover(body), Some((from, to, ..)) if from < seq && seq <= to)
}

/// The first seq of the erased (or lost) range `seq` lies in, when `body` is its tombstone
/// (or loss record) or one of its placeholders (`from <= seq <= to`; `from >= 1`).
pub(crate) fn erased_from(seq: u64, body: &EventBody) -> Option<u64> {
    match cover(body) {
        Some((from, to, ..)) if 1 <= from && from <= seq && seq <= to => Some(from),
        _ => None,
    }
}

/// The lost range (`from`, `to`) `seq` lies in, when `body` is a loss record or one of its
/// placeholders.
pub(crate) fn lost_range(seq: u64, body: &EventBody) -> Option<(u64, u64)> {
    match cover(body) {
        Some((from, to, .., true)) if from <= seq && seq <= to => Some((from, to)),
        _ => None,
    }
}

/// The range of `body` when it leads an erased or lost range (`seq == from`).
pub(crate) fn lead_range(seq: u64, body: &EventBody) -> Option<(u64, u64)> {
    match cover(body) {
        Some((from, to, ..)) if from == seq && to >= from => Some((from, to)),
        _ => None,
    }
}

/// An erased (or lost) range decided elsewhere, appended as it was: an import rebuilding an
/// export's tombstone or loss record (docs/design.md#e4-export-and-import,
/// docs/design.md#l11-repair). No content is ever carried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tombstone {
    /// First erased seq: must be the next seq of the conversation.
    pub from: u64,
    /// Last erased seq (inclusive), `>= from`.
    pub to: u64,
    /// When the range was erased (ms since the epoch, not negative). A tombstone's time is
    /// the erasure's, outside the events' timeline: events around it are not compared with
    /// it (the rule that times never go backwards compares event times with event times:
    /// docs/design.md#l10-event-times).
    pub at_ms: i64,
    /// Why (non-empty, at most [`MAX_ERASE_REASON_BYTES`]).
    pub reason: String,
    /// `Some(offset)` for a loss record ([`SystemMarker::Loss`]: seqs lost to damage at that
    /// byte offset of the damaged log, given up by a repair); `None` for an erasure's tombstone.
    pub loss_offset: Option<u64>,
}

impl Tombstone {
    /// The tombstone of `body` at `seq`, when it leads an erased range (`seq == from`).
    /// A loss record's, likewise.
    pub fn of(seq: u64, body: &EventBody) -> Option<Tombstone> {
        let loss_offset = match body {
            EventBody::System {
                marker: SystemMarker::Loss { offset, .. },
            } => Some(*offset),
            _ => None,
        };
        match cover(body) {
            Some((from, to, at_ms, reason, _)) if from == seq && to >= from => Some(Tombstone {
                from,
                to,
                at_ms,
                reason: reason.to_string(),
                loss_offset,
            }),
            _ => None,
        }
    }

    /// The bodies of seqs `from..=to`: the tombstone (or loss record), then its placeholders.
    pub fn bodies(&self) -> impl Iterator<Item = EventBody> + '_ {
        (self.from..=self.to).map(|seq| match self.loss_offset {
            None => run_body(seq, self.from, self.to, self.at_ms, &self.reason),
            Some(offset) => loss_body(seq, self.from, self.to, self.at_ms, offset, &self.reason),
        })
    }
}

/// Checks a tombstone to append to a conversation whose last seq is `last_seq`. `stored`
/// reads the event stored at `t.from` when `t.from <= last_seq`. Returns true when that event
/// is this very tombstone and the range is stored whole (a re-run of the same import:
/// nothing to write), false when it is to be appended at `last_seq + 1`.
///
/// # Errors
/// [`Error::InvalidCommit`] when `from` is not the next seq (and not a re-run), `to < from`,
/// the time is negative, or the reason is empty or too long.
pub(crate) fn check_append(
    t: &Tombstone,
    last_seq: u64,
    stored: &mut dyn FnMut(u64) -> Result<Option<Event>>,
) -> Result<bool> {
    let bad = |why: String| {
        Err(Error::invalid(format!(
            "tombstone of seqs {}-{}: {why}",
            t.from, t.to
        )))
    };
    if t.to < t.from {
        return bad("the last seq is before the first".into());
    }
    if t.at_ms < 0 {
        return bad(format!("time {} ms is before the epoch", t.at_ms));
    }
    if t.reason.is_empty() {
        return bad("the reason is empty (only a covered placeholder has none)".into());
    }
    if t.reason.len() > MAX_ERASE_REASON_BYTES {
        return bad(format!(
            "the reason is {} bytes, the limit is {}",
            t.reason.len(),
            MAX_ERASE_REASON_BYTES
        ));
    }
    if t.from <= last_seq && t.to <= last_seq {
        let same = stored(t.from)?.and_then(|e| Tombstone::of(e.seq, &e.body));
        if same.as_ref() == Some(t) {
            return Ok(true);
        }
    }
    if t.from != last_seq + 1 {
        return bad(format!(
            "it must start at the conversation's next seq ({})",
            last_seq + 1
        ));
    }
    Ok(false)
}

/// Checks, record by record in seq order, that erased ranges are covered (used by `verify`):
/// a tombstone leading `from..=to` must be followed by placeholders for exactly
/// `from+1..=to` (same range and time, empty reason: readers skip placeholders, so one must
/// not carry text), and no placeholder may appear outside such a run.
#[derive(Debug, Default)]
pub(crate) struct Coverage {
    open: Option<(u64, u64, i64, bool)>,
    /// Seqs covered by tombstones (tombstones included).
    pub erased: u64,
    /// Seqs covered by loss records (loss records included): lost to damage, given up by a
    /// repair.
    pub lost: u64,
}

impl Coverage {
    /// Feeds the event at `seq`; says what is wrong when coverage breaks there.
    pub(crate) fn check(&mut self, seq: u64, body: &EventBody) -> std::result::Result<(), String> {
        let marker = cover(body).map(|(from, to, at, _, loss)| (from, to, at, loss));
        let silent = cover(body).is_some_and(|(.., reason, _)| reason.is_empty());
        if let Some((from, to, at, loss)) = self.open {
            if marker == Some((from, to, at, loss)) && is_placeholder(seq, body) && silent {
                self.count(loss);
                if seq == to {
                    self.open = None;
                }
                return Ok(());
            }
            return Err(format!(
                "seq {seq} lies in the erased range {from}-{to} but is not covered by its tombstone"
            ));
        }
        if is_placeholder(seq, body) {
            return Err(format!(
                "seq {seq} is a placeholder of an erased range without its leading tombstone"
            ));
        }
        if let (Some((from, to)), Some(open)) = (lead_range(seq, body), marker) {
            self.count(open.3);
            if to > from {
                self.open = Some(open);
            }
        }
        Ok(())
    }

    fn count(&mut self, loss: bool) {
        if loss {
            self.lost += 1;
        } else {
            self.erased += 1;
        }
    }

    /// Fails when the last tombstone covers seqs past the end of the log.
    pub(crate) fn finish(&self) -> std::result::Result<(), String> {
        match self.open {
            Some((from, to, ..)) => Err(format!(
                "the tombstone at seq {from} covers seqs up to {to}, past the end of the log"
            )),
            None => Ok(()),
        }
    }
}

/// How far an erasure reaches beyond the seqs asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reach {
    /// Whole turns, so a tool call is never separated from its result:
    /// what an erasure of a range or a commit does.
    #[default]
    Turns,
    /// Exactly the seqs asked for, which must run to the last seq: a *retraction* of a
    /// conversation's newest events (an application taking back what it just stored). An
    /// earlier tombstone the range overlaps is spanned as by [`Reach::Turns`] and stays as
    /// written.
    Tail,
}

/// The range an erasure of `from..=to` covers under `how` ([`Reach`]). [`Reach::Turns`]
/// widens it to whole turns and over earlier tombstones. An end inside an earlier
/// erased range snaps to that range's bound (the range is already whole); an end in live
/// content moves to the bound of its turn, or of the erased range next to it (a turn runs
/// from a user event to the event before the next one; events before the first user event
/// belong to no turn and are not widened). [`Reach::Tail`] keeps `from` (unless an earlier
/// erased range holds it) and runs to `last_seq`. Either way the result spans every earlier
/// range it overlaps; those ranges stay as written, only the [`live_runs`] between them are
/// erased.
pub(crate) fn reach(
    from: u64,
    to: u64,
    how: Reach,
    user_seqs: &[u64],
    leads: &[(u64, u64)],
    last_seq: u64,
) -> (u64, u64) {
    let erased_range = |s: u64| leads.iter().find(|(a, b)| *a <= s && s <= *b).copied();
    if how == Reach::Tail {
        let from = erased_range(from).map_or(from, |(a, _)| a);
        return span_leads(from, to.max(last_seq), leads);
    }
    // A live end widens to its turn's bound, but never into an earlier erased range: that
    // range already ends (or starts) a turn, and its tombstone is an audit record that an
    // erasure next to it must leave as written (docs/design.md#e6-listing-and-tombstones).
    let from = match erased_range(from) {
        Some((a, _)) => a,
        None => {
            let turn = user_seqs.iter().rev().find(|&&s| s <= from).copied();
            let after_erased = leads
                .iter()
                .filter(|(_, b)| *b < from)
                .map(|(_, b)| b + 1)
                .max();
            match (turn, after_erased) {
                (Some(t), Some(e)) => t.max(e),
                (t, e) => t.or(e).unwrap_or(from),
            }
        }
    };
    let to = match erased_range(to) {
        Some((_, b)) => b,
        None => {
            let next_turn = user_seqs.iter().find(|&&s| s > to).copied();
            let next_erased = leads.iter().filter(|(a, _)| *a > to).map(|(a, _)| *a).min();
            match next_turn.into_iter().chain(next_erased).min() {
                Some(next) => next - 1,
                None => last_seq,
            }
        }
    };
    span_leads(from, to, leads)
}

/// `from..=to` grown until it spans every earlier erased range (`leads`) it overlaps.
fn span_leads(mut from: u64, mut to: u64, leads: &[(u64, u64)]) -> (u64, u64) {
    loop {
        let before = (from, to);
        for &(a, b) in leads {
            if a <= to && from <= b {
                from = from.min(a);
                to = to.max(b);
            }
        }
        if (from, to) == before {
            return (from, to);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widen(from: u64, to: u64, users: &[u64], leads: &[(u64, u64)], last: u64) -> (u64, u64) {
        reach(from, to, Reach::Turns, users, leads, last)
    }

    #[test]
    fn a_tail_reach_is_exact_but_spans_old_tombstones() {
        // turns start at 1, 4; last seq 6
        assert_eq!(reach(6, 6, Reach::Tail, &[1, 4], &[], 6), (6, 6));
        assert_eq!(reach(5, 6, Reach::Tail, &[1, 4], &[], 6), (5, 6));
        // from inside an earlier erased range snaps to its start; one overlapped is spanned
        assert_eq!(reach(5, 6, Reach::Tail, &[1, 4], &[(4, 5)], 6), (4, 6));
        assert_eq!(reach(3, 6, Reach::Tail, &[1], &[(5, 5)], 6), (3, 6));
    }

    #[test]
    fn widening_covers_whole_turns_and_old_tombstones() {
        // turns start at 1, 4, 8; last seq 10
        let users = [1, 4, 8];
        assert_eq!(widen(5, 5, &users, &[], 10), (4, 7));
        assert_eq!(widen(4, 8, &users, &[], 10), (4, 10));
        assert_eq!(widen(1, 1, &users, &[], 10), (1, 3));
        // preamble before the first user event stays as asked
        assert_eq!(widen(1, 1, &[3], &[], 5), (1, 2));
        // an earlier tombstone 1..=3 (no user event left there) is spanned
        assert_eq!(widen(2, 2, &[4], &[(1, 3)], 6), (1, 3));
        assert_eq!(widen(3, 4, &[4], &[(1, 3)], 6), (1, 6));
        // an end inside an earlier range does not reach back to the turn before it
        assert_eq!(widen(4, 4, &[1, 7], &[(3, 6)], 8), (3, 6));
        assert_eq!(widen(4, 7, &[1, 7], &[(3, 6)], 8), (3, 8));
        // a live end next to an earlier range stops at it: that tombstone stays as written
        assert_eq!(widen(2, 2, &[1, 7], &[(3, 6)], 8), (1, 2));
        assert_eq!(widen(1, 1, &[4], &[(2, 3)], 6), (1, 1));
        assert_eq!(widen(4, 4, &[4], &[(1, 3)], 6), (4, 6));
    }

    #[test]
    fn live_runs_skip_earlier_ranges() {
        assert_eq!(live_runs(1, 8, &[]), [(1, 8)]);
        assert_eq!(live_runs(1, 8, &[(3, 4)]), [(1, 2), (5, 8)]);
        assert_eq!(live_runs(1, 8, &[(1, 2), (7, 8)]), [(3, 6)]);
        assert_eq!(live_runs(3, 6, &[(1, 2), (3, 4), (5, 6)]), []);
        assert_eq!(
            live_runs(2, 9, &[(1, 3), (5, 5), (9, 12)]),
            [(4, 4), (6, 8)]
        );
    }

    #[test]
    fn placeholders_are_the_covered_seqs_only() {
        let t = |from, to| EventBody::System {
            marker: SystemMarker::Tombstone {
                from,
                to,
                at_ms: 0,
                reason: String::new(),
            },
        };
        assert!(!is_placeholder(3, &t(3, 5)));
        assert!(is_placeholder(4, &t(3, 5)));
        assert!(is_placeholder(5, &t(3, 5)));
        assert!(!is_placeholder(9, &t(3, 5)));
        assert_eq!(lead_range(3, &t(3, 5)), Some((3, 5)));
        assert_eq!(lead_range(4, &t(3, 5)), None);
    }
}
