//! The web inspector (SPEC I4): one page of static HTML, JavaScript and CSS embedded in the
//! binary, which calls the API like any other client (no build step).

use axum::http::header;
use axum::response::IntoResponse;

const INDEX: &str = include_str!("inspector/index.html");
const SCRIPT: &str = include_str!("inspector/inspector.js");
const STYLE: &str = include_str!("inspector/inspector.css");

pub(crate) async fn index() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX)
}

pub(crate) async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
}

pub(crate) async fn style() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE)
}
