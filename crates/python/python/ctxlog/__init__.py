"""ctxlog: a durable conversation ledger that builds the exact LLM request body for a budget.

Every confirmed turn is kept in a checksummed ledger; for each model call, ``project`` builds
the exact request body (OpenAI chat or Anthropic messages JSON) that fits a byte and/or token
budget, and ``recall`` finds what a narrow body left out. A thin native module over the same
operations as the ``ctxlog`` command line::

    import ctxlog

    with ctxlog.Store("./.ctxlog") as store:
        chat = store.conversation("chat1")
        chat.commit(user="My code is ZX-81.", assistant="Noted.")
        body, report = chat.project(input="What is my code?", max_bytes=8192)
"""

from typing import Any, Dict, List, Literal, TypedDict, Union

from ._ctxlog import (
    RECALL_DEFAULT_LIMIT,
    RECALL_MAX_LIMIT,
    BadInput,
    Busy,
    Conflict,
    Conversation,
    Corrupt,
    Error,
    Locked,
    Lost,
    MandatoryExceedsBudget,
    NotFound,
    Store,
    Unavailable,
    IndexDamaged,
    UsageError,
    __version__,
)

#: The wire formats a body can be projected in.
WireFormat = Literal["openai-chat", "anthropic-messages", "openai-responses"]
#: The tokenizers budgets and reports count with.
TokenizerName = Literal["o200k", "cl100k", "o200k_base", "cl100k_base"]
#: The projection policies.
PolicyName = Literal["auto", "turns", "agent"]
#: Where a projection's kept history starts: the newest turns that fit, or a window whose
#: first kept turn stays fixed so consecutive bodies share their prefix (prompt caching).
WindowName = Literal["sliding", "stable"]
#: A JSON object as Python sees it (requests' event dicts, responses, reports).
JsonDict = Dict[str, Any]

#: How a tool call ended (``interrupted`` is written by ctxlog only, for a call whose result
#: never arrived).
ToolStatus = Literal["ok", "error", "interrupted"]


class _UserRequired(TypedDict):
    kind: Literal["user"]
    text: str


class UserEvent(_UserRequired, total=False):
    """``{"kind": "user", "text"[, "parts"]}``: opens a turn; the text must not be blank
    unless the event carries ``parts``: ``{"type": "text", "text"}``, ``{"type": "image",
    "url" | "data", "media_type", "detail"?}``, ``{"type": "document", "data", "media_type",
    "name"?}`` (base64 ``data`` is stored once as an artifact; ``log()`` shows the reference)."""

    parts: List[JsonDict]


class ProviderItem(TypedDict):
    """``{"format", "item"}``: the provider's own item for a reply or call (a Responses output
    ``message`` or ``function_call``, an Anthropic ``text`` or ``tool_use`` block), kept whole
    and sent verbatim in its own format only; it must say what the event says."""

    format: Literal["openai-responses", "anthropic-messages"]
    item: JsonDict


class _AssistantRequired(TypedDict):
    kind: Literal["assistant"]
    text: str


class AssistantEvent(_AssistantRequired, total=False):
    """``{"kind": "assistant", "text"[, "provider_item"]}``: a reply; the text must not be
    blank."""

    provider_item: ProviderItem


class _ToolCallRequired(TypedDict):
    kind: Literal["tool_call"]
    call_id: str
    tool: str
    arguments: Any


class ToolCallEvent(_ToolCallRequired, total=False):
    """``{"kind": "tool_call", "call_id", "tool", "arguments"[, "provider_item"]}``:
    ``call_id`` unique in its turn; ``arguments`` any JSON (a string is sent as given)."""

    provider_item: ProviderItem


class _ToolResultRequired(TypedDict):
    kind: Literal["tool_result"]
    call_id: str
    tool: str
    status: ToolStatus
    text: str


class ToolResultEvent(_ToolResultRequired, total=False):
    """``{"kind": "tool_result", "call_id", "tool", "status", "text"[, "exit_code"]}``: answers
    the call ``call_id`` of the same turn, naming its tool. In ``log()``, an output stored as
    an artifact has an excerpt as ``text`` and an ``artifact`` reference."""

    exit_code: int
    artifact: JsonDict
    parts: List[JsonDict]


class _NoteRequired(TypedDict):
    kind: Literal["note"]
    text: str


class NoteEvent(_NoteRequired, total=False):
    """``{"kind": "note", "text"[, "pinned", "supersedes"]}``: a requirement or fact; a pinned
    note is in every projection; ``supersedes`` is the seq of the note it replaces."""

    pinned: bool
    supersedes: int


class OpaqueEvent(TypedDict):
    """``{"kind": "opaque", "format", "item"}``: a provider item stored as given and sent
    back only in its own format (``item`` has a ``type``)."""

    kind: Literal["opaque"]
    format: Literal["openai-responses", "anthropic-messages"]
    item: JsonDict


#: An event as ``commit(events=[...])`` takes it.
Event = Union[UserEvent, AssistantEvent, ToolCallEvent, ToolResultEvent, NoteEvent, OpaqueEvent]

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
    "Conversation",
    "Corrupt",
    "Error",
    "JsonDict",
    "Locked",
    "Lost",
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
