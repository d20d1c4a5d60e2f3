//! `window: stable`: where the kept history starts so that consecutive bodies share their
//! prefix (docs/projection.md, "Windows").
//!
//! The history is cut into **blocks** on a grid over the history's own stored offsets
//! ([`History::turn_offset`]): block `n` starts at the first turn whose offset is at or after
//! `n × block_bytes`, with `block_bytes = (1 − low_water) × the budget in bytes`. The window
//! starts at the first block start at or after the turn the sliding rule would start at, so
//! it stays put while the suffix from it fits (appending a turn that fits moves neither the
//! sliding start past that block start nor any offset), and when it no longer fits moves to
//! the next block start, which drops the body to about the low-water mark. Everything is a
//! function of stored offsets and the request: no earlier cut is replayed or remembered, and
//! only the turns inside the window are looked at.

use crate::error::Result;
use crate::history::{History, read};
use crate::request::ProjectionRequest;

/// Bytes per token when only a token budget sizes a block (the same rough figure `auto`
/// uses to size its window).
const BYTES_PER_TOKEN: u64 = 4;

/// A block's size in stored bytes: `(1 − low_water)` × the byte budget, or, under a token
/// budget alone, × four bytes per token of the input token limit (the smaller when both);
/// `None` without a budget (everything fits: there is nothing to cut).
pub(crate) fn block_bytes(req: &ProjectionRequest) -> Option<u64> {
    let by_tokens = req.input_token_limit().map(|t| t * BYTES_PER_TOKEN);
    let window = match (req.max_bytes(), by_tokens) {
        (Some(b), Some(t)) => b.min(t),
        (b, t) => b.or(t)?,
    };
    Some((((1.0 - req.low_water()) * window as f64) as u64).max(1))
}

/// The stable cut: how many history units to keep, and the block the window starts at.
///
/// `sliding` is the sliding rule's answer (units kept, newest first, out of `turn_count`
/// turns plus the preamble; `None` when no count fits with the notice). `fits(k)` says whether
/// the body keeping the newest `k` units fits; it is asked only for `k` up to `sliding`.
pub(crate) fn cut<H: History + ?Sized>(
    history: &H,
    req: &ProjectionRequest,
    turn_count: usize,
    sliding: Option<usize>,
    fits: &mut dyn FnMut(usize) -> Result<bool>,
) -> Result<(Option<usize>, u64)> {
    let (Some(kept), Some(step)) = (sliding, block_bytes(req)) else {
        return Ok((sliding, 0));
    };
    if kept >= turn_count {
        return Ok((sliding, 0));
    }
    let mut start = turn_count - kept;
    // The first block that starts at or after the sliding start: the first grid point past
    // the turn before it.
    let mut block = first_block_after(history, start, step)?;
    let mut first = true;
    loop {
        let Some(at) = block_start(history, start, turn_count, block * step)? else {
            // The whole window is smaller than a block: the block after the sliding start has
            // no turn yet, so the window starts where the sliding rule does.
            if first {
                return Ok((sliding, read(history.turn_offset(start))? / step));
            }
            return Ok((fits(0)?.then_some(0), block));
        };
        let k = turn_count - at;
        if fits(k)? {
            return Ok((Some(k), block));
        }
        // The suffix from this block start does not fit (its notice names more turns): the
        // next block start.
        start = at + 1;
        block = first_block_after(history, start, step)?;
        first = false;
    }
}

/// The first block whose first turn is turn `start` or later: block `n` starts at the first
/// turn whose offset is at or after `n × step`, so it is the first grid point past the start
/// of turn `start - 1` (block 0 for turn 0).
fn first_block_after<H: History + ?Sized>(history: &H, start: usize, step: u64) -> Result<u64> {
    match start {
        0 => Ok(0),
        _ => Ok(read(history.turn_offset(start - 1))? / step + 1),
    }
}

/// The first turn from `from` on whose offset is at or after `at`, if any (the window's turns
/// only: `from` is at or after the sliding start).
fn block_start<H: History + ?Sized>(
    history: &H,
    from: usize,
    turn_count: usize,
    at: u64,
) -> Result<Option<usize>> {
    for i in from..turn_count {
        if read(history.turn_offset(i))? >= at {
            return Ok(Some(i));
        }
    }
    Ok(None)
}
