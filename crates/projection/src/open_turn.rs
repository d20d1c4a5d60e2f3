//! The open turn of an agent loop (SPEC P11): a request with no current input continues the
//! newest turn, which must end in tool results.
//!
//! An agent calls the model again after each tool result without a new user message. Such a
//! request carries no input; the newest turn (its user message, the assistant's tool calls and
//! the results that arrived) takes the input's place: it is mandatory, and the body ends with
//! those results (OpenAI `tool` messages; an Anthropic `user` message of `tool_result` blocks).

use ctxlog_event::{Event, EventBody, EventKind};

use crate::error::{Error, Result};
use crate::history::{History, read};
use crate::request::ProjectionRequest;

/// Why a request without input was refused.
pub(crate) const NO_INPUT: &str = "no current input: give the user's message (--input), or \
project right after a tool result is committed (the open turn, ending in tool results, then \
ends the body)";

/// Whether the newest event of `events` that is sent (notes and system markers aside) is a
/// tool result.
pub(crate) fn ends_in_results(events: &[Event]) -> bool {
    events
        .iter()
        .rev()
        .find(|e| !matches!(e.body, EventBody::Note { .. } | EventBody::System { .. }))
        .is_some_and(|e| e.kind() == EventKind::ToolResult)
}

/// The events of the open turn that stands in for the current input: `None` when the request
/// has an input.
///
/// # Errors
///
/// [`Error::InvalidRequest`] when the request has no input and the newest turn does not end
/// in tool results (there would be nothing for the model to answer).
pub(crate) fn open_turn<H: History + ?Sized>(
    history: &H,
    req: &ProjectionRequest,
    turn_count: usize,
) -> Result<Option<Vec<Event>>> {
    if req.input.is_some() {
        return Ok(None);
    }
    if let Some(newest) = turn_count.checked_sub(1) {
        let events = read(history.turn(newest))?;
        if ends_in_results(&events) {
            return Ok(Some(events));
        }
    }
    Err(Error::InvalidRequest {
        reason: NO_INPUT.to_owned(),
    })
}

/// What recalled pages should be relevant to: the input, or the open turn's user message.
pub(crate) fn recall_query(req: &ProjectionRequest, open: Option<&[Event]>) -> String {
    if let Some(input) = &req.input {
        return input.clone();
    }
    open.into_iter()
        .flatten()
        .find_map(|e| match &e.body {
            EventBody::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}
