//! The named choices of a projection: wire format, tokenizer and policy.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The provider request shape a projection emits (docs/design.md#p1-wire-formats).
///
/// Parsed from `openai-chat`, `anthropic-messages` or `openai-responses`; see [`crate::wire`] for the exact bodies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub enum WireFormat {
    /// OpenAI Chat Completions: `{"model":…,"messages":[…]}`.
    #[default]
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    /// Anthropic Messages: `{"model":…,"max_tokens":…,"system":…,"messages":[…]}`.
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
    /// OpenAI Responses: `{"model":…,"instructions":…,"input":[…]}`.
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
}

impl WireFormat {
    /// All formats, in their documented order.
    pub const ALL: [WireFormat; 3] = [
        WireFormat::OpenAiChat,
        WireFormat::AnthropicMessages,
        WireFormat::OpenAiResponses,
    ];

    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            WireFormat::OpenAiChat => "openai-chat",
            WireFormat::AnthropicMessages => "anthropic-messages",
            WireFormat::OpenAiResponses => "openai-responses",
        }
    }

    /// Whether this format's provider publishes a tokenizer and counting rule we reproduce
    /// exactly. Only OpenAI does, and only for Chat Completions; for Anthropic, and for the
    /// Responses API's items (whose per-item overhead OpenAI does not publish), every token
    /// figure is an estimate (docs/design.md#p3-tokens).
    pub fn tokens_exact(self) -> bool {
        matches!(self, WireFormat::OpenAiChat)
    }

    /// Whether a body of this format carries opaque items of `format`: only its own
    /// (docs/design.md#p14-more-wire-formats).
    pub fn carries(self, format: ctxlog_event::OpaqueFormat) -> bool {
        matches!(
            (self, format),
            (
                WireFormat::OpenAiResponses,
                ctxlog_event::OpaqueFormat::OpenaiResponses
            ) | (
                WireFormat::AnthropicMessages,
                ctxlog_event::OpaqueFormat::AnthropicMessages
            )
        )
    }
}

/// An offline BPE tokenizer used to count tokens (docs/design.md#p3-tokens).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub enum Tokenizer {
    /// `o200k_base` (gpt-4o, gpt-4o-mini, o-series and later OpenAI models).
    #[default]
    #[serde(rename = "o200k")]
    O200k,
    /// `cl100k_base` (gpt-4, gpt-3.5-turbo).
    #[serde(rename = "cl100k")]
    Cl100k,
}

impl Tokenizer {
    /// All tokenizers.
    pub const ALL: [Tokenizer; 2] = [Tokenizer::O200k, Tokenizer::Cl100k];

    /// The short name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Tokenizer::O200k => "o200k",
            Tokenizer::Cl100k => "cl100k",
        }
    }

    /// The encoding's full name (`o200k_base`, `cl100k_base`).
    pub fn encoding_name(self) -> &'static str {
        match self {
            Tokenizer::O200k => "o200k_base",
            Tokenizer::Cl100k => "cl100k_base",
        }
    }
}

/// Which content a projection keeps (docs/design.md#p5-whole-turns, docs/design.md#p6-agent-tiers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum Policy {
    /// The agent policy when the newest turns a window could hold contain a tool call or
    /// result, else the turns policy; the report names the policy chosen
    /// ([`crate::AUTO_TURNS`] bounds the check).
    #[default]
    Auto,
    /// Whole turns, newest first, as a contiguous suffix (docs/design.md#p5-whole-turns).
    Turns,
    /// Tiered agent context: pinned intent, requests, latest result and status; optional
    /// tiers dropped in a fixed order (docs/design.md#p6-agent-tiers).
    Agent,
}

impl Policy {
    /// All policies.
    pub const ALL: [Policy; 3] = [Policy::Auto, Policy::Turns, Policy::Agent];

    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Auto => "auto",
            Policy::Turns => "turns",
            Policy::Agent => "agent",
        }
    }

    /// How many recalled pages are included when the request does not say
    /// (docs/design.md#r6-auto-include): 0 for [`Policy::Turns`], 2 for [`Policy::Agent`];
    /// with [`Policy::Auto`], that of the policy chosen.
    pub fn default_recall_k(self) -> usize {
        match self {
            Policy::Auto | Policy::Turns => 0,
            Policy::Agent => 2,
        }
    }
}

/// Where the kept history starts (docs/projection.md, "Windows").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum Window {
    /// The newest turns that fit: the first kept turn moves on every call once the budget is
    /// full (docs/design.md#p5-whole-turns).
    #[default]
    Sliding,
    /// The first kept turn stays fixed while the suffix from it fits, and moves forward by a
    /// block when it no longer does, so consecutive bodies share their prefix for a provider's
    /// prompt cache; what varies per call goes after it.
    Stable,
}

impl Window {
    /// All windows.
    pub const ALL: [Window; 2] = [Window::Sliding, Window::Stable];

    /// The name used on the command line and in requests.
    pub fn as_str(self) -> &'static str {
        match self {
            Window::Sliding => "sliding",
            Window::Stable => "stable",
        }
    }
}

/// A name that is not one of the valid values of an option.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {given:?}; valid values: {}", valid.join(", "))]
pub struct UnknownName {
    /// What was being parsed (`format`, `tokenizer`, `policy`).
    pub what: &'static str,
    /// The text given.
    pub given: String,
    /// The accepted names.
    pub valid: Vec<&'static str>,
}

fn parse_name<T: Copy>(
    what: &'static str,
    given: &str,
    all: &[T],
    name: impl Fn(T) -> &'static str,
) -> Result<T, UnknownName> {
    all.iter()
        .copied()
        .find(|v| name(*v) == given)
        .ok_or_else(|| UnknownName {
            what,
            given: given.to_owned(),
            valid: all.iter().map(|v| name(*v)).collect(),
        })
}

impl FromStr for WireFormat {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        parse_name("format", s, &WireFormat::ALL, WireFormat::as_str)
    }
}

impl FromStr for Tokenizer {
    type Err = UnknownName;
    /// Accepts the short name (`o200k`) and the encoding name (`o200k_base`).
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        let short = s.strip_suffix("_base").unwrap_or(s);
        parse_name("tokenizer", short, &Tokenizer::ALL, Tokenizer::as_str).map_err(|mut e| {
            e.given = s.to_owned();
            e
        })
    }
}

impl FromStr for Window {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        parse_name("window", s, &Window::ALL, Window::as_str)
    }
}

impl FromStr for Policy {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        parse_name("policy", s, &Policy::ALL, Policy::as_str)
    }
}

macro_rules! display_as_str {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}
display_as_str!(WireFormat, Tokenizer, Policy, Window);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_valid_values() {
        for f in WireFormat::ALL {
            assert_eq!(f.as_str().parse::<WireFormat>().unwrap(), f);
        }
        for t in Tokenizer::ALL {
            assert_eq!(t.as_str().parse::<Tokenizer>().unwrap(), t);
            assert_eq!(t.encoding_name().parse::<Tokenizer>().unwrap(), t);
        }
        for p in Policy::ALL {
            assert_eq!(p.as_str().parse::<Policy>().unwrap(), p);
        }
        let err = "gemini".parse::<WireFormat>().unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown format \"gemini\"; valid values: openai-chat, anthropic-messages, \
             openai-responses"
        );
        let err = "p50k".parse::<Tokenizer>().unwrap_err().to_string();
        assert!(err.contains("o200k, cl100k"), "{err}");
        assert!("Turns".parse::<Policy>().is_err());
    }

    #[test]
    fn serde_names_match_the_cli_names() {
        assert_eq!(
            serde_json::to_string(&WireFormat::AnthropicMessages).unwrap(),
            "\"anthropic-messages\""
        );
        assert_eq!(
            serde_json::to_string(&Tokenizer::Cl100k).unwrap(),
            "\"cl100k\""
        );
        assert_eq!(serde_json::to_string(&Policy::Agent).unwrap(), "\"agent\"");
    }
}

// Every front end reads these names the same way: serde goes through `FromStr`, so a JSON
// request, a Python keyword and a command-line flag name the option in the same words.
macro_rules! from_string {
    ($($t:ty),*) => {$(
        impl TryFrom<String> for $t {
            type Error = UnknownName;
            fn try_from(s: String) -> Result<Self, UnknownName> {
                s.parse()
            }
        }
    )*};
}
from_string!(WireFormat, Tokenizer, Policy, Window);
