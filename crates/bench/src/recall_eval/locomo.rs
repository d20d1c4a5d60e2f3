//! LoCoMo as protocol sets: each conversation as events (one per dialogue turn, "Speaker:
//! text", the session date as the event time), samples 1–5 tuned on, 6–10 held out.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context;
use ctxlog_ledger::event::{Event, EventBody};
use serde_json::Value;

use super::protocol::{EvalQuestion, EvalSet};

const CATEGORIES: [&str; 6] = [
    "all",
    "multi-hop (1)",
    "temporal (2)",
    "open-domain (3)",
    "single-hop (4)",
    "adversarial (5)",
];

/// One turn as the app would store it.
struct Turn {
    dia_id: String,
    speaker: String,
    text: String,
    caption: Option<String>,
    ts_ms: i64,
    first_speaker: bool,
}

struct Question {
    text: String,
    evidence: Vec<String>,
    category: usize,
}

struct Conversation {
    turns: Vec<Turn>,
    questions: Vec<Question>,
}

/// Loads the file; returns the conversations and how many questions had no usable evidence.
fn load(path: &Path) -> anyhow::Result<(Vec<Conversation>, usize, usize)> {
    let raw =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let data: Value = serde_json::from_str(&raw).context("parsing LoCoMo JSON")?;
    let samples = data
        .as_array()
        .context("LoCoMo: top level is not an array")?;
    let (mut out, mut skipped, mut unresolved) = (Vec::new(), 0, 0);
    for s in samples {
        let conv = &s["conversation"];
        let speaker_a = conv["speaker_a"].as_str().unwrap_or_default().to_owned();
        let mut turns = Vec::new();
        let mut n = 1;
        while let Some(session) = conv.get(format!("session_{n}")).and_then(Value::as_array) {
            let date = conv[format!("session_{n}_date_time")]
                .as_str()
                .unwrap_or_default();
            let base = ctxlog::transfer::parse_session_date(date)
                .with_context(|| format!("session date {date:?}"))?;
            for (j, t) in session.iter().enumerate() {
                let speaker = t["speaker"].as_str().unwrap_or_default().to_owned();
                turns.push(Turn {
                    dia_id: t["dia_id"].as_str().unwrap_or_default().to_owned(),
                    first_speaker: speaker == speaker_a,
                    speaker,
                    text: t["text"].as_str().unwrap_or_default().to_owned(),
                    caption: t
                        .get("blip_caption")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    ts_ms: base + j as i64 * 30_000,
                });
            }
            n += 1;
        }
        let ids: std::collections::HashSet<&str> =
            turns.iter().map(|t| t.dia_id.as_str()).collect();
        let mut questions = Vec::new();
        for q in s["qa"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let mut evidence = Vec::new();
            for e in q["evidence"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                for id in dia_ids(e.as_str().unwrap_or_default()) {
                    if ids.contains(id.as_str()) {
                        if !evidence.contains(&id) {
                            evidence.push(id);
                        }
                    } else {
                        unresolved += 1;
                    }
                }
            }
            if evidence.is_empty() {
                skipped += 1;
                continue;
            }
            questions.push(Question {
                text: q["question"].as_str().unwrap_or_default().to_owned(),
                evidence,
                category: q["category"].as_u64().unwrap_or(0).clamp(1, 5) as usize,
            });
        }
        out.push(Conversation { turns, questions });
    }
    Ok((out, skipped, unresolved))
}

/// Every `D<digits>:<digits>` in `s`.
fn dia_ids(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'D' {
            let mut j = i + 1;
            let d1 = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j > d1 && j < b.len() && b[j] == b':' {
                let d2 = j + 1;
                let mut k = d2;
                while k < b.len() && b[k].is_ascii_digit() {
                    k += 1;
                }
                if k > d2 {
                    out.push(s[i..k].to_owned());
                    i = k;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

/// The conversation as ledger events: one per turn, the first speaker as `user`, the other as
/// `assistant`; text "Speaker: text" plus the image caption when there is one.
fn events(conv: &Conversation) -> Vec<Event> {
    conv.turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut text = format!("{}: {}", t.speaker, t.text);
            if let Some(c) = &t.caption {
                text.push_str(&format!(" [image: {c}]"));
            }
            let body = if t.first_speaker {
                EventBody::user(text)
            } else {
                EventBody::assistant(text)
            };
            Event {
                seq: i as u64 + 1,
                ts_ms: t.ts_ms,
                body,
            }
        })
        .collect()
}

/// LoCoMo as two protocol sets: samples 1–5 (tuned on) and 6–10 (held out).
pub fn sets(path: &Path) -> anyhow::Result<(EvalSet, EvalSet)> {
    let (convs, _, _) = load(path)?;
    let split = convs.len().min(5);
    let set = |name: &str, part: &[Conversation]| {
        let mut set = EvalSet {
            name: name.to_owned(),
            categories: CATEGORIES[1..].iter().map(|c| (*c).to_owned()).collect(),
            convs: Vec::new(),
            questions: Vec::new(),
        };
        for conv in part {
            let seq_of: HashMap<&str, u64> = conv
                .turns
                .iter()
                .enumerate()
                .map(|(i, t)| (t.dia_id.as_str(), i as u64 + 1))
                .collect();
            for q in &conv.questions {
                set.questions.push(EvalQuestion {
                    conv: set.convs.len(),
                    text: q.text.clone(),
                    evidence: q
                        .evidence
                        .iter()
                        .filter_map(|e| seq_of.get(e.as_str()).copied())
                        .collect(),
                    category: q.category - 1,
                });
            }
            set.convs.push(events(conv));
        }
        set
    };
    Ok((
        set("LoCoMo 1–5 (tuned on)", &convs[..split]),
        set("LoCoMo 6–10 (held out)", &convs[split..]),
    ))
}
