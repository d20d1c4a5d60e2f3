//! Writing a conversation as JSON Lines (the format is in the module docs of
//! [`crate::transfer`]).

use std::io::Write;

use ctxlog_ledger::{Event, EventBody, Salvaged};

use super::line::Line;
use crate::backend::LedgerView;
use crate::{Error, Result};

/// Events read per batch, so memory stays bounded by the batch, not the conversation.
const BATCH: u64 = 1024;

/// Writes every readable event of `ledger` to `out`, one JSON line each, artifacts inlined.
/// Returns the events and bytes written.
///
/// # Errors
/// Ledger reads (a damaged artifact fails rather than exporting an excerpt); I/O on `out`.
pub fn write_export(ledger: &dyn LedgerView, out: &mut dyn Write) -> Result<(u64, u64)> {
    let (mut events, mut bytes) = (0, 0);
    let last = ledger.last_seq();
    let mut from = 1;
    while from <= last {
        let to = from.saturating_add(BATCH - 1).min(last);
        for event in ledger.events(from..=to)? {
            let line = line(ledger, &event)?;
            out.write_all(&line).map_err(io)?;
            events += 1;
            bytes += line.len() as u64;
        }
        from = to + 1;
    }
    out.flush().map_err(io)?;
    Ok((events, bytes))
}

fn line(ledger: &dyn LedgerView, event: &Event) -> Result<Vec<u8>> {
    let event = Event {
        body: whole_body(ledger, event)?,
        ..event.clone()
    };
    event_line(&event, None)
}

/// `event`'s body whole: a tool result's artifact as its text, its media parts' bytes
/// inlined, as an export writes it and a commit takes it back.
///
/// # Errors
/// Ledger reads (a damaged artifact); an output artifact that is not UTF-8.
pub(crate) fn whole_body(ledger: &dyn LedgerView, event: &Event) -> Result<EventBody> {
    let artifact = match &event.body {
        EventBody::ToolResult {
            artifact: Some(r), ..
        } => Some(ledger.artifact(r)?),
        _ => None,
    };
    let mut body = event.body.clone();
    body.inline_parts(|r| ledger.artifact(r))?;
    with_artifact(body, artifact)
}

/// A tool result `body` with `artifact` (its artifact's content) as its text, if given.
fn with_artifact(mut body: EventBody, artifact: Option<Vec<u8>>) -> Result<EventBody> {
    if let EventBody::ToolResult {
        artifact: stored @ Some(_),
        ..
    } = &mut body
        && let Some(content) = artifact
    {
        let name = stored.take().map(|r| r.name).unwrap_or_default();
        let text = String::from_utf8(content).map_err(|_| Error::Internal {
            reason: format!("artifact {name} is not UTF-8"),
        })?;
        // Its provider item stays while it still says the whole output.
        body.set_result_text(text);
    }
    Ok(body)
}

/// Writes a salvage (docs/export-import.md, "Salvage"): each intact event as an export line
/// (its artifact inlined when intact; else the event as stored, with its excerpt, followed by
/// a `damaged` line naming the artifact), each damaged range as a `damaged` line. Returns
/// the lines and bytes written.
///
/// # Errors
/// I/O on `out`.
pub fn write_salvaged(item: Salvaged, out: &mut dyn Write) -> Result<(u64, u64)> {
    let mut lines = Vec::new();
    match item {
        Salvaged::Event { event, artifact } => match artifact {
            Some(Err(reason)) => {
                lines.push(event_line(&event, None)?);
                let name = match &event.body {
                    EventBody::ToolResult {
                        artifact: Some(r), ..
                    } => r.name.clone(),
                    _ => String::new(),
                };
                let damaged = serde_json::json!({"damaged": {
                    "seq": event.seq, "artifact": name, "reason": reason}});
                lines.push(json_line(&damaged));
            }
            Some(Ok(content)) => lines.push(event_line(&event, Some(content))?),
            None => lines.push(event_line(&event, None)?),
        },
        Salvaged::Damaged(range) => {
            lines.push(json_line(&serde_json::json!({ "damaged": range })));
        }
    }
    let mut bytes = 0;
    for line in &lines {
        out.write_all(line).map_err(io)?;
        bytes += line.len() as u64;
    }
    Ok((lines.len() as u64, bytes))
}

fn json_line(value: &serde_json::Value) -> Vec<u8> {
    let mut line = value.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// The export line of `event`, with `artifact` (its artifact's content) inlined if given.
fn event_line(event: &Event, artifact: Option<Vec<u8>>) -> Result<Vec<u8>> {
    let body = with_artifact(event.body.clone(), artifact)?;
    let mut out = serde_json::to_vec(&Line {
        seq: event.seq,
        ts: super::format_rfc3339(event.ts_ms),
        body: &body,
    })
    .map_err(|e| Error::Internal {
        reason: format!("event {} cannot be encoded: {e}", event.seq),
    })?;
    out.push(b'\n');
    Ok(out)
}

fn io(source: std::io::Error) -> Error {
    Error::Io {
        path: "<export output>".into(),
        source,
    }
}
