//! Salvage: every intact record of a damaged log, in order, with the damaged ranges between
//! them (docs/design.md#l11-repair). Reads only; writes nothing.
//!
//! The scan trusts nothing it has not checked: a record is taken only when its header parses,
//! its seq is past the last one taken, its whole length lies inside the file and its CRC
//! (which covers the length fields) matches its bytes; then its length moves the scan on.
//! Anywhere else the scan resyncs on the next record magic (`ctxR` at byte 4 of a record),
//! never on a length read from a damaged header. A damaged log header locks nothing out:
//! records start after its 64 bytes whatever it holds.

use std::sync::Arc;

use serde::Serialize;

use crate::error::Result;
use crate::event::{Event, EventBody};
use crate::files::{io_err, open_file};
use crate::format::{
    LOG_HEADER_LEN, R_MAGIC, RECORD_HEADER_LEN, RECORD_MAGIC, RecordHeader, names,
};
use crate::scan::Window;
use crate::storage::{OpenMode, Storage};

/// A run of bytes of the log that holds no intact record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DamagedRange {
    /// Byte offset of the first damaged byte in `ledger.log`.
    pub offset: u64,
    /// Length of the damaged run in bytes.
    pub bytes: u64,
    /// The seqs the run held, when the records around it tell (`[first, last]`); `None` when
    /// no seq is missing (bytes between two consecutive records).
    pub seqs: Option<(u64, u64)>,
    /// What is wrong.
    pub reason: String,
}

/// One item of a salvage, in log order.
// Items are handed out one at a time, most of them events: boxing the common variant would
// cost an allocation per event to save stack bytes on the rare damaged range.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Salvaged {
    /// An intact event (covered placeholders of erased seqs are left out, as every reader
    /// leaves them out), with the content of the artifact it references, if it references
    /// one: the bytes, checked against their hash, or what is wrong with them.
    Event {
        /// The event as stored.
        event: Event,
        /// Its artifact's content, or why it cannot be given.
        artifact: Option<std::result::Result<Vec<u8>, String>>,
    },
    /// A damaged range.
    Damaged(DamagedRange),
}

/// What a salvage found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SalvageReport {
    /// The ledger id from the log header (hex), `None` when the header is damaged.
    pub ledger_id: Option<String>,
    /// What is wrong with the log header, if anything.
    pub header_problem: Option<String>,
    /// Intact events given (placeholders not counted).
    pub events: u64,
    /// The seq of the last intact event (0 when none).
    pub last_seq: u64,
    /// The damaged ranges, in log order.
    pub damaged: Vec<DamagedRange>,
}

/// Salvages the log of the conversation in `storage`, calling `visit` with each intact event
/// and each damaged range in log order.
///
/// # Errors
/// I/O on the log (a missing log is `NotFound`); whatever `visit` returns.
pub fn salvage_with(
    storage: Arc<dyn Storage>,
    visit: &mut dyn FnMut(Salvaged) -> Result<()>,
) -> Result<SalvageReport> {
    salvage_scan(storage.as_ref(), visit, None)
}

/// An intact record a salvage gave (covered placeholders included), as a repair copies it:
/// where it lies in the log and its header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeptRecord {
    pub offset: u64,
    pub header: RecordHeader,
}

/// Why a salvage marks a commit that never ended at the end of the log: a torn tail, never
/// acknowledged (a repair cuts it and records no loss for it).
pub(crate) const TORN_TAIL: &str =
    "a commit that never ended at the end of the log (a torn tail: never acknowledged)";

/// [`salvage_with`], also collecting into `kept` every intact record given (placeholders
/// included), in log order.
pub(crate) fn salvage_scan(
    st: &dyn Storage,
    visit: &mut dyn FnMut(Salvaged) -> Result<()>,
    kept: Option<&mut Vec<KeptRecord>>,
) -> Result<SalvageReport> {
    let log = open_file(st, names::LOG, OpenMode::Read)?;
    let file_len = log.len().map_err(io_err(st, names::LOG))?;
    let mut report = SalvageReport::default();
    match crate::state::read_header(st, log.as_ref(), file_len) {
        Ok(header) => report.ledger_id = Some(crate::hex::encode(&header.ledger_id)),
        Err(e) => report.header_problem = Some(e.without_path()),
    }
    // What the sidecars prove was acknowledged: seqs a damaged tail held.
    let acked = crate::sidecar::later(
        crate::sidecar::acknowledged(st, None).ok().flatten(),
        crate::sidecar::witnessed(st, None).ok().flatten(),
    )
    .map_or(0, |a| a.last_seq);
    let mut scan = Scan {
        storage: st,
        window: Window::new(log.as_ref(), file_len),
        file_len,
        next_seq: 1,
        pending: Vec::new(),
        pending_kept: Vec::new(),
        kept,
        pending_at: 0,
        damage: None,
        report: &mut report,
        visit,
    };
    if let Some(reason) = scan.report.header_problem.clone() {
        // The header holds no event: it is marked, and the records after it are read.
        scan.damaged(0, file_len.min(LOG_HEADER_LEN as u64), None, reason)?;
    }
    let mut pos = LOG_HEADER_LEN as u64;
    while pos < file_len {
        pos = match scan.record_at(pos).map_err(io_err(st, names::LOG))? {
            Ok((header, event)) => scan.take(pos, header, event)?,
            Err(reason) => scan.skip(pos, reason).map_err(io_err(st, names::LOG))?,
        };
    }
    scan.finish(acked)?;
    Ok(report)
}

/// Why the log's end is damage: it ends before seq `acked`, which the sidecars record as
/// acknowledged.
fn cut_reason(acked: u64) -> String {
    format!(
        "the log ends here, but the sidecar indexes record seqs up to {acked} as acknowledged: \
         the log was cut"
    )
}

/// Where a damaged run started, and why.
struct Open {
    offset: u64,
    reason: String,
}

struct Scan<'a, 'v> {
    storage: &'a dyn Storage,
    window: Window<'a>,
    file_len: u64,
    /// The seq the next intact record must have at least.
    next_seq: u64,
    /// Intact records of a commit whose last record has not been seen yet, and where the
    /// first of them starts.
    pending: Vec<Event>,
    pending_kept: Vec<KeptRecord>,
    kept: Option<&'v mut Vec<KeptRecord>>,
    pending_at: u64,
    damage: Option<Open>,
    report: &'v mut SalvageReport,
    visit: &'v mut dyn FnMut(Salvaged) -> Result<()>,
}

impl Scan<'_, '_> {
    /// The intact record at `pos`, or why there is none.
    #[allow(clippy::type_complexity)]
    fn record_at(&mut self, pos: u64) -> std::io::Result<Result<(RecordHeader, Event), String>> {
        let Some(head) = self.window.get(pos, RECORD_HEADER_LEN)? else {
            return Ok(Err("incomplete record header at the end of the log".into()));
        };
        let header = match RecordHeader::parse(head) {
            Ok(h) => h,
            Err(reason) => return Ok(Err(reason)),
        };
        if header.seq < self.next_seq {
            return Ok(Err(format!(
                "record claims seq {}, not after seq {}",
                header.seq,
                self.next_seq - 1
            )));
        }
        let len = header.record_len();
        if len > self.file_len - pos {
            return Ok(Err("record runs past the end of the log".into()));
        }
        let Some(bytes) = self.window.get(pos, len as usize)? else {
            return Ok(Err("record runs past the end of the log".into()));
        };
        let payload = &bytes[RECORD_HEADER_LEN..];
        if crate::format::record_crc(bytes, payload) != header.crc {
            return Ok(Err("record checksum mismatch".into()));
        }
        let body: EventBody =
            match serde_json::from_slice::<EventBody>(&payload[..header.body_len as usize]) {
                Ok(body) if body.kind() == header.kind => body,
                Ok(_) => return Ok(Err("event body disagrees with the header's kind".into())),
                Err(e) => return Ok(Err(format!("undecodable event body: {e}"))),
            };
        let event = Event {
            seq: header.seq,
            ts_ms: header.ts_ms,
            body,
        };
        Ok(Ok((header, event)))
    }

    /// Takes the intact record at `pos`; returns where the next one starts.
    fn take(&mut self, pos: u64, header: RecordHeader, event: Event) -> Result<u64> {
        if let Some(open) = self.damage.take() {
            let seqs = (header.seq > self.next_seq).then(|| (self.next_seq, header.seq - 1));
            self.damaged(open.offset, pos - open.offset, seqs, open.reason)?;
        }
        self.next_seq = header.seq + 1;
        if self.pending.is_empty() {
            self.pending_at = pos;
        }
        self.pending.push(event);
        self.pending_kept.push(KeptRecord {
            offset: pos,
            header,
        });
        if header.ends_commit() {
            self.flush()?;
        }
        Ok(pos + header.record_len())
    }

    /// Marks `pos` damaged (opening a run unless one is open); returns the next place a
    /// record may start: the next record magic, or the end of the log.
    fn skip(&mut self, pos: u64, reason: String) -> std::io::Result<u64> {
        if self.damage.is_none() {
            self.damage = Some(Open {
                offset: pos,
                reason,
            });
        }
        let mut at = pos + 1 + R_MAGIC as u64;
        const CHUNK: usize = 1 << 16;
        while at + RECORD_MAGIC.len() as u64 <= self.file_len {
            let n = ((self.file_len - at) as usize).min(CHUNK);
            let Some(chunk) = self.window.get(at, n)? else {
                break;
            };
            if let Some(i) = chunk
                .windows(RECORD_MAGIC.len())
                .position(|w| w == RECORD_MAGIC)
            {
                return Ok(at + i as u64 - R_MAGIC as u64);
            }
            if n < CHUNK {
                break;
            }
            at += (n - (RECORD_MAGIC.len() - 1)) as u64;
        }
        Ok(self.file_len)
    }

    /// Gives the pending records of a commit (complete, or cut by damage).
    fn flush(&mut self) -> Result<()> {
        let given = std::mem::take(&mut self.pending_kept);
        if let Some(kept) = self.kept.as_mut() {
            kept.extend(given);
        }
        for event in std::mem::take(&mut self.pending) {
            self.report.last_seq = event.seq;
            if crate::tombstone::is_placeholder(event.seq, &event.body) {
                continue;
            }
            self.report.events += 1;
            let artifact = match &event.body {
                EventBody::ToolResult {
                    artifact: Some(r), ..
                } => Some(crate::artifact::read(self.storage, r).map_err(|e| e.without_path())),
                _ => None,
            };
            (self.visit)(Salvaged::Event { event, artifact })?;
        }
        Ok(())
    }

    fn damaged(
        &mut self,
        offset: u64,
        bytes: u64,
        seqs: Option<(u64, u64)>,
        reason: String,
    ) -> Result<()> {
        // Records of a commit cut by damage are intact: they are given, before the damage.
        self.flush()?;
        let range = DamagedRange {
            offset,
            bytes,
            seqs,
            reason,
        };
        self.report.damaged.push(range.clone());
        (self.visit)(Salvaged::Damaged(range))
    }

    /// The end of the log: a damaged run still open reaches it (holding the seqs the sidecars
    /// prove were acknowledged, if any); records of a commit that never ended, with nothing
    /// after them, are a torn tail (never acknowledged).
    fn finish(mut self, acked: u64) -> Result<()> {
        let seqs = (acked >= self.next_seq).then_some((self.next_seq, acked));
        if let Some(open) = self.damage.take() {
            return self.damaged(open.offset, self.file_len - open.offset, seqs, open.reason);
        }
        let Some((first, last)) = self.pending.first().zip(self.pending.last()) else {
            return match seqs {
                Some(seqs) => self.damaged(self.file_len, 0, Some(seqs), cut_reason(acked)),
                None => Ok(()),
            };
        };
        let (first, last) = (first.seq, last.seq);
        if acked >= last {
            // The sidecars prove the commit these records belong to was acknowledged: they
            // are given, and the acknowledged seqs after them are the log's lost end.
            if acked == last {
                return self.flush();
            }
            return self.damaged(self.file_len, 0, Some((last + 1, acked)), cut_reason(acked));
        }
        let range = DamagedRange {
            offset: self.pending_at,
            bytes: self.file_len - self.pending_at,
            seqs: Some((first, last)),
            reason: TORN_TAIL.into(),
        };
        self.pending.clear();
        self.pending_kept.clear();
        self.report.damaged.push(range.clone());
        (self.visit)(Salvaged::Damaged(range))?;
        Ok(())
    }
}
