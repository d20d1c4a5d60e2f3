//! The cost model and the budget: what a run of messages adds to a body, and whether the body
//! fits (docs/design.md#p2-exact-bytes, docs/design.md#p3-tokens,
//! docs/design.md#p4-mandatory-input, docs/design.md#p9-cost).
//!
//! Bytes come from the wire writer ([`Msg::write`], [`Envelope::write`]): a message's size is
//! the length of what the writer writes for it, and joining two messages adds a comma, or, for
//! same-role Anthropic neighbours, merges them into one ([`merge_saving`]). Tokens are counted
//! from the messages' values with the rule of [`crate::tokens`], so they equal what
//! [`count`](crate::count) finds in the written body.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::media::{CacheHints, ImageRule};
use crate::options::{Tokenizer, WireFormat};
use crate::report::{
    BudgetReport, OpaqueCounts, RecallReport, Report, Size, Tier, TierSize, TurnCounts,
};
use crate::request::ProjectionRequest;
use crate::tokens::{
    Counter, REPLY_PRIMING, TOKENS_PER_MESSAGE, TOKENS_PER_NAME, call_tokens, fields_tokens,
    system_prompt_tokens, text_tokens, tool_use_tokens, tools_tokens,
};
use crate::wire::{
    Block, CACHE_CONTROL, Envelope, Item, MergesWith, Msg, OpenAiMsg, PROMPT_CACHE_BREAKPOINT,
    ResponsesItem, Speaker, is_blank, merge_saving, render, with_breakpoint,
};

/// A request's budget, with the envelope its body is written in and that envelope's size.
pub(crate) struct Budget<'r> {
    pub req: &'r ProjectionRequest,
    pub format: WireFormat,
    /// Counts the token figures (nothing, when none is needed: [`Counter`]).
    pub counter: Counter,
    pub envelope: Envelope,
    envelope_size: Cost,
    /// Held back for recalled pages by [`fits`](Self::fits) (docs/design.md#p13-true-words); can be
    /// given up.
    reserve: std::cell::Cell<Size>,
}

impl<'r> Budget<'r> {
    pub fn new(req: &'r ProjectionRequest) -> Budget<'r> {
        let envelope = envelope_of(req);
        let counter = Counter::of(req);
        let mut envelope_size = envelope_cost(&envelope, counter);
        // The history breakpoint is written at most once: the most it adds is counted with
        // the envelope, before anything is fitted (what it did not use is given back when the
        // body is written).
        if let Some(bytes) = history_breakpoint(req) {
            envelope_size.bytes += bytes;
        }
        Budget {
            req,
            format: req.format,
            counter,
            envelope,
            envelope_size,
            reserve: std::cell::Cell::new(req.recall_reserve_size()),
        }
    }

    /// Gives up the room held back for recalled pages (when even the mandatory part would
    /// not fit beside it).
    pub fn drop_reserve(&self) {
        self.reserve.set(Size::default());
    }

    /// The whole body's size for a chain of messages inside the envelope.
    pub fn total(&self, chain: Cost) -> Size {
        Size {
            bytes: (self.envelope_size.bytes + chain.bytes).max(0) as u64,
            tokens: (self.envelope_size.tokens + chain.tokens).max(0) as u64,
        }
    }

    /// Whether a body of this size leaves the room held back for recalled pages free: what
    /// history and growing results are fitted to.
    pub fn fits(&self, size: Size) -> bool {
        let reserve = self.reserve.get();
        self.fits_all(Size {
            bytes: size.bytes + reserve.bytes,
            tokens: size.tokens + reserve.tokens,
        })
    }

    /// Whether a body of this size meets the budget (recalled pages may use all of it).
    pub fn fits_all(&self, size: Size) -> bool {
        self.req.max_bytes.is_none_or(|max| size.bytes <= max)
            && self
                .req
                .input_token_limit()
                .is_none_or(|max| size.tokens <= max)
    }

    /// The cost of rendered messages written one after another.
    pub fn cost(&self, msgs: &[Msg]) -> Cost {
        msgs.iter().fold(Cost::default(), |chain, msg| {
            chain.then(message_cost(self.counter, msg), self.counter)
        })
    }

    /// Renders items and returns the messages with their cost.
    pub fn render(&self, items: &[Item]) -> (Vec<Msg>, Cost) {
        let msgs = render(self.format, items);
        let cost = self.cost(&msgs);
        (msgs, cost)
    }

    /// Renders the system prompt's items, marked with OpenAI's explicit cache breakpoint when
    /// the model takes one ([`mark_system`]).
    pub fn render_system(&self, items: &[Item]) -> (Vec<Msg>, Cost) {
        let mut msgs = render(self.format, items);
        mark_system(self.req, &mut msgs);
        let cost = self.cost(&msgs);
        (msgs, cost)
    }

    /// Fails with [`Error::MandatoryExceedsBudget`] unless `mandatory` fits.
    pub fn check_mandatory(&self, mandatory: Size) -> Result<()> {
        if self.fits_all(mandatory) {
            if !self.fits(mandatory) {
                self.drop_reserve();
            }
            return Ok(());
        }
        Err(Error::MandatoryExceedsBudget {
            needed_bytes: mandatory.bytes,
            needed_tokens: mandatory.tokens,
            max_bytes: self.req.max_bytes,
            max_tokens: self.req.max_tokens,
            reserve_output: self.req.output_limit(),
            input_token_limit: self.req.input_token_limit(),
            tokenizer: self.counter.tokenizer,
        })
    }

    /// The budget as applied, for the report.
    fn budget_report(&self) -> BudgetReport {
        BudgetReport {
            max_bytes: self.req.max_bytes,
            max_tokens: self.req.max_tokens,
            reserve_output: self.req.reserve_output,
            output_limit: self.req.output_limit(),
            input_token_limit: self.req.input_token_limit(),
            recall_reserve: self.reserve.get(),
        }
    }

    /// The report of a body of size `total` whose mandatory part is `mandatory`, with what the
    /// request and the budget say (format, tokenizer, policy, sizes, the budget as applied)
    /// and nothing kept, left out or clipped yet: each policy fills in the rest.
    pub fn report(&self, total: Size, mandatory: Size) -> Report {
        Report {
            format: self.format,
            tokenizer: self.counter.tokenizer,
            policy: self.req.policy,
            policy_reason: None,
            bytes: total.bytes,
            tokens: total.tokens,
            tokens_exact: self.format.tokens_exact(),
            budget: self.budget_report(),
            mandatory,
            turns: TurnCounts::default(),
            kept: Vec::new(),
            dropped: Vec::new(),
            pinned: Vec::new(),
            detail_start: None,
            tiers: Vec::new(),
            clips: Vec::new(),
            drops: Vec::new(),
            notice: None,
            recall: RecallReport::default(),
            notes: Vec::new(),
            opaque: OpaqueCounts::default(),
            erased: Vec::new(),
            lost: Vec::new(),
            media: None,
            stable_prefix: None,
            cache_hints: None,
        }
    }

    /// Writes the body of `msgs` in the envelope, checked against its accounting: `total` must
    /// be its exact size and fit the budget (else an internal error names `what`; the body is
    /// never returned over budget).
    pub fn write_checked(&self, msgs: Vec<Msg>, total: Size, what: &str) -> Result<Vec<u8>> {
        let body = self.envelope.write(msgs);
        if body.len() as u64 != total.bytes || !self.fits_all(total) {
            return Err(Error::Internal {
                reason: format!("{what} {} bytes, accounted {}", body.len(), total.bytes),
            });
        }
        Ok(body)
    }
}

/// The cache hints a body for `req` carries: none without `cache_hints`, else the model's from
/// the model table, or the format's default (docs/projection.md, "Cache hints").
pub(crate) fn cache_hints(req: &ProjectionRequest) -> Option<CacheHints> {
    req.cache_hints
        .then(|| crate::media::hints_for(req.format, &req.model).0)
}

/// Whether a body for `req` carries a cache breakpoint at the end of its stable prefix (with
/// breakpoint hints, `window: stable` and the turns policy), and if so the most bytes it adds:
/// Anthropic's `cache_control`, or OpenAI's `prompt_cache_breakpoint` (a Chat Completions
/// text message's content written as one text part to carry it).
pub(crate) fn history_breakpoint(req: &ProjectionRequest) -> Option<i64> {
    let hints = cache_hints(req).filter(|h| h.breakpoints())?;
    if req.window != crate::options::Window::Stable || req.policy != crate::options::Policy::Turns {
        return None;
    }
    Some(match (hints, req.format) {
        (CacheHints::CacheControl, _) => CACHE_CONTROL.len() as i64,
        (_, WireFormat::OpenAiChat) => {
            let text = Msg::OpenAi(OpenAiMsg::Text {
                role: crate::wire::Role::User,
                text: String::new(),
            });
            let marked = with_breakpoint(&text).map_or(0, |m| m.to_bytes().len());
            marked as i64 - text.to_bytes().len() as i64
        }
        _ => PROMPT_CACHE_BREAKPOINT.len() as i64,
    })
}

/// Marks the end of the stable prefix with a cache breakpoint: on the last of `msgs` (the
/// stable prefix) that can carry one, else on the last of `tail` (the whole body is then
/// cached). Returns the bytes it added (none when no message can carry one).
pub(crate) fn mark_breakpoint(msgs: &mut [Msg], tail: &mut [Msg]) -> i64 {
    let markable = |m: &Msg| match m {
        Msg::Anthropic { blocks, .. } => !matches!(
            blocks.last(),
            None | Some(Block::Opaque(_) | Block::CacheBreak)
        ),
        _ => with_breakpoint(m).is_some(),
    };
    let at = msgs.iter_mut().rev().find(|m| markable(m));
    let Some(at) = at.or_else(|| tail.iter_mut().rev().find(|m| markable(m))) else {
        return 0;
    };
    let before = at.to_bytes().len() as i64;
    if let Msg::Anthropic { blocks, .. } = &mut *at {
        blocks.push(Block::CacheBreak);
    } else if let Some(marked) = with_breakpoint(at) {
        *at = marked;
    }
    at.to_bytes().len() as i64 - before
}

/// Marks a Chat Completions system prompt with OpenAI's explicit breakpoint when the model
/// takes one (the OpenAI counterpart of Anthropic's breakpoint on the system prompt; the
/// Responses `instructions` string has no place for one).
fn mark_system(req: &ProjectionRequest, msgs: &mut [Msg]) {
    if cache_hints(req) != Some(CacheHints::PromptCacheBreakpoints) {
        return;
    }
    for msg in msgs {
        if let Some(marked) = with_breakpoint(msg) {
            *msg = marked;
        }
    }
}

/// The envelope `req` asks for.
fn envelope_of(req: &ProjectionRequest) -> Envelope {
    let system = match req.format {
        // Anthropic rejects a blank system prompt; it carries nothing, so it is left out.
        WireFormat::AnthropicMessages => req.system.clone().filter(|s| !is_blank(s)),
        WireFormat::OpenAiResponses => req.system.clone(),
        WireFormat::OpenAiChat => None,
    };
    Envelope {
        format: req.format,
        model: req.model.clone(),
        output_limit: req.output_limit(),
        system,
        tools: anthropic_cached_tools(req),
        fields: fields_with_cache_key(req),
        cache_system: cache_hints(req) == Some(CacheHints::CacheControl),
    }
}

/// The tool definitions; with Anthropic cache hints and no system prompt, the last one
/// carries the breakpoint that caches the tools.
fn anthropic_cached_tools(req: &ProjectionRequest) -> Vec<Value> {
    let mut tools = req.tools.clone();
    let has_system = req.system.as_deref().is_some_and(|s| !is_blank(s));
    let hints = cache_hints(req) == Some(CacheHints::CacheControl);
    if hints
        && !has_system
        && let Some(Value::Object(last)) = tools.last_mut()
    {
        last.insert(
            "cache_control".into(),
            serde_json::json!({"type": "ephemeral"}),
        );
    }
    tools
}

/// The passed-through fields; with OpenAI cache hints and a cache key, `prompt_cache_key`
/// after them (unless the caller gave one).
fn fields_with_cache_key(req: &ProjectionRequest) -> serde_json::Map<String, Value> {
    let mut fields = req.fields.clone();
    let openai = cache_hints(req).is_some_and(|h| h != CacheHints::CacheControl);
    if let (true, Some(key)) = (openai, &req.cache_key) {
        fields
            .entry("prompt_cache_key")
            .or_insert_with(|| Value::String(key.clone()));
    }
    fields
}

/// The envelope alone (an empty messages array), including reply priming, the Anthropic
/// system prompt or Responses instructions, and the tool definitions.
fn envelope_cost(envelope: &Envelope, counter: Counter) -> Cost {
    let bytes = envelope.write(Vec::new()).len();
    let tokens = counter.count(|tokenizer| {
        let tools = tools_tokens(envelope.format, tokenizer, &envelope.tools);
        let system = match (envelope.format, &envelope.system) {
            (WireFormat::AnthropicMessages | WireFormat::OpenAiResponses, Some(system)) => {
                system_prompt_tokens(tokenizer, system)
            }
            _ => 0,
        };
        REPLY_PRIMING + tools + system + fields_tokens(tokenizer, &envelope.fields)
    });
    Cost {
        bytes: bytes as i64,
        tokens: tokens as i64,
        ends: None,
    }
}

/// The size of a run of messages, and how its ends join neighbours.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cost {
    pub bytes: i64,
    pub tokens: i64,
    /// What the first and the last message merge with; `None` for an empty run.
    pub ends: Option<(MergesWith, MergesWith)>,
}

impl Cost {
    /// The cost of `self` followed by `next` in one messages array: a comma between them, or,
    /// for same-role Anthropic neighbours, one merged message.
    pub fn then(self, next: Cost, counter: Counter) -> Cost {
        let (Some((first, last)), Some((next_first, next_last))) = (self.ends, next.ends) else {
            return if self.ends.is_some() { self } else { next };
        };
        let (join_bytes, join_tokens) = join(last, next_first, counter);
        Cost {
            bytes: self.bytes + next.bytes + join_bytes,
            tokens: self.tokens + next.tokens + join_tokens,
            ends: Some((first, next_last)),
        }
    }
}

/// What joining two messages adds: a comma, or, when they merge, minus what merging saves
/// (the second message's opening and per-message tokens).
fn join(last: MergesWith, first: MergesWith, counter: Counter) -> (i64, i64) {
    let speaker = match (last, first) {
        (MergesWith::User, MergesWith::User) => Speaker::User,
        (MergesWith::Assistant, MergesWith::Assistant) => Speaker::Assistant,
        _ => return (1, 0),
    };
    let tokens = counter.count(|t| TOKENS_PER_MESSAGE + text_tokens(t, speaker.as_str()));
    (-merge_saving(speaker), -(tokens as i64))
}

/// The cost of one message on its own.
fn message_cost(counter: Counter, msg: &Msg) -> Cost {
    let bytes = msg.to_bytes();
    let tokens = counter.count(|tokenizer| {
        if beyond_parser_depth(msg) {
            // `count` cannot parse such a message (serde_json stops at 128 levels); it is
            // counted by its whole JSON text, more than its fields' text, so a token budget
            // still holds.
            TOKENS_PER_MESSAGE + text_tokens(tokenizer, &String::from_utf8_lossy(&bytes))
        } else if has_media(msg) {
            written_tokens(tokenizer, counter.image, msg, &bytes)
        } else {
            message_tokens(tokenizer, counter.image, msg)
        }
    });
    let edge = msg.merges_with();
    Cost {
        bytes: bytes.len() as i64,
        tokens: tokens as i64,
        ends: Some((edge, edge)),
    }
}

/// Tokens of a message with media, as `count` counts it: the written message read back, each
/// image by the model's rule and each document by the page rule, never the base64's text.
fn written_tokens(tokenizer: Tokenizer, image: ImageRule, msg: &Msg, bytes: &[u8]) -> u64 {
    let value = serde_json::from_slice(bytes).unwrap_or_default();
    let format = match msg {
        Msg::OpenAi(_) => WireFormat::OpenAiChat,
        Msg::Responses(_) => WireFormat::OpenAiResponses,
        Msg::Anthropic { .. } => WireFormat::AnthropicMessages,
    };
    crate::tokens::message_tokens(format, tokenizer, image, &value)
}

/// Whether the message holds parts (images, documents), whose tokens the format's rule
/// charges by their kind rather than their text.
fn has_media(msg: &Msg) -> bool {
    let answer = |a: &crate::wire::Answer| !a.parts.is_empty();
    match msg {
        Msg::OpenAi(OpenAiMsg::Parts { .. }) | Msg::Responses(ResponsesItem::Parts { .. }) => true,
        Msg::OpenAi(OpenAiMsg::ToolResult(a)) | Msg::Responses(ResponsesItem::Output(a)) => {
            answer(a)
        }
        Msg::Anthropic { blocks, .. } => blocks.iter().any(|b| match b {
            Block::Media(_) => true,
            Block::ToolResult(a) => answer(a),
            _ => false,
        }),
        _ => false,
    }
}

/// Tokens of one message by the format's rule ([`crate::tokens`]): 3, plus its string fields
/// (role, content, ids), plus per OpenAI tool call its name and arguments and 1, plus per
/// Anthropic block its text, or its id, name and input, or its id and content.
fn message_tokens(tokenizer: Tokenizer, image: ImageRule, msg: &Msg) -> u64 {
    let t = |text: &str| text_tokens(tokenizer, text);
    let fields = match msg {
        Msg::OpenAi(OpenAiMsg::Parts { .. }) | Msg::Responses(ResponsesItem::Parts { .. }) => {
            return written_tokens(tokenizer, image, msg, &msg.to_bytes());
        }
        Msg::OpenAi(OpenAiMsg::Text { role, text } | OpenAiMsg::Breakpoint { role, text }) => {
            t(role.openai_name()) + t(text)
        }
        Msg::OpenAi(OpenAiMsg::Calls { text, calls }) => {
            t("assistant")
                + text.as_deref().map_or(0, t)
                + calls
                    .iter()
                    .map(|c| call_tokens(tokenizer, &c.name, &c.arguments))
                    .sum::<u64>()
        }
        Msg::OpenAi(OpenAiMsg::ToolResult(a)) => t("tool") + t(&a.call_id) + t(&a.content),
        Msg::Responses(item) => responses_item_tokens(tokenizer, image, item),
        Msg::Anthropic { speaker, blocks } => {
            t(speaker.as_str())
                + blocks
                    .iter()
                    .map(|b| block_tokens(tokenizer, image, b))
                    .sum::<u64>()
        }
    };
    TOKENS_PER_MESSAGE + fields
}

/// A Responses item's string fields (its `type` too) and its parts' text; a function call's
/// `name` adds 1, as a message's does.
fn responses_item_tokens(tokenizer: Tokenizer, image: ImageRule, item: &ResponsesItem) -> u64 {
    let t = |text: &str| text_tokens(tokenizer, text);
    match item {
        // The breakpoint is metadata, not prompt text (as `count` reads a part's fields).
        ResponsesItem::Message { role, text } | ResponsesItem::Breakpoint { role, text } => {
            t("message") + t(role.openai_name()) + t(text)
        }
        ResponsesItem::Call(c) => {
            t("function_call") + t(&c.id) + t(&c.name) + TOKENS_PER_NAME + t(&c.arguments)
        }
        ResponsesItem::Output(a) => t("function_call_output") + t(&a.call_id) + t(&a.content),
        ResponsesItem::Parts { .. } => {
            let msg = Msg::Responses(item.clone());
            written_tokens(tokenizer, image, &msg, &msg.to_bytes()) - TOKENS_PER_MESSAGE
        }
        // As `count` counts it, less the per-message tokens added by the caller.
        ResponsesItem::Opaque(item) => {
            let image = crate::media::default_rule(WireFormat::OpenAiResponses);
            crate::tokens::message_tokens(WireFormat::OpenAiResponses, tokenizer, image, item)
                - TOKENS_PER_MESSAGE
        }
    }
}

fn block_tokens(tokenizer: Tokenizer, image: ImageRule, block: &Block) -> u64 {
    match block {
        Block::Media(_) => {
            let mut bytes = Vec::new();
            crate::wire::write_block(&mut bytes, block);
            let value = serde_json::from_slice(&bytes).unwrap_or_default();
            crate::tokens::block_tokens(WireFormat::AnthropicMessages, tokenizer, image, &value)
        }
        Block::Text(text) => text_tokens(tokenizer, text),
        Block::ToolUse { id, name, input } => tool_use_tokens(tokenizer, id, name, input),
        Block::ToolResult(a) => {
            text_tokens(tokenizer, &a.call_id) + text_tokens(tokenizer, &a.content)
        }
        Block::Opaque(item) => {
            let image = crate::media::ImageRule::Area;
            crate::tokens::block_tokens(WireFormat::AnthropicMessages, tokenizer, image, item)
        }
        // Metadata, not prompt text (as `count` reads a block's `cache_control`).
        Block::CacheBreak => 0,
    }
}

/// The deepest nesting `serde_json` parses: a container opened at this depth fails.
const PARSER_DEPTH: usize = 128;

/// Whether the message, written, nests containers deeper than `serde_json` parses. Only an
/// Anthropic `tool_use` input can: it sits at depth 4 (message, content, block, input).
fn beyond_parser_depth(msg: &Msg) -> bool {
    let Msg::Anthropic { blocks, .. } = msg else {
        return false;
    };
    blocks.iter().any(|b| match b {
        Block::ToolUse { input, .. } => deeper_than(input, PARSER_DEPTH - 1 - 3),
        _ => false,
    })
}

/// Whether `value` nests more than `levels` containers (recursing at most `levels` deep).
fn deeper_than(value: &Value, levels: usize) -> bool {
    let mut children: Box<dyn Iterator<Item = &Value>> = match value {
        Value::Array(items) => Box::new(items.iter()),
        Value::Object(map) => Box::new(map.values()),
        _ => return false,
    };
    levels == 0 || children.any(|c| deeper_than(c, levels - 1))
}

/// Adds up tier sizes in body order; the envelope tier takes what the pieces do not.
pub(crate) struct TierSums {
    chain: Cost,
    tiers: Vec<TierSize>,
    counter: Counter,
}

impl TierSums {
    pub fn new(counter: Counter) -> TierSums {
        TierSums {
            chain: Cost::default(),
            tiers: Vec::new(),
            counter,
        }
    }

    /// Appends a piece of `tier` (merged into the previous entry if the tier repeats).
    pub fn push(&mut self, tier: Tier, cost: Cost, items: usize) {
        if cost.ends.is_none() {
            return;
        }
        let next = self.chain.then(cost, self.counter);
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tokens::count;
    use crate::wire::{Answer, Call, Role};

    fn request(format: WireFormat, tokenizer: Tokenizer) -> ProjectionRequest {
        let mut b = ProjectionRequest::builder();
        b.format(format)
            .tokenizer(tokenizer)
            .model("m")
            .system("Be \"brief\".")
            .input("go")
            .tools(vec![
                json!({"type":"function","function":{"name":"f","description":"F."}}),
            ]);
        b.build().unwrap()
    }

    fn call(id: &str, arguments: Value) -> Call {
        Call {
            id: id.into(),
            name: "shell".into(),
            arguments,
            provider_item: None,
        }
    }

    fn items() -> Vec<Item> {
        vec![
            Item::text(Role::System, "Note: pinned\n"),
            Item::text(Role::User, "中文 😀 \"q\" \\ \u{1}"),
            Item::Calls {
                text: Some("Running it.".into()),
                reply: None,
                calls: vec![
                    call(
                        "c1",
                        json!({"cmd": "ls -la", "n": 1.5e300, "deep": [[{"a": null}]]}),
                    ),
                    call("c2", json!("{\"k\": [1, 2]}")),
                    call("c3", json!([1, "two"])),
                ],
            },
            Item::Answers(vec![
                Answer {
                    call_id: "c1".into(),
                    content: "ok\n".into(),
                    is_error: false,
                    parts: Vec::new(),
                    provider_item: None,
                },
                Answer {
                    call_id: "c2".into(),
                    content: "boom".into(),
                    is_error: true,
                    parts: Vec::new(),
                    provider_item: None,
                },
            ]),
            Item::text(Role::User, "more"),
            Item::text(Role::Assistant, "   "),
            Item::text(Role::Assistant, "done"),
        ]
    }

    #[test]
    fn counted_from_values_equals_counting_the_written_body() {
        for format in WireFormat::ALL {
            for tokenizer in [Tokenizer::O200k, Tokenizer::Cl100k] {
                let req = request(format, tokenizer);
                let budget = Budget::new(&req);
                let items = items();
                for n in 0..=items.len() {
                    let (msgs, cost) = budget.render(&items[..n]);
                    let total = budget.total(cost);
                    let body = budget.envelope.write(msgs);
                    let counted = count(&body, format, tokenizer).unwrap();
                    assert_eq!((total.bytes, total.tokens), (counted.bytes, counted.tokens));
                }
            }
        }
    }

    /// Tool arguments `depth` containers deep: objects, or arrays (sent as `{"value":…}`).
    fn nested(depth: usize, array: bool) -> Value {
        let mut value = json!("payload");
        for _ in 0..depth {
            value = if array {
                json!([value])
            } else {
                json!({ "a": value })
            };
        }
        value
    }

    #[test]
    fn the_parser_depth_limit_is_where_serde_json_stops() {
        for depth in 118..=130 {
            for array in [false, true] {
                let items = [Item::Calls {
                    text: None,
                    reply: None,
                    calls: vec![call("c", nested(depth, array))],
                }];
                let msgs = render(WireFormat::AnthropicMessages, &items);
                let unparsable = serde_json::from_slice::<Value>(&msgs[0].to_bytes()).is_err();
                assert_eq!(beyond_parser_depth(&msgs[0]), unparsable, "{depth} {array}");
            }
        }
    }
}
