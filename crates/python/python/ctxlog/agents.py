"""OpenAI Agents SDK adapters: a ``Session`` whose history is a ctxlog conversation.

Install with the ``agents`` extra (``pip install 'ctxlog-ledger[agents]'``); the core
``ctxlog`` package never imports the SDK. An app changes one line to adopt it::

    from agents import Agent, Runner
    from ctxlog.agents import CtxlogSession

    session = CtxlogSession("user-42", store="./.ctxlog")
    result = await Runner.run(agent, "What is my code?", session=session)

Each item the runner saves becomes one ctxlog event of the conversation named by the
session id, so ``ctxlog log``, ``project``, ``recall``, the inspector and erasure all work on
it:

============================================  ==========================================
item                                          event
============================================  ==========================================
``{"role": "user", "content": ...}``          ``user`` (content text; text parts joined;
                                              images and inline PDFs as its parts)
``{"role": "assistant", "content": ...}``     ``assistant`` (text parts joined)
(an output ``message`` too)
``{"role": "system"|"developer", ...}``       ``note`` (text parts joined; unpinned: sent
                                              in its place, as the SDK sends it)
``function_call``                             ``tool_call`` (``arguments`` kept as the
                                              string the model sent)
``function_call_output``                      ``tool_result`` of that call (``ok``)
any other item (``reasoning``, …)             ``opaque`` (``openai-responses``), as given
============================================  ==========================================

(Text parts are ``input_text`` and ``output_text`` parts' ``text`` and ``refusal`` parts'
``refusal``, joined by newlines.)

``get_items`` gives the items back in order, as the SDK's own ``SQLiteSession`` does: an item
the event alone would not give back exactly (a model's output ``message`` or
``function_call`` with its ``id``, ``status``, ``annotations`` and ``logprobs``; a user,
system or developer message whose content is a list of parts — ``input_text``,
``input_image``, ``input_file``, …; a ``function_call_output`` with an ``id``, a ``status``
or any other key, or a list output) is kept whole as the event's ``provider_item`` and comes
back exactly as given, and is sent back verbatim when a projection is in the
``openai-responses`` format (any other format gets the event's text, call or result). A user
message's images (``input_image``, by ``data:`` URL or any other URL) and inline PDF files
(``input_file`` with a ``data:application/pdf`` ``file_data``) become the event's media
parts too, so every format sends them; the bytes of a ``data:`` URL are stored once, as an
artifact both the part and the item reference, and the item's URL is given back byte for
byte. Items in the form ctxlog writes
back (``{"role": "user", "content": "..."}``, ``{"type": "function_call_output", "call_id",
"output"}``) and every opaque item come back exactly as given too. With redaction on, items
come back equal up to the redaction markers (a provider item's strings are redacted like tool
arguments; its ids, names and ``data:`` URLs are kept).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Union, cast

from . import NotFound, Store
from ._events import open_turn_tools, read_events, shared_store, stored_overlap
from .aio import AsyncConversation

try:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
    from agents.run_config import CallModelData, ModelInputData
except ImportError:  # pragma: no cover - depends on the environment
    raise ImportError(
        "ctxlog.agents needs the OpenAI Agents SDK: pip install 'ctxlog-ledger[agents]'"
    )

Item = Dict[str, Any]
RESPONSES = "openai-responses"


def _with_provider_item(event: Item, item: Mapping[str, Any]) -> Item:
    """`event` keeping `item` whole as its provider item, unless the event already gives
    `item` back exactly (then nothing more is stored)."""
    if event_to_item(event) != item:
        event["provider_item"] = {"format": RESPONSES, "item": dict(item)}
    return event


_TEXT_PARTS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}


def _text_of(content: Any) -> Optional[str]:
    """A message's text: a string content, or its text parts' text joined by newlines (the
    ledger checks a provider item's text by the same rule)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = []
    for part in content:
        key = _TEXT_PARTS.get(str(part.get("type"))) if isinstance(part, Mapping) else None
        text = part.get(key) if key is not None else None
        if isinstance(text, str):
            texts.append(text)
    return "\n".join(texts)


_DETAILS = ("low", "high", "auto")


def _media_parts(content: Any) -> List[Item]:
    """A message's media as event parts, in order: each ``input_image`` (a ``data:`` URL as
    base64 ``data`` with its ``media_type``, any other URL as ``url``; its ``detail``) and
    each ``input_file`` given inline as a PDF ``data:`` URL (a document). Files by id, and
    inline files of other types, stay the item's own: ctxlog cannot send them elsewhere."""
    if not isinstance(content, list):
        return []
    out: List[Item] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "input_image" and isinstance(part.get("image_url"), str):
            url = part["image_url"]
            head, sep, data = url.partition(";base64,")
            image: Item = {"type": "image"}
            if url.startswith("data:") and sep:
                image.update(data=data, media_type=head[len("data:") :])
            else:
                image["url"] = url
            if part.get("detail") in _DETAILS:
                image["detail"] = part["detail"]
            out.append(image)
        elif kind == "input_file" and isinstance(part.get("file_data"), str):
            head, sep, data = part["file_data"].partition(";base64,")
            if head == "data:application/pdf" and sep:
                document: Item = {"type": "document", "data": data, "media_type": "application/pdf"}
                if isinstance(part.get("filename"), str):
                    document["name"] = part["filename"]
                out.append(document)
    return out


def item_to_event(item: Mapping[str, Any], tools: Mapping[str, str]) -> Item:
    """The ctxlog event for one Responses input `item`; `tools` maps the call ids of the open
    turn's tool calls to their tool names (a result names its call's tool)."""
    kind = item.get("type")
    role = item.get("role")
    if kind in (None, "message") and role in ("user", "assistant", "system", "developer"):
        text = _text_of(item.get("content"))
        if text is not None:
            event_kind = {"user": "user", "assistant": "assistant"}.get(str(role), "note")
            event: Item = {"kind": event_kind, "text": text}
            parts = _media_parts(item.get("content")) if event_kind == "user" else []
            if parts:
                event["parts"] = parts
            return _with_provider_item(event, item)
    if kind == "function_call":
        call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
        if isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, str):
            call = {"kind": "tool_call", "call_id": call_id, "tool": name, "arguments": arguments}
            return _with_provider_item(call, item)
    if kind == "function_call_output":
        call_id, output = item.get("call_id"), item.get("output")
        if isinstance(call_id, str) and call_id in tools:
            text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
            result = {
                "kind": "tool_result",
                "call_id": call_id,
                "tool": tools[call_id],
                "status": "ok",
                "text": text,
            }
            return _with_provider_item(result, item)
        raise ValueError(
            f"function_call_output {call_id!r} answers no function_call of the open turn: "
            "add the call first"
        )
    return {"kind": "opaque", "format": RESPONSES, "item": dict(item)}


def event_to_item(event: Mapping[str, Any]) -> Optional[Item]:
    """The Responses input item an event of a session stands for (None for ctxlog's own
    markers: tombstones): its provider item when it has one of this format."""
    kind = event.get("kind")
    given = event.get("provider_item")
    if isinstance(given, Mapping) and given.get("format") == RESPONSES:
        return dict(given["item"])
    if kind in ("user", "assistant"):
        return {"role": kind, "content": event["text"]}
    if kind == "note":
        return {"role": "system", "content": event["text"]}
    if kind == "tool_call":
        arguments = event["arguments"]
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        return {
            "type": "function_call",
            "call_id": event["call_id"],
            "name": event["tool"],
            "arguments": arguments,
        }
    if kind == "tool_result":
        return {"type": "function_call_output", "call_id": event["call_id"], "output": event["text"]}
    if kind == "opaque":
        return dict(event["item"])
    return None


class CtxlogSession:
    """An Agents SDK ``Session`` stored in ctxlog: the conversation named ``session_id`` of
    ``store`` (a :class:`ctxlog.Store`, or a directory or ``postgres://`` URL to open one at).

    Sessions are isolated (one conversation each). ``add_items`` commits its items as one
    atomic commit; concurrent calls lose nothing (the store queues them). ``pop_item``
    retracts the newest event for real (a tombstone covers exactly it, not its turn);
    ``clear_session`` erases the whole conversation. Every method accepts the SDK's optional
    ``wrapper`` keyword and ignores it.
    """

    def __init__(
        self,
        session_id: str,
        store: Union[Store, str, None] = None,
        *,
        session_settings: Optional[SessionSettings] = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        owned = shared_store(store)
        self.store = owned
        self.conversation = AsyncConversation(owned.conversation(session_id))
        # One lock per event loop: an asyncio lock belongs to the loop it first waits in,
        # and a session may outlive a loop (each asyncio.run is a new one).
        self._locks: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]" = (
            weakref.WeakKeyDictionary()
        )
        # Items a budget filter stored before the runner saved them: the runner's own
        # add_items of them is then skipped, so nothing is stored twice.
        self._ahead: List[Item] = []

    def _lock(self) -> asyncio.Lock:
        """This session's lock in the running loop: its reads and writes run one at a time."""
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def _events(self) -> List[Item]:
        return await read_events(self.conversation)

    async def get_items(
        self, limit: Optional[int] = None, wrapper: Any = None
    ) -> List[TResponseInputItem]:
        """The session's items, oldest first; with ``limit``, the newest ``limit`` (0: none)."""
        limit = resolve_session_limit(limit, self.session_settings)
        items = [i for e in await self._events() if (i := event_to_item(e)) is not None]
        if limit is not None:
            items = items[len(items) - limit :] if limit > 0 else []
        return cast(List[TResponseInputItem], items)

    async def add_items(
        self, items: Sequence[Union[TResponseInputItem, Mapping[str, Any]]], wrapper: Any = None
    ) -> None:
        """Stores ``items`` in order, as one commit."""
        async with self._lock():
            pending: List[Item] = [dict(i) for i in items]
            while pending and self._ahead and kept_form(pending[0]) == kept_form(self._ahead[0]):
                pending.pop(0)
                self._ahead.pop(0)
            if not pending:
                return
            tools = open_turn_tools(await self._events())
            events = []
            for item in pending:
                event = item_to_event(item, tools)
                if event["kind"] == "user":
                    tools = {}
                elif event["kind"] == "tool_call":
                    tools[event["call_id"]] = event["tool"]
                events.append(event)
            await self.conversation.commit(events=events)

    async def pop_item(self, wrapper: Any = None) -> Optional[TResponseInputItem]:
        """Removes the newest item for real and returns it; None when the session is empty."""
        async with self._lock():
            events = await self._events()
            if not events:
                return None
            await self.conversation.retract(1, reason="Agents SDK session: pop_item")
            return cast(Optional[TResponseInputItem], event_to_item(events[-1]))

    async def clear_session(self, wrapper: Any = None) -> None:
        """Erases every item of the session (the conversation is removed)."""
        async with self._lock():
            try:
                await self.conversation.erase(all=True)
            except NotFound:
                pass


class _AnyCall(Dict[str, str]):
    """Tool names of calls not at hand: every call id answers (to compare items only)."""

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: str) -> str:
        return ""


def kept_form(item: Mapping[str, Any]) -> Optional[Item]:
    """`item` as a session gives it back (see the module docs): what two items are compared
    by when one was stored and the other not."""
    return event_to_item(item_to_event(item, _AnyCall()))


async def agent_tool_definitions(agent: Any, context: Any = None) -> List[Item]:
    """`agent`'s tools, the tools of the MCP servers attached to it (listed by the SDK's own
    MCP util, as the runner lists them; `context` is the run's context, which the servers'
    tool filters may read) and its handoffs, as the Responses API receives them, by the SDK's
    own converter (every tool the agent lists, enabled or not: counting one the model is not
    sent only leaves room unused)."""
    from agents.handoffs import Handoff, handoff
    from agents.models.openai_responses import Converter
    from agents.run_context import RunContextWrapper

    tools = list(getattr(agent, "tools", []))
    if getattr(agent, "mcp_servers", None):
        tools += await agent.get_mcp_tools(RunContextWrapper(context=context))
    handoffs = [h if isinstance(h, Handoff) else handoff(h) for h in getattr(agent, "handoffs", [])]
    converted = Converter.convert_tools(tools, handoffs)
    return [dict(t) for t in converted.tools]


def budget_filter(
    *,
    session: CtxlogSession,
    max_tokens: Optional[int] = None,
    max_bytes: Optional[int] = None,
    model: Optional[str] = None,
    tokenizer: Optional[str] = None,
    policy: Optional[str] = None,
    recall: Optional[int] = None,
    notice: bool = False,
) -> Callable[[CallModelData[Any]], Awaitable[ModelInputData]]:
    """A ``RunConfig(call_model_input_filter=...)`` that replaces each model input with
    ctxlog's projection of ``session`` within ``max_tokens`` and/or ``max_bytes`` (the
    ``openai-responses`` body: instructions, input and the tool definitions of the agent and
    of its MCP servers, counted as the SDK sends them, so the whole request stays within the
    budget):
    the instructions and the current turn are kept, older turns are kept whole, newest first,
    tool calls with their results, as the budget allows (``policy``, ``recall`` and
    ``notice`` as for :meth:`ctxlog.Conversation.project`). Items of the current run the
    runner has not saved yet are stored first, and the runner's own save of them later
    stores nothing twice. Raises :class:`ctxlog.MandatoryExceedsBudget` when the
    instructions and the current turn alone do not fit::

        run_config = RunConfig(call_model_input_filter=budget_filter(session=session,
                                                                     max_tokens=8000))
    """

    async def fit(data: CallModelData[Any]) -> ModelInputData:
        items = list(data.model_data.input)
        async with session._lock():
            events = await session._events()
        stored = [i for e in events if (i := event_to_item(e)) is not None]
        unsaved = items[stored_overlap(stored, [kept_form(i) for i in items]) :]
        if unsaved:
            await session.add_items(unsaved)
            session._ahead.extend(dict(i) for i in unsaved)
            events = await session._events()
        last = events[-1] if events else None
        current = None
        if last is not None and last.get("kind") == "user" and last["text"]:
            current = last["text"]
        options: Dict[str, Any] = {
            "format": "openai-responses",
            "max_tokens": max_tokens,
            "max_bytes": max_bytes,
            "system": data.model_data.instructions,
            "model": model,
            "recall": recall,
            "notice": notice,
            "tools": await agent_tool_definitions(data.agent, data.context),
        }
        if tokenizer is not None:
            options["tokenizer"] = tokenizer
        if policy is not None:
            options["policy"] = policy
        body, _report = await session.conversation.project_dict(current, **options)
        input_items = list(body["input"])
        if current is not None and len(input_items) >= 2 and last is not None:
            # The stored current message was projected once as history (as given, when it
            # was kept whole) and once as the input: the model gets it once, as stored (the
            # body only shrinks).
            given = last.get("provider_item")
            stored = given["item"] if given is not None else input_items[-1]
            if input_items[-2] == stored:
                del input_items[-1]
        return ModelInputData(input=input_items, instructions=body.get("instructions"))

    return fit
