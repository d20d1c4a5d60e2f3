//! Helpers shared by the facade's integration tests.
#![allow(dead_code)]

pub mod engines;
pub mod pg;

/// The records of a file store's `ledger.log`, each as its raw bytes, in seq order.
pub fn log_records(log: &[u8]) -> Vec<Vec<u8>> {
    use ctxlog_ledger::format::{LOG_HEADER_LEN, RecordHeader};
    let mut out = Vec::new();
    let mut pos = LOG_HEADER_LEN;
    while pos < log.len() {
        let header = RecordHeader::parse(&log[pos..]).unwrap();
        let len = header.record_len() as usize;
        out.push(log[pos..pos + len].to_vec());
        pos += len;
    }
    out
}

/// The body `store` projects for `conversation` with the new input `input`, in `format`,
/// under `policy`, as text.
pub fn projected(
    store: &ctxlog::Store,
    conversation: &str,
    input: &str,
    format: ctxlog::WireFormat,
    policy: ctxlog::Policy,
) -> String {
    let request = ctxlog::ops::ProjectRequest {
        conversation: conversation.into(),
        input: Some(input.into()),
        format,
        policy,
        ..Default::default()
    };
    String::from_utf8(store.project(&request).unwrap().body).unwrap()
}
