//! [`AppError`]: every failure a handler returns, as `{"error":{"class","message",…}}` with
//! the status of its class (docs/design.md#i3-http-server). Client mistakes are echoed; internal
//! failures are logged in full and answered with a generic message, so no server path reaches a
//! client.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ctxlog::{Error, ErrorClass};
use serde_json::{Map, Value, json};

/// How long a client should wait before retrying a busy or locked conversation.
const RETRY_AFTER_SECS: &str = "1";

/// An error response.
///
/// # Format
/// `{"error":{"class":"…","message":"…"}}`, plus, for class `over_budget`, the figures of
/// [`ctxlog::Shortfall`] (`needed_bytes`, `needed_tokens`, `max_bytes`, `max_tokens`,
/// `input_token_limit`, `tokenizer`) and, for class `corrupt` when a record is damaged,
/// `offset` and `seq`.
///
/// | class | status |
/// |---|---|
/// | `usage`, `bad_input` | 400 |
/// | `unauthorized` | 401 |
/// | `forbidden` | 403 (a host or origin the [`crate::HttpPolicy`] refuses) |
/// | `not_found` | 404 |
/// | `method_not_allowed` | 405 |
/// | `timeout` | 408 + `Connection: close` (the request body did not arrive in time) |
/// | `conflict` | 409 |
/// | `too_large` | 413 |
/// | `unsupported_media_type` | 415 |
/// | `over_budget` | 422 |
/// | `locked` | 423 + `Retry-After` |
/// | `corrupt` | 500 |
/// | `index_damaged` | 500 (the recall index, a cache: `reindex` repairs it) |
/// | `internal` | 500 (message generic; details in the server log) |
/// | `busy` | 503 + `Retry-After` |
/// | `unavailable` | 503 + `Retry-After` (the store's database cannot be reached) |
#[derive(Debug)]
pub struct AppError {
    status: StatusCode,
    class: &'static str,
    message: String,
    details: Map<String, Value>,
}

impl AppError {
    /// An error with a status, a class and a message shown to the client as is.
    pub fn new(status: StatusCode, class: &'static str, message: impl Into<String>) -> AppError {
        AppError {
            status,
            class,
            message: message.into(),
            details: Map::new(),
        }
    }

    /// 400: the request is malformed.
    pub fn bad_request(message: impl Into<String>) -> AppError {
        AppError::new(StatusCode::BAD_REQUEST, "bad_input", message)
    }

    /// 401: the bearer token is missing or unknown.
    pub fn unauthorized(message: impl Into<String>) -> AppError {
        AppError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 404: no such route, or no such conversation for this tenant.
    pub fn not_found(message: impl Into<String>) -> AppError {
        AppError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 500: a failure of the server itself. `detail` is logged, never sent.
    pub fn internal(detail: &dyn std::fmt::Display) -> AppError {
        tracing::error!(error = %detail, "internal error");
        AppError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal server error; the details are in the server log",
        )
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The error class sent to the client.
    pub fn class(&self) -> &'static str {
        self.class
    }

    /// The message sent to the client.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Replaces `root` (a store directory) in the message: clients never learn server paths.
    pub fn scrub(mut self, root: &str) -> AppError {
        if !root.is_empty() && self.message.contains(root) {
            self.message = self.message.replace(root, "<store>");
        }
        self
    }

    fn with_details(mut self, details: Value) -> AppError {
        if let Value::Object(map) = details {
            self.details.extend(map);
        }
        self
    }

    /// Maps a facade error to its status and a message without filesystem paths.
    pub fn from_store(e: Error) -> AppError {
        use StatusCode as S;
        let class = e.class();
        let plain = |status| AppError::new(status, class.name(), e.to_string());
        match class {
            ErrorClass::Usage | ErrorClass::BadInput => plain(S::BAD_REQUEST),
            ErrorClass::NotFound => match &e {
                Error::NotFound { name, .. } => {
                    AppError::not_found(format!("no conversation \"{name}\""))
                }
                _ => AppError::not_found("not found"),
            },
            ErrorClass::Conflict => plain(S::CONFLICT),
            ErrorClass::Lost => plain(S::GONE),
            ErrorClass::OverBudget => {
                let details = e
                    .shortfall()
                    .and_then(|s| serde_json::to_value(s).ok())
                    .unwrap_or(Value::Null);
                plain(S::UNPROCESSABLE_ENTITY).with_details(details)
            }
            ErrorClass::Locked => AppError::new(
                S::LOCKED,
                class.name(),
                "the conversation is locked by another writer process; retry when it is done",
            ),
            ErrorClass::Busy => plain(S::SERVICE_UNAVAILABLE),
            ErrorClass::Unavailable => {
                tracing::warn!(error = %e, "store unavailable");
                plain(S::SERVICE_UNAVAILABLE)
            }
            ErrorClass::Corrupt => corrupt(&e),
            ErrorClass::IndexDamaged => {
                tracing::error!(error = %e, "recall index damaged");
                AppError::new(
                    S::INTERNAL_SERVER_ERROR,
                    class.name(),
                    "the conversation's recall index is damaged (a disposable cache; the \
                     ledger is intact): POST /v1/conversations/{name}/reindex rebuilds it",
                )
            }
            _ => AppError::internal(&e),
        }
    }
}

/// Class `corrupt`: the offset and seq of a damaged record, or the artifact problems. The
/// full error (with paths) goes to the log only.
fn corrupt(e: &Error) -> AppError {
    tracing::error!(error = %e, "corruption detected");
    let status = StatusCode::INTERNAL_SERVER_ERROR;
    let next = e
        .damage_hint_http()
        .map(|hint| format!("; {hint}"))
        .unwrap_or_default();
    if let Some(c) = e.corruption() {
        let seq = c.seq.map(|s| format!(" (seq {s})")).unwrap_or_default();
        let message = format!(
            "ledger corrupt at byte offset {}{seq}: {}; nothing was changed{next}",
            c.offset, c.reason
        );
        return AppError::new(status, "corrupt", message)
            .with_details(json!({"offset": c.offset, "seq": c.seq}));
    }
    let message = match e.found() {
        Error::ArtifactsDamaged { problems } => format!(
            "{} referenced artifact(s) missing or altered: {}",
            problems.len(),
            problems.join("; ")
        ),
        Error::Ledger(ledger) => ledger.without_path(),
        _ => "ledger corrupt; nothing was changed (details in the server log)".to_string(),
    };
    AppError::new(status, "corrupt", format!("{message}{next}"))
}

impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        AppError::from_store(e)
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let mut error = Map::new();
        error.insert("class".into(), Value::from(self.class));
        error.insert("message".into(), Value::from(self.message));
        error.extend(self.details);
        let mut response = (self.status, axum::Json(json!({ "error": error }))).into_response();
        if matches!(
            self.status,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::LOCKED
        ) {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECS),
            );
        }
        if self.status == StatusCode::REQUEST_TIMEOUT {
            // The rest of the body may still be on its way: the connection cannot carry
            // another request.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"ctxlog\""),
            );
        }
        response
    }
}
