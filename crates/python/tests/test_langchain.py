"""The LangChain adapter: ``CtxlogChatMessageHistory`` round-trips LangChain's messages
(tool calls and results included) through a ctxlog conversation, serves
``RunnableWithMessageHistory`` with a fake chat model, and ``fit_messages`` keeps whole turns
within a budget where ``trim_messages`` can orphan a ``ToolMessage``. Offline: LangChain's
own ``GenericFakeChatModel``."""

import asyncio
import json
from pathlib import Path
from typing import Any, List, Sequence

import pytest

pytest.importorskip("langchain_core")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
    trim_messages,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder  # noqa: E402
from langchain_core.runnables.history import RunnableWithMessageHistory  # noqa: E402

import ctxlog  # noqa: E402
from ctxlog.langchain import CtxlogChatMessageHistory, fit_messages  # noqa: E402


def shape(messages: Sequence[BaseMessage]) -> List[Any]:
    out: List[Any] = []
    for m in messages:
        calls = [(c["name"], c["args"], c["id"]) for c in getattr(m, "tool_calls", [])]
        out.append((m.type, m.content, calls, getattr(m, "tool_call_id", None)))
    return out


def turn(i: int, output: str = "ok") -> List[BaseMessage]:
    call = {"name": "shell", "args": {"cmd": f"make step{i}"}, "id": f"call_{i}"}
    return [
        HumanMessage(content=f"run step {i}"),
        AIMessage(content="", tool_calls=[call]),
        ToolMessage(content=output, tool_call_id=f"call_{i}"),
        AIMessage(content=f"step {i} done"),
    ]


def test_messages_round_trip(store: ctxlog.Store) -> None:
    history = CtxlogChatMessageHistory("chat1", store=store)
    given: List[BaseMessage] = [
        SystemMessage(content="You are terse."),
        HumanMessage(content="héllo 🦙 '; DROP TABLE x; --"),
        AIMessage(
            content="Looking.",
            tool_calls=[{"name": "search", "args": {"q": "llamas", "n": 2}, "id": "c1"}],
        ),
        ToolMessage(content="3 results", tool_call_id="c1"),
        AIMessage(content="Found three."),
    ]
    history.add_messages(given[:2])
    history.add_messages(given[2:])
    assert shape(history.messages) == shape(given)
    assert [e["kind"] for e in store.conversation("chat1").log()] == [
        "note", "user", "assistant", "tool_call", "tool_result", "assistant",
    ]
    history.clear()
    assert history.messages == []
    history.clear()


def test_async_variants_and_a_refused_orphan(store: ctxlog.Store) -> None:
    history = CtxlogChatMessageHistory("chat1", store=store)

    async def scenario() -> None:
        await history.aadd_messages(turn(1))
        assert shape(await history.aget_messages()) == shape(turn(1))
        with pytest.raises(ValueError, match="answers no tool call"):
            await history.aadd_messages([ToolMessage(content="x", tool_call_id="nope")])
        assert len(await history.aget_messages()) == 4
        await history.aclear()
        assert await history.aget_messages() == []

    asyncio.run(scenario())


def test_runnable_with_message_history(root: Path) -> None:
    model = GenericFakeChatModel(messages=iter(["Noted: ZX-81.", "Your code is ZX-81."]))
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You remember codes."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: CtxlogChatMessageHistory(session_id, store=str(root)),
        input_messages_key="question",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": "user-42"}}
    chain.invoke({"question": "My code is ZX-81."}, config=config)
    reply = chain.invoke({"question": "What is my code?"}, config=config)
    assert reply.content == "Your code is ZX-81."
    stored = CtxlogChatMessageHistory("user-42", store=str(root)).messages
    assert [m.content for m in stored] == [
        "My code is ZX-81.", "Noted: ZX-81.", "What is my code?", "Your code is ZX-81.",
    ]


def counter(store: ctxlog.Store) -> Any:
    def count(messages: List[BaseMessage]) -> int:
        body = {"model": "gpt-4o", "messages": convert_to_openai_messages(messages)}
        return int(store.count(json.dumps(body), format="openai-chat")["tokens"])

    return count


def whole_turns(messages: Sequence[BaseMessage]) -> int:
    """Turns kept whole: from a HumanMessage, every call answered within the turn."""
    turns = 0
    i = 0
    while i < len(messages):
        if not isinstance(messages[i], HumanMessage):
            i += 1
            continue
        j = i + 1
        while j < len(messages) and not isinstance(messages[j], HumanMessage):
            j += 1
        calls = {c["id"] for m in messages[i:j] for c in getattr(m, "tool_calls", [])}
        answered = {m.tool_call_id for m in messages[i:j] if isinstance(m, ToolMessage)}
        turns += calls == answered
        i = j
    return turns


def orphans(messages: Sequence[BaseMessage]) -> int:
    seen: set[str] = set()
    lost = 0
    for m in messages:
        seen |= {c["id"] for c in getattr(m, "tool_calls", [])}
        lost += isinstance(m, ToolMessage) and m.tool_call_id not in seen
    return lost


def test_fit_keeps_whole_turns_where_trim_messages_orphans_tool_messages(
    store: ctxlog.Store,
) -> None:
    history: List[BaseMessage] = [SystemMessage(content="You run builds.")]
    for i in range(8):
        history += turn(i, output=f"step {i} log: " + "compiled ok " * 60)
    messages = history + [HumanMessage(content="what failed?")]
    count = counter(store)
    trim_orphaned = 0
    for budget in range(300, count(messages) + 200, 97):
        trimmed = trim_messages(
            messages, max_tokens=budget, token_counter=count, strategy="last", include_system=True
        )
        fitted = fit_messages(messages, max_tokens=budget)
        assert orphans(fitted) == 0, budget
        assert fitted[0] is messages[0] and fitted[-1] is messages[-1]
        assert whole_turns(fitted) >= whole_turns(trimmed[:-1]), budget
        trim_orphaned += orphans(trimmed) > 0
    assert trim_orphaned > 0
    assert fit_messages(messages, max_tokens=count(messages) + 500) == messages


def test_an_agent_middleware_stores_each_step_and_fits_the_model_call(root: Path) -> None:
    pytest.importorskip("langchain.agents")
    from langchain.agents import create_agent

    from ctxlog.langchain import budget_middleware

    seen: List[List[BaseMessage]] = []

    class Recording(GenericFakeChatModel):
        def _generate(self, messages: List[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            seen.append(list(messages))
            return super()._generate(messages, *args, **kwargs)

    replies = [f"reply {i}: " + "details " * 80 for i in range(6)]
    model = Recording(messages=iter(replies))
    budget = 350
    agent = create_agent(
        model,
        tools=[],
        system_prompt="Be terse.",
        middleware=[budget_middleware("user-42", store=str(root), max_tokens=budget)],
    )
    messages: List[BaseMessage] = []
    for i in range(6):
        state: Any = {"messages": messages + [HumanMessage(f"question {i}")]}
        messages = agent.invoke(state)["messages"]
    stored = CtxlogChatMessageHistory("user-42", store=str(root)).messages
    assert shape(stored) == shape(messages)
    count = counter(CtxlogChatMessageHistory("user-42", store=str(root)).store)
    for call in seen:
        assert count(call) <= budget
        assert call[0].content == "Be terse." and str(call[-1].content).startswith("question")
    # The last calls left the oldest turns out; the agent's state kept them all.
    assert len(seen[-1]) < len(messages)
    assert "question 0" not in [m.content for m in seen[-1]]
