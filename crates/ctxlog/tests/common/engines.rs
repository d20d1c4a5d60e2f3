//! The two storage engines of the one backend suite (`backends.rs`, `backends_model.rs`):
//! how to open a fresh store on each, how to read back everything it stored (to prove a
//! refused request wrote nothing), and how to damage stored bytes.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use ctxlog::backend::FileBackend;
#[cfg(feature = "postgres")]
use ctxlog::backend::{PgBackend, PgConfig};
use ctxlog::ops::{CommitRequest, ExportRequest, LogRequest};
use ctxlog::{EventBody, NewCommit, Options, Store, SyncMode, ToolStatus};

#[cfg(feature = "postgres")]
use super::pg::PgCluster;

/// One engine under test.
pub trait Engine {
    fn name(&self) -> &'static str;
    /// A store over the place of `case` (its own directory or schema) with `options`: empty
    /// the first time, then another handle (another process, another replica) on it.
    fn store(&self, case: &str, options: &Options) -> Store;
    /// How many stores over one place may be open at once: 1 for the file store (its
    /// writer lock is per process), 2 for PostgreSQL (replicas).
    fn replicas(&self) -> usize;
    /// Everything stored for `case` (recall caches excepted), to compare before and after.
    fn fingerprint(&self, case: &str) -> String;
    /// How many artifacts `conversation` of `case` stores.
    fn artifacts(&self, case: &str, conversation: &str) -> usize;
    /// Flips bytes of the stored payload of `seq` of `conversation` in `case` (the text
    /// `needle` is in it).
    fn damage(&self, case: &str, conversation: &str, seq: u64, needle: &str);
    /// Flips the case of the first byte of artifact `name` of `conversation` in `case` (its
    /// size stays; flipping twice restores it).
    fn flip_artifact(&self, case: &str, conversation: &str, name: &str);
    /// The stored form of `seq` of `conversation` in `case` as it is on disk (the file
    /// store's record bytes; PostgreSQL's row), to compare before and after an operation.
    fn stored(&self, case: &str, conversation: &str, seq: u64) -> Vec<u8>;
}

/// The embedded file store, one directory per case.
pub struct Files {
    pub dir: tempfile::TempDir,
}

impl Files {
    pub fn new() -> Files {
        Files {
            dir: tempfile::tempdir().unwrap(),
        }
    }
}

/// Every file under `dir` but recall caches: relative path → bytes.
fn stored_files(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        if rel.contains("recall.sqlite") {
            continue;
        }
        if path.is_dir() {
            out.insert(format!("{rel}/"), Vec::new());
            stored_files(root, &path, out);
        } else {
            out.insert(rel, std::fs::read(&path).unwrap_or_default());
        }
    }
}

impl Engine for Files {
    fn name(&self) -> &'static str {
        "file store"
    }
    fn store(&self, case: &str, options: &Options) -> Store {
        let backend = FileBackend::new(self.dir.path().join(case), options.clone());
        Store::with_backend(Arc::new(backend)).unwrap()
    }
    fn replicas(&self) -> usize {
        1
    }
    fn fingerprint(&self, case: &str) -> String {
        let root = self.dir.path().join(case);
        let mut files = BTreeMap::new();
        stored_files(&root, &root, &mut files);
        files
            .iter()
            .map(|(k, v)| format!("{k}:{}", ctxlog::ledger::artifact_name(v)))
            .collect::<Vec<_>>()
            .join("\n")
    }
    fn artifacts(&self, case: &str, conversation: &str) -> usize {
        let dir = self
            .dir
            .path()
            .join(case)
            .join(conversation)
            .join("artifacts");
        std::fs::read_dir(dir)
            .map(|d| d.flatten().count())
            .unwrap_or(0)
    }
    fn damage(&self, case: &str, conversation: &str, _seq: u64, needle: &str) {
        let log = self
            .dir
            .path()
            .join(case)
            .join(conversation)
            .join("ledger.log");
        let mut bytes = std::fs::read(&log).unwrap();
        let at = bytes
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
            .unwrap();
        bytes[at] ^= 0x20;
        std::fs::write(&log, bytes).unwrap();
    }
    fn flip_artifact(&self, case: &str, conversation: &str, name: &str) {
        let path = self
            .dir
            .path()
            .join(case)
            .join(conversation)
            .join("artifacts")
            .join(name);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[0] ^= 0x20;
        std::fs::write(path, bytes).unwrap();
    }
    fn stored(&self, case: &str, conversation: &str, seq: u64) -> Vec<u8> {
        let log = self
            .dir
            .path()
            .join(case)
            .join(conversation)
            .join("ledger.log");
        super::log_records(&std::fs::read(log).unwrap())[seq as usize - 1].clone()
    }
}

/// PostgreSQL: a throwaway cluster, one schema per case.
#[cfg(feature = "postgres")]
pub struct Postgres {
    pub cluster: PgCluster,
    pub cache: tempfile::TempDir,
}

#[cfg(feature = "postgres")]
impl Postgres {
    /// Starts a cluster, or `None` (the test skips) where PostgreSQL is not installed.
    pub fn start() -> Option<Postgres> {
        Some(Postgres {
            cluster: PgCluster::start()?,
            cache: tempfile::tempdir().unwrap(),
        })
    }
}

#[cfg(feature = "postgres")]
impl Engine for Postgres {
    fn name(&self) -> &'static str {
        "postgres"
    }
    fn store(&self, case: &str, options: &Options) -> Store {
        let config = PgConfig::parse(&self.cluster.url(case, self.cache.path())).unwrap();
        Store::with_backend(Arc::new(PgBackend::new(&config, options))).unwrap()
    }
    fn replicas(&self) -> usize {
        2
    }
    fn fingerprint(&self, case: &str) -> String {
        self.cluster.fingerprint(case)
    }
    fn artifacts(&self, case: &str, conversation: &str) -> usize {
        self.cluster
            .psql(&format!(
                "SELECT count(*) FROM \"{case}\".artifacts WHERE conversation = '{conversation}'"
            ))
            .trim()
            .parse()
            .unwrap()
    }
    fn damage(&self, case: &str, conversation: &str, seq: u64, _needle: &str) {
        self.cluster.psql(&format!(
            "UPDATE \"{case}\".events SET payload = overlay(payload placing '\\x5a'::bytea from 12 for 1) \
             WHERE conversation = '{conversation}' AND seq = {seq}"
        ));
    }
    fn flip_artifact(&self, case: &str, conversation: &str, name: &str) {
        self.cluster.psql(&format!(
            "UPDATE \"{case}\".artifacts SET content = set_byte(content, 0, get_byte(content, 0) # 32) \
             WHERE conversation = '{conversation}' AND name = '{name}'"
        ));
    }
    fn stored(&self, case: &str, conversation: &str, seq: u64) -> Vec<u8> {
        self.cluster
            .psql(&format!(
                "SELECT seq, kind, ts_ms, record_len, artifact, encode(payload, 'hex'), crc \
                 FROM \"{case}\".events WHERE conversation = '{conversation}' AND seq = {seq}"
            ))
            .into_bytes()
    }
}

/// Options of the suite: no fsync (the contract, not the disk, is under test).
pub fn options() -> Options {
    let mut o = Options::default();
    o.sync(SyncMode::Never);
    o
}

/// Commits the commit JSON `json` to `conv`.
pub fn commit(
    store: &Store,
    conv: &str,
    json: &str,
    id: Option<&str>,
) -> ctxlog::Result<ctxlog::CommitReceipt> {
    store.commit(&CommitRequest::from_json(conv, json.as_bytes(), id)?)
}

/// Commits `events` to `conv` with `id` and event `times`.
pub fn commit_events(
    store: &Store,
    conv: &str,
    events: Vec<EventBody>,
    id: Option<&str>,
    times: &[Option<i64>],
) -> ctxlog::Result<ctxlog::CommitReceipt> {
    store.commit(&CommitRequest {
        conversation: conv.into(),
        commit: NewCommit {
            id: id.map(str::to_string),
            events,
            times: times.to_vec(),
            after: None,
        },
    })
}

/// The shorthand JSON of a user+assistant turn.
pub fn turn(user: &str, assistant: &str) -> String {
    serde_json::json!({"user": user, "assistant": assistant}).to_string()
}

pub fn log(store: &Store, conv: &str) -> ctxlog::Result<ctxlog::ops::LogResponse> {
    store.log(&LogRequest {
        conversation: conv.into(),
        from: 1,
        limit: None,
    })
}

/// Every event of `conv` as an export (JSON Lines).
pub fn export(store: &Store, conv: &str) -> Vec<u8> {
    let mut out = Vec::new();
    store
        .export(
            &ExportRequest {
                conversation: conv.into(),
                salvage: false,
            },
            &mut out,
        )
        .unwrap();
    out
}

pub fn last_seq(store: &Store, conv: &str) -> u64 {
    log(store, conv).map_or(0, |l| l.last_seq)
}

pub fn user(text: &str) -> EventBody {
    EventBody::User {
        text: text.into(),
        parts: Vec::new(),
        provider_item: None,
    }
}

pub fn assistant(text: &str) -> EventBody {
    EventBody::Assistant {
        text: text.into(),
        provider_item: None,
    }
}

pub fn call(id: &str) -> EventBody {
    EventBody::ToolCall {
        call_id: id.into(),
        tool: "shell".into(),
        arguments: serde_json::json!({"cmd": "ls"}),
        provider_item: None,
    }
}

pub fn result(id: &str, text: &str) -> EventBody {
    EventBody::ToolResult {
        call_id: id.into(),
        tool: "shell".into(),
        status: ToolStatus::Ok,
        exit_code: Some(0),
        text: text.into(),
        artifact: None,
        parts: Vec::new(),
        provider_item: None,
    }
}

pub fn note(text: &str) -> EventBody {
    EventBody::Note {
        text: text.into(),
        pinned: false,
        supersedes: None,
        provider_item: None,
    }
}

/// A named case of the suite.
pub type Case = (&'static str, fn(&dyn Engine));

/// Runs the named cases on `e`, announcing each (a failure then names its case).
pub fn run_cases(e: &dyn Engine, cases: &[Case]) {
    for (name, case) in cases {
        eprintln!("{}: {name}", e.name());
        case(e);
    }
}
