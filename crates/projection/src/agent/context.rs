//! The agent body around its context message: sizes, the omission notice, recalled pages.

use ctxlog_event::EventKind;

use super::entries::{Entry, Form};
use crate::budget::{Budget, Cost};
use crate::json::escaped_len;
use crate::pages::{Offered, page_text};
use crate::report::{PageRef, RecallReport, Size, SkippedPage, Tier};
use crate::wire::{Item, Msg, Role};

/// The first line of the context message when the request offers the recall tool.
const HEADER: &str = "[ctxlog agent context] The conversation so far, oldest first, one entry per \
event. Text marked \"chars clipped; recall tool: seq=N\" was shortened; fetch it with the recall \
tool.";

/// The first line of the context message when it does not (docs/design.md#p13-true-words: no tool
/// is named that the model cannot call).
const HEADER_NO_TOOL: &str = "[ctxlog agent context] The conversation so far, oldest first, one \
entry per event. Text marked \"chars clipped from seq=N\" was shortened.";

/// The layout of an agent body: the costs of the messages around the context message, and
/// whether the context carries the omission notice.
pub(super) struct AgentLayout<'c, 'r> {
    pub budget: &'c Budget<'r>,
    pub system_cost: Cost,
    pub pinned_cost: Cost,
    pub input_cost: Cost,
    /// Whether the context carries the omission notice when entries are dropped
    /// (docs/design.md#p7-omission-notice).
    pub notice: bool,
}

/// The entries left out of the context: how many, and the lowest and highest seq among them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Omitted {
    pub count: usize,
    pub first: u64,
    pub last: u64,
}

impl Omitted {
    pub fn of(entries: &[Entry]) -> Omitted {
        let mut omitted = Omitted::default();
        for e in entries.iter().filter(|e| e.form == Form::Dropped) {
            omitted.add(e.seq);
        }
        omitted
    }

    pub fn add(&mut self, seq: u64) {
        if self.count == 0 {
            (self.first, self.last) = (seq, seq);
        }
        self.count += 1;
        self.first = self.first.min(seq);
        self.last = self.last.max(seq);
    }
}

/// The omission notice of the agent context for the entries left out.
fn agent_notice_text(omitted: Omitted, recall_tool: bool) -> String {
    let how = if recall_tool {
        " They are stored and can be recalled with the recall tool (by query, or by seq=N)."
    } else {
        " They are stored by the application."
    };
    format!(
        "[ctxlog] {} earlier event(s) between seq {} and {} are left out of this context.{how}",
        omitted.count, omitted.first, omitted.last
    )
}

impl AgentLayout<'_, '_> {
    /// The notice line for `omitted`, if the notice is on and something is left out.
    pub fn notice_line(&self, omitted: Omitted) -> Option<String> {
        (self.notice && omitted.count > 0)
            .then(|| agent_notice_text(omitted, self.budget.req.offers_recall_tool()))
    }

    pub fn context_text(&self, entries: &[Entry], pages: &[String]) -> String {
        let mut text = if self.budget.req.offers_recall_tool() {
            HEADER
        } else {
            HEADER_NO_TOOL
        }
        .to_owned();
        let notice = self.notice_line(Omitted::of(entries));
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

    pub fn context_msgs(&self, entries: &[Entry], pages: &[String]) -> Vec<Msg> {
        self.budget
            .render(&[Item::text(Role::User, self.context_text(entries, pages))])
            .0
    }

    pub fn chain(&self, context: Cost) -> Cost {
        let tok = self.budget.counter;
        self.system_cost
            .then(self.pinned_cost, tok)
            .then(context, tok)
            .then(self.input_cost, tok)
    }

    /// Whether the body with these entries and pages fits: bytes by adding up escaped lengths,
    /// tokens (only under a token budget) by counting the rendered body.
    pub fn fits(&self, entries: &[Entry], pages: &[String]) -> bool {
        if self.budget.req.max_tokens.is_some() {
            return self.budget.fits_all(self.exact(entries, pages));
        }
        let base = self
            .budget
            .total(self.chain(self.budget.cost(&self.context_msgs(&[], &[]))));
        let notice = self.notice_line(Omitted::of(entries));
        let parts = entries.iter().map(Entry::bytes).sum::<i64>()
            + notice
                .iter()
                .chain(pages)
                .map(|p| 2 + escaped_len(p) as i64)
                .sum::<i64>();
        let bytes = base.bytes as i64 + parts;
        self.budget.fits_all(Size {
            bytes: bytes.max(0) as u64,
            tokens: 0,
        })
    }

    /// The exact size of the body with these entries and pages.
    pub fn exact(&self, entries: &[Entry], pages: &[String]) -> Size {
        let context = self.budget.cost(&self.context_msgs(entries, pages));
        self.budget.total(self.chain(context))
    }
}

/// The oldest seq kept in detail: optional entries, the previous reply and the latest result
/// (user requests are always kept verbatim and do not count).
pub(super) fn oldest_detail(entries: &[Entry]) -> Option<u64> {
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
pub(super) fn add_pages(
    layout: &AgentLayout<'_, '_>,
    entries: &[Entry],
    offered: &Offered,
) -> (Vec<String>, RecallReport) {
    let req = layout.budget.req;
    let oldest_detail = oldest_detail(entries);
    let mut report = RecallReport {
        k: req.recall_k,
        unavailable: offered.unavailable.clone(),
        ..Default::default()
    };
    let mut pages: Vec<String> = Vec::new();
    for page in &offered.pages {
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
        if layout.fits(entries, &pages) {
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
