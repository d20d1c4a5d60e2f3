"""OpenAI's encodings for Python `tiktoken`, built from local BPE files (no download).

`tiktoken.get_encoding` downloads the BPE file on first use, which fails without network.
This builds the same encoding (tiktoken's own constructor: its pattern, its special tokens)
with the BPE file read from `bpe_dir` (the `assets/` of the `tiktoken-rs` crate source,
found by `scripts/bench-python-env`).
"""

import os

import tiktoken
import tiktoken_ext.openai_public as openai_public


def encoding(name, bpe_dir):
    """The encoding `name` (`o200k_base`, `cl100k_base`), its BPE read from `bpe_dir`."""
    path = os.path.join(bpe_dir, f"{name}.tiktoken")
    real = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *_args, **_kwargs: real(path)
    try:
        params = openai_public.ENCODING_CONSTRUCTORS[name]()
    finally:
        openai_public.load_tiktoken_bpe = real
    return tiktoken.Encoding(**params)
