//! Helpers shared by the projection tests.

#![allow(dead_code)]

use ctxlog_event::{Event, EventBody};

/// `bodies` as events numbered from seq 1, all at time 0.
pub fn numbered(bodies: impl IntoIterator<Item = EventBody>) -> Vec<Event> {
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| Event {
            seq: i as u64 + 1,
            ts_ms: 0,
            body,
        })
        .collect()
}
