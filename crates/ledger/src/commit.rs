//! Turning a [`NewCommit`] into log records: large tool outputs become artifacts
//! (docs/design.md#l5-caps), each event is encoded with its `ledger.idx` entry, and the caps are
//! checked before anything is written.

use crate::error::{Error, Result};
use crate::event::{EventBody, EventKind, NewCommit};
use crate::format::{
    self, CommitEntry, Counts, EventEntry, FLAG_COMMIT_META, FLAG_END_OF_COMMIT, RECORD_HEADER_LEN,
};
use crate::options::Options;
use crate::rules;
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
    /// Each event's time (ms), resolved by [`rules::resolve_times`].
    times: &'a [i64],
    first_seq: u64,
    /// Events in the commit.
    n: usize,
}

/// The commit metadata the last record carries when the commit has an id (empty if not).
fn commit_meta(commit: &NewCommit, key: Option<&([u8; 32], [u8; 32])>) -> Result<Vec<u8>> {
    match (&commit.id, key) {
        (Some(id), Some((_, digest))) => rules::commit_meta(id, digest),
        _ => Ok(Vec::new()),
    }
}

/// Prepares commits against the current state and the writer's options.
pub(crate) struct Preparer<'a> {
    pub state: &'a LedgerState,
    pub options: &'a Options,
}

impl Preparer<'_> {
    /// Turns large tool outputs into artifacts and encodes the records; event `i` gets time
    /// `times[i]` (one per event, from [`rules::resolve_times`]).
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
        let (body, artifacts) = rules::offload(i + 1, body, self.options.artifact_threshold)?;
        d.p.artifacts.extend(artifacts);
        let json = serde_json::to_vec(&body)
            .map_err(|e| Error::invalid(format!("event {} cannot be encoded: {e}", i + 1)))?;
        rules::check_record(&self.caps(), json.len() + meta.len())?;
        let seq = d.first_seq + i as u64;
        let last = i + 1 == d.n;
        let offset = self.state.log_len() + d.p.bytes.len() as u64;
        let flags = if last { FLAG_END_OF_COMMIT } else { 0 };
        let kind = body.kind();
        let (index, ts) = (i as u32, d.times.get(i).copied().unwrap_or(0));
        let crc = format::encode_record(&mut d.p.bytes, kind, flags, index, seq, ts, &json, meta);
        d.counts.add(kind, seq);
        match kind {
            EventKind::User => d.p.user_seqs.push(seq),
            EventKind::Note => d.p.note_seqs.push(seq),
            _ => {}
        }
        d.counts.commits += u32::from(last && !meta.is_empty());
        let meta_flag = if meta.is_empty() { 0 } else { FLAG_COMMIT_META };
        let record_len = (RECORD_HEADER_LEN + json.len() + meta.len()) as u32;
        let entry = d
            .counts
            .entry(offset, record_len, crc, kind, flags | meta_flag);
        d.p.entries.push(entry);
        Ok(())
    }

    /// A caller-supplied artifact reference must name an artifact already stored here.
    fn check_artifact_ref(&self, body: &EventBody) -> Result<()> {
        for r in body.artifact_refs() {
            let st = self.state.storage().as_ref();
            let content = crate::artifact::read_stored(st, &r.name)?;
            rules::check_artifact_ref(r, &content)?;
        }
        Ok(())
    }

    /// Refuses a prepared commit over the commit cap or that would take the log over the
    /// ledger cap.
    pub(crate) fn check_caps(&self, p: &Prepared) -> Result<()> {
        let artifact_bytes: u64 = p.artifacts.iter().map(|a| a.len() as u64).sum();
        let records = p.bytes.len() as u64;
        rules::check_commit_size(&self.caps(), records, artifact_bytes, self.state.log_len())
    }

    fn caps(&self) -> rules::Caps {
        rules::caps(self.options)
    }
}
