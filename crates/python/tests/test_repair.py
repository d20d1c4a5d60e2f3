"""Damage without hand surgery from Python (docs/design.md#l11-repair): a damaged
conversation reads `Corrupt` naming the way on, `repair()` plans without writing,
`repair(accept_loss=True)` keeps every intact record and covers the lost seqs with a loss
record, and replaying the id of the lost commit raises `Lost`, never new seqs."""

from pathlib import Path

import pytest

import ctxlog


def files(root: Path) -> "list[tuple[Path, bytes]]":
    return sorted((p, p.read_bytes()) for p in root.rglob("*") if p.is_file())


def test_repair_keeps_the_intact_records_and_a_lost_id_answers_lost(root: Path) -> None:
    with ctxlog.Store(root) as store:
        chat = store.conversation("chat")
        for i in (1, 2, 3):
            chat.commit(user=f"question {i}", assistant=f"answer {i}", id=f"t{i}")
    log = root / "chat" / "ledger.log"
    data = bytearray(log.read_bytes())
    at = data.index(b"question 2")
    data[at] ^= 0x20
    log.write_bytes(bytes(data))

    with ctxlog.Store(root) as store:
        chat = store.conversation("chat")
        with pytest.raises(ctxlog.Corrupt, match="repair"):
            chat.log()
        before = files(root)
        plan = chat.repair()
        assert files(root) == before, "a dry run writes nothing"
        assert plan["applied"] is False and plan["needed"] is True
        assert plan["lost"] == [
            {"from": 3, "to": 3, "offset": plan["lost"][0]["offset"],
             "reason": "record checksum mismatch"}
        ]

        done = chat.repair(accept_loss=True)
        assert done["applied"] is True and done["lost_seqs"] == 1
        events = chat.log()
        assert [e["seq"] for e in events] == [1, 2, 3, 4, 5, 6]
        assert events[2]["marker"]["type"] == "loss"
        assert [e.get("text") for e in events if e["kind"] in ("user", "assistant")] == [
            "question 1", "answer 1", "answer 2", "question 3", "answer 3",
        ]
        assert chat.verify()["lost"] == 1
        with pytest.raises(ctxlog.Lost):
            chat.commit(user="question 2", assistant="answer 2", id="t2")
        assert chat.commit(user="question 1", assistant="answer 1", id="t1")["replayed"]
        assert chat.commit(user="question 4", assistant="answer 4")["first_seq"] == 7
