//! The writer's settings: [`Options`] (a reusable builder) and [`SyncMode`].

use std::time::Duration;

/// When `commit` makes its bytes durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyncMode {
    /// fsync (fdatasync) the log after every commit, and artifacts before it. The default:
    /// `commit` returns only after the batch is on disk (docs/design.md#l1-durable-append).
    #[default]
    PerCommit,
    /// Never sync. A crash of the machine (not just the process) may lose acknowledged commits;
    /// a torn tail is still detected and cut. For tests and bulk imports.
    Never,
}

/// Settings for [`crate::Ledger::open`]. Build with `Options::default()` and the setters.
#[derive(Clone, Debug)]
pub struct Options {
    pub(crate) sync: SyncMode,
    pub(crate) max_record_bytes: u64,
    pub(crate) max_commit_bytes: u64,
    pub(crate) max_ledger_bytes: u64,
    pub(crate) artifact_threshold: u64,
    pub(crate) lock_wait: Option<Duration>,
    pub(crate) check_on_open: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            sync: SyncMode::PerCommit,
            max_record_bytes: 4 << 20,
            max_commit_bytes: 16 << 20,
            max_ledger_bytes: 64 << 30,
            artifact_threshold: 16 << 10,
            lock_wait: None,
            check_on_open: false,
        }
    }
}

impl Options {
    /// Sync policy. Default [`SyncMode::PerCommit`].
    pub fn sync(&mut self, mode: SyncMode) -> &mut Options {
        self.sync = mode;
        self
    }
    /// Largest record (40-byte header + event JSON + commit metadata). Default 4 MiB.
    pub fn max_record_bytes(&mut self, bytes: u64) -> &mut Options {
        self.max_record_bytes = bytes;
        self
    }
    /// Largest commit: its records plus the artifacts it creates. Default 16 MiB.
    pub fn max_commit_bytes(&mut self, bytes: u64) -> &mut Options {
        self.max_commit_bytes = bytes;
        self
    }
    /// Largest `ledger.log`. Default 64 GiB.
    pub fn max_ledger_bytes(&mut self, bytes: u64) -> &mut Options {
        self.max_ledger_bytes = bytes;
        self
    }
    /// A tool result whose text is longer than this many bytes is stored as an artifact and
    /// the event keeps a head/tail excerpt. Default 16 KiB.
    pub fn artifact_threshold(&mut self, bytes: u64) -> &mut Options {
        self.artifact_threshold = bytes;
        self
    }
    /// How long `open` waits for another writer to let go. Default `None`: fail at once with
    /// [`crate::Error::Locked`].
    pub fn lock_wait(&mut self, wait: Option<Duration>) -> &mut Options {
        self.lock_wait = wait;
        self
    }
    /// Check every record's checksum on open (one sequential read of the whole log), so that
    /// corruption anywhere fails the open. Default `false`: open reads only what the sidecar
    /// index does not cover (docs/design.md#l7-bounded-memory); damage inside the indexed part is
    /// then found when the damaged record is read (every read checks its CRC) and by `verify`.
    pub fn check_on_open(&mut self, check: bool) -> &mut Options {
        self.check_on_open = check;
        self
    }
    /// A copy of these options (the builder is reusable).
    pub fn build(&self) -> Options {
        self.clone()
    }
}

impl Options {
    /// True when the writer syncs (the log per commit, artifacts before it).
    pub(crate) fn syncs(&self) -> bool {
        self.sync == SyncMode::PerCommit
    }
}
