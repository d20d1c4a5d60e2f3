//! BEAM-100K chats (user ↔ assistant project chats, long replies) as a protocol set: each
//! chat's messages as user/assistant events in order (seq = message id + 1), each session at
//! its time anchor, one minute apart; each probing question with evidence, by ability.

use std::path::Path;

use anyhow::Context;
use ctxlog_ledger::event::{Event, EventBody};
use serde_json::Value;

use super::protocol::{EvalQuestion, EvalSet};

/// The abilities with evidence, in the data set's order (`abstention` has none).
const ABILITIES: [&str; 9] = [
    "information_extraction",
    "knowledge_update",
    "temporal_reasoning",
    "contradiction_resolution",
    "multi_session_reasoning",
    "preference_following",
    "event_ordering",
    "summarization",
    "instruction_following",
];

/// Chats `chats` of the BEAM directory `dir` (`<dir>/<n>/chat.json`,
/// `<dir>/<n>/probing_questions.json`).
pub fn set(
    dir: &Path,
    name: &str,
    chats: std::ops::RangeInclusive<u32>,
) -> anyhow::Result<EvalSet> {
    let mut set = EvalSet {
        name: name.to_owned(),
        categories: ABILITIES.iter().map(|a| a.replace('_', " ")).collect(),
        convs: Vec::new(),
        questions: Vec::new(),
    };
    for n in chats {
        let chat = dir.join(n.to_string());
        let read = |f: &str| -> anyhow::Result<Value> {
            let p = chat.join(f);
            let raw = std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?;
            serde_json::from_slice(&raw).with_context(|| format!("parsing {}", p.display()))
        };
        let events = events(&read("chat.json")?).with_context(|| format!("BEAM chat {n}"))?;
        let probes = read("probing_questions.json")?;
        for (category, ability) in ABILITIES.iter().enumerate() {
            for q in probes[ability]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                let mut evidence = Vec::new();
                collect_ids(&q["source_chat_ids"], &mut evidence);
                evidence.retain(|s| *s <= events.len() as u64);
                if evidence.is_empty() {
                    continue;
                }
                set.questions.push(EvalQuestion {
                    conv: set.convs.len(),
                    text: q["question"].as_str().unwrap_or_default().to_owned(),
                    evidence,
                    category,
                });
            }
        }
        set.convs.push(events);
    }
    Ok(set)
}

/// The seqs (message id + 1) of every integer in a list or a dict of lists, once each.
fn collect_ids(v: &Value, out: &mut Vec<u64>) {
    match v {
        Value::Array(items) => {
            for item in items {
                if let Some(id) = item.as_u64()
                    && !out.contains(&(id + 1))
                {
                    out.push(id + 1);
                }
            }
        }
        Value::Object(map) => map.values().for_each(|l| collect_ids(l, out)),
        _ => {}
    }
}

/// The messages of a chat as events; checks that message ids run 0, 1, 2, …
fn events(chat: &Value) -> anyhow::Result<Vec<Event>> {
    let mut out: Vec<Event> = Vec::new();
    for batch in chat
        .as_array()
        .context("chat.json is not a list of sessions")?
    {
        let messages: Vec<&Value> = batch["turns"]
            .as_array()
            .context("a session without turns")?
            .iter()
            .flat_map(|t| t.as_array().map(Vec::as_slice).unwrap_or_default())
            .collect();
        let anchor = messages
            .iter()
            .find_map(|m| m["time_anchor"].as_str())
            .or_else(|| batch["time_anchor"].as_str())
            .map(anchor_ms)
            .transpose()?
            .unwrap_or_else(|| out.last().map_or(0, |e| e.ts_ms + 86_400_000));
        for (j, m) in messages.iter().enumerate() {
            let seq = out.len() as u64 + 1;
            anyhow::ensure!(
                m["id"].as_u64() == Some(seq - 1),
                "message ids are not 0, 1, 2, …"
            );
            let text = m["content"].as_str().unwrap_or_default().to_owned();
            let body = match m["role"].as_str() {
                Some("user") => EventBody::User {
                    text,
                    parts: Vec::new(),
                    provider_item: None,
                },
                _ => EventBody::Assistant {
                    text,
                    provider_item: None,
                },
            };
            out.push(Event {
                seq,
                ts_ms: anchor + j as i64 * 60_000,
                body,
            });
        }
    }
    Ok(out)
}

/// `"March-15-2024"` as ms since the epoch (midnight UTC), read by the importer's session-date
/// parser.
fn anchor_ms(s: &str) -> anyhow::Result<i64> {
    let bad = || anyhow::anyhow!("time anchor {s:?} is not Month-DD-YYYY");
    let [month, day, year] = s.split('-').collect::<Vec<_>>()[..] else {
        return Err(bad());
    };
    ctxlog::transfer::parse_session_date(&format!("12:00 am on {day} {month}, {year}"))
        .ok_or_else(bad)
}
