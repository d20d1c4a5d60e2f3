//! What became of the opaque provider items in the history a body kept
//! (docs/design.md#p14-more-wire-formats): each is sent verbatim in its own format, in its
//! place, or left out, and the report says how many and why. The same pass names the seq
//! ranges erased and lost to damage in that history (docs/projection.md#erased-and-lost-seqs).

use ctxlog_event::{Event, EventBody, SystemMarker};

use crate::error::Result;
use crate::history::{History, SeqRange, read};
use crate::options::{Policy, WireFormat};
use crate::report::{OpaqueCounts, Report};
use crate::request::ProjectionRequest;

/// Counts the opaque items of the turns `report` kept in any form (and of the open turn),
/// sent and left out, and adds a note saying why any were left out; lists the erased and lost
/// seq ranges from the oldest kept seq on (`report.erased`, `report.lost`, with a note for a
/// loss). Reads only the turns from the oldest kept seq on, newest first (and the preamble
/// when that reaches the first turn).
pub(crate) fn count<H: History + ?Sized>(
    history: &H,
    request: &ProjectionRequest,
    report: &mut Report,
) -> Result<()> {
    let turn_count = read(history.turn_count())?;
    let oldest = report.kept.iter().map(|r| r.first).min();
    let mut counts = OpaqueCounts::default();
    let mut gaps = Gaps::default();
    let mut reached_first = true;
    for index in (0..turn_count).rev() {
        let open = request.input.is_none() && index + 1 == turn_count;
        let seqs = read(history.turn_seqs(index))?;
        if !open && oldest.is_none_or(|o| seqs.last < o) {
            reached_first = false;
            break;
        }
        let events = read(history.turn(index))?;
        gaps.add(&events);
        if !open
            && !report
                .kept
                .iter()
                .any(|r| r.first <= seqs.last && seqs.first <= r.last)
        {
            continue;
        }
        for event in events {
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
    if reached_first {
        gaps.add(&read(history.preamble())?);
    }
    if let Some(note) = note(report.format, &counts) {
        report.notes.push(note);
    }
    report.opaque = counts;
    gaps.erased.sort();
    gaps.lost.sort();
    if !gaps.lost.is_empty() {
        report.notes.push(lost_note(&gaps.lost));
    }
    report.erased = gaps.erased;
    report.lost = gaps.lost;
    Ok(())
}

/// The erased and lost seq ranges met, one per tombstone or loss record (its covered
/// placeholders, at the seqs after its own, are not counted again).
#[derive(Default)]
struct Gaps {
    erased: Vec<SeqRange>,
    lost: Vec<SeqRange>,
}

impl Gaps {
    fn add(&mut self, events: &[Event]) {
        for event in events {
            match &event.body {
                EventBody::System {
                    marker: SystemMarker::Tombstone { from, to, .. },
                } if *from == event.seq => self.erased.push(SeqRange::new(*from, *to)),
                EventBody::System {
                    marker: SystemMarker::Loss { from, to, .. },
                } if *from == event.seq => self.lost.push(SeqRange::new(*from, *to)),
                _ => {}
            }
        }
    }
}

/// The note for seqs lost to damage: a lost range is left out like an erased one, but it is
/// not an erasure, and the caller should know.
fn lost_note(lost: &[SeqRange]) -> String {
    let ranges: Vec<String> = lost
        .iter()
        .map(|r| {
            if r.first == r.last {
                format!("seq {}", r.first)
            } else {
                format!("seqs {}-{}", r.first, r.last)
            }
        })
        .collect();
    format!(
        "{} of the history kept {} lost to damage (given up by ctxlog repair --accept-loss), \
         not erased: the body leaves {} out",
        ranges.join(", "),
        if lost.len() == 1 && lost[0].first == lost[0].last {
            "was"
        } else {
            "were"
        },
        if lost.len() == 1 && lost[0].first == lost[0].last {
            "it"
        } else {
            "them"
        }
    )
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
