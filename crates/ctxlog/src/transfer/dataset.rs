//! Two-speaker conversation datasets in the LoCoMo layout → one conversation per sample (see
//! [`super::ImportFormat::ConversationDataset`]).

use ctxlog_ledger::EventBody;
use serde_json::Value;

use super::{Incoming, Parsed};
use crate::{Error, Result};

pub(crate) fn parse(value: &Value, prefix: Option<&str>) -> Result<Vec<Parsed>> {
    let samples = match value {
        Value::Array(samples) => samples.as_slice(),
        Value::Object(_) => std::slice::from_ref(value),
        _ => {
            return Err(Error::BadInput {
                reason: "expected a dataset: an array of samples (or one sample object)".into(),
            });
        }
    };
    samples
        .iter()
        .enumerate()
        .map(|(i, s)| sample(s, i, prefix))
        .collect()
}

fn sample(s: &Value, i: usize, prefix: Option<&str>) -> Result<Parsed> {
    let at = |reason: String| Error::BadInput {
        reason: format!("sample {i}: {reason}"),
    };
    let id = match s.get("sample_id") {
        Some(Value::String(id)) => id.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => format!("{}", i + 1),
    };
    let conv = s
        .get("conversation")
        .and_then(Value::as_object)
        .ok_or_else(|| at("no \"conversation\" object".into()))?;
    let speaker = |key: &str| {
        conv.get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| at(format!("no \"{key}\"")))
    };
    let (a, b) = (speaker("speaker_a")?, speaker("speaker_b")?);
    let mut sessions: Vec<u64> = conv
        .keys()
        .filter_map(|k| k.strip_prefix("session_"))
        .filter_map(|n| n.parse::<u64>().ok())
        .collect();
    sessions.sort_unstable();
    let mut events = Vec::new();
    // The session before, for a date going backwards: (its key, date, time).
    let mut before: Option<(String, String, i64)> = None;
    let mut refused = None;
    for n in sessions {
        let key = format!("session_{n}");
        let turns = conv
            .get(&key)
            .and_then(Value::as_array)
            .ok_or_else(|| at(format!("{key} is not an array of turns")))?;
        let date_key = format!("session_{n}_date_time");
        let date = conv
            .get(&date_key)
            .and_then(Value::as_str)
            .ok_or_else(|| at(format!("no {date_key}")))?;
        let ts = parse_session_date(date)
            .or_else(|| super::parse_rfc3339(date).ok())
            .ok_or_else(|| {
                at(format!(
                    "{date_key} {date:?} is not a date like \"1:56 pm on 8 May, 2023\""
                ))
            })?;
        if let Some((key_before, date_before, ts_before)) = &before
            && ts < *ts_before
            && refused.is_none()
        {
            refused = Some(format!(
                "sample {i} ({id}): {date_key} {date:?} is earlier than {key_before} \
                 {date_before:?}; times never go backwards within a conversation, so nothing \
                 of this sample was imported"
            ));
        }
        before = Some((date_key.clone(), date.to_string(), ts));
        for (j, t) in turns.iter().enumerate() {
            let at = |reason: String| at(format!("{key}[{j}]: {reason}"));
            let who = t
                .get("speaker")
                .and_then(Value::as_str)
                .ok_or_else(|| at("no \"speaker\"".into()))?;
            let said = t
                .get("text")
                .and_then(Value::as_str)
                .ok_or_else(|| at("no \"text\"".into()))?;
            let mut text = format!("{who}: {said}");
            if let Some(c) = t.get("blip_caption").and_then(Value::as_str) {
                text.push_str(&format!(" [image: {c}]"));
            }
            let body = if who == a {
                EventBody::User { text }
            } else if who == b {
                EventBody::Assistant { text }
            } else {
                return Err(at(format!("speaker {who:?} is neither {a:?} nor {b:?}")));
            };
            events.push(Incoming { body, ts: Some(ts) });
        }
    }
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = match prefix {
        Some(p) => format!("{p}-{clean}"),
        None => clean.clone(),
    };
    Ok(Parsed {
        name,
        key: clean,
        events,
        notes: Vec::new(),
        refused,
    })
}

/// A LoCoMo-layout session date, "1:56 pm on 8 May, 2023" → milliseconds since the epoch
/// (taken as UTC); `None` when it is not one.
pub fn parse_session_date(s: &str) -> Option<i64> {
    let (time, date) = s.split_once(" on ")?;
    let (hm, ampm) = time.trim().split_once(' ')?;
    let (h, m) = hm.split_once(':')?;
    let (mut h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    if !(1..=12).contains(&h) || !(0..=59).contains(&m) {
        return None;
    }
    match ampm.to_ascii_lowercase().as_str() {
        "pm" if h != 12 => h += 12,
        "am" if h == 12 => h = 0,
        "am" | "pm" => {}
        _ => return None,
    }
    let parts: Vec<&str> = date.split([' ', ',']).filter(|p| !p.is_empty()).collect();
    let [day, month, year] = parts.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    let month = MONTHS.iter().position(|x| x.eq_ignore_ascii_case(month))? as i64 + 1;
    let day: i64 = day.parse().ok()?;
    if !(1..=31).contains(&day) {
        return None;
    }
    let days = super::time::days_from_civil(year.parse().ok()?, month, day);
    Some(((days * 24 + h) * 60 + m) * 60_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_dates_parse_as_utc() {
        assert_eq!(
            parse_session_date("1:56 pm on 8 May, 2023"),
            Some(1_683_554_160_000)
        );
        assert_eq!(
            parse_session_date("12:48 am on 1 February, 2023"),
            super::super::parse_rfc3339("2023-02-01T00:48:00Z").ok()
        );
        assert_eq!(parse_session_date("13:00 pm on 8 May, 2023"), None);
        assert_eq!(parse_session_date("1:56 pm on 8 Maytember, 2023"), None);
    }
}
