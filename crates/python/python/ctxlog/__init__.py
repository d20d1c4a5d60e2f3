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

from typing import Any, Dict, Literal

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
#: A JSON object as Python sees it (requests' event dicts, responses, reports).
JsonDict = Dict[str, Any]

__all__ = [
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
    "WireFormat",
    "__version__",
]
