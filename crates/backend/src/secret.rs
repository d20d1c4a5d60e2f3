//! Store secrets: 32 random bytes a store keeps under a name, created by the first process
//! that asks for them and read by every later one, so that every process over one store
//! (a restarted one, or replicas over one database) derives the same names and checks the
//! same MACs from them. The gateway keys its tenant names and response ids with one.

use crate::{Error, Result};

/// The bytes of a store secret.
pub type Secret = [u8; 32];

/// The name a store keeps a secret under: 1 to 32 characters from `a-z 0-9 -` (it is part
/// of a file name in the file store).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SecretName<'a>(&'a str);

impl<'a> SecretName<'a> {
    /// `name`, checked.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for an empty name, one over 32 characters, or one with a
    /// character outside `a-z 0-9 -`.
    pub fn new(name: &'a str) -> Result<SecretName<'a>> {
        let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
        if name.is_empty() || name.len() > 32 || !name.chars().all(allowed) {
            return Err(Error::InvalidRequest {
                reason: format!("secret name {name:?}: use 1 to 32 characters from a-z, 0-9 and -"),
            });
        }
        Ok(SecretName(name))
    }

    /// The name.
    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

impl std::fmt::Display for SecretName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// A new secret from the operating system's random source.
///
/// # Errors
/// [`Error::Io`] when the random source fails.
pub fn new_secret() -> Result<Secret> {
    let mut secret = [0u8; 32];
    getrandom::getrandom(&mut secret).map_err(|e| Error::Io {
        path: "getrandom".into(),
        source: std::io::Error::other(format!("cannot get random bytes for a secret: {e}")),
    })?;
    Ok(secret)
}

/// `bytes` as lowercase hex digits, two a byte: a secret's form in the file store (64
/// digits), and the digests and MACs that name things (conversations, tenants, ids).
pub fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut hex = String::with_capacity(2 * bytes.len());
    for b in bytes {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

/// The secret written as 64 hex digits (surrounding whitespace ignored); `None` for any
/// other text.
pub fn from_hex(text: &str) -> Option<Secret> {
    let text = text.trim();
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut secret = [0u8; 32];
    for (i, byte) in secret.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(secret)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn names_are_checked() {
        assert_eq!(SecretName::new("gateway").unwrap().as_str(), "gateway");
        for bad in ["", "Gateway", "a/b", "..", "a b", &"x".repeat(33)] {
            assert!(SecretName::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn hex_round_trips_and_refuses_anything_else() {
        let secret = new_secret().unwrap();
        assert_ne!(secret, new_secret().unwrap());
        assert_eq!(from_hex(&format!("{}\n", to_hex(&secret))), Some(secret));
        for bad in [
            "",
            "nope",
            &"0".repeat(63),
            &"g".repeat(64),
            &"é".repeat(32),
        ] {
            assert_eq!(from_hex(bad), None, "{bad:?}");
        }
    }
}
