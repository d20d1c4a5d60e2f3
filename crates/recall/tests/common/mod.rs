//! Helpers shared by the integration tests.
#![allow(dead_code)]

use ctxlog_event::{ArtifactRef, Event, EventBody, ToolStatus};

pub fn ev(seq: u64, body: EventBody) -> Event {
    Event {
        seq,
        ts_ms: 1_700_000_000_000 + seq as i64,
        body,
    }
}

pub fn user(seq: u64, text: &str) -> Event {
    ev(
        seq,
        EventBody::User {
            text: text.into(),
            parts: Vec::new(),
            provider_item: None,
        },
    )
}

pub fn assistant(seq: u64, text: &str) -> Event {
    ev(
        seq,
        EventBody::Assistant {
            text: text.into(),
            provider_item: None,
        },
    )
}

pub fn note(seq: u64, text: &str) -> Event {
    ev(
        seq,
        EventBody::Note {
            text: text.into(),
            pinned: false,
            supersedes: None,
            provider_item: None,
        },
    )
}

pub fn tool_result(seq: u64, tool: &str, text: &str, artifact: Option<ArtifactRef>) -> Event {
    ev(
        seq,
        EventBody::ToolResult {
            call_id: format!("c{seq}"),
            tool: tool.into(),
            status: ToolStatus::Ok,
            exit_code: Some(0),
            text: text.into(),
            artifact,
            parts: Vec::new(),
            provider_item: None,
        },
    )
}

pub fn artifact(name: &str, bytes: u64) -> ArtifactRef {
    ArtifactRef {
        name: name.into(),
        bytes,
    }
}
