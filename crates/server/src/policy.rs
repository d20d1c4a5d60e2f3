//! The HTTP policy every HTTP surface of ctxlog serves under: who may call it, what a
//! state-changing request must look like, and how long a client may take to send one.
//!
//! Two public pieces, for any [`Router`]:
//!
//! - [`HttpPolicy`], an axum middleware ([`HttpPolicy::apply`], or [`enforce`] with
//!   [`axum::middleware::from_fn_with_state`]) that refuses what a web page in a browser could
//!   send behind its user's back:
//!   - without tokens (a server for one developer on loopback), a request addressed to a host
//!     that is not loopback (`Host` or the request target's authority): 403 `forbidden`. A
//!     DNS-rebinding page reaches the server under its own host name, so it is refused even
//!     for reads;
//!   - an `Origin` header (sent by browsers on cross-origin requests and on same-origin
//!     POSTs) that is not allowed: without tokens only loopback origins are; with tokens, the
//!     origins given to [`HttpPolicy::authenticated`] (`--allow-origin`) and the server's own (an origin
//!     whose host and port are the request's `Host`). 403 `forbidden`. Requests without an
//!     `Origin` (curl, SDKs, other programs) are not browsers' cross-site requests and pass;
//!   - an unsafe method (POST, PUT, PATCH, DELETE: every method but GET, HEAD, OPTIONS and
//!     TRACE; a DELETE without a body is exempt, having no content to type) without one of
//!     the route's JSON content types (`application/json` unless
//!     [`HttpPolicy::accept`] says otherwise; parameters such as `charset` allowed): 415
//!     `unsupported_media_type`. The content types a page may send across sites without a
//!     CORS preflight are `text/plain` and the two form types, and no response carries a CORS
//!     header, so every preflight fails: no web page can drive the server.
//! - [`serve_connections`], the accept loop: a cap on open connections (those over it wait in
//!   the listener's queue), a timeout on a request's headers that also closes idle kept-alive
//!   connections, a timeout on its body (408 `timeout`), back-off on accept errors (a full
//!   file table never makes it spin or exit), and graceful shutdown. Only *reading a request*
//!   is timed: a response, however long it streams, is never cut.
//!
//! Another HTTP surface serves under both like this:
//!
//! ```no_run
//! use ctxlog_server::policy::{ConnectionLimits, HttpPolicy, serve_connections};
//!
//! # async fn surface(listener: tokio::net::TcpListener) -> std::io::Result<()> {
//! let router = axum::Router::new().route("/hello", axum::routing::post(|| async { "hi" }));
//! let router = HttpPolicy::loopback().apply(router);
//! serve_connections(listener, router, ConnectionLimits::default(), std::future::pending()).await
//! # }
//! ```

use std::convert::Infallible;
use std::error::Error as StdError;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::uri::Authority;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tower::ServiceExt;

use crate::AppError;

/// The content type of a JSON request body.
pub const JSON: &str = "application/json";

/// The content type of a JSON Lines request body (an export being imported).
pub const NDJSON: &str = "application/x-ndjson";

/// How long a client has to send a request's headers, from the moment its connection is
/// ready for a request (new, or kept alive after the previous response), by default.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client has to send a request's body once its headers arrived, by default:
/// 64 MiB (the default body limit) at about 1 MiB/s.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// How many connections are open at once at most, by default. The cap is lowered to half the
/// process's open-file limit when that is smaller, so the stores keep files to work with.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

// ------------------------------------------------------------------------------------------
// Who may call, and with what

/// A web origin: `http` or `https`, a host and a port (the scheme's default port left out).
///
/// # Format
/// As browsers send it in `Origin`: `SCHEME://HOST[:PORT]`, no path (a trailing `/` is
/// accepted), no user. The scheme and host compare case-insensitively; `:443` on `https`
/// (`:80` on `http`) is the same origin as none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl FromStr for Origin {
    type Err = String;

    fn from_str(text: &str) -> Result<Origin, String> {
        let wrong = |why: &str| {
            format!(
                "origin {text:?}: {why} (expected SCHEME://HOST[:PORT], e.g. https://ctxlog.example.com)"
            )
        };
        let uri: axum::http::Uri = text.parse().map_err(|_| wrong("not a URL"))?;
        let scheme = uri.scheme_str().unwrap_or_default().to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(wrong("the scheme must be http or https"));
        }
        let authority = uri
            .authority()
            .and_then(|a| authority(a.as_str()))
            .ok_or_else(|| wrong("no host, a user name, or a port that is not a number"))?;
        if uri.path_and_query().is_some_and(|p| p.as_str() != "/") {
            return Err(wrong("an origin has no path or query"));
        }
        let default_port = if scheme == "https" { 443 } else { 80 };
        Ok(Origin {
            host: authority.host().to_ascii_lowercase(),
            port: authority.port_u16().filter(|p| *p != default_port),
            scheme,
        })
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

impl Origin {
    /// Whether the origin's host is a loopback name or address.
    fn is_loopback(&self) -> bool {
        is_loopback_host(&self.host)
    }

    /// Whether the origin is the one a page served by this server at `host` (a `Host` header
    /// value) has: the same host and port.
    fn serves(&self, host: &str) -> bool {
        let Some(authority) = authority(host) else {
            return false;
        };
        let default_port = if self.scheme == "https" { 443 } else { 80 };
        authority.host().eq_ignore_ascii_case(&self.host)
            && authority.port_u16().filter(|p| *p != default_port) == self.port
    }
}

/// Whether `host` (a host name or an IP address, IPv6 in brackets or not) is loopback:
/// `localhost`, `127.0.0.0/8` or `::1` (also IPv4-mapped).
fn is_loopback_host(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// `HOST[:PORT]` (from `Host`, a request target or an origin): no user part, a port that is
/// a number if any.
fn authority(text: &str) -> Option<Authority> {
    let parsed = Authority::from_str(text).ok()?;
    let port = parsed.as_str().strip_prefix(parsed.host())?;
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.parse::<u16>().is_ok());
    (port_ok && !parsed.host().is_empty()).then_some(parsed)
}

/// Whether an authority names a loopback host. Anything that does not parse is not.
fn is_loopback_authority(text: &str) -> bool {
    authority(text).is_some_and(|a| is_loopback_host(a.host()))
}

/// The rules a request must meet before any route sees it (see the module's doc).
#[derive(Clone, Debug)]
pub struct HttpPolicy {
    /// No tokens: only loopback hosts and origins.
    loopback_only: bool,
    allowed_origins: Arc<[Origin]>,
    /// Routes (as matched, e.g. `/v1/conversations/{name}/import`) whose unsafe methods take
    /// other content types than [`JSON`].
    body_types: Vec<(&'static str, &'static [&'static str])>,
}

impl HttpPolicy {
    /// The policy of a server without tokens: loopback hosts and loopback origins only.
    pub fn loopback() -> HttpPolicy {
        HttpPolicy {
            loopback_only: true,
            allowed_origins: Arc::new([]),
            body_types: Vec::new(),
        }
    }

    /// The policy of a server that authenticates every request: any host, and origins that
    /// are the server's own or one of `allowed_origins`.
    pub fn authenticated(allowed_origins: Vec<Origin>) -> HttpPolicy {
        HttpPolicy {
            loopback_only: false,
            allowed_origins: allowed_origins.into(),
            body_types: Vec::new(),
        }
    }

    /// Makes the unsafe methods of `route` (an axum path, as routed) take `types` instead of
    /// [`JSON`] alone.
    #[must_use]
    pub fn accept(mut self, route: &'static str, types: &'static [&'static str]) -> HttpPolicy {
        self.body_types.retain(|(r, _)| *r != route);
        self.body_types.push((route, types));
        self
    }

    /// `router` with the policy in front of every route and fallback.
    pub fn apply<S: Clone + Send + Sync + 'static>(self, router: Router<S>) -> Router<S> {
        router.layer(middleware::from_fn_with_state(self, enforce))
    }

    /// The content types an unsafe method on `route` takes.
    fn body_types(&self, route: Option<&str>) -> &[&'static str] {
        route
            .and_then(|route| self.body_types.iter().find(|(r, _)| *r == route))
            .map_or(&[JSON], |(_, types)| types)
    }

    /// The answer to a request whose host, origin or content type the policy does not
    /// allow; `None` for a request it lets through.
    fn refusal(&self, request: &Request) -> Option<Response> {
        let host = if self.loopback_only {
            check_loopback_host(request)
        } else {
            Ok(())
        };
        if let Err(refused) = host.and_then(|()| self.check_origin(request)) {
            return Some(refused.into_response());
        }
        if request.method().is_safe() || is_bodiless_delete(request) {
            return None;
        }
        let route = request
            .extensions()
            .get::<MatchedPath>()
            .map(MatchedPath::as_str);
        content_type_refusal(request, route, self.body_types(route))
    }

    fn check_origin(&self, request: &Request) -> Result<(), AppError> {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok());
        for value in request.headers().get_all(header::ORIGIN) {
            let text = String::from_utf8_lossy(value.as_bytes());
            let origin = text.parse::<Origin>().ok();
            let allowed = match &origin {
                None => false,
                Some(o) if self.loopback_only => o.is_loopback(),
                Some(o) => self.allowed_origins.contains(o) || host.is_some_and(|h| o.serves(h)),
            };
            if !allowed {
                return Err(forbidden(self.origin_refusal(&text, origin.as_ref())));
            }
        }
        Ok(())
    }

    fn origin_refusal(&self, text: &str, origin: Option<&Origin>) -> String {
        if self.loopback_only {
            return format!(
                "Origin {text:?} is not a loopback origin: a server without tokens answers \
                 only its own pages and programs that are not browsers. To call it from other \
                 web pages, start it with --tokens FILE and --allow-origin ORIGIN"
            );
        }
        let remedy = match origin {
            Some(origin) => format!("restart it with --allow-origin {origin} to allow this one"),
            None => "this value is not an origin and cannot be allowed; sandboxed pages and \
                     local files send \"null\""
                .to_string(),
        };
        format!(
            "Origin {text:?} is not allowed: the server answers pages from its own origin and \
             from the origins given with --allow-origin ORIGIN ({remedy})"
        )
    }
}

/// The axum middleware of an [`HttpPolicy`]: use it with
/// `axum::middleware::from_fn_with_state(policy, enforce)`, or [`HttpPolicy::apply`].
/// Every response it lets through or gives says `X-Content-Type-Options: nosniff`: a browser
/// never reads a JSON answer as a page or a script.
pub async fn enforce(State(policy): State<HttpPolicy>, request: Request, next: Next) -> Response {
    let mut response = match policy.refusal(&request) {
        None => next.run(request).await,
        Some(refusal) => {
            let status = refusal.status().as_u16();
            tracing::debug!(method = %request.method(), uri = %request.uri(), status, "refused by the HTTP policy");
            refusal
        }
    };
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn forbidden(message: String) -> AppError {
    AppError::new(StatusCode::FORBIDDEN, "forbidden", message)
}

/// Without tokens: the request must be addressed to a loopback host, in `Host` and in the
/// request target's authority, when either is given. A request without either is not from a
/// browser (browsers always send `Host`).
fn check_loopback_host(request: &Request) -> Result<(), AppError> {
    let hosts = request.headers().get_all(header::HOST).iter();
    let named = hosts
        .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
        .chain(request.uri().authority().map(|a| a.as_str().to_string()));
    for host in named {
        if !is_loopback_authority(&host) {
            return Err(forbidden(format!(
                "Host {host:?} is not a loopback name: a server without tokens answers only \
                 requests addressed to localhost, 127.0.0.1 or [::1] (use the address it \
                 listens on, e.g. http://127.0.0.1:7474/). To serve other host names, start it \
                 with --tokens FILE"
            )));
        }
    }
    Ok(())
}

/// A `DELETE` without a body (the MCP endpoint's end of a session) has no content to type: a
/// page can send a `DELETE` only after a CORS preflight, which always fails here.
fn is_bodiless_delete(request: &Request) -> bool {
    let headers = request.headers();
    request.method() == axum::http::Method::DELETE
        && !headers.contains_key(header::TRANSFER_ENCODING)
        && headers
            .get(header::CONTENT_LENGTH)
            .is_none_or(|length| length.as_bytes() == b"0")
}

/// An unsafe method's `Content-Type` must be one of `types` (its media type; parameters are
/// allowed): 415 with `Accept` listing them otherwise.
fn content_type_refusal(
    request: &Request,
    route: Option<&str>,
    types: &[&'static str],
) -> Option<Response> {
    let given = request
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let essence = given
        .as_deref()
        .map(|v| v.split(';').next().unwrap_or_default().trim());
    if essence.is_some_and(|e| types.iter().any(|t| t.eq_ignore_ascii_case(e))) {
        return None;
    }
    let got = given.map_or_else(|| "none".to_string(), |g| format!("{g:?}"));
    let wanted = types.join(" or ");
    let message = format!(
        "{} {} takes Content-Type: {wanted} (this request has {got}); nothing was changed",
        request.method(),
        route.unwrap_or_else(|| request.uri().path())
    );
    let mut response = AppError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        message,
    )
    .into_response();
    if let Ok(accept) = HeaderValue::from_str(&types.join(", ")) {
        response.headers_mut().insert(header::ACCEPT, accept);
    }
    Some(response)
}

// ------------------------------------------------------------------------------------------
// Connections

/// How many connections, and how long a client may take to send a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// How long a request's headers may take to arrive, counted from when the connection is
    /// ready for a request: a new connection, or one kept alive after a response (so this is
    /// also how long an idle kept-alive connection stays open). The connection is closed
    /// past it [default: [`DEFAULT_HEADER_TIMEOUT`]].
    pub header_timeout: Duration,
    /// How long a request's body may take to arrive once its headers have: past it the
    /// request is answered 408 `timeout` (nothing of it is used) and the connection closed
    /// [default: [`DEFAULT_BODY_TIMEOUT`]].
    pub body_timeout: Duration,
    /// The most connections open at once; more wait in the listener's queue until one
    /// closes. Lowered to half the open-file limit when that is smaller
    /// [default: [`DEFAULT_MAX_CONNECTIONS`]].
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Serves `router` on `listener` within `limits` until `shutdown` completes; then stops
/// accepting, lets each open connection finish the request it is serving, and returns when
/// all are closed.
///
/// # Errors
/// None today: accept errors (a full file table, a connection reset before it was accepted)
/// are logged and retried after a back-off; the result is kept for errors to come.
pub async fn serve_connections(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let permits = Arc::new(tokio::sync::Semaphore::new(connection_cap(
        limits.max_connections,
    )));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut backoff = Backoff::default();
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit,
            () = &mut shutdown => break,
        };
        let Ok(permit) = permit else { break };
        let stream = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match stream {
            Ok((stream, _peer)) => {
                // A stream's head and first event are separate small writes: with Nagle's
                // algorithm the second waits for the client's delayed ACK (~40 ms).
                let _ = stream.set_nodelay(true);
                stream
            }
            Err(e) => {
                backoff.wait(&e).await;
                continue;
            }
        };
        backoff = Backoff::default();
        let service = timed_service(router.clone(), limits.body_timeout);
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection closed");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// The connection's service: `router`, with each request's body under `body_timeout`.
fn timed_service(
    router: Router,
    body_timeout: Duration,
) -> impl hyper::service::Service<
    hyper::Request<Incoming>,
    Response = Response,
    Error = Infallible,
    Future = impl Future<Output = Result<Response, Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let request = request.map(|body| Body::new(TimedBody::new(body, body_timeout)));
        router.clone().oneshot(request)
    })
}

/// The connection cap: `requested`, or half the process's open-file limit if that is lower
/// (the other half stays for the stores' files, the listener and the runtime).
fn connection_cap(requested: usize) -> usize {
    #[cfg(unix)]
    {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        let half = limit.map(|l| usize::try_from(l / 2).unwrap_or(usize::MAX).max(1));
        if let Some(half) = half.filter(|h| *h < requested) {
            tracing::warn!(
                "at most {half} connections at once, not {requested}: the open-file limit is \
                 {} (raise it with `ulimit -n`)",
                half * 2
            );
            return half;
        }
    }
    requested.max(1)
}

/// The wait after a failed accept: a connection that failed before it was accepted is
/// skipped at once; anything else (no file descriptors left, no memory) waits 10 ms, doubling
/// to 1 s while the failures go on, so the loop neither spins nor gives up.
#[derive(Default)]
struct Backoff {
    next: Option<Duration>,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MOST: Duration = Duration::from_secs(1);

    async fn wait(&mut self, error: &std::io::Error) {
        if let Some(wait) = self.delay(error) {
            tracing::error!(error = %error, ?wait, "accept failed; retrying");
            tokio::time::sleep(wait).await;
        }
    }

    /// How long to wait after `error`, if at all.
    fn delay(&mut self, error: &std::io::Error) -> Option<Duration> {
        use std::io::ErrorKind as K;
        if matches!(
            error.kind(),
            K::ConnectionAborted | K::ConnectionReset | K::ConnectionRefused
        ) {
            return None;
        }
        let wait = self.next.unwrap_or(Backoff::FIRST);
        self.next = Some((wait * 2).min(Backoff::MOST));
        Some(wait)
    }
}

/// A request body that fails with [`BodyTimedOut`] when it has not fully arrived by its
/// deadline.
struct TimedBody {
    inner: Incoming,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    limit: Duration,
}

impl TimedBody {
    fn new(inner: Incoming, limit: Duration) -> TimedBody {
        // An empty body has nothing to wait for: no timer.
        let deadline = (!inner.is_end_stream()).then(|| Box::pin(tokio::time::sleep(limit)));
        TimedBody {
            inner,
            deadline,
            limit,
        }
    }
}

impl HttpBody for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn StdError + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let limit = self.limit;
        match self.deadline.as_mut().map(|d| d.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Some(Err(Box::new(BodyTimedOut(limit))))),
            _ => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request body did not arrive within the body timeout.
#[derive(Debug)]
struct BodyTimedOut(Duration);

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request body did not arrive within {} s (the server's body timeout)",
            self.0.as_secs_f64()
        )
    }
}

impl StdError for BodyTimedOut {}

/// 408 `timeout` if reading a request body failed because it did not arrive in time (`error`
/// or one of its sources is the body timeout); `None` for any other failure.
pub fn body_timeout_error(error: &(dyn StdError + 'static)) -> Option<AppError> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(timed_out) = e.downcast_ref::<BodyTimedOut>() {
            return Some(AppError::new(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                format!(
                    "{timed_out}: send it faster, or ask the operator to raise --body-timeout-secs; nothing was written"
                ),
            ));
        }
        next = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn loopback_authorities() {
        for host in [
            "localhost",
            "LOCALHOST:7474",
            "127.0.0.1",
            "127.8.9.1:80",
            "[::1]",
            "[::1]:7474",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert!(is_loopback_authority(host), "{host}");
        }
        for host in [
            "attacker.rebind.example",
            "localhost.attacker.example",
            "10.0.0.1:7474",
            "[::2]",
            "0.0.0.0",
            "user@localhost",
            "localhost:port",
            "",
        ] {
            assert!(!is_loopback_authority(host), "{host}");
        }
    }

    #[test]
    fn accept_errors_back_off_up_to_a_second() {
        let mut backoff = Backoff::default();
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(backoff.delay(&reset), None);
        // EMFILE, as accept(2) reports a full file table.
        let full = std::io::Error::from_raw_os_error(24);
        let waits: Vec<u128> = (0..10)
            .map(|_| backoff.delay(&full).unwrap().as_millis())
            .collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
    }

    #[test]
    fn origins_parse_and_normalize() {
        let o: Origin = "HTTPS://App.Example.com:443/".parse().unwrap();
        assert_eq!(o.to_string(), "https://app.example.com");
        assert_eq!(o, "https://app.example.com".parse().unwrap());
        assert!(o.serves("app.example.com") && o.serves("APP.example.com:443"));
        assert!(!o.serves("app.example.com:8443") && !o.serves("other.example.com"));
        let local: Origin = "http://localhost:7474".parse().unwrap();
        assert!(
            local.is_loopback() && local.serves("localhost:7474") && !local.serves("localhost")
        );
        for bad in [
            "null",
            "app.example.com",
            "ftp://x",
            "https://x/path",
            "https://u@x",
            "https://x?q",
        ] {
            assert!(bad.parse::<Origin>().is_err(), "{bad}");
        }
    }
}
