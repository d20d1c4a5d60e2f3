//! The store's places index: where each stored event a client sends back is, so a client
//! that dropped its own oldest messages is recognised again by any process or replica over
//! the store ([`Backend::places_of`](crate::Backend::places_of)).
//!
//! It is disposable: every row derives from the ledgers and can be rebuilt from them. Each
//! conversation has a mark ([`PlaceMark`]): how far its events are indexed. A writer reads
//! the mark, reads the events committed after it, and writes their places only if the mark
//! is still the one it read ([`Backend::put_places`](crate::Backend::put_places)), so a
//! writer that read before an erasure never puts back the digests the erasure removed
//! ([`Backend::forget_places`](crate::Backend::forget_places) moves the mark to a new
//! generation).

/// The digest a stored event is found by (SHA-256 of the event as stored).
pub type PlaceDigest = [u8; 32];

/// How far one conversation is indexed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlaceMark {
    /// Moves on each time the conversation's places are forgotten (an erasure, a rewrite).
    pub generation: i64,
    /// The last seq indexed.
    pub last_seq: u64,
    /// How many places it holds: the index the next event a client sends back gets.
    pub count: u64,
    /// The conversation's stamp ([`Backend::place_stamp`](crate::Backend::place_stamp))
    /// read before its events were: a different stamp now means commits since.
    pub stamp: i64,
}

/// The places of a conversation's events committed after its mark.
#[derive(Clone, Copy, Debug)]
pub struct PlacesUpdate<'a> {
    /// The last seq they were read up to.
    pub last_seq: u64,
    /// The conversation's stamp read before they were read.
    pub stamp: i64,
    /// Their digests, in order: the first takes the mark's `count` as its index.
    pub digests: &'a [PlaceDigest],
}
