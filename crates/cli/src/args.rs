//! Command-line arguments (clap). Every flag's help states its default.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use ctxlog::{Policy, Tokenizer, WireFormat};

/// ctxlog: a durable conversation ledger that builds the exact LLM request body for a budget.
///
/// Every confirmed turn is kept in a checksummed ledger under --root. For each model call,
/// `ctxlog project` writes the exact request body (OpenAI chat or Anthropic messages JSON)
/// that fits a byte and/or token budget: the system prompt and current input first, then as
/// many whole recent turns as fit. Nothing left out is lost: `ctxlog recall` finds it again.
#[derive(Debug, Parser)]
#[command(name = "ctxlog", version, about, long_about, after_help = EXAMPLES)]
pub struct Cli {
    /// The store directory [default: $CTXLOG_ROOT, else ./.ctxlog]
    #[arg(
        long,
        global = true,
        env = "CTXLOG_ROOT",
        default_value = ".ctxlog",
        hide_default_value = true
    )]
    pub root: PathBuf,

    /// The store: a directory, or a PostgreSQL database `postgres://user@host:port/db`
    /// (docs/postgres.md); overrides --root [default: $CTXLOG_STORE, else --root]
    #[arg(long, global = true, env = "CTXLOG_STORE", value_name = "URL")]
    pub store: Option<String>,

    /// Print errors (and, where a command has one, its result) as JSON.
    #[arg(long, global = true)]
    pub json: bool,

    /// Writers (commit, erase) wait up to SECS for another process's writer to let go,
    /// instead of exiting 4 at once; still exit 4 once the wait is over [default: no wait]
    #[arg(long, global = true, value_name = "SECS", value_parser = wait_secs)]
    pub wait: Option<std::time::Duration>,

    /// The store's configuration file (redaction and retention, docs/lifecycle.md)
    /// [default: <root>/ctxlog.toml when it exists, else the defaults]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub redaction: RedactionArgs,

    #[command(subcommand)]
    pub command: Command,
}

/// Redaction flags: they override the configuration file's `[redaction]` table.
#[derive(Debug, Args)]
pub struct RedactionArgs {
    /// Do not redact the built-in key shapes (OpenAI, Anthropic, AWS, GitHub, PEM, …)
    /// [default: redacted]
    #[arg(long, global = true)]
    pub no_redact_builtin: bool,
    /// Do not redact the values of environment variables named *KEY*, *TOKEN*, *SECRET*,
    /// *PASSWORD* [default: redacted]
    #[arg(long, global = true)]
    pub no_redact_env: bool,
    /// Also redact the value of this environment variable (repeatable)
    #[arg(long, global = true, value_name = "NAME")]
    pub redact_var: Vec<String>,
    /// Also redact matches of REGEX, marked [redacted:NAME] (repeatable)
    #[arg(long, global = true, value_name = "NAME=REGEX")]
    pub redact_pattern: Vec<ctxlog::redact::PatternConfig>,
}

impl RedactionArgs {
    /// The flags as overrides of the configuration: the command line can only switch a
    /// default off, and add variables and patterns.
    pub fn overrides(&self) -> ctxlog::redact::RedactionOverrides {
        ctxlog::redact::RedactionOverrides {
            builtin: self.no_redact_builtin.then_some(false),
            env: self.no_redact_env.then_some(false),
            env_vars: self.redact_var.clone(),
            patterns: self.redact_pattern.clone(),
        }
    }
}

const EXAMPLES: &str = "\
Examples:
  ctxlog demo
  echo '{\"user\":\"My code is ZX-81\",\"assistant\":\"Noted.\"}' | ctxlog commit chat1
  ctxlog log chat1
  ctxlog project chat1 --input 'What is my code?' --max-bytes 4000 > body.json
  ctxlog verify chat1

Exit codes: 0 ok, 1 error, 2 usage, 3 mandatory input over budget, 4 locked by another
writer, 5 corruption detected, 6 commit id conflict.";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Commit one turn (or part of one) from JSON, atomically and durably.
    ///
    /// Accepts {"user":"…","assistant":"…"} or the full form
    /// {"id":"…","events":[{"kind":"user","text":"…"},{"kind":"tool_call","call_id":"c1","tool":"shell","arguments":{}},
    /// {"kind":"tool_result","call_id":"c1","tool":"shell","status":"ok","text":"…"},{"kind":"assistant","text":"…"}]}.
    /// An agent may commit the user message, each tool call, each result and the reply one by
    /// one: a tool_result must answer a tool_call of the same turn (and name the same tool).
    /// A standing instruction or fact is a note: {"kind":"note","text":"…","pinned":true}
    /// (pinned notes go into every projection; "supersedes":SEQ replaces an earlier note).
    /// The system prompt is not committed: give it with each request (`project --system`). Prints the seqs written as
    /// JSON: {"first_seq":N,"last_seq":N,"replayed":false}.
    Commit(CommitArgs),
    /// List a conversation's events (seq, time, kind, text).
    Log(LogArgs),
    /// Check every record's checksum and the sidecar index; writes nothing.
    ///
    /// Exits 5 naming the offset and seq of a corrupt record; reports a torn tail that the next
    /// writer will cut.
    Verify(ConvArg),
    /// Write the exact request body for one model call to stdout (no trailing newline).
    ///
    /// The system prompt and --input are mandatory; then whole turns are added newest first
    /// while they fit --max-bytes and/or --max-tokens (minus --reserve-output). If the
    /// mandatory part alone does not fit, exits 3 and says how much it needs. Never writes the
    /// ledger. A conversation with no history yet (the first call of a new chat) projects the
    /// mandatory input alone.
    Project(ProjectArgs),
    /// Print the bytes and tokens of a request body: {"bytes":N,"tokens":N,"tokenizer":"…"}.
    Count(CountArgs),
    /// Search a conversation's history (JSON out): ranked pages with provenance.
    ///
    /// The query is taken literally (quotes, operators and SQL are just words). Without a
    /// query, lists newest first. --seq pages through one event in order.
    Recall(RecallArgs),
    /// List the conversations in the store, newest activity first: name, events, bytes,
    /// last activity (with --json: {"conversations":[{"name","events","bytes","last_activity_ms"}]}).
    /// Events counts the live ones: erased and lost events and ctxlog's own markers
    /// (tombstones, loss records, import markers) are not counted.
    List,
    /// Write every event of a conversation to stdout as JSON Lines (see docs/export-import.md).
    ///
    /// One object per line: {"seq":N,"ts":"RFC 3339","kind":…, …the event's fields}; tool
    /// outputs stored as artifacts are inlined; erased ranges appear as their tombstones.
    /// `ctxlog import NEW FILE` rebuilds the conversation from it.
    ///
    /// With --salvage (a damaged conversation): every intact record in order, each damaged
    /// range as a {"damaged":{…}} line where it lies; writes nothing to the store.
    Export(ExportArgs),
    /// Import history: a ctxlog export, or --from openai-chat | anthropic-messages |
    /// conversation-dataset (see docs/export-import.md).
    ///
    /// Usage: ctxlog import [CONV] FILE. Every record is checked before anything is written (a
    /// bad one is named by line or index, exit 1, nothing written); original times are kept
    /// ("ts", a dataset's session dates). Re-running the same import writes nothing. A
    /// conversation-dataset file creates one conversation per sample, named after its id
    /// (CONV-<id> when CONV is given). Prints {"conversations":[…],"events_written":N,"notes":[…]};
    /// shows a progress bar on stderr when it is a terminal.
    Import(ImportArgs),
    /// A guided tour on the store at --root: commit, project at several budgets, recall.
    Demo,
    /// Delete and rebuild the conversation's recall index from the ledger (repairs a damaged one).
    Reindex(ConvArg),
    /// Repair a damaged conversation (read `ctxlog verify CONV` first): a dry run by default.
    ///
    /// Prints the plan: the seqs kept (every intact record, also those after the damage), the
    /// seqs lost, the commits and idempotency ids affected (a commit cut by damage keeps its
    /// intact records only if its tool calls and results still pair up), the bytes to save
    /// aside. Changes nothing unless --accept-loss, which rewrites the log atomically: every
    /// lost seq is covered by a loss record (shown by `ctxlog log`; seqs are never handed out
    /// again and replaying a lost commit's id exits 7), the damaged bytes are saved under
    /// recovered/, the sidecars and the recall index are rebuilt. With --json: {"applied",
    /// "needed","kept","kept_seqs","lost":[{"from","to","offset","reason"}],"lost_seqs",
    /// "last_seq","commits":[{"first_seq","last_seq","id","id_sha256","kept","outcome"}],
    /// "damaged","saved_aside":[{"offset","bytes","file"}],"bytes_saved","ledger_id",…}.
    Repair(RepairArgs),
    /// Erase a turn, a seq range, the newest events or a whole conversation: the data is
    /// removed from every file.
    ///
    /// The ledger is rewritten without it (seqs are kept; the range becomes a tombstone that
    /// records what, when and why, shown by `ctxlog log`). A range is widened to whole turns
    /// so a tool call is never separated from its result. --last N is a retraction instead:
    /// exactly the newest N events (tombstones not counted), not widened, under one
    /// tombstone, e.g. to take back a reply just stored (`ctxlog erase chat1 --last 1`); the
    /// turn stays open and the next commit continues it. Artifacts nothing else references,
    /// recovered tails and the recall index (rebuilt on next use) are deleted. Prints
    /// {"erased":{"from":A,"to":B},"requested":{…},"events":N,"artifacts_deleted":N,…};
    /// --all prints {"erased":"all","conversation":…}.
    Erase(EraseArgs),
    /// Apply a retention policy: erase whole old turns (see docs/lifecycle.md).
    ///
    /// Rules: --older-than (by each turn's newest stored time), --keep-turns, --max-bytes (the
    /// ledger file's size); flags override the [retention] table of the configuration file.
    /// Turns holding a pinned note are kept unless --include-pinned. Each removed range is
    /// erased like `erase` does, under a tombstone whose reason is `retention: <rules>`;
    /// earlier tombstones are left as written. Prints {"dry_run","policy","conversations":
    /// [{"conversation","removed":[{"from","to","turns","reason"}],"seqs_removed",
    /// "turns_removed","pinned_kept","bytes_before","bytes_after","bytes_freed"}],…}.
    Gc(GcArgs),
    /// Serve every operation as JSON over HTTP, and the web inspector at / (see docs/http-api.md).
    ///
    /// Without tokens the server uses the store at --root (or --store) and must listen on
    /// loopback; with --tokens FILE (or CTXLOG_TOKENS) each request needs
    /// `Authorization: Bearer TOKEN` and each tenant gets its own store under
    /// <root>/.tenants/<tenant>/ (in a PostgreSQL store: its own schema). Several replicas may
    /// serve one PostgreSQL store (docs/postgres.md). Stops on SIGTERM or Ctrl-C after
    /// finishing the requests in flight.
    Serve(ServeArgs),
    /// Relay OpenAI and Anthropic SDK calls to the provider, keeping each conversation in the
    /// ledger and sending ctxlog's projection of it (see docs/gateway.md).
    ///
    /// An application changes only its SDK's base URL and names the conversation in a header
    /// (without it, the conversation is recognised from the history the client resends, and a
    /// diverged history forks a new one):
    ///
    /// OpenAI(base_url="http://127.0.0.1:7475/v1", default_headers={"X-Ctxlog-Conversation": "chat-1"})
    ///
    /// Anthropic(base_url="http://127.0.0.1:7475", default_headers={"X-Ctxlog-Conversation": "chat-1"})
    ///
    /// Routes: POST /v1/chat/completions, POST /v1/responses, POST /v1/messages (plain and
    /// "stream": true), GET /healthz, GET /metrics (Prometheus text). A Responses call with previous_response_id needs no
    /// header: the gateway's response ids name the conversation, and the chain is sent
    /// upstream whole. Each call commits the client's new messages, sends the provider the
    /// conversation projected within the model's context window (X-Ctxlog-Max-Tokens
    /// overrides it) with every other field as given, relays the answer as it arrives and
    /// commits the reply; responses carry X-Ctxlog-Conversation and X-Ctxlog-Seq. The API key
    /// the SDK sends is forwarded, never stored: each key's conversations are a tenant of their
    /// own under <root>/.tenants/ (in a PostgreSQL store, --store postgres://…: a schema of
    /// their own; several gateways may serve one such store). Beyond loopback, --tokens is
    /// required and every request needs X-Ctxlog-Token.
    Gateway(GatewayArgs),
    /// Serve the store to an agent host over the Model Context Protocol, on stdin and stdout
    /// (see docs/mcp.md).
    ///
    /// Read-only tools: list_conversations, recall (the same results as `ctxlog recall`) and
    /// read (a seq range of events, as `ctxlog log --json`). Stdout carries protocol messages
    /// only; warnings go to stderr. Runs until the host closes stdin. A host's configuration
    /// names the command line, e.g. `ctxlog --root /home/me/.ctxlog mcp`.
    Mcp,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen: HOST:PORT, the host an address or a name such as localhost (port 0
    /// picks a free port; the address is logged). Without tokens, every address the host
    /// resolves to must be loopback
    #[arg(long, default_value = "127.0.0.1:7474")]
    pub addr: String,
    /// Bearer tokens: one `TOKEN TENANT` pair a line [default: $CTXLOG_TOKENS, pairs separated
    /// by newlines or `;`; else none, loopback only]
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
    /// The largest request body accepted, in MiB (larger ones get 413)
    #[arg(long, value_name = "MIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub body_limit_mib: u64,
    /// How long a commit waits behind other commits to the same conversation before the
    /// server answers 503 with Retry-After, in seconds
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub writer_wait: u64,
    /// A web origin (SCHEME://HOST[:PORT]) whose pages may call the server, besides the
    /// server's own; repeatable; only with tokens (without, only pages on loopback may)
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<ctxlog_server::Origin>,
    /// How long a client has to send a request's headers, and how long an idle kept-alive
    /// connection stays open, in seconds; the connection is closed past it
    #[arg(long, value_name = "SECS", default_value_t = ctxlog_server::policy::DEFAULT_HEADER_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_timeout_secs: u64,
    /// How long a client has to send a request's body once its headers arrived, in seconds;
    /// past it the request is answered 408 and nothing of it is used
    #[arg(long, value_name = "SECS", default_value_t = ctxlog_server::policy::DEFAULT_BODY_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub body_timeout_secs: u64,
    /// The most connections open at once (more wait until one closes); lowered to half the
    /// open-file limit (`ulimit -n`) when that is smaller
    #[arg(long, value_name = "N", default_value_t = ctxlog_server::policy::DEFAULT_MAX_CONNECTIONS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub max_connections: usize,
}

#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// Where to listen: HOST:PORT (port 0 picks a free port; the address is logged). Without
    /// tokens, every address the host resolves to must be loopback
    #[arg(long, default_value = "127.0.0.1:7475")]
    pub addr: String,
    /// The OpenAI base URL calls to /v1/chat/completions and /v1/responses go to
    #[arg(long, value_name = "URL", default_value = ctxlog_gateway::OPENAI_UPSTREAM)]
    pub openai_upstream: String,
    /// The Anthropic base URL calls to /v1/messages go to
    #[arg(long, value_name = "URL", default_value = ctxlog_gateway::ANTHROPIC_UPSTREAM)]
    pub anthropic_upstream: String,
    /// Gateway tokens: one `TOKEN TENANT` pair a line, sent by clients in X-Ctxlog-Token
    /// [default: $CTXLOG_TOKENS; else none, loopback only]
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
    /// How long connecting to the provider may take, in seconds (past it: 502)
    #[arg(long, value_name = "SECS", default_value_t = ctxlog_gateway::DEFAULT_CONNECT_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub connect_timeout: u64,
    /// How long the provider may take to answer, and to send the next piece of a stream, in
    /// seconds (past it: 504, or the stream ends and no reply is committed); reasoning models
    /// can take minutes to a first byte
    #[arg(long, value_name = "SECS", default_value_t = ctxlog_gateway::DEFAULT_UPSTREAM_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub upstream_timeout: u64,
    /// The largest request body accepted, in MiB (larger ones get 413)
    #[arg(long, value_name = "MIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub body_limit_mib: u64,
    /// `json`: an access log on stdout, one JSON object per request (time, route, status,
    /// conversation, seq, milliseconds; never message content or keys); `text`: none
    /// (diagnostics go to stderr either way)
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// Offer ctxlog's recall tool to the model on every call (so the cached prefix never
    /// changes) and answer the model's recall calls in the gateway: the client sees only the
    /// model's final answer; the recall steps are stored as the gateway's own events
    #[arg(long)]
    pub recall_tool: bool,
    /// With --recall-tool: the most recall calls the gateway answers per request; the
    /// model's next answer is then relayed as it is
    #[arg(long, value_name = "N", default_value_t = ctxlog_gateway::DEFAULT_RECALL_CALLS, requires = "recall_tool", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100))]
    pub recall_calls: usize,
    /// How much memory each API key's store keeps for recognising conversations (the
    /// digests of each stored event, about 65 bytes an event), in bytes, or with a K, M or
    /// G suffix (1024-based); the least recently used conversations' are dropped past it and
    /// read again from the store on their next call. Where stored events are (to recognise a
    /// client that trims its history) is the store's places index, on disk, not in this
    /// memory [default: 64M]
    #[arg(long, value_name = "BYTES", default_value = "64M", value_parser = byte_size)]
    pub recognition_cache: usize,
    /// A model's context window in tokens, over the model table's: PREFIX=TOKENS, for every
    /// model whose name starts with PREFIX (the longest prefix wins; a request's
    /// X-Ctxlog-Max-Tokens over it); repeatable; over the same prefix's window in the store's
    /// ctxlog.toml ([gateway.model_windows]). A model in no row and no window given is sent
    /// without a budget
    #[arg(long = "model-window", value_name = "PREFIX=TOKENS", value_parser = model_window)]
    pub model_windows: Vec<(String, u64)>,
}

/// A size in bytes: a number, or one with a K, M or G suffix (1024-based).
fn byte_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let (digits, shift) = match text.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&text[..text.len() - 1], 10),
        Some(b'M') => (&text[..text.len() - 1], 20),
        Some(b'G') => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("{text:?} is not a size: give bytes, e.g. 67108864 or 64M"))
}

/// `--model-window PREFIX=TOKENS`.
fn model_window(text: &str) -> Result<(String, u64), String> {
    let (prefix, tokens) = text
        .split_once('=')
        .ok_or_else(|| format!("expected PREFIX=TOKENS (e.g. gpt-4o=128000), not {text:?}"))?;
    let tokens: u64 = tokens
        .trim()
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{tokens:?} is not a positive number of tokens"))?;
    let prefix = prefix.trim();
    if prefix.is_empty() {
        return Err("the model prefix is empty (PREFIX=TOKENS)".into());
    }
    Ok((prefix.to_owned(), tokens))
}

/// What to erase: exactly one of --turn, --seqs and --all (checked by the operation).
#[derive(Debug, Args)]
pub struct EraseArgs {
    /// The conversation name.
    pub conversation: String,
    /// Erase the turn(s) written by the commit that carried this idempotency id (--id of commit)
    #[arg(long, value_name = "ID")]
    pub turn: Option<String>,
    /// Erase seqs A to B inclusive (widened to whole turns), e.g. 5-9 or 7
    #[arg(long, value_name = "A-B", value_parser = seq_range)]
    pub seqs: Option<(u64, u64)>,
    /// Retract the newest N events exactly (no widening to whole turns; tombstones not
    /// counted), e.g. --last 1 takes back the last event stored; refused, with nothing
    /// changed, when the conversation holds fewer
    #[arg(long, value_name = "N")]
    pub last: Option<u64>,
    /// Erase the whole conversation: its directory is removed
    #[arg(long)]
    pub all: bool,
    #[arg(long, default_value = ctxlog::DEFAULT_ERASE_REASON, help = help::erase_reason())]
    pub reason: String,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["conversation", "all"]))]
pub struct GcArgs {
    /// The conversation name
    pub conversation: Option<String>,
    /// Every conversation of the store
    #[arg(long)]
    pub all: bool,
    /// Remove turns older than this, e.g. 90d, 12h, 2weeks
    #[arg(long, value_name = "AGE")]
    pub older_than: Option<String>,
    /// Keep only the newest N turns
    #[arg(long, value_name = "N")]
    pub keep_turns: Option<u64>,
    /// Remove the oldest turns until the ledger file is at most N bytes
    #[arg(long, value_name = "N")]
    pub max_bytes: Option<u64>,
    /// Remove turns holding pinned notes too [default: they are kept]
    #[arg(long)]
    pub include_pinned: bool,
    /// Print what would be removed; write nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// A wait in seconds: a non-negative number, fractions allowed.
fn wait_secs(s: &str) -> Result<std::time::Duration, String> {
    s.parse::<f64>()
        .ok()
        .and_then(|secs| std::time::Duration::try_from_secs_f64(secs).ok())
        .ok_or_else(|| format!("expected a number of seconds, got {s:?}"))
}

/// `A-B` or `A` (the range's rules are the operation's: seqs start at 1, first <= last).
fn seq_range(s: &str) -> Result<(u64, u64), String> {
    let seq = |t: &str| {
        t.trim()
            .parse::<u64>()
            .map_err(|_| format!("expected A-B with whole numbers, got {s:?}"))
    };
    match s.split_once('-') {
        Some((a, b)) => Ok((seq(a)?, seq(b)?)),
        None => Ok((seq(s)?, seq(s)?)),
    }
}

#[derive(Debug, Args)]
pub struct ConvArg {
    /// The conversation name: 1-64 characters from A-Z a-z 0-9 _ -
    pub conversation: String,
}

#[derive(Debug, Args)]
pub struct RepairArgs {
    /// The conversation name: 1-64 characters from A-Z a-z 0-9 _ -
    pub conversation: String,
    /// Carry the plan out (without it: a dry run that changes nothing) [default: false]
    #[arg(long)]
    pub accept_loss: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The conversation name: 1-64 characters from A-Z a-z 0-9 _ -
    pub conversation: String,
    /// Get the intact records of a damaged conversation out: every record whose checksum
    /// holds, in order, the damaged ranges marked; nothing in the store changes
    #[arg(long)]
    pub salvage: bool,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// [CONV] FILE: the conversation to create or extend (for conversation-dataset, an
    /// optional name prefix) and the file to read (`-` is standard input).
    #[arg(num_args = 1..=2, value_names = ["CONV", "FILE"], required = true)]
    pub args: Vec<String>,
    /// The input's format: ctxlog (an export), openai-chat, anthropic-messages or
    /// conversation-dataset.
    #[arg(long = "from", default_value = "ctxlog")]
    pub format: String,
}

#[derive(Debug, Args)]
pub struct CommitArgs {
    /// The conversation name (created on first commit): 1-64 characters from A-Z a-z 0-9 _ -
    pub conversation: String,
    /// Idempotency id: re-committing the same id and content writes nothing and prints the
    /// original seqs; the same id with other content exits 6.
    #[arg(long)]
    pub id: Option<String>,
    /// Where to read the turn JSON from; `-` is standard input.
    #[arg(default_value = "-")]
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// The conversation name.
    pub conversation: String,
    /// Start at this seq (seqs start at 1; 0 is a usage error)
    #[arg(long, default_value_t = 1)]
    pub from: u64,
    /// Show at most this many events [default: all]
    #[arg(long)]
    pub limit: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ProjectArgs {
    /// The conversation name.
    pub conversation: String,
    /// The current user input (mandatory content). Leave it out to continue an agent loop:
    /// right after a tool result is committed, the open turn is mandatory and the body ends
    /// with its tool results (if the turn outgrows the budget, its oldest results' texts are
    /// clipped, as the report's clips say) [default: none]
    #[arg(long)]
    pub input: Option<String>,
    /// The system prompt (mandatory content) [default: none]
    #[arg(long)]
    pub system: Option<String>,
    #[arg(long, help = help::model())]
    pub model: Option<String>,
    /// The wire format: openai-chat, anthropic-messages or openai-responses
    #[arg(long, default_value = "openai-chat")]
    pub format: WireFormat,
    /// Byte budget: the body's length will not exceed it [default: none]
    #[arg(long)]
    pub max_bytes: Option<u64>,
    /// Token budget (input plus reserved output) [default: none]
    #[arg(long)]
    pub max_tokens: Option<u64>,
    /// Tokenizer for token budgets and the report: o200k or cl100k
    #[arg(long, default_value = "o200k")]
    pub tokenizer: Tokenizer,
    #[arg(long, help = help::reserve_output())]
    pub reserve_output: Option<u64>,
    /// auto: agent when the newest turns a window could hold contain a tool call, else turns
    /// (the report names the choice); turns: whole recent turns; agent: pinned requests,
    /// latest results and status, tiers
    #[arg(long, default_value = "auto")]
    pub policy: Policy,
    #[arg(long, value_name = "K", help = help::recall_pages())]
    pub recall: Option<usize>,
    /// Room held back for recalled pages so recent turns cannot starve recall: a share
    /// (25% or 0.25) or N (bytes of --max-bytes, tokens of --max-tokens)
    /// [default: 25% when pages may be included (--recall > 0, agent's default), else none;
    /// held back only when a page would otherwise be left out for room]
    #[arg(long, value_name = "SHARE|N")]
    pub recall_reserve: Option<ctxlog::RecallReserve>,
    /// Add a short notice saying which turns were left out and how to recall them
    #[arg(long)]
    pub notice: bool,
    /// sliding: the newest turns that fit (the first kept turn moves on every call once the
    /// budget is full); stable: the first kept turn stays fixed while the suffix from it fits,
    /// then moves forward by a block, so consecutive bodies share their prefix for the
    /// provider's prompt cache (input, pages and notice go after it; the report's
    /// stable_prefix says where it ends)
    #[arg(long, default_value = "sliding")]
    pub window: ctxlog::Window,
    /// With --window stable: the share of the budget, strictly between 0 and 1, the body
    /// drops to when the window moves (a block is the rest) [default: 0.8]
    #[arg(long, value_name = "F")]
    pub low_water: Option<f64>,
    /// Write provider cache hints where the prefix is stable, counted in the budget, the kind
    /// the model table gives the model (else the format's default; the report's cache_hints
    /// says which): Anthropic cache_control breakpoints; OpenAI's prompt_cache_key (a hash
    /// of the conversation's ledger id), with explicit prompt_cache_breakpoint parts for the
    /// models that take them (gpt-5.6 and later)
    #[arg(long)]
    pub cache_hints: bool,
    /// Write the projection report (JSON) to this file
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Tool definitions to send (a JSON array, in the format's own shape), counted in the budget
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    /// Also offer the model ctxlog's `recall` tool (its definition in the format's shape), so it
    /// can search what the body leaves out; answer its calls with `ctxlog recall`
    #[arg(long)]
    pub recall_tool: bool,
}

#[derive(Debug, Args)]
pub struct CountArgs {
    /// The body's wire format: openai-chat, anthropic-messages or openai-responses [default:
    /// told from the body's shape; a body that could be either needs it]
    #[arg(long)]
    pub format: Option<WireFormat>,
    /// o200k or cl100k
    #[arg(long, default_value = "o200k")]
    pub tokenizer: Tokenizer,
    /// The request body; `-` is standard input.
    #[arg(default_value = "-")]
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct RecallArgs {
    /// The conversation name.
    pub conversation: String,
    /// What to look for, in plain words [default: list newest first]
    #[arg(default_value = "", hide_default_value = true)]
    pub query: String,
    /// Page through this one event instead of searching (--offset is then a page index;
    /// seqs start at 1)
    #[arg(long)]
    pub seq: Option<u64>,
    /// Skip this many results (the previous result's next_offset)
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
    #[arg(long, default_value_t = ctxlog::RECALL_DEFAULT_LIMIT, help = help::recall_limit())]
    pub limit: usize,
}

/// Help texts that state figures the operations layer owns, so they can never disagree with
/// it.
mod help {
    use ctxlog::WireFormat;

    pub fn model() -> String {
        let model = ctxlog::ops::default_model;
        format!(
            "The model name, written into the body as given [default: {} for openai-chat and \
             openai-responses, {} for anthropic-messages]",
            model(WireFormat::OpenAiChat),
            model(WireFormat::AnthropicMessages)
        )
    }

    pub fn reserve_output() -> String {
        format!(
            "Tokens reserved for the reply: subtracted from --max-tokens and written as the \
             output limit field [default: none; {} for anthropic-messages, which requires the \
             field]",
            ctxlog::ops::default_reserve_output(WireFormat::AnthropicMessages).unwrap_or_default()
        )
    }

    pub fn recall_pages() -> String {
        format!(
            "Include up to K (0-{}) relevant older pages from the recall index [default: 0 for \
             turns, 2 for agent; auto: the chosen policy's]",
            ctxlog::RECALL_MAX_LIMIT
        )
    }

    pub fn recall_limit() -> String {
        format!("At most this many results (1-{})", ctxlog::RECALL_MAX_LIMIT)
    }

    pub fn erase_reason() -> String {
        format!(
            "Why, recorded in the tombstone (at most {} bytes)",
            ctxlog::MAX_ERASE_REASON_BYTES
        )
    }
}
