//! Export and import (docs/design.md#e4-export-and-import, docs/design.md#l10-event-times): a
//! conversation out as JSON Lines and back, and history in from other shapes (OpenAI chat message
//! arrays, OpenAI Responses input item lists, Anthropic message arrays, two-speaker conversation datasets in the LoCoMo layout).
//!
//! # Export format (`ctxlog export`)
//!
//! One JSON object per line, one line per readable event, in seq order: `"seq"`, `"ts"` (the
//! event's time, RFC 3339 in UTC with milliseconds), then the event in its documented JSON form
//! (`"kind"` and its fields, see [`crate::EventBody`]). A tool result whose output was stored
//! as an artifact is written with the whole output as its `"text"` and no `"artifact"`
//! (artifacts are inlined; import stores them again). An erased range appears as its
//! tombstone at its first seq (`{"kind":"system","marker":{"type":"tombstone",…}}`, `"ts"` the
//! erasure's time); the seqs it covers have no line. Keys are written in that order,
//! compactly, each line ending in `\n`.
//!
//! ```text
//! {"seq":1,"ts":"2023-05-08T13:56:00.000Z","kind":"note","text":"code is ZX-81","pinned":true}
//! {"seq":2,"ts":"2023-05-08T13:56:00.000Z","kind":"user","text":"Build it"}
//! ```
//!
//! # Import
//!
//! [`crate::Store::import`] reads a whole input, checks every record (JSON that can be kept
//! exactly, [`crate::json`]; kinds, times, turn rules: the events are first committed to an
//! in-memory ledger with the same rules) and only then commits, so a bad record (named by line or index) writes nothing. The events
//! are committed in chunks whose idempotency ids derive from the input's bytes
//! (`import-<16 hex of its SHA-256>-<sample>-<chunk>`): importing the same input again
//! replays every chunk and writes nothing. Each event keeps its original time when the
//! input has one (`"ts"`; a dataset's session date); in an input where some events have
//! times, one without takes the time of the event before it (leading ones the first time
//! given); in an input without any, every event takes the clock. Times must not go
//! backwards, nor start before the last event of the conversation imported into. An export's
//! tombstones are rebuilt as they were (same range, time and reason, with their
//! placeholders), so export → import → export is byte-identical with erasures too. A
//! dataset's sample that the ledger's rules refuse is reported in
//! [`crate::ops::ImportResponse::failed`], nothing of it written, and the others are imported.
//! Per format, see [`ImportFormat`].

mod anthropic;
mod chat;
mod dataset;
mod export;
mod import;
mod line;
mod openai;
mod responses;

use std::sync::Arc;

use ctxlog_ledger::rules::Tombstone;
use ctxlog_ledger::{EventBody, Ledger, MemStorage, NewCommit, Options, SyncMode, SystemMarker};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use crate::time::{format_rfc3339, parse_rfc3339, parse_ts};
pub use dataset::parse_session_date;
pub(crate) use export::whole_body;
pub use export::{write_export, write_salvaged};

use crate::{ConversationName, Error, Result};

/// What an import reads (`--from`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImportFormat {
    /// ctxlog's own export (JSON Lines, see the module docs): rebuilds the conversation,
    /// tombstones included (into a new conversation: their seqs must stay the same). Seqs
    /// must be contiguous; other system markers are refused.
    #[default]
    Ctxlog,
    /// An OpenAI chat message array (or a request body, `{"messages":[…],…}`), read with
    /// [`ctxlog_projection::read::openai`]: `system`/`developer` messages become pinned notes
    /// (and are reported), `user` and `assistant` messages their events, an assistant's
    /// `tool_calls` tool calls, and `tool` messages their results (a result header the
    /// projector wrote read back into status and exit code); a message may carry `"ts"`. A
    /// body the projector wrote imports into history that projects to the same bytes.
    OpenaiChat,
    /// An Anthropic message array (or a request body, `{"system":…,"messages":[…],…}`), read
    /// with [`ctxlog_projection::read::anthropic`]: `system` becomes a pinned note (reported),
    /// each `text` block a user or assistant event, `tool_use` blocks tool calls, `tool_result`
    /// blocks their results (the projector's stand-in for a call that never got one: no
    /// result); a message may carry `"ts"`. A body the projector wrote imports into history
    /// that projects to the same bytes.
    AnthropicMessages,
    /// An OpenAI Responses input item list (or a request body, `{"instructions":…,
    /// "input":[…],…}`), read with [`ctxlog_projection::read::responses`]: `instructions` and
    /// `system`/`developer` messages become pinned notes (reported), `user` and `assistant`
    /// messages their events (`input_text`/`output_text`/`refusal` parts joined),
    /// `function_call` items tool calls and `function_call_output` items their results (an
    /// output whose call is not in the input is refused); an item may carry `"ts"`. Each of
    /// these items is kept whole as its event's provider item, so the history projects back
    /// to the items as given. Items of other types (`reasoning`, …) become opaque events and
    /// are reported. A body the projector wrote imports into history that projects to the
    /// same bytes.
    OpenaiResponses,
    /// Two-speaker conversation datasets in the LoCoMo layout: an array of samples (or one),
    /// each `{"sample_id", "conversation": {"speaker_a", "speaker_b", "session_N": [{"speaker",
    /// "text", "blip_caption"?}…], "session_N_date_time": "1:56 pm on 8 May, 2023"}}`. Each
    /// sample becomes one conversation: `speaker_a` turns are user events, `speaker_b` turns
    /// assistant events, each `"Speaker: text"` (plus ` [image: caption]`), each at its
    /// session's date and time (UTC). The conversation is named after the sample id (characters
    /// outside `A-Za-z0-9_-` become `-`), prefixed by the target name when one is given:
    /// `ctxlog import --from conversation-dataset locomo10.json` creates `conv-26`, …;
    /// `ctxlog import locomo --from conversation-dataset locomo10.json` creates `locomo-conv-26`, ….
    ConversationDataset,
}

impl ImportFormat {
    /// The name used on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ImportFormat::Ctxlog => "ctxlog",
            ImportFormat::OpenaiChat => "openai-chat",
            ImportFormat::AnthropicMessages => "anthropic-messages",
            ImportFormat::OpenaiResponses => "openai-responses",
            ImportFormat::ConversationDataset => "conversation-dataset",
        }
    }
}

impl std::str::FromStr for ImportFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<ImportFormat> {
        [
            ImportFormat::Ctxlog,
            ImportFormat::OpenaiChat,
            ImportFormat::AnthropicMessages,
            ImportFormat::OpenaiResponses,
            ImportFormat::ConversationDataset,
        ]
        .into_iter()
        .find(|f| f.as_str() == s)
        .ok_or_else(|| Error::BadInput {
            reason: format!(
                "unknown import format {s:?} (expected ctxlog, openai-chat, anthropic-messages, \
                 openai-responses or conversation-dataset)"
            ),
        })
    }
}

/// One event to import, with its original time when the input has one.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Incoming {
    pub body: EventBody,
    pub ts: Option<i64>,
}

/// One conversation an input holds.
#[derive(Clone, Debug, Default)]
pub(crate) struct Parsed {
    /// The conversation's name (given, or derived from the sample).
    pub name: String,
    /// Distinguishes the samples of one input in commit ids.
    pub key: String,
    pub events: Vec<Incoming>,
    /// What was not imported as such (system messages made notes, skipped parts).
    pub notes: Vec<String>,
    /// Why this conversation (a dataset's sample) is refused while the input's others are
    /// imported: a rule of the ledger it breaks (its session dates go backwards).
    pub refused: Option<String>,
}

/// The tombstone an incoming event is (an export's erased range, or its loss record), if it
/// is one.
fn as_tombstone(body: &EventBody) -> Option<Tombstone> {
    match body {
        EventBody::System {
            marker: SystemMarker::Tombstone { from, .. } | SystemMarker::Loss { from, .. },
        } => Tombstone::of(*from, body),
        _ => None,
    }
}

/// One write of an import: a chunk of events under its idempotency id, or an export's
/// tombstone rebuilt as it was.
#[derive(Debug)]
pub(crate) enum Step {
    Commit(NewCommit),
    Tombstone(Tombstone),
}

impl Step {
    /// Records of the input this step writes (a tombstone is one).
    pub(crate) fn len(&self) -> usize {
        match self {
            Step::Commit(c) => c.events.len(),
            Step::Tombstone(_) => 1,
        }
    }
}

/// Events per committed chunk (also bounded by [`CHUNK_BYTES`]).
const CHUNK_EVENTS: usize = 512;
/// JSON bytes per committed chunk, well under the default commit cap.
const CHUNK_BYTES: usize = 1 << 20;

/// A checked conversation, split into the steps that will write it.
#[derive(Debug)]
pub(crate) struct Plan {
    pub name: ConversationName,
    pub steps: Vec<Step>,
    pub events: u64,
    pub notes: Vec<String>,
    /// Why this sample is refused (nothing of it is written; the others are imported).
    pub refused: Option<String>,
}

/// Parses `data` in `format`; `target` is the conversation (or, for datasets, the prefix).
///
/// # Errors
/// [`Error::BadInput`] naming the line or index of the first bad record.
pub(crate) fn parse(
    format: ImportFormat,
    target: Option<&str>,
    data: &[u8],
) -> Result<Vec<Parsed>> {
    let text = std::str::from_utf8(data).map_err(|e| Error::BadInput {
        reason: format!(
            "input is not valid UTF-8 (first bad byte at offset {})",
            e.valid_up_to()
        ),
    })?;
    let single = |events: (Vec<Incoming>, Vec<String>)| -> Result<Vec<Parsed>> {
        let name = target.ok_or_else(|| Error::InvalidRequest {
            reason: format!("importing {} needs a conversation name", format.as_str()),
        })?;
        Ok(vec![Parsed {
            name: name.to_string(),
            key: String::new(),
            events: events.0,
            notes: events.1,
            refused: None,
        }])
    };
    match format {
        ImportFormat::Ctxlog => single((import::parse_lines(text)?, Vec::new())),
        ImportFormat::OpenaiChat => single(openai::parse(json(text)?)?),
        ImportFormat::AnthropicMessages => single(anthropic::parse(json(text)?)?),
        ImportFormat::OpenaiResponses => single(responses::parse(json(text)?)?),
        ImportFormat::ConversationDataset => dataset::parse(json(text)?, target),
    }
}

/// The events a provider message array (`messages` of a chat request, or a reply message
/// wrapped in one) holds, read by the import parser of `format` (the gateway's reading of
/// what a client sent and what a provider answered: one converter for both).
///
/// # Errors
/// [`Error::BadInput`] naming the index of the first bad message.
///
/// `calls` are the tool calls already stored that the messages may answer (call id, tool):
/// a Responses client that continues a stored response sends the outputs of its calls
/// without the calls.
pub(crate) fn message_events(
    format: ctxlog_projection::WireFormat,
    messages: serde_json::Value,
    calls: &[(String, String)],
) -> Result<Vec<EventBody>> {
    use ctxlog_projection::WireFormat;
    let mut events = chat::Events::default();
    events.calls.extend(calls.iter().cloned());
    let (events, _notes) = match format {
        WireFormat::OpenAiChat => openai::parse(messages)?,
        WireFormat::AnthropicMessages => anthropic::parse_with(messages, events)?,
        WireFormat::OpenAiResponses => responses::parse_with(messages, events)?,
    };
    Ok(events.into_iter().map(|e| e.body).collect())
}

/// The events of a provider's reply (a reply message wrapped in an array, or a Responses
/// reply's output items) to a stored turn, read by the import parser of `format` as
/// [`message_events`] does, but whole ([`chat::Events::reply`]): its reasoning items and
/// thinking blocks are opaque events of the turn, and a Responses message or function call
/// keeps its item as its provider item, so the next call sends the reply back as it came.
///
/// # Errors
/// [`Error::BadInput`] naming the index of the first bad message.
pub(crate) fn reply_events(
    format: ctxlog_projection::WireFormat,
    messages: serde_json::Value,
) -> Result<Vec<EventBody>> {
    use ctxlog_projection::WireFormat;
    let (events, _notes) = match format {
        WireFormat::OpenAiChat => openai::parse(messages)?,
        WireFormat::AnthropicMessages => anthropic::parse_with(messages, chat::Events::reply())?,
        WireFormat::OpenAiResponses => responses::parse_with(messages, chat::Events::reply())?,
    };
    Ok(events.into_iter().map(|e| e.body).collect())
}

fn json(text: &str) -> Result<serde_json::Value> {
    crate::json::from_str(text).map_err(|e| Error::BadInput {
        reason: format!("invalid JSON: {e}"),
    })
}

/// Checks every conversation of `parsed` against the ledger's own rules (committed to an
/// in-memory ledger), and splits it into steps: chunks with ids derived from `data`, and the
/// export's tombstones between them. With `per_sample` (datasets), a conversation the rules
/// refuse is planned as refused (its reason named) instead of failing the whole input.
///
/// # Errors
/// [`Error::InvalidName`]; [`Error::BadInput`] naming the record the ledger refused.
pub(crate) fn plan(parsed: Vec<Parsed>, data: &[u8], per_sample: bool) -> Result<Vec<Plan>> {
    let source = ctxlog_backend::to_hex(&Sha256::digest(data)[..8]);
    let mut names = std::collections::HashSet::new();
    let mut plans = Vec::with_capacity(parsed.len());
    for mut p in parsed {
        let name = ConversationName::new(&p.name)?;
        if !names.insert(name.to_string()) {
            return Err(Error::BadInput {
                reason: format!("two samples import into conversation {name:?}"),
            });
        }
        let mut plan = Plan {
            name,
            steps: Vec::new(),
            events: p.events.len() as u64,
            notes: std::mem::take(&mut p.notes),
            refused: p.refused.take(),
        };
        if plan.refused.is_none() {
            match steps(p, &source) {
                Ok(steps) => plan.steps = steps,
                Err(Error::BadInput { reason }) if per_sample => plan.refused = Some(reason),
                Err(e) => return Err(e),
            }
        }
        plans.push(plan);
    }
    Ok(plans)
}

/// The checked steps of one conversation.
fn steps(mut p: Parsed, source: &str) -> Result<Vec<Step>> {
    fill_times(&mut p.events);
    if p.events.is_empty() {
        return Err(Error::BadInput {
            reason: format!(
                "nothing to import into {:?}: the input holds no events",
                p.name
            ),
        });
    }
    let key = if p.key.is_empty() {
        String::new()
    } else {
        format!("{}-", p.key)
    };
    let mut steps = Vec::new();
    let mut chunks = 0;
    let mut start = 0;
    while start < p.events.len() {
        if let Some(t) = as_tombstone(&p.events[start].body) {
            steps.push(Step::Tombstone(t));
            start += 1;
            continue;
        }
        let (mut end, mut bytes) = (start, 0);
        while end < p.events.len()
            && end - start < CHUNK_EVENTS
            && (bytes < CHUNK_BYTES || end == start)
            && as_tombstone(&p.events[end].body).is_none()
        {
            bytes += p.events[end].body.text().map_or(64, str::len);
            end += 1;
        }
        let chunk = &p.events[start..end];
        chunks += 1;
        let id = format!("import-{source}-{key}{chunks}");
        let times: Vec<Option<i64>> = chunk.iter().map(|e| e.ts).collect();
        let times = if times.iter().all(Option::is_none) {
            Vec::new()
        } else {
            times
        };
        let commit = NewCommit::new(chunk.iter().map(|e| e.body.clone()).collect())
            .with_id(id)
            .with_times(times);
        steps.push(Step::Commit(commit));
        start = end;
    }
    dry_run(&steps, &p.events)?;
    Ok(steps)
}

/// When some events of an input carry a time, one without takes the time of the event before
/// it (the first ones: the first time given), so an input with times is imported at its own
/// times throughout; when none does, every event takes the clock.
/// Tombstones keep their own time (the erasure's) and take no part.
fn fill_times(events: &mut [Incoming]) {
    let mut events: Vec<&mut Incoming> = events
        .iter_mut()
        .filter(|e| as_tombstone(&e.body).is_none())
        .collect();
    let Some(first) = events.iter().find_map(|e| e.ts) else {
        return;
    };
    let mut last = first;
    for e in &mut events {
        last = *e.ts.get_or_insert(last);
    }
}

/// Writes the steps to a ledger in memory: the ledger's own rules (turn structure, times,
/// sizes, tombstone positions) judge every record before anything is written for real.
///
/// The memory ledger starts empty, but an input whose first record is a tombstone may
/// continue a conversation at its next seq: its tombstones are then placed relative to the
/// first one, so their positions among the input's events are checked here, and where the
/// first one lands is checked against the conversation itself (its message names the real
/// next seq).
fn dry_run(steps: &[Step], events: &[Incoming]) -> Result<()> {
    let mut options = Options::default();
    options.sync(SyncMode::Never);
    let (mut ledger, _) = Ledger::open_with(Arc::new(MemStorage::new()), &options)?;
    let mut done = 0;
    let mut shift: Option<i128> = None;
    for step in steps {
        let commit = match step {
            Step::Commit(commit) => commit,
            Step::Tombstone(t) => {
                let first = i128::from(t.from);
                let s = *shift.get_or_insert(if done == 0 { 1 - first } else { 0 });
                let at = |seq: u64| u64::try_from(i128::from(seq) + s).unwrap_or(0);
                let placed = Tombstone {
                    from: at(t.from),
                    to: at(t.to),
                    ..t.clone()
                };
                ledger
                    .append_tombstone(&placed)
                    .map_err(|e| Error::BadInput {
                        reason: format!("record {}: {e}", done + 1),
                    })?;
                done += 1;
                continue;
            }
        };
        if let Err(e) = ledger.commit(commit) {
            // The ledger names "event K" of the commit: say which record of the input it is.
            let reason = e.to_string();
            let k = reason
                .strip_prefix("invalid commit: event ")
                .or_else(|| reason.strip_prefix("event "))
                .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse::<usize>().ok());
            let at = match k {
                Some(k) if k >= 1 && done + k <= events.len() => format!("record {}", done + k),
                _ => format!("records {}-{}", done + 1, done + commit.events.len()),
            };
            return Err(Error::BadInput {
                reason: format!("{at}: {reason}"),
            });
        }
        done += commit.events.len();
    }
    Ok(())
}
