//! [`TextCounts`]: the token counts of longer texts, remembered process-wide, so that a text
//! counted once (a stored message a client resends with every call, a turn projected again)
//! is not encoded again.
//!
//! A text's count under a tokenizer never changes, so an entry never goes stale. The key is
//! the text's SHA-256, never the text: the cache holds no stored text, so erasing a message
//! leaves none of it here, and a collision (which would give another text's count) would
//! take a break of SHA-256. The cache is bounded by its number of entries: two generations,
//! each up to half the bound; a hit in the older one moves the entry to the newer one, and
//! when the newer one is full the older one is dropped and the newer one takes its place (the
//! texts used since the last turn-over stay).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use sha2::{Digest, Sha256};

use crate::options::Tokenizer;

/// Texts shorter than this are counted each time: encoding them costs about what hashing
/// and a lookup do.
pub(crate) const MIN_CACHED_BYTES: usize = 128;
/// The entries the process-wide cache holds at most (both generations): about 8 MiB.
pub(crate) const MAX_CACHED_TEXTS: usize = 1 << 17;

/// A text's key: its SHA-256.
type Key = [u8; 32];

/// Token counts keyed by tokenizer and text digest, within a bound on the entries held.
#[derive(Debug)]
pub(crate) struct TextCounts {
    max_entries: usize,
    /// The generation entries are added to.
    newer: Generation,
    /// The generation before; dropped at the next turn-over.
    older: Generation,
}

#[derive(Debug, Default)]
struct Generation {
    counts: [HashMap<Key, u64>; Tokenizer::ALL.len()],
    entries: usize,
}

impl Generation {
    fn map(&mut self, tokenizer: Tokenizer) -> &mut HashMap<Key, u64> {
        &mut self.counts[tokenizer as usize]
    }
}

impl TextCounts {
    /// An empty cache holding at most `max_entries` counts.
    pub(crate) fn new(max_entries: usize) -> TextCounts {
        TextCounts {
            max_entries,
            newer: Generation::default(),
            older: Generation::default(),
        }
    }

    /// The count of `text` under `tokenizer`: remembered, or `count(tokenizer, text)` (then
    /// remembered when the text is at least [`MIN_CACHED_BYTES`] long).
    pub(crate) fn get_or_count(
        cache: &Mutex<TextCounts>,
        tokenizer: Tokenizer,
        text: &str,
        count: impl FnOnce(Tokenizer, &str) -> u64,
    ) -> u64 {
        if text.len() < MIN_CACHED_BYTES {
            return count(tokenizer, text);
        }
        let key: Key = Sha256::digest(text.as_bytes()).into();
        if let Some(n) = lock(cache).find(tokenizer, &key) {
            return n;
        }
        // Counted outside the lock: other threads look up meanwhile.
        let n = count(tokenizer, text);
        lock(cache).insert(tokenizer, key, n);
        n
    }

    /// The remembered count of `key`, moved to the newer generation if it was in the older.
    fn find(&mut self, tokenizer: Tokenizer, key: &Key) -> Option<u64> {
        if let Some(n) = self.newer.map(tokenizer).get(key) {
            return Some(*n);
        }
        let n = self.older.map(tokenizer).remove(key)?;
        self.older.entries -= 1;
        self.add(tokenizer, *key, n);
        Some(n)
    }

    fn insert(&mut self, tokenizer: Tokenizer, key: Key, n: u64) {
        if !self.newer.map(tokenizer).contains_key(&key) {
            self.add(tokenizer, key, n);
        }
    }

    /// Adds an entry to the newer generation, turning over first if it would not fit.
    fn add(&mut self, tokenizer: Tokenizer, key: Key, n: u64) {
        if self.newer.entries + 1 > self.max_entries / 2 {
            self.older = std::mem::take(&mut self.newer);
        }
        self.newer.entries += 1;
        self.newer.map(tokenizer).insert(key, n);
    }

    /// The entries held.
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.newer.entries + self.older.entries
    }
}

fn lock(cache: &Mutex<TextCounts>) -> std::sync::MutexGuard<'_, TextCounts> {
    cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The process-wide cache [`crate::tokens::text_tokens`] counts through.
pub(crate) fn shared() -> &'static Mutex<TextCounts> {
    static SHARED: OnceLock<Mutex<TextCounts>> = OnceLock::new();
    SHARED.get_or_init(|| Mutex::new(TextCounts::new(MAX_CACHED_TEXTS)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn counted(cache: &Mutex<TextCounts>, tokenizer: Tokenizer, text: &str) -> u64 {
        TextCounts::get_or_count(cache, tokenizer, text, crate::bpe::count)
    }

    proptest! {
        /// Counting through the cache, cold or warm, gives what the tokenizer gives.
        #[test]
        fn cached_counts_are_the_tokenizer_counts(
            texts in prop::collection::vec("(\\PC|[ \n]){0,400}", 1..12),
        ) {
            let cache = Mutex::new(TextCounts::new(8));
            for _ in 0..2 {
                for text in &texts {
                    for tokenizer in Tokenizer::ALL {
                        prop_assert_eq!(
                            counted(&cache, tokenizer, text),
                            crate::bpe::count(tokenizer, text)
                        );
                    }
                }
            }
            prop_assert!(lock(&cache).entries() <= 8);
        }
    }

    #[test]
    fn a_remembered_count_is_not_counted_again_and_the_entries_stay_bounded() {
        let cache = Mutex::new(TextCounts::new(10));
        let text =
            "a line of text long enough to be remembered by the token count cache. ".repeat(3);
        let first = TextCounts::get_or_count(&cache, Tokenizer::O200k, &text, |_, _| 7);
        let again = TextCounts::get_or_count(&cache, Tokenizer::O200k, &text, |_, _| 8);
        assert_eq!((first, again), (7, 7));
        // Another tokenizer is another count.
        let other = TextCounts::get_or_count(&cache, Tokenizer::Cl100k, &text, |_, _| 9);
        assert_eq!(other, 9);
        // Short texts are never held.
        TextCounts::get_or_count(&cache, Tokenizer::O200k, "short", |_, _| 1);
        assert_eq!(lock(&cache).entries(), 2);
        // Many distinct texts: the entries never pass the bound, and the newest stay.
        for i in 0..200 {
            let t = format!("{text}{i}");
            TextCounts::get_or_count(&cache, Tokenizer::O200k, &t, |_, _| i);
            assert!(lock(&cache).entries() <= 10);
        }
        let newest = format!("{text}199");
        assert_eq!(
            TextCounts::get_or_count(&cache, Tokenizer::O200k, &newest, |_, _| 0),
            199
        );
        // An evicted text is counted again.
        assert_eq!(
            TextCounts::get_or_count(&cache, Tokenizer::O200k, &format!("{text}0"), |_, _| 42),
            42
        );
    }
}
