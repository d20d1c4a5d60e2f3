//! [`Store`]: a root directory holding one directory per conversation.
//!
//! ```text
//! <root>/
//!   <conversation>/      ledger files (see docs/ledger-format.md), artifacts/, recall.sqlite
//! ```

use std::path::{Path, PathBuf};

use ctxlog_ledger::{Ledger, Options, Reader, RecoveryReport};

use crate::{Conversation, ConversationName, Error, Result, Snapshot};

/// The name of the recall index file inside a conversation directory.
pub(crate) const RECALL_INDEX_FILE: &str = "recall.sqlite";

/// A directory of conversations.
///
/// ```
/// # fn main() -> ctxlog::Result<()> {
/// let dir = tempfile::tempdir().unwrap();
/// let store = ctxlog::Store::open(dir.path())?;
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
    /// Opens (creating if needed) the store at `root` with the ledger's default [`Options`].
    ///
    /// # Errors
    /// [`Error::Io`] if the directory cannot be created.
    pub fn open(root: impl AsRef<Path>) -> Result<Store> {
        Store::with_options(root, Options::default())
    }

    /// Opens (creating if needed) the store at `root`; every conversation is opened with
    /// `options`.
    ///
    /// # Errors
    /// [`Error::Io`] if the directory cannot be created.
    pub fn with_options(root: impl AsRef<Path>, options: Options) -> Result<Store> {
        let root = root.as_ref().to_path_buf();
        std::fs::create_dir_all(&root).map_err(|source| Error::Io {
            path: root.clone(),
            source,
        })?;
        Ok(Store { root, options })
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

    /// Opens `name` for reading only: takes no lock, writes nothing to the ledger, and sees
    /// every commit acknowledged before the call.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::NotFound`], or a ledger error.
    pub fn snapshot(&self, name: &str) -> Result<Snapshot> {
        let name = ConversationName::new(name)?;
        let dir = self.conversation_dir(&name)?;
        let reader = Reader::open(&dir)?;
        Ok(Snapshot::new(name, dir, reader))
    }

    /// The directory of an existing conversation.
    ///
    /// # Errors
    /// [`Error::NotFound`] if it does not exist.
    pub fn conversation_dir(&self, name: &ConversationName) -> Result<PathBuf> {
        let dir = self.root.join(name.as_str());
        if dir.is_dir() {
            Ok(dir)
        } else {
            Err(Error::NotFound {
                name: name.to_string(),
                root: self.root.clone(),
            })
        }
    }

    /// The names of the conversations in the store, sorted.
    ///
    /// # Errors
    /// [`Error::Io`] if the root cannot be listed.
    pub fn list(&self) -> Result<Vec<String>> {
        let io = |source| Error::Io {
            path: self.root.clone(),
            source,
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.root).map_err(io)? {
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
