//! [`FileBackend`]: the embedded default store, one directory per conversation.
//!
//! ```text
//! <root>/
//!   <conversation>/      ledger files (docs/ledger-format.md), artifacts/, recall.sqlite
//!   .erasing-<name>-…    a conversation being erased (renamed here first, then removed)
//!   .<name>-secret       a store secret (`.gateway-secret`: the gateway's), below
//!   .places.sqlite       the places index, with its -wal and -shm files ([`super::places`])
//! ```
//!
//! # Format
//!
//! A store secret `NAME` ([`Backend::secret`]) is the file `<root>/.NAME-secret`: 64
//! lowercase hex digits (the 32 bytes), no newline, mode 0600. It is written whole to
//! `.NAME-secret.<pid>-<n>.tmp` (mode 0600, synced) and hard-linked to its name, which fails if
//! another process linked its own first: that one is then read, so the file is never seen
//! partly written and every process reads the same bytes. The root's entry is synced before
//! the secret is used. A file that is not 64 hex digits is an error naming it: delete it and
//! a new secret is created (what that changes is up to its user: docs/gateway.md).
//!
//! All of it goes through the ledger's [`Storage`] trait, so the store's own directory work
//! (creating, listing, erasing conversations) runs under the same crash and fault tests as the
//! ledger's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctxlog_backend::{
    Backend, ConversationInfo, ConversationName, Error, LedgerView, LedgerWriter, OpenedWriter,
    PlaceDigest, PlaceMark, PlacesUpdate, Result, Secret, SecretName,
};
use ctxlog_ledger::format::names;
use ctxlog_ledger::{
    DirStorage, Ledger, Options, Reader, Storage, VerifyReport, storage::OpenMode,
};

use super::places::{PLACES_FILE, PlacesFile};

/// Directories being erased are renamed to this prefix first; it is not a valid conversation
/// name, so nothing else ever opens them.
const TRASH_PREFIX: &str = ".erasing-";

/// The name of the recall index file inside a conversation directory.
const RECALL_INDEX_FILE: &str = "recall.sqlite";

/// A directory of conversations (the embedded default store).
pub struct FileBackend {
    path: PathBuf,
    root: Arc<dyn Storage>,
    /// Where recall caches live when the conversations are not in a directory of their own
    /// (`<dir>/<name>.recall.sqlite`); `None`: inside each conversation's directory.
    cache_dir: Option<PathBuf>,
    options: Options,
    /// The root and its ancestors that did not exist when the store was opened, innermost
    /// first: a refused first commit removes them again if they are still empty.
    missing_at_open: Vec<PathBuf>,
    /// The places index: `<root>/.places.sqlite` (`<cache_dir>/.places.sqlite` when the
    /// store is not a directory on disk).
    places: PlacesFile,
}

impl std::fmt::Debug for FileBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileBackend")
            .field("root", &self.path)
            .finish_non_exhaustive()
    }
}

impl FileBackend {
    /// The store at `root`; every conversation is opened with `options`. Nothing is created
    /// until the first conversation is.
    pub fn new(root: impl AsRef<Path>, options: Options) -> FileBackend {
        let path = root.as_ref().to_path_buf();
        FileBackend {
            root: Arc::new(DirStorage::new(&path)),
            cache_dir: None,
            missing_at_open: missing_ancestors(&path),
            places: PlacesFile::new(path.join(PLACES_FILE)),
            path,
            options,
        }
    }

    /// The store over any [`Storage`] (tests run it in memory and with injected faults);
    /// only the recall caches, SQLite files, live on disk, under `cache_dir`.
    pub fn with_storage(
        root: Arc<dyn Storage>,
        cache_dir: impl AsRef<Path>,
        options: Options,
    ) -> FileBackend {
        FileBackend {
            path: root.location(),
            root,
            places: PlacesFile::new(cache_dir.as_ref().join(PLACES_FILE)),
            cache_dir: Some(cache_dir.as_ref().to_path_buf()),
            options,
            missing_at_open: Vec::new(),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.path
    }

    /// The storage of conversation `name` (its directory).
    fn scoped(&self, name: &str) -> Arc<dyn Storage> {
        self.root.scoped(name)
    }

    fn io(&self, name: &str) -> impl FnOnce(std::io::Error) -> Error + use<> {
        let path = self.path.join(name);
        move |source| Error::Io { path, source }
    }

    /// True when `name` holds a ledger.
    fn exists(&self, name: &ConversationName) -> Result<bool> {
        let log = format!("{name}/{}", names::LOG);
        self.root.exists(&log).map_err(self.io(&log))
    }

    /// Refuses a conversation whose directory entry exists but is not a real directory (a
    /// symlink, even to a directory): writing or erasing through it would change files
    /// outside the store, and an erasure would remove the link and leave the data.
    fn check_real_dir(&self, name: &ConversationName) -> Result<()> {
        let n = name.as_str();
        let exists = self.root.exists(n).map_err(self.io(n))?;
        if exists && !self.root.is_dir(n).map_err(self.io(n))? {
            let why = format!(
                "{} is a symlink or not a directory: ctxlog refuses to write or erase a \
                 conversation through it",
                self.path.join(n).display()
            );
            return Err(self.io(n)(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                why,
            )));
        }
        Ok(())
    }

    fn not_found(&self, name: &ConversationName) -> Error {
        Error::NotFound {
            name: name.to_string(),
            root: self.path.clone(),
        }
    }

    /// Removes every trash directory under the root (erasures a crash interrupted).
    fn sweep_trash(&self) -> Result<()> {
        for entry in self.root.list("").map_err(self.io(""))? {
            if entry.starts_with(TRASH_PREFIX) {
                self.root.remove_all(&entry).map_err(self.io(&entry))?;
            }
        }
        self.root.sync_dir("").map_err(self.io(""))
    }

    fn info(&self, name: &str) -> Result<ConversationInfo> {
        let reader = Reader::open_with(self.scoped(name))?;
        let last_activity_ms = reader.newest_ms()?;
        let log = format!("{name}/{}", names::LOG);
        let bytes = match self
            .root
            .open(&log, OpenMode::Read)
            .map_err(self.io(&log))?
        {
            Some(file) => file.len().map_err(self.io(&log))?,
            None => 0,
        };
        Ok(ConversationInfo {
            name: name.to_string(),
            events: reader.live_events()?,
            bytes,
            last_activity_ms,
            damage: None,
        })
    }

    /// The listing entry of a conversation that cannot be read: its name, the log's size,
    /// and what is wrong, so that one damaged conversation never hides the others.
    fn damaged_info(&self, name: &str, e: &ctxlog_ledger::Error) -> ConversationInfo {
        let log = format!("{name}/{}", names::LOG);
        let bytes = self
            .root
            .open(&log, OpenMode::Read)
            .ok()
            .flatten()
            .and_then(|file| file.len().ok())
            .unwrap_or(0);
        ConversationInfo {
            name: name.to_string(),
            events: 0,
            bytes,
            last_activity_ms: 0,
            damage: Some(e.without_path()),
        }
    }
}

impl Backend for FileBackend {
    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn open_writer(&self, name: &ConversationName, create: bool) -> Result<OpenedWriter> {
        self.check_real_dir(name)?;
        let existed = self.exists(name)?;
        if !existed && !create {
            return Err(self.not_found(name));
        }
        let (ledger, recovery) = Ledger::open_with(self.scoped(name.as_str()), &self.options)?;
        Ok(OpenedWriter {
            writer: Box::new(ledger),
            recovery,
            created: !existed,
        })
    }

    fn open_view(&self, name: &ConversationName) -> Result<Box<dyn LedgerView>> {
        if !self.exists(name)? {
            return Err(self.not_found(name));
        }
        match Reader::open_with(self.scoped(name.as_str())) {
            Ok(reader) => Ok(Box::new(reader)),
            // Removed since the check above (erased, or created by a commit that was refused
            // and so removed again): it does not exist.
            Err(ctxlog_ledger::Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Err(self.not_found(name))
            }
            Err(e) => Err(e.into()),
        }
    }

    fn discard_created(
        &self,
        name: &ConversationName,
        writer: Box<dyn LedgerWriter>,
    ) -> Result<()> {
        // Still holding the writer lock while removing: nobody else can have written here.
        self.root
            .remove_all(name.as_str())
            .map_err(self.io(name.as_str()))?;
        drop(writer);
        self.root.sync_dir("").map_err(self.io(""))?;
        // The directories above the store are not the store's: they are removed only if this
        // process found them missing and they are still empty (remove_dir refuses otherwise).
        for dir in &self.missing_at_open {
            if std::fs::remove_dir(dir).is_err() {
                break;
            }
        }
        Ok(())
    }

    fn list(&self) -> Result<Vec<ConversationInfo>> {
        let mut infos = Vec::new();
        for entry in self.root.list("").map_err(self.io(""))? {
            let Ok(name) = ConversationName::new(&entry) else {
                continue;
            };
            if !self.exists(&name)? {
                continue;
            }
            match self.info(name.as_str()) {
                Ok(info) => infos.push(info),
                // Erased since the directory was listed.
                Err(Error::Ledger(ctxlog_ledger::Error::Io { source, .. }))
                    if source.kind() == std::io::ErrorKind::NotFound
                        && !self.exists(&name).unwrap_or(true) => {}
                Err(Error::Ledger(e)) => infos.push(self.damaged_info(name.as_str(), &e)),
                Err(e) => return Err(e),
            }
        }
        Ok(infos)
    }

    fn verify(&self, name: &ConversationName) -> Result<VerifyReport> {
        if !self.exists(name)? {
            return Err(self.not_found(name));
        }
        Ok(ctxlog_ledger::verify_with(self.scoped(name.as_str()))?)
    }

    fn salvage(
        &self,
        name: &ConversationName,
        visit: &mut dyn FnMut(ctxlog_ledger::Salvaged) -> ctxlog_ledger::Result<()>,
    ) -> Result<ctxlog_ledger::SalvageReport> {
        if !self.exists(name)? {
            return Err(self.not_found(name));
        }
        Ok(ctxlog_ledger::salvage_with(
            self.scoped(name.as_str()),
            visit,
        )?)
    }

    fn repair(
        &self,
        name: &ConversationName,
        accept_loss: bool,
    ) -> Result<ctxlog_ledger::RepairReport> {
        if !self.exists(name)? {
            return Err(self.not_found(name));
        }
        Ok(ctxlog_ledger::repair_with(
            self.scoped(name.as_str()),
            accept_loss,
            &self.options,
        )?)
    }

    /// Renames the directory to a hidden trash name (one atomic step, synced: from then on
    /// the conversation is gone), then removes the trash with everything in it (ledger,
    /// sidecars, artifacts, recovered tails, recall index). Trash a crash left mid-removal
    /// is swept by the next `erase_all` in the store.
    fn erase_all(&self, name: &ConversationName, writer: Box<dyn LedgerWriter>) -> Result<()> {
        self.trash(name, writer)
    }

    /// Holds the conversation's writer lock alone (no ledger is opened: it is damaged) while
    /// the directory is renamed to trash, then removes it as [`Backend::erase_all`] does.
    fn erase_all_damaged(&self, name: &ConversationName) -> Result<()> {
        let lock = self
            .scoped(name.as_str())
            .try_lock(None)
            .map_err(self.io(name.as_str()))?
            .ok_or_else(|| ctxlog_ledger::Error::Locked {
                path: self.path.join(name.as_str()),
            })?;
        self.trash(name, lock)
    }

    /// `<root>/.NAME-secret` (the module's format). A store over another storage than its
    /// directory ([`FileBackend::with_storage`]) keeps no secret: refused.
    fn secret(&self, name: SecretName<'_>) -> Result<Secret> {
        if self.cache_dir.is_some() {
            return Err(Error::InvalidRequest {
                reason: format!(
                    "the store at {} is not a directory on disk and keeps no secret",
                    self.path.display()
                ),
            });
        }
        let path = self.path.join(format!(".{name}-secret"));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        if !path.exists() {
            create_secret(&self.path, &path).map_err(io(&path))?;
        }
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        ctxlog_backend::from_hex(&text).ok_or_else(|| Error::Io {
            path: path.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not 64 hex digits: delete the file to create a new secret \
                 (docs/gateway.md says what a new one changes)",
            ),
        })
    }

    fn recall_cache(&self, name: &ConversationName) -> PathBuf {
        match &self.cache_dir {
            None => self.path.join(name.as_str()).join(RECALL_INDEX_FILE),
            Some(dir) => dir.join(format!("{name}.{RECALL_INDEX_FILE}")),
        }
    }

    /// The log's length.
    fn place_stamp(&self, name: &ConversationName) -> Result<i64> {
        let log = format!("{name}/{}", names::LOG);
        let len = match self.root.open(&log, OpenMode::Read) {
            Ok(Some(file)) => file.len().map_err(self.io(&log))?,
            Ok(None) => 0,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(self.io(&log)(e)),
        };
        Ok(i64::try_from(len).unwrap_or(i64::MAX))
    }

    fn place_mark(&self, name: &ConversationName) -> Result<Option<PlaceMark>> {
        if !self.places_dir()? {
            return Ok(None);
        }
        self.places.mark(name.as_str())
    }

    fn put_places(
        &self,
        name: &ConversationName,
        expected: Option<PlaceMark>,
        update: PlacesUpdate<'_>,
    ) -> Result<bool> {
        if !self.places_dir()? {
            return Ok(false);
        }
        self.places.put(name.as_str(), expected, update)
    }

    /// Nothing to forget (and no file created) when the store has no places index.
    fn forget_places(&self, name: &ConversationName) -> Result<()> {
        if !self.places.exists() {
            return Ok(());
        }
        self.places.forget(name.as_str(), true)
    }

    fn places_of(&self, digest: &PlaceDigest, limit: usize) -> Result<Vec<(String, u64)>> {
        if !self.places_dir()? {
            return Ok(Vec::new());
        }
        self.places.places_of(digest, limit)
    }

    /// Lists the root and reads each log's length (no event is read); a mark whose
    /// conversation is gone is deleted with its places.
    fn places_behind(&self) -> Result<Vec<String>> {
        if !self.places_dir()? {
            return Ok(Vec::new());
        }
        let mut marks: std::collections::HashMap<String, i64> =
            self.places.stamps()?.into_iter().collect();
        let mut behind = Vec::new();
        for entry in self.root.list("").map_err(self.io(""))? {
            let Ok(name) = ConversationName::new(&entry) else {
                continue;
            };
            let stamp = self.place_stamp(&name)?;
            let marked = marks.remove(name.as_str());
            if stamp > 0 && marked != Some(stamp) {
                behind.push(entry);
            }
        }
        for gone in marks.keys() {
            self.places.forget(gone, false)?;
        }
        Ok(behind)
    }
}

impl FileBackend {
    /// Whether the places index's directory exists (created for a cache directory): a store
    /// whose root does not exist yet has no places.
    fn places_dir(&self) -> Result<bool> {
        match &self.cache_dir {
            Some(dir) => std::fs::create_dir_all(dir)
                .map(|()| true)
                .map_err(|source| Error::Io {
                    path: dir.clone(),
                    source,
                }),
            None => Ok(self.path.is_dir()),
        }
    }

    /// Renames the conversation's directory to trash while `held` (its writer, or its lock)
    /// keeps other writers out, then removes the trash (see [`Backend::erase_all`]).
    fn trash<H>(&self, name: &ConversationName, held: H) -> Result<()> {
        self.check_real_dir(name)?;
        let trash = format!("{TRASH_PREFIX}{name}-{}", std::process::id());
        self.root
            .rename(name.as_str(), &trash)
            .map_err(self.io(name.as_str()))?;
        drop(held);
        self.root.sync_dir("").map_err(self.io(""))?;
        if self.cache_dir.is_some() {
            ctxlog_recall::RecallIndex::delete_files(self.recall_cache(name))?;
        }
        self.sweep_trash()
    }
}

/// Writes a new secret to `path` unless another process did first (the module's format).
fn create_secret(root: &Path, path: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let secret = ctxlog_backend::new_secret().map_err(std::io::Error::other)?;
    std::fs::create_dir_all(root)?;
    // Unique to this call: threads of one process may create it at once too.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(format!(".{}-{call}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp_name);
    let _ = std::fs::remove_file(&tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&tmp).and_then(|mut file| {
        file.write_all(ctxlog_backend::to_hex(&secret).as_bytes())?;
        file.sync_all()
    });
    let linked = written.and_then(|()| match std::fs::hard_link(&tmp, path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    });
    let _ = std::fs::remove_file(&tmp);
    linked?;
    std::fs::File::open(root)?.sync_all()
}

/// `dir` and its ancestors that do not exist, innermost first.
fn missing_ancestors(dir: &Path) -> Vec<PathBuf> {
    dir.ancestors()
        .take_while(|p| !p.as_os_str().is_empty() && !p.exists())
        .map(Path::to_path_buf)
        .collect()
}
