//! Parsing a turn from JSON: the shapes the CLI and the HTTP server accept (SPEC I2).
//!
//! # Format
//!
//! Two shapes are accepted:
//!
//! - the shorthand `{"user":"…","assistant":"…"}` (either key may be left out, but not both;
//!   an optional `"id"` makes the commit idempotent);
//! - the full form `{"id":"…","events":[…]}` where each event is an
//!   [`EventBody`](ctxlog_ledger::EventBody) in its JSON form, e.g.
//!   `{"kind":"tool_call","call_id":"c1","tool":"shell","arguments":{"cmd":"ls"}}`.
//!
//! Any other key is refused, so a typo never silently drops data.

use ctxlog_ledger::{EventBody, NewCommit};
use serde::Deserialize;

use crate::Error;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Shorthand {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    assistant: Option<String>,
}

/// Parses one commit from JSON bytes in either accepted shape (see the module docs).
///
/// `id`, when given, overrides an `"id"` inside the JSON.
///
/// ```
/// let commit = ctxlog::parse_commit(br#"{"user":"hi","assistant":"hello"}"#, None).unwrap();
/// assert_eq!(commit.events.len(), 2);
/// ```
///
/// # Errors
/// [`Error::BadInput`] for invalid UTF-8, malformed JSON, unknown keys or kinds, or a shorthand
/// with neither `user` nor `assistant`, with the position where the JSON parser stopped.
pub fn parse_commit(bytes: &[u8], id: Option<&str>) -> Result<NewCommit, Error> {
    let text = std::str::from_utf8(bytes).map_err(|e| Error::BadInput {
        reason: format!(
            "input is not valid UTF-8 (first bad byte at offset {})",
            e.valid_up_to()
        ),
    })?;
    let value: serde_json::Value = serde_json::from_str(text).map_err(json_error)?;
    refuse_system_events(&value)?;
    let mut commit = if value.get("events").is_some() {
        serde_json::from_value::<NewCommit>(value).map_err(json_error)?
    } else {
        shorthand(serde_json::from_value::<Shorthand>(value).map_err(json_error)?)?
    };
    if let Some(id) = id {
        commit.id = Some(id.to_string());
    }
    Ok(commit)
}

/// `system` events are ctxlog's own markers (tombstones, imports). An application that sends
/// one usually means a system prompt or a standing instruction: say how to give those.
fn refuse_system_events(value: &serde_json::Value) -> Result<(), Error> {
    let events = value.get("events").and_then(|e| e.as_array());
    let position = events.and_then(|events| {
        events
            .iter()
            .position(|e| e.get("kind").and_then(|k| k.as_str()) == Some("system"))
    });
    match position {
        None => Ok(()),
        Some(i) => Err(Error::BadInput {
            reason: format!(
                "event {}: kind \"system\" is written by ctxlog only; the system prompt is \
                 given with each request (--system, or \"system\" in a projection request), and \
                 a standing instruction is a note: {{\"kind\":\"note\",\"text\":\"…\",\"pinned\":true}}",
                i + 1
            ),
        }),
    }
}

fn shorthand(s: Shorthand) -> Result<NewCommit, Error> {
    let mut events = Vec::new();
    if let Some(text) = s.user {
        events.push(EventBody::User { text });
    }
    if let Some(text) = s.assistant {
        events.push(EventBody::Assistant { text });
    }
    if events.is_empty() {
        return Err(Error::BadInput {
            reason: "expected {\"user\":…,\"assistant\":…} or {\"events\":[…]}".into(),
        });
    }
    Ok(NewCommit { id: s.id, events })
}

fn json_error(e: serde_json::Error) -> Error {
    Error::BadInput {
        reason: format!("invalid turn JSON: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorthand_and_full_form() {
        let c = parse_commit(br#"{"id":"t1","user":"q"}"#, None).unwrap();
        assert_eq!(c.id.as_deref(), Some("t1"));
        assert_eq!(c.events, vec![EventBody::User { text: "q".into() }]);
        let c = parse_commit(
            br#"{"events":[{"kind":"user","text":"q"},{"kind":"assistant","text":"a"}]}"#,
            Some("x"),
        )
        .unwrap();
        assert_eq!(c.id.as_deref(), Some("x"));
        assert_eq!(c.events.len(), 2);
    }

    #[test]
    fn refuses_bad_input_with_a_reason() {
        for bad in [
            &b"{"[..],
            b"[]",
            b"{}",
            b"{\"usr\":\"typo\"}",
            b"{\"events\":[{\"kind\":\"shout\",\"text\":\"x\"}]}",
            b"{\"user\":\"\xff\"}",
        ] {
            let err = parse_commit(bad, None).unwrap_err();
            assert!(matches!(err, Error::BadInput { .. }), "{err}");
        }
    }

    #[test]
    fn a_system_event_is_refused_with_what_to_do_instead() {
        let err = parse_commit(
            br#"{"events":[{"kind":"user","text":"q"},{"kind":"system","text":"be terse"}]}"#,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("event 2: kind \"system\""), "{err}");
        assert!(
            err.contains("--system") && err.contains("\"kind\":\"note\""),
            "{err}"
        );
    }
}
