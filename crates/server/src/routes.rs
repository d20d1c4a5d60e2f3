//! The routes: one table ([`ENDPOINTS`]) that builds the router and that the OpenAPI test
//! checks, and one small handler per operation.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use axum::{Extension, Json, Router};
use ctxlog::ops::{
    CommitRequest, CountRequest, EraseRequest, ExportRequest, GcRequest, ImportRequest,
    ListRequest, LogRequest, ProjectRequest, RecallRequest, ReindexRequest, RepairRequest,
    VerifyRequest,
};
use ctxlog::{Store, Tokenizer, WireFormat};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::{AppError, AppState, Tenant, inspector, policy};

/// One route: its method and path (axum syntax), and the content types of its request body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `GET` or `POST`.
    pub method: &'static str,
    /// The path, with `{name}` for the conversation.
    pub path: &'static str,
    /// The content types its request body may have (the [`crate::HttpPolicy`] answers 415 to
    /// others); empty for a `GET`.
    pub accepts: &'static [&'static str],
}

const fn get(path: &'static str) -> Endpoint {
    Endpoint {
        method: "GET",
        path,
        accepts: &[],
    }
}

const fn post(path: &'static str, accepts: &'static [&'static str]) -> Endpoint {
    Endpoint {
        method: "POST",
        path,
        accepts,
    }
}

const JSON: &[&str] = &[policy::JSON];

/// Every route the server answers. Paths under `/v1/` need the bearer token when the server
/// has tokens; the others are public.
pub const ENDPOINTS: &[Endpoint] = &[
    get("/"),
    get("/inspector.js"),
    get("/inspector.css"),
    get("/healthz"),
    get("/openapi.json"),
    get("/v1/conversations"),
    post("/v1/conversations/{name}/commits", JSON),
    get("/v1/conversations/{name}/events"),
    post("/v1/conversations/{name}/projection", JSON),
    post("/v1/conversations/{name}/recall", JSON),
    post("/v1/conversations/{name}/erase", JSON),
    post("/v1/conversations/{name}/verify", JSON),
    post("/v1/conversations/{name}/reindex", JSON),
    post("/v1/conversations/{name}/repair", JSON),
    post("/v1/conversations/{name}/gc", JSON),
    post("/v1/gc", JSON),
    get("/v1/conversations/{name}/export"),
    post(
        "/v1/conversations/{name}/import",
        &[policy::NDJSON, policy::JSON],
    ),
    post("/v1/count", JSON),
];

/// The handler of an endpoint.
fn handler(endpoint: &Endpoint) -> MethodRouter<AppState> {
    let filter = match endpoint.method {
        "POST" => MethodFilter::POST,
        _ => MethodFilter::GET,
    };
    match endpoint.path {
        "/" => on(filter, inspector::index),
        "/inspector.js" => on(filter, inspector::script),
        "/inspector.css" => on(filter, inspector::style),
        "/healthz" => on(filter, healthz),
        "/openapi.json" => on(filter, openapi),
        "/v1/conversations" => on(filter, list),
        "/v1/conversations/{name}/commits" => on(filter, commit),
        "/v1/conversations/{name}/events" => on(filter, events),
        "/v1/conversations/{name}/projection" => on(filter, projection),
        "/v1/conversations/{name}/recall" => on(filter, recall),
        "/v1/conversations/{name}/erase" => on(filter, erase),
        "/v1/conversations/{name}/verify" => on(filter, verify),
        "/v1/conversations/{name}/reindex" => on(filter, reindex),
        "/v1/conversations/{name}/repair" => on(filter, repair),
        "/v1/conversations/{name}/gc" => on(filter, gc),
        "/v1/gc" => on(filter, gc_all),
        "/v1/conversations/{name}/export" => on(filter, export),
        "/v1/conversations/{name}/import" => on(filter, import),
        "/v1/count" => on(filter, count),
        // An entry without a handler answers like an unknown route: the OpenAPI test fails.
        _ => on(filter, no_route),
    }
}

/// The router of [`ENDPOINTS`], under the server's [`crate::HttpPolicy`] (with each route's
/// content types), with authentication on `/v1/`, request logging, and JSON answers for
/// unknown routes and methods.
pub(crate) fn router(state: AppState) -> Router {
    let policy = ENDPOINTS
        .iter()
        .filter(|e| !e.accepts.is_empty())
        .fold(state.inner.policy.clone(), |p, e| {
            p.accept(e.path, e.accepts)
        });
    let (api, public): (Vec<&Endpoint>, Vec<&Endpoint>) =
        ENDPOINTS.iter().partition(|e| e.path.starts_with("/v1/"));
    let build = |endpoints: Vec<&Endpoint>| {
        endpoints
            .into_iter()
            .fold(Router::new(), |r, e| r.route(e.path, handler(e)))
    };
    let api = build(api).route_layer(middleware::from_fn_with_state(state.clone(), authenticate));
    let mcp = Router::new()
        .route_service(
            MCP_PATH,
            ctxlog_mcp::http_service(state.inner.mcp_stop.clone()),
        )
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate));
    let routes = build(public)
        .merge(api)
        .merge(mcp)
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method);
    policy
        .apply(routes)
        .layer(middleware::from_fn(log_request))
        .with_state(state)
}

async fn no_route() -> AppError {
    AppError::not_found("no such route (see /openapi.json)")
}

async fn wrong_method(method: Method) -> AppError {
    AppError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed here (see /openapi.json)"),
    )
}

/// The Model Context Protocol endpoint (streamable HTTP: POST, GET and DELETE), served by
/// `ctxlog_mcp` under the same policy and authentication as the API (docs/design.md#i7-mcp).
/// It is not in [`ENDPOINTS`]: the OpenAPI document describes the JSON API, and names this
/// path in its description.
pub const MCP_PATH: &str = "/mcp";

/// Resolves the bearer token to the tenant's store (or 401) for the handlers below, and for
/// the MCP endpoint's tools (as a [`ctxlog_mcp::Source`]).
async fn authenticate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    match state.tenant(authorization) {
        Ok(tenant) => {
            request.extensions_mut().insert(ctxlog_mcp::Source {
                store: tenant.store.clone(),
                root: Some(tenant.root.clone()),
            });
            request.extensions_mut().insert(tenant);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

/// One line per request: method, route, status, time. Never the headers (tokens).
async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "(no route)".to_string());
    let start = std::time::Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let ms = start.elapsed().as_secs_f64() * 1e3;
    if status >= 500 {
        tracing::warn!(%method, route, status, ms, "request");
    } else {
        tracing::debug!(%method, route, status, ms, "request");
    }
    response
}

/// The conversation name from the path; a path that cannot be decoded (percent-encoded bytes
/// that are not UTF-8) is a JSON `bad_input` error like every other, not axum's plain text.
pub(crate) struct Path<T>(T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = AppError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, AppError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|rejection| AppError::bad_request(format!("path: {}", rejection.body_text())))
    }
}

/// A request body within the server's limit: 413 past it, 408 when it does not arrive in
/// time.
pub(crate) struct RawBody(Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = AppError;

    async fn from_request(request: Request, state: &S) -> Result<Self, AppError> {
        let rejection = match Bytes::from_request(request, state).await {
            Ok(bytes) => return Ok(RawBody(bytes)),
            Err(rejection) => rejection,
        };
        if let Some(timed_out) = policy::body_timeout_error(&rejection) {
            return Err(timed_out);
        }
        Err(match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => AppError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                "request body is larger than the server's limit; nothing was written",
            ),
            status => AppError::new(status, "bad_input", rejection.body_text()),
        })
    }
}

/// Runs an operation on a blocking thread (fsync and SQLite never stall the async workers);
/// errors become responses with the store's directory kept out of their messages.
async fn blocking<T: Send + 'static>(
    tenant: Tenant,
    op: impl FnOnce(&Store) -> ctxlog::Result<T> + Send + 'static,
) -> Result<T, AppError> {
    let store = tenant.store.clone();
    match tokio::task::spawn_blocking(move || op(&store)).await {
        Ok(result) => result.map_err(|e| AppError::from_store(e).scrub(&tenant.root)),
        Err(join) => Err(AppError::internal(&join)),
    }
}

/// Parses a query string, or 400.
fn query<T: DeserializeOwned>(uri: &Uri) -> Result<T, AppError> {
    axum::extract::Query::<T>::try_from_uri(uri)
        .map(|q| q.0)
        .map_err(|e| AppError::bad_request(format!("query: {}", e.body_text())))
}

/// Parses a JSON object body (empty means `{}`) into an operation request for the
/// conversation named in the path. A `conversation` field, if given, must name the same one.
fn request_for<T: DeserializeOwned>(name: &str, body: &[u8]) -> Result<T, AppError> {
    let mut object: Map<String, Value> = if body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        let value: Value = ctxlog::json::from_slice(body)
            .map_err(|e| AppError::bad_request(format!("request body: {e}")))?;
        match value {
            Value::Object(object) => object,
            other => {
                let found = match other {
                    Value::Array(_) => "an array",
                    Value::String(_) => "a string",
                    Value::Number(_) => "a number",
                    Value::Bool(_) => "a boolean",
                    _ => "null",
                };
                return Err(AppError::bad_request(format!(
                    "request body: expected a JSON object, found {found}"
                )));
            }
        }
    };
    match object.remove("conversation") {
        Some(Value::String(given)) if given != name => {
            return Err(AppError::bad_request(format!(
                "request body names conversation \"{given}\" but the path names \"{name}\""
            )));
        }
        _ => {}
    }
    ctxlog::ops::request_from_fields(Some(name), object).map_err(AppError::from_store)
}

async fn healthz() -> Json<Value> {
    Json(serde_json::json!({"status": "ok"}))
}

async fn openapi() -> Response {
    json_bytes(crate::OPENAPI.as_bytes().to_vec())
}

/// A response of JSON bytes as they are.
fn json_bytes(bytes: Vec<u8>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(bytes),
    )
        .into_response()
}

async fn list(Extension(tenant): Extension<Tenant>) -> Result<Response, AppError> {
    let list = blocking(tenant, |s| s.list(&ListRequest {})).await?;
    Ok(Json(list).into_response())
}

async fn commit(
    Extension(tenant): Extension<Tenant>,
    Path(name): Path<String>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Response, AppError> {
    let id = match headers.get("idempotency-key") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .map_err(|_| AppError::bad_request("Idempotency-Key must be visible ASCII"))?
                .to_string(),
        ),
    };
    // Parse before touching the store, so malformed input never creates anything.
    let request = CommitRequest::from_json(&name, &body, id.as_deref())
        .map_err(|e| AppError::from_store(e).scrub(&tenant.root))?;
    let receipt = blocking(tenant, move |s| s.commit(&request)).await?;
    Ok(Json(receipt).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    from: Option<u64>,
    limit: Option<u64>,
}

async fn events(
    Extension(tenant): Extension<Tenant>,
    Path(name): Path<String>,
    uri: Uri,
) -> Result<Response, AppError> {
    let q: EventsQuery = query(&uri)?;
    let request = LogRequest::page(name, q.from, q.limit).map_err(AppError::from_store)?;
    let log = blocking(tenant, move |s| s.log(&request)).await?;
    Ok(Json(log).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProjectionQuery {
    #[serde(default)]
    report: bool,
}

/// The exact body bytes; with `?report=true`, `{"body":<the same bytes>,"report":{…}}`.
async fn projection(
    Extension(tenant): Extension<Tenant>,
    Path(name): Path<String>,
    uri: Uri,
    RawBody(body): RawBody,
) -> Result<Response, AppError> {
    let q: ProjectionQuery = query(&uri)?;
    let request: ProjectRequest = request_for(&name, &body)?;
    if !q.report {
        let projection = blocking(tenant, move |s| s.project_body(&request)).await?;
        return Ok(json_bytes(projection.body));
    }
    let projection = blocking(tenant, move |s| s.project(&request)).await?;
    let report = serde_json::to_vec(&projection.report).map_err(|e| AppError::internal(&e))?;
    let mut out = Vec::with_capacity(projection.body.len() + report.len() + 24);
    out.extend_from_slice(b"{\"body\":");
    out.extend_from_slice(&projection.body);
    out.extend_from_slice(b",\"report\":");
    out.extend_from_slice(&report);
    out.push(b'}');
    Ok(json_bytes(out))
}

async fn recall(
    Extension(tenant): Extension<Tenant>,
    Path(name): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, AppError> {
    let request: RecallRequest = request_for(&name, &body)?;
    let result = blocking(tenant, move |s| s.recall(&request)).await?;
    Ok(Json(result).into_response())
}

async fn erase(
    Extension(tenant): Extension<Tenant>,
    Path(name): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, AppError> {
    let request: EraseRequest = request_for(&name, &body)?;
    let result = blocking(tenant, move |s| s.erase(&request)).await?;
    Ok(Json(result).into_response())
}

/// The verify report; artifacts missing or altered are corruption (500 `corrupt`), as the
/// CLI's exit 5.
async fn verify(
    Extension(tenant): Extension<Tenant>,
    Path(name): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, AppError> {
    let request: VerifyRequest = request_for(&name, &body)?;
    let report = blocking(tenant, move |s| {
        let report = s.verify(&request)?;
        match ctxlog::ops::verify_problem(&report) {
            Some(problem) => Err(problem),
            None => Ok(report),
        }
    })
    .await?;
    Ok(Json(report).into_response())
}

async fn reindex(
    Extension(tenant): Extension<Tenant>,
    Path(name): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, AppError> {
    let request: ReindexRequest = request_for(&name, &body)?;
    let stats = blocking(tenant, move |s| s.reindex(&request, &mut |_| {})).await?;
    Ok(Json(stats).into_response())
}

/// The repair plan of a damaged conversation; `{"accept_loss": true}` carries it out
/// (docs/design.md#l11-repair).
async fn repair(
    Extension(tenant): Extension<Tenant>,
    Path(name): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, AppError> {
    let request: RepairRequest = request_for(&name, &body)?;
    let report = blocking(tenant, move |s| s.repair(&request)).await?;
    Ok(Json(report).into_response())
}

async fn gc(
    Extension(tenant): Extension<Tenant>,
    Path(name): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, AppError> {
    let request: GcRequest = request_for(&name, &body)?;
    let result = blocking(tenant, move |s| s.gc(&request)).await?;
    Ok(Json(result).into_response())
}

/// Retention over every conversation of the caller's store (its tenant's only).
async fn gc_all(
    Extension(tenant): Extension<Tenant>,
    RawBody(body): RawBody,
) -> Result<Response, AppError> {
    let request: GcRequest = if body.iter().all(u8::is_ascii_whitespace) {
        GcRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| AppError::bad_request(format!("request body: {e}")))?
    };
    if request.conversation.is_some() {
        return Err(AppError::bad_request(
            "request body: /v1/gc covers every conversation; for one, POST \
             /v1/conversations/{name}/gc",
        ));
    }
    let result = blocking(tenant, move |s| s.gc(&request)).await?;
    Ok(Json(result).into_response())
}

/// The conversation as JSON Lines (`application/x-ndjson`), one event a line.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportQuery {
    /// A salvage of a damaged conversation (docs/export-import.md, "Salvage").
    #[serde(default)]
    salvage: bool,
}

/// The conversation as JSON Lines; `?salvage=true` gives every intact record of a damaged
/// one, the damaged ranges marked, and changes nothing.
async fn export(
    Extension(tenant): Extension<Tenant>,
    Path(name): Path<String>,
    uri: Uri,
) -> Result<Response, AppError> {
    let query: ExportQuery = query(&uri)?;
    let request = ExportRequest {
        conversation: name,
        salvage: query.salvage,
    };
    let bytes = blocking(tenant, move |s| {
        let mut out = Vec::new();
        s.export(&request, &mut out)?;
        Ok(out)
    })
    .await?;
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from(bytes),
    )
        .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportQuery {
    #[serde(default)]
    from: ctxlog::transfer::ImportFormat,
}

/// Imports the request body (an export, or `?from=` another format) into `{name}` (for
/// datasets, the name prefix).
async fn import(
    Extension(tenant): Extension<Tenant>,
    Path(name): Path<String>,
    uri: Uri,
    RawBody(body): RawBody,
) -> Result<Response, AppError> {
    let q: ImportQuery = query(&uri)?;
    let request = ImportRequest {
        conversation: Some(name),
        format: q.from,
    };
    let response = blocking(tenant, move |s| s.import(&request, &body, &mut |_| {})).await?;
    Ok(Json(response).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CountQuery {
    /// Detected from the body when left out (an ambiguous body needs it).
    #[serde(default)]
    format: Option<WireFormat>,
    #[serde(default)]
    tokenizer: Tokenizer,
}

/// Bytes and tokens of the request body sent, as it would go to the provider.
async fn count(
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
    RawBody(body): RawBody,
) -> Result<Response, AppError> {
    let q: CountQuery = query(&uri)?;
    let request = CountRequest {
        body: body.to_vec(),
        format: q.format,
        tokenizer: q.tokenizer,
    };
    let count = blocking(tenant, move |s| s.count(&request)).await?;
    Ok(Json(count).into_response())
}
