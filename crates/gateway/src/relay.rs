//! One relayed call: who is asking, the input committed and the body projected
//! ([`ctxlog::Store::prepare_call`]), the provider called, its answer relayed (a stream event
//! by event, as it arrives) and its reply committed ([`ctxlog::Store::commit_reply`]).
//!
//! * The client's API key (`Authorization` or `x-api-key`) goes upstream with the client's
//!   other headers and is never stored or logged; the tenant is a keyed hash of it.
//! * A failed upstream call leaves the input committed and commits no reply; the provider's
//!   status and body reach the client as they came. Unreachable: 502; no answer within the
//!   upstream timeout: 504; both in the provider's error shape.
//! * A stream is forwarded chunk by chunk. The chunk that completes the reply is held until
//!   the reply is committed, then forwarded with an SSE comment `: x-ctxlog-seq N`, so a
//!   client that saw the end of the stream knows the reply is durable. A client that goes
//!   away before that cancels the upstream request and nothing of the reply is committed.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ctxlog::Store;
use ctxlog::call::{CallRequest, PreparedCall, RecallStepRequest, ReplyRequest};
use ctxlog_server::AppError;
use futures_util::StreamExt;
use std::time::Instant;
use tokio::sync::mpsc;

use crate::metrics::UpstreamError;
use crate::provider::Provider;
use crate::{CONVERSATION_HEADER, Gateway, MAX_TOKENS_HEADER, SEQ_HEADER, TOKEN_HEADER};

pub(crate) async fn openai_chat(
    State(gateway): State<Gateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    relay(gateway, Provider::OpenAiChat, headers, body).await
}

pub(crate) async fn openai_responses(
    State(gateway): State<Gateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    relay(gateway, Provider::OpenAiResponses, headers, body).await
}

pub(crate) async fn anthropic(
    State(gateway): State<Gateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    relay(gateway, Provider::Anthropic, headers, body).await
}

/// An error answered in the provider's shape, naming the conversation when there is one.
struct Refusal {
    provider: Provider,
    status: StatusCode,
    message: String,
    /// A body of the provider's own for this refusal, instead of the one made of `message`.
    body: Option<serde_json::Value>,
}

impl Refusal {
    fn new(provider: Provider, status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal {
            provider,
            status,
            message: message.into(),
            body: None,
        }
    }

    /// OpenAI's own answer to a `previous_response_id` it does not know.
    fn unknown_response(id: &str) -> Refusal {
        let message = format!("Previous response with id '{id}' not found.");
        Refusal {
            provider: Provider::OpenAiResponses,
            status: StatusCode::BAD_REQUEST,
            body: Some(serde_json::json!({"error": {
                "message": message, "type": "invalid_request_error",
                "param": "previous_response_id", "code": "previous_response_not_found"
            }})),
            message,
        }
    }

    fn from_store(provider: Provider, e: ctxlog::Error) -> Refusal {
        let e = AppError::from_store(e);
        Refusal::new(provider, e.status(), e.message())
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = self.body.unwrap_or_else(|| {
            self.provider
                .error_body(self.status.as_u16(), &self.message)
        });
        (self.status, axum::Json(body)).into_response()
    }
}

async fn relay(gateway: Gateway, provider: Provider, headers: HeaderMap, body: Bytes) -> Response {
    let arrived = Instant::now();
    let mut conversation = headers
        .get(CONVERSATION_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let call = relay_named(
        &gateway,
        provider,
        &headers,
        body,
        &mut conversation,
        arrived,
    );
    let (mut response, refused) = match call.await {
        Ok(response) => (response, false),
        Err(refusal) => {
            let refused = refusal.status.is_client_error();
            (refusal.into_response(), refused)
        }
    };
    let status = response.status().as_u16();
    gateway.inner.metrics.answered(provider, status, refused);
    if gateway.inner.log_json {
        access_log(provider, status, &conversation, &response, arrived);
    }
    if let Ok(value) = HeaderValue::from_str(&conversation)
        && !conversation.is_empty()
    {
        response.headers_mut().insert(CONVERSATION_HEADER, value);
    }
    response
}

async fn relay_named(
    gateway: &Gateway,
    provider: Provider,
    headers: &HeaderMap,
    body: Bytes,
    conversation: &mut String,
    arrived: Instant,
) -> Result<Response, Refusal> {
    let refuse = |status, message: String| Refusal::new(provider, status, message);
    let (tenant, store) = tenant_store(gateway, provider, headers)?;

    let window = match headers.get(MAX_TOKENS_HEADER) {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    refuse(
                        StatusCode::BAD_REQUEST,
                        format!("{MAX_TOKENS_HEADER} must be a positive number of tokens"),
                    )
                })?,
        ),
    };
    let request = CallRequest {
        // Empty: recognised from the transcript.
        conversation: conversation.clone(),
        format: provider.format(),
        body: body.to_vec(),
        window,
        previous: None,
        recall_tool: gateway.inner.recall_calls.is_some(),
        model_windows: gateway.inner.model_windows.clone(),
    };
    // Kept to project the conversation again after each recall step.
    let recall = request.recall_tool.then(|| request.clone());
    let prepared = blocking(provider, {
        let (store, gateway, tenant) = (store.clone(), gateway.clone(), tenant.clone());
        // A `previous_response_id` (read by the store with the body) names the conversation
        // and the input its response answered: an id this gateway gave the tenant.
        let response_ids = move |id: &str| gateway.inner.tenants.read_response_id(&tenant, id);
        move || store.prepare_relayed(&request, &response_ids)
    })
    .await
    .map_err(|refusal| {
        // A response that was never stored: the provider's own answer.
        match ctxlog::call::unknown_response_id(&refusal.message) {
            Some(id) if provider == Provider::OpenAiResponses => Refusal::unknown_response(id),
            _ => refusal,
        }
    })?;
    *conversation = prepared.conversation.clone();
    let conversation = conversation.as_str();
    tracing::debug!(
        conversation,
        recognised = prepared.recognised,
        committed = prepared.committed,
        tokens = prepared.tokens,
        budget = ?prepared.budget,
        "input committed; calling the provider"
    );
    let metrics = &gateway.inner.metrics;
    metrics.sent(provider, body.len(), prepared.body.len(), prepared.tokens);
    count_resent(gateway, provider, &store, &body);
    let added = arrived.elapsed();
    let upstream = call_upstream(gateway, provider, headers, &prepared).await?;
    let response_id = (provider == Provider::OpenAiResponses).then(|| {
        gateway
            .inner
            .tenants
            .response_id(&tenant, conversation, prepared.last_seq)
    });
    let call = Call {
        gateway: gateway.clone(),
        added,
        store,
        provider,
        conversation: conversation.to_owned(),
        input_seq: prepared.last_seq,
        timeout: gateway.inner.upstream_timeout,
        response_id,
        headers: headers.clone(),
        recall: recall.map(|request| Recall {
            request: CallRequest {
                conversation: conversation.to_owned(),
                previous: None,
                ..request
            },
            left: gateway.inner.recall_calls.unwrap_or(0),
        }),
    };
    if prepared.stream && upstream.status().is_success() {
        Ok(call.stream(upstream))
    } else {
        call.whole(upstream).await
    }
}

/// Counts the tokens of the client's body (its resent history) for `/metrics`, with the
/// projection's tokenizer, off the request's path: the answer does not wait for it.
fn count_resent(gateway: &Gateway, provider: Provider, store: &Arc<Store>, body: &Bytes) {
    let request = ctxlog::ops::CountRequest {
        body: body.to_vec(),
        format: Some(provider.format()),
        tokenizer: ctxlog::ops::ProjectRequest::default().tokenizer,
    };
    let (gateway, store) = (gateway.clone(), store.clone());
    tokio::task::spawn_blocking(move || {
        if let Ok(count) = store.count(&request) {
            gateway.inner.metrics.resent(provider, count.tokens);
        }
    });
}

/// The request's tenant (its gateway token with `--tokens`, and its API key) and its store.
fn tenant_store(
    gateway: &Gateway,
    provider: Provider,
    headers: &HeaderMap,
) -> Result<(String, Arc<Store>), Refusal> {
    let unauthorized = |m: &str| Refusal::new(provider, StatusCode::UNAUTHORIZED, m);
    let token_tenant = match &gateway.inner.tokens {
        None => "",
        Some(tokens) => {
            let token = headers.get(TOKEN_HEADER).ok_or_else(|| {
                unauthorized(
                    "missing X-Ctxlog-Token header: this gateway takes requests beyond \
                     loopback only with its own token (give it in the SDK's default_headers)",
                )
            })?;
            tokens
                .tenant(token.as_bytes().trim_ascii())
                .ok_or_else(|| unauthorized("unknown X-Ctxlog-Token"))?
        }
    };
    let key = api_key(headers).ok_or_else(|| {
        unauthorized(
            "missing API key: the gateway forwards the provider key the SDK sends \
             (Authorization: Bearer KEY or x-api-key) and keeps each key's conversations apart",
        )
    })?;
    gateway
        .inner
        .tenants
        .store(token_tenant, key)
        .map_err(|e| Refusal::from_store(provider, e))
}

/// The provider API key of a request: `x-api-key`, or `Authorization: Bearer KEY`.
fn api_key(headers: &HeaderMap) -> Option<&[u8]> {
    if let Some(key) = headers.get("x-api-key") {
        return Some(key.as_bytes()).filter(|k| !k.is_empty());
    }
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let key = value
        .get(..7)
        .filter(|p| p.eq_ignore_ascii_case(b"bearer "))
        .map(|_| value[7..].trim_ascii())?;
    (!key.is_empty()).then_some(key)
}

/// Runs store work on a blocking thread.
async fn blocking<T: Send + 'static>(
    provider: Provider,
    work: impl FnOnce() -> ctxlog::Result<T> + Send + 'static,
) -> Result<T, Refusal> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(|e| Refusal::from_store(provider, e)),
        Err(e) => Err(Refusal::from_store(
            provider,
            ctxlog::Error::Internal {
                reason: format!("store task failed: {e}"),
            },
        )),
    }
}

/// Request headers not forwarded upstream: the connection's own, the body's length (the
/// body is a new one), compression (the stream is read as it passes), and ctxlog's.
fn forwarded(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "host"
            | "content-length"
            | "connection"
            | "keep-alive"
            | "transfer-encoding"
            | "te"
            | "upgrade"
            | "proxy-authorization"
            | "accept-encoding"
            | "origin"
            | "cookie"
    ) && !name.as_str().starts_with("x-ctxlog-")
}

async fn call_upstream(
    gateway: &Gateway,
    provider: Provider,
    headers: &HeaderMap,
    prepared: &PreparedCall,
) -> Result<reqwest::Response, Refusal> {
    let mut request = gateway
        .inner
        .client
        .post(gateway.upstream_url(provider))
        .body(prepared.body.clone());
    for (name, value) in headers.iter().filter(|(n, _)| forwarded(n)) {
        request = request.header(name.as_str(), value.as_bytes());
    }
    let timeout = gateway.inner.upstream_timeout;
    let metrics = &gateway.inner.metrics;
    match tokio::time::timeout(timeout, request.send()).await {
        Ok(Ok(response)) => {
            let status = response.status();
            if status.is_client_error() {
                metrics.upstream_error(provider, UpstreamError::Status4xx);
            } else if status.is_server_error() {
                metrics.upstream_error(provider, UpstreamError::Status5xx);
            }
            Ok(response)
        }
        Ok(Err(e)) if e.is_timeout() => {
            metrics.upstream_error(provider, UpstreamError::Timeout);
            Err(upstream_timeout(provider, timeout))
        }
        Ok(Err(e)) => {
            metrics.upstream_error(provider, UpstreamError::Unreachable);
            tracing::warn!(error = %without_url(&e), "the provider could not be reached");
            Err(Refusal::new(
                provider,
                StatusCode::BAD_GATEWAY,
                format!(
                    "the provider could not be reached ({}); your input is stored, retry the \
                     call",
                    without_url(&e)
                ),
            ))
        }
        Err(_) => {
            metrics.upstream_error(provider, UpstreamError::Timeout);
            Err(upstream_timeout(provider, timeout))
        }
    }
}

fn upstream_timeout(provider: Provider, timeout: std::time::Duration) -> Refusal {
    Refusal::new(
        provider,
        StatusCode::GATEWAY_TIMEOUT,
        format!(
            "the provider did not answer within {} s (--upstream-timeout); your input is \
             stored, retry the call",
            timeout.as_secs()
        ),
    )
}

/// A client error's text without the URL (which may carry a query the operator configured).
fn without_url(e: &reqwest::Error) -> String {
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut text = String::from(if e.is_connect() {
        "connection failed"
    } else {
        "request failed"
    });
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

/// A call whose input is committed, awaiting the provider's answer.
struct Call {
    gateway: Gateway,
    /// The time the gateway took before calling the provider.
    added: std::time::Duration,
    store: Arc<Store>,
    provider: Provider,
    conversation: String,
    input_seq: u64,
    timeout: std::time::Duration,
    /// A Responses call's response id: it replaces the provider's in what the client gets.
    response_id: Option<String>,
    /// The client's headers, for the calls after a recall step.
    headers: HeaderMap,
    /// With the recall tool: the call, to project again after a recall step.
    recall: Option<Recall>,
}

/// A whole answer read, before it is sent: its head, its body, when its last byte came.
struct WholeAnswer {
    head: axum::http::response::Builder,
    body: Bytes,
    answered: Instant,
}

/// The recall steps a call may still answer.
struct Recall {
    /// The client's call, its conversation resolved.
    request: CallRequest,
    /// The recall calls it may still answer.
    left: usize,
}

impl Call {
    /// The response's status and headers (the provider's, less the connection's own), and
    /// the seq header.
    fn head(&self, upstream: &reqwest::Response, seq: u64) -> axum::http::response::Builder {
        let mut builder = Response::builder().status(upstream.status().as_u16());
        for (name, value) in upstream.headers() {
            if !matches!(
                name.as_str(),
                "content-length"
                    | "connection"
                    | "keep-alive"
                    | "transfer-encoding"
                    | "content-encoding"
            ) {
                builder = builder.header(name.as_str(), value.as_bytes());
            }
        }
        builder.header(SEQ_HEADER, seq)
    }

    /// A whole answer: read, the reply committed when it is one, then sent. A recall step
    /// is answered and the provider called again instead ([`Call::recall_step`]).
    async fn whole(mut self, mut upstream: reqwest::Response) -> Result<Response, Refusal> {
        loop {
            let (reply, response) = self.read_whole(upstream).await?;
            if let Some(reply) = &reply
                && let Some(next) = self.recall_step(reply).await?
            {
                upstream = next;
                continue;
            }
            return self.send_whole(reply, response).await;
        }
    }

    /// Reads a whole answer: the reply it holds (a success only), and the answer to send.
    async fn read_whole(
        &self,
        upstream: reqwest::Response,
    ) -> Result<(Option<serde_json::Value>, WholeAnswer), Refusal> {
        let status = upstream.status();
        let head = self.head(&upstream, self.input_seq);
        let metrics = &self.gateway.inner.metrics;
        let body = match tokio::time::timeout(self.timeout, upstream.bytes()).await {
            Ok(Ok(body)) => body,
            Ok(Err(e)) => {
                metrics.upstream_error(self.provider, UpstreamError::Broken);
                return Err(Refusal::new(
                    self.provider,
                    StatusCode::BAD_GATEWAY,
                    format!("the provider's answer broke off ({})", without_url(&e)),
                ));
            }
            Err(_) => {
                metrics.upstream_error(self.provider, UpstreamError::Timeout);
                return Err(upstream_timeout(self.provider, self.timeout));
            }
        };
        let answered = Instant::now();
        if body.is_empty() {
            return Err(Refusal::new(
                self.provider,
                StatusCode::BAD_GATEWAY,
                format!("the provider answered {status} with an empty body"),
            ));
        }
        let reply = status
            .is_success()
            .then(|| self.provider.reply_of(&body))
            .flatten();
        let body = match &self.response_id {
            Some(id) if status.is_success() => with_response_id(&body, id, false),
            _ => body,
        };
        Ok((
            reply,
            WholeAnswer {
                head,
                body,
                answered,
            },
        ))
    }

    /// Sends a whole answer, its reply committed first.
    async fn send_whole(
        &self,
        reply: Option<serde_json::Value>,
        answer: WholeAnswer,
    ) -> Result<Response, Refusal> {
        let WholeAnswer {
            mut head,
            body,
            answered,
        } = answer;
        let metrics = &self.gateway.inner.metrics;
        metrics.added(self.provider, self.added + answered.elapsed());
        if let Some(message) = reply
            && let Some(seq) = self.commit(message).await
            && let Some(h) = head.headers_mut()
        {
            h.insert(SEQ_HEADER, HeaderValue::from(seq));
        }
        head.body(Body::from(body)).map_err(|e| {
            Refusal::new(
                self.provider,
                StatusCode::BAD_GATEWAY,
                format!("bad answer: {e}"),
            )
        })
    }

    /// With the recall tool, a reply whose only calls are recall calls (as many as the call
    /// may still answer) is a recall step: answered by the store
    /// ([`ctxlog::Store::answer_recall`]: the step committed as the gateway's own events, the
    /// conversation projected again), and the provider is called again with it; the new
    /// answer, `None` when the reply is not a step.
    async fn recall_step(
        &mut self,
        reply: &serde_json::Value,
    ) -> Result<Option<reqwest::Response>, Refusal> {
        let Some(recall) = self.recall.as_mut().filter(|r| r.left > 0) else {
            return Ok(None);
        };
        let request = RecallStepRequest {
            call: recall.request.clone(),
            after: self.input_seq,
            reply: reply.clone(),
            max_calls: recall.left,
        };
        let store = self.store.clone();
        let step = blocking(self.provider, move || store.answer_recall(&request)).await?;
        let Some(step) = step else {
            return Ok(None);
        };
        recall.left -= step.answered;
        self.input_seq = step.prepared.last_seq;
        let metrics = &self.gateway.inner.metrics;
        metrics.recalled(self.provider, step.answered);
        metrics.sent(
            self.provider,
            0,
            step.prepared.body.len(),
            step.prepared.tokens,
        );
        tracing::debug!(
            conversation = self.conversation,
            answered = step.answered,
            seq = step.prepared.last_seq,
            "recall step answered; calling the provider again"
        );
        call_upstream(&self.gateway, self.provider, &self.headers, &step.prepared)
            .await
            .map(Some)
    }

    /// Commits a reply; `None` (logged) when it cannot be: the client still gets it, and its
    /// next call resends it, which commits it then.
    async fn commit(&self, message: serde_json::Value) -> Option<u64> {
        let store = self.store.clone();
        let request = ReplyRequest {
            conversation: self.conversation.clone(),
            format: self.provider.format(),
            message,
            after: Some(self.input_seq),
        };
        match blocking(self.provider, move || store.commit_reply(&request)).await {
            Ok(receipt) => Some(receipt.last_seq),
            Err(refusal) => {
                tracing::warn!(
                    conversation = self.conversation,
                    error = refusal.message,
                    "the reply was relayed but not committed"
                );
                None
            }
        }
    }

    /// A streamed answer, relayed chunk by chunk.
    fn stream(self, upstream: reqwest::Response) -> Response {
        // The first byte is forwarded as it comes: what the gateway adds is its preparation.
        self.gateway.inner.metrics.added(self.provider, self.added);
        let head = self.head(&upstream, self.input_seq);
        let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(16);
        tokio::spawn(self.pump(upstream, tx));
        let body = Body::from_stream(tokio_stream_from(rx));
        head.body(body)
            .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
    }

    /// Forwards the upstream stream to `tx` as it arrives, assembling the reply; stops (and
    /// drops the upstream request) when the client goes away.
    ///
    /// With the recall tool, a reply that starts with a recall call is held (not forwarded)
    /// until it is whole: a recall step is answered and the provider's next stream relayed
    /// in its place ([`Call::recall_step`]), so the client sees one answer; any other reply
    /// is forwarded from its first text or call on (an Anthropic reply: from its first
    /// tool use, or whole at its end, [`crate::Assembler::recall_first`]). A call after a recall step that fails
    /// ends the client's stream without its final event, as a broken stream does.
    async fn pump(
        mut self,
        mut upstream: reqwest::Response,
        tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    ) {
        'calls: loop {
            let holding = self.recall.as_ref().is_some_and(|r| r.left > 0);
            let mut held: Option<Vec<u8>> = holding.then(Vec::new);
            let mut assembler = self.provider.assembler();
            let response_id = self.response_id.clone();
            let mut ids = response_id.as_deref().map(IdRewriter::new);
            let mut chunks = upstream.bytes_stream();
            loop {
                let next = tokio::select! {
                    next = tokio::time::timeout(self.timeout, chunks.next()) => next,
                    () = tx.closed() => return,
                };
                let Some(chunk) = self.chunk(next) else {
                    if let Some(held) = held.filter(|h| !h.is_empty()) {
                        let _ = tx.send(Ok(Bytes::from(held))).await;
                    }
                    return;
                };
                let was_complete = assembler.is_complete();
                assembler.feed(&chunk);
                let mut out = match &mut ids {
                    Some(ids) => ids.feed(&chunk),
                    None => chunk.to_vec(),
                };
                if let Some(pending) = held.as_mut() {
                    let step = assembler.recall_first() != Some(false);
                    if step && !assembler.is_complete() {
                        pending.extend_from_slice(&out);
                        continue;
                    }
                    if step && let Some(message) = assembler.message() {
                        match self.recall_step(&message).await {
                            Ok(Some(next)) if next.status().is_success() => {
                                upstream = next;
                                continue 'calls;
                            }
                            Ok(None) => {}
                            Ok(Some(next)) => {
                                tracing::warn!(
                                    status = next.status().as_u16(),
                                    "the provider refused the call after a recall step"
                                );
                                return;
                            }
                            Err(refusal) => {
                                tracing::warn!(error = refusal.message, "the recall step failed");
                                return;
                            }
                        }
                    }
                    pending.extend_from_slice(&out);
                    out = std::mem::take(pending);
                    held = None;
                }
                if !was_complete
                    && let Some(message) = assembler.message()
                    && let Some(seq) = self.commit(message).await
                {
                    out.extend_from_slice(format!(": {SEQ_HEADER} {seq}\n\n").as_bytes());
                }
                if tx.send(Ok(Bytes::from(out))).await.is_err() {
                    return;
                }
            }
        }
    }

    /// The next piece of the provider's stream; `None` at its end, or when it broke off or
    /// stalled (counted and logged).
    fn chunk(
        &self,
        next: Result<Option<reqwest::Result<Bytes>>, tokio::time::error::Elapsed>,
    ) -> Option<Bytes> {
        let metrics = &self.gateway.inner.metrics;
        match next {
            Ok(Some(Ok(chunk))) => Some(chunk),
            Ok(None) => None,
            Ok(Some(Err(e))) => {
                metrics.upstream_error(self.provider, UpstreamError::Broken);
                tracing::warn!(error = %without_url(&e), "the provider's stream broke off");
                None
            }
            Err(_) => {
                metrics.upstream_error(self.provider, UpstreamError::Timeout);
                tracing::warn!("the provider's stream stalled past the upstream timeout");
                None
            }
        }
    }
}

/// The receiving end of the relay as a body stream.
fn tokio_stream_from(
    rx: mpsc::Receiver<Result<Bytes, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
}

/// A Responses body (or, with `event`, one SSE event's JSON) with the response's id replaced
/// by the gateway's: the provider's id names provider state the gateway does not use.
fn with_response_id(json: &[u8], id: &str, event: bool) -> Bytes {
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(json) else {
        return Bytes::copy_from_slice(json);
    };
    let response = if event {
        value.get_mut("response")
    } else {
        Some(&mut value)
    };
    match response.and_then(serde_json::Value::as_object_mut) {
        Some(object) if object.contains_key("id") => {
            object.insert("id".into(), id.into());
            Bytes::from(serde_json::to_vec(&value).unwrap_or_else(|_| json.to_vec()))
        }
        _ => Bytes::copy_from_slice(json),
    }
}

/// Rewrites the response id in a Responses stream's events (`response.created`,
/// `response.completed`, …), passing each event on once it is whole.
struct IdRewriter<'a> {
    id: &'a str,
    pending: Vec<u8>,
}

impl<'a> IdRewriter<'a> {
    fn new(id: &'a str) -> IdRewriter<'a> {
        IdRewriter {
            id,
            pending: Vec::new(),
        }
    }

    /// The whole events `chunk` completes, rewritten.
    fn feed(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some((end, len)) = crate::provider::event_end(&self.pending) {
            let event: Vec<u8> = self.pending.drain(..end + len).collect();
            for line in event[..end].split(|b| *b == b'\n') {
                match line.strip_prefix(b"data:") {
                    Some(data) if data.windows(11).any(|w| w == b"\"response\":") => {
                        out.extend_from_slice(b"data: ");
                        let data = data.strip_prefix(b" ").unwrap_or(data);
                        let data = data.strip_suffix(b"\r").unwrap_or(data);
                        out.extend_from_slice(&with_response_id(data, self.id, true));
                    }
                    _ => out.extend_from_slice(line),
                }
                out.push(b'\n');
            }
            out.push(b'\n');
        }
        out
    }
}

/// One access log line on stdout (`--log-format json`): when, which route, the status, the
/// conversation, the seq committed and the time since the request arrived (for a stream:
/// until its head). Never message content, never a key.
fn access_log(
    provider: Provider,
    status: u16,
    conversation: &str,
    response: &Response,
    arrived: Instant,
) {
    let seq = response
        .headers()
        .get(SEQ_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let ts_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let line = serde_json::json!({
        "ts_ms": ts_ms,
        "route": match provider {
            Provider::OpenAiChat => "/v1/chat/completions",
            Provider::OpenAiResponses => "/v1/responses",
            Provider::Anthropic => "/v1/messages",
        },
        "status": status,
        "conversation": (!conversation.is_empty()).then_some(conversation),
        "seq": seq,
        "ms": arrived.elapsed().as_secs_f64() * 1e3,
    });
    println!("{line}");
}
