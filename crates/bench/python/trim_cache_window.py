"""LangChain `trim_messages` replayed call by call on the LoCoMo conversations, as
`cache_window` replays ctxlog: one call per message of the first speaker (the history before
it, the message as the input), a system prompt, token budgets 8,000 and 32,000 less the
1,000 reserved for output, o200k and OpenAI's per-message rule.

Run by `scripts/bench-cache-window` (which makes the virtual environment). Prints one JSON
line per call: the conversation, the budget, the call's message index and how many history
messages `trim_messages` kept (the newest ones). `cache_window --langchain FILE` builds each
body from those messages and measures it as it measures its own. The o200k BPE file is read
from a local directory (`--bpe-dir`, see `local_tiktoken.py`).
"""

import argparse
import json

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, trim_messages

import locomo
from local_tiktoken import encoding

SYSTEM = "You are a helpful assistant. Answer from the conversation."
RESERVED = 1000
ROLE = {"human": "user", "ai": "assistant", "system": "system"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--locomo", required=True)
    ap.add_argument("--bpe-dir", required=True)
    args = ap.parse_args()
    enc = encoding("o200k_base", args.bpe_dir)
    sizes = {}

    def size(m):
        key = (m.type, m.content)
        if key not in sizes:
            sizes[key] = 3 + len(enc.encode_ordinary(ROLE[m.type])) + len(
                enc.encode_ordinary(m.content)
            )
        return sizes[key]

    def counter(messages):
        # OpenAI's cookbook rule: 3 per message + role + content; 3 to prime the reply.
        return 3 + sum(size(m) for m in messages)

    for sample in json.load(open(args.locomo)):
        first = sample["conversation"]["speaker_a"]
        turns = locomo.turns(sample)
        history = [
            HumanMessage(text) if speaker == first else AIMessage(text) for speaker, text in turns
        ]
        for budget in (8000, 32000):
            for t, (speaker, text) in enumerate(turns):
                if t == 0 or speaker != first:
                    continue
                messages = [SystemMessage(SYSTEM), *history[:t], HumanMessage(text)]
                kept = trim_messages(
                    messages,
                    max_tokens=budget - RESERVED,
                    token_counter=counter,
                    strategy="last",
                    include_system=True,
                    start_on="human",
                    allow_partial=False,
                )
                print(json.dumps({
                    "conversation": sample["sample_id"],
                    "budget": budget,
                    "call": t,
                    "kept_messages": len(kept) - 2,
                }))


if __name__ == "__main__":
    main()
