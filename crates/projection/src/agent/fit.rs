//! Fitting the agent context: the optional steps in the drop order of
//! docs/design.md#p6-agent-tiers, applied until it fits.

use std::collections::HashSet;

use super::context::{AgentLayout, Omitted};
use super::entries::{Entry, Form};
use crate::cache::SizeCache;
use crate::error::Result;
use crate::json::escaped_len;
use crate::report::{Size, Tier};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    Clip(usize),
    Drop(usize, &'static str),
}

/// The optional steps, in the drop order of docs/design.md#p6-agent-tiers (recalled pages are added
/// last, so they go first).
pub(super) fn drop_order(entries: &[Entry]) -> Vec<Action> {
    let mut actions: Vec<Action> = Vec::new();
    let results = |tier: Tier| {
        entries
            .iter()
            .enumerate()
            .filter(move |(_, e)| e.tier == tier)
    };
    for (i, e) in results(Tier::Details).chain(results(Tier::LatestResult)) {
        if e.clipped.is_some() {
            actions.push(Action::Clip(i));
        }
    }
    actions.extend(results(Tier::Activity).map(|(i, _)| Action::Drop(i, "budget")));
    // Hash sets keep this linear in the number of results (thousands in long agent runs).
    let mut newer_sources: HashSet<&str> = HashSet::new();
    let mut duplicates = Vec::new();
    for (i, e) in entries.iter().enumerate().rev() {
        if !matches!(e.tier, Tier::Details | Tier::LatestResult) {
            continue;
        }
        let source = e.source.as_deref().unwrap_or_default();
        if !newer_sources.insert(source) && e.tier == Tier::Details {
            duplicates.push(i);
        }
    }
    duplicates.reverse();
    actions.extend(duplicates.iter().map(|&i| Action::Drop(i, "duplicate")));
    let duplicate: HashSet<usize> = duplicates.into_iter().collect();
    actions.extend(
        results(Tier::Details)
            .filter(|(i, _)| !duplicate.contains(i))
            .map(|(i, _)| Action::Drop(i, "budget")),
    );
    actions
}

fn apply(entries: &mut [Entry], action: Action) {
    match action {
        Action::Clip(i) => entries[i].form = Form::Clipped,
        Action::Drop(i, _) => entries[i].form = Form::Dropped,
    }
}

/// Applies actions in order until the body fits: first by exact bytes and estimated tokens,
/// then by exact tokens, taking back steps the exact count shows were not needed. Returns the
/// actions applied, or `None` if the body does not fit even after all of them.
pub(super) fn fit(
    layout: &AgentLayout<'_, '_>,
    entries: &mut [Entry],
    actions: &[Action],
    cache: &mut SizeCache,
) -> Result<Option<Vec<Action>>> {
    let budget = layout.budget;
    set_prefix(entries, actions, 0);
    let base = layout.exact(&[], &[]);
    let estimate_tokens = budget.req.max_tokens.is_some();
    let mut token_of = |e: &Entry| -> i64 {
        if estimate_tokens && e.form != Form::Dropped {
            e.tokens(budget.counter, cache) + 1
        } else {
            0
        }
    };
    let notice_size = |omitted: Omitted| -> (i64, i64) {
        layout.notice_line(omitted).map_or((0, 0), |text| {
            let tokens = if estimate_tokens {
                budget.counter.text(&text) as i64 + 1
            } else {
                0
            };
            (2 + escaped_len(&text) as i64, tokens)
        })
    };
    let mut bytes: i64 = base.bytes as i64 + entries.iter().map(Entry::bytes).sum::<i64>();
    let mut tokens: i64 = base.tokens as i64 + entries.iter().map(&mut token_of).sum::<i64>();
    let mut omitted = Omitted::default();
    let mut next = 0;
    let estimate = |b: i64, t: i64, omitted: Omitted| {
        let (nb, nt) = notice_size(omitted);
        Size {
            bytes: (b + nb).max(0) as u64,
            tokens: (t + nt).max(0) as u64,
        }
    };
    while next < actions.len() && !budget.fits(estimate(bytes, tokens, omitted)) {
        let i = action_index(actions[next]);
        let (b0, t0) = (entries[i].bytes(), token_of(&entries[i]));
        apply(entries, actions[next]);
        if let Action::Drop(..) = actions[next] {
            omitted.add(entries[i].seq);
        }
        bytes += entries[i].bytes() - b0;
        tokens += token_of(&entries[i]) - t0;
        next += 1;
    }
    if !estimate_tokens {
        // Bytes are exact.
        return Ok(budget
            .fits(estimate(bytes, tokens, omitted))
            .then(|| actions[..next].to_vec()));
    }
    // Tokens were estimated (entry by entry), so check them exactly: go on while the body does
    // not fit, then take back the steps it did not need.
    let fits_with = |entries: &mut [Entry], n: usize| {
        set_prefix(entries, actions, n);
        budget.fits(layout.exact(entries, &[]))
    };
    while !fits_with(entries, next) {
        if next == actions.len() {
            return Ok(None);
        }
        next += 1;
    }
    let fewest = fewest_fitting(next, |n| fits_with(entries, n));
    set_prefix(entries, actions, fewest);
    Ok(Some(actions[..fewest].to_vec()))
}

/// The smallest `n <= fits_at` for which `fits(n)` holds, given that `fits(fits_at)` does:
/// gallops down from `fits_at`, then bisects (a few exact counts, not one per step).
fn fewest_fitting(fits_at: usize, mut fits: impl FnMut(usize) -> bool) -> usize {
    let mut hi = fits_at;
    let mut step = 1;
    let mut lo = loop {
        let Some(candidate) = hi.checked_sub(step) else {
            break 0;
        };
        if !fits(candidate) {
            break candidate + 1;
        }
        hi = candidate;
        step *= 2;
    };
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    hi
}

/// Puts `entries` in the state after the first `n` actions (from all entries in full).
fn set_prefix(entries: &mut [Entry], actions: &[Action], n: usize) {
    for e in entries.iter_mut() {
        e.form = Form::Full;
    }
    for &action in &actions[..n] {
        apply(entries, action);
    }
}

fn action_index(action: Action) -> usize {
    match action {
        Action::Clip(i) | Action::Drop(i, _) => i,
    }
}
