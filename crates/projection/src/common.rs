//! Pieces shared by both policies: budget checks, mandatory items, pinned notes, tier sums.

use std::collections::HashSet;

use ctxlog_event::{Event, EventBody};

use crate::error::{Error, Result};
use crate::history::History;
use crate::options::{Tokenizer, WireFormat};
use crate::report::{BudgetReport, Size, Tier, TierSize};
use crate::request::ProjectionRequest;
use crate::wire::{Cost, Envelope, Item, Msg, Role, is_blank, note_text, render};

/// The request's format, tokenizer, envelope and limits, with the envelope's cost.
pub(crate) struct Ctx<'r> {
    pub req: &'r ProjectionRequest,
    pub format: WireFormat,
    pub tokenizer: Tokenizer,
    pub envelope: Envelope,
    env_bytes: i64,
    env_tokens: i64,
}

impl<'r> Ctx<'r> {
    pub fn new(req: &'r ProjectionRequest) -> Ctx<'r> {
        let system = match req.format {
            // Anthropic rejects a blank system prompt; it carries nothing, so it is left out.
            WireFormat::AnthropicMessages => req.system.clone().filter(|s| !is_blank(s)),
            WireFormat::OpenAiChat => None,
        };
        let envelope = Envelope {
            format: req.format,
            model: req.model.clone(),
            output_limit: req.output_limit(),
            system,
            tools: req.tools.clone(),
        };
        let (env_bytes, env_tokens) = envelope.cost(req.tokenizer);
        Ctx {
            req,
            format: req.format,
            tokenizer: req.tokenizer,
            envelope,
            env_bytes,
            env_tokens,
        }
    }

    /// The whole body's size for a chain of messages inside the envelope.
    pub fn total(&self, chain: Cost) -> Size {
        Size {
            bytes: (self.env_bytes + chain.bytes).max(0) as u64,
            tokens: (self.env_tokens + chain.tokens).max(0) as u64,
        }
    }

    /// Whether a body of this size meets the budget.
    pub fn fits(&self, size: Size) -> bool {
        self.req.max_bytes.is_none_or(|max| size.bytes <= max)
            && self
                .req
                .input_token_limit()
                .is_none_or(|max| size.tokens <= max)
    }

    /// The cost of rendered messages.
    pub fn cost(&self, msgs: &[Msg]) -> Cost {
        Cost::of(self.format, self.tokenizer, msgs)
    }

    /// Renders items and returns the messages with their cost.
    pub fn render(&self, items: &[Item]) -> (Vec<Msg>, Cost) {
        let msgs = render(self.format, items);
        let cost = self.cost(&msgs);
        (msgs, cost)
    }

    /// Fails with [`Error::MandatoryExceedsBudget`] unless `mandatory` fits.
    pub fn check_mandatory(&self, mandatory: Size) -> Result<()> {
        if self.fits(mandatory) {
            return Ok(());
        }
        Err(Error::MandatoryExceedsBudget {
            needed_bytes: mandatory.bytes,
            needed_tokens: mandatory.tokens,
            max_bytes: self.req.max_bytes,
            max_tokens: self.req.max_tokens,
            reserve_output: self.req.output_limit(),
            input_token_limit: self.req.input_token_limit(),
            tokenizer: self.tokenizer,
        })
    }

    pub fn budget_report(&self) -> BudgetReport {
        BudgetReport {
            max_bytes: self.req.max_bytes,
            max_tokens: self.req.max_tokens,
            reserve_output: self.req.reserve_output,
            output_limit: self.req.output_limit(),
            input_token_limit: self.req.input_token_limit(),
        }
    }

    /// The system prompt as a message item (OpenAI only; Anthropic carries it in the envelope).
    pub fn system_items(&self) -> Vec<Item> {
        match (&self.req.system, self.format) {
            (Some(system), WireFormat::OpenAiChat) => {
                vec![Item::text(Role::System, system.clone())]
            }
            _ => Vec::new(),
        }
    }

    /// The current input as a message item.
    pub fn input_items(&self) -> Vec<Item> {
        vec![Item::text(Role::User, self.req.input.clone())]
    }
}

/// Converts a history error.
pub(crate) fn hist<T, E: std::error::Error + Send + Sync + 'static>(
    r: std::result::Result<T, E>,
) -> Result<T> {
    r.map_err(|e| Error::History(Box::new(e)))
}

/// The pinned notes in force: notes marked pinned that no later note explicitly supersedes
/// (SPEC P6: supersession is explicit, never guessed).
pub(crate) fn pinned_notes<H: History + ?Sized>(history: &H) -> Result<Vec<Event>> {
    let notes = hist(history.notes())?;
    let superseded: HashSet<u64> = notes
        .iter()
        .filter_map(|n| match n.body {
            EventBody::Note { supersedes, .. } => supersedes.filter(|s| *s < n.seq),
            _ => None,
        })
        .collect();
    Ok(notes
        .into_iter()
        .filter(|n| matches!(n.body, EventBody::Note { pinned: true, .. }))
        .filter(|n| !superseded.contains(&n.seq))
        .collect())
}

/// Pinned notes as items.
pub(crate) fn pinned_items(notes: &[Event]) -> Vec<Item> {
    notes
        .iter()
        .filter_map(|n| {
            n.body
                .text()
                .map(|t| Item::text(Role::System, note_text(t)))
        })
        .collect()
}

/// Adds up tier sizes in body order; the envelope tier takes what the pieces do not.
pub(crate) struct TierSums {
    chain: Cost,
    tiers: Vec<TierSize>,
    tokenizer: Tokenizer,
}

impl TierSums {
    pub fn new(tokenizer: Tokenizer) -> TierSums {
        TierSums {
            chain: Cost::default(),
            tiers: Vec::new(),
            tokenizer,
        }
    }

    /// Appends a piece of `tier` (merged into the previous entry if the tier repeats).
    pub fn push(&mut self, tier: Tier, cost: Cost, items: usize) {
        if cost.ends.is_none() {
            return;
        }
        let next = self.chain.then(cost, self.tokenizer);
        let bytes = (next.bytes - self.chain.bytes).max(0) as u64;
        let tokens = (next.tokens - self.chain.tokens).max(0) as u64;
        self.chain = next;
        match self.tiers.last_mut() {
            Some(last) if last.tier == tier => {
                last.bytes += bytes;
                last.tokens += tokens;
                last.items += items;
            }
            _ => self.tiers.push(TierSize {
                tier,
                bytes,
                tokens,
                items,
            }),
        }
    }

    /// Adds a piece whose size is known exactly and that does not join neighbours (text inside
    /// one message).
    pub fn add_raw(&mut self, tier: Tier, bytes: i64, tokens: i64) {
        let (bytes, tokens) = (bytes.max(0) as u64, tokens.max(0) as u64);
        match self.tiers.iter_mut().find(|t| t.tier == tier) {
            Some(t) => {
                t.bytes += bytes;
                t.tokens += tokens;
                t.items += 1;
            }
            None => self.tiers.push(TierSize {
                tier,
                bytes,
                tokens,
                items: 1,
            }),
        }
    }

    /// The tiers, with the envelope first holding the remainder of `total`.
    pub fn finish(self, total: Size) -> Vec<TierSize> {
        let bytes: u64 = self.tiers.iter().map(|t| t.bytes).sum();
        let tokens: u64 = self.tiers.iter().map(|t| t.tokens).sum();
        let envelope = TierSize {
            tier: Tier::Envelope,
            bytes: total.bytes.saturating_sub(bytes),
            tokens: total.tokens.saturating_sub(tokens),
            items: 1,
        };
        std::iter::once(envelope).chain(self.tiers).collect()
    }
}
