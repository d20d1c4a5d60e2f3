//! [`TextCounts`]: the token counts of longer texts, remembered process-wide, so that a text
//! counted once (a stored message a client resends with every call, a turn projected again)
//! is not encoded again.
//!
//! A text's count under a tokenizer never changes, so an entry never goes stale. The key is
//! the whole text (compared byte for byte, never a hash of it): a hit returns exactly what
//! counting would. The cache is bounded by the bytes of the texts it holds: two generations,
//! each up to half the bound; a hit in the older one moves the entry to the newer one, and
//! when the newer one is full the older one is dropped and the newer one takes its place (the
//! texts used since the last turn-over stay).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::options::Tokenizer;

/// Texts shorter than this are counted each time: encoding them costs about what a lookup
/// does.
pub(crate) const MIN_CACHED_BYTES: usize = 128;
/// The bytes of text the process-wide cache holds at most (both generations).
pub(crate) const MAX_CACHE_BYTES: usize = 8 << 20;

/// Token counts keyed by tokenizer and text, within a bound on the text bytes held.
#[derive(Debug)]
pub(crate) struct TextCounts {
    max_bytes: usize,
    /// The generation entries are added to.
    newer: Generation,
    /// The generation before; dropped at the next turn-over.
    older: Generation,
}

#[derive(Debug, Default)]
struct Generation {
    counts: [HashMap<Box<str>, u64>; Tokenizer::ALL.len()],
    bytes: usize,
}

impl Generation {
    fn map(&mut self, tokenizer: Tokenizer) -> &mut HashMap<Box<str>, u64> {
        &mut self.counts[tokenizer as usize]
    }
}

impl TextCounts {
    /// An empty cache holding at most `max_bytes` of text.
    pub(crate) fn new(max_bytes: usize) -> TextCounts {
        TextCounts {
            max_bytes,
            newer: Generation::default(),
            older: Generation::default(),
        }
    }

    /// The count of `text` under `tokenizer`: remembered, or `count(tokenizer, text)` (then
    /// remembered when the text is at least [`MIN_CACHED_BYTES`] long and at most a quarter
    /// of the bound).
    pub(crate) fn get_or_count(
        cache: &Mutex<TextCounts>,
        tokenizer: Tokenizer,
        text: &str,
        count: impl FnOnce(Tokenizer, &str) -> u64,
    ) -> u64 {
        {
            let mut c = lock(cache);
            if text.len() < MIN_CACHED_BYTES || text.len() > c.max_bytes / 4 {
                drop(c);
                return count(tokenizer, text);
            }
            if let Some(n) = c.find(tokenizer, text) {
                return n;
            }
        }
        // Counted outside the lock: other threads look up meanwhile.
        let n = count(tokenizer, text);
        lock(cache).insert(tokenizer, text, n);
        n
    }

    /// The remembered count of `text`, moved to the newer generation if it was in the older.
    fn find(&mut self, tokenizer: Tokenizer, text: &str) -> Option<u64> {
        if let Some(n) = self.newer.map(tokenizer).get(text) {
            return Some(*n);
        }
        let (key, n) = self.older.map(tokenizer).remove_entry(text)?;
        self.older.bytes -= key.len();
        self.add(tokenizer, key, n);
        Some(n)
    }

    fn insert(&mut self, tokenizer: Tokenizer, text: &str, n: u64) {
        if !self.newer.map(tokenizer).contains_key(text) {
            self.add(tokenizer, text.into(), n);
        }
    }

    /// Adds an entry to the newer generation, turning over first if it would not fit.
    fn add(&mut self, tokenizer: Tokenizer, text: Box<str>, n: u64) {
        if self.newer.bytes + text.len() > self.max_bytes / 2 {
            self.older = std::mem::take(&mut self.newer);
        }
        self.newer.bytes += text.len();
        self.newer.map(tokenizer).insert(text, n);
    }

    /// The bytes of text held.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.newer.bytes + self.older.bytes
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
    SHARED.get_or_init(|| Mutex::new(TextCounts::new(MAX_CACHE_BYTES)))
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
            let cache = Mutex::new(TextCounts::new(4096));
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
            prop_assert!(lock(&cache).bytes() <= 4096);
        }
    }

    #[test]
    fn a_remembered_count_is_not_counted_again_and_the_bytes_stay_bounded() {
        let cache = Mutex::new(TextCounts::new(4000));
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
        assert_eq!(lock(&cache).bytes(), 2 * text.len());
        // Many distinct texts: the held bytes never pass the bound, and the newest stay.
        for i in 0..200 {
            let t = format!("{text}{i}");
            TextCounts::get_or_count(&cache, Tokenizer::O200k, &t, |_, _| i);
            assert!(lock(&cache).bytes() <= 4000);
        }
        let newest = format!("{text}199");
        assert_eq!(
            TextCounts::get_or_count(&cache, Tokenizer::O200k, &newest, |_, _| 0),
            199
        );
        // A text over a quarter of the bound is counted each time, never held.
        let long = "x".repeat(1001);
        TextCounts::get_or_count(&cache, Tokenizer::O200k, &long, |_, _| 5);
        assert_eq!(
            TextCounts::get_or_count(&cache, Tokenizer::O200k, &long, |_, _| 6),
            6
        );
    }
}
