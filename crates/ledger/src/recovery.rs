//! Recovery (docs/design.md#l2-recovery): what the writer's open does to the log before and after
//! loading it: creating the log (or re-creating one cut inside its header), checking every record
//! when asked to, and cutting a torn tail aside under `recovered/`. The [`RecoveryReport`] says
//! what was repaired.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::Result;
use crate::files::{io_err, new_ledger_id, now_ms, open_log};
use crate::format::{LOG_HEADER_LEN, LogHeader, names};
use crate::options::SyncMode;
use crate::scan::{self, ScanStart};
use crate::state::LedgerState;
use crate::storage::Storage;

/// What `open` repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RecoveryReport {
    /// Bytes cut from the end of the log (an incomplete commit or a torn record).
    pub bytes_cut: u64,
    /// Seq of the last event of the last complete commit kept.
    pub last_good_seq: u64,
    /// Where the cut bytes were saved, if any were cut.
    pub saved_to: Option<PathBuf>,
    /// Why the tail was cut.
    pub reason: Option<String>,
    /// True when the sidecar index was missing or stale and rebuilt from the log.
    pub index_rebuilt: bool,
}

impl RecoveryReport {
    /// True when nothing was cut.
    pub fn is_clean(&self) -> bool {
        self.bytes_cut == 0
    }
}

/// Scans the whole log and fails on corruption (a torn tail is left to the normal open).
pub(crate) fn check_whole_log(st: &dyn Storage) -> Result<()> {
    let Some((log, file_len)) = open_log(st)? else {
        return Ok(());
    };
    if file_len < LOG_HEADER_LEN as u64 {
        return Ok(()); // no records; the header check that follows reports it
    }
    scan::scan(log.as_ref(), file_len, ScanStart::log_start())
        .map_err(io_err(st, names::LOG))?
        .or_corrupt(st.location().join(names::LOG))?;
    Ok(())
}

/// Removes the temporary files that killed processes left: `artifacts/.tmp-*` (a commit
/// killed before its artifact's rename) and `*.tmp` in the conversation directory (a log or
/// sidecar replacement killed before its rename). Only the writer calls this, holding the
/// lock, so none of them is in use. An `artifacts/` that is not a real directory (a symlink)
/// is left alone: nothing is ever removed through it.
pub(crate) fn remove_stale_temporaries(st: &dyn Storage) -> Result<()> {
    let mut stale: Vec<String> = Vec::new();
    if st
        .is_dir(names::ARTIFACTS)
        .map_err(io_err(st, names::ARTIFACTS))?
    {
        let entries = st
            .list(names::ARTIFACTS)
            .map_err(io_err(st, names::ARTIFACTS))?;
        stale.extend(
            entries
                .into_iter()
                .filter(|n| n.starts_with(".tmp-"))
                .map(|n| format!("{}/{n}", names::ARTIFACTS)),
        );
    }
    let top = st.list("").map_err(io_err(st, ""))?;
    stale.extend(top.into_iter().filter(|n| n.ends_with(".tmp")));
    for name in &stale {
        st.remove(name).map_err(io_err(st, name))?;
    }
    Ok(())
}

/// Creates `ledger.log` with a fresh header, atomically (temporary file, sync, rename).
pub(crate) fn create_log_if_missing(st: &dyn Storage, sync: SyncMode) -> Result<()> {
    if st.exists(names::LOG).map_err(io_err(st, names::LOG))? {
        return Ok(());
    }
    write_fresh_log(st, sync)
}

/// Repairs a creation cut short: a `ledger.log` shorter than its 64-byte header (possible
/// only without syncs: the header's temporary file was renamed before its bytes were on
/// disk). No record can exist in it (records start at offset 64), so nothing is lost: its
/// bytes are saved under `recovered/` like a cut tail, and the log is created afresh (a new
/// ledger id; the sidecars, stamped with the old one, are rebuilt). A file of 64 bytes or
/// more is never touched here: a bad header there is corruption, and open fails closed.
pub(crate) fn recreate_if_torn_at_creation(
    st: &dyn Storage,
    sync: SyncMode,
) -> Result<Option<RecoveryReport>> {
    let Some((log, len)) = open_log(st)? else {
        return Ok(None);
    };
    if len >= LOG_HEADER_LEN as u64 {
        return Ok(None);
    }
    // A sidecar with an intact entry proves commits were acknowledged: this is not a
    // creation cut short but a log that lost them. Fail closed rather than start afresh.
    let acked = crate::sidecar::acknowledged(st, None).map_err(io_err(st, names::EVENT_INDEX))?;
    crate::sidecar::check_acknowledged(st, acked, 0, 0)?;
    let mut partial = vec![0u8; len as usize];
    log.read_at(0, &mut partial)
        .map_err(io_err(st, names::LOG))?;
    drop(log);
    let saved_to = if partial.is_empty() {
        None
    } else {
        Some(save_aside(st, 0, &partial)?)
    };
    write_fresh_log(st, sync)?;
    Ok(Some(RecoveryReport {
        bytes_cut: len,
        last_good_seq: 0,
        saved_to,
        reason: Some(format!(
            "ledger.log was {len} bytes, shorter than its {LOG_HEADER_LEN}-byte header (a \
             creation cut short; no record can exist): the log was created afresh"
        )),
        index_rebuilt: false,
    }))
}

/// Writes a new `ledger.log` (fresh id and header) through a synced temporary file and a
/// rename, replacing any file of that name.
fn write_fresh_log(st: &dyn Storage, sync: SyncMode) -> Result<()> {
    let tmp = format!("{}.tmp", names::LOG);
    let header = LogHeader::new(new_ledger_id(), now_ms());
    let io = |name: &str| io_err(st, name);
    let mut f = crate::files::create_fresh(st, &tmp)?;
    f.set_len(0).map_err(io(&tmp))?;
    f.write_at(0, &header.encode()).map_err(io(&tmp))?;
    if sync == SyncMode::PerCommit {
        f.sync().map_err(io(&tmp))?;
    }
    drop(f);
    st.rename(&tmp, names::LOG).map_err(io(names::LOG))?;
    if sync == SyncMode::PerCommit {
        st.sync_dir("").map_err(io(""))?;
    }
    Ok(())
}

/// Saves `[offset, file_len)` under `recovered/`, then truncates the log there.
pub(crate) fn cut_tail(
    state: &mut LedgerState,
    offset: u64,
    file_len: u64,
    reason: String,
) -> Result<RecoveryReport> {
    let st = state.storage().clone();
    let st = st.as_ref();
    let mut cut = vec![0u8; (file_len - offset) as usize];
    state
        .log()
        .read_at(offset, &mut cut)
        .map_err(io_err(st, names::LOG))?;
    let saved_to = save_aside(st, offset, &cut)?;
    state.truncate_log(offset)?;
    Ok(RecoveryReport {
        bytes_cut: cut.len() as u64,
        last_good_seq: state.last_seq(),
        saved_to: Some(saved_to),
        reason: Some(reason),
        index_rebuilt: false,
    })
}

/// Writes `bytes` (cut from the log at `offset`) to `recovered/tail-<offset>-<ms>.bin`,
/// synced, directory synced; returns its path.
fn save_aside(st: &dyn Storage, offset: u64, bytes: &[u8]) -> Result<PathBuf> {
    save_aside_as(st, "tail", offset, bytes)
}

/// Writes `bytes` (taken from the log at `offset`) to `recovered/<what>-<offset>-<ms>.bin`,
/// synced, directory synced; returns its path. A repair saves its damaged bytes this way.
pub(crate) fn save_aside_as(
    st: &dyn Storage,
    what: &str,
    offset: u64,
    bytes: &[u8],
) -> Result<PathBuf> {
    let name = format!("{}/{what}-{offset}-{}.bin", names::RECOVERED, now_ms());
    let io = |n: &str| io_err(st, n);
    crate::artifact::ensure_dir(st, names::RECOVERED, true, &mut false)?;
    let mut f = crate::files::create_fresh(st, &name)?;
    f.set_len(0).map_err(io(&name))?;
    f.write_at(0, bytes).map_err(io(&name))?;
    f.sync().map_err(io(&name))?;
    st.sync_dir(names::RECOVERED)
        .map_err(io(names::RECOVERED))?;
    Ok(st.location().join(&name))
}
