//! ctxlog over the Model Context Protocol (docs/design.md#i7-mcp): the archive's read tools
//! for agent hosts, over stdio (`ctxlog mcp`) and over streamable HTTP (the `/mcp` route of
//! `ctxlog serve`, which mounts [`http_service`] under its tokens, tenants and HTTP policy).
//!
//! The protocol is the official Rust SDK's (`rmcp`): the `initialize` handshake of the
//! 2024-11-05 to 2025-11-25 revisions and the stateless `server/discover` of 2026-07-28;
//! unknown methods get a JSON-RPC error. This crate adds the tools ([`TOOLS_JSON`]: names,
//! descriptions, input and output JSON Schemas) and their calls, each one operation of
//! [`ctxlog::Store`], so a tool answers what the command line answers for the same store:
//!
//! | tool | operation | the CLI's |
//! |---|---|---|
//! | `list_conversations` | [`Store::list`] | `ctxlog list --json` |
//! | `recall` | [`Store::recall`] | `ctxlog recall CONV [QUERY] [--seq N] [--offset K] [--limit L]` |
//! | `read` | [`Store::log`] over [`LogRequest::range`] | `ctxlog log CONV --json` |
//!
//! Every tool is read-only. A request the store refuses (an unknown conversation, a bad name,
//! a range over the cap, a damaged ledger) is a tool error: `isError: true` and one text block
//! `CLASS: MESSAGE` (the class is [`ctxlog::ErrorClass::name`]), with no data.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let dir = tempfile::tempdir().unwrap();
//! let store = std::sync::Arc::new(ctxlog::Store::open(dir.path()).unwrap());
//! let server = ctxlog_mcp::CtxlogMcp::for_store(store);
//! let answer = server.call("list_conversations", serde_json::Map::new()).await;
//! assert_eq!(answer.is_error, Some(false));
//! assert_eq!(answer.structured_content.unwrap(), serde_json::json!({"conversations": []}));
//! # }
//! ```

use std::sync::{Arc, LazyLock};

use ctxlog::Store;
use ctxlog::ops::{ListRequest, LogRequest, RecallRequest};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::Value;
pub use tokio_util::sync::CancellationToken;

/// The tools, as `tools/list` sends them: name, title, description, `inputSchema`,
/// `outputSchema` and annotations (all read-only), for each of `list_conversations`,
/// `recall` and `read`.
///
/// # Format
/// A JSON array of MCP `Tool` objects. Each call's `structuredContent` is the operation's
/// response as the CLI prints it with `--json` (and validates against the `outputSchema`);
/// its one text block is the same JSON.
pub const TOOLS_JSON: &str = include_str!("tools.json");

/// What the server tells a host about itself in `initialize` and `server/discover`.
const INSTRUCTIONS: &str = "ctxlog keeps every turn of past conversations, exactly. \
`list_conversations` names them; `recall` searches one by plain words (or pages through one \
event by `seq`) and returns pages with their provenance (seq, kind, tool, page); `read` returns \
a range of events by seq. Everything is read-only.";

static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
    // The file is part of the crate and a test reads it: it always parses.
    serde_json::from_str(TOOLS_JSON).unwrap_or_default()
});

/// Where a call reads: a store, and the directory to keep out of messages (over HTTP
/// clients never learn server paths; `None` keeps messages as they are).
#[derive(Clone, Debug)]
pub struct Source {
    /// The store the tools read.
    pub store: Arc<Store>,
    /// Replaced by `<store>` in error messages, when given.
    pub root: Option<Arc<str>>,
}

/// The MCP server: one store (stdio), or the store each HTTP request carries (the request's
/// tenant, put in its extensions as a [`Source`] by the server's authentication).
#[derive(Clone, Debug)]
pub struct CtxlogMcp {
    source: Option<Source>,
}

impl CtxlogMcp {
    /// A server over one store.
    pub fn for_store(store: Arc<Store>) -> CtxlogMcp {
        CtxlogMcp {
            source: Some(Source { store, root: None }),
        }
    }

    /// A server that reads the [`Source`] of each HTTP request (see [`http_service`]).
    pub fn per_request() -> CtxlogMcp {
        CtxlogMcp { source: None }
    }

    /// Calls a tool on this server's store (a server built by [`CtxlogMcp::for_store`]);
    /// what `tools/call` answers.
    pub async fn call(&self, name: &str, arguments: JsonObject) -> CallToolResult {
        match &self.source {
            Some(source) => call_tool(source.clone(), name, arguments).await,
            None => tool_error("internal: this server reads the store of each HTTP request"),
        }
    }

    fn source(&self, context: &RequestContext<RoleServer>) -> Option<Source> {
        self.source.clone().or_else(|| {
            context
                .extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Source>())
                .cloned()
        })
    }
}

impl ServerHandler for CtxlogMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("ctxlog", env!("CARGO_PKG_VERSION"))
                    .with_title("ctxlog: the conversation archive"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(TOOLS.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        TOOLS.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.get_tool(&request.name).is_none() {
            let known: Vec<&str> = TOOLS.iter().map(|t| t.name.as_ref()).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}: the tools are {}",
                    request.name,
                    known.join(", ")
                ),
                None,
            ));
        }
        let Some(source) = self.source(&context) else {
            return Err(ErrorData::internal_error(
                "no store for this request (the server's authentication did not run)",
                None,
            ));
        };
        let arguments = request.arguments.unwrap_or_default();
        Ok(call_tool(source, &request.name, arguments).await.into())
    }
}

/// The arguments of `read`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArguments {
    conversation: String,
    from_seq: u64,
    to_seq: u64,
}

/// The arguments of `list_conversations`: none.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArguments {}

/// Runs a tool's operation on a blocking thread (the store does file and SQLite work) and
/// turns its response, or its error, into the tool's result.
async fn call_tool(source: Source, name: &str, arguments: JsonObject) -> CallToolResult {
    let name = name.to_string();
    let store = source.store.clone();
    let answer = tokio::task::spawn_blocking(move || run(&store, &name, arguments)).await;
    match answer {
        Ok(Ok(value)) => {
            let text = value.to_string();
            let mut result = CallToolResult::structured(value);
            result.content = vec![ContentBlock::text(text)];
            result
        }
        Ok(Err(e)) => {
            let mut message = format!("{}: {e}", e.class().name());
            if let Some(root) = source.root.as_deref().filter(|r| !r.is_empty()) {
                message = message.replace(root, "<store>");
            }
            tool_error(message)
        }
        Err(join) => {
            tracing::error!(error = %join, "an MCP tool call failed");
            tool_error("internal: the tool call failed; the server's log has the cause")
        }
    }
}

/// One tool's operation: its arguments parsed into the operation's request (the rules on
/// them are the operations layer's), the response as JSON.
fn run(store: &Store, name: &str, arguments: JsonObject) -> ctxlog::Result<Value> {
    let value = match name {
        "list_conversations" => {
            let NoArguments {} = ctxlog::ops::request_from_fields(None, arguments)?;
            serde_json::to_value(store.list(&ListRequest {})?)
        }
        "recall" => {
            let request: RecallRequest = ctxlog::ops::request_from_fields(None, arguments)?;
            serde_json::to_value(store.recall(&request)?)
        }
        "read" => {
            let args: ReadArguments = ctxlog::ops::request_from_fields(None, arguments)?;
            let request = LogRequest::range(args.conversation, args.from_seq, args.to_seq)?;
            serde_json::to_value(store.log(&request)?)
        }
        other => {
            return Err(ctxlog::Error::InvalidRequest {
                reason: format!("unknown tool {other:?}"),
            });
        }
    };
    value.map_err(|e| ctxlog::Error::Internal {
        reason: format!("a response did not serialize: {e}"),
    })
}

fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// `ctxlog mcp`: serves MCP on `store` over this process's stdin and stdout until the client
/// closes stdin. Stdout carries protocol messages only; warnings and errors are logged to
/// stderr.
///
/// # Errors
/// The async runtime cannot start, or the transport failed.
pub fn run_stdio(store: Store) -> std::io::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .with_target(false)
        .with_ansi(false)
        .try_init();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(serve_stdio(Arc::new(store)))
}

/// Serves MCP on `store` over this process's stdin and stdout until the client closes stdin
/// (see [`run_stdio`], which also starts the runtime and the log).
///
/// # Errors
/// The transport failed before or during the session.
pub async fn serve_stdio(store: Arc<Store>) -> std::io::Result<()> {
    let running = CtxlogMcp::for_store(store)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(std::io::Error::other)?;
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}

/// The streamable HTTP endpoint (`POST`, `GET` and `DELETE` on one path, sessions for the
/// `initialize` revisions, stateless requests for 2026-07-28), as a tower service to mount on
/// a router. Each request must carry its [`Source`] in its extensions (the server's
/// authentication puts the tenant's there); who may call, with which `Host` and `Origin`, is
/// the mounting server's HTTP policy, so the SDK's own host check is off. Cancelling `stop`
/// ends every session and open event stream (the server's shutdown).
pub fn http_service(
    stop: CancellationToken,
) -> StreamableHttpService<CtxlogMcp, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_cancellation_token(stop);
    StreamableHttpService::new(
        || Ok(CtxlogMcp::per_request()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn the_tool_table_parses_and_every_tool_is_read_only() {
        let tools: Vec<Tool> = serde_json::from_str(TOOLS_JSON).unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["list_conversations", "recall", "read"]);
        for tool in &tools {
            let annotations = tool.annotations.as_ref().unwrap();
            assert_eq!(annotations.read_only_hint, Some(true), "{}", tool.name);
            assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
            assert_eq!(tool.output_schema.as_ref().unwrap()["type"], "object");
        }
        assert_eq!(TOOLS.len(), 3);
    }
}
