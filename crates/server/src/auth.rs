//! Bearer tokens and tenants (docs/design.md#i3-http-server).
//!
//! # Format
//! A tokens file (`--tokens FILE`) or the `CTXLOG_TOKENS` variable holds one `TOKEN TENANT`
//! pair a line (in the variable, `;` also separates pairs). Blank lines and lines starting
//! with `#` are ignored. A tenant name follows the conversation-name rule
//! (`[A-Za-z0-9_-]{1,64}`); a token is at least 16 visible ASCII characters. Several tokens
//! may map to one tenant; one token may not map to two.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, bail};

/// The shortest token accepted: shorter ones are guessable.
pub const MIN_TOKEN_LEN: usize = 16;

/// Tokens mapped to tenants.
#[derive(Clone, Default)]
pub struct Tokens {
    by_token: Vec<(Vec<u8>, String)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the tokens themselves.
        f.debug_struct("Tokens")
            .field("tenants", &self.tenants())
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// Parses `TOKEN TENANT` pairs (see the module's format).
    ///
    /// # Errors
    /// A line that is not such a pair (named by its number, without echoing the token), a
    /// short token, an invalid tenant name, two tenant names that differ only in case (a
    /// case-insensitive file system, or PostgreSQL's folded schema names, would make them
    /// one store), a token given twice for different tenants, or no pair at all.
    pub fn parse(text: &str) -> anyhow::Result<Tokens> {
        let mut seen: HashMap<&str, &str> = HashMap::new();
        let mut by_token = Vec::new();
        let pairs = text.lines().flat_map(|l| l.split(';')).enumerate();
        for (i, line) in pairs {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let n = i + 1;
            let mut fields = line.split_whitespace();
            let (Some(token), Some(tenant), None) = (fields.next(), fields.next(), fields.next())
            else {
                bail!("tokens entry {n}: expected `TOKEN TENANT`");
            };
            if token.len() < MIN_TOKEN_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
                bail!(
                    "tokens entry {n}: a token must be at least {MIN_TOKEN_LEN} visible ASCII characters"
                );
            }
            ctxlog::ConversationName::new(tenant)
                .map_err(|e| anyhow::anyhow!("tokens entry {n}: tenant: {e}"))?;
            if let Some(other) = seen
                .values()
                .find(|t| **t != tenant && t.eq_ignore_ascii_case(tenant))
            {
                bail!(
                    "tokens entry {n}: tenant {tenant} differs from tenant {other} only in case; \
                     tenant names must differ in more than case (they name directories and \
                     database schemas): rename one"
                );
            }
            match seen.insert(token, tenant) {
                Some(other) if other != tenant => {
                    bail!("tokens entry {n}: this token is already given to another tenant")
                }
                Some(_) => continue,
                None => by_token.push((token.as_bytes().to_vec(), tenant.to_string())),
            }
        }
        if by_token.is_empty() {
            bail!("no `TOKEN TENANT` pairs found");
        }
        Ok(Tokens { by_token })
    }

    /// Reads and parses a tokens file.
    ///
    /// # Errors
    /// The file cannot be read, or [`Tokens::parse`] refuses it.
    pub fn from_file(path: &Path) -> anyhow::Result<Tokens> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read tokens file {}", path.display()))?;
        Tokens::parse(&text).with_context(|| format!("tokens file {}", path.display()))
    }

    /// The tenant a presented token belongs to. Every known token is compared in full, in
    /// time independent of where they differ.
    pub fn tenant(&self, presented: &[u8]) -> Option<&str> {
        let mut found = None;
        for (token, tenant) in &self.by_token {
            if constant_time_eq(token, presented) {
                found = Some(tenant.as_str());
            }
        }
        found
    }

    /// The distinct tenants, sorted.
    pub fn tenants(&self) -> Vec<&str> {
        let mut tenants: Vec<&str> = self.by_token.iter().map(|(_, t)| t.as_str()).collect();
        tenants.sort_unstable();
        tenants.dedup();
        tenants
    }
}

/// The credentials of an `Authorization` header value of the `Bearer` scheme, whose name is
/// case-insensitive (RFC 7235): `Bearer TOKEN`, `bearer TOKEN`, `BEARER  TOKEN`.
pub(crate) fn bearer_token(header: &[u8]) -> Option<&[u8]> {
    let (scheme, token) = header.split_at_checked(b"Bearer ".len())?;
    scheme.eq_ignore_ascii_case(b"Bearer ").then_some(token)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn parses_pairs_comments_and_semicolons() {
        let t = Tokens::parse(
            "# ops\naaaaaaaaaaaaaaaa alice\n\nbbbbbbbbbbbbbbbb bob;cccccccccccccccc bob",
        )
        .unwrap();
        assert_eq!(t.tenant(b"aaaaaaaaaaaaaaaa"), Some("alice"));
        assert_eq!(t.tenant(b"cccccccccccccccc"), Some("bob"));
        assert_eq!(t.tenant(b"aaaaaaaaaaaaaaab"), None);
        assert_eq!(t.tenants(), vec!["alice", "bob"]);
    }

    #[test]
    fn the_bearer_scheme_name_is_case_insensitive() {
        for header in ["Bearer abc", "bearer abc", "BEARER abc", "bEaReR abc"] {
            assert_eq!(
                bearer_token(header.as_bytes()),
                Some(&b"abc"[..]),
                "{header}"
            );
        }
        for header in ["Basic abc", "Bearerabc", "Bearer", "", "Bearer\tabc"] {
            assert_eq!(bearer_token(header.as_bytes()), None, "{header}");
        }
    }

    #[test]
    fn refuses_bad_entries_without_echoing_tokens() {
        for bad in [
            "",
            "short alice",
            "aaaaaaaaaaaaaaaa",
            "aaaaaaaaaaaaaaaa ../x",
            "aaaaaaaaaaaaaaaa a b",
            "aaaaaaaaaaaaaaaa a\naaaaaaaaaaaaaaaa b",
        ] {
            let e = format!("{:#}", Tokens::parse(bad).unwrap_err());
            assert!(!e.contains("aaaaaaaaaaaaaaaa"), "{e}");
        }
    }

    /// Tenant names that differ only in case would share a store on a case-insensitive file
    /// system (CI's is case-sensitive, so this is checked here, not on disk).
    #[test]
    fn refuses_tenant_names_that_differ_only_in_case() {
        let e = Tokens::parse("aaaaaaaaaaaaaaaa alice\nbbbbbbbbbbbbbbbb Alice").unwrap_err();
        let e = format!("{e:#}");
        assert!(e.contains("entry 2") && e.contains("only in case"), "{e}");
        assert!(Tokens::parse("aaaaaaaaaaaaaaaa alice\nbbbbbbbbbbbbbbbb alice").is_ok());
    }
}
