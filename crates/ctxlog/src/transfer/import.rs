//! Reading ctxlog's own export back (JSON Lines; see [`crate::transfer`]), line by line as
//! [`ReadLine`]s.

use ctxlog_ledger::{EventBody, SystemMarker};
use serde_json::Value;

use super::Incoming;
use super::line::{ReadEvent, ReadLine};
use crate::{Error, Result};

/// Parses every line of an export. Blank lines are skipped; seqs must follow each other (the
/// line after a tombstone of seqs A-B has seq B+1). A tombstone is kept as it is (its `seq`
/// must be its `from`, its `ts` its `at_ms`): the import rebuilds it with its placeholders.
///
/// # Errors
/// [`Error::BadInput`] naming the line (1-based).
pub(crate) fn parse_lines(text: &str) -> Result<Vec<Incoming>> {
    let mut out = Vec::new();
    let mut last_seq: Option<u64> = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |reason: String| Error::BadInput {
            reason: format!("line {}: {reason}", i + 1),
        };
        let line = read_line(line).map_err(at)?;
        if let (Some(seq), Some(last)) = (line.seq, last_seq)
            && seq != last + 1
        {
            return Err(at(format!(
                "seq {seq} follows seq {last}; seqs must be contiguous"
            )));
        }
        last_seq = line.seq.or(last_seq.map(|s| s + 1));
        let incoming = incoming(line).map_err(at)?;
        if let Some(to) = tombstone_end(&incoming.body) {
            last_seq = Some(to);
        }
        out.push(incoming);
    }
    Ok(out)
}

fn read_line(line: &str) -> std::result::Result<ReadLine, String> {
    let value: Value = crate::json::from_str(line).map_err(|e| format!("invalid JSON: {e}"))?;
    if let Some(damaged) = value.get("damaged") {
        return Err(format!(
            "a damaged range of a salvage ({damaged}): a salvage is for reading, not an export; \
             to import its intact records into a new conversation, remove the damaged lines and \
             every line's \"seq\" (they are then numbered from 1)"
        ));
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// The event a line imports as: a tombstone as it stands (no time of its own: it carries the
/// erasure's), any other event at its time. Other system markers, and a tool result that
/// names an artifact instead of carrying its text, are refused.
fn incoming(line: ReadLine) -> std::result::Result<Incoming, String> {
    let ReadLine {
        seq,
        ts,
        body: ReadEvent(body),
    } = line;
    match &body {
        EventBody::System { marker } => {
            let what = match marker {
                SystemMarker::Tombstone {
                    from, to, at_ms, ..
                }
                | SystemMarker::Loss {
                    from, to, at_ms, ..
                } => {
                    check_tombstone_line(seq, ts, *from, *to, *at_ms)?;
                    return Ok(Incoming { body, ts: None });
                }
                SystemMarker::Retention { .. } => "a retention marker",
                SystemMarker::Import { .. } => "an import marker",
            };
            Err(format!(
                "{what} cannot be imported; ctxlog writes system markers itself"
            ))
        }
        EventBody::ToolResult {
            artifact: Some(r), ..
        } => Err(format!(
            "the tool result references artifact {} instead of carrying its text (exports \
             inline artifacts)",
            r.name
        )),
        _ => Ok(Incoming { body, ts }),
    }
}

/// The last seq a tombstone covers.
fn tombstone_end(body: &EventBody) -> Option<u64> {
    match body {
        EventBody::System {
            marker: SystemMarker::Tombstone { to, .. } | SystemMarker::Loss { to, .. },
        } => Some(*to),
        _ => None,
    }
}

/// A tombstone line stands at its own `from` and carries its erasure time as `ts`.
fn check_tombstone_line(
    seq: Option<u64>,
    ts: Option<i64>,
    from: u64,
    to: u64,
    at_ms: i64,
) -> std::result::Result<(), String> {
    if let Some(seq) = seq.filter(|s| *s != from) {
        return Err(format!(
            "the tombstone of seqs {from}-{to} stands at seq {seq}; it must stand at {from}"
        ));
    }
    if let Some(ts) = ts.filter(|t| *t != at_ms) {
        return Err(format!(
            "the tombstone's \"ts\" ({}) is not its erasure time at_ms ({at_ms})",
            super::format_rfc3339(ts)
        ));
    }
    Ok(())
}
