//! OpenAI's byte-pair encodings (`o200k_base`, `cl100k_base`) counted from rank tables built
//! at compile time (`build.rs`), so a fresh process pays no vocabulary construction: the
//! tables are static bytes in the binary, paged in as lookups touch them. Only the
//! pre-tokenizing regex is built, once per encoding, on first use (a few milliseconds).
//!
//! The counts equal `tiktoken`'s `encode_ordinary(text).len()`: the same pre-tokenizer
//! (OpenAI's patterns, with the negative look-ahead `\s+(?!\S)` emulated as in the
//! `bpe-openai` crate: a pattern `\s+\s` whose last character is given back), and the same
//! merge rule (repeatedly merge the adjacent pair whose bytes have the lowest rank, leftmost
//! first), ported from `tiktoken`'s `byte_pair_merge`. `tests/openai_cookbook.rs` and the
//! property tests check them against published and `tiktoken-rs` counts.

use std::collections::BinaryHeap;
use std::sync::OnceLock;

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::util::pool::Pool;
use regex_automata::{Anchored, Input};

use crate::options::Tokenizer;

type Rank = u32;

/// One encoding's static tables (see `build.rs` for their layout).
struct Tables {
    bytes: &'static [u8],
    offsets: &'static [u8],
    table: &'static [u8],
}

static O200K: Tables = Tables {
    bytes: include_bytes!(concat!(env!("OUT_DIR"), "/o200k.bytes")),
    offsets: include_bytes!(concat!(env!("OUT_DIR"), "/o200k.offsets")),
    table: include_bytes!(concat!(env!("OUT_DIR"), "/o200k.table")),
};

static CL100K: Tables = Tables {
    bytes: include_bytes!(concat!(env!("OUT_DIR"), "/cl100k.bytes")),
    offsets: include_bytes!(concat!(env!("OUT_DIR"), "/cl100k.offsets")),
    table: include_bytes!(concat!(env!("OUT_DIR"), "/cl100k.table")),
};

fn u32_at(bytes: &[u8], index: usize) -> u32 {
    let mut word = [0u8; 4];
    if let Some(b) = bytes.get(index * 4..index * 4 + 4) {
        word.copy_from_slice(b);
    }
    u32::from_le_bytes(word)
}

/// The hash `build.rs` placed each token with (FNV-1a, 64 bits).
fn slot_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Tables {
    fn token(&self, rank: Rank) -> &'static [u8] {
        let start = u32_at(self.offsets, rank as usize) as usize;
        let end = u32_at(self.offsets, rank as usize + 1) as usize;
        self.bytes.get(start..end).unwrap_or_default()
    }

    /// The rank of the token spelled `bytes`, if the vocabulary has one.
    fn rank(&self, bytes: &[u8]) -> Option<Rank> {
        let slots = self.table.len() / 4;
        let mut slot = (slot_hash(bytes) as usize) & (slots - 1);
        loop {
            let entry = u32_at(self.table, slot);
            if entry == 0 {
                return None;
            }
            if self.token(entry - 1) == bytes {
                return Some(entry - 1);
            }
            slot = (slot + 1) & (slots - 1);
        }
    }

    fn rank_or_max(&self, bytes: &[u8]) -> Rank {
        self.rank(bytes).unwrap_or(Rank::MAX)
    }

    /// Tokens of one pre-tokenized piece.
    fn piece_tokens(&self, piece: &[u8]) -> usize {
        if piece.len() <= 1 || self.rank(piece).is_some() {
            piece.len().min(1)
        } else if piece.len() < 100 {
            self.merge_small(piece)
        } else {
            self.merge_large(piece)
        }
    }

    /// `tiktoken`'s `_byte_pair_merge`: O(n·m) over a vector of parts, for short pieces.
    fn merge_small(&self, piece: &[u8]) -> usize {
        let mut parts: Vec<(usize, Rank)> = Vec::with_capacity(piece.len() + 1);
        let mut min_rank: (Rank, usize) = (Rank::MAX, usize::MAX);
        for i in 0..piece.len() - 1 {
            let rank = self.rank_or_max(&piece[i..i + 2]);
            if rank < min_rank.0 {
                min_rank = (rank, i);
            }
            parts.push((i, rank));
        }
        parts.push((piece.len() - 1, Rank::MAX));
        parts.push((piece.len(), Rank::MAX));
        let get_rank = |parts: &Vec<(usize, Rank)>, i: usize| {
            if i + 3 < parts.len() {
                self.rank_or_max(&piece[parts[i].0..parts[i + 3].0])
            } else {
                Rank::MAX
            }
        };
        while min_rank.0 != Rank::MAX {
            let i = min_rank.1;
            if i > 0 {
                parts[i - 1].1 = get_rank(&parts, i - 1);
            }
            parts[i].1 = get_rank(&parts, i);
            parts.remove(i + 1);
            min_rank = (Rank::MAX, usize::MAX);
            for (i, &(_, rank)) in parts[..parts.len() - 1].iter().enumerate() {
                if rank < min_rank.0 {
                    min_rank = (rank, i);
                }
            }
        }
        parts.len() - 1
    }

    /// `tiktoken`'s `_byte_pair_merge_large`: the same merges with a heap, for long pieces.
    fn merge_large(&self, piece: &[u8]) -> usize {
        let mut state = Vec::with_capacity(piece.len());
        state.push(State {
            prev: usize::MAX,
            end: 1,
            next_end: 2,
            next_rank: Rank::MAX,
        });
        let mut heap = BinaryHeap::with_capacity(piece.len());
        for i in 0..piece.len() - 1 {
            if let Some(rank) = self.rank(&piece[i..i + 2]) {
                heap.push(Merge { start: i, rank });
                state[i].next_rank = rank;
            }
            state.push(State {
                prev: i,
                end: i + 2,
                next_end: i + 3,
                next_rank: Rank::MAX,
            });
        }
        while let Some(left) = heap.pop() {
            if left.rank == Rank::MAX {
                break;
            }
            if left.rank != state[left.start].next_rank {
                continue;
            }
            let left_start = left.start;
            let right_start = state[left_start].end;
            let right_end = state[left_start].next_end;
            let right_next_end = state[right_start].next_end;
            state[left_start].end = right_end;
            self.potential_merge(piece, &mut state, &mut heap, left_start, right_next_end);
            if right_end < state.len() {
                state[right_end].prev = left_start;
            }
            if left_start > 0 {
                let prev_start = state[left_start].prev;
                self.potential_merge(piece, &mut state, &mut heap, prev_start, right_end);
            }
            state[right_start].next_rank = Rank::MAX;
        }
        let mut count = 0;
        let mut i = 0;
        while i < state.len() {
            count += 1;
            i = state[i].end;
        }
        count
    }

    /// Makes the part at `start` end its next merge at `next_end`, and offers that merge to
    /// the heap if the vocabulary has its bytes.
    fn potential_merge(
        &self,
        piece: &[u8],
        state: &mut [State],
        heap: &mut BinaryHeap<Merge>,
        start: usize,
        next_end: usize,
    ) {
        state[start].next_end = next_end;
        state[start].next_rank = Rank::MAX;
        if next_end <= piece.len()
            && let Some(rank) = self.rank(&piece[start..next_end])
        {
            heap.push(Merge { start, rank });
            state[start].next_rank = rank;
        }
    }
}

/// One part of a piece in [`Tables::merge_large`], indexed by where it starts: the part
/// before it, where it ends, and where the part it would become by merging with the next one
/// ends, with that merge's rank (`Rank::MAX`: none).
struct State {
    prev: usize,
    end: usize,
    next_end: usize,
    next_rank: Rank,
}

/// A merge of the part at `start` with the next one; the heap pops the lowest rank first,
/// the leftmost first among equal ranks.
#[derive(PartialEq, Eq)]
struct Merge {
    start: usize,
    rank: Rank,
}

impl Ord for Merge {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.start.cmp(&self.start))
    }
}

impl PartialOrd for Merge {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A lazy DFA's search state, one per thread using it.
type CachePool = Pool<Cache, Box<dyn Fn() -> Cache + Send + Sync>>;

/// OpenAI's pre-tokenizer: the text is split into pieces, each encoded on its own.
///
/// Each piece is the leftmost-first match anchored where the last one ended, so a forward
/// lazy DFA finds it alone (its end and pattern are all a piece needs). Only the forward NFA
/// is compiled (a general regex would also compile a reverse one, and more engines, to find
/// where matches start): this is the cost of the first count in a process.
struct Pretokenizer {
    dfa: DFA,
    caches: CachePool,
    /// Per pattern: whether its last character is a look-ahead to give back.
    lookahead: [bool; 3],
}

impl Pretokenizer {
    fn new(tokenizer: Tokenizer) -> Option<Pretokenizer> {
        let first = match tokenizer {
            Tokenizer::Cl100k => "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+$".to_owned(),
            Tokenizer::O200k => [
                "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
                "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
                "\\p{N}{1,3}",
                " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*",
                "\\s*[\\r\\n]+",
                "\\s+$",
            ]
            .join("|"),
        };
        let dfa = DFA::new_many(&[first.as_str(), "\\s+\\s", "\\s+"]).ok()?;
        let for_caches = dfa.clone();
        Some(Pretokenizer {
            dfa,
            caches: Pool::new(Box::new(move || for_caches.create_cache())),
            lookahead: [false, true, false],
        })
    }

    /// Calls `f` with each piece of `text`, in order.
    fn for_each_piece(&self, text: &str, mut f: impl FnMut(&str)) {
        let mut cache = self.caches.get();
        let mut last = 0;
        while last < text.len() {
            let input = Input::new(&text[last..]).anchored(Anchored::Yes);
            let Ok(Some(m)) = self.dfa.try_search_fwd(&mut cache, &input) else {
                // Every character matches one of the patterns, and the DFA never gives up (no
                // quit bytes, no cache-clear limit); never reached. Count the rest as one
                // piece rather than loop.
                f(&text[last..]);
                return;
            };
            let mut end = last + m.offset();
            if self.lookahead[m.pattern().as_usize()]
                && let Some(c) = text[last..end].chars().next_back()
            {
                end -= c.len_utf8();
            }
            if end <= last {
                f(&text[last..]);
                return;
            }
            f(&text[last..end]);
            last = end;
        }
    }
}

fn pretokenizer(tokenizer: Tokenizer) -> Option<&'static Pretokenizer> {
    static O200K_PRE: OnceLock<Option<Pretokenizer>> = OnceLock::new();
    static CL100K_PRE: OnceLock<Option<Pretokenizer>> = OnceLock::new();
    let cell = match tokenizer {
        Tokenizer::O200k => &O200K_PRE,
        Tokenizer::Cl100k => &CL100K_PRE,
    };
    cell.get_or_init(|| Pretokenizer::new(tokenizer)).as_ref()
}

/// The number of tokens of `text`, encoded as ordinary text (what `tiktoken`'s
/// `encode_ordinary(text).len()` returns).
pub(crate) fn count(tokenizer: Tokenizer, text: &str) -> u64 {
    let tables = match tokenizer {
        Tokenizer::O200k => &O200K,
        Tokenizer::Cl100k => &CL100K,
    };
    let Some(pre) = pretokenizer(tokenizer) else {
        // The patterns are constants that compile; if they ever did not, fall back to an
        // upper bound rather than panic: one token per byte.
        return text.len() as u64;
    };
    let mut total = 0;
    pre.for_each_piece(text, |piece| {
        total += tables.piece_tokens(piece.as_bytes()) as u64;
    });
    total
}
