//! Reading ctxlog's own export back (JSON Lines; see [`crate::transfer`]).

use ctxlog_ledger::{EventBody, SystemMarker};
use serde_json::Value;

use super::Incoming;
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
        let mut value: Value =
            serde_json::from_str(line).map_err(|e| at(format!("invalid JSON: {e}")))?;
        let object = value
            .as_object_mut()
            .ok_or_else(|| at("expected a JSON object (one event)".into()))?;
        let seq = match object.remove("seq") {
            None => None,
            Some(v) => Some(
                v.as_u64()
                    .filter(|s| *s >= 1)
                    .ok_or_else(|| at(format!("\"seq\" {v} is not a positive integer")))?,
            ),
        };
        if let (Some(seq), Some(last)) = (seq, last_seq)
            && seq != last + 1
        {
            return Err(at(format!(
                "seq {seq} follows seq {last}; seqs must be contiguous"
            )));
        }
        last_seq = seq.or(last_seq.map(|s| s + 1));
        let ts = match object.remove("ts") {
            None => None,
            Some(v) => Some(super::parse_ts(&v).map_err(at)?),
        };
        let body: EventBody =
            serde_json::from_value(value).map_err(|e| at(format!("invalid event: {e}")))?;
        if let EventBody::System { marker } = &body {
            let what = match marker {
                SystemMarker::Tombstone {
                    from, to, at_ms, ..
                } => {
                    check_tombstone_line(seq, ts, *from, *to, *at_ms).map_err(at)?;
                    last_seq = Some(*to);
                    out.push(Incoming { body, ts: None });
                    continue;
                }
                SystemMarker::Retention { .. } => "a retention marker",
                SystemMarker::Import { .. } => "an import marker",
            };
            return Err(at(format!(
                "{what} cannot be imported; ctxlog writes system markers itself"
            )));
        }
        if let EventBody::ToolResult {
            artifact: Some(r), ..
        } = &body
        {
            return Err(at(format!(
                "the tool result references artifact {} instead of carrying its text (exports \
                 inline artifacts)",
                r.name
            )));
        }
        out.push(Incoming { body, ts });
    }
    Ok(out)
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
