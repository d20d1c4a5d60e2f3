//! Reading ctxlog's own export back (JSON Lines; see [`crate::transfer`]).

use ctxlog_ledger::{EventBody, SystemMarker};
use serde_json::Value;

use super::Incoming;
use crate::{Error, Result};

/// Parses every line of an export. Blank lines are skipped; seqs must follow each other.
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
                SystemMarker::Tombstone { from, to, .. } => {
                    format!("a tombstone (seqs {from}-{to} were erased: their content is gone)")
                }
                SystemMarker::Retention { .. } => "a retention marker".into(),
                SystemMarker::Import { .. } => "an import marker".into(),
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
