//! The web inspector (docs/design.md#i4-inspector): one page of static HTML, JavaScript and CSS
//! embedded in the binary, which calls the API like any other client (no build step).
//!
//! Its responses forbid everything but its own files: no inline script or style, no other
//! origin to load from or send to, no framing (against clickjacking), no forms posted
//! elsewhere.

use axum::http::header;
use axum::response::IntoResponse;

const INDEX: &str = include_str!("inspector/index.html");
const SCRIPT: &str = include_str!("inspector/inspector.js");
const STYLE: &str = include_str!("inspector/inspector.css");

/// The Content-Security-Policy of the inspector's files: its own origin only.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One of the inspector's files, with its content type and the headers above.
fn file(content_type: &'static str, text: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        text,
    )
}

pub(crate) async fn index() -> impl IntoResponse {
    file("text/html; charset=utf-8", INDEX)
}

pub(crate) async fn script() -> impl IntoResponse {
    file("text/javascript; charset=utf-8", SCRIPT)
}

pub(crate) async fn style() -> impl IntoResponse {
    file("text/css; charset=utf-8", STYLE)
}
