//! Redaction (docs/design.md#e5-redaction): secrets are replaced by a marker before a commit
//! reaches the ledger, so a redacted secret is never in the ledger, its artifacts or the recall
//! index (all three are written from the redacted events).
//!
//! What is looked for ([`RedactionConfig`]):
//!
//! * **built-in shapes** (on by default, [`BUILTIN_KINDS`]): OpenAI keys (`sk-…`,
//!   `sk-proj-…`), Anthropic keys (`sk-ant-…`), AWS access key ids (`AKIA…`, `ASIA…`),
//!   GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`), Slack tokens
//!   (`xox[abposr]-…`), Google API keys (`AIza…`), and PEM private key blocks;
//! * **environment values** (on by default): the value of every environment variable whose
//!   name contains `KEY`, `TOKEN`, `SECRET` or `PASSWORD` (any case), when it is 8 characters
//!   or more, read once when the store is configured;
//! * **named variables**: the values of more environment variables, named in the config;
//! * **configured patterns**: regular expressions (`regex` crate syntax), each with a name.
//!
//! Every match of every rule is found first; then the longest matches win (a tie goes to the
//! rule listed first: configured patterns, then named variables, then the built-ins, then
//! the environment scan) and overlapping shorter ones are dropped. Each secret becomes
//! `[redacted:KIND]`, where KIND names the rule (`openai-key`, `env:NAME`, a pattern's name):
//! never any of the secret's characters.
//!
//! Redaction applies to user and assistant text, notes, tool results (before a large one
//! becomes an artifact), every string inside a tool call's arguments, every string of an
//! assistant reply's or tool call's provider item but its identifiers (`type`, `role`,
//! `status`, `id`, `call_id`, `name`), the readable text of an opaque item, and the reason an
//! erasure, a retention run or an imported export's tombstone records. It runs before the
//! idempotency check, so a replayed commit is compared in its redacted form; it is
//! deterministic for a given configuration and environment.
//!
//! Commit ids are never redacted: an id names its commit for erasure, replays and imports,
//! which a changed id would break. An id that matches a rule is refused instead
//! ([`Redactor::check_commit_id`], [`Redactor::check_erase_id`]). Tool names and call ids
//! are identifiers a program chooses, kept as given.

use std::borrow::Cow;
use std::sync::OnceLock;

/// The keys of a provider item kept as given by redaction: identifiers, like a tool call's id
/// and name.
const PROVIDER_ITEM_IDENTIFIERS: [&str; 6] = ["type", "role", "status", "id", "call_id", "name"];

use ctxlog_ledger::event::Part;
use ctxlog_ledger::rules::Tombstone;
use ctxlog_ledger::{EventBody, NewCommit};
use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The shortest environment value that is redacted: shorter ones are too likely to be common
/// words.
pub const MIN_ENV_VALUE_CHARS: usize = 8;

/// Substrings of an environment variable's name that mark its value as a secret.
pub const SECRET_NAME_PARTS: [&str; 4] = ["KEY", "TOKEN", "SECRET", "PASSWORD"];

/// The built-in shapes: marker kind and regular expression, most specific first. The
/// prefixed shapes match also when glued to other text (`x=sk-…`, `xxxsk-…`): a secret
/// inside a longer token must not slip through. AWS key ids stand alone (word bounds), as
/// `AKIA` plus 16 capitals occurs inside longer encoded strings.
pub const BUILTIN_KINDS: [(&str, &str); 9] = [
    (
        "private-key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
    ),
    ("anthropic-key", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai-key", r"sk-proj-[A-Za-z0-9_-]{20,}"),
    ("openai-key", r"sk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{20,}"),
    (
        "aws-access-key",
        r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA)[A-Z0-9]{16}\b",
    ),
    ("github-token", r"gh[pousr]_[A-Za-z0-9]{36,}"),
    ("github-token", r"github_pat_[A-Za-z0-9_]{22,}"),
    ("slack-token", r"xox[abposr]-[A-Za-z0-9-]{10,}"),
    ("google-api-key", r"AIza[0-9A-Za-z_-]{35}"),
];

/// Which secrets a store redacts. The defaults redact the built-in shapes and secret-named
/// environment values.
///
/// # Format
/// The `[redaction]` table of `ctxlog.toml` (see [`crate::StoreConfig`]):
///
/// ```toml
/// [redaction]
/// builtin = true              # built-in key shapes [default: true]
/// env = true                  # values of *KEY*/*TOKEN*/*SECRET*/*PASSWORD* variables [default: true]
/// env_vars = ["DATABASE_URL"] # more variables whose values are redacted [default: none]
///
/// [[redaction.patterns]]
/// name = "ticket"             # the marker says [redacted:ticket]
/// regex = "TCK-[0-9]{6}"
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedactionConfig {
    /// Redact the built-in shapes ([`BUILTIN_KINDS`]) [default: true].
    pub builtin: bool,
    /// Redact the values of environment variables whose names contain one of
    /// [`SECRET_NAME_PARTS`] [default: true].
    pub env: bool,
    /// More environment variables whose values (of [`MIN_ENV_VALUE_CHARS`] or more) are
    /// redacted [default: none].
    pub env_vars: Vec<String>,
    /// Configured patterns [default: none].
    pub patterns: Vec<PatternConfig>,
}

impl Default for RedactionConfig {
    fn default() -> Self {
        RedactionConfig {
            builtin: true,
            env: true,
            env_vars: Vec::new(),
            patterns: Vec::new(),
        }
    }
}

impl RedactionConfig {
    /// Nothing redacted at all.
    pub fn off() -> RedactionConfig {
        RedactionConfig {
            builtin: false,
            env: false,
            env_vars: Vec::new(),
            patterns: Vec::new(),
        }
    }
}

/// Redaction settings a front end lays over a store's configuration file (the CLI's
/// `--no-redact-*`/`--redact-*` flags, Python's `redact_*` keywords): each `Some` replaces the
/// file's value, and variables and patterns are added to the file's. The one place these
/// overrides mean something, so that every front end means the same by them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedactionOverrides {
    /// Replaces [`RedactionConfig::builtin`] [default: none: the file's value].
    pub builtin: Option<bool>,
    /// Replaces [`RedactionConfig::env`] [default: none: the file's value].
    pub env: Option<bool>,
    /// Added to [`RedactionConfig::env_vars`] [default: none].
    pub env_vars: Vec<String>,
    /// Added to [`RedactionConfig::patterns`] [default: none].
    pub patterns: Vec<PatternConfig>,
}

impl RedactionConfig {
    /// This configuration with `overrides` laid over it.
    pub fn overridden(mut self, overrides: &RedactionOverrides) -> RedactionConfig {
        self.builtin = overrides.builtin.unwrap_or(self.builtin);
        self.env = overrides.env.unwrap_or(self.env);
        self.env_vars.extend(overrides.env_vars.iter().cloned());
        self.patterns.extend(overrides.patterns.iter().cloned());
        self
    }
}

/// A configured pattern: what the marker calls it, and the regular expression.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternConfig {
    /// The marker's kind: 1-40 characters from `a-z 0-9 - _`.
    pub name: String,
    /// The expression, in the `regex` crate's syntax.
    pub regex: String,
}

impl std::str::FromStr for PatternConfig {
    type Err = String;

    /// `NAME=REGEX`, the command line's form (checked when the store is configured).
    fn from_str(s: &str) -> std::result::Result<PatternConfig, String> {
        match s.split_once('=') {
            Some((name, regex)) if !name.is_empty() && !regex.is_empty() => Ok(PatternConfig {
                name: name.to_string(),
                regex: regex.to_string(),
            }),
            _ => Err(format!("expected NAME=REGEX, got {s:?}")),
        }
    }
}

/// One compiled rule.
#[derive(Clone, Debug)]
enum Rule {
    Pattern {
        kind: String,
        regex: Regex,
    },
    /// [`BUILTIN_KINDS`]`[i]`, compiled on the first text redacted (once per process), so a
    /// store that only reads never compiles it.
    Builtin(usize),
    Literal {
        kind: String,
        value: String,
    },
}

impl Rule {
    fn kind(&self) -> &str {
        match self {
            Rule::Pattern { kind, .. } | Rule::Literal { kind, .. } => kind,
            Rule::Builtin(i) => BUILTIN_KINDS.get(*i).map_or("builtin", |(kind, _)| kind),
        }
    }

    /// Every match of this rule in `text`, as byte ranges.
    fn find(&self, text: &str, out: &mut Vec<(usize, usize)>) {
        match self {
            Rule::Pattern { regex, .. } => {
                out.extend(regex.find_iter(text).map(|m| (m.start(), m.end())));
            }
            Rule::Builtin(i) => {
                if let Some(Some(regex)) = builtin_regexes().get(*i) {
                    out.extend(regex.find_iter(text).map(|m| (m.start(), m.end())));
                }
            }
            Rule::Literal { value, .. } => {
                out.extend(
                    text.match_indices(value.as_str())
                        .map(|(i, s)| (i, i + s.len())),
                );
            }
        }
    }
}

/// The compiled form of a [`RedactionConfig`], with the environment read once.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    rules: Vec<Rule>,
}

/// The built-in shapes compiled, in [`BUILTIN_KINDS`] order (they are constants that compile;
/// one that did not would match nothing rather than panic).
fn builtin_regexes() -> &'static [Option<Regex>] {
    static REGEXES: OnceLock<Vec<Option<Regex>>> = OnceLock::new();
    REGEXES.get_or_init(|| {
        BUILTIN_KINDS
            .iter()
            .map(|(_, re)| Regex::new(re).ok())
            .collect()
    })
}

impl Redactor {
    /// Compiles `config`, reading the environment of this process now.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for a pattern that does not compile, matches the empty
    /// string, or has an invalid name.
    pub fn new(config: &RedactionConfig) -> Result<Redactor> {
        Redactor::with_env(config, std::env::vars())
    }

    /// Compiles `config` with `env` as the environment (for tests and embedding).
    ///
    /// # Errors
    /// As [`Redactor::new`].
    pub fn with_env(
        config: &RedactionConfig,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Redactor> {
        let mut rules = Vec::new();
        for p in &config.patterns {
            rules.push(compile_pattern(p)?);
        }
        let env: Vec<(String, String)> = env.into_iter().collect();
        for name in &config.env_vars {
            if let Some((_, value)) = env.iter().find(|(n, _)| n == name) {
                push_literal(&mut rules, name, value);
            }
        }
        if config.builtin {
            rules.extend((0..BUILTIN_KINDS.len()).map(Rule::Builtin));
        }
        if config.env {
            for (name, value) in &env {
                let upper = name.to_ascii_uppercase();
                if SECRET_NAME_PARTS.iter().any(|part| upper.contains(part)) {
                    push_literal(&mut rules, name, value);
                }
            }
        }
        Ok(Redactor { rules })
    }

    /// True when no rule is configured: commits are written as given.
    pub fn is_off(&self) -> bool {
        self.rules.is_empty()
    }

    /// `text` with every secret replaced by its marker (borrowed when nothing matched).
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.rules.is_empty() {
            return Cow::Borrowed(text);
        }
        // (start, end, rule index), found by every rule.
        let mut found: Vec<(usize, usize, usize)> = Vec::new();
        let mut spans = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            spans.clear();
            rule.find(text, &mut spans);
            found.extend(spans.iter().filter(|(a, b)| b > a).map(|&(a, b)| (a, b, i)));
        }
        if found.is_empty() {
            return Cow::Borrowed(text);
        }
        // Longest first; a tie goes to the rule listed first, then to the earlier match.
        found.sort_by_key(|&(a, b, i)| (std::cmp::Reverse(b - a), i, a));
        let mut chosen: Vec<(usize, usize, usize)> = Vec::new();
        for m in found {
            if chosen.iter().all(|c| m.1 <= c.0 || c.1 <= m.0) {
                chosen.push(m);
            }
        }
        chosen.sort_by_key(|c| c.0);
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (a, b, i) in chosen {
            out.push_str(&text[at..a]);
            out.push_str("[redacted:");
            out.push_str(self.rules[i].kind());
            out.push(']');
            at = b;
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }

    /// The kind of the first rule (in the order of the module docs) that matches somewhere
    /// in `text`, if any.
    pub fn first_match(&self, text: &str) -> Option<&str> {
        let mut spans = Vec::new();
        self.rules.iter().find_map(|rule| {
            spans.clear();
            rule.find(text, &mut spans);
            spans.iter().any(|(a, b)| b > a).then(|| rule.kind())
        })
    }

    /// Refuses a commit id that matches a redaction rule. Ids are stored as given: a
    /// redacted or hashed id would no longer name its commit for `erase` by commit id, a
    /// replay, or an import run again, so a secret-like one is refused instead.
    ///
    /// # Errors
    /// [`Error::BadInput`] naming the rule (never the id) and what to use instead.
    pub fn check_commit_id(&self, id: &str) -> Result<()> {
        match self.first_match(id) {
            None => Ok(()),
            Some(kind) => Err(Error::BadInput {
                reason: format!(
                    "the commit id (the turn's \"id\", --id, or the Idempotency-Key header) \
                     looks like a secret: it matches the redaction rule {kind}. Ids are stored \
                     as given, never redacted (a redacted or hashed id would break erase by \
                     commit id, replays and imports), so it is refused and nothing was \
                     written: use an id that is not a secret, such as a UUID or a counter"
                ),
            }),
        }
    }

    /// Refuses erasing by a commit id that matches a redaction rule (no commit is given such
    /// an id; see [`Redactor::check_commit_id`]).
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] (class usage, as an erase target naming no commit) naming
    /// the rule (never the id) and the seq range to use instead.
    pub fn check_erase_id(&self, id: &str) -> Result<()> {
        match self.first_match(id) {
            None => Ok(()),
            Some(kind) => Err(Error::InvalidRequest {
                reason: format!(
                    "the commit id to erase looks like a secret: it matches the redaction rule \
                     {kind}, and such ids are refused (ids are stored as given, never \
                     redacted); nothing was erased. Erase the turn by its seqs instead \
                     (--seqs FROM-TO, or {{\"target\":{{\"seqs\":{{\"from\":…,\"to\":…}}}}}}; \
                     the log shows them)"
                ),
            }),
        }
    }

    /// `tombstone` with its reason redacted (an import rebuilding an export's erasure).
    pub fn redact_tombstone<'a>(&self, tombstone: &'a Tombstone) -> Cow<'a, Tombstone> {
        match self.redact(&tombstone.reason) {
            Cow::Borrowed(_) => Cow::Borrowed(tombstone),
            Cow::Owned(reason) => Cow::Owned(Tombstone {
                reason,
                ..tombstone.clone()
            }),
        }
    }

    /// `commit` with every text (and every string inside tool arguments) redacted.
    pub fn redact_commit<'a>(&self, commit: &'a NewCommit) -> Cow<'a, NewCommit> {
        if self.rules.is_empty() {
            return Cow::Borrowed(commit);
        }
        let mut events = Vec::with_capacity(commit.events.len());
        let mut changed = false;
        for event in &commit.events {
            let redacted = self.redact_event(event);
            changed |= redacted != *event;
            events.push(redacted);
        }
        if !changed {
            return Cow::Borrowed(commit);
        }
        // Text only changes, never the events' number or order: the times still line up.
        Cow::Owned(NewCommit {
            id: commit.id.clone(),
            events,
            times: commit.times.clone(),
            after: commit.after,
        })
    }

    fn redact_event(&self, event: &EventBody) -> EventBody {
        let mut event = event.clone();
        match &mut event {
            EventBody::User { text, .. }
            | EventBody::Assistant { text, .. }
            | EventBody::ToolResult { text, .. }
            | EventBody::Note { text, .. } => self.redact_in_place(text),
            EventBody::ToolCall { arguments, .. } => self.redact_json(arguments),
            // Only an opaque item's readable text: its encrypted parts cannot be read, and a
            // signature must stay as the provider wrote it. (A redacted thinking block no
            // longer matches its signature: the provider refuses it rather than the secret
            // being stored.)
            EventBody::Opaque { item, .. } => self.redact_readable(item),
            EventBody::System { .. } => {}
        }
        // A provider item (an item as the provider sent it or the application gave it): every
        // string in it, as in tool arguments, so no secret the event's fields lose survives
        // in it; its identifiers (type, role, status, ids, the tool's name) are kept as
        // given, and so are base64 `data:` URLs (an image's or file's bytes, which no rule
        // reads, as for media parts).
        if let Some(given) = event.provider_item_mut() {
            for (key, value) in given.item.iter_mut() {
                if !PROVIDER_ITEM_IDENTIFIERS.contains(&key.as_str()) {
                    self.redact_json(value);
                }
            }
        }
        // The words around media: text parts, a document's name, an image's URL (a signed URL
        // can carry a key). Never the bytes: a `data:` URL is base64, which no rule reads.
        for part in event.parts_mut().into_iter().flatten() {
            match part {
                Part::Text { text } => self.redact_in_place(text),
                Part::Image { url: Some(url), .. } if !url.starts_with("data:") => {
                    self.redact_in_place(url)
                }
                Part::Document {
                    name: Some(name), ..
                } => self.redact_in_place(name),
                _ => {}
            }
        }
        event
    }

    /// Redacts the strings under [`ctxlog_ledger::event::OPAQUE_TEXT_KEYS`], at any depth.
    fn redact_readable(&self, item: &mut serde_json::Map<String, serde_json::Value>) {
        for (key, value) in item.iter_mut() {
            match value {
                serde_json::Value::String(s)
                    if ctxlog_ledger::event::OPAQUE_TEXT_KEYS.contains(&key.as_str()) =>
                {
                    self.redact_in_place(s)
                }
                serde_json::Value::Object(map) => self.redact_readable(map),
                serde_json::Value::Array(items) => {
                    for v in items {
                        if let serde_json::Value::Object(map) = v {
                            self.redact_readable(map);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn redact_in_place(&self, text: &mut String) {
        if let Cow::Owned(redacted) = self.redact(text) {
            *text = redacted;
        }
    }

    /// Redacts every string inside `value` (object keys too: a secret is a secret anywhere)
    /// but base64 `data:` URLs (bytes, which no rule reads).
    ///
    /// Two keys can redact to the same marker (two different keys of one kind, or a key that
    /// already reads like the marker): no value is dropped for it. Keys without a secret keep
    /// their names; a redacted key that would collide gets ` #2`, ` #3`, … after its marker.
    fn redact_json(&self, value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(s) if is_base64_data_url(s) => {}
            serde_json::Value::String(s) => self.redact_in_place(s),
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            serde_json::Value::Object(map) => {
                let mut redacted_keys = Vec::new();
                for (key, mut v) in std::mem::take(map) {
                    self.redact_json(&mut v);
                    match self.redact(&key) {
                        Cow::Borrowed(_) => {
                            map.insert(key, v);
                        }
                        Cow::Owned(marker) => redacted_keys.push((marker, v)),
                    }
                }
                for (marker, v) in redacted_keys {
                    let mut key = marker.clone();
                    for n in 2.. {
                        if !map.contains_key(&key) {
                            break;
                        }
                        key = format!("{marker} #{n}");
                    }
                    map.insert(key, v);
                }
            }
            _ => {}
        }
    }
}

fn push_literal(rules: &mut Vec<Rule>, name: &str, value: &str) {
    if value.chars().count() >= MIN_ENV_VALUE_CHARS {
        rules.push(Rule::Literal {
            kind: format!("env:{name}"),
            value: value.to_string(),
        });
    }
}

fn compile_pattern(p: &PatternConfig) -> Result<Rule> {
    let bad = |why: String| Error::InvalidRequest {
        reason: format!("redaction pattern {:?}: {why}", p.name),
    };
    let name_ok = (1..=40).contains(&p.name.len())
        && p.name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !name_ok {
        return Err(bad(
            "the name must be 1-40 characters from a-z 0-9 - _".into()
        ));
    }
    let regex = Regex::new(&p.regex).map_err(|e| {
        bad(format!(
            "invalid regex: {}",
            e.to_string().lines().last().unwrap_or("")
        ))
    })?;
    if regex.is_match("") {
        return Err(bad("the regex matches the empty string".into()));
    }
    Ok(Rule::Pattern {
        kind: p.name.clone(),
        regex,
    })
}

/// Whether `s` is a `data:` URL holding base64 bytes (`data:<type>;base64,…`).
fn is_base64_data_url(s: &str) -> bool {
    s.strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
        .is_some_and(|(media_type, _)| !media_type.contains(char::is_whitespace))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> Redactor {
        Redactor::with_env(&RedactionConfig::default(), Vec::new()).unwrap()
    }

    #[test]
    fn builtin_shapes_become_their_markers() {
        let r = plain();
        let cases = [
            ("key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx12 ok", "openai-key"),
            ("key sk-AbCdEfGhIjKlMnOpQrStUvWx12 ok", "openai-key"),
            ("key sk-ant-api03-AbCdEfGhIjKlMnOpQrSt ok", "anthropic-key"),
            ("key AKIAIOSFODNN7EXAMPLE ok", "aws-access-key"),
            (
                "key ghp_0123456789abcdefghij0123456789abcdef ok",
                "github-token",
            ),
            (
                "key github_pat_11ABCDEFG0123456789_abcdefghij ok",
                "github-token",
            ),
        ];
        for (text, kind) in cases {
            assert_eq!(
                r.redact(text),
                format!("key [redacted:{kind}] ok"),
                "{text}"
            );
        }
        let pem = "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIB\nxyz\n-----END RSA PRIVATE KEY-----\nb";
        assert_eq!(r.redact(pem), "a\n[redacted:private-key]\nb");
        assert!(matches!(r.redact("nothing secret here"), Cow::Borrowed(_)));
        // Glued to other characters (as in a dump with no separators), still found.
        assert_eq!(
            r.redact("xxxxsk-proj-AbCdEfGhIjKlMnOpQrStUvWx12yyyy"),
            "xxxx[redacted:openai-key]"
        );
    }

    #[test]
    fn longest_match_wins_and_markers_hold_no_secret_characters() {
        let env = vec![(
            "MY_API_KEY".to_string(),
            "sk-ant-".to_string() + &"x".repeat(30),
        )];
        let r = Redactor::with_env(&RedactionConfig::default(), env).unwrap();
        let secret = format!("sk-ant-{}", "x".repeat(30));
        // The anthropic shape and the env literal match the same span: the shape is listed
        // first. A longer overlapping env value wins over a shorter shape.
        assert_eq!(r.redact(&secret), "[redacted:anthropic-key]");
        let env = vec![("DB_PASSWORD".to_string(), "hunter2hunter2".to_string())];
        let r = Redactor::with_env(&RedactionConfig::default(), env).unwrap();
        assert_eq!(
            r.redact("pw=hunter2hunter2."),
            "pw=[redacted:env:DB_PASSWORD]."
        );
        let short = vec![("A_TOKEN".to_string(), "short".to_string())];
        let r = Redactor::with_env(&RedactionConfig::default(), short).unwrap();
        assert_eq!(r.redact("short"), "short");
    }

    #[test]
    fn configured_patterns_and_named_variables() {
        let config = RedactionConfig {
            builtin: false,
            env: false,
            env_vars: vec!["DATABASE_URL".into()],
            patterns: vec![PatternConfig {
                name: "ticket".into(),
                regex: "TCK-[0-9]{6}".into(),
            }],
        };
        let env = vec![
            (
                "DATABASE_URL".to_string(),
                "postgres://u:p@h/db".to_string(),
            ),
            ("OTHER_TOKEN".to_string(), "not-redacted-here".to_string()),
        ];
        let r = Redactor::with_env(&config, env).unwrap();
        assert_eq!(
            r.redact("TCK-123456 at postgres://u:p@h/db, not-redacted-here"),
            "[redacted:ticket] at [redacted:env:DATABASE_URL], not-redacted-here"
        );
        for bad in [("Bad Name", "x"), ("ok", "("), ("empty", "a*")] {
            let config = RedactionConfig {
                patterns: vec![PatternConfig {
                    name: bad.0.into(),
                    regex: bad.1.into(),
                }],
                ..RedactionConfig::off()
            };
            assert!(Redactor::with_env(&config, Vec::new()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tool_arguments_are_redacted_everywhere_inside() {
        let r = plain();
        let key = "sk-AbCdEfGhIjKlMnOpQrStUvWx12";
        let commit = NewCommit::new(vec![EventBody::ToolCall {
            call_id: "c".into(),
            tool: "t".into(),
            arguments: serde_json::json!({"env": [{"k": format!("x {key}")}], key: 1}),
            provider_item: None,
        }]);
        let out = serde_json::to_string(&*r.redact_commit(&commit)).unwrap();
        assert!(!out.contains(key), "{out}");
        assert!(out.contains("[redacted:openai-key]"), "{out}");
    }

    #[test]
    fn a_provider_items_strings_are_redacted_and_its_identifiers_kept() {
        let r = plain();
        let key = "sk-AbCdEfGhIjKlMnOpQrStUvWx12";
        let text = format!("the key is {key}");
        let item = serde_json::json!({"id": "msg_1", "type": "message", "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": [{"url": format!("https://x.test/?k={key}")}]}]});
        let commit = NewCommit::new(vec![EventBody::Assistant {
            text,
            provider_item: Some(
                serde_json::from_value(
                    serde_json::json!({"format": "openai-responses", "item": item}),
                )
                .unwrap(),
            ),
        }]);
        let out = r.redact_commit(&commit);
        let json = serde_json::to_string(&*out).unwrap();
        assert!(!json.contains(key), "{json}");
        let EventBody::Assistant {
            text,
            provider_item: Some(given),
        } = &out.events[0]
        else {
            panic!("{json}");
        };
        // The reply's text and the item's text redact alike, so they still agree.
        assert_eq!(
            given.item["content"][0]["text"].as_str(),
            Some(text.as_str())
        );
        assert_eq!(given.item["id"], "msg_1");
        assert_eq!(given.item["status"], "completed");
    }

    #[test]
    fn a_user_items_words_are_redacted_and_its_data_urls_kept() {
        let r = plain();
        let key = "sk-AbCdEfGhIjKlMnOpQrStUvWx12";
        let text = format!("my key is {key}");
        // Base64 that a rule would read as a secret, were it read.
        let image = format!("data:image/png;base64,{key}{key}");
        let item = serde_json::json!({"role": "user", "content": [
            {"type": "input_text", "text": text},
            {"type": "input_image", "image_url": image}]});
        let mut body = EventBody::user(text);
        body.set_provider_item(Some(
            serde_json::from_value(serde_json::json!({"format": "openai-responses", "item": item}))
                .unwrap(),
        ));
        let commit = NewCommit::new(vec![body]);
        let out = r.redact_commit(&commit);
        let EventBody::User {
            text,
            provider_item: Some(given),
            ..
        } = &out.events[0]
        else {
            panic!("{:?}", out.events[0]);
        };
        assert!(!text.contains(key), "{text}");
        assert_eq!(
            given.item["content"][0]["text"].as_str(),
            Some(text.as_str())
        );
        assert_eq!(
            given.item["content"][1]["image_url"].as_str(),
            Some(image.as_str())
        );
    }

    #[test]
    fn the_words_around_media_are_redacted_and_the_bytes_kept() {
        let r = plain();
        let key = "sk-AbCdEfGhIjKlMnOpQrStUvWx12";
        let parts = vec![
            Part::Text {
                text: format!("my key is {key}"),
            },
            Part::Image {
                url: Some(format!("https://example.com/a.png?key={key}")),
                data: None,
                media_type: None,
                detail: None,
                artifact: None,
            },
            Part::Document {
                data: Some("JVBERi0xLjQK".into()),
                media_type: "application/pdf".into(),
                name: Some(format!("{key}.pdf")),
                artifact: None,
            },
        ];
        let commit = NewCommit::new(vec![EventBody::User {
            text: String::new(),
            parts,
            provider_item: None,
        }]);
        let out = serde_json::to_string(&*r.redact_commit(&commit)).unwrap();
        assert!(!out.contains(key), "{out}");
        assert_eq!(out.matches("[redacted:openai-key]").count(), 3, "{out}");
        assert!(out.contains("JVBERi0xLjQK"), "{out}");
    }

    #[test]
    fn keys_that_redact_to_one_marker_keep_every_value() {
        let r = plain();
        let (a, b) = (
            "sk-AbCdEfGhIjKlMnOpQrStUvWx12",
            "sk-ZyXwVuTsRqPoNmLkJiHgFeDc98",
        );
        let mut value = serde_json::json!({
            a: 1,
            b: 2,
            "[redacted:openai-key]": 3,
            "plain": {a: 4},
        });
        r.redact_json(&mut value);
        let mut values: Vec<i64> = value
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.starts_with("[redacted:openai-key]"))
            .map(|(_, v)| v.as_i64().unwrap())
            .collect();
        values.sort_unstable();
        assert_eq!(values, [1, 2, 3], "{value}");
        // The key that was written as the marker keeps its name; the redacted ones give way.
        assert_eq!(value["[redacted:openai-key]"], 3, "{value}");
        assert_eq!(
            value["plain"],
            serde_json::json!({"[redacted:openai-key]": 4})
        );
        assert!(!value.to_string().contains("sk-"), "{value}");
    }
}
