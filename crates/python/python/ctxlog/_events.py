"""What the framework adapters share: a conversation's events as a session reads them, and
the tool calls of its open turn. No framework is imported here."""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Dict, List, Mapping, Sequence, Union

from . import NotFound, Store
from .aio import AsyncConversation

Event = Dict[str, Any]


def _holds_artifact(event: Mapping[str, Any]) -> bool:
    """Whether the log shows `event` without bytes stored as artifacts: a tool result's
    output (the log holds its excerpt), a part's bytes, a provider item's ``data:`` URL."""
    given = event.get("provider_item")
    return (
        "artifact" in event
        or any("artifact" in p for p in event.get("parts", ()))
        or (isinstance(given, Mapping) and bool(given.get("offloaded")))
    )


async def read_events(conversation: AsyncConversation) -> List[Event]:
    """Every event of `conversation` but ctxlog's own markers (tombstones), in order, whole:
    the log holds an excerpt of a tool output stored as an artifact and references to media
    bytes, the export the whole text and the bytes. Empty for a conversation that does not
    exist yet."""
    try:
        events = await conversation.log()
    except NotFound:
        return []
    if any(_holds_artifact(e) for e in events):
        raw = await conversation.export()
        events = [json.loads(line) for line in raw.splitlines() if line.strip()]
    return [e for e in events if e.get("kind") != "system"]


def open_turn_tools(events: Sequence[Mapping[str, Any]]) -> Dict[str, str]:
    """Call id -> tool name of the tool calls since the last user event (a tool result
    names its call's tool, and answers a call of its own turn)."""
    tools: Dict[str, str] = {}
    for event in events:
        if event.get("kind") == "user":
            tools = {}
        elif event.get("kind") == "tool_call":
            tools[event["call_id"]] = event["tool"]
    return tools


_stores: Dict[str, Store] = {}
_stores_lock = threading.Lock()


def shared_store(store: Union[Store, str, "os.PathLike[str]", None]) -> Store:
    """`store` itself, or the one open :class:`ctxlog.Store` of this process at that URL or
    directory (default ``./.ctxlog``): a store holds its conversations' writer locks, so a
    second store opened on the same place would find them locked."""
    if isinstance(store, Store):
        return store
    key = os.fspath(store) if store is not None else "./.ctxlog"
    if "://" not in key:
        key = os.path.abspath(key)
    with _stores_lock:
        found = _stores.get(key)
        if found is None or found.closed:
            found = _stores[key] = Store(key)
        return found


def stored_overlap(stored: Sequence[Any], given: Sequence[Any]) -> int:
    """How many leading `given` entries the `stored` ones end with (both in one comparable
    form): a framework resends the history it read (perhaps only its newest part), then what
    it has not saved yet, which starts at this index."""
    for k in range(min(len(stored), len(given)), 0, -1):
        if list(given[:k]) == list(stored[len(stored) - k :]):
            return k
    return 0
