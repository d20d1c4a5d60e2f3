//! Room is used in the agent context (SPEC P12): once the context is fitted, the room left is
//! spent on its tool results, newest first.
//!
//! Each kept result (the latest, then older detailed results, newest first) is tried with its
//! whole output — read from its artifact when it has one, else its stored text — and takes it
//! if the body still fits; else it takes the longest head/tail excerpt of that output that fits
//! (marked `[… N chars clipped; recall seq=Q]`), when that is longer than what it had. So a
//! result is sent clipped only when its whole output would not fit. The room held back for
//! recalled pages stays free.
//!
//! Bytes are added up exactly; under a token budget a candidate whose estimate (the context's
//! exact count, plus the change in the entry's own count) exceeds the limit by more than
//! [`TOKEN_SLACK`] is not counted exactly, every other one is.

use std::collections::HashMap;

use ctxlog_event::{Event, EventBody};

use super::context::AgentLayout;
use super::entries::{Entry, Form, result_identity};
use crate::error::Result;
use crate::expand::excerpt;
use crate::history::{History, read};
use crate::json::escaped_len;
use crate::report::{Size, Tier};

/// Room (bytes) below which a longer excerpt is not looked for in an unread artifact.
const SPENT_BYTES: u64 = 64;

/// How far an entry's own token count may be off its share of the context's count (the
/// tokenizer may join a few characters across the newline between entries).
const TOKEN_SLACK: u64 = 32;

/// Grows the kept results of `entries` (built from `events`) while the body fits.
pub(super) fn grow_results<H: History + ?Sized>(
    layout: &AgentLayout<'_, '_>,
    history: &H,
    events: &[Event],
    entries: &mut [Entry],
) -> Result<()> {
    let budget = layout.budget;
    let tokens_counted = budget.req.max_tokens.is_some();
    let by_seq: HashMap<u64, &Event> = events.iter().map(|e| (e.seq, e)).collect();
    let mut size = layout.exact(entries, &[]);
    let order: Vec<usize> = (0..entries.len())
        .rev()
        .filter(|&i| {
            matches!(entries[i].tier, Tier::LatestResult | Tier::Details)
                && entries[i].form != Form::Dropped
        })
        .collect();
    for i in order {
        let Some(&event) = by_seq.get(&entries[i].seq) else {
            continue;
        };
        let EventBody::ToolResult { text, artifact, .. } = &event.body else {
            continue;
        };
        let current = entries[i].text().unwrap_or_default().to_owned();
        let current_bytes = entries[i].bytes() as u64;
        let identity = result_identity(event);
        // An artifact's output is at least its byte length: once the room left is spent, one
        // that cannot fit whole is not read (in a long history, most older results).
        if let Some(a) = artifact {
            let least = 4 + identity.len() as u64 + a.bytes;
            let bytes = (size.bytes + least).saturating_sub(current_bytes);
            let spent = !budget.fits(Size {
                bytes: size.bytes + SPENT_BYTES,
                tokens: 0,
            });
            if spent && !budget.fits(Size { bytes, tokens: 0 }) {
                continue;
            }
        }
        let output = match read(history.artifact_text(event))? {
            Some(whole) => whole,
            None => text.clone(),
        };
        let whole = format!("{identity}:\n{output}");
        if whole == current {
            continue;
        }
        let current_tokens = if tokens_counted {
            budget.counter.text(&current)
        } else {
            0
        };
        let seq = entries[i].seq;
        let chars = output.chars().count();
        // The candidate's body size if it fits, trying the entry with `candidate` in place.
        let fits = |entries: &mut [Entry], candidate: &str| -> Option<Size> {
            let bytes = (size.bytes + 2 + escaped_len(candidate)).saturating_sub(current_bytes);
            if !budget.fits(Size { bytes, tokens: 0 }) {
                return None;
            }
            if !tokens_counted {
                // Bytes add up exactly: no need to render the body.
                return Some(Size {
                    bytes,
                    tokens: size.tokens,
                });
            }
            {
                let estimate =
                    (size.tokens + budget.counter.text(candidate)).saturating_sub(current_tokens);
                let least = Size {
                    bytes,
                    tokens: estimate.saturating_sub(TOKEN_SLACK),
                };
                if !budget.fits(least) {
                    return None;
                }
            }
            let saved = entries[i].clone();
            set(&mut entries[i], candidate.to_owned(), None);
            let exact = layout.exact(entries, &[]);
            entries[i] = saved;
            budget.fits(exact).then_some(exact)
        };
        if let Some(new) = fits(entries, &whole) {
            set(&mut entries[i], whole, None);
            size = new;
            continue;
        }
        // The longest excerpt that fits, if it keeps more than the entry has now.
        let had = match (&entries[i].form, &entries[i].clipped) {
            (Form::Clipped, Some((_, _, kept))) => *kept as usize,
            _ => text.chars().count(),
        };
        if had + 1 >= chars {
            continue;
        }
        let candidate =
            |keep: usize| format!("{identity}:\n{}", excerpt(&output, chars, keep, seq));
        let Some(mut best) = fits(entries, &candidate(had + 1)).map(|s| (had + 1, s)) else {
            continue;
        };
        let (mut lo, mut hi) = (had + 1, chars - 1);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            match fits(entries, &candidate(mid)) {
                Some(s) => {
                    lo = mid;
                    best = (mid, s);
                }
                None => hi = mid - 1,
            }
        }
        let (kept, new) = best;
        set(
            &mut entries[i],
            candidate(kept),
            Some((chars as u64, kept as u64)),
        );
        size = new;
    }
    Ok(())
}

/// Puts `text` in the entry: in full, or as an excerpt keeping `clip.1` of `clip.0` characters.
fn set(entry: &mut Entry, text: String, clip: Option<(u64, u64)>) {
    entry.uncached = true;
    match clip {
        None => {
            entry.full = text;
            entry.form = Form::Full;
        }
        Some((chars, kept)) => {
            entry.clipped = Some((text, chars, kept));
            entry.form = Form::Clipped;
        }
    }
}
