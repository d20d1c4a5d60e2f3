//! `ctxlog` for Python: a PyO3 module over the operations layer ([`ctxlog::Store`] and
//! [`ctxlog::ops`]), like the CLI and the HTTP server (docs/design.md#i0-one-operations-layer,
//! docs/design.md#i5-python).
//!
//! The module is glue: each method turns its Python arguments into one typed request, calls
//! the store's operation with the GIL released ([`Python::detach`]), and hands the response
//! back as Python objects (dicts, by way of the response's documented JSON). No rule of the
//! ledger, the projector or the recall index is written here. The Python package
//! (`python/ctxlog/`) re-exports this module with its type stubs.
//!
//! ```python
//! import ctxlog
//! with ctxlog.Store("./.ctxlog") as store:
//!     chat = store.conversation("chat1")
//!     chat.commit(user="My code is ZX-81.", assistant="Noted.")
//!     body, report = chat.project(input="What is my code?", max_bytes=8192)
//! ```

mod errors;
mod json;

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use ctxlog::ops::{
    CommitRequest, EraseRequest, EraseTarget, ExportRequest, GcRequest, ImportRequest, ListRequest,
    LogRequest, ProjectRequest, RecallRequest, ReindexRequest, RepairRequest, VerifyRequest,
};
use ctxlog::{ConversationName, WireFormat};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use crate::errors::{into_py_err, usage};

/// The store a Python `Store` and its conversations share; `None` once closed.
struct Shared {
    store: RwLock<Option<Arc<ctxlog::Store>>>,
    location: String,
}

impl Shared {
    /// The open store, or `UsageError` after `close()`.
    fn get(&self) -> PyResult<Arc<ctxlog::Store>> {
        let guard = self.store.read().unwrap_or_else(PoisonError::into_inner);
        guard
            .clone()
            .ok_or_else(|| usage(format!("store {} is closed", self.location)))
    }

    fn close(&self) {
        let mut guard = self.store.write().unwrap_or_else(PoisonError::into_inner);
        guard.take();
    }
}

/// Runs one store operation with the GIL released, turning its error into an exception.
fn call<T: Send>(
    py: Python<'_>,
    shared: &Shared,
    op: impl FnOnce(&ctxlog::Store) -> ctxlog::Result<T> + Send,
) -> PyResult<T> {
    let store = shared.get()?;
    py.detach(|| op(&store)).map_err(|e| into_py_err(py, &e))
}

/// A set of conversations: the embedded file store at a directory (docs/design.md#l9-backends).
///
/// `Store(path)` opens (lazily: nothing is created until the first commit) the store at
/// `path`, a directory. Safe to share between threads; every call releases the GIL. Used as
/// a context manager, leaving the block closes it: the writer locks it holds on conversations
/// are released and later calls raise `UsageError`.
#[pyclass(frozen, name = "Store", module = "ctxlog")]
struct PyStore {
    shared: Arc<Shared>,
}

#[pymethods]
impl PyStore {
    /// Opens the store at `url`: a directory path (str or os.PathLike), or a PostgreSQL
    /// database `postgres://user@host:port/db` (see docs/postgres.md). `writer_wait`
    /// (seconds) bounds how long a commit queues behind other commits of this process to
    /// the same conversation before raising `Busy` [default: None, as long as it takes].
    ///
    /// Redaction and retention come from `config` (a `ctxlog.toml` path) [default:
    /// `<url>/ctxlog.toml` when it exists, else the defaults: built-in key shapes and
    /// secret-named environment values redacted]; `redact_builtin` and `redact_env` switch
    /// those off or on, `redact_vars` names more environment variables whose values are
    /// redacted, `redact_patterns` maps marker names to regular expressions (see
    /// docs/lifecycle.md). Raises `UsageError` for a configuration that does not check out.
    #[new]
    #[pyo3(signature = (url, *, writer_wait = None, config = None, redact_builtin = None,
        redact_env = None, redact_vars = None, redact_patterns = None))]
    fn new(
        url: PathBuf,
        writer_wait: Option<f64>,
        config: Option<PathBuf>,
        redact_builtin: Option<bool>,
        redact_env: Option<bool>,
        redact_vars: Option<Vec<String>>,
        redact_patterns: Option<std::collections::BTreeMap<String, String>>,
    ) -> PyResult<Self> {
        let parsed = ctxlog::StoreLocation::parse(&url.display().to_string())
            .map_err(|e| usage(e.to_string()))?;
        let location = parsed.display();
        let mut builder = ctxlog::StoreBuilder::new(parsed);
        if let Some(seconds) = writer_wait {
            let wait = Duration::try_from_secs_f64(seconds)
                .map_err(|e| usage(format!("writer_wait must be seconds >= 0: {e}")))?;
            builder.writer_wait(Some(wait));
        }
        if let Some(file) = config {
            builder.config_file(file);
        }
        let patterns = redact_patterns.unwrap_or_default().into_iter();
        builder.redaction(ctxlog::redact::RedactionOverrides {
            builtin: redact_builtin,
            env: redact_env,
            env_vars: redact_vars.unwrap_or_default(),
            patterns: patterns
                .map(|(name, regex)| ctxlog::redact::PatternConfig { name, regex })
                .collect(),
        });
        let store = Python::attach(|py| builder.build().map_err(|e| into_py_err(py, &e)))?;
        Ok(PyStore {
            shared: Arc::new(Shared {
                store: RwLock::new(Some(Arc::new(store))),
                location,
            }),
        })
    }

    /// Applies a retention policy to every conversation (see `Conversation.gc`, which takes
    /// the same keyword arguments); returns `{"dry_run", "policy", "conversations": [...],
    /// "seqs_removed", "bytes_freed"}`.
    #[pyo3(signature = (**options))]
    fn gc<'py>(
        &self,
        py: Python<'py>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request: GcRequest = request(None, options, None)?;
        let response = call(py, &self.shared, move |s| s.gc(&request))?;
        json::to_py(py, &response)
    }

    /// Bytes and tokens of a request body (bytes or str), counted as the projector counts:
    /// `{"bytes", "tokens", "tokenizer", "format", "tokens_exact", …}`. `format` is told from
    /// the body's shape when not given (a chat body that could be either chat format needs
    /// it); `tokenizer` defaults to "o200k".
    #[pyo3(signature = (body, *, format = None, tokenizer = None))]
    fn count<'py>(
        &self,
        py: Python<'py>,
        body: &Bound<'py, PyAny>,
        format: Option<&str>,
        tokenizer: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut fields = serde_json::Map::new();
        fields.insert("body".into(), serde_json::Value::Array(Vec::new()));
        if let Some(format) = format {
            fields.insert("format".into(), format.into());
        }
        if let Some(tokenizer) = tokenizer {
            fields.insert("tokenizer".into(), tokenizer.into());
        }
        let mut request: ctxlog::ops::CountRequest =
            ctxlog::ops::request_from_fields(None, fields).map_err(|e| usage(e.to_string()))?;
        request.body = input_bytes(body)?;
        let count = call(py, &self.shared, move |s| s.count(&request))?;
        json::to_py(py, &count)
    }

    /// The conversation `name` (1-64 characters from A-Z a-z 0-9 _ -). Nothing is created
    /// until its first commit. Raises `UsageError` for an invalid name.
    fn conversation(&self, py: Python<'_>, name: &str) -> PyResult<PyConversation> {
        self.shared.get()?;
        let name = ConversationName::new(name).map_err(|e| into_py_err(py, &e.into()))?;
        Ok(PyConversation {
            shared: self.shared.clone(),
            name: name.to_string(),
        })
    }

    /// The store's conversations, newest activity first: a list of
    /// `{"name", "events", "bytes", "last_activity_ms"}`.
    fn list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let list = call(py, &self.shared, |s| s.list(&ListRequest {}))?;
        json::to_py(py, &list.conversations)
    }

    /// Imports history from `data` (bytes or str): an export (`format="ctxlog"`), or
    /// `"openai-chat"`, `"anthropic-messages"`, `"openai-responses"` or `"conversation-dataset"`. `conversation` is
    /// the target (for datasets, an optional name prefix: `<conversation>-<sample id>`).
    /// Every record is checked first (a bad one raises `BadInput` naming its line or index,
    /// and nothing is written); re-running the same import writes nothing. Returns
    /// `{"conversations": [...], "events_written", "notes", "failed"}` (`failed`: the
    /// dataset samples refused, e.g. session dates going backwards, while the others were
    /// imported; nothing of a refused sample is written).
    #[pyo3(signature = (data, *, format = "ctxlog", conversation = None))]
    fn import_<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        format: &str,
        conversation: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        import_bytes(py, &self.shared, input_bytes(data)?, format, conversation)
    }

    /// [`Store.import_`] reading the file at `path`.
    #[pyo3(signature = (path, *, format = "ctxlog", conversation = None))]
    fn import_file<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        format: &str,
        conversation: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let data = read_file(&path)?;
        import_bytes(py, &self.shared, data, format, conversation)
    }

    /// Closes the store: releases the writer locks it holds. Later calls raise `UsageError`.
    /// Calls still running finish first.
    fn close(&self) {
        self.shared.close();
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.get().is_err()
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.shared.close();
        false
    }

    fn __repr__(&self) -> String {
        format!("ctxlog.Store({:?})", self.shared.location)
    }
}

/// One conversation of a store. Cheap to create; safe to share between threads (commits to
/// one conversation queue inside the process; reads run in parallel).
#[pyclass(frozen, name = "Conversation", module = "ctxlog")]
struct PyConversation {
    shared: Arc<Shared>,
    name: String,
}

/// An operation's request from a call's keyword arguments (and `extra` fields): they are the
/// fields of the request type (the server's request body), read by serde like every other
/// front end's, for `conversation` (`None`: store-wide); `None` means the field's default.
fn request<T: serde::de::DeserializeOwned>(
    conversation: Option<&str>,
    options: Option<&Bound<'_, PyDict>>,
    extra: Option<(&str, serde_json::Value)>,
) -> PyResult<T> {
    let mut fields = serde_json::Map::new();
    if let Some(options) = options {
        for (key, value) in options.iter() {
            if !value.is_none() {
                fields.insert(key.extract()?, json::from_py(&value)?);
            }
        }
    }
    if let Some((key, value)) = extra {
        fields.insert(key.into(), value);
    }
    Python::attach(|py| {
        ctxlog::ops::request_from_fields(conversation, fields).map_err(|e| into_py_err(py, &e))
    })
}

/// The request of `project` and `project_dict`: the keyword arguments are the fields of
/// [`ProjectRequest`] (the server's projection request body).
fn project_request(
    conversation: &str,
    input: Option<String>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<ProjectRequest> {
    let input = input.map(|input| ("input", input.into()));
    request(Some(conversation), options, input)
}

/// The bytes of an import's input: `bytes` or `str`.
fn input_bytes(data: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = data.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = data.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    Err(usage("data must be bytes or str".into()))
}

fn read_file(path: &std::path::Path) -> PyResult<Vec<u8>> {
    std::fs::read(path).map_err(|e| usage(format!("cannot read {}: {e}", path.display())))
}

fn import_bytes<'py>(
    py: Python<'py>,
    shared: &Shared,
    data: Vec<u8>,
    format: &str,
    conversation: Option<String>,
) -> PyResult<Bound<'py, PyAny>> {
    let format: ctxlog::transfer::ImportFormat = format
        .parse()
        .map_err(|e: ctxlog::Error| usage(e.to_string()))?;
    let request = ImportRequest {
        conversation,
        format,
    };
    let response = call(py, shared, move |s| s.import(&request, &data, &mut |_| {}))?;
    json::to_py(py, &response)
}

impl PyConversation {
    fn erase_target<'py>(
        &self,
        py: Python<'py>,
        target: EraseTarget,
        reason: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = EraseRequest {
            conversation: self.name.clone(),
            target,
            reason: reason.unwrap_or_else(|| ctxlog::DEFAULT_ERASE_REASON.to_string()),
        };
        let response = call(py, &self.shared, move |s| s.erase(&request))?;
        json::to_py(py, &response)
    }

    fn project_raw(&self, py: Python<'_>, request: ProjectRequest) -> PyResult<ctxlog::Projection> {
        call(py, &self.shared, move |s| s.project(&request))
    }
}

#[pymethods]
impl PyConversation {
    /// The conversation's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Commits one turn (or part of one) atomically and durably, creating the conversation
    /// on its first commit. Either the shorthand (`user=`, `assistant=`, one or both) or the
    /// full form (`events=[{"kind": "user", "text": …}, {"kind": "tool_call", …}, …]`, the
    /// CLI's event JSON as dicts). `id` makes the commit idempotent: the same id and content
    /// again writes nothing and returns the original receipt; other content raises
    /// `Conflict`. Returns `{"first_seq", "last_seq", "replayed"}`.
    #[pyo3(signature = (user = None, assistant = None, *, events = None, id = None))]
    fn commit<'py>(
        &self,
        py: Python<'py>,
        user: Option<String>,
        assistant: Option<String>,
        events: Option<&Bound<'py, PyAny>>,
        id: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let turn = match events {
            Some(events) => {
                if user.is_some() || assistant.is_some() {
                    return Err(usage(
                        "give either user=/assistant= or events=, not both".into(),
                    ));
                }
                serde_json::json!({ "events": json::from_py(events)? })
            }
            None => serde_json::json!({ "user": user, "assistant": assistant }),
        };
        let bytes = serde_json::to_vec(&turn).map_err(|e| errors::bad_input(e.to_string()))?;
        let request = CommitRequest::from_json(&self.name, &bytes, id.as_deref())
            .map_err(|e| into_py_err(py, &e))?;
        let receipt = call(py, &self.shared, move |s| s.commit(&request))?;
        json::to_py(py, &receipt)
    }

    /// The exact request body for one model call, and its report: `(body: bytes, report:
    /// dict)`. `body` is byte for byte what `ctxlog project` prints for the same options.
    /// Raises `MandatoryExceedsBudget` (with `needed_bytes`, `needed_tokens`) when the system
    /// prompt and input alone do not fit; the ledger is never written. The keyword arguments
    /// are the fields of the server's projection request (`max_tokens`, `max_bytes`,
    /// `format`, `tokenizer`, `reserve_output`, `recall`, `recall_reserve`, `policy`,
    /// `system`, `model`, `notice`, `window`, `low_water`, `cache_hints`, `tools`,
    /// `recall_tool`); `None` is the field's default,
    /// and an unknown one raises `UsageError`.
    #[pyo3(signature = (input = None, **options))]
    fn project<'py>(
        &self,
        py: Python<'py>,
        input: Option<String>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyAny>)> {
        let request = project_request(&self.name, input, options)?;
        let projection = self.project_raw(py, request)?;
        Ok((
            PyBytes::new(py, &projection.body),
            json::to_py(py, &projection.report)?,
        ))
    }

    /// Like `project`, with the body parsed into a dict, ready for an SDK:
    /// `client.chat.completions.create(**body)`. Returns `(body: dict, report: dict)`.
    #[pyo3(signature = (input = None, **options))]
    fn project_dict<'py>(
        &self,
        py: Python<'py>,
        input: Option<String>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let (body, report) = self.project(py, input, options)?;
        Ok((json::loads(py, body.as_any())?, report))
    }

    /// Searches the conversation's history: `{"query", "hits": [...], "next_offset",
    /// "note"}`. The query is taken literally; an empty one lists newest first. `seq` pages
    /// through one event; `offset` is the previous result's `next_offset`.
    #[pyo3(signature = (query = "", *, limit = ctxlog::RECALL_DEFAULT_LIMIT, seq = None, offset = 0))]
    fn recall<'py>(
        &self,
        py: Python<'py>,
        query: &str,
        limit: usize,
        seq: Option<u64>,
        offset: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = RecallRequest {
            conversation: self.name.clone(),
            query: query.to_string(),
            seq,
            offset,
            limit,
        };
        let result = call(py, &self.shared, move |s| s.recall(&request))?;
        json::to_py(py, &result)
    }

    /// Erases data for real: `seqs=(a, b)` (widened to whole turns), `commit_id=` (the turns
    /// of the commit with that id), `last=n` (exactly the newest n events: a retraction, see
    /// `retract`), or `all=True` (the whole conversation). Give exactly one. `reason` goes
    /// into the tombstone. Returns what was erased (a dict).
    #[pyo3(signature = (*, seqs = None, commit_id = None, last = None, all = false, reason = None))]
    fn erase<'py>(
        &self,
        py: Python<'py>,
        seqs: Option<(u64, u64)>,
        commit_id: Option<String>,
        last: Option<u64>,
        all: bool,
        reason: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let target =
            EraseTarget::choose(seqs, commit_id, last, all).map_err(|e| usage(e.to_string()))?;
        self.erase_target(py, target, reason)
    }

    /// Retracts the newest `last` events (default 1; tombstones not counted): exactly them,
    /// not widened to whole turns, under one tombstone; the turn stays open and the next
    /// commit continues it. For taking back what was just stored (a framework's "pop the
    /// last item"). Refused (UsageError, nothing changed) when the conversation holds fewer.
    /// Returns what was erased (a dict, as `erase`).
    #[pyo3(signature = (last = 1, *, reason = None))]
    fn retract<'py>(
        &self,
        py: Python<'py>,
        last: u64,
        reason: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.erase_target(py, EraseTarget::Last { events: last }, reason)
    }

    /// Applies a retention policy: whole turns older than `older_than` (e.g. "90d"), all but
    /// the newest `keep_turns`, or the oldest until the ledger is at most `max_bytes`, are
    /// erased under tombstones whose reason starts with "retention:". Turns holding a pinned
    /// note stay unless `include_pinned`. Rules left out come from the store's
    /// configuration; at least one must result (else `UsageError`). `dry_run=True` reports
    /// and writes nothing. Returns the store-wide response dict for this one conversation.
    /// The keyword arguments are the fields of the server's retention request; an unknown
    /// one raises `UsageError`.
    #[pyo3(signature = (**options))]
    fn gc<'py>(
        &self,
        py: Python<'py>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request: GcRequest = request(Some(&self.name), options, None)?;
        let response = call(py, &self.shared, move |s| s.gc(&request))?;
        json::to_py(py, &response)
    }

    /// The conversation's events in seq order (an erased range reads as its tombstone), from
    /// seq `start`, at most `limit` of them: a list of event dicts.
    #[pyo3(signature = (*, start = 1, limit = None))]
    fn log<'py>(
        &self,
        py: Python<'py>,
        start: u64,
        limit: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = LogRequest {
            conversation: self.name.clone(),
            from: start,
            limit,
        };
        let log = call(py, &self.shared, move |s| s.log(&request))?;
        json::to_py(py, &log.events)
    }

    /// Checks every record, the sidecar index, the artifacts and the recall index; writes
    /// nothing. Returns the report (a dict; `recall_index["state"]` is `ok`, `absent`,
    /// `damaged` or `unchecked`); raises `Corrupt` (with `offset`, `seq`) for a damaged record
    /// or artifact. A damaged recall index is reported, not raised: `reindex()` rebuilds it.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let request = VerifyRequest {
            conversation: self.name.clone(),
        };
        let report = call(py, &self.shared, move |s| {
            let report = s.verify(&request)?;
            match ctxlog::ops::verify_problem(&report) {
                Some(problem) => Err(problem),
                None => Ok(report),
            }
        })?;
        json::to_py(py, &report)
    }

    /// Every event as JSON Lines (bytes): `{"seq", "ts", "kind", …}` a line, artifacts
    /// inlined, tombstones included; `import_` of it into a new conversation rebuilds this one.
    /// `salvage=True` (a damaged conversation): every intact record in order, each damaged
    /// range as a `{"damaged": {…}}` line where it lies; nothing in the store changes.
    #[pyo3(signature = (*, salvage = false))]
    fn export<'py>(&self, py: Python<'py>, salvage: bool) -> PyResult<Bound<'py, PyBytes>> {
        let request = ExportRequest {
            conversation: self.name.clone(),
            salvage,
        };
        let out = call(py, &self.shared, move |s| {
            let mut out = Vec::new();
            s.export(&request, &mut out)?;
            Ok(out)
        })?;
        Ok(PyBytes::new(py, &out))
    }

    /// Imports `data` (bytes or str) into this conversation (created if missing): an export
    /// (`format="ctxlog"`), `"openai-chat"`, `"anthropic-messages"` or `"openai-responses"`. See `Store.import_`.
    #[pyo3(signature = (data, *, format = "ctxlog"))]
    fn import_<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        format: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        import_bytes(
            py,
            &self.shared,
            input_bytes(data)?,
            format,
            Some(self.name.clone()),
        )
    }

    /// `import_` reading the file at `path`.
    #[pyo3(signature = (path, *, format = "ctxlog"))]
    fn import_file<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        format: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let data = read_file(&path)?;
        import_bytes(py, &self.shared, data, format, Some(self.name.clone()))
    }

    /// Deletes and rebuilds the recall index from the ledger (repairs a damaged one).
    /// Returns `{"events_indexed", "pages_written", "indexed_through", "artifact_failures"}`.
    fn reindex<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let request = ReindexRequest {
            conversation: self.name.clone(),
        };
        let stats = call(py, &self.shared, move |s| s.reindex(&request, &mut |_| {}))?;
        json::to_py(py, &stats)
    }

    /// Plans the repair of a damaged conversation and, with `accept_loss=True`, carries it
    /// out: every intact record kept, every lost seq covered by a loss record (never handed
    /// out again; a replayed id of a lost commit raises `Lost`), the damaged bytes saved
    /// aside, the sidecars rebuilt. Returns the plan (a dict: `applied`, `kept`, `lost`,
    /// `commits`, `saved_aside`, …). Without `accept_loss`, nothing changes.
    #[pyo3(signature = (*, accept_loss = false))]
    fn repair<'py>(&self, py: Python<'py>, accept_loss: bool) -> PyResult<Bound<'py, PyAny>> {
        let request = RepairRequest {
            conversation: self.name.clone(),
            accept_loss,
        };
        let report = call(py, &self.shared, move |s| s.repair(&request))?;
        json::to_py(py, &report)
    }

    /// The definition of ctxlog's recall tool in `format`'s tool shape (a dict), to offer
    /// the model (or pass `recall_tool=True` to `project`).
    #[pyo3(signature = (format = "openai-chat"))]
    fn recall_tool_definition<'py>(
        &self,
        py: Python<'py>,
        format: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let format = format
            .parse::<WireFormat>()
            .map_err(|e| usage(e.to_string()))?;
        json::to_py(py, &ctxlog::ops::recall_tool_definition(format))
    }

    /// Answers the model's call of the recall tool: `arguments` as the model produced them
    /// (the JSON string, or a dict). Returns the tool result's JSON text, to commit as the
    /// `tool_result` and send back. Never raises for the model's mistakes: bad arguments
    /// become a tool error the model can read.
    fn answer_recall_tool(&self, py: Python<'_>, arguments: &Bound<'_, PyAny>) -> PyResult<String> {
        let arguments = match arguments.cast::<PyString>() {
            Ok(text) => {
                let text = text.to_cow()?;
                serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text.into_owned()))
            }
            Err(_) => json::from_py(arguments)?,
        };
        let store = self.shared.get()?;
        let name = self.name.clone();
        let output = py.detach(move || store.recall_tool(&name, &arguments));
        Ok(output.json.to_string())
    }

    fn __repr__(&self) -> String {
        format!("ctxlog.Conversation({:?})", self.name)
    }
}

/// The native module, `ctxlog._ctxlog`; the package `ctxlog` re-exports it.
#[pymodule]
fn _ctxlog(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStore>()?;
    m.add_class::<PyConversation>()?;
    errors::register(m)?;
    m.add("RECALL_DEFAULT_LIMIT", ctxlog::RECALL_DEFAULT_LIMIT)?;
    m.add("RECALL_MAX_LIMIT", ctxlog::RECALL_MAX_LIMIT)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
