//! ctxlog's ledger: the durable, checksummed, append-only record of every confirmed turn.
//!
//! (Crate docs to be completed with the ledger implementation.)

pub mod event;

pub use event::{
    ArtifactRef, Event, EventBody, EventKind, NewCommit, SystemMarker, ToolStatus, turn_starts,
};
