//! What the writer's open does to the files before and after loading the log: creating the
//! log (or re-creating one cut inside its header), cutting a torn tail aside, and making
//! the sidecars match what was loaded.

use std::path::PathBuf;

use crate::core::{Core, io_err};
use crate::error::Result;
use crate::format::{
    self, COMMIT_ENTRY_LEN, COMMIT_INDEX_MAGIC, EVENT_ENTRY_LEN, EVENT_INDEX_MAGIC,
    INDEX_HEADER_LEN, LOG_HEADER_LEN, LogHeader, NOTE_ENTRY_LEN, NOTE_INDEX_MAGIC, TURN_ENTRY_LEN,
    TURN_INDEX_MAGIC, names,
};
use crate::ledger::{RecoveryReport, SyncMode};
use crate::storage::{OpenMode, Storage, StorageFile};

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(crate) fn new_ledger_id() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    let mut id = [0u8; 16];
    for (i, half) in id.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .elapsed()
                .map_or(0, |d| d.as_nanos()),
        );
        h.write_u32(std::process::id());
        h.write_usize(i);
        h.write_i64(now_ms());
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    id
}

/// Scans the whole log and fails on corruption (a torn tail is left to the normal open).
pub(crate) fn check_whole_log(st: &dyn Storage) -> Result<()> {
    crate::verify::verify_log_only(st)
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
    let Some(log) = st
        .open(names::LOG, OpenMode::Read)
        .map_err(io_err(st, names::LOG))?
    else {
        return Ok(None);
    };
    let len = log.len().map_err(io_err(st, names::LOG))?;
    if len >= LOG_HEADER_LEN as u64 {
        return Ok(None);
    }
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
    let header = LogHeader {
        ledger_id: new_ledger_id(),
        created_ms: now_ms(),
    };
    let io = |name: &str| io_err(st, name);
    let mut f = crate::core::open_file(st, &tmp, OpenMode::Create)?;
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
    core: &mut Core,
    offset: u64,
    file_len: u64,
    reason: String,
) -> Result<RecoveryReport> {
    let st = core.storage.clone();
    let st = st.as_ref();
    let mut cut = vec![0u8; (file_len - offset) as usize];
    core.log
        .read_at(offset, &mut cut)
        .map_err(io_err(st, names::LOG))?;
    let saved_to = save_aside(st, offset, &cut)?;
    let io = |n: &str| io_err(st, n);
    core.log.set_len(offset).map_err(io(names::LOG))?;
    core.log.sync().map_err(io(names::LOG))?;
    Ok(RecoveryReport {
        bytes_cut: cut.len() as u64,
        last_good_seq: core.last_seq,
        saved_to: Some(saved_to),
        reason: Some(reason),
        index_rebuilt: false,
    })
}

/// Writes `bytes` (cut from the log at `offset`) to `recovered/tail-<offset>-<ms>.bin`,
/// synced, directory synced; returns its path.
fn save_aside(st: &dyn Storage, offset: u64, bytes: &[u8]) -> Result<PathBuf> {
    let name = format!("{}/tail-{offset}-{}.bin", names::RECOVERED, now_ms());
    let io = |n: &str| io_err(st, n);
    crate::artifact::ensure_dir(st, names::RECOVERED, true, &mut false)?;
    let mut f = crate::core::open_file(st, &name, OpenMode::Create)?;
    f.set_len(0).map_err(io(&name))?;
    f.write_at(0, bytes).map_err(io(&name))?;
    f.sync().map_err(io(&name))?;
    st.sync_dir(names::RECOVERED)
        .map_err(io(names::RECOVERED))?;
    Ok(st.location().join(&name))
}

/// The sidecar files the writer appends to besides `ledger.idx` (held in [`Core`]).
pub(crate) struct Sidecars {
    pub turns: Box<dyn StorageFile>,
    pub notes: Box<dyn StorageFile>,
    pub commits: Box<dyn StorageFile>,
}

/// Makes the sidecar files match `core`: trims entries past what was validated, or rebuilds
/// all four from the in-memory scan when they were missing or stale.
pub(crate) fn prepare_sidecars(core: &mut Core) -> Result<Sidecars> {
    let st = core.storage.clone();
    let st = st.as_ref();
    let id = core.header.ledger_id;
    if !core.sidecars_valid {
        for (name, magic, len) in sidecar_specs() {
            let tmp = format!("{name}.tmp");
            let mut f = crate::core::open_file(st, &tmp, OpenMode::Create)?;
            f.set_len(0).map_err(io_err(st, &tmp))?;
            f.write_at(0, &format::encode_index_header(magic, len, &id))
                .map_err(io_err(st, &tmp))?;
            drop(f);
            st.rename(&tmp, name).map_err(io_err(st, name))?;
        }
        core.indexed = 0;
        core.turns_persisted = 0;
        core.notes_persisted = 0;
        core.commits_persisted = 0;
        core.sidecars_valid = true;
    }
    let open = |name: &str| -> Result<Box<dyn StorageFile>> {
        crate::core::open_file(st, name, OpenMode::Write)
    };
    let mut idx = open(names::EVENT_INDEX)?;
    let mut turns = open(names::TURN_INDEX)?;
    let mut notes = open(names::NOTE_INDEX)?;
    let mut commits = open(names::COMMIT_INDEX)?;
    let h = INDEX_HEADER_LEN as u64;
    let trims: [(&mut Box<dyn StorageFile>, u64, &str); 4] = [
        (
            &mut idx,
            h + core.indexed * EVENT_ENTRY_LEN as u64,
            names::EVENT_INDEX,
        ),
        (
            &mut turns,
            h + core.turns_persisted * TURN_ENTRY_LEN as u64,
            names::TURN_INDEX,
        ),
        (
            &mut notes,
            h + core.notes_persisted * NOTE_ENTRY_LEN as u64,
            names::NOTE_INDEX,
        ),
        (
            &mut commits,
            h + core.commits_persisted * COMMIT_ENTRY_LEN as u64,
            names::COMMIT_INDEX,
        ),
    ];
    for (f, len, name) in trims {
        if f.len().map_err(io_err(st, name))? != len {
            f.set_len(len).map_err(io_err(st, name))?;
        }
    }
    core.idx = Some(idx);
    Ok(Sidecars {
        turns,
        notes,
        commits,
    })
}

/// The sidecars in rebuild order: `ledger.idx` last, so it never claims what the others lack.
fn sidecar_specs() -> [(&'static str, [u8; 8], usize); 4] {
    [
        (names::COMMIT_INDEX, COMMIT_INDEX_MAGIC, COMMIT_ENTRY_LEN),
        (names::TURN_INDEX, TURN_INDEX_MAGIC, TURN_ENTRY_LEN),
        (names::NOTE_INDEX, NOTE_INDEX_MAGIC, NOTE_ENTRY_LEN),
        (names::EVENT_INDEX, EVENT_INDEX_MAGIC, EVENT_ENTRY_LEN),
    ]
}
