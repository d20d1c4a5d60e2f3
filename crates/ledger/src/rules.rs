//! The ledger's rules, one copy of each: what a commit may contain, what "same content" means
//! for an idempotency id, how event times are resolved, how large tool outputs become
//! artifacts, the caps, how an erasure range is checked and widened, and how an imported
//! tombstone is checked. The file store's commit and erase paths call these functions, and so
//! does any other storage engine (the PostgreSQL backend), so that every engine accepts and
//! refuses the same commits and erases the same seqs.

use std::ops::RangeInclusive;

use crate::CommitReceipt;
use crate::error::{Error, Result};
use crate::event::{ArtifactRef, Event, EventBody, EventKind, ItemMedium, NewCommit};
use crate::options::Options;
use crate::tombstone::Reach;
use crate::validate::{Origin, TurnState};

pub use crate::format::RECORD_HEADER_LEN;

/// The caps and thresholds of `options` (docs/design.md#l5-caps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Largest record (header + event JSON + commit metadata).
    pub max_record_bytes: u64,
    /// Largest commit: its records plus the artifacts it creates.
    pub max_commit_bytes: u64,
    /// Largest ledger.
    pub max_ledger_bytes: u64,
    /// Tool results longer than this become artifacts.
    pub artifact_threshold: u64,
}

/// The caps of `options`.
pub fn caps(options: &Options) -> Caps {
    Caps {
        max_record_bytes: options.max_record_bytes.min(u64::from(u32::MAX)),
        max_commit_bytes: options.max_commit_bytes,
        max_ledger_bytes: options.max_ledger_bytes,
        artifact_threshold: options.artifact_threshold,
    }
}

/// True when `options` asks for durable commits (the file store's fsync; a database's
/// synchronous commit).
pub fn syncs(options: &Options) -> bool {
    options.syncs()
}

/// The idempotency key of a commit: SHA-256 of its id and the digest of its canonical
/// content and explicit times (`None` without an id). Fails for an id outside 1 to
/// [`crate::MAX_COMMIT_ID_BYTES`] bytes.
///
/// # Errors
/// [`Error::InvalidCommit`].
pub fn idempotency_key(commit: &NewCommit) -> Result<Option<([u8; 32], [u8; 32])>> {
    match &commit.id {
        None => Ok(None),
        Some(id) => {
            crate::validate::check_id(id)?;
            Ok(Some((
                commit_id_hash(id),
                crate::digest::commit_digest(commit)?,
            )))
        }
    }
}

/// The answer to a commit carrying `id` when that id is already stored with `stored_digest`
/// over seqs `seqs`: the original receipt (nothing written) when `digest`, the new content's,
/// is the same; [`Error::Conflict`] otherwise.
///
/// # Errors
/// [`Error::Conflict`].
pub fn replay(
    id: &str,
    digest: &[u8],
    stored_digest: &[u8],
    seqs: (u64, u64),
) -> Result<CommitReceipt> {
    if digest != stored_digest {
        return Err(Error::Conflict { id: id.to_string() });
    }
    Ok(CommitReceipt {
        first_seq: seqs.0,
        last_seq: seqs.1,
        replayed: true,
    })
}

/// Checks a commit's expected position ([`NewCommit::after`]) against the conversation's
/// `last_seq`.
///
/// # Errors
/// [`Error::Moved`] when the commit was to follow another seq.
pub fn check_after(commit: &NewCommit, last_seq: u64) -> Result<()> {
    match commit.after {
        Some(after) if after != last_seq => Err(Error::Moved { after, last_seq }),
        _ => Ok(()),
    }
}

/// The hash an idempotency id is stored and looked up under: SHA-256 of its bytes.
pub fn commit_id_hash(id: &str) -> [u8; 32] {
    crate::hex::sha256(id.as_bytes())
}

/// The stored time of each of `n` events (times never go backwards within a conversation): an explicit time (`given[i]`, ms) is
/// kept, and must not be earlier than the event before it (the conversation's last event,
/// `last_ms`, for the first one); an event without one takes the clock `now_ms`, or the
/// previous event's time when the clock is behind it, so time never goes backwards within a
/// conversation.
///
/// # Errors
/// [`Error::InvalidCommit`] naming the event, both times and the rule; or more times given
/// than there are events.
pub fn resolve_times(
    n: usize,
    given: &[Option<i64>],
    last_ms: i64,
    now_ms: i64,
) -> Result<Vec<i64>> {
    if given.len() > n {
        return Err(Error::invalid(format!(
            "{} times given for {n} events",
            given.len()
        )));
    }
    let mut prev = last_ms;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = match given.get(i).copied().flatten() {
            Some(t) if t < prev => {
                let what = if i == 0 {
                    "the conversation's last event"
                } else {
                    "the event before it"
                };
                return Err(Error::invalid(format!(
                    "event {}: time {t} ms is earlier than {what} ({prev} ms); times never go \
                     backwards within a conversation",
                    i + 1
                )));
            }
            Some(t) => t,
            None => now_ms.max(prev),
        };
        out.push(t);
        prev = t;
    }
    Ok(out)
}

/// Checks an application's `commit` against the open turn: `open_turn` holds the stored
/// events from the last user event on (empty when there is none), `next_seq` is the seq the
/// first event will get, `kind_of` answers the kind of a stored seq.
///
/// # Errors
/// [`Error::InvalidCommit`], as the file store refuses it.
pub fn check_commit(
    commit: &NewCommit,
    open_turn: &[Event],
    next_seq: u64,
    kind_of: &dyn Fn(u64) -> Option<EventKind>,
) -> Result<()> {
    let mut state = TurnState::default();
    for e in open_turn {
        state.apply(&e.body);
    }
    crate::validate::check_events(
        &commit.events,
        &state,
        next_seq,
        Origin::Application,
        kind_of,
    )
    .map(|_| ())
}

/// What a commit stores of one event: a tool result longer than `threshold` becomes an
/// excerpt plus an artifact of its whole text, every image or document part given as
/// base64 `data` is checked ([`Part::check`](crate::event::Part::check)) and becomes a
/// reference to an artifact of its decoded bytes, and every `data:` URL of its provider item
/// ([`ProviderItem::media`](crate::event::ProviderItem::media)) becomes an artifact the item
/// references (the same bytes as a part: one artifact). Returns the event as stored and the
/// artifacts' contents (to store before the event); any other event is returned as it is.
///
/// # Errors
/// [`Error::InvalidCommit`] naming the event (1-based `index` in its commit) and part, and
/// what is wrong with it (base64 that does not decode, a media type not allowed or not what
/// the header says, an unreadable header, a size over the caps).
pub fn offload(
    index: usize,
    body: &EventBody,
    threshold: u64,
) -> Result<(EventBody, Vec<Vec<u8>>)> {
    let mut body = body.clone();
    let mut artifacts: Vec<Vec<u8>> = Vec::new();
    // The same bytes twice in one event (an image part and its provider item's URL) are one
    // artifact.
    let mut store = |bytes: Vec<u8>| {
        let r = ArtifactRef {
            name: crate::artifact::artifact_name(&bytes),
            bytes: bytes.len() as u64,
        };
        if !artifacts.contains(&bytes) {
            artifacts.push(bytes);
        }
        r
    };
    if let Some(parts) = body.parts_mut() {
        for (p, part) in parts.iter_mut().enumerate() {
            let bytes = part
                .check()
                .map_err(|why| Error::invalid(format!("event {index}, part {}: {why}", p + 1)))?;
            if let Some(bytes) = bytes {
                *part = part.stored_as(store(bytes));
            }
        }
    }
    if let Some(given) = body.provider_item_mut() {
        let inline: Vec<(String, bool, String)> = given
            .media()
            .into_iter()
            .filter_map(|m| match m.medium {
                ItemMedium::Inline { data, .. } => Some((m.at, m.image, data.to_owned())),
                ItemMedium::Stored(_) => None,
            })
            .collect();
        for (at, image, data) in inline {
            let bytes = crate::event::media::decode_data(&data, image).map_err(|why| {
                Error::invalid(format!("event {index}, provider_item {at}: {why}"))
            })?;
            given.offload(&at, store(bytes));
        }
        if body.kind() == EventKind::User {
            same_images(&body).map_err(|why| Error::invalid(format!("event {index}: {why}")))?;
        }
    }
    if let EventBody::ToolResult {
        text,
        artifact: artifact @ None,
        ..
    } = &mut body
        && text.len() as u64 > threshold
    {
        let name = crate::artifact::artifact_name(text.as_bytes());
        let excerpt = crate::artifact::excerpt(text, threshold, &name);
        *artifact = Some(ArtifactRef {
            name,
            bytes: text.len() as u64,
        });
        artifacts.push(std::mem::replace(text, excerpt).into_bytes());
    }
    Ok((body, artifacts))
}

/// A user message's provider item holds each image it gives as a `data:` URL as an image
/// part of the event too, given as bytes, in the same order and byte for byte: every format
/// but the item's own sends the parts, so an image only the item held would reach the
/// Responses format alone (and the part is what is checked to decode whole and counted).
/// `body` is as stored (both sides artifact references); images by `https:` URL are the
/// item's own (a part may repeat them or not).
fn same_images(body: &EventBody) -> std::result::Result<(), String> {
    let Some(given) = body.provider_item() else {
        return Ok(());
    };
    let theirs: Vec<&str> = given
        .media()
        .into_iter()
        .filter(|m| m.image)
        .filter_map(|m| match m.medium {
            ItemMedium::Stored(r) => Some(r.name.as_str()),
            ItemMedium::Inline { .. } => None,
        })
        .collect();
    let ours: Vec<&str> = body
        .parts()
        .iter()
        .filter(|p| matches!(p, crate::event::Part::Image { .. }))
        .filter_map(|p| p.artifact().map(|r| r.name.as_str()))
        .collect();
    if ours != theirs {
        return Err(format!(
            "its provider_item holds {} image(s) as data: URLs, and they are not its {} image \
             part(s) given as bytes, in the same order: give each input_image of the item whose \
             image_url is a data: URL as an image part too ({{\"type\":\"image\",\
             \"data\":BASE64,\"media_type\":…}}, the same bytes), so that every format sends it",
            theirs.len(),
            ours.len()
        ));
    }
    Ok(())
}

/// The commit metadata the last record of a commit with an id carries: the id and the hex
/// content digest, as JSON.
///
/// # Errors
/// [`Error::InvalidCommit`] when it cannot be encoded.
pub(crate) fn commit_meta(id: &str, digest: &[u8; 32]) -> Result<Vec<u8>> {
    serde_json::to_vec(&crate::scan::CommitMeta {
        id: Some(id.to_string()),
        id_sha256: None,
        digest: crate::hex::encode(digest),
    })
    .map_err(|e| Error::invalid(format!("commit id cannot be encoded: {e}")))
}

/// The length of the commit metadata the file store keeps in a commit's last record (see
/// `commit_meta`; 0 without an id), so that a database counts the same record sizes against
/// the caps.
pub fn commit_meta_len(commit: &NewCommit) -> usize {
    match &commit.id {
        Some(id) => commit_meta(id, &[0; 32]).map_or(0, |v| v.len()),
        None => 0,
    }
}

/// Refuses a record of `payload` bytes (event JSON + metadata) over the record cap.
///
/// # Errors
/// [`Error::TooLarge`] `"record"`.
pub fn check_record(caps: &Caps, payload: usize) -> Result<u64> {
    let actual = (RECORD_HEADER_LEN + payload) as u64;
    too_large("record", caps.max_record_bytes, actual)?;
    Ok(actual)
}

/// Refuses a commit of `records` bytes plus `artifacts` bytes over the commit cap, or a
/// ledger of `ledger_before + records` bytes over the ledger cap.
///
/// # Errors
/// [`Error::TooLarge`] `"commit"` or `"ledger"`.
pub fn check_commit_size(
    caps: &Caps,
    records: u64,
    artifacts: u64,
    ledger_before: u64,
) -> Result<()> {
    too_large("commit", caps.max_commit_bytes, records + artifacts)?;
    too_large("ledger", caps.max_ledger_bytes, ledger_before + records)
}

fn too_large(what: &'static str, limit: u64, actual: u64) -> Result<()> {
    if actual > limit {
        return Err(Error::TooLarge {
            what,
            limit,
            actual,
        });
    }
    Ok(())
}

/// Checks an erasure request as the file store does: a non-empty range inside
/// `1..=last_seq`, a reason of at most [`crate::MAX_ERASE_REASON_BYTES`].
///
/// # Errors
/// [`Error::BadRange`].
pub fn check_erase(range: &RangeInclusive<u64>, last_seq: u64, reason: &str) -> Result<()> {
    let (from, to) = (*range.start(), *range.end());
    let bad = |reason: String| Err(Error::BadRange { reason });
    if from == 0 {
        return bad("seqs start at 1".into());
    }
    if from > to {
        return bad(format!("range {from}-{to} is empty (first > last)"));
    }
    if to > last_seq {
        return bad(format!(
            "range {from}-{to} goes past the last seq ({last_seq})"
        ));
    }
    if reason.len() > crate::MAX_ERASE_REASON_BYTES {
        return bad(format!(
            "reason is {} bytes, the limit is {}",
            reason.len(),
            crate::MAX_ERASE_REASON_BYTES
        ));
    }
    Ok(())
}

/// The reason an erasure records: `reason`, or [`crate::DEFAULT_ERASE_REASON`] when empty.
pub fn erase_reason(reason: &str) -> &str {
    crate::tombstone::erase_reason(reason)
}

/// Checks that an erasure of `range` may reach as `how` says: a [`Reach::Tail`] range (a
/// retraction) must run to the last seq, since only a conversation's newest events are taken
/// back without widening.
///
/// # Errors
/// [`Error::BadRange`].
pub fn check_reach(range: &RangeInclusive<u64>, how: Reach, last_seq: u64) -> Result<()> {
    if how == Reach::Tail && *range.end() != last_seq {
        return Err(Error::BadRange {
            reason: format!(
                "a retraction takes back the newest events: range {}-{} does not end at the \
                 last seq ({last_seq}); erase whole turns instead",
                range.start(),
                range.end()
            ),
        });
    }
    Ok(())
}

/// Widens an erasure range as `how` says (whole turns, or not at all for a retraction) and
/// over earlier tombstones (`leads`: the `(from, to)` of each), as the file store's erasure
/// does. The earlier tombstones inside the result stay as written: only its [`live_runs`]
/// are erased (docs/design.md#e6-listing-and-tombstones).
pub fn widen_erasure(
    range: &RangeInclusive<u64>,
    how: Reach,
    user_seqs: &[u64],
    leads: &[(u64, u64)],
    last_seq: u64,
) -> (u64, u64) {
    crate::tombstone::reach(
        *range.start(),
        *range.end(),
        how,
        user_seqs,
        leads,
        last_seq,
    )
}

/// The runs of `range` (widened) that no earlier tombstone covers (`leads`, in seq order):
/// an erasure writes one tombstone per run.
pub fn live_runs(range: (u64, u64), leads: &[(u64, u64)]) -> Vec<(u64, u64)> {
    crate::tombstone::live_runs(range.0, range.1, leads)
}

/// The body of seq `seq` of the erased run `from..=to`: the tombstone at `from`, a covered
/// placeholder (empty reason) after it. Every seq of a run is stored at time `at_ms`.
pub fn tombstone_body(seq: u64, from: u64, to: u64, at_ms: i64, reason: &str) -> EventBody {
    crate::tombstone::run_body(seq, from, to, at_ms, reason)
}

pub use crate::tombstone::Tombstone;

/// Checks a tombstone to append to a conversation whose last seq is `last_seq`. `stored`
/// reads the event stored at `t.from` when `t.from <= last_seq`. Returns true when that event
/// is this very tombstone and the range is stored whole (a re-run of the same import:
/// nothing to write), false when it is to be appended at `last_seq + 1`.
///
/// # Errors
/// [`Error::InvalidCommit`] when `from` is not the next seq (and not a re-run), `to < from`,
/// the time is negative, or the reason is empty or too long.
pub fn check_tombstone(
    t: &Tombstone,
    last_seq: u64,
    stored: &mut dyn FnMut(u64) -> Result<Option<Event>>,
) -> Result<bool> {
    crate::tombstone::check_append(t, last_seq, stored)
}

/// The erased range an event leads, when it is a tombstone (`seq == from`).
pub fn tombstone_range(seq: u64, body: &EventBody) -> Option<(u64, u64)> {
    crate::tombstone::lead_range(seq, body)
}

/// True when the event at `seq` is a covered placeholder of an erased range: readers skip it.
pub fn is_placeholder(seq: u64, body: &EventBody) -> bool {
    crate::tombstone::is_placeholder(seq, body)
}

/// Checks, record by record in seq order, that erased ranges are covered by their
/// tombstones (what `verify` checks in the file store).
#[derive(Debug, Default)]
pub struct CoverageCheck(crate::tombstone::Coverage);

impl CoverageCheck {
    /// Feeds the event at `seq`.
    ///
    /// # Errors
    /// What is wrong at `seq`.
    pub fn check(&mut self, seq: u64, body: &EventBody) -> std::result::Result<(), String> {
        self.0.check(seq, body)
    }
    /// After the last event.
    ///
    /// # Errors
    /// A tombstone that covers seqs past the end.
    pub fn finish(&self) -> std::result::Result<(), String> {
        self.0.finish()
    }
    /// Seqs covered by tombstones so far.
    pub fn erased(&self) -> u64 {
        self.0.erased
    }
    /// Seqs covered by loss records so far (docs/design.md#l11-repair).
    pub fn lost(&self) -> u64 {
        self.0.lost
    }
}

/// A fresh random ledger id, 32 hex digits.
pub fn new_ledger_id() -> String {
    crate::hex::encode(&crate::files::new_ledger_id())
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    crate::files::now_ms()
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    crate::hex::encode(bytes)
}

/// Reads back an artifact's content checked against its name.
///
/// # Errors
/// [`Error::ArtifactMismatch`] when `content` does not hash to `name`.
pub fn check_artifact(name: &str, content: &[u8]) -> Result<()> {
    if crate::artifact::artifact_name(content) != name {
        return Err(Error::ArtifactMismatch {
            name: name.to_string(),
        });
    }
    Ok(())
}

/// A caller-supplied reference `r` in a commit, to a stored artifact holding `content`: its
/// size and hash must agree, or the commit would reference an artifact every later read
/// rejects. Both are refusals of the commit, as in the file store.
///
/// # Errors
/// [`Error::InvalidCommit`] naming the artifact.
pub fn check_artifact_ref(r: &ArtifactRef, content: &[u8]) -> Result<()> {
    crate::artifact::check_committed_ref(r, content)
}

/// The reason a loss record gives for intact seqs given up because the rest of their commit
/// (or turn) was damaged and their tool calls and results no longer pair up
/// (docs/design.md#l11-repair).
pub const UNPAIRED: &str = "intact, but the rest of its commit was damaged and its tool calls \
                            and results no longer pair up";

/// Why the tool calls and results of `bodies` do not pair up, if they do not: a repair keeps
/// the intact records of a commit cut by damage only when they still pair up, so a
/// projection never shows a tool call without its result.
pub fn unpaired(bodies: &[EventBody]) -> Option<String> {
    unpaired_ids(bodies).into_iter().next().map(|(id, call)| {
        if call {
            format!("tool call {id} lost its result")
        } else {
            format!("tool result {id} lost its call")
        }
    })
}

/// The call ids of `bodies` that do not pair up, each with true for a tool call without its
/// result, false for a tool result without its call: calls first, each side in id order.
pub fn unpaired_ids(bodies: &[EventBody]) -> Vec<(String, bool)> {
    let ids = |call: bool| -> std::collections::BTreeSet<&str> {
        bodies
            .iter()
            .filter_map(|b| match b {
                EventBody::ToolCall { call_id, .. } if call => Some(call_id.as_str()),
                EventBody::ToolResult { call_id, .. } if !call => Some(call_id.as_str()),
                _ => None,
            })
            .collect()
    };
    let (calls, results) = (ids(true), ids(false));
    let lone_calls = calls.difference(&results).map(|c| (c.to_string(), true));
    let lone_results = results.difference(&calls).map(|r| (r.to_string(), false));
    lone_calls.chain(lone_results).collect()
}

/// Contiguous runs `(first, last)` of `seqs` (ascending).
pub fn seq_runs(seqs: impl Iterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for s in seqs {
        match out.last_mut() {
            Some((_, b)) if *b + 1 == s => *b = s,
            _ => out.push((s, s)),
        }
    }
    out
}

/// An event whose artifacts are lost, as a repair keeps it, with `"NAME: why"` for each lost
/// one; `None` when none is. `lost` answers why a referenced artifact is lost (missing or
/// altered), `None` when it reads back intact. A tool result's lost output leaves its
/// excerpt and a note of the loss ([`artifact_lost`]); a lost image or document part (of a
/// user message or a tool result) becomes a text part `[artifact lost: image NAME: why]` in
/// its place. No reference to a lost artifact remains, so projection and export read the
/// event and say what was lost. A provider item whose offloaded `data:` URL is lost is
/// dropped (the event is then sent as its own fields say).
pub fn artifacts_lost(
    body: &EventBody,
    mut lost: impl FnMut(&ArtifactRef) -> Option<String>,
) -> Option<(EventBody, Vec<String>)> {
    let mut notes = Vec::new();
    let mut body = body.clone();
    if let EventBody::ToolResult {
        artifact: Some(r), ..
    } = &body
        && let Some(why) = lost(r)
    {
        notes.push(format!("{}: {why}", r.name));
        body = artifact_lost(body, &why);
    }
    for part in body.parts_mut().into_iter().flatten() {
        let Some(r) = part.artifact() else {
            continue;
        };
        let Some(why) = lost(r) else {
            continue;
        };
        let what = match part {
            crate::event::Part::Document { .. } => "document",
            _ => "image",
        };
        notes.push(format!("{}: {why}", r.name));
        *part = crate::event::Part::Text {
            text: format!("[artifact lost: {what} {}: {why}]", r.name),
        };
    }
    // A provider item missing some of its bytes can no longer be sent as given: the event is
    // sent as its own fields say.
    let item_lost: Vec<String> = body
        .provider_item()
        .into_iter()
        .flat_map(|p| &p.offloaded)
        .filter_map(|o| lost(&o.artifact).map(|why| format!("{}: {why}", o.artifact.name)))
        .collect();
    if !item_lost.is_empty() {
        notes.extend(item_lost);
        body.set_provider_item(None);
    }
    (!notes.is_empty()).then_some((body, notes))
}

/// A tool result whose artifact is lost (missing or altered: `why`), as a repair keeps it:
/// its excerpt, a note of the loss, no artifact reference, so projection and export read it.
/// Any other body is returned as it is.
pub fn artifact_lost(body: EventBody, why: &str) -> EventBody {
    match body {
        EventBody::ToolResult {
            call_id,
            tool,
            status,
            exit_code,
            text,
            artifact: Some(_),
            parts,
            provider_item,
        } => EventBody::ToolResult {
            call_id,
            tool,
            status,
            exit_code,
            text: format!("{text}\n[artifact lost: {why}; the excerpt above is what remains]"),
            artifact: None,
            parts,
            provider_item,
        },
        other => other,
    }
}

/// The lost range `(from, to)` `seq` lies in, when `body` is a repair's loss record or one
/// of its placeholders: a commit id whose seqs lie there answers [`Error::Lost`].
pub fn lost_range(seq: u64, body: &EventBody) -> Option<(u64, u64)> {
    crate::tombstone::lost_range(seq, body)
}
