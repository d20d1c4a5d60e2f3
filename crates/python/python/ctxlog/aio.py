"""asyncio variants of the ctxlog API: the same operations, awaitable, never blocking the loop.

Each call runs the native one in a worker thread (``asyncio.to_thread``); the native call
releases the GIL for its I/O, so other tasks and threads run meanwhile. Commits from many
tasks to one conversation are queued and written in batches by the store, as from threads::

    import ctxlog
    from ctxlog.aio import AsyncStore

    async def main() -> None:
        store = AsyncStore(ctxlog.Store("./.ctxlog"))
        chat = store.conversation("chat1")
        await chat.commit(user="My code is ZX-81.", assistant="Noted.")
        body, report = await chat.project(input="What is my code?", max_tokens=2000)
"""

from __future__ import annotations

import asyncio
from os import PathLike
from typing import Any, Callable, List, Tuple, TypeVar, Union

from . import Conversation, Store

T = TypeVar("T")
JsonDict = dict[str, Any]


async def _run(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.to_thread(call, *args, **kwargs)


class AsyncConversation:
    """One conversation's operations as coroutines. ``sync`` is the blocking
    :class:`ctxlog.Conversation` underneath; each method takes the same arguments as its
    namesake there and returns the same value."""

    def __init__(self, conversation: Conversation) -> None:
        self.sync = conversation

    @property
    def name(self) -> str:
        return self.sync.name

    async def commit(self, *args: Any, **kwargs: Any) -> JsonDict:
        return await _run(self.sync.commit, *args, **kwargs)

    async def project(self, *args: Any, **kwargs: Any) -> Tuple[bytes, JsonDict]:
        return await _run(self.sync.project, *args, **kwargs)

    async def project_dict(self, *args: Any, **kwargs: Any) -> Tuple[JsonDict, JsonDict]:
        return await _run(self.sync.project_dict, *args, **kwargs)

    async def recall(self, *args: Any, **kwargs: Any) -> JsonDict:
        return await _run(self.sync.recall, *args, **kwargs)

    async def log(self, *, start: int = 1, limit: Union[int, None] = None) -> List[JsonDict]:
        return await _run(self.sync.log, start=start, limit=limit)

    async def erase(self, **kwargs: Any) -> JsonDict:
        return await _run(self.sync.erase, **kwargs)

    async def retract(self, last: int = 1, *, reason: Union[str, None] = None) -> JsonDict:
        return await _run(self.sync.retract, last, reason=reason)

    async def gc(self, **kwargs: Any) -> JsonDict:
        return await _run(self.sync.gc, **kwargs)

    async def verify(self) -> JsonDict:
        return await _run(self.sync.verify)

    async def reindex(self) -> JsonDict:
        return await _run(self.sync.reindex)

    async def export(self, *, salvage: bool = False) -> bytes:
        return await _run(self.sync.export, salvage=salvage)

    async def import_(self, data: Union[bytes, str], *, format: str = "ctxlog") -> JsonDict:
        return await _run(self.sync.import_, data, format=format)


class AsyncStore:
    """A :class:`ctxlog.Store` (or the URL or directory to open one at) whose operations
    are coroutines. ``sync`` is the store underneath."""

    def __init__(self, store: Union[Store, str, "PathLike[str]"]) -> None:
        self.sync = store if isinstance(store, Store) else Store(store)

    def conversation(self, name: str) -> AsyncConversation:
        """The conversation ``name`` (nothing is created until its first commit)."""
        return AsyncConversation(self.sync.conversation(name))

    async def list(self) -> List[JsonDict]:
        return await _run(self.sync.list)

    async def gc(self, **kwargs: Any) -> JsonDict:
        return await _run(self.sync.gc, **kwargs)

    def close(self) -> None:
        self.sync.close()
