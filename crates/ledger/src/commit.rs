//! Turning a [`NewCommit`] into log records: large tool outputs become artifacts (SPEC L5),
//! each event is encoded with its `ledger.idx` entry, and the caps are checked before
//! anything is written.

use crate::error::{Error, Result};
use crate::event::{ArtifactRef, EventBody, EventKind, NewCommit};
use crate::format::{
    self, CommitEntry, EventEntry, FLAG_COMMIT_META, FLAG_END_OF_COMMIT, RECORD_HEADER_LEN,
};
use crate::options::Options;
use crate::scan::CommitMeta;
use crate::state::{Appended, LedgerState};

/// A commit ready to append: its records and what the state gains once they are written.
#[derive(Default)]
pub(crate) struct Prepared {
    /// The encoded records, to append in one write.
    pub bytes: Vec<u8>,
    pub entries: Vec<EventEntry>,
    pub user_seqs: Vec<u64>,
    pub note_seqs: Vec<u64>,
    pub commit: Option<CommitEntry>,
    /// Artifacts to store (synced) before the records.
    pub artifacts: Vec<Vec<u8>>,
}

impl Prepared {
    /// Splits the commit into what [`LedgerState::apply`] takes in (staged ahead of the
    /// write), the records to append and the artifacts to store before them.
    pub(crate) fn into_parts(self) -> (Appended, Vec<u8>, Vec<Vec<u8>>) {
        let appended = Appended {
            bytes: self.bytes.len() as u64,
            entries: self.entries,
            user_seqs: self.user_seqs,
            note_seqs: self.note_seqs,
            commit: self.commit,
        };
        (appended, self.bytes, self.artifacts)
    }
}

/// A commit being encoded.
struct Draft<'a> {
    p: Prepared,
    counts: Counts,
    /// Each event's time (ms), resolved by [`resolve_times`].
    times: &'a [i64],
    first_seq: u64,
    /// Events in the commit.
    n: usize,
}

/// The running counts every `ledger.idx` entry carries.
#[derive(Clone, Copy)]
struct Counts {
    turns: u32,
    turns_crc: u32,
    notes: u32,
    notes_crc: u32,
    commits: u32,
}

impl Counts {
    /// Counts event `seq` of `kind`; a user or note seq is also recorded in `p`.
    fn add(&mut self, kind: EventKind, seq: u64, p: &mut Prepared) {
        if kind == EventKind::User {
            self.turns += 1;
            self.turns_crc = format::seq_crc_append(self.turns_crc, seq);
            p.user_seqs.push(seq);
        }
        if kind == EventKind::Note {
            self.notes += 1;
            self.notes_crc = format::seq_crc_append(self.notes_crc, seq);
            p.note_seqs.push(seq);
        }
    }
}

/// The commit metadata the last record carries when the commit has an id (empty if not).
fn commit_meta(commit: &NewCommit, key: Option<&([u8; 32], [u8; 32])>) -> Result<Vec<u8>> {
    match (&commit.id, key) {
        (Some(id), Some(k)) => serde_json::to_vec(&CommitMeta {
            id: id.clone(),
            digest: crate::hex::encode(&k.1),
        })
        .map_err(|e| Error::invalid(format!("commit id cannot be encoded: {e}"))),
        _ => Ok(Vec::new()),
    }
}

/// Each event's time (SPEC L10): an explicit time (`given[i]`, ms) is kept, and must not be
/// earlier than the event before it (the conversation's last event, `last_ms`, for the first
/// one); an event without one takes the clock `now_ms`, or the previous event's time when the
/// clock is behind it, so time never goes backwards within a conversation.
///
/// # Errors
/// [`Error::InvalidCommit`] naming the event, both times and the rule.
pub(crate) fn resolve_times(
    n: usize,
    given: &[Option<i64>],
    last_ms: i64,
    now_ms: i64,
) -> Result<Vec<i64>> {
    if given.len() > n {
        return Err(Error::invalid(format!(
            "{} times given for {n} events",
            given.len()
        )));
    }
    let mut prev = last_ms;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = match given.get(i).copied().flatten() {
            Some(t) if t < prev => {
                let what = if i == 0 {
                    "the conversation's last event"
                } else {
                    "the event before it"
                };
                return Err(Error::invalid(format!(
                    "event {}: time {t} ms is earlier than {what} ({prev} ms); times never go \
                     backwards within a conversation",
                    i + 1
                )));
            }
            Some(t) => t,
            None => now_ms.max(prev),
        };
        out.push(t);
        prev = t;
    }
    Ok(out)
}

/// Prepares commits against the current state and the writer's options.
pub(crate) struct Preparer<'a> {
    pub state: &'a LedgerState,
    pub options: &'a Options,
}

impl Preparer<'_> {
    /// Turns large tool outputs into artifacts and encodes the records; event `i` gets time
    /// `times[i]` (one per event, from [`resolve_times`]).
    pub(crate) fn prepare(
        &self,
        commit: &NewCommit,
        times: &[i64],
        key: Option<([u8; 32], [u8; 32])>,
    ) -> Result<Prepared> {
        let first_seq = self.state.last_seq() + 1;
        let n = commit.events.len();
        let meta = commit_meta(commit, key.as_ref())?;
        let mut d = Draft {
            p: Prepared::default(),
            counts: self.counts(),
            times,
            first_seq,
            n,
        };
        for (i, body) in commit.events.iter().enumerate() {
            let meta = if i + 1 == n { meta.as_slice() } else { &[] };
            self.add_record(&mut d, i, body, meta)?;
        }
        d.p.commit = key.map(|(id_hash, digest)| CommitEntry {
            id_hash,
            digest,
            first_seq,
            last_seq: first_seq + n as u64 - 1,
        });
        Ok(d.p)
    }

    /// The counts of the last committed event, to continue from.
    fn counts(&self) -> Counts {
        let (turns_crc, notes_crc) = self.state.seq_crcs();
        Counts {
            turns: self.state.user_seqs().len() as u32,
            turns_crc,
            notes: self.state.note_seqs().len() as u32,
            notes_crc,
            commits: self.state.commit_count(),
        }
    }

    /// Encodes event `i` of the commit (with `meta` when it is the last) into `d`.
    fn add_record(&self, d: &mut Draft<'_>, i: usize, body: &EventBody, meta: &[u8]) -> Result<()> {
        self.check_artifact_ref(body)?;
        let body = self.offload(body, &mut d.p.artifacts)?;
        let json = serde_json::to_vec(&body)
            .map_err(|e| Error::invalid(format!("event {} cannot be encoded: {e}", i + 1)))?;
        self.check_record(json.len() + meta.len())?;
        let seq = d.first_seq + i as u64;
        let last = i + 1 == d.n;
        let offset = self.state.log_len() + d.p.bytes.len() as u64;
        let flags = if last { FLAG_END_OF_COMMIT } else { 0 };
        let kind = body.kind();
        let (index, ts) = (i as u32, d.times.get(i).copied().unwrap_or(0));
        let crc = format::encode_record(&mut d.p.bytes, kind, flags, index, seq, ts, &json, meta);
        d.counts.add(kind, seq, &mut d.p);
        d.counts.commits += u32::from(last && !meta.is_empty());
        let meta_flag = if meta.is_empty() { 0 } else { FLAG_COMMIT_META };
        let c = d.counts;
        d.p.entries.push(EventEntry {
            offset,
            record_len: (RECORD_HEADER_LEN + json.len() + meta.len()) as u32,
            record_crc: crc,
            kind,
            flags: flags | meta_flag,
            turns: c.turns,
            commits: c.commits,
            turns_crc: c.turns_crc,
            notes: c.notes,
            notes_crc: c.notes_crc,
        });
        Ok(())
    }

    fn check_record(&self, payload: usize) -> Result<()> {
        let actual = (RECORD_HEADER_LEN + payload) as u64;
        let limit = self.options.max_record_bytes.min(u64::from(u32::MAX));
        if actual > limit {
            return Err(Error::TooLarge {
                what: "record",
                limit,
                actual,
            });
        }
        Ok(())
    }

    /// A tool result over the threshold becomes an artifact plus an excerpt.
    fn offload(&self, body: &EventBody, artifacts: &mut Vec<Vec<u8>>) -> Result<EventBody> {
        match body {
            EventBody::ToolResult {
                call_id,
                tool,
                status,
                exit_code,
                text,
                artifact: None,
            } if text.len() as u64 > self.options.artifact_threshold => {
                let name = crate::artifact::artifact_name(text.as_bytes());
                let r = ArtifactRef {
                    name: name.clone(),
                    bytes: text.len() as u64,
                };
                artifacts.push(text.as_bytes().to_vec());
                Ok(EventBody::ToolResult {
                    call_id: call_id.clone(),
                    tool: tool.clone(),
                    status: *status,
                    exit_code: *exit_code,
                    text: crate::artifact::excerpt(text, self.options.artifact_threshold, &name),
                    artifact: Some(r),
                })
            }
            other => Ok(other.clone()),
        }
    }

    /// A caller-supplied artifact reference must name an artifact already stored here.
    fn check_artifact_ref(&self, body: &EventBody) -> Result<()> {
        if let EventBody::ToolResult {
            artifact: Some(r), ..
        } = body
        {
            let st = self.state.storage().as_ref();
            let content = crate::artifact::read_stored(st, &r.name)?;
            crate::artifact::check_committed_ref(r, &content)?;
        }
        Ok(())
    }

    pub(crate) fn check_caps(&self, p: &Prepared) -> Result<()> {
        let artifact_bytes: u64 = p.artifacts.iter().map(|a| a.len() as u64).sum();
        let commit = p.bytes.len() as u64 + artifact_bytes;
        if commit > self.options.max_commit_bytes {
            let limit = self.options.max_commit_bytes;
            return Err(Error::TooLarge {
                what: "commit",
                limit,
                actual: commit,
            });
        }
        let ledger = self.state.log_len() + p.bytes.len() as u64;
        if ledger > self.options.max_ledger_bytes {
            let limit = self.options.max_ledger_bytes;
            return Err(Error::TooLarge {
                what: "ledger",
                limit,
                actual: ledger,
            });
        }
        Ok(())
    }
}
