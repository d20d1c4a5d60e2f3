//! Conversation names: `[A-Za-z0-9_-]{1,64}` (docs/design.md#3-concepts).

use std::fmt;
use std::str::FromStr;

/// The longest accepted conversation name, in bytes.
pub const MAX_NAME_LEN: usize = 64;

/// A validated conversation name: 1 to 64 characters from `A-Z a-z 0-9 _ -`.
///
/// Because the name becomes a directory under the store's root, anything else (`/`, `..`, NUL,
/// spaces, non-ASCII) is refused before any file is touched.
///
/// ```
/// use ctxlog_event::ConversationName;
/// assert!("support-42".parse::<ConversationName>().is_ok());
/// assert!("../etc".parse::<ConversationName>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConversationName(String);

impl ConversationName {
    /// Validates `name`.
    ///
    /// # Errors
    /// [`InvalidName`] saying what is wrong with it.
    pub fn new(name: &str) -> Result<Self, InvalidName> {
        let problem = if name.is_empty() {
            Some("it is empty".to_string())
        } else if name.len() > MAX_NAME_LEN {
            Some(format!(
                "it is {} bytes long (at most {MAX_NAME_LEN})",
                name.len()
            ))
        } else {
            name.chars()
                .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
                .map(|c| format!("it contains {c:?}"))
        };
        match problem {
            None => Ok(ConversationName(name.to_string())),
            Some(why) => Err(InvalidName {
                name: name.escape_default().to_string(),
                why,
            }),
        }
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ConversationName {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<Self, InvalidName> {
        ConversationName::new(s)
    }
}

impl fmt::Display for ConversationName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A name [`ConversationName::new`] refused. The facade reports it as its `Error::InvalidName`
/// (a usage error: nothing was touched).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidName {
    /// The name as given (escaped for display).
    pub name: String,
    /// What is wrong with it.
    pub why: String,
}

impl fmt::Display for InvalidName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid conversation name \"{}\": {} (use 1-64 characters from A-Z a-z 0-9 _ -)",
            self.name, self.why
        )
    }
}

impl std::error::Error for InvalidName {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_alphabet() {
        for ok in ["a", "A-z_09", &"x".repeat(64)] {
            assert!(ConversationName::new(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_everything_else() {
        let long = "x".repeat(65);
        for bad in ["", "a/b", "..", "a\0b", "a b", "é", &long, "."] {
            assert!(ConversationName::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_refusal_says_what_is_wrong_and_what_is_allowed() {
        let e = ConversationName::new("a/b").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid conversation name \"a/b\": it contains '/' \
             (use 1-64 characters from A-Z a-z 0-9 _ -)"
        );
    }
}
