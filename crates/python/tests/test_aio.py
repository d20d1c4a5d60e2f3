"""ctxlog.aio: the same operations as coroutines, each run in a worker thread so the event
loop keeps running while the native call works (it releases the GIL)."""

import asyncio
import json

import ctxlog
from ctxlog.aio import AsyncStore


def test_async_calls_give_what_the_blocking_ones_give(store: ctxlog.Store) -> None:
    async def scenario() -> None:
        chat = AsyncStore(store).conversation("chat1")
        receipt = await chat.commit(user="My code is ZX-81.", assistant="Noted.")
        assert receipt["first_seq"] == 1
        await chat.commit(events=[{"kind": "user", "text": "and one more"}])
        await chat.commit(events=[{"kind": "assistant", "text": "a reply to take back"}])
        erased = await chat.retract()
        assert erased["erased"] == {"from": 4, "to": 4}
        body, report = await chat.project(input="What is my code?", max_tokens=2000)
        assert (body, report) == store.conversation("chat1").project(
            input="What is my code?", max_tokens=2000
        )
        assert "ZX-81" in json.dumps((await chat.recall("ZX-81"))["hits"])
        assert [e["kind"] for e in await chat.log()] == ["user", "assistant", "user", "system"]
        assert (await chat.verify())["verdict"] == "ok"
        assert b"take back" not in await chat.export()

    asyncio.run(scenario())


def test_the_loop_runs_while_a_call_is_in_flight(store: ctxlog.Store) -> None:
    chat = AsyncStore(store).conversation("chat1")

    async def scenario() -> int:
        call = asyncio.create_task(chat.commit(user="q", assistant="a"))
        turns_while_in_flight = 0
        await asyncio.sleep(0)
        while not call.done():
            # A blocking call would have finished inside the task's first step.
            turns_while_in_flight += 1
            await asyncio.sleep(0)
        await call
        return turns_while_in_flight

    assert asyncio.run(scenario()) >= 1
