//! A store's configuration file, `ctxlog.toml` at the store root (or a file named with
//! `--config`): redaction (docs/design.md#e5-redaction) and retention
//! (docs/design.md#e2-retention).
//!
//! # Format
//!
//! ```toml
//! [redaction]                 # see RedactionConfig; every key optional
//! builtin = true              # built-in key shapes [default: true]
//! env = true                  # values of *KEY*/*TOKEN*/*SECRET*/*PASSWORD* variables [default: true]
//! env_vars = ["DATABASE_URL"] # more variables whose values are redacted [default: none]
//! patterns = [{ name = "ticket", regex = "TCK-[0-9]{6}" }]
//!
//! [retention]                 # the policy `gc` applies when its request names no rule
//! older_than = "90d"          # [default: none]
//! keep_turns = 100            # [default: none]
//! max_bytes = 10_000_000      # [default: none]
//! include_pinned = false      # [default: false]
//! on_open = false             # also apply it when the store opens a conversation to write [default: false]
//!
//! [ledger]                    # the file store's ledger
//! check_on_open = false       # check every record's checksum when a writer opens a conversation [default: false]
//!
//! [recall]                    # the recall index
//! embeddings = "/opt/models/all-MiniLM-L6-v2"  # the semantic leg's model directory [default: none, leg off]
//!
//! [gateway.model_windows]     # `ctxlog gateway`: context windows in tokens by model-name prefix [default: none]
//! "my-local-model" = 32768    # over the model table's; --model-window wins for the same prefix
//! ```
//!
//! An unknown key is refused, so a typo never silently turns a rule off.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::redact::RedactionConfig;
use crate::retention::RetentionPolicy;
use crate::{Error, Result};

/// The configuration file's name at the store root.
pub const CONFIG_FILE: &str = "ctxlog.toml";

/// A store's configuration (see the module docs for the file format).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// What is redacted before anything is written [default: built-in shapes and
    /// secret-named environment values].
    pub redaction: RedactionConfig,
    /// The retention policy [default: none].
    pub retention: RetentionConfig,
    /// The file store's ledger settings.
    pub ledger: LedgerConfig,
    /// The recall index's settings.
    pub recall: RecallConfig,
    /// `ctxlog gateway`'s settings.
    pub gateway: GatewayConfig,
}

/// The `[gateway]` table: what `ctxlog gateway` reads from the store's configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// Context windows in tokens by model-name prefix, over the model table's (the longest
    /// prefix of a request's model wins; a `--model-window` of the same prefix, and a
    /// request's `X-Ctxlog-Max-Tokens`, over it) [default: none].
    pub model_windows: std::collections::BTreeMap<String, u64>,
}

/// The `[recall]` table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecallConfig {
    /// The semantic leg of recall: a directory holding all-MiniLM-L6-v2 (`config.json`,
    /// `model.safetensors`, `tokenizer.json`). Pages get sentence embeddings as the index
    /// catches up, and a search fuses the pages nearest the question with the lexical
    /// ranking (docs/recall.md, "The semantic leg"). Needs a build with the `semantic`
    /// feature; nothing is ever downloaded [default: none, the leg is off].
    pub embeddings: Option<std::path::PathBuf>,
}

/// The `[ledger]` table (the file store; PostgreSQL checks every row it reads).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LedgerConfig {
    /// Check every record's checksum when a writer opens a conversation (one sequential read
    /// of the whole log), so that a writer never appends to a log damaged anywhere; without
    /// it, open and each append check only the tail (docs/design.md#l7-bounded-memory,
    /// docs/ledger-format.md "What a writer sees") [default: false].
    pub check_on_open: bool,
}

/// The `[retention]` table: a policy, and whether it is applied on open.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionConfig {
    /// See [`RetentionPolicy::older_than`].
    pub older_than: Option<String>,
    /// See [`RetentionPolicy::keep_turns`].
    pub keep_turns: Option<u64>,
    /// See [`RetentionPolicy::max_bytes`].
    pub max_bytes: Option<u64>,
    /// See [`RetentionPolicy::include_pinned`].
    pub include_pinned: bool,
    /// Apply the policy each time the store opens a conversation's writer (its first commit
    /// through this store) [default: false].
    pub on_open: bool,
}

impl RetentionConfig {
    /// The policy this table states.
    pub fn policy(&self) -> RetentionPolicy {
        RetentionPolicy {
            older_than: self.older_than.clone(),
            keep_turns: self.keep_turns,
            max_bytes: self.max_bytes,
            include_pinned: self.include_pinned,
        }
    }
}

impl StoreConfig {
    /// Parses a configuration; `origin` names it in errors.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for invalid TOML, unknown keys, or rules that do not check
    /// out (an unparsable age, a pattern that does not compile).
    pub fn from_toml(text: &str, origin: &str) -> Result<StoreConfig> {
        let config: StoreConfig = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
            let at = line.map(|n| format!("line {n}: ")).unwrap_or_default();
            Error::InvalidRequest {
                reason: format!("{origin}: {at}{}", e.message()),
            }
        })?;
        config
            .retention
            .policy()
            .check()
            .and_then(|()| crate::redact::Redactor::with_env(&config.redaction, Vec::new()))
            .map_err(|e| Error::InvalidRequest {
                reason: format!("{origin}: {e}"),
            })?;
        if let Some((prefix, _)) = config
            .gateway
            .model_windows
            .iter()
            .find(|(prefix, tokens)| prefix.is_empty() || **tokens == 0)
        {
            return Err(Error::InvalidRequest {
                reason: format!(
                    "{origin}: [gateway.model_windows] {prefix:?}: give a model-name prefix \
                     that is not empty and a window of at least 1 token"
                ),
            });
        }
        Ok(config)
    }

    /// Reads the configuration file at `path`.
    ///
    /// # Errors
    /// [`Error::Io`] when it cannot be read; as [`StoreConfig::from_toml`].
    pub fn load(path: &Path) -> Result<StoreConfig> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        StoreConfig::from_toml(&text, &path.display().to_string())
    }

    /// The configuration of the store at `root`: its `ctxlog.toml` if there is one, else
    /// the defaults. A file that exists but cannot be read is an error, never the defaults
    /// (they might redact less than the file asks).
    ///
    /// # Errors
    /// As [`StoreConfig::load`]; [`Error::Io`] when it cannot be told whether the file exists.
    pub fn for_root(root: &Path) -> Result<StoreConfig> {
        let path = root.join(CONFIG_FILE);
        match path.try_exists() {
            Ok(true) => StoreConfig::load(&path),
            Ok(false) => Ok(StoreConfig::default()),
            Err(source) => Err(Error::Io { path, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example_and_refuses_typos() {
        let text = r#"
[redaction]
builtin = true
env = true
env_vars = ["DATABASE_URL"]
patterns = [{ name = "ticket", regex = "TCK-[0-9]{6}" }]

[retention]
older_than = "90d"
keep_turns = 100
max_bytes = 10_000_000
include_pinned = false
on_open = false

[ledger]
check_on_open = true

[recall]
embeddings = "/opt/models/all-MiniLM-L6-v2"

[gateway.model_windows]
"my-local-model" = 32768
"#;
        let config = StoreConfig::from_toml(text, "t").unwrap();
        assert_eq!(config.gateway.model_windows["my-local-model"], 32768);
        assert_eq!(config.retention.keep_turns, Some(100));
        assert_eq!(config.redaction.patterns[0].name, "ticket");
        assert!(config.ledger.check_on_open);
        assert_eq!(
            config.recall.embeddings.as_deref(),
            Some(Path::new("/opt/models/all-MiniLM-L6-v2"))
        );
        for bad in [
            "[gateway]\nmodel_window = {}",
            "[gateway.model_windows]\n\"m\" = 0",
            "[gateway.model_windows]\n\"m\" = -1",
            "[recall]\nembedings = \"/x\"",
            "[ledger]\ncheck_on_opne = true",
            "[retention]\nolder_then = \"9d\"",
            "[retention]\nolder_than = \"soon\"",
            "[redaction]\npatterns = [{ name = \"x\", regex = \"(\" }]",
            "[retention\n",
        ] {
            let err = StoreConfig::from_toml(bad, "ctxlog.toml").unwrap_err();
            assert!(err.to_string().starts_with("ctxlog.toml: "), "{err}");
        }
    }

    /// The semantic leg's model is loaded when the store opens: a directory without it (or a
    /// build without the feature) is a usage error naming the setting, and nothing opens.
    #[test]
    fn a_model_directory_that_cannot_be_used_is_a_usage_error() {
        let dir = std::env::temp_dir().join(format!("ctxlog-no-model-{}", std::process::id()));
        let config = RecallConfig {
            embeddings: Some(dir.clone()),
        };
        let err = crate::RecallSetup::new(&config).unwrap_err();
        assert_eq!(err.class(), crate::ErrorClass::Usage);
        let message = err.to_string();
        assert!(message.contains("[recall] embeddings"), "{message}");
        if cfg!(feature = "semantic") {
            assert!(message.contains("config.json"), "{message}");
        } else {
            assert!(message.contains("--features semantic"), "{message}");
        }
        assert!(crate::RecallSetup::new(&RecallConfig::default()).is_ok());
    }
}
