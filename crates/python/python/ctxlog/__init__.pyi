"""Type stubs for ctxlog (the native module ctxlog._ctxlog, re-exported)."""

from os import PathLike
from types import TracebackType
from typing import (
    Any,
    Dict,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypedDict,
    Union,
    final,
)

__all__ = [
    "AssistantEvent",
    "Event",
    "NoteEvent",
    "OpaqueEvent",
    "ProviderItem",
    "ToolCallEvent",
    "ToolResultEvent",
    "ToolStatus",
    "UserEvent",
    "RECALL_DEFAULT_LIMIT",
    "RECALL_MAX_LIMIT",
    "BadInput",
    "Busy",
    "Conflict",
    "Lost",
    "Conversation",
    "Corrupt",
    "Error",
    "JsonDict",
    "Locked",
    "MandatoryExceedsBudget",
    "NotFound",
    "PolicyName",
    "Store",
    "TokenizerName",
    "Unavailable",
    "IndexDamaged",
    "UsageError",
    "WindowName",
    "WireFormat",
    "__version__",
]

__version__: str
RECALL_DEFAULT_LIMIT: int
RECALL_MAX_LIMIT: int

WireFormat = Literal["openai-chat", "anthropic-messages", "openai-responses"]
TokenizerName = Literal["o200k", "cl100k", "o200k_base", "cl100k_base"]
PolicyName = Literal["auto", "turns", "agent"]
WindowName = Literal["sliding", "stable"]
JsonDict = Dict[str, Any]
ToolStatus = Literal["ok", "error", "interrupted"]

class _UserRequired(TypedDict):
    kind: Literal["user"]
    text: str

class ProviderItem(TypedDict):
    format: Literal["openai-responses", "anthropic-messages"]
    item: JsonDict

class UserEvent(_UserRequired, total=False):
    parts: List[JsonDict]
    provider_item: ProviderItem

class _AssistantRequired(TypedDict):
    kind: Literal["assistant"]
    text: str

class AssistantEvent(_AssistantRequired, total=False):
    provider_item: ProviderItem

class _ToolCallRequired(TypedDict):
    kind: Literal["tool_call"]
    call_id: str
    tool: str
    arguments: Any

class ToolCallEvent(_ToolCallRequired, total=False):
    provider_item: ProviderItem

class _ToolResultRequired(TypedDict):
    kind: Literal["tool_result"]
    call_id: str
    tool: str
    status: ToolStatus
    text: str

class ToolResultEvent(_ToolResultRequired, total=False):
    exit_code: int
    artifact: JsonDict
    parts: List[JsonDict]
    provider_item: ProviderItem

class _NoteRequired(TypedDict):
    kind: Literal["note"]
    text: str

class NoteEvent(_NoteRequired, total=False):
    pinned: bool
    supersedes: int
    provider_item: ProviderItem

class OpaqueEvent(TypedDict):
    kind: Literal["opaque"]
    format: Literal["openai-responses", "anthropic-messages"]
    item: JsonDict

Event = Union[UserEvent, AssistantEvent, ToolCallEvent, ToolResultEvent, NoteEvent, OpaqueEvent]

class Error(Exception):
    """Base class of every ctxlog error."""

    error_class: str

class UsageError(Error):
    """The arguments are wrong (a bad name, budget, range or option); nothing was touched."""

class BadInput(Error):
    """The data given is wrong (an invalid turn, unknown event kind, a cap exceeded)."""

class MandatoryExceedsBudget(Error):
    """The system prompt and input alone exceed the budget; the ledger is unchanged."""

    needed_bytes: int
    needed_tokens: int

class Locked(Error):
    """Another writer (another process or Store) holds the conversation."""

class Busy(Error):
    """Other commits of this process held the writer past the store's writer_wait."""

class Corrupt(Error):
    """The ledger or an artifact is damaged; nothing was changed."""

    offset: Optional[int]
    seq: Optional[int]

class Conflict(Error):
    """The commit id was used before with different content."""

class Lost(Error):
    """The commit id names a commit lost to damage and given up by a repair."""

class NotFound(Error):
    """The conversation does not exist (read-only operations never create one)."""

class Unavailable(Error):
    """The store's database cannot be reached; nothing was acknowledged: retry."""

class IndexDamaged(Error):
    """The recall index is damaged; the ledger is intact: Conversation.reindex() rebuilds it."""

@final
class Store:
    """A set of conversations: the embedded file store at a directory."""

    def __new__(
        cls,
        url: Union[str, "PathLike[str]"],
        *,
        writer_wait: Optional[float] = None,
        config: Optional[Union[str, "PathLike[str]"]] = None,
        redact_builtin: Optional[bool] = None,
        redact_env: Optional[bool] = None,
        redact_vars: Optional[Sequence[str]] = None,
        redact_patterns: Optional[Mapping[str, str]] = None,
    ) -> Store: ...
    def count(
        self,
        body: Union[bytes, str],
        *,
        format: Optional[WireFormat] = None,
        tokenizer: Optional[TokenizerName] = None,
    ) -> JsonDict:
        """Bytes and tokens of a request body, counted as the projector counts:
        {"bytes", "tokens", "tokenizer", "format", "tokens_exact", …}."""
    def conversation(self, name: str) -> Conversation:
        """The conversation `name`; nothing is created until its first commit."""
    def list(self) -> List[JsonDict]:
        """The store's conversations, newest activity first."""
    def gc(
        self,
        *,
        older_than: Optional[str] = None,
        keep_turns: Optional[int] = None,
        max_bytes: Optional[int] = None,
        include_pinned: bool = False,
        dry_run: bool = False,
    ) -> JsonDict:
        """Applies a retention policy to every conversation of the store."""
    def import_(
        self,
        data: Union[bytes, str],
        *,
        format: str = "ctxlog",
        conversation: Optional[str] = None,
    ) -> JsonDict:
        """Imports an export, an OpenAI or Anthropic message array, or a dataset."""
    def import_file(
        self,
        path: Union[str, "PathLike[str]"],
        *,
        format: str = "ctxlog",
        conversation: Optional[str] = None,
    ) -> JsonDict:
        """`import_` reading a file."""
    def close(self) -> None:
        """Releases the writer locks the store holds; later calls raise UsageError."""
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> Store: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

@final
class Conversation:
    """One conversation of a store; safe to share between threads."""

    @property
    def name(self) -> str: ...
    def commit(
        self,
        user: Optional[str] = None,
        assistant: Optional[str] = None,
        *,
        events: Optional[Sequence[Mapping[str, Any]]] = None,
        id: Optional[str] = None,
    ) -> JsonDict:
        """Commits one turn atomically and durably: {"first_seq", "last_seq", "replayed"}.

        A user or tool_result event may carry "parts": {"type": "text", "text"},
        {"type": "image", "url" | "data", "media_type", "detail"?} and
        {"type": "document", "data", "media_type": "application/pdf", "name"?}; base64
        "data" is stored once as an artifact and bad media raises BadInput."""
    def project(
        self,
        input: Optional[str] = None,
        *,
        max_tokens: Optional[int] = None,
        max_bytes: Optional[int] = None,
        format: WireFormat = "openai-chat",
        tokenizer: TokenizerName = "o200k",
        reserve_output: Optional[int] = None,
        recall: Optional[int] = None,
        recall_reserve: Optional[Mapping[str, float]] = None,
        policy: PolicyName = "auto",
        system: Optional[str] = None,
        model: Optional[str] = None,
        notice: bool = False,
        window: WindowName = "sliding",
        low_water: Optional[float] = None,
        cache_hints: bool = False,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
        recall_tool: bool = False,
    ) -> Tuple[bytes, JsonDict]:
        """The exact request body for one model call, and its report. Without input, the
        open turn (ending in tool results) is projected: the agent loop's next call. The
        keyword arguments are the fields of the server's projection request (None: the
        field's default); `recall_reserve` is {"fraction": 0.25} or {"amount": N}. With
        window="stable" the first kept turn stays fixed while the suffix from it fits (then
        moves forward by a block, down to `low_water` of the budget, default 0.8), what varies
        per call goes last, and the report's "stable_prefix" {"bytes", "tokens", "block"} says
        where the shared prefix ends; `cache_hints` writes provider cache hints there, the
        kind the model table gives the model (else the format's default; the report's
        "cache_hints" {"kind", "breakpoints", "source"} says which)."""
    def project_dict(
        self,
        input: Optional[str] = None,
        *,
        max_tokens: Optional[int] = None,
        max_bytes: Optional[int] = None,
        format: WireFormat = "openai-chat",
        tokenizer: TokenizerName = "o200k",
        reserve_output: Optional[int] = None,
        recall: Optional[int] = None,
        recall_reserve: Optional[Mapping[str, float]] = None,
        policy: PolicyName = "auto",
        system: Optional[str] = None,
        model: Optional[str] = None,
        notice: bool = False,
        window: WindowName = "sliding",
        low_water: Optional[float] = None,
        cache_hints: bool = False,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
        recall_tool: bool = False,
    ) -> Tuple[JsonDict, JsonDict]:
        """Like project, with the body parsed into a dict for an SDK."""
    def recall(
        self,
        query: str = "",
        *,
        limit: int = ...,
        seq: Optional[int] = None,
        offset: int = 0,
    ) -> JsonDict:
        """Searches the history: {"query", "hits", "next_offset", "note"}. Each hit is
        {"seq", "kind", "tool"?, "status"?, "page", "pages", "char_start", "char_end", "ts_ms",
        "score", "text", "other_pages"?}: a ranked search returns one hit per event, its best
        page, and names the event's other matching pages in "other_pages"."""
    def erase(
        self,
        *,
        seqs: Optional[Tuple[int, int]] = None,
        commit_id: Optional[str] = None,
        last: Optional[int] = None,
        all: bool = False,
        reason: Optional[str] = None,
    ) -> JsonDict:
        """Erases a seq range (widened to whole turns), a commit's turns, the newest ``last``
        events exactly (a retraction), or the whole conversation, for real."""
    def retract(self, last: int = 1, *, reason: Optional[str] = None) -> JsonDict:
        """Takes back the newest ``last`` events (tombstones not counted), exactly: not
        widened to whole turns, under one tombstone; the turn stays open. Raises UsageError,
        with nothing changed, when the conversation holds fewer."""
    def gc(
        self,
        *,
        older_than: Optional[str] = None,
        keep_turns: Optional[int] = None,
        max_bytes: Optional[int] = None,
        include_pinned: bool = False,
        dry_run: bool = False,
    ) -> JsonDict:
        """Erases whole old turns by policy (retention tombstones); dry_run writes nothing."""
    def log(self, *, start: int = 1, limit: Optional[int] = None) -> List[JsonDict]:
        """The events in seq order."""
    def verify(self) -> JsonDict:
        """Checks every record, artifact and the recall index; raises Corrupt for damaged
        records or artifacts; ``verdict`` is ``ok`` or ``attention`` (a torn tail, the sidecar
        or the recall index, or a leftover needs attention: see the report)."""
    def reindex(self) -> JsonDict:
        """Rebuilds the recall index from the ledger."""
    def repair(self, *, accept_loss: bool = False) -> JsonDict:
        """Plans the repair of a damaged conversation (a dry run); ``accept_loss=True``
        carries it out: intact records kept, lost seqs covered by loss records."""
    def export(self, *, salvage: bool = False) -> bytes:
        """Every event as JSON Lines, artifacts inlined. ``salvage=True`` on a damaged
        conversation: every intact record, each damaged range as a ``{"damaged": …}`` line
        where it lies; nothing in the store changes."""
    def import_(self, data: Union[bytes, str], *, format: str = "ctxlog") -> JsonDict:
        """Imports an export or an OpenAI or Anthropic message array into this conversation."""
    def import_file(
        self, path: Union[str, "PathLike[str]"], *, format: str = "ctxlog"
    ) -> JsonDict:
        """`import_` reading a file."""
    def recall_tool_definition(self, format: WireFormat = "openai-chat") -> JsonDict:
        """The recall tool's definition in the format's tool shape."""
    def answer_recall_tool(self, arguments: Union[str, Mapping[str, Any]]) -> str:
        """The recall tool's JSON result for the model's call arguments."""
