//! The `auto` policy: which policy a request gets when it names none
//! (docs/design.md#p6-agent-tiers).
//!
//! An agent's conversation (tool calls with large results) under the `turns` policy keeps few
//! or no whole turns; a chat's (no tools) is best served whole. So `auto` looks at the newest
//! turns a window could hold (newest first, while their events' JSON adds up to no more than
//! the byte budget, or four bytes per token of the token budget, and at most [`AUTO_TURNS`]
//! turns): if one of them holds a tool call or result, the `agent` policy; otherwise `turns`.
//! The check reads at most [`AUTO_TURNS`] turns, never the whole history.

use ctxlog_event::{EventBody, EventKind};

use crate::error::Result;
use crate::history::{History, read};
use crate::options::Policy;
use crate::request::ProjectionRequest;

/// The most turns the `auto` policy looks at.
pub const AUTO_TURNS: usize = 32;

/// Bytes per token assumed when only a token budget bounds the window.
const BYTES_PER_TOKEN: u64 = 4;

/// The policy `auto` chooses for `request` over `history`, and a sentence saying why.
pub(crate) fn choose<H: History + ?Sized>(
    history: &H,
    request: &ProjectionRequest,
) -> Result<(Policy, String)> {
    let window = match (request.max_bytes, request.input_token_limit()) {
        (Some(bytes), _) => bytes,
        (None, Some(tokens)) => tokens.saturating_mul(BYTES_PER_TOKEN),
        (None, None) => u64::MAX,
    };
    let count = read(history.turn_count())?;
    let mut seen = 0u64;
    for (looked, index) in (0..count).rev().take(AUTO_TURNS).enumerate() {
        let events = read(history.turn(index))?;
        if let Some(e) = events
            .iter()
            .find(|e| matches!(e.kind(), EventKind::ToolCall | EventKind::ToolResult))
        {
            let why = format!(
                "policy auto chose agent: seq {} (a {}) is in the newest {} turn(s) a window \
                 could hold",
                e.seq,
                e.kind().as_str(),
                looked + 1
            );
            return Ok((Policy::Agent, why));
        }
        seen += events.iter().map(|e| body_size(&e.body)).sum::<u64>();
        if seen > window {
            break;
        }
    }
    Ok((
        Policy::Turns,
        "policy auto chose turns: no tool call or result in the newest turns a window could \
         hold"
            .to_owned(),
    ))
}

fn body_size(body: &EventBody) -> u64 {
    serde_json::to_vec(body).map_or(0, |v| v.len() as u64)
}
