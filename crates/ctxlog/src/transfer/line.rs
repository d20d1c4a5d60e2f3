//! One line of an export (the format is in the module docs of [`crate::transfer`]): the type
//! `export.rs` writes and the type `import.rs` reads back.

use ctxlog_ledger::EventBody;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A line as written: every field, keys in this order.
#[derive(Serialize)]
pub(crate) struct Line<'a> {
    pub seq: u64,
    pub ts: String,
    #[serde(flatten)]
    pub body: &'a EventBody,
}

/// A line as read: `seq` and `ts` may be left out; every other field belongs to the event,
/// and one the event does not have is refused (it would be lost, and export → import →
/// export would not give the same bytes).
#[derive(Deserialize)]
#[serde(expecting = "a JSON object (one event)")]
pub(crate) struct ReadLine {
    #[serde(default, deserialize_with = "seq")]
    pub seq: Option<u64>,
    #[serde(default, deserialize_with = "super::chat::ts")]
    pub ts: Option<i64>,
    #[serde(flatten)]
    pub body: ReadEvent,
}

/// The event of a line; its errors say so.
pub(crate) struct ReadEvent(pub EventBody);

impl<'de> Deserialize<'de> for ReadEvent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        EventBody::deserialize(d)
            .map(ReadEvent)
            .map_err(|e| de::Error::custom(format_args!("invalid event: {e}")))
    }
}

fn seq<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let value = Value::deserialize(d)?;
    match value.as_u64() {
        Some(seq) if seq >= 1 => Ok(Some(seq)),
        _ => Err(de::Error::custom(format_args!(
            "\"seq\" {value} is not a positive integer"
        ))),
    }
}
