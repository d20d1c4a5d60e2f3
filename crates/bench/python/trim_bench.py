"""LangChain `trim_messages` on the LoCoMo conversations, o200k, OpenAI's per-message rule.

Run by `scripts/bench-langchain` (which makes the virtual environment). Prints one JSON line
per (conversation, budget): kept messages, median ms per call. The o200k BPE file is read
from a local directory (`--bpe-dir`, see `local_tiktoken.py`): `tiktoken` would otherwise
download it.
"""

import argparse
import json
import resource
import statistics
import time

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, trim_messages

import locomo
from local_tiktoken import encoding

SYSTEM = "You are a helpful assistant."
INPUT = "What do you remember about our earlier conversations?"
ROLE = {"human": "user", "ai": "assistant", "system": "system"}


def locomo_messages(sample):
    a = sample["conversation"]["speaker_a"]
    return [
        HumanMessage(text) if speaker == a else AIMessage(text)
        for speaker, text in locomo.turns(sample)
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--locomo", required=True)
    ap.add_argument("--bpe-dir", required=True)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    enc = encoding("o200k_base", args.bpe_dir)

    def counter(messages):
        # OpenAI's cookbook rule: 3 per message + role + content; 3 to prime the reply.
        n = 3
        for m in messages:
            n += 3 + len(enc.encode_ordinary(ROLE[m.type])) + len(enc.encode_ordinary(m.content))
        return n

    samples = json.load(open(args.locomo))
    for sample in samples:
        history = locomo_messages(sample)
        messages = [SystemMessage(SYSTEM), *history, HumanMessage(INPUT)]
        for budget in (2000, 8000):
            times = []
            kept = None
            for _ in range(args.reps):
                t = time.perf_counter()
                kept = trim_messages(
                    messages,
                    max_tokens=budget,
                    token_counter=counter,
                    strategy="last",
                    include_system=True,
                    start_on="human",
                    allow_partial=False,
                )
                times.append(time.perf_counter() - t)
            print(json.dumps({
                "conversation": sample["sample_id"],
                "budget": budget,
                "history_messages": len(history),
                "kept_messages": len(kept) - 2,
                "tokens": counter(kept),
                "median_ms": statistics.median(times) * 1e3,
                # Linux reports ru_maxrss in KiB: this process's peak so far.
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }))


if __name__ == "__main__":
    main()
