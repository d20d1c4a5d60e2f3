//! What the index reads: events and artifact texts, both supplied by the caller
//! (docs/design.md#r7-scope).

use std::collections::HashMap;

use ctxlog_event::{ArtifactRef, Event};

use crate::error::{Result, SourceError};

/// Supplies the full text of an artifact. The facade implements it with the ledger's safe
/// artifact reader; this crate never opens a file other than its index.
pub trait ArtifactSource {
    /// The artifact's full text (lossily decoded if it is not UTF-8).
    fn artifact_text(&self, artifact: &ArtifactRef) -> Result<String, SourceError>;
}

impl<F> ArtifactSource for F
where
    F: Fn(&ArtifactRef) -> Result<String, SourceError>,
{
    fn artifact_text(&self, artifact: &ArtifactRef) -> Result<String, SourceError> {
        self(artifact)
    }
}

/// An artifact source with no artifacts: every artifact reference fails, and the event's inline
/// excerpt is indexed instead.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoArtifacts;

impl ArtifactSource for NoArtifacts {
    fn artifact_text(&self, artifact: &ArtifactRef) -> Result<String, SourceError> {
        Err(format!("no artifact source (artifact {})", artifact.name).into())
    }
}

/// A whole ledger as the index sees it: identity, length, events in order, artifacts.
/// Used by [`RecallIndex::catch_up`](crate::RecallIndex::catch_up) and
/// [`RecallIndex::rebuild`](crate::RecallIndex::rebuild).
pub trait LedgerSource: ArtifactSource {
    /// The ledger's identity. It must change whenever the ledger is rewritten (erasure,
    /// re-import), so an index built from the old ledger is discarded.
    fn ledger_id(&self) -> String;
    /// The seq of the last event (0 when empty).
    fn head_seq(&self) -> u64;
    /// Calls `visit` with every event whose seq is greater than `after`, in seq order, and
    /// stops at the first error `visit` returns (passing it on).
    fn visit_after(&self, after: u64, visit: &mut dyn FnMut(&Event) -> Result<()>) -> Result<()>;
}

/// A ledger held in memory: for tests, evaluations and imports.
#[derive(Clone, Debug, Default)]
pub struct MemorySource {
    /// The ledger identity reported by [`LedgerSource::ledger_id`].
    pub ledger_id: String,
    /// The events, in seq order.
    pub events: Vec<Event>,
    /// Artifact texts by artifact name.
    pub artifacts: HashMap<String, String>,
}

impl ArtifactSource for MemorySource {
    fn artifact_text(&self, artifact: &ArtifactRef) -> Result<String, SourceError> {
        self.artifacts
            .get(&artifact.name)
            .cloned()
            .ok_or_else(|| format!("unknown artifact {}", artifact.name).into())
    }
}

impl LedgerSource for MemorySource {
    fn ledger_id(&self) -> String {
        self.ledger_id.clone()
    }

    fn head_seq(&self) -> u64 {
        self.events.last().map_or(0, |e| e.seq)
    }

    fn visit_after(&self, after: u64, visit: &mut dyn FnMut(&Event) -> Result<()>) -> Result<()> {
        let start = self.events.partition_point(|e| e.seq <= after);
        self.events[start..].iter().try_for_each(visit)
    }
}
