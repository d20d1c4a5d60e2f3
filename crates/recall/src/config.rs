//! What the index holds and how events become index rows: the configuration, the text-rules
//! version and the kinds of event indexed.

use ctxlog_event::EventKind;

/// Version of the rules that turn text into index rows (pages, CJK grams, glued words). An
/// index written under other rules is discarded and rebuilt on open, like a changed
/// [`IndexConfig`]. 2: a run's last character and words glued to CJK text are indexed.
const TEXT_VERSION: u32 = 2;
/// The name of the recall tool. Tool results of this tool are never indexed
/// (docs/design.md#r1-index).
pub const TOOL_NAME: &str = "recall";

/// How events are turned into index rows. Changing it makes an existing index stale: `open`
/// discards and rebuilds an index written with another configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexConfig {
    /// How many preceding indexed events are copied (abridged) into an event's lower-weighted
    /// context field. Default 2: a reply is found by the words of the question it answers,
    /// which usually come just before it.
    pub context_before: usize,
    /// How many following indexed events are copied into the context field. Default 1: a
    /// statement is found by the words of the reply it got.
    pub context_after: usize,
    /// How many leading characters of each neighbour are copied. Default 400.
    pub context_chars: usize,
    /// A pause longer than this (milliseconds) between indexed events starts a new episode:
    /// neighbours in another episode are not context, and ranking credits pages whose episode
    /// matches well. Default 2 hours.
    pub episode_gap_ms: i64,
    /// Index each event's date in words ("Monday 8 May 2023") as metadata, so questions
    /// naming a date find what was said that day. Default true.
    pub date_metadata: bool,
    /// Resolve each page's relative times ("yesterday", "last month", "two weeks ago")
    /// against the event's time and index the dates they name as metadata of that page
    /// ([`relative_dates`](crate::text::relative_dates)), so a question naming a date finds
    /// what was said about it later. Needs [`IndexConfig::date_metadata`]. Default true.
    pub relative_dates: bool,
    /// Which events a context field joins, by length: every event, or only events whose text
    /// fits one page. A reply of several pages carries its own words; its neighbours'
    /// snippets on it, or its opening as their context, can make a look-alike turn outrank
    /// the one that says it. Default [`ContextGate::Every`].
    pub context_gate: ContextGate,
}

/// Which events take part in the context field ([`IndexConfig::context_gate`]). An event
/// "fits one page" when its indexed text is at most [`PAGE_CHARS`](crate::text::PAGE_CHARS)
/// characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextGate {
    /// Every event carries its neighbours' snippets and lends its own.
    Every,
    /// Only events that fit one page carry a context field; every event lends its snippet.
    ShortCarry,
    /// Only events that fit one page lend their snippet; every event carries a context field.
    ShortLend,
    /// Only events that fit one page carry a context field or lend their snippet.
    Short,
}

impl ContextGate {
    /// Whether an event (`fits`: its text fits one page) carries its neighbours' snippets.
    pub(crate) fn carries(self, fits: bool) -> bool {
        fits || matches!(self, ContextGate::Every | ContextGate::ShortLend)
    }

    /// Whether an event (`fits`: its text fits one page) lends its snippet to its neighbours.
    pub(crate) fn lends(self, fits: bool) -> bool {
        fits || matches!(self, ContextGate::Every | ContextGate::ShortCarry)
    }

    fn tag(self) -> &'static str {
        match self {
            ContextGate::Every => "",
            ContextGate::ShortCarry => ";ctx=short-carry",
            ContextGate::ShortLend => ";ctx=short-lend",
            ContextGate::Short => ";ctx=short",
        }
    }
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            context_before: 2,
            context_after: 1,
            context_chars: 400,
            episode_gap_ms: 2 * 3_600_000,
            date_metadata: true,
            relative_dates: true,
            context_gate: ContextGate::Every,
        }
    }
}

impl IndexConfig {
    /// An index without context or date metadata: each page is its own text only.
    pub fn plain() -> IndexConfig {
        IndexConfig {
            context_before: 0,
            context_after: 0,
            date_metadata: false,
            relative_dates: false,
            ..IndexConfig::default()
        }
    }

    /// The configuration as stored in the index. It includes [`TEXT_VERSION`], so an index
    /// whose rows were derived by older text rules is rebuilt too.
    pub(crate) fn tag(&self) -> String {
        format!(
            "text={TEXT_VERSION};before={};after={};chars={};gap={};date={}{}{}",
            self.context_before,
            self.context_after,
            self.context_chars,
            self.episode_gap_ms,
            self.date_metadata,
            // Absent when off, so indexes written before this option are still current.
            if self.relative_dates { ";relative" } else { "" },
            // Absent for every event, so indexes written before this option are still current.
            self.context_gate.tag()
        )
    }

    pub(crate) fn window_len(&self) -> usize {
        self.context_before.max(self.context_after)
    }
}

/// Kinds of event the index holds pages for.
pub const INDEXED_KINDS: [EventKind; 4] = [
    EventKind::User,
    EventKind::Assistant,
    EventKind::ToolResult,
    EventKind::Note,
];
