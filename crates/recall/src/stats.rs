//! What indexing reports: figures, progress and why content was discarded.

/// Why `open` or `catch_up` discarded the index content.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResetReason {
    /// The index belonged to another ledger id.
    LedgerChanged {
        /// The id the index was built for.
        was: String,
    },
    /// The index was built with another [`IndexConfig`](crate::IndexConfig).
    ConfigChanged,
    /// The file was an index of an older schema version: it was deleted and created anew.
    SchemaChanged {
        /// The schema version found.
        was: i64,
    },
    /// The ledger is shorter than what was indexed, or the last indexed event changed.
    LedgerRewritten {
        /// The seq found missing or different.
        seq: u64,
    },
}

/// Figures from one `update`, `catch_up` or `rebuild`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpdateStats {
    /// Events read (indexed or skipped as not indexable).
    pub events_seen: u64,
    /// Events whose text was indexed.
    pub events_indexed: u64,
    /// Pages written.
    pub pages_written: u64,
    /// Artifacts that could not be read; the event's inline excerpt was indexed instead.
    pub artifact_failures: u64,
    /// The index's `indexed_through` afterwards.
    pub indexed_through: u64,
    /// Set when the index content was discarded before indexing.
    pub reset: Option<ResetReason>,
    /// Page vectors computed and stored (the semantic leg; 0 when it is off).
    pub embedded: u64,
}

/// Progress of a rebuild, reported after each event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The seq just processed.
    pub seq: u64,
    /// The ledger's last seq (the goal).
    pub head_seq: u64,
}
