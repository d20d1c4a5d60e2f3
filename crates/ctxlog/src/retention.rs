//! Retention (docs/design.md#e2-retention): which whole turns a policy removes, and their removal
//! through the erasure path (docs/design.md#e1-erasure), one tombstone per contiguous run whose
//! reason starts with `retention:`.
//!
//! A conversation is cut into *units*: each turn (a user event and what follows it), the
//! events before the first turn (one unit, as erasure widens them together), and the ranges
//! earlier erasures left (never touched again: a tombstone is an audit record,
//! docs/design.md#e6-listing-and-tombstones). A policy selects units, oldest first:
//!
//! * `older_than`: a unit whose newest event is older than that (by its stored time);
//! * `keep_turns`: every turn but the newest N (and what precedes the first turn);
//! * `max_bytes`: the oldest units until the ledger would fit in N bytes (a unit whose
//!   events are smaller than the tombstone records that would keep their seqs is skipped:
//!   removing it would not shrink the ledger).
//!
//! A unit holding a pinned note is exempt unless the policy names pinned notes
//! (`include_pinned`); a unit holding a damaged record (its kind read from the index) is
//! always exempt: the erasure could not prove its text gone, and refuses to reach it. Selected units next to each other become one erasure; a unit left
//! alone (exempt, kept, or an earlier tombstone) separates runs, so earlier tombstones are
//! never absorbed into new ones.

use std::time::Duration;

use ctxlog_ledger::format::{self, LOG_HEADER_LEN};
use ctxlog_ledger::{EventBody, EventKind, SystemMarker};
use serde::{Deserialize, Serialize};

use crate::backend::LedgerView;
use crate::{Error, Result};

/// Events read from the ledger at a time while planning.
const READ_CHUNK: u64 = 4096;

/// A retention policy: which turns to remove. Rules left out do not apply; at least one must
/// be given for `gc` to do anything.
///
/// # Format
/// JSON (`gc` requests) and the `[retention]` table of `ctxlog.toml`:
/// `{"older_than":"90d","keep_turns":100,"max_bytes":10000000,"include_pinned":false}`.
/// `older_than` is a duration such as `90d`, `12h`, `2weeks` or `30min`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionPolicy {
    /// Remove turns whose newest event is older than this [default: no age rule].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub older_than: Option<String>,
    /// Keep only the newest N turns [default: no count rule].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_turns: Option<u64>,
    /// Remove the oldest turns until the ledger file is at most N bytes [default: no size
    /// rule].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Remove turns holding pinned notes too [default: false: they are exempt].
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub include_pinned: bool,
}

impl RetentionPolicy {
    /// True when no rule is set.
    pub fn is_empty(&self) -> bool {
        self.older_than.is_none() && self.keep_turns.is_none() && self.max_bytes.is_none()
    }

    /// `self`, with each rule `over` sets replacing this one's.
    pub fn overridden_by(&self, over: &RetentionPolicy) -> RetentionPolicy {
        RetentionPolicy {
            older_than: over.older_than.clone().or_else(|| self.older_than.clone()),
            keep_turns: over.keep_turns.or(self.keep_turns),
            max_bytes: over.max_bytes.or(self.max_bytes),
            include_pinned: over.include_pinned || self.include_pinned,
        }
    }

    /// The age limit, parsed.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for a duration that does not parse or is zero.
    pub fn age(&self) -> Result<Option<Duration>> {
        let Some(text) = &self.older_than else {
            return Ok(None);
        };
        let age = humantime::parse_duration(text).map_err(|e| Error::InvalidRequest {
            reason: format!("older_than {text:?} is not a duration such as 90d or 12h: {e}"),
        })?;
        if age.is_zero() {
            return Err(Error::InvalidRequest {
                reason: format!("older_than {text:?} must be longer than zero"),
            });
        }
        Ok(Some(age))
    }

    /// Checks every rule.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for an invalid age or a zero `max_bytes`.
    pub fn check(&self) -> Result<()> {
        self.age()?;
        if self.max_bytes == Some(0) {
            return Err(Error::InvalidRequest {
                reason: "max_bytes must be at least 1".into(),
            });
        }
        Ok(())
    }
}

/// One removal a policy planned (or made): a seq range erased under one tombstone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removal {
    /// First seq.
    pub from: u64,
    /// Last seq (inclusive).
    pub to: u64,
    /// Turns in the range.
    pub turns: u64,
    /// The tombstone's reason: `retention: ` and the rules that selected the range.
    pub reason: String,
}

/// What a policy removes from one conversation.
#[derive(Clone, Debug, Default)]
pub(crate) struct Plan {
    pub removals: Vec<Removal>,
    /// Units exempt because they hold a pinned note.
    pub pinned_kept: u64,
    /// The ledger's size now.
    pub bytes_before: u64,
    /// Its size after the removals, from the record sizes: the tombstone records are sized
    /// as the erasure writes them (exact unless the erasure's clock gains a digit).
    pub bytes_after_estimate: u64,
}

/// A unit of removal: a turn, the events before the first turn, or an erased range.
#[derive(Debug)]
struct Unit {
    from: u64,
    to: u64,
    is_turn: bool,
    erased: bool,
    pinned: bool,
    /// It holds a damaged record: never selected.
    damaged: bool,
    newest_ms: i64,
    bytes: u64,
    /// What erasing it alone would free: its records less the tombstone records (one per
    /// seq, as the erasure writes them) that take their place.
    freed: u64,
    /// The first rule that selected it.
    rule: Option<usize>,
}

/// Plans `policy` over the conversation `ledger` at time `now_ms`.
///
/// The rules select whole units, oldest first, in order: age, then count, then size (each
/// unit is credited to the first rule that selects it); an erased unit is never selected,
/// nor a pinned one unless the policy includes pinned content.
pub(crate) fn plan<L: LedgerView + ?Sized>(
    ledger: &L,
    policy: &RetentionPolicy,
    now_ms: i64,
) -> Result<Plan> {
    let mut units = units(ledger)?;
    for u in &mut units {
        u.bytes = (u.from..=u.to).filter_map(|s| ledger.record_len(s)).sum();
        let left: u64 = (u.from..=u.to)
            .map(|seq| tombstone_len(seq, u.from, u.to, now_ms))
            .sum();
        u.freed = u.bytes.saturating_sub(left);
    }
    let bytes_before = LOG_HEADER_LEN as u64 + units.iter().map(|u| u.bytes).sum::<u64>();
    let rules = rule_names(policy)?;
    let removable = |u: &Unit| !u.erased && !u.damaged && (!u.pinned || policy.include_pinned);
    if let Some(age) = policy.age()? {
        let age_ms = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        select_older_than(&mut units, now_ms.saturating_sub(age_ms), removable);
    }
    if let Some(keep) = policy.keep_turns {
        select_beyond_newest(&mut units, keep, removable);
    }
    if let Some(max) = policy.max_bytes {
        select_until_under(&mut units, bytes_before, max, removable);
    }
    let pinned_kept = units
        .iter()
        .filter(|u| u.pinned && !u.erased && u.rule.is_none())
        .count() as u64;
    let removals = runs(&units, &rules);
    // Exactly as the erasure will write them: the selected records give way to one tombstone
    // record per seq, the lead of each range carrying its reason.
    let selected: u64 = units
        .iter()
        .filter(|u| u.rule.is_some())
        .map(|u| u.bytes)
        .sum();
    let stones: u64 = removals
        .iter()
        .map(|r| {
            let records: u64 = (r.from..=r.to)
                .map(|seq| tombstone_len(seq, r.from, r.to, now_ms))
                .sum();
            records + r.reason.len() as u64
        })
        .sum();
    Ok(Plan {
        removals,
        pinned_kept,
        bytes_before,
        bytes_after_estimate: bytes_before - selected + stones,
    })
}

/// The age rule: every removable unit whose newest event is before `cutoff_ms`.
fn select_older_than(units: &mut [Unit], cutoff_ms: i64, removable: impl Fn(&Unit) -> bool) {
    for u in units.iter_mut() {
        if removable(u) && u.rule.is_none() && u.newest_ms < cutoff_ms {
            u.rule = Some(0);
        }
    }
}

/// The count rule: the units before the newest `keep` live turns (units between those turns,
/// such as notes, go with the older ones).
fn select_beyond_newest(units: &mut [Unit], keep: u64, removable: impl Fn(&Unit) -> bool) {
    let turns = units.iter().filter(|u| u.is_turn && !u.erased).count() as u64;
    let mut over = turns.saturating_sub(keep);
    for u in units.iter_mut() {
        if over == 0 {
            break;
        }
        if u.is_turn && !u.erased {
            over -= 1;
        }
        if removable(u) && u.rule.is_none() {
            u.rule = Some(1);
        }
    }
}

/// The size rule: oldest units first until the ledger (`bytes_before`, less what the other
/// rules already free) is at most `max` bytes.
fn select_until_under(
    units: &mut [Unit],
    bytes_before: u64,
    max: u64,
    removable: impl Fn(&Unit) -> bool,
) {
    let freed: u64 = units
        .iter()
        .filter(|u| u.rule.is_some())
        .map(|u| u.freed)
        .sum();
    let mut after = bytes_before.saturating_sub(freed);
    for u in units.iter_mut() {
        if after <= max {
            break;
        }
        // A unit smaller than its tombstone records frees nothing: it stays.
        if removable(u) && u.rule.is_none() && u.freed > 0 {
            u.rule = Some(2);
            after = after.saturating_sub(u.freed);
        }
    }
}

/// The rules' texts, by index: age, count, size.
fn rule_names(policy: &RetentionPolicy) -> Result<[String; 3]> {
    policy.check()?;
    Ok([
        format!("older than {}", policy.older_than.as_deref().unwrap_or("")),
        format!("keep newest {} turns", policy.keep_turns.unwrap_or(0)),
        format!("ledger over {} bytes", policy.max_bytes.unwrap_or(0)),
    ])
}

/// Cuts the conversation into units, reading its events a chunk at a time.
fn units<L: LedgerView + ?Sized>(ledger: &L) -> Result<Vec<Unit>> {
    let mut units: Vec<Unit> = Vec::new();
    let last = ledger.last_seq();
    let mut from = 1;
    while from <= last {
        let to = from.saturating_add(READ_CHUNK - 1).min(last);
        match ledger.events(from..=to) {
            Ok(events) => events.iter().for_each(|e| add_event(&mut units, e, last)),
            // A damaged record: this chunk is read seq by seq, around it.
            Err(ctxlog_ledger::Error::Corrupt { .. }) => {
                for seq in from..=to {
                    add_seq(ledger, &mut units, seq, last)?;
                }
            }
            Err(e) => return Err(e.into()),
        }
        from = to + 1;
    }
    Ok(units)
}

/// Adds event `seq` (nothing for a covered placeholder); a damaged one makes its unit (a
/// turn of its own when the index says it was a user event) damaged.
fn add_seq<L: LedgerView + ?Sized>(
    ledger: &L,
    units: &mut Vec<Unit>,
    seq: u64,
    last: u64,
) -> Result<()> {
    match ledger.events(seq..=seq) {
        Ok(events) => events.iter().for_each(|e| add_event(units, e, last)),
        Err(ctxlog_ledger::Error::Corrupt { .. }) => {
            let user = ledger.kind(seq) == Some(EventKind::User);
            match units.last_mut().filter(|u| !u.erased && u.to + 1 == seq) {
                Some(unit) if !user => unit.to = seq,
                _ => units.push(Unit::new(seq, seq, user, false, 0)),
            }
            if let Some(unit) = units.last_mut() {
                unit.damaged = true;
            }
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

fn add_event(units: &mut Vec<Unit>, event: &ctxlog_ledger::Event, last: u64) {
    let seq = event.seq;
    if let EventBody::System {
        marker: SystemMarker::Tombstone { from, to, .. } | SystemMarker::Loss { from, to, .. },
    } = &event.body
        && *from == seq
    {
        units.push(Unit::new(seq, (*to).min(last), false, true, event.ts_ms));
        return;
    }
    let open = units.last_mut().filter(|u| !u.erased && u.to + 1 == seq);
    match (event.kind(), open) {
        (EventKind::User, _) | (_, None) => {
            let is_turn = event.kind() == EventKind::User;
            units.push(Unit::new(seq, seq, is_turn, false, event.ts_ms));
        }
        (_, Some(unit)) => {
            unit.to = seq;
            unit.newest_ms = unit.newest_ms.max(event.ts_ms);
        }
    }
    if let (EventBody::Note { pinned: true, .. }, Some(unit)) = (&event.body, units.last_mut()) {
        unit.pinned = true;
    }
}

impl Unit {
    fn new(from: u64, to: u64, is_turn: bool, erased: bool, ts_ms: i64) -> Unit {
        Unit {
            from,
            to,
            is_turn,
            erased,
            pinned: false,
            damaged: false,
            newest_ms: ts_ms,
            bytes: 0,
            freed: 0,
            rule: None,
        }
    }
}

/// Contiguous runs of selected units, each with the rules that selected it.
fn runs(units: &[Unit], rules: &[String; 3]) -> Vec<Removal> {
    let mut out: Vec<(Removal, [bool; 3])> = Vec::new();
    let mut joined = false;
    for u in units {
        let Some(rule) = u.rule else {
            joined = false;
            continue;
        };
        match out.last_mut().filter(|_| joined) {
            Some((run, used)) => {
                run.to = u.to;
                run.turns += u64::from(u.is_turn);
                used[rule] = true;
            }
            None => {
                let mut used = [false; 3];
                used[rule] = true;
                let run = Removal {
                    from: u.from,
                    to: u.to,
                    turns: u64::from(u.is_turn),
                    reason: String::new(),
                };
                out.push((run, used));
            }
        }
        joined = true;
    }
    out.into_iter()
        .map(|(mut run, used)| {
            let names: Vec<&str> = (0..3)
                .filter(|&i| used[i])
                .map(|i| rules[i].as_str())
                .collect();
            run.reason = format!("retention: {}", names.join(", "));
            run
        })
        .collect()
}

/// The stored size of the tombstone record (or covered placeholder) at `seq` of `from..=to`,
/// without a reason (a run's reason is counted once, in [`plan`]).
fn tombstone_len(seq: u64, from: u64, to: u64, at_ms: i64) -> u64 {
    let reason = String::new();
    let body = EventBody::System {
        marker: SystemMarker::Tombstone {
            from,
            to,
            at_ms,
            reason,
        },
    };
    let json = serde_json::to_vec(&body).unwrap_or_default();
    let mut out = Vec::new();
    format::encode_record(&mut out, EventKind::System, 0, 0, seq, at_ms, &json, &[]);
    out.len() as u64
}

/// Now, in milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The size of the ledger file: its header and every record.
pub(crate) fn ledger_bytes<L: LedgerView + ?Sized>(ledger: &L) -> u64 {
    LOG_HEADER_LEN as u64
        + (1..=ledger.last_seq())
            .filter_map(|s| ledger.record_len(s))
            .sum::<u64>()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Plans the age rule at chosen "now"s: the stored times decide, not the clock.
    #[test]
    fn the_age_rule_goes_by_each_turns_newest_stored_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let mut conv = store.conversation("c").unwrap();
        for i in 0..4 {
            let turn = format!(r#"{{"user":"q{i}","assistant":"a{i}"}}"#);
            conv.commit_json(turn.as_bytes(), None).unwrap();
        }
        let events = conv.events(1..=8).unwrap();
        let newest = |turn: usize| events[turn * 2 + 1].ts_ms;
        let policy = RetentionPolicy {
            older_than: Some("1d".into()),
            ..Default::default()
        };
        let day = 86_400_000;
        // Just after the third turn's time plus a day: turns 1-3 are older than a day.
        let plan = plan(conv.ledger(), &policy, newest(2) + day + 1).unwrap();
        assert_eq!(plan.removals.len(), 1);
        let run = &plan.removals[0];
        assert!(run.from == 1 && run.turns >= 3, "{run:?}");
        assert_eq!(run.reason, "retention: older than 1d");
        let none = super::plan(conv.ledger(), &policy, newest(0) + day - 1).unwrap();
        assert!(none.removals.is_empty() || events[0].ts_ms < newest(0));
        let all = super::plan(conv.ledger(), &policy, newest(3) + day + 1).unwrap();
        assert_eq!((all.removals[0].from, all.removals[0].to), (1, 8));
        assert_eq!(all.removals[0].turns, 4);
    }
}
