//! The agent context's entries: one per event, in the forms it can be sent in (full, clipped).

use std::collections::HashMap;

use ctxlog_event::{Event, EventBody, EventKind, SystemMarker, ToolStatus};

use crate::cache::SizeCache;
use crate::json::escaped_len;
use crate::report::Tier;
use crate::tokens::{Counter, text_tokens};
use crate::wire::openai_arguments;

/// Characters kept at each end of a clipped tool result.
pub const EXCERPT_CHARS: usize = 400;
/// Characters an activity row keeps of a reply or of tool arguments.
pub const ROW_CHARS: usize = 200;

/// Appended to a call whose result never arrived (docs/design.md#p5-whole-turns).
const INTERRUPTED_NOTE: &str = " (no result: interrupted, effects unknown)";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Form {
    Full,
    Clipped,
    Dropped,
}

#[derive(Clone, Debug)]
pub(super) struct Entry {
    pub seq: u64,
    pub tier: Tier,
    pub full: String,
    pub clipped: Option<(String, u64, u64)>,
    pub form: Form,
    /// Tool and arguments of a result's call: results with equal sources are snapshots.
    pub source: Option<String>,
    /// Whether this is a call row marked interrupted: its text changes once a result arrives,
    /// so the flag is part of the entry's token-cache key.
    pub interrupted: bool,
    /// Whether the text may differ from the one the token cache holds for the entry's key
    /// (grown into the room left by [`super::grow`], or the latest result's stored text where
    /// other projections read its artifact): such a text is counted afresh.
    pub uncached: bool,
    /// Whether the request offers the recall tool, which a result's identity line and clip
    /// marker then name: part of the token-cache key.
    pub recall_tool: bool,
}

impl Entry {
    fn new(seq: u64, tier: Tier, full: String) -> Entry {
        Entry {
            seq,
            tier,
            full,
            clipped: None,
            form: Form::Full,
            source: None,
            interrupted: false,
            uncached: false,
            recall_tool: false,
        }
    }

    pub fn text(&self) -> Option<&str> {
        match (self.form, &self.clipped) {
            (Form::Dropped, _) => None,
            (Form::Clipped, Some((c, _, _))) => Some(c),
            _ => Some(&self.full),
        }
    }

    /// Bytes this entry adds to the context string: the escaped `\n` separator and its text.
    pub fn bytes(&self) -> i64 {
        self.text().map_or(0, |t| 2 + escaped_len(t) as i64)
    }

    /// Tokens of the entry's current text, from the cache when the entry is cacheable (every
    /// entry but the status line, whose text depends on the whole history).
    pub fn tokens(&self, counter: Counter, cache: &mut SizeCache) -> i64 {
        let Some(text) = self.text() else {
            return 0;
        };
        if self.tier == Tier::Status || self.uncached {
            return counter.text(text) as i64;
        }
        let variant = (self.tier as u8) << 2
            | u8::from(self.form == Form::Clipped) << 1
            | u8::from(self.interrupted)
            | u8::from(self.recall_tool) << 7;
        counter.count(|tokenizer| {
            cache.entry_tokens((self.seq, variant, tokenizer), || {
                text_tokens(tokenizer, text)
            })
        }) as i64
    }

    pub fn mandatory(&self) -> bool {
        matches!(
            self.tier,
            Tier::UserRequests | Tier::PreviousReply | Tier::LatestResult | Tier::Status
        )
    }
}

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max).collect();
    cut.push('…');
    cut
}

/// The context's entries for `events`, oldest first, then the status line. The status line
/// covers `open` too (the open turn, which follows the context as messages of its own), so
/// that "latest failure" and "latest possible change" stay true of the whole body.
pub(super) fn build_entries(events: &[Event], open: &[Event], recall_tool: bool) -> Vec<Entry> {
    let mut builder = EntryBuilder::new(events, recall_tool);
    let mut entries: Vec<Entry> = events
        .iter()
        .enumerate()
        .filter_map(|(i, event)| builder.entry(i, event))
        .collect();
    let seen: Vec<&Event> = events.iter().chain(open).collect();
    entries.push(Entry::new(0, Tier::Status, status_text(&seen, recall_tool)));
    for e in &mut entries {
        e.recall_tool = recall_tool;
    }
    entries
}

/// What an event's entry depends on besides the event: where it stands among the others.
struct EntryBuilder<'a> {
    last_assistant: Option<usize>,
    last_result: Option<usize>,
    /// Tool and arguments of the calls seen so far, by call id.
    calls: HashMap<&'a str, (&'a str, String)>,
    /// Results by call id and position: a call with no result after it was interrupted.
    results: HashMap<&'a str, usize>,
    /// Whether the request offers the recall tool (clip markers name it only then).
    recall_tool: bool,
}

impl<'a> EntryBuilder<'a> {
    fn new(events: &'a [Event], recall_tool: bool) -> EntryBuilder<'a> {
        let mut results: HashMap<&str, usize> = HashMap::new();
        for (i, e) in events.iter().enumerate() {
            if let EventBody::ToolResult { call_id, .. } = &e.body {
                results.insert(call_id, i);
            }
        }
        EntryBuilder {
            last_assistant: events
                .iter()
                .rposition(|e| e.kind() == EventKind::Assistant),
            last_result: events
                .iter()
                .rposition(|e| e.kind() == EventKind::ToolResult),
            calls: HashMap::new(),
            results,
            recall_tool,
        }
    }

    /// The entry of `event`, the `i`th; none for a pinned note (sent apart from the context).
    fn entry(&mut self, i: usize, event: &'a Event) -> Option<Entry> {
        let seq = event.seq;
        let entry = match &event.body {
            EventBody::User { text, .. } => Entry::new(
                seq,
                Tier::UserRequests,
                format!("[seq {seq}] user request: {text}"),
            ),
            EventBody::Assistant { text, .. } if Some(i) == self.last_assistant => Entry::new(
                seq,
                Tier::PreviousReply,
                format!(
                    "[seq {seq}] previous assistant reply (conversation, not evidence): {text}"
                ),
            ),
            EventBody::Assistant { text, .. } => Entry::new(
                seq,
                Tier::Activity,
                format!(
                    "[seq {seq}] assistant (conversation, not evidence): {}",
                    one_line(text, ROW_CHARS)
                ),
            ),
            EventBody::ToolCall {
                call_id,
                tool,
                arguments,
                ..
            } => self.call_entry(i, seq, call_id, tool, arguments),
            EventBody::ToolResult { call_id, tool, .. } => {
                let tier = if Some(i) == self.last_result {
                    Tier::LatestResult
                } else {
                    Tier::Details
                };
                let mut entry = result_entry(event, tier, self.recall_tool);
                entry.source = Some(match self.calls.get(call_id.as_str()) {
                    Some((t, args)) => format!("{t} {args}"),
                    None => format!("{tool} ?{call_id}"),
                });
                entry
            }
            // Provider items are sent only as themselves, in the open turn; the context
            // message is text (the report counts them as left out).
            EventBody::Note { pinned: true, .. } | EventBody::Opaque { .. } => return None,
            EventBody::Note { text, .. } => {
                Entry::new(seq, Tier::Activity, format!("[seq {seq}] note: {text}"))
            }
            EventBody::System { marker } => Entry::new(
                seq,
                Tier::Activity,
                format!("[seq {seq}] {}", marker_text(marker)),
            ),
        };
        Some(entry)
    }

    /// The activity row of the call at `i`, marked interrupted when no result follows it.
    fn call_entry(
        &mut self,
        i: usize,
        seq: u64,
        call_id: &'a str,
        tool: &'a str,
        arguments: &serde_json::Value,
    ) -> Entry {
        let args = openai_arguments(arguments);
        self.calls.insert(call_id, (tool, args.clone()));
        let interrupted = self.results.get(call_id).is_none_or(|&r| r <= i);
        let mut entry = Entry::new(
            seq,
            Tier::Activity,
            format!(
                "[seq {seq}] call {tool} id={call_id} {}{}",
                one_line(&args, ROW_CHARS),
                if interrupted { INTERRUPTED_NOTE } else { "" }
            ),
        );
        entry.interrupted = interrupted;
        entry
    }
}

fn marker_text(marker: &SystemMarker) -> String {
    match marker {
        SystemMarker::Tombstone {
            from, to, reason, ..
        } => format!("erased seq {from}-{to} ({reason})"),
        SystemMarker::Loss {
            from, to, reason, ..
        } => format!("lost seq {from}-{to} to damage ({reason})"),
        SystemMarker::Retention { from, to, policy } => {
            format!("retention removed seq {from}-{to} ({policy})")
        }
        SystemMarker::Import { source } => format!("imported from {source}"),
    }
}

pub(super) fn result_identity(event: &Event, recall_tool: bool) -> String {
    let EventBody::ToolResult {
        call_id,
        tool,
        status,
        exit_code,
        artifact,
        ..
    } = &event.body
    else {
        return String::new();
    };
    let mut line = format!(
        "[seq {}] result {tool} id={call_id} status={}",
        event.seq,
        status.as_str()
    );
    if let Some(code) = exit_code {
        line.push_str(&format!(" exit_code={code}"));
    }
    if let Some(a) = artifact {
        line.push(' ');
        line.push_str(&crate::wire::artifact_note(a, event.seq, recall_tool));
    }
    line
}

fn result_entry(event: &Event, tier: Tier, recall_tool: bool) -> Entry {
    let identity = result_identity(event, recall_tool);
    let text = event.body.text().unwrap_or_default();
    let mut entry = Entry::new(event.seq, tier, format!("{identity}:\n{text}"));
    let chars = text.chars().count();
    if chars > 2 * EXCERPT_CHARS + 64 {
        let head: String = text.chars().take(EXCERPT_CHARS).collect();
        let tail: String = text.chars().skip(chars - EXCERPT_CHARS).collect();
        let clipped_chars = chars - 2 * EXCERPT_CHARS;
        let marker = crate::expand::clip_marker(clipped_chars, event.seq, recall_tool);
        let clipped = format!("{identity}:\n{head}\n{marker}\n{tail}");
        entry.clipped = Some((clipped, chars as u64, 2 * EXCERPT_CHARS as u64));
    }
    entry
}

/// The status line over `events`: the latest failed result and the latest tool call. A
/// failure names its seq as the recall tool's argument only when the request offers the tool.
fn status_text(events: &[&Event], recall_tool: bool) -> String {
    let failure = events.iter().rev().find(|e| {
        matches!(e.body, EventBody::ToolResult { status, exit_code, .. }
            if status != ToolStatus::Ok || exit_code.is_some_and(|c| c != 0))
    });
    let failure = failure.map_or_else(
        || "none".to_owned(),
        |e| {
            let how = if recall_tool { "recall " } else { "" };
            format!(
                "{} ({how}seq={})",
                result_identity(e, recall_tool).trim_start_matches(&format!("[seq {}] ", e.seq)),
                e.seq
            )
        },
    );
    let change = events
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, e)| match &e.body {
            EventBody::ToolCall { call_id, tool, .. } => {
                let answered = events[i..].iter().any(
                    |r| matches!(&r.body, EventBody::ToolResult { call_id: c, .. } if c == call_id),
                );
                let note = if answered { "" } else { INTERRUPTED_NOTE };
                Some(format!("seq {} call {tool} id={call_id}{note}", e.seq))
            }
            _ => None,
        });
    format!(
        "[status] latest failure: {failure}; latest possible change: {}",
        change.unwrap_or_else(|| "none".to_owned())
    )
}
