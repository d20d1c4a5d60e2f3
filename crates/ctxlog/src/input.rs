//! Parsing a turn from JSON: the shapes the CLI and the HTTP server accept
//! (docs/design.md#i2-command-line).
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
//! Any event (and the shorthand as a whole) may carry `"ts"`, its original time: an RFC 3339
//! string or an integer of milliseconds since the epoch (docs/design.md#l10-event-times). Without
//! it an event takes the clock at commit time.
//!
//! Any other key is refused, so a typo never silently drops data.
//!
//! The turn is kept exactly as written or refused ([`crate::json`]): a key given twice in one
//! object (the turn, an event, a tool call's arguments), an integer beyond 64 bits, or a
//! decimal that a 64-bit float does not keep (it would read back as another number) is bad
//! input naming its JSON path and byte offset; send such a number as a string.

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
    #[serde(default)]
    ts: Option<serde_json::Value>,
}

/// Parses one commit from JSON bytes in either accepted shape (see the module docs), each
/// event's `"ts"` kept in [`NewCommit::times`].
///
/// `id`, when given, overrides an `"id"` inside the JSON.
///
/// ```
/// let commit = ctxlog::parse_commit(br#"{"user":"hi","assistant":"hello"}"#, None).unwrap();
/// assert_eq!(commit.events.len(), 2);
/// let timed = ctxlog::parse_commit(
///     br#"{"events":[{"kind":"user","text":"hi","ts":"2023-05-08T13:56:00Z"},{"kind":"assistant","text":"hello"}]}"#,
///     None,
/// ).unwrap();
/// assert_eq!(timed.times, [Some(1_683_554_160_000), None]);
/// ```
///
/// # Errors
/// [`Error::BadInput`] for invalid UTF-8, malformed JSON, JSON that cannot be kept exactly
/// (a repeated key, a number that would read back as another: see the module docs), unknown
/// keys or kinds, a shorthand with neither `user` nor `assistant` (with the position where the
/// JSON parser stopped), or a `"ts"` that is neither RFC 3339 nor whole milliseconds.
pub fn parse_commit(bytes: &[u8], id: Option<&str>) -> Result<NewCommit, Error> {
    let text = std::str::from_utf8(bytes).map_err(|e| Error::BadInput {
        reason: format!(
            "input is not valid UTF-8 (first bad byte at offset {})",
            e.valid_up_to()
        ),
    })?;
    let mut value: serde_json::Value = crate::json::from_str(text).map_err(json_error)?;
    refuse_system_events(&value)?;
    let mut commit = if value.get("events").is_some() {
        let times = take_times(&mut value)?;
        let commit = serde_json::from_value::<NewCommit>(value).map_err(json_error)?;
        commit.with_times(times)
    } else {
        shorthand(serde_json::from_value::<Shorthand>(value).map_err(json_error)?)?
    };
    if let Some(id) = id {
        commit.id = Some(id.to_string());
    }
    Ok(commit)
}

/// Removes `"ts"` from every event object of the full form and parses it; empty when none
/// had one.
pub(crate) fn take_times(value: &mut serde_json::Value) -> Result<Vec<Option<i64>>, Error> {
    let Some(events) = value.get_mut("events").and_then(|e| e.as_array_mut()) else {
        return Ok(Vec::new());
    };
    let mut times = Vec::with_capacity(events.len());
    for (i, event) in events.iter_mut().enumerate() {
        let ts = match event.as_object_mut().and_then(|o| o.remove("ts")) {
            Some(v) => Some(crate::time::parse_ts(&v).map_err(|reason| Error::BadInput {
                reason: format!("event {}: {reason}", i + 1),
            })?),
            None => None,
        };
        times.push(ts);
    }
    if times.iter().all(Option::is_none) {
        times.clear();
    }
    Ok(times)
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
        events.push(EventBody::User {
            text,
            parts: Vec::new(),
            provider_item: None,
        });
    }
    if let Some(text) = s.assistant {
        events.push(EventBody::Assistant {
            text,
            provider_item: None,
        });
    }
    if events.is_empty() {
        return Err(Error::BadInput {
            reason: "expected {\"user\":…,\"assistant\":…} or {\"events\":[…]}".into(),
        });
    }
    let times = match &s.ts {
        Some(v) => {
            let ts = crate::time::parse_ts(v).map_err(|reason| Error::BadInput { reason })?;
            vec![Some(ts); events.len()]
        }
        None => Vec::new(),
    };
    Ok(NewCommit {
        id: s.id,
        events,
        times,
        after: None,
    })
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
        assert_eq!(
            c.events,
            vec![EventBody::User {
                text: "q".into(),
                parts: Vec::new(),
                provider_item: None
            }]
        );
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
    fn json_that_cannot_be_kept_exactly_is_refused_where_it_is() {
        let cases = [
            (
                &br#"{"user":"a","user":"b"}"#[..],
                "invalid turn JSON: key \"user\" appears twice in the object at $ (byte 12)",
            ),
            (
                br#"{"events":[{"kind":"user","text":"q","kind":"note"}]}"#,
                "invalid turn JSON: key \"kind\" appears twice in the object at $.events[0]",
            ),
            (
                br#"{"events":[{"kind":"user","text":"q"},{"kind":"tool_call","call_id":"c","tool":"t","arguments":{"n":123456789012345678901234567890}}]}"#,
                "invalid turn JSON: the integer 123456789012345678901234567890 at \
                 $.events[1].arguments.n (byte 100) is beyond 64 bits",
            ),
            (
                br#"{"events":[{"kind":"user","text":"q"},{"kind":"tool_call","call_id":"c","tool":"t","arguments":{"pi":3.14159265358979323846}}]}"#,
                "invalid turn JSON: the number 3.14159265358979323846 at $.events[1].arguments.pi",
            ),
        ];
        for (json, start) in cases {
            let err = parse_commit(json, None).unwrap_err();
            assert!(matches!(err, Error::BadInput { .. }), "{err}");
            assert!(err.to_string().starts_with(start), "{err}");
        }
        // What a 64-bit number keeps is kept, digit for digit.
        let c = parse_commit(
            br#"{"events":[{"kind":"user","text":"q"},{"kind":"tool_call","call_id":"c","tool":"t","arguments":{"n":18446744073709551615,"m":-9223372036854775808,"x":0.30000000000000004}}]}"#,
            None,
        )
        .unwrap();
        let written = serde_json::to_string(&c.events[1]).unwrap();
        assert!(
            written.contains(
                r#"{"n":18446744073709551615,"m":-9223372036854775808,"x":0.30000000000000004}"#
            ),
            "{written}"
        );
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
