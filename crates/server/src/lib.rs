//! `ctxlog serve`: the operations of [`ctxlog::Store`] as JSON over HTTP
//! (docs/design.md#i3-http-server), and the web inspector (docs/design.md#i4-inspector).
//!
//! The server is a thin adapter: each handler parses its request into a [`ctxlog::ops`]
//! request, runs the operation on a blocking thread, and sends the response (or an
//! [`AppError`]). Rules live in the operations layer, never here.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use tower::ServiceExt;
//! let dir = tempfile::tempdir().unwrap();
//! let app = ctxlog_server::app(ctxlog_server::AppState::new(&ctxlog_server::Config::new(dir.path())).unwrap());
//! let request = axum::http::Request::get("/healthz").body(axum::body::Body::empty()).unwrap();
//! assert_eq!(app.oneshot(request).await.unwrap().status(), 200);
//! # }
//! ```
//!
//! The contract (paths, statuses, examples) is in `docs/http-api.md` and the OpenAPI
//! document served at `/openapi.json` ([`OPENAPI`]). What a request must look like before any
//! route sees it (loopback hosts and origins, JSON content types) and how long a client may
//! take to send it are the [`policy`] module's, which every HTTP surface shares.

mod auth;
mod error;
mod inspector;
pub mod policy;
mod routes;

use std::collections::HashMap;
use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use ctxlog::{Store, StoreConfig};

pub use auth::{MIN_TOKEN_LEN, Tokens};
pub use error::AppError;
pub use policy::{ConnectionLimits, HttpPolicy, Origin};
pub use routes::{ENDPOINTS, Endpoint, MCP_PATH};

/// The OpenAPI 3 document of the API, served at `/openapi.json`.
pub const OPENAPI: &str = include_str!("openapi.json");

/// The default request body limit: 64 MiB, the CLI's input limit (four times the ledger's
/// default commit cap, so that the ledger names the cap a turn exceeds).
pub const DEFAULT_BODY_LIMIT: usize = 64 << 20;

/// How long a commit waits for the commits queued before it on the same conversation, by
/// default, before it is answered 503 `busy`.
pub const DEFAULT_WRITER_WAIT: Duration = Duration::from_secs(30);

/// How the server is set up: where its stores are, who may call it, its limits.
#[derive(Clone, Debug)]
pub struct Config {
    /// The store directory. Without tokens it is the one store; with tokens each tenant's
    /// store is `<root>/.tenants/<tenant>/` (see [`ctxlog::TENANTS_DIR`]).
    pub root: PathBuf,
    /// Where the stores are instead of `root` (a PostgreSQL database: one schema per tenant)
    /// [default: none: the directory `root`].
    pub location: Option<ctxlog::StoreLocation>,
    /// Bearer tokens mapped to tenants [default: none: no authentication, one store].
    pub tokens: Option<Tokens>,
    /// The largest request body accepted, in bytes; larger ones get 413
    /// [default: [`DEFAULT_BODY_LIMIT`]].
    pub body_limit: usize,
    /// How long a commit waits in its conversation's queue before 503
    /// [default: [`DEFAULT_WRITER_WAIT`]].
    pub writer_wait: Duration,
    /// Redaction and retention, for every tenant's store [default: [`StoreConfig`]'s].
    pub store: StoreConfig,
    /// Web origins whose pages may call the server, besides its own; only with tokens
    /// (see [`HttpPolicy`]) [default: none].
    pub allowed_origins: Vec<Origin>,
    /// The connection cap and the timeouts on reading a request
    /// [default: [`ConnectionLimits::default`]].
    pub connections: ConnectionLimits,
}

impl Config {
    /// A configuration over `root` with the defaults above.
    pub fn new(root: impl AsRef<Path>) -> Config {
        Config {
            root: root.as_ref().to_path_buf(),
            location: None,
            tokens: None,
            body_limit: DEFAULT_BODY_LIMIT,
            writer_wait: DEFAULT_WRITER_WAIT,
            store: StoreConfig::default(),
            allowed_origins: Vec::new(),
            connections: ConnectionLimits::default(),
        }
    }
}

/// The server's shared state: the stores (one, or one per tenant) and the limits. Cheap to
/// clone.
#[derive(Clone, Debug)]
pub struct AppState {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    tokens: Option<Tokens>,
    /// The one store (no tokens) under the name "", or one per tenant.
    stores: HashMap<String, Tenant>,
    body_limit: usize,
    policy: HttpPolicy,
    connections: ConnectionLimits,
    /// Cancelled when the server shuts down: ends the MCP sessions and their event streams.
    mcp_stop: ctxlog_mcp::CancellationToken,
}

/// The store a request runs against, and the directory to keep out of messages.
#[derive(Clone, Debug)]
pub(crate) struct Tenant {
    pub(crate) store: Arc<Store>,
    pub(crate) root: Arc<str>,
}

impl AppState {
    /// Opens the stores `config` names (nothing is created on disk until a first commit).
    ///
    /// # Errors
    /// A store configuration that does not check out (a redaction pattern that does not
    /// compile, an invalid retention rule): no store falls back to the defaults. Allowed
    /// origins without tokens: a web page from another origin must never drive a server that
    /// does not authenticate.
    pub fn new(config: &Config) -> ctxlog::Result<AppState> {
        let policy = http_policy(config)?;
        let open = |location: ctxlog::StoreLocation| {
            let store = ctxlog::StoreBuilder::new(location.clone())
                .config(config.store.clone())
                .writer_wait(Some(config.writer_wait))
                .build()?;
            Ok::<_, ctxlog::Error>(Tenant {
                store: Arc::new(store),
                root: location.display().into(),
            })
        };
        let location = config
            .location
            .clone()
            .unwrap_or_else(|| ctxlog::StoreLocation::dir(&config.root));
        let stores = match &config.tokens {
            None => HashMap::from([(String::new(), open(location)?)]),
            Some(tokens) => {
                for tenant in location.upgrade_tenant_layout(&tokens.tenants())? {
                    tracing::info!(tenant, "tenant store moved to the current layout");
                }
                tokens
                    .tenants()
                    .into_iter()
                    .map(|t| Ok((t.to_string(), open(location.for_tenant(t))?)))
                    .collect::<ctxlog::Result<_>>()?
            }
        };
        Ok(AppState {
            inner: Arc::new(Inner {
                tokens: config.tokens.clone(),
                stores,
                body_limit: config.body_limit,
                policy,
                connections: config.connections,
                mcp_stop: ctxlog_mcp::CancellationToken::new(),
            }),
        })
    }

    /// The tenant of a request's `Authorization` header value (none when the server has no
    /// tokens), or 401.
    pub(crate) fn tenant(&self, authorization: Option<&[u8]>) -> Result<Tenant, AppError> {
        let name = match &self.inner.tokens {
            None => "",
            Some(tokens) => {
                let header = authorization.ok_or_else(|| {
                    AppError::unauthorized("missing `Authorization: Bearer TOKEN` header")
                })?;
                let token = auth::bearer_token(header).ok_or_else(|| {
                    AppError::unauthorized("expected `Authorization: Bearer TOKEN`")
                })?;
                tokens
                    .tenant(token.trim_ascii())
                    .ok_or_else(|| AppError::unauthorized("unknown token"))?
            }
        };
        self.inner
            .stores
            .get(name)
            .cloned()
            .ok_or_else(|| AppError::internal(&"a token's tenant has no store"))
    }
}

/// The [`HttpPolicy`] of a configuration: loopback only without tokens.
fn http_policy(config: &Config) -> ctxlog::Result<HttpPolicy> {
    match (&config.tokens, config.allowed_origins.as_slice()) {
        (Some(_), origins) => Ok(HttpPolicy::authenticated(origins.to_vec())),
        (None, []) => Ok(HttpPolicy::loopback()),
        (None, origins) => {
            let origins: Vec<String> = origins.iter().map(Origin::to_string).collect();
            Err(ctxlog::Error::InvalidRequest {
                reason: format!(
                    "allowed origins ({}) need tokens: without tokens only pages on loopback \
                     may call the server (give --tokens FILE, or drop --allow-origin)",
                    origins.join(", ")
                ),
            })
        }
    }
}

/// The application: every route of the API and the inspector over `state`, under the
/// server's [`HttpPolicy`].
pub fn app(state: AppState) -> Router {
    let body_limit = state.inner.body_limit;
    routes::router(state).layer(DefaultBodyLimit::max(body_limit))
}

/// Serves `app(state)` on `listener` within the configuration's [`ConnectionLimits`]
/// ([`policy::serve_connections`]) until `shutdown` completes, then stops accepting and
/// finishes the requests in flight (a commit that started is completed and answered).
///
/// # Errors
/// Accepting connections failed.
pub async fn run(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = state.inner.connections;
    let mcp_stop = state.inner.mcp_stop.clone();
    let shutdown = async move {
        shutdown.await;
        // Open MCP event streams would otherwise hold their connections until the grace ends.
        mcp_stop.cancel();
    };
    policy::serve_connections(listener, app(state), limits, shutdown).await
}

/// What `ctxlog serve` was asked for.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Where to listen: `HOST:PORT`, the host an IP address or a name (resolved; the first
    /// address that can be bound is used).
    pub addr: String,
    /// The store: a directory or a database.
    pub location: ctxlog::StoreLocation,
    /// A tokens file; without one, `CTXLOG_TOKENS` is read (see [`Tokens`]).
    pub tokens_file: Option<PathBuf>,
    /// The request body limit in bytes.
    pub body_limit: usize,
    /// The commit queue wait.
    pub writer_wait: Duration,
    /// Redaction and retention for every store served.
    pub config: StoreConfig,
    /// Web origins allowed besides the server's own (with tokens only).
    pub allowed_origins: Vec<Origin>,
    /// The connection cap and the timeouts on reading a request.
    pub connections: ConnectionLimits,
}

/// How long shutdown waits for open connections, and then for blocking work (a commit whose
/// client went away), to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// `ctxlog serve`: logs to stderr, listens on `options.addr` and serves until SIGTERM or
/// Ctrl-C, then finishes the requests in flight.
///
/// # Errors
/// Authentication is missing for an address beyond loopback, or allowed origins are given
/// without it; the tokens cannot be read; the address cannot be resolved or bound.
pub fn serve(options: ServeOptions) -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    let tokens = match (&options.tokens_file, std::env::var("CTXLOG_TOKENS")) {
        (Some(path), _) => Some(Tokens::from_file(path)?),
        (None, Ok(text)) => Some(Tokens::parse(&text).context("CTXLOG_TOKENS")?),
        (None, Err(_)) => None,
    };
    let addrs = listen_addrs(&options.addr, tokens.is_some())?;
    let config = Config {
        root: PathBuf::new(),
        location: Some(options.location.clone()),
        tokens,
        body_limit: options.body_limit,
        writer_wait: options.writer_wait,
        store: options.config.clone(),
        allowed_origins: options.allowed_origins.clone(),
        connections: options.connections,
    };
    let state = AppState::new(&config).context("the server configuration")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let tenants = config.tokens.as_ref().map_or(0, |t| t.tenants().len());
    let result = runtime.block_on(serve_until_signal(&options.addr, &addrs, state, tenants));
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    result
}

/// Binds the first of `addrs` that can be, serves until SIGTERM or Ctrl-C, then finishes the
/// requests in flight (for at most [`SHUTDOWN_GRACE`]).
async fn serve_until_signal(
    given: &str,
    addrs: &[SocketAddr],
    state: AppState,
    tenants: usize,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addrs)
        .await
        .with_context(|| format!("cannot listen on {given}"))?;
    let addr = listener.local_addr()?;
    tracing::info!(
        %addr,
        tenants,
        "ctxlog serve: listening on http://{addr}/ (inspector at /, API under /v1)"
    );
    let (stopping, mut stopping_rx) = tokio::sync::watch::channel(false);
    let shutdown = async move {
        shutdown_signal().await;
        let _ = stopping.send(true);
    };
    // Connections that stay open past the grace do not hold the process: blocking work that
    // started still completes (the runtime's shutdown waits for it).
    let grace = async move {
        let _ = stopping_rx.wait_for(|stopping| *stopping).await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        served = run(listener, state, shutdown) => served?,
        () = grace => tracing::warn!(
            "ctxlog serve: connections still open {}s after the signal; closing them",
            SHUTDOWN_GRACE.as_secs()
        ),
    }
    tracing::info!("ctxlog serve: stopped");
    Ok(())
}

/// The addresses `addr` (`HOST:PORT`) resolves to, every one of them loopback unless the
/// server authenticates ([`check_exposure`]).
///
/// # Errors
/// `addr` is not `HOST:PORT`, does not resolve, or resolves to an address beyond loopback
/// without authentication.
pub fn listen_addrs(addr: &str, authenticated: bool) -> anyhow::Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .with_context(|| {
            format!(
                "cannot resolve --addr {addr:?}: give HOST:PORT, e.g. 127.0.0.1:7474 or \
                 localhost:7474"
            )
        })?
        .collect();
    if addrs.is_empty() {
        anyhow::bail!("--addr {addr:?} resolves to no address");
    }
    let named = addr.parse::<SocketAddr>().is_err();
    for resolved in &addrs {
        let checked = check_exposure(*resolved, authenticated);
        if named {
            checked.with_context(|| format!("--addr {addr} resolves to {resolved}"))?;
        } else {
            checked?;
        }
    }
    Ok(addrs)
}

/// Refuses to serve beyond loopback without authentication (docs/design.md#i3-http-server).
///
/// # Errors
/// `addr` is not a loopback address and `authenticated` is false.
pub fn check_exposure(addr: SocketAddr, authenticated: bool) -> anyhow::Result<()> {
    if !authenticated && !addr.ip().is_loopback() {
        anyhow::bail!(
            "refusing to listen on {addr} without authentication: give --tokens FILE (or \
             CTXLOG_TOKENS) with `TOKEN TENANT` lines, or listen on 127.0.0.1"
        );
    }
    Ok(())
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down; finishing requests in flight");
}
