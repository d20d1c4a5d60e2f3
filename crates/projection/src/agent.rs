//! The `agent` policy: a tiered context for tool-using agents (SPEC P6, R6).
//!
//! The body is `[system] [pinned notes] CONTEXT INPUT`, where CONTEXT is one user message whose
//! text lists the conversation oldest first, one entry per event, separated by newlines:
//!
//! | entry | tier | mandatory |
//! |---|---|---|
//! | `[seq N] user request: …` (verbatim) | `user_requests` | yes |
//! | `[seq N] previous assistant reply (conversation, not evidence): …` | `previous_reply` | yes |
//! | latest `[seq N] result TOOL id=ID status=S [exit_code=C] [artifact=A bytes=B]:` + text | `latest_result` | yes; its text may be clipped |
//! | `[status] latest failure: …; latest possible change: …` | `status` | yes |
//! | `[ctxlog recall: seq N (kind), page P, chars A-B]` + page text | `recalled` | no: first to go |
//! | other results, same shape as the latest | `details` | no |
//! | `[seq N] call TOOL id=ID ARGS` (+ ` (no result: interrupted, effects unknown)` when no result followed), older assistant replies, notes, markers (one line each) | `activity` | no |
//!
//! With the omission notice asked for ([`notice`](crate::ProjectionRequestBuilder::notice)),
//! a line right after the context's header says how many entries are left out, between which
//! seqs, and how to recall them: `[ctxlog] N earlier event(s) between seq A and B are left out
//! of this context. They are stored and can be recalled with the recall tool (by query, or by
//! seq=N).` It is counted while fitting (dropping the first entry may take a few more to pay
//! for it); if it does not fit even when every optional entry is gone, it is left out and
//! reported as a `no_room` drop.
//!
//! A clipped text keeps its first and last [`EXCERPT_CHARS`] characters around
//! `[… N chars clipped; recall seq=N]`; the result's identity line is never removed.
//! When the body is over budget, optional content goes in this order, and every step is
//! reported: recalled pages; clipping of detailed results (oldest first, the latest last);
//! activity rows, oldest first; duplicate snapshots (an older result of the same tool with
//! the same arguments as a newer kept one), oldest first; older detailed results, oldest first.
//! "Latest possible change" is the latest tool call of any tool: the projector does not guess
//! which tools are read-only.
//!
//! Cost: this policy reads every event of the history (all user requests are mandatory), and
//! counts tokens of the final body exactly. Under a token budget it first estimates with each
//! entry tokenized once (cached), then settles on the fewest steps whose exact count fits with
//! a few exact counts (galloping down from the estimate, then bisecting): no more is dropped
//! than the budget requires.

use std::collections::{HashMap, HashSet};

use ctxlog_event::{Event, EventBody, EventKind, SystemMarker, ToolStatus};

use crate::Projection;
use crate::cache::SizeCache;
use crate::common::{Ctx, TierSums, hist, page_text, pinned_items, pinned_notes};
use crate::error::{Error, Result};
use crate::history::{History, SeqRange};
use crate::json::escaped_len;
use crate::options::Tokenizer;
use crate::report::{
    Clip, Drop, PageRef, RecallReport, Report, Size, SkippedPage, Tier, TurnCounts,
};
use crate::request::ProjectionRequest;
use crate::tokens::text_tokens;
use crate::wire::{Cost, Item, Msg, Role};

/// Characters kept at each end of a clipped tool result.
pub const EXCERPT_CHARS: usize = 400;
/// Characters an activity row keeps of a reply or of tool arguments.
pub const ROW_CHARS: usize = 200;

/// Appended to a call whose result never arrived (SPEC P5).
const INTERRUPTED_NOTE: &str = " (no result: interrupted, effects unknown)";

const HEADER: &str = "[ctxlog agent context] The conversation so far, oldest first, one entry per \
event. Text marked \"recall seq=N\" was shortened; fetch it with the recall tool.";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Full,
    Clipped,
    Dropped,
}

#[derive(Clone, Debug)]
struct Entry {
    seq: u64,
    tier: Tier,
    full: String,
    clipped: Option<(String, u64, u64)>,
    form: Form,
    /// Tool and arguments of a result's call: results with equal sources are snapshots.
    source: Option<String>,
    /// Whether this is a call row marked interrupted: its text changes once a result arrives,
    /// so the flag is part of the entry's token-cache key.
    interrupted: bool,
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
        }
    }

    fn text(&self) -> Option<&str> {
        match (self.form, &self.clipped) {
            (Form::Dropped, _) => None,
            (Form::Clipped, Some((c, _, _))) => Some(c),
            _ => Some(&self.full),
        }
    }

    /// Bytes this entry adds to the context string: the escaped `\n` separator and its text.
    fn bytes(&self) -> i64 {
        self.text().map_or(0, |t| 2 + escaped_len(t) as i64)
    }

    /// Tokens of the entry's current text, from the cache when the entry is cacheable (every
    /// entry but the status line, whose text depends on the whole history).
    fn tokens(&self, tokenizer: Tokenizer, cache: &mut SizeCache) -> i64 {
        let Some(text) = self.text() else {
            return 0;
        };
        if self.tier == Tier::Status {
            return text_tokens(tokenizer, text) as i64;
        }
        let variant = (self.tier as u8) << 2
            | u8::from(self.form == Form::Clipped) << 1
            | u8::from(self.interrupted);
        cache.entry_tokens((self.seq, variant, tokenizer), || {
            text_tokens(tokenizer, text)
        }) as i64
    }

    fn mandatory(&self) -> bool {
        matches!(
            self.tier,
            Tier::UserRequests | Tier::PreviousReply | Tier::LatestResult | Tier::Status
        )
    }
}

/// Runs the `agent` policy.
pub(crate) fn project<H: History + ?Sized>(
    history: &H,
    req: &ProjectionRequest,
    cache: &mut SizeCache,
) -> Result<Projection> {
    let ctx = Ctx::new(req);
    let pinned = pinned_notes(history)?;
    let (system_msgs, system_cost) = ctx.render(&ctx.system_items());
    let (pinned_msgs, pinned_cost) = ctx.render(&pinned_items(&pinned));
    let (input_msgs, input_cost) = ctx.render(&ctx.input_items());
    let turn_count = hist(history.turn_count())?;
    let events = all_events(history, turn_count)?;
    let mut entries = build_entries(&events);
    let mut frame = AgentFrame {
        ctx: &ctx,
        system_cost,
        pinned_cost,
        input_cost,
        notice: false,
    };

    // Mandatory: everything pinned, the latest result clipped.
    let mut minimal = entries.clone();
    for e in &mut minimal {
        if !e.mandatory() {
            e.form = Form::Dropped;
        } else if e.clipped.is_some() {
            e.form = Form::Clipped;
        }
    }
    let mandatory = frame.exact(&minimal, &[]);
    ctx.check_mandatory(mandatory)?;

    let actions = drop_order(&entries);
    // With the omission notice asked for, fit with it; if even dropping everything optional
    // leaves no room for it, fit without it (reported as a `no_room` drop).
    frame.notice = req.notice;
    let mut applied = fit(&frame, &mut entries, &actions, cache)?;
    let mut notice_dropped = false;
    if applied.is_none() && frame.notice {
        frame.notice = false;
        notice_dropped = true;
        applied = fit(&frame, &mut entries, &actions, cache)?;
    }
    let applied = applied.ok_or_else(|| Error::Internal {
        reason: "agent context does not fit after every drop".into(),
    })?;
    let (pages, recall) = add_pages(&frame, &entries);
    let total = frame.exact(&entries, &pages);

    let mut msgs: Vec<Msg> = system_msgs;
    msgs.extend(pinned_msgs);
    msgs.extend(frame.context_msgs(&entries, &pages));
    msgs.extend(input_msgs);
    let body = ctx.envelope.write(msgs);
    if body.len() as u64 != total.bytes || !ctx.fits(total) {
        return Err(Error::Internal {
            reason: format!("agent body {} bytes, accounted {}", body.len(), total.bytes),
        });
    }
    let report = frame.report(
        cache,
        Outcome {
            entries: &entries,
            applied: &applied,
            pages: &pages,
            recall,
            pinned: &pinned,
            turn_count,
            mandatory,
            total,
            notice_dropped,
        },
    );
    Ok(Projection { body, report })
}

fn all_events<H: History + ?Sized>(history: &H, turn_count: usize) -> Result<Vec<Event>> {
    let mut events = hist(history.preamble())?;
    for i in 0..turn_count {
        events.extend(hist(history.turn(i))?);
    }
    Ok(events)
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

fn build_entries(events: &[Event]) -> Vec<Entry> {
    let last_assistant = events
        .iter()
        .rposition(|e| e.kind() == EventKind::Assistant);
    let last_result = events
        .iter()
        .rposition(|e| e.kind() == EventKind::ToolResult);
    let mut calls: HashMap<&str, (&str, String)> = HashMap::new();
    // Results by call id and position: a call with no result after it was interrupted (P5).
    let mut results: HashMap<&str, usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        if let EventBody::ToolResult { call_id, .. } = &e.body {
            results.insert(call_id, i);
        }
    }
    let mut entries = Vec::new();
    for (i, event) in events.iter().enumerate() {
        let seq = event.seq;
        let entry = match &event.body {
            EventBody::User { text } => Entry::new(
                seq,
                Tier::UserRequests,
                format!("[seq {seq}] user request: {text}"),
            ),
            EventBody::Assistant { text } if Some(i) == last_assistant => Entry::new(
                seq,
                Tier::PreviousReply,
                format!(
                    "[seq {seq}] previous assistant reply (conversation, not evidence): {text}"
                ),
            ),
            EventBody::Assistant { text } => Entry::new(
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
            } => {
                let args = crate::wire::openai_arguments(arguments);
                calls.insert(call_id, (tool, args.clone()));
                let interrupted = results.get(call_id.as_str()).is_none_or(|&r| r <= i);
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
            EventBody::ToolResult { call_id, tool, .. } => {
                let tier = if Some(i) == last_result {
                    Tier::LatestResult
                } else {
                    Tier::Details
                };
                let mut entry = result_entry(event, tier);
                entry.source = Some(match calls.get(call_id.as_str()) {
                    Some((t, args)) => format!("{t} {args}"),
                    None => format!("{tool} ?{call_id}"),
                });
                entry
            }
            EventBody::Note { pinned: true, .. } => continue,
            EventBody::Note { text, .. } => {
                Entry::new(seq, Tier::Activity, format!("[seq {seq}] note: {text}"))
            }
            EventBody::System { marker } => Entry::new(
                seq,
                Tier::Activity,
                format!("[seq {seq}] {}", marker_text(marker)),
            ),
        };
        entries.push(entry);
    }
    entries.push(Entry::new(0, Tier::Status, status_text(events)));
    entries
}

fn marker_text(marker: &SystemMarker) -> String {
    match marker {
        SystemMarker::Tombstone {
            from, to, reason, ..
        } => format!("erased seq {from}-{to} ({reason})"),
        SystemMarker::Retention { from, to, policy } => {
            format!("retention removed seq {from}-{to} ({policy})")
        }
        SystemMarker::Import { source } => format!("imported from {source}"),
    }
}

fn result_identity(event: &Event) -> String {
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
        line.push_str(&format!(
            " artifact={} bytes={} recall seq={}",
            a.name, a.bytes, event.seq
        ));
    }
    line
}

fn result_entry(event: &Event, tier: Tier) -> Entry {
    let identity = result_identity(event);
    let text = event.body.text().unwrap_or_default();
    let mut entry = Entry::new(event.seq, tier, format!("{identity}:\n{text}"));
    let chars = text.chars().count();
    if chars > 2 * EXCERPT_CHARS + 64 {
        let head: String = text.chars().take(EXCERPT_CHARS).collect();
        let tail: String = text.chars().skip(chars - EXCERPT_CHARS).collect();
        let clipped_chars = chars - 2 * EXCERPT_CHARS;
        let clipped = format!(
            "{identity}:\n{head}\n[… {clipped_chars} chars clipped; recall seq={}]\n{tail}",
            event.seq
        );
        entry.clipped = Some((clipped, chars as u64, 2 * EXCERPT_CHARS as u64));
    }
    entry
}

fn status_text(events: &[Event]) -> String {
    let failure = events.iter().rev().find(|e| {
        matches!(e.body, EventBody::ToolResult { status, exit_code, .. }
            if status != ToolStatus::Ok || exit_code.is_some_and(|c| c != 0))
    });
    let failure = failure.map_or_else(
        || "none".to_owned(),
        |e| {
            format!(
                "{} (recall seq={})",
                result_identity(e).trim_start_matches(&format!("[seq {}] ", e.seq)),
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Clip(usize),
    Drop(usize, &'static str),
}

/// The optional steps, in the SPEC P6 order (recalled pages are added last, so they go first).
fn drop_order(entries: &[Entry]) -> Vec<Action> {
    let mut actions: Vec<Action> = Vec::new();
    let results = |tier: Tier| {
        entries
            .iter()
            .enumerate()
            .filter(move |(_, e)| e.tier == tier)
    };
    for (i, e) in results(Tier::Details).chain(results(Tier::LatestResult)) {
        if e.clipped.is_some() {
            actions.push(Action::Clip(i));
        }
    }
    actions.extend(results(Tier::Activity).map(|(i, _)| Action::Drop(i, "budget")));
    // Hash sets keep this linear in the number of results (thousands in long agent runs).
    let mut newer_sources: HashSet<&str> = HashSet::new();
    let mut duplicates = Vec::new();
    for (i, e) in entries.iter().enumerate().rev() {
        if !matches!(e.tier, Tier::Details | Tier::LatestResult) {
            continue;
        }
        let source = e.source.as_deref().unwrap_or_default();
        if !newer_sources.insert(source) && e.tier == Tier::Details {
            duplicates.push(i);
        }
    }
    duplicates.reverse();
    actions.extend(duplicates.iter().map(|&i| Action::Drop(i, "duplicate")));
    let duplicate: HashSet<usize> = duplicates.into_iter().collect();
    actions.extend(
        results(Tier::Details)
            .filter(|(i, _)| !duplicate.contains(i))
            .map(|(i, _)| Action::Drop(i, "budget")),
    );
    actions
}

fn apply(entries: &mut [Entry], action: Action) {
    match action {
        Action::Clip(i) => entries[i].form = Form::Clipped,
        Action::Drop(i, _) => entries[i].form = Form::Dropped,
    }
}

struct AgentFrame<'c, 'r> {
    ctx: &'c Ctx<'r>,
    system_cost: Cost,
    pinned_cost: Cost,
    input_cost: Cost,
    /// Whether the context carries the omission notice when entries are dropped (SPEC P7).
    notice: bool,
}

/// Which entries are dropped: how many, and the lowest and highest seq among them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Left {
    count: usize,
    first: u64,
    last: u64,
}

impl Left {
    fn of(entries: &[Entry]) -> Left {
        let mut left = Left::default();
        for e in entries.iter().filter(|e| e.form == Form::Dropped) {
            left.add(e.seq);
        }
        left
    }

    fn add(&mut self, seq: u64) {
        if self.count == 0 {
            (self.first, self.last) = (seq, seq);
        }
        self.count += 1;
        self.first = self.first.min(seq);
        self.last = self.last.max(seq);
    }
}

/// The omission notice of the agent context for the entries left out.
fn agent_notice_text(left: Left) -> String {
    format!(
        "[ctxlog] {} earlier event(s) between seq {} and {} are left out of this context. They \
         are stored and can be recalled with the recall tool (by query, or by seq=N).",
        left.count, left.first, left.last
    )
}

impl AgentFrame<'_, '_> {
    /// The notice line for `left`, if the notice is on and something is left out.
    fn notice_line(&self, left: Left) -> Option<String> {
        (self.notice && left.count > 0).then(|| agent_notice_text(left))
    }

    fn context_text(&self, entries: &[Entry], pages: &[String]) -> String {
        let mut text = HEADER.to_owned();
        let notice = self.notice_line(Left::of(entries));
        for part in notice
            .iter()
            .chain(pages)
            .map(String::as_str)
            .chain(entries.iter().filter_map(Entry::text))
        {
            text.push('\n');
            text.push_str(part);
        }
        text
    }

    fn context_msgs(&self, entries: &[Entry], pages: &[String]) -> Vec<Msg> {
        self.ctx
            .render(&[Item::text(Role::User, self.context_text(entries, pages))])
            .0
    }

    fn chain(&self, context: Cost) -> Cost {
        let tok = self.ctx.tokenizer;
        self.system_cost
            .then(self.pinned_cost, tok)
            .then(context, tok)
            .then(self.input_cost, tok)
    }

    /// Whether the body with these entries and pages fits: bytes by adding up escaped lengths,
    /// tokens (only under a token budget) by counting the rendered body.
    fn fits(&self, entries: &[Entry], pages: &[String]) -> bool {
        if self.ctx.req.max_tokens.is_some() {
            return self.ctx.fits(self.exact(entries, pages));
        }
        let base = self
            .ctx
            .total(self.chain(self.ctx.cost(&self.context_msgs(&[], &[]))));
        let notice = self.notice_line(Left::of(entries));
        let parts = entries.iter().map(Entry::bytes).sum::<i64>()
            + notice
                .iter()
                .chain(pages)
                .map(|p| 2 + escaped_len(p) as i64)
                .sum::<i64>();
        let bytes = base.bytes as i64 + parts;
        self.ctx.fits(Size {
            bytes: bytes.max(0) as u64,
            tokens: 0,
        })
    }

    /// The exact size of the body with these entries and pages.
    fn exact(&self, entries: &[Entry], pages: &[String]) -> Size {
        let context = self.ctx.cost(&self.context_msgs(entries, pages));
        self.ctx.total(self.chain(context))
    }

    fn report(&self, cache: &mut SizeCache, o: Outcome<'_>) -> Report {
        let ctx = self.ctx;
        let tok = ctx.tokenizer;
        let mut sums = TierSums::new(tok);
        sums.push(Tier::System, self.system_cost, 1);
        sums.push(Tier::Pinned, self.pinned_cost, o.pinned.len());
        let base = self.ctx.cost(&self.context_msgs(&[], &[]));
        sums.push(Tier::Envelope, base, 0);
        let left = Left::of(o.entries);
        let notice = self.notice_line(left);
        if let Some(text) = &notice {
            sums.add_raw(
                Tier::Notice,
                2 + escaped_len(text) as i64,
                text_tokens(tok, text) as i64,
            );
        }
        for page in o.pages {
            sums.add_raw(
                Tier::Recalled,
                2 + escaped_len(page) as i64,
                text_tokens(tok, page) as i64,
            );
        }
        for e in o.entries.iter().filter(|e| e.form != Form::Dropped) {
            sums.add_raw(e.tier, e.bytes(), e.tokens(tok, cache));
        }
        sums.push(Tier::Input, self.input_cost, 1);
        let tiers = merge_tiers(sums.finish(o.total));
        let mut kept: Vec<u64> = Vec::new();
        let mut dropped: Vec<u64> = Vec::new();
        for e in o.entries.iter().filter(|e| e.seq > 0) {
            if e.form == Form::Dropped {
                dropped.push(e.seq)
            } else {
                kept.push(e.seq)
            }
        }
        let clips = o
            .entries
            .iter()
            .filter(|e| e.form == Form::Clipped)
            .filter_map(|e| {
                let (_, chars, kept_chars) = e.clipped.as_ref()?;
                Some(Clip {
                    seq: e.seq,
                    chars: *chars,
                    kept_chars: *kept_chars,
                    recall: format!("recall seq={}", e.seq),
                })
            })
            .collect();
        let mut drops: Vec<Drop> = o
            .applied
            .iter()
            .filter_map(|a| match *a {
                Action::Drop(i, reason) => Some(Drop {
                    tier: o.entries[i].tier,
                    seqs: SeqRange::new(o.entries[i].seq, o.entries[i].seq),
                    reason: reason.to_owned(),
                }),
                Action::Clip(_) => None,
            })
            .collect();
        if o.notice_dropped && left.count > 0 {
            drops.push(Drop {
                tier: Tier::Notice,
                seqs: SeqRange::new(left.first, left.last),
                reason: "no_room".into(),
            });
        }
        Report {
            format: ctx.format,
            tokenizer: tok,
            policy: ctx.req.policy,
            bytes: o.total.bytes,
            tokens: o.total.tokens,
            tokens_exact: ctx.format.tokens_exact(),
            budget: ctx.budget_report(),
            mandatory: o.mandatory,
            turns: TurnCounts {
                total: o.turn_count,
                kept: o.turn_count,
                dropped: 0,
            },
            kept: ranges(&kept),
            dropped: ranges(&dropped),
            pinned: o.pinned.iter().map(|e| e.seq).collect(),
            detail_start: oldest_detail(o.entries),
            tiers,
            clips,
            drops,
            notice,
            recall: o.recall,
        }
    }
}

struct Outcome<'a> {
    entries: &'a [Entry],
    applied: &'a [Action],
    pages: &'a [String],
    recall: RecallReport,
    pinned: &'a [Event],
    turn_count: usize,
    mandatory: Size,
    total: Size,
    notice_dropped: bool,
}

/// Merges repeated tiers (entries of one tier are interleaved in seq order) and puts the
/// context's own framing into the envelope.
fn merge_tiers(tiers: Vec<crate::report::TierSize>) -> Vec<crate::report::TierSize> {
    let mut out: Vec<crate::report::TierSize> = Vec::new();
    for t in tiers {
        match out.iter_mut().find(|o| o.tier == t.tier) {
            Some(o) => {
                o.bytes += t.bytes;
                o.tokens += t.tokens;
                o.items += t.items;
            }
            None => out.push(t),
        }
    }
    if let Some(env) = out.iter_mut().find(|t| t.tier == Tier::Envelope) {
        env.items = 1;
    }
    out
}

fn ranges(seqs: &[u64]) -> Vec<SeqRange> {
    let mut out: Vec<SeqRange> = Vec::new();
    for &s in seqs {
        match out.last_mut() {
            Some(r) if r.last + 1 == s => r.last = s,
            _ => out.push(SeqRange::new(s, s)),
        }
    }
    out
}

/// Applies actions in order until the body fits: first by exact bytes and estimated tokens,
/// then by exact tokens, taking back steps the exact count shows were not needed. Returns the
/// actions applied, or `None` if the body does not fit even after all of them.
fn fit(
    frame: &AgentFrame<'_, '_>,
    entries: &mut [Entry],
    actions: &[Action],
    cache: &mut SizeCache,
) -> Result<Option<Vec<Action>>> {
    let ctx = frame.ctx;
    set_prefix(entries, actions, 0);
    let base = frame.exact(&[], &[]);
    let estimate_tokens = ctx.req.max_tokens.is_some();
    let mut token_of = |e: &Entry| -> i64 {
        if estimate_tokens && e.form != Form::Dropped {
            e.tokens(ctx.tokenizer, cache) + 1
        } else {
            0
        }
    };
    let notice_size = |left: Left| -> (i64, i64) {
        frame.notice_line(left).map_or((0, 0), |text| {
            let tokens = if estimate_tokens {
                text_tokens(ctx.tokenizer, &text) as i64 + 1
            } else {
                0
            };
            (2 + escaped_len(&text) as i64, tokens)
        })
    };
    let mut bytes: i64 = base.bytes as i64 + entries.iter().map(Entry::bytes).sum::<i64>();
    let mut tokens: i64 = base.tokens as i64 + entries.iter().map(&mut token_of).sum::<i64>();
    let mut left = Left::default();
    let mut next = 0;
    let estimate = |b: i64, t: i64, left: Left| {
        let (nb, nt) = notice_size(left);
        Size {
            bytes: (b + nb).max(0) as u64,
            tokens: (t + nt).max(0) as u64,
        }
    };
    while next < actions.len() && !ctx.fits(estimate(bytes, tokens, left)) {
        let i = action_index(actions[next]);
        let (b0, t0) = (entries[i].bytes(), token_of(&entries[i]));
        apply(entries, actions[next]);
        if let Action::Drop(..) = actions[next] {
            left.add(entries[i].seq);
        }
        bytes += entries[i].bytes() - b0;
        tokens += token_of(&entries[i]) - t0;
        next += 1;
    }
    if !estimate_tokens {
        // Bytes are exact.
        return Ok(ctx
            .fits(estimate(bytes, tokens, left))
            .then(|| actions[..next].to_vec()));
    }
    // Tokens were estimated (entry by entry), so check them exactly: go on while the body does
    // not fit, then take back the steps it did not need.
    let fits_with = |entries: &mut [Entry], n: usize| {
        set_prefix(entries, actions, n);
        ctx.fits(frame.exact(entries, &[]))
    };
    while !fits_with(entries, next) {
        if next == actions.len() {
            return Ok(None);
        }
        next += 1;
    }
    let fewest = fewest_fitting(next, |n| fits_with(entries, n));
    set_prefix(entries, actions, fewest);
    Ok(Some(actions[..fewest].to_vec()))
}

/// The smallest `n <= fits_at` for which `fits(n)` holds, given that `fits(fits_at)` does:
/// gallops down from `fits_at`, then bisects (a few exact counts, not one per step).
fn fewest_fitting(fits_at: usize, mut fits: impl FnMut(usize) -> bool) -> usize {
    let mut hi = fits_at;
    let mut step = 1;
    let mut lo = loop {
        let Some(candidate) = hi.checked_sub(step) else {
            break 0;
        };
        if !fits(candidate) {
            break candidate + 1;
        }
        hi = candidate;
        step *= 2;
    };
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    hi
}

/// Puts `entries` in the state after the first `n` actions (from all entries in full).
fn set_prefix(entries: &mut [Entry], actions: &[Action], n: usize) {
    for e in entries.iter_mut() {
        e.form = Form::Full;
    }
    for &action in &actions[..n] {
        apply(entries, action);
    }
}

fn action_index(action: Action) -> usize {
    match action {
        Action::Clip(i) | Action::Drop(i, _) => i,
    }
}

/// The oldest seq kept in detail: optional entries, the previous reply and the latest result
/// (user requests are always kept verbatim and do not count).
fn oldest_detail(entries: &[Entry]) -> Option<u64> {
    entries
        .iter()
        .filter(|e| {
            e.form != Form::Dropped
                && matches!(
                    e.tier,
                    Tier::Details | Tier::LatestResult | Tier::Activity | Tier::PreviousReply
                )
        })
        .map(|e| e.seq)
        .min()
}

/// Adds recalled pages (best first, up to K) older than every optional entry still present.
fn add_pages(frame: &AgentFrame<'_, '_>, entries: &[Entry]) -> (Vec<String>, RecallReport) {
    let req = frame.ctx.req;
    let oldest_detail = oldest_detail(entries);
    let mut report = RecallReport {
        k: req.recall_k,
        unavailable: req.recall_unavailable.clone(),
        ..Default::default()
    };
    let mut pages: Vec<String> = Vec::new();
    for page in &req.recalled {
        let skip = |reason: &str| SkippedPage {
            seq: page.seq,
            page: page.page,
            reason: reason.into(),
        };
        if report.included.len() >= req.recall_k {
            report.skipped.push(skip("beyond_recall_k"));
            continue;
        }
        if page.kind == EventKind::User || oldest_detail.is_some_and(|o| page.seq >= o) {
            report.skipped.push(skip("kept_in_detail"));
            continue;
        }
        pages.push(page_text(page));
        if frame.fits(entries, &pages) {
            report.included.push(PageRef {
                seq: page.seq,
                page: page.page,
            });
        } else {
            pages.pop();
            report.skipped.push(skip("budget"));
        }
    }
    (pages, report)
}
