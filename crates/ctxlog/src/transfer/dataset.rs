//! Two-speaker conversation datasets in the LoCoMo layout → one conversation per sample (see
//! [`super::ImportFormat::ConversationDataset`]).

use ctxlog_ledger::EventBody;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value};

use super::{Incoming, Parsed};
use crate::{Error, Result};

/// One sample. Its other fields (`qa`, summaries, …) are not conversation: not read.
#[derive(Deserialize)]
#[serde(expecting = "a sample object")]
struct Sample {
    #[serde(default)]
    sample_id: Option<SampleId>,
    conversation: Conversation,
}

/// A sample's id: a string or a number (anything else: the sample's position).
#[derive(Deserialize)]
#[serde(untagged)]
enum SampleId {
    Text(String),
    Number(serde_json::Number),
    Other(IgnoredAny),
}

#[derive(Deserialize)]
struct Conversation {
    speaker_a: String,
    speaker_b: String,
    /// `session_N` (its turns) and `session_N_date_time`, and anything else (not read).
    #[serde(flatten)]
    sessions: Map<String, Value>,
}

/// One turn of a session. Its other fields (`dia_id`, `img_url`, …) are not read.
#[derive(Deserialize)]
#[serde(expecting = "a turn object")]
struct Turn {
    speaker: String,
    text: String,
    #[serde(default)]
    blip_caption: Option<String>,
}

pub(crate) fn parse(value: Value, prefix: Option<&str>) -> Result<Vec<Parsed>> {
    let samples = match value {
        Value::Array(samples) => samples,
        Value::Object(_) => vec![value],
        _ => {
            return Err(Error::BadInput {
                reason: "expected a dataset: an array of samples (or one sample object)".into(),
            });
        }
    };
    samples
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            sample(s, i, prefix).map_err(|reason| Error::BadInput {
                reason: format!("sample {i}: {reason}"),
            })
        })
        .collect()
}

fn sample(value: Value, i: usize, prefix: Option<&str>) -> std::result::Result<Parsed, String> {
    let s: Sample = serde_json::from_value(value).map_err(|e| e.to_string())?;
    let id = match s.sample_id {
        Some(SampleId::Text(id)) => id,
        Some(SampleId::Number(n)) => n.to_string(),
        Some(SampleId::Other(_)) | None => format!("{}", i + 1),
    };
    let mut events = Vec::new();
    // The session before, for a date going backwards: (its key, date, time).
    let mut before: Option<(String, String, i64)> = None;
    let mut refused = None;
    let conv = &s.conversation;
    for n in session_numbers(&conv.sessions) {
        let (date_key, date, ts) = session_date(&conv.sessions, n)?;
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
        session_turns(conv, n, ts, &mut events)?;
        before = Some((date_key, date, ts));
    }
    let clean = clean_name(&id);
    Ok(Parsed {
        name: match prefix {
            Some(p) => format!("{p}-{clean}"),
            None => clean.clone(),
        },
        key: clean,
        events,
        notes: Vec::new(),
        refused,
    })
}

/// The N of every `session_N` key, in numeric order.
fn session_numbers(sessions: &Map<String, Value>) -> Vec<u64> {
    let mut numbers: Vec<u64> = sessions
        .keys()
        .filter_map(|k| k.strip_prefix("session_"))
        .filter_map(|n| n.parse::<u64>().ok())
        .collect();
    numbers.sort_unstable();
    numbers
}

/// Session `n`'s `session_N_date_time`: its key, its text and its time.
fn session_date(
    sessions: &Map<String, Value>,
    n: u64,
) -> std::result::Result<(String, String, i64), String> {
    let key = format!("session_{n}_date_time");
    let date = match sessions.get(&key) {
        Some(Value::String(date)) => date,
        Some(other) => return Err(format!("{key} must be a string, not {other}")),
        None => return Err(format!("no {key}")),
    };
    let ts = parse_session_date(date)
        .or_else(|| super::parse_rfc3339(date).ok())
        .ok_or_else(|| format!("{key} {date:?} is not a date like \"1:56 pm on 8 May, 2023\""))?;
    Ok((key, date.clone(), ts))
}

/// Session `n`'s turns as events at time `ts`: `speaker_a`'s are user events, `speaker_b`'s
/// assistant events.
fn session_turns(
    conv: &Conversation,
    n: u64,
    ts: i64,
    events: &mut Vec<Incoming>,
) -> std::result::Result<(), String> {
    let key = format!("session_{n}");
    let Some(Value::Array(turns)) = conv.sessions.get(&key) else {
        return Err(format!("{key} is not an array of turns"));
    };
    for (j, turn) in turns.iter().enumerate() {
        let at = |reason: String| format!("{key}[{j}]: {reason}");
        let t = Turn::deserialize(turn).map_err(|e| at(e.to_string()))?;
        let mut text = format!("{}: {}", t.speaker, t.text);
        if let Some(caption) = &t.blip_caption {
            text.push_str(&format!(" [image: {caption}]"));
        }
        let body = if t.speaker == conv.speaker_a {
            EventBody::User {
                text,
                parts: Vec::new(),
                provider_item: None,
            }
        } else if t.speaker == conv.speaker_b {
            EventBody::Assistant {
                text,
                provider_item: None,
            }
        } else {
            return Err(at(format!(
                "speaker {:?} is neither {:?} nor {:?}",
                t.speaker, conv.speaker_a, conv.speaker_b
            )));
        };
        events.push(Incoming { body, ts: Some(ts) });
    }
    Ok(())
}

/// A sample id as a conversation name: characters outside `A-Za-z0-9_-` become `-`.
fn clean_name(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
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
    let days = crate::time::days_from_civil(year.parse().ok()?, month, day);
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
