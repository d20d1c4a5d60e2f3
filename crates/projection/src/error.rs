//! The errors a projection can end with.

use crate::options::Tokenizer;

/// Why a projection (or a count) failed. Nothing is ever written anywhere on failure: the
/// projector only reads (docs/design.md#p10-no-mutation).
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The mandatory content alone (envelope, system prompt, pinned content, current input,
    /// tool definitions, output-limit field) does not fit the budget
    /// (docs/design.md#p4-mandatory-input; CLI exit 3).
    #[error(
        "mandatory input exceeds the budget: it needs {needed_bytes} bytes and {needed_tokens} \
         {tokenizer} tokens; the budget allows {} bytes and {} input tokens",
        limit_text(*max_bytes),
        limit_text(*input_token_limit)
    )]
    MandatoryExceedsBudget {
        /// Bytes the mandatory part needs on the wire.
        needed_bytes: u64,
        /// Tokens the mandatory part needs (with the request's tokenizer and counting rule).
        needed_tokens: u64,
        /// The byte budget, if any.
        max_bytes: Option<u64>,
        /// The token budget as given (before the output reservation), if any.
        max_tokens: Option<u64>,
        /// The output reservation subtracted from `max_tokens`.
        reserve_output: Option<u64>,
        /// `max_tokens - reserve_output`: what the input may use, if a token budget was given.
        input_token_limit: Option<u64>,
        /// The tokenizer the tokens were counted with.
        tokenizer: Tokenizer,
    },
    /// The budget cannot be met by any body: a zero limit, or an output reservation that
    /// leaves no input tokens.
    #[error("invalid budget: {reason}")]
    InvalidBudget {
        /// What is wrong, naming the field and its value.
        reason: String,
    },
    /// The request is incomplete or contradictory (for example no model name, or an empty
    /// current input).
    #[error("invalid projection request: {reason}")]
    InvalidRequest {
        /// What is wrong.
        reason: String,
    },
    /// A body given to [`crate::count`] is not a request body of the named format.
    #[error("invalid request body: {reason}")]
    InvalidBody {
        /// What is wrong, with the position when JSON parsing failed.
        reason: String,
    },
    /// The caller's [`crate::History`] failed to supply events.
    #[error("reading the history failed: {0}")]
    History(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// An internal invariant did not hold (a bug): the projector refuses to return a body it
    /// cannot vouch for rather than return one over budget.
    #[error("internal projection error: {reason}")]
    Internal {
        /// The invariant that failed.
        reason: String,
    },
}

fn limit_text(limit: Option<u64>) -> String {
    limit.map_or_else(|| "unlimited".to_owned(), |n| n.to_string())
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
