"""LangChain adapters: a chat message history kept in a ctxlog conversation, and a budget
step that keeps whole turns.

Install with the ``langchain`` extra (``pip install 'ctxlog-ledger[langchain]'``); the core
``ctxlog`` package never imports LangChain. Adopting it in a ``RunnableWithMessageHistory``
app is one changed line (the history factory)::

    from ctxlog.langchain import CtxlogChatMessageHistory

    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: CtxlogChatMessageHistory(session_id, store="./.ctxlog"),
    )

Messages and events:

=====================================================  ====================================
message                                                events
=====================================================  ====================================
``HumanMessage``                                       ``user``
``AIMessage`` (with ``tool_calls``)                    ``assistant`` (when it has text), then
                                                       one ``tool_call`` per call
``ToolMessage``                                        ``tool_result`` of its call (status
                                                       ``error`` when the message's is)
``SystemMessage``                                      ``note``
=====================================================  ====================================

A message's text content comes back as given; a content of blocks is stored as the text of
its text blocks. Message ids and metadata are not kept.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
from typing import Any, Dict, List, Optional, Sequence, Union

from . import NotFound, Store
from ._events import open_turn_tools, read_events, shared_store, stored_overlap
from .aio import AsyncConversation

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
    from langchain_core.messages.tool import tool_call
except ImportError:  # pragma: no cover - depends on the environment
    raise ImportError(
        "ctxlog.langchain needs langchain-core: pip install 'ctxlog-ledger[langchain]'"
    )

Event = Dict[str, Any]


def _text(content: Union[str, List[Union[str, Dict[Any, Any]]]]) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)


def message_events(message: BaseMessage, tools: Dict[str, str]) -> List[Event]:
    """The events of one message; `tools` (call id -> tool name of the open turn's calls) is
    brought up to date."""
    text = _text(message.content)
    if isinstance(message, HumanMessage):
        tools.clear()
        return [{"kind": "user", "text": text}]
    if isinstance(message, SystemMessage):
        return [{"kind": "note", "text": text}]
    if isinstance(message, AIMessage):
        events: List[Event] = [{"kind": "assistant", "text": text}] if text.strip() else []
        for call in message.tool_calls:
            call_id = call.get("id") or ""
            tools[call_id] = call["name"]
            events.append(
                {"kind": "tool_call", "call_id": call_id, "tool": call["name"], "arguments": call["args"]}
            )
        return events
    if isinstance(message, ToolMessage):
        call_id = message.tool_call_id
        if call_id not in tools:
            raise ValueError(
                f"ToolMessage {call_id!r} answers no tool call of the open turn: add the "
                "AIMessage that made the call first"
            )
        status = "error" if message.status == "error" else "ok"
        return [
            {"kind": "tool_result", "call_id": call_id, "tool": tools[call_id], "status": status, "text": text}
        ]
    raise ValueError(f"{type(message).__name__} has no place in a ctxlog conversation")


def events_to_messages(events: Sequence[Event]) -> List[BaseMessage]:
    """The messages a conversation's events stand for: an assistant event and the tool calls
    right after it make one ``AIMessage``."""
    messages: List[BaseMessage] = []
    for event in events:
        kind = event.get("kind")
        if kind == "user":
            messages.append(HumanMessage(content=event["text"]))
        elif kind == "note":
            messages.append(SystemMessage(content=event["text"]))
        elif kind == "assistant":
            messages.append(AIMessage(content=event["text"]))
        elif kind == "tool_call":
            arguments = event["arguments"]
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    arguments = {"input": arguments}
            call = tool_call(name=event["tool"], args=arguments, id=event["call_id"])
            last = messages[-1] if messages else None
            if isinstance(last, AIMessage):
                last.tool_calls.append(call)
            else:
                messages.append(AIMessage(content="", tool_calls=[call]))
        elif kind == "tool_result":
            status = "error" if event.get("status") != "ok" else "success"
            messages.append(
                ToolMessage(content=event["text"], tool_call_id=event["call_id"], status=status)
            )
    return messages


class CtxlogChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat message history stored as the ctxlog conversation ``conversation``
    of ``store`` (a :class:`ctxlog.Store`, or a directory or ``postgres://`` URL to open one
    at). ``add_messages`` commits its messages as one atomic commit; ``clear`` erases the
    conversation. The async methods run in a worker thread and never block the loop."""

    def __init__(self, conversation: str, store: Union[Store, str, None] = None) -> None:
        self.store = shared_store(store)
        self.conversation = AsyncConversation(self.store.conversation(conversation))

    async def aget_messages(self) -> List[BaseMessage]:
        return events_to_messages(await read_events(self.conversation))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        if not messages:
            return
        tools = open_turn_tools(await read_events(self.conversation))
        events = [e for m in messages for e in message_events(m, tools)]
        if events:
            await self.conversation.commit(events=events)

    async def aclear(self) -> None:
        try:
            await self.conversation.erase(all=True)
        except NotFound:
            pass

    @property
    def messages(self) -> List[BaseMessage]:  # type: ignore[override]
        result: List[BaseMessage] = _blocking(self.aget_messages)
        return result

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        _blocking(lambda: self.aadd_messages(messages))

    def clear(self) -> None:
        _blocking(self.aclear)


def _in_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _blocking(make: Any) -> Any:
    """Runs the coroutine `make()` to its end from synchronous code, in a thread of its own
    when this thread already runs an event loop."""
    if not _in_loop():
        return asyncio.run(make())
    result: List[Any] = []
    failure: List[BaseException] = []

    def work() -> None:
        try:
            result.append(asyncio.run(make()))
        except BaseException as error:  # re-raised in the caller's thread
            failure.append(error)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


def fit_messages(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: Optional[int] = None,
    max_bytes: Optional[int] = None,
    tokenizer: Optional[str] = None,
    model: Optional[str] = None,
) -> List[BaseMessage]:
    """The messages that fit the budget, chosen by ctxlog's projector (the ``turns`` policy
    on the ``openai-chat`` body of the messages): leading ``SystemMessage``s and the current
    input (a final ``HumanMessage``, or the open turn ending in ``ToolMessage``s) are always
    kept; older turns are kept whole, newest first, while they fit, so a ``ToolMessage`` is
    never separated from the ``AIMessage`` that made its call (``trim_messages`` can cut
    there, and providers refuse such a history); a history that ends in a reply is fitted
    newest turns first. Returns the given message objects, in order.
    Raises :class:`ctxlog.MandatoryExceedsBudget` when the kept part alone does not fit."""
    messages = list(messages)
    lead = 0
    while lead < len(messages) and isinstance(messages[lead], SystemMessage):
        lead += 1
    system = "\n\n".join(_text(m.content) for m in messages[:lead]) or None
    rest = messages[lead:]
    current: Optional[str] = None
    if rest and isinstance(rest[-1], HumanMessage):
        current = _text(rest[-1].content)
        history = rest[:-1]
    else:
        history = rest
    # A history that ends in a reply has no current input: a one-character stand-in takes
    # its place (counted, so the budget holds), and is not returned.
    stand_in = "." if current is None and not (rest and isinstance(rest[-1], ToolMessage)) else None
    owner: List[int] = []  # owner[seq - 1]: the index in `history` of the event's message
    events: List[Event] = []
    tools: Dict[str, str] = {}
    for index, message in enumerate(history):
        for event in message_events(message, tools):
            events.append(event)
            owner.append(index)
    options: Dict[str, Any] = {"max_tokens": max_tokens, "max_bytes": max_bytes, "model": model}
    if tokenizer is not None:
        options["tokenizer"] = tokenizer
    with tempfile.TemporaryDirectory() as scratch, Store(scratch) as store:
        conversation = store.conversation("fit")
        if events:
            conversation.commit(events=events)
        _body, report = conversation.project(
            current if stand_in is None else stand_in, system=system, policy="turns", **options
        )
    kept = {
        owner[seq - 1]
        for span in report["kept"]
        for seq in range(span["first"], span["last"] + 1)
        if seq <= len(owner)
    }
    chosen = [m for i, m in enumerate(history) if i in kept]
    return messages[:lead] + chosen + (rest[-1:] if current is not None else [])


def _shape(message: BaseMessage) -> Any:
    """What a stored message keeps (kind, text, calls), to tell stored messages from new."""
    calls = [(c["name"], c.get("id")) for c in getattr(message, "tool_calls", [])]
    return (message.type, _text(message.content).strip(), calls, getattr(message, "tool_call_id", None))


def _unstored(stored: Sequence[BaseMessage], messages: Sequence[BaseMessage]) -> List[BaseMessage]:
    """The tail of `messages` the conversation does not hold yet: what follows the longest
    run of leading `messages` that the stored ones end with."""
    k = stored_overlap([_shape(m) for m in stored], [_shape(m) for m in messages])
    return list(messages[k:])


def budget_middleware(
    conversation: str,
    store: Union[Store, str, None] = None,
    *,
    max_tokens: Optional[int] = None,
    max_bytes: Optional[int] = None,
    tokenizer: Optional[str] = None,
) -> Any:
    """An agent middleware for LangChain v1 agents (``create_agent(...,
    middleware=[budget_middleware("user-42", max_tokens=8000)])``; needs the ``langchain``
    package): before each model call it stores the agent's messages the conversation does
    not hold yet, and sends the model the messages :func:`fit_messages` keeps within the
    budget (the agent's state keeps them all); after each call it stores the reply."""
    from langchain.agents.middleware import AgentMiddleware

    history = CtxlogChatMessageHistory(conversation, store=store)

    def store_new(messages: Sequence[BaseMessage]) -> None:
        new = _unstored(history.messages, messages)
        if new:
            history.add_messages(new)

    def wrap_model_call(self: Any, request: Any, handler: Any) -> Any:
        store_new(request.messages)
        system = [request.system_message] if request.system_message is not None else []
        fitted = fit_messages(
            system + list(request.messages),
            max_tokens=max_tokens,
            max_bytes=max_bytes,
            tokenizer=tokenizer,
        )
        return handler(request.override(messages=fitted[len(system) :]))

    def after_model(self: Any, state: Any, runtime: Any) -> None:
        store_new(state["messages"])

    hooks = {"wrap_model_call": wrap_model_call, "after_model": after_model}
    return type("CtxlogBudget", (AgentMiddleware,), hooks)()
