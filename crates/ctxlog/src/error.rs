//! The facade's error type: one enum over the layers, with a coarse [`ErrorClass`] that the
//! CLI turns into exit codes and the server into HTTP statuses.

use std::path::PathBuf;

/// Everything that can go wrong in a ctxlog operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A conversation name outside `[A-Za-z0-9_-]{1,64}`.
    #[error(
        "invalid conversation name \"{name}\": {why} (use 1-64 characters from A-Z a-z 0-9 _ -)"
    )]
    InvalidName {
        /// The name as given (escaped for display).
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// The conversation does not exist (read-only operations never create one).
    #[error("no conversation \"{name}\" under {}", root.display())]
    NotFound {
        /// The conversation's name.
        name: String,
        /// The store's root directory.
        root: PathBuf,
    },
    /// A request field out of range (a limit, a page count).
    #[error("{reason}")]
    InvalidRequest {
        /// What is wrong.
        reason: String,
    },
    /// A bug in ctxlog: an internal invariant failed. Nothing was written.
    #[error("internal error: {reason}")]
    Internal {
        /// Which invariant.
        reason: String,
    },
    /// Input that could not be understood (malformed JSON, invalid UTF-8, unknown keys).
    #[error("{reason}")]
    BadInput {
        /// What is wrong, and where.
        reason: String,
    },
    /// A relayed call's messages do not continue the conversation's stored ones (an edited
    /// message, a regenerated reply): nothing was written (class [`ErrorClass::Conflict`]).
    #[error("{reason}")]
    Diverged {
        /// Where they differ, and what to do.
        reason: String,
    },
    /// The ledger refused or failed.
    #[error(transparent)]
    Ledger(#[from] ctxlog_ledger::Error),
    /// The projector refused (for example, mandatory input over budget).
    #[error(transparent)]
    Projection(#[from] ctxlog_projection::Error),
    /// The recall index failed.
    #[error(transparent)]
    Recall(#[from] ctxlog_recall::Error),
    /// Records check out but content they reference (artifacts) is missing or altered.
    #[error("{} referenced artifact(s) missing or altered: {}", problems.len(), problems.join("; "))]
    ArtifactsDamaged {
        /// One line per problem.
        problems: Vec<String>,
    },
    /// The conversation's writer stayed busy with other commits of this process for longer
    /// than the store's writer wait.
    #[error("conversation \"{name}\" is busy: other commits held its writer for {waited_ms} ms")]
    Busy {
        /// The conversation's name.
        name: String,
        /// How long this request waited.
        waited_ms: u64,
    },
    /// A conversation is damaged (the error is of class [`ErrorClass::Corrupt`]): `cause`
    /// says what and where, and the message what to run next
    /// ([`damage_hint`], docs/design.md#l11-repair).
    #[error("{cause}; {}", if *erasing { erase_damage_hint(conversation) } else { damage_hint(conversation) })]
    Damaged {
        /// The damaged conversation's name.
        conversation: String,
        /// What was found.
        cause: Box<Error>,
        /// True when the operation was an erasure of some seqs that could not work around
        /// the damage: the message then names the repair to run before the erasure
        /// ([`erase_damage_hint`]).
        erasing: bool,
    },
    /// A file-system operation of the store itself failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// The coarse class of an [`Error`], stable for scripts (the CLI's exit codes,
/// docs/design.md#i2-command-line) and servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorClass {
    /// The request's arguments are wrong: a bad name, range, budget or request field; nothing
    /// was touched (CLI exit 2).
    Usage,
    /// The data given is wrong (malformed turn JSON, an invalid turn, a cap exceeded); nothing
    /// was written (CLI exit 1).
    BadInput,
    /// The mandatory part of a projection exceeds the budget (CLI exit 3).
    OverBudget,
    /// Another writer holds the conversation (CLI exit 4).
    Locked,
    /// Other commits of this process held the writer past the store's wait; retry (CLI
    /// exit 4, HTTP 503).
    Busy,
    /// The ledger is corrupt; nothing was changed (CLI exit 5).
    Corrupt,
    /// The commit id was used before with different content (CLI exit 6).
    Conflict,
    /// The commit id names a commit lost to damage and given up by `repair --accept-loss`;
    /// its seqs are never handed out again (CLI exit 7, HTTP 410; docs/design.md#l11-repair).
    Lost,
    /// The conversation does not exist (CLI exit 1).
    NotFound,
    /// The store's database cannot be reached (down, restarting, connection lost); nothing
    /// was acknowledged: retry (CLI exit 1, HTTP 503).
    Unavailable,
    /// The conversation's recall index is damaged. It is a cache: the ledger is intact, and
    /// reindexing rebuilds it (CLI exit 1, HTTP 500).
    IndexDamaged,
    /// Anything else (I/O, …) (CLI exit 1).
    Other,
}

impl ErrorClass {
    /// The class's stable name, as every front end reports it: the CLI's JSON errors, the
    /// server's `error.class`, Python's `error_class`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Usage => "usage",
            ErrorClass::BadInput => "bad_input",
            ErrorClass::OverBudget => "over_budget",
            ErrorClass::Locked => "locked",
            ErrorClass::Busy => "busy",
            ErrorClass::Corrupt => "corrupt",
            ErrorClass::Conflict => "conflict",
            ErrorClass::Lost => "lost",
            ErrorClass::NotFound => "not_found",
            ErrorClass::Unavailable => "unavailable",
            ErrorClass::IndexDamaged => "index_damaged",
            ErrorClass::Other => "error",
        }
    }
}

impl Error {
    /// The error's class. A ledger error is classed as such wherever it surfaces, also when
    /// the projector or the recall index met it while reading the ledger.
    pub fn class(&self) -> ErrorClass {
        if let Error::Damaged { cause, .. } = self {
            return cause.class();
        }
        if let Some(ledger) = self.ledger_cause() {
            return ledger_class(ledger);
        }
        match self {
            Error::InvalidName { .. } | Error::InvalidRequest { .. } => ErrorClass::Usage,
            Error::BadInput { .. } => ErrorClass::BadInput,
            Error::NotFound { .. } => ErrorClass::NotFound,
            Error::ArtifactsDamaged { .. } => ErrorClass::Corrupt,
            Error::Busy { .. } => ErrorClass::Busy,
            Error::Diverged { .. } => ErrorClass::Conflict,
            Error::Projection(e) => projection_class(e),
            Error::Recall(e) if e.is_damaged() => ErrorClass::IndexDamaged,
            _ => ErrorClass::Other,
        }
    }

    /// The ledger error behind this one, if any: directly, or as the source of a projection
    /// or recall failure.
    pub fn ledger_cause(&self) -> Option<&ctxlog_ledger::Error> {
        match self {
            Error::Ledger(e) => return Some(e),
            Error::Damaged { cause, .. } => return cause.ledger_cause(),
            _ => {}
        }
        let mut cause = std::error::Error::source(self);
        while let Some(e) = cause {
            if let Some(ledger) = e.downcast_ref::<ctxlog_ledger::Error>() {
                return Some(ledger);
            }
            cause = e.source();
        }
        None
    }
}

/// What the mandatory part of a refused projection needs (docs/design.md#p4-mandatory-input), for
/// front ends that report the figures beside the message (the server's 422 body).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Shortfall {
    /// Bytes the mandatory part needs on the wire.
    pub needed_bytes: u64,
    /// Tokens the mandatory part needs, counted with `tokenizer`.
    pub needed_tokens: u64,
    /// The byte budget, if any.
    pub max_bytes: Option<u64>,
    /// The token budget as given (before the output reservation), if any.
    pub max_tokens: Option<u64>,
    /// What the input may use of the token budget (`max_tokens - reserve_output`), if any.
    pub input_token_limit: Option<u64>,
    /// The tokenizer the tokens were counted with.
    pub tokenizer: ctxlog_projection::Tokenizer,
}

/// Where a ledger is damaged, without the file's path (for clients that must not learn
/// server paths).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Corruption {
    /// Byte offset of the first bad byte or record in the log.
    pub offset: u64,
    /// The seq that record should have had, when known.
    pub seq: Option<u64>,
    /// What is wrong.
    pub reason: String,
}

impl Error {
    /// The figures of a [`ErrorClass::OverBudget`] error.
    pub fn shortfall(&self) -> Option<Shortfall> {
        match self {
            Error::Projection(ctxlog_projection::Error::MandatoryExceedsBudget {
                needed_bytes,
                needed_tokens,
                max_bytes,
                max_tokens,
                input_token_limit,
                tokenizer,
                ..
            }) => Some(Shortfall {
                needed_bytes: *needed_bytes,
                needed_tokens: *needed_tokens,
                max_bytes: *max_bytes,
                max_tokens: *max_tokens,
                input_token_limit: *input_token_limit,
                tokenizer: *tokenizer,
            }),
            _ => None,
        }
    }

    /// `self` for requests on `conversation`: an error of class [`ErrorClass::Corrupt`]
    /// becomes [`Error::Damaged`], whose message names the commands to run next.
    pub fn in_conversation(self, conversation: &str) -> Error {
        self.damaged_in(conversation, false)
    }

    /// [`Error::in_conversation`] for an erasure of some seqs: the message names the repair
    /// to run before the erasure can be done ([`erase_damage_hint`]).
    pub fn in_erasure(self, conversation: &str) -> Error {
        self.damaged_in(conversation, true)
    }

    fn damaged_in(self, conversation: &str, erasing: bool) -> Error {
        match self {
            Error::Damaged { .. } => self,
            e if e.class() == ErrorClass::Corrupt => Error::Damaged {
                conversation: conversation.to_string(),
                cause: Box::new(e),
                erasing,
            },
            e => e,
        }
    }

    /// What an HTTP client should do next about a damaged conversation ([`damage_hint_http`]
    /// or [`erase_damage_hint_http`]), when the operation knew which one.
    pub fn damage_hint_http(&self) -> Option<String> {
        match self {
            Error::Damaged {
                conversation,
                erasing: true,
                ..
            } => Some(erase_damage_hint_http(conversation)),
            Error::Damaged { conversation, .. } => Some(damage_hint_http(conversation)),
            _ => None,
        }
    }

    /// The name of the damaged conversation an error of class [`ErrorClass::Corrupt`] is
    /// about, when the operation knew it.
    pub fn damaged_conversation(&self) -> Option<&str> {
        match self {
            Error::Damaged { conversation, .. } => Some(conversation),
            _ => None,
        }
    }

    /// The error as it was found, without the conversation around it ([`Error::Damaged`]).
    pub fn found(&self) -> &Error {
        match self {
            Error::Damaged { cause, .. } => cause.found(),
            e => e,
        }
    }

    /// The error's message without server paths: a ledger error's
    /// ([`ctxlog_ledger::Error::without_path`]), or the message as it is.
    pub fn without_path(&self) -> String {
        match self.found() {
            Error::Ledger(e) => e.without_path(),
            Error::NotFound { name, .. } => format!("no conversation \"{name}\""),
            other => match other.ledger_cause() {
                Some(e) => e.without_path(),
                None => other.to_string(),
            },
        }
    }

    /// The offset and seq of a corrupt ledger record, wherever the error surfaced.
    pub fn corruption(&self) -> Option<Corruption> {
        match self.ledger_cause()? {
            ctxlog_ledger::Error::Corrupt {
                offset,
                seq,
                reason,
                ..
            } => Some(Corruption {
                offset: *offset,
                seq: *seq,
                reason: reason.clone(),
            }),
            _ => None,
        }
    }
}

fn ledger_class(e: &ctxlog_ledger::Error) -> ErrorClass {
    use ctxlog_ledger::Error as L;
    match e {
        L::Locked { .. } => ErrorClass::Locked,
        L::Corrupt { .. } | L::ArtifactMismatch { .. } | L::ArtifactMissing { .. } => {
            ErrorClass::Corrupt
        }
        L::Conflict { .. } | L::Moved { .. } => ErrorClass::Conflict,
        L::Lost { .. } => ErrorClass::Lost,
        L::BadRange { .. } => ErrorClass::Usage,
        L::InvalidCommit { .. } | L::TooLarge { .. } | L::BadArtifactRef { .. } => {
            ErrorClass::BadInput
        }
        L::Io { source, .. } if source.kind() == std::io::ErrorKind::NotConnected => {
            ErrorClass::Unavailable
        }
        _ => ErrorClass::Other,
    }
}

fn projection_class(e: &ctxlog_projection::Error) -> ErrorClass {
    use ctxlog_projection::Error as P;
    match e {
        P::MandatoryExceedsBudget { .. } => ErrorClass::OverBudget,
        P::InvalidBudget { .. } | P::InvalidRequest { .. } => ErrorClass::Usage,
        P::InvalidBody { .. } => ErrorClass::BadInput,
        _ => ErrorClass::Other,
    }
}

/// A refused name is the same error, and so of the same class, as before it reached a backend.
impl From<ctxlog_event::InvalidName> for Error {
    fn from(e: ctxlog_event::InvalidName) -> Error {
        Error::InvalidName {
            name: e.name,
            why: e.why,
        }
    }
}

/// Each backend failure becomes the variant of the same name, so its message and its
/// [`ErrorClass`] do not depend on the engine that reported it.
impl From<ctxlog_backend::Error> for Error {
    fn from(e: ctxlog_backend::Error) -> Error {
        use ctxlog_backend::Error as B;
        match e {
            B::NotFound { name, root } => Error::NotFound { name, root },
            B::InvalidRequest { reason } => Error::InvalidRequest { reason },
            B::Io { path, source } => Error::Io { path, source },
            B::Ledger(e) => Error::Ledger(e),
            B::Recall(e) => Error::Recall(e),
            other => Error::Internal {
                reason: format!("unclassified backend error: {other}"),
            },
        }
    }
}

/// What to run next on the damaged conversation `conversation`, as every front end but HTTP
/// says it (the CLI's message, Python's exception): see what is damaged, then get the intact
/// records out (docs/design.md#l11-repair).
pub fn damage_hint(conversation: &str) -> String {
    format!(
        "the conversation is damaged: run `ctxlog verify {conversation}` to see what was found, \
         `ctxlog export {conversation} --salvage` to get every intact record out (it changes \
         nothing), then `ctxlog repair {conversation}` to see the repair plan and `ctxlog repair \
         {conversation} --accept-loss` to carry it out"
    )
}

/// The same as [`damage_hint`], for HTTP clients: the routes, never a server path.
pub fn damage_hint_http(conversation: &str) -> String {
    format!(
        "the conversation is damaged: POST /v1/conversations/{conversation}/verify says what was \
         found, GET /v1/conversations/{conversation}/export?salvage=true gives every intact \
         record (it changes nothing), and POST /v1/conversations/{conversation}/repair plans a \
         repair ({{\"accept_loss\": true}} carries it out)"
    )
}

/// What to run on the damaged conversation `conversation` when an erasure of some of its
/// seqs cannot work around the damage (the seqs to erase are damaged or share a commit with
/// damaged ones, whose bytes may hold their text; or the log's end or header is damaged):
/// the repair (it keeps every intact record and covers the damaged seqs with a loss record),
/// then the erasure again; or an erasure of the whole conversation, which works at once.
pub fn erase_damage_hint(conversation: &str) -> String {
    format!(
        "the conversation is damaged where this erasure cannot work around it: run `ctxlog \
         repair {conversation} --accept-loss` (it keeps every intact record and covers the \
         damaged seqs with a loss record; `ctxlog repair {conversation}` shows the plan \
         first), then the erasure again; `ctxlog erase {conversation} --all` erases the whole \
         conversation at once"
    )
}

/// The same as [`erase_damage_hint`], for HTTP clients: the routes, never a server path.
pub fn erase_damage_hint_http(conversation: &str) -> String {
    format!(
        "the conversation is damaged where this erasure cannot work around it: POST \
         /v1/conversations/{conversation}/repair with {{\"accept_loss\": true}} (it keeps every \
         intact record and covers the damaged seqs with a loss record; without it the route \
         shows the plan), then the erasure again; POST /v1/conversations/{conversation}/erase \
         with {{\"target\":\"all\"}} erases the whole conversation at once"
    )
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use crate::ops::ProjectRequest;

    #[test]
    fn over_budget_errors_carry_their_shortfall() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let e = store
            .project(&ProjectRequest {
                conversation: "c".into(),
                input: Some("a question that needs more than ten bytes".into()),
                max_bytes: Some(10),
                ..Default::default()
            })
            .unwrap_err();
        assert_eq!(e.class(), crate::ErrorClass::OverBudget);
        let shortfall = e.shortfall().unwrap();
        assert!(shortfall.needed_bytes > 10);
        assert_eq!(shortfall.max_bytes, Some(10));
        assert!(e.corruption().is_none());
    }

    #[test]
    fn a_body_that_is_not_a_request_is_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let e = store
            .count(&crate::ops::CountRequest {
                body: b"not json".to_vec(),
                ..Default::default()
            })
            .unwrap_err();
        assert_eq!(e.class(), crate::ErrorClass::BadInput);
    }
}
