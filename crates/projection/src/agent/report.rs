//! The report of an agent projection.

use super::context::{AgentLayout, Omitted, oldest_detail};
use super::entries::{Entry, Form};
use super::fit::Action;
use crate::budget::TierSums;
use crate::cache::SizeCache;
use crate::history::SeqRange;
use crate::json::escaped_len;
use crate::report::{Clip, Drop, RecallReport, Report, Size, Tier, TierSize, TurnCounts};

impl AgentLayout<'_, '_> {
    pub fn report(&self, cache: &mut SizeCache, o: Outcome<'_>) -> Report {
        let omitted = Omitted::of(o.entries);
        let notice = self.notice_line(omitted);
        let tiers = self.tiers(cache, &o, notice.as_deref());
        let drops = drops(o.entries, o.applied, o.notice_dropped, omitted);
        Report {
            turns: TurnCounts {
                total: o.turn_count,
                kept: o.turn_count,
                dropped: 0,
            },
            kept: o.kept,
            dropped: o.dropped,
            pinned: o.pinned,
            detail_start: oldest_detail(o.entries),
            tiers,
            clips: clips(o.entries, o.open_clips),
            drops,
            notice,
            recall: o.recall,
            ..self.budget.report(o.total, o.mandatory)
        }
    }

    /// Bytes and tokens per tier: the context's framing in the envelope, its entries counted
    /// one by one and added up per tier.
    fn tiers(&self, cache: &mut SizeCache, o: &Outcome<'_>, notice: Option<&str>) -> Vec<TierSize> {
        let tok = self.budget.counter;
        let mut sums = TierSums::new(tok);
        sums.push(Tier::System, self.system_cost, 1);
        sums.push(Tier::Pinned, self.pinned_cost, o.pinned.len());
        let base = self.budget.cost(&self.context_msgs(&[], &[]));
        sums.push(Tier::Envelope, base, 0);
        if let Some(text) = notice {
            sums.add_raw(
                Tier::Notice,
                2 + escaped_len(text) as i64,
                tok.text(text) as i64,
            );
        }
        for page in o.pages {
            sums.add_raw(
                Tier::Recalled,
                2 + escaped_len(page) as i64,
                tok.text(page) as i64,
            );
        }
        for e in o.entries.iter().filter(|e| e.form != Form::Dropped) {
            sums.add_raw(e.tier, e.bytes(), e.tokens(tok, cache));
        }
        sums.push(Tier::Input, self.input_cost, 1);
        merge_tiers(sums.finish(o.total))
    }
}

/// The clips of the entries sent clipped and of the open turn's results, by seq.
fn clips(entries: &[Entry], open_clips: Vec<Clip>) -> Vec<Clip> {
    let mut clips: Vec<Clip> = entries
        .iter()
        .filter(|e| e.form == Form::Clipped)
        .filter_map(|e| {
            let (_, chars, kept_chars) = e.clipped.as_ref()?;
            Some(Clip {
                seq: e.seq,
                chars: *chars,
                kept_chars: *kept_chars,
                recall: format!("recall seq={}", e.seq),
            })
        })
        .collect();
    clips.extend(open_clips);
    clips.sort_by_key(|c| c.seq);
    clips
}

/// The entries dropped, in the order they went, then the notice if it was left out for room.
fn drops(
    entries: &[Entry],
    applied: &[Action],
    notice_dropped: bool,
    omitted: Omitted,
) -> Vec<Drop> {
    let mut drops: Vec<Drop> = applied
        .iter()
        .filter_map(|a| match *a {
            Action::Drop(i, reason) => Some(Drop {
                tier: entries[i].tier,
                seqs: SeqRange::new(entries[i].seq, entries[i].seq),
                reason: reason.to_owned(),
            }),
            Action::Clip(_) => None,
        })
        .collect();
    if notice_dropped && omitted.count > 0 {
        drops.push(Drop {
            tier: Tier::Notice,
            seqs: SeqRange::new(omitted.first, omitted.last),
            reason: "no_room".into(),
        });
    }
    drops
}

/// What a fitted agent projection holds, for its report.
pub(super) struct Outcome<'a> {
    pub entries: &'a [Entry],
    pub applied: &'a [Action],
    pub pages: &'a [String],
    pub recall: RecallReport,
    /// Seqs of the pinned notes in the body.
    pub pinned: Vec<u64>,
    /// Seq ranges of the entries kept, and of those dropped.
    pub kept: Vec<SeqRange>,
    pub dropped: Vec<SeqRange>,
    pub turn_count: usize,
    pub mandatory: Size,
    pub total: Size,
    pub notice_dropped: bool,
    /// The open turn's results clipped to fit (docs/design.md#p11-the-agent-loop,
    /// docs/design.md#p12-room-is-used).
    pub open_clips: Vec<Clip>,
}

/// Merges repeated tiers (entries of one tier are interleaved in seq order) and puts the
/// context's own framing into the envelope.
fn merge_tiers(tiers: Vec<TierSize>) -> Vec<TierSize> {
    let mut out: Vec<TierSize> = Vec::new();
    for t in tiers {
        match out.iter_mut().find(|o| o.tier == t.tier) {
            Some(o) => {
                o.bytes += t.bytes;
                o.tokens += t.tokens;
                o.items += t.items;
            }
            None => out.push(t),
        }
    }
    if let Some(env) = out.iter_mut().find(|t| t.tier == Tier::Envelope) {
        env.items = 1;
    }
    out
}

/// The seq ranges of the entries kept and of those dropped (the status line has no seq).
pub(super) fn seq_ranges(entries: &[Entry]) -> (Vec<SeqRange>, Vec<SeqRange>) {
    let mut kept: Vec<u64> = Vec::new();
    let mut dropped: Vec<u64> = Vec::new();
    for e in entries.iter().filter(|e| e.seq > 0) {
        if e.form == Form::Dropped {
            dropped.push(e.seq)
        } else {
            kept.push(e.seq)
        }
    }
    (ranges(&kept), ranges(&dropped))
}

fn ranges(seqs: &[u64]) -> Vec<SeqRange> {
    let mut out: Vec<SeqRange> = Vec::new();
    for &s in seqs {
        match out.last_mut() {
            Some(r) if r.last + 1 == s => r.last = s,
            _ => out.push(SeqRange::new(s, s)),
        }
    }
    out
}
