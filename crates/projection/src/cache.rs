//! [`SizeCache`]: serialized sizes and token counts computed once and reused (SPEC P9).

use std::collections::HashMap;

use crate::history::SeqRange;
use crate::options::{Tokenizer, WireFormat};
use crate::wire::Cost;

/// Sizes of rendered history units (a turn, or the preamble), kept by the caller between
/// projections so that each unit is serialized and tokenized once.
///
/// An entry is keyed by the unit's seq range, the wire format and the tokenizer, and holds the
/// unit's exact byte length and token count as rendered in a body. Selection uses only these
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
    hits: u64,
    misses: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    seqs: SeqRange,
    format: WireFormat,
    tokenizer: Tokenizer,
}

impl SizeCache {
    /// An empty cache.
    pub fn new() -> SizeCache {
        SizeCache::default()
    }

    /// How many units have sizes stored.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets every size (after erasure, compaction or import rewrote stored events).
    pub fn clear(&mut self) {
        self.entries.clear();
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
        tokenizer: Tokenizer,
    ) -> Option<Cost> {
        let found = self
            .entries
            .get(&Key {
                seqs,
                format,
                tokenizer,
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
        tokenizer: Tokenizer,
        cost: Cost,
    ) {
        self.entries.insert(
            Key {
                seqs,
                format,
                tokenizer,
            },
            cost,
        );
    }
}
