//! The parts of a body that do not come from the history walk: the system prompt, the pinned
//! notes in force, the current input (all mandatory, docs/design.md#p4-mandatory-input).

use std::collections::HashSet;

use ctxlog_event::{Event, EventBody};

use crate::error::Result;
use crate::history::{History, read};
use crate::options::WireFormat;
use crate::request::ProjectionRequest;
use crate::wire::{Item, Role, note_text, turn_items};

/// The system prompt as a message item (OpenAI only; Anthropic carries it in the envelope).
pub(crate) fn system_items(req: &ProjectionRequest) -> Vec<Item> {
    match (&req.system, req.format) {
        (Some(system), WireFormat::OpenAiChat) => {
            vec![Item::text(Role::System, system.clone())]
        }
        _ => Vec::new(),
    }
}

/// The current input as a message item; without input, the open turn's items
/// (docs/design.md#p11-the-agent-loop).
pub(crate) fn input_items(req: &ProjectionRequest, open: Option<&[Event]>) -> Vec<Item> {
    match (&req.input, open) {
        (Some(input), _) => vec![Item::text(Role::User, input.clone())],
        (None, Some(events)) => turn_items(events, req.offers_recall_tool()),
        (None, None) => Vec::new(),
    }
}

/// The pinned notes in force: notes marked pinned that no later note explicitly supersedes
/// (docs/design.md#p6-agent-tiers: supersession is explicit, never guessed).
pub(crate) fn pinned_notes<H: History + ?Sized>(history: &H) -> Result<Vec<Event>> {
    let notes = read(history.notes())?;
    let superseded: HashSet<u64> = notes
        .iter()
        .filter_map(|n| match n.body {
            EventBody::Note { supersedes, .. } => supersedes.filter(|s| *s < n.seq),
            _ => None,
        })
        .collect();
    Ok(notes
        .into_iter()
        .filter(|n| matches!(n.body, EventBody::Note { pinned: true, .. }))
        .filter(|n| !superseded.contains(&n.seq))
        .collect())
}

/// Pinned notes as items.
pub(crate) fn pinned_items(notes: &[Event]) -> Vec<Item> {
    notes
        .iter()
        .filter_map(|n| {
            n.body
                .text()
                .map(|t| Item::text(Role::System, note_text(t)).or_own(n.body.provider_item()))
        })
        .collect()
}
