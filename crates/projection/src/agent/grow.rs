//! Room is used in the agent context (docs/design.md#p12-room-is-used): once the context is fitted,
//! the room left is spent on its tool results, newest first.
//!
//! Each kept result (the latest, then older detailed results, newest first) is tried with its
//! whole output — read from its artifact when it has one, else its stored text — and takes it
//! if the body still fits; else it takes the longest head/tail excerpt of that output that fits
//! (marked `[… N chars clipped from seq=Q]`), when that is longer than what it had. So a
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
use crate::expand::{excerpt, longest_fitting};
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
    let by_seq: HashMap<u64, &Event> = events.iter().map(|e| (e.seq, e)).collect();
    let mut growth = Growth {
        layout,
        tokens_counted: layout.budget.req.max_tokens.is_some(),
        size: layout.exact(entries, &[]),
    };
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
        growth.grow(history, event, entries, i)?;
    }
    Ok(())
}

/// The body while its results grow: its layout, and its size with the entries as they are.
struct Growth<'l, 'c, 'r> {
    layout: &'l AgentLayout<'c, 'r>,
    /// Whether tokens are counted (only under a token budget).
    tokens_counted: bool,
    size: Size,
}

/// A kept result being grown: its entry, what that entry holds now, and what it may grow to.
struct Growing<'e> {
    /// The entry's index and seq.
    i: usize,
    seq: u64,
    /// The entry's bytes and tokens now (tokens only when counted).
    bytes: u64,
    tokens: u64,
    /// The result's identity line.
    identity: String,
    /// The result's whole output: its artifact's text, else its stored text.
    output: String,
    /// Its text as the event stores it.
    stored: &'e str,
}

impl Growth<'_, '_, '_> {
    /// Grows the entry `i` of the result `event`: to its whole output if the body still fits,
    /// else to the longest excerpt of it that fits when that keeps more than the entry has.
    fn grow<H: History + ?Sized>(
        &mut self,
        history: &H,
        event: &Event,
        entries: &mut [Entry],
        i: usize,
    ) -> Result<()> {
        let EventBody::ToolResult { text, artifact, .. } = &event.body else {
            return Ok(());
        };
        let current = entries[i].text().unwrap_or_default().to_owned();
        let bytes = entries[i].bytes() as u64;
        let identity = result_identity(event, self.layout.budget.req.offers_recall_tool());
        if let Some(a) = artifact
            && self.cannot_fit_unread(&identity, a.bytes, bytes)
        {
            return Ok(());
        }
        let output = match read(history.artifact_text(event))? {
            Some(whole) => whole,
            None => text.clone(),
        };
        let whole = format!("{identity}:\n{output}");
        if whole == current {
            return Ok(());
        }
        let tokens = if self.tokens_counted {
            self.layout.budget.counter.text(&current)
        } else {
            0
        };
        let result = Growing {
            i,
            seq: entries[i].seq,
            bytes,
            tokens,
            identity,
            output,
            stored: text,
        };
        if let Some(new) = self.fits(entries, &result, &whole) {
            set(&mut entries[i], whole, None);
            self.size = new;
            return Ok(());
        }
        self.grow_excerpt(entries, &result);
        Ok(())
    }

    /// An artifact's output is at least its byte length: once the room left is spent, one
    /// that cannot fit whole is not read (in a long history, most older results).
    fn cannot_fit_unread(&self, identity: &str, artifact_bytes: u64, current_bytes: u64) -> bool {
        let budget = self.layout.budget;
        let least = 4 + identity.len() as u64 + artifact_bytes;
        let bytes = (self.size.bytes + least).saturating_sub(current_bytes);
        let spent = !budget.fits(Size {
            bytes: self.size.bytes + SPENT_BYTES,
            tokens: 0,
        });
        spent && !budget.fits(Size { bytes, tokens: 0 })
    }

    /// The longest excerpt of the result's output that fits, if it keeps more than the entry
    /// has now.
    fn grow_excerpt(&mut self, entries: &mut [Entry], result: &Growing<'_>) {
        let had = match (&entries[result.i].form, &entries[result.i].clipped) {
            (Form::Clipped, Some((_, _, kept))) => *kept as usize,
            _ => result.stored.chars().count(),
        };
        let chars = result.output.chars().count();
        if had + 1 >= chars {
            return;
        }
        let candidate = |keep: usize| {
            let tool = self.layout.budget.req.offers_recall_tool();
            let excerpt = excerpt(&result.output, chars, keep, result.seq, tool);
            format!("{}:\n{excerpt}", result.identity)
        };
        let Some(first) = self.fits(entries, result, &candidate(had + 1)) else {
            return;
        };
        let (kept, best) = longest_fitting((had + 1, chars - 1), Some(first), |keep| {
            self.fits(entries, result, &candidate(keep))
        });
        if let Some(new) = best {
            set(
                &mut entries[result.i],
                candidate(kept),
                Some((chars as u64, kept as u64)),
            );
            self.size = new;
        }
    }

    /// The body's size with `candidate` as the result's entry, if it fits: bytes added up,
    /// tokens (when counted) estimated first and counted exactly only if the estimate is
    /// within [`TOKEN_SLACK`] of the limit.
    fn fits(&self, entries: &mut [Entry], result: &Growing<'_>, candidate: &str) -> Option<Size> {
        let budget = self.layout.budget;
        let bytes = (self.size.bytes + 2 + escaped_len(candidate)).saturating_sub(result.bytes);
        if !budget.fits(Size { bytes, tokens: 0 }) {
            return None;
        }
        if !self.tokens_counted {
            // Bytes add up exactly: no need to render the body.
            return Some(Size {
                bytes,
                tokens: self.size.tokens,
            });
        }
        let estimate =
            (self.size.tokens + budget.counter.text(candidate)).saturating_sub(result.tokens);
        let least = Size {
            bytes,
            tokens: estimate.saturating_sub(TOKEN_SLACK),
        };
        if !budget.fits(least) {
            return None;
        }
        let saved = entries[result.i].clone();
        set(&mut entries[result.i], candidate.to_owned(), None);
        let exact = self.layout.exact(entries, &[]);
        entries[result.i] = saved;
        budget.fits(exact).then_some(exact)
    }
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
