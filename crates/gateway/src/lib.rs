//! `ctxlog gateway`: a drop-in endpoint for applications built on a provider SDK
//! (docs/design.md#i6-gateway, docs/gateway.md). An application changes the SDK's base URL;
//! the gateway stores each conversation's new messages in the ledger, sends the provider
//! ctxlog's projection of the conversation within the model's window, relays the reply (a
//! stream event by event, as it arrives) and commits it.
//!
//! The gateway is a front end: each call is [`ctxlog::Store::prepare_call`] before the
//! provider and [`ctxlog::Store::commit_reply`] after it ([`ctxlog::call`] has the rules).
//! Requests pass the server's [`HttpPolicy`] (loopback hosts and origins without tokens, JSON
//! bodies) and its accept loop ([`ctxlog_server::policy::serve_connections`]).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use tower::ServiceExt;
//! let dir = tempfile::tempdir().unwrap();
//! let config = ctxlog_gateway::Config::new(ctxlog::StoreLocation::dir(dir.path()));
//! let app = ctxlog_gateway::app(ctxlog_gateway::Gateway::new(config).unwrap());
//! let request = axum::http::Request::get("/healthz").body(axum::body::Body::empty()).unwrap();
//! assert_eq!(app.oneshot(request).await.unwrap().status(), 200);
//! # }
//! ```

mod metrics;
mod provider;
mod relay;
mod tenant;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use ctxlog::{StoreConfig, StoreLocation};
use ctxlog_server::{ConnectionLimits, HttpPolicy, Tokens};

pub use provider::{Assembler, Provider};
pub use tenant::SECRET_NAME;

/// The OpenAI API base URL, the default `--openai-upstream`.
pub const OPENAI_UPSTREAM: &str = "https://api.openai.com/v1";
/// The Anthropic API base URL, the default `--anthropic-upstream`.
pub const ANTHROPIC_UPSTREAM: &str = "https://api.anthropic.com";
/// How long connecting to the provider may take, by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the provider may take to answer (the response's headers; for a reply that is
/// not streamed, the whole of it), and, in a stream, between two pieces, by default:
/// reasoning models can think for minutes before a first byte.
pub const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(600);
/// How many recall calls a request's answer may make, by default, with `--recall-tool`.
pub const DEFAULT_RECALL_CALLS: usize = 3;
/// The header that names the conversation, in requests and responses.
pub const CONVERSATION_HEADER: &str = "x-ctxlog-conversation";
/// The response header with the last seq committed for the call.
pub const SEQ_HEADER: &str = "x-ctxlog-seq";
/// The request header that overrides the window, in tokens.
pub const MAX_TOKENS_HEADER: &str = "x-ctxlog-max-tokens";
/// The request header with the gateway's own token (with `--tokens`).
pub const TOKEN_HEADER: &str = "x-ctxlog-token";

/// How the gateway is set up.
#[derive(Clone, Debug)]
pub struct Config {
    /// The store: each API key's conversations are a tenant store under it.
    pub location: StoreLocation,
    /// Redaction and retention for every tenant's store [default: [`StoreConfig`]'s].
    pub store: StoreConfig,
    /// Gateway tokens mapped to tenants; with them every request needs `X-Ctxlog-Token`
    /// [default: none: loopback only].
    pub tokens: Option<Tokens>,
    /// The OpenAI base URL [default: [`OPENAI_UPSTREAM`]].
    pub openai_upstream: String,
    /// The Anthropic base URL [default: [`ANTHROPIC_UPSTREAM`]].
    pub anthropic_upstream: String,
    /// [default: [`DEFAULT_CONNECT_TIMEOUT`]]
    pub connect_timeout: Duration,
    /// [default: [`DEFAULT_UPSTREAM_TIMEOUT`]]
    pub upstream_timeout: Duration,
    /// The largest request body, in bytes [default: [`ctxlog_server::DEFAULT_BODY_LIMIT`]].
    pub body_limit: usize,
    /// The connection cap and the timeouts on reading a request.
    pub connections: ConnectionLimits,
    /// Write an access log line per request on stdout, as JSON
    /// ([default: false]: no access log).
    pub log_json: bool,
    /// Offer ctxlog's recall tool to the model on every call and answer its recall calls in
    /// the gateway, at most this many per request [default: none: the tool is not offered].
    pub recall_calls: Option<usize>,
    /// How many bytes of recognition state each tenant's store keeps in memory
    /// ([`ctxlog::StoreBuilder::recognition_cache`]) [default:
    /// [`ctxlog::DEFAULT_RECOGNITION_CACHE`]].
    pub recognition_cache: usize,
    /// Context windows by model-name prefix, over the model table's and over the store
    /// configuration's (`[gateway.model_windows]` of [`Config::store`], which they replace
    /// for the same prefix); the longest prefix of a request's model wins;
    /// `X-Ctxlog-Max-Tokens` over all [default: none].
    pub model_windows: Vec<(String, u64)>,
}

impl Config {
    /// A configuration over `location` with the defaults above.
    pub fn new(location: StoreLocation) -> Config {
        Config {
            location,
            store: StoreConfig::default(),
            tokens: None,
            openai_upstream: OPENAI_UPSTREAM.into(),
            anthropic_upstream: ANTHROPIC_UPSTREAM.into(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            upstream_timeout: DEFAULT_UPSTREAM_TIMEOUT,
            body_limit: ctxlog_server::DEFAULT_BODY_LIMIT,
            connections: ConnectionLimits::default(),
            log_json: false,
            recall_calls: None,
            recognition_cache: ctxlog::DEFAULT_RECOGNITION_CACHE,
            model_windows: Vec::new(),
        }
    }
}

/// The gateway's shared state. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Gateway {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    tenants: tenant::Tenants,
    tokens: Option<Tokens>,
    client: reqwest::Client,
    openai_upstream: String,
    anthropic_upstream: String,
    upstream_timeout: Duration,
    body_limit: usize,
    policy: HttpPolicy,
    metrics: metrics::Metrics,
    log_json: bool,
    recall_calls: Option<usize>,
    model_windows: Vec<(String, u64)>,
}

impl Gateway {
    /// The gateway of `config`: reads (or creates) the store's secret ([`SECRET_NAME`]).
    ///
    /// # Errors
    /// The secret cannot be read or created (an unreachable database among others); the
    /// HTTP client cannot be built.
    pub fn new(config: Config) -> anyhow::Result<Gateway> {
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .context("cannot build the HTTP client")?;
        let policy = match &config.tokens {
            Some(_) => HttpPolicy::authenticated(Vec::new()),
            None => HttpPolicy::loopback(),
        };
        let mut model_windows = config.model_windows.clone();
        let configured = config.store.gateway.model_windows.iter();
        for (prefix, tokens) in configured {
            if !model_windows.iter().any(|(given, _)| given == prefix) {
                model_windows.push((prefix.clone(), *tokens));
            }
        }
        Ok(Gateway {
            inner: Arc::new(Inner {
                tenants: tenant::Tenants::open(
                    config.location,
                    config.store,
                    config.recognition_cache,
                )?,
                tokens: config.tokens,
                client,
                openai_upstream: config.openai_upstream.trim_end_matches('/').to_owned(),
                anthropic_upstream: config.anthropic_upstream.trim_end_matches('/').to_owned(),
                upstream_timeout: config.upstream_timeout,
                body_limit: config.body_limit,
                policy,
                metrics: metrics::Metrics::default(),
                log_json: config.log_json,
                recall_calls: config.recall_calls,
                model_windows,
            }),
        })
    }

    fn upstream_url(&self, provider: Provider) -> String {
        let base = match provider {
            Provider::OpenAiChat | Provider::OpenAiResponses => &self.inner.openai_upstream,
            Provider::Anthropic => &self.inner.anthropic_upstream,
        };
        format!("{base}{}", provider.upstream_path())
    }
}

/// The gateway's routes under its [`HttpPolicy`].
pub fn app(gateway: Gateway) -> Router {
    let limit = gateway.inner.body_limit;
    let policy = gateway.inner.policy.clone();
    let router = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics_text))
        .route("/v1/chat/completions", post(relay::openai_chat))
        .route("/v1/responses", post(relay::openai_responses))
        .route("/v1/messages", post(relay::anthropic))
        .with_state(gateway)
        .layer(DefaultBodyLimit::max(limit));
    policy.apply(router)
}

/// `GET /metrics`: the Prometheus text format (see the metrics module's format).
async fn metrics_text(
    axum::extract::State(gateway): axum::extract::State<Gateway>,
) -> impl axum::response::IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        gateway.inner.metrics.render(),
    )
}

/// What `ctxlog gateway` was asked for.
#[derive(Clone, Debug)]
pub struct GatewayOptions {
    /// Where to listen: `HOST:PORT`.
    pub addr: String,
    /// A tokens file; without one, `CTXLOG_TOKENS` is read.
    pub tokens_file: Option<PathBuf>,
    /// Everything else.
    pub config: Config,
}

/// `ctxlog gateway`: logs to stderr, listens on `options.addr` and relays until SIGTERM or
/// Ctrl-C.
///
/// # Errors
/// An address beyond loopback without tokens; the tokens cannot be read; the address cannot
/// be bound; the gateway cannot start ([`Gateway::new`]).
pub fn serve(options: GatewayOptions) -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    let mut config = options.config;
    config.tokens = match (&options.tokens_file, std::env::var("CTXLOG_TOKENS")) {
        (Some(path), _) => Some(Tokens::from_file(path)?),
        (None, Ok(text)) => Some(Tokens::parse(&text).context("CTXLOG_TOKENS")?),
        (None, Err(_)) => None,
    };
    let addrs = ctxlog_server::listen_addrs(&options.addr, config.tokens.is_some())?;
    let limits = config.connections;
    let gateway = Gateway::new(config).context("the gateway configuration")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addrs.as_slice())
            .await
            .with_context(|| format!("cannot listen on {}", options.addr))?;
        let addr: SocketAddr = listener.local_addr()?;
        tracing::info!(
            %addr,
            "ctxlog gateway: listening on http://{addr}/ (OpenAI base URL http://{addr}/v1, \
             Anthropic base URL http://{addr})"
        );
        ctxlog_server::policy::serve_connections(
            listener,
            app(gateway),
            limits,
            ctxlog_server::shutdown_signal(),
        )
        .await
        .context("serving")
    })?;
    runtime.shutdown_timeout(Duration::from_secs(30));
    tracing::info!("ctxlog gateway: stopped");
    Ok(())
}
