//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use ctxlog_ledger::{EventBody, MemStorage, NewCommit, Storage, ToolStatus};

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

pub fn commit(events: Vec<EventBody>) -> NewCommit {
    NewCommit::new(events)
}

/// A user+assistant turn.
pub fn turn(i: u64) -> NewCommit {
    commit(vec![
        user(&format!("question {i}")),
        assistant(&format!("answer {i}")),
    ])
}

/// Every file under `dir` (relative path → bytes), directories included as empty entries.
pub fn snapshot_dir(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            out.insert(format!("{rel}/"), Vec::new());
            walk(root, &path, out);
        } else if meta.is_symlink() {
            out.insert(
                rel,
                std::fs::read_link(&path)
                    .unwrap()
                    .to_string_lossy()
                    .as_bytes()
                    .to_vec(),
            );
        } else {
            out.insert(rel, std::fs::read(&path).unwrap());
        }
    }
}

/// A fresh in-memory storage as a trait object plus the concrete handle.
pub fn mem() -> (MemStorage, Arc<dyn Storage>) {
    let m = MemStorage::new();
    let s: Arc<dyn Storage> = Arc::new(m.clone());
    (m, s)
}

/// `(offset, seq)` of every record in a log image.
pub fn record_offsets(log: &[u8]) -> Vec<(u64, u64)> {
    use ctxlog_ledger::format::{LOG_HEADER_LEN, RecordHeader};
    let mut out = Vec::new();
    let mut pos = LOG_HEADER_LEN;
    while pos < log.len() {
        let h = RecordHeader::parse(&log[pos..]).unwrap();
        out.push((pos as u64, h.seq));
        pos += h.record_len() as usize;
    }
    out
}
