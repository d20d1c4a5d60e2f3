"""The motivating scenario (docs/design.md#1-the-problem): a narrow request lacks the project
code stated in the first turn; after a reply is committed and the store closed and reopened, a
wider request has it again; an impossible budget raises with every ledger byte unchanged."""

from pathlib import Path

import pytest

import ctxlog
from conftest import ledger_files

QUESTION = "What is my project code?"


def test_narrow_then_widened_then_impossible(root: Path) -> None:
    with ctxlog.Store(root) as store:
        chat = store.conversation("support-42")
        chat.commit(user="My project code is ZX-81, remember it.", assistant="Noted: ZX-81.")
        chat.commit(user="What's the weather like?", assistant="Sunny, 21 °C, light wind.")
        narrow, report = chat.project(input=QUESTION, max_bytes=250)
        assert b"ZX-81" not in narrow
        assert report["turns"]["kept"] == 1
        chat.commit(user=QUESTION, assistant="I cannot see it in this request.")

    with ctxlog.Store(root) as store:
        chat = store.conversation("support-42")
        wide, report = chat.project(input=QUESTION, max_bytes=4096)
        assert b"ZX-81" in wide
        assert report["turns"]["kept"] == 3

        before = ledger_files(root)
        with pytest.raises(ctxlog.MandatoryExceedsBudget) as raised:
            chat.project(input=QUESTION, max_bytes=20)
        assert raised.value.needed_bytes > 20
        assert raised.value.needed_tokens > 0
        assert raised.value.error_class == "over_budget"
        assert isinstance(raised.value, ctxlog.Error)
        assert ledger_files(root) == before
