//! What became of the opaque provider items in the history a body kept
//! (docs/design.md#p14-more-wire-formats): each is sent verbatim in its own format, in its
//! place, or left out, and the report says how many and why.

use ctxlog_event::EventBody;

use crate::error::Result;
use crate::history::{History, read};
use crate::options::{Policy, WireFormat};
use crate::report::{OpaqueCounts, Report};
use crate::request::ProjectionRequest;

/// Counts the opaque items of the turns `report` kept in any form (and of the open turn),
/// sent and left out, and adds a note saying why any were left out. Reads only the kept turns, newest
/// first, stopping at the oldest kept seq.
pub(crate) fn count<H: History + ?Sized>(
    history: &H,
    request: &ProjectionRequest,
    report: &mut Report,
) -> Result<()> {
    let turn_count = read(history.turn_count())?;
    let oldest = report.kept.iter().map(|r| r.first).min();
    let mut counts = OpaqueCounts::default();
    for index in (0..turn_count).rev() {
        let open = request.input.is_none() && index + 1 == turn_count;
        let seqs = read(history.turn_seqs(index))?;
        if !open && oldest.is_none_or(|o| seqs.last < o) {
            break;
        }
        if !open
            && !report
                .kept
                .iter()
                .any(|r| r.first <= seqs.last && seqs.first <= r.last)
        {
            continue;
        }
        for event in read(history.turn(index))? {
            let EventBody::Opaque { format, .. } = event.body else {
                continue;
            };
            if !report.format.carries(format) {
                counts.left_out_other_format += 1;
            } else if open || report.policy != Policy::Agent {
                counts.sent += 1;
            } else {
                counts.left_out_summarised += 1;
            }
        }
    }
    if let Some(note) = note(report.format, &counts) {
        report.notes.push(note);
    }
    report.opaque = counts;
    Ok(())
}

fn note(format: WireFormat, counts: &OpaqueCounts) -> Option<String> {
    let mut why = Vec::new();
    if counts.left_out_other_format > 0 {
        why.push(format!(
            "{} belong to another wire format, and a {} body carries only its own",
            counts.left_out_other_format,
            format.as_str()
        ));
    }
    if counts.left_out_summarised > 0 {
        why.push(format!(
            "{} are in history the agent context summarises as text (provider items are sent \
             only in the open turn)",
            counts.left_out_summarised
        ));
    }
    (!why.is_empty()).then(|| {
        format!(
            "{} opaque provider items of kept history were left out: {}",
            counts.left_out_other_format + counts.left_out_summarised,
            why.join("; ")
        )
    })
}
