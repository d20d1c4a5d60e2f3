//! Small helpers every layer above the storage uses: storage I/O errors as crate errors
//! (naming the path), opening a file that must exist, the clock, fresh ledger ids.

use std::io;

use crate::error::{Error, Result};
use crate::format::names;
use crate::storage::{OpenMode, Storage, StorageFile};

/// Turns an I/O error on `name` into [`Error::Io`] with its full path.
pub(crate) fn io_err(storage: &dyn Storage, name: &str) -> impl FnOnce(io::Error) -> Error + use<> {
    let path = storage.location().join(name);
    move |source| Error::Io { path, source }
}

/// Opens `name` in `mode`; a file that is not there is an I/O `NotFound` error naming its
/// path.
pub(crate) fn open_file(
    storage: &dyn Storage,
    name: &str,
    mode: OpenMode,
) -> Result<Box<dyn StorageFile>> {
    storage
        .open(name, mode)
        .map_err(io_err(storage, name))?
        .ok_or_else(|| io_err(storage, name)(io::ErrorKind::NotFound.into()))
}

/// The log opened for reading with its length, `None` when there is no log file.
pub(crate) fn open_log(storage: &dyn Storage) -> Result<Option<(Box<dyn StorageFile>, u64)>> {
    let Some(log) = storage
        .open(names::LOG, OpenMode::Read)
        .map_err(io_err(storage, names::LOG))?
    else {
        return Ok(None);
    };
    let len = log.len().map_err(io_err(storage, names::LOG))?;
    Ok(Some((log, len)))
}

/// Creates `name` afresh for writing: whatever is there (a stale temporary file, or a symlink
/// planted to redirect the write) is removed first (unlinking never follows a symlink), then
/// the file is created exclusively ([`OpenMode::CreateNew`]), so a symlink planted in between
/// makes this fail rather than write through it.
pub(crate) fn create_fresh(storage: &dyn Storage, name: &str) -> Result<Box<dyn StorageFile>> {
    storage.remove(name).map_err(io_err(storage, name))?;
    open_file(storage, name, OpenMode::CreateNew)
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A fresh random ledger id (from the std hasher's random keys, the clock and the pid).
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
