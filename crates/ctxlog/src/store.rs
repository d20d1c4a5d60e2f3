//! [`Store`]: a root directory holding one directory per conversation.
//!
//! ```text
//! <root>/
//!   <conversation>/      ledger files (see docs/ledger-format.md), artifacts/, recall.sqlite
//! ```

use std::path::{Path, PathBuf};

use ctxlog_ledger::{CommitReceipt, Ledger, NewCommit, Options, Reader, RecoveryReport};

use crate::{Conversation, ConversationName, Error, Result, Snapshot};

/// Directories being erased are renamed to this prefix first; it is not a valid
/// conversation name, so nothing else ever opens them.
const TRASH_PREFIX: &str = ".erasing-";

/// The name of the recall index file inside a conversation directory.
pub(crate) const RECALL_INDEX_FILE: &str = "recall.sqlite";

/// A directory of conversations.
///
/// ```
/// # fn main() -> ctxlog::Result<()> {
/// let dir = tempfile::tempdir().unwrap();
/// let store = ctxlog::Store::open(dir.path());
/// let mut conv = store.conversation("demo")?;
/// let receipt = conv.commit_json(br#"{"user":"hi","assistant":"hello"}"#, None)?;
/// assert_eq!((receipt.first_seq, receipt.last_seq), (1, 2));
/// assert_eq!(store.list()?, vec!["demo".to_string()]);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
    options: Options,
}

impl Store {
    /// Opens the store at `root` with the ledger's default [`Options`].
    ///
    /// Nothing is created until the first conversation is: read-only use of a store leaves
    /// no trace, and a new root is created (and its entry synced) with its first ledger.
    pub fn open(root: impl AsRef<Path>) -> Store {
        Store::with_options(root, Options::default())
    }

    /// Opens the store at `root`; every conversation is opened with `options`.
    pub fn with_options(root: impl AsRef<Path>, options: Options) -> Store {
        Store {
            root: root.as_ref().to_path_buf(),
            options,
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Opens `name` for writing, creating it if needed. Holds the conversation's writer lock
    /// until dropped; a torn tail left by a crash is cut and reported
    /// ([`Conversation::recovery`]).
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`ctxlog_ledger::Error::Locked`] if another writer holds it;
    /// [`ctxlog_ledger::Error::Corrupt`] if a record before the tail is damaged.
    pub fn conversation(&self, name: &str) -> Result<Conversation> {
        let name = ConversationName::new(name)?;
        let dir = self.root.join(name.as_str());
        let (ledger, recovery): (Ledger, RecoveryReport) = Ledger::open(&dir, &self.options)?;
        Ok(Conversation::new(name, dir, ledger, recovery))
    }

    /// Commits one turn to `name` in a single call, creating the conversation if needed. If
    /// the commit is refused and this call created the conversation, the conversation is
    /// removed again: a rejected request leaves no trace (SPEC §9).
    ///
    /// # Errors
    /// As [`Store::conversation`] and [`Conversation::commit`].
    pub fn commit_to(&self, name: &str, commit: &NewCommit) -> Result<CommitReceipt> {
        let name = ConversationName::new(name)?;
        let dir = self.root.join(name.as_str());
        let created = missing_ancestors(&dir);
        let mut conv = self.conversation(name.as_str())?;
        let result = conv.commit(commit);
        if result.is_err() && !created.is_empty() && conv.last_seq() == 0 {
            // Still holding the writer lock: nobody else can have written here. Remove what
            // this call created, innermost first (remove_dir refuses anything non-empty).
            let _ = std::fs::remove_dir_all(&dir);
            for ancestor in created.iter().skip(1) {
                let _ = std::fs::remove_dir(ancestor);
            }
        }
        result
    }

    /// Erases the whole conversation `name` (SPEC E1): takes its writer lock (so no writer
    /// is mid-commit), renames its directory to a hidden trash name (one atomic step, synced:
    /// from then on the conversation is gone), then removes the trash with everything in it
    /// (ledger, sidecars, artifacts, recovered tails, recall index). Trash left by a crash
    /// mid-removal is swept by the next `erase_all` in the store.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::NotFound`]; [`ctxlog_ledger::Error::Locked`] when
    /// another writer holds it (nothing is removed); [`Error::Io`] when removal fails.
    pub fn erase_all(&self, name: &str) -> Result<()> {
        let name = ConversationName::new(name)?;
        let dir = self.conversation_dir(&name)?;
        let conv = self.conversation(name.as_str())?;
        let trash = self
            .root
            .join(format!("{TRASH_PREFIX}{name}-{}", std::process::id()));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        std::fs::rename(&dir, &trash).map_err(io(&dir))?;
        drop(conv);
        sync_dir(&self.root).map_err(io(&self.root))?;
        self.sweep_trash()
    }

    /// Removes every trash directory under the root (erasures that a crash interrupted).
    fn sweep_trash(&self) -> Result<()> {
        let io = |path: PathBuf| move |source| Error::Io { path, source };
        for entry in std::fs::read_dir(&self.root).map_err(io(self.root.clone()))? {
            let entry = entry.map_err(io(self.root.clone()))?;
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(TRASH_PREFIX)
            {
                std::fs::remove_dir_all(entry.path()).map_err(io(entry.path()))?;
            }
        }
        sync_dir(&self.root).map_err(io(self.root.clone()))
    }

    /// Opens `name` for reading only: takes no lock, writes nothing to the ledger, and sees
    /// every commit acknowledged before the call.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::NotFound`], or a ledger error.
    pub fn snapshot(&self, name: &str) -> Result<Snapshot> {
        let name = ConversationName::new(name)?;
        let dir = self.conversation_dir(&name)?;
        let reader = Reader::open(&dir)?;
        Ok(Snapshot::new(name, dir, reader, RecoveryReport::default()))
    }

    /// The directory of an existing conversation: one that holds a ledger.
    ///
    /// # Errors
    /// [`Error::NotFound`] if there is no ledger under that name.
    pub fn conversation_dir(&self, name: &ConversationName) -> Result<PathBuf> {
        let dir = self.root.join(name.as_str());
        if dir.join(ctxlog_ledger::format::names::LOG).is_file() {
            Ok(dir)
        } else {
            Err(Error::NotFound {
                name: name.to_string(),
                root: self.root.clone(),
            })
        }
    }

    /// Opens an existing conversation for writing; never creates one.
    ///
    /// # Errors
    /// [`Error::NotFound`] if there is no ledger under that name; as [`Store::conversation`].
    pub fn existing_conversation(&self, name: &str) -> Result<Conversation> {
        self.conversation_dir(&ConversationName::new(name)?)?;
        self.conversation(name)
    }

    /// The names of the conversations in the store, sorted (none if the root does not exist).
    ///
    /// # Errors
    /// [`Error::Io`] if the root cannot be listed.
    pub fn list(&self) -> Result<Vec<String>> {
        let io = |source| Error::Io {
            path: self.root.clone(),
            source,
        };
        let mut names = Vec::new();
        let entries = match std::fs::read_dir(&self.root) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(names),
            entries => entries.map_err(io)?,
        };
        for entry in entries {
            let entry = entry.map_err(io)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() && ConversationName::new(&name).is_ok() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }
}

/// `dir` and its ancestors that do not exist yet, innermost first.
fn missing_ancestors(dir: &Path) -> Vec<PathBuf> {
    dir.ancestors()
        .take_while(|p| !p.as_os_str().is_empty() && !p.exists())
        .map(Path::to_path_buf)
        .collect()
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}
