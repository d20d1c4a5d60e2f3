"""Python `tiktoken` counting every LoCoMo turn, for the `token_count` bin to compare.

Run by `scripts/bench-tiktoken`. Turns are read as `token_count` reads them (every
`session_<n>` in order, a photo's caption appended to its text). For o200k and cl100k prints
one JSON object: tiktoken's version and, per tokenizer, the time the encoding took to build
(from the local BPE file), each turn's count (`encode_ordinary`, one thread) and the best of
5 passes over all turns, and the process's peak RSS once it is done.
"""

import argparse
import json
import resource
import time

import tiktoken

import locomo
from local_tiktoken import encoding


def locomo_texts(path):
    return [text for sample in json.load(open(path)) for _, text in locomo.turns(sample)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--locomo", required=True)
    ap.add_argument("--bpe-dir", required=True)
    ap.add_argument("--passes", type=int, default=5)
    args = ap.parse_args()
    texts = locomo_texts(args.locomo)
    out = {"tiktoken": tiktoken.__version__, "turns": len(texts), "tokenizers": {}}
    for short, name in (("o200k", "o200k_base"), ("cl100k", "cl100k_base")):
        t = time.perf_counter()
        enc = encoding(name, args.bpe_dir)
        enc.encode_ordinary("hello")
        build = time.perf_counter() - t
        counts = [len(enc.encode_ordinary(x)) for x in texts]
        best = None
        for _ in range(args.passes):
            t = time.perf_counter()
            total = sum(len(enc.encode_ordinary(x)) for x in texts)
            took = time.perf_counter() - t
            best = took if best is None else min(best, took)
        out["tokenizers"][short] = {
            "build_ms": build * 1e3,
            "counts": counts,
            "total": total,
            "best_ms": best * 1e3,
            # This process's peak so far (Linux: KiB): o200k's alone, then both encodings.
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
