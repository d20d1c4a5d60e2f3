//! [`SizeCache`]: serialized sizes and token counts computed once and reused
//! (docs/design.md#p9-cost).

use std::collections::HashMap;

use crate::budget::Cost;
use crate::history::SeqRange;
use crate::options::{Tokenizer, WireFormat};
use crate::tokens::Counter;

/// Sizes of rendered history units (a turn, or the preamble), kept by the caller between
/// projections so that each unit is serialized and tokenized once.
///
/// An entry is keyed by the unit's seq range, the wire format, the tokenizer (or that no
/// tokens were counted) and whether the recall tool is offered (a result's header names it
/// only then), and holds the unit's exact byte length and token count as rendered
/// in a body. Selection uses only these
/// figures: with a warm cache a projection loads and renders just the turns that go into the
/// body, so its cost is proportional to the window, not to the history.
///
/// Keep one cache per conversation. Seqs are never reused, and a turn that grows gets a new
/// key, so entries never go stale through appends; call [`clear`](Self::clear) after an
/// operation that rewrites stored events in place (erasure, compaction, import).
///
/// ```
/// let mut cache = ctxlog_projection::SizeCache::new();
/// assert!(cache.is_empty());
/// cache.clear();
/// ```
#[derive(Clone, Debug, Default)]
pub struct SizeCache {
    entries: HashMap<Key, Cost>,
    /// Token counts of agent-context entries: (seq, entry variant, tokenizer).
    entry_tokens: HashMap<(u64, u8, Tokenizer), u64>,
    hits: u64,
    misses: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    seqs: SeqRange,
    format: WireFormat,
    counter: Counter,
    recall_tool: bool,
}

impl SizeCache {
    /// An empty cache.
    pub fn new() -> SizeCache {
        SizeCache::default()
    }

    /// How many sizes are stored.
    pub fn len(&self) -> usize {
        self.entries.len() + self.entry_tokens.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every size (after erasure, compaction or import rewrote stored events).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.entry_tokens.clear();
    }

    /// How many unit sizes were found in the cache since it was created.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// How many unit sizes had to be computed (rendering and tokenizing the unit).
    pub fn misses(&self) -> u64 {
        self.misses
    }

    pub(crate) fn get(
        &mut self,
        seqs: SeqRange,
        format: WireFormat,
        counter: Counter,
        recall_tool: bool,
    ) -> Option<Cost> {
        let found = self
            .entries
            .get(&Key {
                seqs,
                format,
                counter,
                recall_tool,
            })
            .copied();
        if found.is_some() {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
        found
    }

    pub(crate) fn insert(
        &mut self,
        seqs: SeqRange,
        format: WireFormat,
        counter: Counter,
        recall_tool: bool,
        cost: Cost,
    ) {
        self.entries.insert(
            Key {
                seqs,
                format,
                counter,
                recall_tool,
            },
            cost,
        );
    }

    /// The token count of an agent-context entry, computed with `compute` on a miss.
    pub(crate) fn entry_tokens(
        &mut self,
        key: (u64, u8, Tokenizer),
        compute: impl FnOnce() -> u64,
    ) -> u64 {
        *self.entry_tokens.entry(key).or_insert_with(compute)
    }
}
