//! The content digest of an id-carrying commit: what "same content" means for idempotency
//! (docs/design.md#l4-idempotent-commits).
//!
//! The digest is the SHA-256 of the *canonical JSON* of the submitted events: the JSON array
//! of the events (the documented event JSON), compact, with the keys of every object sorted
//! by their UTF-8 bytes, recursively. So it does not depend on the order in which a caller
//! built a free-form value such as a tool call's `arguments` (serde_json keeps insertion
//! order when its `preserve_order` feature is on), nor on the field order of the Rust types.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::event::NewCommit;

/// SHA-256 of the canonical JSON of `commit`'s events (see the module docs). An event given an
/// explicit time (see [`NewCommit::times`]) has it as a `"ts"` key (milliseconds) in its
/// object, so the same id with another time is a conflict; a commit without explicit times
/// digests exactly as before times existed.
pub(crate) fn commit_digest(commit: &NewCommit) -> Result<[u8; 32]> {
    let mut value = serde_json::to_value(&commit.events)
        .map_err(|e| Error::invalid(format!("commit cannot be encoded: {e}")))?;
    if let Value::Array(items) = &mut value {
        for (item, ts) in items.iter_mut().zip(&commit.times) {
            if let (Value::Object(map), Some(ts)) = (item, ts) {
                map.insert("ts".into(), Value::from(*ts));
            }
        }
    }
    let mut out = Vec::new();
    write_canonical(&value, &mut out)?;
    Ok(crate::hex::sha256(&out))
}

/// Writes `value` as compact JSON with every object's keys sorted by their bytes.
fn write_canonical(value: &Value, out: &mut Vec<u8>) -> Result<()> {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(&Value::String(key.clone()), out)?;
                out.push(b':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out)?;
                }
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(v, out)?;
            }
            out.push(b']');
        }
        scalar => write_scalar(scalar, out)?,
    }
    Ok(())
}

/// A string, number, boolean or null, as serde_json writes it compactly.
fn write_scalar(value: &Value, out: &mut Vec<u8>) -> Result<()> {
    serde_json::to_writer(out, value)
        .map_err(|e| Error::invalid(format!("commit cannot be encoded: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventBody;

    fn canonical(json: &str) -> String {
        let v: Value = serde_json::from_str(json).unwrap();
        let mut out = Vec::new();
        write_canonical(&v, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn keys_are_sorted_recursively_and_arrays_keep_their_order() {
        assert_eq!(
            canonical(r#"{"b": [3, {"z": null, "y": "\"é\n"}], "a": {"d": 1.5, "c": true}}"#),
            r#"{"a":{"c":true,"d":1.5},"b":[3,{"y":"\"é\n","z":null}]}"#
        );
        assert_eq!(
            canonical(r#"{"é":1,"z":2,"A":3}"#),
            r#"{"A":3,"z":2,"é":1}"#
        );
    }

    #[test]
    fn argument_key_order_does_not_change_the_digest() {
        let call = |args: &str| EventBody::ToolCall {
            call_id: "c1".into(),
            tool: "shell".into(),
            arguments: serde_json::from_str(args).unwrap(),
            provider_item: None,
        };
        let a = call(r#"{"cmd":"ls","opts":{"all":true,"long":false}}"#);
        let b = call(r#"{"opts":{"long":false,"all":true},"cmd":"ls"}"#);
        let c = call(r#"{"opts":{"long":true,"all":true},"cmd":"ls"}"#);
        let digest = |e: &EventBody| commit_digest(&NewCommit::new(vec![e.clone()])).unwrap();
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&c));
    }

    #[test]
    fn an_explicit_time_is_part_of_the_digest_and_no_time_digests_as_before() {
        let digest = |times: Vec<Option<i64>>| {
            let commit = NewCommit::new(vec![EventBody::User {
                text: "q".into(),
                parts: Vec::new(),
                provider_item: None,
            }]);
            commit_digest(&commit.with_times(times)).unwrap()
        };
        let plain = digest(vec![]);
        assert_eq!(digest(vec![None]), plain);
        let timed = digest(vec![Some(1_683_554_160_000)]);
        assert_ne!(timed, plain);
        assert_ne!(digest(vec![Some(1)]), timed);
    }
}
