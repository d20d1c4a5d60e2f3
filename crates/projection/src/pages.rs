//! Recalled pages (docs/design.md#r6-auto-include): where they come from, and which ones a policy
//! is offered.
//!
//! A policy first settles what the body keeps in detail (history outranks recalled pages),
//! then asks for pages older than that, once, and adds them while they fit.

use std::error::Error as StdError;

use crate::history::SeqRange;
use crate::request::{ProjectionRequest, RecalledPage};

/// How many candidates [`project_with_pages`](crate::project_with_pages) asks a
/// [`PageSource`] for, per page it may include (`recall_k`): some candidates turn out to be
/// in the body already, or too large for the room left.
pub const CANDIDATES_PER_PAGE: usize = 4;

/// The error a [`PageSource`] fails with; its text is reported as `recall.unavailable`.
pub type PageSourceError = Box<dyn StdError + Send + Sync>;

/// Older pages the projector may include (docs/design.md#r6-auto-include), e.g. the recall index.
pub trait PageSource {
    /// Up to `limit` pages relevant to `query` from events with seq < `before`, best first.
    ///
    /// # Errors
    ///
    /// Whatever keeps the source from answering (a damaged index, say): the projection goes
    /// ahead without pages and its report says why (docs/design.md#r2-disposable).
    fn pages(
        &mut self,
        query: &str,
        before: u64,
        limit: usize,
    ) -> Result<Vec<RecalledPage>, PageSourceError>;
}

/// A fixed list of pages, best first, as a [`PageSource`]: it ignores the query and returns
/// the first `limit` pages older than `before` (for tests, and for callers that ranked pages
/// themselves).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StaticPages(pub Vec<RecalledPage>);

impl PageSource for StaticPages {
    fn pages(
        &mut self,
        _query: &str,
        before: u64,
        limit: usize,
    ) -> Result<Vec<RecalledPage>, PageSourceError> {
        Ok(self
            .0
            .iter()
            .filter(|page| page.seq < before)
            .take(limit)
            .cloned()
            .collect())
    }
}

/// What a body already holds once its detail is settled: recalled pages never repeat it.
pub(crate) struct Settled<'a> {
    /// What the pages should be relevant to: the current input (or, continuing an open turn,
    /// its user message).
    pub query: &'a str,
    /// The first seq kept in detail; pages come from before it.
    pub detail_start: Option<u64>,
    /// Seqs of the pinned notes in the body.
    pub pinned: &'a [u64],
    /// Seq ranges of history kept in the body.
    pub kept: &'a [SeqRange],
}

impl Settled<'_> {
    fn holds(&self, seq: u64) -> bool {
        self.pinned.contains(&seq) || self.kept.iter().any(|range| range.contains(seq))
    }
}

/// The pages a policy may add, best first, and why recall was unavailable, if it was.
pub(crate) struct Offered {
    pub pages: Vec<RecalledPage>,
    pub unavailable: Option<String>,
}

/// The pages offered for a body whose detail is `settled`.
///
/// Without a source, the request's own pages ([`ProjectionRequestBuilder::recalled`]) are
/// offered as given. With one, the source is asked (unless `recall_k` is 0 or nothing older
/// than the detail can exist) for `recall_k * CANDIDATES_PER_PAGE` pages older than the
/// detail, and those already in the body are left out; a failure is reported, not raised.
///
/// [`ProjectionRequestBuilder::recalled`]: crate::ProjectionRequestBuilder::recalled
pub(crate) fn offered(
    request: &ProjectionRequest,
    source: Option<&mut dyn PageSource>,
    settled: &Settled<'_>,
) -> Offered {
    let Some(source) = source else {
        return Offered {
            pages: request.recalled.clone(),
            unavailable: request.recall_unavailable.clone(),
        };
    };
    let before = settled.detail_start.unwrap_or(u64::MAX);
    let none = Offered {
        pages: Vec::new(),
        unavailable: None,
    };
    if request.recall_k == 0 || before <= 1 {
        return none;
    }
    let limit = request.recall_k.saturating_mul(CANDIDATES_PER_PAGE);
    match source.pages(settled.query, before, limit) {
        Ok(pages) => Offered {
            pages: pages
                .into_iter()
                .filter(|page| !settled.holds(page.seq))
                .collect(),
            unavailable: None,
        },
        Err(e) => Offered {
            unavailable: Some(e.to_string()),
            ..none
        },
    }
}

/// The text a recalled page is sent as (user-side: old tool output is not trusted text).
pub(crate) fn page_text(page: &RecalledPage) -> String {
    format!(
        "[ctxlog recall: seq {} ({}), page {}, chars {}-{}]\n{}",
        page.seq,
        page.kind.as_str(),
        page.page,
        page.char_start,
        page.char_end,
        page.text
    )
}
